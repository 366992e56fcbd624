"""How long a config may compile: the user's limit, tightened once the session has seen
enough compiles to know what is normal for this kernel.

Why: a generation waits for its slowest compile, so each config that runs into a 60 s limit
holds its whole generation for 60 s (on the H100, a random session of the Helion softmax with
generations of 16 spent 241 of its 256 s in the four generations that waited for one).  In the recorded spaces (six kernels, some
17,000 configs) no config that compiled in over 10x its space's median compile time came within
20% of the best, and the configs within 5% of the best compiled in under 5x the median.

The floor is what a hang costs where the median is short (compile caches make it so): 5 s.
No config within 5% of its session's best compiled for longer than 4 s in any recorded GPU
session (`python -m experiments.compile_floor`, report in experiments/reports/compile_floor.md).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from autotune.types import Result, Status

NOT_COMPILED = (Status.COMPILE_ERROR, Status.COMPILE_TIMEOUT)


@dataclass
class CompileDeadline:
    """`limit_s` until `warmup` configs have compiled, then `factor` times their median
    compile time, never under `floor_s` nor over `limit_s`; factor inf keeps `limit_s`."""

    limit_s: float
    factor: float = 10.0
    floor_s: float = 5.0
    warmup: int = 16
    _compiled_s: list[float] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if not self.limit_s > 0 or not self.factor > 0 or not self.floor_s > 0:
            raise ValueError(f"compile deadline needs positive limit, factor and floor, got {self!r}")

    def observe(self, result: Result) -> None:
        """Learn from a result: its compile time counts when the config compiled."""
        if result.compile_s is not None and result.status not in NOT_COMPILED and math.isfinite(result.compile_s):
            self._compiled_s.append(result.compile_s)

    def seconds(self) -> float:
        if math.isinf(self.factor) or len(self._compiled_s) < self.warmup:
            return self.limit_s
        return min(self.limit_s, max(self.floor_s, round(self.factor * statistics.median(self._compiled_s), 1)))

    def describe(self, seconds: float) -> str:
        """Why the deadline is what it is, for a timed-out config's error message."""
        if seconds >= self.limit_s:
            return ""
        median = statistics.median(self._compiled_s)
        return f" ({self.factor:g}x this session's median compile time of {median:.2f} s, at least {self.floor_s:g} s)"
