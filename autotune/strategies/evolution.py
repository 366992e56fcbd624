"""Evolutionary search: children of the best points seen, by crossover and mutation.

Why it exists: some tuning spaces are rugged.  In the 2D-convolution spaces recorded by
others, the fastest config is a lone spike (every single-parameter neighbour is at least
20% slower) and the best block shape depends on the tile shape.  Walkers that take one
step at a time (pattern search) stop on a lesser peak, and models that assume smoothness
(a GP) do not predict the spike; recombining whole parts of good configs reaches it.
Kernel Tuner's genetic algorithm is strong on such spaces; this is this framework's own,
in ask/tell form.

Each `ask`:
- until `population` points have results, random points (the warm start counts);
- then each child: two parents, each the better of `tournament` points drawn from the
  `population` best results so far (failures never breed); a uniform crossover (each
  parameter from either parent); then each parameter mutated with probability
  `mutation`: to a random other value, or, for ordered parameters half of the time, one
  step along the order;
- a child that is not a point of the space, or was asked before, is redrawn, up to
  `redraws` times, and then replaced by a random point, so the search never stalls and
  ends only when the space is exhausted.  On a finite space (a recorded sample), with
  probability `nearest`, the last child is replaced instead by the fresh listed point that
  differs from it in the fewest parameters: a sample of a Helion space holds a few thousand
  of its billions of points, so a child is almost never one of them, and with random
  replacements only the search is a random search there.  Simulated (20 runs, budget 200),
  `nearest` 0.5 against 0: final regret 6.2% against 11.5% on the matmul + layernorm sample
  and 8.1% against 12.1% on matmul + rmsnorm; on the softmax samples, whose children are
  often listed, the shares of runs within 1% moved within the noise (1024x50257, 60 runs: 50%
  against 47%).  Always projecting (1.0) stalled on the 1024x50257 softmax sample (20%
  within 1%, against 70%): half of the replacements stay random, to keep exploring.

Deterministic for a seed: every draw comes from the strategy's rng, and the population is
recomputed from the results told, so a resumed session proposes what the first did.
"""

from __future__ import annotations

from typing import Any

import numpy

from autotune.strategies.base import Strategy
from autotune.strategies.encoding import PointEncoder
from autotune.types import Params
from search_spaces.space import SearchSpace, params_key


class MemberCodes:
    """A finite space's listed points as their value positions (`PointEncoder.positions`), so the
    number of parameters in which each differs from a point is one vectorised compare."""

    def __init__(self, space: SearchSpace) -> None:
        assert space.members is not None
        self._encoder = PointEncoder(space)
        self.matrix = self._encoder.positions(space.members)

    def distances(self, point: Params) -> Any:
        """Per listed point, the number of parameters whose value differs from `point`'s."""
        return (self.matrix != self._encoder.positions([point], missing=-1)[0]).sum(axis=1)


class EvolutionSearch(Strategy):
    name = "evolution"
    generation_size = 8

    def __init__(self, space: SearchSpace, seed: int = 0, *, population: int = 16, tournament: int = 2,
                 mutation: float | None = None, redraws: int = 50, nearest: float = 0.5, **options: Any) -> None:
        super().__init__(space, seed, **options)
        if population < 2 or tournament < 1 or redraws < 1:
            raise ValueError("evolution search needs population >= 2, tournament >= 1 and redraws >= 1")
        self.population = population
        self.tournament = tournament
        # One parameter mutated per child on average unless told otherwise.
        self.mutation = mutation if mutation is not None else 1.0 / max(1, len(space.parameters))
        if not 0.0 <= self.mutation <= 1.0:
            raise ValueError("evolution search needs 0 <= mutation <= 1")
        self.redraws = redraws
        if not 0.0 <= nearest <= 1.0:
            raise ValueError("evolution search needs 0 <= nearest <= 1")
        self.nearest = nearest
        self._order: list[int] | None = None  # finite spaces: the random points' order
        self._next = 0
        self._codes: MemberCodes | None = None  # finite spaces: the listed points, for nearest-point lookups
        self._tiebreak: list[int] = []

    def ask(self, n: int) -> list[Params]:
        batch: list[Params] = []
        queued: set[str] = set()
        parents = self._parents()
        for _ in range(n):
            child = self._child(parents, queued) if len(parents) >= self.population else None
            if child is None:
                child = self._random_point(queued)
            if child is None:
                break  # the space is exhausted
            queued.add(params_key(child))
            self.mark_asked(child)
            batch.append(child)
        return batch

    # -- breeding --------------------------------------------------------------------
    def _parents(self) -> list[Params]:
        """The `population` best distinct points with results (failures excluded)."""
        ranked = sorted((o for o in self.history if o[1].ok), key=lambda o: o[1].objective)
        chosen: dict[str, Params] = {}
        for params, _ in ranked:
            chosen.setdefault(params_key(params), dict(params))
            if len(chosen) == self.population:
                break
        return list(chosen.values())  # best first

    def _select(self, parents: list[Params]) -> Params:
        """Tournament: the best (lowest rank) of `tournament` draws."""
        return parents[min(self.rng.randrange(len(parents)) for _ in range(self.tournament))]

    def _child(self, parents: list[Params], queued: set[str]) -> Params | None:
        child: Params = {}
        for _ in range(self.redraws):
            mother, father = self._select(parents), self._select(parents)
            child = {name: (mother if self.rng.random() < 0.5 else father)[name] for name in self.space.names}
            for parameter in self.space.parameters:
                if self.rng.random() < self.mutation:
                    child[parameter.name] = self._mutate(parameter, child[parameter.name])
            if self._fresh(child, queued):
                return child
        if self.space.members is not None and self.rng.random() < self.nearest:
            return self._nearest_member(child, queued)
        return None

    def _nearest_member(self, point: Params, queued: set[str]) -> Params | None:
        """The fresh listed point differing from `point` in the fewest parameters (ties: the
        seeded random order), or None when every listed point was asked."""
        members, keys = self.space.members, self.space.member_keys
        assert members is not None
        if self._codes is None:
            self._codes = MemberCodes(self.space)
            self._tiebreak = self.rng.sample(range(len(members)), len(members))
        distances = self._codes.distances(point)
        for index in numpy.lexsort((self._tiebreak, distances)):
            if keys[index] not in queued and keys[index] not in self._asked:
                return dict(members[index])
        return None

    def _mutate(self, parameter: Any, value: Any) -> Any:
        steps = parameter.neighbours(value, 1)
        if steps and self.rng.random() < 0.5:
            return self.rng.choice(steps)  # one step along an ordered parameter (any value otherwise)
        others = [v for v in parameter.values() if v != value]
        return self.rng.choice(others) if others else value

    def _random_point(self, queued: set[str]) -> Params | None:
        members = self.space.members
        if members is not None:  # a seeded walk through the listed points: no wasted draws
            if self._order is None:
                self._order = list(range(len(members)))
                self.rng.shuffle(self._order)
            while self._next < len(self._order):
                point = dict(members[self._order[self._next]])
                self._next += 1
                if self._fresh(point, queued):
                    return point
            return None
        for _ in range(self.redraws * 4):
            point = self.space.sample(self.rng)
            if self._fresh(point, queued):
                return point
        return None

    def _fresh(self, point: Params, queued: set[str]) -> bool:
        """A point of the space that was neither asked nor queued in this batch."""
        key = params_key(point)
        if key in queued or self.was_asked(point):
            return False
        return not any(c.violation(point) for c in self.space.constraints) and self.space.is_member(point)
