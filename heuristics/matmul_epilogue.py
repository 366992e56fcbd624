"""Rule `matmul_epilogue_resident`: a footprint-capped tile for matmul + row-reduction epilogues.

Needs a `MatmulWithReductionEpilogueFact` whose N axis is resident (the [M_BLOCK, N] fp32
accumulator holds whole output rows, so the epilogue reduces in registers).  It sizes:

* M_BLOCK: the largest power of two whose fp32 accumulator M_BLOCK * N_pad * 4 bytes fits
  ACC_REGISTER_BUDGET_BYTES (WIDE_M_ACC_BUDGET_BYTES from M_BLOCK = WIDE_M_BLOCK up), capped
  at MAX_M_BLOCK_16BIT scaled by the operand itemsize (64 for fp16/bf16, 32 for fp32) and
  never below MIN_M_BLOCK; then halved (not below
  MIN_M_BLOCK) while the grid would have fewer than MIN_PROGRAMS_PER_SM programs per SM, so
  short matrices still fill the device.  IEEE fp32 products (CUDA cores, no tensor cores)
  take MIN_M_BLOCK;
* K_BLOCK and num_stages from bands, so that the staged operand tiles fit a cap derived
  from the device's shared memory per block.  The footprint is

      staged_bytes = max(1, num_stages - 1) * K_BLOCK * (M_BLOCK + N_pad) * itemsize

  i.e. the x tile [M_BLOCK, K_BLOCK] and the w tile [K_BLOCK, N_pad] (N_pad: N rounded up
  to a power of two, the tile Triton allocates), buffered num_stages - 1 times: Triton's
  pipeliner keeps that many loads in flight (one buffer without pipelining).  When over
  the cap, K_BLOCK drops first (32 -> 16), then num_stages (3 -> 2 -> 1).  IEEE fp32
  products take one stage (nothing to pipeline into tensor cores) and K_BLOCK under the
  same cap;
* num_warps: 8 when the accumulator has more than WARPS_RAMP_ELEMENTS elements or the grid
  has fewer than FEW_PROGRAMS_PER_SM programs per SM, else 4; with 8 warps and 16-bit
  operands K_BLOCK = WIDE_K_BLOCK at the most stages is tried first.

* where the fp32 accumulator at that M_BLOCK would take more than TMA_ACC_SHARE of the
  register file with 16-bit operands on tensor cores, and the space offers tensor-descriptor
  indexing: M_BLOCK = MIN_M_BLOCK with every indexing slot a tensor descriptor (TMA), the
  descriptors built on the host (HOST_DESCRIPTORS) where the space offers it;
* on tensor cores, the persistent program order PROGRAM_ORDER where the space offers it;
  the same tile in each other order of PROGRAM_ORDERS follows as a further seed, and where
  descriptors dropped the M tile to MIN_M_BLOCK, the register budget's M tile does too.  The
  first seed is the rule's choice; the others are where the recorded cells disagreed with it.

Past the feasible range (the staged footprint over the cap even at the smallest K_BLOCK
and one buffer, or the accumulator alone over the register file) it declines and says why:
it never proposes a config that cannot fit.

The constants were chosen on the grids the seed study recorded on the H100 (30 cells of
seed 004's matmul + epilogue family, `experiments/seed_study/`); each comment below names
the measurements behind it.  `python -m experiments.seed_study.whatif` scores a change of any
of them on those grids without a GPU.
"""

from __future__ import annotations

from typing import Any

from heuristics.device import DeviceLimits
from heuristics.facts import KernelFacts, MatmulFact, MatmulWithReductionEpilogueFact
from heuristics.rules import Declined, Rule, Seed, allowed, point, register_rule

NAME = "matmul_epilogue_resident"

