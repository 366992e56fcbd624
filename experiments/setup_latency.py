"""How soon after the command does a tuning session measure, and what does setting every
compile worker up at the evaluator's start save?

Why: the held-out study counts set-up in every wall time, and its warm arms are allowed a
tenth of Helion quick's: seconds lost before the first config is timed are a large share of
that.  A session's start is the command's imports, binding the kernel, and the evaluator's
workers: the benchmark worker (CUDA context, inputs, the accuracy reference, the default
config) and the compile workers (each a CUDA context and inputs, for its smoke runs).  The
compile workers other than the first used to set up when the first generation needed them,
and their set-ups, which use the GPU, held that generation's first timing back;
`AUTOTUNE_EARLY_SETUPS=1` (the default) grants them at the start instead, beside the
benchmark worker's.  Most of a fresh command's start is its imports (torch, Triton, Helion, in
the command and in the workers' fork server); the third variant runs the same command through
an `autotune serve` server started once before its runs (its own start is reported apart).

On a GPU machine this runs the same short `autotune tune` command once per variant and
repeat, alternating, each compiling into empty compile caches of its own (as on a fresh
machine), and writes what each run's clock says, measured from the command's start, to a
JSON file; the report is made from that file alone.

    python -m experiments.setup_latency --db runs/setup_latency.db            # GPU: runs, report
    python -m experiments.setup_latency --report                               # the report only
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from experiments.session_pairs import REPO, write_report

REPORTS = REPO / "experiments" / "reports"
RESULTS = REPORTS / "setup_latency.json"
SERVER = "through a warm server"
VARIANTS = {"set up when first needed": {"AUTOTUNE_EARLY_SETUPS": "0", "AUTOTUNE_SERVER": "off"},
            "early set-ups": {"AUTOTUNE_EARLY_SETUPS": "1", "AUTOTUNE_SERVER": "off"},
            SERVER: {"AUTOTUNE_EARLY_SETUPS": "1"}}  # name -> the command's environment (AUTOTUNE_SERVER: set below)
TARGET_S = 5.0  # the first config measured within this many seconds of the command
FIRST_RESULTS = 16  # "first generation": the time by which this many configs were measured


def command(args: argparse.Namespace) -> list[str]:
    return [sys.executable, "-m", "autotune.cli", "tune", args.kernel, "--shape", args.shape, "--dtype", args.dtype,
            "--strategy", "pattern", "--seed-from", args.seed_from, "--seconds", str(args.seconds), "--seed", "1",
            "--fresh", "--db", str(args.db)]


def run_once(args: argparse.Namespace, variant: str, socket: Path | None = None) -> dict[str, Any]:
    """One command in empty compile caches; its times from the command's start."""
    from autotune.evaluators.gpu_process import fresh_compile_caches

    with fresh_compile_caches():  # sets the compile caches' variables in os.environ
        env = {**os.environ, **VARIANTS[variant]}
        if variant == SERVER:
            env["AUTOTUNE_SERVER"] = str(socket)
        started = time.time()
        subprocess.run(command(args), check=True, cwd=REPO, env=env)
        ended = time.time()
    return {"variant": variant, **measured(args.db, started), "command_s": round(ended - started, 2)}


def start_server(socket: Path) -> tuple[subprocess.Popen, float]:
    """`autotune serve` on `socket`, and the seconds until it answered (it opens the socket once its
    imports and fork server are ready)."""
    from autotune.server_wire import socket_answers

    socket.unlink(missing_ok=True)
    started = time.time()
    process = subprocess.Popen([sys.executable, "-m", "autotune.cli", "serve", "--socket", str(socket)], cwd=REPO,
                               env={**os.environ, "AUTOTUNE_SERVER": str(socket)})
    while not socket_answers(socket):
        if process.poll() is not None:
            raise SystemExit(f"the server stopped at its start (exit {process.returncode})")
        time.sleep(0.1)
    return process, round(time.time() - started, 2)


def measured(db: Path, started: float) -> dict[str, Any]:
    """The newest session of `db`: when it was ready and when its results came, from `started`."""
    from autotune.databases import open_for_reading

    cache = open_for_reading(db)
    try:
        session = cache.sessions(limit=1)[0]
        rows = sorted((r for r in cache.session_evaluations(session["id"]) if r.generation >= 0),
                      key=lambda r: r.created)
    finally:
        cache.close()
    created = [r.created - started for r in rows]
    return {"session": session["id"], "shape": "x".join(map(str, session["shape"])), "kernel": session["kernel"],
            "device": session["device"], "ready_s": round(session["started"] - started, 2),
            "first_result_s": round(created[0], 2) if created else None,
            "first_results_s": round(created[FIRST_RESULTS - 1], 2) if len(created) >= FIRST_RESULTS else None,
            "configs": len(rows), "set_up": session["options"].get("set_up", {}),
            "startup": session["options"].get("startup"),  # from the command's start (autotune/startup.py)
            "early_setups": session["options"].get("early_setups")}


