"""A kernel's tuned configs for every recorded shape, usable without the database.

`ConfigTable.from_db` gathers, for one kernel (same name and code), the fastest accurate config
measured on each GPU at each (shape, dtype); sessions run through the Triton interpreter are
accuracy checks, not timings, and are skipped.  `save`/`load` keep it as JSON, with the
kernel's name and code identity (`code_hash`: a comment or reformatting keeps it) so that a
table is never served to another kernel;
`to_python` writes a module a Helion or Triton user imports with no dependency on this
framework; `to_helion_aot` writes the heuristic file `@helion.aot_kernel` reads.

`pick(shape, dtype)` is the shape -> config rule every form shares: the exact shape, else the
nearest recorded shape of the same dtype and rank (distance: the sum of |log2| ratios of the
extents), else nothing (the caller runs the compiler's default).  Given `devices`, only those
GPUs' entries answer, in order: the exact shape on the first GPU that has it, else the
nearest shape on the first GPU with any entry of the dtype and rank.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from autotune.errors import UserError
from autotune.export import INTERPRETER_MODE, ExportError, literal
from autotune.seeds import shape_distance  # the cache seed source's nearest shape: one measure for both

FORMAT = "autotune-config-table/1"
EXACT, NEAREST, DEFAULT = "exact", "nearest", "default"
OTHER_SOURCE, INTERPRETED = "other source", "interpreter"  # why recorded spaces were left out


class ConfigWarning(UserWarning):
    """Run-time config choice is not what the user may assume (see the subclasses)."""


class EmptyTableWarning(ConfigWarning):
    """No tuned config can serve: every call runs the compiler's default config."""


class SourceMismatchWarning(ConfigWarning):
    """Configs were tuned for another version of the kernel's code and are not used."""


class OtherGpuWarning(ConfigWarning):
    """Configs measured on another GPU serve this one (a declared fallback)."""


@dataclass(frozen=True)
class Entry:
    shape: tuple[int, ...]
    dtype: str
    config: dict[str, Any]  # the native config (helion.Config / triton.Config keyword arguments)
    median_ms: float
    session: int | None = None
    device: str = ""


@dataclass(frozen=True)
class Pick:
    """Which config a call gets, and why."""

    how: str  # EXACT, NEAREST or DEFAULT
    config: dict[str, Any] | None
    shape: tuple[int, ...] | None  # the recorded shape the config was tuned at
    distance: float = 0.0
    device: str = ""  # the GPU the config was measured on

    def describe(self, kernel: str, shape: Sequence[int], dtype: str) -> str:
        at = "x".join(map(str, shape))
        on = f" on {self.device}" if self.device else ""
        if self.how == EXACT:
            return f"{kernel} {at} {dtype}: the config tuned at this shape{on}"
        if self.how == NEAREST:
            return (f"{kernel} {at} {dtype}: no config tuned at this shape; the one tuned at the nearest recorded "
                    f"shape {'x'.join(map(str, self.shape or ()))}{on}")
        return f"{kernel} {at} {dtype}: nothing recorded for {dtype} at this rank; the compiler's default config"


