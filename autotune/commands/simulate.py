"""`autotune simulate`: benchmark search strategies on a recorded space, with no GPU.

    autotune simulate softmax --shape 4096x32000 --dtype float16 \\
        --strategies random,pattern,tpe,gp --repeats 100 --budget 200 --plot convergence.png

Each strategy runs `--repeats` times (seeds SEED, SEED+1, ...) against the recorded space
as an oracle (see `autotune.simulation.oracle` for what that means exactly), and the table
says how fast each got within 1%, 2% and 5% of the best recorded config.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from autotune.databases import add_arguments as add_database_arguments
from autotune.databases import open_for_reading
from autotune.store.cache import Cache, SpaceRecord
from autotune.errors import UserError
from autotune.simulation.landscape import landscape
from autotune.simulation.oracle import RecordedSpace
from autotune.simulation.runner import NotSimulable, Trace, simulate
from autotune.simulation.stats import THRESHOLDS, StrategySummary, summarise

NAME = "simulate"
DEFAULT_STRATEGIES = "random,pattern,tpe,gp"
ORACLE_NOTE = ("oracle: the space is the recorded configs; a config measured more than once is answered with the "
               "median of its correct runs' medians (else its latest failure), as a replay answers it; each answer "
               "costs its recorded compile + benchmark seconds; a config not recorded is answered 'not_recorded', "
               "counted, and told as a failure")


def add_parser(subparsers: Any) -> None:
    from autotune.cli import positive_int

    sub = subparsers.add_parser(NAME, help="benchmark strategies on a recorded space (no GPU needed)")
    sub.add_argument("kernel", nargs="?", help="kernel name (or give --space)")
    sub.add_argument("--shape", help="e.g. 4096x32000")
    sub.add_argument("--dtype", default=None, help="e.g. float16 (default: any)")
    sub.add_argument("--space", default=None, help="fingerprint (or prefix) of the recorded space")
    add_database_arguments(sub)
    sub.add_argument("--strategies", default=DEFAULT_STRATEGIES, help=f"comma-separated (default {DEFAULT_STRATEGIES})")
    sub.add_argument("--repeats", type=positive_int, default=100)
    sub.add_argument("--budget", type=positive_int, default=200, help="evaluations per run")
    sub.add_argument("--seed", type=int, default=0, help="run i of a strategy uses seed SEED+i")
    sub.add_argument("--generation-size", type=positive_int, default=None)
    sub.add_argument("--plot", default=None, help="write the convergence plot (PNG) here")
    sub.add_argument("--json", default=None, help="write every summary figure here")


def run(args: argparse.Namespace, console: Any) -> int:
    from autotune.strategies import UnknownStrategy, get_strategy

    for flag, target in (("--plot", args.plot), ("--json", args.json)):
        _check_output(flag, target)
    names = [n.strip() for n in args.strategies.split(",") if n.strip()]
    if not names:
        raise UserError("--strategies needs at least one strategy name")
    for name in names:
        try:
            if get_strategy(name).needs_bound_kernel:
                raise UserError(f"strategy {name!r} drives the live kernel's own search: it cannot be simulated")
            if get_strategy(name).needs_configs:
                raise UserError(f"strategy {name!r} only asks the configs it is given: there is no search to simulate")
        except UnknownStrategy as error:
            raise UserError(str(error.args[0])) from None
    cache = _open_read_only(args.db, args.shipped)
    try:
        record = _choose_space(cache, args)
        recorded = RecordedSpace.from_cache(cache, record.fingerprint)
    finally:
        cache.close()
    optimum = recorded.optimum_ms
    if not math.isfinite(optimum):
        raise UserError(f"space {record.fingerprint[:12]} has no successful measurement to compare against")
    console.print(f"simulating on {recorded.label}: {len(recorded.outcomes)} recorded configs "
                  f"({recorded.valid_count} valid), best {optimum:.4g} ms; space {record.fingerprint}")
    terrain = landscape(recorded)
    console.print(f"the space: {terrain.describe(args.budget)}")
    console.print(ORACLE_NOTE)
    traces, summaries = _run_all(names, recorded, args, console)
    console.print(summary_table(summaries, recorded.label))
    if args.plot:
        from autotune.simulation.plot import convergence_plot

        convergence_plot(traces, optimum, f"{recorded.label}: {args.repeats} runs, budget {args.budget}",
                         Path(args.plot))
        console.print(f"plot written to {args.plot}")
    if args.json:
        payload = {"space": record.fingerprint, "label": recorded.label, "optimum_ms": optimum,
                   "recorded": len(recorded.outcomes), "valid": recorded.valid_count, "repeats": args.repeats,
                   "budget": args.budget, "seed": args.seed,
                   "landscape": {"near_optimum": terrain.near_optimum, "within": terrain.within,
                                 "runner_up_ratio": terrain.runner_up_ratio,
                                 "random_hit_chance": terrain.random_hit_chance(args.budget)},
                   "rates": {s.strategy: s.rate for s in summaries},  # simulated evaluations per wall second
                   "summaries": [summary_dict(s) for s in summaries]}
        Path(args.json).write_text(json.dumps(_finite(payload), indent=1, allow_nan=False))
        console.print(f"figures written to {args.json}")
    return 0


def _check_output(flag: str, target: str | None) -> None:
    """--plot and --json write one file into a directory that must exist (as `export-space`
    does): refused in one line before anything is read, run or created."""
    if target is None:
        return
    path = Path(target)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise UserError(f"cannot write {flag} {target}: its directory {directory} does not exist")
    if path.is_dir():
        raise UserError(f"cannot write {flag} {target}: it is a directory")


def _open_read_only(db: Path, shipped: Path | None) -> Cache:
    """What simulate reads.  It never writes: the shipped measurements named as --db (as in
    `--db data/shipped.db`) are opened read-only, like the shipped file read alone, so sqlite does not
    even open them for writing; a user's own database is read as every command reads it."""
    from autotune.store.layers import same_file
    from autotune.databases import SHIPPED_DB

    shipped_files = [p for p in (shipped, SHIPPED_DB) if p is not None]
    if any(same_file(Path(db), p) for p in shipped_files):
        return Cache._open_file(Path(db), read_only=True)
    return open_for_reading(db, shipped)


