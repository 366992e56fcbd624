"""The held-out experiment on a CPU: its shapes are held out (of cache.db and of the rules), and
which recorded runs count: a run cut short is listed as unfinished, and one of an earlier
strategy source, seed source or timing target is kept apart and planned again."""

from __future__ import annotations

import json
import re

import pytest
import torch

from autotune.store.cache import Cache
from autotune.experiment import experiment_tags
from autotune.kernels import get_kernel
from autotune.seeds import collect_seeds
from autotune.strategies import strategy_source
from autotune.task import bind_live
from conftest import REPO, hashed_cost
from experiments.heldout import analysis
from experiments.heldout import definition as d
from experiments.heldout import verdicts
from experiments.heldout import runner
from experiments.heldout.report import as_json, superseded_section
from experiments.heldout.data import (EARLIER, EARLIER_SEEDS, kept_apart, load_every_run, load_runs, recorded_keys,
                                      run_key, standing, superseded)
from experiments.heldout.isolation import foreign_sessions, without_study

from heldout_records import RETIMED, costs_for, record_run, small_study


def test_the_declared_problems_have_no_session_of_their_kernel_in_the_shipped_data(shipped_db):
    shipped = Cache.open(shipped_db, migrate=False)
    try:
        sessions = shipped.sessions(limit=1_000_000)
        at = {(s["kernel"], "x".join(map(str, s["shape"])), s["dtype"]) for s in sessions
              if experiment_tags(s["options"]).get("study") != d.STUDY}
        for problem in d.PROBLEMS:
            assert (problem.kernel, problem.shape, problem.dtype) not in at, problem.label
        assert foreign_sessions(shipped, d.PROBLEMS) == []
        # the check can fail: a recorded shape is found
        recorded = d.Problem("softmax", "4096x32000", "float16")
        assert foreign_sessions(shipped, [recorded]) and ("softmax", "4096x32000", "float16") in at
    finally:
        shipped.close()
    with without_study(shipped_db) as seed_data:  # what the warm-cache arm's seeds read
        copy = Cache.open(seed_data, migrate=False)
        try:
            for problem in d.PROBLEMS:  # nothing a cache seed could read at the problem itself
                spaces = copy.find_spaces(problem.kernel, problem.dims, problem.dtype)
                assert not [s for s in spaces if s.evaluations], problem.label
        finally:
            copy.close()


def _named_shapes(text: str) -> set[str]:
    """Every shape a module's text names: 4096x32000, 131072x512x512, [1024, 50257]."""
    found = set(re.findall(r"\b\d{3,}(?:x\d+){1,2}\b", text))
    found |= {"x".join(m.replace(" ", "").split(",")) for m in re.findall(r"\[(\d{3,}(?:, ?\d+){1,2})\]", text)}
    return found


def test_the_declared_shapes_are_none_the_rules_name_or_the_seed_study_measured():
    named = set()
    for module in sorted((REPO / "heuristics").glob("*.py")):
        named |= _named_shapes(module.read_text())
    assert {"4096x32000", "1024x50257", "131072x512x512"} <= named  # the parser finds the fitted shapes
    # Only the shapes a rule was declared revised after may be named (and they are).
    assert {p.shape for p in d.PROBLEMS} & named == set(d.SEEN_BY_REVISIONS)
    # The shapes that judge the latest change of each rule or strategy: the row rule's third revision,
    # pattern-ends, pattern-full, the cache source (12288x10000: the third revision was fitted on 1024x196608, a
    # rule the cache source does not read) and the resident matmul rule's third revision.
    judging = (set(d.FEW_ROWS_SHAPES) | set(d.ENDS_SHAPES) | set(d.FULL_SHAPES) | {"12288x10000"}
               | {p.shape for p in d.MATMUL_THIRD})
    assert not judging & set(d.SEEN_BY_REVISIONS)
    from experiments.seed_study.definition import CELLS

    assert not {p.shape for p in d.MATMUL} & {c.shape for c in CELLS}
    assert len(d.SOFTMAX) >= 6 and len(d.MATMUL_FIRST) == len(d.MATMUL_REVISED) == len(d.MATMUL_HOST_DESCRIPTORS) \
        == len(d.MATMUL_THIRD) == 4
    assert len(set(d.PROBLEMS)) == len(d.PROBLEMS)


