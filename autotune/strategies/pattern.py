"""Pattern search in the manner of Helion's: several search paths walking to better neighbours.

1. An initial population of random points (plus whatever the session warm-started with:
   the default config, seeds) is evaluated.
2. The best `copies` distinct accurate points become the centres of the search paths.
3. Each generation evaluates every single-parameter neighbour of each active centre
   (capped at `max_neighbours` per path, drawn with the strategy's rng); a path moves to
   its best neighbour when that is faster by more than `min_improvement` (relative), and
   stops otherwise.
4. The search ends when no path is active or after `max_generations`.
"""

from __future__ import annotations

import random
from typing import Any

from autotune.strategies.base import Observation, Strategy
from autotune.types import Params
from search_spaces.space import SearchSpace, params_key


class PatternSearch(Strategy):
    name = "pattern"
    generation_size = 64
    exhaustive = False

    def __init__(self, space: SearchSpace, seed: int = 0, *, initial_population: int = 16, copies: int = 2,
                 max_generations: int = 20, min_improvement: float = 0.001, max_neighbours: int | None = 24,
                 radius: int = 1, **options: Any) -> None:
        super().__init__(space, seed, **options)
        if initial_population < 1 or copies < 1 or max_generations < 1:
            raise ValueError("pattern search needs initial_population, copies and max_generations >= 1")
        self.initial_population = initial_population
        self.copies = copies
        self.max_generations = max_generations
        self.min_improvement = min_improvement
        self.max_neighbours = max_neighbours
        self.radius = radius
        self.generation = 0  # 0 = the initial population
        self.centres: list[Params] = []
        self._known: dict[str, Observation] = {}
        self._queue: list[Params] = []
        self._started = False
        self._done = False

    def tell(self, observations: list[Observation]) -> None:
        super().tell(observations)
        for params, result in observations:
            self._known[params_key(params)] = (params, result)

    def ask(self, n: int) -> list[Params]:
        if not self._started:
            self._started = True
            self._queue = self._initial_points()
        while not self._queue and not self._done:
            self._advance()
        batch = self._queue[:n]
        del self._queue[:n]
        for point in batch:
            self.mark_asked(point)
        return batch

    # -- the search ------------------------------------------------------------------
    def _initial_points(self) -> list[Params]:
        points: list[Params] = []
        keys = set(self._known)
        for _ in range(self.initial_population * 50):
            if len(points) >= self.initial_population:
                break
            point = self.space.sample(self.rng)
            key = params_key(point)
            if key not in keys and not self.was_asked(point):
                keys.add(key)
                points.append(point)
        return points

    def _objective(self, point: Params) -> float:
        known = self._known.get(params_key(point))
        return known[1].objective if known else float("inf")

    def _advance(self) -> None:
        """Move the paths (or pick the first centres) and queue the next generation."""
        if self.generation == 0:
            ranked = sorted((o for o in self._known.values() if o[1].ok), key=lambda o: o[1].objective)
            self.centres = [params for params, _ in ranked[: self.copies]]
        else:
            moved = []
            for centre in self.centres:
                best = min(self._neighbours(centre), key=self._objective, default=None)
                if best is not None and self._objective(best) < self._objective(centre) * (1 - self.min_improvement):
                    moved.append(best)
            self.centres = _unique(moved)
        self.generation += 1
        if not self.centres or self.generation > self.max_generations:
            self._done = True
            return
        queue: list[Params] = []
        queued: set[str] = set()
        for centre in self.centres:
            for point in self._neighbours(centre):
                key = params_key(point)
                if key not in self._known and key not in queued and not self.was_asked(point):
                    queued.add(key)
                    queue.append(point)
        self._queue = queue  # may be empty when every neighbour is known: ask() advances again

    def _neighbours(self, centre: Params) -> list[Params]:
        """The centre's neighbours, capped deterministically (the cap draw is seeded per centre)."""
        points = self.space.neighbours(centre, self.radius)
        if self.max_neighbours is not None and len(points) > self.max_neighbours:
            chooser = random.Random(f"{self.seed}:{params_key(centre)}")
            points = chooser.sample(points, self.max_neighbours)
        return points


def _unique(points: list[Params]) -> list[Params]:
    seen: set[str] = set()
    result = []
    for point in points:
        key = params_key(point)
        if key not in seen:
            seen.add(key)
            result.append(point)
    return result

