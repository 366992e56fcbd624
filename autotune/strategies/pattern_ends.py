"""Pattern search that looks at the far ends of each ordered parameter before a path stops.

Why: a one-step walk assumes the time changes smoothly along an ordered parameter.  Block
sizes break that at their ends: the largest reduction block takes a whole row in one piece,
which removes the loop and is a different program, not a bigger step of the same one.  On a
long-row softmax the walk climbed to a chunk of 8192; 16384 and 32768 were slower, so it
stopped, while the whole row (the range's top) was ~10% faster than where it stopped.

The walk is `PatternSearch`'s, unchanged.  The one addition: when a path would stop (no
neighbour better by `min_improvement`), its centre's *end moves* are asked once: each ordered
parameter set to the farthest value towards either end of its range that the space's
constraints allow, provided it lies more than `radius` steps away (nearer ones are ordinary
neighbours).  A better end move continues the path from there; otherwise it stops as before.
That costs at most two points per ordered parameter per stalled path, and nothing while
paths still improve.
"""

from __future__ import annotations

from typing import Any

from autotune.strategies.pattern import PatternSearch, _unique
from autotune.types import Params
from search_spaces.space import SearchSpace, params_key


class EndsPatternSearch(PatternSearch):
    name = "pattern-ends"

    def __init__(self, space: SearchSpace, seed: int = 0, **options: Any) -> None:
        super().__init__(space, seed, **options)
        self._probed: set[str] = set()  # centres whose end moves have been asked

    def _moved(self) -> list[Params]:
        moved = []
        for centre in self.centres:
            best = min(self._neighbours(centre), key=self._objective, default=None)
            if best is not None and self._objective(best) < self._objective(centre) * (1 - self.min_improvement):
                moved.append(best)
            elif params_key(centre) not in self._probed and self.end_moves(centre):
                self._probed.add(params_key(centre))
                moved.append(centre)  # stays one more generation: its end moves are asked next
        return _unique(moved)

    def _neighbours(self, centre: Params) -> list[Params]:
        points = super()._neighbours(centre)
        if params_key(centre) not in self._probed:
            return points
        keys = {params_key(p) for p in points}
        return points + [p for p in self.end_moves(centre) if params_key(p) not in keys]

    def end_moves(self, centre: Params) -> list[Params]:
        """For each ordered parameter, the value farthest towards each end of its range that
        keeps `centre` (with only that parameter changed) inside the space, when more than
        `radius` steps from the centre's value."""
        moves = []
        for parameter in self.space.parameters:
            if not parameter.ordered:
                continue
            values = parameter.values()
            here = parameter.index_of(centre[parameter.name])
            for towards_end in (range(0, here - self.radius), range(len(values) - 1, here + self.radius, -1)):
                for index in towards_end:
                    candidate = self.space.ordered({**centre, parameter.name: values[index]})
                    if not self.space.violations(candidate) and self.space.is_member(candidate):
                        moves.append(candidate)
                        break
        return moves
