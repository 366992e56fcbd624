"""`autotune experiment run|report FOLDER`: reproducible experiments (see autotune.experiment).

    autotune experiment run experiments/softmax_study --dtype float16      # GPU machine
    autotune experiment report experiments/softmax_study                   # anywhere, from the shipped data
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from autotune.databases import add_arguments as add_database_arguments
from autotune.errors import UserError
from autotune.device import gpu_available
from autotune.experiment import DeadlineReached, ExperimentOptions, load_experiment
from autotune.experiment_devices import recording_gpu, report_folder

NAME = "experiment"
EXIT_DEADLINE = 75  # EX_TEMPFAIL: not finished, run the same command again to continue


def add_parser(subparsers: Any) -> None:
    from autotune.cli import positive_float, positive_int

    sub = subparsers.add_parser(NAME, help="run an experiment on a GPU machine, or regenerate its report anywhere")
    actions = sub.add_subparsers(dest="action", parser_class=type(sub))
    for action, text in (("run", "measure every job of the experiment and record it, then write the report"),
                         ("report", "regenerate the report from the database alone (no GPU needed)")):
        parser = actions.add_parser(action, help=text)
        parser.add_argument("folder", help="the experiment's folder, e.g. experiments/softmax_study")
        parser.add_argument("--dtype", default="float16")
        add_database_arguments(parser, writes=action == "run")
        parser.add_argument("--out", default=None, help="report folder (default: FOLDER/report)")
        parser.add_argument("--shapes", default="", help="comma-separated subset of the experiment's shapes")
        if action == "report":
            parser.add_argument("--device", default=None,
                                help="the GPU whose runs to report, as sessions name it, for an experiment recorded "
                                     "on several (default: the experiment's choice)")
        if action == "run":
            parser.add_argument("--budget", type=positive_int, default=None, help="configs per tuning session")
            parser.add_argument("--seconds", type=positive_float, default=None, help="wall clock per tuning session")
            parser.add_argument("--workers", default=None,
                                help="spread whole jobs over a Dask cluster: local-gpus or a scheduler address")
            parser.add_argument("--again", action="store_true", help="run jobs that are already recorded again")
            parser.add_argument("--deadline", type=positive_float, default=None, metavar="SECONDS",
                                help="wall clock for the whole run: no job starts after it (nor one expected to "
                                     "run past it), the job running then "
                                     "is interrupted (what it measured is recorded; the same command runs what is "
                                     "left); exit status 75")
            parser.add_argument("--methods", default="",
                                help="comma-separated subset of the experiment's methods to run, "
                                     "e.g. 'tuned softmax,helion-quick' (default: all)")


def _listed(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())


def run(args: argparse.Namespace, console: Any) -> int:
    started = time.monotonic()
    if not args.action:
        raise UserError("experiment needs an action: run or report")
    deadline = getattr(args, "deadline", None)
    experiment = load_experiment(args.folder)
    folder = Path(args.folder)
    device = getattr(args, "device", None)
    out_for = (lambda device: Path(args.out) if args.out else report_folder(folder, device))  # noqa: E731
    options = ExperimentOptions(
        folder=folder, db=Path(args.db), shipped=args.shipped, out=out_for(device),
        dtype=args.dtype,
        shapes=_listed(args.shapes), methods=_listed(getattr(args, "methods", "")),
        budget=getattr(args, "budget", None), seconds=getattr(args, "seconds", None),
        workers=getattr(args, "workers", None), again=getattr(args, "again", False),
        deadline_at=started + deadline if deadline is not None else None, device=device,
    )
    status = 0
    if args.action == "run":
        try:
            experiment.run(options, console)
        except DeadlineReached as reached:  # what finished is recorded; the report shows it
            print(f"autotune: {reached}", file=sys.stderr)
            status = EXIT_DEADLINE
        if gpu_available():  # the report of a run reads the GPU it measured on
            device = recording_gpu()
            options = replace(options, device=device, out=out_for(device))
    try:
        path = experiment.report(options, console)
    except UserError as nothing_to_report:
        if status != EXIT_DEADLINE:
            raise
        # Cut short before any selected job finished: the deadline, not the report, is the news.
        print(f"autotune: no report: {nothing_to_report}", file=sys.stderr)
        return status
    console.print(f"report written to {path}")
    return status
