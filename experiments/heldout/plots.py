"""The held-out experiment's figures: ratios to Helion quick per problem and arm, how fast each
run's best came down against the time Helion quick took, and where each arm started."""

from __future__ import annotations

import math
from pathlib import Path

from experiments.figures import pyplot, save

from . import definition as d
from .analysis import ProblemSummary

COLOURS = {d.HELION_QUICK: "black", d.COLD: "tab:blue", d.WARM_HEURISTIC: "tab:orange", d.WARM_CACHE: "tab:green"}


def ratios(summaries: list[ProblemSummary], path: Path) -> Path:
    """Two panels of grouped bars (median over seeds, log scale): our wall time over Helion
    quick's, with the targets' 1/5 and 1/10 marked, and our final time over Helion quick's."""
    plt = pyplot()
    names = sorted({a.name for s in summaries for a in s.arms if a.arm != d.HELION_QUICK})
    figure, (walls, finals) = plt.subplots(2, 1, figsize=(max(8, 1.3 * len(summaries) + 3), 8))
    width = 0.8 / max(1, len(names))
    for index, name in enumerate(names):
        for axes, field in ((walls, "wall_ratio"), (finals, "final_ratio")):
            xs, ys = [], []
            for position, summary in enumerate(summaries):
                arm = next((a for a in summary.arms if a.name == name), None)
                value = getattr(arm, field).median if arm is not None else math.inf
                if math.isfinite(value):
                    xs.append(position + (index - (len(names) - 1) / 2) * width)
                    ys.append(value)
            axes.bar(xs, ys, width=width, label=name, color=COLOURS.get(name.split()[0]),
                     alpha=0.5 + 0.5 * (index % 2))
    for share, text in ((d.COLD_WALL_SHARE, "cold target"), (d.WARM_WALL_SHARE, "warm target")):
        walls.axhline(share, color="grey", ls="--", lw=0.8)
        walls.annotate(text, (len(summaries) - 0.5, share), fontsize=7, va="bottom", ha="right")
    finals.axhline(1 + d.WITHIN, color="grey", ls="--", lw=0.8)
    labels = [f"{s.problem.kernel}\n{s.problem.shape}" for s in summaries]
    for axes, ylabel in ((walls, "wall time / Helion quick's"), (finals, "final time / Helion quick's")):
        axes.set_xticks(range(len(summaries)), labels, fontsize=7)
        axes.set_yscale("log")
        axes.set_ylabel(ylabel)
        axes.grid(True, axis="y", alpha=0.3)
    walls.set_title("held-out shapes: cost and result against Helion quick (median over seeds)")
    walls.legend(fontsize=7, ncol=3)
    return save(plt, figure, path)


def convergence(summaries: list[ProblemSummary], path: Path) -> Path:
    """One panel per problem: each run's best so far over the best anyone found, against seconds
    from the job's start (set-up counted), with Helion quick's wall time and its fifth and tenth."""
    plt = pyplot()
    columns = min(3, max(1, len(summaries)))
    rows = math.ceil(len(summaries) / columns)
    figure, grid = plt.subplots(rows, columns, figsize=(5 * columns, 3.6 * rows), squeeze=False)
    for axes, summary in zip(grid.flat, summaries):
        seen: set[str] = set()
        for arm in summary.arms:
            for run in arm.runs:
                if not run.curve or not summary.best_ms:
                    continue
                times = [t for t, _ in run.curve] + [run.wall_s or run.curve[-1][0]]
                values = [ms / summary.best_ms for _, ms in run.curve]
                values.append(values[-1])
                label = arm.name if arm.name not in seen else None
                seen.add(arm.name)
                axes.step(times, values, where="post", color=COLOURS.get(arm.arm), lw=1.0, label=label,
                          ls="-" if arm.strategy in (d.NATIVE, d.STRATEGIES[0]) else ":")
        if summary.helion_wall_s:
            for share in (1.0, d.COLD_WALL_SHARE, d.WARM_WALL_SHARE):
                axes.axvline(summary.helion_wall_s * share, color="grey", lw=0.7, ls="--")
        axes.axhline(1 + d.WITHIN, color="grey", lw=0.7)
        axes.set_xscale("log")
        axes.set_ylim(0.98, 1.6)
        axes.set_title(summary.problem.label, fontsize=9)
        axes.set_xlabel("s from the job's start")
        axes.set_ylabel("best so far / best found")
        axes.legend(fontsize=6)
    for axes in list(grid.flat)[len(summaries):]:
        axes.set_visible(False)
    return save(plt, figure, path)


def starts(summaries: list[ProblemSummary], path: Path) -> Path:
    """Grouped bars per problem (log scale): each arm's start over the best anyone found (the
    default for the cold arm, the heuristic seed, the fastest cache seed), with 2% marked: what
    each search had to make up (the report's table 'Where the searches started')."""
    plt = pyplot()
    labels = {d.COLD: "default", d.WARM_HEURISTIC: "heuristic seed", d.WARM_CACHE: "cache seed"}
    figure, axes = plt.subplots(figsize=(max(8, 0.45 * len(summaries) + 3), 5))
    width = 0.8 / len(labels)
    for index, arm in enumerate(labels):
        points = [(position + (index - 1) * width, summary.over_best(dict(summary.starts())[arm]))
                  for position, summary in enumerate(summaries)]
        points = [(x, ratio) for x, ratio in points if ratio is not None]
        axes.bar([x for x, _ in points], [ratio for _, ratio in points], width=width, label=labels[arm],
                 color=COLOURS[arm])
    axes.axhline(1 + d.WITHIN, color="grey", ls="--", lw=0.8)
    axes.set_xticks(range(len(summaries)), [f"{s.problem.kernel}\n{s.problem.shape}" for s in summaries],
                    fontsize=6, rotation=90)
    axes.set_yscale("log")
    axes.set_ylabel("start / best found")
    axes.set_title("where each arm started (median over its runs)")
    axes.grid(True, axis="y", alpha=0.3)
    axes.legend(fontsize=7)
    return save(plt, figure, path)
