"""Rule `row_reduction`: seeds for softmax-like row reductions (no matmul in the kernel).

Needs one `ReductionFact` with a tunable rows-per-program slot; the chunk slot is the
compiler's reduction loop (`reduction_loops[i]`) or the kernel's own tile (`block_sizes[j]`).
Seeds, in order, each only where its conditions hold and its values are in the space:

1. resident: one row per program, the whole row in one chunk, warps from the row length
   (RESIDENT_ELEMENTS_PER_THREAD per thread, between MIN_WARPS and MAX_WARPS);
2. two-pass (rows >= LONG_ROW): chunks of at most half the padded row, 16 warps (32 with few
   rows: at most PERSISTENT_MAX_ROWS_PER_SM rows per SM), 3 stages, and eviction hints that
   keep the row in L2 between passes (the measured H100 best), at each of
   TWO_PASS_ELEMENTS_PER_THREAD values per thread;
3. persistent (rows >= LONG_ROW, few rows): the first two-pass seed's chunk, warps and
   eviction hints in persistent interleaved programs;
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
# Warps of the two-pass and persistent seeds with few rows (at most PERSISTENT_MAX_ROWS_PER_SM
# per SM).  Third revision, after the held-out study's runs (experiments/heldout): at all five
# of its shapes with few long rows the best config found held 32 warps.  The fastest flat
# config at 32 warps was 1.000-1.058x the best found there, at 16 warps 1.069-1.165x
# (2048x100000 1.000 against 1.165, 512x262144 1.000 against 1.069, 768x160000 1.058 against
# 1.148, 1536x131072 1.000 against 1.152, 1024x196608 1.046 against 1.111).  At 1024x196608
# the rule's two-pass seed at 16 warps was 1.179x the best found, and the warm search from it
# missed its time target.  Fitted on those five shapes; the shapes declared after it
# (FEW_ROWS_SHAPES in experiments/heldout/definition.py) judge it.
FEW_ROWS_WARPS = 32
TWO_PASS_STAGES = 3
KEEP_IN_L2, EVICT_AFTER = "last", "first"
# Persistent seed.  First from the best config Helion's autotuner found at [1024, 50257] fp16
# (0.147 ms): reduction_loops=[2048], num_warps=32, num_stages=2, pid_type=
# 'persistent_interleaved', num_sm_multiplier=2.  1024 rows is 7.8 rows per SM on 132 SMs; at
# 4096 rows (31 per SM) the flat two-pass config won, hence the rows-per-SM bound.  Revised with
# FEW_ROWS_WARPS: its chunk of 2048 was 1.26-1.80x the best found at the held-out study's five
# shapes with few long rows.  Persistent programs with the first two-pass seed's chunk (32
# values a thread over 32 warps), 2 programs per SM and its eviction hints ran within 1% of the
# best found at 1024x196608, 768x160000 and 512x262144, 1.044x at 1536x131072 and about 1.22x
# at 2048x100000, where the flat seed at 16 values a thread was the best found.
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
        few = few_long_rows(fact.rows, row, device.sm_count)
        pass_warps = FEW_ROWS_WARPS if few else TWO_PASS_WARPS
        evictions, hints = _evictions(fact, space)
        half = padded // TWO_PASS_CHUNK_DIVISOR
        chunks = [min(half, pass_warps * 32 * n) for n in TWO_PASS_ELEMENTS_PER_THREAD]
        for per_thread, chunk in zip(TWO_PASS_ELEMENTS_PER_THREAD, chunks):
            share = "half the padded row" if chunk == half else f"{per_thread} values a thread"
            add({fact.loop_slot: chunk, "num_warps": pass_warps, "num_stages": TWO_PASS_STAGES, "pid_type": "flat"},
                evictions, f"long row: looped in chunks of {chunk} ({share}), {pass_warps} warps, "
                f"{TWO_PASS_STAGES} stages{hints}",
                {"LONG_ROW": LONG_ROW, "TWO_PASS_CHUNK_DIVISOR": TWO_PASS_CHUNK_DIVISOR,
                 "TWO_PASS_ELEMENTS_PER_THREAD": per_thread, "TWO_PASS_WARPS": TWO_PASS_WARPS,
                 "FEW_ROWS_WARPS": FEW_ROWS_WARPS, "PERSISTENT_MAX_ROWS_PER_SM": PERSISTENT_MAX_ROWS_PER_SM,
                 "TWO_PASS_STAGES": TWO_PASS_STAGES, "KEEP_IN_L2": KEEP_IN_L2, "EVICT_AFTER": EVICT_AFTER})
        if few:
            add({fact.loop_slot: chunks[0], "num_warps": pass_warps, "num_stages": PERSISTENT_STAGES,
                 "pid_type": PERSISTENT_PID},
                {"num_sm_multiplier": PERSISTENT_SM_MULTIPLIER, **evictions},
                f"{fact.rows} rows on {device.sm_count} SMs: persistent interleaved programs, chunks of "
                f"{chunks[0]}, {pass_warps} warps{hints}",
                {"FEW_ROWS_WARPS": FEW_ROWS_WARPS, "PERSISTENT_STAGES": PERSISTENT_STAGES,
                 "PERSISTENT_SM_MULTIPLIER": PERSISTENT_SM_MULTIPLIER,
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


def few_long_rows(rows: int | None, row: int, sm_count: int) -> bool:
    """Rows at least LONG_ROW long, at most PERSISTENT_MAX_ROWS_PER_SM of them per SM: where the
    two-pass seeds take FEW_ROWS_WARPS and the persistent seed is proposed."""
    return row >= LONG_ROW and rows is not None and rows <= PERSISTENT_MAX_ROWS_PER_SM * sm_count


def _evictions(fact: ReductionFact, space: Any) -> tuple[dict[str, str], str]:
    """Eviction hints keeping the row in L2 between its reads (every read but the last), and
    their description; none unless the space offers a hint for every read."""
    evictions: dict[str, str] = {}
    if fact.residency == REDUCTION_LOOP and fact.passes is not None:
        for i in range(fact.passes):
            evictions[f"load_eviction_policies[{i}]"] = KEEP_IN_L2 if i < fact.passes - 1 else EVICT_AFTER
        if not all(allowed(space, k, v) for k, v in evictions.items()):
            evictions = {}  # all reads hinted or none
    hints = (f", evictions {[evictions[k] for k in sorted(evictions)]} keep the row in L2 between its "
             f"{fact.passes} reads") if evictions else ""
    return evictions, hints


RULE = register_rule(Rule(
    name=NAME,
    needs=(f"{ReductionFact.__name__} (one, and no MatmulFact)",),
    summary="row reductions without a matmul: rows per program, chunk and warps from the row length",
    applies=_applies,
    emit=emit,
))
