"""The study's figures: how many times faster the seed is than each baseline, per cell (log axis)."""

from __future__ import annotations

from pathlib import Path

from experiments.figures import pyplot

from .data import CellResult



def _label(result: CellResult) -> str:
    dtype = {"bfloat16": "bf16", "float32": "fp32"}.get(result.cell.dtype, result.cell.dtype)
    return f"{result.cell.kernel.removeprefix('matmul-')} {result.cell.shape} {dtype}"


def speedups(results: list[CellResult], path: Path, against: dict[str, str], title: str) -> Path:
    """Horizontal bars per cell of other/seed for each baseline in `against` (attribute ->
    legend name), drawn from 1 (right: the seed is faster); a rescue (when the default is
    among `against`) or an infeasible cell is written where its bar would be."""
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter

    width = 0.8 / max(1, len(against))
    figure, axes = plt.subplots(figsize=(10, 1.2 + 0.32 * len(results) * max(1, len(against))))
    for index, (attribute, name) in enumerate(against.items()):
        ys, xs = [], []
        for position, result in enumerate(results):
            ratio = result.ratio(_ms(result, attribute))
            if ratio is not None:
                ys.append(position + (index - (len(against) - 1) / 2) * width)
                xs.append(ratio)
        axes.barh(ys, [x - 1 for x in xs], left=1, height=width, label=name)
    for position, result in enumerate(results):
        rescue = result.rescue and "default" in against
        note = "rescue: the default fails" if rescue else "infeasible: the rule declines" if result.infeasible else ""
        if note:
            axes.text(0.99, position, note, ha="right", va="center", fontsize=8, transform=axes.get_yaxis_transform())
    axes.axvline(1.0, color="k", lw=0.8)
    axes.set_xscale("log")
    ticks = FuncFormatter(lambda value, _: f"{value:g}x")
    axes.xaxis.set_major_formatter(ticks)
    axes.xaxis.set_minor_formatter(ticks)
    axes.tick_params(axis="x", which="minor", labelsize=7)
    axes.set_yticks(range(len(results)), [_label(r) for r in results], fontsize=8)
    axes.invert_yaxis()
    axes.set_xlabel("other ms / seed ms (> 1: the seed is faster)")
    axes.set_title(title)
    axes.legend(fontsize=8, loc="lower right")
    axes.grid(True, axis="x", which="both", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _ms(result: CellResult, attribute: str) -> float | None:
    value = getattr(result, attribute)
    return value.ms if hasattr(value, "ms") else value
