"""Kernel Tuner cache files: reading them as recorded spaces and writing ours in their format.

A Kernel Tuner cache file is JSON (often gzip-compressed): a header (`device_name`,
`kernel_name`, `problem_size`, `tune_params_keys`, `tune_params`, `objective`) and `cache`,
one entry per configuration keyed by its parameter values joined with commas (each value
written with Python's `str`).  An entry holds the parameter values, `time` (ms, Kernel
Tuner's objective: the mean of the samples in `times`) or a failure class name, and the
milliseconds spent compiling, verifying and benchmarking it.

Conversion to our model, and the choices it makes:

* the space has family "kernel-tuner" and one parameter per tune parameter, in Kernel
  Tuner's order, with Kernel Tuner's value order: `Ordinal` when every value is a number
  (so neighbours are meaningful), `Choice` otherwise.  Its `members` are every recorded
  configuration, valid or failed: we do not have the tuner's restrictions, so the points it
  lists are exactly the valid points of the space;
* the default is the first configuration in the file that ran successfully (the file has no
  notion of a compiler default; the first valid entry is stable and always measurable);
* `problem_size` becomes the shape, flattened to integers; the dtype is "n/a"; the kernel
  source is not in the file, so the source hash is derived from the kernel name only;
* measurements keep Kernel Tuner's `time` as `median_ms` (it is the objective Kernel Tuner
  optimised; the raw samples are kept, so a true median can be recomputed).  A file whose
  `objective` is another metric is still read by its `time`: our strategies minimise time.

Files written by `export_document` carry an extra `autotune` block in the header and in
each entry (Kernel Tuner ignores unknown keys).  It holds our own space definition and the
identity parts of its fingerprint, so reading such a file back restores exactly the space,
fingerprint and measurements it came from.  Parameter values that are neither all numbers
nor all strings (Helion's None/True/False choices, lists) are written as their JSON text,
so Kernel Tuner sees plain categorical strings; the header's `autotune.encoded` names them.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from autotune.errors import UserError
from autotune.types import Candidate, Result, Source, Status
from search_spaces.fingerprint import SpaceIdentity, source_hash
from search_spaces.parameters import Choice, Ordinal, Parameter
from search_spaces.space import InvalidConfig, SearchSpace, config_key

FAMILY = "kernel-tuner"
FORMAT_VERSION = 1  # of our `autotune` blocks
IMPORTED_DTYPE = "n/a"
IMPORTED_VERSIONS = {"kernel_tuner": "unrecorded", "torch": "n/a", "triton": "n/a", "helion": "n/a"}
REQUIRED_HEADER = ("device_name", "kernel_name", "tune_params_keys", "tune_params", "cache")
FORBIDDEN_NAMES = ("grid_size_x", "grid_size_y", "grid_size_z", "time")  # Kernel Tuner refuses these

# Kernel Tuner's failure classes (kernel_tuner.util.ErrorConfig and subclasses) and our status for each.
FAILURE_STATUS = {
    "CompilationFailedConfig": Status.COMPILE_ERROR,
    "RuntimeFailedConfig": Status.CRASH,
    "InvalidConfig": Status.INVALID,
    "ErrorConfig": Status.CRASH,
}
_COMPILE_FAILURES = (Status.COMPILE_ERROR, Status.OUT_OF_RESOURCES, Status.COMPILE_TIMEOUT)


class KernelTunerFileError(UserError, ValueError):
    """A file that is not a usable Kernel Tuner cache file (one line saying why)."""


@dataclass(frozen=True)
class KernelTunerEntry:
    """One configuration of a cache file, as the file records it."""

    key: str
    params: dict[str, Any]
    time_ms: float | None  # None when it failed
    failure: str | None  # Kernel Tuner's failure class name
    samples_ms: tuple[float, ...] = ()
    compile_ms: float | None = None
    verification_ms: float | None = None
    benchmark_ms: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # our per-entry block, in files we wrote

    @property
    def ok(self) -> bool:
        return self.failure is None


@dataclass(frozen=True)
class KernelTunerSpace:
    """A parsed and validated cache file."""

    name: str
    device_name: str
    kernel_name: str
    problem_size: Any
    tune_params: dict[str, list[Any]]  # in tune_params_keys order
    objective: Any
    entries: tuple[KernelTunerEntry, ...]
    digest: str  # sha256 of the JSON text, kept in the import session as provenance
    repaired: bool = False  # the file was cut short (a killed run) and closed here
    ours: Mapping[str, Any] | None = None  # our header block: the space this file was exported from

    @property
    def names(self) -> list[str]:
        return list(self.tune_params)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.ours["shape"]) if self.ours else flatten_problem_size(self.problem_size)

    def counts(self) -> tuple[int, int]:
        """(valid, failed) configurations."""
        valid = sum(e.ok for e in self.entries)
        return valid, len(self.entries) - valid

    # -- conversion to our model ---------------------------------------------------------------
    def search_space(self) -> SearchSpace:
        if self.ours:
            return SearchSpace.from_dict(self.ours["space"])
        default = self._default_point()
        parameters = tuple(_parameter(name, values, default[name]) for name, values in self.tune_params.items())
        return SearchSpace(kernel=self.kernel_name, family=FAMILY, parameters=parameters, default=default,
                           extras={"kernel_tuner": {"objective": self.objective, "problem_size": self.problem_size}},
                           members=tuple(e.params for e in self.entries))

    def _default_point(self) -> dict[str, Any]:
        first = next((e for e in self.entries if e.ok), self.entries[0])
        return dict(first.params)

    def identity(self, space: SearchSpace | None = None) -> SpaceIdentity:
        space = space or self.search_space()
        if self.ours:
            o = self.ours
            return SpaceIdentity(space=space, signature={"shape": list(o["shape"]), "dtype": o["dtype"]},
                                 source_hash=o["source_hash"], versions=dict(o["versions"]), device=o["device"])
        return SpaceIdentity(space=space, signature={"shape": list(self.shape), "dtype": IMPORTED_DTYPE},
                             source_hash=source_hash(FAMILY, self.kernel_name), versions=dict(IMPORTED_VERSIONS),
                             device=self.device_name)

    def evaluations(self, space: SearchSpace | None = None) -> list[tuple[Candidate, Result]]:
        """Every entry as the candidate and result our cache records, in file order."""
        space = space or self.search_space()
        encoded = set(self.ours.get("encoded", ())) if self.ours else set()
        rows = []
        for entry in self.entries:
            if self.ours:
                try:
                    params = space.validate({n: _decode(v) if n in encoded else v for n, v in entry.params.items()})
                except (InvalidConfig, TypeError, ValueError) as error:
                    raise KernelTunerFileError(f"{self.name}: entry {entry.key!r} is not a point of the exported "
                                               f"space ({error})") from None
            else:
                params = dict(entry.params)
            native = dict(entry.extra.get("native", params))
            candidate = Candidate(params=dict(params), native=native, key=config_key(native))
            rows.append((candidate, _result(candidate.key, entry)))
        return rows


# -- reading ---------------------------------------------------------------------------------------
def read_kernel_tuner_file(path: str | Path) -> KernelTunerSpace:
    """Read and validate a cache file, gzip or plain (told apart by its first bytes, not its name)."""
    document, digest, repaired = load_document(path)
    return parse_document(document, name=Path(path).name, digest=digest, repaired=repaired)


def load_document(path: str | Path) -> tuple[Any, str, bool]:
    """(the file's JSON, sha256 of its text, whether it was cut short and had to be closed)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise KernelTunerFileError(f"cannot read {path}: {error.strerror or error}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as error:
            raise KernelTunerFileError(f"{path.name}: damaged gzip data ({error})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise KernelTunerFileError(f"{path.name}: not a Kernel Tuner cache file (not UTF-8 JSON text)") from None
    document, repaired = _load_json(text, path.name)
    return document, _sha256(text), repaired


def _load_json(text: str, name: str) -> tuple[Any, bool]:
    """Parse JSON; a file cut short after an entry (Kernel Tuner writes one entry per line,
    each followed by a comma) is closed the way Kernel Tuner itself closes it."""
    try:
        return json.loads(text), False
    except json.JSONDecodeError as error:
        first_error = error
    body = text.rstrip()
    for candidate in (body, body[: body.rfind("\n")].rstrip()):
        if candidate.endswith(","):
            candidate = candidate[:-1]
        try:
            return json.loads(candidate + "}\n}"), True
        except json.JSONDecodeError:
            continue
    raise KernelTunerFileError(f"{name}: not a Kernel Tuner cache file (invalid JSON: {first_error.msg} at line "
                               f"{first_error.lineno})")


def parse_document(document: Any, *, name: str = "<document>", digest: str = "", repaired: bool = False
                   ) -> KernelTunerSpace:
    """Validate a loaded cache document; every problem is reported in one line naming the file."""
    if not isinstance(document, dict):
        raise KernelTunerFileError(f"{name}: not a Kernel Tuner cache file (the JSON is not an object)")
    missing = [k for k in REQUIRED_HEADER if k not in document]
    if missing:
        raise KernelTunerFileError(f"{name}: not a Kernel Tuner cache file (missing header field(s): "
                                   f"{', '.join(missing)})")
    keys, tune_params, cache = document["tune_params_keys"], document["tune_params"], document["cache"]
    if not (isinstance(keys, list) and keys and all(isinstance(k, str) for k in keys)):
        raise KernelTunerFileError(f"{name}: tune_params_keys must be a non-empty list of names")
    if not isinstance(tune_params, dict) or sorted(tune_params) != sorted(keys) or len(set(keys)) != len(keys):
        listed = sorted(tune_params) if isinstance(tune_params, dict) else "?"
        raise KernelTunerFileError(f"{name}: tune_params names {listed} do not match tune_params_keys {keys}")
    ordered: dict[str, list[Any]] = {}
    for key in keys:
        values = tune_params[key]
        if not isinstance(values, list) or not values:
            raise KernelTunerFileError(f"{name}: tune_params[{key!r}] must be a non-empty list of values")
        if len({_token(v) for v in values}) != len(values):
            raise KernelTunerFileError(f"{name}: tune_params[{key!r}] lists a value twice")
        ordered[key] = values
    if not isinstance(cache, dict) or not cache:
        raise KernelTunerFileError(f"{name}: the cache holds no configurations")
    # Kernel Tuner takes any string as a device name, "" included (a simulation adopts the file's
    # name as is; a live run refuses a file of another device): so do we.
    if not isinstance(document["device_name"], str):
        raise KernelTunerFileError(f"{name}: device_name must be a string")
    if not isinstance(document["kernel_name"], str) or not document["kernel_name"]:
        raise KernelTunerFileError(f"{name}: kernel_name must be a non-empty string")
    allowed = {k: {_token(v) for v in vals} for k, vals in ordered.items()}
    entries, seen = [], set()
    for key, raw_entry in cache.items():
        entry = _entry(key, raw_entry, keys, allowed, name)
        point = tuple(_token(entry.params[k]) for k in keys)
        if point in seen:
            raise KernelTunerFileError(f"{name}: two entries have the parameters of {key!r}")
        seen.add(point)
        entries.append(entry)
    ours = _ours(document, name)
    if ours is None:
        try:
            flatten_problem_size(document.get("problem_size"))
        except ValueError as error:
            raise KernelTunerFileError(f"{name}: {error}") from None
    return KernelTunerSpace(name=name, device_name=document["device_name"], kernel_name=document["kernel_name"],
                            problem_size=document.get("problem_size"), tune_params=ordered,
                            objective=document.get("objective", "time"), entries=tuple(entries), digest=digest,
                            repaired=repaired, ours=ours)


def _entry(key: str, raw: Any, keys: Sequence[str], allowed: Mapping[str, set[str]], name: str) -> KernelTunerEntry:
    if not isinstance(raw, dict):
        raise KernelTunerFileError(f"{name}: entry {key!r} is not an object")
    absent = [k for k in keys if k not in raw]
    if absent:
        raise KernelTunerFileError(f"{name}: entry {key!r} has no value for tune parameter(s) {', '.join(absent)}")
    params = {k: raw[k] for k in keys}
    for k in keys:
        if _token(params[k]) not in allowed[k]:
            raise KernelTunerFileError(f"{name}: entry {key!r} has {k}={params[k]!r}, which tune_params does not list")
    expected = kernel_tuner_key(params[k] for k in keys)
    if key != expected:
        raise KernelTunerFileError(f"{name}: entry {key!r} does not match its parameter values (expected key "
                                   f"{expected!r} for tune_params_keys {list(keys)})")
    failure = next((v for v in raw.values() if isinstance(v, str) and v in FAILURE_STATUS), None)
    time_ms = raw.get("time")
    if failure is None and (isinstance(time_ms, bool) or not isinstance(time_ms, (int, float))
                            or not math.isfinite(time_ms)):
        raise KernelTunerFileError(f"{name}: entry {key!r} has time {time_ms!r}: neither a number nor one of "
                                   f"Kernel Tuner's failures ({', '.join(FAILURE_STATUS)})")
    samples = raw.get("times") if failure is None else None
    extra = raw.get("autotune")
    return KernelTunerEntry(
        key=key, params=params, time_ms=float(time_ms) if failure is None else None, failure=failure,
        samples_ms=tuple(float(s) for s in samples if _is_number(s)) if isinstance(samples, list) else (),
        compile_ms=_number(raw.get("compile_time")), verification_ms=_number(raw.get("verification_time")),
        benchmark_ms=_number(raw.get("benchmark_time")), extra=extra if isinstance(extra, dict) else {},
    )


def _ours(document: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    """Our header block, checked against its own fingerprint (a hand-edited block is refused)."""
    block = document.get("autotune")
    if block is None:
        return None
    try:
        space = SearchSpace.from_dict(block["space"])
        identity = SpaceIdentity(space=space, signature={"shape": list(block["shape"]), "dtype": block["dtype"]},
                                 source_hash=block["source_hash"], versions=dict(block["versions"]),
                                 device=block["device"])
        consistent = (identity.fingerprint == block["fingerprint"] and space.names == document["tune_params_keys"]
                      and block["device"] == document["device_name"])
    except (KeyError, TypeError, ValueError) as error:
        raise KernelTunerFileError(f"{name}: its 'autotune' block is incomplete ({error})") from None
    if not consistent:
        raise KernelTunerFileError(f"{name}: its 'autotune' block does not match the file (edited after export?)")
    return block


def _result(key: str, entry: KernelTunerEntry) -> Result:
    extra = entry.extra
    bench_ms = None
    if entry.verification_ms is not None or entry.benchmark_ms is not None:
        bench_ms = (entry.verification_ms or 0.0) + (entry.benchmark_ms or 0.0)
    samples = entry.samples_ms
    if entry.ok:
        status, error = Status.OK, ""
        lo, hi = (min(samples), max(samples)) if samples else (entry.time_ms, entry.time_ms)
    else:
        status, error, lo, hi = FAILURE_STATUS[entry.failure], f"Kernel Tuner: {entry.failure}", None, None
    result = Result(key=key, status=status, median_ms=entry.time_ms, min_ms=lo, max_ms=hi,
                    repetitions=len(samples), compile_s=None if entry.compile_ms is None else entry.compile_ms / 1000,
                    bench_s=None if bench_ms is None else bench_ms / 1000, error=error, source=Source.MEASURED,
                    samples_ms=samples)
    if not extra:
        return result
    return Result(key=key, status=Status(extra.get("status", status.value)), median_ms=result.median_ms,
                  min_ms=extra.get("min_ms", lo), max_ms=extra.get("max_ms", hi),
                  repetitions=int(extra.get("repetitions", result.repetitions)),
                  compile_s=extra.get("compile_s", result.compile_s), bench_s=extra.get("bench_s", result.bench_s),
                  rel_error=extra.get("rel_error"), error=extra.get("error", error), source=Source.MEASURED,
                  samples_ms=samples)


def _parameter(name: str, values: list[Any], default: Any) -> Parameter:
    choices = tuple(tuple(v) if isinstance(v, list) else v for v in values)
    default = tuple(default) if isinstance(default, list) else default
    kind = Ordinal if all(_is_number(v) for v in values) else Choice
    return kind(name=name, choices=choices, default_value=default)


def flatten_problem_size(problem_size: Any) -> tuple[int, ...]:
    """Kernel Tuner's problem_size (an int, or nested lists of ints) as a flat tuple of ints.

    A problem size Kernel Tuner recorded as "callable" has no value: the shape is ().
    """
    if problem_size is None or problem_size == "callable":
        return ()
    flat: list[int] = []
    stack = [problem_size]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
        elif _is_number(item) and float(item).is_integer():
            flat.append(int(item))
        else:
            raise ValueError(f"problem_size must be integers (or nested lists of them), got {problem_size!r}")
    return tuple(flat)


# -- writing ---------------------------------------------------------------------------------------
def export_document(identity: Mapping[str, Any], space: SearchSpace, rows: Iterable[tuple[Candidate, Result]]
                    ) -> dict[str, Any]:
    """A Kernel Tuner cache document for recorded rows (one per config) of `space`.

    `identity` holds fingerprint, kernel, shape, dtype, device, versions and source_hash.
    Failed rows get Kernel Tuner's failure class (compile failures CompilationFailedConfig,
    invalid points InvalidConfig, every other failure RuntimeFailedConfig).
    """
    clash = [n for n in space.names if n in FORBIDDEN_NAMES]
    if clash:
        raise UserError(f"Kernel Tuner does not accept parameters named {', '.join(clash)}")
    encoded = [p.name for p in space.parameters if _needs_encoding(p.values())]
    tune_params = {p.name: [_encode(v) if p.name in encoded else v for v in p.values()] for p in space.parameters}
    cache: dict[str, Any] = {}
    for candidate, result in rows:
        params = {n: (_encode(candidate.params[n]) if n in encoded else candidate.params[n]) for n in space.names}
        key = kernel_tuner_key(params.values())
        cache[key] = {**params, **_entry_fields(candidate, result)}
    if not cache:
        raise UserError(f"space {identity['fingerprint'][:12]} has no measured configurations to export")
    problem_size = list(identity["shape"])
    if space.family == FAMILY:
        problem_size = space.extras.get("kernel_tuner", {}).get("problem_size", problem_size)
    ours = {"format": FORMAT_VERSION, "encoded": encoded, "space": space.to_dict(),
            **{k: identity[k] for k in ("fingerprint", "kernel", "dtype", "device", "versions", "source_hash")},
            "shape": list(identity["shape"])}
    return {"device_name": identity["device"], "kernel_name": identity["kernel"], "problem_size": problem_size,
            "tune_params_keys": space.names, "tune_params": tune_params, "objective": "time", "autotune": ours,
            "cache": cache}


def _entry_fields(candidate: Candidate, result: Result) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if result.ok:
        fields["time"] = result.median_ms
        fields["times"] = list(result.samples_ms)
    else:
        fields["time"] = ("CompilationFailedConfig" if result.status in _COMPILE_FAILURES
                          else "InvalidConfig" if result.status is Status.INVALID else "RuntimeFailedConfig")
    # Kernel Tuner's simulated clock adds these three (ms); an unknown one is left out, never faked.
    if result.compile_s is not None:
        fields["compile_time"] = result.compile_s * 1000
    if result.bench_s is not None:
        fields["verification_time"] = 0  # our bench_s already includes checking the output
        fields["benchmark_time"] = result.bench_s * 1000
    extra = {"status": result.status.value, "error": result.error, "min_ms": result.min_ms, "max_ms": result.max_ms,
             "repetitions": result.repetitions, "rel_error": result.rel_error, "compile_s": result.compile_s,
             "bench_s": result.bench_s}
    if dict(candidate.native) != dict(candidate.params):
        extra["native"] = dict(candidate.native)
    fields["autotune"] = extra
    return fields


def write_kernel_tuner_file(document: Mapping[str, Any], path: str | Path | None) -> str:
    """The document laid out as Kernel Tuner writes it (header fields, then the cache one
    entry per line, closed by "}\\n}"); written atomically to `path` (gzip when it ends in
    .gz) and returned as text."""
    header = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in document.items() if k != "cache"]
    entries = [json.dumps({key: entry})[1:-1] for key, entry in document["cache"].items()]
    text = "{\n" + ",\n".join(header + ['"cache": {']) + "\n" + ",\n".join(entries) + "}\n}"
    if path is not None:
        path = Path(path)
        data = text.encode()
        if path.name.endswith(".gz"):
            data = gzip.compress(data, mtime=0)
        directory = path.parent if str(path.parent) else Path(".")
        if not directory.is_dir():
            raise UserError(f"cannot write {path}: {directory} is not a directory")
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return text


# -- small helpers ---------------------------------------------------------------------------------
def kernel_tuner_key(values: Iterable[Any]) -> str:
    """Kernel Tuner's cache key: the values joined with commas, each as Python's str writes it."""
    return ",".join(str(v) for v in values)


def _needs_encoding(values: Sequence[Any]) -> bool:
    return not (all(_is_number(v) for v in values) or all(isinstance(v, str) for v in values))


def _encode(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _decode(text: Any) -> Any:
    if not isinstance(text, str):
        raise ValueError(f"{text!r} should be the JSON text of a value")
    return json.loads(text)


def _token(value: Any) -> str:
    """A hashable spelling that keeps 1, 1.0, True and "1" apart."""
    return json.dumps(value, sort_keys=True)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number(value: Any) -> float | None:
    return float(value) if _is_number(value) and math.isfinite(value) else None


def _sha256(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()
