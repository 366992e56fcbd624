"""From the single shipped sqlite file to batches, and the check that nothing was lost.

`python -m autotune.store.migrate cache.db data/batches` writes every row of the old file
(failures, timing samples and aliases included) as the first batch, keeping its ids (so
`autotune show 3` names the same session), then builds a database from the batches and
compares it with the old file table by table, row by row.  `--check-only` runs the check
alone.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

from autotune.store.batches import TABLES, batch_folders, encode_rows, write_batch
from autotune.store.build import DIGEST_KEY, build

MIGRATED = "0000000000-migrated"  # sorts before every batch named by its time stamp
NOTE = "every row of the single-file cache.db of schema 5, ids kept"


def read_only(path: Path) -> sqlite3.Connection:
    """A connection that can never write `path` (nor its journal)."""
    return sqlite3.connect(f"file:{path.resolve()}?mode=ro&immutable=1", uri=True)


def migrate(source: Path, root: Path) -> Path:
    """Write every row of `source` as the first batch under `root`."""
    if batch_folders(root):
        raise SystemExit(f"{root} already holds batches: the migration writes the first one")
    conn = read_only(source)
    try:
        rows = encode_rows(conn, dict.fromkeys(TABLES, "1"), set())
    finally:
        conn.close()
    return write_batch(root, MIGRATED, rows, NOTE)


def _rows(conn: sqlite3.Connection, table: str) -> Iterator[tuple]:
    """A table's rows with each value's sqlite type, in a fixed order (by id, else by every column)."""
    columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    typed = ", ".join(f"typeof({c}), {c}" for c in columns)
    order = "id" if "id" in columns else ", ".join(columns)
    where = f" WHERE key != '{DIGEST_KEY}'" if table == "meta" else ""
    yield from conn.execute(f"SELECT {typed} FROM {table}{where} ORDER BY {order}")


def compare(reference: Path, built: Path) -> dict[str, int]:
    """Rows per table when `built` equals `reference` table by table, row by row (every column,
    with its sqlite type); raises AssertionError at the first difference.  The built file's
    record of its batches is the one row it may add."""
    ref, new = read_only(reference), read_only(built)
    try:
        names = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
        tables = [r[0] for r in ref.execute(names)]
        assert tables == [r[0] for r in new.execute(names)], "the two databases hold different tables"
        counts = {}
        for table in tables:
            count = 0
            for count, (a, b) in enumerate(zip(_rows(ref, table), _rows(new, table), strict=True), 1):
                assert a == b, f"{table} differs: {a[:12]} != {b[:12]}"
            counts[table] = count
        return counts
    finally:
        ref.close()
        new.close()


def check(reference: Path, root: Path) -> dict[str, int]:
    """Build a database from the batches under `root` and compare it with `reference`."""
    with tempfile.TemporaryDirectory() as scratch:
        built = Path(scratch) / "built.db"
        build(root, built, quiet=True)
        return compare(reference, built)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autotune.store.migrate", description=__doc__)
    parser.add_argument("source", type=Path, help="the single-file database (cache.db), only read")
    parser.add_argument("root", type=Path, help="the batch folder (data/batches)")
    parser.add_argument("--check-only", action="store_true", help="compare the batches with the source, write nothing")
    args = parser.parse_args(argv)
    if not args.source.exists():
        parser.error(f"{args.source} does not exist")
    started = time.monotonic()
    if not args.check_only:
        print(f"wrote {migrate(args.source, args.root)} in {time.monotonic() - started:.1f} s", file=sys.stderr)
    started = time.monotonic()
    counts = check(args.source, args.root)
    print(f"lossless: {', '.join(f'{t} {n}' for t, n in counts.items())} rows equal "
          f"({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
