"""Fault injection on a real GPU: one session over every failure the evaluator must survive.

The `faulty` kernel (autotune/kernels/faulty_triton.py) computes y = 2x unless its
`fault` parameter injects a compiler error, an out-of-resources launch, a hung compiler,
a hung kernel, an illegal memory access, NaN output or wrong numbers.  This script runs
`autotune tune faulty --strategy grid` over its whole space through the normal command
line (in a child process, under an overall time limit, so nothing here can wait for
ever), then reads the session back from the database and checks that

* every fault was recorded with its expected status (faulty_triton.EXPECTED_STATUS),
* the session went on: every config of the grid has a row, the session ended normally
  and its best config is a healthy (`none`) one with an accurate result.

It prints the table and writes it as Markdown (--report).  Exit status 0 when everything
matched, 1 when anything did not, 2 when it cannot run (no GPU: use --dry-run).

    python -m experiments.fault_injection --dry-run            # any machine: the plan
    python -m experiments.fault_injection --db user.db         # GPU machine: run and check
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

KERNEL = "faulty"
DTYPE = "float32"
NORMAL_ENDINGS = ("strategy finished", "budget", "strategy exhausted")
DEFAULT_REPORT = REPO / "experiments" / "reports" / "fault_injection.md"


@dataclass(frozen=True)
class Planned:
    """One config of the grid and the status it must end with."""

    params: dict[str, Any]
    key: str
    expected: str  # a Status value

    @property
    def fault(self) -> str:
        return str(self.params["fault"])


@dataclass
class Check:
    name: str
    passed: bool
    detail: str


# -- the plan ------------------------------------------------------------------------------
def plan(shape: tuple[int, ...]) -> list[Planned]:
    """The grid the session will evaluate, in its order, with each config's expected status."""
    import torch

    from autotune.kernels import get_kernel
    from autotune.kernels.faulty_triton import EXPECTED_STATUS
    from autotune.strategies.grid import GridSearch
    from search_spaces.codec import DeclaredCodec
    from search_spaces.space import config_key

    space = get_kernel(KERNEL).triton_space(shape, torch.float32)
    codec = DeclaredCodec(space)
    planned = []
    for point in GridSearch(space).points:
        params, native = codec.normalise(point)
        planned.append(Planned(params=params, key=config_key(native), expected=EXPECTED_STATUS[params["fault"]].value))
    return planned


def plan_problems(shape: tuple[int, ...], planned: Sequence[Planned]) -> list[str]:
    """Why the space cannot prove what it should (empty when it can)."""
    import torch

    from autotune.kernels import get_kernel
    from autotune.kernels.faulty_triton import EXPECTED_STATUS, FAULTS

    space = get_kernel(KERNEL).triton_space(shape, torch.float32)
    problems = []
    declared = space.parameter("fault").values()
    if sorted(declared) != sorted(FAULTS) or sorted(EXPECTED_STATUS) != sorted(FAULTS):
        problems.append(f"the space's faults {declared} differ from the expected-status map {sorted(EXPECTED_STATUS)}")
    missing = [f for f in FAULTS if f not in {p.fault for p in planned}]
    if missing:
        problems.append(f"no config of the grid injects {', '.join(missing)}")
    if sum(p.fault == "none" for p in planned) < 2:
        problems.append("fewer than two healthy configs: the best could not be a choice")
    if space.default.get("fault") != "none":
        problems.append(f"the default config injects {space.default.get('fault')!r}; it must be healthy")
    return problems


def tune_argv(args: argparse.Namespace, budget: int) -> list[str]:
    """The `autotune` command line of the session (grid over the whole space, measured afresh)."""
    argv = ["tune", KERNEL, "--shape", args.shape, "--dtype", DTYPE, "--strategy", "grid", "--budget", str(budget),
            "--db", str(args.db), "--fresh", "--seed-from", "default",
            "--compile-timeout", f"{args.compile_timeout:g}", "--run-timeout", f"{args.run_timeout:g}"]
    if args.compile_workers:
        argv += ["--compile-workers", str(args.compile_workers)]
    return argv


# -- running the session -----------------------------------------------------------------------
def run_limited(command: Sequence[str], limit_s: float) -> tuple[int | None, float]:
    """Run `command` in its own process group; kill the whole group after `limit_s`.

    Returns (exit code or None when it was killed, wall seconds).  The group kill also
    takes the evaluator's worker processes, which would otherwise outlive their parent.
    """
    started = time.monotonic()
    child = subprocess.Popen(list(command), cwd=REPO, start_new_session=True)
    try:
        code: int | None = child.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        code = None
    except KeyboardInterrupt:
        _kill_group(child)
        raise
    _kill_group(child)  # also any worker left behind by a parent that exited
    return code, time.monotonic() - started


def _kill_group(child: subprocess.Popen) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        child.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


def last_session_id(db: Path) -> int:
    """The newest session's id (0 when none): the session to be read back comes after it."""
    if not db.exists():
        return 0
    from autotune.store.cache import Cache

    cache = Cache.open(db)
    try:
        newest = cache.sessions(limit=1)
        return int(newest[0]["id"]) if newest else 0
    finally:
        cache.close()


