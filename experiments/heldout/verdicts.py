"""The held-out experiment's targets, judged from the summaries (analysis.py): each of issue 24's
targets per arm and strategy over every softmax shape (or matmul cell), each change on the shapes
declared after it, and for the report's "In short" each target's headline strategy and the
strategies still able to meet it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from . import definition as d
from .analysis import ProblemSummary, SeedFigure, allowed_s
from .data import EARLIER_SEEDS, Run, came_in_time, kept_apart
from .definition import Problem


@dataclass
class Verdict:
    target: str
    subject: str
    status: str  # "met", "not met", or "not yet measured at ..." (none failed so far)
    details: list[str]
    met_at: list[str] = field(default_factory=list)  # the shapes or cells where the target was met
    missed_at: list[str] = field(default_factory=list)  # ... where it was not
    unmeasured: list[str] = field(default_factory=list)  # ... where nothing was recorded yet

    @property
    def met(self) -> bool:
        return self.status == "met"

    @property
    def of_runs_kept_apart(self) -> bool:
        """A verdict on runs of an earlier strategy, of earlier seeds or under another timing target."""
        return kept_apart(self.subject)


def _time_target(summaries: list[ProblemSummary], arm: str, strategy: str, declared: Sequence[Problem],
                 where: str = "every softmax shape", subject: str = "") -> Verdict:
    details, met_at, missed_at, missing = [], [], [], []
    for problem in declared:
        summary = next((s for s in summaries if s.problem == problem), None)
        mine = summary.arm(arm, strategy) if summary else None
        allowed = allowed_s(summary, arm) if summary is not None else None
        if mine is None or not mine.runs or allowed is None:
            missing.append(problem.shape)
            continue
        # Decided once most of the planned seeds came in time (the median meets it whatever the
        # rest find) or most did not; with fewer runs the median of those recorded would judge
        # the shape on one or two seeds, so it counts as not yet measured.
        planned = max(len(d.SEEDS), len(mine.runs))
        timely = sum(in_time(r, summary, allowed) for r in mine.runs)
        decided = d.most_of(max(timely, len(mine.runs) - timely), planned)
        ok = d.most_of(timely, planned)
        if decided:
            (met_at if ok else missed_at).append(problem.shape)
        else:
            missing.append(problem.shape)
        references = len(summary.helion_runs)
        details.append(f"{problem.shape}: {mine.to_helion.text()} s of {allowed:.1f} s allowed "
                       f"({timely}/{len(mine.runs)} runs in time; Helion quick {references} "
                       f"run{'' if references == 1 else 's'}): "
                       + (("met" if ok else "not met") if decided
                          else f"undecided until more of its {planned} seeds have run"))
    target = (f"within {d.WITHIN:.0%} of Helion quick at {where} in at most 1/{round(1 / d.wall_share(arm))} of "
              "its wall time")
    return Verdict(target, f"{arm} {strategy}{subject}", _status(missed_at, missing), details, met_at, missed_at,
                   missing)


def _status(missed_at: list[str], missing: list[str]) -> str:
    return "not met" if missed_at else "met" if not missing else f"not yet measured at {', '.join(missing)}"


def in_time(run: Run, summary: ProblemSummary, allowed: float) -> bool:
    """Whether the run came within WITHIN of Helion quick within `allowed` s of its job's start."""
    return came_in_time(run, summary.helion_ms, allowed)


# How a time target is read at a shape (the report says it above its verdicts).
HOW_READ = (f"A time target is read at each shape on the median over the {len(d.SEEDS)} planned seeds: met there "
            f"once most of them came within {d.WITHIN:.0%} of Helion quick in the time allowed (the median is then "
            "in time whatever the others find), missed once most did not. A shape where the runs recorded do not "
            "decide it yet counts as not yet measured, and its line says it is undecided. A shape already decided "
            "may have fewer runs than seeds: `runner --until-decided` starts no seed that cannot change its verdict.")
