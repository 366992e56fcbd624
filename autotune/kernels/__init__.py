"""Built-in kernels, looked up by name through `get_kernel`.

The registry (and torch with it) is imported on first use of one of its names, so the
command line can validate a kernel name, shape and dtype (`autotune.kernels.names`) first.
"""

from typing import Any

_REGISTRY_NAMES = ("DTYPES", "Kernel", "all_kernels", "dtype_name", "get_kernel", "parse_dtype",
                   "present_source_hash", "register")
_NAMES = ("UnknownKernel", "parse_shape")

__all__ = sorted(_REGISTRY_NAMES + _NAMES)


def __getattr__(name: str) -> Any:
    import importlib

    if name in _REGISTRY_NAMES:
        return getattr(importlib.import_module("autotune.kernels.registry"), name)
    if name in _NAMES:
        return getattr(importlib.import_module("autotune.kernels.names"), name)
    raise AttributeError(f"module 'autotune.kernels' has no attribute {name!r}")
