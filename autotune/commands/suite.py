"""`autotune suite run|report`: Helion's own example kernels, tuned and compared on GPUs.

    autotune suite run --examples DIR [--kernels a,b] [--gpus 0,1] [--seconds 20] [--out DIR]
    autotune suite report [--out DIR]

`run` measures, for every kernel of `experiments/helion_suite/manifest.py` at each of its GPU
shapes: Helion's default config, our default strategy cold for `--seconds`, Helion's quick
autotune natively, torch eager and torch.compile (each arm in its own process, timed from its
start); it appends each to OUT/results.jsonl as it ends and skips what is already there, so a
cut run is continued by running it again.  `report` writes OUT/README.md and its plot from that
file alone.  DIR is a checkout of Helion's `examples/` folder.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from autotune.errors import UserError

NAME = "suite"
DEFAULT_OUT = Path("experiments/helion_suite/report/gpu")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(NAME, help="Helion's example kernels: default, ours, Helion quick, torch, "
                                              "torch.compile on GPUs (run), and their report (report)")
    actions = parser.add_subparsers(dest="suite_action", required=True)
    run = actions.add_parser("run", help="measure every kernel x shape x arm not yet recorded")
    run.add_argument("--examples", required=True, help="a checkout of Helion's examples/ folder")
    run.add_argument("--kernels", default=None, help="comma-separated suite kernels (default: all)")
    run.add_argument("--arms", default=None, help="comma-separated arms (default: all)")
    run.add_argument("--gpus", default="0", help="GPU indices to run arms on side by side, e.g. 0,1")
    run.add_argument("--seconds", type=float, default=20.0, help="our search time per cell (default 20)")
    run.add_argument("--retry-failed", action="store_true", help="run failed and timed-out arms again")
    run.add_argument("--out", type=Path, default=DEFAULT_OUT)
    report = actions.add_parser("report", help="regenerate README.md and its plot from results.jsonl")
    report.add_argument("--out", type=Path, default=DEFAULT_OUT)


def run(args: argparse.Namespace, console: Console) -> int:
    if args.suite_action == "report":
        return _report(args, console)
    from experiments.helion_suite.manifest import select
    from experiments.helion_suite.runner import Results, plan, run_jobs, subprocess_execute

    examples = Path(args.examples).expanduser()
    if not examples.is_dir():
        raise UserError(f"no folder {examples}: --examples is a checkout of Helion's examples/")
    if not args.seconds > 0:
        raise UserError("--seconds must be positive")
    gpus = [g.strip() for g in args.gpus.split(",") if g.strip()]
    if not gpus or not all(g.isdigit() for g in gpus):
        raise UserError(f"--gpus {args.gpus!r} is not a comma-separated list of GPU indices")
    try:
        kernels = select(args.kernels)
        jobs = plan(kernels, [a.strip() for a in args.arms.split(",")] if args.arms else _all_arms())
    except ValueError as error:
        raise UserError(str(error)) from None
    missing = [k.file for k in kernels if not (examples / k.file).is_file()]
    if missing:
        raise UserError(f"{examples} lacks {', '.join(missing)}: --examples is a checkout of Helion's examples/")
    from autotune.device import gpu_available

    if not gpu_available():
        raise UserError("suite run measures on GPUs and this machine has none (`autotune suite report` needs none)")
    out = args.out
    run_jobs(jobs, Results(out / "results.jsonl"), gpus, subprocess_execute(examples.resolve(), args.seconds,
                                                                                out.resolve() / "work"),
             seconds=args.seconds, retry_failed=args.retry_failed, say=console.print)
    return _report(args, console)


def _all_arms() -> tuple[str, ...]:
    from experiments.helion_suite.arms import ARMS

    return ARMS


def _report(args: argparse.Namespace, console: Console) -> int:
    from experiments.helion_suite.report import write_report

    results = args.out / "results.jsonl"
    if not results.exists():
        raise UserError(f"no {results}: run `autotune suite run --examples DIR` first")
    console.print(f"wrote {write_report(results, args.out)}")
    return 0
