"""The study's report, regenerated from the database alone: Markdown, PNG figures, JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autotune.databases import read_from
from autotune.errors import UserError
from autotune.experiment import ExperimentOptions
from autotune.export import export_config
from autotune.report import gbps, timeline_line

from . import definition as d
from . import plots
from .data import INFERRED, MethodRow, ShapeResult, load_study

SMALL_BYTES = 16 * 2**20  # under this a call is launch-bound: read microseconds against the floor
# Timing noise measured on the H100: repeated medians of a bandwidth-bound softmax vary by
# 0.2-0.3% (1% leaves margin); launch-bound ones (CUDA-graph timed, microseconds) by about 3% CV.
BANDWIDTH_BOUND_NOISE = 0.01
LAUNCH_BOUND_NOISE = 0.05
EARLIER_SOURCE_MARK = " †"  # after a method measured on an earlier version of its kernel
EARLIER_SOURCE_NOTE = (f"{EARLIER_SOURCE_MARK.strip()} measured on an earlier version of the kernel's source than the "
                       "present one")


def report(options: ExperimentOptions, console: Any) -> Path:
    results = load_study(options.db, options.dtype, options.shapes, options.shipped, options.device)
    if not results:
        raise UserError(f"{options.db} holds no {d.STUDY} sessions for {options.dtype}: run `autotune experiment run "
                        f"{options.folder} --dtype {options.dtype}` on a GPU machine first")
    options.out.mkdir(parents=True, exist_ok=True)
    figures = {"bandwidth": plots.bandwidth_bars(results, options.out / "bandwidth.png"),
               "roofline": plots.roofline(results, options.out / "roofline.png"),
               "timelines": plots.timelines(results, options.out / "timelines.png")}
    markdown = render(results, options, figures)
    path = options.out / "README.md"
    path.write_text(markdown)
    (options.out / "results.json").write_text(json.dumps(as_json(results), indent=1))
    console.print(summary_lines(results))
    return path


def _gbps(result: ShapeResult, ms: float) -> float:
    return gbps(result.bytes_moved, ms)


def _error(value: float | None) -> str:
    return "-" if value is None else f"{value:.1e}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _other_strategies() -> str:
    """'grid for softmax-split and ...': the kernels the study tunes another way."""
    by_strategy: dict[str, list[str]] = {}
    for kernel, strategy in d.STRATEGY_FOR.items():
        by_strategy.setdefault(strategy, []).append(kernel)
    return "; ".join(f"`{strategy}` for {', '.join(kernels)}" for strategy, kernels in by_strategy.items())


def summary_lines(results: list[ShapeResult]) -> str:
    lines = ["| shape | winner | µs | GB/s | % of copy | tuned best vs every baseline |", "|---|---|---|---|---|---|"]
    for result in results:
        winner = result.winner()
        share = f"{100 * result.copy_ms / winner.median_ms:.0f}%" if result.copy_ms else "-"
        lines.append(f"| {result.label} | {winner.method} | {winner.median_ms * 1e3:.1f} | "
                     f"{_gbps(result, winner.median_ms):.0f} | {share} | {verdict(result)} |")
    return "\n".join(lines)


def noise_of(result: ShapeResult) -> float:
    """The relative difference below which two medians of this shape are a tie."""
    return LAUNCH_BOUND_NOISE if result.bytes_moved < SMALL_BYTES else BANDWIDTH_BOUND_NOISE


def verdict(result: ShapeResult) -> str:
    """Whether the framework's winner is at least as fast as every baseline: 'yes', 'tie' (slower
    by less than the shape's timing noise) or 'no', with the ratio to the fastest baseline."""
    best = result.best_tuned()
    baselines = [r for r in result.rows if not r.tuned]
    if best is None or not baselines:
        return "-"
    fastest = min(baselines, key=lambda r: r.median_ms)
    ratio = fastest.median_ms / best.median_ms
    word = "yes" if ratio >= 1 else "tie" if ratio >= 1 - noise_of(result) else "no"
    return f"{word} ({ratio:.3f}x {fastest.method})"


