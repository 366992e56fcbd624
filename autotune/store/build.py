"""The shipped database as a build product: made from the batches on first use, rebuilt when they change.

Why: commands read sqlite, but what is under version control is the batches (`batches.py`).
`data/shipped.db` (git-ignored) is built from `data/batches/` beside it the first time a command
reads the shipped data, and again whenever the batches differ from those it was built from (a
digest of their manifests, kept in its `meta` table).  Two processes that find it missing or
stale at once build it once: the builder holds a lock (with a deadline), builds into a
temporary file and renames it into place, so a reader sees the old file or the new one, never
half of one.  Nothing here writes the batches.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Iterator

from autotune.store.schema import SCHEMA, SCHEMA_VERSION, CacheError
from autotune.store.batches import (
    TABLES, BatchError, batch_folders, decode_rows, digest, manifest, read_table, sqlite_columns,
)

DIGEST_KEY = "batches_digest"
LOCK_DEADLINE_S = 300.0


def batches_of(built: Path) -> Path:
    """The batch folder a built database is made from: `batches/` beside it."""
    return built.parent / "batches"


def built_digest(path: Path) -> str | None:
    """The digest of the batches `path` was built from; None for a missing or foreign file."""
    if not path.is_file():
        return None
    try:
        conn = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (DIGEST_KEY,)).fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return None
    return row[0] if row else None


def is_built(path: Path) -> bool:
    """Whether a database is a build product of batches (so no command may write it)."""
    return built_digest(path) is not None


def ensure_current(path: Path, *, quiet: bool = False) -> Path:
    """Build `path` from the batches beside it when it is missing or they changed; returns `path`.
    A path with no batches beside it, or a database that was not built from batches, is left alone."""
    root = batches_of(path)
    if not batch_folders(root):
        return path
    wanted = digest(root)
    current = built_digest(path)
    if path.exists() and current is None:
        return path  # a database of someone's own beside the batches: never replaced
    if current == wanted:
        return path
    with _lock(path):
        if built_digest(path) != digest(root):  # another process may have built it meanwhile
            build(root, path, quiet=quiet)
    return path


def build(root: Path, out: Path, *, quiet: bool = False) -> dict[str, int]:
    """Build the database `out` from every batch under `root` (replacing `out` atomically).
    Returns the rows per table."""
    folders = batch_folders(root)
    if not folders:
        raise CacheError(f"no batches under {root}")
    wanted = digest(root)
    temporary = out.with_name(f".{out.name}.building-{os.getpid()}")
    temporary.unlink(missing_ok=True)
    started = time.monotonic()
    try:
        counts = _fill(temporary, folders, wanted, quiet=quiet)
        os.replace(temporary, out)
    except BatchError as error:
        raise CacheError(str(error)) from None
    finally:
        temporary.unlink(missing_ok=True)
    if not quiet:
        print(f"built {out} from {len(folders)} batch(es) of {root} in {time.monotonic() - started:.1f} s",
              file=sys.stderr)
    return counts


def _fill(path: Path, folders: list[Path], wanted: str, *, quiet: bool) -> dict[str, int]:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    total = sum(manifest(f)["files"][f"{t}.parquet"]["rows"] for f in folders for t in TABLES)
    conn = sqlite3.connect(path, isolation_level=None)
    counts = dict.fromkeys(TABLES, 0)
    progress = Progress(TextColumn("building {task.fields[target]}"), BarColumn(),
                        TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(), console=Console(stderr=True),
                        disable=quiet or not sys.stderr.isatty(), transient=True)  # a bar on a terminal only
    try:
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("BEGIN")
        for statement in filter(str.strip, SCHEMA.split(";")):
            conn.execute(statement)
        conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        conn.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (DIGEST_KEY, wanted))
        texts: dict[str, str] = {}
        with progress:
            task = progress.add_task("build", total=total, target=path.name.split(".building")[0].lstrip("."))
            for folder in folders:
                config_columns = read_table(folder, "configs")
                texts.update(zip(config_columns["hash"], config_columns["json"]))
                for table in TABLES:
                    rows = list(decode_rows(table, read_table(folder, table), texts))
                    _insert(conn, table, rows, folder)
                    counts[table] += len(rows)
                    progress.advance(task, len(rows))
        for table in ("sessions", "evaluations", "baselines", "calibrations"):  # as a database made by `create_schema`
            conn.execute("INSERT INTO sqlite_sequence(name, seq) SELECT ?, 0 WHERE NOT EXISTS"  # and migrated has them
                         " (SELECT 1 FROM sqlite_sequence WHERE name = ?)", (table, table))
        conn.execute("COMMIT")
    except KeyError as error:
        raise BatchError(f"a batch refers to config text {error} that no batch holds") from None
    finally:
        conn.close()
    return counts


def _insert(conn: sqlite3.Connection, table: str, rows: list[tuple], folder: Path) -> None:
    columns = sqlite_columns(table)
    marks = ", ".join("?" * len(columns))
    # A later batch's session row replaces an earlier one (a session continued after it was
    # shipped); spaces and aliases are the same in every batch that holds them.
    verb = {"sessions": "INSERT OR REPLACE", "spaces": "INSERT OR IGNORE", "aliases": "INSERT OR IGNORE"}
    try:
        conn.executemany(f"{verb.get(table, 'INSERT')} INTO {table}({', '.join(columns)}) VALUES ({marks})", rows)
    except sqlite3.IntegrityError as error:
        raise BatchError(f"batch {folder} repeats an id of an earlier batch in {table} ({error})") from None


@contextlib.contextmanager
def _lock(path: Path, deadline_s: float = LOCK_DEADLINE_S) -> Iterator[None]:
    """An exclusive lock beside `path` (released when the holder exits, even killed); waits up to
    `deadline_s` for another builder, then refuses in one line."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path.with_name(path.name + ".lock"), "a+")
    try:
        give_up = time.monotonic() + deadline_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > give_up:
                    raise CacheError(f"another process has been building {path} for over {deadline_s:.0f} s; "
                                     f"try again, or delete {path} and its .lock file if none is running") from None
                time.sleep(0.1)
        yield
    finally:
        handle.close()
