"""The seed study: the heuristic seeds of the matmul-epilogue family against the default config,
the grid-best and torch, on seed 004's cells.

    autotune experiment run experiments/seed_study --dtype bfloat16      # on a GPU machine
    autotune experiment report experiments/seed_study --dtype bfloat16   # anywhere, from cache.db

Each cell (a kernel, an MxKxN shape and a dtype; see definition.py) is one recorded session
in which one GPU evaluator measures Helion's default config, the `matmul_epilogue_resident`
rule's seed, Helion's own compiler seeds when it offers any, a grid over the M tile x K tile
x num_warps (x num_stages), torch eager and torch.compile.  `--dtype` selects the cells of
that dtype (bfloat16 or float32; `all` for every cell), `--shapes` filters them by MxKxN,
`--budget` caps the grid per cell to a seeded sample (`--seconds` is not used: a cell
measures a fixed list of configs).  The report gives one row per cell and seed 004's
targets computed from them.
"""

from .report import report
from .runner import run

__all__ = ["report", "run"]