def test_sessions_interrupted_or_never_ended_are_listed_as_unfinished(tmp_path):
    from experiments.heldout.data import load_unfinished

    _, task, db, cache = small_study(tmp_path)
    record_run(cache, task, arm=d.COLD, strategy="pattern", seed=1, setup_s=1.0, costs=lambda p: 1.0 + hashed_cost(p),
            interrupt=3)
    record_run(cache, task, arm=d.COLD, strategy="pattern", seed=2, setup_s=1.0, costs=lambda p: 1.0 + hashed_cost(p))
    record_run(cache, task, arm=d.COLD, strategy="pattern", seed=3, setup_s=1.0, costs=lambda p: 1.0 + hashed_cost(p))
    killed = max(s["id"] for s in cache.sessions())
    cache.db.execute("UPDATE sessions SET ended = NULL, exit_reason = NULL WHERE id = ?", (killed,))
    cache.db.conn.commit()
    cache.close()
    interrupted, never_ended = load_unfinished(db, None)
    assert (interrupted.seed, interrupted.after_s, interrupted.reason) == (1, None, "interrupted")
    assert never_ended.seed == 3 and never_ended.reason.startswith("never ended")
    assert [run.seed for run in load_runs(db, None)] == [2]


def test_a_run_timed_under_another_target_is_kept_apart_and_run_again(tmp_path):
    """A cold run recorded under the old 250 ms timing target is reported as its own strategy
    ('pattern@250ms'), and the study's cold pattern run is still planned."""
    problem, task, db, cache = small_study(tmp_path)
    record_run(cache, task, arm=d.COLD, strategy="pattern", seed=1, setup_s=1.0, costs=lambda p: 1.0 + hashed_cost(p),
            timing_ms=250.0)
    cache.close()
    key = run_key(problem, d.COLD, "pattern", 1)
    recorded = recorded_keys(db, None)
    assert recorded == {run_key(problem, d.COLD, "pattern@250ms", 1)} and key not in recorded
    plan = runner.Plan(problems=(problem,), arms=(d.COLD,), strategies=("pattern",), seeds=(1,), shipped=None)
    assert [(j.arm, j.strategy, j.seed) for j in runner.plan_jobs(plan, recorded)] == [(d.COLD, "pattern", 1)]
    (run,) = load_runs(db, None)
    assert run.strategy == "pattern@250ms"


def test_runs_that_loaded_the_compile_workers_code_are_judged_apart_and_planned_by_their_own_label(tmp_path):
    """A run whose benchmark process loaded its compile workers' code is faster tooling than the
    runs recorded before it: labelled ' (worker-built)', never standing for (nor stood for by) a
    run of the same strategy and seed without it, and not kept apart from the targets.  A plan
    for that tooling counts only such runs as recorded."""
    problem, task, db, cache = small_study(tmp_path)
    costs = lambda p: 1.0 + hashed_cost(p)  # noqa: E731
    record_run(cache, task, arm=d.COLD, strategy="pattern", seed=1, setup_s=1.0, costs=costs)
    record_run(cache, task, arm=d.COLD, strategy="pattern", seed=2, setup_s=1.0, costs=costs, worker_built=True)
    cache.close()
    built = "pattern" + d.WORKER_BUILT
    recorded = recorded_keys(db, None)
    assert recorded == {run_key(problem, d.COLD, "pattern", 1), run_key(problem, d.COLD, built, 2)}
    assert not kept_apart(built)
    plan = runner.Plan(problems=(problem,), arms=(d.COLD,), strategies=("pattern",), seeds=(1, 2), shipped=None)
    assert [(j.strategy, j.seed) for j in runner.plan_jobs(plan, recorded)] == [("pattern", 2)]
    worker_built = runner.replace(plan, worker_built=True)
    (job,) = runner.plan_jobs(worker_built, recorded)
    assert (job.strategy, job.seed, job.label, job.key[4]) == ("pattern", 1, built, built)
    assert built in job.describe()
    assert sorted((run.strategy, run.seed) for run in load_runs(db, None)) == [("pattern", 1), (built, 2)]


