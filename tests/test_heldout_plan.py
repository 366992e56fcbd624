"""How the held-out runner plans: each job's expected time from its arm's recorded runs, the
search limit `--seconds target` gives, recorded runs skipped, strategies named for one arm alone,
and with `--seconds target` Helion quick's runs before our arms', whose limits are read from them."""

from __future__ import annotations

import json
import sqlite3
import statistics
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from autotune.errors import UserError
from autotune.experiment import DeadlineReached, ExperimentOptions
from experiments.heldout import definition as d
from experiments.heldout import jobs as heldout_jobs
from experiments.heldout import runner
from experiments.heldout.data import JobTime, recorded_keys

from heldout_records import HELION_JOB_S, MATMUL, SOFTMAX

QUIET = SimpleNamespace(print=lambda *a, **k: None)


def test_a_strategy_named_for_one_arm_runs_in_that_arm_alone():
    plan = runner.with_strategies(runner.Plan(problems=(SOFTMAX,), arms=(d.COLD, d.WARM_HEURISTIC), seeds=(1,),
                                              shipped=None),
                                  ["pattern-ends", "cold:pattern-ties", "cold:pattern-ends"])
    assert plan.strategies == ("pattern-ends",)
    jobs = runner.plan_jobs(plan)
    assert [(job.arm, job.strategy) for job in jobs] == [
        (d.COLD, "pattern-ends"), (d.COLD, "pattern-ties"), (d.WARM_HEURISTIC, "pattern-ends")]
    only_cold = runner.with_strategies(runner.replace(plan, arms=(d.COLD, d.WARM_CACHE)), ["cold:pattern-reach"])
    assert [(job.arm, job.strategy) for job in runner.plan_jobs(only_cold)] == [(d.COLD, "pattern-reach")]


@pytest.mark.parametrize("name, said", [("warm:pattern", "'warm' is not one of our arms"),
                                        ("helion-quick:pattern", "not one of our arms"),
                                        ("cold:patern", "unknown strategy 'patern'"),
                                        ("patern", "unknown strategy 'patern'")])
def test_an_unknown_arm_or_strategy_is_refused_in_one_line_before_anything_runs(tmp_path, name, said):
    db = tmp_path / "runs" / "heldout.db"
    with pytest.raises(UserError, match=said):
        runner.main(["--db", str(db), "--shipped", "none", "--strategies", name, "--dry-run"])
    assert not db.parent.exists()  # nothing written, not even its folder


def test_with_seconds_target_helion_quick_runs_first_and_our_arms_after_it():
    plan = runner.Plan(problems=(SOFTMAX,), arms=(d.HELION_QUICK, d.COLD, d.WARM_CACHE), limit_to_target=True)
    first, then = runner.phases(plan)
    assert first.arms == (d.HELION_QUICK,) and then.arms == (d.COLD, d.WARM_CACHE)
    assert runner.phases(runner.replace(plan, limit_to_target=False)) == [runner.replace(plan, limit_to_target=False)]
    helion_alone = runner.replace(plan, arms=(d.HELION_QUICK,))
    assert runner.phases(helion_alone) == [helion_alone]


def _execute_with(monkeypatch, plan, ran: list, deadline_in: dict[str, DeadlineReached],
                  deadline_at: float | None = None, until_missed: bool = False, hooks: list | None = None,
                  until_decided: bool = False) -> None:
    """runner.execute with the GPU's parts replaced: each phase's planning and running logged
    (and in `hooks`, the pruning hooks each phase's jobs ran with)."""
    import autotune.tuning

    monkeypatch.setattr(autotune.tuning, "gpu_available", lambda: True)
    monkeypatch.setattr(runner, "warm_up", lambda console, problems=(), device="cuda": ran.append(("warm up",)))

    def pending(phase, db, console, runs=None):
        ran.append(("planned", phase.arms))
        return runner.plan_jobs(phase)

    def execute_jobs(jobs, options, console, describe, noun, skip=None, finished=None):
        if hooks is not None:
            hooks.append((skip, finished))
        arms = tuple(sorted({job.arm for job in jobs}))
        ran.append(("ran", arms))
        if arms in deadline_in:
            raise deadline_in[arms]

    monkeypatch.setattr(runner, "pending_jobs", pending)
    monkeypatch.setattr(runner, "execute_jobs", execute_jobs)
    runner.execute(plan, ExperimentOptions(folder=None, db=None, out=None, deadline_at=deadline_at), QUIET,
                   until_missed=until_missed, until_decided=until_decided)


