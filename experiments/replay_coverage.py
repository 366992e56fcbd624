"""Replay coverage: how many of a replay's answers are `not_recorded`, per strategy and space (CPU only).

`autotune tune --replay` (and any tune on a machine without a GPU) answers configs from the
recorded measurements.  A replay offers its strategy only the recorded points, as
`autotune simulate` does, so a strategy's own proposals are always answered; only seeds
(`--seed-from`, `--config`) can name a config outside the recorded sample.  This experiment
checks that on the shipped spaces: every strategy that can replay runs through the real
`tune` path (`autotune.tuning.run_tune`) for each seed, recording into a temporary database
(never into the shipped one), and the report counts the `not_recorded` answers of the
strategy's proposals and of the seeds separately, and says whether the default config itself
was recorded.

    python -m experiments.replay_coverage                       # budget 100, seeds 1 and 3
    python -m experiments.replay_coverage --strategies random,tpe --seeds 1 --out runs/coverage
    python -m experiments.replay_coverage --seed-from default,heuristic,cache --out runs/coverage

Writes `replay_coverage.md` and `replay_coverage.json` under --out (the JSON after every run,
so a run cut short keeps what it did).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SPACES = (("softmax", "4096x32000", "float16"), ("softmax", "1024x50257", "float16"),
          ("softmax-online", "4096x32000", "float16"), ("softmax-triton", "4096x32000", "float16"),
          ("softmax-triton", "1024x50257", "float16"))
STRATEGIES = "random,grid,pattern,tpe,gp,evolution,surrogate"  # helion-* drive the live kernel: no replay
DEFAULT_ORIGIN, SEARCH_ORIGIN = "default", "search"


def replay_once(kernel: str, shape: str, dtype: str, strategy: str, seed: int, budget: int, seed_from: str,
                db: Path, shipped: Path) -> dict[str, Any]:
    """One `tune --replay` session recorded into `db`, and what its rows say."""
    from rich.console import Console

    from autotune.store.cache import Cache
    from autotune.tuning import TuneRequest, run_tune

    request = TuneRequest(kernel=kernel, shape=shape, dtype=dtype, strategy=strategy, budget=budget, seconds=None,
                          seed=seed, generation_size=None, db=db, replay=True, space=None, fresh=False,
                          compile_workers=None, compile_timeout_s=30.0, seed_from=seed_from, shipped=shipped,
                          grid_sample=strategy == "grid")  # a grid larger than the budget is sampled, as simulate does
    started = time.perf_counter()
    outcome = run_tune(request, Console(quiet=True))
    wall_s = time.perf_counter() - started
    journal = Cache.open(db)
    try:
        session = journal.session(outcome.session_id)
        rows = [r for r in journal.session_evaluations(outcome.session_id) if r.generation >= 0]
        origins = journal.origins(outcome.session_id)
    finally:
        journal.close()
    note = dict(session["options"].get("replay") or {})
    by_origin: dict[str, list[Any]] = {DEFAULT_ORIGIN: [], SEARCH_ORIGIN: [], "seed": []}
    for row in rows:
        origin = origins.get(row.candidate.key, SEARCH_ORIGIN)
        by_origin[origin if origin in (DEFAULT_ORIGIN, SEARCH_ORIGIN) else "seed"].append(row)

    def unrecorded(group: str) -> int:
        return sum(1 for r in by_origin[group] if r.result.status.value == "not_recorded")

    default = by_origin[DEFAULT_ORIGIN]
    return {"kernel": kernel, "shape": shape, "dtype": dtype, "strategy": strategy, "seed": seed, "budget": budget,
            "seed_from": seed_from, "space": note.get("space"), "sample_points": note.get("points"),
            "sample_valid": note.get("valid"), "exit_reason": session["exit_reason"],
            "proposed": len(by_origin[SEARCH_ORIGIN]), "not_recorded_proposed": unrecorded(SEARCH_ORIGIN),
            "seeds": len(by_origin["seed"]), "not_recorded_seeds": unrecorded("seed"),
            "default_recorded": bool(default) and default[0].result.status.value != "not_recorded",
            "best_ms": outcome.best[1].median_ms if outcome.best else None, "wall_s": round(wall_s, 2)}


def _digest(path: Path) -> str:
    """The shipped file's sha256: which measurements the figures come from."""
    import hashlib

    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _shown(path: Path) -> str:
    """A path as the report names it: relative to the repository when inside it."""
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def write_report(results: list[dict[str, Any]], args: argparse.Namespace, out: Path) -> None:
    seeds = sorted({r["seed"] for r in results})
    lines = ["# Replay coverage: `not_recorded` answers per strategy (shipped softmax spaces)", "",
             f"Each cell is one `autotune tune --replay` session (budget {args.budget}, `--seed-from "
             f"{args.seed_from}`) run through `autotune.tuning.run_tune` on a machine without a GPU, "
             f"recorded into a temporary database; the shipped `{args.shipped.name}` (sha256 "
             f"{_digest(args.shipped)[:16]}...) is only read. "
             "A cell reads `N/M`: N of the M configs the strategy itself proposed were answered "
             "`not_recorded`; seeds other than the default are counted apart (`seeds`); grid runs with "
             "`--grid-sample`, as `autotune simulate` runs it.  "
             "Regenerate with `python -m experiments.replay_coverage`.", ""]
    spaces: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for result in results:
        spaces.setdefault((result["kernel"], result["shape"], result["dtype"]), []).append(result)
    for (kernel, shape, dtype), rows in spaces.items():
        first = rows[0]
        default = "recorded" if all(r["default_recorded"] for r in rows) else "NOT recorded (answered not_recorded)"
        lines += [f"## {kernel} {shape} {dtype}", "",
                  f"Space `{first['space']}`: the replay offers {first['sample_points']} recorded configs "
                  f"({first['sample_valid']} valid). The default config is {default}.", "",
                  "| strategy | " + " | ".join(f"seed {s}: not_recorded / proposed" for s in seeds)
                  + " | seeds not_recorded / seeds (all runs) | stopped by |",
                  "|---|" + "---|" * (len(seeds) + 2)]
        for strategy in dict.fromkeys(r["strategy"] for r in rows):
            mine = {r["seed"]: r for r in rows if r["strategy"] == strategy}
            cells = [f"{mine[s]['not_recorded_proposed']}/{mine[s]['proposed']}" if s in mine else "-" for s in seeds]
            seeded = f"{sum(r['not_recorded_seeds'] for r in mine.values())}/{sum(r['seeds'] for r in mine.values())}"
            stopped = ", ".join(sorted({r["exit_reason"] for r in mine.values()}))
            lines.append(f"| {strategy} | " + " | ".join(cells) + f" | {seeded} | {stopped} |")
        lines.append("")
    total = sum(r["not_recorded_proposed"] for r in results)
    proposed = sum(r["proposed"] for r in results)
    lines += [f"In all: {total} of {proposed} proposed configs answered `not_recorded` over {len(results)} "
              f"replays; seeds: {sum(r['not_recorded_seeds'] for r in results)} of "
              f"{sum(r['seeds'] for r in results)} answered `not_recorded`.", ""]
    (out / "replay_coverage.md").write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shipped", type=Path, default=REPO / "data" / "shipped.db", help="the shipped data, read only")
    parser.add_argument("--strategies", default=STRATEGIES)
    parser.add_argument("--seeds", default="1,3")
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--seed-from", default="default")
    parser.add_argument("--out", type=Path, default=REPO / "experiments" / "reports")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    strategies = [s for s in args.strategies.split(",") if s]
    seeds = [int(s) for s in args.seeds.split(",") if s]
    results: list[dict[str, Any]] = []
    digest = _digest(args.shipped)
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "replays.db"  # every replay is recorded here, and thrown away
        for kernel, shape, dtype in SPACES:
            for strategy in strategies:
                for seed in seeds:
                    result = replay_once(kernel, shape, dtype, strategy, seed, args.budget, args.seed_from, db,
                                         args.shipped)
                    results.append(result)
                    print(f"{kernel} {shape} {strategy} seed {seed}: {result['not_recorded_proposed']}/"
                          f"{result['proposed']} proposed not_recorded, seeds {result['not_recorded_seeds']}/"
                          f"{result['seeds']}, default recorded {result['default_recorded']} "
                          f"({result['wall_s']} s)", flush=True)
                    (args.out / "replay_coverage.json").write_text(json.dumps(
                        {"budget": args.budget, "seed_from": args.seed_from, "seeds": seeds,
                         "shipped": _shown(args.shipped), "shipped_sha256": digest, "results": results},
                        indent=1))
    write_report(results, args, args.out)
    print((args.out / "replay_coverage.md").read_text())


if __name__ == "__main__":
    main()