@dataclass
class ConfigTable:
    kernel: str
    family: str
    source_hash: str
    entries: list[Entry] = field(default_factory=list)
    code_hash: str = ""  # the kernel's code identity (search_spaces.fingerprint.code_hash); "" in older tables
    origin: str = field(default="", compare=False)  # where it was read from, for messages
    skipped: dict[str, int] = field(default_factory=dict, compare=False)  # recorded spaces left out, by reason

    # -- the rule ---------------------------------------------------------------------------
    def pick(self, shape: Sequence[int], dtype: str, *, exclude: Sequence[Sequence[int]] = (),
             devices: Sequence[str] | None = None) -> Pick:
        """The config for a call of `shape` and `dtype` (see the module docstring); `exclude`
        leaves recorded shapes out (to judge the rule on shapes it was not given); `devices`
        names the GPUs whose entries may answer, most preferred first (None: every entry)."""
        shape = tuple(int(d) for d in shape)
        skip = {tuple(s) for s in exclude}
        same = [e for e in self.entries if e.dtype == dtype and e.shape not in skip]
        pools = [same] if devices is None else [[e for e in same if e.device == d] for d in devices]
        for pool in pools:
            exact = sorted((e for e in pool if e.shape == shape), key=lambda e: e.median_ms)
            if exact:
                return Pick(EXACT, dict(exact[0].config), exact[0].shape, device=exact[0].device)
        for pool in pools:
            ranked = sorted((shape_distance(e.shape, shape), e.median_ms, i) for i, e in enumerate(pool))
            ranked = [r for r in ranked if math.isfinite(r[0])]
            if ranked:
                distance, _, index = ranked[0]
                return Pick(NEAREST, dict(pool[index].config), pool[index].shape, distance, pool[index].device)
        return Pick(DEFAULT, None, None)

    def devices(self) -> list[str]:
        """The GPUs the entries were measured on, most entries first."""
        counts: dict[str, int] = {}
        for e in self.entries:
            counts[e.device] = counts.get(e.device, 0) + 1
        return sorted(counts, key=lambda d: (-counts[d], d))

    def skipped_note(self) -> str:
        """What the table left out and why, for a message ("" when nothing was)."""
        parts = []
        if self.skipped.get(INTERPRETED):
            parts.append(f"{self.skipped[INTERPRETED]} interpreter session(s): their times are not GPU timings")
        if self.skipped.get(OTHER_SOURCE):
            parts.append(f"{self.skipped[OTHER_SOURCE]} shape(s) tuned for another version of the code")
        return f" (left out: {'; '.join(parts)})" if parts else ""

    def check_kernel(self, kernel: Any) -> bool:
        """Refuses (one line) a table of another kernel; whether the table's code identity is
        this kernel's (False: tuned for another version of its code)."""
        if self.kernel != kernel.name or (self.family and self.family != kernel.family):
            raise UserError(f"{self.origin or 'the config table'} holds configs of {self.kernel} ({self.family}), "
                            f"not of {kernel.name} ({kernel.family})")
        if self.code_hash:
            return self.code_hash == kernel_code_hash(kernel)
        return self.source_hash == kernel.source_hash()

    # -- sources ------------------------------------------------------------------------------
    @classmethod
    def from_db(cls, kernel: Any, db: str | Path | Sequence[str | Path], *, device: str | None = None,
                shipped: str | Path | None = None) -> "ConfigTable":
        """The best timed config per shape, dtype and GPU for `kernel` (an autotune.Kernel) in one
        or more databases, each read with the `shipped` data beside it; `device` keeps only data
        measured on that GPU.  A recorded space is this kernel's when its source hash is the
        kernel's, or when a session on it recorded the kernel's code identity (`code_hash` in its
        options); interpreter sessions are left out (`skipped` counts both)."""
        from autotune.databases import open_for_reading, read_from
        paths = [db] if isinstance(db, (str, Path)) else list(db)
        source, code = kernel.source_hash(), kernel_code_hash(kernel)
        table = cls(kernel=kernel.name, family=kernel.family, source_hash=source, code_hash=code)
        best: dict[tuple[tuple[int, ...], str, str], Entry] = {}
        read = []
        for path in paths:
            if not Path(path).exists() and (shipped is None or not Path(shipped).exists()):
                continue
            read.append(read_from(path, shipped).replace("`", ""))
            cache = open_for_reading(path, shipped)
            try:
                for record in cache.find_spaces(kernel.name):
                    if record.device == "cpu" or (device is not None and record.device != device):
                        if record.device == "cpu" and record.source_hash == source:  # the interpreter's, say so
                            count = _best_timed(cache, record.fingerprint)[1]
                            table.skipped[INTERPRETED] = table.skipped.get(INTERPRETED, 0) + count
                        continue  # never timed on a GPU, or another GPU than asked
                    if record.source_hash != source and code not in _recorded_code_hashes(cache, record.fingerprint):
                        table.skipped[OTHER_SOURCE] = table.skipped.get(OTHER_SOURCE, 0) + 1
                        continue
                    found, interpreted = _best_timed(cache, record.fingerprint)
                    table.skipped[INTERPRETED] = table.skipped.get(INTERPRETED, 0) + interpreted
                    if found is None:
                        continue
                    config, median_ms, session = found
                    entry = Entry(shape=tuple(record.shape), dtype=record.dtype, config=config,
                                  median_ms=median_ms, session=session, device=record.device)
                    key = (entry.shape, entry.dtype, entry.device)
                    if key not in best or entry.median_ms < best[key].median_ms:
                        best[key] = entry
            finally:
                cache.close()
        table.entries = sorted(best.values(), key=lambda e: (e.dtype, e.shape, e.device))
        table.skipped = {why: count for why, count in table.skipped.items() if count}
        table.origin = ", ".join(dict.fromkeys(read)) or " nor ".join(str(p) for p in paths)
        return table

    @classmethod
    def load(cls, path: str | Path) -> "ConfigTable":
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise UserError(f"cannot read config table {path}: {' '.join(str(error).split())}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise UserError(f"{path} is not a config table written by `autotune export` (format {FORMAT})")
        if data.get("mode") == INTERPRETER_MODE:
            raise UserError(f"{path} holds interpreter timings (accuracy checks, not GPU times): not served")
        entries = [Entry(shape=tuple(e["shape"]), dtype=e["dtype"], config=e["config"], median_ms=e["median_ms"],
                         session=e.get("session"), device=e.get("device", "")) for e in data["entries"]]
        return cls(kernel=data["kernel"], family=data["family"], source_hash=data["source_hash"], entries=entries,
                   code_hash=str(data.get("code_hash", "")), origin=str(path))

    # -- outputs ------------------------------------------------------------------------------
    def to_json(self) -> str:
        return json.dumps({
            "format": FORMAT, "kernel": self.kernel, "family": self.family, "source_hash": self.source_hash,
            "code_hash": self.code_hash,
            "rule": "exact shape, else the nearest recorded shape of the same dtype and rank (sum of |log2| ratios)",
            "entries": [{"shape": list(e.shape), "dtype": e.dtype, "config": e.config, "median_ms": e.median_ms,
                         "device": e.device, "session": e.session} for e in self.entries],
        }, indent=1, sort_keys=True) + "\n"

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json(), encoding="utf-8")

    def to_python(self) -> str:
        """A module with CONFIGS {(dtype, shape): config} and config_for(shape, dtype), needing only
        helion or triton: the table and its rule, frozen (one GPU's entries)."""
        self._one_device()
        if self.family == "helion":
            head, make = "import helion\n", lambda c: f"helion.Config({_kwargs(c)})"
        else:
            head = "import triton\n"
            make = lambda c: _triton_config(c)  # noqa: E731
        lines = [f'"""Tuned configs of {_safe(self.kernel)} by shape (source {self.source_hash}), written by autotune '
                 'export.\n\nconfig_for(shape, dtype): the config tuned at that shape, else at the nearest recorded '
                 'shape\nof the same dtype and rank, else None (the compiler\'s default).\n"""', "", "import math",
                 head, "CONFIGS = {"]
        for e in self.entries:
            lines.append(f"    ({literal(e.dtype)}, {literal(list(e.shape)).replace('[', '(').replace(']', ',)')}): "
                         f"{make(e.config)},  # {e.median_ms:.4f} ms on {_safe(e.device)}")
        lines += ["}", "", "", "def config_for(shape, dtype):",
                  "    shape = tuple(int(d) for d in shape)",
                  "    if (dtype, shape) in CONFIGS:", "        return CONFIGS[(dtype, shape)]",
                  "    def distance(other):",
                  "        return sum(abs(math.log2(a) - math.log2(b)) for a, b in zip(shape, other))",
                  "    near = [s for d, s in CONFIGS if d == dtype and len(s) == len(shape)]",
                  "    return CONFIGS[(dtype, min(near, key=distance))] if near else None", ""]
        return "\n".join(lines)

    def to_helion_aot(self, function_name: str) -> str:
        """Helion's AOT heuristic file for a kernel whose Python function is `function_name`:
        `autotune_<name>(*args)` returns the config dict for a call, `key_<name>(*args)` which
        recorded config it is (calls given the same config share one compiled kernel).  The
        call's shape is its first tensor argument's, as autotune.Kernel's default `shape_of`."""
        if self.family != "helion":
            raise ExportError("the Helion AOT format is for Helion kernels")
        if not function_name.isidentifier():
            raise ExportError(f"{function_name!r} is not a Python function name")
        if not self.entries:
            raise ExportError(f"no tuned config recorded for {self.kernel}: nothing to export")
        self._one_device()
        configs = [e.config for e in self.entries]
        keys = [(e.dtype, list(e.shape)) for e in self.entries]
        return "\n".join([
            f'"""Helion AOT heuristic for {_safe(self.kernel)}, written by autotune export from tuned configs at '
            f'{len(keys)} shapes.\n\nThe rule: the exact shape, else the nearest recorded shape of the same dtype and '
            'rank.\n"""', "", "import math", "", f"_SHAPES = {literal([[d, s] for d, s in keys])}",
            f"_CONFIGS = {literal(configs)}", "", "",
            f"def key_{function_name}(*args):",
            "    first = next(a for a in args if hasattr(a, 'shape') and hasattr(a, 'dtype'))",
            "    shape, dtype = [int(d) for d in first.shape], str(first.dtype).replace('torch.', '')",
            "    best, best_distance = -1, math.inf",
            "    for index, (recorded_dtype, recorded) in enumerate(_SHAPES):",
            "        if recorded_dtype != dtype or len(recorded) != len(shape):",
            "            continue",
            "        distance = sum(abs(math.log2(a) - math.log2(b)) for a, b in zip(shape, recorded))",
            "        if distance < best_distance:",
            "            best, best_distance = index, distance",
            "    return best", "", "",
            f"def autotune_{function_name}(*args):",
            f"    index = key_{function_name}(*args)",
            "    return dict(_CONFIGS[index]) if index >= 0 else {}  # {}: Helion's default config", ""])


    def _one_device(self) -> None:
        """A frozen rule serves one GPU: entries of several would pick across GPUs unseen."""
        devices = self.devices()
        if len(devices) > 1:
            raise ExportError(f"{self.kernel}'s configs were measured on {len(devices)} GPUs ({', '.join(devices)}): "
                              "export one GPU's with --device NAME")


