"""The shipped data is read, never written: the user's database layered over it, one store, one
device module, typed session options."""

from __future__ import annotations

import ast
import hashlib
import math
from pathlib import Path

import pytest

from autotune.store.cache import Cache, CacheError
from autotune.store.layers import USER_ROWS_FROM, USER_SESSIONS_FROM
from autotune.cli import main
from autotune.session_options import NewerOptions, SessionOptions
from conftest import REPO, all_counts
from conftest import record_fake_session as record_session

SHAPE = ["--shape", "64x1000"]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def shipped(tmp_path, triton_task) -> Path:
    """A small 'shipped' database where commands look for it by default (no batches beside it:
    read as the file it is): one recorded Triton session (the whole declared space)."""
    path = tmp_path / "data" / "shipped.db"
    path.parent.mkdir()
    record_session(triton_task, path, strategy="grid", budget=1000)
    return path


def test_a_replay_records_into_the_user_database_and_leaves_the_shipped_one_as_it_was(shipped, tmp_path, capsys):
    before, digest = all_counts(shipped), _digest(shipped)
    assert main(["tune", "softmax-triton", *SHAPE, "--budget", "5", "--seed", "2"]) == 0  # defaults: user.db
    assert "REPLAY" in capsys.readouterr().out
    assert all_counts(shipped) == before and _digest(shipped) == digest
    user = Cache.open(tmp_path / "user.db")
    (session,) = user.sessions()
    assert session["id"] == USER_SESSIONS_FROM and session["mode"] == "replay"
    assert session["options"]["shipped"] == "data/shipped.db" and session["options"]["db"] == "user.db"
    user.close()


def test_reads_see_both_files_and_ids_never_collide(shipped, tmp_path, capsys):
    assert main(["tune", "softmax-triton", *SHAPE, "--budget", "3"]) == 0
    capsys.readouterr()
    both = Cache.open(tmp_path / "user.db", shipped=shipped)
    ids = [s["id"] for s in both.sessions()]
    assert ids == [USER_SESSIONS_FROM, 1] and both.session_count() == 2
    assert both.holds_session(USER_SESSIONS_FROM) and not both.holds_session(1)
    assert min(both.db.execute("SELECT id FROM main.evaluations").fetchall())[0] >= USER_ROWS_FROM
    both.close()
    alone = Cache.open(tmp_path / "user.db")  # without the shipped file: only the user's session
    assert [s["id"] for s in alone.sessions()] == [USER_SESSIONS_FROM]
    alone.close()
    assert main(["sessions"]) == 0
    out = capsys.readouterr().out
    assert str(USER_SESSIONS_FROM) in out and "softmax-triton" in out


def test_the_shipped_file_opened_alone_refuses_every_write(shipped, tmp_path, triton_task):
    reader = Cache.open(tmp_path / "absent.db", shipped=shipped)
    assert reader.read_only and not (tmp_path / "absent.db").exists()
    with pytest.raises(CacheError, match="read-only"):
        reader.put_space(triton_task.identity)
    with pytest.raises(CacheError, match="read-only"):
        reader.compact()
    reader.close()


def test_a_user_database_whose_ids_collide_with_the_shipped_ones_is_refused_in_one_line(shipped, tmp_path,
                                                                                        triton_task, capsys):
    old = tmp_path / "old.db"
    record_session(triton_task, old, strategy="random", budget=3)  # numbered from 1, like the shipped file
    assert main(["sessions", "--db", str(old)]) == 2
    err = capsys.readouterr().err
    assert "both number sessions" in err and "--shipped none" in err and len(err.strip().splitlines()) == 1
    assert main(["sessions", "--db", str(old), "--shipped", "none"]) == 0


def test_resume_last_continues_the_newest_session_and_refuses_shipped_ones(shipped, tmp_path, capsys):
    assert main(["tune", "softmax-triton", *SHAPE, "--budget", "6", "--seed", "1"]) == 0
    user = Cache.open(tmp_path / "user.db")
    user.db.execute("UPDATE sessions SET exit_reason = 'interrupted'")  # as if killed
    user.close()
    assert main(["tune", "--resume", "last"]) == 0
    user = Cache.open(tmp_path / "user.db")
    (session,) = user.sessions()
    assert session["exit_reason"] == "budget" and session["evaluations"] == 7  # the default + 6
    first = [(r.generation, r.candidate.key) for r in user.session_evaluations(session["id"]) if r.generation >= 0]
    user.close()
    capsys.readouterr()
    assert main(["tune", "--resume", "last"]) == 2
    assert "a larger --budget continues it" in capsys.readouterr().err
    assert main(["tune", "--resume", "last", "--budget", "12"]) == 0  # generation by generation
    user = Cache.open(tmp_path / "user.db")
    (session,) = user.sessions()
    rows = [(r.generation, r.candidate.key) for r in user.session_evaluations(session["id"]) if r.generation >= 0]
    assert session["budget"] == 12 and session["evaluations"] == 13 and rows[:len(first)] == first
    user.close()
    assert main(["tune", "--resume", "1"]) == 2  # the shipped session
    assert "shipped data" in capsys.readouterr().err


