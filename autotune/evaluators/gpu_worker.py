"""Code that runs inside the GPU evaluator's worker processes.

Two roles.  A compile worker compiles a config without launching anything, reports
'compiled', and waits: only when the parent grants it the GPU ("run", key) does it run the
config once and synchronize, reporting 'ran', so the parent can tell a compile hang from a
run hang and knows when the GPU is free again (see gpu.py for why).  It also waits for a
grant before its set-up, which creates its CUDA context and inputs.  The benchmark worker,
one per evaluator, checks accuracy and times.  A config that kills its worker (illegal
address, abort) only costs that worker: the parent starts another.
"""

from __future__ import annotations

import math
import os
import sys
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Callable

from autotune.errors import UserError
from autotune.evaluators.failures import classify_exception, short_error
from autotune.types import Status

# AUTOTUNE_PROFILE_BENCH=1: print where each config's benchmark time goes (a diagnostic for slow sessions).
PROFILE_BENCH = os.environ.get("AUTOTUNE_PROFILE_BENCH") == "1"


@dataclass(frozen=True)
class WorkerInit:
    kernel: str | bytes  # a built-in kernel's name, or the kernel itself (autotune/kernel_wire.py)
    shape: tuple[int, ...]
    dtype: str
    seed: int
    timing: Any = None  # TimingOptions, for the benchmark worker
    hooks: bytes | None = None  # pickled hook overrides (reference=, baselines= given to autotune.tune)


def kernel_for(init: WorkerInit) -> Any:
    """The kernel a worker measures: sent by value with every hook, or a built-in found by name."""
    import pickle

    from autotune.kernel_loader import resolve_kernel
    from autotune.kernel_wire import from_wire

    kernel = from_wire(init.kernel) if isinstance(init.kernel, bytes) else resolve_kernel(init.kernel)
    return kernel.with_hooks(**pickle.loads(init.hooks)) if init.hooks else kernel


def default_native(spec: Any, bound: Any, shape: tuple[int, ...], dtype: Any) -> dict[str, Any]:
    """The config a kernel runs untuned: Helion's default config, or the declared space's default."""
    if spec.family == "helion":
        from search_spaces.helion_space import to_native

        return to_native(bound.config_spec.default_config())
    return dict(spec.triton_space(shape, dtype).default)


def build_runner(spec: Any, bound: Any, native: dict[str, Any], generated: Any = None) -> Callable[[tuple], Any]:
    """A callable computing the kernel with one config (compiles lazily on first call).
    `generated`: where a compile worker's code generation left this config's host function
    (generated_module.py); loaded from there unless switched off, else generated here."""
    if spec.family == "helion":
        import helion

        from autotune.evaluators import generated_module

        if generated is not None and generated_module.BUILD_FROM_WORKER:
            try:
                loaded = generated_module.load_generated(generated_module.GeneratedModule(*generated))
            except Exception:  # noqa: BLE001 - a file gone or unreadable: generate it here instead
                pass
            else:
                return lambda inputs: loaded(*inputs)
        compiled = bound.compile_config(helion.Config.from_dict(dict(native)), allow_print=False)
        return lambda inputs: compiled(*inputs)
    return lambda inputs: spec.triton_launch(dict(native), *inputs)


class _State:
    def __init__(self, init: WorkerInit, device: str = "cuda",
                 on_phase: Callable[[str, float], None] | None = None) -> None:
        import torch

        from autotune.kernels.registry import DTYPES

        # Where a worker's set-up goes (seconds per phase), sent with its 'ready': the session
        # records it, so a slow start can be traced to its phase.  `on_phase` hears each phase
        # as it ends (the parent starts other workers' set-ups once this one has its context).
        self.phases: dict[str, float] = {}
        mark = _PhaseClock(self.phases, on_phase)
        self.torch = torch
        self.spec = kernel_for(init)
        self.dtype = DTYPES[init.dtype]
        self.shape = tuple(init.shape)
        self.device = device
        mark("kernel_s")
        if device == "cuda":
            torch.zeros(1, device=device)  # the CUDA context, timed apart from the inputs
            mark("context_s")
        self.inputs = self.spec.make_inputs(self.shape, self.dtype, device, init.seed)
        mark("inputs_s")
        self.reference: Any = None
        self.bound = self.spec.helion_kernel.bind(self.inputs) if self.spec.family == "helion" else None
        mark("bind_s")


