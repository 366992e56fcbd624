"""The held-out report's tally of a cold walk's points: random draws beside steps and kicks."""

from __future__ import annotations

from types import SimpleNamespace

from autotune.store.cache import EvaluationRow
from autotune.types import Candidate, Result, Status
from experiments.heldout import definition as d
from experiments.heldout.moves import GAIN, KINDS, cold_walks, distance, moves_section, tally_moves

NEAR, DRAW = KINDS
NAMES = "abcde"


def _row(generation: int, values: dict[str, int], ms: float | None, compile_s: float = 1.0) -> EvaluationRow:
    params = {name: values.get(name, 0) for name in NAMES}
    key = "".join(map(str, params.values()))
    result = (Result(key, Status.OK, median_ms=ms, compile_s=compile_s, bench_s=0.5) if ms is not None
              else Result(key, Status.COMPILE_ERROR, compile_s=compile_s, error="boom"))
    return EvaluationRow(session_id=1, generation=generation, ordinal=0, candidate=Candidate(params, {}, key),
                         result=result)


def test_each_point_is_counted_by_its_distance_to_the_nearest_point_measured_before_it():
    every = {name: 2 for name in NAMES}  # five parameters from the default
    rows = [
        _row(0, {}, 10.0),  # the default: where the walk starts, not a move
        _row(1, {"a": 1}, 8.0),  # one parameter: a step, and a new best
        _row(1, {"a": 1, "b": 1, "c": 1, "d": 1}, 30.0),  # three from the step above: near, and slow
        _row(1, every, None),  # five from everything: a draw, failed
        _row(2, {name: 3 for name in NAMES}, 8.0 * (1 - 2 * GAIN)),  # a draw, and a new best
        _row(2, {name: 4 for name in NAMES}, 8.0 * (1 - 2 * GAIN) * (1 - GAIN / 2)),  # a draw, too little better
    ]
    tallies = tally_moves(rows)
    near, draw = tallies[NEAR], tallies[DRAW]
    assert (near.points, near.gains, near.slow, near.failed) == (2, 1, 1, 0)
    assert (draw.points, draw.gains, draw.slow, draw.failed) == (3, 1, 0, 1)
    assert near.seconds == 2 * 1.5 and draw.seconds == 2 * 1.5 + 1.0  # compile + timing (the failure: compile only)
    # A point counts against the best so far, the default's included: slower than twice it is slow.
    assert tally_moves(rows[:1] + [_row(1, {"a": 1}, 21.0)])[NEAR].slow == 1


def test_distance_counts_a_parameter_one_side_lacks():
    assert distance({"a": 1, "b": 2}, {"a": 1, "b": 2}) == 0
    assert distance({"a": 1, "b": 2}, {"a": 1, "b": 3}) == 1
    assert distance({"a": 1}, {"a": 1, "b": None}) == 1


def test_the_section_sums_the_cold_pattern_runs_of_current_sources_per_strategy():
    rows = [_row(0, {}, 10.0), _row(1, {"a": 1}, 8.0), _row(1, {name: 3 for name in NAMES}, 30.0)]
    asked: list[list[int]] = []

    def rows_of(session_ids: list[int]) -> dict[int, list[EvaluationRow]]:
        asked.append(session_ids)
        return {sid: rows for sid in session_ids}

    labels = [(d.COLD, "pattern-full"), (d.COLD, "pattern-full"), (d.WARM_CACHE, "pattern-full"),
              (d.COLD, "pattern (earlier version)"), (d.COLD, "pattern@250ms"), (d.COLD, "evolution")]
    runs = [SimpleNamespace(arm=arm, strategy=strategy, session_id=sid) for sid, (arm, strategy) in enumerate(labels)]
    found = cold_walks(runs, rows_of)
    assert list(found) == ["pattern-full"]
    count, tallies = found["pattern-full"]
    assert count == 2 and tallies[NEAR].points == 2 and tallies[DRAW].points == 2 and tallies[DRAW].slow == 2
    lines = moves_section(found)
    assert "| cold pattern-full | 2 | random draw | 2 | 50% | 3 | 0 | 2 | 0 |" in lines
    assert asked == [[0, 1]]  # the rows of the summed runs alone, read once