# Bytes of registers the fp32 [M_BLOCK, N] accumulator may take: the H100's whole register
# file per SM (65536 32-bit registers).  Helion PR #2846 used half of it (128 KiB); the
# recorded grids' best at N = 2048 bf16 holds an accumulator of the whole file, M_BLOCK 32
# (131072x512x2048: 2.397 ms against 2.557 at M_BLOCK 16; 131072x4096x2048: 18.28 against
# 19.35).  At N <= 1024 the dtype cap or the occupancy step decides, as before.
ACC_REGISTER_BUDGET_BYTES = 262144
# ... but at M_BLOCK >= WIDE_M_BLOCK only half of it.  The one recorded cell where the budget
# gave M_BLOCK 64 a whole-file accumulator, l2norm 131072x6144x1024 bf16 (N = 1024, recorded
# after the budget above was set: out of sample), ran 44.13 ms at M 64 (K 32, 8 warps, 3
# stages) against 5.83 ms at M 32 with the same K, warps and stages (the grid's best), while
# whole-file accumulators at M 32 were the grid's best in all five cells of 131072 rows at
# N = 2048 bf16.
# Fitted on that one cell: the next N = 1024 cells test it.
WIDE_M_BLOCK = 64
WIDE_M_ACC_BUDGET_BYTES = 131072
# The whole register file of one SM (H100: 65536 x 4 bytes).  An accumulator larger than
# this cannot stay in registers at the smallest M_BLOCK: the rule declines.
REGISTER_FILE_BYTES = 262144
# Largest M_BLOCK for 16-bit operands, halved for fp32 (dtype-scaled as in PR #2846, whose
# measured seeds used M_BLOCK = 64 for bf16 and 32 for fp32 at small N).
MAX_M_BLOCK_16BIT = 64
# The smallest M_BLOCK the rule proposes: tl.dot's smallest M tile.  Below it the product
# wastes the tensor cores (131072x512x4096 bf16: M_BLOCK 8, 1 stage 15.47 ms; M_BLOCK 16,
# 2 stages 6.62 ms).  It is also the M_BLOCK of IEEE fp32 products, whose best recorded
# M_BLOCK was 16 in all four fp32 cells (131072x512x512: 1.496 ms against 1.760 at 32;
# 1024^3 layernorm: 0.123 against 0.268 at 32, both K_BLOCK 32, 8 warps, 1 stage).
MIN_M_BLOCK = 16
# K_BLOCK bands, tried in order: 32, then 16 when the staged tiles do not fit.  PR #2846
# drops 32 -> 16 first: it halves the staged bytes and avoids a K_BLOCK=32 ptxas cliff it
# measured at large N.
K_BLOCK_BANDS = (32, 16)
# num_stages bands, tried in order after K_BLOCK has dropped (PR #2846 used 3 stages and
# fell back to 1).
NUM_STAGES_BANDS = (3, 2, 1)
# Stages of IEEE fp32 products: nothing to pipeline into tensor cores.  Recorded: one stage
# is the best or within 2% of it in all four fp32 cells (131072x512x512, M 16, K 16, 4 warps:
# 1.496 ms against 1.696 at 2 stages; 2048^3: 0.505 against 0.498 at 2 stages).
CUDA_CORE_STAGES = 1
# Fraction of the device's shared memory per block that the staged operand tiles may use;
# the rest is left to the epilogue's cross-warp reduction scratch, barriers, and the gap
# between this footprint model and Triton's allocator.  On the H100 (232448 bytes) it
# gives 197580 bytes.  Against the device's 232448 bytes, num_stages - 1 buffers classify
# 1656 of the 1733 grid configs recorded as 'ok' or 'out_of_resources' correctly
# (num_stages buffers: 1632), and admit the tiles that were fastest where they differ:
# 131072x512x4096 bf16, M 16, K 16, 2 stages (6.62 ms; 2 x 131584 B under the num_stages
# model, over the device's 232448 B) and 131072x512x2048 bf16, M 32, K 16, 3 stages
# (2.397 ms).  Over IEEE fp32 tiles the cap is not a limit (1-stage tiles over it compiled)
# but a size guide that picked the best recorded K_BLOCK in all four fp32 cells.
STAGED_SMEM_FRACTION = 0.85
# num_warps: 4 while the accumulator has at most this many elements (128 fp32 registers
# per thread at 4 warps), else 8; PR #2846's measured ramp.
WARPS_RAMP_ELEMENTS = 16384
WARPS_SMALL, WARPS_LARGE = 4, 8
# A grid with fewer programs than this per SM leaves SMs idle: each program gets 8 warps.
# Recorded at 1024^3 bf16 (64 programs of M_BLOCK 16 on 132 SMs), K 32, 3 stages, 8 against
# 4 warps: layernorm 0.0307 vs 0.0500 ms, rmsnorm 0.0293 vs 0.0490, logsumexp 0.0281 vs
# 0.0494.  (It costs at 512^3 bf16, a 12 us kernel: 0.0140 against 0.0122 ms at 4 warps.)
FEW_PROGRAMS_PER_SM = 1.0
# A wider K_BLOCK tried first for 16-bit operands at 8 warps, with the most stages.  Measured
# on the H100 (the seed study's grids in cache.db): at N = 512 bf16, M_BLOCK 64, 8 warps, 3
# stages, K_BLOCK 64 compiled and beat 32 by 10-18% in all four cells (rmsnorm
# 131072x256x512 0.124 vs 0.136 ms, 65536x512x512 0.087 vs 0.103, softmax 131072x256x512
# 0.156 vs 0.172, layernorm 131072x512x512 0.174 vs 0.205).  At 4 warps K_BLOCK 64 lost 21-28% (all seven N = 256
# cells), so only 8 warps get it.
WIDE_K_BLOCK = 64
# Occupancy: the fewest programs per SM the grid should give.  With M = 512 or 1024 rows the
# budget's M_BLOCK (64) gives 8 to 16 programs for 132 SMs; the recorded grids' best used
# M_BLOCK 16 there (layernorm 512^3 bf16: 0.0122 ms at M 16, 4 warps vs 0.0132 at M 64, 8
# warps, both K 64 and 3 stages; 1024^3 bf16: 0.0307 at M 16 vs 0.0369 at M 32, both K 32,
# 8 warps, 3 stages).  Half a program per SM is where M_BLOCK 16 is chosen for both and
# 131072-row matrices are untouched.
MIN_PROGRAMS_PER_SM = 0.5
# The register file's share past which the accumulator's M tile drops to MIN_M_BLOCK and the
# operands are loaded through tensor descriptors.  The seed study's grids (pointer indexing,
# flat order: the default of every slot it did not sweep) favour M 32 at N = 2048 bf16, a
# whole-file accumulator; the held-out study's first four matmul cells (experiments/heldout,
# every slot searched) do not once tensor descriptors are offered: at l2norm 16384x1024x2048
# bf16 the best M 32 config ran 0.548 ms and M 16 with x through a descriptor 0.387 (with a
# pointer 0.602); at rmsnorm 32768x1024x1536 1.069 against 0.761 (pointer 1.129).  A TMA load
# is issued by one thread into shared memory and needs no per-thread address registers,
# which the pointer path must find beside a whole-file accumulator.  At N <= 1024 (layernorm
# 65536x2048x1024: M 32 with pointers 0.923 ms, with an x descriptor 1.020) the accumulator
# is at most half the file and nothing changes.  Fitted on those cells; the held-out study's
# cells declared after this revision (MATMUL_REVISED there) judge it.
TMA_ACC_SHARE = 0.5
TMA = "tensor_descriptor"
# Descriptors built on the host and passed as kernel arguments, not built by every program in
# global memory before its first load.  Second revision, after the runs at all eight held-out
# cells of the first (experiments/heldout): at the five whose rule seed loads through
# descriptors and whose seed with host descriptors was also measured, the best such point
# against the rule seed's: l2norm 16384x1024x2048 1.023x the best found against 1.099,
# rmsnorm 16384x2048x2048 1.002 against 1.104, l2norm 65536x512x1280 1.008 against 1.089,
# rmsnorm 32768x1024x1536 1.000 against 1.046, logsumexp 32768x768x2048 1.004 against 1.015;
# over every pair of recorded configs that differ in this slot alone and load x through a
# descriptor, host descriptors were faster in 100 of 137.  Fitted on those cells; the cells
# declared after it (MATMUL_HOST_DESCRIPTORS there) judge it.
HOST_DESCRIPTORS = "host_tensor_descriptors"
# The program order for tensor-core products: one program per SM walking its tiles, so the
# next tile's loads overlap the epilogue's reduction.  Recorded at the same cells, the same
# tile otherwise: layernorm 0.923 ms against 0.985 flat; l2norm (M 16, x descriptor) 0.3885
# against 0.423 flat; rmsnorm (M 32, pointers) 1.069 against 1.086.
PROGRAM_ORDER = "persistent_interleaved"
# Third revision, after the runs at all twelve held-out cells of the first two
# (experiments/heldout): the same tile is also proposed in the two other program orders, as
# further seeds after the first.  No fact the rule reads told the three apart there.  Each
# figure is the median recorded time of the rule's tile in that order over the fastest config
# recorded at the cell (pi / pb / flat):
#   persistent_interleaved fastest: rmsnorm 32768x1024x1536 1.014 / 1.038 / 1.132, layernorm
#   65536x2048x1024 1.021 / 1.051 / 1.086, l2norm 65536x512x1280 1.022 / 1.089 / 1.058, l2norm
#   32768x2048x1024 1.031 / 1.063 / 1.062;
#   persistent_blocked: l2norm 16384x1024x2048 1.025 / 1.010 / 1.120, rmsnorm 16384x2048x2048
#   1.024 / 1.013 / 1.086, layernorm 32768x1536x768 1.080 / 1.029 / 1.053, layernorm
#   24576x1024x1792 1.065 / 1.047 / 1.113;
#   flat: logsumexp 32768x768x2048 1.057 / 1.056 / 1.004, softmax 32768x1024x2048
#   1.059 / 1.059 / 1.007.
# The first seed keeps PROGRAM_ORDER (fastest at four of the ten cells, as persistent_blocked
# is, and within 1.08 of the cell's fastest config at all ten).  Fitted on those cells; the
# cells declared after it (MATMUL_THIRD there) judge it.
PROGRAM_ORDERS = (PROGRAM_ORDER, "persistent_blocked", "flat")
# ... and where descriptors drop the M tile to MIN_M_BLOCK, the M tile of the register budget is
# proposed too (with descriptors, its own warps and K band, in PROGRAM_ORDER): every program
# re-reads the whole [K, N] operand from L2, so halving the M tile doubles that traffic, and the
# cost of the larger accumulator is not one the facts size.  Recorded at the same cells (M 32 /
# M 16, the rule's tile otherwise, as above): logsumexp 49152x1536x1280 1.013 / 1.726, while M 16
# won at the five other cells where both were measured (rmsnorm 16384x2048x2048 1.489 / 1.024,
# logsumexp 32768x768x2048 1.479 / 1.057, l2norm 65536x512x1280 1.571 / 1.022, softmax
# 32768x1024x2048 1.523 / 1.059, layernorm 24576x1024x1792 1.859 / 1.065).  Fitted on the same
# cells, judged on the same later ones.


