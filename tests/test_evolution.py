"""The evolutionary strategy: children are crossovers of the best points seen, and on a space
whose optimum combines the good parts of different configs it beats random search."""

from __future__ import annotations

import itertools
import statistics

import pytest

from autotune.strategies import get_strategy
from autotune.types import Result, Status
from search_spaces import Ordinal, SearchSpace, params_key


def grid_space(members: bool = False) -> SearchSpace:
    parameters = tuple(Ordinal(name=n, choices=tuple(range(8)), default_value=0) for n in "abcd")
    space = SearchSpace(kernel="toy", family="triton", parameters=parameters, default={n: 0 for n in "abcd"})
    if members:  # a finite space missing every point with a == b (as a recorded space misses failures)
        points = [dict(zip("abcd", v)) for v in itertools.product(range(8), repeat=4) if v[0] != v[1]]
        space = space.restricted_to(points)
    return space


def rugged(point: dict) -> float:
    """Each parameter has one good value (a=3, b=5, c=1, d=6); each helps a little, all four
    together ten times more: a spike, as in recorded convolution spaces."""
    good = sum(point[n] == v for n, v in zip("abcd", (3, 5, 1, 6)))
    return 1.0 if good == 4 else 10.0 - good - 0.01 * sum(point.values())


def _tell(strategy, batch):
    strategy.tell([(p, Result(key=params_key(p), status=Status.OK, median_ms=rugged(p))) for p in batch])


def evaluations_to_optimum(name: str, space: SearchSpace, seed: int, budget: int = 600) -> int:
    strategy = get_strategy(name)(space, seed=seed)
    used = 0
    while used < budget:
        batch = strategy.ask(8)
        if not batch:
            break
        _tell(strategy, batch)
        for point in batch:
            used += 1
            if rugged(point) == 1.0:
                return used
    return budget


def test_children_are_crossovers_of_the_population_when_nothing_mutates():
    space = grid_space()
    strategy = get_strategy("evolution")(space, seed=1, population=2, mutation=0.0)
    first = strategy.ask(2)
    assert len(first) == 2  # random points until the population has results
    _tell(strategy, first)
    children = strategy.ask(4)
    assert children
    for child in children:
        for name in space.names:
            assert child[name] in {first[0][name], first[1][name]}, (child, first)
    assert len({params_key(c) for c in children}) == len(children)


def test_failures_never_breed():
    space = grid_space()
    strategy = get_strategy("evolution")(space, seed=2, population=2, mutation=0.0)
    batch = strategy.ask(4)
    failed = [(p, Result(key=params_key(p), status=Status.COMPILE_ERROR)) for p in batch[:2]]
    strategy.tell(failed + [(p, Result(key=params_key(p), status=Status.OK, median_ms=2.0)) for p in batch[2:]])
    parents = batch[2:]
    for child in strategy.ask(4):
        assert all(child[n] in {parents[0][n], parents[1][n]} for n in space.names)


@pytest.mark.parametrize("finite", [False, True], ids=["declared", "recorded"])
def test_finds_a_spike_made_of_good_parts_faster_than_random(finite):
    space = grid_space(members=finite)
    evolution = [evaluations_to_optimum("evolution", space, seed) for seed in range(12)]
    random = [evaluations_to_optimum("random", space, seed) for seed in range(12)]
    assert statistics.median(evolution) < 0.5 * statistics.median(random), (evolution, random)


def test_only_points_of_a_recorded_space_are_asked():
    space = grid_space(members=True)
    strategy = get_strategy("evolution")(space, seed=3)
    for _ in range(30):
        batch = strategy.ask(8)
        assert all(space.is_member(p) and p["a"] != p["b"] for p in batch)
        _tell(strategy, batch)


@pytest.mark.parametrize("options", [{"population": 1}, {"tournament": 0}, {"mutation": 1.5}, {"redraws": 0},
                                     {"nearest": -0.1}])
def test_bad_options_are_refused(options):
    with pytest.raises(ValueError):
        get_strategy("evolution")(grid_space(), seed=0, **options)


def sparse_space(size: int = 1500) -> SearchSpace:
    """A recorded sample as sparse as a Helion space's: 1,500 of 8^8 (16.7 million) points."""
    import random

    names = "abcdefgh"
    parameters = tuple(Ordinal(name=n, choices=tuple(range(8)), default_value=0) for n in names)
    space = SearchSpace(kernel="sparse", family="triton", parameters=parameters, default=dict.fromkeys(names, 0))
    rng = random.Random(5)
    return space.restricted_to(dict(zip(names, (rng.randrange(8) for _ in names))) for _ in range(size))


def bowl(point: dict) -> float:
    """Smooth: the farther each value from 6, the slower."""
    return 1.0 + sum(abs(v - 6) for v in point.values())


def test_on_a_sparse_sample_a_child_that_is_not_recorded_becomes_the_nearest_recorded_point():
    space = sparse_space()
    strategy = get_strategy("evolution")(space, seed=0)
    target = dict.fromkeys(space.names, 6)
    assert not space.is_member(target)
    distance = lambda p: sum(p[n] != target[n] for n in space.names)  # noqa: E731
    fewest = min(distance(m) for m in space.members)
    nearest = strategy._nearest_member(target, set())
    assert space.is_member(nearest) and distance(nearest) == fewest
    strategy.mark_asked(nearest)  # an asked point is never proposed again: the next nearest comes
    second = strategy._nearest_member(target, set())
    assert second != nearest and distance(second) == min(distance(m) for m in space.members if m != nearest)


def test_on_a_sparse_sample_evolution_still_beats_random_search():
    space = sparse_space()

    def best_after(name: str, seed: int, budget: int = 120) -> float:
        strategy, seen = get_strategy(name)(space, seed=seed), []
        while len(seen) < budget and (batch := strategy.ask(8)):
            strategy.tell([(p, Result(key=params_key(p), status=Status.OK, median_ms=bowl(p))) for p in batch])
            seen += [bowl(p) for p in batch]
        return min(seen)

    evolution = [best_after("evolution", seed) for seed in range(10)]
    random = [best_after("random", seed) for seed in range(10)]
    assert statistics.median(evolution) < statistics.median(random), (evolution, random)
