"""`autotune merge`: measurements made in a copy of a database come home, renumbered, once."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from autotune.store.cache import Cache
from autotune.cli import main
from autotune.evaluators.fake import FakeEvaluator
from autotune.session import Session, SessionSettings
from autotune.strategies.random_search import RandomSearch
from autotune.types import Result, Status
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
    assert _counts(away) == before_away  # the database merged from is only read
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
        # Each of the copy's sessions is found here under the id home gave it.
        assert merged["id"] == 3 and cache.session_here(away, 2) == 3 and cache.session_here(away, 1) == 1
        assert cache.session_here(away, 99) is None
    finally:
        cache.close()

    assert main(["merge", str(away), "--into", str(home)]) == 0  # twice: nothing more
    assert _counts(home) == after


def test_merge_into_a_new_file_copies_everything(tmp_path, triton_task):
    source, target = tmp_path / "a.db", tmp_path / "new.db"
    _tune(source, triton_task, seed=4)
    assert main(["merge", str(source), "--into", str(target)]) == 2  # a new target only when asked for
    assert not target.exists()
    assert main(["merge", str(source), "--into", str(target), "--create"]) == 0
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


# -- a session continued in the copy (resumed there) is brought up to date ----------------------
class _Calibrated(FakeEvaluator):
    """A fake spread over one GPU: its reference timing is recorded each time a session (re)starts;
    with `stop_after`, 'killed' (KeyboardInterrupt) after that many results, or while measuring
    the baselines when 0."""

    def __init__(self, stop_after: int | None = None) -> None:
        super().__init__(hashed_cost, baselines={"torch.softmax": 0.5})
        self.stop_after = stop_after
        self.calibration = {"gpu0": Result(key="ref", status=Status.OK, median_ms=0.25, repetitions=10,
                                           measured_on="gpu0")}

    def baselines(self):
        if self.stop_after == 0:
            raise KeyboardInterrupt
        return super().baselines()

    def evaluate(self, candidates):
        for result in super().evaluate(candidates):
            if self.stop_after is not None and len(self.calls) > self.stop_after:
                raise KeyboardInterrupt
            yield result


def _run(db: Path, task, evaluator: FakeEvaluator, resume: int | None = None) -> None:
    cache = Cache.open(db, create=True)
    try:
        settings = SessionSettings(strategy="random", seed=7, budget=9, generation_size=3, mode="gpu")
        Session(task, evaluator, RandomSearch(task.space, seed=7), settings, cache, resume_session=resume).run()
    finally:
        cache.close()


def _cut_short(db: Path, task, stop_after: int, killed: bool) -> None:
    """Session 1 of `db`, stopped early: interrupted (its end recorded), or `killed` (no end)."""
    with pytest.raises(KeyboardInterrupt):
        _run(db, task, _Calibrated(stop_after))
    if killed:  # a process killed outright never records its end
        cache = Cache.open(db)
        cache.reopen_session(1)
        cache.close()


def _state(db: Path) -> tuple[dict, list, dict, int]:
    """Session 1 as the API reads it, its rows, its baselines and its calibration row count."""
    cache = Cache.open(db)
    try:
        rows = [(r.generation, r.ordinal, r.candidate.key, r.result) for r in cache.session_evaluations(1)]
        calibrations = cache.db.execute("SELECT COUNT(*) FROM calibrations WHERE session_id = 1").fetchone()[0]
        return cache.session(1), rows, cache.baselines(session_id=1), calibrations
    finally:
        cache.close()


@pytest.mark.parametrize("stop_after, killed", [(4, False), (4, True), (0, False)],
                         ids=["interrupted", "killed", "interrupted-in-baselines"])
def test_a_session_resumed_in_the_copy_is_brought_up_to_date(tmp_path, triton_task, stop_after, killed, capsys):
    home, away = tmp_path / "home.db", tmp_path / "away.db"
    _cut_short(home, triton_task, stop_after, killed)
    shutil.copy(home, away)  # the copy taken to the GPU machine ...
    _run(away, triton_task, _Calibrated(), resume=1)  # ... where the session was resumed and finished
    unfinished, finished = _state(home), _state(away)
    assert finished[0]["exit_reason"] == "budget" and len(finished[1]) > len(unfinished[1])
    assert finished[3] == unfinished[3] + 1  # the resume took its own calibration

    assert main(["merge", str(away), "--into", str(home)]) == 0
    added = len(finished[1]) - len(unfinished[1]) + len(finished[2]) - len(unfinished[2]) + 1
    said = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert f"1 session(s) already there, 1 of them brought up to date ({added} row(s) added)" in said
    assert _state(home) == finished  # every row, the baselines, the calibrations and the end
    after = _counts(home)

    assert main(["merge", str(away), "--into", str(home)]) == 0  # twice: nothing more
    assert "0 of them brought up to date (0 row(s) added)" in " ".join(capsys.readouterr().out.split())
    assert _counts(home) == after and _state(home) == finished


def test_an_unfinished_copy_does_not_take_the_end_of_a_session_that_got_further(tmp_path, triton_task):
    home, away = tmp_path / "home.db", tmp_path / "away.db"
    _cut_short(home, triton_task, 4, killed=False)
    shutil.copy(home, away)  # the copy stays behind; home resumes and finishes
    _run(home, triton_task, _Calibrated(), resume=1)
    finished = _state(home)
    cache = Cache.open(home)
    try:
        assert cache.merge_from(away)["extended_sessions"] == 0
    finally:
        cache.close()
    assert _state(home) == finished


def _two_histories(home: Path, away: Path, task, *, at_first: bool) -> tuple[int, int, list]:
    """Session 1 cut short in `home`, copied to `away` and resumed there to its end; then home,
    continued another way, records another config at the first (or last) place only the copy's
    resume reached.  Returns that place (generation, ordinal) and the copy's rows."""
    _cut_short(home, task, 4, killed=False)
    shutil.copy(home, away)
    _run(away, task, _Calibrated(), resume=1)
    away_rows = _state(away)[1]
    generation, ordinal, key, _ = away_rows[len(_state(home)[1]) if at_first else -1]
    cache = Cache.open(home)
    try:
        other = next(r for r in cache.session_evaluations(1) if r.candidate.key != key)
        cache.record(1, task.fingerprint, generation, ordinal, other.candidate, other.result)
    finally:
        cache.close()
    return generation, ordinal, away_rows


