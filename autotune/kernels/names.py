"""What the command line must know about the built-in kernels before importing any of them.

Why a static table: the kernels' modules import torch, triton and helion (seconds), and a
command refused for a misspelt kernel name, a malformed shape or an unsupported dtype should
answer at once.  The table is read from the generated kernel catalogue (`catalogue.py`), which
`tests/test_startup.py` checks against the real registry, so the two cannot drift apart.
Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass

DTYPE_NAMES = ("float16", "bfloat16", "float32")


class UnknownKernel(KeyError):
    """Raised for a kernel name that is not registered."""


@dataclass(frozen=True)
class BuiltinKernel:
    """A built-in kernel as the command line validates it: its module, rank and dtypes."""

    module: str  # autotune.kernels.<module> registers it
    family: str  # "helion" or "triton"
    rank: int
    dtypes: tuple[str, ...] = DTYPE_NAMES


def _builtin_kernels() -> dict[str, BuiltinKernel]:
    from autotune.kernels.catalogue import entries

    return {name: BuiltinKernel(entry.module, entry.family, entry.rank, entry.dtypes)
            for name, entry in sorted(entries().items())}


BUILTIN_KERNELS: dict[str, BuiltinKernel] = _builtin_kernels()  # from the generated catalogue


def dtype_name(dtype: object) -> str:
    """'float16' for torch.float16 or for 'float16' (no torch needed)."""
    return str(dtype).removeprefix("torch.")


def unknown_kernel_message(name: str, known: list[str] | None = None) -> str:
    return f"unknown kernel {name!r} (known: {', '.join(sorted(known or BUILTIN_KERNELS))})"


def builtin_kernel(name: str) -> BuiltinKernel:
    """The static description of a built-in kernel; UnknownKernel (its one-line message) if none."""
    try:
        return BUILTIN_KERNELS[name]
    except KeyError:
        raise UnknownKernel(unknown_kernel_message(name)) from None


def parse_shape(text: str, rank: int | None = None) -> tuple[int, ...]:
    """'4096x32000' -> (4096, 32000); raises ValueError with a one-line reason.

    Only ASCII digits are extents: int() would also take ' 7', '+7', '1_000' and other
    scripts' digits, none of which a user means as a shape."""
    pieces = text.lower().replace("×", "x").split("x")
    try:
        if not all(p.isascii() and p.isdigit() for p in pieces):
            raise ValueError(text)
        shape = tuple(int(p) for p in pieces)
    except ValueError:
        raise ValueError(f"malformed shape {text!r}: expected positive integers joined by 'x', e.g. 4096x32000") from None
    if any(d <= 0 for d in shape):
        raise ValueError(f"malformed shape {text!r}: every extent must be positive")
    if rank is not None and len(shape) != rank:
        raise ValueError(f"shape {text!r} has {len(shape)} dimension(s); this kernel takes {rank}")
    return shape


def check_dtype(text: str, allowed: tuple[str, ...] | list[str] = DTYPE_NAMES) -> str:
    """The dtype's name if the kernel takes it; ValueError (one line) otherwise."""
    if text not in DTYPE_NAMES or text not in allowed:
        raise ValueError(f"unsupported dtype {text!r} (supported: {', '.join(allowed)})")
    return text
