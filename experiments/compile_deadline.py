"""What does tightening the compile limit to 10x the session's median compile time save, and
what does it lose?

A generation waits for its slowest compile, so each config that runs into the 60 s compile
limit holds its whole generation.  By default, once 16 configs have compiled, the limit
becomes 10x their median compile time (at least 5 s, at most `--compile-timeout`;
`--compile-timeout-factor`).

On a GPU machine this runs two random-search sessions with the same seed (so the same configs,
in generations of 16 as `autotune tune` does by default) into a database of their own: first
the default, then the fixed limit (`--compile-timeout-factor inf`).  Run second on the same
machine, the fixed-limit session finds every config that compiled in the first one in the
compiler's on-disk cache; `--only fixed` on a fresh machine runs it with a cold cache.  The
report, from the database alone and its latest finished session of each kind: per session the
wall time and compile timeouts, and what the configs that only the tightened limit stopped
gave when allowed to finish.

    python -m experiments.compile_deadline --db runs/compile_deadline.db            # GPU: both, report
    python -m experiments.compile_deadline --db runs/compile_deadline.db --only fixed   # GPU: one of them
    python -m experiments.compile_deadline --db runs/compile_deadline.db --report   # the report only
"""

from __future__ import annotations

import math
from pathlib import Path

from autotune.types import Status
from experiments.session_pairs import (latest, pair_device, pair_parser, random_search, random_sessions, run_pair,
                                      wall_s, write_report)


def report(db: Path, device: str | None = None) -> str:
    sessions, rows = random_sessions(db, device=device)
    tight = latest(s for s in sessions if s["options"].get("compile_timeout_factor") not in (None, math.inf))
    fixed = latest(s for s in sessions if s["options"].get("compile_timeout_factor", 0) is None)
    lines = [f"# Tightening the compile limit: {tight['kernel']} {'x'.join(map(str, tight['shape']))} {tight['dtype']}",
             "", f"Device: {tight['device']}. Random search, seed {tight['seed']}, the same configs in both sessions "
             f"(sessions in the order they ran; a session run after the other on the same machine finds what that "
             f"one compiled in the compiler's cache).", "",
             "| session | compile limit | configs | ran correctly | compile timeouts | session wall s | best ms |",
             "|---|---|---|---|---|---|---|"]
    for session, label in ((tight, f"10x the median compile time ({_limit(rows[tight['id']])})"), (fixed, "fixed")):
        own = [r.result for r in rows[session["id"]]]
        ok = [r for r in own if r.ok]
        timeouts = sum(r.status is Status.COMPILE_TIMEOUT for r in own)
        lines.append(f"| {session['id']} | {label} | {len(own)} | {len(ok)} | {timeouts} | {wall_s(session):.0f} | "
                     f"{min(r.median_ms for r in ok):.4f} |")
    fixed_results = {r.candidate.key: r.result for r in rows[fixed["id"]]}
    stopped = [r.candidate.key for r in rows[tight["id"]] if r.result.status is Status.COMPILE_TIMEOUT]
    finished = [fixed_results[k] for k in stopped if k in fixed_results and fixed_results[k].ok]
    best = min(r.result.median_ms for r in rows[fixed["id"]] if r.result.ok)
    lines += ["", f"Configs stopped by a compile timeout in the default session: {len(stopped)}; of those, ran "
              f"correctly under the fixed limit: {len(finished)}"
              + (f", compiling in {min(r.compile_s for r in finished):.1f}-{max(r.compile_s for r in finished):.1f} s; "
                 f"the fastest of them is {min(r.median_ms for r in finished) / best:.2f}x the best config."
                 if finished else ".")]
    return "\n".join(lines) + "\n"


def _limit(rows: list) -> str:
    """The tightened limit a timeout names (its error says it), or 'no config reached it'."""
    for row in rows:
        if row.result.status is Status.COMPILE_TIMEOUT and "median" in row.result.error:
            return row.result.error.split("within ")[1].split(" (")[0]
    return "no config reached it"


def main() -> None:
    parser = pair_parser(__doc__, budget=96, seed=31, report="compile_deadline.md")
    parser.add_argument("--only", choices=("tight", "fixed"), help="run one of the two sessions (e.g. the other "
                        "one on a fresh machine, with a cold compiler cache)")
    args = parser.parse_args()
    if not args.report:
        variants = {"tight": ["--compile-timeout-factor", "10"], "fixed": ["--compile-timeout-factor", "inf"]}
        run_pair(args.db, random_search(args), [v for name, v in variants.items() if args.only in (None, name)])
    write_report(report(args.db, pair_device(args)), args.out)


if __name__ == "__main__":
    main()
