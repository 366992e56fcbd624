"""Heuristic seeds against the default config, a small grid and torch, on the matmul-epilogue family.

For each kernel and shape, one GPU evaluator (the project's, so every figure uses one
timer and one accuracy check) measures: Helion's default config, every rule seed, Helion's
own compiler seeds when its ConfigSpec offers any, a seeded random sample of a small grid
(M tile x K tile x num_warps x num_stages; its best is "grid-best"), and the torch eager and
torch.compile baselines.  Results go to a
Markdown table (and JSON) under --out, rewritten after every kernel and shape so a cut-short
run keeps what it measured, and rows of earlier runs for other kernels or shapes are kept (so
the experiment can be run in parts).  The labelled configs run as one session of the `fixed`
strategy (`autotune.fixed_list`): with --db it is recorded there (its options hold the rule
analysis and each config's labels), each row as it arrives, and measuring the same plan again
resumes a session that was cut short.  `experiments/seed_study` runs seed 004's cells through
the same plan, measurement and recording.

    python -m experiments.heuristic_seeds --dry-run            # what would be measured (CPU is fine)
    python -m experiments.heuristic_seeds --out experiments/reports --db user.db
    python -m experiments.heuristic_seeds --kernels matmul-rmsnorm,matmul-softmax --shapes 16384x512x512
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

FAMILY = ("matmul-rmsnorm", "matmul-layernorm", "matmul-softmax", "matmul-l2norm", "matmul-logsumexp",
          "matmul-sum", "matmul-max")
# Small N (the cap does not bite), N where K_BLOCK drops, and N near the top of the
# feasible range for 16-bit operands (M x K x N).
SHAPES = ("16384x512x512", "8192x1024x1024", "4096x512x4096")
GRID_M = (16, 32, 64, 128)
GRID_K = (16, 32, 64)
GRID_WARPS = (4, 8)
GRID_STAGES = (1, 3)


@dataclass(frozen=True)
class Grid:
    """The axes of a grid over the M tile, the K tile, num_warps and num_stages; every other
    parameter stays at the default."""

    m: tuple[int, ...] = GRID_M
    k: tuple[int, ...] = GRID_K
    warps: tuple[int, ...] = GRID_WARPS
    stages: tuple[int, ...] = GRID_STAGES


def grid_points(task: Any, sample: int | None, seed: int, grid: Grid = Grid()) -> list[dict[str, Any]]:
    """The grid's points that are points of the task's space: a seeded sample of `sample` of
    them, or (sample None) all of them in the grid's order."""
    m_slot, k_slot = "block_sizes[0]", "block_sizes[1]"
    points = []
    for m, k, warps, stages in itertools.product(grid.m, grid.k, grid.warps, grid.stages):
        params = {**task.space.default, m_slot: m, k_slot: k, "num_warps": warps, "num_stages": stages}
        if not task.space.violations(params):
            points.append(task.space.ordered(params))
    if sample is None:
        return points
    random.Random(seed).shuffle(points)
    return points[:sample]


def plan(kernel: str, shape_text: str, dtype_text: str, device: str, sample: int | None, seed: int,
         grid: Grid = Grid()) -> dict[str, Any]:
    """The task and the labelled candidates to measure for one kernel and shape."""
    from autotune.kernels import get_kernel, parse_dtype, parse_shape
    from autotune.task import bind_live

    spec = get_kernel(kernel)
    shape, dtype = parse_shape(shape_text, spec.rank), parse_dtype(dtype_text, spec.dtypes)
    return plan_task(bind_live(spec, shape, dtype, device, seed=seed), sample, seed, grid)


def plan_task(task: Any, sample: int | None, seed: int, grid: Grid = Grid()) -> dict[str, Any]:
    """The labelled candidates for a bound task: the default, every rule seed, Helion's own
    compiler seeds (when its ConfigSpec offers any) and the grid's points.  `configs` holds the
    (label, point) pairs of those that are configs of the task: what is measured."""
    from heuristics import analyse

    analysis = analyse(task)
    labelled: list[tuple[str, Any]] = [("default", task.space.default)]
    labelled += [(f"seed {i}: {s.rule}", s.params) for i, s in enumerate(analysis.outcome.seeds, start=1)]
    natives = task.space.extras.get("compiler_seeds", [])
    labelled += [(f"helion seed {i}", _Native(n)) for i, n in enumerate(natives, start=1)]
    labelled += [(f"grid {i}", p) for i, p in enumerate(grid_points(task, sample, seed, grid), start=1)]
    candidates, configs, seen = [], [], set()
    for label, params in labelled:
        try:
            point = task.codec.params_of(params.native) if isinstance(params, _Native) else params
            candidate = task.candidate(point)
        except ValueError as error:  # InvalidConfig: reported, not measured
            candidates.append((label, None, str(error)))
            continue
        candidates.append((label, candidate, "" if candidate.key not in seen else "same config as above"))
        configs.append((label, point))
        seen.add(candidate.key)
    return {"task": task, "analysis": analysis, "candidates": candidates, "configs": configs}


