"""Exhaustive search over a declared sub-space, in a stable order."""

from __future__ import annotations

from typing import Any, Sequence

from autotune.strategies.base import Strategy
from autotune.types import Params
from search_spaces.space import SearchSpace, iter_grid


class GridTooLarge(ValueError):
    """The grid has more points than the budget allows (and sampling was not asked for)."""


class GridSearch(Strategy):
    """The full product of `names` (default: every parameter), others at their default.

    The order is the product's lexicographic order over the parameters' listed values,
    so it is the same on every machine.  With `budget` smaller than the grid it refuses,
    unless `sample=True`, in which case it visits a seeded random subset of the grid.
    """

    name = "grid"
    generation_size = 32

    def __init__(self, space: SearchSpace, seed: int = 0, *, names: Sequence[str] | None = None,
                 budget: int | None = None, sample: bool = False, **options: Any) -> None:
        super().__init__(space, seed, **options)
        self.names = list(names) if names else space.names
        unknown = [n for n in self.names if n not in space.names]
        if unknown:
            raise ValueError(f"grid over unknown parameter(s): {', '.join(unknown)}")
        self.points = list(iter_grid(space, self.names))
        if budget is not None and len(self.points) > budget:
            if not sample:
                raise GridTooLarge(
                    f"the grid over {', '.join(self.names)} has {len(self.points)} configs, more than the budget of "
                    f"{budget}; raise the budget or ask to sample it"
                )
            chosen = sorted(self.rng.sample(range(len(self.points)), budget))
            self.points = [self.points[i] for i in chosen]
        self._next = 0

    def ask(self, n: int) -> list[Params]:
        batch: list[Params] = []
        while len(batch) < n and self._next < len(self.points):
            point = self.points[self._next]
            self._next += 1
            if not self.was_asked(point):
                self.mark_asked(point)
                batch.append(point)
        return batch
