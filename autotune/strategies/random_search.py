"""Uniform random search over the valid space."""

from __future__ import annotations

from autotune.strategies.base import Strategy
from autotune.types import Params

MAX_DRAWS_PER_POINT = 200


class RandomSearch(Strategy):
    """Draws points uniformly (constraints by rejection) and never repeats one."""

    name = "random"

    def ask(self, n: int) -> list[Params]:
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
