"""Pattern search that measures a centre's whole neighbourhood before a path stops there.

Why: the walk caps each centre's neighbours at `max_neighbours`, drawn at random, so that a
generation stays small while paths improve.  A path then stops where none of the *drawn*
neighbours is better, which is not a local optimum when the one better move was left out.  On a
long-row softmax (1792x81920: 33 neighbours of the default, 24 drawn) one seed's draw at the
default left out one load's 'first' eviction policy: the move after which the next chunk up
pays (without it, that chunk is slower).  The seeds that drew it reached the best config; that
one walked a slower ridge for its whole time.

The walk and its far-end look are `pattern-ends`', unchanged.  The one difference: when a path
would stop, the neighbours its centre's cap left out are asked in the same extra generation as
its end moves (the look `EndsPatternSearch` takes is widened; its walk is not touched).  A better
one continues the path; otherwise it stops, at a centre no single-parameter move improves.  That
costs nothing while paths improve, and at most the neighbours past the cap per stalled path.

Why a strategy of its own and not a change to `pattern-ends`: sessions record the source hash
of their strategy's modules, and the held-out study judges each source apart; a change to
`pattern-ends` would relabel every run recorded under it.
"""

from __future__ import annotations

from autotune.strategies.pattern import PatternSearch, _unique
from autotune.strategies.pattern_ends import EndsPatternSearch
from autotune.types import Params
from search_spaces.space import params_key


class FullPatternSearch(EndsPatternSearch):
    name = "pattern-full"

    def end_moves(self, centre: Params) -> list[Params]:
        """`EndsPatternSearch` asks these once before a path stops at `centre`, and continues
        the path from a better one: here, the stall moves."""
        return self.stall_moves(centre)

    def stall_moves(self, centre: Params) -> list[Params]:
        """What a path looks at before it stops at `centre`: the neighbours the cap left out,
        then the far-end moves (`EndsPatternSearch.end_moves`), each once."""
        drawn = {params_key(p) for p in PatternSearch._neighbours(self, centre)}
        looked = self.space.neighbours(centre, self.radius) + EndsPatternSearch.end_moves(self, centre)
        return [point for point in _unique(looked) if params_key(point) not in drawn]