def staged_buffers(num_stages: int) -> int:
    """Operand buffers in shared memory: num_stages - 1 loads in flight, one without pipelining."""
    return max(1, num_stages - 1)


def staged_bytes(num_stages: int, k_block: int, m_block: int, n_pad: int, itemsize: int) -> int:
    """Shared memory of the pipelined operand tiles (see the module docstring)."""
    return staged_buffers(num_stages) * k_block * (m_block + n_pad) * itemsize


def staged_cap(device: DeviceLimits) -> int:
    return int(device.smem_per_block * STAGED_SMEM_FRACTION)


def next_pow2(value: int) -> int:
    return 1 << max(0, (int(value) - 1).bit_length())


def prev_pow2(value: int) -> int:
    return 1 << (int(value).bit_length() - 1) if value >= 1 else 0


def on_cuda_cores(matmul: MatmulFact, itemsize: int) -> bool:
    """fp32 operands multiplied in IEEE precision: no tensor cores, no pipeline to feed them."""
    return itemsize == 4 and matmul.dot_precision == "ieee"


def _applies(facts: KernelFacts) -> bool:
    return facts.epilogue is not None


def unsizable(matmul: MatmulFact, names: Any) -> str | None:
    """Why the footprints of this matmul's tiles cannot be sized in a space with these parameter
    names, or None: they need the resident-row form (N one tile, its extent known) and M and K slots."""
    if not matmul.n_resident:
        return f"N is tiled ({matmul.n_slot}); only the resident-row form is sized"
    if matmul.n is None:
        return "N is symbolic: the accumulator and staged footprints cannot be sized"
    if matmul.m_slot not in names or matmul.k_slot not in names:
        return f"the space has no M or K tile slot ({matmul.m_slot}, {matmul.k_slot})"
    return None


