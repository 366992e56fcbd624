"""Our strategies against Helion's own quick autotune, on the Helion softmax (GPU machine).

For each shape, in one process:
1. Helion's quick autotune runs natively (`autotune.baselines.helion_native`), timed
   wall-clock, with its per-config log (timestamps, times) written beside the report;
2. its final config is re-timed in our harness, so every figure uses one timer;
3. each of our strategies runs as a session against one shared GPU evaluator (the
   evaluator's start-up is reported separately), recording into the database; each
   session's timeline is taken as its results arrive (a reporter), not read back.
Reported per contender: wall seconds and configs until within 2% of the best time seen by
anyone in the run, the final best (GB/s), and the ratio to torch.softmax.  Cold and warm
sessions are reported apart: each session's `seed_from` and seeds are recorded in its options
and read back with the origin of its best config (`--seed-from` may be given several times:
every strategy then runs once per seed set, e.g. `--seed-from default --seed-from heuristic`).

    python -m experiments.strategies_vs_helion --shapes 4096x32000,1024x50257 --db user.db --out runs/
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

WITHIN = 1.02


def time_to_within(timeline: list[tuple[float, float]], target_ms: float) -> tuple[float | None, int | None]:
    """(seconds, configs) until the best-so-far first came within WITHIN of `target_ms`."""
    best = float("inf")
    for count, (seconds, ms) in enumerate(timeline, start=1):
        best = min(best, ms)
        if best <= target_ms * WITHIN:
            return seconds, count
    return None, None


class TimelineReporter:
    """Passes every event on to `inner` and keeps the session's timeline: (seconds since the
    session started, ms or inf for a failure) for each search-time result, in order."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.timeline: list[tuple[float, float]] = []
        self._started = time.time()
        self._generation = 0

    def session_started(self, *args: Any) -> None:
        self._started = time.time()
        self.inner.session_started(*args)

    def generation_started(self, generation: int, size: int) -> None:
        self._generation = generation
        self.inner.generation_started(generation, size)

    def result(self, candidate: Any, result: Any) -> None:
        if self._generation >= 0:  # not the final re-benchmark
            ms = result.median_ms if result.ok else float("inf")
            self.timeline.append((time.time() - self._started, ms))
        self.inner.result(candidate, result)

    def generation_finished(self, summary: Any) -> None:
        self.inner.generation_finished(summary)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="4096x32000,1024x50257", help="comma-separated shapes, run in turn")
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--db", default="user.db", help="records here (read with the shipped data)")
    parser.add_argument("--out", default="runs")
    parser.add_argument("--strategies", default="random,pattern,tpe,helion-lfbo")
    parser.add_argument("--budget", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--compile-timeout", type=float, default=15.0)
    parser.add_argument("--seed-from", action="append", default=None,
                        help="seed sources for our strategies (default: heuristic); repeat it to run every strategy "
                             "once per seed set, e.g. cold (default) and warm (heuristic)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-helion", action="store_true")
    args = parser.parse_args()
    args.seed_from = args.seed_from or ["heuristic"]
    for shape in args.shapes.split(","):
        run_shape(shape.strip(), args)


def run_shape(shape_text: str, args: argparse.Namespace) -> None:
    from rich.console import Console

    from autotune.baselines.helion_native import QUICK, pick_params, retime, run_native
    from autotune.databases import open_for_writing
    from autotune.evaluators.gpu import GPUEvaluator
    from autotune.kernels import get_kernel, parse_dtype, parse_shape
    from autotune.report import RichReporter, gbps
    from autotune.seeds import collect_seeds
    from autotune.session import Session, SessionSettings
    from autotune.strategies import get_strategy
    from autotune.task import bind_live

    console = Console(width=150)
    spec = get_kernel("softmax")
    shape, dtype = parse_shape(shape_text, 2), parse_dtype(args.dtype)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    label = f"softmax_{shape_text}_{args.dtype}"

    helion = None
    if not args.skip_helion:
        helion = run_native(spec, shape, dtype, out / f"{label}_helion_quick", effort=QUICK).to_record()
        console.print(f"Helion quick: {helion['wall_s']:.1f} s, {helion['configs']} configs timed")

    cache = open_for_writing(args.db)
    task = bind_live(spec, shape, dtype, "cuda", seed=0)
    started = time.time()
    evaluator = GPUEvaluator(spec.name, shape, task.dtype, device_name=task.identity.device,
                             compile_timeout_s=args.compile_timeout)
    startup_s = time.time() - started
    rows: dict[str, dict[str, Any]] = {}
    try:
        baselines = evaluator.baselines()
        if helion:
            try:
                pick = pick_params(spec, shape, dtype, "cuda", helion["config"])
                if pick.past_thread_limit:  # re-timed in the space without our elements-per-thread limit
                    helion["past_thread_limit"] = pick.past_thread_limit
                final = retime(pick.task, evaluator, helion["config"])
                helion["final_ms"] = final.median_ms if final else None
            except ValueError as error:  # InvalidConfig: not a point of our space
                console.print(f"Helion's final config could not be re-timed here: {error}")
        for seed_from in args.seed_from:
            seeds = collect_seeds(task, None, [s for s in seed_from.split(",") if s])
            for name in args.strategies.split(","):
                label = name if len(args.seed_from) == 1 else f"{name} ({seed_from})"
                strategy = get_strategy(name).from_task(task, seed=args.seed, budget=args.budget)
                settings = SessionSettings(name, args.seed, args.budget, seconds=args.seconds, mode="gpu")
                reporter = TimelineReporter(RichReporter(console))
                try:
                    outcome = Session(task, evaluator, strategy, settings, cache, reporter=reporter,
                                      options=session_options(seed_from, seeds, shape_text), seeds=seeds).run()
                except Exception as error:  # one contender failing must not lose the others' results
                    console.print(f"{label} failed: {type(error).__name__}: {error}")
                    continue
                rows[label] = {"session": outcome.session_id, "wall_s": outcome.wall_s,
                               "configs": outcome.evaluations,
                               "final_ms": outcome.best[1].median_ms if outcome.best else None,
                               "timeline": reporter.timeline, **started_from(cache, outcome.session_id)}
    finally:
        evaluator.close()

    torch_ms = baselines["torch.softmax"].median_ms
    finals = [r["final_ms"] for r in rows.values() if r["final_ms"]]
    finals += [min(ms for _, ms in r["timeline"]) for r in rows.values() if r["timeline"]]
    if helion and helion.get("final_ms"):
        finals.append(helion["final_ms"])
    best_ms = min(finals)
    nbytes = task.bytes_moved()
    lines = [f"# Strategies vs Helion quick: softmax {shape_text} {args.dtype} on {task.identity.device}", "",
             f"Best time seen by anyone: {best_ms:.4f} ms ({gbps(nbytes, best_ms):.0f} GB/s); torch.softmax "
             f"{torch_ms:.4f} ms ({gbps(nbytes, torch_ms):.0f} GB/s); device copy "
             f"{baselines['device copy'].median_ms:.4f} ms; our evaluator's start-up {startup_s:.1f} s "
             f"(not in the session times). Budget per strategy: {args.budget} configs or {args.seconds:g} s; "
             f"our strategies start from seeds: {' / '.join(args.seed_from)} (the default config is always "
             "first).", ""]
    helion_row = {**helion, "final_ms": helion.get("final_ms")} if helion else None
    lines += contender_tables(rows, helion_row, best_ms, torch_ms, nbytes)
    report = "\n".join(lines) + "\n"
    (out / f"{label}_strategies_vs_helion.md").write_text(report)
    (out / f"{label}_strategies_vs_helion.json").write_text(json.dumps(
        {"best_ms": best_ms, "torch_ms": torch_ms, "startup_s": startup_s, "helion": helion,
         "ours": {name: {**row, "start": row["start"].kind, "seed_from": row["start"].seed_from,
                         "seeds": list(row["start"].seeds)} for name, row in rows.items()}}, indent=1, default=str))
    console.print(report)


def session_options(seed_from: str, seeds: list[tuple[str, Any]], shape: str) -> dict[str, Any]:
    """A session's options as `autotune tune` records them: what it started from is read back
    from them (older runs recorded only the bare study name, so their seeds went unnamed)."""
    return {"experiment": {"study": "strategies_vs_helion", "shape": shape}, "seed_from": seed_from,
            "seeds": [origin for origin, _ in seeds]}


def started_from(cache: Any, session_id: int) -> dict[str, Any]:
    """{"start": Start, "best_origin": ...} of a recorded session, read back from the store."""
    from experiments.softmax_study.data import Start, best_origin, session_start
    from autotune.history import session_best

    session = cache.session(session_id)
    rows = cache.session_evaluations(session_id)
    best = session_best(cache, session_id)
    start: Start = session_start(cache, session, rows)
    return {"start": start, "best_origin": best_origin(cache, session_id, best[0].key, rows) if best else "-"}


def contender_tables(rows: dict[str, dict[str, Any]], helion: dict[str, Any] | None, best_ms: float,
                     torch_ms: float, nbytes: int) -> list[str]:
    """Markdown tables: Helion quick, then our cold-started sessions, then our warm-started ones,
    each naming what it started from and where its best came from."""
    from autotune.report import gbps

    header = ["| contender | started from | best from | wall s | configs | s to 2% | configs to 2% | final ms "
              "| final GB/s | vs torch.softmax |", "|---|---|---|---|---|---|---|---|---|---|"]

    def line(name: str, row: dict[str, Any], start: str, origin: str) -> str:
        seconds, count = time_to_within(row["timeline"], best_ms)
        final = row["final_ms"]
        cells = (f"{'-' if seconds is None else round(seconds, 1)} | {'-' if count is None else count} | "
                 f"{final:.4f} | {gbps(nbytes, final):.0f} | {torch_ms / final:.3f}" if final else "- | - | - | - | -")
        return f"| {name} | {start} | {origin} | {row['wall_s']:.1f} | {row['configs']} | {cells} |"

    lines: list[str] = []
    if helion:
        lines += ["## Helion quick", ""] + header + [line("helion quick (native)", helion, "its own search", "search"),
                                                      ""]
    for kind, title in (("cold", "Cold starts (the default config only)"), ("warm", "Warm starts (seeded)")):
        chosen = [(name, row) for name, row in rows.items() if row["start"].kind == kind]
        if chosen:
            lines += [f"## {title}", ""] + header
            lines += [line(name, row, row["start"].text(), row["best_origin"]) for name, row in chosen] + [""]
    return lines


if __name__ == "__main__":
    main()
