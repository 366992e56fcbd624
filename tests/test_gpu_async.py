"""The GPU evaluator behind the asynchronous interface (submit / poll / cancel), driven on the
CPU by the fake worker targets: a slow compile holds nobody (the others are compiled, timed and
returned before it ends), a compile past its deadline is killed without holding the others and
the deadline adapts while configs are out, a dying worker still costs only its config (tried
MAX_ATTEMPTS times), the session keeps configs in flight through it, and baselines are still
timed in a fresh benchmark process."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from autotune.store.cache import Cache
from autotune.evaluators.base import InOrder, is_asynchronous
from autotune.evaluators.compile_deadline import CompileDeadline
from autotune.evaluators.fake import FakeEvaluator
from autotune.evaluators.gpu import GPUEvaluator
from autotune.evaluators.gpu_generation import MAX_ATTEMPTS
from autotune.session import Session, SessionSettings
from autotune.strategies import get_strategy
from autotune.types import Candidate, Result, Status
from tests import fake_gpu_workers
from tests.test_gpu_orchestration import candidate, read_log

WAIT_S = 60.0  # no test waits longer than this for its results


def async_evaluator(compile_workers: int = 2, **timeouts: float) -> GPUEvaluator:
    options = {"compile_timeout_s": 20.0, "run_timeout_s": 20.0, "bench_timeout_s": 20.0, **timeouts}
    return GPUEvaluator("softmax-triton", (4, 8), "float16", device_name="fake", compile_workers=compile_workers,
                        compile_target=fake_gpu_workers.compile_target, bench_target=fake_gpu_workers.bench_target,
                        asynchronous=True, **options)


def collect(gpu: GPUEvaluator, count: int) -> list[tuple[Result, float]]:
    """Poll until `count` results are back (each with when it came), failing past WAIT_S."""
    arrived: list[tuple[Result, float]] = []
    deadline = time.monotonic() + WAIT_S
    while len(arrived) < count:
        assert time.monotonic() < deadline, f"only {len(arrived)} of {count} results came back"
        arrived += [(result, time.monotonic()) for result in gpu.poll(0.2)]
    return arrived


@pytest.fixture
def env(tmp_path, monkeypatch) -> Path:
    """The fakes log to `gpu.log` and remember first deaths under `marks`."""
    (tmp_path / "marks").mkdir()
    monkeypatch.setenv("FAKE_GPU_LOG", str(tmp_path / "gpu.log"))
    monkeypatch.setenv("FAKE_GPU_MARKS", str(tmp_path / "marks"))
    return tmp_path


def test_a_slow_compile_holds_nobody_and_the_others_are_timed_in_the_order_they_ran(env):
    gpu = async_evaluator(2)
    try:
        assert is_asynchronous(gpu) and gpu.slots() == 4
        quick = [candidate(f"q{i}", ms=1 + i, compile_s=0.05) for i in range(6)]
        gpu.submit([candidate("slow", compile_s=4.0), *quick[:3]])
        gpu.submit(quick[3:])  # submitted while the first ones are out
        arrived = collect(gpu, 7)
    finally:
        gpu.close()
    keys = [result.key for result, _ in arrived]
    assert keys[-1] == "slow" and set(keys[:-1]) == {c.key for c in quick}
    assert all(result.status is Status.OK for result, _ in arrived), arrived
    slow_compile = [(s, e) for k, s, e in read_log(env / "gpu.log")["compile"] if k == "slow"][0]
    benches = {k: (s, e) for k, s, e in read_log(env / "gpu.log")["bench"]}
    # every quick config was timed, and returned, before the slow one finished compiling
    assert all(benches[c.key][1] < slow_compile[1] for c in quick)
    assert all(when < slow_compile[1] for result, when in arrived if result.key != "slow")
    # timed in the order they reached the benchmark queue, which is the order they ran
    runs = [k for k, _, _ in sorted(read_log(env / "gpu.log")["run"], key=lambda row: row[2])]
    timed = [k for k, _, _ in sorted(read_log(env / "gpu.log")["bench"], key=lambda row: row[1])]
    assert timed == runs


def test_a_compile_past_its_deadline_is_killed_without_holding_the_others(env):
    gpu = async_evaluator(2, compile_timeout_s=3.0)
    try:
        gpu.submit([candidate("hang", "hang_compile"), *[candidate(f"q{i}", compile_s=0.05) for i in range(4)]])
        started = time.monotonic()
        arrived = collect(gpu, 5)
    finally:
        gpu.close()
    results = {result.key: (result, when - started) for result, when in arrived}
    assert results["hang"][0].status is Status.COMPILE_TIMEOUT
    assert "compile did not finish within 3 s" in results["hang"][0].error
    assert results["hang"][1] >= 3.0
    assert all(results[f"q{i}"][0].status is Status.OK and results[f"q{i}"][1] < 3.0 for i in range(4)), results


def test_the_compile_limit_adapts_while_configs_are_out(env):
    """One stream, no generation boundary: a hang dispatched before the session knows its
    compile times gets the user's limit; one dispatched after, the tightened one."""
    gpu = async_evaluator(2, compile_timeout_s=3.0)
    gpu.compile_deadline = CompileDeadline(3.0, factor=10.0, floor_s=0.5, warmup=4)  # test-sized limit and floor
    try:
        gpu.submit([candidate("early hang", "hang_compile"), *[candidate(f"c{i}", compile_s=0.02) for i in range(4)]])
        first = {result.key: result for result, _ in collect(gpu, 4)}  # the quick ones, before the hang's limit
        assert set(first) == {f"c{i}" for i in range(4)}
        gpu.submit([candidate("late hang", "hang_compile")])
        later = {result.key: (result, when) for result, when in collect(gpu, 2)}
    finally:
        gpu.close()
    early, late = later["early hang"], later["late hang"]
    assert early[0].status is late[0].status is Status.COMPILE_TIMEOUT
    assert "within 3 s; worker killed" in early[0].error
    assert "within 0.5 s (10x this session's median compile time" in late[0].error
    assert late[1] < early[1]  # the later hang was cut short first


