"""CLI commands that live in their own module.

Each module defines `NAME`, `add_parser(subparsers)` and `run(args, console) -> int`, and is
listed in `autotune.cli.COMMAND_MODULES`.  User errors are raised as `autotune.errors.UserError`
(one line on stderr, exit status 2); nothing else here reads flags.
"""

from typing import Any

SHAPE_HELP = "e.g. 4096x32000"


KERNEL_HELP = "a built-in kernel's name, or your own: path/to/file.py:NAME (or package.module:NAME)"


def add_task_arguments(parser: Any, *, shape_help: str = SHAPE_HELP) -> None:
    """KERNEL --shape --dtype: what names one tuning task (a kernel at a shape and dtype)."""
    parser.add_argument("kernel", help=KERNEL_HELP)
    parser.add_argument("--shape", required=True, help=shape_help)
    parser.add_argument("--dtype", default="float16")


def kernel_task_inputs(args: Any) -> tuple[Any, tuple[int, ...], Any]:
    """(kernel, shape, dtype) for KERNEL --shape --dtype; one line (UserError) for bad input."""
    from autotune.errors import UserError
    from autotune.precheck import check_task

    check_task(args.kernel, args.shape, args.dtype)  # before the kernel (and torch) is imported
    from autotune.kernel_loader import resolve_kernel
    from autotune.kernels import parse_dtype, parse_shape

    kernel = resolve_kernel(args.kernel)
    try:
        return kernel, parse_shape(args.shape, kernel.rank), parse_dtype(args.dtype, kernel.dtypes)
    except ValueError as error:
        raise UserError(error.args[0]) from None


def recorded_kernel(text: str) -> tuple[str, str | None]:
    """(name, source hash) to find a kernel's recorded spaces by: a built-in name alone, or a
    user kernel's name and the hash of its source (FILE.py:NAME is loaded to read it)."""
    from autotune.kernel_loader import is_locator, resolve_kernel

    if not is_locator(text):
        return text, None
    kernel = resolve_kernel(text)
    return kernel.name, kernel.source_hash()
