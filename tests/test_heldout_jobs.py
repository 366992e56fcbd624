"""The held-out experiment's jobs: our arms measure anew (the warm-cache arm apart, merged home),
Helion quick is timed from its job's start with its pick re-timed, and a failed, cut or
interrupted run is recorded with what it had done."""

from __future__ import annotations

import json
import random
import sqlite3
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from autotune.store.cache import Cache
from autotune.errors import UserError
from autotune.evaluators.fake import FakeEvaluator
from autotune.evaluators.gpu_process import COMPILE_CACHES
from autotune.experiment import experiment_tags
from autotune.kernels import get_kernel
from autotune.session import Session, SessionSettings
from autotune.strategies import get_strategy
from autotune.task import bind_live
from conftest import hashed_cost
from experiments.heldout import analysis
from experiments.heldout import definition as d
from experiments.heldout import jobs as heldout_jobs
from experiments.heldout import runner
from experiments.heldout.data import curve, load_runs, recorded_keys, run_key, search_rows
from experiments.heldout.isolation import without_study

from heldout_records import HELION_LOG, fake_run, helion_log_and_pick, record_run, small_study


def test_our_arms_measure_anew_and_warm_cache_records_apart_then_merges_home(tmp_path, monkeypatch):
    requests: list = []
    monkeypatch.setattr(heldout_jobs, "run_session", fake_run(requests))
    problem = d.Problem("softmax-triton", "64x1000", "float16")
    db = tmp_path / "home.db"
    cold_said = heldout_jobs.ArmJob(problem, d.COLD, "pattern", 2, 50, 30.0, None)(db)
    cold = requests[-1]
    assert cold.db == db and cold.fresh and cold.seed_from == "default" and cold.seed == 2
    assert cold.timing_target_ms == d.TIMING_MS  # the study's, whatever the tool's default
    assert dict(cold.experiment)["arm"] == d.COLD and dict(cold.experiment)["job_started"] <= time.time()
    warm_said = heldout_jobs.ArmJob(problem, d.WARM_CACHE, "pattern", 1, 50, 30.0, None, ("128x1000",))(db)
    warm = requests[-1]
    assert warm.db != db and not warm.db.exists() and warm.seed_from == "default,cache"
    home = Cache.open(db)
    sessions = home.sessions()
    home.close()
    tags = [s["options"]["experiment"] for s in sessions]
    assert [(t["arm"], t.get("cache_from"), t.get("seeds")) for t in tags] == [
        (d.WARM_CACHE, ["128x1000"], d.SEEDS_VERSION[d.WARM_CACHE]), (d.COLD, None, None)]
    # Each job names its session as the home database numbers it: the scratch copy's first
    # session is 1 too, which is the cold run's id here.
    by_arm = {s["options"]["experiment"]["arm"]: s["id"] for s in sessions}
    assert cold_said["session"] == by_arm[d.COLD] == 1
    assert warm_said["session"] == by_arm[d.WARM_CACHE] == 2


