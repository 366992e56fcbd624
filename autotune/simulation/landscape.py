"""How hard a recorded space is to search: what a strategy comparison should be read against.

A median of 0.95 of the optimum is easy where hundreds of configs are within a few percent of
it and out of reach where the optimum is a lone spike whose runner-up is 7% slower: there a
strategy must find the one config itself in most runs.  Uniform sampling without repeats is
the yardstick: the chance that `budget` distinct recorded configs include one within
`within` of the optimum is 1 - C(M - N, budget) / C(M, budget), for M recorded configs of
which N are that close.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autotune.simulation.oracle import RecordedSpace
from autotune.types import Status


@dataclass(frozen=True)
class Landscape:
    recorded: int  # configs with an answer (failures included: a sampler asks for them too)
    valid: int
    near_optimum: int  # valid configs within `within` of the optimum, the optimum included
    runner_up_ratio: float  # optimum / second-fastest time; 0.0 with fewer than two valid configs
    within: float

    def random_hit_chance(self, budget: int) -> float:
        """The chance that `budget` distinct configs drawn uniformly hit one near the optimum."""
        draws = min(max(budget, 0), self.recorded)
        if self.near_optimum == 0 or draws == 0:
            return 0.0
        missing = 1.0
        for i in range(draws):  # C(M - N, B) / C(M, B) as a product, without huge integers
            if self.recorded - self.near_optimum - i <= 0:
                return 1.0
            missing *= (self.recorded - self.near_optimum - i) / (self.recorded - i)
        return 1.0 - missing

    def describe(self, budget: int) -> str:
        runner_up = (f"the second fastest is {self.runner_up_ratio:.3f} of the optimum"
                     if self.runner_up_ratio else "no second valid config")
        return (f"{self.near_optimum} of {self.valid} valid configs ({self.recorded} recorded) within "
                f"{self.within:.0%} of the optimum; {runner_up}; {budget} distinct random configs hit one "
                f"with probability {self.random_hit_chance(budget):.1%}")


def landscape(recorded: RecordedSpace, within: float = 0.02) -> Landscape:
    times = sorted(o.time_ms for o in recorded.outcomes.values()
                   if o.status is Status.OK and math.isfinite(o.time_ms))
    if not times:
        return Landscape(len(recorded.outcomes), 0, 0, 0.0, within)
    near = sum(1 for t in times if t <= times[0] * (1 + within))
    runner_up = times[0] / times[1] if len(times) > 1 else 0.0
    return Landscape(len(recorded.outcomes), len(times), near, runner_up, within)
