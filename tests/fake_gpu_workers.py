"""Worker targets that speak the GPU evaluator's pipe protocol without a GPU.

A candidate's native config says how its fake compile/run behaves: {"behaviour": "ok" |
"compile_error" | "oor" | "hang_compile" | "hang_run" | "crash_compile" | "crash_run" | "nan",
"ms": float, and optionally "compile_s", "run_s", "bench_s": seconds each step sleeps}.
Processes that die as a compiler or kernel kills them: "abort_compile", "segv_compile" (while
compiling), "abort_bench", "segv_bench" (while benchmarked), "abort_build" (whenever the
benchmark worker builds it: when timed, and when named as the config it builds ahead while
timing another), "crash_once_compile" (dies the
first time only: a file per key under FAKE_GPU_MARKS remembers).  "noisy_compile" writes
NOISY_LINES lines to fd 1 and as many to fd 2 while compiling, then fails as a compile error;
"noisy_abort" writes them, then an assertion, and aborts, as Triton's compiler did on an H200.
A native config without "behaviour" but with a "fault" (the `faulty` kernel's) behaves as
FAULTS says, or as the JSON object in FAKE_GPU_FAULTS maps that fault.
A fake compile reports `generated_module_for(key)` as the module it generated.

With FAKE_GPU_LOG set (inherited by the spawned workers), every step that would use the GPU
in a real worker (a compile worker's set-up and smoke run, a benchmark) appends one line
"kind key start end" (time.monotonic(), which is system-wide on Linux) to that file, and
so does each compile ("compile"), so tests can check what overlapped.  FAKE_GPU_SETUP_S
makes each compile worker's set-up take that long, FAKE_GPU_BOOT_S its imports before that,
and FAKE_GPU_BENCH_CONTEXT_S and FAKE_GPU_BENCH_SETUP_S the benchmark worker's CUDA context
("benchcontext", reported as the real worker reports its phases) and the rest of its set-up
("benchsetup").  Spawned processes import this module by name, so it lives in tests/.
"""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

NOISY_LINES = 300
ASSERTION = "LinearLayout::reshapeOuts: Assertion `fake' failed."
# The `faulty` kernel's faults, as fake behaviours (FAKE_GPU_FAULTS overrides any of them).
FAULTS = {"none": "ok", "compile_error": "compile_error", "out_of_resources": "oor", "compile_hang": "hang_compile",
          "run_hang": "hang_run", "illegal_address": "crash_run", "nan": "nan", "wrong": "nan", "unwritten": "nan"}


def behaviour_of(native: dict[str, Any]) -> str:
    if "behaviour" in native:
        return native["behaviour"]
    if "fault" in native:
        return {**FAULTS, **json.loads(os.environ.get("FAKE_GPU_FAULTS", "{}"))}[native["fault"]]
    return "ok"


def _die(how: str) -> None:
    """End this process as a compiler assertion (abort) or a bad pointer (segfault) would."""
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file left behind
    if how == "abort":
        os.abort()
    os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(10)  # the signal is delivered before this returns


def _noise(key: str) -> None:
    """Hundreds of lines to fd 1 and fd 2, as an MLIR module dump and pass pipeline would be."""
    for number in range(NOISY_LINES):
        os.write(1, f"stdout {key} line {number}: %{number} = arith.constant {number} : i32\n".encode())
        os.write(2, f"stderr {key} line {number}: // -----// IR Dump Before Pass{number} //----- //\n".encode())


def _log(kind: str, key: str, start: float) -> None:
    path = os.environ.get("FAKE_GPU_LOG")
    if path:
        with open(path, "a") as log:  # one short append per line: lines from many processes stay whole
            log.write(f"{kind} {key} {start!r} {time.monotonic()!r}\n")


def _sleep(native: dict[str, Any], step: str) -> None:
    seconds = float(native.get(step, 0.0))
    if seconds:
        time.sleep(seconds)


def _set_up(conn) -> bool:
    """The gated boot: 'booted', then the set-up once the parent grants it.  FAKE_GPU_ABORT_AT_START=1:
    write an assertion to fd 2 and abort instead, as a kernel whose import trips a compiler would."""
    time.sleep(float(os.environ.get("FAKE_GPU_BOOT_S", "0")))
    if os.environ.get("FAKE_GPU_ABORT_AT_START") == "1":
        os.write(2, f"warming up\npython: /src/lib/Tools/LinearLayout.cpp:1: {ASSERTION}\n".encode())
        _die("abort")
    conn.send(("booted",))
    if conn.recv() is None:
        return False
    start = time.monotonic()
    conn.send(("phase", "context_s", 0.0))
    time.sleep(float(os.environ.get("FAKE_GPU_SETUP_S", "0")))
    _log("setup", "-", start)
    conn.send(("ready", {"setup_s": round(time.monotonic() - start, 3)}))  # its phases, as a real worker's
    return True


