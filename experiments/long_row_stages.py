"""Where the long-row softmax loses to the device copy: the exchange between a row's pieces,
the per-call reset of the exchange buffer, or the pieces themselves.

`softmax-resident` reads and writes each byte once, against a target of 0.90 of the copy's
bandwidth at the long rows (experiments/reports/long_rows.md).  Three things separate it from a
copy: each call zeroes its exchange buffer (one more launch), a row's pieces wait for each other
before they store, and every piece loads, computes and stores its whole width in one go.  The
stages are placed by timing the same kernel under conditions that leave one of them out, each
against a copy of its own tensor in the same process (cold L2 before every call, CUDA events,
median of many):

- `resident`: the kernel as tuned, at the long row;
- `resident, counters zeroed beforehand`: the same launch, given exchange buffers zeroed outside
  the timed interval (a ring of them, one per call), so the reset's launch is not timed;
- `pieces alone`: the same piece width, warps and tickets on a tensor whose rows are one
  piece wide (rows x pieces rows), so no piece waits for another.  Its tensor is at most a
  piece's rounding larger; each variant is compared with a copy of its own tensor.

The gap between `resident` and `pieces alone` is the exchange's cost; the gap between
`pieces alone` and its copy is the cost of the pieces' own load-compute-store shape.

    python -m experiments.long_row_stages                 # GPU machine: measures, then reports
    python -m experiments.long_row_stages --report-only   # anywhere, from the recorded JSON
    ncu --clock-control none --kernel-name regex:resident_softmax --metrics <NCU_METRICS, comma-joined> \
        python -m experiments.long_row_stages --once > experiments/reports/long_row_stages_ncu.txt

`--report-only` adds the profiler's counters (NCU_METRICS) from that file when it is there: one
kernel a variant, in the order the cases and variants are listed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

REPORT_NAME = "long_row_stages"
# The long rows at the softmax-resident configs measured fastest there with the present exchange
# (pieces polling their row's words, or counting arrivals where a row has many pieces), the
# other way of waiting at 512x262144 beside it, and 4096x65536 for comparison.
CASES = (
    ("2048x100000", {"CHUNK": 4096, "STREAM_LOADS": 1, "COUNT_ARRIVALS": 0, "num_warps": 2, "num_stages": 1}),
    ("2048x100000", {"CHUNK": 8192, "STREAM_LOADS": 1, "COUNT_ARRIVALS": 0, "num_warps": 4, "num_stages": 1}),
    ("512x262144", {"CHUNK": 8192, "STREAM_LOADS": 0, "COUNT_ARRIVALS": 1, "num_warps": 4, "num_stages": 1}),
    ("512x262144", {"CHUNK": 8192, "STREAM_LOADS": 0, "COUNT_ARRIVALS": 0, "num_warps": 4, "num_stages": 1}),
    ("4096x65536", {"CHUNK": 8192, "STREAM_LOADS": 1, "COUNT_ARRIVALS": 0, "num_warps": 4, "num_stages": 1}),
)
RING_VARIANT = "resident, counters zeroed beforehand"
VARIANTS = ("resident", RING_VARIANT, "pieces alone")
NCU_METRICS = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
               "dram__throughput.avg.pct_of_peak_sustained_elapsed",
               "sm__warps_active.avg.pct_of_peak_sustained_active", "launch__registers_per_thread",
               "launch__occupancy_limit_registers")
NCU_DIGITS = (1, 1, 1, 1, 1, 0, 0)  # decimals shown for each of NCU_METRICS, in the report's columns
NCU_FILE = f"{REPORT_NAME}_ncu.txt"


def pieces_alone_shape(rows: int, n_cols: int, chunk: int) -> tuple[int, int]:
    """A tensor whose rows are one piece each, with the long row's piece count and width: its
    programs do the long row's work less the exchange."""
    from autotune.kernels.softmax_resident import piece_layout

    pieces, width = piece_layout(n_cols, chunk)
    return rows * pieces, width


def launcher(native: dict[str, Any], x: Any, out: Any, buffers: Sequence[Any] | None = None) -> Callable[[], Any]:
    """A call of softmax-resident on x into out.  With `buffers` (exchange buffers, each from
    `exchange_buffer`) the kernel is launched directly, so no zeroing is timed: each call takes
    the next of them, from the first, and they must be zeroed again before the ring comes round
    (a used one hands out tickets past the launch's pieces, whose programs would write out of
    bounds)."""
    if buffers is None:
        from autotune.kernels.softmax_resident import launch

        return lambda: launch(native, x, out)
    import triton

    from autotune.kernels.softmax_resident import piece_layout, resident_softmax
    from search_spaces.triton_space import split_launch_config

    meta, options = split_launch_config(native)
    n_rows, n_cols = x.shape
    pieces, width = piece_layout(n_cols, int(meta["CHUNK"]))
    turn = iter(range(1 << 62))

    def call() -> Any:
        sync, counters = buffers[next(turn) % len(buffers)]
        resident_softmax[(n_rows * pieces,)](
            x, out, sync, counters, n_cols, x.stride(0), x.stride(1), out.stride(0), out.stride(1), pieces, width,
            CHUNK=int(meta["CHUNK"]), PIECES_POW2=triton.next_power_of_2(pieces),
            STREAM_LOADS=bool(meta["STREAM_LOADS"]), COUNT_ARRIVALS=bool(meta["COUNT_ARRIVALS"]), **options)
        return out
    return call