def test_a_problem_recorded_in_the_shipped_data_is_refused(tmp_path, triton_task):
    problem = d.Problem("softmax-triton", "64x1000", "float16")
    plan = runner.Plan(problems=(problem,), arms=(d.WARM_CACHE,), shipped=tmp_path / "shipped.db")

    def record(path: Path, task, tags=None) -> None:
        cache = Cache.open(path, create=True)
        Session(task, FakeEvaluator(hashed_cost), get_strategy("random")(task.space, seed=0),
                SessionSettings("random", 0, 2, mode="gpu"), cache, options={"experiment": tags or {}}).run()
        cache.close()

    other = bind_live(get_kernel("softmax-triton"), (128, 1000), torch.float16, "cpu")
    record(plan.shipped, other)
    assert runner.check_held_out(plan) == {problem: ["128x1000"]}  # the nearest other shape seeds it
    record(plan.shipped, triton_task, {"study": d.STUDY})  # this study's own run, merged into the shipped data
    with pytest.raises(UserError, match="would seed itself"):
        runner.check_held_out(plan)  # read as it is, the shipped data would seed the shape from itself
    before = plan.shipped.read_bytes()
    with without_study(plan.shipped) as seed_data:
        seeded = runner.replace(plan, seed_data=seed_data)
        assert runner.check_held_out(seeded) == {problem: ["128x1000"]}  # the study's run is not in the copy
        copy = Cache.open(seed_data, migrate=False)
        assert [s["shape"] for s in copy.sessions()] == [(128, 1000)]
        assert not copy.find_spaces("softmax-triton", (64, 1000), "float16")[0].evaluations
        copy.close()
        jobs = runner.plan_jobs(seeded)
        assert jobs and all(j.arm == d.WARM_CACHE and j.shipped == seed_data for j in jobs)  # seeds read the copy
        cold = runner.plan_jobs(runner.replace(seeded, arms=(d.COLD,)))
        assert cold and all(j.shipped == plan.shipped for j in cold)  # the other arms read the shipped data
    assert plan.shipped.read_bytes() == before and not seed_data.exists()  # only read; the copy is gone
    record(plan.shipped, triton_task)  # anyone else's session at the shape
    with pytest.raises(UserError, match="no longer held out"):
        runner.check_held_out(plan)
    with without_study(plan.shipped) as seed_data, pytest.raises(UserError, match="no longer held out"):
        runner.check_held_out(runner.replace(plan, seed_data=seed_data))


