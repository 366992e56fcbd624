"""The softmax study read back from the database: one row per (shape, method).

Only sessions tagged with the study (`options.experiment.study`) count; of several for the
same shape and method, the latest finished one is used.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from autotune.databases import SHIPPED_DB, open_for_reading
from autotune.store.cache import Cache, EvaluationRow
from autotune.experiment import experiment_tags
from autotune.experiment_devices import on_one_device
from autotune.history import default_row, timeline
from autotune.session import GenerationSummary
from autotune.types import Result

from . import definition as d


SEED_ORIGINS_SKIPPED = ("default", "search", "rebenchmark")
INFERRED = "*"  # after an origin read off the generations of a session recorded before origins were


@dataclass(frozen=True)
class Start:
    """What a session started from: its `seed_from` option as recorded in its options, and the
    origin of each seed it evaluated before the search (the default config aside).  Cold: no
    seed evaluated, whatever `seed_from` asked for; warm: at least one."""

    seed_from: str
    seeds: tuple[str, ...]
    recorded: bool = True  # False: the options name no seeds although generation 0 held some

    @property
    def warm(self) -> bool:
        return bool(self.seeds)

    @property
    def kind(self) -> str:
        return "warm" if self.warm else "cold"

    def text(self) -> str:
        """'warm: default,heuristic (6 heuristic)', 'cold: default (no seeds)'."""
        counts = Counter(self.seeds)
        got = ", ".join(f"{n} {origin}" for origin, n in counts.items()) if self.seeds else "no seeds"
        return f"{self.kind}: {self.seed_from or 'none'} ({got})"


def session_start(cache: Cache, session: dict[str, Any], rows: list[EvaluationRow]) -> Start:
    """A session's start as recorded: the seeds' origins from its rows where rows carry them
    (schema 5 on), else from its options; a session whose options name no seeds although its
    first generation held more than the default (scripts that passed seeds without naming
    them) counts those as 'unnamed', marked as not recorded."""
    options = session["options"]
    seed_from = str(options.get("seed_from", "") or "")
    origins = cache.origins(session["id"])
    first = [r for r in rows if r.generation == 0]
    if origins:
        seeds = tuple(origins[r.candidate.key] for r in first
                      if origins.get(r.candidate.key) not in (None, *SEED_ORIGINS_SKIPPED))
        return Start(seed_from, seeds)
    named = tuple(options.get("seeds", ()) or ())
    if named:
        return Start(seed_from, named)
    extra = max(0, len(first) - 1)  # generation 0 starts with the default
    return Start(seed_from, ("unnamed",) * extra, recorded=extra == 0)


def best_origin(cache: Cache, session_id: int, key: str, rows: list[EvaluationRow]) -> str:
    """Where the config `key` came from in a session: default, a seed source, or search; for
    sessions recorded before rows named it, read off the generations (marked INFERRED)."""
    recorded = cache.origins(session_id).get(key)
    if recorded:
        return recorded
    first = [r for r in rows if r.generation >= 0 and r.candidate.key == key]
    if not first:
        return "?"
    if first[0].generation > 0:
        return "search" + INFERRED
    zero = [r for r in rows if r.generation == 0]
    return ("default" if zero and zero[0].candidate.key == key else "seed") + INFERRED


@dataclass
class MethodRow:
    """One method at one shape: its time, accuracy, tuning cost and (for tuned ones) its config."""

    method: str
    median_ms: float
    min_ms: float | None
    max_ms: float | None
    rel_error: float | None
    session_id: int | None = None
    kernel: str | None = None
    native: dict[str, Any] | None = None
    tuning_wall_s: float | None = None  # job start (evaluator start-up included) to session end
    search_s: float | None = None  # baselines measured to session end (Helion quick: its autotune call)
    configs: int | None = None
    timeline: list[GenerationSummary] = field(default_factory=list)
    tuned: bool = False  # a winner of this framework (a tuned kernel), not a baseline
    earlier_source: bool = False  # measured on another version of the kernel's source than the present one
    start: Start | None = None  # what the session started from (tuned rows)
    best_origin: str | None = None  # where the winner's config came from (tuned rows)


@dataclass
class ShapeResult:
    shape: tuple[int, ...]
    bytes_moved: int
    copy_ms: float | None
    rows: list[MethodRow]
    device: str = ""

    @property
    def label(self) -> str:
        return "x".join(map(str, self.shape))

    def winner(self) -> MethodRow:
        return min(self.rows, key=lambda r: r.median_ms)

    def best_tuned(self) -> MethodRow | None:
        tuned = [r for r in self.rows if r.tuned]
        return min(tuned, key=lambda r: r.median_ms) if tuned else None


def study_sessions(db: Path, dtype: str, device: str | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    """(shape, method) -> the latest finished study session (on `device`; None: on any)."""
    cache = open_for_reading(db)
    try:
        return _study_sessions(cache, dtype, device)
    finally:
        cache.close()


def _study_sessions(cache: Cache, dtype: str, device: str | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    return _latest_by_job(s for s in _finished(cache, dtype) if device is None or s["device"] == device)


def _latest_by_job(sessions: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """(shape, method) -> the last of `sessions` (in session order) of that job."""
    return {("x".join(map(str, s["shape"])), experiment_tags(s["options"]).get("method", "?")): s for s in sessions}


def _finished(cache: Cache, dtype: str) -> list[dict[str, Any]]:
    """The study's finished sessions of `dtype`, on every device, in session order."""
    found = []
    for session in sorted(cache.sessions(limit=1_000_000), key=lambda s: s["id"]):
        tags = experiment_tags(session["options"])
        if tags.get("study") != d.STUDY or session["dtype"] != dtype or session["mode"] != "gpu":
            continue
        if session["ended"] is None or session["evaluations"] == 0:
            continue  # killed before it measured anything to report
        found.append(session)
    return found