def test_until_missed_gives_each_phase_a_gate_read_from_what_is_recorded_then(monkeypatch):
    """Our arms' phase runs with the hooks of a gate made when it is planned (after Helion quick's
    phase recorded its runs); Helion quick's phase, which the gate never stops, and every phase
    without the flag run with none."""
    gates = []

    class Gate:
        def skip_reason(self, job):
            return None

        def finished(self, job, outcome):
            return None

    recorded = ["a recorded run"]

    def verdict_gate(plan, db, runs, skip_met=False):
        assert runs is recorded  # the runs the phase read once, for its limits too
        gates.append(Gate())
        gates[-1].skip_met = skip_met
        return gates[-1]

    monkeypatch.setattr(runner, "verdict_gate", verdict_gate)
    monkeypatch.setattr(runner, "recorded_runs", lambda plan, db: recorded)
    plan = runner.Plan(problems=(d.Problem("softmax", "2048x100000", "float16"),), seeds=(1,), helion_seeds=(1,),
                       limit_to_target=True, shipped=None)
    hooks: list = []
    _execute_with(monkeypatch, plan, [], {}, until_missed=True, hooks=hooks)
    (gate,) = gates
    assert hooks[0] == (None, None)
    assert len(hooks) == 2 and (hooks[1][0].__self__, hooks[1][1].__self__) == (gate, gate)
    hooks.clear()
    _execute_with(monkeypatch, plan, [], {}, hooks=hooks)
    assert hooks == [(None, None), (None, None)] and len(gates) == 1
    _execute_with(monkeypatch, plan, [], {}, until_decided=True)  # --until-decided: the gate skips met shapes too
    assert [gate.skip_met for gate in gates] == [False, True]


def test_our_arms_are_planned_once_helion_quicks_runs_have_run(monkeypatch):
    """The arms' plan (and with it their limits, read from the recorded runs) comes after the
    Helion quick runs ran; the fork server is warmed for our arms alone."""
    plan = runner.Plan(problems=(SOFTMAX,), arms=(d.HELION_QUICK, d.COLD), strategies=("pattern",), seeds=(1,),
                       helion_seeds=(1,), shipped=None, limit_to_target=True)
    ran: list = []
    _execute_with(monkeypatch, plan, ran, {})
    assert ran == [("planned", (d.HELION_QUICK,)), ("ran", (d.HELION_QUICK,)),
                   ("planned", (d.COLD,)), ("warm up",), ("ran", (d.COLD,))]


def test_runs_left_out_of_one_phase_do_not_stop_the_next_but_the_deadline_does(monkeypatch):
    plan = runner.Plan(problems=(SOFTMAX,), arms=(d.HELION_QUICK, d.COLD), strategies=("pattern",), seeds=(1,),
                       helion_seeds=(1, 2), shipped=None, limit_to_target=True)
    # Helion's second run would not fit: our arms' runs still start, and both are said at the end.
    ran: list = []
    with pytest.raises(DeadlineReached) as reached:
        _execute_with(monkeypatch, plan, ran, {(d.HELION_QUICK,): DeadlineReached(not_started=["helion 2"]),
                                               (d.COLD,): DeadlineReached(not_started=["cold 1"])})
    assert ("ran", (d.COLD,)) in ran
    assert reached.value.not_started == ("helion 2", "cold 1") and reached.value.interrupted is None
    # the deadline itself (a run interrupted): nothing more is planned
    ran = []
    with pytest.raises(DeadlineReached) as reached:
        _execute_with(monkeypatch, plan, ran, {(d.HELION_QUICK,): DeadlineReached("helion 1", ["helion 2"])})
    assert ran == [("planned", (d.HELION_QUICK,)), ("ran", (d.HELION_QUICK,))]
    assert reached.value.interrupted == "helion 1" and reached.value.not_started == ("helion 2",)
    # the deadline passed between two runs: our arms' runs are listed as not started, and the
    # fork server is not warmed for runs that will not start
    ran = []
    with pytest.raises(DeadlineReached) as reached:
        _execute_with(monkeypatch, plan, ran, {(d.HELION_QUICK,): DeadlineReached(not_started=["helion 2"]),
                                               (d.COLD,): DeadlineReached(not_started=["cold 1"])},
                      deadline_at=time.monotonic() - 1)
    assert ("warm up",) not in ran and ("ran", (d.COLD,)) in ran
    assert reached.value.not_started == ("helion 2", "cold 1")


