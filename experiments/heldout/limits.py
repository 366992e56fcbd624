"""Search limits read from the targets (`runner --seconds target`).

A time target judges a run by when it came within 2% of Helion quick, counted from the job's
start, so what a run finds after the time its target allows changes no verdict, and device time
spent past it buys only a later final time.  With `--seconds target` each run of ours is given
that time: its arm's share of Helion quick's recorded median wall time at its shape, less the
shortest set-up (job start to the session's start, where the search limit starts counting) of
any recorded run of ours at the kernel.  A run whose set-up is at least that long still searches
until its allowed time has passed since its job started; one whose set-up is shorter is stopped
a little before, which can only count against it.

Where the problem has no time target (a matmul cell) or no Helion quick run is recorded at its
shape yet, the plan's number of seconds stands.  A limit so read moves when more Helion quick
runs are recorded (its median moves); each run records the limit it was given, and the report
shows it (`search limit s`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Sequence

from . import definition as d
from .definition import Problem

if TYPE_CHECKING:
    from .data import Run

TARGET = "target"  # `--seconds target`
SHORTEST_LIMIT_S = 1.0  # never less: a search needs time to measure anything at all


@dataclass(frozen=True)
class TargetLimit:
    """One arm's search limit at one problem, and what it was read from."""

    seconds: float
    allowed_s: float  # the time the arm's target allows from the job's start
    set_up_s: float  # the shortest set-up recorded for our arms at the kernel (0: none recorded)
    reference_ms: float | None = None  # Helion quick's median final time there: a run meets it within WITHIN


def parse_seconds(text: str) -> float | str:
    """`--seconds`: a positive number, or 'target'."""
    if text.strip().lower() == TARGET:
        return TARGET
    try:
        seconds = float(text)
    except ValueError:
        raise ValueError(f"--seconds takes a number of seconds or '{TARGET}', not {text!r}") from None
    if not seconds > 0:
        raise ValueError(f"--seconds must be positive, got {text}")
    return seconds


def shortest_set_up(runs: Iterable[Run], kernel: str) -> float:
    """The shortest set-up any finished run of our arms at `kernel` took (0 where none did)."""
    times = [r.setup_s for r in runs if r.arm in d.OUR_ARMS and r.problem.kernel == kernel and r.setup_s is not None]
    return max(0.0, min(times, default=0.0))


def target_limits(runs: Sequence[Run], problems: Sequence[Problem], arms: Sequence[str]
                  ) -> dict[tuple[Problem, str], TargetLimit]:
    """Each (problem, our arm) with a time target and a Helion quick reference: its search limit."""
    from .analysis import allowed_s, summarise

    limits = {}
    for summary in summarise(runs, problems):
        floor = shortest_set_up(runs, summary.problem.kernel)
        for arm in (a for a in arms if a in d.OUR_ARMS):
            allowed = allowed_s(summary, arm)
            if allowed is not None:
                limits[(summary.problem, arm)] = TargetLimit(max(SHORTEST_LIMIT_S, allowed - floor), allowed, floor,
                                                             summary.helion_ms)
    return limits
