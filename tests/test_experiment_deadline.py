"""`autotune experiment run --deadline`: a wall-clock budget for a whole run, on CPU jobs."""

from __future__ import annotations

import signal
import sqlite3
import textwrap
import time
from pathlib import Path

import pytest
import torch
from rich.console import Console

from autotune.kernels import get_kernel
from autotune.task import bind_live

from autotune.experiment import DeadlineReached, ExperimentOptions, execute_jobs


class NamedJob:
    def __init__(self, name: str, log: list[str], seconds: float = 0.0) -> None:
        self.name, self.log, self.seconds = name, log, seconds

    def __call__(self, db: Path) -> str:
        self.log.append(f"{self.name} started")
        try:
            until = time.monotonic() + self.seconds
            while time.monotonic() < until:  # like a job waiting on its worker processes
                time.sleep(0.02)
        finally:
            self.log.append(f"{self.name} cleaned up")
        return f"{self.name} done"


def options(tmp_path: Path, deadline_in_s: float | None) -> ExperimentOptions:
    deadline_at = time.monotonic() + deadline_in_s if deadline_in_s is not None else None
    return ExperimentOptions(folder=tmp_path, db=tmp_path / "x.db", out=tmp_path, deadline_at=deadline_at)


def run(jobs, opts):
    execute_jobs(jobs, opts, Console(quiet=True), describe=lambda job: job.name)


def test_the_job_running_at_the_deadline_is_interrupted_and_later_ones_never_start(tmp_path):
    log: list[str] = []
    jobs = [NamedJob("a", log), NamedJob("b", log, seconds=30), NamedJob("c", log), NamedJob("d", log)]
    started = time.monotonic()
    with pytest.raises(DeadlineReached) as raised:
        run(jobs, options(tmp_path, 0.5))
    assert time.monotonic() - started < 5  # not the 30 s job b asked for
    assert raised.value.interrupted == "b" and raised.value.not_started == ("c", "d")
    assert log == ["a started", "a cleaned up", "b started", "b cleaned up"]  # b's clean-up ran
    assert str(raised.value) == ("deadline reached: interrupted b (what it measured is recorded; the same command "
                                 "runs what is left); 2 not started: c, d")


def test_a_deadline_already_past_starts_nothing(tmp_path):
    log: list[str] = []
    with pytest.raises(DeadlineReached) as raised:
        run([NamedJob("a", log), NamedJob("b", log)], options(tmp_path, -1.0))
    assert log == [] and raised.value.interrupted is None and raised.value.not_started == ("a", "b")


def test_jobs_done_in_time_leave_no_timer_behind(tmp_path):
    log: list[str] = []
    before = signal.getsignal(signal.SIGALRM)
    run([NamedJob("a", log), NamedJob("b", log)], options(tmp_path, 0.3))
    time.sleep(0.5)  # past the deadline: an armed timer would raise here
    assert log == ["a started", "a cleaned up", "b started", "b cleaned up"]
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0) and signal.getsignal(signal.SIGALRM) == before


def test_a_job_expected_to_run_past_the_deadline_is_not_started_and_later_ones_that_fit_are(tmp_path):
    """A job that says it takes longer than what is left is left for the next command (its time
    would be spent only to be interrupted); a shorter one after it still runs, and the run ends
    with DeadlineReached naming what did not start."""
    log: list[str] = []
    long, short, unknown = NamedJob("long", log), NamedJob("short", log), NamedJob("unknown", log)
    long.expected_s, short.expected_s = 60.0, 0.1  # unknown: no estimate, started as before
    printed: list[str] = []
    console = type("Printer", (), {"print": lambda self, *a, **k: printed.append(" ".join(map(str, a)))})()
    with pytest.raises(DeadlineReached) as raised:
        execute_jobs([long, short, unknown], options(tmp_path, 5.0), console, describe=lambda job: job.name)
    assert log == ["short started", "short cleaned up", "unknown started", "unknown cleaned up"]
    assert raised.value.interrupted is None and raised.value.not_started == ("long",)
    assert any(line.startswith("job 1/3: long: not started, expected to take 60 s with ") for line in printed)
    log.clear()
    run([long, short], options(tmp_path, None))  # without a deadline every job runs
    assert log == ["long started", "long cleaned up", "short started", "short cleaned up"]


def test_jobs_left_out_are_named_with_those_a_later_interruption_stops(tmp_path):
    log: list[str] = []
    long, slow, after = NamedJob("long", log), NamedJob("slow", log, seconds=30), NamedJob("after", log)
    long.expected_s = 60.0
    with pytest.raises(DeadlineReached) as raised:
        run([long, slow, after], options(tmp_path, 0.5))
    assert raised.value.interrupted == "slow" and raised.value.not_started == ("long", "after")


