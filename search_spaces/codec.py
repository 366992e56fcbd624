"""Codecs: the bridge between points of a `SearchSpace` and the configs a compiler takes.

Helion normalises configs (some values are irrelevant under others and get reset), so two
different points can be the same config.  Everything downstream keys on the normalised
("native") config; a codec is the one place that knows how to normalise.
"""

from __future__ import annotations

from typing import Mapping, Protocol

from search_spaces.parameters import JsonValue
from search_spaces.space import InvalidConfig, Params, SearchSpace, params_key


class Codec(Protocol):
    """Turns points of `space` into normalised native configs and back."""

    space: SearchSpace

    def normalise(self, params: Mapping[str, JsonValue]) -> tuple[Params, dict[str, JsonValue]]:
        """(canonical point, native config) for a point; raises InvalidConfig when it is not valid."""
        ...

    def params_of(self, native: Mapping[str, JsonValue]) -> Params:
        """The canonical point of a native config (for configs typed in by users or seeds)."""
        ...

    def params_near(self, native: Mapping[str, JsonValue]) -> Params:
        """The canonical point nearest to a native config of another shape's space (every value
        the space lacks moved to its closest one); raises InvalidConfig when there is none."""
        ...


class DeclaredCodec:
    """For declared spaces (hand-written Triton kernels): a point is its own native config."""

    def __init__(self, space: SearchSpace) -> None:
        self.space = space

    def normalise(self, params: Mapping[str, JsonValue]) -> tuple[Params, dict[str, JsonValue]]:
        point = self.space.validate(params)
        return point, dict(point)

    def params_of(self, native: Mapping[str, JsonValue]) -> Params:
        return self.space.validate(native)

    def params_near(self, native: Mapping[str, JsonValue]) -> Params:
        return self.space.nearest_point(native)


class RecordedCodec:
    """Normalisation replayed from the cache, for machines that cannot bind the kernel.

    The GPU run records, for every point it normalised, which native config it became.
    A point never seen there cannot be normalised here; it is answered with its own
    validated value and will be reported as 'not recorded' by the replay evaluator.
    """

    def __init__(self, space: SearchSpace, aliases: Mapping[str, tuple[Params, dict[str, JsonValue]]]) -> None:
        self.space = space
        self._aliases = dict(aliases)
        # A normalised point normalises to itself (Helion's normalisation is idempotent), so the
        # point `params_of` gives for a recorded config (a user's, an export's, a cache seed) is
        # answered as recorded even where no strategy asked that exact point.
        for point, native in aliases.values():
            self._aliases.setdefault(params_key(point), (point, native))
        self._by_native = {params_key(native): point for point, native in self._aliases.values()}

    def normalise(self, params: Mapping[str, JsonValue]) -> tuple[Params, dict[str, JsonValue]]:
        point = self.space.validate(params)
        known = self._aliases.get(params_key(point))
        if known is not None:
            return dict(known[0]), dict(known[1])
        return point, {"__unrecorded_point__": point}

    def recorded(self, params: Mapping[str, JsonValue]) -> tuple[Params, dict[str, JsonValue]] | None:
        """`normalise(params)` for a point exactly as the recording asked it (valid and canonical:
        its key is an alias's), without validating it again; None for any other point.  A replay's
        sample is thousands of recorded points: validating each again took most of its start."""
        known = self._aliases.get(params_key(params))
        return (dict(known[0]), dict(known[1])) if known is not None else None

    def params_of(self, native: Mapping[str, JsonValue]) -> Params:
        point = self._by_native.get(params_key(native))
        if point is None:
            raise InvalidConfig("this config was never recorded for the space, so it cannot be replayed")
        return dict(point)

    def params_near(self, native: Mapping[str, JsonValue]) -> Params:
        """Only a recorded config: a moved one would be a point the replay has no measurement of."""
        return self.params_of(native)
