"""`runner --until-missed` and `--until-decided`: start no run whose verdict is already decided.
With `--until-missed`, no run of a series (one arm and strategy label) once its time target is
missed at a shape; with `--until-decided`, also no further seed of a series at a shape where
most of the study's seeds already met it there.

Why: a time target is met only if it is met at every shape, each judged on the median over the
seeds.  Once most of a shape's planned seeds have missed (not within `definition.WITHIN` of
Helion quick in the time the target allows), the median misses too, and so does the series,
whatever its other runs find.  Every further run of it would spend device time on a verdict
already decided.  Likewise, once most of a shape's seeds met it, the median meets it whatever
the others find: a further seed there changes no verdict (its figures would only make the
shape's medians and ranges rest on more runs; the report says how many runs each rests on).
This is pruning, as a study of many trials wants it: each finished run is read back and
checked, and no run whose verdict is decided starts after that.  Runs recorded before the
command count too, so a continued series stops as soon as it is decided.  A run whose figures
are wanted for their own sake (the tooling comparison, say) is the user's to ask for without
the flags.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from . import definition as d
from .data import Run, came_in_time, read_session_run
from .definition import Problem
from .jobs import ArmJob
from .limits import TargetLimit

Series = tuple[str, str]  # (arm, strategy label)


@dataclass
class VerdictGate:
    """Which series have missed their time target at a shape (and, with `skip_met`, at which
    shapes a series has met it), from the runs read so far.

    `limits`: each (problem, arm)'s time target (`limits.target_limits`); a problem without one
    (a matmul cell, or no Helion quick run yet) decides nothing.  `seeds`: how many seeds the study
    judges a shape on (`definition.SEEDS`); a series has missed (met) where more than half of them
    missed (met)."""

    limits: Mapping[tuple[Problem, str], TargetLimit]
    seeds: int
    db: Path | None = None
    shipped: Path | None = None
    skip_met: bool = False
    missed: dict[tuple[Problem, str, str], set[int]] = field(default_factory=dict)  # seeds that missed
    met: dict[tuple[Problem, str, str], set[int]] = field(default_factory=dict)  # seeds in time
    decided: dict[Series, Problem] = field(default_factory=dict)  # series -> the shape it missed at

    def read(self, runs: Iterable[Run]) -> None:
        """Count the runs' misses (the runs recorded before, or one just finished)."""
        for run in runs:
            limit = self.limits.get((run.problem, run.arm))
            if run.arm not in d.OUR_ARMS or limit is None or limit.reference_ms is None:
                continue
            if came_in_time(run, limit.reference_ms, limit.allowed_s):
                self.met.setdefault((run.problem, run.arm, run.strategy), set()).add(run.seed)
                continue
            seeds = self.missed.setdefault((run.problem, run.arm, run.strategy), set())
            seeds.add(run.seed)
            if d.most_of(len(seeds), self.seeds):
                self.decided.setdefault((run.arm, run.strategy), run.problem)

    def skip_reason(self, job: Any) -> str | None:
        """Why the job is not started (its series already missed, or met at its shape), else None."""
        if not isinstance(job, ArmJob):
            return None
        where = self.decided.get((job.arm, job.label))
        if where is None:
            met = self.met.get((job.problem, job.arm, job.label), set())
            if self.skip_met and d.most_of(len(met), self.seeds):
                return (f"{job.arm} {job.label} already met its time target at {job.problem.shape} ({len(met)} of "
                        f"{self.seeds} seeds within it)")
            return None
        misses = len(self.missed[(where, job.arm, job.label)])
        return (f"{job.arm} {job.label} already missed its time target at {where.shape} ({misses} of {self.seeds} "
                "seeds not within it)")

    def finished(self, job: Any, outcome: Any) -> None:
        """After a job: read its run back and count it (execute_jobs' hook)."""
        if isinstance(job, ArmJob) and isinstance(outcome, dict) and "session" in outcome and self.db is not None:
            run = read_session_run(self.db, self.shipped, outcome["session"])
            if run is not None:
                self.read([run])
