"""`autotune simulate`: the recorded-space oracle, the simulation loop and its statistics.

Hand-made recorded spaces whose answers are known: a 2-D grid whose time is a known bowl,
with a few failures and repeated measurements.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from autotune.store.cache import Cache
from autotune.cli import main
from autotune.simulation.landscape import landscape
from autotune.simulation.oracle import Outcome, RecordedSpace, point_text
from autotune.simulation.runner import NotSimulable, Trace, simulate
from autotune.simulation.stats import Spread, convergence_band, reach, summarise
from autotune.strategies.random_search import RandomSearch
from autotune.types import Candidate, Result, Status
from search_spaces.fingerprint import SpaceIdentity
from search_spaces.parameters import Ordinal
from search_spaces.space import SearchSpace, config_key

XS, YS = (1, 2, 4, 8, 16, 32), (1, 2, 3, 4, 5)
FAILING = {(32, 5), (32, 4)}


def bowl(x: int, y: int) -> float:
    """Known times: the unique optimum is x=8, y=3 (1.0 ms)."""
    return 1.0 + 0.1 * (math.log2(x) - 3) ** 2 + 0.05 * (y - 3) ** 2


def toy_space() -> SearchSpace:
    return SearchSpace(kernel="toy", family="triton",
                       parameters=(Ordinal("x", choices=XS, default_value=1), Ordinal("y", choices=YS, default_value=1)),
                       default={"x": 1, "y": 1})


def record_toy(path: Path, *, skip: set[tuple[int, int]] = frozenset()) -> str:
    """Every point of the toy grid but `skip`; (8, 3) measured twice (1.0 and 1.2 -> median 1.1)."""
    cache = Cache.open(path, create=True)
    space = toy_space()
    identity = SpaceIdentity(space=space, signature={"shape": [4, 4], "dtype": "float16"}, source_hash="t" * 24,
                             versions={"torch": "t", "triton": "t", "helion": "t"}, device="test-gpu")
    fingerprint = cache.put_space(identity)
    session = cache.start_session(kernel="toy", shape=(4, 4), dtype="float16", strategy="grid", seed=0, budget=None,
                                  seconds=1.0, fingerprint=fingerprint, device="test-gpu", versions={}, mode="gpu",
                                  options={})
    ordinal = 0
    for x in XS:
        for y in YS:
            if (x, y) in skip:
                continue
            params = {"x": x, "y": y}
            candidate = Candidate(params=params, native=params, key=config_key(params))
            times = [bowl(x, y)] if (x, y) != (8, 3) else [1.0, 1.2]
            for ms in times:
                if (x, y) in FAILING:
                    result = Result(key=candidate.key, status=Status.COMPILE_ERROR, compile_s=2.0, error="boom")
                else:
                    result = Result(key=candidate.key, status=Status.OK, median_ms=ms, compile_s=1.0, bench_s=0.5)
                cache.record(session, fingerprint, 0, ordinal, candidate, result)
                ordinal += 1
    cache.record(session, fingerprint, -1, 0, Candidate({"x": 1, "y": 1}, {"x": 1, "y": 1}, "rebench"),
                 Result(key="rebench", status=Status.OK, median_ms=0.001))  # a re-benchmark: never an oracle
    cache.end_session(session, "budget", None)
    cache.close()
    return fingerprint


@pytest.fixture
def recorded(tmp_path) -> RecordedSpace:
    path = tmp_path / "toy.db"
    fingerprint = record_toy(path)
    cache = Cache.open(path)
    try:
        return RecordedSpace.from_cache(cache, fingerprint)
    finally:
        cache.close()


# -- the oracle ---------------------------------------------------------------------------------
def test_oracle_answers_recorded_points_with_their_outcome(recorded):
    assert len(recorded.outcomes) == len(XS) * len(YS)
    assert recorded.valid_count == len(XS) * len(YS) - len(FAILING)
    assert recorded.answer({"x": 4, "y": 2}) == Outcome(Status.OK, pytest.approx(bowl(4, 2)), 1.5)
    assert recorded.answer({"y": 2, "x": 4}).time_ms == pytest.approx(bowl(4, 2))  # key order does not matter
    failed = recorded.answer({"x": 32, "y": 5})
    assert failed.status is Status.COMPILE_ERROR and failed.time_ms == math.inf and failed.cost_s == 2.0
    assert recorded.answer({"x": 8, "y": 3}).time_ms == pytest.approx(1.1)  # median of the repeats
    assert recorded.optimum_ms == pytest.approx(bowl(8, 2))  # 1.05: the repeated (8, 3) came out at 1.1
    assert recorded.space.cardinality() == len(XS) * len(YS)  # finite: exactly the recorded points


def test_the_simulated_space_is_only_what_was_recorded(tmp_path):
    path = tmp_path / "gappy.db"
    fingerprint = record_toy(path, skip={(1, 1), (2, 2)})
    cache = Cache.open(path)
    recorded = RecordedSpace.from_cache(cache, fingerprint)
    cache.close()
    assert not recorded.space.is_member({"x": 2, "y": 2})
    trace = simulate("random", recorded, budget=1000, seed=0)
    assert trace.evaluations == len(XS) * len(YS) - 2  # every recorded point once, then the strategy is done
    assert trace.not_recorded == 0 and trace.stopped == "strategy finished"


def test_an_unrecorded_point_is_answered_not_recorded_counted_and_costs_nothing(recorded):
    partial = {text: outcome for text, outcome in recorded.outcomes.items()
               if text != point_text({"x": 1, "y": 1})}
    leaky = RecordedSpace(recorded.label, recorded.fingerprint, recorded.device,
                          recorded.space.restricted_to(recorded.space.members), partial)
    trace = simulate("grid", leaky, budget=len(XS) * len(YS), seed=0)
    assert trace.not_recorded == 1
    index = [i for i, ms in enumerate(trace.times_ms) if ms == math.inf and trace.costs_s[i] == 0.0]
    assert len(index) == 1  # the grid's point (1, 1): counted, no time, no cost
    assert trace.evaluations == len(XS) * len(YS)


@pytest.mark.parametrize("strategy", ["random", "grid", "pattern", "tpe", "surrogate"])
def test_simulations_are_deterministic_budgeted_and_never_repeat(recorded, strategy):
    first = simulate(strategy, recorded, budget=12, seed=3)
    again = simulate(strategy, recorded, budget=12, seed=3)
    assert first.times_ms == again.times_ms and first.costs_s == again.costs_s
    assert first.evaluations <= 12
    assert first.not_recorded == 0


def test_different_seeds_explore_differently(recorded):
    runs = {tuple(simulate("random", recorded, budget=10, seed=s).times_ms) for s in range(5)}
    assert len(runs) > 1


def test_random_on_a_finite_space_is_a_permutation(recorded):
    trace = simulate("random", recorded, budget=len(XS) * len(YS), seed=7)
    expected = sorted(o.time_ms for o in recorded.outcomes.values())
    assert sorted(trace.times_ms) == expected  # each recorded point exactly once


def test_random_never_draws_a_point_it_was_warm_started_with(recorded):
    strategy = RandomSearch(recorded.space, seed=7)
    members = list(recorded.space.members)
    seeds = members[:3]
    strategy.warm_start([(dict(p), Result(key="", status=Status.OK, median_ms=1.0)) for p in seeds])
    drawn = []
    while batch := strategy.ask(4):
        drawn += batch
        strategy.tell([(p, Result(key="", status=Status.OK, median_ms=1.0)) for p in batch])
    assert sorted(map(point_text, drawn)) == sorted(map(point_text, members[3:]))  # the rest, each once


def test_a_strategy_that_needs_the_live_kernel_is_refused(recorded):
    with pytest.raises(NotSimulable):
        simulate("helion-lfbo", recorded, budget=5, seed=0)


# -- the statistics -------------------------------------------------------------------------
def test_reach_counts_evaluations_and_simulated_seconds():
    trace = Trace("t", 0, times_ms=[5.0, math.inf, 1.03, 1.01, 1.0], costs_s=[1.0, 2.0, 0.5, 0.25, 4.0])
    assert reach(trace, 1.0, 0.05) == (3, 3.5)
    assert reach(trace, 1.0, 0.01) == (4, 3.75)
    assert reach(trace, 1.0, 0.0) == (5, 7.75)
    assert reach(Trace("t", 0, times_ms=[2.0], costs_s=[1.0]), 1.0, 0.05) is None


def test_the_convergence_band_counts_runs_with_nothing_valid_yet_as_slowest():
    runs = [Trace("t", 0, times_ms=[2.0, 1.0], costs_s=[1.0, 1.0]),
            Trace("t", 1, times_ms=[math.inf, 3.0], costs_s=[1.0, 2.0]),  # a failure first
            Trace("t", 2, times_ms=[4.0], costs_s=[2.5])]  # nothing until 2.5 s
    q1, median, q3 = convergence_band(runs, 1.0, np.array([1.0, 2.5, 3.0]))
    # at 1 s only one run of three has a valid config: no median yet (not the lucky run's 2.0)
    assert np.isnan(median[0]) and np.isnan(q1[0])
    assert (q1[1], median[1]) == (2.5, 4.0) and np.isnan(q3[1])  # {1, 4, nothing}
    assert (q1[2], median[2], q3[2]) == (2.0, 3.0, 3.5)  # {1, 3, 4}


def test_spread_is_median_and_quartiles():
    spread = Spread.of([1, 2, 3, 4, 5])
    assert (spread.median, spread.q1, spread.q3, spread.count) == (3, 2, 4, 5)
    assert math.isnan(Spread.of([]).median)


def test_summary_on_known_traces():
    traces = [Trace("t", s, times_ms=list(times), costs_s=[1.0] * len(times))
              for s, times in enumerate([(3.0, 1.0), (3.0, 2.0), (1.5, 1.01)])]
    summary = summarise("t", traces, optimum_ms=1.0, budget=2)
    one, two, five = summary.reaches
    assert one.fraction == pytest.approx(2 / 3) and one.evaluations.median == 2
    assert five.fraction == pytest.approx(2 / 3)
    assert summary.final_regret.median == pytest.approx(0.01)
    assert summary.optimum_ratio.median == pytest.approx(1 / 1.01)


def test_model_based_search_beats_random_on_a_smooth_space():
    """On a 16x16 bowl, the surrogate reaches the optimum in far fewer evaluations than random."""
    values = tuple(range(16))
    space = SearchSpace(kernel="bowl", family="triton",
                        parameters=(Ordinal("a", choices=values, default_value=0),
                                    Ordinal("b", choices=values, default_value=0)), default={"a": 0, "b": 0})
    points = [{"a": a, "b": b} for a in values for b in values]
    outcomes = {point_text(p): Outcome(Status.OK, 1.0 + 0.02 * (p["a"] - 11) ** 2 + 0.03 * (p["b"] - 4) ** 2, 1.0)
                for p in points}
    bowl_space = RecordedSpace("bowl", "f" * 24, "test-gpu", space.restricted_to(points), outcomes)

    def median_evaluations(strategy: str) -> float:
        hits = [reach(simulate(strategy, bowl_space, budget=120, seed=s), 1.0, 0.0) for s in range(8)]
        return float(np.median([h[0] if h else 121 for h in hits]))

    surrogate, random_search = median_evaluations("surrogate"), median_evaluations("random")
    assert surrogate < 40 < random_search


def test_the_landscape_counts_configs_near_the_optimum_and_predicts_random_search(recorded):
    """The toy bowl: best 1.05 ms at (8, 2) and (8, 4), every other valid point at least 1.1;
    random search's hit rate within 2% follows the hypergeometric formula."""
    terrain = landscape(recorded)
    assert (terrain.recorded, terrain.valid, terrain.near_optimum) == (30, 28, 2)
    assert terrain.runner_up_ratio == pytest.approx(1.0)
    for budget in (1, 5, 20, 28, 29, 40):
        expected = 1 - math.comb(28, min(budget, 30)) / math.comb(30, min(budget, 30))
        assert terrain.random_hit_chance(budget) == pytest.approx(expected)
    assert terrain.random_hit_chance(0) == 0.0 and terrain.random_hit_chance(29) == 1.0
    runs = [simulate("random", recorded, budget=5, seed=seed) for seed in range(400)]
    hits = sum(min(run.times_ms) <= recorded.optimum_ms * 1.02 for run in runs) / len(runs)
    assert abs(hits - terrain.random_hit_chance(5)) < 0.08  # 0.310 expected; 400 runs: sd 0.023
    lone = landscape(RecordedSpace("spike", "s" * 24, "test-gpu", recorded.space, {
        **recorded.outcomes, point_text({"x": 1, "y": 1}): Outcome(Status.OK, 0.5, 1.0)}))
    assert lone.near_optimum == 1 and lone.runner_up_ratio == pytest.approx(0.5 / 1.05)
    assert lone.describe(10).startswith("1 of 28 valid configs (30 recorded) within 2% of the optimum; the second "
                                        "fastest is 0.476 of the optimum; 10 distinct random configs hit one with "
                                        "probability 33.3%")  # 10 of the 30