def operand_itemsize(matmul: MatmulFact) -> int:
    """Bytes per element of the wider operand (the tiles staged in shared memory)."""
    return max(_itemsize(matmul.lhs_dtype), _itemsize(matmul.rhs_dtype))


def _itemsize(dtype: str) -> int:
    import torch

    return torch.empty((), dtype=getattr(torch, dtype)).element_size()


def emit(facts: KernelFacts, space: Any, device: DeviceLimits) -> list[Seed] | Declined:
    fact = facts.epilogue
    assert fact is not None
    matmul = fact.matmul
    why = unsizable(matmul, space.names)
    if why is not None:
        return Declined(NAME, why)
    itemsize = operand_itemsize(matmul)
    cuda_cores = on_cuda_cores(matmul, itemsize)
    n_pad = next_pow2(matmul.n)
    m_values = sorted(space.parameter(matmul.m_slot).values())
    budget_m = _m_block(matmul, n_pad, itemsize, cuda_cores, m_values, device)
    descriptors = _descriptor_slots(space, budget_m, n_pad, itemsize, cuda_cores)
    m_block = min(max(MIN_M_BLOCK, m_values[0]), m_values[-1]) if descriptors else budget_m
    orders = ([o for o in PROGRAM_ORDERS if allowed(space, "pid_type", o)]
              if not cuda_cores and allowed(space, "pid_type", PROGRAM_ORDER) else [])
    primary = _sized(fact, space, device, m_block, descriptors, orders[0] if orders else None)
    if isinstance(primary, Declined):
        return primary
    seeds = [primary]
    for order in orders[1:]:  # the other program orders, the same tile (see PROGRAM_ORDERS)
        variant = _sized(fact, space, device, m_block, descriptors, order,
                         f"; one of the rule's program-order variants ({order} for {orders[0]})")
        if isinstance(variant, Seed):
            seeds.append(variant)
    if descriptors and budget_m > m_block:  # the register budget's M tile beside M 16 (see PROGRAM_ORDERS)
        variant = _sized(fact, space, device, budget_m, descriptors, orders[0] if orders else None,
                         f"; the rule's M-tile variant: M_BLOCK {budget_m}, the register budget's, "
                         f"beside {m_block} (fewer re-reads of the [K, N] operand, a larger accumulator)")
        if isinstance(variant, Seed):
            seeds.append(variant)
    return seeds


