"""How noisy are the recorded timings of one space, and which differences are real?

Pure analysis over the measurements of one space (`Cache.measurements`, search-time and
final re-benchmark rows); nothing here prints or touches the database.  Four views:

1. within one measurement: how wide are the per-repetition samples around their median;
2. between measurements: how far apart are the medians of a config measured more than once;
3. rank stability of the top configs: a seeded bootstrap over the raw samples says how often
   each top config stays in the top k and which pairwise orders are resolved;
4. a verdict: the relative difference below which timings on this space are noise.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from autotune.types import Result

SEARCH, REBENCH = "search", "rebench"
MIN_REPEATED_CONFIGS = 3  # fewer repeated configs than this and the verdict falls back on the bootstrap
MAX_POOL = 500  # configs ranked in the bootstrap: the fastest ones (the slow tail cannot reach the top)


@dataclass(frozen=True)
class Measurement:
    """One timed evaluation of a config: its median and, when recorded, its raw samples."""

    key: str
    kind: str  # SEARCH or REBENCH
    median_ms: float
    min_ms: float | None
    max_ms: float | None
    samples_ms: tuple[float, ...] = field(default=(), repr=False)


@dataclass(frozen=True)
class Spread:
    """Distribution of a relative quantity over configs or measurements."""

    count: int
    median: float | None
    p90: float | None
    max: float | None

    @classmethod
    def of(cls, values: Iterable[float]) -> "Spread":
        array = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
        if array.size == 0:
            return cls(0, None, None, None)
        return cls(int(array.size), float(np.median(array)), float(np.percentile(array, 90)), float(array.max()))


@dataclass(frozen=True)
class MeasurementSpread:
    key: str
    kind: str
    samples: int
    rel_iqr: float | None  # (q75 - q25) / median of the samples
    rel_range: float | None  # (max - min) / median


@dataclass(frozen=True)
class WithinSpread:
    measurements: list[MeasurementSpread]
    rel_iqr: Spread
    rel_range: Spread


@dataclass(frozen=True)
class Repeat:
    """A config measured more than once: its medians in recording order."""

    key: str
    kinds: list[str]
    medians_ms: list[float]
    cv: float  # sample standard deviation / mean of the medians
    rel_range: float  # (max - min) / mean of the medians; |a - b| / mean for two


@dataclass(frozen=True)
class Repeatability:
    repeats: list[Repeat]
    cv: Spread
    rel_range: Spread
    rebench_shift: Spread  # signed: mean re-benchmark median / mean search median - 1, per config
    rebench_shift_p10: float | None


@dataclass(frozen=True)
class RankedConfig:
    key: str
    rank: int  # by best median, 1 = fastest
    best_ms: float
    delta: float  # relative to the fastest config
    measurements: int
    samples: int
    p_top: float  # fraction of resamples with this config in the top k
    p_first: float
    rank_low: float  # 2.5% / 97.5% quantiles of its resampled rank
    rank_high: float
    ci_low_ms: float  # 2.5% / 97.5% quantiles of its resampled best median
    ci_high_ms: float
    resolved_from_next: bool | None  # its order against the next config holds in >= confidence of resamples


@dataclass(frozen=True)
class PairOrder:
    faster: str
    slower: str
    rel_diff: float  # (slower - faster) / faster, point medians
    agreement: float  # fraction of resamples with the same order (ties count half)
    resolved: bool


@dataclass(frozen=True)
class RankStability:
    top: list[RankedConfig]
    pairs: list[PairOrder]
    k: int
    pool: int  # configs ranked in each resample
    resamples: int
    seed: int
    confidence: float
    smallest_resolved: float | None  # smallest relative difference among resolved top-k pairs
    largest_unresolved: float | None  # largest relative difference among unresolved top-k pairs
    median_ci_rel: Spread  # width of a measurement's 95% bootstrap interval of the median / median


@dataclass(frozen=True)
class Verdict:
    threshold: float | None  # relative difference (0.01 = 1%) below which differences are noise
    basis: str
    text: str


@dataclass(frozen=True)
class NoiseReport:
    configs: int
    measurements: int
    within: WithinSpread
    repeatability: Repeatability
    ranks: RankStability
    verdict: Verdict

    def to_dict(self) -> dict[str, Any]:
        """Every number, JSON-ready (non-finite values become null)."""
        return _finite(asdict(self))


# -- gathering -------------------------------------------------------------------------------
def collect(search: Mapping[str, Sequence[Result]], rebench: Mapping[str, Sequence[Result]] | None = None
            ) -> dict[str, list[Measurement]]:
    """Successful measurements grouped by config key (search rows first, then re-benchmarks)."""
    grouped: dict[str, list[Measurement]] = {}
    for kind, source in ((SEARCH, search), (REBENCH, rebench or {})):
        for key, results in source.items():
            for result in results:
                if not result.ok or not result.median_ms or result.median_ms <= 0:
                    continue
                samples = tuple(float(s) for s in result.samples_ms if math.isfinite(s))
                grouped.setdefault(key, []).append(
                    Measurement(key, kind, float(result.median_ms), result.min_ms, result.max_ms, samples))
    return grouped


# -- 1. within one measurement ------------------------------------------------------------------
def within_spread(grouped: Mapping[str, Sequence[Measurement]]) -> WithinSpread:
    rows = []
    for key, measurements in grouped.items():
        for m in measurements:
            rel_iqr = None
            if len(m.samples_ms) >= 2:
                q25, q75 = np.percentile(np.asarray(m.samples_ms), [25, 75])
                rel_iqr = float((q75 - q25) / m.median_ms)
            low = m.min_ms if m.min_ms is not None else (min(m.samples_ms) if m.samples_ms else None)
            high = m.max_ms if m.max_ms is not None else (max(m.samples_ms) if m.samples_ms else None)
            rel_range = float((high - low) / m.median_ms) if low is not None and high is not None else None
            rows.append(MeasurementSpread(key, m.kind, len(m.samples_ms), rel_iqr, rel_range))
    return WithinSpread(rows, Spread.of(r.rel_iqr for r in rows), Spread.of(r.rel_range for r in rows))


# -- 2. between measurements ---------------------------------------------------------------------
def repeatability(grouped: Mapping[str, Sequence[Measurement]]) -> Repeatability:
    repeats, shifts = [], []
    for key, measurements in grouped.items():
        if len(measurements) < 2:
            continue
        medians = np.asarray([m.median_ms for m in measurements])
        mean = float(medians.mean())
        repeats.append(Repeat(key, [m.kind for m in measurements], medians.tolist(),
                              cv=float(medians.std(ddof=1) / mean), rel_range=float(np.ptp(medians) / mean)))
        search = [m.median_ms for m in measurements if m.kind == SEARCH]
        final = [m.median_ms for m in measurements if m.kind == REBENCH]
        if search and final:
            shifts.append(float(np.mean(final) / np.mean(search) - 1.0))
    return Repeatability(repeats, Spread.of(r.cv for r in repeats), Spread.of(r.rel_range for r in repeats),
                         Spread.of(shifts), float(np.percentile(shifts, 10)) if shifts else None)


# -- 3. rank stability -------------------------------------------------------------------------------
def _bootstrap_medians(m: Measurement, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Resampled medians of one measurement; its recorded median when it kept no samples."""
    if len(m.samples_ms) < 2:
        return np.full(resamples, m.median_ms)
    samples = np.asarray(m.samples_ms)
    return np.median(samples[rng.integers(0, samples.size, size=(resamples, samples.size))], axis=1)