def test_helion_quick_is_timed_from_its_jobs_start_and_its_pick_retimed(monkeypatch):
    """Helion's search (a stand-in that writes its CSV log) is timed with its set-up, its log kept
    as the run's timeline, and its pick handed to our harness as the one config to re-time."""
    import csv

    import helion

    seen: dict = {}

    def autotune(kernel, inputs):
        seen["effort"] = kernel.settings.autotune_effort
        time.sleep(0.05)
        with open(f"{kernel.settings.autotune_log}.csv", "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["timestamp_s", "config_index", "status", "perf_ms"])
            writer.writerows([["0.5", 0, "ok", "0.3"], ["0.9", 1, "error", ""], ["1.2", 2, "ok", "0.2"]])
        return helion.Config(block_sizes=[8], num_warps=4)

    requests: list = []
    monkeypatch.setattr(heldout_jobs, "run_session", lambda request: requests.append(request) or
                        type("Outcome", (), {"session_id": 1})())
    before = time.time()
    heldout_jobs.HelionQuickJob(d.Problem("softmax", "64x1000", "float16"), 2, None, autotune=autotune, device="cpu")(
        Path("home.db"))
    (request,) = requests
    tags = dict(request.experiment)
    assert seen["effort"] == "quick" and tags["arm"] == d.HELION_QUICK and tags["seed"] == 2
    assert before - 1e-3 <= tags["job_started"] and tags["helion_job_s"] >= tags["helion_wall_s"] >= 0.05
    assert tags["helion_timeline"] == [[0.5, 0.3], [0.9, None], [1.2, 0.2]] and tags["helion_configs"] == 3
    assert request.strategy == "fixed" and request.budget == 1 and request.fresh and request.seed_from == ""
    assert request.thread_limit and "helion_pick_past_thread_limit" not in tags  # 8 x 1024 values over 128 threads: 64
    (pick,) = request.configs
    assert json.loads(pick)["num_warps"] == 4 and dict(request.strategy_options)["configs"] == {
        d.HELION_QUICK: json.loads(pick)}


def test_a_helion_pick_past_our_limit_is_retimed_in_the_space_without_it(monkeypatch):
    """Helion's search is not bound by our elements-per-thread limit: a pick past it is re-timed
    in the space without the limit (said in its tags), not refused and dropped from the reference."""
    import helion

    def picks_past_the_limit(kernel, inputs):
        helion_log_and_pick(kernel)
        return helion.Config(block_sizes=[64], reduction_loops=[None], num_warps=4)  # 64 x 1024 / 128: 512

    requests: list = []
    monkeypatch.setattr(heldout_jobs, "run_session", lambda request: requests.append(request) or
                        type("Outcome", (), {"session_id": 1})())
    heldout_jobs.HelionQuickJob(d.Problem("softmax", "64x1000", "float16"), 1, None, autotune=picks_past_the_limit,
                          device="cpu")(Path("home.db"))
    (request,) = requests
    tags = dict(request.experiment)
    assert request.thread_limit is False and "exceeds 128" in tags["helion_pick_past_thread_limit"]
    (pick,) = request.configs
    assert (json.loads(pick)["block_sizes[0]"], json.loads(pick)["num_warps"]) == (64, 4)


def test_a_failed_retiming_of_a_pick_past_the_limit_is_recorded_in_the_space_without_it(tmp_path, monkeypatch):
    """A run whose pick lay past our limit and whose re-timing then failed is recorded as a
    finished one would have been: in the space without the limit, said in its options."""
    import helion

    from experiments.heldout.data import load_unfinished

    problem = d.Problem("softmax", "64x1000", "float16")

    def picks_past_the_limit(kernel, inputs):
        helion_log_and_pick(kernel)
        return helion.Config(block_sizes=[64], reduction_loops=[None], num_warps=4)

    def refused(request):
        raise UserError("the GPU went away")

    monkeypatch.setattr(heldout_jobs, "run_session", refused)
    db = tmp_path / "home.db"
    for seed, autotune in ((1, picks_past_the_limit), (2, lambda k, i: helion_log_and_pick(k))):
        with pytest.raises(UserError, match="went away"):
            heldout_jobs.HelionQuickJob(problem, seed, None, autotune=autotune, device="cpu")(db)
    stored = Cache.open(db)
    try:
        past, within = (stored.session(u.session_id) for u in load_unfinished(db, None))
    finally:
        stored.close()
    spec = get_kernel("softmax")
    without = bind_live(spec, problem.dims, torch.float16, "cpu", thread_limit=False).fingerprint
    assert (past["space_fingerprint"], past["options"].thread_limit) == (without, False)
    assert within["space_fingerprint"] == bind_live(spec, problem.dims, torch.float16, "cpu").fingerprint != without
    assert within["options"].thread_limit is None


def test_a_helion_pick_past_the_limit_is_said_in_its_problem_section(tmp_path):
    from experiments.heldout.report import as_json, problem_section

    problem, task, db, cache = small_study(tmp_path)
    pick = task.space.sample(random.Random(7))
    for seed, past in ((1, None), (2, "x = 512 exceeds 128")):
        extra = {"helion_job_s": 10.0, "helion_wall_s": 9.0, "helion_configs": 3, "helion_timeline": HELION_LOG,
                 **({"helion_pick_past_thread_limit": past} if past else {})}
        record_run(cache, task, arm=d.HELION_QUICK, strategy=d.NATIVE, seed=seed, setup_s=0.5, seeds=[("user", pick)],
                seed_from="", costs=lambda p: 1.0 + hashed_cost(p), budget=1, fixed=pick, extra=extra)
    cache.close()
    (summary,) = analysis.summarise(load_runs(db, None), [problem])
    said = [line for line in problem_section(summary) if "elements-per-thread" in line]
    assert len(said) == 1 and said[0].startswith(
        "Helion quick's pick at seed 2 lies past our searches' elements-per-thread limit (x = 512 exceeds 128)")
    (arm,) = as_json([summary], [])["problems"][0]["arms"]
    assert [r["helion_pick_past_thread_limit"] for r in arm["runs"]] == [None, "x = 512 exceeds 128"]


def test_a_failed_helion_run_is_recorded_with_its_reason_left_out_of_the_figures_and_planned_again(
        tmp_path, monkeypatch):
    """Minutes of Helion's search are not lost without a trace: a run whose search raised, and
    one whose pick could not be re-timed, are each recorded with why and when, the error still
    reaches the runner, no figure reads them, the plan runs them again, and the report lists
    them until a run of the same seed finishes."""
    from experiments.heldout.data import load_unfinished
    from experiments.heldout.report import as_json, unfinished_section

    problem = d.Problem("softmax", "64x1000", "float16")
    db = tmp_path / "home.db"

    def crashes(kernel, inputs):
        time.sleep(0.05)
        raise RuntimeError("the search died")

    with pytest.raises(RuntimeError, match="the search died"):
        heldout_jobs.HelionQuickJob(problem, 2, None, autotune=crashes, device="cpu")(db)

    def refused(request):
        raise UserError("the pick is not a point of the space")

    monkeypatch.setattr(heldout_jobs, "run_session", refused)
    with pytest.raises(UserError, match="not a point"):
        heldout_jobs.HelionQuickJob(problem, 3, None, autotune=lambda k, i: helion_log_and_pick(k), device="cpu")(db)

    search, retiming = load_unfinished(db, None)
    assert (search.problem, search.arm, search.strategy, search.seed) == (problem, d.HELION_QUICK, d.NATIVE, 2)
    assert search.reason == "failed in search: RuntimeError: the search died" and search.after_s >= 0.05
    assert retiming.seed == 3 and retiming.reason.startswith("failed in re-timing its pick: UserError: the pick")
    stored = Cache.open(db)
    try:
        sessions = [stored.session(u.session_id) for u in (search, retiming)]
    finally:
        stored.close()
    assert [s["evaluations"] for s in sessions] == [0, 0]
    died, picked = (experiment_tags(s["options"]) for s in sessions)
    assert "helion_pick" not in died and died["failed_after_s"] == search.after_s
    assert picked["helion_pick"]["num_warps"] == 4 and picked["helion_configs"] == 1
    assert load_runs(db, None) == [] and recorded_keys(db, None) == set()
    plan = runner.Plan(problems=(problem,), arms=(d.HELION_QUICK,), helion_seeds=(2, 3), shipped=None)
    assert [job.seed for job in runner.plan_jobs(plan, recorded_keys(db, None))] == [2, 3]

    finished = {run_key(problem, d.HELION_QUICK, d.NATIVE, 3)}
    section = "\n".join(unfinished_section([search, retiming], finished))
    assert "| softmax 64x1000 float16 | helion-quick native | 2 |" in section
    rows = [line for line in section.splitlines() if line.startswith("| softmax")]
    assert rows[0].endswith("| not yet |") and rows[1].endswith("| yes |")
    listed = as_json([], [], [search, retiming], finished)["unfinished"]
    assert [(u["seed"], u["finished_since"]) for u in listed] == [(2, False), (3, True)]
    assert unfinished_section([], finished) == []


def test_a_helion_run_cut_by_the_deadline_is_recorded_with_what_its_search_had_logged(tmp_path):
    """`--deadline` interrupts Helion's search mid-way (a real timer, as in a batch job): the
    interruption still stops the run, and the record keeps the configs Helion had logged by then."""
    from autotune.experiment import DeadlineReached, ExperimentOptions, execute_jobs
    from experiments.heldout.data import load_unfinished

    def slow(kernel, inputs):
        helion_log_and_pick(kernel)  # one config logged, then the search goes on past the deadline
        time.sleep(30)

    db = tmp_path / "home.db"
    job = heldout_jobs.HelionQuickJob(d.Problem("softmax", "64x1000", "float16"), 1, None, autotune=slow, device="cpu")
    options = ExperimentOptions(folder=tmp_path, db=db, out=tmp_path, deadline_at=time.monotonic() + 1.0)
    began = time.monotonic()
    with pytest.raises(DeadlineReached) as reached:
        execute_jobs([job], options, SimpleNamespace(print=lambda *a, **k: None), describe=lambda j: j.describe())
    assert time.monotonic() - began < 15 and reached.value.interrupted == job.describe()
    (cut,) = load_unfinished(db, None)
    assert cut.reason == "interrupted in search: DeadlineReached" and 0.9 <= cut.after_s < 15
    assert (cut.helion_configs, cut.helion_best_ms) == (1, 0.3) and load_runs(db, None) == []


def test_a_helion_search_whose_retiming_was_cut_is_not_run_again(tmp_path, monkeypatch):
    """Minutes of Helion's search are not spent twice: when the re-timing of a finished search's
    pick is cut (a deadline, Ctrl-C), the plan re-times that pick alone with the search's start,
    times and log; the run's job time is its search's plus the new re-timing; the report says so.
    A re-timing that failed is searched again (its pick may fail again)."""
    from dataclasses import replace

    from experiments.heldout.data import finished_searches, job_times
    from experiments.heldout.report import problem_section

    problem = d.Problem("softmax", "64x1000", "float16")
    db = tmp_path / "home.db"
    searched = lambda kernel, inputs: helion_log_and_pick(kernel)  # noqa: E731

    def cut(request):
        raise KeyboardInterrupt

    def refused(request):
        raise UserError("the pick is not a point of the space")

    for seed, retiming in ((2, cut), (3, refused)):
        monkeypatch.setattr(heldout_jobs, "run_session", retiming)
        with pytest.raises((KeyboardInterrupt, UserError)):
            heldout_jobs.HelionQuickJob(problem, seed, None, autotune=searched, device="cpu")(db)
    key = run_key(problem, d.HELION_QUICK, d.NATIVE, 2)
    searches = finished_searches(db, None)
    assert set(searches) == {key} and searches[key].tags["helion_pick"]["num_warps"] == 4
    plan = runner.Plan(problems=(problem,), arms=(d.HELION_QUICK,), helion_seeds=(2, 3), shipped=None)
    again, anew = runner.pending_jobs(plan, db, SimpleNamespace(print=lambda *a, **k: None))
    assert (again.seed, anew.seed, anew.searched) == (2, 3, None) and again.searched == searches[key]
    assert again.expected_s is None and f"search finished in session {searches[key].session_id}" in again.describe()

    def searches_again(kernel, inputs):
        raise AssertionError("the search ran again")

    requests: list = []
    monkeypatch.setattr(heldout_jobs, "run_session", lambda request: requests.append(request) or SimpleNamespace(session_id=9))
    began = time.time()
    replace(again, autotune=searches_again, device="cpu")(db)
    (request,) = requests
    tags, first = dict(request.experiment), searches[key].tags
    assert {k: tags[k] for k in heldout_jobs.SEARCH_TAGS} == {k: first[k] for k in heldout_jobs.SEARCH_TAGS}
    assert tags["retimes_search_of"] == searches[key].session_id and tags["retime_started"] >= began - 1e-3
    assert json.loads(request.configs[0])["num_warps"] == 4

    # Recorded as the runner records it: the job time is the search's and the re-timing's, not the
    # hours between the two tries; the run stands, and no try is re-timed again.
    task = bind_live(get_kernel(problem.kernel), problem.dims, torch.float16, "cpu")
    pick = task.space.sample(random.Random(7))
    cache = Cache.open(db)
    record_run(cache, task, arm=d.HELION_QUICK, strategy=d.NATIVE, seed=2, setup_s=3600.0, seeds=[("user", pick)],
            seed_from="", costs=lambda p: 1.0, budget=1, fixed=pick,
            extra={"helion_job_s": 50.0, "helion_wall_s": 45.0, "helion_configs": 1, "helion_timeline": [[1.0, 0.9]],
                   "retimes_search_of": 1, "retime_started": round(time.time() - 2.0, 3)})
    cache.close()
    conn = sqlite3.connect(db)
    ended, options = conn.execute("SELECT ended, options FROM sessions WHERE exit_reason = 'budget'").fetchone()
    conn.close()
    retimed_from = json.loads(options)["experiment"]["retime_started"]
    assert job_times(db, None)[key].seconds == pytest.approx(50.0 + ended - retimed_from)
    assert job_times(db, None)[key].seconds < 60 and finished_searches(db, None) == {}
    (run,) = load_runs(db, None)
    assert (run.wall_s, run.retimes_search_of) == (50.0, 1)
    (summary,) = analysis.summarise([run], [problem])
    assert any("re-timed by a later job" in line and "(session 1) was cut" in line for line in problem_section(summary))


def test_each_job_compiles_into_empty_caches_of_its_own(tmp_path, monkeypatch):
    """Seen from inside the job (where its workers start): both compile caches point into a new,
    empty folder, a different one per job; after the job the environment is as before and the
    folder is gone.  The run is tagged, and the report counts it."""
    import os

    seen: list[dict[str, str]] = []
    requests: list = []
    fake = fake_run(requests)

    def run(request):
        caches = {name: os.environ[name] for name in COMPILE_CACHES}
        folder = Path(caches["TRITON_CACHE_DIR"]).parent
        assert folder.is_dir() and not any(folder.iterdir())  # empty at the job's start
        seen.append(caches)
        return fake(request)

    monkeypatch.setattr(heldout_jobs, "run_session", run)
    monkeypatch.setenv("TRITON_CACHE_DIR", "/somewhere/shared")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    problem = d.Problem("softmax-triton", "64x1000", "float16")
    db = tmp_path / "home.db"
    for seed in (1, 2):
        heldout_jobs.ArmJob(problem, d.COLD, "pattern", seed, 50, 30.0, None)(db)
    first, second = seen
    assert first["TRITON_CACHE_DIR"] != second["TRITON_CACHE_DIR"]
    assert Path(first["TRITON_CACHE_DIR"]).parent == Path(first["TORCHINDUCTOR_CACHE_DIR"]).parent
    assert not Path(first["TRITON_CACHE_DIR"]).parent.exists()  # removed after the job
    assert os.environ["TRITON_CACHE_DIR"] == "/somewhere/shared" and "TORCHINDUCTOR_CACHE_DIR" not in os.environ
    runs = load_runs(db, None)
    assert [r.fresh_caches for r in runs] == [True, True]
    from experiments.heldout import report as heldout_report_module

    (summary,) = analysis.summarise(runs, problems=(problem,))
    text = "\n".join(heldout_report_module.problem_section(summary))
    assert "Compile caches empty at the run's start: 2 of 2 runs." in text
    assert [r.early_setups for r in runs] == [True, False]  # as each session recorded it (seeds 1 and 2 here)
    assert "every compile worker set up at the evaluator's start: 1 of 2 (the others" in text


def test_search_rows_are_the_rows_a_run_is_read_from_in_the_order_they_were_measured(tmp_path, monkeypatch):
    """The report reads a run's rows apart from `load_runs` (`moves.py`): the same rows, in the
    order its figures read them."""
    monkeypatch.setattr(heldout_jobs, "run_session", fake_run([]))
    problem = d.Problem("softmax-triton", "64x1000", "float16")
    db = tmp_path / "home.db"
    for seed in (1, 2):
        heldout_jobs.ArmJob(problem, d.COLD, "pattern", seed, 50, 30.0, None)(db)
    runs = load_runs(db, None)
    rows = search_rows(db, None, [r.session_id for r in runs])
    for run in runs:
        mine = rows[run.session_id]
        assert len(mine) == run.searched and all(r.generation >= 0 for r in mine)
        assert [r.created for r in mine] == sorted(r.created for r in mine)
        assert curve((n, r.result.objective) for n, r in enumerate(mine, start=1)) == run.config_curve


def test_warm_up_binds_each_kernel_once_at_a_shape_no_job_tunes(monkeypatch):
    import autotune.task

    bound = []
    monkeypatch.setattr(autotune.task, "bind_live", lambda spec, shape, dtype, device: bound.append(
        (spec.name, shape, str(dtype), device)))
    problems = [d.SOFTMAX[0], d.SOFTMAX[1], d.SOFTMAX[0], d.MATMUL[0]]
    assert runner._bind_once_each(problems, "cpu") == 2  # one softmax, one matmul kernel
    assert [b[0] for b in bound] == ["softmax", d.MATMUL[0].kernel]
    tuned = {p.dims for p in d.PROBLEMS}
    for name, shape, dtype, device in bound:
        assert shape not in tuned and device == "cpu"
    assert bound[0][1] == tuple(n // 2 for n in d.SOFTMAX[0].dims) and bound[0][2] == "torch.float16"
    assert not {runner.warm_up_shape(p) for p in d.PROBLEMS} & tuned  # for every declared problem
