"""Uniform random search over the valid space (or over the part of it a screen lets through)."""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence

from autotune.strategies.base import Observation, Strategy
from autotune.types import Params
from search_spaces.space import SearchSpace

MAX_DRAWS_PER_POINT = 200


class Screen(Protocol):
    """Says whether a point is worth measuring (`heuristics.screen.FootprintScreen` is one)."""

    def passes(self, params: Mapping[str, Any]) -> bool: ...


class RandomSearch(Strategy):
    """Draws points uniformly (constraints by rejection) and never repeats one.

    On a finite space (a recorded one) it walks a seeded permutation of the listed points
    instead: uniform without replacement, with no wasted draws, so simulations stay fast.

    With a screen (`--option screen=footprint`, see `heuristics.screen`) a drawn point the
    screen rejects is never proposed: the sample is uniform over the points the screen lets
    through, and `screened` counts the rejected draws.
    """

    name = "random"

    def __init__(self, space: SearchSpace, seed: int = 0, *, screen: Screen | None = None, **options: Any) -> None:
        super().__init__(space, seed, **options)
        self._order: list[int] | None = None
        self._next = 0
        self.screen = screen
        self.screened = 0

    @classmethod
    def from_task(cls, task: Any, seed: int = 0, budget: int | None = None, *, screen: str | None = None,
                  **options: Any) -> "RandomSearch":
        """`screen` names a screen of `heuristics.screen`, built from the task's kernel facts."""
        if screen is None:
            return cls(task.space, seed=seed, **options)
        from heuristics.screen import screen_for_task

        return cls(task.space, seed=seed, screen=screen_for_task(str(screen), task), **options)

    def ask(self, n: int) -> list[Params]:
        if self.space.members is not None:
            return self._ask_finite(n)
        batch: list[Params] = []
        for _ in range(n):
            for _attempt in range(MAX_DRAWS_PER_POINT):
                params = self.space.sample(self.rng)
                if not self._passes(params):
                    continue
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
            if keys[index] not in self._asked and self._passes(members[index]):
                self._asked.add(keys[index])
                batch.append(dict(members[index]))
        return batch

    def _passes(self, params: Params) -> bool:
        if self.screen is None or self.screen.passes(params):
            return True
        self.screened += 1
        return False
