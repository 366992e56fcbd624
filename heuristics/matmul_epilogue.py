"""Rule `matmul_epilogue_resident`: a footprint-capped tile for matmul + row-reduction epilogues.

Needs a `MatmulWithReductionEpilogueFact` whose N axis is resident (the [M_BLOCK, N] fp32
accumulator holds whole output rows, so the epilogue reduces in registers).  It sizes:

* M_BLOCK: the largest power of two whose fp32 accumulator M_BLOCK * N_pad * 4 bytes fits
  ACC_REGISTER_BUDGET_BYTES, capped at MAX_M_BLOCK_16BIT scaled by the operand itemsize
  (64 for fp16/bf16, 32 for fp32) and raised to the space's smallest block;
* K_BLOCK and num_stages from bands, so that the staged operand tiles fit a cap derived
  from the device's shared memory per block.  The footprint is

      staged_bytes = num_stages * K_BLOCK * (M_BLOCK + N_pad) * itemsize

  i.e. `num_stages` buffers of the x tile [M_BLOCK, K_BLOCK] and the w tile [K_BLOCK, N_pad],
  where N_pad is N rounded up to a power of two (the tile Triton allocates).  The issue's
  simplified form drops the small x tile: num_stages * K_BLOCK * N * itemsize.  When over
  the cap, K_BLOCK drops first (32 -> 16), then num_stages (3 -> 2 -> 1);
* M_BLOCK again, for occupancy: halved (not below MIN_M_BLOCK_FOR_OCCUPANCY) while the grid
  would have fewer than MIN_PROGRAMS_PER_SM programs per SM, so short matrices still fill
  the device;
* num_warps: 4 while the accumulator has at most WARPS_RAMP_ELEMENTS elements, else 8;
  with 8 warps and 16-bit operands K_BLOCK = WIDE_K_BLOCK is tried first, under a higher cap.

Past the feasible range (the staged footprint over the cap even at the smallest K_BLOCK
and one stage, or the accumulator alone over the register file) it declines and says why:
it never proposes a config that cannot fit.
"""

from __future__ import annotations

from typing import Any

from heuristics.device import DeviceLimits
from heuristics.facts import KernelFacts, MatmulWithReductionEpilogueFact
from heuristics.rules import Declined, Rule, Seed, point, register_rule

NAME = "matmul_epilogue_resident"

# Bytes of registers the fp32 [M_BLOCK, N] accumulator may take: half of the H100's 256 KB
# register file per SM (65536 32-bit registers), the budget (ACC_BUDGET_BYTES = 128 KiB)
# that Helion PR #2846 measured on the H100: its seeds beat Helion's default 1.3-2.4x at
# N <= 512 and 1.55-29.7x at larger N.
ACC_REGISTER_BUDGET_BYTES = 131072
# The whole register file of one SM (H100: 65536 x 4 bytes).  An accumulator larger than
# this cannot stay in registers at the smallest M_BLOCK: the rule declines.
REGISTER_FILE_BYTES = 262144
# Largest M_BLOCK for 16-bit operands, halved for fp32 (dtype-scaled as in PR #2846, whose
# measured seeds used M_BLOCK = 64 for bf16 and 32 for fp32 at small N).
MAX_M_BLOCK_16BIT = 64
# K_BLOCK bands, tried in order: 32, then 16 when the staged tiles do not fit.  PR #2846
# drops 32 -> 16 first: it halves the staged bytes and avoids a K_BLOCK=32 ptxas cliff it
# measured at large N.
K_BLOCK_BANDS = (32, 16)
# num_stages bands, tried in order after K_BLOCK has dropped (PR #2846 used 3 stages and
# fell back to 1).
NUM_STAGES_BANDS = (3, 2, 1)
# Fraction of the device's shared memory per block that the staged operand tiles may use;
# the rest is left to the epilogue's cross-warp reduction scratch, barriers, and the gap
# between this footprint model and Triton's allocator.  On the H100 (232448 bytes) it
# gives 197580 bytes, about the 192 KiB staged budget PR #2846 measured to compile at every
# band it emitted (N <= 4096 for bf16, N <= 2048 for fp32).
STAGED_SMEM_FRACTION = 0.85
# num_warps ramp: 4 warps while the accumulator has at most this many elements (128 fp32
# registers per thread at 4 warps), else 8; PR #2846's measured ramp.
WARPS_RAMP_ELEMENTS = 16384
WARPS_SMALL, WARPS_LARGE = 4, 8
# A wider K_BLOCK tried first for 16-bit operands at 8 warps, with the most stages, against a
# cap of WIDE_K_SMEM_FRACTION of shared memory per block.  Measured on the H100 (the seed
# study's grids in cache.db): at N = 512 bf16, M_BLOCK 64, 8 warps, 3 stages, K_BLOCK 64
# (221184 B staged, 0.95 of 232448) compiled and beat 32 by 10-18% in all four cells
# (rmsnorm 131072x256x512 0.124 vs 0.136 ms, 65536x512x512 0.087 vs 0.103, softmax
# 131072x256x512 0.156 vs 0.172, layernorm 131072x512x512 0.174 vs 0.205).  At 4 warps
# K_BLOCK 64 lost 21-28% (all seven N = 256 cells), and raising the cap for the other bands
# too lost (fp32 131072x512x512: K_BLOCK 32 2.85 ms vs 16 1.66; 131072x512x2048 bf16: 3
# stages 2.67 vs 2 stages 2.56), so only this band gets the higher cap.
WIDE_K_BLOCK = 64
WIDE_K_SMEM_FRACTION = 0.96
# Occupancy: the fewest programs per SM the grid should give.  With M = 512 or 1024 rows the
# budget's M_BLOCK (64, 32) gives 8 to 32 programs for 132 SMs; the recorded grids' best used
# M_BLOCK 16 there (layernorm 512^3 bf16: 0.0122 ms at M 16, 4 warps vs 0.0132 at M 64, 8
# warps, both K 64 and 3 stages; 1024^3 bf16: 0.0307 at M 16 vs 0.0369 at M 32, both K 32,
# 8 warps, 3 stages).  Half a program per SM is
# where M_BLOCK 16 is chosen for both and 131072-row matrices are untouched.
MIN_PROGRAMS_PER_SM = 0.5
# The smallest M_BLOCK the occupancy step goes down to: tl.dot's smallest M tile.
MIN_M_BLOCK_FOR_OCCUPANCY = 16