def kernel_code_hash(kernel: Any) -> str:
    """The code identity of an autotune.Kernel: its sources' syntax, without comments or layout."""
    import inspect

    from search_spaces.fingerprint import code_hash

    return code_hash(*(inspect.getsource(getattr(obj, "fn", obj)) for obj in kernel.source_objects))


def _best_timed(cache: Any, fingerprint: str) -> tuple[tuple[dict[str, Any], float, int] | None, int]:
    """The fastest accurate measured config of a space outside interpreter sessions (config,
    median ms, session), and how many interpreter sessions were left out."""
    found, skipped = cache.fastest_measured(fingerprint, except_mode=INTERPRETER_MODE)
    return ((json.loads(found[0]), found[1], found[2]) if found else None), skipped


def _recorded_code_hashes(cache: Any, fingerprint: str) -> set[str]:
    """The code identities sessions on a space recorded in their options (none before they did)."""
    hashes = set()
    for text in cache.session_options_under(fingerprint):
        try:
            value = json.loads(text).get("code_hash")
        except (ValueError, AttributeError):
            continue
        if isinstance(value, str):
            hashes.add(value)
    return hashes


def _kwargs(config: dict[str, Any]) -> str:
    from autotune.export import _keyword_arguments

    return _keyword_arguments(config)


def _triton_config(config: dict[str, Any]) -> str:
    from search_spaces.triton_space import split_launch_config

    meta, options = split_launch_config(config)
    meta_text = "{" + ", ".join(f"{literal(str(k))}: {literal(v)}" for k, v in sorted(meta.items())) + "}"
    return f"triton.Config({meta_text}" + "".join(f", {k}={literal(v)}" for k, v in sorted(options.items())) + ")"


def _safe(text: str) -> str:
    import re

    return re.sub(r"[^\w.\- ]", "?", str(text))
