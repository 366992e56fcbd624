"""Facts about a kernel specialised to one shape: what the rules read.

Our own frozen types, so rules never depend on a compiler's internal classes and every
fact can be printed and recorded (`as_record`).  They are formed from a bound Helion
kernel by `heuristics.extract`.

* `MatmulFact`: one matrix product, its M/K/N extents, which space slots tile them and the
  kernel's dot precision.
* `ReductionFact`: one reduction axis, its extent, whether it is resident (one tile, no
  slot), loopable by the compiler (a `reduction_loops[i]` slot) or looped by the kernel
  itself (a `block_sizes[j]` slot), and the reduction operations over it.
* `MatmulWithReductionEpilogueFact`: formed only when exactly one matmul and exactly one
  reduction co-occur and the reduction runs over the matmul's output N axis.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

RESIDENT = "resident"  # the axis is one tile (specialised, never tiled): no slot
REDUCTION_LOOP = "reduction_loop"  # the compiler may loop it in chunks of `reduction_loops[i]`
USER_TILE = "user_tile"  # the kernel loops it itself, in tiles of `block_sizes[j]`


@dataclass(frozen=True)
class MatmulFact:
    """x [M, K] @ w [K, N].  Extents are None when symbolic; a slot is None when the axis is
    not tunable (specialised, so the whole axis is one tile)."""

    m: int | None
    k: int | None
    n: int | None
    lhs_dtype: str
    rhs_dtype: str
    m_block_id: int | None
    n_block_id: int | None
    k_block_id: int | None
    m_slot: str | None
    n_slot: str | None
    k_slot: str | None
    # The kernel's `dot_precision` setting ("ieee", "tf32", "tf32x3"; None when not read):
    # IEEE fp32 products run on the CUDA cores, the others on tensor cores.
    dot_precision: str | None = None

    @property
    def n_resident(self) -> bool:
        """The whole output row [*, N] is one tile (N specialised, no N block size)."""
        return self.n_slot is None


@dataclass(frozen=True)
class ReductionFact:
    """One reduced axis and the rows reduced independently along the grid."""

    block_id: int
    axis: int | None  # dimension of the reduced tensor (non-negative), None if unknown
    extent: int | None
    residency: str  # RESIDENT, REDUCTION_LOOP or USER_TILE
    loop_slot: str | None  # the chunk slot (reduction_loops[i] or block_sizes[j]); None when resident
    kinds: tuple[str, ...]  # reduction operations in program order ("max", "sum", "mean"...); () if unknown
    input_itemsize: int  # bytes per element loaded from memory into the reduction (0 if unknown)
    rows: int | None  # product of the grid axes' extents
    row_slot: str | None  # the slot holding rows per program (block_sizes[i]), if tunable
    over_matmul_output: bool | None  # the reduced values are a matmul's output (None: not known)

    @property
    def passes(self) -> int | None:
        """Reads of the row when looped: one per reduction operation, plus the write pass."""
        return len(self.kinds) + 1 if self.kinds else None


@dataclass(frozen=True)
class MatmulWithReductionEpilogueFact:
    """A matmul whose [M, N] output is reduced over N in the same kernel."""

    matmul: MatmulFact
    reduction: ReductionFact

    @property
    def n_extent(self) -> int | None:
        return self.matmul.n


@dataclass(frozen=True)
class KernelFacts:
    """Everything found for one kernel and shape (empty tuples when nothing was found)."""

    kernel: str
    shape: tuple[int, ...]
    dtype: str
    matmuls: tuple[MatmulFact, ...] = ()
    reductions: tuple[ReductionFact, ...] = ()
    epilogue: MatmulWithReductionEpilogueFact | None = None
    compiler_epilogue_fact: bool | None = None  # Helion formed its own composed fact (None: not read)
    notes: tuple[str, ...] = ()  # what could not be read, in words

    def all(self) -> list[Any]:
        """Every fact, sub-facts first."""
        facts: list[Any] = [*self.matmuls, *self.reductions]
        if self.epilogue is not None:
            facts.append(self.epilogue)
        return facts


def compose_epilogue(matmuls: tuple[MatmulFact, ...],
                     reductions: tuple[ReductionFact, ...]) -> MatmulWithReductionEpilogueFact | None:
    """The composed fact, or None.

    Formed only for exactly one matmul and exactly one reduction, when the reduction reads
    the matmul's output (known from the kernel's dataflow) and reduces its N axis (the
    reduction's extent is N).  A pure matmul (no reduction) or a pure reduction (no
    matmul) never forms it; neither does a reduction over another axis or tensor.
    """
    if len(matmuls) != 1 or len(reductions) != 1:
        return None
    matmul, reduction = matmuls[0], reductions[0]
    if reduction.over_matmul_output is not True:
        return None
    if matmul.n is None or reduction.extent != matmul.n:
        return None
    if matmul.n_block_id is not None and reduction.block_id != matmul.n_block_id:
        return None
    return MatmulWithReductionEpilogueFact(matmul=matmul, reduction=reduction)


def as_record(fact: Any) -> dict[str, Any]:
    """A fact as a JSON-able dict, with its type name (for the cache and the CLI)."""
    data = dataclasses.asdict(fact)
    data["fact"] = type(fact).__name__
    if isinstance(fact, ReductionFact):
        data["kinds"] = list(fact.kinds)
    return data
