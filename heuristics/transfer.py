"""Carrying a config recorded at one shape to another: keep the reduction chunk it proved fits,
and no more staged rows than the device's shared memory holds.

Why: the `cache` seed source takes the fastest configs of the nearest recorded shape.  A
config that reduces a whole row in one chunk (`reduction_loops[i] = None`) holds more values per
thread at a wider row than where it was recorded: at 2048x100000 (a shape of the held-out
study, experiments/heldout) every config taken from the nearest recorded shape, 1024x50257
(unlooped, 32 warps, a row half as long), ran out of resources, and the warm-from-cache arm ran
as a cold one.  The recorded config proved that a chunk of next_pow2(recorded row) fits in its
warps; at a wider row it is looped in chunks of that width instead, which the same warps hold
as they did where it was measured.  A narrower row, or a config already looped, is carried as
it is.

A row kept whole is also staged whole: a loop pipelined over `s` stages (`range_num_stages`)
holds s - 1 rows of the next iterations' input in shared memory.  Where the recorded row's
stride was not 16-byte aligned (1024x50257) nothing was staged and the config ran; at an
aligned row of the same padded width the same config asked for three 128 KiB rows (393344 B
against the H100's 232448 B) and ran out of shared memory at every held-out shape padded to 64K
values.  So the stages are lowered until the staged rows fit the device's shared memory per
block (`fitting_stages`), keeping what pipelining fits.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from heuristics.device import H100_SMEM_PER_BLOCK_BYTES
from heuristics.facts import REDUCTION_LOOP, KernelFacts, ReductionFact
from heuristics.row_reduction import next_pow2

_SLOT = re.compile(r"^reduction_loops\[(\d+)\]$")
_BLOCK = re.compile(r"^block_sizes\[(\d+)\]$")


def carry(native: Mapping[str, Any], facts: KernelFacts, from_shape: Sequence[int],
          to_shape: Sequence[int], smem_per_block: int = H100_SMEM_PER_BLOCK_BYTES) -> dict[str, Any]:
    """`native`, recorded at `from_shape`, for `to_shape` (whose facts are `facts`): each whole-row
    reduction whose padded row grows is looped in chunks of its padded row at `from_shape`, and
    each loop stages no more whole rows than `smem_per_block` holds."""
    return stages_fitted(looped(native, facts, from_shape, to_shape), facts, smem_per_block)


def looped(native: Mapping[str, Any], facts: KernelFacts, from_shape: Sequence[int],
           to_shape: Sequence[int]) -> dict[str, Any]:
    """`native` with each whole-row reduction whose padded row grows looped in chunks of its
    padded row at `from_shape`."""
    loops = list(native.get("reduction_loops") or [])
    changed = False
    for fact in facts.reductions:
        index = _whole_row_slot(fact, loops)
        if index is None:
            continue
        recorded = extent_at(fact.extent, from_shape, to_shape)
        if recorded is not None and next_pow2(fact.extent) > next_pow2(recorded):
            loops[index] = next_pow2(recorded)
            changed = True
    return {**native, "reduction_loops": loops} if changed else dict(native)


def stages_fitted(native: Mapping[str, Any], facts: KernelFacts, smem_per_block: int) -> dict[str, Any]:
    """`native` with each loop's stages lowered until the rows it stages whole fit (`fitting_stages`)."""
    stages = list(native.get("range_num_stages") or [])
    fitted = stages
    for fact in facts.reductions:
        row = whole_row_bytes(native, fact)
        if row is not None:
            fitted = [fitting_stages(s, row, smem_per_block) if isinstance(s, int) and s > 1 else s for s in fitted]
    return {**native, "range_num_stages": fitted} if fitted != stages else dict(native)


def fitting_stages(stages: int, staged_bytes: int, smem_per_block: int) -> int:
    """The most pipeline stages, at most `stages`, whose stages - 1 buffers of `staged_bytes`
    fit in `smem_per_block` (at least 1: nothing staged)."""
    fits = 1 + smem_per_block // staged_bytes if staged_bytes > 0 else stages
    return max(1, min(stages, fits))


def whole_row_bytes(native: Mapping[str, Any], fact: ReductionFact) -> int | None:
    """The input one program loads whole for `fact` in `native` (its rows times the padded row,
    in bytes), or None where the row is looped or its size is not known."""
    if _whole_row_slot(fact, list(native.get("reduction_loops") or [])) is None or not fact.input_itemsize:
        return None
    block = _BLOCK.match(fact.row_slot or "")
    sizes = list(native.get("block_sizes") or [])
    rows = sizes[int(block.group(1))] if block and int(block.group(1)) < len(sizes) else 1
    return int(rows or 1) * next_pow2(fact.extent) * fact.input_itemsize


def _whole_row_slot(fact: ReductionFact, loops: Sequence[Any]) -> int | None:
    """The index of `fact`'s `reduction_loops` slot where the config reduces its whole row in one
    chunk (the slot is None), or None: a looped row, no such slot, or an unknown extent."""
    found = _SLOT.match(fact.loop_slot or "")
    if fact.residency != REDUCTION_LOOP or found is None or fact.extent is None:
        return None
    index = int(found.group(1))
    return index if index < len(loops) and loops[index] is None else None


def extent_at(extent: int, from_shape: Sequence[int], to_shape: Sequence[int]) -> int | None:
    """The reduction's extent at `from_shape`: the dimension of `to_shape` that equals `extent`,
    read at `from_shape`; None when no dimension, or more than one, equals it (ambiguous)."""
    if len(from_shape) != len(to_shape):
        return None
    dims = [i for i, size in enumerate(to_shape) if size == extent]
    return int(from_shape[dims[0]]) if len(dims) == 1 else None