REVISED_SUBJECT = ", on the shapes declared after the warm seeds' revision"
LATER_STRATEGY_SUBJECT = ", on the shapes declared after it"
CACHE_SUBJECT = ", on the shapes declared after the cache source's change"
FEW_ROWS_SUBJECT = ", on the shapes declared after the row rule's third revision"


def verdicts(summaries: list[ProblemSummary], strategies: Sequence[str] = d.STRATEGIES) -> list[Verdict]:
    """Issue 24's targets: cold arms in 1/5 of Helion quick's wall time, warm arms in 1/10, at
    every softmax shape (judged on the median over seeds); at every matmul cell, the heuristic
    seed within 5% of the best found."""
    def labels(arm: str) -> list[str]:  # the planned strategies, and every label the arm's runs carry
        return sorted({a.strategy for s in summaries for a in s.arms if a.arm == arm} | set(strategies))

    result = [_time_target(summaries, d.COLD, s, d.SOFTMAX) for s in labels(d.COLD)]
    # A strategy added after runs at some shapes is judged apart on the shapes declared after it.
    # A run under later tooling carries its strategy's label with the tooling's marks; the same
    # shapes judge it, as the tooling changes how fast the walk goes, not where it goes.
    for strategy, shapes in d.JUDGED_AT.items():
        if strategy in strategies:
            judged = [p for p in d.SOFTMAX if p.shape in shapes]
            tooled = [s for s in labels(d.COLD) if d.untooled(s) == strategy and s != strategy]
            result += [_time_target(summaries, d.COLD, label, judged, where=f"each shape declared after {strategy}",
                                    subject=LATER_STRATEGY_SUBJECT) for label in [strategy, *tooled]]
    for arm in d.WARM_ARMS:
        result += [_time_target(summaries, arm, s, d.SOFTMAX) for s in labels(arm)]
        # Where the warm arms' present seeds are judged: shapes declared after their revision, but
        # not those a later revision of the arm's seeds was fitted on (the row rule's third).
        later_fit = d.FEW_ROWS_FITTED if arm == d.WARM_HEURISTIC else ()
        revised = [p for p in d.SOFTMAX if p.shape in d.REVISED_SHAPES and p.shape not in later_fit]
        result += [_time_target(summaries, arm, s, revised,
                                where="each shape declared after the warm seeds' revision"
                                + (" and not fitted since" if later_fit else ""),
                                subject=REVISED_SUBJECT) for s in strategies]
    # Where the cache source's change is judged: the shapes declared after it.
    changed = [p for p in d.SOFTMAX if p.shape in d.CACHE_SHAPES]
    result += [_time_target(summaries, d.WARM_CACHE, s, changed,
                            where="each shape declared after the cache source's change", subject=CACHE_SUBJECT)
               for s in strategies]
    # Where the row rule's third revision (few long rows) is judged: the shapes declared after it.
    few_rows = [p for p in d.SOFTMAX if p.shape in d.FEW_ROWS_SHAPES]
    result += [_time_target(summaries, d.WARM_HEURISTIC, s, few_rows,
                            where="each shape declared after the row rule's third revision",
                            subject=FEW_ROWS_SUBJECT) for s in strategies]
    result.append(_seed_target(summaries, d.MATMUL, "matmul cells"))
    # Where each revision of the resident rule is judged: the cells declared after it, by its seeds.
    result.append(_seed_target(summaries, d.MATMUL_THIRD, THIRD_SUBJECT))
    result.append(_seed_target(summaries, d.MATMUL_THIRD, THIRD_FIRST_SUBJECT, figure=lambda s: s.first_rule_seed))
    result.append(_seed_target(summaries, d.MATMUL_HOST_DESCRIPTORS, HOST_SUBJECT,
                               figure=lambda s: s.seed_recorded_as(d.MATMUL_SECOND_REVISION)))
    result.append(_seed_target(summaries, d.MATMUL_REVISED, FIRST_REVISION_SUBJECT,
                               figure=lambda s: s.seed_recorded_as(d.MATMUL_FIRST_REVISION)))
    if any(s.earlier_seed.ms is not None for s in summaries):
        result.append(_seed_target(summaries, d.MATMUL, "matmul cells" + EARLIER_SEEDS,
                                   figure=lambda s: s.earlier_seed, earlier=True))
    return result



