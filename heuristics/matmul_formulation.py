"""Which formulation of matmul + row-reduction epilogue to run for a cell, with a seed and why.

Three formulations compute `epilogue(x @ w)` (x [M, K], w [K, N]):

* resident (`matmul-<epilogue>`, Helion): one program holds a [M_BLOCK, N_pad] fp32
  accumulator, so the epilogue reduces whole rows in registers and y never leaves the chip;
* tiled (`matmul-tiled-<epilogue>`, Triton, `autotune.kernels.matmul_tiled`): a GEMM tiled over
  N writes y and per-tile row statistics, and a row pass combines them (y written and read
  once more, but GEMM-sized tiles at any N); its seed is fitted on the recorded tiled sessions
  (the constants below say on which cells, and which cells are declared to check it);
* split (`matmul-split-<epilogue>`, `autotune.kernels.matmul_split`): the vendor library's GEMM
  writes y, and a tuned Triton row pass reads each row once: the bytes the tiled form moves,
  with the library's GEMM instead of a Triton one.

The rule: resident only where its accumulator fits comfortably: [COMFORT_M_BLOCK, N_pad]
fp32 within COMFORT_ACC_BYTES, which is N_pad <= 512 whatever the dtype, and only when the
resident rule (`matmul_epilogue_resident`) would size a seed at all.  Otherwise:

* fp32 operands: split, whatever the epilogue.  IEEE fp32 products run on CUDA cores in both
  GEMMs, and the library's was the faster at both fp32 cells measured both ways (layernorm
  2048x2048x2048 and softmax 131072x512x2048, seed-study cells: fitted there, after the first
  split sessions);
* 16-bit [M] epilogues (logsumexp, sum, max): tiled, whose GEMM keeps y on chip, where split
  would write all of y and read it back (tiled was the faster at five of the seven such cells
  measured both ways; split at logsumexp 1024x1024x1024 and 131072x3072x2048);
* 16-bit [M, N] epilogues, which move the same bytes either way, so the GEMM decides: split.
  First declared (before any split session) as split only from four waves of 128x128 output
  tiles or for rows that are not 16-byte multiples, tiled below that; revised after the split
  sessions, in which split was the faster at every [M, N] cell measured both ways, the smallest
  (1024x1024x1024) included.  The RULE_CHECK_2 cells of the experiment were declared before the
  revision and before anything was measured on them, to judge it.

`experiments.matmul_formulations` judges the rule on every cell measured both ways.

What backs the threshold, and what does not: the seed study's H100 grids in cache.db time
the resident kernel against torch.compile (`python -m experiments.seed_study.report`).  The
resident best beat torch.compile in every recorded cell with N <= 512 (bf16 and fp32) and
lost in every 16-bit cell with N >= 2048, by 3 to 5x; at N = 1024 it was mixed.
`python -m experiments.matmul_formulations` on a GPU measures the tiled and split formulations
per cell (and the resident one where none is recorded), and its report says whether the pick is
within 5% of the best one and how far the rule's seeds lie from the best found.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from heuristics import matmul_epilogue as resident_rule
from heuristics.device import DeviceLimits, current_device
from heuristics.facts import RESIDENT, KernelFacts, MatmulFact, MatmulWithReductionEpilogueFact, ReductionFact
from heuristics.rules import Declined

MAX_N = 16 * 32 * 64  # autotune.kernels.matmul_split.MAX_N (a test checks): the widest row its pass holds

RESIDENT_FORMULATION = "resident"
TILED_FORMULATION = "tiled"
SPLIT_FORMULATION = "split"

# The M tile that makes the resident product worth running on tensor cores (a wgmma M tile
# of 64); below it the resident kernel trades tensor-core efficiency for N.  Assumption.
COMFORT_M_BLOCK = 64
# Half the H100's register file (65536 x 4 B): an accumulator of this size at COMFORT_M_BLOCK
# leaves the other half to operands and the epilogue.  With COMFORT_M_BLOCK it allows
# N_pad <= 512.  Assumption (the resident rule's WIDE_M_ACC_BUDGET_BYTES is the same size).
COMFORT_ACC_BYTES = resident_rule.REGISTER_FILE_BYTES // 2
# Tiled seed: halve BLOCK_M (to no less than TILED_MIN_BLOCK_M) while the grid has fewer tiles
# than SMs, so short or narrow problems still fill the device.  Assumption.
TILED_MIN_BLOCK_M = 32
# Tiled seed, pass 2: the most rows per program that still give at least this many programs
# per SM (so a small M still spreads its rows over the device).  Assumption.
COMBINE_PROGRAMS_PER_SM = 2
# Tiled seed, fitted on the tiled sessions of the formulation report
# (experiments/reports/matmul_formulations.md: the seed study's cells with N >= 1024 and the seven
# larger-N cells; its RULE_CHECK cells are declared to judge it on cells it was not fitted to, and
# RULE_CHECK_2 the revision below that was made after the RULE_CHECK results had been seen):
# * two launches always: the one-launch row-block form lost wherever an earlier rule seeded it;
# * TMA only for 16-bit operands on problems of at least TMA_MIN_MACS multiply-adds: a tensor
#   descriptor is built on the host at every call, and the fastest configs of the small and of
#   the fp32 cells all loaded their tiles by pointers;
# * the 256-wide N tile (Triton's usual Hopper tile, 128x256x64) for 16-bit [M, N] epilogues with
#   K >= WIDE_N_MIN_K and N >= WIDE_N_MIN_N: most such cells were fastest with a 256-wide tile,
#   none at K = 512;
# * revised: the same tile for 16-bit [M] epilogues with N >= WIDE_N_MIN_N at any K.  Their GEMM
#   writes no y, only partials, and the fastest [M] configs at the larger-N cells had 32768-element
#   tiles (max 65536x512x1536: 128x256, 5% ahead of 128x128; logsumexp 32768x1024x8192: 256x128),
#   as had the two 16-bit [M] rule-check cells, seen before this revision.
TMA_MIN_MACS = 2 ** 34
WIDE_N_MIN_K = 768
WIDE_N_MIN_N = 512
# Split seed: the row pass's warps give each thread about this many values of a row.  Assumption.
SPLIT_VALUES_PER_THREAD = 16


@dataclass(frozen=True)
class Formulation:
    """The rule's answer for one cell."""

    formulation: str  # RESIDENT_FORMULATION, TILED_FORMULATION or SPLIT_FORMULATION
    kernel: str  # the built-in kernel to run
    config: dict[str, Any]  # a seed: a tiled space point, or the resident space's tile slots (a partial point)
    why: str  # one line


