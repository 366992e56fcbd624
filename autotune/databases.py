"""Which database a command reads and which it writes.

Two files, one rule: the shipped measurements are only ever read; everything a user's command
records (sessions, replays, imports, merges, compaction) goes to the user's database (`user.db`
unless `--db` says otherwise), and every read sees both (see `autotune.store.layers`).  The shipped
measurements are kept as append-only batches (`data/batches/`, under version control); what
commands read is `data/shipped.db`, built from them on first use and rebuilt when they change
(`autotune.store.build`).  Maintainers add measurements as a new batch, explicitly:
`autotune merge NEW.db --into data/batches`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the store imports sqlite_utils (and pandas): only when a command opens a file
    from autotune.store.cache import Cache

USER_DB = Path("user.db")
SHIPPED_DB = Path("data/shipped.db")  # built from data/batches/ beside it (git-ignored)


def add_arguments(parser: argparse.ArgumentParser, *, writes: bool = False) -> None:
    """--db (the user's database) and --shipped (the read-only shipped data) on a sub-command."""
    what = "where this command records, and what it reads first" if writes else "what it reads first"
    parser.add_argument("--db", type=Path, default=USER_DB, help=f"your database: {what} (default: {USER_DB})")
    parser.add_argument("--shipped", type=_shipped_path, default=str(SHIPPED_DB),  # a string: parsed, so built
                        help=f"the shipped measurements, read-only, read beside --db (default: {SHIPPED_DB}; "
                             "'none' reads --db alone)")


def checkout_shipped() -> Path:
    """The shipped database for a caller in any directory: `data/shipped.db` here when its
    batches are here (a command run from the checkout reads and names it relatively), else the
    one in the checkout this package was installed from."""
    if SHIPPED_DB.exists() or (SHIPPED_DB.parent / "batches").is_dir():
        return SHIPPED_DB
    return Path(__file__).resolve().parent.parent / SHIPPED_DB


def _shipped_path(text: str) -> Path | None:
    return None if text.strip().lower() in ("", "none") else ready(Path(text))


def ready(shipped: str | Path | None) -> Path | None:
    """`shipped`, built first from the batches beside it when it is missing or they changed (see
    `autotune.store.build`); a plain file is returned as it is.  None stays None."""
    if shipped is None or str(shipped).strip().lower() in ("", "none"):
        return None
    from autotune.store.build import ensure_current

    return ensure_current(Path(shipped))


def shipped_source(shipped: str | Path) -> Path:
    """What a report names as the shipped data it read: the batches a built database is made
    from (`data/batches`), or the file itself."""
    from autotune.store.batches import batch_folders
    from autotune.store.build import batches_of

    root = batches_of(Path(shipped))
    return root if batch_folders(root) else Path(shipped)


def open_for_reading(db: str | Path = USER_DB, shipped: str | Path | None = SHIPPED_DB) -> "Cache":
    """The user's database with the shipped data beside it; the shipped data alone when the
    user has recorded nothing yet.  Refuses (CacheError) when neither exists."""
    db, shipped = Path(db), ready(shipped)
    if not db.exists() and (shipped is None or not shipped.exists()):
        named = f"{db}" + (f" nor {shipped}" if shipped is not None else "")
        raise_missing(named)
    from autotune.store.cache import Cache

    return Cache.open(db, shipped=shipped)


def read_from(db: str | Path = USER_DB, shipped: str | Path | None = SHIPPED_DB) -> str:
    """The files a read sees, for a report's header: "`user.db` and `data/batches`", or the one that exists."""
    shipped = ready(shipped)
    files = [Path(p) for p in (db,) if Path(p).exists()]
    files += [shipped_source(shipped)] if shipped is not None and shipped.exists() else []
    return " and ".join(f"`{p}`" for p in dict.fromkeys(files)) or f"`{db}`"


def open_for_writing(db: str | Path = USER_DB, shipped: str | Path | None = SHIPPED_DB) -> "Cache":
    """The user's database, created when missing, with the shipped data readable beside it."""
    from autotune.store.cache import Cache

    return Cache.open(Path(db), create=True, shipped=shipped)


def raise_missing(named: str) -> None:
    from autotune.store.schema import CacheError

    if " nor " in named:
        mine, shipped = named.split(" nor ")
        raise CacheError(f"database {mine} does not exist, nor does the shipped {shipped} "
                         "(record a session first, or name one with --db)")
    raise CacheError(f"database {named} does not exist")