def _sized(fact: MatmulWithReductionEpilogueFact, space: Any, device: DeviceLimits, m_block: int,
           descriptors: list[str], order: str | None, variant: str = "") -> Seed | Declined:
    """The seed at this M tile, indexing and program order: warps, K band and stages sized for it."""
    matmul = fact.matmul
    itemsize = operand_itemsize(matmul)
    cuda_cores = on_cuda_cores(matmul, itemsize)
    n_pad = next_pow2(matmul.n)
    k_values = sorted(space.parameter(matmul.k_slot).values())
    accumulator = m_block * n_pad * 4
    warps = _warps(m_block, n_pad, matmul.m, device)
    cap = staged_cap(device)
    k_bands = [min(max(k, k_values[0]), k_values[-1]) for k in K_BLOCK_BANDS]
    wide = warps == WARPS_LARGE and itemsize == 2 and WIDE_K_BLOCK in k_values
    choice = _fit(_bands(([WIDE_K_BLOCK] if wide else []) + k_bands, cuda_cores), m_block, n_pad, itemsize, cap)
    if choice is None:
        smallest = staged_bytes(1, k_bands[-1], m_block, n_pad, itemsize)
        return Declined(NAME, f"N={matmul.n}: even K_BLOCK={k_bands[-1]} with one buffer needs "
                              f"{smallest} B of staged operand tiles, over the {cap} B cap "
                              f"({STAGED_SMEM_FRACTION:g} of {device.smem_per_block} B shared memory per block)")
    if accumulator > REGISTER_FILE_BYTES:
        return Declined(NAME, f"the fp32 accumulator [{m_block}, {n_pad}] needs {accumulator} B, over the "
                              f"{REGISTER_FILE_BYTES} B register file even at the smallest M_BLOCK")
    k_block, stages = choice
    tile = {matmul.m_slot: m_block, matmul.k_slot: k_block, "num_stages": stages, "num_warps": warps}
    ordered = {"pid_type": order} if order else {}
    host = {HOST_DESCRIPTORS: True} if descriptors and allowed(space, HOST_DESCRIPTORS, True) else {}
    params = point(space, {**tile, **ordered, **{slot: TMA for slot in descriptors}, **host})
    if params is None:
        return Declined(NAME, f"M_BLOCK={m_block}, K_BLOCK={k_block}, {stages} stages, {warps} warps"
                              f"{', ' + order if order else ''}{', tensor descriptors' if descriptors else ''} "
                              "is not a point of this space")
    footprint = staged_bytes(stages, k_block, m_block, n_pad, itemsize)
    units = "CUDA cores (IEEE fp32 products)" if cuda_cores else "tensor cores"
    budget = (f"within {ACC_REGISTER_BUDGET_BYTES} B" if accumulator <= ACC_REGISTER_BUDGET_BYTES else
              f"over the {ACC_REGISTER_BUDGET_BYTES} B budget at the smallest M_BLOCK, within the "
              f"{REGISTER_FILE_BYTES} B register file")
    budget_m = _budget_m_block(n_pad, itemsize)
    if not cuda_cores and m_block == _wide_m_capped(budget_m, n_pad) < budget_m:  # the cap, not occupancy, chose
        budget += (f" (M_BLOCK {budget_m} would need {budget_m * n_pad * 4} B, over the "
                   f"{WIDE_M_ACC_BUDGET_BYTES} B allowed from M_BLOCK {WIDE_M_BLOCK})")
    reason = (f"{units}; fp32 accumulator [{m_block}, {n_pad}] = {accumulator} B {budget}; "
              f"staged {staged_buffers(stages)} buffer(s) x {k_block} x ({m_block} + {n_pad}) x {itemsize} = "
              f"{footprint} B within {cap} B ({stages} stages); {warps} warps")
    if descriptors:
        reason += (f"; M_BLOCK {m_block} with {', '.join(descriptors)} = {TMA}: at the register-file-capped M_BLOCK "
                   f"the accumulator would take over {TMA_ACC_SHARE:g} of the {REGISTER_FILE_BYTES} B file"
                   f"{', built on the host' if host else ''}")
    if order:
        reason += f"; pid_type {order}"
    return Seed(params=params, rule=NAME, reason=reason + variant, facts=(fact,),
                constants=_constants(device, cap, n_pad, itemsize, footprint, cuda_cores))


