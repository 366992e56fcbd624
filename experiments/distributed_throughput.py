"""Throughput of evaluation spread over GPUs: one generation on 1 GPU, then on 2.

The same generation of Helion softmax configs (random strategy, fixed seed; 4096x32000
float16 by default) is evaluated through `DistributedEvaluator` on a local Dask cluster of
one GPU worker, then of two.  Each worker compiles with the same number of processes in
both runs, so the ratio measures what a second GPU adds.  The batch size is the
evaluator's automatic one, one batch per worker (so 64 configs a batch on one GPU and 32
on two, for 64): within a batch a worker compiles while it times, so a large batch hides
its slowest compile; the report gives the batches of each run.  Start-up is not counted: the
workers bind the kernel and boot their processes while they time the reference config (the
calibration), and the clock starts after that.  The report gives configs per second on
each, their ratio, and the calibration spread between the two GPUs (slowest/fastest median
of the same config), which says whether measurements from both can be mixed.

Each run compiles into its own empty Triton cache: with a shared one the second run would
only load what the first compiled (a first attempt measured 91 s on one GPU against 11 s on
two, an 8x "ratio" that was the cache's doing).

Nothing is recorded in a database: this measures the evaluator alone.  Every result, with
when it came back and which GPU measured it, goes to a JSON file beside the report, and the
report sums each worker's compile and benchmark seconds, so a ratio below 2 can be traced to
its cause.  Needs two GPUs and the distributed extra; refuses in one line otherwise.

    python -m experiments.distributed_throughput --configs 512 --seed 1

(At 64 configs a single config's compile, up to the 60 s timeout, bounds the wall time on any
number of GPUs; the committed report shows both sizes.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

DEFAULT_REPORT = REPO / "experiments" / "reports" / "distributed_throughput.md"
KERNEL = "softmax"


@dataclass
class Run:
    """One generation evaluated on `gpus` workers."""

    gpus: int
    configs: int
    ok: int
    wall_s: float
    calibration: dict[str, float] = field(default_factory=dict)  # worker -> reference median ms
    batches: tuple[int, ...] = ()  # the sizes of the Dask tasks the generation was cut into
    arrivals: tuple[tuple[float, Any], ...] = ()  # (seconds since the clock started, Result), as they came back

    @property
    def batches_text(self) -> str:
        sizes = sorted(set(self.batches), reverse=True)
        return " + ".join(f"{self.batches.count(size)} x {size}" for size in sizes) or "-"

    @property
    def configs_per_s(self) -> float:
        return self.configs / self.wall_s if self.wall_s > 0 else float("nan")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    from autotune.cli import positive_int

    parser = argparse.ArgumentParser(prog="python -m experiments.distributed_throughput",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--configs", type=int, default=64, help="configs in the generation (at least 64)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--shape", default="4096x32000")
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--compile-workers", type=positive_int, default=None,
                        help="compile processes per GPU worker (default: this machine's cores halved, less two: "
                             "one for the worker's benchmark process, one for the worker itself)")
    parser.add_argument("--batch-size", type=positive_int, default=None,
                        help="configs per Dask task (default: the evaluator's automatic size, one task per worker)")
    parser.add_argument("--report", type=Path, default=DEFAULT_REPORT, help="where the Markdown report goes")
    args = parser.parse_args(argv)
    if args.configs < 64:
        parser.error(f"--configs must be at least 64, got {args.configs}")
    return args


def generation(task: Any, count: int, seed: int) -> list[Any]:
    """`count` distinct configs proposed by the random strategy with `seed`."""
    from autotune.strategies import get_strategy
    from search_spaces.space import InvalidConfig

    strategy = get_strategy("random")(task.space, seed=seed)
    chosen: dict[str, Any] = {}
    for _ in range(20):
        for point in strategy.ask(count):
            try:
                candidate = task.candidate(point)
            except InvalidConfig:
                continue
            chosen.setdefault(candidate.key, candidate)
        if len(chosen) >= count:
            break
    return list(chosen.values())[:count]


def worker_environments(devices: Sequence[str], gpus: int, cache_root: Path) -> dict[str, dict[str, str]]:
    """One GPU per worker, and one compile cache per run, empty at its start, so a run cannot
    reuse what an earlier one compiled."""
    cache = cache_root / f"{gpus}-gpu-run"
    cache.mkdir(parents=True, exist_ok=False)
    return {f"gpu{i}": {"CUDA_VISIBLE_DEVICES": device, "TRITON_CACHE_DIR": str(cache / "triton"),
                        "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor")}
            for i, device in enumerate(devices[:gpus])}


def measure(client: Any, factory: Any, candidates: list[Any], reference: Any, batch_size: int | None = None) -> Run:
    """Calibrate (and so warm up) every worker, then time the generation (batch_size None:
    the evaluator's automatic batches)."""
    from autotune.distributed.evaluator import distributed_evaluator

    evaluator = distributed_evaluator(client, factory, reference=reference, batch_size=batch_size)
    batches = tuple(len(batch) for batch in evaluator.batches(candidates))
    try:
        started = time.perf_counter()
        arrivals = [(time.perf_counter() - started, result) for result in evaluator.evaluate(candidates)]
        wall_s = time.perf_counter() - started
    finally:
        evaluator.close()
    return Run(gpus=len(client.nthreads()), configs=len(arrivals), ok=sum(r.ok for _, r in arrivals), wall_s=wall_s,
               calibration={worker: r.median_ms for worker, r in evaluator.calibration.items()}, batches=batches,
               arrivals=tuple(arrivals))


def where_time_went(run: Run) -> list[str]:
    """Per worker: configs, the summed compile and benchmark seconds and its last result, so a
    reader can tell a run bound by one GPU's timing from one bound by compiling."""
    rows: dict[str, list[float]] = {}
    for at, result in run.arrivals:
        row = rows.setdefault(result.measured_on or "?", [0, 0.0, 0.0, 0.0])
        row[0] += 1
        row[1] += result.compile_s or 0.0
        row[2] += result.bench_s or 0.0
        row[3] = max(row[3], at)
    return [f"| {run.gpus} | {worker} | {int(n)} | {compile_s:.1f} | {bench_s:.1f} | {last:.1f} |"
            for worker, (n, compile_s, bench_s, last) in sorted(rows.items())]


def timeline(runs: list[Run]) -> list[dict[str, Any]]:
    """Every result of every run, with when it came back: the raw data behind the report."""
    return [{"gpus": run.gpus, "at_s": round(at, 3), "key": r.key, "status": r.status.value,
             "compile_s": r.compile_s, "bench_s": r.bench_s, "median_ms": r.median_ms, "measured_on": r.measured_on}
            for run in runs for at, r in run.arrivals]


def report(runs: list[Run], *, shape: str, dtype: str, seed: int, compile_workers: int, device: str) -> str:
    one, two = runs
    lines = [
        "# Evaluation spread over GPUs: throughput", "",
        f"One generation of {one.configs} Helion softmax configs ({shape} {dtype}, random strategy, seed {seed}) "
        f"evaluated through `DistributedEvaluator` on {device}; {compile_workers} compile processes per GPU worker, "
        "the generation cut into the batches (Dask tasks) below, one per GPU worker unless asked otherwise, in each "
        "of which compiling overlaps timing; start-up not counted; "
        "each run compiles into its own empty Triton cache.", "",
        "| GPUs | configs | ok | wall s | configs/s | batches |", "| --- | --- | --- | --- | --- | --- |",
        *(f"| {r.gpus} | {r.configs} | {r.ok} | {r.wall_s:.1f} | {r.configs_per_s:.2f} | {r.batches_text} |"
          for r in runs), "",
        f"Throughput ratio ({two.gpus} GPUs / {one.gpus} GPU): **{two.configs_per_s / one.configs_per_s:.2f}x**.", "",
        "Where the time went (seconds summed over each worker's configs; compiling is spread over its compile "
        "processes, timing is one GPU's, in series):", "",
        "| GPUs | worker | configs | compile s | benchmark s | last result at s |",
        "| --- | --- | --- | --- | --- | --- |", *where_time_went(one), *where_time_went(two), "",
    ]
    medians = two.calibration
    if len(medians) >= 2:
        spread = max(medians.values()) / min(medians.values())
        lines += [f"Calibration (the default config timed on each of the {two.gpus} GPUs):", "",
                  "| worker | median ms |", "| --- | --- |",
                  *(f"| {worker} | {ms:.4f} |" for worker, ms in medians.items()), "",
                  f"Spread between the GPUs (slowest/fastest median): **{spread:.3f}**.", ""]
    else:
        lines += ["Calibration: fewer than two GPUs answered the reference config; no spread.", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from autotune.distributed.cluster import visible_gpus

    devices = visible_gpus()
    if len(devices) < 2:
        print(f"distributed_throughput: needs at least 2 GPUs; this machine has {len(devices)}", file=sys.stderr)
        return 2
    from distributed import Client

    from autotune.distributed.cluster import start_local_cluster
    from autotune.distributed.factories import GPUEvaluatorFactory
    from autotune.evaluators.gpu import default_compile_workers
    from autotune.kernels import get_kernel, parse_dtype, parse_shape
    from autotune.task import bind_live

    spec = get_kernel(KERNEL)
    shape, dtype = parse_shape(args.shape, spec.rank), parse_dtype(args.dtype, spec.dtypes)
    task = bind_live(spec, shape, dtype, "cuda", seed=args.seed)
    candidates = generation(task, args.configs, args.seed)
    compile_workers = args.compile_workers or default_compile_workers((os.cpu_count() or 2) // 2)
    factory = GPUEvaluatorFactory(spec.name, tuple(shape), task.dtype, device_name=task.identity.device,
                                  compile_workers=compile_workers, seed=args.seed)
    runs = []
    cache_root = Path(tempfile.mkdtemp(prefix="distributed-throughput-"))
    try:
        for gpus in (1, 2):
            cluster = start_local_cluster(worker_environments(devices, gpus, cache_root))
            client = Client(cluster)
            try:
                client.wait_for_workers(gpus, timeout=120)
                runs.append(measure(client, factory, candidates, task.default_candidate(), args.batch_size))
                print(f"{gpus} GPU(s): {runs[-1].configs} configs in {runs[-1].wall_s:.1f} s "
                      f"(batches: {runs[-1].batches_text})", flush=True)
            finally:
                client.close()
                cluster.close()
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)
    text = report(runs, shape=args.shape, dtype=args.dtype, seed=args.seed, compile_workers=compile_workers,
                  device=task.identity.device)
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(text)
    args.report.with_suffix(".json").write_text(json.dumps(timeline(runs), indent=1))
    print(text)
    print(f"report written to {args.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
