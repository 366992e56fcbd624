"""Seed configs evaluated before a strategy's own proposals (`--seed-from`).

* `default`: the compiler's default config (always evaluated; named for clarity);
* `heuristic`: the rules in `heuristics/` and the seeds the kernel's ConfigSpec offers
  (Helion's compiler seeds, recorded with the space);
* `cache`: the fastest configs already recorded for the nearest shape of the same kernel
  and dtype (same kernel source), translated into this task's space where they fit.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from autotune.cache import Cache
from autotune.task import TuningTask
from autotune.types import Params
from search_spaces.space import InvalidConfig

SOURCES = ("default", "heuristic", "cache")
CACHE_SEEDS = 3


def parse_sources(text: str) -> list[str]:
    sources = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in sources if s not in SOURCES]
    if unknown:
        raise ValueError(f"unknown seed source(s) {', '.join(unknown)} (known: {', '.join(SOURCES)})")
    return sources


def collect_seeds(task: TuningTask, cache: Cache | None, sources: Sequence[str]) -> list[tuple[str, Params]]:
    """(origin, point) pairs, in the order the sources were given; configs that do not fit are skipped."""
    seeds: list[tuple[str, Params]] = []
    for source in sources:
        if source == "heuristic":
            from heuristics import seeds_for

            seeds += [("heuristic", seed.params) for seed in seeds_for(task)]
            natives = task.space.extras.get("compiler_seeds", [])
            seeds += [("heuristic", p) for p in _points(task, natives)]
        elif source == "cache" and cache is not None:
            seeds += [("cache", p) for p in _points(task, [n for n, _ in _nearest_best(task, cache)])]
    return seeds


def shape_distance(a: Sequence[int], b: Sequence[int]) -> float:
    """Sum of |log2| ratios of the extents: 0 for the same shape, inf for another rank."""
    if len(a) != len(b):
        return math.inf
    return sum(abs(math.log2(x) - math.log2(y)) for x, y in zip(a, b))


def _nearest_best(task: TuningTask, cache: Cache) -> list[tuple[dict[str, Any], Any]]:
    records = [r for r in cache.find_spaces(task.spec.name, dtype=task.dtype)
               if r.source_hash == task.identity.source_hash and r.evaluations]
    if not records:
        return []
    nearest = min(shape_distance(r.shape, task.shape) for r in records)
    best: list[tuple[dict[str, Any], Any]] = []
    for record in records:
        if shape_distance(record.shape, task.shape) == nearest:
            best += cache.best_configs(record.fingerprint, CACHE_SEEDS)
    best.sort(key=lambda item: item[1].objective)
    return best[:CACHE_SEEDS]


def _points(task: TuningTask, natives: Sequence[dict[str, Any]]) -> list[Params]:
    points = []
    for native in natives:
        try:
            points.append(task.codec.params_of(native))
        except InvalidConfig:
            continue
    return points
