"""Moving recorded spaces between our cache and Kernel Tuner cache files.

Imported measurements are stored with source "measured": they were timed on a GPU, only
not by us, and replay and analysis must be able to answer from them.  What tells them apart
is everything around them: the session's strategy is "import" and its mode "imported", its
options name the file and its sha256, and the space's device is the file's device, so the
fingerprint can never coincide with one of our own spaces and `autotune sessions` shows
where the data came from.
"""

from __future__ import annotations

from typing import Any

from autotune.store.cache import Cache, SpaceRecord
from autotune.errors import UserError
from autotune.interop.kernel_tuner import KernelTunerSpace, export_document
from autotune.types import Candidate, Result, Source, Status

IMPORT_STRATEGY = "import"
IMPORT_MODE = "imported"
_ALL = 10**9  # "every session" for Cache.sessions(limit)


def import_into_cache(cache: Cache, ks: KernelTunerSpace, source_name: str) -> tuple[str, int]:
    """Store the file's space and every entry (generation 0, ordinal = file order) in one session.

    Returns (fingerprint, session id).  A space that already has evaluations in this
    database is refused, naming the sessions that hold them, so importing a file twice (or
    importing a file exported from this very database) never duplicates measurements.
    """
    space = ks.search_space()
    identity = ks.identity(space)
    fingerprint = identity.fingerprint
    holders = [s for s in cache.sessions(_ALL) if s["space_fingerprint"] == fingerprint and s["evaluations"]]
    if holders:
        ids = ", ".join(str(s["id"]) for s in sorted(holders, key=lambda s: s["id"]))
        origin = holders[0]["options"].get("file")
        where = f" (imported from {origin})" if origin and holders[0]["strategy"] == IMPORT_STRATEGY else ""
        raise UserError(f"{source_name}: space {fingerprint[:12]} is already in {cache.path}, session(s) {ids}"
                        f"{where}; nothing imported")
    rows = ks.evaluations(space)
    cache.put_space(identity)
    session_id = cache.start_session(
        kernel=space.kernel, shape=tuple(identity.signature["shape"]), dtype=str(identity.signature["dtype"]),
        strategy=IMPORT_STRATEGY, seed=0, budget=None, seconds=None, fingerprint=fingerprint,
        device=identity.device, versions=identity.versions, mode=IMPORT_MODE,
        options={"format": "kernel_tuner", "file": source_name, "sha256": ks.digest, "entries": len(rows),
                 "objective": ks.objective, "repaired": ks.repaired},
    )
    try:
        cache.record_many(session_id, fingerprint, [(0, i, c, r) for i, (c, r) in enumerate(rows)],
                          aliases=any(dict(c.native) != c.params for c, _ in rows))
    except BaseException as error:
        cache.end_session(session_id, f"error: {type(error).__name__}", None)
        raise
    valid = [(r.median_ms, c.key) for c, r in rows if r.ok]
    cache.end_session(session_id, IMPORT_MODE, min(valid)[1] if valid else None)
    return fingerprint, session_id


def resolve_space(cache: Cache, prefix: str) -> SpaceRecord:
    """The recorded space whose fingerprint starts with `prefix` (it must be unambiguous)."""
    prefix = prefix.strip().lower()
    if not prefix:
        raise UserError("--space needs a fingerprint or a prefix of one")
    matches = sorted({s["space_fingerprint"] for s in cache.sessions(_ALL)
                      if s["space_fingerprint"].startswith(prefix)})
    if not matches:
        raise UserError(f"no recorded space in {cache.path} has a fingerprint starting with {prefix!r}")
    if len(matches) > 1:
        shown = ", ".join(m[:12] for m in matches)
        raise UserError(f"{prefix!r} matches {len(matches)} spaces in {cache.path} ({shown}); "
                        "give more of the fingerprint")
    record = cache.get_space(matches[0])
    if record is None:
        raise UserError(f"space {matches[0]} has sessions but no definition in {cache.path}")
    return record


def export_kernel_tuner(cache: Cache, fingerprint: str, session_id: int | None = None) -> dict[str, Any]:
    """A recorded space as a Kernel Tuner cache document (see `write_kernel_tuner_file`).

    Every config measured for the space (or only in session `session_id`) becomes one entry:
    its latest successful measurement, else its latest failure.  Search-time measurements
    only (re-benchmarks and replayed answers are left out).
    """
    record = cache.get_space(fingerprint)
    if record is None:
        raise UserError(f"no space {fingerprint} in {cache.path}")
    if session_id is not None:
        session = cache.session(session_id)
        if session is None or session["space_fingerprint"] != fingerprint:
            raise UserError(f"no session {session_id} of space {fingerprint[:12]} in {cache.path}")
        session_ids = [session_id]
    else:
        session_ids = sorted(s["id"] for s in cache.sessions(_ALL) if s["space_fingerprint"] == fingerprint)
    chosen: dict[str, tuple[Candidate, Result]] = {}
    for sid in session_ids:
        for row in cache.session_evaluations(sid):
            result = row.result
            if (row.generation < 0 or result.status is Status.NOT_RECORDED
                    or result.source not in (Source.MEASURED, Source.REUSED)):
                continue
            earlier = chosen.get(row.candidate.key)
            if earlier is None or result.ok or not earlier[1].ok:
                chosen[row.candidate.key] = (row.candidate, result)
    identity = {"fingerprint": record.fingerprint, "kernel": record.kernel, "shape": list(record.shape),
                "dtype": record.dtype, "device": record.device, "versions": dict(record.versions),
                "source_hash": record.source_hash}
    return export_document(identity, record.space, chosen.values())
