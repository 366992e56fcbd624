"""Exhaustive search over a declared sub-space, in a stable order."""

from __future__ import annotations

import math
from typing import Any, Sequence

from autotune.strategies.base import Strategy
from autotune.types import Params
from search_spaces.space import SearchSpace, iter_grid


# Grids up to this many combinations are listed in full; larger ones are only sampled.
MAX_ENUMERATED = 1_000_000


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
        axes = [space.parameter(n).values() for n in self.names]
        combinations = math.prod(len(a) for a in axes)
        if combinations <= MAX_ENUMERATED or space.members is not None:
            self.points = list(iter_grid(space, self.names))
            if budget is not None and len(self.points) > budget:
                if not sample:
                    raise GridTooLarge(self._too_large(len(self.points), budget))
                chosen = sorted(self.rng.sample(range(len(self.points)), budget))
                self.points = [self.points[i] for i in chosen]
        else:  # too many to list: refuse, or draw points by their index in the product order
            if not sample or budget is None:
                raise GridTooLarge(self._too_large(combinations, budget))
            self.points = self._sample_product(axes, combinations, budget)
        self._next = 0

    @classmethod
    def from_task(cls, task: Any, seed: int = 0, budget: int | None = None, **options: Any) -> "GridSearch":
        return cls(task.space, seed=seed, budget=budget, **options)

    def _too_large(self, size: int, budget: int | None) -> str:
        limit = f"the budget of {budget}" if budget is not None else f"{MAX_ENUMERATED} (with no budget)"
        return (f"the grid over {', '.join(self.names)} has {size} configs, more than {limit}; "
                f"raise the budget, grid over fewer parameters, or ask to sample it")

    def _sample_product(self, axes: list[list[Any]], combinations: int, budget: int) -> list[Params]:
        chosen: dict[int, Params] = {}
        for _ in range(budget * 50):
            if len(chosen) >= budget:
                break
            index = self.rng.randrange(combinations)
            if index in chosen:
                continue
            values, rest = [], index
            for axis in reversed(axes):
                rest, digit = divmod(rest, len(axis))
                values.append(axis[digit])
            point = {**self.space.default, **dict(zip(self.names, reversed(values)))}
            if not self.space.violations(point):
                chosen[index] = self.space.ordered(point)
        return [chosen[i] for i in sorted(chosen)]

    def ask(self, n: int) -> list[Params]:
        batch: list[Params] = []
        while len(batch) < n and self._next < len(self.points):
            point = self.points[self._next]
            self._next += 1
            if not self.was_asked(point):
                self.mark_asked(point)
                batch.append(point)
        return batch
