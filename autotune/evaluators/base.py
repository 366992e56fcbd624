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
