"""The study's report, regenerated from the database alone: Markdown, PNG figures, JSON."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from autotune.databases import read_from
from autotune.errors import UserError
from autotune.experiment import ExperimentOptions

from . import definition as d
from . import plots, targets
from .data import CellResult, Timing, load_study
from .runner import select_cells

HELION_SEED_NOTE = ("seed/Helion's own seed is '-': no session evaluated a config labelled as one of Helion's "
                    "compiler seeds (Helion's ConfigSpec offered none for these kernels and shapes when they were "
                    "planned, so the rule's seed is compared with the default, the grid and torch only).")


def report(options: ExperimentOptions, console: Any) -> Path:
    selected = select_cells(options)  # refuses a dtype or shapes the study does not have
    results = load_study(options.db, options.dtype, options.shapes, options.shipped, options.device)
    if not results:
        at = f" at {','.join(options.shapes)}" if options.shapes else ""
        raise UserError(f"{options.db} holds no finished {d.STUDY} session for {options.dtype}{at}: run `autotune "
                        f"experiment run {options.folder} --dtype {options.dtype}` on a GPU machine first")
    options.out.mkdir(parents=True, exist_ok=True)
    figures = {
        "seed vs default": plots.speedups(results, options.out / "seed_vs_default.png", {"default": "default"},
                                          "the rule's seed against Helion's default config"),
        "seed vs grid-best and torch": plots.speedups(
            results, options.out / "seed_vs_baselines.png",
            {"grid_ms": "grid-best", "torch_ms": "torch", "compile_ms": "torch.compile"},
            "the rule's seed against the grid's best, torch eager and torch.compile"),
    }
    computed = targets.compute(results)
    missing = [c.name for c in selected if c.name not in {r.cell.name for r in results}]
    present_rule = present_rule_section(options, results)
    path = options.out / "README.md"
    path.write_text(render(results, computed, missing, options, figures) + present_rule)
    (options.out / "results.json").write_text(json.dumps(as_json(results, computed), indent=1))
    console.print("\n".join(computed.lines()))
    return path


def _ms(timing: Timing | None) -> str:
    if timing is None:
        return "-"
    return f"{timing.ms:.4f}" if timing.ms is not None else timing.status


def _number(ms: float | None) -> str:
    return "-" if ms is None else f"{ms:.4f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def row_cells(r: CellResult) -> list[str]:
    """The table's cells for one result, in the order of TABLE_HEAD."""
    dims = r.cell.shape
    seed = f"infeasible: {r.seed_label}" if r.infeasible else f"{r.seed_label} ({r.seed_tiles})"
    vs_default = "rescue" if r.rescue else _ratio(r.ratio(r.default.ms))
    helion = r.ratio(r.helion_seed.ms) if r.helion_seed is not None else None
    return [r.cell.kernel, dims, r.cell.dtype, r.cell.regime, seed, "infeasible" if r.infeasible else _ms(r.seed),
            _ms(r.default), f"{_number(r.grid_ms)} ({r.grid_ok}/{r.grid_n})", _number(r.torch_ms),
            _number(r.compile_ms), vs_default, _ratio(r.ratio(r.grid_ms)), _ratio(r.ratio(r.compile_ms)),
            _ratio(helion) if r.helion_seed is not None else "-", str(r.session_id)]


TABLE_HEAD = ["kernel", "MxKxN", "dtype", "regime", "seed", "seed ms", "default ms", "grid-best ms (ok/n)", "torch ms",
              "torch.compile ms", "seed/default", "seed/grid-best", "seed/torch.compile", "seed/Helion's own seed",
              "session"]


