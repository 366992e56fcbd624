"""`autotune show KERNEL` and `autotune export KERNEL`: a kernel's best config at every recorded shape.

The table is what `autotune.configured` serves at run time; exported, it works without the
database: JSON for `autotune.configured(kernel, table=FILE)`, a Python module with
`config_for(shape, dtype)`, or the heuristic file Helion's `@helion.aot_kernel` reads.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from autotune.databases import open_for_reading
from autotune.errors import UserError


def _table(args: argparse.Namespace):
    from autotune.config_table import ConfigTable
    from autotune.kernel_loader import resolve_kernel

    kernel = resolve_kernel(args.session)
    open_for_reading(args.db, args.shipped).close()  # a missing or foreign database: one line
    return kernel, ConfigTable.from_db(kernel, args.db, device=args.device, shipped=args.shipped)


def show_kernel(args: argparse.Namespace, console: Console) -> int:
    kernel, table = _table(args)
    if not table.entries:
        raise UserError(f"no measured config of {kernel.name} (this source) in {args.db}{table.skipped_note()}")
    view = Table(title=f"{kernel.name}: best recorded config per shape ({args.db})")
    for column in ("shape", "dtype", "median ms", "device", "config"):
        view.add_column(column)
    for e in table.entries:
        view.add_row("x".join(map(str, e.shape)), e.dtype, f"{e.median_ms:.4f}", escape(e.device),
                     escape(str(e.config)))
    console.print(view)
    return 0


def export_kernel(args: argparse.Namespace, console: Console) -> int:
    from autotune.export import ExportError

    kernel, table = _table(args)
    if not table.entries:
        raise UserError(f"no measured config of {kernel.name} (this source) in {args.db}{table.skipped_note()}: "
                        "nothing to export")
    if args.out is not None and not Path(args.out).parent.is_dir():
        raise UserError(f"cannot write {args.out}: its directory does not exist")
    try:
        if args.format == "json":
            text = table.to_json()
        elif args.format == "python":
            text = table.to_python()
        else:
            function = kernel.helion_kernel.fn.__name__ if kernel.family == "helion" else kernel.name
            text = table.to_helion_aot(function)
    except ExportError as error:
        raise UserError(str(error)) from None
    if args.out is None:
        sys.stdout.write(text)
        return 0
    Path(args.out).write_text(text, encoding="utf-8")
    console.print(f"{len(table.entries)} shape(s) of {kernel.name} written to {args.out}{table.skipped_note()}")
    if args.format == "helion-aot":
        console.print("Helion reads it as _helion_aot_<source file stem>_cuda_<sm>.py beside the kernel's source, or "
                      "from the directory HELION_HEURISTIC_DIR names")
    return 0