def test_runs_that_compiled_ahead_are_judged_apart_from_those_that_only_loaded_the_workers_code(tmp_path):
    """Compiling the next generation ahead is faster tooling again: its runs carry both marks, in
    the order the tooling came, and a plan under it counts only its own runs as recorded."""
    problem, task, db, cache = small_study(tmp_path)
    costs = lambda p: 1.0 + hashed_cost(p)  # noqa: E731
    record_run(cache, task, arm=d.COLD, strategy="pattern", seed=1, setup_s=1.0, costs=costs, worker_built=True)
    record_run(cache, task, arm=d.COLD, strategy="pattern", seed=2, setup_s=1.0, costs=costs, worker_built=True,
               compiled_ahead=True)
    cache.close()
    built, ahead = "pattern" + d.WORKER_BUILT, "pattern" + d.WORKER_BUILT + d.COMPILED_AHEAD
    recorded = recorded_keys(db, None)
    assert recorded == {run_key(problem, d.COLD, built, 1), run_key(problem, d.COLD, ahead, 2)}
    assert not kept_apart(ahead)
    plan = runner.Plan(problems=(problem,), arms=(d.COLD,), strategies=("pattern",), seeds=(1, 2), shipped=None,
                       worker_built=True, compiled_ahead=True)
    (job,) = runner.plan_jobs(plan, recorded)
    assert (job.seed, job.label, job.key[4]) == (1, ahead, ahead)
    assert [j.seed for j in runner.plan_jobs(runner.replace(plan, compiled_ahead=False), recorded)] == [2]


def test_a_run_of_a_changed_strategy_is_kept_apart_and_run_again(tmp_path, monkeypatch):
    """A run recorded by another version of the strategy's source (or before sessions recorded
    it) is reported as '(earlier version)', and the study's run with today's strategy is planned;
    unless that source is declared in `lineage.PROVEN_SAME` against today's (a change whose
    recorded runs re-ran identically): then it counts as today's and nothing is planned."""
    from autotune.strategies import lineage

    problem = d.Problem("softmax-triton", "64x1000", "float16")
    task = bind_live(get_kernel(problem.kernel), problem.dims, torch.float16, "cpu")
    db = tmp_path / "h.db"
    cache = Cache.open(db, create=True)
    record_run(cache, task, arm=d.COLD, strategy="pattern", seed=1, setup_s=1.0, costs=lambda p: 1.0 + hashed_cost(p),
            source="0" * 24)
    record_run(cache, task, arm=d.COLD, strategy="evolution", seed=1, setup_s=1.0, costs=lambda p: 1.0 + hashed_cost(p))
    cache.close()
    recorded = recorded_keys(db, None)
    assert recorded == {run_key(problem, d.COLD, "pattern" + EARLIER, 1), run_key(problem, d.COLD, "evolution", 1)}
    plan = runner.Plan(problems=(problem,), arms=(d.COLD,), strategies=("pattern", "evolution"), seeds=(1,),
                       shipped=None)
    assert [(j.arm, j.strategy, j.seed) for j in runner.plan_jobs(plan, recorded)] == [(d.COLD, "pattern", 1)]
    monkeypatch.setattr(lineage, "PROVEN_SAME", {"pattern": {strategy_source("pattern"): ("0" * 24,)}})
    recorded = recorded_keys(db, None)
    assert recorded == {run_key(problem, d.COLD, "pattern", 1), run_key(problem, d.COLD, "evolution", 1)}
    assert runner.plan_jobs(plan, recorded) == []