def _setup(shape: str, native: dict[str, Any], ring_size: int) -> tuple[dict[str, Any], dict[str, tuple]]:
    """The case's tensors (long row, pieces alone) and its variants' calls, each with its tensor."""
    import torch

    rows, n_cols = (int(v) for v in shape.split("x"))
    alone = pieces_alone_shape(rows, n_cols, int(native["CHUNK"]))
    tensors = {name: (x, torch.empty_like(x)) for name, x in (
        ("long", torch.randn((rows, n_cols), device="cuda", dtype=torch.float16)),
        ("alone", torch.randn(alone, device="cuda", dtype=torch.float16)))}
    from autotune.kernels.softmax_resident import exchange_buffer, piece_layout

    ring = [exchange_buffer(rows, piece_layout(n_cols, int(native["CHUNK"]))[0], torch.device("cuda"))
            for _ in range(ring_size)]
    calls = {"resident": (launcher(native, *tensors["long"]), "long"),
             RING_VARIANT: (launcher(native, *tensors["long"], buffers=ring), "long"),
             "pieces alone": (launcher(native, *tensors["alone"]), "alone")}
    entry = {"shape": shape, "config": native, "pieces_alone_shape": "x".join(map(str, alone))}
    return entry, {"tensors": tensors, "calls": calls, "ring": ring}


def _checked(call: Callable[[], Any], x: Any, out: Any, what: str) -> float:
    """One call into an output filled with NaN beforehand, against an fp64 softmax: its error."""
    import torch

    from autotune.evaluators.timing import relative_error

    out.fill_(float("nan"))
    call()
    torch.cuda.synchronize()
    error = relative_error(out.double(), torch.softmax(x.double(), dim=-1))
    if not error <= 5e-3:  # NaN fails too
        raise RuntimeError(f"{what}: relative error {error:.3g}")
    return error


def measure(cases: Sequence[tuple[str, dict[str, Any]]] = CASES, once: bool = False) -> list[dict[str, Any]]:
    """Every case's variants and the copies of their tensors, on the GPU (`once`: each variant
    launched once and checked, nothing timed: for a profiler)."""
    from autotune.evaluators.timing import TimingOptions, time_gpu

    options = TimingOptions(min_reps=50, max_reps=200, target_ms=40.0)
    results = []
    for shape, native in cases:
        # time_gpu makes at most warmup + estimate + max_reps calls: one ring entry each
        entry, made = _setup(shape, native, options.warmup + options.estimate_reps + options.max_reps + 1)
        for variant, (call, which) in made["calls"].items():
            error = _checked(call, *made["tensors"][which], f"{variant} at {shape}")
            if once:
                continue
            if variant == RING_VARIANT:  # its check took a counter: every one is fresh for the timing
                for sync, _ in made["ring"]:
                    sync.zero_()  # the counters are a view of its tail
            timing = time_gpu(call, options)
            entry[variant] = {"ms": timing.median_ms, "method": timing.method, "samples": len(timing.samples_ms),
                              "rel_error": error}
        if once:
            continue
        for which, (x, out) in made["tensors"].items():
            entry[f"copy_{which}_ms"] = time_gpu(lambda x=x, out=out: out.copy_(x), options).median_ms
        for variant, (_, which) in made["calls"].items():
            entry[variant]["of_copy"] = entry[f"copy_{which}_ms"] / entry[variant]["ms"]
        results.append(entry)
        print(f"{shape} {native}: " + ", ".join(f"{v} {entry[v]['of_copy']:.3f} of copy" for v in VARIANTS),
              flush=True)
    return results


def parse_ncu(text: str) -> list[dict[str, float]]:
    """The metrics of each profiled kernel in an `ncu --metrics` log, in launch order."""
    kernels: list[dict[str, float]] = []
    for line in text.splitlines():
        words = line.split()
        if words and words[0] == "resident_softmax" and "Context" in line:
            kernels.append({})
        elif kernels and len(words) >= 2 and words[0] in NCU_METRICS:
            kernels[-1][words[0]] = float(words[-1].replace(",", ""))
    return kernels


