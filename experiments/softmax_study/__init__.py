"""The softmax study: seed 000's seven shapes, reproduced and beaten.

    autotune experiment run experiments/softmax_study --dtype float16     # on a GPU machine
    autotune experiment report experiments/softmax_study                  # anywhere, from cache.db

For each shape it tunes the Helion softmax, the Helion online softmax, the Triton fused
softmax and the Triton split-row softmax with the framework's best strategy (seeded), and
measures in the same runs torch eager, torch.compile, Helion's default config and Helion's
own quick autotune.  See definition.py for the exact settings.
"""

from .report import report
from .runner import run

__all__ = ["report", "run"]
