"""Does timing clearly slow configs from their estimate alone save GPU time without moving
the ranking?

Timing a config costs about its kernel time times the repetitions (at least 10, up to the
`--timing-ms` target), so the slowest random configs, a thousand times slower than the best,
take most of a random generation's benchmark time.  By default a config whose 5-run estimate
is over 3x the fastest config timed so far keeps the estimate as its timing (`--slow-factor`).

On a GPU machine this runs two random-search sessions with the same seed (so the same configs)
into a database of their own: one times every config in full (`--slow-factor inf`), one with
the default.  The report, made from the database alone (its latest finished session of each
kind), compares per session the benchmark
seconds and wall time, and over the configs both ran: how far the estimate of a cut-short
config lies from its full timing, and whether the fastest configs are the same.

    python -m experiments.slow_factor --db runs/slow_factor.db             # GPU: both sessions, report
    python -m experiments.slow_factor --db runs/slow_factor.db --report    # the report only (any machine)
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from autotune.evaluators.timing import TimingOptions
from experiments.session_pairs import (latest, pair_device, pair_parser, quartiles, random_search, random_sessions,
                                      run_pair, wall_s, write_report)

ESTIMATE_REPS = TimingOptions().estimate_reps  # a config cut short has this many samples


def report(db: Path, device: str | None = None) -> str:
    sessions, rows = random_sessions(db, device=device)
    full = latest(s for s in sessions if s["options"].get("slow_factor", 0) is None)
    cut = latest(s for s in sessions if s["options"].get("slow_factor") not in (None, math.inf))
    lines = [f"# Timing slow configs from their estimate: {full['kernel']} {'x'.join(map(str, full['shape']))} "
             f"{full['dtype']}", "", f"Device: {full['device']}. Random search, seed {full['seed']}, the same configs "
             f"in both sessions. Benchmark seconds: the benchmark worker's time per config (load, accuracy check, "
             f"timing).", "",
             "| session | slow factor | configs | ran correctly | timed from the estimate | benchmark s (sum) | "
             "benchmark s per config, median (quartiles) | session wall s | best ms |",
             "|---|---|---|---|---|---|---|---|---|"]
    for session in (full, cut):
        own = rows[session["id"]]
        ok = [r.result for r in own if r.result.ok]
        bench = [r.result.bench_s for r in own if r.result.bench_s is not None]
        short = sum(1 for r in ok if r.repetitions == ESTIMATE_REPS)
        wall = wall_s(session)
        factor = session["options"].get("slow_factor")
        lines.append(f"| {session['id']} | {'inf' if factor is None else factor} | {len(own)} | {len(ok)} | {short} | "
                     f"{sum(bench):.1f} | {quartiles(bench)} | {wall:.0f} | {min(r.median_ms for r in ok):.4f} |")
    lines += ["", *_paired(rows[full["id"]], rows[cut["id"]])]
    return "\n".join(lines) + "\n"


def _paired(full_rows: list[Any], cut_rows: list[Any]) -> list[str]:
    """The configs both sessions ran: estimate against full timing, and the fastest ten."""
    full = {r.candidate.key: r.result for r in full_rows if r.result.ok}
    cut = {r.candidate.key: r.result for r in cut_rows if r.result.ok}
    both = sorted(set(full) & set(cut))
    shortened = [k for k in both if cut[k].repetitions == ESTIMATE_REPS and full[k].repetitions != ESTIMATE_REPS]
    ratios = [cut[k].median_ms / full[k].median_ms for k in shortened]
    fastest = min(full[k].median_ms for k in both)
    nearest_cut = min((full[k].median_ms / fastest for k in shortened), default=math.inf)
    top_full = sorted(both, key=lambda k: full[k].median_ms)[:10]
    top_cut = sorted(both, key=lambda k: cut[k].median_ms)[:10]
    lines = [f"Configs that ran correctly in both: {len(both)}; timed from the estimate in the default session: "
             f"{len(shortened)}; the fastest of those is {nearest_cut:.2f}x the fastest config (full timing)."]
    if ratios:
        lines.append(f"Estimate / full-timing median of those configs: median (quartiles) {quartiles(ratios)}, "
                     f"range {min(ratios):.3f}-{max(ratios):.3f}.")
    lines.append(f"Fastest ten under full timing that are also the fastest ten in the default session: "
                 f"{len(set(top_full) & set(top_cut))} of 10; same fastest config: {top_full[0] == top_cut[0]} "
                 f"({full[top_full[0]].median_ms:.4f} ms, and {cut[top_full[0]].median_ms:.4f} ms in the default "
                 f"session).")
    return lines


def main() -> None:
    parser = pair_parser(__doc__, budget=128, seed=23, report="slow_factor.md")
    # wide generations and a short compile timeout: a generation waits for its slowest compile
    parser.add_argument("--generation-size", type=int, default=64)
    parser.add_argument("--compile-timeout", type=float, default=20.0)
    args = parser.parse_args()
    if not args.report:  # full timing first, then the default
        common = [*random_search(args), "--generation-size", str(args.generation_size),
                  "--compile-timeout", str(args.compile_timeout)]
        run_pair(args.db, common, [["--slow-factor", "inf"], ["--slow-factor", "3"]])
    write_report(report(args.db, pair_device(args)), args.out)


if __name__ == "__main__":
    main()
