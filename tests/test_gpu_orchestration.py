"""The GPU evaluator's process orchestration, driven on the CPU by fake worker targets.

The real workers compile and time on a GPU; these fakes speak the same pipe protocol and
hang, crash or fail on demand, so timeouts, crashes and worker replacement are tested here.
"""

from __future__ import annotations

import time

import pytest

from autotune.evaluators.gpu import GPUEvaluator
from autotune.types import Candidate, Status
from tests import fake_gpu_workers


def candidate(name: str, behaviour: str = "ok", ms: float = 1.0) -> Candidate:
    return Candidate(params={"name": name}, native={"behaviour": behaviour, "ms": ms, "name": name}, key=name)


@pytest.fixture(scope="module")
def evaluator():
    gpu = GPUEvaluator("softmax-triton", (4, 8), "float16", device_name="fake", compile_workers=2,
                       compile_timeout_s=2.0, run_timeout_s=2.0, bench_timeout_s=5.0,
                       compile_target=fake_gpu_workers.compile_target, bench_target=fake_gpu_workers.bench_target)
    yield gpu
    gpu.close()


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
    assert results["f"].status is Status.CRASH and results["g"].status is Status.CRASH
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
