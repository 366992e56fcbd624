"""The GPU evaluator's process orchestration, driven on the CPU by fake worker targets.

The real workers compile and time on a GPU; these fakes speak the same pipe protocol and
hang, crash or fail on demand, so timeouts, crashes and worker replacement are tested here,
and, from the intervals the fakes log, that compiling overlaps timing while no timing ever
overlaps a smoke run or a compile worker's set-up.
"""

from __future__ import annotations

import time

import pytest

from autotune.evaluators.compile_deadline import CompileDeadline
from autotune.evaluators.gpu import GPUEvaluator
from autotune.evaluators.gpu_generation import MAX_ATTEMPTS
from autotune.types import Candidate, Status
from tests import fake_gpu_workers


def candidate(name: str, behaviour: str = "ok", ms: float = 1.0, **seconds: float) -> Candidate:
    """`seconds`: compile_s, run_s, bench_s (how long the fakes sleep in each step)."""
    return Candidate(params={"name": name}, native={"behaviour": behaviour, "ms": ms, "name": name, **seconds},
                     key=name)


def fake_evaluator(compile_workers: int, **timeouts: float) -> GPUEvaluator:
    options = {"compile_timeout_s": 2.0, "run_timeout_s": 2.0, "bench_timeout_s": 5.0, **timeouts}
    return GPUEvaluator("softmax-triton", (4, 8), "float16", device_name="fake", compile_workers=compile_workers,
                        compile_target=fake_gpu_workers.compile_target, bench_target=fake_gpu_workers.bench_target,
                        **options)


@pytest.fixture(scope="module")
def evaluator():
    gpu = fake_evaluator(2)
    yield gpu
    gpu.close()


def test_the_workers_set_up_phases_are_kept_for_the_session(evaluator):
    """What each worker reported with its 'ready' (the bench worker's, and the first compile
    worker's, which the evaluator waits for), under the worker's name."""
    assert evaluator.setup_phases["bench_context_s"] == 0.25
    assert set(evaluator.setup_phases) == {"bench_context_s", "compile_setup_s"}
    assert evaluator.setup_phases["compile_setup_s"] >= 0


def test_the_first_compile_worker_sets_up_beside_the_benchmark_worker(tmp_path, monkeypatch):
    """The evaluator's start waits for both, but not one after the other: the compile worker's
    set-up is granted while the benchmark worker's is still running."""
    log = tmp_path / "gpu.log"
    monkeypatch.setenv("FAKE_GPU_LOG", str(log))
    monkeypatch.setenv("FAKE_GPU_BENCH_SETUP_S", "1.5")
    monkeypatch.setenv("FAKE_GPU_SETUP_S", "0.2")
    fake_evaluator(1).close()
    intervals = read_log(log)
    assert len(intervals["benchsetup"]) == 1 and len(intervals["setup"]) == 1
    assert overlapping(intervals["benchsetup"], intervals["setup"])


@pytest.mark.parametrize("early", [True, False])
def test_the_other_compile_workers_set_up_at_the_start_unless_switched_off(tmp_path, monkeypatch, early):
    """Early set-ups (the default): the compile workers not waited for are granted their set-ups
    while the evaluator starts, as soon as the workers it waits for have their CUDA contexts (the
    driver makes contexts one after another), not when the first generation needs them (their
    set-ups then held its first timing back).  Switched off, the first generation grants them."""
    from autotune.evaluators import gpu

    log = tmp_path / "gpu.log"
    monkeypatch.setenv("FAKE_GPU_LOG", str(log))
    monkeypatch.setenv("FAKE_GPU_BENCH_CONTEXT_S", "0.5")
    monkeypatch.setenv("FAKE_GPU_BENCH_SETUP_S", "2.0" if early else "0")  # time for the others to boot
    monkeypatch.setattr(gpu, "EARLY_SETUPS", early)
    evaluator = fake_evaluator(3)
    ready = time.monotonic()
    try:
        results = list(evaluator.evaluate([candidate(f"c{i}", compile_s=0.05) for i in range(6)]))
    finally:
        evaluator.close()
    assert [r.status for r in results] == [Status.OK] * 6
    intervals = read_log(log)
    setups = intervals["setup"]
    assert len(setups) == 3
    context_made = intervals["benchcontext"][0][2]
    assert sum(start > context_made for _, start, _ in setups) >= 2  # compile-0's may start beside it, not the others
    # the first compile worker is always waited for; the other two set up before the start returned, or after
    assert sum(start < ready for _, start, _ in setups) == (3 if early else 1)


