"""The user's database and the shipped measurements, read as one and written as one.

Why: the shipped data is under version control (as batches, built into `data/shipped.db`), and
a user's sessions, imports, merges and compaction must never rewrite it; yet every read (a replay, seeds from the nearest
recorded shape, `show`, `export`, run-time config tables) should see both.  So the user's
database is the connection's main database and the shipped one is attached read-only as
`shipped`.  Reads go through temporary views `all_<table>` over both; writes name the real
tables, which resolve to main (the attached file is opened with `mode=ro`: a write that
reached it would fail, never succeed).

Ids: a user database layered over shipped data numbers its sessions from 10001 and its rows
from 10**9 + 1, so ids never collide with the first shipped batch's (below them) nor with a later
batch's (far above them, see `autotune.store.append`).  A database whose ids do collide (one
made before it was layered) is refused in one line.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

from autotune.store.schema import SCHEMA_VERSION, CacheError, transaction

LAYERED_TABLES = ("spaces", "sessions", "evaluations", "aliases", "baselines", "calibrations")
USER_SESSIONS_FROM = 10_001
USER_ROWS_FROM = 1_000_000_001
_ROW_TABLES = ("evaluations", "baselines", "calibrations")


def read_only_uri(path: Path) -> str:
    """A URI that opens `path` for reading only (the connection must be made with uri=True)."""
    return f"file:{quote(str(path.resolve()))}?mode=ro"


def same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and a.resolve().samefile(b.resolve())
    except OSError:
        return False


def attach_shipped(conn: sqlite3.Connection, shipped: Path, user: Path) -> None:
    """Attach the shipped database read-only and check that it can be read beside the user's."""
    try:
        conn.execute("ATTACH DATABASE ? AS shipped", (read_only_uri(shipped),))
        row = conn.execute("SELECT value FROM shipped.meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.DatabaseError as error:
        raise CacheError(f"the shipped data {shipped} cannot be read ({error}); read {user} alone with "
                         "--shipped none") from None
    version = int(row[0]) if row and str(row[0]).isdigit() else None
    if version != SCHEMA_VERSION:
        raise CacheError(f"the shipped data {shipped} has cache schema {version}, this autotune reads "
                         f"{SCHEMA_VERSION}; read {user} alone with --shipped none")
    _number_after_shipped(conn, shipped, user)


def _number_after_shipped(conn: sqlite3.Connection, shipped: Path, user: Path) -> None:
    (user_min,) = conn.execute("SELECT MIN(id) FROM main.sessions").fetchone()
    if user_min is None:
        start_ids_after_shipped(conn)
        return
    # Batches added after the first number their sessions far above the user's range (see
    # autotune.store.append), so what is refused is a shared id, not a lower one.
    (shipped_max,) = conn.execute("SELECT COALESCE(MAX(id), 0) FROM shipped.sessions WHERE id < ?",
                                  (USER_SESSIONS_FROM,)).fetchone()
    shared = conn.execute("SELECT 1 FROM main.sessions WHERE id IN (SELECT id FROM shipped.sessions)"
                          " LIMIT 1").fetchone()
    if shared is not None or user_min <= shipped_max:
        raise CacheError(f"{user} and the shipped data {shipped} both number sessions from {user_min} to "
                         f"{shipped_max}: read {user} alone with --shipped none, or merge it into a new "
                         "database (autotune merge ... --into NEW.db --create)")


def start_ids_after_shipped(conn: sqlite3.Connection) -> None:
    """Make a database with no sessions yet number its sessions and rows in the user's range."""
    floors = {"sessions": USER_SESSIONS_FROM - 1, **{t: USER_ROWS_FROM - 1 for t in _ROW_TABLES}}
    with transaction(conn):
        for table, floor in floors.items():
            current = conn.execute("SELECT seq FROM main.sqlite_sequence WHERE name = ?", (table,)).fetchone()
            if current is None:
                conn.execute("INSERT INTO main.sqlite_sequence(name, seq) VALUES (?, ?)", (table, floor))
            elif current[0] < floor:
                conn.execute("UPDATE main.sqlite_sequence SET seq = ? WHERE name = ?", (floor, table))


def create_views(conn: sqlite3.Connection, *, shipped: bool) -> None:
    """`all_<table>` for every layered table: main's rows, then the shipped rows main lacks."""
    for table in LAYERED_TABLES:
        columns = [r[1] for r in conn.execute(f"PRAGMA main.table_info({table})")]
        if not columns:
            continue  # a table an older schema lacks (such a file is only read by `merge`)
        listed = ", ".join(columns)
        sql = f"CREATE TEMP VIEW IF NOT EXISTS all_{table} AS SELECT {listed} FROM main.{table}"
        if shipped:
            theirs = {r[1] for r in conn.execute(f"PRAGMA shipped.table_info({table})")}
            picked = ", ".join(c if c in theirs else f"NULL AS {c}" for c in columns)
            sql += f" UNION ALL SELECT {picked} FROM shipped.{table} AS s"
            if table == "spaces":  # one row per space: the user's copy of a shipped space is the same
                sql += " WHERE s.fingerprint NOT IN (SELECT fingerprint FROM main.spaces)"
            elif table == "aliases":
                sql += (" WHERE NOT EXISTS (SELECT 1 FROM main.aliases m WHERE m.space_fingerprint ="
                        " s.space_fingerprint AND m.params_key = s.params_key)")
        conn.execute(sql)