def report(results: list[dict[str, Any]]) -> str:
    if not results:
        raise SystemExit(f"{RESULTS}: no runs recorded")
    first = results[0]
    lines = [f"# Session start-up: {first['kernel']} {first['shape']}, from the command's start", "",
             f"Generated by `python -m experiments.setup_latency --report` from `{RESULTS.name}`. Device: "
             f"{first['device']}. Each run is one `autotune tune` command (pattern search, seeded from the default "
             "and the heuristic, every config measured afresh) compiling into empty compile caches; times are "
             "seconds from the command's start: **ready** when the evaluator could take its first config, "
             f"**first result** the first config measured, **{FIRST_RESULTS} results** when {FIRST_RESULTS} "
             "configs were. Median [range] over the runs of each variant; the variants alternated.", "",
             f"| variant | runs | ready s | first result s | {FIRST_RESULTS} results s | configs in the session |",
             "|---|---|---|---|---|---|"]
    for variant in VARIANTS:
        runs = [r for r in results if r["variant"] == variant]
        if runs:
            lines.append(f"| {variant} | {len(runs)} | {_spread(runs, 'ready_s')} | {_spread(runs, 'first_result_s')} "
                         f"| {_spread(runs, 'first_results_s')} | {_spread(runs, 'configs', '.0f')} |")
    starts = sorted({(r["server_start_s"], r.get("server_start_from")) for r in results
                     if r.get("server_start_s") is not None}, key=lambda pair: pair[0])
    if starts:
        took = "; ".join(f"{value:.1f} s" + (f" ({source})" if source else "") for value, source in starts)
        lines += ["", "Each server was started once before its runs (`autotune serve`: imports and the workers' fork "
                  f"server) and took {took} to answer; that start is not in its runs' times, which begin at each "
                  "command's start."]
    lines += ["", f"Target: the first config measured within {TARGET_S:.0f} s of the command. " + _verdicts(results)]
    lines += ["", "Where the evaluator's start went (seconds, median over all runs; phases inside the benchmark "
              "worker and the first compile worker, which it waits for, run side by side):", ""]
    phases = sorted({name for r in results for name in r["set_up"]})
    lines += [f"- {name}: {statistics.median(r['set_up'][name] for r in results if name in r['set_up']):.2f}"
              for name in phases]
    return "\n".join(lines) + "\n"


def _verdicts(results: list[dict[str, Any]]) -> str:
    """Per variant, whether every run's first result came within the target."""
    said = []
    for variant in VARIANTS:
        firsts = [r["first_result_s"] for r in results if r["variant"] == variant]
        if firsts:
            met = sum(1 for f in firsts if f is not None and f <= TARGET_S)
            said.append(f"{variant}: {met} of {len(firsts)} runs ({'met' if met == len(firsts) else 'not met'})")
    return "; ".join(said) + "."


def _spread(runs: list[dict[str, Any]], key: str, fmt: str = ".2f") -> str:
    values = [r[key] for r in runs if r[key] is not None]
    if not values:
        return "-"
    return f"{statistics.median(values):{fmt}} [{min(values):{fmt}}-{max(values):{fmt}}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, default=REPO / "runs" / "setup_latency.db")
    parser.add_argument("--kernel", default="softmax")
    parser.add_argument("--shape", default="4096x32000")
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--seed-from", default="default,heuristic")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, run alternately")
    parser.add_argument("--report", action="store_true", help="only write the report from the results file")
    parser.add_argument("--out", type=Path, default=REPORTS / "setup_latency.md")
    args = parser.parse_args()
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    if not args.report:
        variants = [v.strip() for v in args.variants.split(",") if v.strip()]
        unknown = sorted(set(variants) - set(VARIANTS))
        if unknown:
            raise SystemExit(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
        args.db.parent.mkdir(parents=True, exist_ok=True)
        socket = args.db.parent / "setup_latency.sock"
        server, server_start_s = start_server(socket) if SERVER in variants else (None, None)
        try:
            for _ in range(args.repeats):
                for variant in variants:
                    run = run_once(args, variant, socket)
                    if variant == SERVER:
                        run["server_start_s"] = server_start_s
                    results.append(run)
                    RESULTS.write_text(json.dumps(results, indent=1) + "\n")  # nothing lost if a later run dies
        finally:
            if server is not None:
                server.terminate()
                server.wait(30)
    write_report(report(results), args.out)


if __name__ == "__main__":
    main()
