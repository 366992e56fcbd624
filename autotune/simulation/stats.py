"""Summaries of many simulated runs of one strategy on one recorded space.

Per threshold (within 1%, 2%, 5% of the best recorded time): the evaluations and the
simulated GPU seconds a run needed to get there, as median and inter-quartile range over
the runs that got there, and the fraction of runs that did within the budget.  Plus the
final regret (best found / optimum - 1) and the optimum / best-found ratio at any budget.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from autotune.simulation.runner import Trace

THRESHOLDS = (0.01, 0.02, 0.05)


@dataclass(frozen=True)
class Spread:
    """Median and inter-quartile range of a sample (all NaN when the sample is empty)."""

    median: float
    q1: float
    q3: float
    count: int

    @classmethod
    def of(cls, values: Sequence[float]) -> "Spread":
        if not values:
            return cls(math.nan, math.nan, math.nan, 0)
        q1, median, q3 = np.percentile(np.asarray(values, dtype=float), [25, 50, 75])
        return cls(float(median), float(q1), float(q3), len(values))

    def text(self, digits: int = 0) -> str:
        if self.count == 0:
            return "-"
        return f"{self.median:.{digits}f} [{self.q1:.{digits}f}-{self.q3:.{digits}f}]"


@dataclass(frozen=True)
class Reach:
    threshold: float
    fraction: float  # of runs that came within the threshold inside the budget
    evaluations: Spread
    seconds: Spread


@dataclass(frozen=True)
class StrategySummary:
    strategy: str
    runs: int
    budget: int
    reaches: tuple[Reach, ...]
    final_regret: Spread  # best found / optimum - 1, at the end of the run
    optimum_ratio: Spread  # optimum / best found (1 = found the optimum)
    evaluations: Spread  # evaluations actually made (a strategy may stop early)
    not_recorded: int  # answers 'not recorded' over all runs
    rate: float = math.nan  # simulated evaluations per wall second
    notes: list[str] = field(default_factory=list)


def reach(trace: Trace, optimum_ms: float, threshold: float) -> tuple[int, float] | None:
    """(evaluations, simulated seconds) until the best so far was within `threshold`, or None."""
    target = optimum_ms * (1.0 + threshold)
    elapsed = 0.0
    for count, (ms, cost) in enumerate(zip(trace.times_ms, trace.costs_s), start=1):
        elapsed += cost
        if ms <= target:
            return count, elapsed
    return None


def best_within(trace: Trace, budget: int) -> float:
    """The best time found in the first `budget` evaluations (inf if none succeeded)."""
    return min(trace.times_ms[:budget], default=math.inf)


def summarise(strategy: str, traces: Sequence[Trace], optimum_ms: float, budget: int,
              thresholds: Sequence[float] = THRESHOLDS, rate: float = math.nan) -> StrategySummary:
    reaches = []
    for threshold in thresholds:
        hits = [r for r in (reach(t, optimum_ms, threshold) for t in traces) if r is not None]
        reaches.append(Reach(threshold, len(hits) / len(traces) if traces else math.nan,
                             Spread.of([h[0] for h in hits]), Spread.of([h[1] for h in hits])))
    finals = [best_within(t, budget) for t in traces]
    return StrategySummary(
        strategy=strategy, runs=len(traces), budget=budget, reaches=tuple(reaches),
        final_regret=Spread.of([f / optimum_ms - 1.0 if math.isfinite(f) else math.inf for f in finals]),
        optimum_ratio=Spread.of([optimum_ms / f if math.isfinite(f) and f > 0 else 0.0 for f in finals]),
        evaluations=Spread.of([t.evaluations for t in traces]),
        not_recorded=sum(t.not_recorded for t in traces), rate=rate,
    )


def convergence_band(traces: Sequence[Trace], optimum_ms: float, grid_s: np.ndarray) -> np.ndarray:
    """Best-so-far / optimum at each simulated second of `grid_s`: rows = q1, median, q3.

    A run that has found nothing valid yet (or not started) counts as infinitely slow, not as
    missing: otherwise the early quantiles are taken over the lucky runs only, and the median
    curve rises when the unlucky ones join.  A quantile that is still infinite is NaN (not drawn).
    """
    curves = np.full((len(traces), len(grid_s)), np.inf)
    for row, trace in enumerate(traces):
        if not trace.times_ms:
            continue
        elapsed = np.cumsum(trace.costs_s)
        best = np.minimum.accumulate(np.asarray(trace.times_ms, dtype=float)) / optimum_ms
        index = np.searchsorted(elapsed, grid_s, side="right") - 1
        valid = index >= 0
        curves[row, valid] = best[index[valid]]
    # numpy interpolates a quantile as a + (b - a) * t even where t = 0, so an infinite neighbour
    # spoils it: stand in a huge finite value, and call any quantile it touched "nothing yet".
    quantiles = np.percentile(np.where(np.isfinite(curves), curves, _NOTHING_YET), [25, 50, 75], axis=0)
    return np.where(quantiles < _TOUCHED, quantiles, np.nan)


_NOTHING_YET = 1e300
_TOUCHED = 1e200  # any interpolation weight on _NOTHING_YET lifts a quantile far above this


def median_of(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan
