"""GPU machine: the resident, N-tiled and split formulations of matmul + epilogue, against torch.compile.

    python -m experiments.matmul_formulations --db formulations.db --seconds 60    # measure, then report
    python -m experiments.matmul_formulations --db formulations.db --report-only   # report, any machine

For every cell (the seed study's 30 plus larger-N ones) one `autotune.tune` session of the
N-tiled Triton kernel (`matmul-tiled-<epilogue>`), seeded with the formulation rule's tiled
seed (`heuristics.matmul_formulation`) and the space's default; one of the split kernel
(`matmul-split-<epilogue>`: the library GEMM and a tuned row pass), seeded with the rule's split
seed and the default (`--formulations` picks which); and, where no finished GPU
session of the resident Helion kernel (`matmul-<epilogue>`) is recorded in --db or the shipped
cache.db, one of it too, seeded by the default and the resident rule.  A cell whose session of
the kernel's current source is already recorded is skipped (unless --again), so a run cut short is continued by
running it again (and a kernel whose source changed is measured again).

The report reads recorded sessions only (never the run's memory): per cell, the best time of
each formulation over its GPU sessions of the kernel's current source (sessions of an earlier
source apart, as the older-source time), torch.compile's time from the sessions' baseline rows,
the rule's pick, whether the pick's formulation is within 5% of the best one, and whether the
rule's seed in that formulation (as its session recorded it) is within 5% of the family's best.  It writes
experiments/reports/matmul_formulations.json and .md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from autotune.errors import UserError

REPORTS = Path(__file__).parent / "reports"
NAME = "matmul_formulations"
NEAR = 0.05  # the pick is "within 5%" of the best when pick_ms <= (1 + NEAR) * best_ms
FORMULATIONS = ("resident", "tiled", "split")
MEASURED = ("tiled", "split")  # what a run measures by default (the resident kernel: --resident)
Session = dict[str, Any]  # a row of `Cache.sessions`


@dataclass(frozen=True)
class Cell:
    epilogue: str
    shape: str  # MxKxN
    dtype: str
    source: str  # "seed study" or "larger N"

    @property
    def name(self) -> str:
        return f"{self.epilogue} {self.shape} {self.dtype}"

    @property
    def dims(self) -> tuple[int, int, int]:
        m, k, n = (int(d) for d in self.shape.split("x"))
        return m, k, n

    def kernel(self, formulation: str) -> str:
        return f"matmul-{self.epilogue}" if formulation == "resident" else f"matmul-{formulation}-{self.epilogue}"

    def offers(self, formulation: str) -> bool:
        """Whether the formulation exists for the cell: split only for rows a program holds whole."""
        from autotune.kernels.matmul_split import MAX_N

        return formulation != "split" or self.dims[2] <= MAX_N


def _seed_study_cells() -> list[Cell]:
    from experiments.seed_study.definition import CELLS

    return [Cell(c.kernel.removeprefix("matmul-"), c.shape, c.dtype, "seed study") for c in CELLS]


# Outside the seed study, all with N >= 1024: the rmsnorm cell, then shapes of
# transformer projections and vocabulary heads across epilogues and dtypes.
LARGER_N = tuple(Cell(e, s, d, "larger N") for e, s, d in (
    ("rmsnorm", "32768x1024x1536", "bfloat16"),
    ("layernorm", "65536x2048x1024", "bfloat16"),
    ("softmax", "16384x768x3072", "bfloat16"),
    ("logsumexp", "32768x1024x8192", "float16"),
    ("l2norm", "16384x1024x2048", "float16"),
    ("sum", "8192x4096x1024", "float32"),
    ("max", "65536x512x1536", "bfloat16"),
))


# Declared before any was measured, to judge the tiled seed on cells it was not fitted to (the
# seed's constants were fitted on the tiled sessions of the two sets above): transformer
# projections and heads, 16-bit and fp32, [M, N] and [M] epilogues, one odd N.
RULE_CHECK = tuple(Cell(e, s, d, "rule check") for e, s, d in (
    ("rmsnorm", "16384x4096x4096", "bfloat16"),
    ("layernorm", "49152x1536x6144", "bfloat16"),
    ("softmax", "8192x2048x8192", "float16"),
    ("l2norm", "24576x2560x1280", "bfloat16"),
    ("logsumexp", "65536x768x4096", "bfloat16"),
    ("max", "32768x2048x3072", "float16"),
    ("sum", "16384x1024x1536", "float32"),
    ("rmsnorm", "12288x3072x2044", "bfloat16"),
))


# Declared before any was measured, to judge the rule's revisions made after the RULE_CHECK results
# had been seen (the tiled seed's wide tile for 16-bit [M] epilogues; split for fp32; split for
# every 16-bit [M, N] epilogue, revised after these cells were declared): [M] epilogues in 16 bits,
# fp32 cells, and 16-bit [M, N] cells, two of them under the first split rule's four waves of tiles.
RULE_CHECK_2 = tuple(Cell(e, s, d, "rule check 2") for e, s, d in (
    ("logsumexp", "16384x2048x6144", "bfloat16"),
    ("max", "49152x1024x2048", "bfloat16"),
    ("sum", "32768x1536x2048", "float16"),
    ("logsumexp", "8192x4096x12288", "float16"),
    ("sum", "4096x4096x2048", "float32"),
    ("layernorm", "8192x1024x1536", "float32"),
    ("rmsnorm", "20480x1536x3072", "bfloat16"),
    ("softmax", "24576x1024x1000", "float16"),
    ("layernorm", "4096x2048x2048", "bfloat16"),
    ("l2norm", "2048x4096x3000", "bfloat16"),
))


def all_cells() -> list[Cell]:
    return _seed_study_cells() + list(LARGER_N) + list(RULE_CHECK) + list(RULE_CHECK_2)


def select(cells: Sequence[Cell], patterns: str | None) -> list[Cell]:
    """Cells whose name contains any of the comma-separated patterns, or whose set is one of them
    ('seed study', 'larger N', 'rule check'); all when none is given."""
    wanted = [p.strip() for p in (patterns or "").split(",") if p.strip()]
    return [c for c in cells if not wanted or any(p in c.name or p == c.source for p in wanted)]


# -- recorded sessions ------------------------------------------------------------------------
def cell_sessions(cache: Any, cell: Cell, formulation: str, recorded: list[Session] | None = None
                  ) -> list[dict[str, Any]]:
    """GPU sessions of the cell's kernel in that formulation, oldest first, from `recorded` (every
    session of the cache, read once by a caller that asks for many cells) or read from the cache."""
    kernel = cell.kernel(formulation)
    recorded = cache.sessions(limit=1_000_000) if recorded is None else recorded
    return sorted((s for s in recorded if s["kernel"] == kernel and s["mode"] == "gpu"
                   and s["shape"] == cell.dims and s["dtype"] == cell.dtype), key=lambda s: s["id"])


def by_source(cache: Any, sessions: list[Session]) -> tuple[list[Session], list[Session]]:
    """The sessions whose space measured their kernel's present source, and the others (an earlier
    source, or no space recorded): a changed kernel's old times must not pass for the current kernel's."""
    from autotune.kernels import present_source_hash

    current: list[Session] = []
    older: list[Session] = []
    for session in sessions:
        space = cache.get_space(session["space_fingerprint"])
        present = space is not None and space.source_hash == present_source_hash(session["kernel"])
        (current if present else older).append(session)
    return current, older


def is_recorded(cache: Any, cell: Cell, formulation: str, gpu: str | None = None) -> bool:
    """A finished GPU session of the cell in that formulation, of the kernel's current source, exists
    on `gpu` (None: on any; what a continued run skips)."""
    from autotune.fixed_list import is_finished

    sessions, _ = by_source(cache, [s for s in cell_sessions(cache, cell, formulation)
                                    if gpu is None or s["device"] == gpu])
    return any(is_finished(s) and s["evaluations"] > 0 for s in sessions)


def best_of(cache: Any, sessions: list[dict[str, Any]]) -> tuple[float | None, dict[str, Any] | None]:
    """The fastest accurate time (and its config) over every row of the sessions."""
    best: tuple[float | None, dict[str, Any] | None] = (None, None)
    for session in sessions:
        for row in cache.session_evaluations(session["id"]):
            ms = row.result.median_ms if row.result.ok else None
            if ms is not None and (best[0] is None or ms < best[0]):
                best = (ms, dict(row.candidate.native))
    return best


def repeat_spread(cache: Any, sessions: list[dict[str, Any]]) -> float | None:
    """The largest slowest-over-fastest ratio among configs timed more than once in one session:
    how far one config's time moved (clocks under sustained load), the noise any ratio must clear."""
    spreads = []
    for session in sessions:
        times: dict[str, list[float]] = {}
        for row in cache.session_evaluations(session["id"]):
            if row.result.ok and row.result.median_ms:
                times.setdefault(json.dumps(row.candidate.native, sort_keys=True), []).append(row.result.median_ms)
        spreads += [max(v) / min(v) for v in times.values() if len(v) > 1]
    return max(spreads, default=None)


