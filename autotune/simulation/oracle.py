"""The one oracle over a recorded space: what a strategy may ask, what each answer is and costs.

Both ways of tuning without a GPU answer from here: `autotune tune --replay` (through
`autotune.evaluators.replay.ReplayEvaluator`, keyed by normalised config key) and
`autotune simulate` (through `RecordedSpace`, keyed by the recorded point, for speed).  They
read the same `Oracle`, so they cannot disagree about a config.

Oracle semantics (what `autotune simulate` and the replay document to their users):
- The space offered to a strategy is *finite*: its points are exactly the configs recorded
  for the space (valid and failed).  Random search samples them uniformly; grid lists them;
  pattern search moves only between recorded neighbours; model-based strategies see
  proposals outside the set rejected as invalid before anything is counted.
- Only search-time measurements are oracles (re-benchmarks, replays and reuses are not).
- A config measured once is answered with that measurement, unchanged.
- A config measured more than once is answered by one rule: if any of its measurements ran
  correctly, OK with the median of those measurements' medians (min/max the extremes of
  them, repetitions and samples pooled, the other fields from the latest OK one); if none
  did, its latest failure.  Compile and benchmark seconds are the means over all of its
  measurements, failures included (a real run would pay any of them; one that recorded no
  seconds, e.g. a failure before the benchmark, counts as 0).
- A config that was not recorded (possible only for points given from outside the sample,
  e.g. seeds or --config) is answered `not_recorded`, counted against the budget, costs no
  simulated time, and is told to the strategy as a failure.  Every run reports how often
  that happened, so no result silently depends on it.
- Each answer costs its recorded compile plus benchmark seconds: the "simulated GPU seconds"
  a real run would have spent on it.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from operator import itemgetter
from typing import Any, Callable, Iterable, Mapping, Sequence

from autotune.types import Result, Source, Status
from search_spaces.space import SearchSpace, canonical_json

Params = dict[str, Any]
#: What the simulator tells a strategy about one point: (time ms or inf, cost s, result told).
Answer = tuple[float, float, Result]
NOT_RECORDED = Result(key="", status=Status.NOT_RECORDED, source=Source.REPLAYED,
                      error="no measurement of this config is recorded for this space")


@dataclass(frozen=True)
class Outcome:
    """The recorded answer for one config, as the simulator's statistics read it."""

    status: Status
    time_ms: float  # inf for failures
    cost_s: float  # recorded compile + benchmark seconds
    result: Result | None = field(default=None, compare=False, repr=False)  # the oracle's full answer


def point_text(params: Mapping[str, Any]) -> str:
    """The lookup key of a point: canonical JSON (cheaper than hashing it, and exact)."""
    return canonical_json(dict(params))


def combine(results: Sequence[Result]) -> Result:
    """One answer for a config measured `len(results)` times (oldest first): the rule in the
    module's docstring.  Why the median of medians: a re-measured config is usually one whose
    first time looked suspicious, and neither the first nor the latest is the better guess."""
    if not results:
        raise ValueError("a config with no measurement has no answer")
    if len(results) == 1:
        return results[0]
    compile_s = _mean([r.compile_s for r in results])
    bench_s = _mean([r.bench_s for r in results])
    ok = [r for r in results if r.ok]
    if not ok:
        failures = [r for r in results if r.status is not Status.OK]
        return replace((failures or results)[-1], compile_s=compile_s, bench_s=bench_s)
    medians = [r.median_ms for r in ok]
    rel = [r.rel_error for r in ok if r.rel_error is not None]
    return replace(
        ok[-1], median_ms=statistics.median(medians),
        min_ms=min(r.min_ms if r.min_ms is not None else r.median_ms for r in ok),
        max_ms=max(r.max_ms if r.max_ms is not None else r.median_ms for r in ok),
        repetitions=sum(r.repetitions for r in ok), samples_ms=tuple(s for r in ok for s in r.samples_ms),
        rel_error=max(rel) if rel else None, compile_s=compile_s, bench_s=bench_s)


def _mean(values: Sequence[float | None]) -> float | None:
    """The mean seconds per measurement, a measurement that recorded none counting as 0 (a failure
    that never reached the benchmark spent no benchmark time); None when none recorded any."""
    if all(v is None for v in values):
        return None
    return statistics.fmean(v or 0.0 for v in values)


def outcome_of(result: Result) -> Outcome:
    time_ms = result.median_ms if result.ok else math.inf
    return Outcome(result.status, time_ms, (result.compile_s or 0.0) + (result.bench_s or 0.0), result)