@dataclass(frozen=True)
class _Native:
    """A config as the compiler writes it (Helion's seeds), not yet a point of the space."""

    native: dict[str, Any]


def measure(item: dict[str, Any], args: argparse.Namespace, *, tags: Any = None,
            evaluator: Any = None) -> dict[str, Any]:
    """One session of the `fixed` strategy over the plan's labelled configs, then nothing else:
    baselines, then every config (the default first), each row recorded as it arrives.

    `tags` becomes the session's `options["experiment"]` (default {"study": "heuristic_seeds"});
    `evaluator` replaces the GPU evaluator (tests give a fake one).  With `args.db` the session
    is recorded there, and a run of the same plan that was cut short is resumed: only the
    configs it had not measured are evaluated; without it, in a scratch database."""
    from autotune.fixed_list import measure_fixed

    task = item["task"]
    started = time.time()
    options = {"experiment": {"study": "heuristic_seeds"} if tags is None else tags,
               "heuristics": item["analysis"].to_record(),
               "invalid": {label: note for label, c, note in item["candidates"] if c is None}}
    if evaluator is None:
        from autotune.evaluators.gpu import GPUEvaluator

        evaluator = GPUEvaluator(task.spec.name, task.shape, task.dtype, device_name=task.identity.device,
                                 compile_workers=args.compile_workers, compile_timeout_s=args.compile_timeout)
    try:
        with _journal(args.db) as journal:
            run = measure_fixed(task, evaluator, item["configs"], journal, options=options)
    finally:
        evaluator.close()
    return {"results": run.results, "baselines": run.baselines, "wall_s": time.time() - started,
            "resumed": run.resumed}


@contextmanager
def _journal(db: str | None) -> Iterator[Any]:
    """The database the session is recorded in: `db`, or a scratch one thrown away after."""
    from autotune.store.cache import Cache
    from autotune.databases import open_for_writing

    with tempfile.TemporaryDirectory() as scratch:
        cache = open_for_writing(db) if db else Cache.open(Path(scratch) / "scratch.db", create=True)
        try:
            yield cache
        finally:
            cache.close()


def _ms(result: Any) -> float | None:
    return result.median_ms if result is not None and result.ok else None


def _fmt(ms: float | None, status: str = "") -> str:
    return f"{ms:.4f}" if ms is not None else (status or "-")


def _ratio(other: float | None, seed: float | None) -> str:
    """How many times faster the seed is (other / seed); '-' when either did not run."""
    return f"{other / seed:.2f}x" if other and seed else "-"


def report_rows(kernel: str, shape: str, item: dict[str, Any], measured: dict[str, Any]) -> list[dict[str, Any]]:
    results, baselines = measured["results"], measured["baselines"]
    by_label = {label: c for label, c, _ in item["candidates"] if c is not None}
    default = results.get(by_label["default"].key)
    grid = [results.get(c.key) for label, c in by_label.items() if label.startswith("grid")]
    grid_ms = min((r.median_ms for r in grid if r is not None and r.ok), default=None)
    torch_ms = _ms(baselines.get("torch"))
    compiled_ms = _ms(baselines.get("torch.compile"))
    rows = []
    seeds = [(label, c) for label, c in by_label.items() if label.startswith("seed")]
    declined = [d.reason for d in item["analysis"].outcome.declined]
    for label, candidate in seeds or [("(no seed)", None)]:
        result = results.get(candidate.key) if candidate is not None else None
        seed_ms = _ms(result)
        rows.append({
            "kernel": kernel, "shape": shape, "seed": label if candidate is not None else "; ".join(declined) or "-",
            "seed_ms": seed_ms, "seed_status": result.status.value if result is not None else "-",
            "default_ms": _ms(default), "default_status": default.status.value if default is not None else "-",
            "grid_ms": grid_ms, "grid_ok": sum(1 for r in grid if r is not None and r.ok), "grid_n": len(grid),
            "torch_ms": torch_ms, "compile_ms": compiled_ms,
        })
    return rows


