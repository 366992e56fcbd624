"""A conformance suite every registered strategy must pass, plus grid specifics."""

from __future__ import annotations

import itertools
import random

import pytest

from autotune.strategies import UnknownStrategy, get_strategy, strategy_names
from autotune.strategies.grid import GridSearch, GridTooLarge
from autotune.types import Result, Status
from search_spaces import Ordinal, PowerOfTwo, ProductLimit, SearchSpace, params_key


def tiny_space() -> SearchSpace:
    return SearchSpace(
        kernel="tiny", family="triton",
        parameters=(Ordinal(name="a", choices=(10, 20), default_value=10),
                    Ordinal(name="b", choices=("x", "y", "z"), default_value="y")),
        default={"a": 10, "b": "y"},
    )


def make(name: str, task, seed: int = 0):
    """Every strategy is built the way the CLI builds it: from the task (a strategy that only
    asks the configs it is given gets a seeded list of points of the space)."""
    cls = get_strategy(name)
    options = {"configs": given_configs(task.space, seed)} if cls.needs_configs else {}
    return cls.from_task(task, seed=seed, budget=10**6, **options)


def given_configs(space: SearchSpace, seed: int, count: int = 80) -> list[tuple[str, dict]]:
    """Up to `count` distinct labelled points of the space, the same for the same seed."""
    rng, points = random.Random(seed), {}
    for _ in range(count * 10):
        point = space.sample(rng)
        points.setdefault(params_key(point), point)
        if len(points) == count:
            break
    return [(f"given {i}", point) for i, point in enumerate(points.values())]


class _SpaceOnly:
    """A task stand-in for hand-made spaces (strategies that need a bound kernel skip these)."""

    def __init__(self, space: SearchSpace) -> None:
        self.space = space


def task_for(name: str, helion_task, triton_task):
    return helion_task if get_strategy(name).needs_bound_kernel else triton_task


def space_only(name: str) -> None:
    if get_strategy(name).needs_bound_kernel:
        pytest.skip(f"{name} runs Helion's own search and needs a bound Helion kernel")


def drain(strategy, n: int = 7, limit: int = 10_000) -> list[list[dict]]:
    """Ask until the strategy runs dry (or `limit` points), telling it a result each time."""
    batches, total = [], 0
    while total < limit:
        batch = strategy.ask(min(n, limit - total))
        if not batch:
            break
        batches.append(batch)
        total += len(batch)
        strategy.tell([(p, Result(key=params_key(p), status=Status.OK, median_ms=1.0 + i)) for i, p in enumerate(batch)])
    return batches


def test_registry():
    names = strategy_names()
    assert "random" in names and "grid" in names and names == sorted(names)
    with pytest.raises(UnknownStrategy, match="annealing"):
        get_strategy("annealing")


@pytest.mark.parametrize("name", strategy_names())
def test_ask_returns_valid_points(name, triton_task):
    space_only(name)
    space = triton_task.space
    strategy = make(name, triton_task, seed=1)
    for n in (1, 5, 16):
        batch = strategy.ask(n)
        assert 1 <= len(batch) <= n
        for point in batch:
            assert space.violations(point) == []
            assert list(point) == space.names


@pytest.mark.parametrize("name", strategy_names())
def test_ask_returns_valid_points_on_the_helion_space(name, helion_task):
    space = helion_task.space
    cls = get_strategy(name)
    strategy = (cls(space, seed=0, names=["num_warps", "num_stages"], budget=1000) if cls is GridSearch
                else make(name, helion_task, seed=0))
    batch = strategy.ask(32)
    assert batch
    for point in batch:
        assert space.violations(point) == []
        helion_task.candidate(point)  # Helion accepts it


@pytest.mark.parametrize("name", strategy_names())
def test_never_repeats_a_point(name, helion_task, triton_task):
    batches = drain(make(name, task_for(name, helion_task, triton_task), seed=2), n=6, limit=60)
    keys = [params_key(p) for batch in batches for p in batch]
    assert len(keys) == len(set(keys))
    # exhaustive strategies fill the budget; converging ones (pattern searches) may stop earlier
    assert len(keys) == 60 if get_strategy(name).exhaustive else 0 < len(keys) <= 60


@pytest.mark.parametrize("name", strategy_names())
def test_deterministic_for_a_seed(name, helion_task, triton_task):
    task = task_for(name, helion_task, triton_task)
    first = drain(make(name, task, seed=3), n=5, limit=30)
    second = drain(make(name, task, seed=3), n=5, limit=30)
    assert first and first == second


def test_random_depends_on_the_seed(triton_task):
    first = drain(make("random", triton_task, seed=3), n=5, limit=30)
    other = drain(make("random", triton_task, seed=4), n=5, limit=30)
    assert first != other


@pytest.mark.parametrize("name", strategy_names())
def test_exhausts_a_tiny_space(name):
    space_only(name)
    space = tiny_space()
    strategy = make(name, _SpaceOnly(space), seed=5)
    batches = drain(strategy, n=4)
    points = [p for batch in batches for p in batch]
    expected = [{"a": a, "b": b} for a, b in itertools.product((10, 20), ("x", "y", "z"))]
    if get_strategy(name).exhaustive:
        assert sorted(map(params_key, points)) == sorted(map(params_key, expected))
    else:  # it ends by itself, inside the space, without repeats
        assert set(map(params_key, points)) <= set(map(params_key, expected))
        assert len(points) == len(set(map(params_key, points)))
    assert strategy.ask(4) == []
    assert strategy.ask(1) == []