class Oracle:
    """Every recorded config of one space with its one answer, keyed by normalised config key.

    `points` gives each config's recorded point (the normalised point the measuring session
    stored), which is what a replay or a simulation offers its strategy.
    """

    def __init__(self, answers: Mapping[str, Result], points: Mapping[str, Params] | None = None) -> None:
        self._answers = dict(answers)
        self.points: dict[str, Params] = dict(points or {})

    @classmethod
    def from_results(cls, grouped: Mapping[str, Sequence[Result]],
                     points: Mapping[str, Params] | None = None) -> "Oracle":
        """From results grouped by config key, oldest first (as `Cache.measurements` gives them)."""
        return cls({key: combine(results) for key, results in grouped.items() if results}, points)

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[Mapping[str, Any], Result]], names: Sequence[str]) -> "Oracle":
        """From (point, result) rows, oldest first (`Cache.measured_points`).  A row whose point has
        other parameters than `names` was measured under an older definition of the space: it is
        not a point of this one and is left out."""
        grouped: dict[str, list[Result]] = {}
        points: dict[str, Params] = {}
        wanted = set(names)
        for params, result in rows:
            if params.keys() != wanted:
                continue
            points.setdefault(result.key, {n: params[n] for n in names})
            grouped.setdefault(result.key, []).append(result)
        return cls.from_results(grouped, points)

    @classmethod
    def from_cache(cls, cache: Any, fingerprint: str, names: Sequence[str]) -> "Oracle":
        return cls.from_rows(cache.measured_points(fingerprint), names)

    def result(self, key: str) -> Result | None:
        """The answer for a config key, or None when it was never recorded."""
        return self._answers.get(key)

    def outcome(self, key: str) -> Outcome | None:
        found = self._answers.get(key)
        return None if found is None else outcome_of(found)

    def keys(self) -> Iterable[str]:
        return self._answers.keys()

    def __len__(self) -> int:
        return len(self._answers)

    def __contains__(self, key: object) -> bool:
        return key in self._answers

    @property
    def valid_count(self) -> int:
        return sum(1 for result in self._answers.values() if result.ok)


@dataclass(frozen=True)
class RecordedSpace:
    """Every recorded config of one space with its outcome; `space` is finite over them.

    Built from an `Oracle` (`from_cache`), its outcomes are the oracle's answers keyed by the
    recorded point; hand-made ones (tests) give outcomes directly.
    """

    label: str
    fingerprint: str
    device: str
    space: SearchSpace
    outcomes: Mapping[str, Outcome]
    oracle: Oracle | None = field(default=None, compare=False, repr=False)

    @property
    def optimum_ms(self) -> float:
        return min((o.time_ms for o in self.outcomes.values()), default=math.inf)

    @property
    def valid_count(self) -> int:
        return sum(1 for o in self.outcomes.values() if o.status is Status.OK)

    def answer(self, params: Mapping[str, Any]) -> Outcome | None:
        return self.outcomes.get(point_text(params))

    def lookup(self) -> Callable[[Mapping[str, Any]], Answer | None]:
        """A fast `answer` for the simulator's loop: (time, cost, result to tell), None when not
        recorded.  Points are found by their values in the space's order (no JSON per answer);
        a point that does not hash that way (a list value, a missing name) takes the exact path."""
        cached = self.__dict__.get("_lookup")
        if cached is not None:
            return cached
        names = self.space.names
        key_of = itemgetter(*names) if names else (lambda params: ())
        told: dict[str, Answer | None] = {text: _told(o) for text, o in self.outcomes.items()}
        fast: dict[Any, Answer | None] = {}
        for member in self.space.members or ():
            try:
                fast[key_of(member)] = told.get(point_text(member))
            except TypeError:
                continue  # an unhashable value: this point takes the exact path
        missing = object()

        def lookup(params: Mapping[str, Any]) -> Answer | None:
            try:
                hit = fast.get(key_of(params), missing)
            except (KeyError, TypeError):
                hit = missing
            if hit is missing:
                return told.get(point_text(params))
            return hit

        object.__setattr__(self, "_lookup", lookup)
        return lookup

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the lookup table (a closure): it is rebuilt on first use."""
        state = dict(self.__dict__)
        state.pop("_lookup", None)
        return state

    @classmethod
    def from_cache(cls, cache: Any, fingerprint: str) -> "RecordedSpace":
        """Load a space's search-time measurements through the one oracle."""
        record = cache.get_space(fingerprint)
        if record is None:
            raise KeyError(f"no space {fingerprint} in {cache.path}")
        oracle = Oracle.from_cache(cache, fingerprint, record.space.names)
        if not oracle.points:
            raise ValueError(f"space {fingerprint} has no measured configs to simulate on")
        outcomes: dict[str, Outcome] = {}
        for key, point in oracle.points.items():
            outcomes.setdefault(point_text(point), outcome_of(oracle.result(key)))  # type: ignore[arg-type]
        label = f"{record.kernel} {'x'.join(map(str, record.shape)) or '-'} {record.dtype} on {record.device}"
        recorded = cls(label=label, fingerprint=fingerprint, device=record.device,
                       space=record.space.restricted_to(oracle.points.values()), outcomes=outcomes, oracle=oracle)
        recorded.lookup()  # built while loading, so no simulated run pays for it
        return recorded


def _told(outcome: Outcome) -> Answer:
    """What the simulator tells a strategy for one outcome: the oracle's own result, marked replayed."""
    if outcome.result is not None:
        result = outcome.result.as_source(Source.REPLAYED)
    else:
        ok = outcome.status is Status.OK
        result = Result(key="", status=outcome.status, median_ms=outcome.time_ms if ok else None,
                        source=Source.REPLAYED)
    return outcome.time_ms, outcome.cost_s, result