def sessions_after(cache: Any, after_id: int) -> list[dict[str, Any]]:
    """Every session newer than `after_id`, oldest first; reads pages of the newest sessions
    (a few, usually one) until one at or before `after_id` is among them."""
    limit = 8
    while True:
        newest = cache.sessions(limit=limit)  # newest first
        if len(newest) < limit or int(newest[-1]["id"]) <= after_id:
            return sorted((s for s in newest if int(s["id"]) > after_id), key=lambda s: s["id"])
        limit *= 4


# -- reading it back -----------------------------------------------------------------------------
def read_back(db: Path, after_id: int) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(the first `faulty` session after `after_id`, its search-time rows by config key)."""
    from autotune.store.cache import Cache

    if not db.exists():
        return None, {}
    cache = Cache.open(db)
    try:
        session = next((s for s in sessions_after(cache, after_id) if s["kernel"] == KERNEL), None)
        if session is None:
            return None, {}
        rows = {r.candidate.key: r for r in cache.session_evaluations(session["id"]) if r.generation >= 0}
        return session, rows
    finally:
        cache.close()


def session_checks(session: dict[str, Any] | None, rows: dict[str, Any], planned: Sequence[Planned],
                   exit_code: int | None, wall_s: float | None) -> list[Check]:
    """Did the session go on past every fault?"""
    import torch

    from autotune.evaluators.timing import TOLERANCE
    from autotune.types import Source

    checks = []
    if wall_s is not None:
        ended = "was killed at the time limit" if exit_code is None else f"exited with status {exit_code}"
        checks.append(Check("the tune process ended by itself, with status 0", exit_code == 0,
                            f"it {ended} after {wall_s:.1f} s"))
    if session is None:
        return checks + [Check("a session was recorded", False, "no new session of the faulty kernel in the database")]
    checks.append(Check("it measured on a GPU", session["mode"] == "gpu",
                        f"mode {session['mode']}, {session['device']}"))
    recorded = [p for p in planned if p.key in rows]
    checks.append(Check("every config of the grid was recorded", len(recorded) == len(planned) == len(rows),
                        f"{len(rows)} rows recorded for {len(planned)} configs in the grid"))
    reused = [p.fault for p in recorded if rows[p.key].result.source is not Source.MEASURED]
    checks.append(Check("every row was measured in this session", not reused,
                        f"answered from earlier rows: {', '.join(reused)}" if reused else "none reused"))
    reason = session["exit_reason"]
    checks.append(Check("the session ended normally", reason in NORMAL_ENDINGS,
                        f"exit reason: {reason or 'none (cut off)'}"))
    best = next((p for p in planned if p.key == session["best_key"]), None)
    best_row = rows.get(session["best_key"]) if session["best_key"] else None
    tolerance = TOLERANCE[torch.float32]
    healthy = (best is not None and best.fault == "none" and best_row is not None and best_row.result.ok
               and best_row.result.rel_error is not None and best_row.result.rel_error <= tolerance)
    detail = "no best config" if best is None or best_row is None else (
        f"fault={best.fault}, BLOCK_SIZE={best.params['BLOCK_SIZE']}, status {best_row.result.status.value}, "
        f"relative error {_num(best_row.result.rel_error)} (tolerance {tolerance:g}), "
        f"{_num(best_row.result.median_ms)} ms")
    checks.append(Check("the best config is a healthy one with an accurate result", healthy, detail))
    return checks


# -- the report --------------------------------------------------------------------------------------
def table_rows(planned: Sequence[Planned], rows: dict[str, Any]) -> list[list[str]]:
    from autotune.kernels.faulty_triton import FAULT_EFFECTS

    table = []
    for p in planned:
        row = rows.get(p.key)
        result = row.result if row else None
        recorded = result.status.value if result else "(not recorded)"
        verdict = "yes" if result and recorded == p.expected else "NO"
        time_or_error = (f"{_num(result.median_ms)} ms" if result and result.ok else
                         _first_line(result.error) if result else "")
        compile_s = _num(result.compile_s, ".2f") if result else ""
        table.append([p.fault, str(p.params["BLOCK_SIZE"]), p.expected, recorded, verdict, compile_s,
                      time_or_error, FAULT_EFFECTS[p.fault]])
    return table


TABLE_HEADER = ["fault", "BLOCK_SIZE", "expected", "recorded", "as expected", "compile s", "time or error",
                "what the fault does"]
AS_EXPECTED = TABLE_HEADER.index("as expected")


def markdown_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    cells = [[_md(c) for c in row] for row in [header, *body]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def render_report(*, argv: Sequence[str], session: dict[str, Any] | None, table: list[list[str]],
                  checks: Sequence[Check], wall_s: float | None) -> str:
    unexpected = sum(row[AS_EXPECTED] != "yes" for row in table)
    failed_checks = [c for c in checks if not c.passed]
    verdict = "PASS" if not unexpected and not failed_checks else "FAIL"
    lines = [f"# Fault injection: {verdict}", ""]
    lines.append(f"Every injected fault of the `{KERNEL}` kernel must end with its expected status while the "
                 "session goes on to a healthy best config.")
    lines.append("")
    lines.append(f"- command: `autotune {' '.join(argv)}`")
    lines.append(f"- run at: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}")
    if session is not None:
        versions = ", ".join(f"{k} {v}" for k, v in sorted(session["versions"].items()))
        lines.append(f"- session {session['id']} on {session['device']} ({versions})")
        lines.append(f"- evaluations recorded: {session['evaluations']} ({session['failures']} failed), "
                     f"exit reason: {session['exit_reason'] or 'none (cut off)'}")
    if wall_s is not None:
        lines.append(f"- wall time of the whole tune command: {wall_s:.1f} s")
    lines.append(f"- configs with an unexpected status: {unexpected} of {len(table)}")
    lines += ["", "## Every config", "", markdown_table(TABLE_HEADER, table), "", "## Did the session go on?", ""]
    lines.append(markdown_table(["check", "passed", "detail"],
                                [[c.name, "yes" if c.passed else "NO", c.detail] for c in checks]))
    lines.append("")
    return "\n".join(lines)


def _num(value: float | None, spec: str = ".4g") -> str:
    return "-" if value is None else format(value, spec)


def _first_line(text: str, limit: int = 110) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


# -- the two modes ---------------------------------------------------------------------------------
def dry_run(args: argparse.Namespace, shape: tuple[int, ...]) -> int:
    """Check the space and print the plan; needs no GPU."""
    from autotune.cli import build_parser
    from autotune.kernels.faulty_triton import FAULT_EFFECTS

    planned = plan(shape)
    argv = tune_argv(args, budget=len(planned))
    build_parser().parse_args(argv)  # the command line the GPU run will use is accepted as written
    print(f"dry run: the session would evaluate {len(planned)} configs of `{KERNEL}` at {args.shape} {DTYPE}")
    print(f"command: autotune {' '.join(argv)}")
    print(f"overall time limit: {args.limit:g} s\n")
    body = [[str(i), p.fault, str(p.params["BLOCK_SIZE"]), p.key, p.expected, FAULT_EFFECTS[p.fault]]
            for i, p in enumerate(planned, start=1)]
    print(markdown_table(["#", "fault", "BLOCK_SIZE", "config key", "expected status", "what the fault does"], body))
    problems = plan_problems(shape, planned)
    for problem in problems:
        print(f"problem: {problem}")
    print("\nplan OK" if not problems else "\nplan has problems")
    return 1 if problems else 0


def gpu_run(args: argparse.Namespace, shape: tuple[int, ...]) -> int:
    from autotune.device import gpu_available

    if not gpu_available():
        print("fault_injection: no GPU on this machine; run with --dry-run to check the plan", file=sys.stderr)
        return 2
    planned = plan(shape)
    problems = plan_problems(shape, planned)
    if problems:
        print("fault_injection: the plan has problems: " + "; ".join(problems), file=sys.stderr)
        return 2
    db = args.db.resolve()
    before = last_session_id(db)
    argv = tune_argv(args, budget=len(planned))
    print(f"fault injection: {len(planned)} configs of `{KERNEL}` (every fault at every BLOCK_SIZE) in one session,"
          f" recorded into {db}; overall limit {args.limit:g} s")
    print(f"running: autotune {' '.join(argv)}", flush=True)
    code, wall_s = run_limited([sys.executable, "-m", "autotune.cli", *argv], args.limit)
    session, rows = read_back(db, before)
    table = table_rows(planned, rows)
    checks = session_checks(session, rows, planned, code, wall_s)
    report = render_report(argv=argv, session=session, table=table, checks=checks, wall_s=wall_s)
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(report)
    print("\n" + report)
    print(f"report written to {args.report}")
    failed = any(row[AS_EXPECTED] != "yes" for row in table) or not all(c.passed for c in checks)
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, default=Path("user.db"), help="database to record into (default user.db)")
    parser.add_argument("--report", type=Path, default=DEFAULT_REPORT, help="where the Markdown report goes")
    parser.add_argument("--shape", default="1024x1024")
    parser.add_argument("--compile-timeout", type=float, default=45.0,
                        help="seconds per compile (the compile_hang fault waits this long; default 45)")
    parser.add_argument("--run-timeout", type=float, default=10.0,
                        help="seconds per first run (the run_hang fault waits this long; default 10)")
    parser.add_argument("--compile-workers", type=int, default=None)
    parser.add_argument("--limit", type=float, default=540.0,
                        help="overall seconds for the tune command; then it and its workers are killed (default 540)")
    parser.add_argument("--dry-run", action="store_true", help="check the space and print the plan; no GPU needed")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from autotune.kernels import parse_shape

    try:
        shape = parse_shape(args.shape, 2)
    except ValueError as error:
        print(f"fault_injection: {error}", file=sys.stderr)
        return 2
    return dry_run(args, shape) if args.dry_run else gpu_run(args, shape)


if __name__ == "__main__":
    sys.exit(main())
