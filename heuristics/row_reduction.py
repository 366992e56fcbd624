"""Rule `row_reduction`: seeds for softmax-like row reductions (no matmul in the kernel).

Needs one `ReductionFact` with a tunable rows-per-program slot; the chunk slot is the
compiler's reduction loop (`reduction_loops[i]`) or the kernel's own tile (`block_sizes[j]`).
Seeds, in order, each only where its conditions hold and its values are in the space:

1. resident: one row per program, the whole row in one chunk, warps from the row length
   (RESIDENT_ELEMENTS_PER_THREAD per thread, between MIN_WARPS and MAX_WARPS);
2. two-pass (rows >= LONG_ROW): chunks of at most half the padded row, 16 warps, 3 stages,
   and eviction hints that keep the row in L2 between passes (the measured H100 best), at
   each of TWO_PASS_ELEMENTS_PER_THREAD values per thread;
3. persistent (rows >= LONG_ROW and at most PERSISTENT_MAX_ROWS_PER_SM rows per SM): small
   chunks, 32 warps, persistent interleaved programs (the measured best with few rows);
4. a few rows per program (rows shorter than SHORT_ROW);
5. chunk sized to registers: warps x 32 x elements-per-thread, for a few warp counts.
"""

from __future__ import annotations

from typing import Any, Mapping

from heuristics.device import DeviceLimits
from heuristics.facts import REDUCTION_LOOP, KernelFacts, ReductionFact
from heuristics.rules import Declined, Rule, Seed, allowed, point, register_rule
from search_spaces.helion_space import MAX_ELEMENTS_PER_THREAD

NAME = "row_reduction"

# Rows at least this long get the long-row seeds (2 and 3).  Both measured configs are for
# rows of 32000 and 50257 fp16 elements; a 16384-element fp16 row (32 KB) is where one row
# per program stops fitting comfortably in registers at 16 warps (32 elements per thread).
LONG_ROW = 16384
# Resident seed: elements per thread.  The one-row resident tile with 32 warps, 32 elements
# per thread at 4096x32000 (32768 padded), was Helion's H100 default and ran 0.198 ms; the
# best resident configs recorded in cache.db (sessions 6 and 8) ran 0.195 ms with 32 warps,
# and at 1024x50257 the best recorded config (0.1326 ms, session 4) was resident with 32 warps.
RESIDENT_ELEMENTS_PER_THREAD = 32
MIN_WARPS, MAX_WARPS = 4, 32
# Two-pass seed, from the best config Helion's autotuner found on the H100 at [4096, 32000]
# fp16: 0.181 ms (2894 GB/s) against 0.198 ms for the default: block_sizes=[1],
# reduction_loops=[16384] (half the 32768 padded row), num_warps=16, num_stages=3 (3 and 4
# tied), pid_type flat, load_eviction_policies ['last', 'last', 'first', ''].  The evictions
# generalise as: every read of the row but the last is 'last' (keep it in L2 for the next
# pass), the last read is 'first'.
TWO_PASS_CHUNK_DIVISOR = 2
# Values per thread of a two-pass chunk, each its own seed: 32 is the measured best above (16384
# over 16 warps).  Revised after the held-out study (experiments/heldout): at 4096x65536 the
# unbounded half row (32768, 64 a thread) was 1.35x the best found there, which looped in
# chunks of 8192 (16 a thread); warm searches from the old seed stayed in its basin.  Judged
# since on shapes declared after the revision (definition.REVISED_SHAPES there).
TWO_PASS_ELEMENTS_PER_THREAD = (32, 16)
TWO_PASS_WARPS = 16
TWO_PASS_STAGES = 3
KEEP_IN_L2, EVICT_AFTER = "last", "first"
# Persistent seed, from the best config Helion's autotuner found at [1024, 50257] fp16
# (0.147 ms): block_sizes=[1], reduction_loops=[2048], num_warps=32, num_stages=2,
# pid_type='persistent_interleaved', num_sm_multiplier=2, range_multi_buffers=[True].  Its
# eviction policies ('last' on the final, write-pass read, which nothing reads again) are
# not carried over.  1024 rows is 7.8 rows per SM on 132 SMs; at 4096 rows (31 per SM) the
# flat two-pass config won, hence the rows-per-SM bound.
PERSISTENT_CHUNK = 2048
PERSISTENT_WARPS = 32
PERSISTENT_STAGES = 2
PERSISTENT_PID = "persistent_interleaved"
PERSISTENT_SM_MULTIPLIER = 2
PERSISTENT_MAX_ROWS_PER_SM = 16
# Rows shorter than this get a seed with FEW_ROWS rows per program: a 1024-element row over
# 4 warps is 8 elements per thread, and 4 rows bring a program to the 32 per thread of the
# measured long-row configs.
SHORT_ROW = 2048
FEW_ROWS = 4
# Register-sized chunks: elements per thread and warp counts tried (the fastest recorded
# 4096x32000 configs held 32 and 64 elements per thread; above 128 they spill or time out).
ELEMENTS_PER_THREAD = (32, 64, 16)
WARP_CHOICES_LONG = (16, 32, 8)
WARP_CHOICES_SHORT = (4, 8, 2)
MAX_SEEDS = 6