def test_a_warm_run_seeded_by_an_earlier_seed_source_is_kept_apart_and_run_again(tmp_path):
    """Warm runs recorded before their seed source's last change (`definition.SEEDS_VERSION`) are
    an earlier version of the arm where that change alters their seeds: reported apart, and the
    run is planned again.  Warm-heuristic runs at rows too short for the revised two-pass seeds
    had the present seeds and stay current."""
    from heuristics.row_reduction import LONG_ROW

    long_row = d.Problem("softmax-triton", f"64x{LONG_ROW}", "float16")
    short_row = d.Problem("softmax-triton", f"64x{LONG_ROW - 1}", "float16")
    db = tmp_path / "h.db"
    cache = Cache.open(db, create=True)
    for problem in (long_row, short_row):
        task = bind_live(get_kernel(problem.kernel), problem.dims, torch.float16, "cpu")
        for arm in d.WARM_ARMS:
            runs = ((1, {}, None), (2, {"seeds": d.seeds_version(problem, arm)}, None), (1, {}, "0" * 24))
            for seed, extra, source in runs:
                record_run(cache, task, arm=arm, strategy="pattern", seed=seed, setup_s=1.0, seed_from=d.SEED_FROM[arm],
                        costs=lambda p: 1.0 + hashed_cost(p), extra=extra, source=source)
    cache.close()
    # Seed 1 twice, once also by an earlier pattern search: two runs, neither hiding the other.
    earlier = {run_key(problem, arm, label, 1) for problem, arm in
               ((long_row, d.WARM_HEURISTIC), (long_row, d.WARM_CACHE), (short_row, d.WARM_CACHE))
               for label in ("pattern" + EARLIER_SEEDS, "pattern" + EARLIER + EARLIER_SEEDS)}
    current = {run_key(problem, arm, "pattern", 2) for problem in (long_row, short_row) for arm in d.WARM_ARMS}
    same_seeds = {run_key(short_row, d.WARM_HEURISTIC, "pattern", 1),
                  run_key(short_row, d.WARM_HEURISTIC, "pattern" + EARLIER, 1)}
    assert recorded_keys(db, None) == earlier | current | same_seeds
    plan = runner.Plan(problems=(long_row, short_row), arms=d.WARM_ARMS, strategies=("pattern",), seeds=(1, 2),
                       shipped=None)
    assert [(j.problem, j.arm, j.seed) for j in runner.plan_jobs(plan, recorded_keys(db, None))] == [
        (long_row, d.WARM_HEURISTIC, 1), (long_row, d.WARM_CACHE, 1), (short_row, d.WARM_CACHE, 1)]


def test_runs_of_the_row_rules_second_revision_are_earlier_only_where_rows_are_few_and_long(tmp_path):
    """The row rule's third revision changed the warm-heuristic seeds only with few long rows
    (`heuristics.row_reduction.few_long_rows`): a run recorded under the second revision's seeds is
    kept apart and planned again there, and stays current where rows are many."""
    from heuristics.device import H100_SM_COUNT
    from heuristics.row_reduction import LONG_ROW, PERSISTENT_MAX_ROWS_PER_SM, few_long_rows

    many = PERSISTENT_MAX_ROWS_PER_SM * H100_SM_COUNT + 1
    few_rows = d.Problem("softmax-triton", f"64x{LONG_ROW}", "float16")
    many_rows = d.Problem("softmax-triton", f"{many}x{LONG_ROW}", "float16")
    assert few_long_rows(64, LONG_ROW, H100_SM_COUNT) and not few_long_rows(many, LONG_ROW, H100_SM_COUNT)
    db = tmp_path / "h.db"
    cache = Cache.open(db, create=True)
    for problem in (few_rows, many_rows):
        task = bind_live(get_kernel(problem.kernel), problem.dims, torch.float16, "cpu")
        for seed, version in ((1, d.TWO_PASS_SEEDS), (2, d.seeds_version(problem, d.WARM_HEURISTIC))):
            record_run(cache, task, arm=d.WARM_HEURISTIC, strategy="pattern", seed=seed, setup_s=1.0,
                    seed_from=d.SEED_FROM[d.WARM_HEURISTIC], costs=lambda p: 1.0 + hashed_cost(p),
                    extra={"seeds": version})
    cache.close()
    assert d.seeds_version(few_rows, d.WARM_HEURISTIC) != d.TWO_PASS_SEEDS
    # The fitted shapes are exactly the declared ones with few long rows before the judging shapes.
    earlier = d.SOFTMAX[:d.SOFTMAX_SHAPES.index(d.FEW_ROWS_SHAPES[0])]
    assert {p.shape for p in earlier if few_long_rows(*p.dims, H100_SM_COUNT)} == set(d.FEW_ROWS_FITTED)
    assert all(few_long_rows(*d.Problem("softmax", s, "float16").dims, H100_SM_COUNT) for s in d.FEW_ROWS_SHAPES)
    assert recorded_keys(db, None) == {run_key(few_rows, d.WARM_HEURISTIC, "pattern" + EARLIER_SEEDS, 1),
                                       run_key(few_rows, d.WARM_HEURISTIC, "pattern", 2),
                                       run_key(many_rows, d.WARM_HEURISTIC, "pattern", 1),
                                       run_key(many_rows, d.WARM_HEURISTIC, "pattern", 2)}
    plan = runner.Plan(problems=(few_rows, many_rows), arms=(d.WARM_HEURISTIC,), strategies=("pattern",),
                       seeds=(1, 2), shipped=None)
    assert [(j.problem, j.seed) for j in runner.plan_jobs(plan, recorded_keys(db, None))] == [(few_rows, 1)]
    # Runs recorded before the second revision are earlier at every long row, few or many.
    assert d.seeds_changed_at(many_rows, d.WARM_HEURISTIC, None)
    assert not d.seeds_changed_at(d.Problem("softmax", f"64x{LONG_ROW - 1}", "float16"), d.WARM_HEURISTIC, None)


