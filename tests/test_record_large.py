"""experiments.record_large: what the next call of a large recording does, read off the database."""

from __future__ import annotations

import sqlite3

import pytest

from autotune.store.cache import Cache
from autotune.evaluators.fake import FakeEvaluator
from autotune.session import Session, SessionSettings, SilentReporter
from autotune.strategies import get_strategy
from autotune.types import Status
from conftest import hashed_cost
from experiments import record_large

PART = record_large.Part("tiny", "softmax-triton", "64x1000", "float16")


@pytest.fixture
def small_target(monkeypatch):
    """A part of the test's kernel, a target of 100 valid configs, sample sessions of 8."""
    monkeypatch.setattr(record_large, "PARTS", {"tiny": PART})
    monkeypatch.setattr(record_large, "TARGET", 100)
    monkeypatch.setattr(record_large, "SESSION_BUDGET", 8)


def _sample(db, task, seed: int, budget: int = 8, fail_every: int = 4, strategy_options: dict | None = None) -> None:
    """A GPU-mode random session of the part (a fake evaluator; every `fail_every`-th config fails),
    recorded with the strategy options given (as `autotune tune --option` records them)."""
    calls = iter(range(10**6))

    def cost(params):
        return Status.COMPILE_ERROR if next(calls) % fail_every == fail_every - 1 else hashed_cost(params)

    settings = SessionSettings("random", seed, budget, generation_size=4, mode="gpu")
    cache = Cache.open(db, create=True)
    try:
        Session(task, FakeEvaluator(cost), get_strategy("random")(task.space, seed=seed), settings, cache,
                reporter=SilentReporter(), options={"strategy_options": strategy_options or {}}).run()
    finally:
        cache.close()


def _valid(db) -> int:
    """Distinct valid configs, counted by an independent connection."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT COUNT(DISTINCT config_key) FROM evaluations WHERE status = 'ok'").fetchone()[0]
    finally:
        conn.close()


def _interrupt(db, seed: int) -> None:
    conn = sqlite3.connect(db)
    conn.execute("UPDATE sessions SET exit_reason = 'interrupted' WHERE seed = ?", (seed,))  # as if the call was killed
    conn.commit()
    conn.close()


def _standing(db, part: record_large.Part = PART) -> record_large.Standing:
    cache = Cache.open(db)
    try:
        return record_large.standing(cache, part)
    finally:
        cache.close()


def test_a_part_starts_continues_and_moves_to_the_next_seed_until_the_target(small_target, triton_task, tmp_path,
                                                                             monkeypatch):
    db = tmp_path / "r.db"
    Cache.open(db, create=True).close()
    first = _standing(db)
    assert (first.valid, first.resume, first.next_seed, first.done) == (0, None, 11, False)
    assert record_large.tune_arguments(first, db, 60)[:8] == [
        "tune", "softmax-triton", "--shape", "64x1000", "--dtype", "float16", "--strategy", "random"]

    _sample(db, triton_task, seed=11)  # 8 configs and the default, every fourth failed: short of 100
    after_one = _standing(db)
    assert (after_one.valid, after_one.resume, after_one.next_seed) == (_valid(db), None, 12)
    assert 0 < after_one.valid < 8
    assert "--seed" in (args := record_large.tune_arguments(after_one, db, 60)) and args[args.index("--seed") + 1] == "12"

    _sample(db, triton_task, seed=12)
    _interrupt(db, 12)
    cut_short = _standing(db)
    assert cut_short.resume is not None and not cut_short.done
    args = record_large.tune_arguments(cut_short, db, 60)
    assert args[:3] == ["tune", "--resume", str(cut_short.resume)] and args[args.index("--seconds") + 1] == "60"

    _sample(db, triton_task, seed=13)
    monkeypatch.setattr(record_large, "TARGET", _valid(db))
    done = _standing(db)
    assert done.valid == done.target and done.done and done.describe().endswith("; done")


def test_a_screened_part_continues_only_its_screened_sessions_and_asks_tune_for_the_screen(
        small_target, triton_task, tmp_path, monkeypatch):
    screened = record_large.Part("tiny", "softmax-triton", "64x1000", "float16", (("screen", "footprint"),))
    monkeypatch.setattr(record_large, "PARTS", {"tiny": screened})
    db = tmp_path / "r.db"
    _sample(db, triton_task, seed=11)  # an earlier, unscreened sample cut short
    _interrupt(db, 11)
    before = _standing(db, screened)
    assert before.valid == _valid(db) > 0  # its valid configs count ...
    assert (before.resume, before.next_seed) == (None, 12)  # ... but it is not continued
    args = record_large.tune_arguments(before, db, 60)
    assert "--option=screen=footprint" in args and args[args.index("--seed") + 1] == "12"

    _sample(db, triton_task, seed=12, strategy_options={"screen": "footprint"})
    _interrupt(db, 12)
    after = _standing(db, screened)
    assert after.resume is not None
    assert record_large.tune_arguments(after, db, 60)[:3] == ["tune", "--resume", str(after.resume)]
    assert _standing(db).resume != after.resume  # the unscreened part continues the other session


def test_the_target_is_the_whole_space_where_it_is_smaller(small_target, triton_task, tmp_path, monkeypatch):
    db = tmp_path / "r.db"
    _sample(db, triton_task, seed=11)
    monkeypatch.setattr(record_large, "TARGET", 10**9)
    assert _standing(db).target == triton_task.space.cardinality() < 10**9


def test_sessions_of_another_budget_or_strategy_are_not_the_parts(small_target, triton_task, tmp_path):
    db = tmp_path / "r.db"
    _sample(db, triton_task, seed=11, budget=5)  # not a sample session (another budget) ...
    standing = _standing(db)
    assert standing.valid == _valid(db) > 0  # ... but its valid configs count towards the space's
    assert (standing.resume, standing.next_seed) == (None, 11)


def test_status_prints_every_part_and_a_done_part_starts_nothing(small_target, triton_task, tmp_path, capsys,
                                                                 monkeypatch):
    db = tmp_path / "r.db"
    _sample(db, triton_task, seed=11)
    monkeypatch.setattr(record_large, "TARGET", _valid(db))
    import autotune.cli

    monkeypatch.setattr(autotune.cli, "main", lambda argv: pytest.fail(f"tune ran: {argv}"))
    assert record_large.main(["--status", "--db", str(db)]) == 0
    assert record_large.main(["tiny", "--db", str(db)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and all(line.startswith("tiny: ") and line.endswith("; done") for line in out)


def test_a_missing_database_and_bad_arguments_are_refused(tmp_path, capsys):
    assert record_large.main(["softmax-4096", "--db", str(tmp_path / "none.db")]) == 2
    assert "no database" in capsys.readouterr().err
    for argv in (["bogus"], [], ["softmax-4096", "--seconds", "0"]):
        with pytest.raises(SystemExit) as refused:
            record_large.main(argv)
        assert refused.value.code == 2
