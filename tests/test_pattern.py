"""Pattern search: paths start from the points the session gave, and a stalled search explores
(kicks and random points) and walks again instead of stopping."""

from __future__ import annotations

import pytest

from autotune.strategies import get_strategy, strategy_source
from autotune.types import Result, Status
from search_spaces import Ordinal, SearchSpace, params_key

NAMES = "abcd"


def space() -> SearchSpace:
    parameters = tuple(Ordinal(name=n, choices=tuple(range(6)), default_value=0) for n in NAMES)
    return SearchSpace(kernel="toy", family="triton", parameters=parameters, default={n: 0 for n in NAMES})


def two_basins(point: dict) -> float:
    """A smooth basin around all-1 (a local optimum, 2.0) and a better one around all-4 (1.0):
    single-parameter steps from the default reach only the first."""
    near = sum(abs(point[n] - 1) for n in NAMES)
    far = sum(abs(point[n] - 4) for n in NAMES)
    return min(2.0 + near, 1.0 + 0.5 * far) if far < 3 else 2.0 + near


def tell(strategy, batch) -> None:
    strategy.tell([(p, Result(key=params_key(p), status=Status.OK, median_ms=two_basins(p))) for p in batch])


def run(strategy, budget: int) -> list[dict]:
    seen: list[dict] = []
    while len(seen) < budget:
        batch = strategy.ask(min(8, budget - len(seen)))
        if not batch:
            break
        tell(strategy, batch)
        seen += batch
    return seen


def test_paths_start_from_the_given_points_before_any_random_one():
    strategy = get_strategy("pattern")(space(), seed=0)
    default = space().default
    tell(strategy, [default])  # the session's warm start: the default config
    first = strategy.ask(64)
    assert first and all(len(space().changed(default, p)) == 1 for p in first)  # all neighbours of it


def test_explore_first_evaluates_a_random_population_before_walking():
    strategy = get_strategy("pattern")(space(), seed=0, explore="first", initial_population=10)
    tell(strategy, [space().default])
    first = strategy.ask(64)
    assert len(first) == 10
    assert sum(len(space().changed(space().default, p)) > 1 for p in first) >= 8  # not neighbours: random


def test_a_stalled_search_restarts_and_finds_the_basin_one_step_cannot_reach():
    without = get_strategy("pattern")(space(), seed=3, restarts=0)
    tell(without, [space().default])
    walked = run(without, 2000)
    assert min(map(two_basins, walked)) == 2.0  # stopped in the basin of the default
    assert without.ask(8) == []

    restarting = get_strategy("pattern")(space(), seed=3)
    tell(restarting, [space().default])
    seen = run(restarting, 2000)
    assert min(map(two_basins, seen)) == 1.0
    assert restarting.restarts >= 1
    keys = [params_key(p) for p in seen]
    assert len(keys) == len(set(keys))  # never a point twice, across restarts


def test_restarts_are_bounded():
    strategy = get_strategy("pattern")(space(), seed=1, restarts=2, initial_population=4)
    tell(strategy, [space().default])
    run(strategy, 5000)
    assert strategy.restarts == 2 and strategy.ask(8) == []


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="explore"):
        get_strategy("pattern")(space(), explore="sometimes")
    with pytest.raises(ValueError, match="restarts"):
        get_strategy("pattern")(space(), restarts=-1)


def test_a_strategy_source_names_its_module_text():
    assert strategy_source("pattern") != strategy_source("evolution")
    assert strategy_source("pattern") == strategy_source("pattern")


def test_a_presets_source_is_the_walks_with_its_options_not_the_preset_tables_text():
    """A preset's recorded hash covers the walk's module, the line look's values and its own
    options: two presets differ, and retiring one or re-choosing `auto` (the table's text) leaves
    the others' hashes, and so their runs' lineage, as they were."""
    import inspect

    from autotune.strategies import pattern, pattern_line_look
    from autotune.strategies.pattern_presets import PRESETS
    from search_spaces.fingerprint import source_hash

    walk = inspect.getsource(pattern) + inspect.getsource(pattern_line_look)
    for name, options in PRESETS.items():
        assert strategy_source(name) == source_hash(walk + repr(options)), name
    assert len({strategy_source(name) for name in PRESETS}) == len(PRESETS)
