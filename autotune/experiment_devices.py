"""Which GPU's sessions an experiment reads, and on which GPU a run records.

Why: a kernel's times belong to the GPU that measured them.  A database may hold a study's
sessions from several GPUs (the shipped data and a user's own runs on another card), and a
study that took the latest session of each job whatever its device would compare one GPU's
times with another's, or skip a job on a new GPU because another GPU had run it.  So a study's
runner records and skips by its own GPU's sessions, and its report reads one device, named or
chosen here.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping

from autotune.errors import UserError

# The GPU the shipped cache.db's study sessions were recorded on, as sessions name it.
SHIPPED_DEVICE = "NVIDIA H100 80GB HBM3"


def device_to_read(recorded: Mapping[str, int], wanted: str | None, default: str = SHIPPED_DEVICE,
                   study: str = "study") -> str:
    """The device whose sessions to read: `wanted` when it recorded any; with none wanted, the only
    device recorded, or `default` among several.  Refused where the choice is not the data's."""
    named = ", ".join(f"{name} ({n} sessions)" for name, n in sorted(recorded.items(), key=lambda kv: -kv[1]))
    if wanted is not None:
        if wanted not in recorded:
            raise UserError(f"no {study} session was recorded on {wanted!r} (recorded on: {named or 'none'})")
        return wanted
    if len(recorded) == 1:
        return next(iter(recorded))
    if default in recorded:
        return default
    raise UserError(f"the {study} sessions were recorded on several devices ({named}): name one with --device")


def on_one_device(sessions: Iterable[dict[str, Any]], wanted: str | None, default: str = SHIPPED_DEVICE,
                  study: str = "study") -> tuple[str | None, list[dict[str, Any]]]:
    """The device to read among the devices `sessions` were recorded on (`device_to_read`) and
    those of the sessions recorded on it, in their order; (`wanted`, []) where there are none."""
    sessions = list(sessions)
    if not sessions:
        return wanted, []
    device = device_to_read(Counter(s["device"] for s in sessions), wanted, default, study)
    return device, [s for s in sessions if s["device"] == device]


def recording_gpu(named: str | None = None) -> str:
    """The GPU this machine records on; `named` (a `--device`), where given, must be it."""
    from autotune.device import device_name

    found = device_name(0)
    if named is not None and named != found:
        raise UserError(f"--device {named!r}: this machine's GPU is {found!r}")
    return found


def report_device(named: str | None, measured_here: bool) -> str | None:
    """The GPU a report reads: `named` (a `--device`), else this machine's where the command has
    just measured on it, else None (the data decides: `device_to_read`)."""
    return named or (recording_gpu() if measured_here else None)


def slug(device: str) -> str:
    """A folder name for a device's report: 'NVIDIA H200' -> 'nvidia-h200'."""
    return "-".join("".join(c if c.isalnum() else " " for c in device.lower()).split())


def report_folder(folder: Path, device: str | None) -> Path:
    """An experiment's default report folder for `device`'s sessions: FOLDER/report for the
    shipped data's GPU (or none named), FOLDER/report-<device> for another, so a report of a
    user's GPU never overwrites the shipped one."""
    return folder / report_stem("report", device)


def report_stem(name: str, device: str | None) -> str:
    """A one-file report's name for `device`'s sessions: NAME for the shipped data's GPU (or none),
    NAME-<device> for another, for the same reason as `report_folder`."""
    return name if device in (None, SHIPPED_DEVICE) else f"{name}-{slug(device)}"
