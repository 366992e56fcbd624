"""The shipped data as batches: written deterministically and losslessly, built into sqlite on
first use and again when they change (once, when two processes ask at once), added to only by
`merge --into data/batches`, never rewritten."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotune.store.cache import Cache
from autotune.cli import main
from autotune.store import build as store_build
from autotune.store.batches import TABLES, batch_folders, encode_rows, write_batch
from autotune.store.migrate import MIGRATED, compare, read_only
from conftest import REPO, assert_one_line_error, record_fake_session, subprocess_env

FIXTURE = REPO / "tests" / "fixtures" / "batches"
FIXTURE_SESSIONS = [107, 106, 100]  # newest first (tests/fixtures/make_batches.py)


@pytest.fixture
def data(tmp_path) -> Path:
    """A copy of the fixture batches where commands look for the shipped data (./data/batches)."""
    shutil.copytree(FIXTURE, tmp_path / "data" / "batches")
    return tmp_path / "data"


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_batch_is_written_deterministically_and_reads_back_row_for_row(data, tmp_path):
    built = store_build.ensure_current(data / "shipped.db", quiet=True)
    conn = read_only(built)
    try:
        rows = encode_rows(conn, dict.fromkeys(TABLES, "1"), set())
    finally:
        conn.close()
    again = write_batch(tmp_path / "again", MIGRATED, rows, "shipped sessions 100, 106, 107 with their rows: "
                                                               "the tests' fixture")
    assert _files(again) == _files(FIXTURE / MIGRATED)  # same rows, same bytes
    store_build.build(tmp_path / "again", tmp_path / "again.db", quiet=True)
    counts = compare(built, tmp_path / "again.db")  # every table, every column, every row
    assert counts["evaluations"] == 165 and counts["sessions"] == 3 and counts["aliases"] == 153
    conn = read_only(built)
    statuses = dict(conn.execute("SELECT status, COUNT(*) FROM evaluations GROUP BY status").fetchall())
    assert statuses["ok"] == 162 and sum(statuses.values()) == 165  # failures kept
    assert conn.execute("SELECT COUNT(*) FROM evaluations WHERE samples_json LIKE '{\"f32\":%'").fetchone()[0] == 162
    conn.close()


def test_the_shipped_database_is_built_on_first_use_and_rebuilt_only_when_the_batches_change(data, tmp_path,
                                                                                             capsys, triton_task):
    shipped = data / "shipped.db"
    assert main(["sessions"]) == 0  # first use: built, then read
    out, err = capsys.readouterr()
    assert shipped.exists() and "built data/shipped.db from 1 batch(es)" in err
    assert all(str(i) in out for i in FIXTURE_SESSIONS)
    stamp = shipped.stat().st_mtime_ns
    assert main(["show", "106"]) == 0 and "built" not in capsys.readouterr().err
    assert shipped.stat().st_mtime_ns == stamp  # unchanged batches: not rebuilt
    new = tmp_path / "new.db"
    record_fake_session(triton_task, new, strategy="random", budget=4)
    assert main(["merge", str(new), "--into", "data/batches", "--note", "one fake session"]) == 0
    capsys.readouterr()
    assert main(["sessions", "--shipped", "data/shipped.db"]) == 0
    out, err = capsys.readouterr()
    assert "built data/shipped.db from 2 batch(es)" in err and "softmax-triton" in out
    reader = Cache.open(tmp_path / "user.db", shipped=shipped)
    assert reader.read_only and reader.session(106) is not None and reader.session_count() == 4
    reader.close()


def test_merge_into_the_batches_adds_one_batch_and_never_rewrites_one(data, tmp_path, capsys, triton_task):
    from autotune.store.append import SESSIONS_PER_STAMP

    before = _files(data / "batches")
    new = tmp_path / "new.db"
    first = record_fake_session(triton_task, new, strategy="random", budget=5)
    assert main(["merge", str(new), "--into", "data/batches", "--note", "a fake GPU session"]) == 0
    assert "new batch" in capsys.readouterr().out
    after = _files(data / "batches")
    assert {k: v for k, v in after.items() if k in before} == before  # nothing rewritten
    (added,) = [f for f in batch_folders(data / "batches") if f.name != MIGRATED]
    assert '"note": "a fake GPU session"' in (added / "batch.json").read_text()
    stamp = int(added.name.split("-")[0])
    shipped = store_build.ensure_current(data / "shipped.db", quiet=True)
    conn = read_only(shipped)
    ids = [r[0] for r in conn.execute("SELECT id FROM sessions ORDER BY id")]
    assert ids[:3] == sorted(FIXTURE_SESSIONS) and ids[3] == stamp * SESSIONS_PER_STAMP + 1  # ids kept, new unique
    assert conn.execute("SELECT COUNT(*) FROM evaluations WHERE session_id = ?", (ids[3],)).fetchone()[0] == 6
    conn.close()
    assert main(["merge", str(new), "--into", "data/batches"]) == 0  # the same file again: nothing new
    assert "nothing new" in capsys.readouterr().out and _files(data / "batches") == after
    record_fake_session(triton_task, new, strategy="random", budget=3, seed=4)  # a second session in the copy
    assert main(["merge", str(new), "--into", "data/batches"]) == 0
    assert len(batch_folders(data / "batches")) == 3
    assert {k: v for k, v in _files(data / "batches").items() if k in after} == after
    assert main(["show", str(ids[3])]) == 0 and first == 1


def test_what_no_command_may_write_is_refused_in_one_line(data, tmp_path, capsys, triton_task):
    shipped = store_build.ensure_current(data / "shipped.db", quiet=True)
    before = _files(data)
    new = tmp_path / "new.db"
    record_fake_session(triton_task, new, strategy="random", budget=3)
    assert_one_line_error(*_run(["merge", str(new), "--into", "data/shipped.db"], capsys))
    assert_one_line_error(*_run(["compact", "--db", "data/shipped.db"], capsys))
    assert_one_line_error(*_run(["merge", str(new), "--note", "x", "--create"], capsys))
    assert _files(data) == before and not (tmp_path / "user.db").exists()
    evaluations = data / "batches" / MIGRATED / "evaluations.parquet"
    evaluations.write_bytes(evaluations.read_bytes()[:-1] + b"\0")  # a batch altered in place
    shipped.unlink()
    line = assert_one_line_error(*_run(["sessions"], capsys))
    assert "differs from what its batch recorded" in line and not shipped.exists()


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    return main(argv), *capsys.readouterr()


def test_two_processes_building_at_once_build_it_once(data):
    code = ("import sys; from pathlib import Path; from autotune.store.build import ensure_current;"
            "from autotune.store.cache import Cache; p = ensure_current(Path('data/shipped.db'));"
            "c = Cache.open(Path('user.db'), shipped=p); print(c.session_count())")
    runs = [subprocess.Popen([sys.executable, "-c", code], cwd=data.parent, env=subprocess_env(), text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outs = [run.communicate(timeout=120) for run in runs]
    assert [r.returncode for r in runs] == [0, 0], outs
    assert [o.strip() for o, _ in outs] == ["3", "3"]
    assert sum("built data/shipped.db" in e for _, e in outs) == 1  # the other waited on the lock, then read it
    assert not list(data.glob(".shipped.db.building-*"))
    conn = sqlite3.connect(data / "shipped.db")
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_a_builder_that_never_finishes_is_waited_for_only_until_the_deadline(data):
    import fcntl

    from autotune.store.schema import CacheError

    holder = open(data / "shipped.db.lock", "a+")
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        started = time.monotonic()
        with pytest.raises(CacheError, match="another process has been building"):
            with store_build._lock(data / "shipped.db", deadline_s=0.5):
                pass
        assert time.monotonic() - started < 5
    finally:
        holder.close()


REFERENCE = REPO / "cache.db"


@pytest.mark.skipif(not REFERENCE.exists() or not batch_folders(REPO / "data" / "batches"),
                    reason="the single-file cache.db (the migration's reference) is gone")
def test_the_shipped_batches_hold_every_row_of_cache_db():
    """The full migration check (about 20 s on two cores): the database built from the shipped
    batches equals cache.db table by table, row by row."""
    from autotune.store.migrate import check

    counts = check(REFERENCE, REPO / "data" / "batches")
    assert counts["evaluations"] == 194701 and counts["sessions"] == 1361 and counts["aliases"] == 175928


def test_a_database_of_ones_own_where_the_build_would_go_is_never_replaced(data, triton_task, capsys):
    mine = data / "shipped.db"  # recorded by hand beside the batches: not built from them
    session = record_fake_session(triton_task, mine, strategy="random", budget=3)
    assert store_build.ensure_current(mine, quiet=True) == mine
    assert main(["sessions", "--db", str(mine), "--shipped", "none"]) == 0
    assert "softmax-triton" in capsys.readouterr().out
    cache = Cache.open(mine)
    assert [s["id"] for s in cache.sessions()] == [session] and not cache.read_only
    cache.close()
