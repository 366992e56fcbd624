"""A kernel's tuned configs for every recorded shape, usable without the database.

`ConfigTable.from_db` gathers, for one kernel (same name and source text), the fastest
accurate config measured on a GPU at each (shape, dtype); `save`/`load` keep it as JSON;
`to_python` writes a module a Helion or Triton user imports with no dependency on this
framework; `to_helion_aot` writes the heuristic file `@helion.aot_kernel` reads.

`pick(shape, dtype)` is the shape -> config rule every form shares: the exact shape, else the
nearest recorded shape of the same dtype and rank (distance: the sum of |log2| ratios of the
extents), else nothing (the caller runs the compiler's default).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from autotune.errors import UserError
from autotune.export import ExportError, literal
from autotune.seeds import shape_distance  # the cache seed source's nearest shape: one measure for both

FORMAT = "autotune-config-table/1"
EXACT, NEAREST, DEFAULT = "exact", "nearest", "default"


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

    def describe(self, kernel: str, shape: Sequence[int], dtype: str) -> str:
        at = "x".join(map(str, shape))
        if self.how == EXACT:
            return f"{kernel} {at} {dtype}: the config tuned at this shape"
        if self.how == NEAREST:
            return (f"{kernel} {at} {dtype}: no config tuned at this shape; the one tuned at the nearest recorded "
                    f"shape {'x'.join(map(str, self.shape or ()))}")
        return f"{kernel} {at} {dtype}: nothing recorded for {dtype} at this rank; the compiler's default config"


@dataclass
class ConfigTable:
    kernel: str
    family: str
    source_hash: str
    entries: list[Entry] = field(default_factory=list)

    # -- the rule ---------------------------------------------------------------------------
    def pick(self, shape: Sequence[int], dtype: str, *, exclude: Sequence[Sequence[int]] = ()) -> Pick:
        """The config for a call of `shape` and `dtype` (see the module docstring); `exclude`
        leaves recorded shapes out (to judge the rule on shapes it was not given)."""
        shape = tuple(int(d) for d in shape)
        skip = {tuple(s) for s in exclude}
        same = [e for e in self.entries if e.dtype == dtype and e.shape not in skip]
        for entry in same:
            if entry.shape == shape:
                return Pick(EXACT, dict(entry.config), entry.shape)
        ranked = sorted((shape_distance(e.shape, shape), e.median_ms, i) for i, e in enumerate(same))
        ranked = [r for r in ranked if math.isfinite(r[0])]
        if ranked:
            distance, _, index = ranked[0]
            return Pick(NEAREST, dict(same[index].config), same[index].shape, distance)
        return Pick(DEFAULT, None, None)

    # -- sources ------------------------------------------------------------------------------
    @classmethod
    def from_db(cls, kernel: Any, db: str | Path | Sequence[str | Path], *, device: str | None = None,
                shipped: str | Path | None = None) -> "ConfigTable":
        """The best measured config per shape and dtype for `kernel` (an autotune.Kernel) in one or
        more databases, each read with the `shipped` data beside it; `device` keeps only data measured on that GPU (default: every GPU, the
        fastest winning where two measured one shape)."""
        from autotune.databases import open_for_reading
        paths = [db] if isinstance(db, (str, Path)) else list(db)
        wanted = kernel.source_hash()
        table = cls(kernel=kernel.name, family=kernel.family, source_hash=wanted)
        best: dict[tuple[tuple[int, ...], str], Entry] = {}
        for path in paths:
            if not Path(path).exists() and (shipped is None or not Path(shipped).exists()):
                continue
            cache = open_for_reading(path, shipped)
            try:
                for record in cache.find_spaces(kernel.name):
                    if record.source_hash != wanted or record.device == "cpu":
                        continue
                    if device is not None and record.device != device:
                        continue
                    found = cache.best(record.fingerprint)
                    if found is None:
                        continue
                    candidate, result = found
                    entry = Entry(shape=tuple(record.shape), dtype=record.dtype, config=dict(candidate.native),
                                  median_ms=float(result.median_ms), device=record.device)
                    key = (entry.shape, entry.dtype)
                    if key not in best or entry.median_ms < best[key].median_ms:
                        best[key] = entry
            finally:
                cache.close()
        table.entries = sorted(best.values(), key=lambda e: (e.dtype, e.shape))
        return table

    @classmethod
    def load(cls, path: str | Path) -> "ConfigTable":
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise UserError(f"cannot read config table {path}: {' '.join(str(error).split())}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise UserError(f"{path} is not a config table written by `autotune export` (format {FORMAT})")
        entries = [Entry(shape=tuple(e["shape"]), dtype=e["dtype"], config=e["config"], median_ms=e["median_ms"],
                         session=e.get("session"), device=e.get("device", "")) for e in data["entries"]]
        return cls(kernel=data["kernel"], family=data["family"], source_hash=data["source_hash"], entries=entries)

    # -- outputs ------------------------------------------------------------------------------
    def to_json(self) -> str:
        return json.dumps({
            "format": FORMAT, "kernel": self.kernel, "family": self.family, "source_hash": self.source_hash,
            "rule": "exact shape, else the nearest recorded shape of the same dtype and rank (sum of |log2| ratios)",
            "entries": [{"shape": list(e.shape), "dtype": e.dtype, "config": e.config, "median_ms": e.median_ms,
                         "device": e.device} for e in self.entries],
        }, indent=1, sort_keys=True) + "\n"

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json(), encoding="utf-8")

    def to_python(self) -> str:
        """A module with CONFIGS {(dtype, shape): config} and config_for(shape, dtype), needing only
        helion or triton: the table and its rule, frozen."""
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
