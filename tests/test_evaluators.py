"""Evaluators without a GPU: the fake, the replayer, failure classification, accuracy checks,
and the hand-written Triton softmax run under the Triton interpreter."""

from __future__ import annotations

from types import SimpleNamespace

import itertools
import math

import pytest
import torch

from autotune.evaluators.failures import classify_exception, short_error
from autotune.evaluators.fake import FakeEvaluator
from autotune.evaluators.replay import ReplayEvaluator
from autotune.evaluators.timing import Timing, TimingOptions, relative_error, repetitions, tolerance_for
from autotune.types import Result, Source, Status
from conftest import make_candidate, run_report_script

CANDIDATES = [make_candidate({"BLOCK_SIZE": b, "num_warps": w}) for b in (256, 512) for w in (2, 4)]


# -- the fake ------------------------------------------------------------------------------------


def test_fake_evaluator_times_and_failures():
    def cost(params):
        if params["num_warps"] == 4 and params["BLOCK_SIZE"] == 512:
            return Status.OUT_OF_RESOURCES
        return params["BLOCK_SIZE"] / 1000 + params["num_warps"] / 100

    fake = FakeEvaluator(cost, baselines={"torch.softmax": 0.3})
    results = list(fake.evaluate(CANDIDATES))
    assert [r.key for r in results] == [c.key for c in CANDIDATES]
    assert fake.calls == [c.key for c in CANDIDATES]
    for candidate, result in zip(CANDIDATES, results):
        assert result.source is Source.MEASURED
        if candidate.params == {"BLOCK_SIZE": 512, "num_warps": 4}:
            assert result.status is Status.OUT_OF_RESOURCES and not result.ok
            assert result.median_ms is None and result.objective == math.inf
            assert "out_of_resources" in result.error
        else:
            expected = candidate.params["BLOCK_SIZE"] / 1000 + candidate.params["num_warps"] / 100
            assert result.ok and result.median_ms == pytest.approx(expected)
            assert result.min_ms <= result.median_ms <= result.max_ms
            assert result.objective == result.median_ms
    baselines = fake.baselines()
    assert set(baselines) == {"torch.softmax"} and baselines["torch.softmax"].median_ms == 0.3
    fake.close()
    fake.close()


def test_fake_evaluator_is_lazy():
    """The session stops consuming when the clock runs out; configs not consumed were never run."""
    fake = FakeEvaluator(lambda p: 1.0)
    taken = list(itertools.islice(fake.evaluate(CANDIDATES), 2))
    assert len(taken) == 2
    assert fake.calls == [c.key for c in CANDIDATES[:2]]


# -- the replayer --------------------------------------------------------------------------------


def test_replay_answers_recorded_configs_and_counts_the_rest():
    a, b, c, d = CANDIDATES
    measurements = {
        a.key: [Result(key=a.key, status=Status.OK, median_ms=2.0), Result(key=a.key, status=Status.OK, median_ms=1.5,
                                                                          min_ms=1.4, max_ms=1.6, repetitions=9)],
        b.key: [Result(key=b.key, status=Status.COMPILE_ERROR, error="bad tile")],
        c.key: [],
    }
    baselines = {"torch.softmax": Result(key="torch.softmax", status=Status.OK, median_ms=0.9)}
    replay = ReplayEvaluator(measurements, baselines, description="replay of test data")
    results = {r.key: r for r in replay.evaluate([a, b, c, d])}
    assert set(results) == {a.key, b.key, c.key, d.key}
    # measured twice: the oracle's rule, the median of the OK medians (1.5 and 2.0), extremes and repetitions pooled
    assert results[a.key].median_ms == 1.75 and results[a.key].repetitions == 9
    assert (results[a.key].min_ms, results[a.key].max_ms) == (1.4, 2.0)
    assert results[a.key].status is Status.OK and results[a.key].source is Source.REPLAYED
    assert results[b.key].status is Status.COMPILE_ERROR and results[b.key].error == "bad tile"
    assert results[b.key].source is Source.REPLAYED
    for key in (c.key, d.key):
        assert results[key].status is Status.NOT_RECORDED and results[key].source is Source.REPLAYED
        assert results[key].objective == math.inf
    assert replay.not_recorded == 2
    list(replay.evaluate([d]))
    assert replay.not_recorded == 3
    assert replay.description == "replay of test data"
    replayed_baselines = replay.baselines()
    assert replayed_baselines["torch.softmax"].median_ms == 0.9
    assert replayed_baselines["torch.softmax"].source is Source.REPLAYED


# -- failure classification ----------------------------------------------------------------------


class CompilationError(Exception):
    """Stands in for triton.compiler.errors.CompilationError (classified by name and text)."""


class OutOfResources(Exception):
    pass