def load_study(db: Path, dtype: str, shapes: tuple[str, ...] = (),
               shipped: Path | None = SHIPPED_DB, device: str | None = None) -> list[ShapeResult]:
    """Every shape of the study that has data, in the study's order, from one GPU's sessions:
    `device`, else the only one recorded, else the shipped data's (experiment_devices)."""
    from autotune.kernels import DTYPES, get_kernel

    cache = open_for_reading(db, shipped)
    try:
        _, finished = on_one_device(_finished(cache, dtype), device, study=d.STUDY)
        sessions = _latest_by_job(finished)
        results = []
        for shape in shapes or d.SHAPES:
            here = {method: s for (s_shape, method), s in sessions.items() if s_shape == shape}
            if not here:
                continue
            dims = tuple(int(x) for x in shape.split("x"))
            nbytes = get_kernel(d.HELION_KERNEL).bytes_moved(dims, DTYPES[dtype])
            rows, copy_ms = _shape_rows(cache, here)
            devices = sorted({s["device"] for s in here.values()})
            results.append(ShapeResult(dims, nbytes, copy_ms, rows, device=", ".join(devices)))
        return results
    finally:
        cache.close()


def _shape_rows(cache: Cache, sessions: dict[str, dict[str, Any]]) -> tuple[list[MethodRow], float | None]:
    rows: list[MethodRow] = []
    for method, session in sorted(sessions.items()):
        evaluations = cache.session_evaluations(session["id"])
        # Helion quick's session evaluates the default (always first, free) and then Helion's pick.
        winner = _helion_pick(evaluations) if method == d.HELION_QUICK else _winner(evaluations)
        if winner is None:
            continue
        tags = experiment_tags(session["options"])
        tuned = method != d.HELION_QUICK
        earlier = _earlier_source(cache, session)
        wall = session["ended"] - tags["job_started"] if "job_started" in tags else None
        search_started = cache.search_started(session["id"])
        search = session["ended"] - search_started if search_started is not None else None
        rows.append(MethodRow(
            method=method, median_ms=winner[1].median_ms, min_ms=winner[1].min_ms, max_ms=winner[1].max_ms,
            rel_error=winner[2], session_id=session["id"], kernel=session["kernel"], native=winner[0],
            tuning_wall_s=tags.get("helion_wall_s", wall), search_s=tags.get("helion_wall_s", search),
            configs=tags.get("helion_configs", session["evaluations"]),
            timeline=timeline(evaluations, _space(cache, session)) if tuned else [], tuned=tuned,
            earlier_source=earlier, start=session_start(cache, session, evaluations) if tuned else None,
            best_origin=best_origin(cache, session["id"], winner[3], evaluations) if tuned else None,
        ))
        if method == d.method_of(d.HELION_KERNEL):
            default = default_row(evaluations)
            if default is not None and default.result.ok:
                rows.append(MethodRow(method="Helion default config", median_ms=default.result.median_ms,
                                      min_ms=default.result.min_ms, max_ms=default.result.max_ms,
                                      rel_error=_rel_error(evaluations, default.candidate.key),
                                      session_id=session["id"], kernel=session["kernel"],
                                      native=dict(default.candidate.native), earlier_source=earlier))
    baselines = _baselines(cache, sessions)
    for name in (d.TORCH_EAGER, d.TORCH_COMPILE):
        result = baselines.get(name)
        if result is not None and result.ok:
            rows.append(MethodRow(method=name, median_ms=result.median_ms, min_ms=result.min_ms,
                                  max_ms=result.max_ms, rel_error=result.rel_error))
    copy = baselines.get(d.COPY)
    return rows, copy.median_ms if copy is not None and copy.ok else None