def baseline_ms(cache: Any, sessions: list[dict[str, Any]], name: str) -> float | None:
    """A baseline's time from the newest session that recorded it as ok."""
    for session in reversed(sessions):
        result = cache.baselines(session_id=session["id"]).get(name)
        if result is not None and result.ok:
            return result.median_ms
    return None


# -- measuring (GPU) --------------------------------------------------------------------------
def tune_cell(cell: Cell, args: argparse.Namespace, tune: Callable[..., Any] | None = None,
              say: Callable[[str], None] = print) -> dict[str, Any]:
    """The cell's missing sessions, each one `autotune.tune` call; returns what was run or skipped."""
    from autotune.databases import open_for_writing
    from autotune.experiment_devices import recording_gpu
    from heuristics.device import current_device
    from heuristics.matmul_formulation import epilogue_writes_rows, split_seed, tiled_seed

    import autotune

    tune = tune or autotune.tune
    journal = open_for_writing(args.db, args.shipped)
    try:
        gpu = recording_gpu()  # only this GPU's sessions are skipped: another GPU's times are not its
        done = {f: is_recorded(journal, cell, f, gpu) for f in FORMULATIONS}
    finally:
        journal.close()
    measured = getattr(args, "formulations", MEASURED)
    wanted = [f for f in MEASURED if f in measured and cell.offers(f)]
    wanted += ["resident"] if args.resident == "missing" else []
    outcome: dict[str, Any] = {"cell": cell.name}
    for formulation in wanted:
        if done[formulation] and not getattr(args, "again", False):
            outcome[formulation] = "recorded"
            continue
        m, k, n = cell.dims
        if formulation == "tiled":
            rule_seed = tiled_seed(m, k, n, cell.dtype, current_device(),
                                   writes_rows=epilogue_writes_rows(cell.epilogue))
            seeded = {"configs": [rule_seed], "seed_from": "default"}
        elif formulation == "split":
            seeded = {"configs": [split_seed(m, n, cell.dtype, current_device())], "seed_from": "default"}
        else:
            seeded = {"configs": [], "seed_from": "default,heuristic"}
        say(f"{cell.name}: tuning the {formulation} formulation ({cell.kernel(formulation)}) for {args.seconds} s")
        try:
            result = tune(cell.kernel(formulation), shape=cell.shape, dtype=cell.dtype, strategy=args.strategy,
                          seconds=args.seconds, seed=args.seed, db=args.db, shipped=args.shipped,
                          compile_timeout_s=args.compile_timeout, **seeded)
            outcome[formulation] = {"session": result.session_id, "best_ms": result.best_ms,
                                    "exit": result.exit_reason}
        except Exception as error:  # noqa: BLE001 - one failing cell must not stop the run
            outcome[formulation] = f"failed: {type(error).__name__}: {' '.join(str(error).split())[:300]}"
        say(json.dumps(outcome))
    return outcome


