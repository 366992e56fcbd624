"""pattern-orders: the pattern-full walk whose first paths start one in each program order.
The landscape below has the shape met on long-row softmaxes: the default's program order (flat)
holds a local optimum; the persistent order holds a faster one behind loop pipelining that pays
only there, and from the flat optimum the switch to persistent alone is slower."""

from __future__ import annotations

from autotune.strategies import get_strategy, strategy_source
from autotune.strategies.pattern_presets import FullPatternSearch
from autotune.strategies.pattern import START_ACROSS
from autotune.strategies.pattern_presets import OrdersPatternSearch
from conftest import walk_until_done, walked_best_ms
from search_spaces import Choice, Integer, PowerOfTwo, SearchSpace

ORDERS = ("flat", "persistent_blocked", "persistent_interleaved")
GOAL_MS = 0.81


def two_basins() -> SearchSpace:
    return SearchSpace(
        kernel="row", family="triton",
        parameters=(Choice(name=START_ACROSS, choices=ORDERS, default_value="flat"),
                    PowerOfTwo(name="chunk", low=1024, high=32768, default_value=4096),
                    Integer(name="stages", low=0, high=4, default_value=0),
                    Choice(name="hint", choices=("", "last"), default_value="")),
        default={START_ACROSS: "flat", "chunk": 4096, "stages": 0, "hint": ""},
    )


def two_basins_time(point: dict) -> float:
    """Flat: best 0.95 at chunk 8192 with the hint; the loop's stages only cost there.
    Persistent interleaved: 1.05 at the default, falling with each stage to GOAL_MS at 4 stages
    with chunk 16384 (8192 half way) and the hint; from the default its best single move is back to flat (1.0).
    Persistent blocked: 1.2 everywhere."""
    chunk, stages, hint = point["chunk"], point["stages"], point["hint"]
    if point[START_ACROSS] == "flat":
        return {4096: 1.0, 8192: 0.97, 16384: 1.02}.get(chunk, 1.2) - (0.02 if hint else 0.0) + 0.03 * stages
    if point[START_ACROSS] == "persistent_blocked":
        return 1.2
    return round(1.05 - 0.04 * stages - {8192: 0.015, 16384: 0.03}.get(chunk, 0.0) - (0.05 if hint else 0.0) + (
        0.2 if chunk not in (4096, 8192, 16384) else 0.0), 6)


def best_ms(cls, seed: int) -> float:
    return walked_best_ms(cls, seed, two_basins(), two_basins_time)


def test_the_first_points_are_the_default_in_each_other_program_order():
    space = two_basins()
    strategy = OrdersPatternSearch(space, 0)
    asked = walk_until_done(strategy, space.default, two_basins_time, limit=2)
    assert [p[START_ACROSS] for p in asked] == ["persistent_blocked", "persistent_interleaved"]
    assert all(len(space.changed(space.default, p)) == 1 for p in asked)


def test_the_first_paths_start_one_in_each_program_order():
    strategy = OrdersPatternSearch(two_basins(), 0, restarts=0)
    walk_until_done(strategy, two_basins().default, two_basins_time, limit=3)
    assert sorted(c[START_ACROSS] for c in strategy.past_centres) == sorted(ORDERS)


def test_a_walk_from_the_flat_default_finds_the_persistent_optimum_that_pattern_full_misses():
    for seed in range(4):
        assert best_ms(OrdersPatternSearch, seed) == GOAL_MS
        assert best_ms(FullPatternSearch, seed) > 0.9  # stays flat


def test_without_the_parameter_it_asks_exactly_what_pattern_full_asks():
    space = SearchSpace(kernel="row", family="triton",
                        parameters=(PowerOfTwo(name="chunk", low=1024, high=32768, default_value=4096),
                                    Integer(name="stages", low=0, high=4, default_value=0)),
                        default={"chunk": 4096, "stages": 0})

    def time_ms(point: dict) -> float:
        return abs(point["chunk"] - 16384) / 16384 + 0.1 * abs(point["stages"] - 2) + 1.0

    for seed in range(3):
        orders = walk_until_done(OrdersPatternSearch(space, seed), space.default, time_ms)
        full = walk_until_done(FullPatternSearch(space, seed), space.default, time_ms)
        assert orders == full and orders


def test_it_is_registered_and_its_source_covers_the_walks_it_extends():
    assert get_strategy("pattern-orders") is OrdersPatternSearch
    assert strategy_source("pattern-orders") != strategy_source("pattern-full")
