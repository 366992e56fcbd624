"""Pattern search that follows each move its best move does not clearly beat.

Why: a path moves to its best neighbour, and one timing of each cannot rank two moves whose times
differ by less than the noise of timing one config twice.  Where the landscape is smooth the
choice between them does not matter; where two parameters interact it decides the run.  On a
long-row softmax (1792x81920) the fast configs load a larger chunk (32768) than the default's,
which pays only with a 'first' eviction hint on one load: with the hint the larger chunk was 6%
faster than where the path stood, without it 7-18% slower.  From the default, that hint and
another load's 'last' hint were both better, within a percent of each other.  Cold
`pattern-reach` seed 1 moved to the first and took the larger chunk in its next generation; seed
3 moved to the other (faster by 0.6%), and its walk never came within 6% of the best.

So this is `pattern-reach`'s walk, which keeps the moves tied with each path's best move as
paths of their own:
- the tied moves of a centre are its neighbours faster than it by more than the noise floor
  (`min_improvement`) and within `TIE_BAND` of its best neighbour;
- each generation keeps, over every path, the next centres within `TIE_BAND` of the fastest
  (at most `paths`, fastest first): a tied path that falls further behind is dropped, so the
  walk stays one path wherever one move clearly leads;
- a path that stops looks before it stops as `pattern-reach` does (its own next centre, kept
  like any other).
That costs a generation a second path's neighbours only while two moves stay level.

A strategy of its own for the reason `pattern-full` is: sessions record the source hash of their
strategy's modules, and the held-out study judges each source apart.
"""

from __future__ import annotations

from typing import Any

from autotune.strategies.pattern import _unique
from autotune.strategies.pattern_reach import ReachPatternSearch
from autotune.types import Params
from search_spaces.space import SearchSpace

# A percent: the most that timing noise moves a long-row config's median between two timings,
# and half the 2% that counts as reaching the best; moves closer than this are not ranked.
TIE_BAND = 0.01
PATHS = 2  # paths kept at once: a tie rarely holds three ways past the noise floor


class TiesPatternSearch(ReachPatternSearch):
    name = "pattern-ties"

    def __init__(self, space: SearchSpace, seed: int = 0, *, paths: int = PATHS, **options: Any) -> None:
        super().__init__(space, seed, **options)
        if paths < 1:
            raise ValueError("pattern-ties needs paths >= 1")
        self.paths = paths

    def _moved(self) -> list[Params]:
        """Each path's next centre and each centre's tied moves, those within `TIE_BAND` of the
        fastest of them, fastest first, at most `paths`."""
        ahead = _unique(super()._moved() + [point for centre in self.centres for point in self.tied_moves(centre)])
        if not ahead:
            return []
        lead = min(self._objective(point) for point in ahead)
        level = [point for point in ahead if self._objective(point) <= lead * (1 + TIE_BAND)]
        return sorted(level, key=self._objective)[: self.paths]

    def tied_moves(self, centre: Params) -> list[Params]:
        """The centre's neighbours past the noise floor within `TIE_BAND` of its best one, that
        one aside (which the walk takes anyway)."""
        floor = self._objective(centre) * (1 - self.min_improvement)
        better = sorted((p for p in self._neighbours(centre) if self._objective(p) < floor), key=self._objective)
        if not better:
            return []
        band = self._objective(better[0]) * (1 + TIE_BAND)
        return [point for point in better[1:] if self._objective(point) <= band]
