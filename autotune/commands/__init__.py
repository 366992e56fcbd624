"""CLI commands that live in their own module.

Each module defines `NAME`, `add_parser(subparsers)` and `run(args, console) -> int`, and is
listed in `autotune.cli.COMMAND_MODULES`.  User errors are raised as `autotune.errors.UserError`
(one line on stderr, exit status 2); nothing else here reads flags.
"""

from typing import Any

SHAPE_HELP = "e.g. 4096x32000"


def add_task_arguments(parser: Any, *, shape_help: str = SHAPE_HELP) -> None:
    """KERNEL --shape --dtype: what names one tuning task (a kernel at a shape and dtype)."""
    parser.add_argument("kernel")
    parser.add_argument("--shape", required=True, help=shape_help)
    parser.add_argument("--dtype", default="float16")