def test_every_failure_kind_is_classified_and_the_generation_goes_on(evaluator):
    kinds = {"a": "ok", "b": "compile_error", "c": "oor", "d": "hang_compile", "e": "hang_run",
             "f": "crash_compile", "g": "crash_run", "h": "nan", "i": "ok"}
    started = time.monotonic()
    results = {r.key: r for r in evaluator.evaluate([candidate(k, b, ms=ord(k) / 100) for k, b in kinds.items()])}
    elapsed = time.monotonic() - started
    assert set(results) == set(kinds)
    assert results["a"].status is Status.OK and results["a"].median_ms == pytest.approx(0.97)
    assert results["i"].status is Status.OK
    assert results["b"].status is Status.COMPILE_ERROR
    assert results["c"].status is Status.OUT_OF_RESOURCES
    assert results["d"].status is Status.COMPILE_TIMEOUT
    assert results["e"].status is Status.RUN_TIMEOUT and results["e"].compile_s == pytest.approx(0.05)
    assert results["f"].status is Status.CRASH and "during compile" in results["f"].error
    assert results["g"].status is Status.CRASH and "during run" in results["g"].error
    assert results["d"].compile_s is None and "compile did not finish within 2 s" in results["d"].error
    assert "run did not finish within 2 s" in results["e"].error
    assert results["h"].status is Status.WRONG_RESULT
    # two workers, two hangs of 2 s each and replacements booting in the background: no serial stalls
    assert elapsed < 20, f"the compile loop stalled for {elapsed:.1f} s"


def test_workers_are_replaced_after_kills(evaluator):
    first = [r.status for r in evaluator.evaluate([candidate("x", "crash_compile"), candidate("y", "hang_run")])]
    assert sorted(s.value for s in first) == ["crash", "run_timeout"]
    again = list(evaluator.evaluate([candidate(f"ok{i}", "ok", ms=1 + i) for i in range(5)]))
    assert [r.status for r in again] == [Status.OK] * 5


def test_rebenchmark_and_baselines(evaluator):
    rebench = evaluator.rebenchmark([candidate("p", ms=0.5), candidate("q", ms=0.7)])
    assert rebench["p"].median_ms == 0.5 and rebench["q"].repetitions == 5
    baselines = evaluator.baselines()
    assert {"torch.softmax", "torch.compile", "device copy"} <= set(baselines)


def test_a_kernel_that_cannot_be_set_up_is_reported_not_hung():
    with pytest.raises(Exception, match="could not set up|died while starting"):
        GPUEvaluator("softmax-triton", (4, 8), "float16", device_name="fake", compile_workers=1,
                     compile_target=fake_gpu_workers.compile_target, bench_target=_broken_bench)


def _broken_bench(conn, init):  # pragma: no cover - runs in a child process
    conn.send(("setup_failed", "no GPU here"))


# -- compiling overlaps timing; timing never overlaps a smoke run ----------------------------------
def read_log(path) -> dict[str, list[tuple[str, float, float]]]:
    """The fakes' log: kind -> [(key, start, end)]."""
    intervals: dict[str, list[tuple[str, float, float]]] = {}
    for line in path.read_text().splitlines():
        kind, key, start, end = line.split()
        intervals.setdefault(kind, []).append((key, float(start), float(end)))
    return intervals


def overlapping(first: list, second: list) -> list[tuple]:
    return [(a, b) for a in first for b in second if a[1] < b[2] and b[1] < a[2]]


CONFIGS = 48