class _PhaseClock:
    """Writes the seconds since its last call (or its creation) under each name it is called with."""

    def __init__(self, phases: dict[str, float], on_phase: Callable[[str, float], None] | None = None) -> None:
        self.phases = phases
        self.on_phase = on_phase
        self.last = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.phases[name] = round(now - self.last, 3)
        self.last = now
        if self.on_phase is not None:
            self.on_phase(name, self.phases[name])


def _setup(conn: Connection, init: WorkerInit, *, gated: bool = False,
           then: Callable[[_State], Any] | None = None) -> _State | None:
    """Bind the kernel and make the inputs (and run `then` on them); None when that failed
    (reported) or the parent stopped us.  A gated worker imports first, says 'booted' and
    waits for ("setup",)."""
    try:
        if gated:
            kernel_for(init)  # the imports: CPU work, done before the GPU is granted
    except BaseException as error:  # noqa: BLE001 - reported to the parent, which decides
        conn.send(("setup_failed", short_error(error, 2000) + "\n" + traceback.format_exc()[-2000:]))
        return None
    if gated:
        conn.send(("booted",))
        if conn.recv() is None:
            return None
    try:
        state = _State(init, on_phase=lambda name, seconds: conn.send(("phase", name, seconds)))
        if then is not None:
            mark = _PhaseClock(state.phases)
            then(state)
            mark(f"{getattr(then, '__name__', 'then')}_s")
    except ReferenceMismatch as error:  # the user's reference: one line, no traceback
        conn.send(("setup_failed", str(error)))
        return None
    except BaseException as error:  # noqa: BLE001
        conn.send(("setup_failed", short_error(error, 2000) + "\n" + traceback.format_exc()[-2000:]))
        return None
    conn.send(("ready", state.phases))
    return state


class ReferenceMismatch(UserError):
    """The reference and the kernel's default config disagree: the reference (or the kernel)
    is wrong, and no config could pass the accuracy check."""


def prepare_reference(state: _State) -> None:
    """The trusted output for the accuracy check, and its agreement with the default config.

    A Triton kernel without a reference is checked against its default config's output.  A
    given (or eager Helion) reference that the default config disagrees with stops the set-up:
    either the reference or the kernel is wrong, and every config would be marked wrong."""
    from autotune.evaluators import timing

    torch = state.torch
    inputs64 = tuple(x.to(torch.float64) if _is_float_tensor(x) else x for x in state.inputs)
    reference = state.spec.reference_output(inputs64)
    del inputs64
    default = default_native(state.spec, state.bound, state.shape, state.dtype)
    try:
        out = build_runner(state.spec, state.bound, default)(state.inputs)
        if state.device == "cuda":
            torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 - a default config that does not run is a result, not a set-up failure
        out = None
    if reference is None:
        if out is None:
            raise RuntimeError(f"{state.spec.name} has no reference and its default config does not run: give "
                               "reference=")
        state.reference = timing.to_float64(out)
        return
    state.reference = reference
    if out is not None:
        error = timing.relative_error(out, reference)
        tolerance = timing.tolerance_for(state.dtype)
        if not error <= tolerance:
            raise ReferenceMismatch(
                f"the reference disagrees with {state.spec.name} at its default config {default} (relative error "
                f"{error:.3g}, tolerance {tolerance:g}): check the reference (it is called with the inputs in "
                "float64) or the kernel")


