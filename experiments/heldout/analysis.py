"""The held-out experiment's figures, computed from the recorded runs (data.py) alone.

Per problem and arm (and strategy): medians and ranges over the seeds of the wall time (set-up
counted), the time to come within 2% of the best time anyone found at the problem and of
Helion quick's, the final time, the ratios to Helion quick, and where the answers came from;
and the runs their config budget ended (the targets are judged in verdicts.py).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from . import definition as d
from .data import EARLIER_SEEDS, Run, latest_per_seed_source
from .definition import Problem

NEVER = math.inf  # a run that never came within the target


@dataclass(frozen=True)
class Spread:
    """Median and range over runs; a missing value (never reached, no answer) counts as infinite."""

    median: float
    low: float
    high: float
    count: int
    missing: int

    def text(self, scale: float = 1.0, digits: int = 1) -> str:
        if self.count == 0:
            return "-"
        show = (lambda v: "never" if not math.isfinite(v) else f"{v * scale:.{digits}f}")  # noqa: E731
        low, high = show(self.low), show(self.high)
        return show(self.median) if low == high else f"{show(self.median)} [{low}–{high}]"

    def record(self) -> dict[str, Any]:
        finite = (lambda v: v if math.isfinite(v) else None)  # noqa: E731 - JSON has no infinity
        return {"median": finite(self.median), "low": finite(self.low), "high": finite(self.high),
                "runs": self.count, "missing": self.missing}


def spread(values: Sequence[float | None]) -> Spread:
    numbers = sorted(NEVER if v is None or not math.isfinite(v) else float(v) for v in values)
    if not numbers:
        return Spread(NEVER, NEVER, NEVER, 0, 0)
    return Spread(statistics.median(numbers), numbers[0], numbers[-1], len(numbers),
                  sum(not math.isfinite(v) for v in numbers))


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b and math.isfinite(a) and math.isfinite(b) else None


@dataclass
class ArmSummary:
    """One arm (with one strategy) at one problem, over its seeds."""

    arm: str
    strategy: str
    runs: list[Run]
    wall: Spread
    setup: Spread
    to_best: Spread  # seconds from the job's start to within WITHIN of the best anyone found
    configs_to_best: Spread  # configs measured until then
    rate: Spread  # configs measured per second of search
    to_helion: Spread  # ... of Helion quick's final time
    final: Spread  # ms
    final_ratio: Spread  # our final / Helion quick's
    wall_ratio: Spread  # our wall / Helion quick's
    limit: Spread  # ours: the search time each run was given
    provenance: Counter = field(default_factory=Counter)  # where each run's answer came from

    @property
    def name(self) -> str:
        return self.arm if self.arm == d.HELION_QUICK else f"{self.arm} {self.strategy}"


@dataclass
class SeedFigure:
    """The heuristic seed's time over a set of warm-heuristic runs (median over the runs that had
    it): the rules' own seed where the runs tell it apart, else the fastest config the heuristic
    source gave (with Helion's compiler seeds)."""

    ms: float | None = None
    kind: str = ""  # "rule seed", "fastest of N rule seeds" or "heuristic seeds" (none told apart)
    runs: int = 0  # the runs it was read from
    rule_params: dict[str, Any] | None = None  # the rule seed's point (of the first run that had it)


@dataclass
class ProblemSummary:
    problem: Problem
    best_run: Run | None  # the run whose re-timed answer is the best anyone found here
    helion_ms: float | None  # Helion quick's final time (median over its runs)
    helion_wall_s: float | None
    arms: list[ArmSummary]
    warm_heuristic: list[Run] = field(default_factory=list)  # the runs the seed figures are read from
    # ... and the latest of each key under each version of the seed source (runs recorded again
    # included), which the figures by version read
    warm_heuristic_versions: list[Run] = field(default_factory=list)

    @property
    def best_ms(self) -> float | None:
        return self.best_run.final_ms if self.best_run is not None else None

    @property
    def best_params(self) -> dict[str, Any] | None:
        """The point of the best answer anyone found."""
        return self.best_run.final_params if self.best_run is not None else None

    @property
    def present_seed_runs(self) -> list[Run]:
        """The warm-heuristic runs of the present seed source."""
        return [r for r in self.warm_heuristic if EARLIER_SEEDS not in r.strategy]

    @property
    def seed(self) -> SeedFigure:
        """The heuristic seed over the runs of the present seed source."""
        return _seed_figure(self.present_seed_runs)

    @property
    def present_cache_runs(self) -> list[Run]:
        """The warm-cache runs of the present cache source."""
        return [r for a in self.arms if a.arm == d.WARM_CACHE and EARLIER_SEEDS not in a.strategy for r in a.runs]

    @property
    def cache_seed(self) -> SeedFigure:
        """The cache source's fastest seed over the warm-cache runs of the present cache source
        (median over the runs that had one): where the warm-cache arm started."""
        runs = self.present_cache_runs
        times = [r.cache_ms for r in runs if r.cache_ms is not None]
        if not times:
            return SeedFigure(runs=len(runs))
        return SeedFigure(statistics.median(times), "fastest cache seed", len(runs))

    @property
    def default_ms(self) -> float | None:
        """The default config's time, median over our runs that measured it: where the cold arm started."""
        times = [r.default_ms for r in self._ours if r.default_ms is not None]
        return statistics.median(times) if times else None

    @property
    def default_failure(self) -> str | None:
        """How the default config failed where our runs measured it and it never ran (the most
        common status among them); None where it ran or was not measured."""
        statuses = Counter(r.default_status for r in self._ours if r.default_status is not None)
        if not statuses or "ok" in statuses:
            return None
        return statuses.most_common(1)[0][0]

    def starts(self) -> list[tuple[str, float | None]]:
        """Where each of our arms started here: the default (cold), the heuristic
        seed (warm-heuristic) and the fastest cache seed (warm-cache); None where none ran."""
        return [(d.COLD, self.default_ms), (d.WARM_HEURISTIC, self.seed.ms), (d.WARM_CACHE, self.cache_seed.ms)]

    @property
    def _ours(self) -> list[Run]:
        return [r for a in self.arms if a.arm in d.OUR_ARMS for r in a.runs]

    @property
    def earlier_seed(self) -> SeedFigure:
        """... over the runs of the latest earlier seed source (the version the most recent earlier
        run recorded: two earlier versions' seeds are never mixed in one median)."""
        earlier = [r for r in self.warm_heuristic if EARLIER_SEEDS in r.strategy]
        latest = max(earlier, key=lambda r: r.session_id).seeds_tag if earlier else None
        return _seed_figure([r for r in earlier if r.seeds_tag == latest])

    def seed_recorded_as(self, version: str) -> SeedFigure:
        """The seed figure of the runs that recorded this version of their seed source, present or not."""
        return _seed_figure([r for r in self.warm_heuristic_versions or self.warm_heuristic if r.seeds_tag == version])

    @property
    def first_rule_seed(self) -> SeedFigure:
        """The rules' first seed alone over the runs of the present seed source (where a rule gives
        several, the first is its own choice and the rest its variants)."""
        runs = [r for r in self.present_seed_runs if r.rule_seed_times]
        times = [r.rule_seed_times[0][1] for r in runs if r.rule_seed_times[0][1] is not None]
        if not times:
            return SeedFigure(runs=len(runs))
        return SeedFigure(statistics.median(times), "the rule's first seed alone", len(runs),
                          dict(runs[0].rule_seed_times[0][0]))

    def rule_seed_times(self) -> list[tuple[str, float | None]]:
        """Each of the present rule seeds (the runs of the present seed source, the first run's
        seeds) by how it differs from the rules' first seed, with its median time over the runs."""
        runs = [r for r in self.present_seed_runs if r.rule_seed_times]
        if not runs:
            return []
        first = runs[0].rule_seed_times[0][0]
        out = []
        for i, (seed, _) in enumerate(runs[0].rule_seed_times):
            times = [r.rule_seed_times[i][1] for r in runs if len(r.rule_seed_times) > i
                     and r.rule_seed_times[i][0] == seed and r.rule_seed_times[i][1] is not None]
            label = "first" if i == 0 else ", ".join(f"{k} {v!r}" for k, v in seed.items() if first.get(k) != v)
            out.append((label, statistics.median(times) if times else None))
        return out

    def ratio(self, figure: SeedFigure) -> float | None:
        return self.over_best(figure.ms)

    def over_best(self, ms: float | None) -> float | None:
        """A time over the best anyone found here (None where either is unknown)."""
        return _ratio(ms, self.best_ms)

    def rule_differences(self) -> list[tuple[str, Any, Any]]:
        """(parameter, the present rule seed's value, the best answer's value) wherever they differ:
        what a revision of the rule would have had to choose otherwise here."""
        rule = self.seed.rule_params
        if not rule or not self.best_params:
            return []
        return [(name, rule.get(name), value) for name, value in self.best_params.items() if rule.get(name) != value]

    def arm(self, arm: str, strategy: str) -> ArmSummary | None:
        return next((a for a in self.arms if (a.arm, a.strategy) == (arm, strategy)), None)

    @property
    def helion_runs(self) -> list[Run]:
        """Helion quick's runs here, in seed order: the targets' reference is their median."""
        return helion_runs([r for a in self.arms for r in a.runs])


def helion_runs(runs: Iterable[Run]) -> list[Run]:
    """The Helion quick runs among `runs`, in seed order."""
    return sorted((r for r in runs if r.arm == d.HELION_QUICK), key=lambda r: r.seed)


def summarise(runs: Iterable[Run], problems: Sequence[Problem] = d.PROBLEMS,
              every_run: Sequence[Run] = ()) -> list[ProblemSummary]:
    """A summary per problem with runs, in the order of `problems`.  `runs`: the run standing for
    each key; `every_run`: with those recorded again (data.load_every_run), for the seed figures
    read by the version of the seed source."""
    runs = list(runs)
    versions = latest_per_seed_source([r for r in every_run if r.arm == d.WARM_HEURISTIC])
    summaries = []
    for problem in problems:
        here = [r for r in runs if r.problem == problem]
        if not here:
            continue
        # the best anyone found: runs recorded again count too (each was a finished run, re-timed)
        every_here = [r for r in every_run if r.problem == problem] or here
        answered = [r for r in every_here if r.final_ms is not None]
        best_run = min(answered, key=lambda r: r.final_ms, default=None)
        best = best_run.final_ms if best_run is not None else None
        helion = helion_runs(here)
        helion_ms = spread([r.final_ms for r in helion]).median if helion else None
        helion_wall = spread([r.wall_s for r in helion]).median if helion else None
        helion_ms = helion_ms if helion_ms is not None and math.isfinite(helion_ms) else None
        helion_wall = helion_wall if helion_wall is not None and math.isfinite(helion_wall) else None
        groups: dict[tuple[str, str], list[Run]] = {}
        for run in here:
            groups.setdefault((run.arm, run.strategy), []).append(run)
        order = {arm: i for i, arm in enumerate(d.ARMS)}
        arms = [_arm(arm, strategy, sorted(members, key=lambda r: r.seed), best, helion_ms, helion_wall)
                for (arm, strategy), members in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 99),
                                                                                      kv[0][1]))]
        summaries.append(ProblemSummary(problem, best_run, helion_ms, helion_wall, arms,
                                        [r for r in here if r.arm == d.WARM_HEURISTIC],
                                        [r for r in versions if r.problem == problem]))
    return summaries


