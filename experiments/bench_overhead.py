"""What does each config cost beyond its kernel's run time, and what do building the next config
ahead, loading what the compile workers generated and a shorter timing target save, on the same
configs?

Why: a search's speed in configs per second decides how soon a cold search gets anywhere.  A
config's benchmark time is its build (for a Helion kernel, code generation and loading the
compiled module in the benchmark process), the accuracy check, and its timing (repetitions up
to `--timing-ms` of kernel time).  Two levers act on it:

* building ahead (`AUTOTUNE_BUILD_AHEAD`, on by default): the benchmark worker builds the next
  config while the GPU runs the current one's timed calls;
* building from the compile worker's module (`AUTOTUNE_BUILD_FROM_WORKER`, on by default): the
  benchmark worker imports the host function a compile worker generated instead of generating
  it again (autotune/evaluators/generated_module.py);
* compiling ahead (`AUTOTUNE_COMPILE_AHEAD`, off by default until measured here): the compile
  workers that a generation's slowest compiles leave idle compile the next generation's likely
  configs (autotune/evaluators/compile_ahead.py).  A random search reads no results, so its
  guesses are exact: this measures what compiling ahead can save, not how often a walk is
  guessed right;
* the timing target (`--timing-ms`): fewer repetitions per config during the search (the
  recorded samples' own answer to how few suffice is `experiments.timing_budget`).  The
  session's final re-timing of its best configs is the same either way, so a shorter target
  can only cost a worse ranking, which the report checks.

On a GPU machine this runs random-search sessions with one seed (so the same configs) into a
database of their own, one per variant, each compiling into empty compile caches of its own (so
the order they run in does not change their wall times); the report, made from that database
alone (its latest session of each variant), compares configs per second, benchmark seconds per
config, and whether the fastest configs are the same as under the baseline variant.

    python -m experiments.bench_overhead --db runs/bench_overhead.db           # GPU: sessions, report
    python -m experiments.bench_overhead --db runs/bench_overhead.db --variants 3,4   # two of them
    python -m experiments.bench_overhead --db runs/bench_overhead.db --report  # the report only
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from autotune.evaluators.timing_target import SEARCH_TARGET_MS
from experiments.session_pairs import (latest, pair_device, pair_parser, quartiles, random_search, random_sessions,
                                      run_pair, wall_s, write_report)


class Variant(NamedTuple):
    name: str
    build_ahead: bool
    timing_ms: float
    from_worker: bool = False
    compile_ahead: bool = False

    def arguments(self) -> list[str]:
        return ["--timing-ms", f"{self.timing_ms:g}"]

    def environment(self) -> dict[str, str]:
        return {"AUTOTUNE_BUILD_AHEAD": "1" if self.build_ahead else "0",
                "AUTOTUNE_BUILD_FROM_WORKER": "1" if self.from_worker else "0",
                "AUTOTUNE_COMPILE_AHEAD": "1" if self.compile_ahead else "0"}

    def matches(self, session: dict[str, Any]) -> bool:
        options = session["options"]  # sessions recorded before the switch existed generated every config
        return (options.get("build_ahead") is self.build_ahead and options.get("timing_target_ms") == self.timing_ms
                and bool(options.get("build_from_worker")) is self.from_worker
                and bool(options.get("compile_ahead")) is self.compile_ahead)


# The first is the baseline: what sessions ran before building ahead existed (and before the
# default timing target came down to SEARCH_TARGET_MS); the fourth is today's default, and the
# fifth adds compiling ahead, which stays off by default until this experiment has measured it.
VARIANTS = (Variant("build on request, 250 ms", False, 250.0), Variant("build ahead, 250 ms", True, 250.0),
            Variant(f"build ahead, {SEARCH_TARGET_MS:g} ms", True, SEARCH_TARGET_MS),
            Variant(f"build ahead from the compile worker's module, {SEARCH_TARGET_MS:g} ms", True, SEARCH_TARGET_MS,
                    from_worker=True),
            Variant(f"build ahead from the compile worker's module, next generation compiled ahead, "
                    f"{SEARCH_TARGET_MS:g} ms", True, SEARCH_TARGET_MS, from_worker=True, compile_ahead=True))


def report(db: Path, problem: tuple[str, str, str] | None = None, device: str | None = None) -> str:
    """The report from `db`'s own sessions (at `problem`, where given: kernel, shape, dtype) on one GPU."""
    sessions, rows = random_sessions(db, problem, device)
    found = [(v, latest(s for s in sessions if v.matches(s))) for v in VARIANTS if any(v.matches(s) for s in sessions)]
    if not found:
        at = f" at {' '.join(problem)}" if problem else ""
        raise SystemExit(f"{db}: no session of this experiment's variants{at}")
    first = found[0][1]
    lines = [f"# Per-config cost: building ahead, loading the compile workers' code, compiling ahead and the "
             f"timing target, "
             f"{first['kernel']} "
             f"{'x'.join(map(str, first['shape']))} {first['dtype']}", "",
             f"Generated by `python -m experiments.bench_overhead --report --db {db.name} --shape "
             f"{'x'.join(map(str, first['shape']))}`. Device: {first['device']}. "
             f"Random search, seed {first['seed']}: the same configs in every session. Benchmark s: the benchmark "
             "worker's time per config (build, accuracy check, timing). Configs per second: configs measured over "
             "the session's wall time from its start (evaluator set-up excluded, the final re-timing included). "
             "Top ten shared: how many of the baseline session's ten fastest configs are also this session's ten "
             "fastest. Compile caches: whether the on-disk compile caches were empty at the session's start; wall s "
             "and configs/s compare only between sessions whose caches were empty (one run after another with the "
             "same caches finds the other's configs compiled, whatever its variant), while benchmark s, read after "
             "each config's compile, compare between any.", "",
             "| variant | session | compile caches | configs | ran correctly | "
             "benchmark s per config, median (quartiles) | benchmark s (sum) | wall s | configs/s | best ms | "
             "top ten shared |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    baseline_rows = _ok(rows[found[0][1]["id"]])
    for variant, session in found:
        own = rows[session["id"]]
        bench = [r.result.bench_s for r in own if r.result.bench_s is not None]
        ok = _ok(own)
        wall = wall_s(session)
        shared = len(set(_fastest(baseline_rows)) & set(_fastest(ok)))
        caches = session["options"].get("compile_caches") or "not recorded"
        lines.append(f"| {variant.name} | {session['id']} | {caches} | {len(own)} | {len(ok)} | {quartiles(bench)} | "
                     f"{sum(bench):.1f} | {wall:.1f} | {len(own) / wall:.2f} | "
                     f"{min(ok.values()):.4f} | {shared} of 10 |")
    return "\n".join(lines) + "\n"


def _ok(rows: list[Any]) -> dict[str, float]:
    return {r.candidate.key: r.result.median_ms for r in rows if r.result.ok}


def _fastest(times: dict[str, float], count: int = 10) -> list[str]:
    return sorted(times, key=times.__getitem__)[:count]


def _chosen(text: str, parser: Any) -> list[Variant]:
    """The variants named by number (1-based, in VARIANTS' order); a bad list is refused in one line."""
    try:
        numbers = [int(part) for part in text.split(",")]
    except ValueError:
        numbers = []
    if not numbers or any(not 1 <= n <= len(VARIANTS) for n in numbers):
        parser.error(f"--variants {text!r}: give numbers from 1 to {len(VARIANTS)}, comma-separated")
    return [VARIANTS[n - 1] for n in numbers]


def main() -> None:
    parser = pair_parser(__doc__, budget=96, seed=31, report="bench_overhead.md")
    parser.add_argument("--variants", default=",".join(str(i) for i in range(1, len(VARIANTS) + 1)),
                        help="which variants to run, by their number in the report's order (e.g. 3,4: the "
                             "last two alone, side by side)")
    args = parser.parse_args()
    chosen = _chosen(args.variants, parser)
    if not args.report:
        run_pair(args.db, [*random_search(args), "--compile-timeout", "20"], [v.arguments() for v in chosen],
                 [v.environment() for v in chosen])
    write_report(report(args.db, (args.kernel, args.shape, args.dtype), pair_device(args)), args.out)


if __name__ == "__main__":
    main()
