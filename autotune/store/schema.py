"""What a tuning database must look like, and how an older one is brought up to date.

Why a module of its own: `cache.py` holds the queries; this holds the schema text, the check
made on opening (refuse anything this version would misread, in one line that says what to
do) and the migrations.  A migration runs in one transaction, so a database is either wholly
at the old version or wholly at the new one, and two processes opening the same old database
at once migrate it once.
"""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path

SCHEMA_VERSION = 5


class CacheError(Exception):
    """A database that is missing, unreadable, or made by another schema."""


_CALIBRATIONS = """
CREATE TABLE calibrations (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id INTEGER NOT NULL REFERENCES sessions(id),
    space_fingerprint TEXT NOT NULL, worker TEXT NOT NULL, config_key TEXT NOT NULL, median_ms REAL,
    min_ms REAL, max_ms REAL, repetitions INTEGER, created REAL NOT NULL)"""

# A raw point of a space -> the config it normalised to.  params_json and config_json are NULL
# where an evaluation of the same space and config_key holds exactly them (`Cache.compact`
# drops the copy: most aliases are of configs that were then measured).
_ALIASES = """
CREATE TABLE {name} (
    space_fingerprint TEXT NOT NULL, params_key TEXT NOT NULL, params_json TEXT, config_json TEXT,
    config_key TEXT NOT NULL, PRIMARY KEY (space_fingerprint, params_key))"""

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE spaces (
    fingerprint TEXT PRIMARY KEY, kernel TEXT NOT NULL, shape TEXT NOT NULL, dtype TEXT NOT NULL,
    device TEXT NOT NULL, versions TEXT NOT NULL, source_hash TEXT NOT NULL, definition TEXT NOT NULL,
    created REAL NOT NULL);
CREATE TABLE sessions (
    id INTEGER PRIMARY KEY AUTOINCREMENT, kernel TEXT NOT NULL, shape TEXT NOT NULL, dtype TEXT NOT NULL,
    strategy TEXT NOT NULL, seed INTEGER, budget INTEGER, seconds REAL,
    space_fingerprint TEXT NOT NULL REFERENCES spaces(fingerprint), device TEXT NOT NULL, versions TEXT NOT NULL,
    mode TEXT NOT NULL, options TEXT NOT NULL, started REAL NOT NULL, ended REAL, exit_reason TEXT,
    best_key TEXT);
CREATE TABLE evaluations (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id INTEGER NOT NULL REFERENCES sessions(id),
    space_fingerprint TEXT NOT NULL, generation INTEGER NOT NULL, ordinal INTEGER NOT NULL,
    config_key TEXT NOT NULL, config_json TEXT NOT NULL, params_json TEXT NOT NULL, status TEXT NOT NULL,
    error TEXT, compile_s REAL, bench_s REAL, median_ms REAL, min_ms REAL, max_ms REAL, repetitions INTEGER,
    rel_error REAL, source TEXT NOT NULL, samples_json TEXT, created REAL NOT NULL, measured_on TEXT,
    checked TEXT, origin TEXT, UNIQUE (session_id, generation, ordinal));
CREATE INDEX evaluations_by_config ON evaluations(space_fingerprint, config_key);
""" + _ALIASES.format(name="aliases") + """;
CREATE TABLE baselines (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id INTEGER NOT NULL REFERENCES sessions(id),
    space_fingerprint TEXT NOT NULL, name TEXT NOT NULL, status TEXT NOT NULL, error TEXT, median_ms REAL,
    min_ms REAL, max_ms REAL, repetitions INTEGER, rel_error REAL, created REAL NOT NULL);
""" + _CALIBRATIONS + ";\n"

# version -> the statements that bring a database of that version to the next one, and what
# they add (table -> new columns; None: the whole table), so an older database can be checked
# for damage before it is migrated.
# Schema 3 also reads timing samples written as base64 float32 (see `cache.samples_text`),
# which schema 2 readers cannot: hence a version, though its only statement rebuilds aliases.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: ("ALTER TABLE evaluations ADD COLUMN measured_on TEXT", _CALIBRATIONS),
    2: (_ALIASES.format(name="aliases_v3"), "INSERT INTO aliases_v3 SELECT * FROM aliases", "DROP TABLE aliases",
        "ALTER TABLE aliases_v3 RENAME TO aliases"),
    3: (),  # schema 4 writes points as value lists (see `cache.params_text`): schema 3 readers cannot read them
    # schema 5: how each row's accuracy check was poisoned, and where its config came from
    4: ("ALTER TABLE evaluations ADD COLUMN checked TEXT", "ALTER TABLE evaluations ADD COLUMN origin TEXT"),
}
ADDED_BY_MIGRATION: dict[int, dict[str, frozenset[str] | None]] = {
    1: {"evaluations": frozenset({"measured_on"}), "calibrations": None},
    2: {},
    3: {},
    4: {"evaluations": frozenset({"checked", "origin"})},
}


class transaction:
    """BEGIN IMMEDIATE ... COMMIT, so writers queue on the lock instead of failing mid-way."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type, exc, tb) -> None:
        self.conn.execute("COMMIT" if exc_type is None else "ROLLBACK")


