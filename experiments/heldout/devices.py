"""Which GPU's runs a figure of the study reads.

Why: the targets compare our runs with Helion quick's at each shape, and a kernel's times (and
so Helion quick's final time and every run's time to it) belong to the GPU they were measured
on.  A database that holds the study's runs on two GPUs (the shipped H100 runs and a user's own,
say) is read one device at a time: the runner plans, limits and gates a GPU's runs by that GPU's
runs alone, and the report is written per device.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from autotune.databases import open_for_reading
from autotune.errors import UserError
from autotune.experiment import ExperimentOptions

from . import definition as d
from .data import study_sessions


def study_devices(db: Path, shipped: Path | None) -> Counter[str]:
    """How many of the study's sessions each device recorded in `db` and the shipped data."""
    if not db.exists() and (shipped is None or not shipped.exists()):
        return Counter()
    cache = open_for_reading(db, shipped)
    try:
        return Counter(session["device"] for session, _ in study_sessions(cache))
    finally:
        cache.close()


def device_to_read(recorded: Counter[str], wanted: str | None) -> str:
    """The device whose runs to read: `wanted` when it recorded any; with none wanted, the only
    device recorded, or the study's own (definition.DEVICE) among several.  Refused when the
    choice is not the data's to make."""
    named = ", ".join(f"{name} ({n} sessions)" for name, n in recorded.most_common()) or "none"
    if wanted is not None:
        if wanted not in recorded:
            raise UserError(f"no {d.STUDY} session was recorded on {wanted!r} (recorded on: {named})")
        return wanted
    if len(recorded) == 1:
        return next(iter(recorded))
    if d.DEVICE in recorded:
        return d.DEVICE
    raise UserError(f"the {d.STUDY} sessions were recorded on several devices ({named}): name one with --device")


def slug(device: str) -> str:
    """A folder name for a device's report: 'NVIDIA H200' -> 'nvidia-h200'."""
    return "-".join("".join(c if c.isalnum() else " " for c in device.lower()).split())


def device_lines(device: str | None, recorded: Counter[str]) -> list[str]:
    """The report's paragraph on the GPU its runs were recorded on, and the others kept apart."""
    if device is None:
        return []
    others = [f"{name} ({n} sessions)" for name, n in recorded.most_common() if name != device]
    line = (f"Every run in this report, Helion quick's and ours, was recorded on {device}: each ratio and "
            "time target compares one GPU's times.")
    if others:
        line += (" The study's sessions on " + ", ".join(others) + " are reported apart "
                 "(`python -m experiments.heldout.report --device NAME`).")
    return [line, ""]



def report_folder(options: ExperimentOptions, device: str | None) -> Path:
    """Where a report of `device`'s runs is written: `options.out`, except that the study's default
    folder (report/, the shipped device's report) becomes report-<device>/ for another GPU."""
    if device in (None, d.DEVICE) or options.out != options.folder / "report":
        return options.out
    return options.folder / f"report-{slug(device)}"
