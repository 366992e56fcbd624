"""Which database a command reads and which it writes.

Two files, one rule: the shipped measurements (`cache.db`, under version control) are only
ever read; everything a user's command records (sessions, replays, imports, merges,
compaction) goes to the user's database (`user.db` unless `--db` says otherwise), and every
read sees both (see `cache_layers`).  Maintainers who bring new measurements into the shipped
file name it explicitly: `autotune merge NEW.db --into cache.db`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the store imports sqlite_utils (and pandas): only when a command opens a file
    from autotune.cache import Cache

USER_DB = Path("user.db")
SHIPPED_DB = Path("cache.db")


def add_arguments(parser: argparse.ArgumentParser, *, writes: bool = False) -> None:
    """--db (the user's database) and --shipped (the read-only shipped data) on a sub-command."""
    what = "where this command records, and what it reads first" if writes else "what it reads first"
    parser.add_argument("--db", type=Path, default=USER_DB, help=f"your database: {what} (default: {USER_DB})")
    parser.add_argument("--shipped", type=_shipped_path, default=SHIPPED_DB,
                        help=f"the shipped measurements, read-only, read beside --db (default: {SHIPPED_DB}; "
                             "'none' reads --db alone)")


def _shipped_path(text: str) -> Path | None:
    return None if text.strip().lower() in ("", "none") else Path(text)


def open_for_reading(db: str | Path = USER_DB, shipped: str | Path | None = SHIPPED_DB) -> "Cache":
    """The user's database with the shipped data beside it; the shipped data alone when the
    user has recorded nothing yet.  Refuses (CacheError) when neither exists."""
    db, shipped = Path(db), (Path(shipped) if shipped is not None else None)
    if not db.exists() and (shipped is None or not shipped.exists()):
        named = f"{db}" + (f" nor {shipped}" if shipped is not None else "")
        raise_missing(named)
    from autotune.cache import Cache

    return Cache.open(db, shipped=shipped)


def read_from(db: str | Path = USER_DB, shipped: str | Path | None = SHIPPED_DB) -> str:
    """The files a read sees, for a report's header: "`user.db` and `cache.db`", or the one that exists."""
    files = [Path(p) for p in (db, shipped) if p is not None and Path(p).exists()]
    return " and ".join(f"`{p}`" for p in dict.fromkeys(files)) or f"`{db}`"


def open_for_writing(db: str | Path = USER_DB, shipped: str | Path | None = SHIPPED_DB) -> "Cache":
    """The user's database, created when missing, with the shipped data readable beside it."""
    from autotune.cache import Cache

    return Cache.open(Path(db), create=True, shipped=shipped)


def raise_missing(named: str) -> None:
    from autotune.cache_schema import CacheError

    if " nor " in named:
        mine, shipped = named.split(" nor ")
        raise CacheError(f"database {mine} does not exist, nor does the shipped {shipped} "
                         "(record a session first, or name one with --db)")
    raise CacheError(f"database {named} does not exist")
