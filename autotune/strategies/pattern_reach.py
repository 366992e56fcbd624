"""Pattern search that stops at the timing noise and looks a few steps along each ordered
parameter, from one first path.

Why: `pattern-lines` looks far enough along a chunk to cross a slower value, but on the long-row
softmaxes it was written for (2560x90112, then 3584x73728) its runs rarely got to look.  The
held-out report's stops section reads how far into its search each run's last gain came.  Of the
nine `pattern-lines` runs that ended over 2% from the best (at those two shapes and 1792x81920),
six were still climbing when their search limit cut them (last gain at 0.78-0.99 of their
search), as were three `pattern-orders` runs (2560x90112, 3072x81920): nine of the twelve cold
runs cut while climbing were of those two walks, which are 33 of the 229 cold pattern runs at the
softmax shapes.  Both start one path in each program order, and until those paths stop each
generation carries every path's neighbours: in their first six generations they measured twice
as many points a generation as `pattern-full` (a mean of 29 against 14).  Meanwhile the one-path
walks that stopped short at 2560x90112 (`pattern-ends` seeds 1 and 2) stood on their answer for
the second half of their search, at a chunk two doublings below the best's: in the lines' reach.

So this is the noise floor and the look two and three steps along each ordered parameter
(`pattern_line_look`) on `pattern-full`'s walk: the first start is the best given point alone,
as in every walk before `pattern-orders`.  It gives up the program-order starts, which paid
where the best ran persistent behind moves that are slower alone (1792x81920).

A strategy of its own for the reason `pattern-full` is: sessions record the source hash of their
strategy's modules, and the held-out study judges each source apart.
"""

from __future__ import annotations

from autotune.strategies.pattern_line_look import LineLookPatternSearch


class ReachPatternSearch(LineLookPatternSearch):
    name = "pattern-reach"
