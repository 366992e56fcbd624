"""An evaluator that runs configs on the CPU through the Triton interpreter.

Why: a kernel researcher without a GPU at hand can still check that every config of a kernel
computes the right answer (the same reference, tolerance and poisoned outputs as on the
GPU), and the framework's own paths for a user's kernel can be
tested for real on a CPU.  Times are interpreter wall seconds, meaningless for speed: the
session's mode says `interpret`, its fingerprint names the CPU as its device, and such rows
are never reused for or served to a GPU.

Each config runs in a child process forked from this one (so it has the kernel object with
every hook it was given, and the reference computed once here), under the session's deadlines:
generating the config's code within `--compile-timeout`, and each run within `--run-timeout`; a
config past one is killed and recorded `compile_timeout` or `run_timeout`, and the session goes
on.  In the child, libdevice's math runs through `interpreter_math`, and the space offered
leaves out the program orders a CPU cannot run (`bind_interpreted`).

`TRITON_INTERPRET=1` must be set before the kernel's module is imported (Triton decides at
`@triton.jit` time); `autotune tune --interpret` sets it before loading the kernel.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import time
from dataclasses import replace
from typing import Any, Callable, Iterator, Sequence

from autotune.evaluators.failures import classify_exception, short_error
from autotune.evaluators.gpu_worker import WorkerInit, _State, build_runner, prepare_reference
from autotune.evaluators.poison import run_checked
from autotune.evaluators.timing import relative_error, tolerance_for
from autotune.types import Candidate, Result, Status

COMPILE_TIMEOUT_S = 60.0  # the defaults of `autotune tune`
RUN_TIMEOUT_S = 30.0


def bind_interpreted(spec: Any, shape: tuple[int, ...], dtype: Any, seed: int = 0, *, thread_limit: bool = True,
                     say: Callable[[str], None] | None = None) -> Any:
    """The task of an interpreter session: bound on the CPU, its Helion space without the
    program orders the interpreter cannot run (persistent pid_type: Helion needs the GPU's SM
    count for them); `say` is told so in one line when that left something out."""
    from autotune.task import bind_live
    from search_spaces.fingerprint import SpaceIdentity
    from search_spaces.helion_space import PERSISTENT_PID_TYPES, space_from_bound

    task = bind_live(spec, shape, dtype, "cpu", seed=seed, thread_limit=thread_limit)
    if task.bound is None:
        return task
    space, codec = space_from_bound(spec.name, task.bound, thread_limit=thread_limit, interpreter=True)
    if space.names == task.space.names and space.parameters == task.space.parameters:
        return task
    left_out = [t for t in PERSISTENT_PID_TYPES if any(t in getattr(p, "choices", ()) for p in task.space.parameters)]
    if say is not None and left_out:
        say(f"interpreter space: pid_type {', '.join(left_out)} left out (they need a GPU's SM count; "
            "every such config fails on the CPU)")
    identity = SpaceIdentity(space=space, signature=task.identity.signature, source_hash=task.identity.source_hash)
    return replace(task, space=space, codec=codec, identity=identity)


class InterpreterEvaluator:
    """Runs each candidate in a forked child on CPU tensors (see the module docstring)."""

    description = "the Triton interpreter on the CPU (accuracy checked; times are not GPU times)"

    def __init__(self, kernel: Any, shape: tuple[int, ...], dtype: Any, *, seed: int = 0,
                 compile_timeout_s: float = COMPILE_TIMEOUT_S, run_timeout_s: float = RUN_TIMEOUT_S) -> None:
        from autotune.evaluators.interpreter_math import installed
        from autotune.kernels.registry import dtype_name

        os.environ["TRITON_INTERPRET"] = "1"  # for code Helion generates from here on
        self._state = _State.__new__(_State)
        init = WorkerInit(kernel="", shape=tuple(shape), dtype=dtype_name(dtype), seed=seed)
        _build_state(self._state, kernel, init)
        with installed():  # the default config runs here, against the reference
            prepare_reference(self._state)  # raises ReferenceMismatch before anything is recorded
        self._tolerance = tolerance_for(self._state.dtype)
        self.compile_timeout_s = compile_timeout_s
        self.run_timeout_s = run_timeout_s
        self._context = multiprocessing.get_context("fork")  # the child needs this process's kernel object

    def evaluate(self, candidates: Sequence[Candidate]) -> Iterator[Result]:
        for candidate in candidates:
            yield self._isolated(candidate)

    def baselines(self) -> dict[str, Result]:
        return {}

    def close(self) -> None:
        pass

    def _isolated(self, candidate: Candidate) -> Result:
        """`_evaluate` in a child process under the compile and run deadlines."""
        receive, send = self._context.Pipe(duplex=False)
        child = self._context.Process(target=_child, args=(self, candidate, send), daemon=True)
        child.start()
        send.close()
        phase, compile_s = "compile", None
        try:
            while True:
                limit = self.compile_timeout_s if phase == "compile" else self.run_timeout_s
                if not receive.poll(limit):
                    status = Status.COMPILE_TIMEOUT if phase == "compile" else Status.RUN_TIMEOUT
                    what = "generating its code" if phase == "compile" else "a run"
                    return Result(key=candidate.key, status=status, compile_s=compile_s,
                                  error=f"{what} took over {limit:g} s in the interpreter; killed")
                try:
                    message = receive.recv()
                except EOFError:
                    child.join(5)
                    return Result(key=candidate.key, status=Status.CRASH, compile_s=compile_s,
                                  error=f"the interpreter process died (exit code {child.exitcode})")
                if message[0] == "compiled":
                    phase, compile_s = "run", message[1]
                elif message[0] == "ran":
                    continue  # each run gets its own deadline
                else:
                    return message[1]
        finally:
            receive.close()
            if child.is_alive():
                child.kill()
            child.join(5)

    def _evaluate(self, candidate: Candidate, tell: Callable[[tuple], None] = lambda message: None) -> Result:
        """One config, in this process: generate, run, check, time (`tell` reports progress)."""
        from autotune.evaluators.interpreter_math import installed

        with installed():
            return self._measure(candidate, tell)

    def _measure(self, candidate: Candidate, tell: Callable[[tuple], None]) -> Result:
        """The checked runs (poisoned outputs, twice) are the only runs, and their interpreter
        seconds the config's samples: a config costs its code generation and two runs."""
        state = self._state
        started = time.perf_counter()
        try:
            runner = build_runner(state.spec, state.bound, dict(candidate.native))
        except Exception as error:  # noqa: BLE001 - a config's failure is its result
            return Result(key=candidate.key, status=classify_exception(error, phase="compile"),
                          error=short_error(error), compile_s=time.perf_counter() - started)
        compile_s = time.perf_counter() - started
        tell(("compiled", compile_s))
        samples: list[float] = []

        def timed() -> Any:
            begin = time.perf_counter()
            out = runner(state.inputs)
            samples.append((time.perf_counter() - begin) * 1e3)
            tell(("ran",))
            return out

        try:
            out, check = run_checked(timed)
            error = relative_error(out, state.reference)
        except Exception as failure:  # noqa: BLE001
            # The interpreter's errors arise at the first run: what a GPU reports as compile errors.
            return Result(key=candidate.key, status=classify_exception(failure, phase="run" if samples else "compile"),
                          error=short_error(failure), compile_s=compile_s)
        if not error <= self._tolerance or check.unwritten:
            return Result(key=candidate.key, status=Status.WRONG_RESULT, compile_s=compile_s,
                          rel_error=error if math.isfinite(error) else None, checked=check.text,
                          error=f"relative error {error:.3g} over tolerance {self._tolerance:g}; output {check.text}")
        ordered = sorted(samples)
        return Result(key=candidate.key, status=Status.OK, median_ms=ordered[len(ordered) // 2], min_ms=ordered[0],
                      max_ms=ordered[-1], repetitions=len(samples), compile_s=compile_s, rel_error=error,
                      checked=check.text, bench_s=time.perf_counter() - started, samples_ms=tuple(samples))


def _child(evaluator: InterpreterEvaluator, candidate: Candidate, send: Any) -> None:
    """The forked child: evaluate one config and send its result (progress messages first)."""
    try:
        result = evaluator._evaluate(candidate, send.send)
    except BaseException as error:  # noqa: BLE001 - whatever it is, the parent records it
        result = Result(key=candidate.key, status=Status.CRASH, error=short_error(error))
    send.send(("result", result))
    send.close()


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
