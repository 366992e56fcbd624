"""The report's sections on runs that no figure reads: those that did not finish, and earlier
runs recorded again under the same key.  Listed so that no failure or repeat is hidden."""

from __future__ import annotations

from typing import Collection, Sequence

from .analysis import us_text
from .data import Key, Run, Unfinished


def unfinished_section(unfinished: Sequence[Unfinished], finished: Collection[Key]) -> list[str]:
    """The runs that did not finish (failed, interrupted, never ended), each with whether a run of
    the same key is among the `finished` since.  None of them is in any figure; the runner plans
    each again until it finishes."""
    if not unfinished:
        return []
    rows = [f"| {u.problem.label} | {u.arm} {u.strategy} | {u.seed} | {u.session_id} | "
            f"{'-' if u.after_s is None else f'{u.after_s:.0f}'} | {_helion_so_far(u)} | "
            f"{u.reason.replace('|', '/')} | {'yes' if u.key in finished else 'not yet'} |" for u in unfinished]
    return ["## Runs that did not finish", "",
            "A Helion quick run that failed or was interrupted is recorded with why, when, the configs its search "
            "had logged (the fastest in Helion's own timer, not re-timed) and, where its search finished, its "
            "pick; our arms' sessions record what they measured and how they ended; a session that never ended "
            "was stopped from outside. None of them is in any figure above, and the runner runs each again "
            "until it finishes (**finished since**).", "",
            "| problem | arm and strategy | seed | session | s to the stop | Helion's configs, fastest µs | why "
            "| finished since |",
            "|---|---|---:|---:|---:|---|---|---|", *rows, ""]


def _helion_so_far(u: Unfinished) -> str:
    if u.helion_configs is None:
        return "-"
    return f"{u.helion_configs}, {us_text(u.helion_best_ms)}"


def superseded_section(again: Sequence[tuple[Run, int]]) -> list[str]:
    """Finished runs recorded again under the same key: the latest stands in every figure, and the
    earlier ones are listed here with their own figures, so that a repeat never hides a result."""
    if not again:
        return []
    rows = [f"| {run.problem.label} | {run.arm} {run.strategy} | {run.seed} | {run.session_id} | "
            f"{us_text(run.final_ms)} | "
            f"{'-' if run.wall_s is None else f'{run.wall_s:.0f}'} | {by} |" for run, by in again]
    return ["## Runs recorded again", "",
            "A run recorded again under the same arm, strategy and seed (a repeated command) stands in every "
            "figure by its latest session; each earlier one is listed here with its own final time and wall time.",
            "", "| problem | arm and strategy | seed | session | final µs | wall s | stands instead |",
            "|---|---|---:|---:|---:|---:|---:|", *rows, ""]