def render(results: list[CellResult], computed: targets.Targets, missing: list[str], options: ExperimentOptions,
           figures: dict[str, Path]) -> str:
    devices = sorted({r.device for r in results})
    grid = f"{len(d.GRID_M)} M tiles {d.GRID_M} x {len(d.GRID_K)} K tiles {d.GRID_K} x num_warps {d.GRID_WARPS} x " \
           f"num_stages {d.GRID_STAGES}"
    out = [f"# Seed study: heuristic seeds of the matmul-epilogue family, {options.dtype}, on {', '.join(devices)}", "",
           f"Regenerated from {read_from(options.db, options.shipped)} by "
           f"`autotune experiment report {options.folder} --dtype {options.dtype}` "
           f"(`--dtype` picks the cells of one dtype; `--dtype {d.ALL_DTYPES}` reports every cell, as seed 004's "
           "targets do). The cells are seed 004's two tables. Each cell is one session: one GPU evaluator "
           "measured Helion's default config, the `matmul_epilogue_resident` rule's seed, Helion's own compiler "
           f"seeds when it offered any, the grid ({grid}; other parameters at the default; capped by `--budget` "
           "to a seeded sample) and the torch eager and torch.compile baselines. Times are medians in ms, every "
           "output checked against an fp64 reference; a config that failed shows its status instead. Ratios are "
           "as seed 004 writes them, the other time over the seed's: > 1 means the seed is faster. 'rescue': the "
           "default does not compile or run and the seed does; 'infeasible': the rule declines, with its reason.",
           "", "## Targets", ""]
    out += [f"- {line}" for line in computed.lines()] + [""]
    out += ["## Cells", "", "| " + " | ".join(TABLE_HEAD) + " |", "|" + "---|" * len(TABLE_HEAD)]
    out += ["| " + " | ".join(row_cells(r)) + " |" for r in results]
    out.append("")
    if not any(r.helion_seed is not None for r in results):
        out += [HELION_SEED_NOTE, ""]
    if missing:
        out += [f"Not recorded yet ({len(missing)}): {', '.join(missing)}.", ""]
    for name, path in figures.items():
        out += [f"![{name}]({path.name})", ""]
    return "\n".join(out) + "\n"


def present_rule_section(options: ExperimentOptions, results: list[CellResult]) -> str:
    """The rule as checked out, scored on the recorded grids: a cell recorded before the rule
    last changed measured an older seed, and the present one is usually one of its grid points."""
    from . import whatif

    comparisons = whatif.compare(options.db, options.dtype, {}, results)
    changed = [c for c in comparisons if c.variant != c.present]
    if not changed:
        return ""
    default_ms = {r.cell.name: r.default.ms for r in results}
    out = ["## The rule as checked out, on the recorded grids", "",
           f"The rule's seed in {len(changed)} of these {len(comparisons)} cells is not the one recorded (the cells "
           "were measured before the rule last changed). Its seed's time below is the recorded time of the same "
           "tiles in the cell's grid; a seed outside the grid says so (a new run times it). Made by "
           "`python -m experiments.seed_study.whatif`, which also scores variants of the rule's constants.", ""]
    out += whatif.table(comparisons, ("recorded seed", "seed of the rule as checked out")) + [""]
    out += [f"- {line}" for line in whatif.summary(comparisons, ("recorded rule", "rule as checked out"))[1:] + whatif.against_default(comparisons, default_ms)]
    return "\n".join(out) + "\n"


def as_json(results: list[CellResult], computed: targets.Targets) -> dict[str, Any]:
    """Every figure of the report, for plotting elsewhere."""
    rows = []
    for r in results:
        row = {**asdict(r.cell), "name": r.cell.name, "session": r.session_id, "device": r.device,
               "seed": asdict(r.seed) if r.seed else None, "seed_label": r.seed_label, "seed_tiles": r.seed_tiles,
               "default": asdict(r.default), "grid_ms": r.grid_ms, "grid_ok": r.grid_ok, "grid_n": r.grid_n,
               "helion_seed": asdict(r.helion_seed) if r.helion_seed else None, "torch_ms": r.torch_ms,
               "compile_ms": r.compile_ms, "rescue": r.rescue, "infeasible": r.infeasible,
               "seed_vs_default": r.ratio(r.default.ms), "seed_vs_grid_best": r.ratio(r.grid_ms),
               "seed_vs_torch": r.ratio(r.torch_ms), "seed_vs_torch_compile": r.ratio(r.compile_ms),
               "seed_vs_helion_seed": r.ratio(r.helion_seed.ms) if r.helion_seed else None}
        rows.append(row)
    return {"cells": rows, "targets": {**asdict(computed), "near_grid_share": computed.near_grid_share}}
