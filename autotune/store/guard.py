"""One writer per database: a process may be forbidden to open any database but those it is given.

Why: a worker of a distributed run that opened the shared database would be a second writer
(on another host, a different file altogether); results must flow back to the session's
process, which alone records them.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from autotune.store.schema import CacheError

# -- one writer: the process that owns the session ------------------------------------------
_writes_forbidden_because: str | None = None
_allowed_paths: set[Path] = set()


def forbid_writes_in_this_process(reason: str) -> None:
    """Make every later `Cache.open` in this process fail, saying `reason`.

    Why: a worker of a distributed run that opened the shared cache.db would be a second
    writer (on another host, a different file altogether); results must flow back to the
    session's process, which alone records them.
    """
    global _writes_forbidden_because
    _writes_forbidden_because = reason


def writes_forbidden() -> str | None:
    """Why this process may not open a database, or None where it may."""
    return _writes_forbidden_because


@contextlib.contextmanager
def allow_database(path: str | Path) -> Iterator[Path]:
    """Permit exactly this database in a forbidden process, for the block: a job's private
    temporary database, whose bytes go back to the single writer to be merged."""
    resolved = Path(path).resolve()
    _allowed_paths.add(resolved)
    try:
        yield resolved
    finally:
        _allowed_paths.discard(resolved)


def _refuse_if_forbidden(path: Path) -> None:
    if _writes_forbidden_because is not None and path.resolve() not in _allowed_paths:
        raise CacheError(f"{path} may not be opened in this process ({_writes_forbidden_because}): only the "
                         "process that owns the session opens and writes the cache")