def test_the_dry_run_lists_helion_quicks_runs_first_with_seconds_target(tmp_path, capsys):
    runner.main(["--db", str(tmp_path / "heldout.db"), "--shipped", "none", "--shapes", SOFTMAX.shape,
                 "--arms", f"{d.COLD},{d.HELION_QUICK}", "--strategies", "pattern", "--seeds", "1",
                 "--helion-seeds", "1", "--seconds", "target", "--dry-run"])
    lines = capsys.readouterr().out.splitlines()
    listed = [line for line in lines if " seed 1 at " in line]
    assert [line.split()[0] for line in listed] == [d.HELION_QUICK, d.COLD]
    assert any("Helion quick's runs come first" in line for line in lines)


def test_each_planned_job_expects_the_time_its_arms_recorded_runs_took(heldout_db):
    """`--deadline` starts no job that would not end by then: each job carries the longest time a
    finished run of its arm took at its problem (else of its kernel at any shape), read from the
    sessions (job start to session end); our arms' as the time around their search limit, plus
    the job's own limit; none where its arm has no finished run.  That is scaled by the arm's
    seed-to-seed spread: the median, over runs of one strategy at one problem with one limit, of
    their longest job time over their shortest."""
    from experiments.heldout.data import job_times

    times = job_times(heldout_db, None)
    conn = sqlite3.connect(heldout_db)
    try:
        recorded = []  # (kernel, shape, arm, strategy, job seconds, search limit) of every finished session
        for kernel, shape, ended, options, limit, exit_reason in conn.execute(
                "SELECT kernel, shape, ended, options, seconds, exit_reason FROM sessions WHERE mode = 'gpu' AND "
                "EXISTS (SELECT 1 FROM evaluations WHERE session_id = sessions.id AND generation >= 0)"):
            tags = json.loads(options).get("experiment", {})
            if tags.get("study") == d.STUDY and exit_reason in ("budget", "seconds", "strategy finished",
                                                                "strategy exhausted"):
                recorded.append((kernel, shape, tags["arm"], tags["strategy"], ended - tags["job_started"], limit))
    finally:
        conn.close()
    assert sorted(t.seconds for t in times.values()) == pytest.approx(sorted(r[4] for r in recorded))

    def longest_around(kernel: str, arm: str) -> float:
        return max(max(0.0, s - (lim or 0.0)) for k, _, a, _, s, lim in recorded if (k, a) == (kernel, arm))

    def spread(arm: str) -> float:
        groups: dict[tuple, list[float]] = {}
        for kernel, shape, a, strategy, seconds, limit in recorded:
            if a == arm:
                groups.setdefault((kernel, shape, strategy, limit), []).append(seconds)
        ratios = [max(g) / min(g) for g in groups.values() if len(g) > 1]
        return statistics.median(ratios) if ratios else 1.0

    # the fixture's cold runs at the softmax shape differ; its warm runs have limits of their own
    assert spread(d.COLD) > 1.0
    assert runner.seed_spread(times) == pytest.approx({d.COLD: spread(d.COLD), d.WARM_CACHE: spread(d.WARM_CACHE)})
    plan = runner.Plan(problems=(MATMUL, SOFTMAX), arms=(d.HELION_QUICK, d.COLD), strategies=("pattern",),
                       seeds=(4,), helion_seeds=(4,), seconds=7.0, shipped=None)
    jobs = runner.with_expected_times(runner.plan_jobs(plan, set(times)), times)
    expected = {(j.problem, j.arm): j.expected_s for j in jobs}
    assert expected[(MATMUL, d.HELION_QUICK)] == pytest.approx(longest_around(MATMUL.kernel, d.HELION_QUICK))
    assert expected[(MATMUL, d.COLD)] == pytest.approx((longest_around(MATMUL.kernel, d.COLD) + 7.0) * spread(d.COLD))
    # a run that ended before its limit (the warm runs' 601 s limits) counts as using all of it
    (warm,) = runner.with_expected_times([runner.replace(jobs[-1], arm=d.WARM_HEURISTIC)], times)
    assert warm.expected_s == pytest.approx(7.0)
    # another shape of a kernel with runs: the kernel's longest; a kernel without any: no estimate
    other = d.Problem(SOFTMAX.kernel, "64x1000", SOFTMAX.dtype)
    unknown = d.Problem("softmax-triton", "64x1000", "float16")
    (at_other, at_unknown) = runner.with_expected_times(
        [heldout_jobs.HelionQuickJob(other, 1, None), heldout_jobs.HelionQuickJob(unknown, 1, None)], times)
    assert at_other.expected_s == pytest.approx(longest_around(SOFTMAX.kernel, d.HELION_QUICK))
    assert at_unknown.expected_s is None
    assert at_other == heldout_jobs.HelionQuickJob(other, 1, None)  # the estimate is no part of the job's identity