# -- report (any machine) -----------------------------------------------------------------------
def cell_row(cache: Any, cell: Cell, device: Any = None, recorded: list[Session] | None = None) -> dict[str, Any]:
    """One cell of the report, from the recorded sessions alone."""
    from heuristics.device import H100
    from heuristics.matmul_formulation import epilogue_writes_rows, pick_formulation, tiled_seed

    m, k, n = cell.dims
    pick = pick_formulation(cell.epilogue, m, k, n, cell.dtype, device)
    row: dict[str, Any] = {"cell": cell.name, "epilogue": cell.epilogue, "shape": cell.shape, "dtype": cell.dtype,
                           "source": cell.source, "pick": pick.formulation, "pick_kernel": pick.kernel,
                           "why": pick.why}
    recorded = cache.sessions(limit=1_000_000) if recorded is None else recorded
    sessions = {f: cell_sessions(cache, cell, f, recorded) for f in FORMULATIONS}
    for formulation in FORMULATIONS:
        current, older = by_source(cache, sessions[formulation])
        ms, config = best_of(cache, current)
        row[f"{formulation}_ms"], row[f"{formulation}_config"] = ms, config
        row[f"{formulation}_sessions"] = [s["id"] for s in current]
        row[f"{formulation}_older_ms"] = best_of(cache, older)[0]
        row[f"{formulation}_older_sessions"] = [s["id"] for s in older]
    # torch.compile as the newest session of any formulation and source timed it (the baselines do
    # not run our kernels): the baseline measured nearest in time to the newest of our measurements
    everyone = sorted((s for f in FORMULATIONS for s in sessions[f]), key=lambda s: s["id"])
    row["compile_ms"] = baseline_ms(cache, everyone, "torch.compile")
    row["torch_ms"] = baseline_ms(cache, everyone, "torch")
    row["devices"] = sorted({s["device"] for s in everyone})
    times = [row[f"{f}_ms"] for f in FORMULATIONS if row[f"{f}_ms"] is not None]
    row["best_ms"] = min(times, default=None)
    row["best"] = next((f for f in FORMULATIONS if times and row[f"{f}_ms"] == row["best_ms"]), None)
    row["speedup_vs_compile"] = _ratio(row["compile_ms"], row["best_ms"])
    row["best_at_09_of_compile"] = row["speedup_vs_compile"] >= 0.9 if row["speedup_vs_compile"] else None
    row["repeat_spread"] = repeat_spread(cache, by_source(cache, sessions[row["best"]])[0]) if row["best"] else None
    for formulation in MEASURED:
        row[f"{formulation}_speedup_vs_compile"] = _ratio(row["compile_ms"], row[f"{formulation}_ms"])
    # judged where the pick's formulation and at least one other are recorded
    pick_ms = row[f"{pick.formulation}_ms"]
    judged = pick_ms is not None and len(times) >= 2
    row["judged_against"] = [f for f in FORMULATIONS if row[f"{f}_ms"] is not None] if judged else []
    row["pick_within_5pct"] = pick_ms <= (1 + NEAR) * row["best_ms"] if judged else None
    # the rule's whole pick: its seed, in its formulation, as the session was given it, against the family
    current_pick = by_source(cache, sessions[pick.formulation])[0]
    pick_seed = recorded_seed(current_pick)
    row["pick_seed_ms"] = seed_ms(cache, current_pick, pick_seed) if pick_seed else None
    row["pick_seed_within_5pct_of_best"] = (row["pick_seed_ms"] <= (1 + NEAR) * row["best_ms"]
                                            if row["pick_seed_ms"] else None)
    row["pick_seed_is_the_rules_now"] = (pick_seed == dict(pick.config)) if pick_seed else None
    # the rule's tiled seed as the formulation run gave it (recorded with its session, so a later
    # change of the rule does not rewrite what was measured) against the tiled family's best
    current_tiled = by_source(cache, sessions["tiled"])[0]
    seed = recorded_seed(current_tiled)
    row["seed"] = seed
    row["seed_ms"] = seed_ms(cache, current_tiled, seed) if seed else None
    row["seed_within_5pct"] = (row["seed_ms"] <= (1 + NEAR) * row["tiled_ms"]) if row["seed_ms"] else None
    now = tiled_seed(m, k, n, cell.dtype, device or H100, writes_rows=epilogue_writes_rows(cell.epilogue))
    row["seed_is_the_rules_now"] = (seed == now) if seed else None
    return row