def _baselines(cache: Cache, sessions: dict[str, dict[str, Any]]) -> dict[str, Result]:
    """Baselines measured alongside the Helion softmax session (else any session of the shape)."""
    preferred = sessions.get(d.method_of(d.HELION_KERNEL))
    ordered = ([preferred] if preferred else []) + [s for s in sessions.values() if s is not preferred]
    merged: dict[str, Result] = {}
    for session in ordered:
        for name, result in cache.baselines(session_id=session["id"]).items():
            if name not in merged or not merged[name].ok:
                merged[name] = result
    return merged


def _winner(rows: list[EvaluationRow]) -> tuple[dict[str, Any], Result, float | None, str] | None:
    """(native config, timing, relative error, config key) of the session's winner: the fastest
    of the final re-benchmark when there was one (the accuracy check is on its first row)."""
    final = [r for r in rows if r.generation < 0 and r.result.ok]
    candidates = final or [r for r in rows if r.result.ok]
    if not candidates:
        return None
    best = min(candidates, key=lambda r: r.result.objective)
    return dict(best.candidate.native), best.result, _rel_error(rows, best.candidate.key), best.candidate.key


def _helion_pick(rows: list[EvaluationRow]) -> tuple[dict[str, Any], Result, float | None, str] | None:
    """The config Helion's autotuner chose: the last of generation 0, re-timed when it was."""
    seeded = [r for r in rows if r.generation == 0]
    if not seeded:
        return None
    pick = seeded[-1]
    retimed = [r for r in rows if r.generation < 0 and r.candidate.key == pick.candidate.key and r.result.ok]
    timing = (retimed or [pick])[0].result
    if not timing.ok:
        return None
    return dict(pick.candidate.native), timing, _rel_error(rows, pick.candidate.key), pick.candidate.key


def _rel_error(rows: list[EvaluationRow], key: str) -> float | None:
    checked = [r.result.rel_error for r in rows if r.candidate.key == key and r.result.rel_error is not None]
    return checked[0] if checked else None


def _space(cache: Cache, session: dict[str, Any]) -> Any:
    record = cache.get_space(session["space_fingerprint"])
    return record.space if record else None


def _earlier_source(cache: Cache, session: dict[str, Any]) -> bool:
    """Whether the session measured another version of its kernel's source than the present one,
    so that re-running it (`--again`) may give other figures."""
    from autotune.kernels import present_source_hash

    record = cache.get_space(session["space_fingerprint"])
    present = present_source_hash(session["kernel"])
    return record is not None and present is not None and record.source_hash != present
