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

from autotune import experiment_devices
from autotune.databases import open_for_reading
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
    """The device whose runs to read (autotune.experiment_devices): `wanted`, else the only one
    recorded, else the study's own (definition.DEVICE) among several."""
    return experiment_devices.device_to_read(recorded, wanted, d.DEVICE, d.STUDY)


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
    if options.out != options.folder / "report":
        return options.out
    return experiment_devices.report_folder(options.folder, device)
