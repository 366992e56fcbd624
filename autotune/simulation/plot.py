"""Convergence plot: best-so-far (relative to the optimum) against simulated GPU seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from autotune.simulation.runner import Trace
from autotune.simulation.stats import convergence_band


def convergence_plot(traces: Mapping[str, Sequence[Trace]], optimum_ms: float, title: str, path: Path) -> None:
    """One line per strategy (median over runs) with its inter-quartile band."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on tuning machines
    import matplotlib.pyplot as plt

    longest = max((sum(t.costs_s) for runs in traces.values() for t in runs), default=1.0) or 1.0
    shortest = min((c for runs in traces.values() for t in runs for c in t.costs_s if c > 0), default=longest / 1e3)
    grid = np.geomspace(max(shortest, longest / 1e4), longest, 200)
    figure, axes = plt.subplots(figsize=(8, 5))
    for name, runs in traces.items():
        q1, median, q3 = convergence_band(runs, optimum_ms, grid)
        (line,) = axes.plot(grid, median, label=name)
        axes.fill_between(grid, q1, q3, color=line.get_color(), alpha=0.2)
    axes.set_xscale("log")
    axes.set_yscale("log")  # early guesses are many times the optimum; the end is within a few percent
    axes.set_xlabel("simulated GPU seconds (recorded compile + benchmark time)")
    axes.set_ylabel("best found / best recorded")
    axes.set_title(title)
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.axhline(1.02, color="gray", linewidth=0.6, linestyle="--")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