def test_a_replay_is_resumed_from_the_db_it_was_given(shipped, tmp_path, capsys):
    other = tmp_path / "elsewhere.db"
    assert main(["tune", "softmax-triton", *SHAPE, "--budget", "4", "--db", str(other)]) == 0
    user = Cache.open(other)
    user.db.execute("UPDATE sessions SET exit_reason = 'interrupted'")
    user.close()
    assert main(["tune", "--resume", str(USER_SESSIONS_FROM), "--db", str(other)]) == 0
    assert not (tmp_path / "user.db").exists()
    capsys.readouterr()


def test_merge_and_compact_write_only_the_user_database_unless_the_shipped_one_is_named(shipped, tmp_path, capsys):
    digest = _digest(shipped)
    assert main(["tune", "softmax-triton", *SHAPE, "--budget", "3", "--db", "mine.db"]) == 0
    assert main(["merge", "mine.db"]) == 2  # user.db does not exist yet
    assert not (tmp_path / "user.db").exists()
    assert main(["merge", "mine.db", "--create"]) == 0
    assert main(["compact"]) == 0
    assert main(["compact"]) == 0
    assert "0 rows rewritten" in capsys.readouterr().out.splitlines()[-1]  # nothing left to rewrite
    assert _digest(shipped) == digest


# -- typed session options ------------------------------------------------------------------------
def test_session_options_round_trip_and_keep_what_they_do_not_type():
    options = SessionOptions(seed_from="default,heuristic", grid=("a", "b"), slow_factor=math.inf,
                             experiment={"study": "s"}, extra={"labels": {"k": "seed"}})
    record = options.to_record()
    assert record["slow_factor"] is None and record["grid"] == ["a", "b"] and record["labels"] == {"k": "seed"}
    back = SessionOptions.from_record(record)
    assert back.slow_factor == math.inf and back.grid == ("a", "b") and back.extra == {"labels": {"k": "seed"}}
    assert dict(back) == record and back["seed_from"] == "default,heuristic" and back.get("missing") is None
    old = SessionOptions.from_record({"seed_from": "cache", "slow_factor": 2})  # written before versions
    assert old.version == 1 and old.slow_factor == 2.0 and old.seed_from == "cache"
    with pytest.raises(NewerOptions):
        SessionOptions.from_record({"version": 99})


# -- one store, one device module ---------------------------------------------------------------------
STORE = {f"autotune/store/{name}.py" for name in ("cache", "schema", "merge", "layers", "rows", "guard", "copy_without",
                                                 "batches", "build", "append", "migrate")}
DEVICE = {"autotune/device.py"}


def _python_files() -> list[Path]:
    return [p for folder in ("autotune", "experiments", "heuristics", "search_spaces")
            for p in (REPO / folder).rglob("*.py")]


def test_a_copy_without_sessions_drops_their_rows_and_leaves_the_source_as_it_was(tmp_path, triton_task):
    from autotune.store.copy_without import copy_without_sessions

    source = tmp_path / "source.db"
    kept = record_session(triton_task, source, strategy="random", budget=4)
    dropped = record_session(triton_task, source, strategy="random", budget=3, seed=1)
    before = source.read_bytes()
    assert copy_without_sessions(source, tmp_path / "copy.db", [dropped]) == 1
    assert source.read_bytes() == before
    copy, original = Cache.open(tmp_path / "copy.db"), Cache.open(source)
    try:
        assert [s["id"] for s in copy.sessions()] == [kept]
        assert copy.session_evaluations(kept) == original.session_evaluations(kept)
        assert copy.baselines(session_id=kept) == original.baselines(session_id=kept)
        assert copy.session_evaluations(dropped) == [] and original.session_evaluations(dropped)
        assert copy.baselines(session_id=dropped) == {} and original.baselines(session_id=dropped)
    finally:
        copy.close()
        original.close()
    with pytest.raises(FileExistsError):
        copy_without_sessions(source, tmp_path / "copy.db", [kept])


def test_no_sql_outside_the_store():
    offenders = []
    for path in _python_files():
        name = path.relative_to(REPO).as_posix()
        if name in STORE:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if any(m.split(".")[0] == "sqlite3" for m in modules):
                    offenders.append(f"{name}:{node.lineno} imports sqlite3")
            if isinstance(node, ast.Attribute) and node.attr in ("execute", "executemany", "executescript"):
                offenders.append(f"{name}:{node.lineno} .{node.attr}")
    assert offenders == []


def test_the_device_is_queried_in_one_module():
    asks = ("get_device_name", "get_device_properties", "device_count", "is_available")
    offenders = [f"{p.relative_to(REPO)}:{n.lineno}" for p in _python_files()
                 if p.relative_to(REPO).as_posix() not in DEVICE
                 for n in ast.walk(ast.parse(p.read_text()))
                 if isinstance(n, ast.Attribute) and n.attr in asks and "cuda" in ast.unparse(n.value)]
    assert offenders == []
