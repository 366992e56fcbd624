"""pattern-ties: pattern-reach's walk, which follows the moves tied with a path's best move as
paths of their own.  The landscape below has the shape met on a long-row softmax: two hints each
pay a little alone, within a percent of each other; a larger chunk pays only with the slower of
the two, and is slower than anywhere else without it."""

from __future__ import annotations

import pytest

from autotune.strategies import get_strategy, strategy_source
from autotune.strategies.options import StrategyOptionError, check_options
from autotune.strategies.pattern_presets import ReachPatternSearch
from autotune.strategies.pattern import TIE_BAND, PatternOptions
from autotune.strategies.pattern_presets import TiesPatternSearch

PATHS = PatternOptions().paths
from conftest import timed, walk_until_done, walked_best_ms
from search_spaces import Choice, PowerOfTwo, SearchSpace

CHUNK_MS = {4096: 300.0, 8192: 271.5, 16384: 272.0, 65536: 520.0}
BEST_MS = 252.6  # the larger chunk with the 'first' hint alone


def interacting_hints() -> SearchSpace:
    return SearchSpace(
        kernel="row", family="triton",
        parameters=(PowerOfTwo(name="chunk", low=4096, high=65536, default_value=16384),
                    Choice(name="hint_a", choices=("", "last"), default_value=""),
                    Choice(name="hint_c", choices=("", "first"), default_value="")),
        default={"chunk": 16384, "hint_a": "", "hint_c": ""},
    )


def interacting_time(point: dict, hint_c_gain: float = 3.0) -> float:
    """hint_a 'last' saves 4.7, hint_c 'first' saves `hint_c_gain`; the chunk of 32768 is the
    fastest with hint_c alone and slower than any other chunk without it."""
    if point["chunk"] == 32768:
        return BEST_MS if (point["hint_c"], point["hint_a"]) == ("first", "") else 300.0
    time = CHUNK_MS[point["chunk"]]
    if point["hint_a"] == "last":
        time -= 4.7
    if point["hint_c"] == "first":
        time -= hint_c_gain
    return time


def test_the_tied_move_it_follows_leads_to_the_chunk_that_pays_where_pattern_reach_stops_short():
    for seed in range(4):
        assert walked_best_ms(TiesPatternSearch, seed, interacting_hints(), interacting_time) == BEST_MS
        # pattern-reach takes the faster hint, after which the larger chunk is slower: it ends with both
        # hints, at the fastest chunk short of it (4% over the best)
        both_hints = interacting_time({"chunk": 8192, "hint_a": "last", "hint_c": "first"})
        assert walked_best_ms(ReachPatternSearch, seed, interacting_hints(), interacting_time) == both_hints


def test_tied_moves_are_those_past_the_noise_floor_within_the_band_of_the_best_move():
    space = interacting_hints()
    ties = TiesPatternSearch(space, 0, max_neighbours=None)
    walk_until_done(ties, space.default, interacting_time, limit=16)  # the default's neighbours measured
    tied = ties.tied_moves(space.default)
    assert [(p["chunk"], p["hint_a"], p["hint_c"]) for p in tied] == [(16384, "", "first")]
    # 269.0 is within TIE_BAND of the best move (267.3); the chunk of 8192 (271.5) is past it
    assert interacting_time(tied[0]) <= 267.3 * (1 + TIE_BAND) < CHUNK_MS[8192]


def test_a_move_that_clearly_leads_keeps_one_path():
    space = interacting_hints()

    def clear_lead(point: dict) -> float:  # hint_c gains 0.3%: under the noise floor, no tie
        return interacting_time(point, hint_c_gain=0.8)

    ties = TiesPatternSearch(space, 0, max_neighbours=None, restarts=0)
    reach = ReachPatternSearch(space, 0, max_neighbours=None, restarts=0)
    assert walk_until_done(ties, space.default, clear_lead) == walk_until_done(reach, space.default, clear_lead)
    assert ties.past_centres == reach.past_centres


def centres_each_generation(strategy: TiesPatternSearch, time_ms) -> list[list[tuple]]:
    """Walk from the default, one whole generation per ask; the centres after each."""
    strategy.warm_start([timed(strategy.space.default, time_ms)])
    seen = []
    while batch := strategy.ask(1000):
        seen.append(sorted((c["chunk"], c["hint_a"], c["hint_c"]) for c in strategy.centres))
        strategy.tell([timed(p, time_ms) for p in batch])
    return seen


def test_both_tied_hints_become_paths_and_the_one_that_falls_behind_is_dropped():
    space = interacting_hints()
    seen = centres_each_generation(TiesPatternSearch(space, 0, max_neighbours=None, restarts=0), interacting_time)
    assert seen[0] == [(16384, "", "")]
    assert seen[1] == [(16384, "", "first"), (16384, "last", "")]  # 269.0 and 267.3: level
    assert seen[2][0] == (32768, "", "first")  # 252.6 leads the other path's best (264.3) by more than the band
    assert all(len(centres) == 1 for centres in seen[2:])
    assert max(len(centres) for centres in seen) == PATHS


def test_with_one_path_it_walks_as_pattern_reach():
    space = interacting_hints()
    one = TiesPatternSearch(space, 0, max_neighbours=None, restarts=0, paths=1)
    reach = ReachPatternSearch(space, 0, max_neighbours=None, restarts=0)
    assert walk_until_done(one, space.default, interacting_time) == \
        walk_until_done(reach, space.default, interacting_time)


def test_it_is_registered_takes_paths_and_has_a_source_of_its_own():
    assert get_strategy("pattern-ties") is TiesPatternSearch
    assert check_options("pattern-ties", {"paths": "3"}) == {"paths": 3}
    with pytest.raises(StrategyOptionError):
        check_options("pattern-ties", {"paths": "0"})
    with pytest.raises(ValueError):
        TiesPatternSearch(interacting_hints(), 0, paths=0)
    assert strategy_source("pattern-ties") != strategy_source("pattern-reach")
