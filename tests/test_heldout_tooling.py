"""experiments.heldout.tooling: runs of one strategy before and after the worker-built tooling,
paired by shape and seed, and the generation pace read from their rows."""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

import pytest

from autotune.store.cache import EvaluationRow
from autotune.types import Candidate, Result, Status
from conftest import hashed_cost
from experiments.heldout import definition as d
from experiments.heldout.analysis import summarise
from experiments.heldout.data import load_runs, search_rows
from experiments.heldout.tooling import Pace, tooling_json, tooling_pairs, tooling_section
from heldout_records import record_run, small_study


def _row(session: int, generation: int, created: float, compile_s: float | None, bench_s: float | None):
    key = f"{session}-{generation}-{created}"
    return EvaluationRow(session, generation, 0, Candidate({}, {}, key),
                         Result(key=key, status=Status.OK, median_ms=1.0, compile_s=compile_s, bench_s=bench_s),
                         created=created)


def test_the_pace_is_read_per_generation_from_each_runs_rows():
    """Generation lengths run from one generation's last row to the next's (the first generation,
    the default config's, only starts the clock), per run; the slowest compile is each later
    generation's longest."""
    rows = {1: [_row(1, 0, 100.0, 0.5, 0.05), _row(1, 1, 101.0, 0.4, 0.05), _row(1, 1, 102.0, 1.5, 0.07),
                _row(1, 2, 103.0, 0.9, 0.04)],
            2: [_row(2, 0, 500.0, None, None), _row(2, 1, 504.0, 3.0, 0.06)]}
    runs = [SimpleNamespace(session_id=1), SimpleNamespace(session_id=2)]  # all Pace reads of a run
    pace = Pace.of(runs, rows)
    assert pace.generation_s == pytest.approx(2.0)  # lengths 2 (100 -> 102), 1 (102 -> 103), 4 (500 -> 504)
    assert pace.slowest_compile_s == pytest.approx(1.5)  # 1.5, 0.9 and 3.0
    assert pace.bench_s == pytest.approx(0.05)  # 0.05, 0.05, 0.07, 0.04, 0.06
    assert Pace.of(runs, {}) == Pace(None, None, None)


def test_runs_before_and_after_the_tooling_are_paired_by_strategy_and_seed(tmp_path):
    problem, task, db, cache = small_study(tmp_path)
    costs = lambda p: 1.0 + hashed_cost(p)  # noqa: E731
    other = lambda p: 3.0 - hashed_cost(p)  # noqa: E731 - ranks the configs the other way round
    for seed in (1, 2):
        record_run(cache, task, arm=d.COLD, strategy="pattern", seed=seed, setup_s=1.0, costs=costs)
    record_run(cache, task, arm=d.COLD, strategy="pattern", seed=1, setup_s=1.0, costs=costs, worker_built=True)
    record_run(cache, task, arm=d.COLD, strategy="pattern", seed=2, setup_s=1.0, costs=other, worker_built=True)
    record_run(cache, task, arm=d.COLD, strategy="evolution", seed=1, setup_s=1.0, costs=costs, worker_built=True)
    cache.close()
    summaries = summarise(load_runs(db, None), (problem,))
    (pair,) = tooling_pairs(summaries, partial(search_rows, db, None))  # evolution ran one way only
    assert (pair.problem, pair.arm, pair.strategy, pair.seeds) == (problem, d.COLD, "pattern", [1, 2])
    assert pair.after.strategy == "pattern" + d.WORKER_BUILT
    assert pair.same_answer == 1  # the same costs lead seed 1 to the same answer; seed 2's were reversed
    assert all(pace.generation_s is not None and pace.generation_s > 0 for pace in pair.pace)
    text = "\n".join(tooling_section([pair], summaries))
    assert f"| {problem.shape} | cold pattern | 2 |" in text and "| 1 of 2 |" in text
    assert "median over the 1 rows" in text
    (record,) = tooling_json([pair])
    assert record["same_answer"] == 1 and record["pace_after"]["generation_s"] == pair.pace[1].generation_s
    assert tooling_section([], summaries) == []


def test_runs_that_compiled_ahead_are_paired_with_the_tooling_before_theirs(tmp_path):
    """Each tooling is read against the one before it: a compiled-ahead run against the
    worker-built run of its seed (not the runs before both), in a section of its own."""
    problem, task, db, cache = small_study(tmp_path)
    costs = lambda p: 1.0 + hashed_cost(p)  # noqa: E731
    record_run(cache, task, arm=d.COLD, strategy="pattern", seed=1, setup_s=1.0, costs=costs)
    record_run(cache, task, arm=d.COLD, strategy="pattern", seed=1, setup_s=1.0, costs=costs, worker_built=True)
    record_run(cache, task, arm=d.COLD, strategy="pattern", seed=1, setup_s=1.0, costs=costs, worker_built=True,
               compiled_ahead=True)
    cache.close()
    summaries = summarise(load_runs(db, None), (problem,))
    built, ahead = tooling_pairs(summaries, partial(search_rows, db, None))
    assert (built.strategy, built.mark, ahead.strategy, ahead.mark) == (
        "pattern", d.WORKER_BUILT, "pattern" + d.WORKER_BUILT, d.COMPILED_AHEAD)
    assert ahead.before.runs[0].session_id == built.after.runs[0].session_id
    text = "\n".join(tooling_section([built, ahead], summaries))
    assert text.index("## What loading the compile workers' code changed") < \
        text.index("## What compiling the next generation ahead changed")
    assert f"| {problem.shape} | cold pattern (worker-built) | 1 |" in text
    assert [record["tooling"] for record in tooling_json([built, ahead])] == ["(worker-built)", "(compiled ahead)"]
