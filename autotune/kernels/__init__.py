"""Built-in kernels, looked up by name through `get_kernel`."""

from autotune.kernels.registry import (
    DTYPES,
    Kernel,
    UnknownKernel,
    all_kernels,
    dtype_name,
    get_kernel,
    parse_dtype,
    parse_shape,
    register,
)

__all__ = ["DTYPES", "Kernel", "UnknownKernel", "all_kernels", "dtype_name", "get_kernel",
           "parse_dtype", "parse_shape", "register"]