# -- the command ----------------------------------------------------------------------------
def test_simulate_command_prints_the_table_and_writes_plot_and_json(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    db = tmp_path / "toy.db"
    fingerprint = record_toy(db)
    plot, figures = tmp_path / "conv.png", tmp_path / "conv.json"
    code = main(["simulate", "toy", "--shape", "4x4", "--db", str(db), "--strategies", "random,pattern",
                 "--repeats", "5", "--budget", "10", "--plot", str(plot), "--json", str(figures)])
    out = capsys.readouterr().out
    assert code == 0
    assert "random" in out and "pattern" in out and "not_recorded" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    payload = json.loads(figures.read_text())  # strict JSON: no NaN or Infinity
    assert payload["space"] == fingerprint and payload["optimum_ms"] == pytest.approx(bowl(8, 2))
    assert [s["strategy"] for s in payload["summaries"]] == ["random", "pattern"]
    assert all(s["runs"] == 5 for s in payload["summaries"])
    assert "the space: 2 of 28 valid configs (30 recorded) within 2% of the optimum" in " ".join(out.split())
    assert payload["landscape"]["near_optimum"] == 2
    assert payload["landscape"]["random_hit_chance"] == pytest.approx(1 - math.comb(28, 10) / math.comb(30, 10))
    # each strategy's rate (simulated evaluations per wall second), in the JSON and on the screen
    assert set(payload["rates"]) == {"random", "pattern"} and all(rate > 0 for rate in payload["rates"].values())
    assert [s["rate"] for s in payload["summaries"]] == [payload["rates"]["random"], payload["rates"]["pattern"]]
    assert "random: 50 simulated evaluations in" in out and "evaluations/s)" in out


@pytest.mark.parametrize("flag", ["--plot", "--json"])
def test_simulate_into_a_missing_directory_is_refused_and_creates_nothing(tmp_path, capsys, flag):
    from conftest import assert_one_line_error

    db = tmp_path / "toy.db"
    record_toy(db)
    before = sorted(tmp_path.rglob("*"))
    target = tmp_path / "missing" / "deeper" / "out.file"
    code = main(["simulate", "toy", "--shape", "4x4", "--db", str(db), "--strategies", "random", "--repeats", "2",
                 "--budget", "3", flag, str(target)])
    out, err = capsys.readouterr()
    line = assert_one_line_error(code, out, err)
    assert flag in line and "does not exist" in line and "simulating" not in out
    assert not (tmp_path / "missing").exists() and sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize("args, message", [
    (["--strategies", "nope"], "unknown strategy"),
    (["--strategies", "helion-lfbo"], "cannot be simulated"),
    (["--shape", "4x5"], "no recorded measurements"),
    (["--shape", "4xx"], "malformed shape"),
    (["--repeats", "0"], "positive"),
])
def test_simulate_command_errors_are_one_line(tmp_path, capsys, args, message):
    db = tmp_path / "toy.db"
    record_toy(db)
    base = ["simulate", "toy", "--shape", "4x4", "--db", str(db)]
    for flag in ("--strategies", "--shape", "--repeats"):
        if flag in args and flag in base:
            index = base.index(flag)
            del base[index:index + 2]
    assert main(base + args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("autotune: error:") and message in err and "\n" not in err


def test_simulate_opens_the_shipped_file_read_only(tmp_path, capsys, monkeypatch):
    """`simulate --db cache.db` (the shipped file named as the user's) must not open it for writing."""
    db = tmp_path / "shipped.db"
    record_toy(db)
    opened = []
    original = Cache._open_file.__func__

    def spy(cls, path, **kwargs):
        opened.append((Path(path).name, kwargs.get("read_only", False)))
        return original(cls, path, **kwargs)

    monkeypatch.setattr(Cache, "_open_file", classmethod(spy))
    code = main(["simulate", "toy", "--shape", "4x4", "--db", str(db), "--shipped", str(db), "--strategies", "random",
                 "--repeats", "2", "--budget", "3"])
    capsys.readouterr()
    assert code == 0 and opened == [("shipped.db", True)]