def test_matmul_runs_seeded_before_the_resident_rules_third_revision_are_kept_apart(tmp_path):
    """At the matmul cells the warm-heuristic arm's seeds changed with each revision of the resident
    rule (`definition.MATMUL_SEEDS_VERSION`); the third added seeds at every cell, so a run of any
    earlier version is earlier.  Two earlier versions' runs of one seed share the key '(earlier
    seeds)': the later stands in the figures and the earlier is listed as recorded again, yet the
    figure read by version still finds it, and its answer still counts towards the best found."""
    problem = d.Problem("matmul-rmsnorm", "256x64x128", "bfloat16")
    db = tmp_path / "h.db"
    cache = Cache.open(db, create=True)
    task = bind_live(get_kernel(problem.kernel), problem.dims, torch.bfloat16, "cpu")
    heuristic = collect_seeds(task, None, ["heuristic"])
    present = d.seeds_version(problem, d.WARM_HEURISTIC)
    # Recorded in this order: an untagged run (the first seed source), one tagged with the softmax
    # arm's version, the present one, the first revision's and then the second's under one seed.
    # The first revision's run alone finds a faster default: the best anyone found.
    fast_default = costs_for(task, [(task.space.default, 0.5)])
    for seed, version in ((4, None), (1, d.SEEDS_VERSION[d.WARM_HEURISTIC]), (2, present),
                          (3, d.MATMUL_FIRST_REVISION), (3, d.MATMUL_SECOND_REVISION)):
        record_run(cache, task, arm=d.WARM_HEURISTIC, strategy="pattern", seed=seed, setup_s=1.0, seeds=heuristic,
                seed_from=d.SEED_FROM[d.WARM_HEURISTIC],
                costs=fast_default if version == d.MATMUL_FIRST_REVISION else lambda p: 1.0 + hashed_cost(p),
                extra={} if version is None else {"seeds": version})
    cache.close()
    assert len({present, d.MATMUL_FIRST_REVISION, d.MATMUL_SECOND_REVISION, d.SEEDS_VERSION[d.WARM_HEURISTIC]}) == 4
    for version in (None, d.SEEDS_VERSION[d.WARM_HEURISTIC], d.MATMUL_FIRST_REVISION, d.MATMUL_SECOND_REVISION):
        assert d.seeds_changed_at(problem, d.WARM_HEURISTIC, version)
    assert recorded_keys(db, None) == {run_key(problem, d.WARM_HEURISTIC, "pattern" + EARLIER_SEEDS, 4),
                                       run_key(problem, d.WARM_HEURISTIC, "pattern" + EARLIER_SEEDS, 1),
                                       run_key(problem, d.WARM_HEURISTIC, "pattern", 2),
                                       run_key(problem, d.WARM_HEURISTIC, "pattern" + EARLIER_SEEDS, 3)}
    every = load_every_run(db, None)
    by = {(run.seed, run.seeds_tag): run for run in every}
    assert len(every) == 5 and [r.session_id for r in load_runs(db, None)] == [
        by[key].session_id for key in ((4, None), (1, d.SEEDS_VERSION[d.WARM_HEURISTIC]), (2, present),
                                       (3, d.MATMUL_SECOND_REVISION))]
    first, second = by[(3, d.MATMUL_FIRST_REVISION)], by[(3, d.MATMUL_SECOND_REVISION)]
    assert superseded(every) == [(first, second.session_id)]
    (summary,) = analysis.summarise(standing(every), problems=(problem,), every_run=every)
    # The CPU space offers the three program orders: the rule gives three seeds, the figure their fastest.
    assert by[(2, present)].rule_seeds == 3 and summary.seed.kind == "fastest of 3 rule seeds"
    assert summary.seed.runs == 1 and summary.seed.ms == by[(2, present)].rule_ms is not None
    assert summary.seed_recorded_as(d.MATMUL_FIRST_REVISION).ms == first.rule_ms is not None
    assert summary.seed_recorded_as(d.MATMUL_SECOND_REVISION).ms == second.rule_ms is not None
    # The earlier figure reads the latest earlier version alone, never a median across two.
    assert summary.earlier_seed.runs == 1 and summary.earlier_seed.ms == second.rule_ms
    assert summary.best_run.session_id == first.session_id and summary.best_ms == pytest.approx(0.5 * RETIMED)
    verdict = verdicts._seed_target([summary], (problem,), "cells")
    ratio = summary.seed.ms / summary.best_ms
    assert ratio > 1 + d.SEED_NEAR and verdict.details == [
        f"{problem.label}: fastest of 3 rule seeds {ratio:.3f}x the best found: not met"]
    # The report lists the run recorded again, with its own final time; results.json too.
    text = "\n".join(superseded_section(superseded(every)))
    assert text.startswith("## Runs recorded again")
    assert f"| {problem.label} | warm-heuristic pattern (earlier seeds) | 3 | {first.session_id} | " \
           f"{first.final_ms * 1000:.1f} | {first.wall_s:.0f} | {second.session_id} |" in text
    (row,) = as_json([summary], [verdict], again=superseded(every))["superseded"]
    assert (row["session"], row["stands_instead"], row["final_ms"]) == (first.session_id, second.session_id,
                                                                        first.final_ms)
    assert superseded_section([]) == []


