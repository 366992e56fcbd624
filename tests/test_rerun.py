"""`autotune rerun`: re-running a recorded session with today's strategy against its own answers."""

from __future__ import annotations

import random
import re
import sqlite3

import pytest

from autotune.store.cache import Cache
from autotune.store.merge import FORKED
from autotune.databases import SHIPPED_DB, open_for_reading
from autotune.errors import UserError
from autotune.evaluators.fake import FakeEvaluator
from autotune.session import Session, SessionSettings
from autotune.session_options import SessionOptions
from autotune.simulation import rerun
from autotune.simulation.rerun import Rerun, rerun_session, sessions_of
from autotune.strategies import get_strategy
from autotune.strategies import lineage, strategy_source
from autotune.strategies.pattern_presets import FullPatternSearch
from conftest import REPO, assert_one_line_error, hashed_cost, record_fake_session, run_main
from search_spaces.space import params_key


@pytest.fixture
def recorded(helion_task, tmp_path):
    """A database with one fake-GPU pattern-full session of the Helion softmax (60 configs)."""
    path = tmp_path / "r.db"
    return path, record_fake_session(helion_task, path, strategy="pattern-full", budget=60, seed=3)


def _rerun(path, session, strategy=None):
    cache = open_for_reading(path)
    try:
        return rerun_session(cache, session, strategy)
    finally:
        cache.close()


def _generations(path, session) -> dict[int, int]:
    with sqlite3.connect(path) as db:
        return dict(db.execute("SELECT generation, COUNT(*) FROM evaluations WHERE session_id = ? AND generation >= 0"
                               " GROUP BY generation", (session,)).fetchall())


def test_todays_strategy_asks_what_its_recorded_session_asked(recorded):
    path, session = recorded
    result = _rerun(path, session)
    assert result.same and result.difference is None
    assert result.generations == len(_generations(path, session)) > 3
    assert result.matched == result.generations


def test_another_strategy_differs_after_the_shared_generation_zero(recorded):
    path, session = recorded
    result = _rerun(path, session, "random")
    assert not result.same and result.strategy == "random"
    assert result.matched >= 1  # the default, given to every strategy alike
    assert result.difference.startswith(f"generation {result.matched}:")


def test_a_walk_changed_in_one_later_generation_is_caught_there(recorded, monkeypatch):
    path, session = recorded
    plain = FullPatternSearch.ask
    calls = []

    def keeps_one_of_the_third_ask(self, n):
        asked = plain(self, n)
        calls.append(1)
        return asked[:1] if len(calls) == 3 else asked

    monkeypatch.setattr(FullPatternSearch, "ask", keeps_one_of_the_third_ask)
    assert _generations(path, session)[3] > 1
    result = _rerun(path, session)
    assert not result.same
    assert result.matched == 3 and re.match(r"generation 3: \d+ recorded config\(s\) not asked", result.difference)


def test_a_last_generation_cut_short_still_matches_but_a_middle_one_does_not(recorded, tmp_path):
    """A search limit can end the last generation part way (the rows it got are a subset of what
    was asked); a generation missing rows before the last is a different walk."""
    path, session = recorded
    sizes = _generations(path, session)
    last = max(sizes)
    middle = next(g for g in range(1, last) if sizes[g] > 1)
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM evaluations WHERE session_id = ? AND generation = ? AND ordinal = ?",
                   (session, last, sizes[last] - 1))
    assert _rerun(path, session).same
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM evaluations WHERE session_id = ? AND generation = ? AND ordinal = 0", (session, middle))
    result = _rerun(path, session)
    assert not result.same and result.matched == middle


def test_seeds_are_given_again_as_the_session_was_given_them(helion_task, tmp_path):
    """A seed whose point normalises to another one: the session records the point as given
    (`seed_points`), and the re-run starts from it.  Without that record (older sessions) the
    re-run gives the config it became, and a difference is marked inconclusive."""
    rng = random.Random(5)
    raw = next(p for p in (helion_task.space.sample(rng) for _ in range(500))
               if params_key(helion_task.candidate(p).params) != params_key(p))
    seed_key = helion_task.candidate(raw).key
    path = tmp_path / "seeded.db"
    db = Cache.open(path, create=True)
    evaluator = FakeEvaluator(lambda p: 0.01 if helion_task.candidate(p).key == seed_key else 1 + hashed_cost(p))
    session = Session(helion_task, evaluator, get_strategy("pattern-full")(helion_task.space, seed=1),
                      SessionSettings("pattern-full", 1, 40, mode="gpu"), db,
                      options=SessionOptions(seeds=("user",), seed_points=(raw,)), seeds=[("user", raw)]).run()
    db.close()
    result = _rerun(path, session.session_id)
    assert result.same and result.seeds_recorded and result.conclusive
    with sqlite3.connect(path) as db:
        db.execute("UPDATE sessions SET options = json_remove(options, '$.seed_points')")
    older = _rerun(path, session.session_id)
    assert not older.seeds_recorded
    assert older.conclusive == older.same


