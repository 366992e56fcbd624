"""The built-in kernel registry: what the CLI can tune by name.

Built-in kernels are `autotune.Kernel` objects like a user's, registered under a name (their
locator: how a measuring process finds them again).  Users' kernels are found by path instead
(`autotune.kernel_loader`).
"""

from __future__ import annotations

from typing import Sequence

import torch

from autotune.kernel import Inputs, Kernel, Shape  # noqa: F401 - Inputs and Shape are re-exported

DTYPES: dict[str, torch.dtype] = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


class UnknownKernel(KeyError):
    """Raised for a kernel name that is not registered."""


_REGISTRY: dict[str, Kernel] = {}


def register(kernel: Kernel) -> Kernel:
    """Make a kernel tunable by name; its name becomes its locator."""
    if kernel.name in _REGISTRY:
        raise ValueError(f"kernel {kernel.name!r} is already registered")
    kernel.locator = kernel.name
    _REGISTRY[kernel.name] = kernel
    return kernel


def get_kernel(name: str) -> Kernel:
    _load_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise UnknownKernel(f"unknown kernel {name!r} (known: {known})") from None


def all_kernels() -> list[Kernel]:
    _load_builtins()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def _load_builtins() -> None:
    # Imported lazily: the kernel modules import helion and triton, which the cache and
    # replay paths do not need.
    from autotune.kernels import (  # noqa: F401
        faulty_triton, matmul_epilogue, softmax_cooperative, softmax_helion, softmax_lookback, softmax_persistent,
        softmax_split, softmax_triton,
    )


def parse_shape(text: str, rank: int | None = None) -> Shape:
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


def parse_dtype(text: str, allowed: Sequence[str] = tuple(DTYPES)) -> torch.dtype:
    if text not in DTYPES or text not in allowed:
        raise ValueError(f"unsupported dtype {text!r} (supported: {', '.join(allowed)})")
    return DTYPES[text]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