def render(results: list[ShapeResult], options: ExperimentOptions, figures: dict[str, Path]) -> str:
    devices = sorted({r.device for r in results})
    out = [f"# Softmax study, {options.dtype}, on {', '.join(devices)}", "",
           f"Regenerated from {read_from(options.db, options.shipped)} by "
           f"`autotune experiment report {options.folder}`. Every time is the "
           "median of many calls with the L2 flushed before each (CUDA graphs for short kernels), every output "
           "checked against an fp64 reference (relative error column). GB/s counts the bytes a call must move "
           "(each element read and written once); '% of copy' compares with a device-to-device copy of the same "
           "input measured in the same run. 'search s' is the tuning alone: for our kernels from the end of the "
           "session's baseline measurements (torch eager, torch.compile, the copy) to its end, compilation "
           "included; for Helion quick its own autotune call. 'job s' adds process and evaluator start-up and "
           f"the baselines. Our kernels are tuned with `{d.STRATEGY}` ({_other_strategies()}) seeded from "
           f"`{d.SEED_FROM}`. A 'tie' is "
           f"a tuned best slower than the fastest baseline by less than the timing noise: "
           f"{BANDWIDTH_BOUND_NOISE:.0%} for bandwidth-bound shapes, {LAUNCH_BOUND_NOISE:.0%} for launch-bound "
           "ones.", "",
           "## Winner per shape", "", summary_lines(results), "",
           "## Cold and warm starts", "",
           "Each tuned session started either cold (no seed evaluated besides the default config) or warm "
           "(seeds evaluated first: its `seed_from` option as recorded, with the seeds it got). 'best from' is "
           f"where the winner's config came from (default, a seed source, or the search; {INFERRED_NOTE}).", "",
           start_lines(results), ""]
    for name, path in figures.items():
        out += [f"![{name}]({path.name})", ""]
    for result in results:
        out += _shape_section(result)
    out += ["## Frozen configs of the tuned winners", ""]
    for result in results:
        best = result.best_tuned()
        if best is None or best.native is None or best.kernel is None:
            continue
        from autotune.kernels import get_kernel

        family = get_kernel(best.kernel).family
        code = export_config(best.native, family=family, kernel=best.kernel, fmt="python")
        out += [f"### {result.label}: {best.method} (session {best.session_id})", "", "```python", code.rstrip(),
                "```", ""]
    return "\n".join(out) + "\n"


