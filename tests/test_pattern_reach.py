"""pattern-reach: pattern-lines' noise floor and line look on pattern-full's walk, whose first
paths start from the best given point alone (no path per program order)."""

from __future__ import annotations

from autotune.strategies import get_strategy, strategy_source
from autotune.strategies.options import check_options
from autotune.strategies.pattern_presets import FullPatternSearch
from autotune.strategies.pattern_line_look import NOISE_FLOOR
from autotune.strategies.pattern_presets import LinesPatternSearch
from autotune.strategies.pattern import START_ACROSS
from autotune.strategies.pattern_presets import ReachPatternSearch
from conftest import walk_until_done, walked_best_ms
from test_pattern_lines import CHUNK_MS, uneven_chunks, uneven_time


def test_the_first_points_are_the_default_s_neighbours_not_its_other_program_orders():
    space = uneven_chunks()
    reach = walk_until_done(ReachPatternSearch(space, 0), space.default, uneven_time, limit=1)
    lines = walk_until_done(LinesPatternSearch(space, 0), space.default, uneven_time, limit=1)
    # pattern-lines first measures the default in the other program order, alone
    assert len(lines) == 1 and space.changed(space.default, lines[0]) == [START_ACROSS]
    # pattern-reach goes straight to the default's neighbours, as pattern-full does
    full = walk_until_done(FullPatternSearch(space, 0), space.default, uneven_time, limit=1)
    assert reach == full


def test_its_first_start_is_one_path_where_pattern_lines_starts_one_in_each_program_order():
    space = uneven_chunks()
    reach = ReachPatternSearch(space, 0, restarts=0)
    walk_until_done(reach, space.default, uneven_time, limit=3)
    lines = LinesPatternSearch(space, 0, restarts=0)
    walk_until_done(lines, space.default, uneven_time, limit=3)
    assert len({c[START_ACROSS] for c in lines.past_centres}) == 2
    assert [c[START_ACROSS] for c in reach.past_centres] == ["flat"]


def test_it_keeps_the_line_look_that_crosses_the_slower_chunk():
    for seed in range(4):
        assert walked_best_ms(ReachPatternSearch, seed, uneven_chunks(), uneven_time) == CHUNK_MS[32768]
        # pattern-full's walk without the lines stops at 8192, where the next chunk up is slower
        assert walked_best_ms(FullPatternSearch, seed, uneven_chunks(), uneven_time) == CHUNK_MS[8192]


def test_a_walk_to_the_same_answer_measures_fewer_points_than_pattern_lines():
    # the persistent path pattern-lines keeps until it stops is the difference
    for seed in range(4):
        space = uneven_chunks()
        reach = walk_until_done(ReachPatternSearch(space, seed, restarts=0), space.default, uneven_time)
        lines = walk_until_done(LinesPatternSearch(space, seed, restarts=0), space.default, uneven_time)
        assert len(reach) < len(lines)


def test_it_is_registered_keeps_the_noise_floor_and_has_a_source_of_its_own():
    assert get_strategy("pattern-reach") is ReachPatternSearch
    assert ReachPatternSearch(uneven_chunks(), 0).min_improvement == NOISE_FLOOR
    assert check_options("pattern-reach", {"min_improvement": "0.002"}) == {"min_improvement": 0.002}
    assert strategy_source("pattern-reach") not in (strategy_source("pattern-lines"), strategy_source("pattern-full"))
