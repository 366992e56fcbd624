"""`autotune noise`: how noisy the recorded timings of one space are, so researchers know
which differences between configs are real.  The numbers come from `autotune.noise`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from autotune.databases import add_arguments as add_database_arguments
from autotune.databases import open_for_reading
from autotune.store.cache import Cache, SpaceRecord
from autotune.commands import add_task_arguments
from autotune.errors import UserError
from autotune.noise import NoiseReport, Spread, analyse, percent

NAME = "noise"


def add_parser(subparsers: Any) -> None:
    from autotune.cli import positive_int

    sub = subparsers.add_parser(NAME, help="measurement noise of a recorded space: which differences are real")
    add_task_arguments(sub)
    add_database_arguments(sub)
    sub.add_argument("--space", default=None, metavar="FINGERPRINT_PREFIX",
                     help="which recorded space, when there are several (default: the one with most data)")
    sub.add_argument("--top", type=positive_int, default=10, help="how many of the fastest configs to rank")
    sub.add_argument("--resamples", type=positive_int, default=200, help="bootstrap resamples")
    sub.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    sub.add_argument("--json", default=None, metavar="FILE", help="also write every number to FILE")


def run(args: argparse.Namespace, console: Console) -> int:
    from autotune.kernels.names import DTYPE_NAMES as DTYPES, parse_shape

    try:
        shape = parse_shape(args.shape)
    except ValueError as error:
        raise UserError(str(error)) from None
    if args.dtype not in DTYPES:
        raise UserError(f"unsupported dtype {args.dtype!r} (supported: {', '.join(DTYPES)})")
    cache = open_for_reading(args.db, args.shipped)
    try:
        record = choose_space(cache, args.kernel, shape, args.dtype, args.space)
        search = cache.measurements(record.fingerprint)
        rebench = cache.measurements(record.fingerprint, rebench=True)
        natives = {res.key: native for native, res in cache.best_configs(record.fingerprint, 10**9)}
    finally:
        cache.close()
    try:
        report = analyse(search, rebench, k=args.top, resamples=args.resamples, seed=args.seed)
    except ValueError as error:
        raise UserError(f"{_label(record)} in {args.db}: {error}") from None
    print_report(console, record, report)
    if args.json:
        write_json(Path(args.json), record, report, natives)
        console.print(f"wrote every number to {args.json}")
    return 0


# -- choosing the space ------------------------------------------------------------------------
def _label(record: SpaceRecord) -> str:
    return f"{record.kernel} {'x'.join(map(str, record.shape))} {record.dtype}"


def choose_space(cache: Cache, kernel: str, shape: tuple[int, ...], dtype: str, wanted: str | None) -> SpaceRecord:
    """The recorded space to analyse: the one with most data, or the one whose fingerprint starts
    with `wanted`; any source version of a built-in counts, since old measurements are still
    measurements (a kernel given as FILE.py:NAME: only its present source)."""
    from autotune.commands import recorded_kernel

    kernel, source = recorded_kernel(kernel)
    label = f"{kernel} at {'x'.join(map(str, shape))} {dtype}"
    recorded = [r for r in cache.find_spaces(kernel) if source is None or r.source_hash == source]
    if not recorded:
        _unknown_kernel(cache, kernel)
    listing = ", ".join(f"{'x'.join(map(str, r.shape))} {r.dtype} [{r.fingerprint[:12]}, {r.evaluations} measured rows]"
                        for r in recorded)
    matching = [r for r in recorded if r.shape == shape and r.dtype == dtype]
    if not matching:
        raise UserError(f"no recorded space for {label} in {cache.path} (recorded for {kernel}: {listing})")
    if wanted:
        chosen = [r for r in matching if r.fingerprint.startswith(wanted)]
        if not chosen:
            options = ", ".join(r.fingerprint for r in matching)
            raise UserError(f"no recorded space {wanted!r} for {label} (recorded: {options})")
        matching = chosen
    return matching[0]


def _unknown_kernel(cache: Cache, kernel: str) -> None:
    from autotune.kernel_loader import KernelNotFound, resolve_kernel

    kernels = sorted({s["kernel"] for s in cache.sessions(limit=10**9)})
    recorded = f"recorded in {cache.path}: {', '.join(kernels) or 'nothing'}"
    try:
        resolve_kernel(kernel)
    except KernelNotFound as error:
        raise UserError(f"{error.args[0]}; {recorded}") from None
    raise UserError(f"no recorded measurements for {kernel} in {cache.path} ({recorded})")


# -- printing ----------------------------------------------------------------------------------------
def _spread_row(name: str, spread: Spread) -> list[str]:
    return [name, str(spread.count), percent(spread.median), percent(spread.p90), percent(spread.max)]


def _rank(value: float) -> str:
    return f"{value:g}"


def print_report(console: Console, record: SpaceRecord, report: NoiseReport) -> None:
    console.print(f"noise of {_label(record)} on {record.device} (space {record.fingerprint}): "
                  f"{report.measurements} measurements of {report.configs} configs")
    within = Table(title="1. within one measurement (spread of its repetitions)")
    for column in ("relative spread", "measurements", "median", "p90", "max"):
        within.add_column(column, justify="left" if column == "relative spread" else "right")
    within.add_row(*_spread_row("IQR / median of the samples", report.within.rel_iqr))
    within.add_row(*_spread_row("(max - min) / median", report.within.rel_range))
    within.add_row(*_spread_row("95% bootstrap interval of the median / median", report.ranks.median_ci_rel))
    console.print(within)

    rep = report.repeatability
    between = Table(title="2. between measurements (configs measured more than once)")
    for column in ("relative difference of the medians", "configs", "median", "p90", "max"):
        between.add_column(column, justify="left" if column.startswith("relative") else "right")
    between.add_row(*_spread_row("coefficient of variation", rep.cv))
    between.add_row(*_spread_row("(max - min) / mean", rep.rel_range))
    shift = _spread_row("re-benchmark / search - 1 (signed)", rep.rebench_shift)
    between.add_row(*shift[:4], f"{shift[4]} (p10 {percent(rep.rebench_shift_p10)})")
    console.print(between)

    ranks = report.ranks
    top = Table(title=f"3. rank stability of the top {ranks.k} ({ranks.resamples} bootstrap resamples of the samples, "
                      f"seed {ranks.seed}, {ranks.pool} configs ranked)")
    for column in ("rank", "config", "best ms", "vs best", "measured", f"P(top {ranks.k})", "P(first)",
                   "95% rank interval", "95% interval ms", "resolved from next"):
        top.add_column(column, justify="left" if column == "config" else "right")
    for c in ranks.top:
        next_ = "-" if c.resolved_from_next is None else ("yes" if c.resolved_from_next else "no")
        top.add_row(str(c.rank), c.key, f"{c.best_ms:.4f}", "fastest" if c.rank == 1 else f"+{percent(c.delta)}", str(c.measurements),
                    f"{c.p_top:.0%}", f"{c.p_first:.0%}", f"{_rank(c.rank_low)}-{_rank(c.rank_high)}",
                    f"{c.ci_low_ms:.4f}-{c.ci_high_ms:.4f}", next_)
    console.print(top)
    resolved = sum(p.resolved for p in ranks.pairs)
    console.print(f"pairs of the top {ranks.k} whose order holds in >= {ranks.confidence:.0%} of resamples: "
                  f"{resolved} of {len(ranks.pairs)}; smallest resolved difference {percent(ranks.smallest_resolved)}, "
                  f"largest unresolved {percent(ranks.largest_unresolved)}")
    console.print(f"[bold]4. verdict: {escape(report.verdict.text)}[/bold]")


def write_json(path: Path, record: SpaceRecord, report: NoiseReport, natives: dict[str, Any]) -> None:
    data = {
        "space": {"fingerprint": record.fingerprint, "kernel": record.kernel, "shape": list(record.shape),
                  "dtype": record.dtype, "device": record.device, "versions": record.versions},
        **report.to_dict(),
        "top_configs": {c.key: natives.get(c.key) for c in report.ranks.top},
    }
    try:
        path.write_text(json.dumps(data, indent=2) + "\n")
    except OSError as error:
        raise UserError(f"cannot write {path}: {error.strerror or error}") from None
