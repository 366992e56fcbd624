"""The compile-floor check: where a floor binds, and the good configs it would have stopped."""

from __future__ import annotations

from experiments.compile_floor import Row, check


def session(sid: int, compiles: list[float], times: list[float]) -> list[Row]:
    return [Row(sid, True, c, t) for c, t in zip(compiles, times)]


def test_a_floor_counts_only_good_configs_past_it_in_sessions_where_it_binds():
    # session 1: median compile 0.1 s (10x = 1 s, under every floor); its best (1.0 ms) compiled in
    # 6 s and a config 3% slower in 3 s; a slow config (2.0 ms) compiled in 20 s and is not good.
    fast = session(1, [0.1] * 14 + [6.0, 3.0, 20.0], [5.0] * 14 + [1.0, 1.03, 2.0])
    # session 2: median compile 2 s (10x = 20 s, over every floor): its good 12 s compile is not counted
    slow = session(2, [2.0] * 16 + [12.0], [5.0] * 16 + [1.0])
    short = session(3, [0.1] * 5, [1.0] * 5)  # under 16 timed configs: no deadline would tighten
    failed = [Row(1, False, 0.01, None)]
    checks, sessions, good, longest = check(fast + slow + short + failed, floors=(2.5, 5.0, 10.0))
    assert sessions == 2 and good == 3 and longest == 12.0
    assert [(c.floor_s, c.sessions_bound, c.good_over) for c in checks] == [(2.5, 1, 2), (5.0, 1, 1), (10.0, 1, 0)]