def _m_block(matmul: MatmulFact, n_pad: int, itemsize: int, cuda_cores: bool, m_values: list[int],
             device: DeviceLimits) -> int:
    floor = max(m_values[0], MIN_M_BLOCK)
    if cuda_cores:
        return min(floor, m_values[-1])
    m_block = _wide_m_capped(_budget_m_block(n_pad, itemsize), n_pad)
    m_block = min(max(m_block, floor), m_values[-1])
    return _for_occupancy(m_block, matmul.m, device, floor)


def _descriptor_slots(space: Any, m_block: int, n_pad: int, itemsize: int, cuda_cores: bool) -> list[str]:
    """The indexing slots to load through tensor descriptors: all of them, when 16-bit operands on
    tensor cores would hold an accumulator over TMA_ACC_SHARE of the register file at `m_block`
    and the space offers descriptors (the GPU space does; a CPU one offers pointers only)."""
    if cuda_cores or itemsize != 2 or m_block * n_pad * 4 <= TMA_ACC_SHARE * REGISTER_FILE_BYTES:
        return []
    slots = [name for name in space.names if name.startswith("indexing[")]
    return slots if slots and all(allowed(space, name, TMA) for name in slots) else []


def _budget_m_block(n_pad: int, itemsize: int) -> int:
    """The largest M_BLOCK (a power of two, within the dtype's cap) whose accumulator fits
    ACC_REGISTER_BUDGET_BYTES."""
    max_m = max(1, MAX_M_BLOCK_16BIT * 2 // itemsize)
    return max(1, min(max_m, prev_pow2(ACC_REGISTER_BUDGET_BYTES // (n_pad * 4))))


def _wide_m_capped(m_block: int, n_pad: int) -> int:
    """Halve M_BLOCK while it is at least WIDE_M_BLOCK with an accumulator over WIDE_M_ACC_BUDGET_BYTES."""
    while m_block >= WIDE_M_BLOCK and m_block * n_pad * 4 > WIDE_M_ACC_BUDGET_BYTES:
        m_block //= 2
    return m_block


def _for_occupancy(m_block: int, m: int | None, device: DeviceLimits, floor: int) -> int:
    """Halve M_BLOCK while the grid has fewer than MIN_PROGRAMS_PER_SM programs per SM."""
    if m is None:
        return m_block  # symbolic M: the grid size is unknown
    wanted = MIN_PROGRAMS_PER_SM * device.sm_count
    while m_block // 2 >= floor and -(-m // m_block) < wanted:
        m_block //= 2
    return m_block


def _warps(m_block: int, n_pad: int, m: int | None, device: DeviceLimits) -> int:
    """8 warps for a large accumulator or a grid too small to give every SM a program."""
    few_programs = m is not None and -(-m // m_block) < FEW_PROGRAMS_PER_SM * device.sm_count
    return WARPS_LARGE if m_block * n_pad > WARPS_RAMP_ELEMENTS or few_programs else WARPS_SMALL


def _bands(k_bands: list[int], cuda_cores: bool) -> list[tuple[int, int]]:
    """(K_BLOCK, stages) in the order tried: K_BLOCK drops first (at the most stages), then
    the stages (at the smallest K_BLOCK); CUDA-core products try each K_BLOCK at one stage."""
    if cuda_cores:
        return [(k_block, CUDA_CORE_STAGES) for k_block in k_bands]
    most = NUM_STAGES_BANDS[0]
    return [(k_block, most) for k_block in k_bands] + [(k_bands[-1], s) for s in NUM_STAGES_BANDS[1:]]


def _fit(bands: list[tuple[int, int]], m_block: int, n_pad: int, itemsize: int, cap: int) -> tuple[int, int] | None:
    for k_block, stages in bands:
        if staged_bytes(stages, k_block, m_block, n_pad, itemsize) <= cap:
            return k_block, stages
    return None


def _constants(device: DeviceLimits, cap: int, n_pad: int, itemsize: int, footprint: int,
               cuda_cores: bool) -> dict[str, Any]:
    """What a seed records about how it was sized (the rule's constants and the derived values)."""
    return {
        "ACC_REGISTER_BUDGET_BYTES": ACC_REGISTER_BUDGET_BYTES, "WIDE_M_BLOCK": WIDE_M_BLOCK,
        "WIDE_M_ACC_BUDGET_BYTES": WIDE_M_ACC_BUDGET_BYTES, "MAX_M_BLOCK_16BIT": MAX_M_BLOCK_16BIT,
        "MIN_M_BLOCK": MIN_M_BLOCK, "K_BLOCK_BANDS": list(K_BLOCK_BANDS), "WIDE_K_BLOCK": WIDE_K_BLOCK,
        "NUM_STAGES_BANDS": list(NUM_STAGES_BANDS),
        "CUDA_CORE_STAGES": CUDA_CORE_STAGES, "MIN_PROGRAMS_PER_SM": MIN_PROGRAMS_PER_SM,
        "FEW_PROGRAMS_PER_SM": FEW_PROGRAMS_PER_SM, "sm_count": device.sm_count,
        "STAGED_SMEM_FRACTION": STAGED_SMEM_FRACTION, "smem_per_block": device.smem_per_block,
        "smem_source": device.source, "staged_cap": cap, "WARPS_RAMP_ELEMENTS": WARPS_RAMP_ELEMENTS,
        "REGISTER_FILE_BYTES": REGISTER_FILE_BYTES, "n_pad": n_pad, "itemsize": itemsize,
        "staged_bytes": footprint, "cuda_cores": cuda_cores, "TMA_ACC_SHARE": TMA_ACC_SHARE,
        "PROGRAM_ORDER": PROGRAM_ORDER, "PROGRAM_ORDERS": list(PROGRAM_ORDERS),
    }


RULE = register_rule(Rule(
    name=NAME,
    needs=(MatmulWithReductionEpilogueFact.__name__,),
    summary="matmul + row-reduction epilogue, resident row: accumulator- and shared-memory-capped tile",
    applies=_applies,
    emit=emit,
))
