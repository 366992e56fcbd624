"""Pattern search whose kicks move the parameters that matter where the walk stopped.

Why: a walk can stop on a plateau that only a change of two parameters at once leaves.  On a
long-row softmax (4096x65536) cold `pattern-full` seeds stopped at a looped config with 32
warps and 'first' eviction on one load: each single move from it was slower (16 warps alone,
or the load's hint dropped alone), while both together led within two steps to a config
several percent faster.  Many of that centre's neighbours were moves that change nothing
measurable (which of the six loads use tensor descriptors, and the like).  An
exploration's kick is `KICK_STEPS` random single-parameter moves from the best point, so most
kicks spent their moves there, and the seeds that escaped did so by luck.

The walk and its look before a path stops are `pattern-full`'s, unchanged.  The one difference
is how a kick draws its moves: each move takes a parameter not yet moved in that kick, drawn
with a weight equal to how much that parameter's measured single moves at the kick's start
changed the time (the largest |ln(t / t_start)|, at least `MIN_WEIGHT` and at most
`MAX_WEIGHT`); a parameter none of whose moves there was measured gets the median weight of
those that were.  Why the cap: a move that alone makes the time far worse (at the shape above,
dropping the eviction hint that keeps a row in L2) is the least likely part of a two-move
escape, and uncapped it took most of the kicks' draws.  A stopped path has had its whole
neighbourhood measured (`pattern-full`'s stall look), so by the time kicks are drawn the
weights are known.  Where no neighbour was measured every weight is equal, as for the plain
kick.

A strategy of its own for the reason `pattern-full` is: sessions record the source hash of
their strategy's modules, and the held-out study judges each source apart.
"""

from __future__ import annotations

import math
import statistics

from typing import Callable

from autotune.strategies.pattern_full import FullPatternSearch
from autotune.types import Params

# A parameter whose moves changed nothing measurable keeps this weight (a relative change of
# 0.1%: below timing noise), so a kick can still move it, rarely.
MIN_WEIGHT = 0.001
# Changes past 10% weigh no more than 10%.  Chosen at the stall centres of 4096x65536 (the shape
# this strategy was fitted to): there it raised the share of kicks that move both parameters of
# the known escape, where the uncapped weight gave most draws to one ruinous move.
MAX_WEIGHT = math.log(1.10)


class FocusPatternSearch(FullPatternSearch):
    name = "pattern-focus"

    def _kick_move(self, start: Params) -> Callable[[Params, set[str]], Params | None]:
        """A kick's move from `start`: a parameter not yet moved in the kick, drawn by `weights`
        at `start`, then one of the point's moves of it at random (None where none is left)."""
        weights = self.weights(start)

        def move(point: Params, moved: set[str]) -> Params | None:
            moves = self._moves_by_parameter(point, moved)
            if not moves:
                return None
            names = sorted(moves)
            name = self.rng.choices(names, weights=[weights[n] for n in names])[0]
            moved.add(name)
            return self.rng.choice(moves[name])
        return move

    def weights(self, start: Params) -> dict[str, float]:
        """Per parameter, how much its measured single moves at `start` changed the time."""
        here = self._objective(start)
        changes: dict[str, float] = {}
        if math.isfinite(here) and here > 0:
            for point in self.space.neighbours(start, self.radius):
                time = self._objective(point)
                names = self.space.changed(start, point)
                if math.isfinite(time) and time > 0 and len(names) == 1:
                    changes[names[0]] = max(changes.get(names[0], 0.0), abs(math.log(time / here)))
        unknown = statistics.median(changes.values()) if changes else 1.0
        return {name: min(max(changes.get(name, unknown), MIN_WEIGHT), MAX_WEIGHT) for name in self.space.names}

    def _moves_by_parameter(self, point: Params, moved: set[str]) -> dict[str, list[Params]]:
        """`point`'s single-parameter moves, by the parameter they change (those in `moved` left out)."""
        moves: dict[str, list[Params]] = {}
        for neighbour in self.space.neighbours(point, self.radius):
            names = self.space.changed(point, neighbour)
            if len(names) == 1 and names[0] not in moved:
                moves.setdefault(names[0], []).append(neighbour)
        return moves