def _choose_space(cache: Cache, args: argparse.Namespace) -> SpaceRecord:
    if args.space:
        from autotune.interop.kernel_tuner_db import resolve_space

        return resolve_space(cache, args.space)
    if not args.kernel:
        raise UserError("give a kernel (with --shape) or --space FINGERPRINT")
    shape = None
    if args.shape:
        from autotune.kernels.names import parse_shape

        try:
            shape = parse_shape(args.shape)
        except ValueError as error:
            raise UserError(str(error)) from None
    from autotune.commands import recorded_kernel

    name, source = recorded_kernel(args.kernel)
    records = [r for r in cache.find_spaces(name, shape, args.dtype)
               if r.evaluations > 0 and (source is None or r.source_hash == source)]
    if not records:
        what = f"{args.kernel}" + (f" at {args.shape}" if args.shape else "") + (f" {args.dtype}" if args.dtype else "")
        raise UserError(f"no recorded measurements for {what} in {cache.path} (autotune sessions lists what is there)")
    return records[0]  # the one with the most measurements


def _run_all(names: list[str], recorded: RecordedSpace, args: argparse.Namespace,
             console: Any) -> tuple[dict[str, list[Trace]], list[StrategySummary]]:
    traces: dict[str, list[Trace]] = {}
    summaries = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        for name in names:
            task = progress.add_task(f"{name:>10}", total=args.repeats)
            runs, started, evaluations = [], time.perf_counter(), 0
            for repeat in range(args.repeats):
                try:
                    trace = simulate(name, recorded, budget=args.budget, seed=args.seed + repeat,
                                     generation_size=args.generation_size)
                except (NotSimulable, ValueError, TypeError) as error:
                    raise UserError(f"strategy {name!r}: {error}") from None
                runs.append(trace)
                evaluations += trace.evaluations
                progress.advance(task)
            seconds = max(time.perf_counter() - started, 1e-9)
            rate = evaluations / seconds
            traces[name] = runs
            summaries.append(summarise(name, runs, recorded.optimum_ms, args.budget, rate=rate))
            progress.console.print(f"{name}: {evaluations:,} simulated evaluations in {seconds:.2f} s "
                                   f"({rate:,.0f} evaluations/s)")
    return traces, summaries


def summary_table(summaries: list[StrategySummary], label: str) -> Table:
    table = Table(title=f"strategies on {label}: median [inter-quartile range] over runs")
    table.add_column("strategy")
    for threshold in THRESHOLDS:
        table.add_column(f"evals to {threshold:.0%}", justify="right")
    for threshold in THRESHOLDS:
        table.add_column(f"sim s to {threshold:.0%}", justify="right")
    table.add_column("reached 1/2/5%", justify="right")
    table.add_column("final regret", justify="right")
    table.add_column("not recorded", justify="right")
    table.add_column("evals/s", justify="right")
    for s in summaries:
        fractions = "/".join(f"{r.fraction:.0%}" for r in s.reaches)
        regret = s.final_regret
        table.add_row(s.strategy, *(r.evaluations.text() for r in s.reaches), *(r.seconds.text(1) for r in s.reaches),
                      fractions, f"{regret.median:.2%}" if math.isfinite(regret.median) else "-", str(s.not_recorded),
                      f"{s.rate:,.0f}")
    return table


def summary_dict(summary: StrategySummary) -> dict[str, Any]:
    def spread(s: Any) -> dict[str, Any]:
        return {"median": s.median, "q1": s.q1, "q3": s.q3, "count": s.count}

    return {
        "strategy": summary.strategy, "runs": summary.runs, "budget": summary.budget, "rate": summary.rate,
        "not_recorded": summary.not_recorded, "final_regret": spread(summary.final_regret),
        "optimum_ratio": spread(summary.optimum_ratio), "evaluations": spread(summary.evaluations),
        "reaches": [{"threshold": r.threshold, "fraction": r.fraction, "evaluations": spread(r.evaluations),
                     "seconds": spread(r.seconds)} for r in summary.reaches],
    }


def _finite(value: Any) -> Any:
    """The payload with NaN and infinities as null, so any JSON reader takes the file."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
