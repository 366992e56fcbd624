"""What each change of tooling changed: one arm and strategy, the same seeds and shapes, run before
and after it (loading the compile workers' code, `definition.WORKER_BUILT`; then compiling the
next generation ahead, `definition.COMPILED_AHEAD`).

Why this is read apart: the tooling is not a strategy, and runs under it are judged apart from
the runs before it (`data.strategy_label`), so neither set's verdicts say what the tooling did.
Side by side, per shape: the benchmark process's seconds per config (what the tooling acts on),
configs per second of search, the seconds to within `definition.WITHIN` of Helion quick, the
runs in time, and how many seeds ended on the same config both times (whether the tooling
changed where a seed's walk went, or only how soon).

A strategy asks for a generation only once the last one is told, so a search's pace is its
generations' pace: each generation's seconds and its slowest compile are read too, to show what
bounds a generation once the benchmark process's share of it shrinks.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from autotune.store.cache import EvaluationRow

from . import definition as d
from .analysis import ArmSummary, ProblemSummary, allowed_s
from .data import Run
from .verdicts import in_time

# Each tooling's mark on a run's label, in the order the tooling came, and what it did.
TOOLINGS = ((d.WORKER_BUILT, "loading the compile workers' code"),
            (d.COMPILED_AHEAD, "compiling the next generation ahead"))


@dataclass(frozen=True)
class Pace:
    """Medians over an arm's runs: the benchmark process's seconds per config; per generation (the
    default config's aside), its seconds from the last one's end to its own and its slowest compile."""

    bench_s: float | None
    generation_s: float | None
    slowest_compile_s: float | None

    @classmethod
    def of(cls, runs: Sequence[Run], rows: Mapping[int, Sequence[EvaluationRow]]) -> "Pace":
        bench, lengths, slowest = [], [], []
        for run in runs:
            ends: dict[int, float] = {}
            compiles: dict[int, float] = {}
            for row in rows.get(run.session_id, ()):
                if row.result.bench_s is not None:
                    bench.append(row.result.bench_s)
                if row.created is not None:
                    ends[row.generation] = max(row.created, ends.get(row.generation, row.created))
                if row.result.compile_s is not None:
                    compiles[row.generation] = max(row.result.compile_s, compiles.get(row.generation, 0.0))
            order = sorted(ends)
            lengths += [ends[g] - ends[prev] for prev, g in zip(order, order[1:])]
            slowest += [compiles[g] for g in order[1:] if g in compiles]
        return cls(_median(bench), _median(lengths), _median(slowest))


@dataclass(frozen=True)
class ToolingPair:
    """One arm and strategy at one problem, run before and after one tooling (its mark)."""

    problem: d.Problem
    arm: str
    strategy: str  # the label without the tooling's mark
    mark: str  # the tooling's (TOOLINGS)
    before: ArmSummary
    after: ArmSummary
    allowed_s: float | None  # what the arm's time target allows at the problem
    pace: tuple[Pace, Pace]  # before, after

    @property
    def seeds(self) -> list[int]:
        """The seeds run both ways."""
        return sorted({r.seed for r in self.before.runs} & {r.seed for r in self.after.runs})

    @property
    def same_answer(self) -> int:
        """How many of those seeds ended on the same config both ways."""
        before, after = _by_seed(self.before.runs), _by_seed(self.after.runs)
        return sum(1 for seed in self.seeds if before[seed].final_params is not None
                   and before[seed].final_params == after[seed].final_params)

    def in_time(self, arm: ArmSummary, summary: ProblemSummary) -> int:
        return sum(in_time(r, summary, self.allowed_s) for r in arm.runs) if self.allowed_s else 0


def tooling_pairs(summaries: Sequence[ProblemSummary],
                  rows_of: Callable[[list[int]], Mapping[int, Sequence[EvaluationRow]]]) -> list[ToolingPair]:
    """Every arm and strategy with runs both ways at a problem; `rows_of` reads their search rows
    (`data.search_rows`)."""
    pairs = []
    for mark, _ in TOOLINGS:
        for summary in summaries:
            for after in summary.arms:
                if not after.strategy.endswith(mark):
                    continue
                strategy = after.strategy[: -len(mark)]
                before = summary.arm(after.arm, strategy)
                if before is None or not before.runs:
                    continue
                rows = rows_of([r.session_id for r in before.runs + after.runs])
                pairs.append(ToolingPair(summary.problem, after.arm, strategy, mark, before, after,
                                         allowed_s(summary, after.arm),
                                         (Pace.of(before.runs, rows), Pace.of(after.runs, rows))))
    return pairs


def tooling_section(pairs: Sequence[ToolingPair], summaries: Sequence[ProblemSummary]) -> list[str]:
    """A table per tooling, with the median change in configs per second over the shapes."""
    lines: list[str] = []
    for mark, name in TOOLINGS:
        lines += _section(mark, name, [pair for pair in pairs if pair.mark == mark], summaries)
    return lines


def _section(mark: str, name: str, pairs: Sequence[ToolingPair], summaries: Sequence[ProblemSummary]) -> list[str]:
    if not pairs:
        return []
    by_problem = {s.problem: s for s in summaries}
    lines = [f"## What {name} changed", "",
             "The same arm, strategy and seeds at the same shapes, before and after the runs marked "
             f"'{mark.strip()}' (before → after; `experiments/heldout/tooling.py`). **benchmark s per "
             "config**: the benchmark process's time per config, median over the runs' configs (its build, accuracy "
             "check and timing). **s per generation** and **its slowest compile s**: medians over the runs' "
             "generations (a strategy asks for the next generation once this one is told). **search limit s** differs where the runs before were given a fixed limit instead "
             f"of the one their target allows. **runs in time**: within {d.WITHIN:.0%} of Helion quick within the "
             "time allowed. **same answer**: the seeds that ended on the same config both ways.", "",
             "| shape | arm and strategy | seeds | benchmark s per config | s per generation | its slowest compile s "
             f"| configs/s | search limit s | s to {d.WITHIN:.0%} of Helion quick | runs in time | same answer |",
             "|---|---|---:|---|---|---|---|---|---|---|---|"]
    ratios = []
    for pair in pairs:
        summary = by_problem[pair.problem]
        b, a = pair.before, pair.after
        if b.rate.count and a.rate.count and b.rate.median > 0:
            ratios.append(a.rate.median / b.rate.median)
        lines.append(
            f"| {pair.problem.shape} | {pair.arm} {pair.strategy} | {len(pair.seeds)} | "
            f"{_pair(pair, 'bench_s', 3)} | {_pair(pair, 'generation_s', 2)} | {_pair(pair, 'slowest_compile_s', 2)} | "
            f"{b.rate.text()} → {a.rate.text()} | "
            f"{b.limit.text(digits=0)} → {a.limit.text(digits=0)} | {b.to_helion.text()} → {a.to_helion.text()} | "
            f"{pair.in_time(b, summary)}/{len(b.runs)} → {pair.in_time(a, summary)}/{len(a.runs)} | "
            f"{pair.same_answer} of {len(pair.seeds)} |")
    if ratios:
        lines += ["", f"Configs per second after over before, median over the {len(ratios)} rows: "
                      f"{statistics.median(ratios):.2f}."]
    return lines + [""]


def tooling_json(pairs: Sequence[ToolingPair]) -> list[dict[str, Any]]:
    return [{"kernel": p.problem.kernel, "shape": p.problem.shape, "dtype": p.problem.dtype, "arm": p.arm,
             "strategy": p.strategy, "tooling": p.mark.strip(), "seeds": p.seeds,
             "pace_before": vars(p.pace[0]), "pace_after": vars(p.pace[1]),
             "configs_per_s_before": p.before.rate.record(), "configs_per_s_after": p.after.rate.record(),
             "to_helion_s_before": p.before.to_helion.record(), "to_helion_s_after": p.after.to_helion.record(),
             "allowed_s": p.allowed_s, "same_answer": p.same_answer} for p in pairs]


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _pair(pair: ToolingPair, figure: str, digits: int) -> str:
    return " → ".join(_num(getattr(pace, figure), digits) for pace in pair.pace)


def _by_seed(runs: Sequence[Run]) -> dict[int, Run]:
    return {run.seed: run for run in runs}


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"