def _arm(arm: str, strategy: str, runs: list[Run], best: float | None, helion_ms: float | None,
         helion_wall: float | None) -> ArmSummary:
    near = (lambda ms: ms * (1 + d.WITHIN) if ms is not None else None)  # noqa: E731
    return ArmSummary(
        arm=arm, strategy=strategy, runs=runs, wall=spread([r.wall_s for r in runs]),
        setup=spread([r.setup_s for r in runs]), to_best=spread([r.time_to(near(best)) for r in runs]),
        configs_to_best=spread([r.configs_to(near(best)) for r in runs]), rate=spread([r.configs_per_s for r in runs]),
        to_helion=spread([r.time_to(near(helion_ms)) for r in runs]) if helion_ms else spread([]),
        final=spread([r.final_ms for r in runs]), final_ratio=spread([_ratio(r.final_ms, helion_ms) for r in runs])
        if helion_ms else spread([]),
        wall_ratio=spread([_ratio(r.wall_s, helion_wall) for r in runs]) if helion_wall else spread([]),
        limit=spread([r.limit_s for r in runs if r.limit_s is not None]),  # "-": none (Helion quick)
        provenance=Counter(r.best_origin for r in runs))


def _seed_figure(runs: list[Run]) -> SeedFigure:
    rule = [r.rule_ms for r in runs if r.rule_ms is not None]
    given = [r.heuristic_ms for r in runs if r.heuristic_ms is not None]
    count = max((r.rule_seeds for r in runs if r.rule_ms is not None), default=0)
    values, kind = (rule, "rule seed" if count <= 1 else f"fastest of {count} rule seeds") if rule else \
        (given, "heuristic seeds")
    rule_params = next((r.rule_params for r in runs if r.rule_params), None)
    if not values:
        return SeedFigure(runs=len(runs), rule_params=rule_params)
    return SeedFigure(statistics.median(values), kind, len(runs), rule_params)


