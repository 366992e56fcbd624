"""A copy of a database without some of its sessions.

Part of the store.  An experiment whose seeds may read recorded data but not the experiment's
own results (the held-out study's warm-cache arm: a held-out shape must never seed another
from what the study measured) hands its seed source such a copy; the original is only read.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Iterable

from autotune.store.schema import transaction

# Every table whose rows belong to one session, by its `session_id` column.
SESSION_ROWS = ("evaluations", "baselines", "calibrations")


def copy_without_sessions(source: str | Path, target: str | Path, session_ids: Iterable[int]) -> int:
    """Write `source`'s data into the new file `target`, then delete the sessions `session_ids`
    and every row of theirs; returns how many sessions were deleted.  Spaces and aliases stay:
    a space left without evaluations seeds nothing."""
    target = Path(target)
    if target.exists():
        raise FileExistsError(f"{target} exists: a copy is written into a new file")
    ids = sorted({int(i) for i in session_ids})
    reader = sqlite3.connect(f"{Path(source).resolve().as_uri()}?mode=ro", uri=True)
    writer = sqlite3.connect(target)
    try:
        reader.backup(writer)  # a consistent snapshot, the write-ahead log included
        tables = {row[0] for row in writer.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        marks = ",".join("?" * len(ids))
        with transaction(writer):
            for table in (t for t in SESSION_ROWS if t in tables):
                writer.execute(f"DELETE FROM {table} WHERE session_id IN ({marks})", ids)
            deleted = writer.execute(f"DELETE FROM sessions WHERE id IN ({marks})", ids).rowcount
        return deleted
    finally:
        reader.close()
        writer.close()
