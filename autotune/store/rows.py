"""How rows are written and read back: the columns, and the compact forms of points and samples.

Why a module of its own: these are pure functions of values (no connection), shared by the
store's queries (`cache.py`) and by code that reads stored text (the simulation oracle).
"""

from __future__ import annotations

import base64
import json
from typing import Any, Mapping, Sequence

import numpy as np

from autotune.store.schema import CacheError
from autotune.types import Candidate, Result, Source, Status
from search_spaces.space import canonical_json, params_key

_RESULT_COLUMNS = ("config_key, status, error, compile_s, bench_s, median_ms, min_ms, max_ms, repetitions,"
                   " rel_error, source, samples_json, measured_on, checked")
_INSERT_COLUMNS = ("session_id, space_fingerprint, generation, ordinal, config_key, config_json, params_json, status,"
                   " error, compile_s, bench_s, median_ms, min_ms, max_ms, repetitions, rel_error, source,"
                   " samples_json, created, measured_on, checked")
_INSERT_NAMES = tuple(name.strip() for name in _INSERT_COLUMNS.split(","))


def _alias_row(fingerprint: str, raw: Mapping[str, Any], candidate: Candidate,
               names: Sequence[str] | None) -> dict[str, Any]:
    return {"space_fingerprint": fingerprint, "params_key": params_key(raw),
            "params_json": params_text(candidate.params, names), "config_json": canonical_json(dict(candidate.native)),
            "config_key": candidate.key}


def _evaluation_values(session_id: int, fingerprint: str, generation: int, ordinal: int, candidate: Candidate,
                       result: Result, created: float, names: Sequence[str] | None) -> tuple:
    """One evaluations row, in the order of _INSERT_COLUMNS."""
    return (session_id, fingerprint, generation, ordinal, candidate.key, canonical_json(dict(candidate.native)),
            params_text(candidate.params, names), result.status.value, result.error[:4000], result.compile_s,
            result.bench_s, result.median_ms, result.min_ms, result.max_ms, result.repetitions, result.rel_error,
            result.source.value, samples_text(result.samples_ms) if result.samples_ms else None, created,
            result.measured_on or None, result.checked or None)


def params_text(params: Mapping[str, Any], names: Sequence[str] | None) -> str:
    """A point of a space as JSON.  Schema 4 writes the list of its values in the order of the
    space's parameter `names` (stored once, in the space's definition): a Helion point's names
    were two thirds of each row's JSON.  A point with other names than the space's (a row of an
    older definition) or of a space not stored is written as the object, as schema 3 did."""
    if names is not None and len(params) == len(names) and all(name in params for name in names):
        return json.dumps([params[name] for name in names], separators=(",", ":"))
    return canonical_json(dict(params))


def params_from_text(text: str, names: Sequence[str] | None) -> dict[str, Any]:
    """A point read back: a list is zipped with the space's names; an object (schema 3) is as written."""
    data = json.loads(text)
    if isinstance(data, dict):
        return data
    if names is None or len(names) != len(data):
        raise CacheError(f"a point stored as {len(data)} values does not match its space's parameters "
                         f"({'missing' if names is None else len(names)}): the database is damaged")
    return dict(zip(names, data))


def samples_text(samples: Sequence[float]) -> str:
    """Timing samples as JSON, compact and lossless.  CUDA events report float32 milliseconds:
    written as float64 text they carry ~17 digits of which 7-9 mean anything.  When every
    sample is exactly a float32, their little-endian bytes are written in base64 under "f32"
    (5.3 characters a sample; read back widened, so equal to the original); otherwise the
    plain float64 list.  (Schema 2 wrote float32 samples as shortest text under "float32":
    still read, and rewritten by `compact`.)"""
    values = np.asarray(samples, dtype=np.float64)
    narrow = values.astype(np.float32)
    if np.array_equal(narrow.astype(np.float64), values):  # NaN never compares equal: stays float64
        return json.dumps({"f32": base64.b64encode(narrow.astype("<f4").tobytes()).decode("ascii")},
                          separators=(",", ":"))
    return json.dumps([float(v) for v in values], separators=(",", ":"))


def samples_from_text(text: str) -> tuple[float, ...]:
    data = json.loads(text)
    if isinstance(data, dict):
        if "f32" in data:
            return tuple(float(v) for v in np.frombuffer(base64.b64decode(data["f32"]), dtype="<f4"))
        return tuple(float(v) for v in np.asarray(data["float32"], dtype=np.float32))
    return tuple(float(v) for v in data)


def _result(row: tuple) -> Result:
    key, status, error, compile_s, bench_s, med, lo, hi, reps, rel, source, samples, measured_on, checked = row
    return Result(key=key, status=Status(status), error=error or "", compile_s=compile_s, bench_s=bench_s,
                  median_ms=med, min_ms=lo, max_ms=hi, repetitions=reps or 0, rel_error=rel,
                  source=Source(source), samples_ms=samples_from_text(samples) if samples else (),
                  measured_on=measured_on or "", checked=checked or "")