@pytest.mark.parametrize("name", strategy_names())
def test_tell_keeps_history_and_best(name):
    space_only(name)
    strategy = make(name, _SpaceOnly(tiny_space()))
    batch = strategy.ask(3)
    results = [Result(key=params_key(p), status=s, median_ms=ms)
               for p, s, ms in zip(batch, (Status.OK, Status.CRASH, Status.OK), (2.0, None, 1.5))]
    strategy.tell(list(zip(batch, results)))
    assert len(strategy.history) == 3
    assert strategy.best() == (batch[2], results[2])


@pytest.mark.parametrize("name", strategy_names())
def test_unknown_options_are_refused(name):
    with pytest.raises(TypeError):
        get_strategy(name)(tiny_space(), seed=0, temperature=3)


@pytest.mark.parametrize("name", strategy_names())
def test_warm_started_points_are_not_asked_again(name):
    space_only(name)
    space = tiny_space()
    strategy = make(name, _SpaceOnly(space))
    known = {"a": 10, "b": "y"}
    strategy.warm_start([(known, Result(key=params_key(known), status=Status.OK, median_ms=1.0))])
    points = [p for batch in drain(strategy) for p in batch]
    assert known not in points
    assert len(points) == 5 if get_strategy(name).exhaustive else len(points) <= 5


# -- grid --------------------------------------------------------------------------------------


def test_grid_order_is_the_lexicographic_product(triton_task):
    space = tiny_space()
    points = [p for batch in drain(GridSearch(space, budget=6), n=4) for p in batch]
    assert points == [{"a": a, "b": b} for a in (10, 20) for b in ("x", "y", "z")]
    big = triton_task.space
    got = [p for batch in drain(GridSearch(big, budget=1000), n=32) for p in batch]
    expected = [dict(zip(big.names, c)) for c in itertools.product(*(p.values() for p in big.parameters))]
    assert got == [p for p in expected if not big.violations(p)]


def test_grid_over_named_parameters_keeps_the_others_at_default(triton_task):
    space = triton_task.space
    grid = GridSearch(space, names=["num_warps"], budget=100)
    points = [p for batch in drain(grid) for p in batch]
    assert [p["num_warps"] for p in points] == space.parameter("num_warps").values()
    assert all(p["BLOCK_SIZE"] == space.default["BLOCK_SIZE"] and p["num_stages"] == space.default["num_stages"]
               for p in points)
    with pytest.raises(ValueError, match="unknown"):
        GridSearch(space, names=["num_warps", "BLOCK"], budget=100)


def test_grid_skips_points_outside_the_constraints():
    space = SearchSpace(kernel="k", family="triton",
                        parameters=(PowerOfTwo(name="a", low=1, high=8, default_value=1),
                                    PowerOfTwo(name="b", low=1, high=8, default_value=1)),
                        default={"a": 1, "b": 1}, constraints=(ProductLimit(names=("a", "b"), limit=8),))
    points = [p for batch in drain(GridSearch(space, budget=100)) for p in batch]
    assert len(points) == sum(1 for a in (1, 2, 4, 8) for b in (1, 2, 4, 8) if a * b <= 8)
    assert all(p["a"] * p["b"] <= 8 for p in points)


def test_grid_refuses_more_points_than_the_budget(triton_task):
    size = len(list(GridSearch(triton_task.space, budget=10**6).points))
    with pytest.raises(GridTooLarge, match=str(size)):
        GridSearch(triton_task.space, budget=size - 1)
    GridSearch(triton_task.space, budget=size)  # exactly the grid is fine


@pytest.mark.parametrize("budget", [1, 10, 50])
def test_grid_sample_gives_exactly_budget_points(triton_task, budget):
    space = triton_task.space
    full = [params_key(p) for p in GridSearch(space, budget=10**6).points]
    grid = GridSearch(space, seed=7, budget=budget, sample=True)
    points = [p for batch in drain(grid, n=8) for p in batch]
    keys = [params_key(p) for p in points]
    assert len(points) == budget == len(set(keys))
    assert set(keys) <= set(full)
    assert keys == sorted(keys, key=full.index)  # still in grid order
    again = [p for batch in drain(GridSearch(space, seed=7, budget=budget, sample=True), n=8) for p in batch]
    assert again == points
    if budget < len(full) - 1:
        other = [p for batch in drain(GridSearch(space, seed=8, budget=budget, sample=True), n=8) for p in batch]
        assert other != points


def test_grid_refuses_a_huge_grid_without_enumerating_it(monkeypatch):
    import autotune.strategies.grid as grid_module

    params = tuple(PowerOfTwo(name=f"p{i}", low=1, high=1024, default_value=1) for i in range(10))
    space = SearchSpace(kernel="huge", family="triton", parameters=params, default={p.name: 1 for p in params})
    assert space.cardinality() == 11**10
    consumed = 0
    real_iter_grid = grid_module.iter_grid

    def counting_iter_grid(*args, **kwargs):
        nonlocal consumed
        for point in real_iter_grid(*args, **kwargs):
            consumed += 1
            if consumed > 100_000:
                raise RuntimeError(f"enumerated {consumed} points of an 11**10-point grid to compare with a budget of 60")
            yield point

    monkeypatch.setattr(grid_module, "iter_grid", counting_iter_grid)
    with pytest.raises(GridTooLarge):
        GridSearch(space, budget=60)