def _ncu_lines(results: dict[str, Any]) -> list[str]:
    kernels = results.get("ncu") or []
    named = [(e, v) for e in results["cases"] for v in VARIANTS]
    if len(kernels) != len(named):
        if not kernels:
            return []
        return [f"(the profiler log holds {len(kernels)} kernels, not {len(named)}: left out)", ""]
    lines = ["## Counters (Nsight Compute, one launch a variant, clocks as they were)", "",
             "| shape | config | variant | µs | DRAM read MB | DRAM write MB | DRAM throughput % of peak | "
             "warps active % | registers / thread | blocks / SM by registers |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for (e, variant), k in zip(named, kernels):
        config = ", ".join(f"{a} {b}" for a, b in e["config"].items() if a != "num_stages")
        cells = [f"{k.get(metric, float('nan')):.{digits}f}" for metric, digits in zip(NCU_METRICS, NCU_DIGITS)]
        lines.append(f"| {e['shape']} | {config} | {variant} | " + " | ".join(cells) + " |")
    return lines + [""]


def render(results: dict[str, Any]) -> str:
    """The report: each case's variants as shares of their own copy, and what the gaps say."""
    lines = [
        "# Long-row softmax: where softmax-resident loses to the copy",
        "",
        f"Generated by `python -m experiments.long_row_stages` on {results['device']} "
        f"(torch {results['torch']}, Triton {results['triton']}); `--report-only` regenerates it from "
        f"`{REPORT_NAME}.json`. Each time is the median of 50-200 calls, L2 flushed before each, CUDA events; "
        "`of copy` is the copy of the variant's own tensor over the variant's time (1.00 moves bytes as fast as "
        "the device copy). Every variant's output was checked against an fp64 softmax after the buffer was "
        "filled with NaN.",
        "",
        "| shape | config | copy ms | resident ms | of copy | counters zeroed beforehand: of copy | "
        "pieces alone (tensor) | its copy ms | pieces alone ms | of copy | exchange's share | zeroing's share |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for e in results["cases"]:
        resident, zeroed, alone = (e[v] for v in VARIANTS)
        config = ", ".join(f"{k} {v}" for k, v in e["config"].items() if k != "num_stages")
        lines.append(
            f"| {e['shape']} | {config} | {e['copy_long_ms']:.4f} | {resident['ms']:.4f} | {resident['of_copy']:.3f} | "
            f"{zeroed['of_copy']:.3f} | {e['pieces_alone_shape']} | {e['copy_alone_ms']:.4f} | {alone['ms']:.4f} | "
            f"{alone['of_copy']:.3f} | {alone['of_copy'] - resident['of_copy']:+.3f} | "
            f"{zeroed['of_copy'] - resident['of_copy']:+.3f} |")
    gaps = [e["pieces alone"]["of_copy"] - e["resident"]["of_copy"] for e in results["cases"]]
    own = [1 - e["pieces alone"]["of_copy"] for e in results["cases"]]
    zeroing = [e[RING_VARIANT]["of_copy"] - e["resident"]["of_copy"] for e in results["cases"]]
    lines += [
        "",
        f"- The exchange (a row's pieces waiting for each other) costs {statistics.median(gaps):.3f} of the copy's "
        f"bandwidth (median over the cases; range {min(gaps):+.3f} to {max(gaps):+.3f}).",
        f"- The pieces on their own stay {statistics.median(own):.3f} short of the copy (range {min(own):+.3f} to "
        f"{max(own):+.3f}): the load-all, compute, store-all shape of a program, before any waiting.",
        f"- Leaving the counters' zeroing out of the timed interval changes the kernel's share by "
        f"{statistics.median(zeroing):+.3f} (range {min(zeroing):+.3f} to {max(zeroing):+.3f}).",
        "",
    ] + _ncu_lines(results)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "experiments" / "reports")
    parser.add_argument("--report-only", action="store_true", help="regenerate the report from the JSON")
    parser.add_argument("--once", action="store_true",
                        help="launch each case's variants once, untimed (for a profiler)")
    args = parser.parse_args(argv)
    if args.once:
        measure(once=True)
        return
    data = args.out / f"{REPORT_NAME}.json"
    if args.report_only:
        if not data.exists():
            parser.error(f"no {data}: run this on a GPU machine first")
        results = json.loads(data.read_text())
        if (args.out / NCU_FILE).exists():
            results["ncu"] = parse_ncu((args.out / NCU_FILE).read_text())
    else:
        import torch
        import triton

        from autotune import device

        if not device.gpu_available():
            parser.error("measuring needs a GPU; --report-only regenerates the report from the recorded JSON")
        results = {"device": device.device_name(), "torch": torch.__version__.split("+")[0],
                   "triton": triton.__version__, "cases": measure()}
        args.out.mkdir(parents=True, exist_ok=True)
        data.write_text(json.dumps(results, indent=1) + "\n")
    (args.out / f"{REPORT_NAME}.md").write_text(render(results))
    print(f"report written to {args.out / (REPORT_NAME + '.md')}")


if __name__ == "__main__":
    main()
