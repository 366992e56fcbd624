"""The built-in kernels as a replay, a listing or a refusal needs them, without importing them.

Why: the kernels' modules import torch, Triton and Helion (seconds on a small CPU machine), yet a
replay needs only a kernel's name, rank, dtypes, source hash and bytes per call: the space and
every measurement are in the database.  `catalogue_data.py` holds those facts, generated from
the real registry (`python -m autotune.kernels.catalogue --write`) and committed;
`tests/test_catalogue.py` fails when it no longer matches the registry.  At run time an entry
is trusted only while the kernels' sources hash to what they did when it was generated
(`is_current`): an edited kernel is imported for real until the catalogue is written again.
Nothing here imports torch.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import pprint
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

_KERNELS_DIR = Path(__file__).resolve().parent
_DATA = _KERNELS_DIR / "catalogue_data.py"
# Files whose text decides a built-in kernel's source hash: the kernels, and how it is hashed.
_FINGERPRINT = _KERNELS_DIR.parent.parent / "search_spaces" / "fingerprint.py"

ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4}
# Bytes one call moves, by model (a kernel's `bytes_moved` hook, matched by the generator).
BYTES_MODELS = ("read-write-once", "matmul-out", "matmul-rows")


@dataclass(frozen=True)
class CatalogueEntry:
    """What is known of a built-in kernel without importing it."""

    name: str
    module: str  # autotune.kernels.<module> registers it
    family: str  # "helion" or "triton"
    rank: int
    dtypes: tuple[str, ...]
    baselines: tuple[str, ...]
    description: str
    source_hash: str
    bytes_model: str | None  # one of BYTES_MODELS, or None when the kernel does not say


def bytes_for(model: str | None, shape: Sequence[int], dtype: str) -> int | None:
    """Bytes a call moves under `model` (the formulas of the kernels' own hooks)."""
    size = ITEMSIZE[dtype]
    numel = 1
    for d in shape:
        numel *= d
    if model == "read-write-once":
        return 2 * numel * size
    if model in ("matmul-out", "matmul-rows"):
        m, k, n = shape
        return (m * k + k * n) * size + (m * n * size if model == "matmul-out" else m * 4)
    return None


def kernels_digest() -> str:
    """A hash of every file that shapes a built-in kernel's source hash (the kernels' modules,
    their shared pieces, the hash itself; not the registry's plumbing)."""
    digest = hashlib.sha256()
    for path in sorted(_KERNELS_DIR.glob("*.py")) + [_FINGERPRINT]:
        if path.name in ("__init__.py", "catalogue.py", "catalogue_data.py", "names.py", "registry.py"):
            continue
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:24]


@functools.lru_cache(maxsize=1)
def _load() -> tuple[str, dict[str, CatalogueEntry]]:
    from autotune.kernels import catalogue_data

    entries = {name: CatalogueEntry(name=name, **{**fields, "dtypes": tuple(fields["dtypes"]),
                                                  "baselines": tuple(fields["baselines"])})
               for name, fields in catalogue_data.KERNELS.items()}
    return catalogue_data.DIGEST, entries


def entries() -> dict[str, CatalogueEntry]:
    """Every built-in kernel, by name (as generated; see `is_current`)."""
    return _load()[1]


@functools.lru_cache(maxsize=1)
def is_current() -> bool:
    """Whether the kernels' sources are those the catalogue was generated from."""
    return _load()[0] == kernels_digest()


def entry(name: str) -> CatalogueEntry | None:
    """The entry of built-in kernel `name`, or None (no such name)."""
    return entries().get(name)


class CatalogueKernel:
    """A built-in kernel as a replay uses it: what the catalogue knows, with the real
    `autotune.Kernel` imported only if something else is asked of it."""

    def __init__(self, entry: CatalogueEntry) -> None:
        self.entry = entry
        self.name, self.family, self.rank = entry.name, entry.family, entry.rank
        self.dtypes, self.description = entry.dtypes, entry.description
        self.baselines = {name: None for name in entry.baselines}
        self.locator = entry.name
        self.overrides: dict[str, Any] = {}

    def source_hash(self) -> str:
        return self.entry.source_hash

    def bytes_for(self, shape: Sequence[int], dtype: Any) -> int | None:
        return bytes_for(self.entry.bytes_model, shape, str(dtype).removeprefix("torch."))

    def live(self) -> Any:
        """The real kernel (imports its module: torch, Triton, Helion)."""
        from autotune.kernels.registry import get_kernel

        return get_kernel(self.name)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.live(), attribute)

    def __repr__(self) -> str:
        return f"autotune.Kernel({self.name!r}, {self.family}, {self.name}; from the catalogue)"


def light_kernel(name: str) -> CatalogueKernel | None:
    """Built-in kernel `name` without importing it, where the catalogue is current; else None."""
    found = entry(name)
    return CatalogueKernel(found) if found is not None and is_current() else None


# -- generation ------------------------------------------------------------------------------
def _bytes_model(kernel: Any) -> str | None:
    """Which model the kernel's bytes_moved hook follows (checked at probe shapes and dtypes)."""
    import torch

    if kernel.bytes_moved is None:
        return None
    shapes = [(3, 5, 7), (64, 96, 128)] if kernel.rank == 3 else [(3, 5), (64, 96)]
    for model in BYTES_MODELS:
        if all(bytes_for(model, shape, dtype) == kernel.bytes_for(shape, getattr(torch, dtype))
               for shape in shapes for dtype in ITEMSIZE):
            return model
    raise ValueError(f"{kernel.name}'s bytes_moved follows none of {BYTES_MODELS}: add its model here")


def generate() -> dict[str, dict[str, Any]]:
    """The catalogue's entries, read from the real registry (imports every kernel)."""
    from autotune.kernels.registry import all_kernels

    found = {}
    for kernel in all_kernels():
        fn = kernel.helion_kernel.fn if kernel.family == "helion" else kernel.triton_launch
        entry = CatalogueEntry(
            name=kernel.name, module=fn.__module__.removeprefix("autotune.kernels."), family=kernel.family,
            rank=kernel.rank, dtypes=tuple(kernel.dtypes), baselines=tuple(kernel.baselines),
            description=kernel.description, source_hash=kernel.source_hash(), bytes_model=_bytes_model(kernel))
        fields = asdict(entry)
        del fields["name"]
        found[kernel.name] = fields
    return found


def render(kernels: dict[str, dict[str, Any]], digest: str) -> str:
    return ('"""Generated by `python -m autotune.kernels.catalogue --write`: do not edit."""\n\n'
            f"DIGEST = {digest!r}\n\nKERNELS = {pprint.pformat(kernels, width=110, sort_dicts=True)}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="write or check the built-in kernels' catalogue")
    parser.add_argument("--write", action="store_true", help=f"write {_DATA.name} (else: check it)")
    args = parser.parse_args(argv)
    text = render(generate(), kernels_digest())
    if args.write:
        _DATA.write_text(text)
        print(f"wrote {_DATA}")
        return 0
    if _DATA.read_text() != text:
        print(f"{_DATA} is out of date: python -m autotune.kernels.catalogue --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
