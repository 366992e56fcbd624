"""The suite on a CPU: every kernel tuned briefly through the Triton interpreter, as a user would.

    python -m experiments.helion_suite.interpret_check [--examples DIR] [--kernels a,b] [--budget 5]
    python -m experiments.helion_suite.interpret_check --report-only   # the Markdown from the JSON

Why: before a GPU session is spent on the suite, each kernel's hooks, reference and space are
checked for real on a CPU: `autotune tune --interpret` at the kernel's small shape with a short
budget and deadlines, then `autotune check-config` on the best `ok` config, then `autotune
export` of the session, which must be refused (interpreter times are not GPU times).  Each
command runs in its own process, timed from its start.  Results go to report/interpret.json;
report/interpret.md is regenerated from it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from experiments.helion_suite.loader import kernel_file
from experiments.helion_suite.manifest import SuiteKernel, select

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
REPORT = HERE / "report"
DEFAULT_EXAMPLES = Path("/work/shared/helion-examples")
KERNEL_DEADLINE_S = 60.0  # the whole `tune` of one kernel
COMMAND_DEADLINE_S = 120.0  # check-config and export (no config runs in them; imports and binding only)
COMPILE_TIMEOUT_S = 20.0
RUN_TIMEOUT_S = 8.0


def _cli(args: list[str], timeout: float, cwd: Path) -> tuple[int, str, str, float]:
    """(exit status, stdout, stderr, wall seconds) of one `autotune` command in its own process;
    exit status 124 when it ran past `timeout` and was killed."""
    started = time.monotonic()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    try:
        done = subprocess.run([sys.executable, "-m", "autotune.cli", *args], capture_output=True, text=True,
                              timeout=timeout, cwd=cwd, env=env)
        return done.returncode, done.stdout, done.stderr, time.monotonic() - started
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout.decode() if isinstance(expired.stdout, bytes) else (expired.stdout or "")
        return 124, out, "killed at the deadline", time.monotonic() - started


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _session_rows(db: Path, kernel: str) -> tuple[dict[str, Any] | None, list[Any]]:
    """The kernel's newest session in `db` and its rows (none if the session never started)."""
    from autotune.store.cache import Cache

    if not db.exists():
        return None, []
    cache = Cache.open(db)
    try:
        sessions = [s for s in cache.sessions(limit=1000) if s["kernel"] == kernel]
        if not sessions:
            return None, []
        session = max(sessions, key=lambda s: s["id"])
        return session, cache.session_evaluations(session["id"])
    finally:
        cache.close()


def check_kernel(entry: SuiteKernel, examples: Path, work: Path, budget: int) -> dict[str, Any]:
    """tune --interpret, check-config on the best ok config, export (expected refused)."""
    shape = "x".join(map(str, entry.cpu))
    locator = kernel_file(entry.name, examples, work / "kernels")
    db = work / "interpret.db"
    record: dict[str, Any] = {"kernel": entry.name, "file": entry.file, "function": entry.function, "shape": shape,
                              "dtype": "float32"}
    code, out, err, wall = _cli(["tune", locator, "--shape", shape, "--dtype", "float32", "--interpret",
                                 "--strategy", "random", "--budget", str(budget), "--seed", "1",
                                 "--compile-timeout", str(COMPILE_TIMEOUT_S), "--run-timeout", str(RUN_TIMEOUT_S),
                                 "--db", str(db), "--shipped", "none"], KERNEL_DEADLINE_S, work)
    record["tune"] = {"exit": code, "wall_s": round(wall, 1), "error": _last_line(err) if code else None,
                      "space_line": next((l for l in out.splitlines() if l.startswith("interpreter space:")), None)}
    session, rows = _session_rows(db, entry.name)
    statuses: dict[str, int] = {}
    for row in rows:
        statuses[row.result.status.value] = statuses.get(row.result.status.value, 0) + 1
    ok = [row for row in rows if row.result.status.value == "ok"]
    record.update(session=session["id"] if session else None, mode=session["mode"] if session else None,
                  configs=len(rows), statuses=statuses, ok=len(ok),
                  persistent_proposed=sum("persistent" in str(r.candidate.native.get("pid_type", "")) for r in rows),
                  errors=sorted({(r.result.error or "").splitlines()[0][:160] for r in rows if r.result.error})[:3])
    if not ok:
        return record
    # Interpreter seconds only pick one ok config to check; they say nothing about GPU speed.
    best = min(ok, key=lambda r: r.result.median_ms or float("inf"))
    record["best"] = {"config": dict(best.candidate.native), "rel_error": best.result.rel_error}
    with tempfile.NamedTemporaryFile("w", suffix=".json", dir=work, delete=False) as handle:
        json.dump(dict(best.candidate.native), handle)
    code, out, err, wall = _cli(["check-config", locator, "--shape", shape, "--dtype", "float32", "--live",
                                 "--config", handle.name, "--format", "json"], COMMAND_DEADLINE_S, work)
    Path(handle.name).unlink()
    checked = json.loads(out) if code == 0 and out.strip().startswith("[") else []
    record["check_config"] = {"exit": code, "wall_s": round(wall, 1), "error": _last_line(err) if code else None,
                              "same_config": bool(checked) and checked[0].get("config_key") == best.candidate.key}
    code, out, err, wall = _cli(["export", str(session["id"]), "--db", str(db), "--shipped", "none", "--format",
                                 "json", "--out", str(work / f"export_{entry.name}.json")], COMMAND_DEADLINE_S, work)
    record["export"] = {"exit": code, "wall_s": round(wall, 1), "refused": code == 2 and
                        not (work / f"export_{entry.name}.json").exists(), "line": _last_line(err or out)}
    return record