def test_deaths_cost_only_their_configs_through_the_asynchronous_path_and_baselines_are_fresh(env):
    gpu = async_evaluator(2)
    kinds = {"ok1": "ok", "always-c": "crash_compile", "abort-b": "abort_bench", "once-c": "crash_once_compile",
             "ok2": "ok", "segv-c": "segv_compile", "ok3": "ok"}
    try:
        gpu.submit([candidate(key, behaviour) for key, behaviour in kinds.items()])
        results = {result.key: result for result, _ in collect(gpu, len(kinds))}
        assert gpu.poll(0.1) == []  # each config answered once
        baselines = gpu.baselines()
    finally:
        gpu.close()
    log = read_log(env / "gpu.log")
    attempts = [k for k, _, _ in log["attempt"]]
    for key in ("ok1", "ok2", "ok3"):
        assert results[key].status is Status.OK, results[key]
    assert results["once-c"].status is Status.OK and attempts.count("once-c") == 2
    assert results["always-c"].status is Status.CRASH and attempts.count("always-c") == MAX_ATTEMPTS
    assert f"{MAX_ATTEMPTS} attempts" in results["always-c"].error and "exit code 7" in results["always-c"].error
    assert "died during compile (killed by SIGSEGV)" in results["segv-c"].error
    assert results["abort-b"].status is Status.CRASH
    assert [k for k, _, _ in log["bench"]].count("abort-b") == MAX_ATTEMPTS
    assert "benchmark process died (killed by SIGABRT)" in results["abort-b"].error
    assert all(r.status is Status.OK for r in baselines.values()) and "device copy" in baselines
    served: dict[str, set[str]] = {}
    for entry, _, _ in log["request"]:
        kind, _key, pid = entry.split(":")
        served.setdefault(kind, set()).add(pid)
    assert not (served["baseline"] | served["copy"]) & served["config"]  # a fresh process, not one that timed


def test_cancel_drops_what_is_out_and_the_evaluator_goes_on(env):
    gpu = async_evaluator(1)
    try:
        gpu.submit([candidate("long", compile_s=30.0), candidate("never")])
        time.sleep(0.5)
        gpu.cancel()
        assert gpu.poll(0.2) == []
        started = time.monotonic()
        gpu.submit([candidate("after")])
        (result, _), = collect(gpu, 1)
        assert result.key == "after" and result.status is Status.OK
        assert time.monotonic() - started < 20.0  # not behind the cancelled compile
        assert [r.key for r in gpu.evaluate([candidate("sync")])] == ["sync"]  # the synchronous path still works
    finally:
        gpu.close()


def test_a_session_keeps_configs_in_flight_on_the_gpu_evaluator(triton_task, tmp_path, env):
    """The session drives the evaluator through async_search; told in ask order, it asks what a
    session on an in-order reference evaluator (the same times: the fakes' 1 ms) asks."""

    def run(evaluator, name: str) -> list[tuple[int, str, Status]]:
        db = Cache.open(tmp_path / f"{name}.db", create=True)
        settings = SessionSettings("random", 3, 12, generation_size=4, mode="gpu")
        outcome = Session(triton_task, evaluator, get_strategy("random")(triton_task.space, seed=3), settings, db).run()
        return sorted((row.generation, row.candidate.key, row.result.status)  # within a generation: by arrival
                      for row in db.session_evaluations(outcome.session_id))

    gpu = async_evaluator(2)
    try:
        rows = run(gpu, "async")
    finally:
        gpu.close()
    searched = [row for row in rows if row[0] >= 0]
    assert searched == run(InOrder(FakeEvaluator(lambda params: 1.0), slots=4), "reference")
    assert len(searched) == 13 and all(status is Status.OK for _, _, status in rows)
    assert any(generation < 0 for generation, _, _ in rows)  # the best re-timed once the search ended
    assert not gpu.compiles_ahead


def test_the_synchronous_path_stays_the_default():
    assert os.environ.get("AUTOTUNE_ASYNC_GPU", "0") == "0"
    gpu = GPUEvaluator("softmax-triton", (4, 8), "float16", device_name="fake", compile_workers=1,
                       compile_target=fake_gpu_workers.compile_target, bench_target=fake_gpu_workers.bench_target)
    try:
        assert not is_asynchronous(gpu)
    finally:
        gpu.close()
