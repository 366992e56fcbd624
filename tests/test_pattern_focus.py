"""pattern-focus: the pattern-full walk, whose exploration kicks draw their moves by how much
each parameter's single moves changed the time where the walk stopped.  The landscape below
has the shape met on a long-row softmax: a centre that only two moves together leave (more
warps' worth of parallelism and one load's eviction hint), among many parameters whose moves
change nothing measurable."""

from __future__ import annotations

import math

import pytest

from autotune.strategies.pattern import MAX_WEIGHT, MIN_WEIGHT
from autotune.strategies.pattern_presets import FocusPatternSearch
from autotune.strategies.pattern_presets import FullPatternSearch
from conftest import timed, walk_until_done
from search_spaces import Choice, PowerOfTwo, SearchSpace, params_key

FLAGS = 10  # parameters whose moves change (almost) nothing: a plateau around every point
TRAP = {"chunk": 8192, "warps": 32, "hint1": "first", "hint2": ""}
GOAL_MS = 0.92
# (warps, hint1, hint2) -> time at the chunk that pays; every other combination 1.10.  From the
# trap each single move is slower; 16 warps with hint1 dropped is a little faster, and from
# there hint2 pays.
TIMES = {(32, "first", ""): 1.00, (32, "", ""): 1.10, (16, "first", ""): 1.08, (32, "first", "first"): 1.04,
         (16, "", ""): 0.995, (16, "", "first"): GOAL_MS}
CHUNK = {4096: 1.05, 8192: 1.00, 16384: 1.09}  # any other chunk: 1.5x


def trap_space() -> SearchSpace:
    return SearchSpace(
        kernel="row", family="triton",
        parameters=(PowerOfTwo(name="chunk", low=256, high=65536, default_value=8192),
                    PowerOfTwo(name="warps", low=1, high=32, default_value=32),
                    Choice(name="hint1", choices=("", "first"), default_value=""),
                    Choice(name="hint2", choices=("", "first"), default_value=""),
                    *(Choice(name=f"flag{i}", choices=("a", "b"), default_value="a") for i in range(FLAGS))),
        default={"chunk": 8192, "warps": 32, "hint1": "", "hint2": "", **{f"flag{i}": "a" for i in range(FLAGS)}},
    )


def trap_time(point: dict) -> float:
    base = TIMES.get((point["warps"], point["hint1"], point["hint2"]), 1.10) * CHUNK.get(point["chunk"], 1.5)
    return base * (1 + 0.0005 * sum(point[f"flag{i}"] == "b" for i in range(FLAGS)))


def walk(strategy) -> list[dict]:
    """From the trap (the walk's given point) until the strategy stops."""
    return walk_until_done(strategy, {**trap_space().default, **TRAP}, trap_time, limit=600)


def escaped(cls, seed: int) -> bool:
    strategy = cls(trap_space(), seed, restarts=2)
    walk(strategy)
    return strategy.best()[1].median_ms == pytest.approx(GOAL_MS)


def told(point: dict) -> tuple:
    return timed(point, trap_time)


def test_weights_are_the_largest_change_each_parameter_s_measured_moves_made():
    space = trap_space()
    strategy = FocusPatternSearch(space, 0)
    centre = {**space.default, **TRAP}
    assert len(set(strategy.weights(centre).values())) == 1  # nothing measured: every parameter alike
    # Measured: the warps, hint2 and chunk moves and one flag's; not hint1's nor the other flags'.
    measured = [p for p in space.neighbours(centre, 1) if space.changed(centre, p)[0] in ("warps", "hint2",
                                                                                          "chunk", "flag0")]
    strategy.tell([told(centre), *map(told, measured)])
    weights = strategy.weights(centre)
    assert weights["warps"] == pytest.approx(math.log(1.08))  # 32 -> 16 (the only step from the top)
    assert weights["chunk"] == pytest.approx(math.log(1.09))  # the larger of its two moves
    assert weights["hint2"] == pytest.approx(math.log(1.04))
    assert weights["flag0"] == MIN_WEIGHT  # a change below the floor
    middle = sorted([math.log(1.08), math.log(1.09), math.log(1.04), math.log(1.0005)])[1:3]
    assert weights["hint1"] == weights["flag5"] == pytest.approx(sum(middle) / 2)  # unmeasured: the median


def test_a_move_that_alone_makes_the_time_far_worse_weighs_no_more_than_the_cap():
    space = trap_space()
    strategy = FocusPatternSearch(space, 0)
    centre = {**space.default, **TRAP, "chunk": 16384}  # one step up is 32768: 1.5 / 1.09 slower
    strategy.tell([told(centre), *map(told, space.neighbours(centre, 1))])
    weights = strategy.weights(centre)
    assert math.log(1.5 / 1.09) > MAX_WEIGHT and weights["chunk"] == MAX_WEIGHT
    assert weights["hint2"] == pytest.approx(math.log(1.04)) and math.log(1.04) < MAX_WEIGHT  # below: as measured


def test_a_kick_moves_each_parameter_once_and_mostly_the_ones_that_matter():
    space = trap_space()
    strategy = FocusPatternSearch(space, 4)
    centre = {**space.default, **TRAP}
    strategy.tell([told(centre), *map(told, space.neighbours(centre, 1))])
    kicks = strategy._kicks(centre, 40)
    assert kicks and len({params_key(k) for k in kicks}) == len(kicks)
    assert all(2 <= len(space.changed(centre, k)) <= 3 for k in kicks)
    meaningful = sum(len({"chunk", "warps", "hint1", "hint2"} & set(space.changed(centre, k))) for k in kicks)
    assert meaningful > 2 * len(kicks)  # of about three moves a kick, most on the four that matter


def test_from_the_trap_focused_kicks_escape_where_plain_ones_mostly_do_not():
    seeds = range(12)
    focus = sum(escaped(FocusPatternSearch, seed) for seed in seeds)
    full = sum(escaped(FullPatternSearch, seed) for seed in seeds)
    assert focus >= 11 and full <= 6, (focus, full)