def _midranks(values: np.ndarray) -> np.ndarray:
    """Rank (1 = smallest) of every entry of each row; tied entries share their mean rank."""
    ordered = np.sort(values, axis=1)
    ranks = np.empty_like(values)
    for row in range(values.shape[0]):
        below = np.searchsorted(ordered[row], values[row], side="left")
        through = np.searchsorted(ordered[row], values[row], side="right")
        ranks[row] = (below + through + 1) / 2.0
    return ranks


def rank_stability(grouped: Mapping[str, Sequence[Measurement]], *, k: int = 10, resamples: int = 200,
                   seed: int = 0, confidence: float = 0.95, max_pool: int = MAX_POOL) -> RankStability:
    """Bootstrap the best median of every config (resample each measurement's samples,
    take each config's fastest median) and see how the top-k order holds up."""
    best = {key: min(m.median_ms for m in ms) for key, ms in grouped.items() if ms}
    order = sorted(best, key=lambda key: (best[key], key))[:max_pool]
    rng = np.random.default_rng(seed)
    values = np.empty((resamples, len(order)))
    ci_widths = []
    for column, key in enumerate(order):
        per_measurement = [_bootstrap_medians(m, resamples, rng) for m in grouped[key]]
        for m, medians in zip(grouped[key], per_measurement):
            if len(m.samples_ms) >= 2:
                low, high = np.percentile(medians, [2.5, 97.5])
                ci_widths.append(float((high - low) / m.median_ms))
        values[:, column] = np.min(per_measurement, axis=0)
    k_eff = min(k, len(order))
    ranks = _midranks(values) if order else values
    pairs, agreement = [], np.ones((k_eff, k_eff))
    for i in range(k_eff):
        for j in range(i + 1, k_eff):
            a, b = values[:, i], values[:, j]
            agree = float(np.mean(a < b) + 0.5 * np.mean(a == b))
            agreement[i, j] = agree
            pairs.append(PairOrder(order[i], order[j], best[order[j]] / best[order[i]] - 1.0, agree,
                                   agree >= confidence))
    top = []
    fastest = best[order[0]] if order else math.nan
    for i in range(k_eff):
        key = order[i]
        rank_low, rank_high = np.percentile(ranks[:, i], [2.5, 97.5], method="inverted_cdf")  # observed ranks
        ci_low, ci_high = np.percentile(values[:, i], [2.5, 97.5])
        top.append(RankedConfig(
            key=key, rank=i + 1, best_ms=best[key], delta=best[key] / fastest - 1.0,
            measurements=len(grouped[key]), samples=sum(len(m.samples_ms) for m in grouped[key]),
            p_top=float(np.mean(ranks[:, i] <= k_eff)), p_first=float(np.mean(ranks[:, i] <= 1.0)),
            rank_low=float(rank_low), rank_high=float(rank_high), ci_low_ms=float(ci_low), ci_high_ms=float(ci_high),
            resolved_from_next=bool(agreement[i, i + 1] >= confidence) if i + 1 < k_eff else None,
        ))
    resolved = [p.rel_diff for p in pairs if p.resolved]
    unresolved = [p.rel_diff for p in pairs if not p.resolved]
    return RankStability(top, pairs, k_eff, len(order), resamples, seed, confidence,
                         min(resolved) if resolved else None, max(unresolved) if unresolved else None,
                         Spread.of(ci_widths))


