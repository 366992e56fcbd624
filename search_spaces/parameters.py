"""Tunable parameters: one scalar dimension of a config space each.

A parameter knows its values, its default, how to sample it, its neighbours and how to
serialise itself, so a space recorded on a GPU machine can be rebuilt on a CPU without
the compiler that produced it.  Values are plain JSON scalars (or lists, for
permutations), so configs round-trip through sqlite unchanged.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, ClassVar

JsonValue = Any


def _is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


@dataclass(frozen=True)
class Parameter:
    """Base class: a named dimension with a finite, ordered list of values."""

    name: str
    kind: ClassVar[str] = "abstract"

    def values(self) -> list[JsonValue]:
        raise NotImplementedError

    @property
    def default(self) -> JsonValue:
        raise NotImplementedError

    @property
    def ordered(self) -> bool:
        """True when neighbouring values in `values()` are meaningfully close."""
        return True

    def cardinality(self) -> int:
        return len(self.values())

    def contains(self, value: JsonValue) -> bool:
        return any(_same(value, v) for v in self.values())

    def sample(self, rng: random.Random) -> JsonValue:
        values = self.values()
        return values[rng.randrange(len(values))]

    def neighbours(self, value: JsonValue, radius: int = 1) -> list[JsonValue]:
        """Values one step (up to `radius` steps) away: adjacent for ordered kinds, all others otherwise."""
        values = self.values()
        index = self.index_of(value)
        if not self.ordered:
            return [v for i, v in enumerate(values) if i != index]
        lo, hi = max(0, index - radius), min(len(values) - 1, index + radius)
        return [values[i] for i in range(lo, hi + 1) if i != index]

    def nearest(self, value: JsonValue) -> JsonValue:
        """This parameter's value closest to `value`, which may lie outside it (a config recorded
        for another shape's space): the value itself when it is one; else, for ordered numbers,
        the closest in ratio (positive numbers: block sizes, warps) or in difference; else the default."""
        if self.contains(value):
            return self.canonical(value)
        values = self.values()
        numeric = all(_is_number(v) for v in values)
        if not (self.ordered and numeric and _is_number(value)):
            return self.default
        if value > 0 and all(v > 0 for v in values):
            return min(values, key=lambda v: (abs(math.log(v / value)), v))
        return min(values, key=lambda v: (abs(v - value), v))

    def canonical(self, value: JsonValue) -> JsonValue:
        """The parameter's own spelling of an equal value (512 for 512.0), so keys agree."""
        return self.values()[self.index_of(value)]

    def index_of(self, value: JsonValue) -> int:
        for i, v in enumerate(self.values()):
            if _same(value, v):
                return i
        raise ValueError(f"{value!r} is not a value of parameter {self.name!r}")

    def to_dict(self) -> dict[str, JsonValue]:
        raise NotImplementedError


def _is_number(value: JsonValue) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _same(a: JsonValue, b: JsonValue) -> bool:
    """Equality that keeps True apart from 1 and False from 0 (JSON would not)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b and (a is None) == (b is None)


@dataclass(frozen=True)
class _IntegerRange(Parameter):
    """Integers between `low` and `high`; subclasses say which ones (`values`)."""

    low: int = 1
    high: int = 1
    default_value: int = 1

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError(f"{self.name}: empty range [{self.low}, {self.high}]")
        if self.default_value not in self.values():
            raise ValueError(f"{self.name}: default {self.default_value} is not one of the values in "
                             f"[{self.low}, {self.high}]")

    @property
    def default(self) -> int:
        return self.default_value

    def to_dict(self) -> dict[str, JsonValue]:
        return {"name": self.name, "kind": self.kind, "low": self.low, "high": self.high, "default": self.default_value}


@dataclass(frozen=True)
class PowerOfTwo(_IntegerRange):
    """Powers of two from `low` to `high` (block sizes, warps, multipliers)."""

    kind: ClassVar[str] = "power_of_two"

    def __post_init__(self) -> None:
        if not (_is_power_of_two(self.low) and _is_power_of_two(self.high)):
            raise ValueError(f"{self.name}: bad power-of-two range [{self.low}, {self.high}]")
        super().__post_init__()

    def values(self) -> list[int]:
        return [2**e for e in range(int(math.log2(self.low)), int(math.log2(self.high)) + 1)]


@dataclass(frozen=True)
class Integer(_IntegerRange):
    """Every integer from `low` to `high` inclusive (unroll factors, stages)."""

    low: int = 0
    high: int = 0
    default_value: int = 0
    kind: ClassVar[str] = "integer"

    def values(self) -> list[int]:
        return list(range(self.low, self.high + 1))


@dataclass(frozen=True)
class Choice(Parameter):
    """A categorical dimension (enums, booleans, permutations): no order between values."""

    choices: tuple[JsonValue, ...] = ()
    default_value: JsonValue = None
    kind: ClassVar[str] = "choice"

    def __post_init__(self) -> None:
        if not self.choices:
            raise ValueError(f"{self.name}: a choice needs at least one value")
        if not any(_same(self.default_value, c) for c in self.choices):
            raise ValueError(f"{self.name}: default {self.default_value!r} is not one of {self.choices!r}")

    def values(self) -> list[JsonValue]:
        return [list(c) if isinstance(c, tuple) else c for c in self.choices]

    @property
    def default(self) -> JsonValue:
        return list(self.default_value) if isinstance(self.default_value, tuple) else self.default_value

    @property
    def ordered(self) -> bool:
        return False

    def to_dict(self) -> dict[str, JsonValue]:
        return {"name": self.name, "kind": self.kind, "choices": self.values(), "default": self.default}


@dataclass(frozen=True)
class Ordinal(Choice):
    """A categorical dimension whose listed order matters (e.g. declared block sizes)."""

    kind: ClassVar[str] = "ordinal"

    @property
    def ordered(self) -> bool:
        return True


_KINDS: dict[str, type[Parameter]] = {
    cls.kind: cls for cls in (PowerOfTwo, Integer, Choice, Ordinal)
}


def parameter_from_dict(data: dict[str, JsonValue]) -> Parameter:
    """Rebuild a parameter from `Parameter.to_dict()` output."""
    kind = data.get("kind")
    if kind not in _KINDS:
        raise ValueError(f"unknown parameter kind {kind!r}")
    if kind in ("power_of_two", "integer"):
        return _KINDS[kind](name=data["name"], low=data["low"], high=data["high"], default_value=data["default"])
    choices = tuple(tuple(c) if isinstance(c, list) else c for c in data["choices"])
    default = tuple(data["default"]) if isinstance(data["default"], list) else data["default"]
    return _KINDS[kind](name=data["name"], choices=choices, default_value=default)
