"""Worker targets that measure for real on the CPU: the GPU evaluator's processes and pipe
protocol, with the Triton interpreter in place of the GPU.

Each process receives the kernel as the GPU evaluator sends it (`WorkerInit`), rebuilds it
with `gpu_worker.kernel_for`, makes its inputs with the kernel's own hook, binds the Helion
kernel, prepares the reference and checks every config's and baseline's outputs with the
project's accuracy gate; only the times are fixed (1 ms).  With CPU_WORKER_LOG set, the
benchmark process appends one JSON line per set-up and per answer (what it measured), so a
test can see what the measuring process did.  TRITON_INTERPRET=1 must be in the environment
before the parent imports helion.  Spawned processes import this module by name, so it lives
in tests/.
"""

from __future__ import annotations

import json
import os
from typing import Any


def _log(**entry: Any) -> None:
    path = os.environ.get("CPU_WORKER_LOG")
    if path:
        with open(path, "a") as log:
            log.write(json.dumps(entry) + "\n")


def _state(init: Any) -> Any:
    from autotune.evaluators.gpu_worker import _State, kernel_for
    from autotune.evaluators.interpreter import _build_state

    state = _State.__new__(_State)
    state.phases = {}
    _build_state(state, kernel_for(init), init)
    return state


def compile_target(conn: Any, init: Any) -> None:
    conn.send(("booted",))
    if conn.recv() is None:
        return
    try:
        _state(init)  # the same rebuild a real compile worker does
    except BaseException as error:  # noqa: BLE001 - reported as a real worker reports it
        conn.send(("setup_failed", f"{type(error).__name__}: {error}"))
        return
    conn.send(("ready", {}))
    while True:
        message = conn.recv()
        if message is None:
            return
        key, _native = message
        conn.send(("compiled", key, 0.01, None))
        grant = conn.recv()
        if grant is None:
            return
        if grant[0] == "run":
            conn.send(("ran", key))


def bench_target(conn: Any, init: Any) -> None:
    from autotune.evaluators import timing
    from autotune.evaluators.gpu_worker import _baseline_comparison, build_runner, prepare_reference
    from autotune.evaluators.poison import run_checked

    try:
        state = _state(init)
        prepare_reference(state)
    except BaseException as error:  # noqa: BLE001
        conn.send(("setup_failed", f"{type(error).__name__}: {error}"))
        return
    _log(event="setup", kernel=state.spec.name, pid=os.getpid(),
         input_shapes=[list(x.shape) for x in state.inputs if hasattr(x, "shape")],
         baselines=sorted(state.spec.baselines))
    conn.send(("ready", {}))
    tolerance = timing.tolerance_for(state.dtype)
    count = len(state.reference) if isinstance(state.reference, (tuple, list)) else 1
    every_output = timing.outputs_text(list(range(count)), count)
    while True:
        message = conn.recv()
        if message is None:
            return
        kind, key, payload, *_ = message
        try:
            if kind == "baseline":
                runner = state.spec.baselines[payload]
            elif kind == "config":
                runner = build_runner(state.spec, state.bound, dict(payload))
            else:  # the copy (whose reply says what configs are checked on) and the re-timing
                conn.send({"key": key, "status": "ok", "median_ms": 1.0, "min_ms": 1.0, "max_ms": 1.0,
                           "repetitions": 1, "compared": every_output,
                           "samples": {k: [1.0] for k, _ in payload} if kind == "rebench" else {}})
                continue
            out, check = run_checked(lambda: runner(state.inputs))
            if kind == "baseline":
                error, compared = _baseline_comparison(state, payload, timing)(out, state.reference)
            else:
                error, compared = timing.relative_error(out, state.reference), every_output
        except BaseException as failure:  # noqa: BLE001
            _log(event=kind, key=key, error=f"{type(failure).__name__}: {failure}")
            conn.send({"key": key, "status": "crash", "error": f"{type(failure).__name__}: {failure}"})
            continue
        _log(event=kind, key=key, rel_error=error if error != float("inf") else None, compared=compared)
        if not error <= tolerance or check.unwritten:
            conn.send({"key": key, "status": "wrong_result", "error": f"relative error {error:.3g}",
                       "compared": compared})
        else:
            conn.send({"key": key, "status": "ok", "median_ms": 1.0, "min_ms": 1.0, "max_ms": 1.0,
                       "repetitions": 1, "samples_ms": [1.0], "rel_error": error, "compared": compared})
