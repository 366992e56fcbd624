"""The evaluator protocol: candidates in, results out.

The GPU evaluator, the cache replayer and the test fakes all implement it, so a session
on a GPU and a replay on a CPU run through exactly the same loop.
"""

from __future__ import annotations

from typing import Iterator, Protocol, Sequence

from autotune.types import Candidate, Result


class Evaluator(Protocol):
    """Evaluates configs of one kernel specialised to one shape and dtype."""

    #: One line for the user: what answers the configs (a GPU, a database replay, a fake).
    description: str

    def evaluate(self, candidates: Sequence[Candidate]) -> Iterator[Result]:
        """Yield one result per candidate, as each completes (in any order).

        Never raises for one bad config: a failure is a result with a failed status.
        """
        ...

    def baselines(self) -> dict[str, Result]:
        """Library implementations timed the same way (e.g. torch.softmax), keyed by name."""
        ...

    def close(self) -> None:
        """Release processes and devices; safe to call twice."""
        ...


class AsyncEvaluator(Evaluator, Protocol):
    """An evaluator that takes configs while others are still out (the distributed one).

    The session keeps a window of configs in flight (autotune/async_search.py): it submits
    configs as the strategy proposes them and collects results as they come back, so a config
    that compiles for long never holds the others.  The local GPU evaluator implements them over
    its compile pool and benchmark process; it takes part where its `asynchronous` is true.
    """

    def slots(self) -> int:
        """How many configs it can work on at once (what keeps every worker busy)."""
        ...

    def submit(self, candidates: Sequence[Candidate]) -> None:
        """Start evaluating `candidates` (after those already submitted); returns at once."""
        ...

    def poll(self, timeout: float) -> list[Result]:
        """Results that came back since the last call, in the order they came; waits at most
        `timeout` seconds for the first one."""
        ...

    def cancel(self) -> None:
        """Drop every config still out (the session stopped); their results never come."""
        ...


def is_asynchronous(evaluator: object) -> bool:
    """Whether the session may keep configs in flight with this evaluator (one that has the
    methods may still say no: its `asynchronous` is False)."""
    if getattr(evaluator, "asynchronous", True) is False:
        return False
    return all(callable(getattr(evaluator, name, None)) for name in ("slots", "submit", "poll", "cancel"))


class InOrder:
    """Any evaluator behind the asynchronous interface, evaluating one config per poll in the
    order submitted: the reference an asynchronous session is compared with, and a way to run
    a synchronous evaluator through the asynchronous loop."""

    def __init__(self, evaluator: Evaluator, slots: int = 1) -> None:
        self.inner, self._slots = evaluator, slots
        self.description = evaluator.description
        self._waiting: list[Candidate] = []

    def slots(self) -> int:
        return self._slots

    def submit(self, candidates: Sequence[Candidate]) -> None:
        self._waiting.extend(candidates)

    def poll(self, timeout: float) -> list[Result]:
        if not self._waiting:
            return []
        return list(self.inner.evaluate([self._waiting.pop(0)]))

    def cancel(self) -> None:
        self._waiting.clear()

    def evaluate(self, candidates: Sequence[Candidate]) -> Iterator[Result]:
        return self.inner.evaluate(candidates)

    def baselines(self) -> dict[str, Result]:
        return self.inner.baselines()

    def close(self) -> None:
        self.inner.close()
