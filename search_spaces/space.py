"""`SearchSpace`: named parameters, validity constraints, sampling and neighbours.

A space is pure data: it can be serialised into the cache and rebuilt anywhere.  Turning
a point of the space into the config a compiler understands (and normalising it) is the
job of a codec (`search_spaces.codec`), because that part needs the live kernel.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from search_spaces.parameters import JsonValue, Parameter, _same, parameter_from_dict

Params = dict[str, JsonValue]


class InvalidConfig(ValueError):
    """A config that is not a point of the space (unknown name, value out of range, constraint)."""


def canonical_json(data: Any) -> str:
    """JSON with sorted keys and no whitespace: the one text form used for hashing."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Constraint:
    """A validity rule over parameter values; serialisable so replays apply the same rules."""

    kind = "abstract"

    def violation(self, params: Mapping[str, JsonValue]) -> str | None:
        """None when allowed, else a one-line reason."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, JsonValue]:
        raise NotImplementedError


@dataclass(frozen=True)
class ProductLimit(Constraint):
    """prod(names) / (prod(per) * per_scale) <= limit.

    With `per` empty it caps a product (a tile's element count under Triton's 2**20
    tensor limit); with `per=("num_warps",), per_scale=32` it caps elements per thread,
    the register-pressure bound that keeps random configs compilable.
    """

    names: tuple[str, ...]
    limit: float
    per: tuple[str, ...] = ()
    per_scale: int = 1
    kind = "product_limit"

    def violation(self, params: Mapping[str, JsonValue]) -> str | None:
        product = 1
        for name in self.names:
            product *= int(params[name])
        divisor = self.per_scale
        for name in self.per:
            divisor *= int(params[name])
        value = product / divisor
        if value > self.limit:
            what = " * ".join(self.names)
            if self.per:
                what = f"({what}) / ({' * '.join(self.per)} * {self.per_scale})"
            return f"{what} = {value:g} exceeds {self.limit:g}"
        return None

    def to_dict(self) -> dict[str, JsonValue]:
        return {"kind": self.kind, "names": list(self.names), "limit": self.limit,
                "per": list(self.per), "per_scale": self.per_scale}


def constraint_from_dict(data: Mapping[str, JsonValue]) -> Constraint:
    if data.get("kind") == ProductLimit.kind:
        return ProductLimit(names=tuple(data["names"]), limit=data["limit"],
                            per=tuple(data.get("per", ())), per_scale=int(data.get("per_scale", 1)))
    raise ValueError(f"unknown constraint kind {data.get('kind')!r}")


@dataclass(frozen=True)
class SearchSpace:
    """The tunable parameters of one kernel specialised to one input signature.

    `family` says which codec turns points into compiler configs ("helion" or "triton");
    `default` is the point the compiler itself would pick (Helion's default config on the
    machine the space was taken from), kept because it differs between machines.

    `members`, when given, makes the space finite: only those points are valid.  That is
    how a recorded space is searched in simulation (the oracle can answer only what was
    measured) and how a tuning space recorded by others, whose validity rules we do not
    have, is represented: its valid points are the ones it lists.
    """

    kernel: str
    family: str
    parameters: tuple[Parameter, ...]
    default: Params
    constraints: tuple[Constraint, ...] = ()
    extras: Mapping[str, JsonValue] = field(default_factory=dict)
    members: tuple[Params, ...] | None = None

    def __post_init__(self) -> None:
        names = [p.name for p in self.parameters]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate parameter names in space for {self.kernel}")
        object.__setattr__(self, "member_keys", None)
        if self.members is not None:
            ordered = tuple({n: m[n] for n in names} for m in self.members)
            object.__setattr__(self, "members", ordered)
            keys = tuple(params_key(m) for m in ordered)
            object.__setattr__(self, "member_keys", keys)  # aligned with members: walking them needs no hashing
            object.__setattr__(self, "_member_keys", frozenset(keys))

    def restricted_to(self, points: Iterable[Mapping[str, JsonValue]]) -> "SearchSpace":
        """The same space with only `points` valid (deduplicated, first occurrence order)."""
        unique: dict[str, Params] = {}
        for point in points:
            unique.setdefault(params_key(self.ordered(point)), self.ordered(point))
        if not unique:
            raise InvalidConfig(f"a finite space for {self.kernel} needs at least one point")
        return replace(self, members=tuple(unique.values()))

    def is_member(self, params: Mapping[str, JsonValue]) -> bool:
        """True when the space is unrestricted or `params` is one of its listed points."""
        return self.members is None or params_key(self.ordered(params)) in self._member_keys

    # -- structure -------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return [p.name for p in self.parameters]

    def parameter(self, name: str) -> Parameter:
        for p in self.parameters:
            if p.name == name:
                return p
        raise KeyError(name)

    def cardinality(self) -> int:
        """Points in a finite space; else the raw product of all parameters (before constraints)."""
        if self.members is not None:
            return len(self.members)
        size = 1
        for p in self.parameters:
            size *= p.cardinality()
        return size

    # -- validity ------------------------------------------------------------------
    def violations(self, params: Mapping[str, JsonValue]) -> list[str]:
        """Every reason `params` is not a point of this space (empty when valid)."""
        problems = []
        unknown = sorted(set(params) - set(self.names))
        if unknown:
            problems.append(f"unknown parameter(s): {', '.join(unknown)}")
        for p in self.parameters:
            if p.name not in params:
                problems.append(f"missing parameter {p.name}")
            elif not p.contains(params[p.name]):
                problems.append(f"{p.name}={params[p.name]!r} is not one of {p.values()[:12]!r}")
        if not problems:
            problems += [v for c in self.constraints if (v := c.violation(params)) is not None]
        if not problems and not self.is_member({p.name: p.canonical(params[p.name]) for p in self.parameters}):
            problems.append("not one of the points of this finite (recorded) space")
        return problems

    def validate(self, params: Mapping[str, JsonValue]) -> Params:
        problems = self.violations(params)
        if problems:
            raise InvalidConfig("; ".join(problems))
        return {p.name: p.canonical(params[p.name]) for p in self.parameters}

    def nearest_point(self, params: Mapping[str, JsonValue]) -> Params:
        """The point whose every value is the closest this space has to `params`' (a config of
        another shape's space: a row too wide for one block, an indexing the shape does not
        offer); missing parameters take the default and unknown ones are dropped.  A product
        over its limit (a whole row held per program, at a longer row) is brought under it by
        stepping its largest factor down, one value at a time.  Raises InvalidConfig when no such
        point exists (or it is not a member of a finite space)."""
        point = {p.name: p.nearest(params[p.name]) if p.name in params else p.default for p in self.parameters}
        for _ in range(sum(p.cardinality() for p in self.parameters)):
            broken = next((c for c in self.constraints if c.violation(point) is not None), None)
            if broken is None:
                break
            point = self._stepped_down(point, broken)
        return self.validate(point)

    def _stepped_down(self, point: Params, broken: Constraint) -> Params:
        """`point` with the largest of the broken product's factors one value lower."""
        lowerable = [self.parameter(n) for n in getattr(broken, "names", ())
                     if self.parameter(n).ordered and self.parameter(n).index_of(point[n]) > 0]
        if not lowerable:
            raise InvalidConfig(f"no point near this config: {broken.violation(point)}")
        largest = max(lowerable, key=lambda p: point[p.name])
        return {**point, largest.name: largest.values()[largest.index_of(point[largest.name]) - 1]}

    def complete(self, partial: Mapping[str, JsonValue]) -> Params:
        """Fill missing parameters from the default, so users can write partial configs."""
        unknown = sorted(set(partial) - set(self.names))
        if unknown:
            raise InvalidConfig(f"unknown parameter(s): {', '.join(unknown)}")
        return self.ordered({**self.default, **partial})

    def ordered(self, params: Mapping[str, JsonValue]) -> Params:
        return {name: params[name] for name in self.names}

    # -- operations strategies use ---------------------------------------------------
    def sample(self, rng: random.Random, max_tries: int = 1000) -> Params:
        """A uniformly random valid point (a listed member, or by rejection sampling)."""
        if self.members is not None:
            return dict(rng.choice(self.members))
        for _ in range(max_tries):
            params = {p.name: p.sample(rng) for p in self.parameters}
            if not any(c.violation(params) for c in self.constraints):
                return params
        raise InvalidConfig(f"no valid config found in {max_tries} random draws from {self.kernel}'s space")

    def neighbours(self, params: Mapping[str, JsonValue], radius: int = 1) -> list[Params]:
        """Points that differ from `params` in exactly one parameter, constraints respected."""
        result = []
        for p in self.parameters:
            for value in p.neighbours(params[p.name], radius):
                candidate = {**params, p.name: value}
                if not any(c.violation(candidate) for c in self.constraints) and self.is_member(candidate):
                    result.append(self.ordered(candidate))
        return result

    def changed(self, before: Mapping[str, JsonValue], after: Mapping[str, JsonValue]) -> list[str]:
        """Names of the parameters whose values differ between two points."""
        return [n for n in self.names if n in before and n in after and not _same(before[n], after[n])]

    # -- serialisation -----------------------------------------------------------
    def to_dict(self) -> dict[str, JsonValue]:
        data: dict[str, JsonValue] = {
            "kernel": self.kernel,
            "family": self.family,
            "parameters": [p.to_dict() for p in self.parameters],
            "constraints": [c.to_dict() for c in self.constraints],
            "default": self.default,
            "extras": dict(self.extras),
        }
        if self.members is not None:  # only then, so unrestricted spaces keep their fingerprints
            data["members"] = [dict(m) for m in self.members]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, JsonValue]) -> "SearchSpace":
        return cls(
            kernel=data["kernel"],
            family=data["family"],
            parameters=tuple(parameter_from_dict(p) for p in data["parameters"]),
            constraints=tuple(constraint_from_dict(c) for c in data.get("constraints", [])),
            default=dict(data["default"]),
            extras=dict(data.get("extras", {})),
            members=tuple(dict(m) for m in data["members"]) if data.get("members") is not None else None,
        )

    def definition_hash(self) -> str:
        return sha256_hex(canonical_json(self.to_dict()))


def params_key(params: Mapping[str, JsonValue]) -> str:
    """Key of a raw point of the space (used only for aliases: configs are keyed normalised)."""
    return sha256_hex(canonical_json(dict(params)))[:20]


def config_key(native_config: Mapping[str, JsonValue]) -> str:
    """Key of a normalised compiler config: equal configs give equal keys, whatever the order."""
    return sha256_hex(canonical_json(dict(native_config)))[:20]


def iter_grid(space: SearchSpace, names: Iterable[str]) -> Iterable[Params]:
    """Every combination of the named parameters (others at their default), in a stable order."""
    import itertools

    names = list(names)
    if space.members is not None:  # a finite space is its own grid, in its listed order
        seen: set[str] = set()
        for member in space.members:
            point = space.ordered({**space.default, **{n: member[n] for n in names}})
            key = params_key(point)
            if key not in seen and not space.violations(point):
                seen.add(key)
                yield point
        return
    axes = [space.parameter(n).values() for n in names]
    for combo in itertools.product(*axes):
        params = {**space.default, **dict(zip(names, combo))}
        if not any(c.violation(params) for c in space.constraints):
            yield space.ordered(params)
