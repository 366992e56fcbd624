"""Pattern search that starts one path in each program order.

Why: a cold walk starts from the default config alone, and a single-parameter walk stays in the
basin it starts in when leaving it takes several moves at once.  On long-row softmaxes
(1792x81920, 3072x81920, 8192x12345) every cold pattern run that ended more than 2% over the best
anyone found had stayed in the flat program order, while the best ran persistent, with loop
pipelining that pays only there; at the centres where those walks stopped, switching to the
persistent order alone was measured slower (the held-out report's stops section).  The warm arm,
whose rule seeds include persistent programs, met its target at every shape.

The walk and its look before a path stops are `pattern-full`'s, unchanged.  The one difference
is the first start: the best given point with each other value of `START_ACROSS` (Helion's
`pid_type`: flat, persistent blocked, persistent interleaved) is measured first, and the first
paths start from the fastest accurate point of each value, one path each, instead of from the
best `copies` points.  Until all of them have stopped, each path keeps its value: it takes only
the moves that leave the program order as it is, or the persistent path would step straight back
to the faster flat order and merge with the flat path.  Restarts are `pattern-full`'s.  A space
without the parameter (a Triton kernel's, say) is walked exactly as `pattern-full` walks it.
That costs one or two points at the start and a path or two per generation until they stop.

A strategy of its own for the reason `pattern-full` is: sessions record the source hash of
their strategy's modules, and the held-out study judges each source apart.
"""

from __future__ import annotations

from typing import Any

from autotune.strategies.pattern_full import FullPatternSearch
from autotune.types import Params
from search_spaces.space import params_key

START_ACROSS = "pid_type"  # the parameter each of whose values starts a path: the program order


class OrdersPatternSearch(FullPatternSearch):
    name = "pattern-orders"

    _starting_across = False  # the first start is one path per value (set when its points are queued)
    _pinned = False  # the first walk's paths keep their value of START_ACROSS until they all stop

    def ask(self, n: int) -> list[Params]:
        if not self._started and self.explore != "first" and self._ranked():
            self._started = True
            variants = self.order_variants(self._ranked()[0][0])
            if variants:
                self._starting_across = True
                self._queue_exploration(variants)
        return super().ask(n)

    def order_variants(self, point: Params) -> list[Params]:
        """`point` with each other value of START_ACROSS that the space allows, not yet measured."""
        if START_ACROSS not in self.space.names:
            return []
        parameter = self.space.parameter(START_ACROSS)
        variants: list[Params] = []
        taken: set[str] = set()
        for value in parameter.values():
            if value == point[START_ACROSS]:
                continue
            candidate = self.space.ordered({**point, START_ACROSS: value})
            if not self.space.violations(candidate) and self.space.is_member(candidate) and self._new(candidate, taken):
                taken.add(params_key(candidate))
                variants.append(candidate)
        return variants

    def _fresh_centres(self) -> list[Params]:
        """At the first start, the fastest accurate point of each value of START_ACROSS; later,
        `pattern-full`'s."""
        if not self._starting_across:
            return super()._fresh_centres()
        self._starting_across = False
        self._pinned = True
        fastest: dict[Any, Params] = {}
        for params, _ in self._ranked():
            fastest.setdefault(params[START_ACROSS], params)
        return list(fastest.values())

    def _neighbours(self, centre: Params) -> list[Params]:
        """While the first walk's paths are pinned, only the moves that keep the centre's value of
        START_ACROSS: a persistent path's best first move is often back to the flat order (the
        switch alone is slower there), which would merge it into the flat path."""
        points = super()._neighbours(centre)
        if not self._pinned:
            return points
        return [p for p in points if p.get(START_ACROSS) == centre.get(START_ACROSS)]

    def _restart_or_finish(self) -> None:
        self._pinned = False  # every path has stopped: restarts walk freely, as `pattern-full`'s
        super()._restart_or_finish()