def _shape_section(result: ShapeResult) -> list[str]:
    copy = (f"device copy {result.copy_ms * 1e3:.1f} µs ({_gbps(result, result.copy_ms):.0f} GB/s)"
            if result.copy_ms else "no copy measured")
    small = result.bytes_moved < SMALL_BYTES
    lines = [f"## {result.label}", "",
             f"{result.bytes_moved / 1e6:.2f} MB per call; {copy}."
             + (" Launch-bound: the copy's time is the floor a kernel launch costs here, so read the "
                "'× floor' column." if small else ""), "",
             "| method | µs | min–max µs | GB/s | % of copy | × floor | rel. error | search s | job s | configs "
             "| started from | best from | session |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    winner = result.winner()
    for row in sorted(result.rows, key=lambda r: r.median_ms):
        name = f"**{row.method}**" if row is winner else row.method
        name += EARLIER_SOURCE_MARK if row.earlier_source else ""
        spread = f"{row.min_ms * 1e3:.1f}–{row.max_ms * 1e3:.1f}" if row.min_ms and row.max_ms else "-"
        share = f"{100 * result.copy_ms / row.median_ms:.0f}%" if result.copy_ms else "-"
        floor = f"{row.median_ms / result.copy_ms:.2f}" if result.copy_ms else "-"
        lines.append(f"| {name} | {row.median_ms * 1e3:.1f} | {spread} | {_gbps(result, row.median_ms):.0f} | "
                     f"{share} | {floor} | {_error(row.rel_error)} | {_seconds(row.search_s)} | "
                     f"{_seconds(row.tuning_wall_s)} | {row.configs or '-'} | {_start(row)} | "
                     f"{row.best_origin or '-'} | {row.session_id or '-'} |")
    lines += ["", tuning_cost_line(result)]
    if any(row.earlier_source for row in result.rows):
        lines += ["", f"{EARLIER_SOURCE_NOTE}; `--methods ... --again` measures it anew."]
    best = result.best_tuned()
    if best and best.timeline:
        lines += ["", f"Timeline of {best.method} (session {best.session_id}):", "", "```"]
        lines += [timeline_line(step).rsplit("  (", 1)[0] for step in best.timeline]
        lines += ["```"]
    return lines + [""]


INFERRED_NOTE = (f"'{INFERRED}' marks an origin read off the generations of a session recorded before rows "
                 "named their origin")


def _start(row: MethodRow) -> str:
    if row.method == d.HELION_QUICK:
        return "Helion's own search"
    return row.start.text() if row.start is not None else "-"


def start_lines(results: list[ShapeResult]) -> str:
    """Per shape, the fastest cold-started and the fastest warm-started tuned session, apart."""
    lines = ["| shape | tuned sessions cold / warm | fastest cold µs | its method, best from | fastest warm µs "
             "| its method, started from, best from |", "|---|---|---|---|---|---|"]
    for result in results:
        tuned = [r for r in result.rows if r.tuned and r.start is not None]
        cold = [r for r in tuned if not r.start.warm]
        warm = [r for r in tuned if r.start.warm]
        best_cold = min(cold, key=lambda r: r.median_ms) if cold else None
        best_warm = min(warm, key=lambda r: r.median_ms) if warm else None
        cold_cells = (f"{best_cold.median_ms * 1e3:.1f} | {best_cold.method}, {best_cold.best_origin}"
                      if best_cold else "- | -")
        warm_cells = (f"{best_warm.median_ms * 1e3:.1f} | {best_warm.method}, {best_warm.start.text()}, "
                      f"{best_warm.best_origin}" if best_warm and best_warm.start else "- | -")
        lines.append(f"| {result.label} | {len(cold)} / {len(warm)} | {cold_cells} | {warm_cells} |")
    return "\n".join(lines)


def tuning_cost_line(result: ShapeResult) -> str:
    """What tuning this shape cost: all our kernels together against Helion's quick autotune."""
    tuned = [r for r in result.rows if r.tuned]
    search = sum(r.search_s or 0.0 for r in tuned)
    jobs = sum(r.tuning_wall_s or 0.0 for r in tuned)
    quick = next((r for r in result.rows if r.method == d.HELION_QUICK), None)
    text = (f"Tuning cost at this shape: our {len(tuned)} kernels searched {search:.0f} s in all "
            f"({jobs:.0f} s of jobs with start-up and baselines)")
    if quick is not None and quick.search_s is not None:
        text += f"; Helion's quick autotune of one kernel took {quick.search_s:.0f} s"
    return text + "."


def as_json(results: list[ShapeResult]) -> list[dict[str, Any]]:
    """Every figure of the report, for plotting elsewhere."""
    return [{"shape": list(r.shape), "bytes_moved": r.bytes_moved, "copy_ms": r.copy_ms, "device": r.device,
             "rows": [{"method": row.method, "median_ms": row.median_ms, "min_ms": row.min_ms, "max_ms": row.max_ms,
                       "gbps": _gbps(r, row.median_ms), "rel_error": row.rel_error, "session": row.session_id,
                       "kernel": row.kernel, "config": row.native, "tuning_wall_s": row.tuning_wall_s,
                       "search_s": row.search_s,
                       "configs": row.configs, "tuned": row.tuned, "earlier_source": row.earlier_source,
                       "seed_from": row.start.seed_from if row.start else None,
                       "start": row.start.kind if row.start else None,
                       "seeds": list(row.start.seeds) if row.start else None, "best_origin": row.best_origin}
                      for row in r.rows]}
            for r in results]
