"""pattern-full: the pattern-ends walk, whose look before a path stops also takes the
neighbours that the random cap on a centre's neighbourhood left out.  The landscape below has
the shape met on a long-row softmax: a chunk that pays one step up only together with one other
parameter's value, which the cap may leave out of the start's neighbourhood."""

from __future__ import annotations

import pytest

from autotune.strategies.pattern import PatternSearch
from autotune.strategies.pattern_presets import EndsPatternSearch
from autotune.strategies.pattern_presets import FullPatternSearch
from conftest import walk_until_done
from search_spaces import Choice, PowerOfTwo, SearchSpace, params_key

FLAGS = 10  # parameters that do nothing: a neighbourhood larger than the cap


def flag_space() -> SearchSpace:
    return SearchSpace(
        kernel="row", family="triton",
        parameters=(PowerOfTwo(name="chunk", low=4096, high=16384, default_value=8192),
                    Choice(name="evict", choices=("", "first"), default_value=""),
                    *(Choice(name=f"flag{i}", choices=("a", "b"), default_value="a") for i in range(FLAGS))),
        default={"chunk": 8192, "evict": "", **{f"flag{i}": "a" for i in range(FLAGS)}},
    )


def flag_time(point: dict) -> float:
    """'first' alone helps a little; the larger chunk is slower without it and 10% faster with it;
    the smaller chunk is slower; the flags cost a little when set."""
    base = {4096: 1.10, 8192: 1.00, 16384: 1.08}[point["chunk"]]
    if point["evict"] == "first":
        base = 0.99 if point["chunk"] != 16384 else 0.90
    return base * (1 + 0.001 * sum(point[f"flag{i}"] == "b" for i in range(FLAGS)))


def run(strategy, limit: int = 400) -> list[dict]:
    """Ask and tell until the strategy stops; the points asked, in order."""
    return walk_until_done(strategy, flag_space().default, flag_time, limit)


def missing_the_move(seed: int) -> bool:
    """Whether the seed's cap on the default's neighbourhood leaves 'first' out."""
    space = flag_space()
    drawn = PatternSearch(space, seed, max_neighbours=6)._neighbours(space.default)
    return not any(p["evict"] == "first" for p in drawn)


SEEDS_MISSING = [seed for seed in range(40) if missing_the_move(seed)][:3]


def test_some_seeds_draw_a_neighbourhood_without_the_move_that_pays():
    assert len(SEEDS_MISSING) == 3  # the landscape below is about those draws


@pytest.mark.parametrize("seed", SEEDS_MISSING)
def test_a_path_that_was_not_offered_the_move_stops_short_and_the_full_look_finds_it(seed):
    ends = EndsPatternSearch(flag_space(), seed, max_neighbours=6, restarts=0)
    full = FullPatternSearch(flag_space(), seed, max_neighbours=6, restarts=0)
    run(ends), run(full)
    assert ends.best()[0]["evict"] == ""
    assert full.best()[0]["chunk"] == 16384 and full.best()[0]["evict"] == "first"
    assert full.best()[1].median_ms < ends.best()[1].median_ms * 0.95


def test_the_left_out_neighbours_are_asked_only_once_a_path_stalls_and_once_per_centre():
    seed = SEEDS_MISSING[0]
    space = flag_space()
    strategy = FullPatternSearch(space, seed, max_neighbours=6, restarts=0)
    drawn = {params_key(p) for p in PatternSearch(space, seed, max_neighbours=6)._neighbours(space.default)}
    asked = run(strategy)
    keys = [params_key(p) for p in asked]
    assert len(keys) == len(set(keys))
    # the first generation is the cap's draw alone; the rest of the default's neighbourhood
    # comes after, once the path from the default has stalled
    assert set(keys[:len(drawn)]) == drawn
    left_out = {params_key(p) for p in space.neighbours(space.default, 1)} - drawn
    assert left_out and left_out <= set(keys[len(drawn):])
    assert params_key(space.default) in strategy._probed


def test_stall_moves_are_the_neighbours_past_the_cap_and_the_end_moves():
    space = flag_space()
    strategy = FullPatternSearch(space, 3, max_neighbours=6)
    centre = {**space.default, "chunk": 16384}
    drawn = {params_key(p) for p in PatternSearch._neighbours(strategy, centre)}
    every = {params_key(p) for p in space.neighbours(centre, 1)}
    ends = {params_key(p) for p in EndsPatternSearch.end_moves(strategy, centre)}
    moves = [params_key(p) for p in strategy.stall_moves(centre)]
    assert len(moves) == len(set(moves))
    assert set(moves) == (every | ends) - drawn
    # without a cap nothing is left out: only the end moves remain
    uncapped = FullPatternSearch(space, 3, max_neighbours=None)
    assert {params_key(p) for p in uncapped.stall_moves(centre)} == ends - every

