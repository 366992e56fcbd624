"""Throughput of evaluation spread over GPUs, with and without a compile farm.

For each number of GPUs (1, 2, 4, 8: as many as the machine has) and each generation size
(64, 256, 512, 2048 configs by default), the same Helion softmax configs (random strategy,
fixed seed; 4096x32000 float16) are submitted at once to the asynchronous distributed
evaluator (a free GPU worker takes the next config the moment it is free; no generation
barrier), without a compile farm (each GPU worker compiles its own) and with one (`--farm
on`: CPU compile workers beside the GPU workers, `--compile-workers` of them).  The report
gives configs per second and the ratio to one GPU; the calibration spread between the GPUs
(slowest/fastest median of the default config, timed on each); and, for a `pattern` session
of `--pattern-seconds` on each number of GPUs, when it came within 2% of its final best and
the ratio of that time to one GPU's.

Without a farm each GPU worker compiles its own configs with an equal share of the machine's
cores (less two per GPU), and each of its tasks hands it as many configs as it has compile
processes: one GPU gets every core, as a user with one GPU would.  Start-up is not counted: the clock starts after the calibration, which warms every worker.
Each run compiles into its own empty Triton cache (with a shared one a later run only loads
what an earlier one compiled: a first attempt measured an 8x "ratio" that was the cache's).
Nothing is recorded in a database.  Every run, with every result and when it came back, is
appended to a JSON results file (`--results`); the report is regenerated from that file
alone (`--report-only`), so runs made on several machines or days can be reported together.

    python -m experiments.distributed_throughput --configs 64,256 --farm off,on
    python -m experiments.distributed_throughput --report-only

`--fake` runs the same measurement on CPU worker processes with a fake evaluator (sleeps for
compiling and timing, a few slow compiles): the dry run the tests make; its numbers measure
the machinery, not a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

DEFAULT_REPORT = REPO / "experiments" / "reports" / "distributed_throughput.md"
KERNEL = "softmax"
GPU_COUNTS = (1, 2, 4, 8)
WITHIN = 0.02  # "within 2% of the final best"


def _list(kind: type, allowed: Sequence[Any] | None = None) -> Any:
    def parse(text: str) -> list:
        try:
            values = [kind(part) for part in text.split(",") if part]
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a comma-separated list of {kind.__name__}: {text!r}") from None
        if not values or (allowed is not None and any(v not in allowed for v in values)):
            raise argparse.ArgumentTypeError(f"{text!r}: expected a comma-separated list"
                                             + (f" of {', '.join(map(str, allowed))}" if allowed else ""))
        return values
    return parse


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m experiments.distributed_throughput",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--configs", type=_list(int), default=[64, 256, 512, 2048],
                        help="generation sizes, comma-separated (each at least 16)")
    parser.add_argument("--gpus", type=_list(int, GPU_COUNTS), default=list(GPU_COUNTS),
                        help="numbers of GPUs to measure (those above the machine's count are skipped)")
    parser.add_argument("--farm", type=_list(str, ("off", "on")), default=["off", "on"])
    parser.add_argument("--compile-workers", type=int, default=None,
                        help="compile workers of the farm (default: the machine's cores less two per GPU)")
    parser.add_argument("--pattern-seconds", type=float, default=60.0, help="0: no pattern session")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--shape", default="4096x32000")
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--fake", action="store_true", help="CPU workers and a fake evaluator (a dry run)")
    parser.add_argument("--results", type=Path, default=None, help="results file (default: beside the report)")
    parser.add_argument("--report", type=Path, default=DEFAULT_REPORT)
    parser.add_argument("--report-only", action="store_true", help="regenerate the report from the results file")
    args = parser.parse_args(argv)
    if any(n < 16 for n in args.configs):
        parser.error(f"--configs must each be at least 16, got {args.configs}")
    if args.compile_workers is not None and args.compile_workers < 1:
        parser.error(f"--compile-workers must be at least 1, got {args.compile_workers}")
    args.results = args.results or args.report.with_suffix(".json")
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


def worker_environments(devices: Sequence[str], gpus: int, cache_root: Path, compilers: int = 0,
                        name: str = "") -> tuple[dict[str, dict[str, str]], dict[str, dict[str, float]]]:
    """One GPU per GPU worker, CPU-only compile workers, and one compile cache per run, empty
    at its start, so a run cannot reuse what an earlier one compiled.  (environments, roles)"""
    cache = cache_root / (name or f"{gpus}-gpu-run")
    cache.mkdir(parents=True, exist_ok=False)
    shared = {"TRITON_CACHE_DIR": str(cache / "triton"), "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor")}
    envs = {f"gpu{i}": {"CUDA_VISIBLE_DEVICES": device, **shared} for i, device in enumerate(devices[:gpus])}
    roles: dict[str, dict[str, float]] = {name: {"gpu": 1} for name in envs}
    for i in range(compilers):
        envs[f"compile{i}"] = {"CUDA_VISIBLE_DEVICES": "", **shared}
        roles[f"compile{i}"] = {"compile": 1}
    return envs, roles


def measure(client: Any, factory: Any, candidates: list[Any], reference: Any, *, farm: bool,
            gpus: int | None = None, batch: int = 1) -> dict[str, Any]:
    """Calibrate (and so warm up) every worker, then submit the whole generation at once and
    collect every result as it comes back."""
    from autotune.distributed.evaluator import distributed_evaluator

    evaluator = distributed_evaluator(client, factory, reference=reference, farm=farm, gpus=gpus,
                                      async_batch_size=batch)
    try:
        started = time.perf_counter()
        evaluator.submit(candidates)
        arrivals: list[tuple[float, Any]] = []
        while len(arrivals) < len(candidates):
            arrivals += [(time.perf_counter() - started, r) for r in evaluator.poll(0.05)]
        wall_s = time.perf_counter() - started
    finally:
        evaluator.close()
    return {"kind": "generation", "gpus": len(evaluator.pipeline.members["gpu"]), "farm": farm,
            "compile_workers": len(evaluator.pipeline.members["compile"]) if farm else 0,
            "configs": len(arrivals), "ok": sum(r.ok for _, r in arrivals), "wall_s": round(wall_s, 3),
            "calibration": {w: r.median_ms for w, r in evaluator.calibration.items()},
            "arrivals": [_arrival(at, r) for at, r in arrivals]}


def pattern_session(client: Any, factory: Any, task: Any, seconds: float, seed: int, *, farm: bool,
                    gpus: int | None = None, batch: int = 1) -> dict[str, Any]:
    """A pattern session of `seconds` through the asynchronous loop: its best over time."""
    from autotune.store.cache import Cache
    from autotune.distributed.evaluator import distributed_evaluator
    from autotune.session import Session, SessionSettings, SilentReporter
    from autotune.strategies import get_strategy

    class Best(SilentReporter):
        def __init__(self) -> None:
            self.started, self.curve, self.best = time.perf_counter(), [], float("inf")

        def result(self, candidate: Any, result: Any) -> None:
            if result.ok and result.median_ms < self.best:
                self.best = result.median_ms
                self.curve.append((round(time.perf_counter() - self.started, 3), result.median_ms))

    evaluator = distributed_evaluator(client, factory, reference=task.default_candidate(), farm=farm, gpus=gpus,
                                      async_batch_size=batch)
    folder = Path(tempfile.mkdtemp(prefix="throughput-session-"))
    reporter = Best()
    try:
        journal = Cache.open(folder / "s.db", create=True)
        settings = SessionSettings(strategy="pattern", seed=seed, budget=None, seconds=seconds, mode="gpu",
                                   fresh=True)
        reporter.started = time.perf_counter()
        outcome = Session(task, evaluator, get_strategy("pattern").from_task(task, seed=seed), settings, journal,
                          reporter=reporter).run()
        journal.close()
    finally:
        evaluator.close()
        shutil.rmtree(folder, ignore_errors=True)
    return {"kind": "pattern", "gpus": len(evaluator.pipeline.members["gpu"]), "farm": farm, "seconds": seconds,
            "evaluations": outcome.evaluations, "best_curve": reporter.curve,
            "calibration": {w: r.median_ms for w, r in evaluator.calibration.items()}}


def _arrival(at: float, r: Any) -> dict[str, Any]:
    return {"at_s": round(at, 3), "key": r.key, "status": r.status.value, "compile_s": r.compile_s,
            "bench_s": r.bench_s, "median_ms": r.median_ms, "measured_on": r.measured_on}


def time_to_within(curve: Sequence[Sequence[float]], within: float = WITHIN) -> float | None:
    """When the best first came within `within` of the final best."""
    if not curve:
        return None
    final = curve[-1][1]
    return next(at for at, best in curve if best <= final * (1 + within))


def spread(calibration: Mapping[str, float]) -> float | None:
    return max(calibration.values()) / min(calibration.values()) if len(calibration) >= 2 else None


def report(runs: Sequence[Mapping[str, Any]], *, description: str) -> str:
    """The Markdown report, from the results file's runs alone."""
    generations = [r for r in runs if r["kind"] == "generation"]
    lines = ["# Evaluation spread over GPUs: throughput", "", description, "",
             "## Configs per second", "",
             "Each run evaluates one generation as its description above says (since asynchronous evaluation: "
             "submitted at once, no generation barrier); ratio: configs/s over one GPU's at the same size and farm "
             "setting; last ok: when the last accurate config came back (the rest of the wall is failures).", "",
             "| configs | farm | GPUs | compile workers | ok | wall s | configs/s | ratio to 1 GPU | last ok at s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    one = {(r["configs"], r["farm"]): r["configs"] / r["wall_s"] for r in generations if r["gpus"] == 1}
    for r in sorted(generations, key=lambda r: (r["configs"], r["farm"], r["gpus"])):
        rate = r["configs"] / r["wall_s"] if r["wall_s"] > 0 else float("nan")
        base = one.get((r["configs"], r["farm"]))
        last_ok = max((a["at_s"] for a in r["arrivals"] if a["status"] == "ok"), default=float("nan"))
        lines.append(f"| {r['configs']} | {'on' if r['farm'] else 'off'} | {r['gpus']} | {r['compile_workers']} | "
                     f"{r['ok']} | {r['wall_s']:.1f} | {rate:.2f} | " + (f"{rate / base:.2f}x" if base else "-")
                     + f" | {last_ok:.1f} |")
    sessions = [r for r in runs if r["kind"] == "pattern"]
    if sessions:
        lines += ["", "## A pattern session: time to within 2% of its final best", "",
                  "| farm | GPUs | seconds | evaluations | final best ms | within 2% at s | ratio to 1 GPU |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        first = {r["farm"]: time_to_within(r["best_curve"]) for r in sessions if r["gpus"] == 1}
        for r in sorted(sessions, key=lambda r: (r["farm"], r["gpus"])):
            reached, base = time_to_within(r["best_curve"]), first.get(r["farm"])
            final = f"{r['best_curve'][-1][1]:.4f}" if r["best_curve"] else "-"
            ratio = f"{reached / base:.2f}" if reached is not None and base else "-"
            lines.append(f"| {'on' if r['farm'] else 'off'} | {r['gpus']} | {r['seconds']:g} | {r['evaluations']} | "
                         f"{final} | " + (f"{reached:.1f}" if reached is not None else "-") + f" | {ratio} |")
    lines += ["", "## Calibration spread between the GPUs", "",
              "The default config timed on each GPU worker before each run (slowest/fastest median); read it before "
              "mixing measurements made on different GPUs.", "",
              "| kind | configs | farm | GPUs | spread |", "| --- | --- | --- | --- | --- |"]
    for r in runs:
        value = spread(r["calibration"])
        lines.append(f"| {r['kind']} | {r.get('configs', '-')} | {'on' if r['farm'] else 'off'} | {r['gpus']} | "
                     + (f"{value:.3f}" if value is not None else "- (one GPU)") + " |")
    return "\n".join(lines) + "\n"


def _fake_setup(args: argparse.Namespace) -> tuple[Any, Any, str]:
    """The dry run: the hand-written Triton softmax's space, fake compile and timing."""
    from autotune.distributed.fake_farm import FakeFarmFactory
    from autotune.kernels import get_kernel
    from autotune.task import bind_live

    task = bind_live(get_kernel("softmax-triton"), (64, 1000), "float16", "cpu", seed=args.seed)
    factory = FakeFarmFactory(fake_cost, fake_compile_s, bench_s=0.005, compile_timeout_s=2.0)
    return task, factory, "a dry run on CPU worker processes (fake compile and timing; not a GPU measurement)"


def fake_cost(params: Mapping[str, Any]) -> float:
    from search_spaces.space import params_key

    return 0.1 + int(params_key(dict(params))[:6], 16) / 16**6


def fake_compile_s(params: Mapping[str, Any]) -> float:
    """Mostly 10-40 ms; one config in 16 compiles for 0.5 s (a slow compile, as on the GPU)."""
    from search_spaces.space import params_key

    value = int(params_key(dict(params))[6:12], 16)
    return 0.5 if value % 16 == 0 else 0.01 + (value % 1000) / 1000 * 0.03


def _gpu_setup(args: argparse.Namespace, devices: Sequence[str]) -> tuple[Any, Any, str]:
    from autotune.distributed.factories import GPUEvaluatorFactory
    from autotune.kernels import get_kernel, parse_dtype, parse_shape
    from autotune.task import bind_live

    spec = get_kernel(KERNEL)
    shape, dtype = parse_shape(args.shape, spec.rank), parse_dtype(args.dtype, spec.dtypes)
    task = bind_live(spec, shape, dtype, "cuda", seed=args.seed)
    factory = GPUEvaluatorFactory(spec.name, tuple(shape), task.dtype, device_name=task.identity.device,
                                  seed=args.seed)
    return task, factory, (f"Helion softmax {args.shape} {args.dtype} on {task.identity.device} "
                           f"({len(devices)} visible), random configs of seed {args.seed}")


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every (GPUs, farm) setting in turn: on a GPU machine each on a cluster of its own with its
    own empty compile cache; in the dry run all on one cluster (a subset of its GPU workers)."""
    from distributed import Client

    from autotune.distributed.cluster import start_local_cluster, visible_gpus
    from autotune.distributed.farm import can_farm

    devices = [str(i) for i in range(max(args.gpus))] if args.fake else visible_gpus()
    task, factory, description = _fake_setup(args) if args.fake else _gpu_setup(args, devices)
    counts = [n for n in args.gpus if n <= len(devices)]
    farms = [f == "on" for f in args.farm if f == "off" or can_farm(factory)]
    if len(farms) < len(args.farm):
        print("distributed_throughput: this evaluator cannot compile apart from timing yet; no farm runs")
    settings = [(gpus, farm) for farm in farms for gpus in counts]
    runs: list[dict[str, Any]] = []
    cache_root = Path(tempfile.mkdtemp(prefix="distributed-throughput-"))
    clusters = [settings] if args.fake else [[setting] for setting in settings]
    try:
        for group in clusters:
            gpus_most, farm_any = max(g for g, _ in group), any(f for _, f in group)
            compilers = (args.compile_workers or max(1, (os.cpu_count() or 2) - 2 * gpus_most)) if farm_any else 0
            envs, roles = worker_environments(devices, gpus_most, cache_root, compilers,
                                              name=f"{gpus_most}-gpu-{'farm' if farm_any else 'own'}")
            batch, run_factory = 1, factory
            if not args.fake and not farm_any:  # each GPU worker compiles its own: a task per compile process
                from autotune.evaluators.gpu import default_compile_workers

                batch = default_compile_workers((os.cpu_count() or 2) // gpus_most)
                run_factory = replace(factory, compile_workers=batch)
            cluster = start_local_cluster(envs, roles)
            client = Client(cluster)
            try:
                client.wait_for_workers(len(envs), timeout=300)
                for gpus, farm in group:
                    for count in args.configs:
                        candidates = generation(task, count, args.seed + count)
                        runs.append(measure(client, run_factory, candidates, task.default_candidate(), farm=farm,
                                            gpus=gpus, batch=batch))
                        runs[-1]["compile_processes_per_gpu"] = batch if batch > 1 else None
                        print(f"{gpus} GPU(s), farm {'on' if farm else 'off'}: {count} configs in "
                              f"{runs[-1]['wall_s']:.1f} s", flush=True)
                    if args.pattern_seconds > 0:
                        runs.append(pattern_session(client, run_factory, task, args.pattern_seconds, args.seed,
                                                    farm=farm, gpus=gpus, batch=batch))
            finally:
                client.close()
                cluster.close()
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)
    for r in runs:
        r["description"] = description
    return runs


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.report_only:
        if not args.fake:
            from autotune.distributed.cluster import visible_gpus

            if not visible_gpus():
                print("distributed_throughput: needs a GPU (or --fake for a dry run on CPU workers)", file=sys.stderr)
                return 2
        runs = run(args)
        earlier = json.loads(args.results.read_text()) if args.results.exists() else []
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text(json.dumps(earlier + runs, indent=1))
    if not args.results.exists():
        print(f"distributed_throughput: no results file at {args.results}", file=sys.stderr)
        return 2
    runs = json.loads(args.results.read_text())
    if not runs or not all(isinstance(r, dict) and "kind" in r for r in runs):
        print(f"distributed_throughput: {args.results} holds no runs of this experiment "
              "(an older format: measure again)", file=sys.stderr)
        return 2
    descriptions = sorted({r.get("description", "") for r in runs})
    text = report(runs, description="Runs: " + "; ".join(d for d in descriptions if d) + ".")
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(text)
    print(text)
    print(f"report written to {args.report} from {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