# Issue 24's targets as its text names them, and the arm each one judges ("matmul cells": the seed target).
ISSUE_TARGETS = (("cold", d.COLD), ("warm", d.WARM_HEURISTIC), ("warm from the cache", d.WARM_CACHE),
                 ("matmul seeds", None))


def _standing_for(judged: Sequence[Verdict], arm: str | None) -> list[Verdict]:
    """The present verdicts that can stand for the target of `arm` (None: the matmul seed target):
    each of the arm's strategies over every softmax shape.  Runs kept apart (an earlier version,
    earlier seeds, another timing target) never stand for an arm."""
    present = [v for v in judged if not v.of_runs_kept_apart]
    if arm is None:
        return [v for v in present if v.subject == "matmul cells"]
    return [v for v in present if v.subject.startswith(f"{arm} ") and "every softmax shape" in v.target]


def headline(judged: Sequence[Verdict]) -> list[tuple[str, Verdict | None]]:
    """For each of the issue's targets, its verdict over every softmax shape (or matmul cell) for the
    arm's best present strategy: the most places met, then the fewest not yet measured."""
    return [(name, max(_standing_for(judged, arm), key=lambda v: (len(v.met_at), -len(v.unmeasured)), default=None))
            for name, arm in ISSUE_TARGETS]


def unbeaten(judged: Sequence[Verdict]) -> list[tuple[str, Verdict]]:
    """For each softmax target, the other present strategies of its arm that could still meet it:
    met at every shape measured so far, with shapes not yet measured.  The headline shows the
    strategy met at the most shapes, which may already have missed where one run at fewer has not."""
    picked = dict(headline(judged))
    return [(name, v) for name, arm in ISSUE_TARGETS if arm is not None for v in _standing_for(judged, arm)
            if v is not picked[name] and v.met_at and v.unmeasured and not v.missed_at]


THIRD_SUBJECT = "matmul cells declared after the rule's third revision"
THIRD_FIRST_SUBJECT = THIRD_SUBJECT + ", its first seed alone"
HOST_SUBJECT = "matmul cells declared after the rule's second revision, by its seeds"
FIRST_REVISION_SUBJECT = "matmul cells declared after the rule's first revision, by its seeds"


def _seed_target(summaries: list[ProblemSummary], cells: Sequence[Problem], subject: str,
                 figure: Callable[[ProblemSummary], SeedFigure] = lambda s: s.seed,
                 earlier: bool = False) -> Verdict:
    """The heuristic seed (`figure`: the present seed source's, by default) within SEED_NEAR of
    the best found at each cell; with `earlier`, only at the cells where such runs were recorded."""
    details, met_at, missed_at, missing = [], [], [], []
    for problem in cells:
        summary = next((s for s in summaries if s.problem == problem), None)
        seed = None if summary is None else figure(summary)
        if seed is None or summary.best_ms is None or (seed.ms is None if earlier else not seed.runs):
            if not earlier:
                missing.append(problem.label)
            continue
        ratio = summary.ratio(seed)
        ok = ratio is not None and ratio <= 1 + d.SEED_NEAR
        (met_at if ok else missed_at).append(problem.label)
        shown = "no heuristic seed ran" if ratio is None else f"{seed.kind} {ratio:.3f}x the best found"
        details.append(f"{problem.label}: {shown}: {'met' if ok else 'not met'}")
    return Verdict(f"heuristic seed within {d.SEED_NEAR:.0%} of the best found", subject,
                   _status(missed_at, missing), details, met_at, missed_at, missing)
