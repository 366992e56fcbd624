"""Helion's native autotune as a baseline, on the CPU through its seam (the autotune call is a
stand-in that writes Helion's CSV log), and the comparison experiment's pieces around it."""

from __future__ import annotations

import csv

import helion
import pytest
import torch

from autotune.baselines.helion_native import QUICK, native_kernel, pick_params, read_log, retime, run_native
from autotune.store.cache import Cache
from autotune.evaluators.fake import FakeEvaluator
from autotune.kernels import get_kernel
from autotune.session import SilentReporter, Session, SessionSettings
from autotune.strategies import get_strategy
from autotune.types import Result, Status
from conftest import hashed_cost
from search_spaces.space import InvalidConfig

LOG = [  # Helion's CSV log of a search: (timestamp_s, status, perf_ms), not in time order
    ("0.5", "started", ""), ("1.5", "ok", "0.30"), ("0.9", "ok", "0.40"), ("2.0", "error", ""),
    ("2.5", "ok", "0.20"),
]


def _fake_autotune(seen: dict):
    """Stands in for Helion's search: writes its log where the kernel's settings say, and picks."""

    def autotune(kernel, inputs):
        seen.update(effort=kernel.settings.autotune_effort, log=kernel.settings.autotune_log, inputs=inputs)
        with open(f"{kernel.settings.autotune_log}.csv", "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["timestamp_s", "config_index", "status", "perf_ms"])
            for index, (stamp, status, ms) in enumerate(LOG):
                writer.writerow([stamp, index, status, ms])
        return helion.Config(block_sizes=[8], num_warps=4)

    return autotune


def test_a_native_run_is_timed_and_its_timeline_read_from_helions_log(tmp_path):
    seen: dict = {}
    clock = iter([100.0, 112.5])
    run = run_native(get_kernel("softmax"), (32, 128), torch.float16, tmp_path / "quick", device="cpu",
                     autotune=_fake_autotune(seen), clock=lambda: next(clock))
    assert seen["effort"] == QUICK and seen["log"] == str(tmp_path / "quick")
    (x,) = seen["inputs"]
    assert x.shape == (32, 128) and x.dtype == torch.float16
    assert run.wall_s == pytest.approx(12.5) and run.config == {"block_sizes": [8], "num_warps": 4}
    assert run.timeline == ((0.9, 0.4), (1.5, 0.3), (2.0, float("inf")), (2.5, 0.2)) and run.configs == 4
    record = run.to_record()
    assert record["kernel"] == "softmax" and record["configs"] == 4 and record["timeline"][0] == [0.9, 0.4]


def test_the_registered_kernel_is_left_as_it_was(tmp_path):
    spec = get_kernel("softmax")
    kernel = native_kernel(spec, "full", tmp_path / "log")
    assert kernel is not spec.helion_kernel and kernel.settings.autotune_effort == "full"
    assert spec.helion_kernel.settings.autotune_log != str(tmp_path / "log")


def test_only_helion_kernels_have_a_native_autotune(tmp_path):
    with pytest.raises(ValueError, match="Helion kernels only"):
        native_kernel(get_kernel("softmax-triton"), QUICK, tmp_path / "log")


def test_no_log_is_an_empty_timeline(tmp_path):
    assert read_log(tmp_path / "missing.csv") == ()


class _Retimer(FakeEvaluator):
    def rebenchmark(self, candidates):
        return {c.key: Result(key=c.key, status=Status.OK, median_ms=0.123) for c in candidates}


def test_the_pick_is_retimed_by_our_harness_or_refused(helion_task):
    pick = helion_task.default_candidate().native
    result = retime(helion_task, _Retimer(hashed_cost), pick)
    assert result is not None and result.median_ms == 0.123
    with pytest.raises(InvalidConfig):
        retime(helion_task, _Retimer(hashed_cost), {"block_sizes": [3, 3, 3, 3]})


# -- the comparison experiment: timelines taken as results arrive ----------------------------------
def test_the_session_timeline_holds_each_search_time_result_in_order(triton_task, tmp_path):
    from experiments.strategies_vs_helion import TimelineReporter, time_to_within

    class Rebenchmarking(FakeEvaluator):
        def rebenchmark(self, candidates):
            return {c.key: r for c, r in zip(candidates, self.evaluate(candidates))}

    reporter = TimelineReporter(SilentReporter())
    journal = Cache.open(tmp_path / "j.db", create=True)
    settings = SessionSettings("random", 0, 6, generation_size=3, mode="gpu")
    outcome = Session(triton_task, Rebenchmarking(hashed_cost), get_strategy("random")(triton_task.space, seed=0),
                      settings, journal, reporter=reporter).run()
    rows = [r for r in journal.session_evaluations(outcome.session_id) if r.generation >= 0]
    assert len(rows) == 7 and outcome.rebenchmarked  # the default, 6 configs; the re-benchmark left out
    assert [ms for _, ms in reporter.timeline] == [r.result.median_ms for r in rows]
    seconds = [s for s, _ in reporter.timeline]
    assert seconds == sorted(seconds) and seconds[0] >= 0
    best = min(r.result.median_ms for r in rows)
    assert time_to_within(reporter.timeline, best)[1] == 1 + [r.result.median_ms for r in rows].index(best)
    journal.close()


def test_fault_injection_finds_the_sessions_after_an_id_without_sql(tmp_path):
    from experiments import fault_injection as experiment

    cache = Cache.open(tmp_path / "f.db", create=True)
    for index in range(20):
        cache.start_session(kernel="faulty" if index % 2 else "softmax", shape=(8,), dtype="float32",
                            strategy="grid", seed=0, budget=1, seconds=None, fingerprint="f", device="cpu",
                            versions={}, mode="gpu", options={})
    assert [s["id"] for s in experiment.sessions_after(cache, 3)] == list(range(4, 21))
    assert experiment.sessions_after(cache, 20) == []
    cache.close()
    assert experiment.last_session_id(tmp_path / "f.db") == 20
    assert experiment.last_session_id(tmp_path / "none.db") == 0
    session, rows = experiment.read_back(tmp_path / "f.db", 4)
    assert session["id"] == 6 and session["kernel"] == "faulty" and rows == {}


def test_strategies_vs_helion_reports_cold_and_warm_sessions_apart(triton_task, tmp_path):
    """Each session records what it started from; read back, cold and warm ones land in tables of
    their own, naming their seed_from and the origin of their best config."""
    import random
    import sqlite3

    from experiments.strategies_vs_helion import contender_tables, session_options, started_from

    journal = Cache.open(tmp_path / "s.db", create=True)
    seeds = [("heuristic", triton_task.space.sample(random.Random(n))) for n in (3, 4)]
    fast = {triton_task.candidate(seeds[0][1]).key}
    cost = lambda p: 0.05 if triton_task.candidate(p).key in fast else hashed_cost(p)  # noqa: E731 - the seed wins
    rows = {}
    for label, seed_from, given in (("random", "default", []), ("random (heuristic)", "default,heuristic", seeds)):
        settings = SessionSettings("random", 0, 5, generation_size=3, mode="gpu")
        outcome = Session(triton_task, FakeEvaluator(cost), get_strategy("random")(triton_task.space, seed=0), settings,
                          journal, options=session_options(seed_from, given, "64x1000"), seeds=given).run()
        rows[label] = {"session": outcome.session_id, "wall_s": 1.0, "configs": outcome.evaluations,
                       "final_ms": outcome.best[1].median_ms, "timeline": [(0.5, outcome.best[1].median_ms)],
                       **started_from(journal, outcome.session_id)}
    journal.close()
    with sqlite3.connect(tmp_path / "s.db") as connection:
        best_origin = {sid: connection.execute(
            "SELECT origin FROM evaluations WHERE session_id = ? AND status = 'ok' ORDER BY median_ms, id LIMIT 1",
            (sid,)).fetchone()[0] for sid in (rows["random"]["session"], rows["random (heuristic)"]["session"])}
    assert rows["random"]["start"].kind == "cold" and rows["random (heuristic)"]["start"].kind == "warm"
    assert best_origin[rows["random (heuristic)"]["session"]] == "heuristic"
    text = "\n".join(contender_tables(rows, None, 0.05, 0.2, 10**6))
    cold, warm = text.split("## Warm starts")
    assert "## Cold starts" in cold and "| random | cold: default (no seeds) |" in cold and "heuristic)" not in cold
    assert "| random (heuristic) | warm: default,heuristic (2 heuristic) | heuristic |" in warm
    assert f"| {best_origin[rows['random']['session']]} |" in cold


def test_pick_params_takes_a_pick_past_our_thread_limit_into_the_space_without_it():
    """Helion's pick within our elements-per-thread limit is a point of the usual space; one past
    it (512 values a thread) a point of the space without the limit, with the reason; one that
    fits neither (a tile past Triton's 2**20 elements) is refused."""
    spec = get_kernel("softmax")
    within = {"block_sizes": [8], "reduction_loops": [None], "num_warps": 4}
    pick = pick_params(spec, (64, 1000), torch.float16, "cpu", within)
    assert pick.past_thread_limit is None and pick.thread_limit and pick.params["block_sizes[0]"] == 8
    assert pick.task.space.violations(pick.params) == []
    limited = pick.task.space.constraints
    pick = pick_params(spec, (64, 1000), torch.float16, "cpu", {**within, "block_sizes": [64]})
    assert "exceeds 128" in pick.past_thread_limit and not pick.thread_limit and pick.params["block_sizes[0]"] == 64
    assert len(pick.task.space.constraints) == len(limited) - 1 and pick.task.space.violations(pick.params) == []
    with pytest.raises(InvalidConfig, match="exceeds"):
        pick_params(spec, (1024, 65536), torch.float16, "cpu", {**within, "block_sizes": [32]})