def compile_target(conn, init) -> None:
    if not _set_up(conn):
        return
    while True:
        message = conn.recv()
        if message is None:
            return
        key, native = message
        if not _compile(conn, key, native):
            continue
        grant = conn.recv()
        if grant is None:
            return
        if grant == ("skip", key):  # compiled ahead, asked for by no generation
            _log("skip", key, time.monotonic())
            continue
        assert grant == ("run", key), grant
        _run(conn, key, native)


def _compile(conn, key: str, native: dict[str, Any]) -> bool:
    behaviour = behaviour_of(native)
    start = time.monotonic()
    _log("attempt", key, start)  # once per compile attempt, also one that kills the process
    if behaviour == "hang_compile":
        time.sleep(3600)
    if behaviour == "crash_compile":
        os._exit(7)
    if behaviour in ("abort_compile", "segv_compile"):
        _die(behaviour.split("_")[0])
    if behaviour == "crash_once_compile":
        mark = os.path.join(os.environ["FAKE_GPU_MARKS"], key)
        if not os.path.exists(mark):
            open(mark, "w").close()
            _die("segv")
    if behaviour in ("noisy_compile", "noisy_abort"):
        _noise(key)
        if behaviour == "noisy_abort":
            os.write(2, f"python: /src/lib/Tools/LinearLayout.cpp:{len(key)}: {ASSERTION}\n".encode())
            _die("abort")
        conn.send(("failed", key, "compile_error", "CompilationError: the fake compiler gave up", 0.01))
        return False
    _sleep(native, "compile_s")
    _log("compile", key, start)
    if behaviour in ("compile_error", "oor"):
        text = "CompilationError: bad tile" if behaviour == "compile_error" else \
            "OutOfResources: out of resource: shared memory, Required: 262144, Hardware limit: 232448"
        status = "compile_error" if behaviour == "compile_error" else "out_of_resources"
        conn.send(("failed", key, status, text, 0.01))
        return False
    conn.send(("compiled", key, 0.05, generated_module_for(key)))
    return True


def generated_module_for(key: str) -> tuple[str, str]:
    """What a fake compile reports as the config's generated module (a real one: a file and a name)."""
    return (f"/generated/{key}.py", "host")


def _run(conn, key: str, native: dict[str, Any]) -> None:
    behaviour = behaviour_of(native)
    start = time.monotonic()
    if behaviour == "hang_run":
        time.sleep(3600)
    if behaviour == "crash_run":
        _log("run", key, start)
        os._exit(9)
    _sleep(native, "run_s")
    _log("run", key, start)
    conn.send(("ran", key))


def bench_target(conn, init) -> None:
    start = time.monotonic()
    time.sleep(float(os.environ.get("FAKE_GPU_BENCH_CONTEXT_S", "0")))
    _log("benchcontext", "-", start)
    conn.send(("phase", "context_s", round(time.monotonic() - start, 3)))  # as the real worker reports it
    time.sleep(float(os.environ.get("FAKE_GPU_BENCH_SETUP_S", "0")))
    _log("benchsetup", "-", start)
    conn.send(("ready", {"context_s": 0.25}))
    while True:
        message = conn.recv()
        if message is None:
            return
        kind, key, payload, *following = message
        start = time.monotonic()
        _log("request", f"{kind}:{str(key).replace(' ', '_')}:{os.getpid()}", start)  # which process served which
        if kind == "config" and (behaviour_of(payload) == "abort_build"
                                 or following and following[0] and behaviour_of(following[0][1]) == "abort_build"):
            _die("abort")
        if kind == "config":
            _sleep(payload, "bench_s")
            _log("bench", key, start)
            if behaviour_of(payload) in ("abort_bench", "segv_bench"):
                _die(behaviour_of(payload).split("_")[0])
            if following and following[0]:  # the config the parent says comes next (the real worker builds it)
                _log("next", f"{key}>{following[0][0]}", start)
                _log("nextgenerated", f"{following[0][0]}>{following[0][2][0]}", start)
            if len(following) > 1:  # the module the config's compile generated (the real worker loads it)
                _log("generated", f"{key}>{following[1][0]}", start)
        if kind == "config" and behaviour_of(payload) == "nan":
            conn.send({"key": key, "status": "wrong_result", "error": "relative error inf over tolerance 0.005"})
        elif kind == "config":
            ms = float(payload.get("ms", 1.0))
            conn.send({"key": key, "status": "ok", "median_ms": ms, "min_ms": ms, "max_ms": ms, "repetitions": 10,
                       "samples_ms": [ms] * 10, "rel_error": 0.0, "bench_s": 0.01})
        elif kind == "rebench":
            conn.send({"key": key, "status": "ok",
                       "samples": {k: [float(n.get("ms", 1.0))] * 5 for k, n in payload}})
        else:
            conn.send({"key": key, "status": "ok", "median_ms": 2.0, "min_ms": 2.0, "max_ms": 2.0, "repetitions": 10})