def test_without_a_deadline_nothing_is_armed(tmp_path):
    log: list[str] = []
    run([NamedJob("a", log, seconds=0.1)], options(tmp_path, None))
    assert log == ["a started", "a cleaned up"] and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


EXPERIMENT = '''
"""A CPU experiment for the deadline test: each job is a fake-evaluator tuning session."""
import torch

from autotune.store.cache import Cache
from autotune.evaluators.fake import FakeEvaluator
from autotune.experiment import execute_jobs
from autotune.kernels import get_kernel
from autotune.session import Session, SessionSettings, SilentReporter
from autotune.strategies import get_strategy
from autotune.task import bind_live


class Job:
    def __init__(self, seed):
        self.seed = seed

    def __call__(self, db):
        task = bind_live(get_kernel("softmax-triton"), (64, 1000), torch.float16, "cpu")
        settings = SessionSettings("random", self.seed, 2000, generation_size=4, mode="gpu")
        strategy = get_strategy("random")(task.space, seed=self.seed)
        evaluator = FakeEvaluator(lambda params: 1.0 + sum(map(hash, map(str, params.values()))) % 97, delay_s=0.05)
        return Session(task, evaluator, strategy, settings, Cache.open(db, create=True),
                       reporter=SilentReporter()).run().exit_reason


def run(options, console):
    execute_jobs([Job(1), Job(2)], options, console, describe=lambda job: f"seed {job.seed}")


def report(options, console):
    options.out.mkdir(parents=True, exist_ok=True)
    path = options.out / "README.md"
    path.write_text("report")
    return path
'''


def test_the_cli_records_the_interrupted_session_writes_the_report_and_exits_75(tmp_path, capsys):
    from autotune.cli import main

    folder = tmp_path / "deadline_study"
    folder.mkdir()
    (folder / "__init__.py").write_text(textwrap.dedent(EXPERIMENT))
    db = tmp_path / "study.db"
    bind_live(get_kernel("softmax-triton"), (64, 1000), torch.float16, "cpu")  # imports done before the clock
    started = time.monotonic()
    status = main(["experiment", "run", str(folder), "--db", str(db), "--deadline", "3"])
    assert status == 75 and time.monotonic() - started < 30  # 2 x 2000 configs x 0.05 s would take 200 s
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert ("deadline reached: interrupted seed 1 (what it measured is recorded; the same command runs what is "
            "left); 1 not started: seed 2") in err
    sessions = sqlite3.connect(db).execute("SELECT id, exit_reason FROM sessions").fetchall()
    assert [reason for _, reason in sessions] == ["interrupted"]
    evaluations = sqlite3.connect(db).execute("SELECT count(*) FROM evaluations").fetchone()[0]
    assert 0 < evaluations < 2000  # what was measured before the deadline is kept
    assert (folder / "report" / "README.md").read_text() == "report"


def test_deadline_with_workers_is_refused_in_one_line(tmp_path, capsys):
    from autotune.cli import main

    folder = tmp_path / "deadline_study"
    folder.mkdir()
    (folder / "__init__.py").write_text(textwrap.dedent(EXPERIMENT))
    status = main(["experiment", "run", str(folder), "--db", str(tmp_path / "s.db"), "--deadline", "5",
                   "--workers", "local:1"])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "--deadline applies to jobs run on this machine" in err


@pytest.mark.parametrize("value", ["0", "-3", "soon"])
def test_a_deadline_that_is_not_a_positive_number_is_refused(value, tmp_path, capsys):
    from autotune.cli import main

    folder = tmp_path / "deadline_study"
    folder.mkdir()
    (folder / "__init__.py").write_text(textwrap.dedent(EXPERIMENT))
    assert main(["experiment", "run", str(folder), "--deadline", value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "argument --deadline" in err


def test_a_run_cut_short_before_anything_to_report_still_exits_75(tmp_path, capsys):
    """The deadline struck before any selected job finished, so the report has nothing to show:
    the command says so and keeps the deadline's exit status (75), the one a batch script tests."""
    from autotune.cli import main

    folder = tmp_path / "deadline_study"
    folder.mkdir()
    nothing = EXPERIMENT.replace('    options.out.mkdir(parents=True, exist_ok=True)\n',
                                 '    from autotune.errors import UserError\n'
                                 '    raise UserError("no finished session to report")\n')
    (folder / "__init__.py").write_text(textwrap.dedent(nothing))
    status = main(["experiment", "run", str(folder), "--db", str(tmp_path / "s.db"), "--deadline", "1"])
    err = capsys.readouterr().err
    assert status == 75
    assert "deadline reached: interrupted seed 1" in err and "no report: no finished session to report" in err
    assert main(["experiment", "report", str(folder), "--db", str(tmp_path / "s.db")]) == 2  # a plain report still refuses
