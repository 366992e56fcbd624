"""Where the cold walks that stopped short stopped: their answer beside the best anyone found.

Why this is read back: a pattern walk that ends more than `definition.WITHIN` over the best
anyone found at its shape either stood on a centre no move it tried improved, or was still
climbing when its search limit cut it.  The two call for different changes (more moves against a
faster climb), so each run's last gain is read too: how far into its search its best so far
first came within `moves.GAIN` of where it ended.  Which parameters separate its answer from the
best says which moves the walk lacked.  One kind is read apart:
a *swap*, two elements of one list parameter (the per-load eviction hints, say) whose values
are exchanged between the two configs.  A single-parameter walk needs two moves for it, the
first of which can be slower alone, so a walk can stop one swap away from a faster config.

A second kind is counted apart too: an ordered parameter (a block size, warps, stages) whose
value in the run's answer lies two or more steps along its range from the best's.  A walk of
single steps passes every value between, and one slower value there stops it; `pattern-lines`
looks up to `LINE_REACH` steps along each ordered parameter before a path stops.

Only the cold arm's pattern-family runs of each strategy's current source are read (a warm
run's seeds put it near the answer; `data.kept_apart` labels are earlier versions).  The
configs compared are the runs' re-timed answers (`Run.final_params`) and the best answer
anyone found at the problem (`ProblemSummary.best_params`).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from autotune.strategies.pattern_line_look import LINE_REACH
from search_spaces import SearchSpace

from . import definition as d
from .analysis import ProblemSummary
from .data import Run, kept_apart, time_to
from .moves import GAIN, differing

ELEMENT = re.compile(r"^(?P<list>.+)\[(?P<index>\d+)\]$")  # how a space names one element of a list parameter
CLIMBING = 0.75  # a last gain this far into the search or later: still climbing when the search ended
STOOD = 0.5  # a last gain before this share of the search: the run stood on its answer for the rest
# why a session ended (`sessions.exit_reason`), in the section's words
ENDINGS = {"seconds": "search limit", "budget": "config budget", "strategy finished": "walk ended",
           "strategy exhausted": "walk ended"}


@dataclass
class StoppedShort:
    """One cold run whose answer is more than WITHIN over the best anyone found at its problem."""

    run: Run
    best_ms: float
    swaps: list[tuple[str, str]]  # element pairs whose values the two configs exchange
    others: list[tuple[str, Any, Any]]  # (parameter, the run's value, the best's value) not in a swap
    far: list[tuple[str, int]] = field(default_factory=list)  # ordered parameters 2+ steps apart: (name, steps)
    last_gain: float | None = None  # share of its search gone at its last gain (`last_gain`)

    @property
    def ratio(self) -> float:
        return self.run.final_ms / self.best_ms

    @property
    def moves(self) -> int:
        """Single-parameter moves from the run's answer to the best (a swap is two)."""
        return 2 * len(self.swaps) + len(self.others)


def differences(ours: Mapping[str, Any], best: Mapping[str, Any]) -> tuple[list[tuple[str, str]],
                                                                          list[tuple[str, Any, Any]]]:
    """The parameters whose values differ, as swaps within one list parameter (each element in at
    most one, paired in the order of their names) and the rest."""
    names = differing(ours, best)
    paired: set[str] = set()
    swaps: list[tuple[str, str]] = []
    for position, a in enumerate(names):
        if a in paired or not ELEMENT.match(a):
            continue
        for b in names[position + 1:]:
            if (b not in paired and _same_list(a, b) and a in ours and b in ours and a in best and b in best
                    and ours[a] == best[b] and ours[b] == best[a]):
                swaps.append((a, b))
                paired.update((a, b))
                break
    others = [(name, ours.get(name), best.get(name)) for name in names if name not in paired]
    return swaps, others


def _same_list(a: str, b: str) -> bool:
    first, second = ELEMENT.match(a), ELEMENT.match(b)
    return bool(first and second and first["list"] == second["list"])


def last_gain(curve: Sequence[tuple[float, float]], search_from: float | None, search_to: float | None) -> float | None:
    """The share of the search (`search_from` to `search_to`, seconds from the job's start) that had
    passed when the best so far in `curve` first came within GAIN of its last value; None unread."""
    if not curve or search_from is None or search_to is None or search_to <= search_from:
        return None
    at = time_to(curve, curve[-1][1] * (1 + GAIN))
    return min(1.0, max(0.0, (at - search_from) / (search_to - search_from)))


def steps_apart(space: SearchSpace | None, others: Iterable[tuple[str, Any, Any]]) -> list[tuple[str, int]]:
    """The ordered parameters among `others` whose two values lie two or more steps apart along
    the parameter's range in `space`, with how many."""
    if space is None:
        return []
    far = []
    for name, ours, best in others:
        parameter = space.parameter(name) if name in space.names else None
        if parameter is None or not parameter.ordered:
            continue
        try:
            steps = abs(parameter.index_of(ours) - parameter.index_of(best))
        except ValueError:  # a value outside the range (read from another space)
            continue
        if steps >= 2:
            far.append((name, steps))
    return far


