"""`autotune merge`: measurements made in a copy of a database come home, renumbered, once."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from autotune.cache import Cache
from autotune.cli import main
from autotune.evaluators.fake import FakeEvaluator
from autotune.session import Session, SessionSettings
from autotune.strategies.random_search import RandomSearch
from tests.conftest import hashed_cost


def _tune(db: Path, task, seed: int, budget: int = 6) -> int:
    cache = Cache.open(db, create=True)
    try:
        settings = SessionSettings(strategy="random", seed=seed, budget=budget, generation_size=3, mode="gpu")
        outcome = Session(task, FakeEvaluator(hashed_cost, baselines={"torch.softmax": 0.5}),
                          RandomSearch(task.space, seed=seed), settings, cache).run()
        return outcome.session_id
    finally:
        cache.close()


def _counts(db: Path) -> tuple[int, int, int]:
    conn = sqlite3.connect(db)
    try:
        return tuple(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                     for t in ("sessions", "evaluations", "baselines"))
    finally:
        conn.close()


def test_merge_renumbers_sessions_keeps_every_row_and_is_idempotent(tmp_path, triton_task):
    home, away = tmp_path / "home.db", tmp_path / "away.db"
    _tune(home, triton_task, seed=1)
    shutil.copy(home, away)  # the copy taken to the GPU machine ...
    _tune(away, triton_task, seed=2)  # ... where a second session was recorded (also id 2 there)
    _tune(home, triton_task, seed=3)  # meanwhile home recorded its own session 2
    before_home, before_away = _counts(home), _counts(away)

    assert main(["merge", str(away), "--into", str(home)]) == 0
    after = _counts(home)
    assert after[0] == before_home[0] + 1  # only the session home did not have
    away_only = sqlite3.connect(away).execute("SELECT COUNT(*) FROM evaluations WHERE session_id = 2").fetchone()[0]
    assert after[1] == before_home[1] + away_only  # its evaluations, all of them

    cache = Cache.open(home)
    try:
        seeds = sorted(s["seed"] for s in cache.sessions())
        assert seeds == [1, 2, 3]
        merged = next(s for s in cache.sessions() if s["seed"] == 2)
        rows = cache.session_evaluations(merged["id"])
        assert len(rows) == merged["evaluations"] + merged["rebenchmarked"] and rows
        assert cache.integrity_ok()
    finally:
        cache.close()

    assert main(["merge", str(away), "--into", str(home)]) == 0  # twice: nothing more
    assert _counts(home) == after


def test_merge_into_a_new_file_copies_everything(tmp_path, triton_task):
    source, target = tmp_path / "a.db", tmp_path / "new.db"
    _tune(source, triton_task, seed=4)
    assert main(["merge", str(source), "--into", str(target)]) == 0
    assert _counts(target) == _counts(source)


@pytest.mark.parametrize("bad", ["missing", "text"])
def test_a_bad_source_changes_nothing(tmp_path, triton_task, bad, capsys):
    good, target = tmp_path / "good.db", tmp_path / "target.db"
    _tune(good, triton_task, seed=5)
    _tune(target, triton_task, seed=6)
    source = tmp_path / "bad.db"
    if bad == "text":
        source.write_text("not a database")
    before = target.read_bytes()
    assert main(["merge", str(good), str(source), "--into", str(target)]) == 2
    assert "autotune: error:" in capsys.readouterr().err
    assert target.read_bytes() == before  # checked before anything was merged