def test_two_histories_of_one_session_are_refused_and_change_nothing(tmp_path, triton_task, capsys):
    home, away = tmp_path / "home.db", tmp_path / "away.db"
    generation, ordinal, _ = _two_histories(home, away, triton_task, at_first=False)
    before, state = home.read_bytes(), _state(home)

    assert main(["merge", str(away), "--into", str(home)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("autotune: error:") and "\n" not in error
    assert "session 1" in error and f"generation {generation}, ordinal {ordinal}" in error
    assert home.read_bytes() == before and _state(home) == state


def test_a_divergent_copy_kept_as_a_fork_holds_only_its_own_rows_once(tmp_path, triton_task, capsys):
    home, away = tmp_path / "home.db", tmp_path / "away.db"
    generation, ordinal, away_rows = _two_histories(home, away, triton_task, at_first=True)
    original = _state(home)

    assert main(["merge", str(away), "--into", str(home), "--fork-divergent"]) == 0
    forked = [row for row in away_rows if row[:2] >= (generation, ordinal)]
    assert len(forked) >= 2  # the place where they differ and what the copy measured after it
    said = " ".join(capsys.readouterr().out.split())
    assert f"1 kept as fork(s) ({len(forked) + 1} row(s))" in said  # its rows and the resume's calibration
    assert _state(home) == original  # the original's history is untouched
    cache = Cache.open(home)
    try:
        fork = cache.session(2)
        assert fork["exit_reason"] == "diverged"
        assert fork["options"]["forked_from"] == {"session": 1, "generation": generation, "ordinal": ordinal}
        assert [(r.generation, r.ordinal, r.candidate.key, r.result) for r in cache.session_evaluations(2)] == forked
        assert cache.baselines(session_id=2) == {}  # the original holds them
    finally:
        cache.close()
    after = _counts(home)

    assert main(["merge", str(away), "--into", str(home), "--fork-divergent"]) == 0  # twice: one fork, no new rows
    assert "1 kept as fork(s) (0 row(s))" in " ".join(capsys.readouterr().out.split())
    assert _counts(home) == after

    assert main(["tune", "--resume", "2", "--replay", "--db", str(home)]) == 2  # a fork cannot go on
    assert "is a fork of session 1" in capsys.readouterr().err


def test_a_copy_holding_a_fork_merges_again_and_the_fork_names_its_original_by_its_id_there(tmp_path, triton_task,
                                                                                             capsys):
    home, away = tmp_path / "home.db", tmp_path / "away.db"
    generation, ordinal, _ = _two_histories(home, away, triton_task, at_first=True)
    assert main(["merge", str(away), "--into", str(home), "--fork-divergent"]) == 0  # home: session 1 and fork 2
    copy = tmp_path / "copy.db"
    shutil.copy(home, copy)  # a later copy of home carries the fork: its fork is home's fork, not session 1
    state = _state(home)
    assert main(["merge", str(copy), "--into", str(home)]) == 0
    assert _state(home) == state

    elsewhere = tmp_path / "elsewhere.db"
    _tune(elsewhere, triton_task, seed=99)  # its session 1 is another one: home's sessions get new ids there
    capsys.readouterr()
    assert main(["merge", str(home), "--into", str(elsewhere)]) == 0
    source = Cache.open(home)
    try:
        fork_rows = [(r.generation, r.ordinal, r.candidate.key) for r in source.session_evaluations(2)]
    finally:
        source.close()
    cache = Cache.open(elsewhere)
    try:
        assert cache.session(2)["exit_reason"] != "diverged"  # home's session 1
        fork = cache.session(3)
        assert fork["exit_reason"] == "diverged"
        assert fork["options"]["forked_from"] == {"session": 2, "generation": generation, "ordinal": ordinal}
        assert [(r.generation, r.ordinal, r.candidate.key) for r in cache.session_evaluations(3)] == fork_rows
    finally:
        cache.close()
    counts = _counts(elsewhere)
    assert main(["merge", str(home), "--into", str(elsewhere)]) == 0  # again: nothing new, nothing refused
    assert _counts(elsewhere) == counts