def test_a_job_is_expected_to_take_as_much_longer_as_its_arm_varies_seed_to_seed():
    """Two Helion runs at one problem took 100 and 120 s, one at another 200 s: a third run at
    the first is expected to take 120 s times 1.2, and a run at the second 200 s times 1.2."""
    first, second = (d.Problem("softmax", shape, "float16") for shape in ("64x1000", "64x2000"))
    times = {(first.kernel, first.shape, first.dtype, d.HELION_QUICK, d.NATIVE, 1): JobTime(100.0, None),
             (first.kernel, first.shape, first.dtype, d.HELION_QUICK, d.NATIVE, 2): JobTime(120.0, None),
             (second.kernel, second.shape, second.dtype, d.HELION_QUICK, d.NATIVE, 1): JobTime(200.0, None)}
    assert runner.seed_spread(times) == pytest.approx({d.HELION_QUICK: 1.2})
    jobs = runner.with_expected_times([heldout_jobs.HelionQuickJob(first, 3, None), heldout_jobs.HelionQuickJob(second, 2, None)],
                                      times)
    assert [job.expected_s for job in jobs] == pytest.approx([144.0, 240.0])
    # runs with different search limits are not seeds of one another
    ours = {(first.kernel, first.shape, first.dtype, d.COLD, "pattern", seed): JobTime(seconds, limit)
            for seed, seconds, limit in ((1, 30.0, 20.0), (2, 50.0, 40.0))}
    assert runner.seed_spread(ours) == {}


def test_the_dry_run_says_how_long_each_run_should_take(heldout_db, capsys):
    from experiments.heldout.data import job_times

    runner.main(["--db", str(heldout_db), "--shipped", "none", "--shapes", MATMUL.shape, "--arms", d.HELION_QUICK,
                 "--helion-seeds", "2", "--dry-run"])
    (job,) = runner.with_expected_times([heldout_jobs.HelionQuickJob(MATMUL, 2, None)], job_times(heldout_db, None))
    out = capsys.readouterr().out
    assert f"{job.describe()} (about {job.expected_s:.0f} s)" in out
    assert f"about {job.expected_s:.0f} s in all for the 1 run(s)" in out


def _shortest_set_up(db: Path, kernel: str) -> float:
    """The shortest job start to session start of a finished run of our arms at `kernel`, by SQL."""
    conn = sqlite3.connect(db)
    try:
        set_ups = [started - json.loads(options)["experiment"]["job_started"]
                   for started, options in conn.execute(
                       "SELECT started, options FROM sessions WHERE kernel = ? AND exit_reason IN "
                       "('budget', 'seconds', 'strategy finished', 'strategy exhausted')", (kernel,))
                   if json.loads(options).get("experiment", {}).get("arm") in d.OUR_ARMS]
    finally:
        conn.close()
    assert set_ups
    return min(set_ups)