def test_no_benchmark_is_in_flight_while_a_smoke_run_or_a_set_up_is(tmp_path, monkeypatch):
    log = tmp_path / "gpu.log"
    monkeypatch.setenv("FAKE_GPU_LOG", str(log))
    monkeypatch.setenv("FAKE_GPU_SETUP_S", "0.2")  # replacements set up mid-generation, on the GPU
    gpu = fake_evaluator(3)
    try:
        # long enough (about 4 s) for the crashed worker's replacement to boot and set up meanwhile,
        # even on two cores busy with other tests (24 configs, about 2 s, was once too short)
        configs = [candidate(f"c{i}", ms=1 + i, compile_s=0.15 + 0.03 * (i % 4), run_s=0.05, bench_s=0.05)
                   for i in range(CONFIGS)]
        configs[1] = candidate("crash", "crash_run", compile_s=0.05)
        results = {r.key: r for r in gpu.evaluate(configs)}
    finally:
        gpu.close()
    assert results["crash"].status is Status.CRASH
    assert all(r.ok and r.median_ms == 1 + int(key[1:]) for key, r in results.items() if key != "crash")
    intervals = read_log(log)
    # the crashing config runs once per attempt, each in a fresh worker (gpu_generation.MAX_ATTEMPTS)
    assert len(intervals["bench"]) == CONFIGS - 1 and len(intervals["run"]) == CONFIGS - 1 + MAX_ATTEMPTS
    first_compile = min(start for _, start, _ in intervals["compile"])
    assert [setup for setup in intervals["setup"] if setup[1] > first_compile], "no set-up mid-generation"
    assert overlapping(intervals["bench"], intervals["run"] + intervals["setup"]) == []
    # ... while compiling did overlap timing: this is no longer two phases one after the other
    assert overlapping(intervals["bench"], intervals["compile"])
    # each config request named the config timed next, when the parent knew it (the worker builds it ahead)
    order = [key for key, _, _ in sorted(intervals["bench"], key=lambda item: item[1])]
    named = dict(key.split(">") for key, _, _ in intervals.get("next", []))
    assert len(named) >= CONFIGS // 4
    assert all(order.index(after) == order.index(before) + 1 for before, after in named.items())


def test_building_ahead_can_be_turned_off_for_comparisons(tmp_path, monkeypatch):
    from autotune.evaluators import gpu_generation

    log = tmp_path / "gpu.log"
    monkeypatch.setenv("FAKE_GPU_LOG", str(log))
    monkeypatch.setattr(gpu_generation, "BUILD_AHEAD", False)
    gpu = fake_evaluator(2)
    try:
        assert all(r.ok for r in gpu.evaluate([candidate(f"o{i}", compile_s=0.02, bench_s=0.05) for i in range(8)]))
    finally:
        gpu.close()
    intervals = read_log(log)
    assert len(intervals["bench"]) == 8 and "next" not in intervals


def test_each_config_is_timed_with_the_module_its_own_compile_generated(tmp_path, monkeypatch):
    log = tmp_path / "gpu.log"
    monkeypatch.setenv("FAKE_GPU_LOG", str(log))
    gpu = fake_evaluator(3)
    try:
        configs = [candidate(f"g{i}", compile_s=0.02 * (i % 3), bench_s=0.04) for i in range(12)]
        assert all(r.ok for r in gpu.evaluate(configs))
    finally:
        gpu.close()
    intervals = read_log(log)
    expected = {f"g{i}": fake_gpu_workers.generated_module_for(f"g{i}")[0] for i in range(12)}
    for kind in ("generated", "nextgenerated"):  # with the config's request, and with the one naming it next
        pairs = [key.split(">") for key, _, _ in intervals[kind]]
        assert pairs and all(expected[config] == path for config, path in pairs)
    assert len(intervals["generated"]) == 12


def test_a_runner_built_ahead_is_used_once_for_its_own_config_and_a_failed_build_fails_then():
    from autotune.evaluators.gpu_worker import NextRunner, _BuildError

    built = []

    def build(native):
        built.append(native["name"])
        if native.get("broken"):
            raise _BuildError("CompilationError: bad tile")
        return lambda inputs: native["name"]

    ahead = NextRunner(build)
    ahead.prepare("a", {"name": "a"})
    assert ahead.take("a", {"name": "a"})(()) == "a" and built == ["a"]  # not built twice
    assert ahead.take("a", {"name": "a"})(()) == "a" and built == ["a", "a"]  # used once: built anew
    ahead.prepare("b", {"name": "b"})
    assert ahead.take("c", {"name": "c"})(()) == "c" and built == ["a", "a", "b", "c"]  # another config came
    ahead.prepare("d", {"name": "d", "broken": True})
    with pytest.raises(_BuildError, match="bad tile"):
        ahead.take("d", {"name": "d", "broken": True})
    assert built.count("d") == 1


