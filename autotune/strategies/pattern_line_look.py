"""The noise floor and line look shared by `pattern-reach` and `pattern-lines`.

Why: on a long-row softmax (2560x90112, eleven chunks of 8192 exactly) five of the six cold
`pattern-ends` and `pattern-orders` runs ended 16-18% over the best anyone found.  They stood at
a chunk of 8192 or 4096 with 32 warps; the best ran 32 warps with a chunk of 32768.  Two things
kept them from it:
- The next chunk up tiles the row unevenly: where one walk stood, 16384 measured 18% slower
  than 8192, so a one-step walk does not climb to 32768, and the far-end look (`pattern-ends`)
  jumps past it to the whole row.
- Not every walk stopped to look: one spent its last six generations (about 14 s) on moves of
  about a tenth of a percent (a load's indexing, a hint), within the noise of timing one config
  twice, until the search time ran out.
The report's stops section shows the first gap (a chunk two or three doublings from the best's)
at other long rows too: 6144x24576, 4096x65536, 3072x49152.

Two changes to `pattern-full`'s walk and its look before a path stops:
1. A path moves only to a neighbour faster by more than `NOISE_FLOOR` (`min_improvement`, whose
   default elsewhere is a fifth of this), so a path on a plateau stops and looks instead of
   drifting on noise.
2. The look before a path stops also takes each ordered parameter moved `radius + 1` to
   `LINE_REACH` steps either way from the centre (where the space's constraints allow), between
   the neighbours (`radius` steps) and the far ends.  A better one continues the path; otherwise
   it stops as before.  That costs nothing while paths improve, and at most
   `2 * (LINE_REACH - radius)` points per ordered parameter per stalled path.

Not a strategy of its own: `pattern-reach` walks with it from one first path, `pattern-lines`
from one path in each program order (`pattern-orders`).  It is a `Strategy` subclass, so its
source is part of the source hash that sessions of both record.
"""

from __future__ import annotations

from typing import Any

from autotune.strategies.pattern import _unique
from autotune.strategies.pattern_full import FullPatternSearch
from autotune.types import Params
from search_spaces.space import SearchSpace, params_key

LINE_REACH = 3  # steps along an ordered parameter the look reaches: 8x either way for a power of two
# Half a percent: above how far a config's median time moves when one session times it twice (a
# few tenths of a percent on long rows), and a quarter of the 2% that counts as reaching the best.
NOISE_FLOOR = 0.005


class LineLookPatternSearch(FullPatternSearch):
    name = "pattern-line-look"  # not registered: the walks above are

    def __init__(self, space: SearchSpace, seed: int = 0, *, min_improvement: float = NOISE_FLOOR,
                 **options: Any) -> None:
        super().__init__(space, seed, min_improvement=min_improvement, **options)

    def stall_moves(self, centre: Params) -> list[Params]:
        """The walk's look before a path stops at `centre`, then the line moves it lacks."""
        return _unique(super().stall_moves(centre) + self.line_moves(centre))

    def line_moves(self, centre: Params) -> list[Params]:
        """`centre` with one ordered parameter moved `radius + 1` to `LINE_REACH` steps either way,
        each that keeps it inside the space (the space's own neighbours at that reach, less the
        nearer ones and the unordered parameters' moves, which do not depend on the reach)."""
        near = {params_key(p) for p in self.space.neighbours(centre, self.radius)}
        ordered = {p.name for p in self.space.parameters if p.ordered}
        return [point for point in self.space.neighbours(centre, LINE_REACH)
                if params_key(point) not in near and set(self.space.changed(centre, point)) <= ordered]
