"""Compiling ahead: the configs the next generation will probably ask for, compiled on the
compile workers that a generation's slowest compiles leave idle.

Why: a generation ends with its slowest compile, and a strategy asks for the next one only
once it has been told the whole generation, so in many generations the GPU and most compile
workers wait on one or two compiles.  The next generation mostly follows from the results
already in: a pattern walk moves to its best neighbour, a random search does not look at
results at all.  (`experiments.compile_ahead_replay` reads, from recorded runs, how often such
a wait comes and how much of the next generation a guess made then names.)

So when the GPU has nothing to time and only compiles are left, the generation asks its
`guess` (the session's copy of the strategy, told what is known and the configs still out as
failures) for the next generation and compiles those configs on the idle workers.  They are
compiled only: nothing runs on the GPU for them until a generation asks for them.  The next
generation takes over each config it asks for where it stands (compiled, still compiling, or
failed to compile) and drops the others.  A wrong guess costs only otherwise idle CPU time.

Off by default until what it saves on a GPU is measured (`experiments.bench_overhead`, and
the held-out study judges runs with it apart): `AUTOTUNE_COMPILE_AHEAD=1` turns it on.  Each
GPU session records which way it ran (`compile_ahead`), so an A/B can tell the sessions apart.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from autotune.types import Candidate, Result

COMPILE_AHEAD = os.environ.get("AUTOTUNE_COMPILE_AHEAD", "0") != "0"

# What a generation asks its guess: the results it has so far and the keys still out.
Guess = Callable[[Sequence[Result], Sequence[str]], Sequence[Candidate]]


@dataclass
class AheadJob:
    """A config compiling (or compiled) on one compile worker for a generation not yet asked."""

    candidate: Candidate
    deadline: float | None  # of its compile; None once compiled
    limit_s: float = 0.0  # the compile limit it was given, and why (for a timeout's message)
    note: str = ""
    compile_s: float | None = None
    generated: Any = None
    dropped: bool = False  # no generation wants it: the worker is freed once its compile ends

    @property
    def compiled(self) -> bool:
        return self.deadline is None


@dataclass
class Ahead:
    """The evaluator's compiles ahead, kept from one generation to the next.

    `jobs` maps a compile worker's index to the config it compiles ahead; `failed` holds the
    configs whose compile failed ahead, answered without compiling them again if asked.
    `counts`: 'guessed' (configs sent ahead), 'used' (asked for later), 'dropped' (not asked).
    """

    jobs: dict[int, AheadJob] = field(default_factory=dict)
    failed: dict[str, Result] = field(default_factory=dict)
    counts: Counter = field(default_factory=Counter)

    def holds(self, key: str) -> bool:
        return key in self.failed or any(job.candidate.key == key for job in self.jobs.values())
