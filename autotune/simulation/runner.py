"""One simulated tuning run: a strategy's ask/tell loop answered by a recorded space.

The loop is the session's loop without the GPU, the database or the display: ask a
generation, answer each config from the oracle, tell the results.  It is kept lean because
benchmarking a strategy takes thousands of runs (see `autotune simulate`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from autotune.simulation.oracle import NOT_RECORDED, RecordedSpace
from autotune.strategies import get_strategy


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
    if cls.needs_configs:
        raise NotSimulable(f"strategy {name!r} only asks the configs it is given: there is no search to simulate")
    if name == "grid":
        return cls(recorded.space, seed=seed, budget=budget, sample=True, **options)
    return cls(recorded.space, seed=seed, **options)


def simulate(name: str, recorded: RecordedSpace, *, budget: int, seed: int, generation_size: int | None = None,
             options: Mapping[str, Any] | None = None) -> Trace:
    """Run strategy `name` once: at most `budget` evaluations, every answer from `recorded`'s oracle."""
    if budget <= 0:
        raise ValueError(f"budget must be positive, got {budget}")
    strategy = make_strategy(name, recorded, seed, budget, options or {})
    size = generation_size or strategy.generation_size
    trace = Trace(strategy=name, seed=seed)
    lookup = recorded.lookup()  # the oracle's answers, found without JSON: this loop runs millions of times
    times, costs = trace.times_ms, trace.costs_s
    ask, tell = strategy.ask, strategy.tell
    inf = math.inf
    while len(times) < budget:
        left = budget - len(times)
        batch = ask(min(size, left))
        if not batch:
            trace.stopped = "strategy finished"
            break
        observations = []
        for params in batch[:left]:
            answer = lookup(params)
            if answer is None:
                trace.not_recorded += 1
                times.append(inf)
                costs.append(0.0)
                observations.append((params, NOT_RECORDED))
            else:
                times.append(answer[0])
                costs.append(answer[1])
                observations.append((params, answer[2]))
        tell(observations)
    else:
        trace.stopped = "budget"
    return trace