# -- the time a target allows, and the runs their config budget ended -----------------------------
BUDGET_END = "budget"  # the exit reason of a session that measured its config budget


@dataclass
class BudgetEnd:
    """A softmax run of our arms that its config budget (definition.BUDGET) ended before its
    search limit: the study means the limit to bind first, so the report says where it did not."""

    run: Run
    allowed_s: float | None  # the time its target allows (a share of Helion quick's wall); None: no reference
    reached_s: float | None  # when it came within WITHIN of Helion quick's final time; None: never

    @property
    def cut_short(self) -> bool:
        """Ended before its target's time without having come within WITHIN: it counts as 'never'
        though the time it was allowed had not run out, so the budget, not the target, decided it."""
        wall = self.run.wall_s
        return self.reached_s is None and self.allowed_s is not None and wall is not None and wall < self.allowed_s


def allowed_s(summary: ProblemSummary, arm: str) -> float | None:
    """The seconds from the job's start the arm's time target allows at the summary's problem
    (its share of Helion quick's median wall time there); None where no Helion quick run is
    recorded or the problem has no time target (a matmul cell)."""
    if summary.problem.family != "softmax" or not summary.helion_wall_s:
        return None
    return summary.helion_wall_s * d.wall_share(arm)


def budget_ends(summaries: Sequence[ProblemSummary]) -> list[BudgetEnd]:
    """Our arms' softmax runs (where the time targets are judged) that ended at the config budget."""
    ends = []
    for summary in summaries:
        if summary.problem.family != "softmax":
            continue
        for arm in summary.arms:
            if arm.arm not in d.OUR_ARMS:
                continue
            allowed = allowed_s(summary, arm.arm)
            near = summary.helion_ms * (1 + d.WITHIN) if summary.helion_ms else None
            ends += [BudgetEnd(run, allowed, run.time_to(near)) for run in arm.runs if run.ended_by == BUDGET_END]
    return ends


def us_text(ms: float | None) -> str:
    """A time in ms written in µs for a table cell ('-' where there is none)."""
    return "-" if ms is None or not math.isfinite(ms) else f"{ms * 1e3:.1f}"
