"""One arm of one suite cell, run in a process of its own on a GPU (the runner starts it).

    python -m experiments.helion_suite.arms ARM --kernel K --examples DIR --shape S --dtype D \
        --seconds N --work DIR --out FILE

Arms: `default` (Helion's default config), `ours` (`autotune tune` with the default strategy,
cold: a fresh database and fresh compile caches, for a fixed search time), `helion_quick`
(Helion's own autotune at effort "quick", run natively), `torch` and `torch.compile` (the
suite's baselines).  Every arm's output is compared with the kernel's float64 reference, and
every time is our harness's (`time_gpu`: cold L2, CUDA events or graphs, the median); the
runner times the whole process from its start, imports counted.  The answer is one JSON file.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

ARMS = ("default", "ours", "helion_quick", "torch", "torch.compile")


def _reference(spec: Any, inputs: tuple) -> Any:
    import torch

    inputs64 = tuple(x.to(torch.float64) if hasattr(x, "is_floating_point") and x.is_floating_point() else x
                     for x in inputs)
    return spec.reference_output(inputs64)


def _timed(fn: Callable[[], Any], reference: Any, *, baseline: bool = False) -> dict[str, Any]:
    """Output checked against the reference, then timed by our harness."""
    from autotune.evaluators.timing import baseline_error, relative_error, time_gpu

    out = fn()
    error = baseline_error(out, reference)[0] if baseline else relative_error(out, reference)
    timing = time_gpu(fn)
    return {"ms": timing.median_ms, "rel_error": error if error == error and error != float("inf") else None}


def _config_runner(spec: Any, inputs: tuple, native: dict[str, Any]) -> Callable[[], Any]:
    from autotune.evaluators.gpu_worker import build_runner

    runner = build_runner(spec, spec.helion_kernel.bind(inputs), dict(native))
    return lambda: runner(inputs)


def run_arm(arm: str, kernel: str, examples: Path, shape: tuple[int, ...], dtype_name: str, seconds: float,
            work: Path) -> dict[str, Any]:
    import torch

    from autotune.kernels.registry import DTYPES
    from autotune.task import build_inputs
    from experiments.helion_suite.loader import build, kernel_file
    from search_spaces.helion_space import to_native

    spec = build(kernel, examples)
    dtype = DTYPES[dtype_name]
    if arm == "ours":
        return _ours(kernel_file(kernel, examples, work / "kernels"), kernel, shape, dtype_name, seconds, work)
    inputs = build_inputs(spec, shape, dtype, "cuda", 0)
    reference = _reference(spec, inputs)
    if arm in ("torch", "torch.compile"):
        hook = spec.baselines[arm]
        return {**_timed(lambda: hook(inputs), reference, baseline=True)}
    if arm == "default":
        native = to_native(spec.helion_kernel.bind(inputs).config_spec.default_config())
        return {**_timed(_config_runner(spec, inputs, native), reference), "config": native}
    if arm == "helion_quick":
        from autotune.baselines.helion_native import QUICK, run_native

        native_run = run_native(spec, shape, dtype, work / f"helion_quick_{kernel}", effort=QUICK)
        torch.cuda.synchronize()
        return {**_timed(_config_runner(spec, inputs, native_run.config), reference), "config": native_run.config,
                "search_s": native_run.wall_s, "configs": native_run.configs}
    raise ValueError(f"unknown arm {arm!r} (arms: {', '.join(ARMS)})")


def _ours(locator: str, kernel: str, shape: tuple[int, ...], dtype: str, seconds: float,
          work: Path) -> dict[str, Any]:
    """`autotune tune` as a user runs it (its own process), read back from its fresh database."""
    from autotune.store.cache import Cache

    db = work / f"ours_{kernel}_{'x'.join(map(str, shape))}_{dtype}.db"
    db.unlink(missing_ok=True)
    done = subprocess.run([sys.executable, "-m", "autotune.cli", "tune", locator, "--shape", "x".join(map(str, shape)),
                           "--dtype", dtype, "--seconds", str(seconds), "--fresh", "--db", str(db), "--shipped", "none"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"autotune tune exited {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    cache = Cache.open(db)
    try:
        session = cache.sessions(limit=1)[0]
        rows = [r for r in cache.session_evaluations(session["id"]) if r.result.status.value == "ok"]
    finally:
        cache.close()
    if not rows:
        raise RuntimeError("the session found no ok config")
    best = min(rows, key=lambda r: r.result.median_ms)
    return {"ms": best.result.median_ms, "rel_error": best.result.rel_error, "config": dict(best.candidate.native),
            "session": session["id"], "evaluations": len(rows), "db": str(db)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("arm", choices=ARMS)
    parser.add_argument("--kernel", required=True)
    parser.add_argument("--examples", type=Path, required=True)
    parser.add_argument("--shape", required=True)
    parser.add_argument("--dtype", required=True)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    started = time.monotonic()
    shape = tuple(int(d) for d in args.shape.split("x"))
    try:
        answer = {"status": "ok", **run_arm(args.arm, args.kernel, args.examples, shape, args.dtype, args.seconds,
                                             args.work)}
    except Exception as error:  # noqa: BLE001 - an arm that fails is a result of the study
        answer = {"status": "failed", "error": f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"}
    answer["inner_s"] = round(time.monotonic() - started, 2)
    args.out.write_text(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
