"""An evaluator that runs configs on the CPU through the Triton interpreter.

Why: a kernel researcher without a GPU at hand can still check that every config of a kernel
computes the right answer (the same reference, tolerance and poisoned outputs as on the
GPU), and the framework's own paths for a user's kernel can be
tested for real on a CPU.  Times are interpreter wall seconds, meaningless for speed: the
session's mode says `interpret`, its fingerprint names the CPU as its device, and such rows
are never reused for or served to a GPU.

`TRITON_INTERPRET=1` must be set before the kernel's module is imported (Triton decides at
`@triton.jit` time); `autotune tune --interpret` sets it before loading the kernel.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any, Iterator, Sequence

from autotune.evaluators.failures import classify_exception, short_error
from autotune.evaluators.gpu_worker import WorkerInit, _State, build_runner, prepare_reference
from autotune.evaluators.poison import run_checked
from autotune.evaluators.timing import relative_error, tolerance_for
from autotune.types import Candidate, Result, Status

REPETITIONS = 3


class InterpreterEvaluator:
    """Runs each candidate in this process on CPU tensors (see the module docstring)."""

    description = "the Triton interpreter on the CPU (accuracy checked; times are not GPU times)"

    def __init__(self, kernel: Any, shape: tuple[int, ...], dtype: Any, *, seed: int = 0) -> None:
        from autotune.kernels.registry import dtype_name

        os.environ["TRITON_INTERPRET"] = "1"  # for code Helion generates from here on
        self._state = _State.__new__(_State)
        init = WorkerInit(kernel="", shape=tuple(shape), dtype=dtype_name(dtype), seed=seed)
        _build_state(self._state, kernel, init)
        prepare_reference(self._state)  # raises ReferenceMismatch before anything is recorded
        self._tolerance = tolerance_for(self._state.dtype)

    def evaluate(self, candidates: Sequence[Candidate]) -> Iterator[Result]:
        for candidate in candidates:
            yield self._evaluate(candidate)

    def baselines(self) -> dict[str, Result]:
        return {}

    def close(self) -> None:
        pass

    def _evaluate(self, candidate: Candidate) -> Result:
        state = self._state
        started = time.perf_counter()
        try:
            runner = build_runner(state.spec, state.bound, dict(candidate.native))
            runner(state.inputs)  # compiles (interprets) once
        except Exception as error:  # noqa: BLE001 - a config's failure is its result
            return Result(key=candidate.key, status=classify_exception(error, phase="compile"),
                          error=short_error(error), compile_s=time.perf_counter() - started)
        compile_s = time.perf_counter() - started
        try:
            out, check = run_checked(lambda: runner(state.inputs))
            error = relative_error(out, state.reference)
        except Exception as failure:  # noqa: BLE001
            return Result(key=candidate.key, status=classify_exception(failure, phase="run"),
                          error=short_error(failure), compile_s=compile_s)
        if not error <= self._tolerance or check.unwritten:
            return Result(key=candidate.key, status=Status.WRONG_RESULT, compile_s=compile_s,
                          rel_error=error if math.isfinite(error) else None, checked=check.text,
                          error=f"relative error {error:.3g} over tolerance {self._tolerance:g}; output {check.text}")
        samples = []
        for _ in range(REPETITIONS):
            begin = time.perf_counter()
            runner(state.inputs)
            samples.append((time.perf_counter() - begin) * 1e3)
        ordered = sorted(samples)
        return Result(key=candidate.key, status=Status.OK, median_ms=ordered[len(ordered) // 2], min_ms=ordered[0],
                      max_ms=ordered[-1], repetitions=len(samples), compile_s=compile_s, rel_error=error, checked=check.text,
                      bench_s=time.perf_counter() - started, samples_ms=tuple(samples))


def _build_state(state: _State, kernel: Any, init: WorkerInit) -> None:
    """What `_State(init)` does in a worker, for a kernel object at hand and CPU tensors."""
    import torch

    from autotune.kernels.registry import DTYPES

    state.torch = torch
    state.spec = kernel
    state.dtype = DTYPES[init.dtype]
    state.shape = tuple(init.shape)
    state.device = "cpu"
    state.inputs = kernel.make_inputs(state.shape, state.dtype, "cpu", init.seed)
    state.bound = kernel.helion_kernel.bind(state.inputs) if kernel.family == "helion" else None
    state.reference = None