def test_only_a_conclusive_difference_fails_the_command(recorded, capsys, monkeypatch):
    path, session = recorded
    answers = {"inconclusive": Rerun(session, "pattern-full", "abc", 5, 1, "generation 1: ...", seeds_recorded=False),
               "conclusive": Rerun(session, "pattern-full", "abc", 5, 1, "generation 1: ...", seeds_recorded=True)}
    for kind, answer in answers.items():
        monkeypatch.setattr(rerun, "rerun_session", lambda *args, answer=answer: answer)
        code, out, _ = run_main(["rerun", str(session), "--db", str(path)], capsys)
        assert code == (1 if kind == "conclusive" else 0), out
        assert ("inconclusive" in out) == (kind == "inconclusive")


def test_sessions_that_cannot_be_rerun_are_refused_in_one_line(recorded):
    path, session = recorded
    with pytest.raises(UserError, match="no session 999"):
        _rerun(path, 999)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE sessions SET exit_reason = ? WHERE id = ?", (FORKED, session))
    with pytest.raises(UserError, match="is a fork kept by a merge"):
        _rerun(path, session)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE sessions SET mode = 'replay' WHERE id = ?", (session,))
    with pytest.raises(UserError, match="was a replay"):
        _rerun(path, session)


def test_sessions_of_a_strategy_are_grouped_by_their_recorded_source(helion_task, tmp_path):
    path = tmp_path / "s.db"
    ids = [record_fake_session(helion_task, path, strategy="pattern-full", budget=20, seed=s) for s in (1, 2)]
    record_fake_session(helion_task, path, strategy="random", budget=10)
    with sqlite3.connect(path) as db:  # the first as if recorded under an earlier source
        db.execute("UPDATE sessions SET options = json_set(options, '$.strategy_source', 'abc123') WHERE id = ?",
                   (ids[0],))
    cache = Cache.open(path)
    try:
        assert [s["id"] for s in sessions_of(cache, "pattern-full")] == ids
        assert [s["id"] for s in sessions_of(cache, "pattern-full", "abc")] == ids[:1]
    finally:
        cache.close()


def test_the_command_says_per_session_and_per_source_and_exits_1_on_a_difference(recorded, capsys):
    path, session = recorded
    code, out, _ = run_main(["rerun", str(session), "--db", str(path)], capsys)
    assert code == 0 and "asked the same" in out and "1 of 1 session(s) asked the same" in out
    code, out, _ = run_main(["rerun", "--strategy", "pattern-full", "--db", str(path)], capsys)
    assert code == 0 and f"session {session} (pattern-full" in out
    code, out, _ = run_main(["rerun", str(session), "--as", "random", "--db", str(path)], capsys)
    assert code == 1 and "differs at generation" in out and "0 of 1 session(s) asked the same" in out


@pytest.mark.parametrize("argv, says", [
    (["rerun"], "one of the two"),
    (["rerun", "1", "--strategy", "pattern"], "one of the two"),
    (["rerun", "1", "--source", "ab"], "--source goes with --strategy"),
    (["rerun", "--strategy", "no-such-walk"], "no-such-walk"),
])
def test_bad_requests_are_one_line_errors(argv, says, recorded, capsys):
    path, _ = recorded
    line = assert_one_line_error(*run_main([*argv, "--db", str(path)], capsys))
    assert says in line


def test_a_source_is_the_same_when_present_or_proven_against_the_present_one(monkeypatch):
    present = strategy_source("pattern-full")
    assert lineage.same_source("pattern-full", present)
    assert not lineage.same_source("pattern-full", "0" * 24)
    monkeypatch.setattr(lineage, "PROVEN_SAME", {"pattern-full": {present: ("0" * 24,)}})
    assert lineage.same_source("pattern-full", "0" * 24)
    assert not lineage.same_source("pattern-lines", "0" * 24)  # declared for another strategy
    monkeypatch.setattr(lineage, "PROVEN_SAME", {"pattern-full": {"1" * 24: ("0" * 24,)}})
    assert not lineage.same_source("pattern-full", "0" * 24)  # proven against a source since changed: lapsed


def test_every_declared_source_is_proven_against_todays_and_its_runs_rerun_the_same():
    """Each declaration names today's source (a stale one fails here, to be proven again or
    removed), and the shipped sessions recorded under each declared source, the first and the
    last of each, ask the same again (`autotune rerun --strategy NAME --source HASH` re-runs them all)."""
    cache = open_for_reading(REPO / "no-user.db", REPO / SHIPPED_DB)  # the shipped data alone
    try:
        for strategy, proofs in lineage.PROVEN_SAME.items():
            assert set(proofs) == {strategy_source(strategy)}, f"{strategy}: a declaration against a changed source"
            for earlier in proofs[strategy_source(strategy)]:
                found = sessions_of(cache, strategy, earlier)
                assert found, f"{strategy}: no shipped session under {earlier}"
                for session in {found[0]["id"], found[-1]["id"]}:
                    assert rerun_session(cache, session).same, (strategy, earlier, session)
    finally:
        cache.close()
