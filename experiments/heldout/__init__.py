"""The held-out experiment (issue 24): our tuning against Helion's quick autotune on shapes
declared before anything was measured on them, used by no seed rule and no recorded session.

    python -m experiments.heldout.runner --db runs/heldout.db     # on a GPU machine
    python -m experiments.heldout.report --db cache.db            # anywhere, from the recorded data
    autotune experiment run|report experiments/heldout            # the same through the protocol

Per problem: Helion quick run natively and timed from its job's start; our `cold`,
`warm-heuristic` and `warm-cache` arms, each with the strategies of `definition.STRATEGIES`; every
arm, Helion quick's included, with three seeds.  See definition.py for the shapes, arms and targets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def run(options: Any, console: Any) -> None:
    """Imported when called, so `python -m experiments.heldout.runner` runs the module once."""
    from .runner import run as run_experiment

    run_experiment(options, console)


def report(options: Any, console: Any) -> Path:
    from .report import report as write_report

    return write_report(options, console)


__all__ = ["report", "run"]