def _is_float_tensor(x: Any) -> bool:
    return hasattr(x, "is_floating_point") and x.is_floating_point()


def compile_worker_main(conn: Connection, init: WorkerInit) -> None:
    """Requests: (key, native) to compile, then ("run", key) once granted, or ("skip", key)
    for a config compiled ahead that no generation asked for; None stops.
    Replies: ("compiled", key, seconds, generated module or None), ("ran", key),
    ("failed", key, status, error, seconds)."""
    import torch

    torch.set_num_threads(1)  # many compile workers share the cores; compilation is what needs them
    state = _setup(conn, init, gated=True)
    if state is None:
        return
    while True:
        message = conn.recv()
        if message is None:
            return
        key, native = message
        compile_s = _compile(conn, state, key, native)
        if compile_s is None:
            continue
        grant = conn.recv()
        if grant is None:
            return
        if grant[0] == "skip":
            continue
        _smoke_run(conn, state, key, native, compile_s)  # ("run", key): the GPU is ours


def _compile(conn: Connection, state: _State, key: str, native: dict[str, Any]) -> float | None:
    """Compile without launching; the seconds it took, or None after reporting a failure."""
    started = time.perf_counter()
    try:
        generated = state.spec.compile_without_launch(native, state.inputs, bound=state.bound)
    except BaseException as error:  # noqa: BLE001
        status = classify_exception(error, phase="compile")
        conn.send(("failed", key, status.value, short_error(error), time.perf_counter() - started))
        if status is Status.CRASH:
            os._exit(3)  # the CUDA context may be unusable
        return None
    compile_s = time.perf_counter() - started
    conn.send(("compiled", key, compile_s, tuple(generated) if generated is not None else None))
    return compile_s


def _smoke_run(conn: Connection, state: _State, key: str, native: dict[str, Any], compile_s: float) -> None:
    """Run once (the compiled kernels are cached, so this loads and launches them) and wait for
    the GPU to finish, so 'ran' or 'failed' also says the GPU is free."""
    failure: BaseException | None = None
    try:
        build_runner(state.spec, state.bound, native)(state.inputs)
    except BaseException as error:  # noqa: BLE001 - e.g. out of resources when the binary is loaded
        failure = error
    try:
        state.torch.cuda.synchronize()  # also after a failure: kernels it launched may still run
    except BaseException as error:  # noqa: BLE001
        conn.send(("failed", key, classify_exception(error, phase="run").value, short_error(error), compile_s))
        os._exit(3)
    if failure is None:
        conn.send(("ran", key))
        return
    status = classify_exception(failure, phase="run")
    conn.send(("failed", key, status.value, short_error(failure), compile_s))
    if status is Status.CRASH:
        os._exit(3)


class NextRunner:
    """One config's runner, built ahead while the GPU works through the timing before it.

    Building a Helion config (code generation and import, or the import alone of what a
    compile worker generated) is CPU work; done between two timings it kept the GPU idle.  A
    config request may name the config the parent will send next; its runner is built once
    the current timing's calls are queued (`time_gpu(while_queued=...)`).  A build that
    failed fails when its config is asked for, exactly as it would have then.  A request's
    bench_s includes the next config's build where that outlasts the GPU's queue."""

    def __init__(self, build: Callable[[Any], Callable[[tuple], Any]]) -> None:
        self._build = build
        self._slot: tuple[str, Any] | None = None  # (key, runner or the _BuildError it raised)
        self.ahead_s = 0.0  # how long the last build ahead took (AUTOTUNE_PROFILE_BENCH prints it)

    def prepare(self, key: str, job: Any) -> None:
        """Build `job` (what `build` takes) for the config `key` now."""
        started = time.perf_counter()
        try:
            self._slot = (key, self._build(job))
        except _BuildError as error:
            self._slot = (key, error)
        self.ahead_s = time.perf_counter() - started

    def take(self, key: str, job: Any) -> Callable[[tuple], Any]:
        """The runner of `key`: the one built ahead when it is that config's, else built now."""
        slot, self._slot = self._slot, None
        if slot is None or slot[0] != key:
            return self._build(job)
        if isinstance(slot[1], _BuildError):
            raise slot[1]
        return slot[1]