def test_a_slow_compile_does_not_hold_back_the_others():
    gpu = fake_evaluator(2, compile_timeout_s=10.0)
    try:
        assert all(r.ok for r in gpu.evaluate([candidate("w0"), candidate("w1")]))  # both workers warm
        configs = [candidate("slow", ms=9.0, compile_s=2.0)]
        configs += [candidate(f"f{i}", ms=1 + i, compile_s=0.02, bench_s=0.02) for i in range(6)]
        started = time.monotonic()
        arrivals = {r.key: (time.monotonic() - started, r) for r in gpu.evaluate(configs)}
    finally:
        gpu.close()
    assert all(result.ok for _, result in arrivals.values())
    slow_at = arrivals.pop("slow")[0]
    assert slow_at >= 2.0
    latest_fast = max(at for at, _ in arrivals.values())
    assert latest_fast < 1.5, f"the fast configs waited for the slow compile ({latest_fast:.2f} s)"



def test_the_compile_limit_tightens_once_the_session_knows_its_compile_times():
    gpu = fake_evaluator(2, compile_timeout_s=3.0)
    gpu.compile_deadline = CompileDeadline(3.0, factor=10.0, floor_s=0.5, warmup=4)  # test-sized limit and floor
    try:
        first = list(gpu.evaluate([candidate("early hang", "hang_compile")]))  # nothing known yet: the limit
        assert first[0].status is Status.COMPILE_TIMEOUT and "within 3 s; worker killed" in first[0].error
        assert all(r.ok for r in gpu.evaluate([candidate(f"c{i}", compile_s=0.02) for i in range(4)]))
        started = time.monotonic()
        (hang,) = gpu.evaluate([candidate("hang", "hang_compile")])
        waited = time.monotonic() - started
    finally:
        gpu.close()
    assert hang.status is Status.COMPILE_TIMEOUT and waited < 5
    assert "within 0.5 s (10x this session's median compile time" in hang.error

@pytest.mark.parametrize("bench_s", [0.5, 3.0])  # the reply comes while draining / the worker is replaced
def test_an_early_stop_leaves_the_evaluator_usable(evaluator, bench_s):
    configs = [candidate("long", ms=5.0, bench_s=bench_s), candidate("bad", "compile_error", compile_s=0.2),
               candidate("more", compile_s=1.0), candidate("later", compile_s=1.0)]
    stream = evaluator.evaluate(configs)
    first = next(stream)  # the compile error, while "long" is being timed and the others compile
    assert first.key == "bad" and first.status is Status.COMPILE_ERROR
    started = time.monotonic()
    stream.close()
    assert time.monotonic() - started < 4
    again = {r.key: r for r in evaluator.evaluate([candidate(f"n{i}", ms=1 + i) for i in range(4)])}
    assert {key: (r.status, r.median_ms) for key, r in again.items()} == {
        f"n{i}": (Status.OK, 1 + i) for i in range(4)}  # no stale reply answered for another config


def test_closing_right_after_an_early_stop_does_not_wait_for_workers_to_boot(monkeypatch):
    """A session that runs out of time mid-generation stops the stream and closes the evaluator:
    the compile workers it abandoned mid-job must not be replaced by processes that are still
    importing (tens of seconds on a busy GPU machine) and then waited for one by one."""
    gpu = fake_evaluator(3, compile_timeout_s=60.0)
    try:
        stream = gpu.evaluate([candidate("bad", "compile_error", compile_s=0.2),
                               *(candidate(f"slow{i}", compile_s=30.0) for i in range(3))])
        assert next(stream).key == "bad"
        monkeypatch.setenv("FAKE_GPU_BOOT_S", "30")  # any worker started from now on boots slowly
        started = time.monotonic()
        stream.close()
    finally:
        gpu.close()
    assert time.monotonic() - started < 5
