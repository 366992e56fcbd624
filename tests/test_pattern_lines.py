"""pattern-lines: the pattern-orders walk whose paths stop at the timing noise and then look a few
steps along each ordered parameter.  The landscape below has the shape met on a long-row softmax:
along the chunk, the next value up from the walk's optimum is slower (it tiles the row unevenly),
the whole row at the top end is slower too, and two doublings up is the fastest."""

from __future__ import annotations

from autotune.strategies import get_strategy, strategy_source
from autotune.strategies.options import check_options
from autotune.strategies.pattern_line_look import LINE_REACH, NOISE_FLOOR
from autotune.strategies.pattern_presets import LinesPatternSearch
from autotune.strategies.pattern import START_ACROSS
from autotune.strategies.pattern_presets import OrdersPatternSearch
from conftest import walk_until_done, walked_best_ms
from search_spaces import Choice, Integer, PowerOfTwo, SearchSpace

ORDERS = ("flat", "persistent_blocked")
CHUNK_MS = {1024: 1.5, 2048: 1.3, 4096: 1.1, 8192: 1.0, 16384: 1.18, 32768: 0.85, 65536: 1.2, 131072: 1.05}


def uneven_chunks() -> SearchSpace:
    return SearchSpace(
        kernel="row", family="triton",
        parameters=(Choice(name=START_ACROSS, choices=ORDERS, default_value="flat"),
                    PowerOfTwo(name="chunk", low=1024, high=131072, default_value=2048),
                    Choice(name="hint", choices=("", "last"), default_value="")),
        default={START_ACROSS: "flat", "chunk": 2048, "hint": ""},
    )


def uneven_time(point: dict) -> float:
    """The chunk sets the time; the persistent order costs 0.2 and the hint nothing."""
    return CHUNK_MS[point["chunk"]] + (0.2 if point[START_ACROSS] != "flat" else 0.0)


def test_a_walk_that_stops_where_the_next_chunk_is_slower_finds_the_one_two_doublings_up():
    for seed in range(4):
        assert walked_best_ms(LinesPatternSearch, seed, uneven_chunks(), uneven_time) == CHUNK_MS[32768]
        # the far-end look of pattern-orders takes 1024 and the whole row, both slower: it stops at 8192
        assert walked_best_ms(OrdersPatternSearch, seed, uneven_chunks(), uneven_time) == CHUNK_MS[8192]


def test_line_moves_are_each_ordered_parameter_two_to_line_reach_steps_away_inside_its_range():
    space = uneven_chunks()
    strategy = LinesPatternSearch(space, 0)
    centre = {START_ACROSS: "flat", "chunk": 2048, "hint": ""}
    moves = strategy.line_moves(centre)
    assert [m["chunk"] for m in moves] == [8192, 16384]  # 2 and 3 steps up; none exist 2 or 3 down
    assert all(m[START_ACROSS] == "flat" and m["hint"] == "" for m in moves)  # unordered ones stay
    middle = strategy.line_moves({**centre, "chunk": 8192})
    assert sorted(m["chunk"] for m in middle) == [1024, 2048, 32768, 65536]
    assert LINE_REACH == 3


def test_the_stall_look_adds_the_line_moves_to_pattern_orders_look_without_repeats():
    space = uneven_chunks()
    centre = {START_ACROSS: "flat", "chunk": 8192, "hint": ""}
    lines = LinesPatternSearch(space, 0).stall_moves(centre)
    orders = OrdersPatternSearch(space, 0).stall_moves(centre)
    assert lines[:len(orders)] == orders
    assert sorted(p["chunk"] for p in lines[len(orders):]) == [2048, 32768, 65536]  # 1024 is already an end
    keys = [tuple(sorted(p.items())) for p in lines]
    assert len(keys) == len(set(keys))


def noise_steps() -> SearchSpace:
    return SearchSpace(kernel="row", family="triton",
                       parameters=(Integer(name="hint", low=0, high=9, default_value=0),),
                       default={"hint": 0})


def noise_time(point: dict) -> float:
    """Each step along `hint` is 0.2% faster (below the noise floor, above pattern's own
    threshold) up to 8; the far end, 9, is slow."""
    return 2.0 if point["hint"] == 9 else round(0.998 ** point["hint"], 9)


def centres(seed: int, **options) -> list[int]:
    strategy = LinesPatternSearch(noise_steps(), seed, restarts=0, **options)
    walk_until_done(strategy, noise_steps().default, noise_time)
    return [c["hint"] for c in strategy.past_centres]


def test_a_path_moves_only_past_the_noise_floor_unless_told_a_smaller_one():
    assert LinesPatternSearch(noise_steps(), 0).min_improvement == NOISE_FLOOR
    for seed in range(3):
        # one step (0.2%) never pays; the look's third step (0.6%) does: 0 -> 3 -> 6, where the
        # next steps are at most 0.4% faster and the far end is slow
        assert sorted(set(centres(seed))) == [0, 3, 6]
        assert sorted(set(centres(seed, min_improvement=0.001))) == list(range(9))


def test_it_is_registered_takes_the_pattern_options_and_has_a_source_of_its_own():
    assert get_strategy("pattern-lines") is LinesPatternSearch
    assert check_options("pattern-lines", {"min_improvement": "0.002"}) == {"min_improvement": 0.002}
    assert strategy_source("pattern-lines") != strategy_source("pattern-orders")
