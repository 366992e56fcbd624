"""What the seed study measures: seed 004's cells of the matmul-epilogue family, and how.

A cell is one kernel at one shape (MxKxN) and dtype.  The cells are the two tables of seed
004 (Helion's matmul + reduction-epilogue heuristic, measured on an H100): its first table
(small N, bf16) and its second (the staged shared-memory cap: larger N, larger K and
squares, bf16 and fp32, where the default spills or does not compile).  Every figure of the
report comes from sessions recorded with `options.experiment.study == STUDY`.
"""

from __future__ import annotations

from dataclasses import dataclass

STUDY = "seed_study"

FIRST_TABLE = "seed 004, first table (small N)"
SECOND_TABLE = "seed 004, second table (staged shared-memory cap)"


@dataclass(frozen=True)
class Cell:
    """One measured cell; `regime` is seed 004's name for it (small-N, larger-N, larger-K, square)."""

    kernel: str
    shape: str  # MxKxN
    dtype: str
    regime: str
    table: str

    @property
    def name(self) -> str:
        return f"{self.kernel} {self.shape} {self.dtype}"


def _cells(table: str, rows: str) -> tuple[Cell, ...]:
    """Cells from 'epilogue MxKxN dtype regime' lines (bf16 = bfloat16, fp32 = float32)."""
    dtypes = {"bf16": "bfloat16", "fp32": "float32"}
    cells = []
    for line in rows.strip().splitlines():
        epilogue, shape, dtype, regime = line.split()
        cells.append(Cell(f"matmul-{epilogue}", shape, dtypes[dtype], regime, table))
    return tuple(cells)


# Seed 004's second table, in its order (seed 004 expects a rescue, the default failing and the
# seed running, at bf16 N = 4096 and at fp32 N = 2048).
SECOND = _cells(SECOND_TABLE, """
layernorm 131072x512x512 bf16 small-N
layernorm 131072x512x512 fp32 small-N
layernorm 131072x512x2048 bf16 larger-N
layernorm 131072x512x4096 bf16 larger-N
layernorm 131072x4096x2048 bf16 larger-K
layernorm 512x512x512 bf16 square
layernorm 1024x1024x1024 bf16 square
layernorm 1024x1024x1024 fp32 square
layernorm 2048x2048x2048 fp32 square
rmsnorm 1024x1024x1024 bf16 square
rmsnorm 131072x512x4096 bf16 larger-N
rmsnorm 131072x8192x2048 bf16 larger-K
softmax 1024x1024x1024 fp32 square
softmax 131072x512x2048 fp32 larger-N
softmax 131072x2048x2048 bf16 larger-K
l2norm 2048x2048x2048 bf16 square
l2norm 131072x512x4096 bf16 larger-N
l2norm 131072x6144x1024 bf16 larger-K
logsumexp 1024x1024x1024 bf16 square
logsumexp 131072x512x4096 bf16 larger-N
logsumexp 131072x3072x2048 bf16 larger-K
""")

# Seed 004's first table: every epilogue at N <= 512, bf16 (its other epilogues were benched
# bf16 only).
FIRST = _cells(FIRST_TABLE, """
rmsnorm 131072x256x256 bf16 small-N
rmsnorm 131072x256x512 bf16 small-N
rmsnorm 65536x512x512 bf16 small-N
layernorm 131072x256x256 bf16 small-N
softmax 131072x256x512 bf16 small-N
l2norm 131072x256x256 bf16 small-N
sum 131072x256x256 bf16 small-N
logsumexp 131072x256x256 bf16 small-N
max 131072x256x256 bf16 small-N
""")

CELLS: tuple[Cell, ...] = FIRST + SECOND
ALL_DTYPES = "all"  # `--dtype all`: every cell, whatever its dtype (seed 004's targets mix both)

# The grid whose best is "grid-best": seed 004's quick sweep over the M tile x K tile x
# num_warps, here at 1, 2 and 3 stages (3 is seed 004's; the rule drops to 2 and 1 as N and K
# grow, and only 1 fits at the largest N, so grid-best exists where every 3-stage point runs
# out of shared memory).  Other parameters stay at the default; `--budget` caps the grid to
# a seeded sample.
GRID_M = (16, 32, 64, 128)
GRID_K = (16, 32, 64)
GRID_WARPS = (4, 8)
GRID_STAGES = (1, 2, 3)
GRID_SEED = 0

COMPILE_TIMEOUT_S = 60.0  # the default config at large N/K compiles slowly before it spills

# Labels of the measured configs (recorded per session as config key -> label).
DEFAULT = "default"
RULE_SEED = "seed"  # "seed 1: <rule>", ...
HELION_SEED = "helion seed"  # Helion's own compiler seeds, "helion seed 1", ...
GRID = "grid"  # "grid 1", ...

# Targets, from seed 004's second table.
TARGET_GEOMEAN = 6.9  # geometric mean of default/seed over cells where both ran
TARGET_SLOWER = 0  # cells where the seed is slower than the default
TARGET_NEAR_GRID = 0.90  # share of cells with the seed within NEAR of grid-best
NEAR = 0.05
SEED_004_RESCUES = 6
