"""Argument checks that need no kernel, database or GPU, run before anything heavy is imported.

Why: binding a kernel imports torch, triton and helion (seconds on a CPU machine); a command
refused for a misspelt kernel, a malformed shape, a bad dtype, strategy or option, or
unreadable --config should answer at once.  The same checks run again where the work is
done (`autotune.tuning.run_tune`, `autotune.commands.kernel_task_inputs`), so these only move
the refusal earlier, with the same one-line message.  Nothing here imports torch.
"""

from __future__ import annotations

import argparse
from typing import Any

from autotune.errors import UserError


def check_task(kernel: str, shape: str, dtype: str) -> None:
    """KERNEL --shape --dtype: a known kernel (or a locator whose file exists), a shape of its
    rank and a dtype it takes."""
    from autotune.kernel_loader import check_kernel_name
    from autotune.kernels.names import BUILTIN_KERNELS, DTYPE_NAMES, check_dtype, parse_shape

    rank = check_kernel_name(kernel)
    builtin = BUILTIN_KERNELS.get(kernel)
    try:
        parse_shape(shape, rank)
        # A user's kernel may take fewer dtypes than these: its own list is checked once it is loaded.
        check_dtype(dtype, builtin.dtypes if builtin is not None else DTYPE_NAMES)
    except ValueError as error:
        raise UserError(error.args[0]) from None


def check_tune(args: argparse.Namespace) -> tuple[tuple[str, Any], ...]:
    """`autotune tune`'s arguments, checked in the order `run_tune` checks them; returns the
    strategy options typed for the strategy (as given, when resuming: the session's own are used)."""
    from autotune.seeds import parse_sources, read_configs
    from autotune.strategies import strategy_names
    from autotune.strategies.options import check_options, parse_option_items

    options = parse_option_items(args.option)
    resuming = args.resume is not None
    if resuming and args.config:
        raise UserError("--config cannot be given with --resume: a resumed session evaluates its own configs")
    if resuming:
        return options
    if not args.kernel or not args.shape:
        raise UserError("tune needs a kernel and --shape (or --resume SESSION)")
    try:
        parse_sources(args.seed_from)
    except ValueError as error:
        raise UserError(str(error)) from None
    configs = read_configs(args.config)
    from autotune.kernel_loader import check_kernel_name

    check_kernel_name(args.kernel)
    if args.strategy not in strategy_names(retired=True):  # a retired preset still runs by name
        raise UserError(f"unknown strategy {args.strategy!r} (known: {', '.join(strategy_names())})")
    check_task(args.kernel, args.shape, args.dtype)
    budget = args.budget if args.budget is not None or args.seconds is not None else 60
    if budget is not None and len(configs) > budget:
        raise UserError(f"{len(configs)} configs given with --config but a budget of {budget}: "
                        "raise --budget or give fewer configs")
    if args.interpret and args.replay:
        raise UserError("--interpret and --replay exclude each other")
    if args.grid.strip() and args.strategy != "grid":
        raise UserError("--grid applies to --strategy grid only")
    return tuple(check_options(args.strategy, dict(options)).items())
