"""Uniform random search over the valid space (or over the part of it a screen lets through)."""

from __future__ import annotations

import functools
import random
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
            self._order = shuffled_range(self.rng, len(members))
        order, asked, screen = self._order, self._asked, self.screen
        batch: list[Params] = []
        position, end = self._next, len(order)
        while len(batch) < n and position < end:
            index = order[position]
            position += 1
            key = keys[index]
            if key not in asked and (screen is None or self._passes(members[index])):
                asked.add(key)
                batch.append(dict(members[index]))
        self._next = position
        return batch

    def _passes(self, params: Params) -> bool:
        if self.screen is None or self.screen.passes(params):
            return True
        self.screened += 1
        return False


def shuffled_range(rng: random.Random, n: int) -> list[int]:
    """`list(range(n))` shuffled exactly as `rng.shuffle` would, about 1.6 times as fast.

    Why: a simulated run of 200 evaluations on a recorded space of 3,000 points spent half of
    its time in `random.shuffle`'s per-element method calls.  `_walk` is the same Fisher-Yates
    walk with the same draws (`getrandbits` of the bound's bit length, rejecting values past
    it), so a seed proposes the same points as before; where this Python's `shuffle` draws
    differently (checked once per process), `rng.shuffle` itself is used.
    """
    if _same_as_shuffle():
        return _walk(rng, n)
    order = list(range(n))
    rng.shuffle(order)
    return order


def _walk(rng: random.Random, n: int) -> list[int]:
    order = list(range(n))
    getrandbits = rng.getrandbits
    i = n - 1
    while i > 0:
        bits = (i + 1).bit_length()
        low = (1 << (bits - 1)) - 1  # every i down to here draws `bits` bits
        while i >= low and i > 0:
            bound = i + 1
            j = getrandbits(bits)
            while j >= bound:
                j = getrandbits(bits)
            order[i], order[j] = order[j], order[i]
            i -= 1
    return order


@functools.lru_cache(maxsize=1)
def _same_as_shuffle() -> bool:
    for seed, n in ((0, 0), (1, 1), (2, 2), (3, 3), (4, 17), (5, 1000)):
        expected = list(range(n))
        random.Random(seed).shuffle(expected)
        if _walk(random.Random(seed), n) != expected:
            return False
    return True
