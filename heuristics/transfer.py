"""Carrying a config recorded at one shape to another: keep the reduction chunk it proved fits.

Why: the `cache` seed source takes the fastest configs of the nearest recorded shape.  A
config that reduces a whole row in one chunk (`reduction_loops[i] = None`) holds more values per
thread at a wider row than where it was recorded: at 2048x100000 (a shape of the held-out
study, experiments/heldout) every config taken from the nearest recorded shape, 1024x50257
(unlooped, 32 warps, a row half as long), ran out of resources, and the warm-from-cache arm ran
as a cold one.  The recorded config proved that a chunk of next_pow2(recorded row) fits in its
warps; at a wider row it is looped in chunks of that width instead, which the same warps hold
as they did where it was measured.  A narrower row, or a config already looped, is carried as
it is.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from heuristics.facts import REDUCTION_LOOP, KernelFacts
from heuristics.row_reduction import next_pow2

_SLOT = re.compile(r"^reduction_loops\[(\d+)\]$")


def carry(native: Mapping[str, Any], facts: KernelFacts, from_shape: Sequence[int],
          to_shape: Sequence[int]) -> dict[str, Any]:
    """`native`, recorded at `from_shape`, for `to_shape` (whose facts are `facts`): each whole-row
    reduction whose padded row grows is looped in chunks of its padded row at `from_shape`."""
    loops = list(native.get("reduction_loops") or [])
    changed = False
    for fact in facts.reductions:
        found = _SLOT.match(fact.loop_slot or "")
        if fact.residency != REDUCTION_LOOP or found is None or fact.extent is None:
            continue
        index = int(found.group(1))
        if index >= len(loops) or loops[index] is not None:
            continue
        recorded = extent_at(fact.extent, from_shape, to_shape)
        if recorded is not None and next_pow2(fact.extent) > next_pow2(recorded):
            loops[index] = next_pow2(recorded)
            changed = True
    return {**native, "reduction_loops": loops} if changed else dict(native)


def extent_at(extent: int, from_shape: Sequence[int], to_shape: Sequence[int]) -> int | None:
    """The reduction's extent at `from_shape`: the dimension of `to_shape` that equals `extent`,
    read at `from_shape`; None when no dimension, or more than one, equals it (ambiguous)."""
    if len(from_shape) != len(to_shape):
        return None
    dims = [i for i, size in enumerate(to_shape) if size == extent]
    return int(from_shape[dims[0]]) if len(dims) == 1 else None