@pytest.mark.parametrize("phase", ["compile", "run"])
@pytest.mark.parametrize("error, expected", [
    ("out of resource: shared memory, Required: 262144, Hardware limit: 232448", Status.OUT_OF_RESOURCES),
    (RuntimeError("out of resource: shared memory, Required: 262144, Hardware limit: 232448"),
     Status.OUT_OF_RESOURCES),
    (OutOfResources("Required: 300000"), Status.OUT_OF_RESOURCES),
    (RuntimeError("CUDA error: an illegal memory access was encountered"), Status.CRASH),
    ("CUDA error: an illegal memory access was encountered", Status.CRASH),
    (RuntimeError("CUDA error: misaligned address"), Status.CRASH),
    (RuntimeError("CUDA error: device-side assert triggered"), Status.CRASH),
    # memory exhaustion is a resource limit, even though the message starts like a CUDA error
    (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), Status.OUT_OF_RESOURCES),
])
def test_classify_known_messages_in_either_phase(error, expected, phase):
    assert classify_exception(error, phase=phase) is expected


def test_classify_real_triton_out_of_resources():
    from triton.runtime.errors import OutOfResources as TritonOutOfResources

    error = TritonOutOfResources(262144, 232448, "shared memory")
    assert classify_exception(error, phase="compile") is Status.OUT_OF_RESOURCES


def test_classify_compile_errors_and_generic_failures():
    compile_error = CompilationError("at 12:8:\n    x = tl.load(ptr + offs)\n        ^\nIncompatibleTypeErrorImpl")
    assert classify_exception(compile_error, phase="compile") is Status.COMPILE_ERROR
    assert classify_exception("triton.compiler.errors.CompilationError: at 3:4: unsupported",
                              phase="compile") is Status.COMPILE_ERROR
    generic = ValueError("something unexpected")
    assert classify_exception(generic, phase="compile") is Status.COMPILE_ERROR
    assert classify_exception(generic, phase="run") is Status.CRASH
    assert all(s.failed for s in (classify_exception(generic, phase=p) for p in ("compile", "run")))


def test_short_error():
    assert short_error(ValueError("bad value")) == "ValueError: bad value"
    text = short_error("x" * 5000, limit=100)
    assert len(text) == 100 and text.endswith("...")
    assert short_error("  padded \n") == "padded"


# -- accuracy ------------------------------------------------------------------------------------


def _reference(shape=(16, 200), seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(shape, generator=generator, dtype=torch.float64), dim=-1)


def test_relative_error_of_equal_tensors_is_zero():
    ref = _reference()
    assert relative_error(ref.clone(), ref) == 0.0
    assert relative_error(ref.to(torch.float32), ref) < 1e-7
    assert relative_error(ref.to(torch.float16), ref) < 1e-3


def test_relative_error_is_infinite_for_nan_inf_and_shape_mismatch():
    ref = _reference()
    out = ref.clone()
    out[3, 7] = float("nan")
    assert relative_error(out, ref) == math.inf
    out = ref.clone()
    out[0, 0] = float("inf")
    assert relative_error(out, ref) == math.inf
    assert relative_error(ref[:, :-1].clone(), ref) == math.inf
    assert relative_error(ref.t().contiguous(), ref) == math.inf
    assert relative_error(ref.reshape(-1), ref) == math.inf
    assert relative_error(None, ref) == math.inf  # type: ignore[arg-type]


def test_relative_error_of_a_known_perturbation():
    ref = torch.ones(100, dtype=torch.float64)  # ||ref|| = 10
    out = ref.clone()
    out[17] += 0.5  # ||out - ref|| = 0.5
    assert relative_error(out, ref) == pytest.approx(0.05, rel=1e-12)
    out = ref.clone()
    out[:4] -= 1.0  # ||out - ref|| = 2
    assert relative_error(out, ref) == pytest.approx(0.2, rel=1e-12)
    softmax = _reference()
    assert relative_error(softmax * (1 + 1e-3), softmax) == pytest.approx(1e-3, rel=1e-9)


def test_tolerances_and_median():
    assert tolerance_for(torch.float32) < tolerance_for(torch.float16) < tolerance_for(torch.bfloat16)
    assert Timing((3.0, 1.0, 2.0), "events").median_ms == 2.0
    assert Timing((4.0, 1.0, 2.0, 3.0), "events").median_ms == 2.5


def test_clearly_slow_configs_keep_their_estimate_and_the_rest_are_timed_in_full():
    options = TimingOptions(min_reps=10, max_reps=200, target_ms=40.0, graph_below_ms=0.05, slow_factor=3.0)
    assert repetitions(2.0, None, options) == 20  # nothing timed yet: 40 ms of kernel time
    assert repetitions(20.0, None, options) == 10  # at least min_reps
    assert repetitions(0.1, 0.08, options) == 200  # near the fastest: in full, at most max_reps
    assert repetitions(0.23, 0.08, options) == 173  # 2.9x the fastest: still in full
    assert repetitions(0.25, 0.08, options) == 0  # over 3x: the estimate's samples are the timing
    assert repetitions(150.0, 0.08, options) == 0
    # a graph-timed kernel's event estimate carries the launch cost: never cut short
    assert repetitions(0.04, 0.005, options) == 200
    assert repetitions(0.25, 0.08, TimingOptions(target_ms=40.0, slow_factor=float("inf"))) == 160


