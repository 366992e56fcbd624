"""Pattern search with the noise floor and line look, from one path in each program order.

Why: written for the long-row softmaxes where the one-step walks stood a chunk or two below the
best's, behind a slower, unevenly tiling chunk (`pattern_line_look`, which says what it found).
It started from `pattern-orders`' first paths, one in each program order, which had paid where
the best ran persistent behind moves that are slower alone (1792x81920).  `pattern-reach` is the
same look from one first path.

A strategy of its own for the reason `pattern-full` is: sessions record the source hash of their
strategy's modules, and the held-out study judges each source apart.
"""

from __future__ import annotations

from autotune.strategies.pattern_line_look import LineLookPatternSearch
from autotune.strategies.pattern_orders import OrdersPatternSearch


class LinesPatternSearch(LineLookPatternSearch, OrdersPatternSearch):
    name = "pattern-lines"