def bench_worker_main(conn: Connection, init: WorkerInit) -> None:
    """Requests: ("config", key, native, (next key, next native, its generated module) or None,
    generated module), ("baseline", name, name), ("copy", key, None), ("rebench", key,
    [(key, native), ...]).  One reply (a dict) per request.  A generated module (a compile
    worker's, see generated_module.py) may be None."""
    state = _setup(conn, init, then=prepare_reference)
    if state is None:
        return
    from autotune.evaluators import timing

    torch = state.torch
    reference = state.reference
    tolerance = timing.tolerance_for(state.dtype)
    options = init.timing or timing.TimingOptions()
    fastest_ms: float | None = None  # of the configs timed here: clearly slower ones stop at the estimate
    ahead = NextRunner(lambda job: _runner_for(state, "config", *job))  # job: (native, generated module)
    while True:
        message = conn.recv()
        if message is None:
            return
        kind, key, payload, *following = message
        upcoming = following[0] if following else None  # (next key, next native, its generated module)
        generated = following[1] if len(following) > 1 else None
        started, cpu_started = time.perf_counter(), time.process_time()
        try:
            if kind == "copy":  # the bandwidth reference: a device-to-device copy of the input
                copy = timing.time_gpu(lambda: state.inputs[0].clone(), options)
                count = len(reference) if isinstance(reference, (tuple, list)) else 1
                # and what every config is checked on, for the session's comparison table
                reply = {**_ok(copy.samples_ms, copy.median_ms),
                         "compared": timing.outputs_text(list(range(count)), count)}
            elif kind == "rebench":
                reply = {"status": Status.OK.value, "samples": _rebench(state, timing, payload, options)}
            else:
                runner = ahead.take(key, (payload, generated)) if kind == "config" \
                    else _runner_for(state, kind, payload)
                built = time.perf_counter()
                prepare = (lambda: ahead.prepare(upcoming[0], upcoming[1:])) if upcoming else None
                compare = _baseline_comparison(state, payload, timing) if kind == "baseline" else None
                reply = _measure(torch, timing, state.inputs, runner, reference, tolerance, options,
                                 fastest_ms if kind == "config" else None, while_queued=prepare, compare=compare)
                if kind == "config" and reply.get("method") != timing.ESTIMATE and "median_ms" in reply:
                    fastest_ms = min(reply["median_ms"], fastest_ms or math.inf)
                if PROFILE_BENCH:
                    # CPU seconds far under wall seconds: this process waited (the GPU, or cores busy elsewhere)
                    ahead_s = f", of which the next config's build {ahead.ahead_s:.3f} s" if upcoming else ""
                    print(f"bench {key}: build {built - started:.3f} s, check+time {time.perf_counter() - built:.3f} s"
                          f"{ahead_s} ({reply.get('repetitions')} reps of {reply.get('median_ms')} ms), "
                          f"this process's CPU {time.process_time() - cpu_started:.3f} s, "
                          f"load {os.getloadavg()[0]:.1f}", file=sys.stderr)
        except BaseException as error:  # noqa: BLE001
            phase = "compile" if isinstance(error, _BuildError) else "run"
            cause = error.__cause__ if isinstance(error, _BuildError) and error.__cause__ else error
            status, text = classify_exception(cause, phase=phase), short_error(cause)
            broken = context_broken(torch) if phase == "run" and status is not Status.CRASH else None
            if broken:  # a failure the classifier did not take for a crash left the context unusable
                status, text = Status.CRASH, f"{text}\nthe CUDA context is unusable after it: {broken}"
            conn.send({"key": key, "status": status.value, "error": text, "bench_s": time.perf_counter() - started})
            if status is Status.CRASH:
                os._exit(3)
            continue
        reply.update(key=key, bench_s=time.perf_counter() - started)
        conn.send(reply)