def itemsize_of(dtype: str) -> int:
    return 4 if dtype == "float32" else 2


def pick_formulation(epilogue: str, m: int, k: int, n: int, dtype: str,
                     device: DeviceLimits | None = None) -> Formulation:
    """The formulation to run for `epilogue` at MxKxN in `dtype`, a seed config for it, and why."""
    device = device or current_device()
    n_pad = resident_rule.next_pow2(n)
    accumulator = COMFORT_M_BLOCK * n_pad * 4
    seed = resident_seed(epilogue, m, k, n, dtype, device)
    if isinstance(seed, Declined):
        why = f"not resident: the resident rule declines ({seed.reason})"
    elif accumulator > COMFORT_ACC_BYTES:
        why = (f"not resident: N={n} (N_pad {n_pad}): a resident fp32 accumulator [{COMFORT_M_BLOCK}, {n_pad}] needs "
               f"{accumulator} B, over the {COMFORT_ACC_BYTES} B comfort budget (half the register file)")
    else:
        block = f"M_BLOCK {seed['block_sizes[0]']}, K_BLOCK {seed['block_sizes[1]']}"
        return Formulation(RESIDENT_FORMULATION, f"matmul-{epilogue}", seed,
                           f"resident: N={n} (N_pad {n_pad}): the accumulator [{COMFORT_M_BLOCK}, {n_pad}] = "
                           f"{accumulator} B fits the {COMFORT_ACC_BYTES} B comfort budget; resident seed {block}, "
                           f"{seed['num_warps']} warps, {seed['num_stages']} stages")
    rows_out = epilogue_writes_rows(epilogue)
    split_why = split_reason(n, dtype, writes_rows=rows_out)
    if split_why:
        config = split_seed(m, n, dtype, device)
        return Formulation(SPLIT_FORMULATION, f"matmul-split-{epilogue}", config,
                           f"{why}; split: {split_why}; row-pass seed {config['ROWS']} rows per program, "
                           f"{config['num_warps']} warps")
    config = tiled_seed(m, k, n, dtype, device, writes_rows=rows_out)
    tile = f"{config['BLOCK_M']}x{config['BLOCK_N']}x{config['BLOCK_K']}"
    form = "two launches (the row-block form lost wherever it was seeded)"
    if config.get("TMA"):
        loads = "tiles by TMA"
    elif "TMA" not in config:
        loads = "tiles by pointer loads (rows not 16-byte multiples)"
    else:
        loads = "tiles by pointer loads (fp32, or too small a problem for a descriptor built at every call)"
    if not rows_out:
        tiled_why = "a 16-bit [M] epilogue, whose tiled GEMM never writes y (split would write and read it)"
    else:
        tiled_why = f"rows of N={n} are wider than the split row pass holds ({MAX_N})"
    return Formulation(TILED_FORMULATION, f"matmul-tiled-{epilogue}", config,
                       f"{why}; tiled: {tiled_why}; tiled seed {tile}, {config['num_warps']} warps, "
                       f"{config['num_stages']} stages, {loads}, {form}")


