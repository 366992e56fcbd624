"""Points of a space as numeric vectors, for models and for nearest-point searches.

Ordered parameters become their position in the value list scaled to [0, 1] (neighbouring
values are close); unordered ones become one-hot columns (every other value is equally far).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from autotune.types import Params
from search_spaces.space import SearchSpace, canonical_json, params_key


class PointEncoder:
    def __init__(self, space: SearchSpace) -> None:
        self.space = space
        self._index = [{canonical_json(v): i for i, v in enumerate(p.values())} for p in space.parameters]
        self.groups: list[slice] = []  # the columns of each parameter
        start = 0
        for parameter, index in zip(space.parameters, self._index):
            width = 1 if parameter.ordered else len(index)
            self.groups.append(slice(start, start + width))
            start += width

    def positions(self, points: Sequence[Mapping], *, missing: int | None = None) -> np.ndarray:
        """One row per point, one column per parameter: the value's position in the parameter's
        values.  A value that is not in the space raises KeyError, or becomes `missing` if given."""
        columns = [[index[canonical_json(point[parameter.name])] if missing is None
                    else index.get(canonical_json(point[parameter.name]), missing) for point in points]
                   for parameter, index in zip(self.space.parameters, self._index)]
        return np.array(columns, dtype=int).T.reshape(len(points), len(columns))

    def encode_all(self, points: Sequence[Mapping]) -> np.ndarray:
        """One row per point; raises KeyError for a value that is not in the space."""
        columns = []
        for parameter, index, positions in zip(self.space.parameters, self._index, self.positions(points).T):
            if parameter.ordered:
                columns.append((positions / max(len(index) - 1, 1))[:, None])
            else:
                columns.append(np.eye(len(index))[positions])
        return np.hstack(columns) if columns else np.zeros((len(points), 0))


class MemberIndex:
    """The points of a finite space, encoded once, with which ones are still unasked."""

    def __init__(self, space: SearchSpace) -> None:
        if space.members is None:
            raise ValueError("MemberIndex needs a finite space")
        self.encoder = PointEncoder(space)
        self.points = space.members
        self.keys = [params_key(m) for m in space.members]
        self.vectors = self.encoder.encode_all(space.members)
        self._position = {key: i for i, key in enumerate(self.keys)}
        self.open = np.ones(len(self.keys), dtype=bool)

    def close(self, params: Mapping) -> None:
        position = self._position.get(params_key(params))
        if position is not None:
            self.open[position] = False

    def nearest_open(self, params: Mapping) -> Params | None:
        """The unasked member closest to `params` (ties: the first listed), or None if none is left."""
        if not self.open.any():
            return None
        target = self.encoder.encode_all([params])[0]
        distances = ((self.vectors - target) ** 2).sum(axis=1)
        distances[~self.open] = np.inf
        return dict(self.points[int(np.argmin(distances))])
