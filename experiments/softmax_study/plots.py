"""The study's figures: GB/s per shape, a roofline-style view, and the winners' timelines."""

from __future__ import annotations

from pathlib import Path

from autotune.report import gbps
from experiments.figures import pyplot, save

from .data import ShapeResult




def _methods(results: list[ShapeResult]) -> list[str]:
    seen: list[str] = []
    for result in results:
        for row in result.rows:
            if row.method not in seen:
                seen.append(row.method)
    return seen


def bandwidth_bars(results: list[ShapeResult], path: Path) -> Path:
    """Grouped bars: achieved GB/s per shape and method (log scale: small shapes are launch-bound)."""
    plt = pyplot()
    methods = _methods(results)
    width = 0.8 / max(1, len(methods))
    figure, axes = plt.subplots(figsize=(12, 5))
    for index, method in enumerate(methods):
        xs, ys = [], []
        for position, result in enumerate(results):
            row = next((r for r in result.rows if r.method == method), None)
            if row is not None:
                xs.append(position + (index - (len(methods) - 1) / 2) * width)
                ys.append(gbps(result.bytes_moved, row.median_ms))
        axes.bar(xs, ys, width=width, label=method)
    axes.set_xticks(range(len(results)), [r.label for r in results])
    axes.set_yscale("log")
    axes.set_ylabel("GB/s (bytes a call must move / median time)")
    axes.set_title("softmax: achieved bandwidth per shape and method")
    axes.legend(fontsize=8, ncol=2)
    axes.grid(True, axis="y", alpha=0.3)
    return save(plt, figure, path)


def roofline(results: list[ShapeResult], path: Path) -> Path:
    """Achieved bandwidth against bytes moved, with the measured copy as the ceiling at each size."""
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(8, 5.5))
    sizes = [r.bytes_moved for r in results]
    copies = [(r.bytes_moved, gbps(r.bytes_moved, r.copy_ms)) for r in results if r.copy_ms]
    if copies:
        axes.plot(*zip(*copies), "k--", label="device-to-device copy (measured)")
    for method in _methods(results):
        points = [(r.bytes_moved, gbps(r.bytes_moved, row.median_ms)) for r in results
                  for row in r.rows if row.method == method]
        axes.plot(*zip(*points), marker="o", label=method)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xticks(sizes, [r.label for r in results], rotation=30, fontsize=8)
    axes.set_xlabel("bytes moved per call (shape)")
    axes.set_ylabel("achieved GB/s")
    axes.set_title("softmax: bandwidth against problem size (left: launch-bound)")
    axes.legend(fontsize=8)
    axes.grid(True, which="both", alpha=0.3)
    return save(plt, figure, path)


def timelines(results: list[ShapeResult], path: Path) -> Path:
    """Best-so-far time (relative to the final) per generation of each shape's tuned winner."""
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(8, 5))
    for result in results:
        best = result.best_tuned()
        steps = [s for s in (best.timeline if best else []) if s.generation >= 0 and s.best_ms]
        if not steps:
            continue
        final = best.median_ms
        axes.plot([s.generation for s in steps], [s.best_ms / final for s in steps], marker=".",
                  label=f"{result.label}: {best.method}")
    axes.axhline(1.0, color="k", lw=0.8)
    axes.set_xlabel("generation (0: seeds)")
    axes.set_ylabel("best so far / final winner (re-timed)")
    axes.set_title("how fast each shape's winning session got there")
    axes.legend(fontsize=8)
    axes.grid(True, alpha=0.3)
    return save(plt, figure, path)
