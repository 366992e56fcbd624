"""The built-in kernel registry: what the CLI can tune by name.

Built-in kernels are `autotune.Kernel` objects like a user's, registered under a name (their
locator: how a measuring process finds them again).  Users' kernels are found by path instead
(`autotune.kernel_loader`).
"""

from __future__ import annotations

import functools
from typing import Sequence

import torch

from autotune.kernel import Inputs, Kernel, Shape  # noqa: F401 - Inputs and Shape are re-exported
from autotune.kernels.names import (  # noqa: F401 - re-exported
    UnknownKernel, check_dtype, dtype_name, parse_shape, unknown_kernel_message,
)

DTYPES: dict[str, torch.dtype] = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


_REGISTRY: dict[str, Kernel] = {}


def register(kernel: Kernel) -> Kernel:
    """Make a kernel tunable by name; its name becomes its locator."""
    if kernel.name in _REGISTRY:
        raise ValueError(f"kernel {kernel.name!r} is already registered")
    kernel.locator = kernel.name
    _REGISTRY[kernel.name] = kernel
    present_source_hash.cache_clear()  # a name looked up before it was registered
    return kernel


def get_kernel(name: str) -> Kernel:
    if name not in _REGISTRY:
        _load_module_of(name)
    if name not in _REGISTRY:
        _load_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownKernel(unknown_kernel_message(name, list(_REGISTRY))) from None


@functools.lru_cache(maxsize=None)
def present_source_hash(name: str) -> str | None:
    """The source hash of built-in kernel `name` as it is now (None for a name no longer built
    in): reports count a recorded measurement only when its space carries this hash."""
    try:
        return get_kernel(name).source_hash()
    except UnknownKernel:
        return None


def all_kernels() -> list[Kernel]:
    _load_builtins()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def _load_module_of(name: str) -> None:
    """Import only the module the catalogue says registers `name`: a session (and each of its
    measuring workers) then imports one kernel module, not all of them."""
    import importlib

    from autotune.kernels.catalogue import entry

    found = entry(name)
    if found is not None:
        importlib.import_module(f"autotune.kernels.{found.module}")


def _load_builtins() -> None:
    # Imported lazily: the kernel modules import helion and triton, which the cache and
    # replay paths do not need.
    from autotune.kernels import (  # noqa: F401
        faulty_triton, matmul_epilogue, matmul_split, matmul_tiled, softmax_cooperative, softmax_helion,
        softmax_lookback, softmax_persistent, softmax_resident, softmax_split, softmax_triton,
    )


def parse_dtype(text: str, allowed: Sequence[str] = tuple(DTYPES)) -> torch.dtype:
    return DTYPES[check_dtype(text, allowed)]