def test_with_seconds_target_each_run_searches_the_time_its_target_allows(heldout_db, capsys):
    """`--seconds target`: each run of ours is given the time its arm's target allows at its
    shape (a fifth of Helion quick's median wall time cold, a tenth warm) less the shortest set-up
    any run of ours at the kernel took, so no run is stopped before its target's time has passed
    since its job started; a problem with no time target (a matmul cell) keeps `--seconds`'s
    default, and the plan's estimates follow the limits."""
    from experiments.heldout.data import job_times

    floor = _shortest_set_up(heldout_db, SOFTMAX.kernel)
    assert 1.0 <= floor < 2.0  # the fixture's cold runs: 1 s of set-up and the session's own start
    plan = runner.Plan(problems=(SOFTMAX, MATMUL), arms=(d.COLD, d.WARM_HEURISTIC), strategies=("pattern",),
                       seeds=(4,), shipped=None, limit_to_target=True)
    printed: list[str] = []
    jobs = runner.pending_jobs(plan, heldout_db, SimpleNamespace(print=printed.append))
    limits = {(job.problem, job.arm): job.seconds for job in jobs}
    assert limits[(SOFTMAX, d.COLD)] == pytest.approx(HELION_JOB_S / 5 - floor, abs=1e-3)
    assert limits[(SOFTMAX, d.WARM_HEURISTIC)] == pytest.approx(HELION_JOB_S / 10 - floor, abs=1e-3)
    assert limits[(MATMUL, d.COLD)] == limits[(MATMUL, d.WARM_HEURISTIC)] == d.SECONDS
    assert any(line.startswith(f"cold at {SOFTMAX.label}: {HELION_JOB_S / 5 - floor:.1f} s of search "
                               f"({HELION_JOB_S / 5:.1f} s allowed") for line in printed)
    assert any(f"{d.SECONDS:g} s of search: cold at {MATMUL.label}" in line for line in printed)
    # the estimates are read with each job's own limit
    default = runner.pending_jobs(runner.replace(plan, limit_to_target=False), heldout_db,
                                  SimpleNamespace(print=lambda *a: None))
    by_key = {job.key: job for job in default}
    cold = next(job for job in jobs if (job.problem, job.arm) == (SOFTMAX, d.COLD))
    assert by_key[cold.key].expected_s - cold.expected_s == pytest.approx(
        (d.SECONDS - cold.seconds) * runner.seed_spread(job_times(heldout_db, None)).get(d.COLD, 1.0))
    # the command line: 'target', or a positive number; anything else is refused in one line
    runner.main(["--db", str(heldout_db), "--shipped", "none", "--shapes", SOFTMAX.shape, "--arms", d.COLD,
                 "--strategies", "pattern", "--seeds", "4", "--seconds", "target", "--dry-run"])
    assert f"{HELION_JOB_S / 5 - floor:.1f} s of search" in capsys.readouterr().out
    for bad in ("soon", "0"):
        with pytest.raises(SystemExit):
            runner.main(["--db", str(heldout_db), "--seconds", bad, "--dry-run"])
        assert "--seconds" in capsys.readouterr().err


def test_the_plan_skips_recorded_runs_and_reruns_cut_short_ones(heldout_db):
    plan = runner.Plan(problems=(MATMUL,), arms=(d.HELION_QUICK, d.COLD, d.WARM_HEURISTIC), strategies=("pattern",),
                       seeds=(1, 2, 3), shipped=None)
    recorded = recorded_keys(heldout_db, None)
    jobs = runner.plan_jobs(plan, recorded)
    # Helion quick runs with our arms' seeds: the fixture recorded its seed 1 only.
    assert d.HELION_SEEDS == d.SEEDS
    assert [(j.arm, j.strategy, j.seed) for j in jobs] == [
        (d.HELION_QUICK, d.NATIVE, 2), (d.HELION_QUICK, d.NATIVE, 3),
        (d.COLD, "pattern", 2), (d.COLD, "pattern", 3), (d.WARM_HEURISTIC, "pattern", 3)]
    everything = runner.plan_jobs(runner.replace(plan, again=True), recorded)
    assert len(everything) == 3 + 2 * 3 and all(isinstance(j, heldout_jobs.HelionQuickJob) for j in everything[:3])
    assert runner.select(runner.Plan(), ["32768x1000"], ["cold"]).problems == (SOFTMAX,)
    with pytest.raises(UserError, match="not in the experiment"):
        runner.select(runner.Plan(), ["7x7"])
    with pytest.raises(UserError, match="warm-lukewarm"):
        runner.select(runner.Plan(), arms=["warm-lukewarm"])
