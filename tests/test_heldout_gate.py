"""`runner --until-missed` and `--until-decided` (experiments/heldout/gate.py) and the hooks they
use in `autotune.experiment.execute_jobs`: a series stops once most of a shape's seeds missed
its time target, and (--until-decided) its seeds at a shape stop once most met it there,
counting the runs recorded before and each run read back as it finishes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from autotune.errors import UserError
from autotune.experiment import ExperimentOptions, execute_jobs
from conftest import hashed_cost
from experiments.heldout import definition as d
from experiments.heldout.gate import VerdictGate
from experiments.heldout.jobs import ArmJob, HelionQuickJob
from experiments.heldout.limits import TargetLimit
from heldout_records import record_run, small_study

LONG = d.Problem("softmax", "1792x81920", "float16")
WIDE = d.Problem("softmax", "2560x90112", "float16")
CELL = d.Problem("matmul-l2norm", "16384x1024x2048", "bfloat16")
LIMITS = {(LONG, d.COLD): TargetLimit(20.0, 25.0, 3.0, 0.250), (WIDE, d.COLD): TargetLimit(25.0, 30.0, 3.0, 0.350)}


def _run(problem, seed, reached_s, strategy="pattern-ties", arm=d.COLD):
    """A run that came within 2% of 0.250 ms (or not: None) `reached_s` after its job started."""
    curve = [(1.0, 1.0)] + ([(reached_s, 0.250)] if reached_s is not None else [])
    return SimpleNamespace(problem=problem, arm=arm, strategy=strategy, seed=seed,
                           time_to=lambda target: next((t for t, ms in curve if ms <= target), None))


def _job(problem, strategy="pattern-ties", seed=1, worker_built=False, arm=d.COLD):
    return ArmJob(problem, arm, strategy, seed, 300, 20.0, None, worker_built=worker_built)


def test_a_series_is_decided_once_most_of_a_shapes_seeds_missed():
    gate = VerdictGate(LIMITS, seeds=3)
    gate.read([_run(LONG, 1, None), _run(LONG, 2, 10.0)])  # one missed, one in time
    assert gate.skip_reason(_job(WIDE)) is None
    gate.read([_run(LONG, 3, 26.0)])  # within 2%, but after the 25 s allowed: a second miss
    reason = gate.skip_reason(_job(WIDE, seed=2))  # any shape of the series, any seed
    assert reason == "cold pattern-ties already missed its time target at 1792x81920 (2 of 3 seeds not within it)"
    # another strategy, the same strategy under other tooling, another arm and Helion quick go on
    assert gate.skip_reason(_job(WIDE, strategy="pattern-ends")) is None
    assert gate.skip_reason(_job(WIDE, worker_built=True)) is None
    assert gate.skip_reason(_job(WIDE, arm=d.WARM_HEURISTIC)) is None
    assert gate.skip_reason(HelionQuickJob(WIDE, 1, None)) is None


@pytest.mark.parametrize("skip_met", [False, True])
def test_with_skip_met_no_further_seed_runs_where_most_seeds_met_the_target(skip_met):
    gate = VerdictGate(LIMITS, seeds=3, skip_met=skip_met)
    gate.read([_run(LONG, 1, 10.0), _run(WIDE, 1, 12.0), _run(WIDE, 2, None)])
    assert gate.skip_reason(_job(LONG, seed=2)) is None  # one of three: the median is still open
    gate.read([_run(LONG, 2, 24.0)])  # in time (25 s allowed): two of three
    expected = "cold pattern-ties already met its time target at 1792x81920 (2 of 3 seeds within it)"
    assert gate.skip_reason(_job(LONG, seed=3)) == (expected if skip_met else None)
    # other shapes of the series, other strategies and other tooling go on
    assert gate.skip_reason(_job(WIDE, seed=3)) is None
    assert gate.skip_reason(_job(LONG, seed=3, strategy="pattern-ends")) is None
    assert gate.skip_reason(_job(LONG, seed=3, worker_built=True)) is None
    assert gate.decided == {}


def test_shapes_without_a_time_target_decide_nothing():
    no_reference = {(WIDE, d.COLD): TargetLimit(25.0, 30.0, 3.0, None)}
    gate = VerdictGate({**LIMITS, **no_reference}, seeds=3)
    gate.read([_run(problem, seed, None) for problem in (CELL, WIDE) for seed in (1, 2, 3)])
    gate.read([_run(LONG, seed, None, arm=d.HELION_QUICK) for seed in (1, 2, 3)])  # not a series of ours
    assert gate.decided == {}


def test_jobs_the_hook_skips_never_start_and_finished_jobs_are_reported(tmp_path):
    ran, heard = [], []

    class Job:
        def __init__(self, name):
            self.name = name

        def __call__(self, db):
            ran.append(self.name)
            if self.name == "b":
                raise RuntimeError("a failed job")
            return {"name": self.name}

    def finished(job, outcome):
        heard.append((job.name, outcome))
        raise ValueError("reading it back failed")  # never stops the jobs after it

    console = SimpleNamespace(print=lambda *a, **k: None)
    options = ExperimentOptions(folder=tmp_path, db=tmp_path / "x.db", out=tmp_path)
    execute_jobs([Job("a"), Job("b"), Job("c"), Job("d")], options, console, describe=lambda j: j.name,
                 skip=lambda job: "decided" if job.name == "c" else None, finished=finished)
    assert ran == ["a", "b", "d"]
    assert heard == [("a", {"name": "a"}), ("d", {"name": "d"})]  # a failed job has no outcome to hear of
    with pytest.raises(UserError, match="without --workers"):
        execute_jobs([Job("a")], ExperimentOptions(folder=tmp_path, db=tmp_path / "x.db", out=tmp_path, workers="x"),
                     console, describe=lambda j: j.name, skip=lambda job: None)


def test_a_finished_run_is_read_back_from_the_database(tmp_path):
    """The hook reads the session the job reports and counts it: here against a limit no run
    can meet in time (0 s allowed), so two finished seeds decide the series."""
    problem, task, db, cache = small_study(tmp_path)
    for seed in (1, 2):
        record_run(cache, task, arm=d.COLD, strategy="pattern", seed=seed, setup_s=1.0,
                   costs=lambda p: 1.0 + hashed_cost(p))
    sessions = [s["id"] for s in cache.sessions(limit=10)]
    cache.close()
    gate = VerdictGate({(problem, d.COLD): TargetLimit(1.0, 0.0, 0.0, 5.0)}, seeds=3, db=db, shipped=None)
    gate.finished(_job(problem, strategy="pattern"), {"session": sessions[0]})
    assert gate.decided == {} and len(gate.missed[(problem, d.COLD, "pattern")]) == 1
    gate.finished(_job(problem, strategy="pattern"), {"session": sessions[1]})
    gate.finished(_job(problem, strategy="pattern"), {"session": 10_000})  # no such session: nothing read
    assert gate.decided == {(d.COLD, "pattern"): problem}
    # a generous limit: the same runs are in time (their best is under 5 ms from the start)
    generous = VerdictGate({(problem, d.COLD): TargetLimit(1.0, 1e6, 0.0, 5.0)}, seeds=3, db=db, shipped=None)
    for session in sessions:
        generous.finished(_job(problem, strategy="pattern"), {"session": session})
    assert generous.missed == {} and generous.decided == {}
