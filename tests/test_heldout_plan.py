"""How the held-out runner plans a command line: strategies for one arm alone, and with
`--seconds target` Helion quick's runs before our arms', whose limits are read from them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from autotune.errors import UserError
from autotune.experiment import DeadlineReached, ExperimentOptions
from experiments.heldout import definition as d
from experiments.heldout import runner

SOFTMAX = d.Problem("softmax", "2048x100000", "float16")
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
    assert not db.exists()


def test_with_seconds_target_helion_quick_runs_first_and_our_arms_after_it():
    plan = runner.Plan(problems=(SOFTMAX,), arms=(d.HELION_QUICK, d.COLD, d.WARM_CACHE), limit_to_target=True)
    first, then = runner.phases(plan)
    assert first.arms == (d.HELION_QUICK,) and then.arms == (d.COLD, d.WARM_CACHE)
    assert runner.phases(runner.replace(plan, limit_to_target=False)) == [runner.replace(plan, limit_to_target=False)]
    helion_alone = runner.replace(plan, arms=(d.HELION_QUICK,))
    assert runner.phases(helion_alone) == [helion_alone]


def _execute_with(monkeypatch, plan, ran: list, deadline_in: dict[str, DeadlineReached]) -> None:
    """runner.execute with the GPU's parts replaced: each phase's planning and running logged."""
    import autotune.tuning

    monkeypatch.setattr(autotune.tuning, "gpu_available", lambda: True)
    monkeypatch.setattr(runner, "warm_up", lambda console, problems=(), device="cuda": ran.append(("warm up",)))

    def pending(phase, db, console):
        ran.append(("planned", phase.arms))
        return runner.plan_jobs(phase)

    def execute_jobs(jobs, options, console, describe, noun):
        arms = tuple(sorted({job.arm for job in jobs}))
        ran.append(("ran", arms))
        if arms in deadline_in:
            raise deadline_in[arms]

    monkeypatch.setattr(runner, "pending_jobs", pending)
    monkeypatch.setattr(runner, "execute_jobs", execute_jobs)
    runner.execute(plan, ExperimentOptions(folder=None, db=None, out=None), QUIET)


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


def test_the_dry_run_lists_helion_quicks_runs_first_with_seconds_target(tmp_path, capsys):
    runner.main(["--db", str(tmp_path / "heldout.db"), "--shipped", "none", "--shapes", SOFTMAX.shape,
                 "--arms", f"{d.COLD},{d.HELION_QUICK}", "--strategies", "pattern", "--seeds", "1",
                 "--helion-seeds", "1", "--seconds", "target", "--dry-run"])
    lines = capsys.readouterr().out.splitlines()
    listed = [line for line in lines if " seed 1 at " in line]
    assert [line.split()[0] for line in listed] == [d.HELION_QUICK, d.COLD]
    assert any("Helion quick's runs come first" in line for line in lines)