def markdown(rows: list[dict[str, Any]], dtype: str, device: str) -> str:
    lines = [f"# Heuristic seeds vs default, grid-best and torch ({dtype}, {device})", "",
             "Times are medians in ms from the project's GPU evaluator (accuracy-checked against an fp64 "
             "reference). Ratios are how many times faster the seed is (>1: the seed wins). grid-best is the "
             "best of a seeded sample of M tile x K tile x warps x stages.", "",
             "| kernel | MxKxN | seed | seed ms | default ms | grid-best ms (ok/n) | torch ms | torch.compile ms "
             "| vs default | vs grid-best | vs torch | vs torch.compile |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['kernel']} | {r['shape']} | {r['seed']} | {_fmt(r['seed_ms'], r['seed_status'])} "
            f"| {_fmt(r['default_ms'], r['default_status'])} | {_fmt(r['grid_ms'])} ({r['grid_ok']}/{r['grid_n']}) "
            f"| {_fmt(r['torch_ms'])} | {_fmt(r['compile_ms'])} | {_ratio(r['default_ms'], r['seed_ms'])} "
            f"| {_ratio(r['grid_ms'], r['seed_ms'])} | {_ratio(r['torch_ms'], r['seed_ms'])} "
            f"| {_ratio(r['compile_ms'], r['seed_ms'])} |")
    return "\n".join(lines) + "\n"


def dry_run(args: argparse.Namespace) -> None:
    for kernel in args.kernels.split(","):
        for shape in args.shapes.split(","):
            item = plan(kernel, shape, args.dtype, "cpu", args.grid_sample, args.seed)
            print(f"{kernel} {shape} {args.dtype}:")
            for declined in item["analysis"].outcome.declined:
                print(f"  declined {declined.rule}: {declined.reason}")
            for label, candidate, note in item["candidates"]:
                if candidate is None:
                    print(f"  {label}: not a point of the space ({note})")
                    continue
                p = candidate.params
                print(f"  {label}: M tile {p.get('block_sizes[0]')}, K tile {p.get('block_sizes[1]')}, "
                      f"{p.get('num_warps')} warps, {p.get('num_stages')} stages {note}".rstrip())
            print("  baselines: torch, torch.compile")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", default=",".join(FAMILY))
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated MxKxN")
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--grid-sample", type=int, default=8, help="grid points measured per kernel and shape")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile-workers", type=int, default=None)
    parser.add_argument("--compile-timeout", type=float, default=30.0)
    parser.add_argument("--out", default="experiments/reports")
    parser.add_argument("--db", default=None, help="also record every evaluation into this database")
    parser.add_argument("--dry-run", action="store_true", help="list what would be measured (no GPU needed)")
    parser.add_argument("--device", default="cuda", help="where the kernels are bound for planning")
    args = parser.parse_args()
    if args.dry_run:
        dry_run(args)
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"heuristic_seeds_{args.dtype}"
    # Rows of earlier runs (other kernels or shapes) are kept, so the experiment can be run in parts.
    earlier = json.loads(stem.with_suffix(".json").read_text()) if stem.with_suffix(".json").exists() else []
    rows: list[dict[str, Any]] = []
    device = "?"
    for kernel in args.kernels.split(","):
        for shape in args.shapes.split(","):
            item = plan(kernel, shape, args.dtype, args.device, args.grid_sample, args.seed)
            device = item["task"].identity.device
            try:
                measured = measure(item, args)
            except Exception as error:  # one kernel failing must not lose the others' rows
                print(f"{kernel} {shape}: {type(error).__name__}: {error}")
                continue
            rows += report_rows(kernel, shape, item, measured)
            done = {(r["kernel"], r["shape"]) for r in rows}
            merged = [r for r in earlier if (r["kernel"], r["shape"]) not in done] + rows
            stem.with_suffix(".md").write_text(markdown(merged, args.dtype, device))
            stem.with_suffix(".json").write_text(json.dumps(merged, indent=1))
            print(f"{kernel} {shape}: {len(measured['results'])} configs in {measured['wall_s']:.0f} s")
    print(markdown(rows, args.dtype, device))


if __name__ == "__main__":
    main()
