"""One simulated tuning run: a strategy's ask/tell loop answered by a recorded space.

The loop is the session's loop without the GPU, the database or the display: ask a
generation, answer each config from the oracle, tell the results.  It is kept lean because
benchmarking a strategy takes thousands of runs (see `autotune simulate`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from autotune.simulation.oracle import RecordedSpace
from autotune.strategies import get_strategy
from autotune.types import Result, Source, Status


class NotSimulable(ValueError):
    """The strategy cannot run against a recorded space (it needs the live kernel)."""


@dataclass
class Trace:
    """What one run saw, evaluation by evaluation."""

    strategy: str
    seed: int
    times_ms: list[float] = field(default_factory=list)  # inf for failures and unrecorded configs
    costs_s: list[float] = field(default_factory=list)
    not_recorded: int = 0
    stopped: str = ""

    @property
    def evaluations(self) -> int:
        return len(self.times_ms)

    def best_so_far(self) -> list[float]:
        best, curve = math.inf, []
        for ms in self.times_ms:
            best = min(best, ms)
            curve.append(best)
        return curve

    def elapsed_s(self) -> list[float]:
        total, curve = 0.0, []
        for cost in self.costs_s:
            total += cost
            curve.append(total)
        return curve


def make_strategy(name: str, recorded: RecordedSpace, seed: int, budget: int, options: Mapping[str, Any]) -> Any:
    cls = get_strategy(name)
    if cls.needs_bound_kernel:
        raise NotSimulable(f"strategy {name!r} drives the live kernel's own search and cannot run on recorded data")
    if name == "grid":
        return cls(recorded.space, seed=seed, budget=budget, sample=True, **options)
    return cls(recorded.space, seed=seed, **options)


def simulate(name: str, recorded: RecordedSpace, *, budget: int, seed: int, generation_size: int | None = None,
             options: Mapping[str, Any] | None = None) -> Trace:
    """Run strategy `name` once: at most `budget` evaluations, every answer from `recorded`."""
    if budget <= 0:
        raise ValueError(f"budget must be positive, got {budget}")
    strategy = make_strategy(name, recorded, seed, budget, options or {})
    size = generation_size or strategy.generation_size
    trace = Trace(strategy=name, seed=seed)
    answer = recorded.answer
    while trace.evaluations < budget:
        batch = strategy.ask(min(size, budget - trace.evaluations))
        if not batch:
            trace.stopped = "strategy finished"
            break
        observations = []
        for params in batch[: budget - trace.evaluations]:
            outcome = answer(params)
            if outcome is None:
                trace.not_recorded += 1
                result = Result(key="", status=Status.NOT_RECORDED, source=Source.REPLAYED)
                trace.times_ms.append(math.inf)
                trace.costs_s.append(0.0)
            else:
                ok = outcome.status is Status.OK
                result = Result(key="", status=outcome.status, median_ms=outcome.time_ms if ok else None,
                                source=Source.REPLAYED)
                trace.times_ms.append(outcome.time_ms)
                trace.costs_s.append(outcome.cost_s)
            observations.append((params, result))
        strategy.tell(observations)
    else:
        trace.stopped = "budget"
    return trace