def test_the_cache_stage_fit_changes_the_seeds_exactly_where_they_ran_out_of_shared_memory(shipped_db):
    """`definition.cache_stages_cut` (where the stage fit changes the cache seeds) names exactly the
    shapes at which a warm-cache run under the earlier cache source had a cache seed run out of
    shared memory, read from the shipped data with plain SQL; runs there are earlier seeds, runs
    elsewhere keep their seeds, and runs of older sources are earlier everywhere."""
    import sqlite3

    conn = sqlite3.connect(f"file:{shipped_db}?mode=ro", uri=True)
    try:
        failed = {"x".join(map(str, json.loads(shape))) for (shape,) in conn.execute(
            "SELECT DISTINCT s.shape FROM evaluations e JOIN sessions s ON s.id = e.session_id"
            " WHERE e.origin = 'cache' AND e.status = 'out_of_resources' AND e.error LIKE '%shared memory%'"
            " AND json_extract(s.options, '$.experiment.study') = ?"
            " AND json_extract(s.options, '$.experiment.seeds') = ?",
            (d.STUDY, d.CARRIED_PER_NEAREST))}
    finally:
        conn.close()
    assert failed and failed == {p.shape for p in d.SOFTMAX if d.cache_stages_cut(p)}
    for problem in d.SOFTMAX:
        assert d.seeds_changed_at(problem, d.WARM_CACHE, d.CARRIED_PER_NEAREST) == (problem.shape in failed)
        assert d.seeds_changed_at(problem, d.WARM_CACHE, None)
