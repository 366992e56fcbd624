"""A fixed list of labelled configs, asked in order: no search at all.

Why a strategy: experiments measure configs they chose themselves (the default, rule seeds,
a grid sample, another tuner's pick) and must label each one in the record.  As a strategy
the list goes through the one session loop (recording, resumption, re-benchmark) instead of
a loop of the experiment's own.  `seeds()` gives the same list as `(label, point)` seeds,
so a session records each config's label as its origin (see `autotune.fixed_list`).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, Sequence

from autotune.strategies.base import Strategy
from autotune.types import Params
from search_spaces.space import InvalidConfig, SearchSpace, params_key

# Between the labels of one config given under several labels (the default that is also a
# grid point): one measurement counts for each.
LABEL_JOIN = " | "

LabelledConfigs = Mapping[str, Mapping[str, Any]] | Sequence[tuple[str, Mapping[str, Any]]] | str


class FixedList(Strategy):
    """Asks `configs` (label -> point, or (label, point) pairs, or that as JSON text) in the
    given order, each distinct point once, and then nothing: the session ends with "strategy
    finished".  A partial point is completed from the space's default; a config that is not a
    point of the space is refused when the strategy is built, naming its label."""

    name = "fixed"
    exhaustive = False
    needs_configs = True

    def __init__(self, space: SearchSpace, seed: int = 0, *, configs: LabelledConfigs = (),
                 **options: Any) -> None:
        super().__init__(space, seed, **options)
        self.entries: list[tuple[tuple[str, ...], Params]] = []  # (labels, point), in first-given order
        index: dict[str, int] = {}
        for label, raw in _pairs(configs):
            point = _point(space, label, raw)
            key = params_key(point)
            if key in index:
                labels, known = self.entries[index[key]]
                self.entries[index[key]] = ((*labels, label), known)
            else:
                index[key] = len(self.entries)
                self.entries.append(((label,), point))
        if not self.entries:
            raise ValueError("the fixed strategy needs its configs: configs={label: point, ...}")
        self._next = 0

    @classmethod
    def from_task(cls, task: Any, seed: int = 0, budget: int | None = None, **options: Any) -> "FixedList":
        strategy = cls(task.space, seed=seed, **options)
        if budget is not None and len(strategy.entries) > budget:
            raise ValueError(f"{len(strategy.entries)} fixed configs but a budget of {budget}: "
                             "raise the budget or give fewer configs")
        return strategy

    def ask(self, n: int) -> list[Params]:
        batch: list[Params] = []
        while len(batch) < n and self._next < len(self.entries):
            _labels, point = self.entries[self._next]
            self._next += 1
            if not self.was_asked(point):
                self.mark_asked(point)
                batch.append(dict(point))
        return batch

    def seeds(self) -> list[tuple[str, Params]]:
        """One `(labels joined by LABEL_JOIN, point)` per distinct point, in order: given to a
        session as its seeds, each row is recorded with its labels as its origin."""
        return [(LABEL_JOIN.join(labels), dict(point)) for labels, point in self.entries]

    def labelled(self) -> list[tuple[str, Params]]:
        """Every `(label, point)` as given (a point given under two labels appears twice)."""
        return [(label, dict(point)) for labels, point in self.entries for label in labels]


def _pairs(configs: LabelledConfigs) -> Iterable[tuple[str, Mapping[str, Any]]]:
    """(label, raw point) pairs from any of the accepted forms; refuses anything else."""
    if isinstance(configs, str):  # --option configs='{"label": {...}}'
        try:
            configs = json.loads(configs)
        except json.JSONDecodeError as error:
            raise ValueError(f"configs: malformed JSON ({error.msg})") from None
    items = configs.items() if isinstance(configs, Mapping) else configs
    pairs = []
    for item in items:
        if not (isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str)
                and isinstance(item[1], Mapping)):
            shown = repr(item)[:80]
            raise ValueError(f"configs: each entry must be a label and a point (parameter -> value), got {shown}")
        pairs.append((item[0], item[1]))
    return pairs


def _point(space: SearchSpace, label: str, raw: Mapping[str, Any]) -> Params:
    """The canonical, complete point of `raw`, or ValueError naming the label."""
    try:
        point = space.validate(space.complete(raw))
    except InvalidConfig as error:
        raise ValueError(f"config {label!r} is not a point of {space.kernel}'s space: {error}") from None
    if not space.is_member(point):
        raise ValueError(f"config {label!r} is not one of the recorded points of {space.kernel}'s space")
    return space.ordered(point)
