"""pattern-ends: the plain pattern walk, plus a look at each ordered parameter's far ends before
a path stops.  The landscape below has the shape met on a long-row softmax: a looped chunk
whose best is in the middle of its range, and the range's top (the whole row, no loop) faster
still, behind slower values."""

from __future__ import annotations

import pytest

from autotune.strategies.pattern import PatternSearch
from autotune.strategies.pattern_presets import EndsPatternSearch
from conftest import walk_until_done
from search_spaces import Ordinal, PowerOfTwo, ProductLimit, SearchSpace, params_key

WHOLE_ROW = 65536


def row_space() -> SearchSpace:
    return SearchSpace(
        kernel="row", family="triton",
        parameters=(PowerOfTwo(name="chunk", low=256, high=WHOLE_ROW, default_value=1024),
                    PowerOfTwo(name="num_warps", low=1, high=32, default_value=4),
                    Ordinal(name="order", choices=("a", "b"), default_value="a")),
        # at most 64 values a thread: the whole row needs 32 warps
        constraints=(ProductLimit(names=("chunk",), limit=64, per=("num_warps",), per_scale=32),),
        default={"chunk": 1024, "num_warps": 4, "order": "a"},
    )


def row_time(point: dict) -> float:
    """Looped chunks are best at 8192 and slow down either side; the whole row is 10% faster
    than the best looped chunk; more warps help a little everywhere."""
    chunk, warps = point["chunk"], point["num_warps"]
    base = 0.90 if chunk == WHOLE_ROW else 1.0 + 0.08 * abs((chunk.bit_length() - 1) - 13)
    return base * (1 + 0.02 * (5 - (warps.bit_length() - 1))) * (1.0 if point["order"] == "a" else 1.01)


def run(strategy, limit: int = 400) -> list[dict]:
    """Ask and tell until the strategy stops; the points asked, in order."""
    return walk_until_done(strategy, row_space().default, row_time, limit)


def best_time(strategy) -> float:
    return strategy.best()[1].median_ms


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_plain_walk_stalls_in_the_middle_and_the_end_moves_reach_the_top(seed):
    plain, ends = PatternSearch(row_space(), seed, restarts=0), EndsPatternSearch(row_space(), seed, restarts=0)
    run(plain), run(ends)
    assert plain.best()[0]["chunk"] == 8192
    assert ends.best()[0]["chunk"] == WHOLE_ROW and ends.best()[0]["num_warps"] == 32
    assert best_time(ends) < best_time(plain) * 0.95


def test_end_moves_are_the_farthest_values_the_constraints_allow():
    strategy = EndsPatternSearch(row_space(), 0)
    centre = {"chunk": 8192, "num_warps": 8, "order": "a"}
    moves = {(m["chunk"], m["num_warps"], m["order"]) for m in strategy.end_moves(centre)}
    # chunk: 256 at the bottom; at the top 65536 needs 32 warps, so 16384 (= 64 a thread of 8 warps)
    # is as far as it goes, and it is one step away (an ordinary neighbour), so it is left out.
    # warps: 1 is below the limit at this chunk (8192 / 32 > 64), so 4 is the lowest allowed, and
    # it is one step away; 32 at the top.  The unordered parameter has no ends.
    assert moves == {(256, 8, "a"), (8192, 32, "a")}


def test_end_moves_are_asked_only_once_a_path_stalls_and_once_per_centre():
    strategy = EndsPatternSearch(row_space(), 1, restarts=0)
    asked = run(strategy)
    keys = [params_key(p) for p in asked]
    assert len(keys) == len(set(keys))
    first_top = next(i for i, p in enumerate(asked) if p["chunk"] == WHOLE_ROW)
    # before the first end move, the walk has reached the middle of the chunk range
    assert any(p["chunk"] == 8192 for p in asked[:first_top])
    assert strategy._probed  # the stalled centres were probed, each once (never re-asked above)