def context_broken(torch: Any, device: str = "cuda") -> str | None:
    """Why this process's device can no longer run work, or None when a tiny kernel still runs:
    asked after a failed run, so a process left with an unusable CUDA context exits (and is
    replaced) instead of failing every config after it."""
    try:
        probe = torch.ones(1, device=device) + 1
        if device == "cuda":
            torch.cuda.synchronize()
        return None if float(probe[0]) == 2.0 else "a probe computed a wrong value"
    except BaseException as error:  # noqa: BLE001
        return short_error(error, 300)


class _BuildError(Exception):
    """Building the callable failed (a compile-phase failure)."""


def _runner_for(state: _State, kind: str, payload: Any, generated: Any = None) -> Callable[[tuple], Any]:
    try:
        if kind == "baseline":
            return state.spec.baselines[payload]
        return build_runner(state.spec, state.bound, payload, generated)
    except BaseException as error:  # noqa: BLE001
        raise _BuildError(str(error)) from error


def _rebench(state: _State, timing: Any, configs: list[tuple[str, Any]], options: Any) -> dict[str, list[float]]:
    """Time the configs round-robin, so drift (clocks, temperature) hits all of them alike."""
    runners = {key: _runner_for(state, "config", native) for key, native in configs}
    samples: dict[str, list[float]] = {key: [] for key in runners}
    short = timing.TimingOptions(min_reps=10, max_reps=40, target_ms=20.0, warmup=2,
                                 graph_below_ms=options.graph_below_ms)
    for _round in range(REBENCH_ROUNDS):
        for key, runner in runners.items():
            samples[key] += timing.time_gpu(lambda: runner(state.inputs), short).samples_ms
    return samples


REBENCH_ROUNDS = 5


def _ok(samples: tuple[float, ...], median: float) -> dict[str, Any]:
    return {"status": Status.OK.value, "median_ms": median, "min_ms": min(samples), "max_ms": max(samples),
            "repetitions": len(samples), "samples_ms": samples}


def _baseline_comparison(state: _State, name: str, timing: Any) -> Callable[[Any, Any], tuple[float, str]]:
    """How a baseline is checked: on the kernel outputs it computes (timing.baseline_error)."""
    outputs = getattr(state.spec, "baseline_outputs", {}).get(name)
    return lambda out, reference: timing.baseline_error(out, reference, outputs)


def _measure(torch: Any, timing: Any, inputs: tuple, runner: Callable, reference: Any, tolerance: float,
             options: Any, fastest_ms: float | None = None,
             while_queued: Callable[[], None] | None = None,
             compare: Callable[[Any, Any], tuple[float, str]] | None = None) -> dict[str, Any]:
    """Check, then time.  `compare` (a baseline's): (relative error, which outputs it covered)."""
    from autotune.evaluators.poison import run_checked

    out, check = run_checked(lambda: runner(inputs), torch.cuda.synchronize)
    if compare is None:
        count = len(reference) if isinstance(reference, (tuple, list)) else 1
        error, compared = timing.relative_error(out, reference), timing.outputs_text(list(range(count)), count)
    else:
        error, compared = compare(out, reference)
    del out
    if not error <= tolerance or check.unwritten:
        return {"status": Status.WRONG_RESULT.value, "rel_error": error if error != float("inf") else None,
                "error": f"relative error {error:.3g} over tolerance {tolerance:g} ({compared}); output {check.text}",
                "checked": check.text, "compared": compared}
    result = timing.time_gpu(lambda: runner(inputs), options, fastest_ms, while_queued)
    return {**_ok(result.samples_ms, result.median_ms), "rel_error": error, "method": result.method,
            "checked": check.text, "compared": compared}
