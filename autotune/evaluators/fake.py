"""A deterministic evaluator for tests and strategy development, with no GPU.

Times come from a cost function of the config; failures can be injected per config.
Optionally sleeps per evaluation, or stops as a killed run would (KeyboardInterrupt after a
number of results), so kill and resume paths can be exercised.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator, Mapping, Sequence

from autotune.types import Candidate, Result, Source, Status

CostFunction = Callable[[Mapping[str, Any]], "float | Status"]


class FakeEvaluator:
    """Evaluates `cost(params)`: a float is a median time in ms, a Status is a failure."""

    description = "fake evaluator (synthetic costs, no GPU)"

    def __init__(self, cost: CostFunction, *, delay_s: float = 0.0, compile_s: float = 0.01,
                 baselines: Mapping[str, float] | None = None, interrupt_after: int | None = None) -> None:
        self._cost = cost
        self._interrupt_after = interrupt_after  # results given before a KeyboardInterrupt, over all calls
        self._delay_s = delay_s
        self._compile_s = compile_s
        self._baselines = dict(baselines or {})
        self.calls: list[str] = []

    def evaluate(self, candidates: Sequence[Candidate]) -> Iterator[Result]:
        for candidate in candidates:
            if self._interrupt_after is not None and len(self.calls) >= self._interrupt_after:
                raise KeyboardInterrupt("cut short")
            if self._delay_s:
                time.sleep(self._delay_s)
            self.calls.append(candidate.key)
            outcome = self._cost(candidate.params)
            if isinstance(outcome, Status):
                yield Result(key=candidate.key, status=outcome, compile_s=self._compile_s,
                             error=f"injected {outcome.value}", source=Source.MEASURED)
            else:
                ms = float(outcome)
                yield Result(key=candidate.key, status=Status.OK, median_ms=ms, min_ms=ms * 0.99, max_ms=ms * 1.01,
                             repetitions=10, compile_s=self._compile_s, bench_s=ms * 10 / 1000, rel_error=0.0,
                             source=Source.MEASURED)

    def baselines(self) -> dict[str, Result]:
        return {name: Result(key=name, status=Status.OK, median_ms=ms, min_ms=ms, max_ms=ms, repetitions=10,
                             rel_error=0.0) for name, ms in self._baselines.items()}

    def close(self) -> None:
        pass
