"""What does a configured call cost beyond the compiled kernel it runs?

Why: `autotune.configured(kernel)` is meant for production calls, where a kernel of ~10 µs is
common and a few µs of Python per call is a visible share.  After its first call at a
signature, a configured kernel computes the call's key (each argument's shape, dtype and
device), does one dict lookup and calls the compiled callable; this measures that cost for
the three picks (the exact recorded shape, the nearest recorded shape, the default config),
which should all cost the same.

Two modes:

* `--cpu` (any machine): the dispatch alone.  The compiled kernel is a trivial callable, so
  what is measured is the configured path's overhead over calling it directly; the former call
  path (shape and dtype recomputed at each call, then the lookup) is re-created beside it.
* `--gpu`: `examples/rms_norm.py` at 2048x4096 float16 (about 10 µs on an H100), bare compiled
  kernel (`fast.compiled_for(x, w)`) against `fast(x, w)`, host wall time per call over
  back-to-back calls; configs of any GPU serve (`fallback="any-gpu"`), so the exact and
  nearest picks exist on any GPU.

    python -m experiments.configured_overhead --cpu      # writes experiments/reports/configured_overhead_cpu.{json,md}
    python -m experiments.configured_overhead --gpu      # ..._gpu.{json,md}
    python -m experiments.configured_overhead --report experiments/reports/configured_overhead_cpu.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any, Callable

REPORTS = Path(__file__).resolve().parent / "reports"
SHAPES = {"exact": ((4096, 8192), "float16"), "nearest": ((4000, 8192), "float16"),
          "default": ((4096, 8192), "bfloat16")}
GPU_SHAPES = {"exact": ((2048, 4096), "float16"), "nearest": ((2048, 4000), "float16"),
              "default": ((2048, 4096), "bfloat16")}


def per_call_ns(fn: Callable[[], Any], calls: int, repeats: int,
                sync: Callable[[], None] = lambda: None) -> list[float]:
    """Nanoseconds per call of `fn`, once per repeat, over `calls` back-to-back calls."""
    out = []
    for _ in range(repeats):
        sync()
        started = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        sync()
        out.append((time.perf_counter_ns() - started) / calls)
    return out


def _interleaved(contenders: dict[str, Callable[[], Any]], calls: int, repeats: int,
                 sync: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """Each contender's best and median ns per call over `repeats` samples taken in turns (drift
    and other processes hit all alike; the best is the cost with the least interference)."""
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            samples[name] += per_call_ns(fn, calls, 1, sync)
    return {**{name: min(values) for name, values in samples.items()},
            "median": {name: statistics.median(values) for name, values in samples.items()}}


# -- CPU: the dispatch with a trivial compiled kernel -------------------------------------------------------
def cpu_run(calls: int, repeats: int) -> dict[str, Any]:
    import torch

    from autotune.config_table import ConfigTable, Entry
    from autotune.kernels.registry import dtype_name
    from autotune.serving import ConfiguredKernel

    kernel = _stand_in_kernel()

    def compiled(x: Any, w: Any) -> None:  # the bare compiled kernel: returns at once
        return None

    class StandIn(ConfiguredKernel):
        def _build(self, pick, args):  # what compiling would return: the trivial callable
            return compiled, pick, ""

    table = ConfigTable(kernel=kernel.name, family=kernel.family, source_hash="", origin="the stand-in table",
                        entries=[Entry((4096, 8192), "float16", {"BLOCK": 64}, 0.01, device="cpu")])
    fast = StandIn(kernel, table, device="cpu")
    rows = {}
    for how, (shape, dtype) in SHAPES.items():
        x = torch.empty(shape, dtype=getattr(torch, dtype), device="meta")
        w = torch.empty(shape[1:], dtype=x.dtype, device="meta")
        fast(x, w)
        assert fast.last[0].how == how, (how, fast.last)
        former = _former_path(fast, kernel, dtype_name, compiled)
        rows[how] = _interleaved({"bare": lambda: compiled(x, w), "configured": lambda: fast(x, w),
                                  "former": lambda: former(x, w)}, calls, repeats)
    return {"mode": "cpu", "calls": calls, "repeats": repeats, "machine": _machine(), "rows": rows}


def _former_path(fast: Any, kernel: Any, dtype_name: Callable[[Any], str], compiled: Callable[..., Any]):
    """The call path before signature keys, re-created: shape and dtype recomputed at each call,
    a lookup by them, the choice kept, then the compiled callable."""
    runners: dict[Any, Any] = {}
    choices: dict[Any, Any] = {}

    def call(*args: Any) -> Any:
        first = next((a for a in args if hasattr(a, "dtype") and hasattr(a, "shape")), None)
        key = kernel.problem_shape(args), dtype_name(first.dtype)
        runner = runners.get(key)
        if runner is None:
            runners[key], choices[key] = compiled, ("pick", "why")
        fast.last_former = choices[key]
        return runner(*args) if runner is not None else compiled(*args)
    return call


def _stand_in_kernel() -> Any:
    import autotune
    from search_spaces.triton_space import declare_triton_space

    def launch(config: dict, x: Any, w: Any) -> None:
        return None

    space = declare_triton_space("stand_in", meta={"BLOCK": [32, 64]}, num_warps=[1], num_stages=[1],
                                 default={"BLOCK": 32, "num_warps": 1, "num_stages": 1})
    return autotune.Kernel(launch, name="stand_in", space=space)


# -- GPU: a real Helion kernel of ~10 µs ---------------------------------------------------------------------
def gpu_run(calls: int, repeats: int) -> dict[str, Any]:
    import warnings

    import torch

    import autotune
    from autotune.config_table import OtherGpuWarning
    from autotune.device import device_name

    warnings.simplefilter("ignore", OtherGpuWarning)  # the shipped H100 configs serve any GPU here, by design
    fast = autotune.configured("examples/rms_norm.py:kernel", fallback="any-gpu")
    rows = {}
    for how, (shape, dtype) in GPU_SHAPES.items():
        x = torch.randn(shape, dtype=getattr(torch, dtype), device="cuda")
        w = torch.randn(shape[1:], dtype=x.dtype, device="cuda")
        bare = fast.compiled_for(x, w)
        fast(x, w)  # the pick is recorded below: a nearest config that does not fit this shape runs the default
        for _ in range(200):  # warm both paths
            bare(x, w), fast(x, w)
        rows[how] = _interleaved({"bare": lambda: bare(x, w), "configured": lambda: fast(x, w)}, calls, repeats,
                                 torch.cuda.synchronize)
        rows[how]["pick"] = fast.last[1]
        rows[how]["asked"] = how
    return {"mode": "gpu", "device": device_name(0), "calls": calls, "repeats": repeats, "machine": _machine(),
            "rows": rows}


def _machine() -> dict[str, str]:
    import torch

    return {"python": platform.python_version(), "torch": torch.__version__, "cpu": platform.processor() or
            platform.machine(), "system": platform.system()}


# -- the report ---------------------------------------------------------------------------------------------------
def markdown(data: dict[str, Any]) -> str:
    """The report, from the JSON alone."""
    gpu = data["mode"] == "gpu"
    machine = data["machine"]
    lines = [f"# Configured call overhead ({'GPU: ' + data['device'] if gpu else 'CPU stand-in'})", "",
             "Generated by `python -m experiments.configured_overhead "
             f"--{data['mode']}` from `configured_overhead_{data['mode']}.json`.", "",
             ("Host wall time per call of `examples/rms_norm.py` over back-to-back calls: the bare compiled Helion "
              "kernel (`fast.compiled_for(x, w)`) against the configured kernel `fast(x, w)`." if gpu else
              "The dispatch alone: the compiled kernel is a trivial callable, so the difference is what the "
              "configured call path adds (the call's signature key, one dict lookup, the call).  'former' is the "
              "call path before signature keys (shape and dtype recomputed per call), re-created."),
             "", f"{data['calls']} calls per sample, {data['repeats']} samples per contender taken in turns; "
             "the best sample (the cost with the least interference from other processes; medians in the JSON).  "
             f"Python {machine['python']}, torch {machine['torch']}, {machine['cpu']}.", ""]
    header = ["pick", "bare (ns/call)", "configured (ns/call)", "overhead (ns)"]
    header += [] if gpu else ["former (ns/call)", "former overhead (ns)"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for how, row in data["rows"].items():
        cells = [how, f"{row['bare']:.0f}", f"{row['configured']:.0f}", f"{row['configured'] - row['bare']:.0f}"]
        if not gpu:
            cells += [f"{row['former']:.0f}", f"{row['former'] - row['bare']:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    overheads = [row["configured"] - row["bare"] for row in data["rows"].values()]
    lines += ["", f"Overhead over the bare call: {min(overheads) / 1000:.2f} to {max(overheads) / 1000:.2f} µs "
              "across the three picks (the target: at most 1 µs, the same for every pick)."]
    if gpu:
        lines += ["", "Picks: " + "; ".join(row["pick"] for row in data["rows"].values())]
    return "\n".join(lines) + "\n"


def write(data: dict[str, Any], folder: Path = REPORTS) -> Path:
    stem = folder / f"configured_overhead_{data['mode']}"
    stem.with_suffix(".json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    stem.with_suffix(".md").write_text(markdown(data))
    return stem.with_suffix(".md")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--cpu", action="store_true", help="the dispatch alone, with a trivial compiled kernel")
    mode.add_argument("--gpu", action="store_true", help="examples/rms_norm.py on the GPU")
    mode.add_argument("--report", type=Path, metavar="JSON", help="write the Markdown report of a JSON again")
    parser.add_argument("--calls", type=int, default=None, help="calls per sample (default: 2000 CPU, 1000 GPU)")
    parser.add_argument("--repeats", type=int, default=None, help="samples per contender (default: 100 CPU, 30 GPU)")
    parser.add_argument("--out", type=Path, default=REPORTS, help="folder for the JSON and Markdown")
    args = parser.parse_args()
    if args.report is not None:
        print(write(json.loads(args.report.read_text()), args.report.parent))
        return
    if args.cpu:
        data = cpu_run(args.calls or 2000, args.repeats or 100)
    else:
        data = gpu_run(args.calls or 1000, args.repeats or 30)
    print(write(data, args.out))


if __name__ == "__main__":
    main()
