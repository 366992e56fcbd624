"""How long the `autotune` command itself takes to start: a replay from command to exit on this
CPU, and on a GPU the time from the command to its first recorded evaluation.

Why: on a 2-core CPU machine `import helion` alone took about 9 s, so a replay of a session that
itself takes under a second took 16-25 s, and on an H200 the first evaluation was recorded 22 s
after the command.  The targets: a 20-config replay within 3 s from command to exit on a 2-core
CPU, and a GPU session's first evaluation within 5 s of its command.

    python -m experiments.startup_latency --cpu              # 3 replays here, command to exit
    python -m experiments.startup_latency --cpu --before REF  # ... and the same at git revision REF
    python -m experiments.startup_latency --gpu              # GPU: 3 sessions, command to first evaluation
    python -m experiments.startup_latency --report           # the report from the JSON alone

Each mode adds its runs to `experiments/reports/startup_latency.json` (replacing that mode's
runs of the same label); the report is made from that file alone.  Other processes may share
the machine: every run records the load average before it, and the CPU seconds it used (user
and system, of the command and its children), which load does not inflate as it does wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
REPORTS = REPO / "experiments" / "reports"
RESULTS = REPORTS / "startup_latency.json"
REPLAY = ["tune", "softmax", "--shape", "4096x32000", "--dtype", "float16", "--strategy", "random", "--budget", "20",
          "--seed", "1"]
GPU = ["tune", "softmax", "--shape", "3000x7000", "--dtype", "float16", "--strategy", "random", "--budget", "20",
       "--seed-from", "default", "--fresh"]
CPU_TARGET_S, GPU_TARGET_S = 3.0, 5.0


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _started_line(text: str) -> str | None:
    return next((line for line in text.splitlines() if line.startswith("started in ")), None)


def run_replay(source: Path, shipped: Path, work: Path, name: str) -> dict[str, Any]:
    """One replay command, in a fresh database, from `source` (a checkout): its wall and CPU time."""
    db = work / f"replay-{name}.db"
    env = {**os.environ, "PYTHONPATH": str(source), "AUTOTUNE_SERVER": "off", "COLUMNS": "200"}
    load = os.getloadavg()[0]
    cpu = _cpu_seconds()
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "autotune.cli", *REPLAY, "--db", str(db), "--shipped", str(shipped)],
                          cwd=work, env=env, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the replay failed (exit {done.returncode}): {done.stderr.strip()[-400:]}")
    return {"wall_s": round(wall, 2), "cpu_s": round(_cpu_seconds() - cpu, 2), "load_1min": round(load, 2),
            "started_line": _started_line(done.stdout)}  # None before the line existed


def _checkout(ref: str, into: Path) -> Path:
    """The sources of git revision `ref` (the package and the spaces), extracted under `into`."""
    archive = into / "sources.tar"
    subprocess.run(["git", "archive", "--format=tar", "-o", str(archive), ref, "autotune", "search_spaces",
                    "heuristics"], cwd=REPO, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "src", filter="data")
    return into / "src"


def cpu_mode(args: argparse.Namespace) -> list[dict[str, Any]]:
    """`--repeats` replays of the current sources (and of `--before`), alternating."""
    from autotune.databases import SHIPPED_DB, ready

    shipped = ready(REPO / SHIPPED_DB)  # built once, before any run is timed
    if shipped is None or not shipped.exists():
        raise SystemExit("no shipped data to replay (data/shipped.db could not be built from data/batches)")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        sources = {"now": REPO}
        if args.before:
            sources[f"before ({args.before})"] = _checkout(args.before, work)
        for index, source in enumerate(sources.values()):  # untimed: bytecode compiled, files cached
            run_replay(source, shipped, work, f"warm{index}")
        runs: dict[str, list[dict[str, Any]]] = {label: [] for label in sources}
        for index in range(args.repeats):
            for label, source in sources.items():
                runs[label].append(run_replay(source, shipped, work, f"{len(runs[label])}-{index}-{label[:3]}"))
                print(f"{label}: {runs[label][-1]}", flush=True)
    machine = {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
               "python": platform.python_version()}
    return [{"mode": "cpu", "label": label, "command": "autotune " + " ".join(REPLAY), "machine": machine,
             "runs": found} for label, found in runs.items()]


def gpu_mode(args: argparse.Namespace) -> list[dict[str, Any]]:
    """`--repeats` GPU sessions, each in empty compile caches: command start to first recorded evaluation."""
    from autotune.device import gpu_available, info
    from autotune.evaluators.gpu_process import fresh_compile_caches
    from experiments.setup_latency import measured

    if not gpu_available():
        raise SystemExit("--gpu needs a GPU")
    args.db.parent.mkdir(parents=True, exist_ok=True)
    runs = []
    for _ in range(args.repeats):
        with fresh_compile_caches():
            env = {**os.environ, "AUTOTUNE_SERVER": "off", "COLUMNS": "200"}
            started = time.time()
            done = subprocess.run([sys.executable, "-m", "autotune.cli", *GPU, "--db", str(args.db)], cwd=REPO,
                                  env=env, capture_output=True, text=True, timeout=900)
            ended = time.time()
        if done.returncode != 0:
            raise SystemExit(f"the session failed (exit {done.returncode}): {done.stderr.strip()[-400:]}")
        found = measured(args.db, started)
        runs.append({"first_result_s": found["first_result_s"], "ready_s": found["ready_s"],
                     "command_s": round(ended - started, 2), "started_line": _started_line(done.stdout),
                     "load_1min": round(os.getloadavg()[0], 2)})
        print(runs[-1], flush=True)
    device = info(0)
    return [{"mode": "gpu", "label": "now", "command": "autotune " + " ".join(GPU),
             "machine": {"device": device.name if device else None, "cpus": os.cpu_count()}, "runs": runs}]


def _median(runs: list[dict[str, Any]], key: str) -> str:
    values = [r[key] for r in runs if r.get(key) is not None]
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"


def report(results: list[dict[str, Any]]) -> str:
    lines = ["# The command's own start", "",
             f"Generated by `python -m experiments.startup_latency --report` from `{RESULTS.name}`. Median "
             "[range] over each group's runs.", ""]
    cpu = [r for r in results if r["mode"] == "cpu"]
    if cpu:
        machine = cpu[0]["machine"]
        lines += ["## A 20-config replay on the CPU, command to exit", "",
                  f"`{cpu[0]['command']}` with no GPU: it replays from the shipped data (built once before the "
                  f"runs). Machine: {machine['cpus']} CPU(s), Python {machine['python']}. **wall** is the command "
                  "to its exit; **CPU** the user and system seconds it used; **load** the machine's 1-minute "
                  "load average before the run (other processes were running: wall time grows with load, CPU "
                  "time much less).", "",
                  "| sources | runs | wall s | CPU s | load |", "|---|---|---|---|---|"]
        for group in cpu:
            runs = group["runs"]
            lines.append(f"| {group['label']} | {len(runs)} | {_median(runs, 'wall_s')} | {_median(runs, 'cpu_s')} "
                         f"| {_median(runs, 'load_1min')} |")
        now = next((g for g in cpu if g["label"] == "now"), None)
        if now:
            wall = statistics.median(r["wall_s"] for r in now["runs"])
            cpu_s = statistics.median(r["cpu_s"] for r in now["runs"])
            lines += ["", f"Target: within {CPU_TARGET_S:.0f} s. Median wall {wall:.2f} s "
                      f"({'met' if wall <= CPU_TARGET_S else 'not met'} at this load); median CPU {cpu_s:.2f} s "
                      f"({'within' if cpu_s <= CPU_TARGET_S else 'over'} the target: what an idle machine's wall "
                      "time would be near)."]
            said = [r["started_line"] for r in now["runs"] if r.get("started_line")]
            if said:
                lines += ["", "What the sessions said of their start (from the command's start):", ""]
                lines += [f"- {line}" for line in said]
    gpu = [r for r in results if r["mode"] == "gpu"]
    if gpu:
        lines += ["", "## A GPU session, command to first recorded evaluation", ""]
        for group in gpu:
            runs = group["runs"]
            firsts = [r["first_result_s"] for r in runs]
            met = sum(1 for f in firsts if f is not None and f <= GPU_TARGET_S)
            lines += [f"`{group['command']}` on {group['machine'].get('device')}, each in empty compile caches: "
                      f"first evaluation recorded {_median(runs, 'first_result_s')} s after the command; evaluator "
                      f"ready {_median(runs, 'ready_s')} s; whole command {_median(runs, 'command_s')} s. "
                      f"Target {GPU_TARGET_S:.0f} s: {met} of {len(runs)} runs.", ""]
            lines += [f"- {r['started_line']}" for r in runs if r.get("started_line")]
    else:
        lines += ["", "## A GPU session", "", "Not measured yet: `python -m experiments.startup_latency --gpu` on "
                  f"a GPU machine (target: the first evaluation recorded within {GPU_TARGET_S:.0f} s of the command)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="time replays on this machine")
    parser.add_argument("--gpu", action="store_true", help="time GPU sessions to their first evaluation")
    parser.add_argument("--before", default=None, metavar="REF", help="with --cpu: also the sources at git REF")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--db", type=Path, default=REPO / "runs" / "startup_latency.db", help="--gpu's database")
    parser.add_argument("--report", action="store_true", help="only write the report from the JSON")
    args = parser.parse_args(argv)
    results: list[dict[str, Any]] = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    if not args.report:
        new = (cpu_mode(args) if args.cpu else []) + (gpu_mode(args) if args.gpu else [])
        if not new:
            raise SystemExit("nothing to do: --cpu, --gpu or --report")
        replaced = {(r["mode"], r["label"].split(" (")[0]) for r in new}
        results = [r for r in results if (r["mode"], r["label"].split(" (")[0]) not in replaced] + new
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    text = report(results)
    (REPORTS / "startup_latency.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
