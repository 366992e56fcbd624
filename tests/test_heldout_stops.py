"""The held-out report's section on where the cold walks that stopped short stopped."""

from __future__ import annotations

from types import SimpleNamespace

from experiments.heldout import definition as d
from experiments.heldout.moves import GAIN
from experiments.heldout.stops import differences, last_gain, steps_apart, stopped_short, stops_json, stops_section
from search_spaces import Choice, PowerOfTwo, SearchSpace

PROBLEM = d.SOFTMAX[0]
BEST = {"hint[0]": "last", "hint[1]": "", "hint[2]": "first", "hint[3]": "", "num_warps": 16}


def test_exchanged_elements_of_one_list_are_a_swap_and_the_rest_plain_differences():
    ours = {"hint[0]": "last", "hint[1]": "first", "hint[2]": "", "hint[3]": "last", "num_warps": 32}
    swaps, others = differences(ours, BEST)
    assert swaps == [("hint[1]", "hint[2]")]
    assert others == [("hint[3]", "last", ""), ("num_warps", 32, 16)]


def test_each_element_is_in_one_swap_at_most_and_only_within_its_own_list():
    ours = {"a[0]": 1, "a[1]": 2, "a[2]": 2, "b[0]": 2, "c": 1}
    best = {"a[0]": 2, "a[1]": 1, "a[2]": 1, "b[0]": 1, "c": 2}
    swaps, others = differences(ours, best)
    assert swaps == [("a[0]", "a[1]")]  # a[2] would also pair with a[0]; b[0] is another list; c no list
    assert [name for name, _, _ in others] == ["a[2]", "b[0]", "c"]


def test_a_parameter_one_side_lacks_is_a_plain_difference_never_a_swap():
    swaps, others = differences({"a[0]": 1, "a[1]": 2}, {"a[0]": 2})
    assert swaps == [] and others == [("a[0]", 1, 2), ("a[1]", 2, None)]


def _run(arm: str, strategy: str, seed: int, final_ms: float, params: dict, *, curve: list | None = None,
         ended_by: str | None = None) -> SimpleNamespace:
    """A run whose search went from 4 s to 24 s after its job started."""
    return SimpleNamespace(problem=PROBLEM, arm=arm, strategy=strategy, seed=seed, session_id=100 + seed,
                           final_ms=final_ms, final_params=params, curve=curve or [], setup_s=4.0, wall_s=24.0,
                           ended_by=ended_by)


def test_only_cold_pattern_runs_of_current_sources_past_two_percent_are_read():
    summary = SimpleNamespace(problem=PROBLEM, best_ms=1.0, best_params=BEST)
    near = dict(BEST, num_warps=32)
    runs = [_run(d.COLD, "pattern-full", 1, 1.0 * (1 + d.WITHIN) + 1e-6, near),  # just past: read
            _run(d.COLD, "pattern-full", 2, 1.0 * (1 + d.WITHIN), near),  # within: not read
            _run(d.WARM_CACHE, "pattern-full", 3, 1.5, near),  # a warm arm
            _run(d.COLD, "evolution", 4, 1.5, near),  # not a pattern walk
            _run(d.COLD, "pattern (earlier version)", 5, 1.5, near),  # an earlier source
            _run(d.COLD, "pattern-ends", 6, None, None)]  # no answer
    stops = stopped_short([summary], runs)
    assert [(s.run.strategy, s.run.seed) for s in stops] == [("pattern-full", 1)]
    assert stops[0].others == [("num_warps", 32, 16)] and stops[0].moves == 1


def test_the_section_counts_runs_a_swap_away_and_their_distance():
    summary = SimpleNamespace(problem=PROBLEM, best_ms=1.0, best_params=BEST)
    swap_only = dict(BEST, **{"hint[1]": "first", "hint[2]": ""})
    swap_and_more = dict(swap_only, num_warps=32)
    other = dict(BEST, num_warps=8)
    stops = stopped_short([summary], [_run(d.COLD, "pattern-full", s, 1.1, p)
                                      for s, p in ((1, swap_only), (2, swap_and_more), (3, other))])
    lines = stops_section(stops)
    assert any(line.startswith(
        "3 such runs: 2 differ from the best by at least one swap, 1 by swaps alone; the median run is 2 "
        "single-parameter moves from the best (a swap counts as two). 0 have an ordered parameter two to 3 "
        "steps from the best's value (as far as `pattern-lines` looks before a path stops). They ended 3 with no "
        "reason recorded.") for line in lines)
    assert (f"| {PROBLEM.shape} | pattern-full | 2 | 102 | 1.100 | not recorded | - | hint[1] ↔ hint[2] | - | "
            "num_warps: 32 → 16 |") in lines
    rows = stops_json(stops)
    assert rows[1]["swaps"] == [["hint[1]", "hint[2]"]] and rows[1]["others"] == [
        {"parameter": "num_warps", "run": 32, "best": 16}]
    assert stops_section([])[-2] == "None."