class _FakeCuda:
    """Stands in for torch's CUDA calls in timing.py, logging what is queued and when it waits."""

    def __init__(self, log: list[str], ms: float) -> None:
        self.log, self.ms = log, ms

    def Event(self, enable_timing: bool):  # noqa: N802 - torch's name
        log, ms = self.log, self.ms
        return SimpleNamespace(record=lambda: log.append("event"), elapsed_time=lambda other: ms)

    def synchronize(self) -> None:
        self.log.append("wait")


@pytest.mark.parametrize("fastest_ms, timed", [(None, True), (0.1, False)])
def test_work_given_to_the_timing_runs_once_after_the_timed_calls_are_queued_and_before_the_wait(
        monkeypatch, fastest_ms, timed):
    """Building the next config while the GPU drains the queue must not fall inside a timed
    interval: every call and its closing event are queued before the work starts."""
    from autotune.evaluators import timing

    log: list[str] = []
    flush = SimpleNamespace(zero_=lambda: log.append("flush"))
    fake = SimpleNamespace(empty=lambda *a, **k: flush, int32=torch.int32, cuda=_FakeCuda(log, ms=1.0))
    monkeypatch.setattr(timing, "torch", fake)
    result = timing.time_gpu(lambda: log.append("call"), TimingOptions(min_reps=10, max_reps=12, warmup=2),
                             fastest_ms, while_queued=lambda: log.append("work"))
    assert log.count("work") == 1
    assert result.method == ("events" if timed else timing.ESTIMATE)
    work = log.index("work")
    assert log.count("call") == 2 + 5 + (12 if timed else 0)  # warm-up, estimate, the timing
    assert "call" not in log[work:]
    if timed:  # after the last call's closing event is queued, before the wait
        assert log[work - 1] == "event" and log[work + 1:] == ["wait"]
    else:  # cut short at the estimate: nothing more is queued, the work runs after it
        assert log[work - 1] == "wait" and log[work + 1:] == []


# -- the Triton softmax under the interpreter ----------------------------------------------------

_INTERPRETER = r"""
import json, os
assert os.environ.get("TRITON_INTERPRET") == "1"
import torch
from autotune.kernels import get_kernel
from autotune.evaluators.failures import classify_exception
from autotune.evaluators.timing import relative_error

spec = get_kernel("softmax-triton")
report = {}
for dtype_name, dtype in (("float16", torch.float16), ("float32", torch.float32)):
    inputs = spec.make_inputs((6, 1000), dtype, "cpu", 0)
    ref = spec.reference(tuple(x.double() for x in inputs))
    for block in (256, 512, 1024, 2048):
        out = spec.triton_launch({"BLOCK_SIZE": block, "num_warps": 4, "num_stages": 1}, *inputs)
        report[f"{dtype_name}/{block}"] = {"rel": relative_error(out, ref), "dtype": str(out.dtype),
                                           "shape": list(out.shape), "nan": bool(torch.isnan(out).any())}
failures = {}
x = spec.make_inputs((4, 1000), torch.float16, "cpu", 0)
for name, native in (("block_300", {"BLOCK_SIZE": 300, "num_warps": 4, "num_stages": 1}),
                     ("no_block", {"num_warps": 4, "num_stages": 1})):
    try:
        spec.triton_launch(native, *x)
        failures[name] = None
    except Exception as error:
        failures[name] = {"type": type(error).__name__, "status": classify_exception(error, phase="compile").value,
                          "run_status": classify_exception(error, phase="run").value}
try:
    spec.triton_launch({"BLOCK_SIZE": 256, "num_warps": 4, "num_stages": 1}, torch.zeros(1000, dtype=torch.float16))
    failures["rank_1_input"] = None
except Exception as error:
    failures["rank_1_input"] = {"type": type(error).__name__,
                                "status": classify_exception(error, phase="compile").value}
print("REPORT " + json.dumps({"runs": report, "failures": failures}))
"""


@pytest.fixture(scope="module")
def interpreter_report():
    return run_report_script(_INTERPRETER, timeout=300, shared=True, TRITON_INTERPRET="1")


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("block, path", [(256, "looped"), (512, "looped"), (1024, "whole row"), (2048, "whole row")])
def test_triton_softmax_is_accurate_under_the_interpreter(interpreter_report, dtype, block, path):
    run = interpreter_report["runs"][f"{dtype}/{block}"]
    assert run["shape"] == [6, 1000] and run["dtype"] == f"torch.{dtype}" and not run["nan"]
    assert run["rel"] < (1e-3 if dtype == "float16" else 1e-5), (path, run)


@pytest.mark.parametrize("name", ["block_300", "no_block", "rank_1_input"])
def test_broken_triton_configs_are_classified_as_failures(interpreter_report, name):
    failure = interpreter_report["failures"][name]
    assert failure is not None, f"{name} ran without an error"
    status = Status(failure["status"])
    assert status.failed
    assert status is Status.COMPILE_ERROR  # raised while building the launch: the config's fault, not a crash