def create_schema(conn: sqlite3.Connection) -> None:
    try:
        conn.execute("PRAGMA journal_mode=WAL")
    except sqlite3.OperationalError:
        pass  # another process is creating it too; WAL is persistent once set
    with transaction(conn):
        if conn.execute("SELECT name FROM sqlite_master WHERE name='meta'").fetchone():
            return  # a concurrent creator won the race
        for statement in filter(str.strip, SCHEMA.split(";")):
            conn.execute(statement)
        conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))


def check_schema(conn: sqlite3.Connection, path: Path, tables: set[str], *, migrate: bool) -> int:
    """The database's schema version, after migrating it to the current one when `migrate`.

    Refuses (CacheError, one line) a newer, unknown or unversioned schema, an older one with
    no migration, and a database that lacks tables or columns its version promises.  With
    `migrate=False` an older database that can be migrated is left as it is (read it only).
    """
    version = _read_version(conn, path, tables)
    here = f"this autotune reads cache schema {SCHEMA_VERSION}"
    if version > SCHEMA_VERSION:
        raise CacheError(f"{path} was made by a newer autotune (cache schema {version}); {here}: "
                         "upgrade autotune to read it")
    if version < SCHEMA_VERSION and version not in MIGRATIONS:
        raise CacheError(f"{path} was made by an older autotune (cache schema {version}); {here} and "
                         "has no migration from it: read it with the autotune that made it, or record into "
                         "a new database with --db PATH")
    missing = missing_parts(conn, tables, version)
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise CacheError(f"{path} says cache schema {version} but lacks {shown}: it is damaged; "
                         "restore it from a copy or record into a new database with --db PATH")
    if version < SCHEMA_VERSION and migrate:
        _migrate(conn, path, version)
        version = SCHEMA_VERSION
    return version


def _read_version(conn: sqlite3.Connection, path: Path, tables: set[str]) -> int:
    here = f"this autotune reads cache schema {SCHEMA_VERSION}"
    if "meta" not in tables:
        if {"spaces", "sessions", "evaluations"} <= tables:
            raise CacheError(f"{path} has autotune's tables but no schema version (no meta table), so it "
                             f"cannot be read safely; {here}: record into a new database with --db PATH")
        raise CacheError(f"{path} is a sqlite database but not an autotune cache (no meta table)")
    try:
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    except sqlite3.DatabaseError as error:  # a meta table of some other program
        raise CacheError(f"{path} has a meta table autotune cannot read ({error}); {here}") from None
    if row is None:
        raise CacheError(f"{path} has no schema version in its meta table (damaged, or not made by "
                         f"autotune); {here}")
    try:
        return int(row[0])
    except (TypeError, ValueError):
        raise CacheError(f"{path} has an unknown cache schema version {row[0]!r}; {here}") from None


def _migrate(conn: sqlite3.Connection, path: Path, version: int) -> None:
    """Apply every migration from `version` up, in one transaction (re-checked under the lock)."""
    try:
        with transaction(conn):
            (current,) = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            for step in range(int(current), SCHEMA_VERSION):  # nothing when a concurrent opener did it
                for statement in MIGRATIONS[step]:
                    conn.execute(statement)
            conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
    except sqlite3.OperationalError as error:  # read-only file or directory, disk full
        raise CacheError(f"{path} has cache schema {version} and must be migrated to {SCHEMA_VERSION} before "
                         f"use, but it cannot be written ({error}); copy it somewhere writable") from None


def missing_parts(conn: sqlite3.Connection, tables: set[str], version: int = SCHEMA_VERSION) -> list[str]:
    """Tables and columns that a database of `version` must have and this one lacks."""
    missing = []
    for table, columns in expected_columns(version).items():
        if table not in tables:
            missing.append(f"table {table}")
        else:
            present = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
            missing += [f"{table}.{c}" for c in sorted(columns - present)]
    return missing


@functools.lru_cache(maxsize=None)
def expected_columns(version: int = SCHEMA_VERSION) -> dict[str, frozenset[str]]:
    """Every table of schema `version` and its columns: the current schema text, less what the
    migrations from `version` on add."""
    conn = sqlite3.connect(":memory:")
    try:
        for statement in filter(str.strip, SCHEMA.split(";")):
            conn.execute(statement)
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        expected = {t: frozenset(r[1] for r in conn.execute(f"PRAGMA table_info({t})")) for t in names
                    if not t.startswith("sqlite_")}
    finally:
        conn.close()
    for step in range(version, SCHEMA_VERSION):
        for table, columns in ADDED_BY_MIGRATION[step].items():
            if columns is None:
                expected.pop(table, None)
            else:
                expected[table] = expected[table] - columns
    return expected