def _space() -> SearchSpace:
    return SearchSpace(kernel="row", family="triton",
                       parameters=(PowerOfTwo(name="chunk", low=1024, high=131072, default_value=4096),
                                   PowerOfTwo(name="num_warps", low=1, high=32, default_value=4),
                                   Choice(name="maxnreg", choices=(None, 32, 64, 128, 256), default_value=None)),
                       default={"chunk": 4096, "num_warps": 4, "maxnreg": None})


def test_ordered_parameters_two_or_more_steps_apart_are_read_from_the_space():
    others = [("chunk", 8192, 32768), ("num_warps", 32, 16), ("maxnreg", 32, 256), ("gone", 1, 8),
              ("chunk", 3000, 8192)]  # one step; unordered (values far apart in the list); not in the space; off range
    assert steps_apart(_space(), others) == [("chunk", 2)]
    assert steps_apart(None, others) == []


def test_the_section_counts_runs_with_an_ordered_parameter_within_the_lines_reach():
    best = {"chunk": 32768, "num_warps": 32, "maxnreg": None}
    summary = SimpleNamespace(problem=PROBLEM, best_ms=1.0, best_params=best)
    runs = [_run(d.COLD, "pattern-orders", 1, 1.16, dict(best, chunk=8192)),  # two doublings down
            _run(d.COLD, "pattern-orders", 2, 1.10, dict(best, chunk=1024)),  # five: past the reach
            _run(d.COLD, "pattern-orders", 3, 1.05, dict(best, num_warps=16))]  # one step
    asked: list[list[int]] = []

    def read_spaces(ids: list[int]) -> dict:
        asked.append(ids)
        return {sid: _space() for sid in ids}

    stops = stopped_short([summary], runs, read_spaces)
    assert asked == [[101, 102, 103]]  # once, for the runs that stopped short only
    assert [s.far for s in stops] == [[("chunk", 2)], [("chunk", 5)], []]
    lines = stops_section(stops)
    assert any("1 have an ordered parameter two to 3 steps from the best's value" in line for line in lines)
    assert (f"| {PROBLEM.shape} | pattern-orders | 1 | 101 | 1.160 | not recorded | - | - | chunk: 2 | "
            "chunk: 8192 → 32768 |") in lines
    assert stops_json(stops)[0]["steps_apart"] == [{"parameter": "chunk", "steps": 2}]
    assert stopped_short([summary], runs[:1])[0].far == []  # no spaces given: nothing read as ordered


def test_the_last_gain_is_where_the_best_so_far_first_came_within_the_gain_of_its_end():
    # the search runs from 4 s to 24 s; the best so far reaches 1.004 at 9 s (within GAIN of the last
    # value, 1.0), and the last drop at 23 s is smaller than GAIN: the run stood from 9 s on
    assert GAIN == 0.005
    curve = [(5.0, 2.0), (9.0, 1.004), (23.0, 1.0)]
    assert last_gain(curve, 4.0, 24.0) == (9.0 - 4.0) / 20.0
    climbing = [(5.0, 2.0), (9.0, 1.2), (23.0, 1.0)]  # a gain of 20% near the end
    assert last_gain(climbing, 4.0, 24.0) == (23.0 - 4.0) / 20.0
    assert last_gain([(2.0, 1.0)], 4.0, 24.0) == 0.0  # a seed measured before the search counts as its start
    assert last_gain([], 4.0, 24.0) is None and last_gain(curve, None, 24.0) is None
    assert last_gain(curve, 24.0, 24.0) is None


def test_the_section_tells_runs_cut_while_climbing_from_runs_that_stood():
    summary = SimpleNamespace(problem=PROBLEM, best_ms=1.0, best_params=BEST)
    near = dict(BEST, num_warps=32)
    runs = [_run(d.COLD, "pattern-lines", 1, 1.2, near, curve=[(5.0, 2.0), (22.0, 1.2)], ended_by="seconds"),
            _run(d.COLD, "pattern-lines", 2, 1.2, near, curve=[(5.0, 1.2)], ended_by="seconds"),
            _run(d.COLD, "pattern-lines", 3, 1.2, near, curve=[(5.0, 2.0), (16.0, 1.2)], ended_by="budget")]
    stops = stopped_short([summary], runs)
    assert [s.last_gain for s in stops] == [0.9, 0.05, 0.6]
    lines = stops_section(stops)
    assert any("They ended 2 at their search limit, 1 at the config budget. 1 made their last gain in the last 25% "
               "of their search (still climbing when it ended), 1 in its first 50% (standing on their answer for "
               "the rest)." in line for line in lines)
    assert f"| {PROBLEM.shape} | pattern-lines | 1 | 101 | 1.200 | search limit | 0.90 | - | - | num_warps: 32 → 16 |" in lines
    assert f"| {PROBLEM.shape} | pattern-lines | 3 | 103 | 1.200 | config budget | 0.60 | - | - | num_warps: 32 → 16 |" in lines
    assert [(r["ended_by"], r["last_gain"]) for r in stops_json(stops)] == [("seconds", 0.9), ("seconds", 0.05),
                                                                          ("budget", 0.6)]