# -- 4. verdict ----------------------------------------------------------------------------------------
def verdict(repeats: Repeatability, ranks: RankStability) -> Verdict:
    """The noise threshold: p90 of the repeat differences where enough configs were measured
    again, else the p90 width of one measurement's bootstrap interval of its median."""
    if repeats.rel_range.count >= MIN_REPEATED_CONFIGS:
        threshold = repeats.rel_range.p90
        basis = (f"p90 of the relative difference between repeated measurements of "
                 f"{repeats.rel_range.count} configs")
    elif ranks.median_ci_rel.count:
        threshold = ranks.median_ci_rel.p90
        basis = (f"p90 width of the bootstrap 95% interval of a median over {ranks.median_ci_rel.count} "
                 f"measurements; fewer than {MIN_REPEATED_CONFIGS} configs were measured twice")
    else:
        return Verdict(None, "no repeated measurements and no raw samples",
                       "no verdict: no config was measured twice and no raw samples were recorded")
    text = f"differences under {percent(threshold)} are noise on this space ({basis})"
    if ranks.largest_unresolved is not None:
        text += f"; the bootstrap leaves top-{ranks.k} pairs up to {percent(ranks.largest_unresolved)} apart unresolved"
    elif ranks.pairs:
        text += f"; the bootstrap resolves every top-{ranks.k} pair"
    return Verdict(threshold, basis, text)


def analyse(search: Mapping[str, Sequence[Result]], rebench: Mapping[str, Sequence[Result]] | None = None, *,
            k: int = 10, resamples: int = 200, seed: int = 0, confidence: float = 0.95) -> NoiseReport:
    """All four views for the measurements of one space."""
    grouped = collect(search, rebench)
    if not grouped:
        raise ValueError("no successful measurements to analyse")
    repeats = repeatability(grouped)
    ranks = rank_stability(grouped, k=k, resamples=resamples, seed=seed, confidence=confidence)
    return NoiseReport(len(grouped), sum(len(ms) for ms in grouped.values()), within_spread(grouped), repeats,
                       ranks, verdict(repeats, ranks))


def percent(value: float | None) -> str:
    """0.00123 -> '0.12%': two significant digits for small values, enough to compare."""
    if value is None or not math.isfinite(value):
        return "-"
    pct = 100.0 * value
    return f"{pct:.2g}%" if abs(pct) < 1 else f"{pct:.1f}%"


def _finite(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_finite(v) for v in data]
    if isinstance(data, (float, np.floating)):
        return float(data) if math.isfinite(data) else None
    if isinstance(data, np.integer):
        return int(data)
    return data
