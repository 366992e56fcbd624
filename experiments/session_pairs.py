"""GPU sessions that differ in one `autotune tune` option, on the same configs: the shared part of
the experiments that measure what an evaluator option saves (slow_factor, compile_deadline,
bench_overhead)."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

REPO = Path(__file__).resolve().parents[1]


def pair_parser(doc: str, *, budget: int, seed: int, report: str) -> argparse.ArgumentParser:
    """The options both experiments take: the database, the kernel and shape, the random
    search's budget and seed, report-only and where the report goes."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, required=True, help="a database of this experiment's own")
    parser.add_argument("--kernel", default="softmax")
    parser.add_argument("--shape", default="4096x32000")
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--budget", type=int, default=budget)
    parser.add_argument("--seed", type=int, default=seed)
    parser.add_argument("--report", action="store_true", help="only write the report from --db")
    parser.add_argument("--device", default=None,
                        help="the GPU whose sessions are compared, as sessions name it (default: this machine's "
                             "when it runs the pair; with --report, the only one recorded, or the shipped data's "
                             "among several)")
    parser.add_argument("--out", type=Path, default=REPO / "experiments" / "reports" / report)
    return parser


def random_search(args: argparse.Namespace) -> list[str]:
    """The `autotune tune` arguments of a pair's random search, from `pair_parser`'s options."""
    return [args.kernel, "--shape", args.shape, "--dtype", args.dtype, "--strategy", "random",
            "--budget", str(args.budget), "--seed", str(args.seed)]


def write_report(text: str, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)


def run_pair(db: Path, common: Sequence[str], variants: Sequence[Sequence[str]],
             environments: Sequence[Mapping[str, str]] | None = None) -> None:
    """One `autotune tune` process per variant, in order, each measuring afresh (--fresh: not
    answered from what the one before recorded) and compiling into empty compile caches of its
    own: sharing them, a variant would find the configs the one before it compiled already built,
    and its wall time would depend on the order.  `environments`, if given, adds variables to
    each variant's environment (switches that are not command-line options)."""
    from autotune.evaluators.gpu_process import fresh_compile_caches

    for index, variant in enumerate(variants):
        command = [sys.executable, "-m", "autotune.cli", "tune", *common, "--db", str(db), "--fresh", *variant]
        extra = dict(environments[index]) if environments else {}
        print("$", *(f"{k}={v}" for k, v in extra.items()), " ".join(command[2:]), flush=True)
        with fresh_compile_caches():
            subprocess.run(command, check=True, cwd=REPO, env={**os.environ, **extra})


def pair_device(args: argparse.Namespace) -> str | None:
    """The GPU whose sessions a pair's report compares: `--device`, else this machine's when it
    has just run the pair, else None (the data decides: `random_sessions`)."""
    from autotune.experiment_devices import report_device

    return report_device(args.device, measured_here=not args.report)


def random_sessions(db: Path, problem: tuple[str, str, str] | None = None, device: str | None = None
                    ) -> tuple[list[dict[str, Any]], dict[int, list[Any]]]:
    """The random-search sessions of `db` alone (not the shipped data beside it: a pair is
    compared within the database it was run into), oldest first, and their evaluations (not the
    final re-timing); with `problem` (kernel, shape as '4096x32000', dtype), only those at it.
    Those of one GPU: `device`, else the only one recorded, else the shipped data's (a pair's
    times compare only on one GPU)."""
    from autotune.databases import open_for_reading
    from autotune.errors import UserError
    from autotune.experiment_devices import on_one_device

    cache = open_for_reading(db, shipped=None)
    try:
        sessions = [s for s in reversed(cache.sessions(limit=cache.session_count()))
                    if s["strategy"] == "random" and (problem is None or problem_of(s) == problem)]
        try:
            _, sessions = on_one_device(sessions, device, study="random-search")
        except UserError as error:
            raise SystemExit(f"{db}: {error}") from None
        rows = {s["id"]: [r for r in cache.session_evaluations(s["id"]) if r.generation >= 0] for s in sessions}
    finally:
        cache.close()
    return sessions, rows


def problem_of(session: dict[str, Any]) -> tuple[str, str, str]:
    """A session's (kernel, shape as '4096x32000', dtype)."""
    return session["kernel"], "x".join(map(str, session["shape"])), session["dtype"]


def latest(sessions: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The latest session that ran its whole budget, else the latest one."""
    candidates = list(sessions)
    finished = [s for s in candidates if s["exit_reason"] == "budget"]
    return (finished or candidates)[-1]


def wall_s(session: dict[str, Any]) -> float:
    return (session["ended"] or session["started"]) - session["started"]


def quartiles(values: Sequence[float]) -> str:
    """'median (first-third quartile)', or '-' for fewer than two values."""
    if len(values) < 2:
        return "-"
    q1, q2, q3 = statistics.quantiles(values, n=4)
    return f"{q2:.3f} ({q1:.3f}-{q3:.3f})"
