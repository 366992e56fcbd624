"""The strategy interface: ask for a generation of configs, tell the results.

A strategy never runs anything itself: the session asks it for points of the space,
evaluates them (or answers them from the cache) and tells it what happened.  That keeps
every strategy resumable (its state is rebuilt by telling it the recorded results again)
and lets a GPU run and a replay share one loop.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Sequence

from autotune.types import Params, Result
from search_spaces.space import SearchSpace, params_key

Observation = tuple[Params, Result]


class Strategy(ABC):
    """Base class of every search strategy.

    Subclasses implement `ask`; `tell` records observations in `self.history` and may be
    extended.  All randomness must come from `self.rng` so a seed fixes the run.
    """

    name: ClassVar[str] = "abstract"
    #: Default number of configs per generation (one `ask`).
    generation_size: ClassVar[int] = 16
    #: True when the strategy keeps proposing until the space is exhausted (random, grid,
    #: model-based); False when it stops once it has converged (pattern searches).
    exhaustive: ClassVar[bool] = True
    #: True when it needs the kernel bound on this machine (Helion's own searches).
    needs_bound_kernel: ClassVar[bool] = False
    #: True when it proposes only the configs it is given (`configs=`): it has no points of its own.
    needs_configs: ClassVar[bool] = False
    #: True when a deep copy of it, told a generation's results, asks what it would ask next: an
    #: evaluator may then compile that ahead (autotune/next_generation.py).  False for those
    #: whose search a copy cannot take along (Helion's own, running in its thread).
    guessable: ClassVar[bool] = True

    def __init__(self, space: SearchSpace, seed: int = 0, **options: Any) -> None:
        if options:
            raise TypeError(f"strategy {self.name!r} takes no option(s) {', '.join(sorted(options))}")
        self.space = space
        self.seed = seed
        self.rng = random.Random(seed)
        self.history: list[Observation] = []
        self._asked: set[str] = set()

    @classmethod
    def from_task(cls, task: Any, seed: int = 0, budget: int | None = None, **options: Any) -> "Strategy":
        """Build for a tuning task (`autotune.task.TuningTask`).

        The default uses only the task's space; strategies that need more (the budget,
        the bound kernel) override this.
        """
        return cls(task.space, seed=seed, **options)

    @abstractmethod
    def ask(self, n: int) -> list[Params]:
        """Up to `n` new points; an empty list means the strategy has nothing more to try."""

    def tell(self, observations: Sequence[Observation]) -> None:
        """Results for points asked (or seeds evaluated before the strategy's own proposals)."""
        for params, _result in observations:
            self._asked.add(params_key(params))
        self.history.extend(observations)

    def warm_start(self, observations: Sequence[Observation]) -> None:
        """Results known before the search (default config, seeds, cache); same as tell by default."""
        self.tell(observations)

    # -- helpers for subclasses --------------------------------------------------------
    def was_asked(self, params: Params) -> bool:
        return params_key(params) in self._asked

    def mark_asked(self, params: Params) -> None:
        self._asked.add(params_key(params))

    def best(self) -> Observation | None:
        ok = [o for o in self.history if o[1].ok]
        return min(ok, key=lambda o: o[1].objective) if ok else None
