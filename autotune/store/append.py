"""Adding measurements to the shipped data: one new batch (`autotune merge NEW.db --into data/batches`).

Why: the batches are never rewritten, so what a merge brings is written as a batch of its own.
The merge itself is the one every database gets (`store.merge`): the batches are built into a
scratch database, the sources are merged into it, and whatever the merge added or changed (new
spaces, aliases, sessions and their rows; rows and ends of shipped sessions continued
elsewhere) is written as the new batch.  A session continued after it was shipped appears again
in the new batch with its new end; the build takes the latest batch's row.

Ids: the first batch keeps the ids the single-file database had (sessions 1 to 1361).  A later
batch is named by a time stamp `T` (the latest time its sources recorded, in whole seconds,
later than every earlier batch's) and numbers its new sessions from `T * 10**4 + 1` and its new
rows from `T * 10**9 + 1`: ids are given once, when the batch is written, never change after,
and two batches never share one (a build refuses batches that do).  Same sources, same batches
before: same batch, byte for byte.
"""

from __future__ import annotations

import hashlib
import sqlite3
import tempfile
from pathlib import Path
from typing import Any, Sequence

from autotune.store.schema import transaction
from autotune.store.batches import TABLES, batch_folders, encode_rows, known_hashes, write_batch
from autotune.store.build import build

SESSIONS_PER_STAMP = 10**4
ROWS_PER_STAMP = 10**9
_ROW_TABLES = ("evaluations", "baselines", "calibrations")


def _stamp(sources: Sequence[Path], folders: list[Path]) -> int:
    """The new batch's time stamp: the latest time the sources recorded, after every earlier batch's."""
    latest = 0.0
    for source in sources:
        conn = sqlite3.connect(f"file:{Path(source).resolve()}?mode=ro", uri=True)
        try:
            for sql in ("SELECT MAX(started), MAX(ended) FROM sessions", "SELECT MAX(created), 0 FROM evaluations"):
                latest = max([latest, *(v or 0 for v in conn.execute(sql).fetchone())])
        finally:
            conn.close()
    earlier = max((int(f.name.split("-")[0]) for f in folders if f.name.split("-")[0].isdigit()), default=0)
    return max(int(latest), earlier + 1)


def append(sources: Sequence[Path], root: Path, *, note: str = "", fork_divergent: bool = False
           ) -> tuple[Path | None, list[dict[str, int]]]:
    """Merge `sources` into the shipped data as one new batch under `root`.  Returns the batch
    (None where the sources held nothing new) and each source's merge counts."""
    from autotune.store.cache import Cache

    folders = batch_folders(root)
    stamp = _stamp(sources, folders)
    with tempfile.TemporaryDirectory(prefix="autotune-batch-") as scratch:
        work = Path(scratch) / "work.db"
        if folders:
            build(root, work, quiet=True)
        else:
            Cache.open(work, create=True).close()  # an empty database where there are no batches yet
        conn = sqlite3.connect(work, isolation_level=None)
        try:
            _before(conn, stamp)
        finally:
            conn.close()
        cache = Cache.open(work)
        try:
            counts = [cache.merge_from(source, fork_divergent=fork_divergent) for source in sources]
        finally:
            cache.close()
        conn = sqlite3.connect(work)
        try:
            rows = encode_rows(conn, _added(stamp), known_hashes(folders))
        finally:
            conn.close()
    if not any(rows[t] for t in TABLES):
        return None, counts
    name = f"{stamp:010d}-{_content_hash(rows)}"
    return write_batch(root, name, rows, note), counts


def _before(conn: sqlite3.Connection, stamp: int) -> None:
    """Snapshot what the shipped data holds, and number what a merge adds in the stamp's range."""
    from autotune.store.build import DIGEST_KEY

    with transaction(conn):
        conn.execute("DELETE FROM meta WHERE key = ?", (DIGEST_KEY,))  # a scratch copy, written by the merge
        conn.execute("CREATE TABLE _old_spaces AS SELECT fingerprint FROM spaces")
        conn.execute("CREATE TABLE _old_aliases AS SELECT space_fingerprint, params_key FROM aliases")
        conn.execute("CREATE TABLE _old_sessions AS SELECT * FROM sessions")
        floors = {"sessions": stamp * SESSIONS_PER_STAMP, **{t: stamp * ROWS_PER_STAMP for t in _ROW_TABLES}}
        for table, floor in floors.items():
            conn.execute("DELETE FROM sqlite_sequence WHERE name = ?", (table,))
            conn.execute("INSERT INTO sqlite_sequence(name, seq) VALUES (?, ?)", (table, floor))


def _added(stamp: int) -> dict[str, str]:
    """Which rows of the merged scratch database the new batch holds (SQL conditions per table)."""
    changed = ("id IN (SELECT s.id FROM sessions s JOIN _old_sessions o ON o.id = s.id WHERE s.ended IS NOT o.ended"
               " OR s.exit_reason IS NOT o.exit_reason OR s.best_key IS NOT o.best_key OR s.options IS NOT o.options"
               " OR s.budget IS NOT o.budget)")
    return {
        "spaces": "fingerprint NOT IN (SELECT fingerprint FROM _old_spaces)",
        "aliases": "NOT EXISTS (SELECT 1 FROM _old_aliases o WHERE o.space_fingerprint = aliases.space_fingerprint"
                   " AND o.params_key = aliases.params_key)",
        "sessions": f"id > {stamp * SESSIONS_PER_STAMP} OR {changed}",
        **{t: f"id > {stamp * ROWS_PER_STAMP}" for t in _ROW_TABLES},
    }


def _content_hash(rows: dict[str, list[dict[str, Any]]]) -> str:
    digest = hashlib.sha256()
    for table in sorted(rows):
        for row in rows[table]:
            digest.update(repr(sorted(row.items())).encode())
    return digest.hexdigest()[:8]