def staged_bytes(num_stages: int, k_block: int, m_block: int, n_pad: int, itemsize: int) -> int:
    """Shared memory of the pipelined operand tiles (see the module docstring)."""
    return num_stages * k_block * (m_block + n_pad) * itemsize


def staged_cap(device: DeviceLimits) -> int:
    return int(device.smem_per_block * STAGED_SMEM_FRACTION)


def next_pow2(value: int) -> int:
    return 1 << max(0, (int(value) - 1).bit_length())


def prev_pow2(value: int) -> int:
    return 1 << (int(value).bit_length() - 1) if value >= 1 else 0


def _applies(facts: KernelFacts) -> bool:
    return facts.epilogue is not None


def _itemsize(dtype: str) -> int:
    import torch

    return torch.empty((), dtype=getattr(torch, dtype)).element_size()


def emit(facts: KernelFacts, space: Any, device: DeviceLimits) -> list[Seed] | Declined:
    fact = facts.epilogue
    assert fact is not None
    matmul = fact.matmul
    if not matmul.n_resident:
        return Declined(NAME, f"N is tiled ({matmul.n_slot}); this rule seeds only the resident-row form")
    if matmul.n is None:
        return Declined(NAME, "N is symbolic: the accumulator and staged footprints cannot be sized")
    if matmul.m_slot not in space.names or matmul.k_slot not in space.names:
        return Declined(NAME, f"the space has no M or K tile slot ({matmul.m_slot}, {matmul.k_slot})")
    itemsize = max(_itemsize(matmul.lhs_dtype), _itemsize(matmul.rhs_dtype))
    n_pad = next_pow2(matmul.n)
    m_values = sorted(space.parameter(matmul.m_slot).values())
    k_values = sorted(space.parameter(matmul.k_slot).values())
    max_m = max(1, MAX_M_BLOCK_16BIT * 2 // itemsize)
    m_block = max(1, min(max_m, prev_pow2(ACC_REGISTER_BUDGET_BYTES // (n_pad * 4))))
    m_block = min(max(m_block, m_values[0]), m_values[-1])
    m_block = _for_occupancy(m_block, matmul.m, device, max(m_values[0], MIN_M_BLOCK_FOR_OCCUPANCY))
    accumulator = m_block * n_pad * 4
    cap = staged_cap(device)
    warps = WARPS_SMALL if m_block * n_pad <= WARPS_RAMP_ELEMENTS else WARPS_LARGE
    k_bands = [min(max(k, k_values[0]), k_values[-1]) for k in K_BLOCK_BANDS]
    choice = _fit(k_bands, m_block, n_pad, itemsize, cap)
    if warps == WARPS_LARGE and itemsize == 2 and WIDE_K_BLOCK in k_values:
        wide_cap = int(device.smem_per_block * WIDE_K_SMEM_FRACTION)
        if staged_bytes(NUM_STAGES_BANDS[0], WIDE_K_BLOCK, m_block, n_pad, itemsize) <= wide_cap:
            choice, cap = (WIDE_K_BLOCK, NUM_STAGES_BANDS[0]), wide_cap
    if choice is None:
        smallest = staged_bytes(NUM_STAGES_BANDS[-1], k_bands[-1], m_block, n_pad, itemsize)
        return Declined(NAME, f"N={matmul.n}: even K_BLOCK={k_bands[-1]} with {NUM_STAGES_BANDS[-1]} stage needs "
                              f"{smallest} B of staged operand tiles, over the {cap} B cap "
                              f"({STAGED_SMEM_FRACTION:g} of {device.smem_per_block} B shared memory per block)")
    if accumulator > REGISTER_FILE_BYTES:
        return Declined(NAME, f"the fp32 accumulator [{m_block}, {n_pad}] needs {accumulator} B, over the "
                              f"{REGISTER_FILE_BYTES} B register file even at the smallest M_BLOCK")
    k_block, stages = choice
    params = point(space, {matmul.m_slot: m_block, matmul.k_slot: k_block, "num_stages": stages, "num_warps": warps})
    if params is None:
        return Declined(NAME, f"M_BLOCK={m_block}, K_BLOCK={k_block}, {stages} stages, {warps} warps is not a "
                              "point of this space")
    footprint = staged_bytes(stages, k_block, m_block, n_pad, itemsize)
    budget = (f"within {ACC_REGISTER_BUDGET_BYTES} B" if accumulator <= ACC_REGISTER_BUDGET_BYTES else
              f"over the {ACC_REGISTER_BUDGET_BYTES} B budget at the smallest M_BLOCK, within the "
              f"{REGISTER_FILE_BYTES} B register file")
    reason = (f"fp32 accumulator [{m_block}, {n_pad}] = {accumulator} B {budget}; "
              f"staged {stages} x {k_block} x ({m_block} + {n_pad}) x {itemsize} = {footprint} B within {cap} B; "
              f"{warps} warps")
    constants = {
        "ACC_REGISTER_BUDGET_BYTES": ACC_REGISTER_BUDGET_BYTES, "MAX_M_BLOCK_16BIT": MAX_M_BLOCK_16BIT,
        "K_BLOCK_BANDS": list(K_BLOCK_BANDS), "WIDE_K_BLOCK": WIDE_K_BLOCK,
        "WIDE_K_SMEM_FRACTION": WIDE_K_SMEM_FRACTION, "NUM_STAGES_BANDS": list(NUM_STAGES_BANDS),
        "MIN_PROGRAMS_PER_SM": MIN_PROGRAMS_PER_SM, "MIN_M_BLOCK_FOR_OCCUPANCY": MIN_M_BLOCK_FOR_OCCUPANCY,
        "sm_count": device.sm_count,
        "STAGED_SMEM_FRACTION": STAGED_SMEM_FRACTION, "smem_per_block": device.smem_per_block,
        "smem_source": device.source, "staged_cap": cap, "WARPS_RAMP_ELEMENTS": WARPS_RAMP_ELEMENTS,
        "REGISTER_FILE_BYTES": REGISTER_FILE_BYTES, "n_pad": n_pad, "itemsize": itemsize,
        "staged_bytes": footprint,
    }
    return [Seed(params=params, rule=NAME, reason=reason, facts=(fact,), constants=constants)]


def _for_occupancy(m_block: int, m: int | None, device: DeviceLimits, floor: int) -> int:
    """Halve M_BLOCK while the grid has fewer than MIN_PROGRAMS_PER_SM programs per SM."""
    if m is None:
        return m_block  # symbolic M: the grid size is unknown
    wanted = MIN_PROGRAMS_PER_SM * device.sm_count
    while m_block // 2 >= floor and -(-m // m_block) < wanted:
        m_block //= 2
    return m_block


def _fit(k_bands: list[int], m_block: int, n_pad: int, itemsize: int, cap: int) -> tuple[int, int] | None:
    """K_BLOCK drops first (at the most stages), then the stages (at the smallest K_BLOCK)."""
    most_stages = NUM_STAGES_BANDS[0]
    for k_block in k_bands:
        if staged_bytes(most_stages, k_block, m_block, n_pad, itemsize) <= cap:
            return k_block, most_stages
    for stages in NUM_STAGES_BANDS[1:]:
        if staged_bytes(stages, k_bands[-1], m_block, n_pad, itemsize) <= cap:
            return k_bands[-1], stages
    return None


RULE = register_rule(Rule(
    name=NAME,
    needs=(MatmulWithReductionEpilogueFact.__name__,),
    summary="matmul + row-reduction epilogue, resident row: accumulator- and shared-memory-capped tile",
    applies=_applies,
    emit=emit,
))