def _applies(facts: KernelFacts) -> bool:
    return not facts.matmuls and len(facts.reductions) == 1


def next_pow2(value: int) -> int:
    return 1 << max(0, (int(value) - 1).bit_length())


def emit(facts: KernelFacts, space: Any, device: DeviceLimits) -> list[Seed] | Declined:
    fact = facts.reductions[0]
    if fact.extent is None:
        return Declined(NAME, "the row length is symbolic")
    if fact.row_slot is None or fact.row_slot not in space.names:
        return Declined(NAME, "no rows-per-program slot: the grid is not one tunable row axis")
    if fact.loop_slot is None or fact.loop_slot not in space.names:
        return Declined(NAME, "the row is resident with no chunk slot: nothing for this rule to size")
    row, padded = fact.extent, next_pow2(fact.extent)
    chunks = sorted(space.parameter(fact.loop_slot).values())
    whole = min((c for c in chunks if c >= row), default=chunks[-1])
    seeds: list[Seed] = []

    def add(overrides: Mapping[str, Any], optional: Mapping[str, Any], reason: str, constants: dict[str, Any]) -> None:
        extra = {k: v for k, v in optional.items() if allowed(space, k, v)}
        params = point(space, {fact.row_slot: 1, **overrides, **extra})
        if params is not None and len(seeds) < MAX_SEEDS and all(s.params != params for s in seeds):
            seeds.append(Seed(params=params, rule=NAME, reason=reason, facts=(fact,), constants=constants))

    warps = min(MAX_WARPS, max(MIN_WARPS, padded // (32 * RESIDENT_ELEMENTS_PER_THREAD)))
    if padded // (warps * 32) <= MAX_ELEMENTS_PER_THREAD:
        add({fact.loop_slot: whole, "num_warps": warps}, {},
            f"one row per program, whole row resident, {warps} warps ({padded // (warps * 32)} elements per thread)",
            {"RESIDENT_ELEMENTS_PER_THREAD": RESIDENT_ELEMENTS_PER_THREAD, "MIN_WARPS": MIN_WARPS,
             "MAX_WARPS": MAX_WARPS, "MAX_ELEMENTS_PER_THREAD": MAX_ELEMENTS_PER_THREAD})
    if row >= LONG_ROW:
        _two_pass(fact, padded, space, add)
        if fact.rows is not None and fact.rows <= PERSISTENT_MAX_ROWS_PER_SM * device.sm_count:
            add({fact.loop_slot: min(PERSISTENT_CHUNK, whole), "num_warps": PERSISTENT_WARPS,
                 "num_stages": PERSISTENT_STAGES, "pid_type": PERSISTENT_PID},
                {"num_sm_multiplier": PERSISTENT_SM_MULTIPLIER, "range_multi_buffers[0]": True},
                f"{fact.rows} rows on {device.sm_count} SMs: persistent interleaved programs, chunks of "
                f"{min(PERSISTENT_CHUNK, whole)}, {PERSISTENT_WARPS} warps",
                {"PERSISTENT_CHUNK": PERSISTENT_CHUNK, "PERSISTENT_WARPS": PERSISTENT_WARPS,
                 "PERSISTENT_STAGES": PERSISTENT_STAGES, "PERSISTENT_SM_MULTIPLIER": PERSISTENT_SM_MULTIPLIER,
                 "PERSISTENT_MAX_ROWS_PER_SM": PERSISTENT_MAX_ROWS_PER_SM, "sm_count": device.sm_count,
                 "LONG_ROW": LONG_ROW})
    if row < SHORT_ROW and fact.rows is not None and fact.rows >= FEW_ROWS:
        add({fact.row_slot: FEW_ROWS, fact.loop_slot: whole, "num_warps": MIN_WARPS}, {},
            f"short row: {FEW_ROWS} rows per program, whole rows resident, {MIN_WARPS} warps",
            {"SHORT_ROW": SHORT_ROW, "FEW_ROWS": FEW_ROWS, "MIN_WARPS": MIN_WARPS})
    for per_thread in ELEMENTS_PER_THREAD:
        for w in WARP_CHOICES_LONG if row >= LONG_ROW else WARP_CHOICES_SHORT:
            chunk = min(w * 32 * per_thread, whole)
            resident = "whole row resident" if chunk >= row else f"looped in chunks of {chunk}"
            add({fact.loop_slot: chunk, "num_warps": w}, {},
                f"one row per program, {resident}, {w} warps, {chunk // (w * 32)} elements per thread",
                {"ELEMENTS_PER_THREAD": per_thread, "LONG_ROW": LONG_ROW, "warps": w})
    return seeds or Declined(NAME, "no proposal is a point of this space")


def _two_pass(fact: ReductionFact, padded: int, space: Any, add: Any) -> None:
    evictions: dict[str, str] = {}
    if fact.residency == REDUCTION_LOOP and fact.passes is not None:
        for i in range(fact.passes):
            evictions[f"load_eviction_policies[{i}]"] = KEEP_IN_L2 if i < fact.passes - 1 else EVICT_AFTER
        if not all(allowed(space, k, v) for k, v in evictions.items()):
            evictions = {}  # all reads hinted or none
    hints = (f", evictions {[evictions[k] for k in sorted(evictions)]} keep the row in L2 between its "
             f"{fact.passes} reads") if evictions else ""
    half = padded // TWO_PASS_CHUNK_DIVISOR
    for per_thread in TWO_PASS_ELEMENTS_PER_THREAD:
        chunk = min(half, TWO_PASS_WARPS * 32 * per_thread)
        share = "half the padded row" if chunk == half else f"{per_thread} values a thread"
        add({fact.loop_slot: chunk, "num_warps": TWO_PASS_WARPS, "num_stages": TWO_PASS_STAGES, "pid_type": "flat"},
            evictions,
            f"long row: looped in chunks of {chunk} ({share}), {TWO_PASS_WARPS} warps, "
            f"{TWO_PASS_STAGES} stages{hints}",
            {"LONG_ROW": LONG_ROW, "TWO_PASS_CHUNK_DIVISOR": TWO_PASS_CHUNK_DIVISOR,
             "TWO_PASS_ELEMENTS_PER_THREAD": per_thread, "TWO_PASS_WARPS": TWO_PASS_WARPS,
             "TWO_PASS_STAGES": TWO_PASS_STAGES, "KEEP_IN_L2": KEEP_IN_L2, "EVICT_AFTER": EVICT_AFTER})


RULE = register_rule(Rule(
    name=NAME,
    needs=(f"{ReductionFact.__name__} (one, and no MatmulFact)",),
    summary="row reductions without a matmul: rows per program, chunk and warps from the row length",
    applies=_applies,
    emit=emit,
))