def stopped_short(summaries: Iterable[ProblemSummary], runs: Iterable[Run],
                  read_spaces: Callable[[list[int]], Mapping[int, SearchSpace]] | None = None) -> list[StoppedShort]:
    """The cold pattern-family runs (current sources) that ended more than WITHIN over the best
    anyone found at their problem, by problem then strategy then seed; `read_spaces` gives the
    sessions' spaces (which parameters are ordered), read for these runs only."""
    by_problem = {s.problem: s for s in summaries}
    found = []
    for run in runs:
        summary = by_problem.get(run.problem)
        if (summary is None or run.arm != d.COLD or not run.strategy.startswith("pattern")
                or kept_apart(run.strategy) or run.final_ms is None or run.final_params is None
                or summary.best_ms is None or summary.best_params is None):
            continue
        if run.final_ms > summary.best_ms * (1 + d.WITHIN):
            swaps, others = differences(run.final_params, summary.best_params)
            found.append(StoppedShort(run, summary.best_ms, swaps, others,
                                      last_gain=last_gain(run.curve, run.setup_s, run.wall_s)))
    spaces = read_spaces([s.run.session_id for s in found]) if read_spaces and found else {}
    for stop in found:
        stop.far = steps_apart(spaces.get(stop.run.session_id), stop.others)
    order = {p: i for i, p in enumerate(d.PROBLEMS)}
    return sorted(found, key=lambda s: (order.get(s.run.problem, len(order)), s.run.strategy, s.run.seed))


def stops_section(stops: Sequence[StoppedShort]) -> list[str]:
    """The report's section: one row per run that stopped short, how many were a swap or a few
    steps away, and how many were still climbing when their search ended."""
    lines = ["## Where the cold walks that stopped short stopped", "",
             f"Every cold pattern run (each strategy's current source) whose answer is more than {d.WITHIN:.0%} over "
             "the best anyone found at its shape, with the parameters that separate its answer from that best. "
             "**swaps** are two elements of one list parameter whose values the two configs exchange: a "
             "single-parameter walk needs two moves for each. **steps apart** are ordered parameters (block sizes, "
             "warps, stages) whose two values lie two or more steps apart along the parameter's range: a walk of "
             "single steps passes every value between. **ended by** is why the run's session ended (its search "
             "limit, the config budget, or the walk itself); **last gain** the share of its search (from its evaluator "
             f"ready to its last config measured) gone when its best so far first came within {GAIN:.1%} of where it "
             "ended: late, the run was still climbing when it was cut; early, it stood on its answer for the rest "
             "(`experiments/heldout/stops.py`).", ""]
    if not stops:
        return lines + ["None.", ""]
    with_swap = sum(1 for s in stops if s.swaps)
    swap_alone = sum(1 for s in stops if s.swaps and not s.others)
    apart = statistics.median(s.moves for s in stops)
    within_reach = sum(1 for s in stops if any(steps <= LINE_REACH for _, steps in s.far))
    lines += [f"{len(stops)} such runs: {with_swap} differ from the best by at least one swap, {swap_alone} by swaps "
              f"alone; the median run is {apart:g} single-parameter moves from the best (a swap counts as two). "
              f"{within_reach} have an ordered parameter two to {LINE_REACH} steps from the best's value (as far as "
              "`pattern-lines` looks before a path stops). " + _endings(stops), "",
              "| shape | strategy | seed | session | answer / best | ended by | last gain | swaps | steps apart | "
              "other differences (run → best) |",
              "|---|---|---:|---:|---:|---|---:|---|---|---|"]
    for s in stops:
        swaps = ", ".join(f"{a} ↔ {b}" for a, b in s.swaps) or "-"
        far = ", ".join(f"{name}: {steps}" for name, steps in s.far) or "-"
        others = ", ".join(f"{name}: {_show(ours)} → {_show(best)}" for name, ours, best in s.others) or "-"
        lines.append(f"| {s.run.problem.shape} | {s.run.strategy} | {s.run.seed} | {s.run.session_id} | "
                     f"{s.ratio:.3f} | {_ending(s.run.ended_by)} | {_share(s.last_gain)} | {swaps} | {far} | "
                     f"{others} |")
    return lines + [""]


def _endings(stops: Sequence[StoppedShort]) -> str:
    """How the runs ended, and how many were still climbing or had stood on their answer."""
    phrases = {"search limit": "at their search limit", "config budget": "at the config budget",
               "walk ended": "when the walk ended", "not recorded": "with no reason recorded"}
    ended = Counter(_ending(s.run.ended_by) for s in stops)
    how = ", ".join(f"{count} {phrases.get(reason, repr(reason))}" for reason, count in ended.most_common())
    climbing = sum(1 for s in stops if s.last_gain is not None and s.last_gain >= CLIMBING)
    stood = sum(1 for s in stops if s.last_gain is not None and s.last_gain < STOOD)
    return (f"They ended {how}. {climbing} made their last gain in the last {1 - CLIMBING:.0%} of their search "
            f"(still climbing when it ended), {stood} in its first {STOOD:.0%} (standing on their answer for the "
            "rest).")


def _ending(reason: str | None) -> str:
    return ENDINGS.get(reason or "", reason or "not recorded")


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def stops_json(stops: Sequence[StoppedShort]) -> list[dict[str, Any]]:
    """The section's rows for results.json."""
    return [{"kernel": s.run.problem.kernel, "shape": s.run.problem.shape, "dtype": s.run.problem.dtype,
             "strategy": s.run.strategy, "seed": s.run.seed, "session": s.run.session_id,
             "final_ms": s.run.final_ms, "best_ms": s.best_ms, "swaps": [list(pair) for pair in s.swaps],
             "others": [{"parameter": n, "run": r, "best": b} for n, r, b in s.others],
             "steps_apart": [{"parameter": n, "steps": k} for n, k in s.far],
             "ended_by": s.run.ended_by, "last_gain": s.last_gain} for s in stops]


def _show(value: Any) -> str:
    return "''" if value == "" else str(value)