def recorded_seed(sessions: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The config the newest of the sessions that were given one (`tune_cell`'s rule seed) started from."""
    given = [s for s in sessions if s["options"].get("user_configs")]
    return dict(max(given, key=lambda s: s["id"])["options"]["user_configs"][0]) if given else None


def seed_ms(cache: Any, sessions: list[dict[str, Any]], seed: dict[str, Any]) -> float | None:
    """The fastest accurate time the sessions measured for the config that has every value of `seed`."""
    times = [row.result.median_ms for session in sessions for row in cache.session_evaluations(session["id"])
             if row.result.ok and all(row.candidate.native.get(name) == value for name, value in seed.items())]
    return min(times, default=None)


def _ratio(slow: float | None, fast: float | None) -> float | None:
    return slow / fast if slow and fast else None


def report(db: Path, shipped: Path | None, out_dir: Path = REPORTS, cells: Sequence[Cell] | None = None,
           device: Any = None, gpu: str | None = None) -> dict[str, Any]:
    """Regenerate the JSON and Markdown reports from the recorded sessions (no GPU needed): one
    GPU's, `gpu`, else the only one recorded, else the shipped data's.  `device`: the limits the
    formulation rule is judged with (the H100's by default)."""
    from autotune.databases import open_for_reading
    from autotune.experiment_devices import on_one_device
    from heuristics.device import H100

    chosen = list(cells if cells is not None else all_cells())
    cache = open_for_reading(db, shipped)
    try:
        recorded = cache.sessions(limit=1_000_000)
        ours = [s for cell in chosen for f in FORMULATIONS for s in cell_sessions(cache, cell, f, recorded)]
        if ours:  # cell_row reads each cell's sessions from `recorded`: that GPU's alone
            gpu, _ = on_one_device(ours, gpu, study=NAME)
            recorded = [s for s in recorded if s["device"] == gpu]
        rows = [cell_row(cache, cell, device or H100, recorded) for cell in chosen]
    finally:
        cache.close()
    from experiments.matmul_formulations_markdown import markdown

    summary = _summary(rows)
    data = {"name": NAME, "db": str(db), "shipped": str(shipped) if shipped else None, "near": NEAR,
            "gpu": gpu, "summary": summary, "cells": rows}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{NAME}.json").write_text(json.dumps(data, indent=1) + "\n")
    (out_dir / f"{NAME}.md").write_text(markdown(data))
    return data


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    judged = [r for r in rows if r["pick_within_5pct"] is not None]
    sources = sorted({r["source"] for r in rows})

    def per_source(key: str) -> dict[str, list[int]]:
        """[cells where the judgement holds, cells judged] per set of cells."""
        return {source: [sum(bool(r[key]) for r in rows if r["source"] == source),
                         sum(r[key] is not None for r in rows if r["source"] == source)] for source in sources}

    summary: dict[str, Any] = {
        "cells": len(rows),
        "with_resident": sum(r["resident_ms"] is not None for r in rows),
        "with_tiled": sum(r["tiled_ms"] is not None for r in rows),
        "with_split": sum(r["split_ms"] is not None for r in rows),
        "tiled_older_cells": sum(r["tiled_older_ms"] is not None for r in rows),
        "judged": len(judged),
        "pick_within_5pct": sum(bool(r["pick_within_5pct"]) for r in judged),
        "pick_within_5pct_by_set": per_source("pick_within_5pct"),
        "family_at_09_of_compile": per_source("best_at_09_of_compile"),
        "pick_seed_within_5pct_of_best": per_source("pick_seed_within_5pct_of_best"),
        "seed_within_5pct": per_source("seed_within_5pct"),
    }
    for formulation in MEASURED:
        speedups = [r[f"{formulation}_speedup_vs_compile"] for r in rows if r[f"{formulation}_speedup_vs_compile"]]
        summary[f"{formulation}_beats_compile"] = sum(x > 1 for x in speedups)
        summary[f"{formulation}_at_09_of_compile"] = sum(x >= 0.9 for x in speedups)
        summary[f"{formulation}_geomean_speedup_vs_compile"] = statistics.geometric_mean(speedups) if speedups else None
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", type=Path, default=Path("formulations.db"), help="records here (default: %(default)s)")
    parser.add_argument("--shipped", type=lambda t: None if t.lower() == "none" else Path(t), default=Path("data/shipped.db"),
                        help="the shipped measurements, read beside --db ('none': --db alone)")
    parser.add_argument("--seconds", type=float, default=60.0, help="search seconds per session (default: %(default)s)")
    parser.add_argument("--cells", default=None, help="comma-separated substrings of cell names, e.g. rmsnorm,4096, "
                                                      "or a set of cells: 'rule check'")
    parser.add_argument("--strategy", default="pattern", help="session strategy (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--compile-timeout", type=float, default=60.0)
    parser.add_argument("--formulations", default=",".join(MEASURED),
                        help="comma-separated formulations to measure, of %(default)s")
    parser.add_argument("--resident", choices=("missing", "never"), default="missing",
                        help="also tune the resident kernel where no finished session of it is recorded")
    parser.add_argument("--again", action="store_true",
                        help="measure cells whose session of the kernel's current source is recorded once more")
    parser.add_argument("--report-only", action="store_true", help="only regenerate the report from the database")
    parser.add_argument("--out", type=Path, default=REPORTS, help="where the report goes (default: %(default)s)")
    parser.add_argument("--device", default=None,
                        help="the GPU whose sessions to report, as sessions name it (default: this machine's after "
                             "measuring; else the only one recorded, or the shipped data's among several)")
    args = parser.parse_args(argv)
    args.formulations = tuple(f.strip() for f in args.formulations.split(",") if f.strip())
    unknown = sorted(set(args.formulations) - set(MEASURED))
    if unknown:
        parser.error(f"unknown formulation {', '.join(unknown)}: choose from {', '.join(MEASURED)}")
    cells = select(all_cells(), args.cells)
    if not cells:
        parser.error(f"no cell matches --cells {args.cells!r}")
    if not args.report_only:
        from autotune.tuning import gpu_available

        if not gpu_available():
            parser.error("measuring needs a GPU; --report-only regenerates the report from --db")
        args.db.parent.mkdir(parents=True, exist_ok=True)
        for cell in cells:
            tune_cell(cell, args)
    from autotune.experiment_devices import report_device

    try:  # after measuring, the GPU that measured
        data = report(args.db, args.shipped, args.out, cells if args.cells else None,
                      gpu=report_device(args.device, measured_here=not args.report_only))
    except UserError as error:
        parser.error(str(error))
    print(json.dumps(data["summary"]))
    print(f"written {args.out / (NAME + '.md')} and {args.out / (NAME + '.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
