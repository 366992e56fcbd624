"""Pattern search: search paths walking to better single-parameter neighbours, restarted
when they stall.

1. The first paths start from the best `copies` accurate points the session gave (the
   default config, seeds).  With `explore="first"` (Helion's order), or when the session
   gave no accurate point, a random population of `initial_population` points is evaluated
   first and the paths start from the best of everything known.
2. Each generation evaluates every single-parameter neighbour of each active centre
   (capped at `max_neighbours` per path, drawn with the strategy's rng); a path moves to
   its best neighbour when that is faster by more than `min_improvement` (relative), and
   stops otherwise, or after `max_generations` generations of its walk.
3. When every path has stopped and `restarts` remain, an exploration generation is drawn:
   half kicks (the best point with a few parameters changed at random) and half uniform
   random points.  New paths start from the best known points no path has reached yet:
   neither a past centre nor within `radius` changed parameters of one.
4. The search ends when no restart remains or no such point is left.

Why paths start from the given points: a random point of a kernel's space is usually many
times slower than the default (a random population cost a session tens of seconds of
compiles and slow timings before the first step), and a session that was given seeds
already knows where to start.  Exploring when stalled instead of first spends that time
only where walking from what is known has stopped paying.
"""

from __future__ import annotations

import random
from typing import Any, Callable

from autotune.strategies.base import Observation, Strategy
from autotune.types import Params
from search_spaces.space import SearchSpace, params_key

EXPLORE = ("stalled", "first")
KICK_STEPS = 3  # single-parameter moves in a kick: past the reach of a path's neighbourhood


class PatternSearch(Strategy):
    name = "pattern"
    generation_size = 64
    exhaustive = False

    def __init__(self, space: SearchSpace, seed: int = 0, *, initial_population: int = 16, copies: int = 2,
                 max_generations: int = 20, min_improvement: float = 0.001, max_neighbours: int | None = 24,
                 radius: int = 1, explore: str = "stalled", restarts: int = 8, **options: Any) -> None:
        super().__init__(space, seed, **options)
        if initial_population < 1 or copies < 1 or max_generations < 1 or restarts < 0:
            raise ValueError("pattern search needs initial_population, copies and max_generations >= 1 "
                             "and restarts >= 0")
        if explore not in EXPLORE:
            raise ValueError(f"pattern search: explore must be one of {', '.join(EXPLORE)}, got {explore!r}")
        self.initial_population = initial_population
        self.copies = copies
        self.max_generations = max_generations
        self.min_improvement = min_improvement
        self.max_neighbours = max_neighbours
        self.radius = radius
        self.explore = explore
        self.restarts_left = restarts
        self.generation = 0  # generations of the current walk; 0 = none yet
        self.restarts = 0  # restarts made
        self.centres: list[Params] = []
        self.past_centres: list[Params] = []
        self._known: dict[str, Observation] = {}
        self._queue: list[Params] = []
        self._started = False
        self._exploring = False  # the queued points are an exploration generation, not steps
        self._done = False

    def tell(self, observations: list[Observation]) -> None:
        super().tell(observations)
        for params, result in observations:
            self._known[params_key(params)] = (params, result)

    def ask(self, n: int) -> list[Params]:
        if not self._started:
            self._started = True
            if self.explore == "first" or not self._ranked():
                self._queue_exploration(self._random_points(self.initial_population))
        while not self._queue and not self._done:
            self._advance()
        batch = self._queue[:n]
        del self._queue[:n]
        for point in batch:
            self.mark_asked(point)
        return batch

    # -- the search ------------------------------------------------------------------
    def _advance(self) -> None:
        """Start paths (after an exploration), move them, or explore when they all stopped."""
        if self._exploring or not self.centres and self.generation == 0:
            self._exploring = False
            self.centres = self._fresh_centres()
            self.generation = 0
        else:
            self.centres = self._moved() if self.generation < self.max_generations else []
        if not self.centres:
            self._restart_or_finish()
            return
        self.past_centres += self.centres
        self.generation += 1
        queue: list[Params] = []
        queued: set[str] = set()
        for centre in self.centres:
            for point in self._neighbours(centre):
                key = params_key(point)
                if key not in self._known and key not in queued and not self.was_asked(point):
                    queued.add(key)
                    queue.append(point)
        self._queue = queue  # may be empty when every neighbour is known: ask() advances again

    def _moved(self) -> list[Params]:
        moved = []
        for centre in self.centres:
            best = min(self._neighbours(centre), key=self._objective, default=None)
            if best is not None and self._objective(best) < self._objective(centre) * (1 - self.min_improvement):
                moved.append(best)
        return _unique(moved)

    def _restart_or_finish(self) -> None:
        if self.restarts_left <= 0:
            self._done = True
            return
        self.restarts_left -= 1
        self.restarts += 1
        best = self._ranked()
        kicks = self._kicks(best[0][0], self.initial_population // 2) if best else []
        points = kicks + self._random_points(self.initial_population - len(kicks), exclude=kicks)
        if not points and not self._fresh_centres():
            self._done = True
            return
        self._queue_exploration(points)

    def _queue_exploration(self, points: list[Params]) -> None:
        self._queue = points
        self._exploring = True
        self.centres = []

    def _fresh_centres(self) -> list[Params]:
        """The best `copies` accurate points no path has reached: not a past centre, and more
        than `radius` parameters away from each."""
        fresh = [params for params, _ in self._ranked() if all(self._distance(params, c) > self.radius
                                                                for c in self.past_centres)]
        return fresh[: self.copies]

    # -- points ----------------------------------------------------------------------
    def _ranked(self) -> list[Observation]:
        return sorted((o for o in self._known.values() if o[1].ok), key=lambda o: o[1].objective)

    def _objective(self, point: Params) -> float:
        known = self._known.get(params_key(point))
        return known[1].objective if known else float("inf")

    def _distance(self, a: Params, b: Params) -> int:
        return len(self.space.changed(a, b))

    def _new(self, point: Params, taken: set[str]) -> bool:
        key = params_key(point)
        return key not in self._known and key not in taken and not self.was_asked(point)

    def _random_points(self, count: int, exclude: list[Params] = ()) -> list[Params]:
        points: list[Params] = []
        taken = {params_key(p) for p in exclude}
        for _ in range(count * 50):
            if len(points) >= count:
                break
            point = self.space.sample(self.rng)
            if self._new(point, taken):
                taken.add(params_key(point))
                points.append(point)
        return points

    def _kicks(self, start: Params, count: int) -> list[Params]:
        """Up to `count` new points, each `KICK_STEPS` random moves (`_kick_move`) from `start`."""
        move = self._kick_move(start)
        points: list[Params] = []
        taken: set[str] = set()
        for _ in range(count * 10):
            if len(points) >= count:
                break
            point, moved = start, set()
            for _step in range(KICK_STEPS):
                step = move(point, moved)
                if step is None:
                    break
                point = step
            if self._distance(point, start) > self.radius and self._new(point, taken):
                taken.add(params_key(point))
                points.append(point)
        return points

    def _kick_move(self, start: Params) -> Callable[[Params, set[str]], Params | None]:
        """How a kick from `start` takes one move: here a random neighbour of the point (None
        where it has none).  `moved` holds the parameters the kick has moved so far, for walks
        that draw moves otherwise (`pattern-focus`)."""
        def move(point: Params, moved: set[str]) -> Params | None:
            options = self.space.neighbours(point, self.radius)
            return self.rng.choice(options) if options else None
        return move

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
