"""Resuming a stopped session, and seeding a session from the default, heuristics and the cache."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from autotune.store.cache import Cache
from autotune.evaluators.fake import FakeEvaluator
from autotune.seeds import collect_seeds, parse_sources, shape_distance
from autotune.session import Session, SessionSettings
from autotune.strategies import get_strategy
from autotune.types import Status
from tests.conftest import hashed_cost


def smooth_cost(params):
    """A cost the pattern search can walk on; one config in 16 fails."""
    if hashed_cost(params) > 0.9375 * 2.0 + 0.1:
        return Status.COMPILE_ERROR
    return sum(abs(math.log2(v)) if isinstance(v, int) and v > 0 else 0.3 for v in params.values()) + 0.1


def _session(task, db, evaluator, strategy, resume=None, budget=40):
    settings = SessionSettings(strategy, 5, budget, generation_size=8, mode="gpu")
    return Session(task, evaluator, get_strategy(strategy)(task.space, seed=5), settings, db, resume_session=resume)


@pytest.mark.parametrize("strategy", ["random", "pattern", "evolution"])
@pytest.mark.parametrize("stop_after", [0, 1, 13, 30])
def test_a_resumed_session_equals_an_uninterrupted_one(helion_task, tmp_path, strategy, stop_after):
    whole_db = Cache.open(tmp_path / "whole.db", create=True)
    whole = _session(helion_task, whole_db, FakeEvaluator(smooth_cost), strategy).run()
    expected = [(r.generation, r.candidate.key, r.result.median_ms) for r in whole_db.session_evaluations(1)]

    db = Cache.open(tmp_path / "killed.db", create=True)
    with pytest.raises(KeyboardInterrupt):
        _session(helion_task, db, FakeEvaluator(smooth_cost, interrupt_after=stop_after), strategy).run()
    before = {r.candidate.key for r in db.session_evaluations(1)}
    assert db.session(1)["exit_reason"] == "interrupted"

    finisher = FakeEvaluator(smooth_cost)
    outcome = _session(helion_task, db, finisher, strategy, resume=1).run()
    after = [(r.generation, r.candidate.key, r.result.median_ms) for r in db.session_evaluations(1)]

    assert not before & set(finisher.calls), "a resumed session measured a config again"
    assert sorted(after) == sorted(expected)
    assert len({key for _, key, _ in after}) == len(after), "an evaluation was recorded twice"
    assert outcome.best[0].key == whole.best[0].key
    assert outcome.evaluations == whole.evaluations == 40
    assert db.session(1)["exit_reason"] == "budget"
    assert db.integrity_ok()


def test_baselines_are_measured_once_after_the_search_and_never_again_on_resume(triton_task, tmp_path):
    db = Cache.open(tmp_path / "t.db", create=True)
    evaluator = FakeEvaluator(hashed_cost, interrupt_after=5)
    evaluator._baselines = {"torch.softmax": 1.5}
    with pytest.raises(KeyboardInterrupt):
        _session(triton_task, db, evaluator, "random").run()
    assert db.baselines(session_id=1) == {}  # stopped during the search: the first config did not wait for them
    resumed = FakeEvaluator(hashed_cost, baselines={"torch.softmax": 9.9})
    outcome = _session(triton_task, db, resumed, "random", resume=1).run()
    assert outcome.baselines["torch.softmax"].median_ms == 9.9
    db.db.execute("UPDATE sessions SET exit_reason = 'interrupted'")  # as if killed in its final re-timing
    again = FakeEvaluator(hashed_cost, baselines={"torch.softmax": 4.2})
    outcome = _session(triton_task, db, again, "random", resume=1).run()
    assert outcome.baselines["torch.softmax"].median_ms == 9.9  # the recorded ones, not measured again
    assert len(db.db.execute("SELECT * FROM baselines").fetchall()) == 1
    search_started = db.search_started(1)
    assert search_started == db.session(1)["started"]  # baselines came after the search began


def test_parse_sources_rejects_unknown_names():
    assert parse_sources("default, cache") == ["default", "cache"]
    with pytest.raises(ValueError, match="unknown seed source"):
        parse_sources("default,magic")


def test_shape_distance_prefers_the_nearest_shape():
    assert shape_distance((4096, 32000), (4096, 32000)) == 0
    assert shape_distance((1024, 32000), (4096, 32000)) == pytest.approx(2.0)
    assert shape_distance((4096,), (4096, 32000)) == math.inf


def test_cache_seeds_come_from_the_nearest_recorded_shape(triton_task, tmp_path):
    """The best configs recorded for the same kernel are evaluated first, before the strategy."""
    db = Cache.open(tmp_path / "t.db", create=True)
    _session(triton_task, db, FakeEvaluator(hashed_cost), "random", budget=30).run()
    best = db.best_configs(triton_task.fingerprint, 3)
    assert len(best) == 3 and best[0][1].median_ms <= best[1][1].median_ms <= best[2][1].median_ms

    seeds = collect_seeds(triton_task, db, ["default", "cache"])
    assert [origin for origin, _ in seeds] == ["cache"] * 3
    assert [triton_task.candidate(p).key for _, p in seeds] == [
        triton_task.candidate_from_native(native).key for native, _ in best
    ]

    fresh_db = Cache.open(tmp_path / "u.db", create=True)
    evaluator = FakeEvaluator(hashed_cost)
    settings = SessionSettings("random", 9, 10, generation_size=4, mode="gpu")
    outcome = Session(triton_task, evaluator, get_strategy("random")(triton_task.space, seed=9), settings,
                      fresh_db, seeds=seeds).run()
    generation_zero = [r.candidate.key for r in fresh_db.session_evaluations(outcome.session_id) if r.generation == 0]
    assert generation_zero[1:] == [triton_task.candidate(p).key for _, p in seeds]
    assert outcome.evaluations == 10  # seeds count against the budget, the default does not
    assert outcome.best[1].median_ms <= best[0][1].median_ms


def test_heuristic_seeds_come_from_the_recorded_compiler_seeds(triton_task):
    import dataclasses

    space = dataclasses.replace(triton_task.space, extras={"compiler_seeds": [
        {"BLOCK_SIZE": 256, "num_warps": 2, "num_stages": 1},
        {"BLOCK_SIZE": 3, "num_warps": 2, "num_stages": 1},  # not in the space: skipped
    ]})
    task = dataclasses.replace(triton_task, space=space)
    seeds = collect_seeds(task, None, ["heuristic"])
    assert seeds == [("heuristic", {"BLOCK_SIZE": 256, "num_warps": 2, "num_stages": 1})]


def test_a_session_stopped_in_its_final_rebenchmark_resumes(triton_task, tmp_path):
    class Rebenchmarking(FakeEvaluator):
        def __init__(self, cost, fail: bool) -> None:
            super().__init__(cost)
            self.fail = fail

        def rebenchmark(self, candidates):
            if self.fail:
                raise KeyboardInterrupt
            return {c.key: r for c in candidates for r in self.evaluate([c])}

    db = Cache.open(tmp_path / "t.db", create=True)
    evaluator = Rebenchmarking(hashed_cost, fail=True)
    with pytest.raises(KeyboardInterrupt):
        _session(triton_task, db, evaluator, "random").run()
    first = {r.candidate.key for r in db.session_evaluations(1)}
    # a row of the cut-short re-benchmark, as if one result had been written before the kill
    row = db.session_evaluations(1)[0]
    db.record(1, triton_task.fingerprint, -1, 0, row.candidate, row.result)
    outcome = _session(triton_task, db, Rebenchmarking(hashed_cost, fail=False), "random", resume=1).run()
    final = [r for r in db.session_evaluations(1) if r.generation < 0]
    assert len(final) == 1 + len(outcome.rebenchmarked) and outcome.rebenchmarked
    assert {r.candidate.key for r in db.session_evaluations(1) if r.generation >= 0} == first
    assert db.session(1)["exit_reason"] == "budget"


def test_the_default_wins_when_its_re_timing_beats_the_top_candidates(triton_task, tmp_path):
    """Its first reading was slow (a cold GPU); the interleaved re-timing shows it is the fastest."""
    default_key = triton_task.default_candidate().key

    class ColdStart(FakeEvaluator):
        def evaluate(self, candidates):
            for candidate, result in zip(candidates, FakeEvaluator.evaluate(self, candidates)):
                yield replace(result, median_ms=10.0) if candidate.key == default_key else result

        def rebenchmark(self, candidates):
            results = {c.key: r for c in candidates for r in FakeEvaluator.evaluate(self, [c])}
            results[default_key] = replace(results[default_key], median_ms=1e-6)
            return results

    db = Cache.open(tmp_path / "t.db", create=True)
    outcome = _session(triton_task, db, ColdStart(hashed_cost), "random").run()
    assert default_key in outcome.rebenchmarked
    assert outcome.best[0].key == default_key and outcome.best[1].median_ms == 1e-6
    assert db.session(outcome.session_id)["best_key"] == default_key


def test_an_error_inside_a_session_is_recorded_as_its_exit_reason(triton_task, tmp_path):
    class Broken(FakeEvaluator):
        def evaluate(self, candidates):
            raise RuntimeError("device lost")

    db = Cache.open(tmp_path / "t.db", create=True)
    with pytest.raises(RuntimeError):
        _session(triton_task, db, Broken(hashed_cost), "random").run()
    assert db.session(1)["exit_reason"] == "error: RuntimeError"


def test_a_session_killed_early_keeps_its_evaluators_calibration(triton_task, tmp_path):
    from autotune.types import Result

    db = Cache.open(tmp_path / "t.db", create=True)
    evaluator = FakeEvaluator(hashed_cost, interrupt_after=0)
    reference = triton_task.default_candidate().key
    evaluator.calibration = {f"gpu{i}": Result(key=reference, status=Status.OK, median_ms=ms, repetitions=10)
                             for i, ms in enumerate((0.50, 0.51))}
    with pytest.raises(KeyboardInterrupt):
        _session(triton_task, db, evaluator, "random").run()
    kept = db.calibrations(1)
    assert {worker: (r.key, r.median_ms) for worker, r in kept.items()} == {
        "gpu0": (reference, 0.50), "gpu1": (reference, 0.51)}
    assert db.session(1)["exit_reason"] == "interrupted"


def test_cache_seeds_recorded_at_another_shape_move_to_their_nearest_points_here(tmp_path):
    """The best configs at 64x5000 use blocks of 8192 that 64x1000 does not offer: they seed it
    as the nearest points (the block cut to the widest one here), once each, instead of not at all."""
    import torch

    from autotune.kernels import get_kernel
    from autotune.task import bind_live
    from search_spaces.space import InvalidConfig

    wide = bind_live(get_kernel("softmax-triton"), (64, 5000), torch.float16, "cpu")
    narrow = bind_live(get_kernel("softmax-triton"), (64, 1000), torch.float16, "cpu")
    db = Cache.open(tmp_path / "t.db", create=True)
    # wider blocks are faster at 64x5000, so its best configs use blocks this shape does not have
    cost = lambda p: 1.0 / p["BLOCK_SIZE"] + 1e-6 * p["num_warps"] + 1e-7 * p["num_stages"]  # noqa: E731
    _session(wide, db, FakeEvaluator(cost), "random", budget=60).run()
    best = [native for native, _ in db.best_configs(wide.fingerprint, 3)]
    assert all(native["BLOCK_SIZE"] == 8192 for native in best)
    for native in best:
        with pytest.raises(InvalidConfig):
            narrow.codec.params_of(native)

    seeds = collect_seeds(narrow, db, ["default", "cache"])
    assert seeds and {origin for origin, _ in seeds} == {"cache"}
    expected = []
    for native in best:
        point = {**native, "BLOCK_SIZE": 1024}
        if point not in expected:
            expected.append(point)
    assert [point for _, point in seeds] == expected
    assert all(narrow.space.violations(point) == [] for _, point in seeds)


def test_cache_seeds_take_the_best_of_each_nearest_shape_first(tmp_path):
    """With several recorded shapes, the cache seeds are the fastest config of each of the three
    nearest shapes, nearest first (not the nearest shape's three fastest, often variants of one
    config), and a farther shape gives none; with one recorded shape, its three fastest."""
    from autotune.kernels import get_kernel
    from autotune.seeds import CACHE_SEEDS, _points, nearest_shapes
    from autotune.task import bind_live

    assert nearest_shapes([(64, 512), (64, 128), (64, 256), (64, 128), (32, 128)], (64, 200), 3) == [
        (64, 256), (64, 128), (64, 512)]  # (32, 128) is a factor of two farther in rows
    spec = get_kernel("softmax-triton")
    target = bind_live(spec, (64, 200), torch.float16, "cpu")
    db = Cache.open(tmp_path / "t.db", create=True)
    best = {}
    for shape in [(64, 4096), (64, 256), (64, 1024), (64, 128)]:  # nearest to 200: 256, 128, 1024, 4096
        task = bind_live(spec, shape, torch.float16, "cpu")
        _session(task, db, FakeEvaluator(hashed_cost), "random", budget=12).run()
        best[shape] = [native for native, _ in db.best_configs(task.fingerprint, CACHE_SEEDS)]
    # Placed in the target's space as the cache source places configs from other shapes.
    expected = _points(target, [best[shape][0] for shape in [(64, 256), (64, 128), (64, 1024)]], moved=True)
    assert [p for _, p in collect_seeds(target, db, ["cache"])] == expected
    assert len(expected) >= 2  # the shapes' bests differ: more than one config

    one = Cache.open(tmp_path / "one.db", create=True)
    only = bind_live(spec, (64, 256), torch.float16, "cpu")
    _session(only, one, FakeEvaluator(hashed_cost), "random", budget=12).run()
    alone = _points(target, [native for native, _ in one.best_configs(only.fingerprint, CACHE_SEEDS)], moved=True)
    assert [p for _, p in collect_seeds(target, one, ["cache"])] == alone