def tiled_seed(m: int, k: int, n: int, dtype: str, device: DeviceLimits, *, writes_rows: bool = True
               ) -> dict[str, Any]:
    """A point of the tiled space: its dtype's default tile, BLOCK_N no wider than N needs (or the
    wide tile, see WIDE_N_MIN_K), BLOCK_M halved for occupancy, pass 2's rows sized to the row
    count, two launches, and TMA where it pays (TMA_MIN_MACS)."""
    import torch

    from autotune.kernels import matmul_tiled

    space = matmul_tiled.triton_space((m, k, n), getattr(torch, dtype))
    point = dict(space.default)
    point["BLOCK_N"] = max(32, min(point["BLOCK_N"], resident_rule.next_pow2(n)))
    tiles_n = -(-n // point["BLOCK_N"])
    while point["BLOCK_M"] > TILED_MIN_BLOCK_M and -(-m // point["BLOCK_M"]) * tiles_n < device.sm_count:
        point["BLOCK_M"] //= 2
    rows = [r for r in matmul_tiled.COMBINE_ROWS if -(-m // r) >= COMBINE_PROGRAMS_PER_SM * device.sm_count]
    point["COMBINE_ROWS"] = min(max(rows, default=1), point["COMBINE_ROWS"])
    while space.violations(point) and point["COMBINE_ROWS"] > 1:  # the partials' register cap
        point["COMBINE_ROWS"] //= 2
    point["ROW_BLOCK"] = 0
    sixteen_bit = itemsize_of(dtype) == 2
    if sixteen_bit and n >= WIDE_N_MIN_N and (k >= WIDE_N_MIN_K or not writes_rows):
        wide = {**point, "BLOCK_N": 256}
        if not space.violations(wide):
            point = wide
    if "TMA" in space.names:  # offered where the rows allow tensor descriptors
        point["TMA"] = int(sixteen_bit and m * k * n >= TMA_MIN_MACS)
    return space.ordered(point) if not space.violations(point) else dict(space.default)


def split_reason(n: int, dtype: str, *, writes_rows: bool = True) -> str | None:
    """Why a cell past the resident budget goes split, or None for tiled."""
    if n > MAX_N:
        return None
    if itemsize_of(dtype) == 4:
        return "fp32 products run on CUDA cores in either GEMM, and the library's is the faster"
    if not writes_rows:
        return None
    return "an [M, N] epilogue moves the same bytes in either form, and the library's GEMM is the faster"


def split_seed(m: int, n: int, dtype: str, device: DeviceLimits) -> dict[str, Any]:
    """A point of the split space: warps for about SPLIT_VALUES_PER_THREAD values of one row per
    thread, then as many rows per program as keep that share and leave every SM some programs."""
    import torch

    from autotune.kernels import matmul_split

    space = matmul_split.triton_space((m, 1, n), getattr(torch, dtype))
    n_pad = resident_rule.next_pow2(n)
    warps = next((w for w in matmul_split.WARPS if n_pad / (w * 32) <= SPLIT_VALUES_PER_THREAD),
                 matmul_split.WARPS[-1])
    rows = max((r for r in matmul_split.ROWS if r * n_pad / (warps * 32) <= SPLIT_VALUES_PER_THREAD
                and -(-m // r) >= device.sm_count), default=1)
    point = space.ordered({"ROWS": rows, "num_warps": warps, "num_stages": 1})
    return point if not space.violations(point) else dict(space.default)


def epilogue_of(kernel: str) -> str | None:
    """The epilogue a built-in matmul + epilogue kernel name runs in any of its formulations
    ('matmul-l2norm', 'matmul-tiled-l2norm', 'matmul-split-l2norm' -> 'l2norm'), else None."""
    from autotune.kernels.matmul_epilogue import EPILOGUES

    for prefix in ("matmul-tiled-", "matmul-split-", "matmul-"):
        if kernel.startswith(prefix) and kernel[len(prefix):] in EPILOGUES:
            return kernel[len(prefix):]
    return None


def epilogue_writes_rows(epilogue: str) -> bool:
    """Whether the epilogue's output is [M, N] rows (rescaled after the statistics), not [M]."""
    from autotune.kernels.matmul_epilogue import EPILOGUES

    return EPILOGUES[epilogue][2]


def resident_seed(epilogue: str, m: int, k: int, n: int, dtype: str,
                  device: DeviceLimits) -> dict[str, Any] | Declined:
    """The resident rule's seed (its M and K tiles, warps and stages) or its refusal, sized on
    a stand-in of the Helion kernel's tile slots (the resident kernel is not bound here: a
    session seeds from the bound space itself with `--seed-from heuristic`)."""
    from search_spaces.parameters import Integer, PowerOfTwo
    from search_spaces.space import SearchSpace

    m_slot, k_slot = "block_sizes[0]", "block_sizes[1]"
    matmul = MatmulFact(m=m, k=k, n=n, lhs_dtype=dtype, rhs_dtype=dtype, m_block_id=0, n_block_id=None,
                        k_block_id=1, m_slot=m_slot, n_slot=None, k_slot=k_slot, dot_precision="ieee")
    reduction = ReductionFact(block_id=0, axis=1, extent=n, residency=RESIDENT, loop_slot=None, kinds=(),
                              input_itemsize=4, rows=m, row_slot=m_slot, over_matmul_output=True)
    facts = KernelFacts(kernel=f"matmul-{epilogue}", shape=(m, k, n), dtype=dtype, matmuls=(matmul,),
                        reductions=(reduction,), epilogue=MatmulWithReductionEpilogueFact(matmul, reduction))
    top = lambda extent: max(16, resident_rule.next_pow2(extent))  # noqa: E731 - Helion's tile range
    space = SearchSpace(kernel=f"matmul-{epilogue}", family="helion", parameters=(
        PowerOfTwo(name=m_slot, low=16, high=top(m), default_value=16),
        PowerOfTwo(name=k_slot, low=16, high=top(k), default_value=16),
        PowerOfTwo(name="num_warps", low=1, high=32, default_value=4),
        Integer(name="num_stages", low=1, high=8, default_value=1),
    ), default={m_slot: 16, k_slot: 16, "num_warps": 4, "num_stages": 1})
    seeds = resident_rule.emit(facts, space, device)
    if isinstance(seeds, Declined):
        return seeds
    return dict(seeds[0].params)
