"""Faults injected on the CPU: sessions killed with SIGKILL, several writers on one database."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from autotune.store.cache import Cache
from tests.conftest import subprocess_env

ROOT = Path(__file__).resolve().parent.parent
BUDGET = 40


def runner(db: Path, seed: int, delay: float, resume: int | None = None) -> subprocess.Popen:
    args = [sys.executable, "-m", "tests.session_runner", str(db), str(seed), str(BUDGET), str(delay)]
    if resume is not None:
        args.append(str(resume))
    return subprocess.Popen(args, cwd=ROOT, env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def rows(db: Path, session: int = 1) -> list[tuple[int, str, float]]:
    cache = Cache.open(db)
    try:
        return [(r.generation, r.candidate.key, r.result.median_ms) for r in cache.session_evaluations(session)
                if r.generation >= 0]
    finally:
        cache.close()


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> list[tuple[int, str, float]]:
    db = tmp_path_factory.mktemp("ref") / "ref.db"
    done = runner(db, seed=11, delay=0.0)
    out, err = done.communicate(timeout=300)
    assert done.returncode == 0, err
    return rows(db)


KILLS = 2  # each kill costs two interpreter start-ups (seconds on two cores); the trials run side by side


def kill_and_resume(reference: list, db: Path, pause_s: float) -> bool:
    """One trial: a session SIGKILLed `pause_s` after it started, checked, then resumed to the end
    and checked again.  Returns whether the kill landed before the session's last evaluation."""
    child = runner(db, seed=11, delay=0.05)
    assert child.stdout.readline().startswith("started 1")
    time.sleep(pause_s)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    before = rows(db)
    assert Cache.open(db).integrity_ok()
    keys = [k for _, k, _ in before]
    assert len(keys) == len(set(keys)), "an evaluation was recorded twice"
    assert set(before) <= set(reference), "a row differs from the uninterrupted run"

    finisher = runner(db, seed=11, delay=0.0, resume=1)
    out, err = finisher.communicate(timeout=300)
    assert finisher.returncode == 0, err
    after = rows(db)
    assert sorted(after) == sorted(reference)
    assert Cache.open(db).integrity_ok()
    assert Cache.open(db).session(1)["exit_reason"] == "budget"
    return len(before) < len(reference)


def test_sigkill_at_random_moments_loses_at_most_the_evaluation_in_flight(reference, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    rng = random.Random(2024)
    pauses = [rng.uniform(0.0, BUDGET * 0.05 * 0.8) for _ in range(KILLS)]  # somewhere inside the session
    with ThreadPoolExecutor(KILLS) as pool:  # each trial waits on its own processes; an assertion re-raises here
        trials = [pool.submit(kill_and_resume, reference, tmp_path / f"kill{i}.db", pause)
                  for i, pause in enumerate(pauses)]
        interrupted = sum(trial.result(timeout=600) for trial in trials)
    assert interrupted >= KILLS - 1, "the kills did not land inside the sessions"


WRITERS = 3  # each writer is an interpreter of its own: enough to contend for the lock on two cores


def test_concurrent_writers_lose_nothing_and_never_report_a_lock(tmp_path):
    db = tmp_path / "shared.db"
    children = [runner(db, seed=100 + i, delay=0.002) for i in range(WRITERS)]
    outputs = [child.communicate(timeout=300) for child in children]
    for child, (out, err) in zip(children, outputs):
        assert child.returncode == 0, err
        assert "locked" not in err.lower() and "done" in out
    cache = Cache.open(db)
    sessions = {s["id"]: s for s in cache.sessions()}
    assert len(sessions) == WRITERS
    total = 0
    for session_id, session in sessions.items():
        evaluations = [r for r in cache.session_evaluations(session_id) if r.generation >= 0]
        per_generation = Counter((r.generation, r.ordinal) for r in evaluations)
        assert max(per_generation.values()) == 1
        keys = [r.candidate.key for r in evaluations]
        assert len(keys) == len(set(keys)) == BUDGET + 1  # the budget plus the free default config
        assert session["exit_reason"] == "budget"
        total += len(keys)
    assert total == WRITERS * (BUDGET + 1)
    assert cache.integrity_ok()


@pytest.mark.parametrize("change", ["device", "versions", "source_hash"])
def test_measurements_from_another_device_toolchain_or_source_are_not_reused(triton_task, tmp_path, change):
    import dataclasses

    from autotune.evaluators.fake import FakeEvaluator
    from autotune.session import Session, SessionSettings
    from autotune.strategies import get_strategy
    from tests.conftest import hashed_cost

    db = Cache.open(tmp_path / "t.db", create=True)

    def session(task, evaluator):
        settings = SessionSettings("random", 3, 12, generation_size=4, mode="gpu")
        return Session(task, evaluator, get_strategy("random")(task.space, seed=3), settings, db).run()

    session(triton_task, FakeEvaluator(hashed_cost))
    altered = {"device": "another GPU", "versions": {"torch": "0.0", "triton": "0.0", "helion": "0.0"},
               "source_hash": "edited-kernel"}[change]
    identity = dataclasses.replace(triton_task.identity, **{change: altered})
    other = dataclasses.replace(triton_task, identity=identity)
    assert other.fingerprint != triton_task.fingerprint
    evaluator = FakeEvaluator(hashed_cost)
    session(other, evaluator)
    assert len(evaluator.calls) == 13, "a measurement from another fingerprint was reused"
    sources = {row[0] for row in db.db.execute("SELECT DISTINCT source FROM evaluations")}
    assert sources == {"measured"}
    # and the same identity again reuses everything
    again = FakeEvaluator(hashed_cost)
    session(other, again)
    assert again.calls == []
