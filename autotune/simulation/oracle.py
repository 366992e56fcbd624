"""A recorded space as an oracle: what a strategy may ask, and what each answer costs.

Oracle semantics (what `autotune simulate` documents to its users):
- The simulated space is *finite*: its points are exactly the configs recorded for the
  space (valid and failed).  Random search samples them uniformly; grid lists them;
  pattern search moves only between recorded neighbours; model-based strategies see
  proposals outside the set rejected as invalid before anything is counted.
- A config that was recorded is answered with its recorded outcome: its time (the median
  of its recorded medians when it was measured more than once) or its failure status.
- A config that was not recorded (possible only for points a strategy was given from
  outside, e.g. seeds) is answered `not_recorded`, counted against the budget, costs no
  simulated time, and is told to the strategy as a failure.  Every run reports how often
  that happened, so no result silently depends on it.
- Each answer costs the recorded compile plus benchmark seconds of that config: the
  "simulated GPU seconds" a real run would have spent on it.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Mapping

from autotune.cache import params_from_text
from autotune.types import Status
from search_spaces.space import SearchSpace, canonical_json


@dataclass(frozen=True)
class Outcome:
    """The recorded answer for one config."""

    status: Status
    time_ms: float  # inf for failures
    cost_s: float  # recorded compile + benchmark seconds


def point_text(params: Mapping[str, Any]) -> str:
    """The lookup key of a point: canonical JSON (cheaper than hashing it, and exact)."""
    return canonical_json(dict(params))


@dataclass(frozen=True)
class RecordedSpace:
    """Every recorded config of one space with its outcome; `space` is finite over them."""

    label: str
    fingerprint: str
    device: str
    space: SearchSpace
    outcomes: Mapping[str, Outcome]

    @property
    def optimum_ms(self) -> float:
        return min((o.time_ms for o in self.outcomes.values()), default=math.inf)

    @property
    def valid_count(self) -> int:
        return sum(1 for o in self.outcomes.values() if o.status is Status.OK)

    def answer(self, params: Mapping[str, Any]) -> Outcome | None:
        return self.outcomes.get(point_text(params))

    @classmethod
    def from_cache(cls, cache: Any, fingerprint: str) -> "RecordedSpace":
        """Load a space's search-time measurements (re-benchmarks and replays are not oracles)."""
        record = cache.get_space(fingerprint)
        if record is None:
            raise KeyError(f"no space {fingerprint} in {cache.path}")
        grouped: dict[str, list[tuple[str, float | None, float]]] = {}
        points: dict[str, dict[str, Any]] = {}
        names = record.space.names
        for params_json, status, median_ms, compile_s, bench_s in cache.db.execute(
            "SELECT params_json, status, median_ms, compile_s, bench_s FROM all_evaluations"
            " WHERE space_fingerprint = ? AND source = 'measured' AND generation >= 0 ORDER BY id", (fingerprint,)
        ):
            params = params_from_text(params_json, names)
            if set(params) != set(names):
                continue  # a row of an older definition of the space: not a point of this one
            text = point_text({n: params[n] for n in names})
            points.setdefault(text, {n: params[n] for n in names})
            grouped.setdefault(text, []).append((status, median_ms, (compile_s or 0.0) + (bench_s or 0.0)))
        if not points:
            raise ValueError(f"space {fingerprint} has no measured configs to simulate on")
        outcomes = {text: _combine(rows) for text, rows in grouped.items()}
        label = f"{record.kernel} {'x'.join(map(str, record.shape)) or '-'} {record.dtype} on {record.device}"
        return cls(label=label, fingerprint=fingerprint, device=record.device,
                   space=record.space.restricted_to(points.values()), outcomes=outcomes)


def _combine(rows: list[tuple[str, float | None, float]]) -> Outcome:
    """Several measurements of one config: the median of its OK medians, else its last failure."""
    times = [ms for status, ms, _ in rows if status == Status.OK.value and ms is not None and math.isfinite(ms)]
    cost = statistics.fmean(c for _, _, c in rows)
    if times:
        return Outcome(Status.OK, statistics.median(times), cost)
    return Outcome(Status(rows[-1][0]), math.inf, cost)
