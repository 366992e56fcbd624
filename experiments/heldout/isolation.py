"""What keeps the study's shapes held out: no session of a problem's own kernel at its shape
outside the study (`foreign_sessions`, checked before anything runs), and the warm-cache arm's
seeds read from the shipped data without the study's sessions (`without_study`), so a held-out
shape never seeds another."""

from __future__ import annotations

import math
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

from autotune.store.cache import Cache
from autotune.databases import open_for_reading
from autotune.experiment import experiment_tags

from . import definition as d
from .data import study_sessions
from .definition import Problem


def study_session_ids(cache: Cache) -> list[int]:
    """Every session the study recorded, finished or not."""
    return [session["id"] for session, _ in study_sessions(cache)]


@contextmanager
def without_study(shipped: Path | None) -> Iterator[Path | None]:
    """The shipped data as the warm-cache arm's seeds may read it: a scratch copy without the
    study's sessions (once merged into the shipped data, a held-out shape's results would seed
    the nearest other held-out shape, and the order of the runs would change what they start
    from).  None when there is no shipped data."""
    from autotune.store.copy_without import copy_without_sessions

    if shipped is None or not shipped.exists():
        yield None
        return
    cache = Cache.open(shipped, migrate=False)  # read only
    try:
        ids = study_session_ids(cache)
    finally:
        cache.close()
    with tempfile.TemporaryDirectory(prefix="heldout-seeds-") as folder:
        copy = Path(folder) / shipped.name
        copy_without_sessions(shipped, copy, ids)
        yield copy



def foreign_sessions(cache: Cache, problems: Iterable[Problem], *, same_kernel: bool = True) -> list[dict[str, Any]]:
    """Sessions at a problem's shape and dtype that are not this study's own: of the problem's
    own kernel (what could reach its tuning: seeds from the cache, reused measurements), a
    problem with one is no longer held out; with `same_kernel=False`, those of other kernels
    (the report names them: they say nothing about this kernel's configs)."""
    wanted = {(p.kernel, p.dims, p.dtype) for p in problems}
    found = []
    for session in cache.sessions(limit=1_000_000):
        if experiment_tags(session["options"]).get("study") == d.STUDY:
            continue
        shape, dtype = tuple(session["shape"]), session["dtype"]
        mine = (session["kernel"], shape, dtype) in wanted
        elsewhere = any((shape, dtype) == (dims, kind) for _, dims, kind in wanted)
        if (same_kernel and mine) or (not same_kernel and elsewhere and not mine):
            found.append(session)
    return found


def other_kernels(db: Path, shipped: Path | None, problems: Iterable[Problem]) -> dict[str, list[str]]:
    """Shape -> 'kernel (session N)' for the sessions of other kernels recorded at a held-out
    shape (named in the report: the shape is held out for its kernel, not for every kernel)."""
    problems = list(problems)
    cache = open_for_reading(db, shipped)
    try:
        found: dict[str, list[str]] = {}
        for session in sorted(foreign_sessions(cache, problems, same_kernel=False), key=lambda s: s["id"]):
            shape = "x".join(map(str, session["shape"]))
            found.setdefault(shape, []).append(f"{session['kernel']} (session {session['id']})")
        return found
    finally:
        cache.close()


def cache_sources(cache: Cache, problem: Problem, source: str) -> tuple[list[str], float]:
    """The shapes the `cache` seed source would read for `problem` (autotune/seeds.py's rule: the
    nearest recorded shapes of the same kernel, dtype and kernel source), nearest first, and the
    nearest one's distance; ([], inf) when there are none."""
    from autotune.seeds import nearest_shapes, seed_records, shape_distance

    shapes = nearest_shapes((r.shape for r in seed_records(cache, problem.kernel, problem.dtype, source)), problem.dims)
    if not shapes:
        return [], math.inf
    return ["x".join(map(str, s)) for s in shapes], shape_distance(shapes[0], problem.dims)