def versions() -> dict[str, str]:
    import importlib.metadata as metadata

    return {name: metadata.version(name) for name in ("torch", "triton", "helion")}


def markdown(results: dict[str, Any]) -> str:
    """report/interpret.md, from the results JSON alone."""
    kernels = results["kernels"]
    passed = [k for k in kernels if k.get("ok")]
    v = results["versions"]
    lines = [
        "# Helion's examples through the Triton interpreter (CPU)", "",
        "Generated by `python -m experiments.helion_suite.interpret_check` from `interpret.json`; do not edit.", "",
        f"Each kernel of the suite at its small CPU shape (float32): `autotune tune --interpret` (random strategy, "
        f"budget {results['budget']}, compile timeout {results['compile_timeout_s']:g} s, run timeout "
        f"{results['run_timeout_s']:g} s, the whole command killed at {results['deadline_s']:g} s), then "
        "`autotune check-config --live` on the best `ok` config, then `autotune export` of the session, which must "
        "be refused: interpreter sessions check accuracy, their times are interpreter seconds.  The relative error "
        "is against the kernel's own body run eagerly on float64 inputs: it is 0 where that body computes in float32 "
        "by its own casts (the reference then does the same arithmetic) or only moves data.", "",
        f"**{len(passed)} of {len(kernels)} kernels have an `ok` config** (torch {v['torch']}, triton {v['triton']}, "
        f"helion {v['helion']}; {results['machine']}).", "",
        "| kernel | shape | configs | ok | other statuses | rel. error of the checked config | tune s "
        "| check-config | export |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for k in kernels:
        others = ", ".join(f"{s} {n}" for s, n in sorted(k.get("statuses", {}).items()) if s != "ok") or "-"
        best = k.get("best")
        error = f"{best['rel_error']:.1e}" if best and best.get("rel_error") is not None else "-"
        tune = k["tune"]
        tune_s = f"{tune['wall_s']:.0f}" + ("" if tune["exit"] == 0 else f" (exit {tune['exit']})")
        check = k.get("check_config")
        check_text = "-" if not check else ("same config" if check["same_config"] else f"exit {check['exit']}")
        export = k.get("export")
        export_text = "-" if not export else ("refused" if export["refused"] else f"NOT refused (exit {export['exit']})")
        lines.append(f"| {k['kernel']} | {k['shape']} | {k.get('configs', 0)} | {k.get('ok', 0)} | {others} | "
                     f"{error} | {tune_s} | {check_text} | {export_text} |")
    failing = [k for k in kernels if k.get("errors") or k["tune"].get("error")]
    if failing:
        lines += ["", "## Errors", ""]
        for k in failing:
            for text in ([k["tune"]["error"]] if k["tune"].get("error") else []) + list(k.get("errors", [])):
                lines.append(f"* {k['kernel']}: `{text.replace('|', '/')}`")
    refusal = next((k["export"]["line"] for k in kernels if k.get("export", {}).get("refused")), None)
    if refusal:
        lines += ["", f"The export refusal reads: `{refusal}`"]
    space = next((k["tune"]["space_line"] for k in kernels if k["tune"].get("space_line")), None)
    if space:
        lines += ["", f"Each session says: `{space}`"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=Path, default=DEFAULT_EXAMPLES, help="a checkout of Helion's examples/")
    parser.add_argument("--kernels", default=None, help="comma-separated suite kernels (default: all twelve)")
    parser.add_argument("--budget", type=int, default=4)
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "helion_suite_interpret")
    parser.add_argument("--out", type=Path, default=REPORT)
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args(argv)
    results_path = args.out / "interpret.json"
    if not args.report_only:
        import platform

        entries = select(args.kernels)
        args.work.mkdir(parents=True, exist_ok=True)
        (args.work / "interpret.db").unlink(missing_ok=True)
        kernels = []
        for entry in entries:
            kernels.append(check_kernel(entry, args.examples, args.work, args.budget))
            print(json.dumps(kernels[-1]), flush=True)
        results = {"budget": args.budget, "compile_timeout_s": COMPILE_TIMEOUT_S, "run_timeout_s": RUN_TIMEOUT_S,
                   "deadline_s": KERNEL_DEADLINE_S, "versions": versions(),
                   "machine": f"{platform.machine()} CPU, {os.cpu_count()} cores", "kernels": kernels}
        args.out.mkdir(parents=True, exist_ok=True)
        results_path.write_text(json.dumps(results, indent=1) + "\n")
    results = json.loads(results_path.read_text())
    (args.out / "interpret.md").write_text(markdown(results))
    print(f"wrote {args.out / 'interpret.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
