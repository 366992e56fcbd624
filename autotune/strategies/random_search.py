"""Uniform random search over the valid space."""

from __future__ import annotations

from typing import Any, Sequence

from autotune.strategies.base import Observation, Strategy
from autotune.types import Params
from search_spaces.space import SearchSpace

MAX_DRAWS_PER_POINT = 200


class RandomSearch(Strategy):
    """Draws points uniformly (constraints by rejection) and never repeats one.

    On a finite space (a recorded one) it walks a seeded permutation of the listed points
    instead: uniform without replacement, with no wasted draws, so simulations stay fast.
    """

    name = "random"

    def __init__(self, space: SearchSpace, seed: int = 0, **options: Any) -> None:
        super().__init__(space, seed, **options)
        self._order: list[int] | None = None
        self._next = 0

    def ask(self, n: int) -> list[Params]:
        if self.space.members is not None:
            return self._ask_finite(n)
        batch: list[Params] = []
        for _ in range(n):
            for _attempt in range(MAX_DRAWS_PER_POINT):
                params = self.space.sample(self.rng)
                if not self.was_asked(params):
                    self.mark_asked(params)
                    batch.append(params)
                    break
            else:
                break  # the space looks exhausted
        return batch

    def tell(self, observations: Sequence[Observation]) -> None:
        """Every point told was marked when it was asked: no key to compute (simulations call this
        hundreds of thousands of times)."""
        self.history.extend(observations)

    def warm_start(self, observations: Sequence[Observation]) -> None:
        """Seeds were not asked by this strategy: mark them, so they are not drawn again."""
        super().tell(observations)

    def _ask_finite(self, n: int) -> list[Params]:
        members, keys = self.space.members, self.space.member_keys
        assert members is not None
        if self._order is None:
            self._order = list(range(len(members)))
            self.rng.shuffle(self._order)
        batch: list[Params] = []
        while len(batch) < n and self._next < len(self._order):
            index = self._order[self._next]
            self._next += 1
            if keys[index] not in self._asked:
                self._asked.add(keys[index])
                batch.append(dict(members[index]))
        return batch
