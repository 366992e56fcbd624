"""Worker targets that speak the GPU evaluator's pipe protocol without a GPU.

A candidate's native config says how its fake compile/run behaves: {"behaviour": "ok" |
"compile_error" | "oor" | "hang_compile" | "hang_run" | "crash_compile" | "crash_run" | "nan",
"ms": float}.  Spawned processes import this module by name, so it lives in tests/.
"""

from __future__ import annotations

import os
import time


def compile_target(conn, init) -> None:
    conn.send(("ready",))
    while True:
        message = conn.recv()
        if message is None:
            return
        key, native = message
        behaviour = native.get("behaviour", "ok")
        if behaviour == "hang_compile":
            time.sleep(3600)
        if behaviour == "crash_compile":
            os._exit(7)
        if behaviour in ("compile_error", "oor"):
            text = "CompilationError: bad tile" if behaviour == "compile_error" else \
                "OutOfResources: out of resource: shared memory, Required: 262144, Hardware limit: 232448"
            status = "compile_error" if behaviour == "compile_error" else "out_of_resources"
            conn.send(("failed", key, status, text, 0.01))
            continue
        conn.send(("compiled", key, 0.05))
        if behaviour == "hang_run":
            time.sleep(3600)
        if behaviour == "crash_run":
            os._exit(9)
        conn.send(("ran", key))


def bench_target(conn, init) -> None:
    conn.send(("ready",))
    while True:
        message = conn.recv()
        if message is None:
            return
        kind, key, payload = message
        if kind == "config" and payload.get("behaviour") == "nan":
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
