"""Seeds for row reductions in the one-row-tile form (`softmax(x[tile, :])`).

Fact: the reduced (last) axis has `row` elements and the kernel's space has a reduction
loop (`reduction_loops[0]`: a chunk size; a chunk covering the row means the row stays
resident in registers).  Rule: one row per program; a chunk and a warp count such that
each thread holds a few tens of elements; more warps for longer rows.  Every seed says
which constants produced it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

# Elements of one chunk held per thread.  On the H100 (softmax 4096x32000 fp16, recorded
# in cache.db) the fastest configs held 32 (16384 / (16 warps x 32 threads)) and 64
# elements per thread; configs above 128 per thread spill or fail to compile.
ELEMENTS_PER_THREAD = (32, 64, 16)
# Rows at least this long want the most warps a program can have.
LONG_ROW = 16384
WARP_CHOICES_LONG = (16, 32, 8)
WARP_CHOICES_SHORT = (4, 8, 2)
MAX_SEEDS = 6


@dataclass(frozen=True)
class RowReductionFact:
    """What the rule needs to know: the row length and the parameters that tile it."""

    row: int
    row_tile: str  # the parameter holding rows per program
    chunk: str  # the parameter holding the reduction chunk
    warps: str = "num_warps"


@dataclass(frozen=True)
class Seed:
    params: dict[str, Any]
    rule: str
    reason: str
    constants: Mapping[str, Any]


def row_reduction_fact(space: Any, shape: tuple[int, ...]) -> RowReductionFact | None:
    """Formed only for spaces with one row-tile block and one reduction-loop chunk."""
    names = set(space.names)
    if {"block_sizes[0]", "reduction_loops[0]", "num_warps"} <= names and "block_sizes[1]" not in names:
        return RowReductionFact(row=int(shape[-1]), row_tile="block_sizes[0]", chunk="reduction_loops[0]")
    return None


def softmax_row_seeds(fact: RowReductionFact, space: Any) -> list[Seed]:
    """One row per program, chunk = warps x 32 x elements-per-thread (capped at the row)."""
    chunk_param = space.parameter(fact.chunk)
    whole_row = min((v for v in chunk_param.values() if v >= fact.row), default=max(chunk_param.values()))
    warp_choices = WARP_CHOICES_LONG if fact.row >= LONG_ROW else WARP_CHOICES_SHORT
    seeds: list[Seed] = []
    seen: set[tuple[int, int]] = set()
    for per_thread in ELEMENTS_PER_THREAD:
        for warps in warp_choices:
            chunk = min(warps * 32 * per_thread, whole_row)
            if (chunk, warps) in seen:
                continue
            seen.add((chunk, warps))
            params = {**space.default, fact.row_tile: 1, fact.chunk: chunk, fact.warps: warps}
            if space.violations(params):
                continue
            resident = "whole row resident" if chunk >= fact.row else f"looped in chunks of {chunk}"
            seeds.append(Seed(
                params=space.ordered(params), rule="softmax_row",
                reason=f"one row per program, {resident}, {warps} warps, {chunk // (warps * 32)} elements per thread",
                constants={"ELEMENTS_PER_THREAD": per_thread, "LONG_ROW": LONG_ROW, "warps": warps},
            ))
            if len(seeds) >= MAX_SEEDS:
                return seeds
    return seeds
