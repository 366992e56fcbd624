"""What a cold pattern walk's random draws cost and found, beside the rest of its points.

A pattern walk measures its paths' steps (a centre's neighbours, and before a path stops its
far-end and left-out moves), and once every path has stopped, an exploration generation: kicks
(a few random single-parameter moves from the best point) and uniform random draws.  Why this
is read back: the draws are the exploration's costly half (a random point of a kernel's space
is often many times slower than the default, or fails), and whether they pay is a question the
recorded runs can answer.

The database does not record which kind of point the strategy meant, and the generations it
records can mix an exploration's points with the next walk's (the session asks ahead).  So a
point's kind is read from its distance (parameters changed) to the nearest point the run had
measured before it: at most `pattern.KICK_STEPS` is a step or a kick (a kick is that many
moves from the best point, whose neighbours were measured), further is a random draw (one that
lands that near a measured point counts with the rest).

Per kind: how many points, what they cost (compile and timing seconds, summed over the
workers), how many failed or ran more than twice the best so far, and how many set a new best
by more than `GAIN`.  Only the cold arm is read: a warm run's seeds put its first points near
the answer, so its moves say less about where a walk from the default finds its gains.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from autotune.store.cache import EvaluationRow
from autotune.strategies.pattern import KICK_STEPS

from . import definition as d
from .data import kept_apart

KINDS = ("step or kick", "random draw")
GAIN = 0.005  # a new best counts when it beats the best so far by more than this (relative)
SLOW = 2.0  # a point counts as slow past this many times the best so far


@dataclass
class MoveTally:
    """The points of one kind in one or more runs."""

    points: int = 0
    seconds: float = 0.0  # compile + timing, summed over the workers
    failed: int = 0
    slow: int = 0  # correct, but more than SLOW times the best so far
    gains: int = 0  # new bests by more than GAIN

    def add(self, other: MoveTally) -> None:
        self.points += other.points
        self.seconds += other.seconds
        self.failed += other.failed
        self.slow += other.slow
        self.gains += other.gains


_MISSING = object()


def _differ(a: Mapping[str, Any], b: Mapping[str, Any]) -> Iterator[str]:
    """The parameters whose values differ (a parameter one side lacks counts as differing)."""
    return (name for name in a.keys() | b.keys() if a.get(name, _MISSING) != b.get(name, _MISSING))


def differing(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The parameters whose values differ, by name (`_differ`)."""
    return sorted(_differ(a, b))


def distance(a: Mapping[str, Any], b: Mapping[str, Any]) -> int:
    """How many parameters' values differ (`_differ`); counted, not listed: the tally calls it for
    every pair of a run's points."""
    return sum(1 for _ in _differ(a, b))


def tally_moves(rows: Sequence[EvaluationRow]) -> dict[str, MoveTally]:
    """Each search point (generation 1 on: the given points of generation 0 are where the walk
    starts, not moves) by its distance to the nearest point measured before it, in the order
    `rows` were measured."""
    tallies = {kind: MoveTally() for kind in KINDS}
    measured: list[Mapping[str, Any]] = []
    best_ms = float("inf")
    for row in rows:
        params = row.candidate.params
        if row.generation >= 1 and measured:
            near = _within(params, measured, KICK_STEPS)
            best_ms = _count(tallies[KINDS[0] if near else KINDS[1]], row.result, best_ms)
        elif row.result.ok:
            best_ms = min(best_ms, row.result.median_ms)
        measured.append(params)
    return tallies


def _count(tally: MoveTally, result: Any, best_ms: float) -> float:
    """Add one point to `tally`; the best so far after it."""
    tally.points += 1
    tally.seconds += (result.compile_s or 0.0) + (result.bench_s or 0.0)
    if not result.ok:
        tally.failed += 1
        return best_ms
    if result.median_ms > SLOW * best_ms:
        tally.slow += 1
    elif result.median_ms < best_ms * (1 - GAIN):
        tally.gains += 1
    return min(best_ms, result.median_ms)


def _within(params: Mapping[str, Any], measured: Sequence[Mapping[str, Any]], reach: int) -> bool:
    """At most `reach` parameters from a measured point (the newest looked at first: a walk's
    centres are recent)."""
    return any(distance(params, other) <= reach for other in reversed(measured))


def moves_section(by_strategy: Mapping[str, tuple[int, Mapping[str, MoveTally]]]) -> list[str]:
    """The report's table: per strategy (its runs summed) and kind of point."""
    lines = ["## What the cold walks' random draws cost and found", "",
             "Every point our cold pattern runs measured after their start (the runs of each strategy's current "
             "source, summed over the softmax shapes), by its distance to the nearest point the run had measured "
             f"before it: at most {KICK_STEPS} parameters (**step or kick**: its paths' steps and the explorations' "
             "kicks from the best point) or further (**random draw**: the explorations' uniform draws). **new "
             f"bests** are the points that beat the run's best so far by more than {GAIN:.1%}; **slow** the correct "
             f"ones more than {SLOW:g}x its best so far; **compile + timing s** is summed over the compile workers, "
             "so it is more than the wall time it took (`experiments/heldout/moves.py`).", "",
             "| strategy | runs | kind of point | points | share | compile + timing s | failed | slow | new bests |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for strategy, (runs, tallies) in by_strategy.items():
        total = sum(t.points for t in tallies.values()) or 1
        for kind in KINDS:
            t = tallies[kind]
            lines.append(f"| cold {strategy} | {runs} | {kind} | {t.points} | {t.points / total:.0%} | "
                         f"{t.seconds:.0f} | {t.failed} | {t.slow} | {t.gains} |")
    return lines + [""]


def cold_walks(runs: Iterable[Any], rows_of: Callable[[list[int]], Mapping[int, Sequence[EvaluationRow]]]
               ) -> dict[str, tuple[int, dict[str, MoveTally]]]:
    """The cold pattern-family runs' tallies, summed per strategy label (current sources only:
    `data.kept_apart` labels are runs of an earlier version or another timing target).
    `rows_of` reads those runs' search rows in the order they were measured (`data.search_rows`)."""
    walks = [run for run in runs if run.arm == d.COLD and run.strategy.startswith("pattern")
             and not kept_apart(run.strategy)]
    rows = rows_of([run.session_id for run in walks])
    found: dict[str, tuple[int, dict[str, MoveTally]]] = {}
    for run in walks:
        count, tallies = found.setdefault(run.strategy, (0, {kind: MoveTally() for kind in KINDS}))
        for kind, tally in tally_moves(rows[run.session_id]).items():
            tallies[kind].add(tally)
        found[run.strategy] = (count + 1, tallies)
    return dict(sorted(found.items()))
