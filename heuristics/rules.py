"""Rules: named, pluggable producers of seed configs from facts.

A rule declares the facts it needs (`needs`, for people and reports) and a predicate
(`applies`) saying whether they are present; when they are, `emit` returns seeds or a
`Declined` saying why it will not propose anything (it fails closed: a seed it cannot
justify is never emitted).  Every seed carries its rule, a reason in words, the facts it
read and the constants it used, so a session can record where each seed came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from heuristics.device import DeviceLimits
from heuristics.facts import KernelFacts, as_record


@dataclass(frozen=True)
class Seed:
    params: dict[str, Any]  # a valid point of the task's space
    rule: str
    reason: str
    facts: tuple[Any, ...] = ()  # the fact objects the rule read
    constants: Mapping[str, Any] = field(default_factory=dict)

    def to_record(self) -> dict[str, Any]:
        """JSON-able provenance of this seed (recorded with the session)."""
        return {"rule": self.rule, "reason": self.reason, "params": dict(self.params),
                "facts": [as_record(f) for f in self.facts], "constants": dict(self.constants)}


@dataclass(frozen=True)
class Declined:
    """A rule whose facts were present but which proposes nothing, and why."""

    rule: str
    reason: str

    def to_record(self) -> dict[str, Any]:
        return {"rule": self.rule, "declined": self.reason}


Emit = Callable[[KernelFacts, Any, DeviceLimits], "list[Seed] | Declined"]


@dataclass(frozen=True)
class Rule:
    name: str
    needs: tuple[str, ...]  # names of the fact types it reads
    summary: str
    applies: Callable[[KernelFacts], bool]
    emit: Emit


@dataclass(frozen=True)
class RuleOutcome:
    """What the rules made of one kernel: seeds, refusals, and the rules that did not apply."""

    seeds: tuple[Seed, ...]
    declined: tuple[Declined, ...]
    fired: tuple[str, ...]
    not_applicable: tuple[str, ...]


_RULES: list[Rule] = []


def register_rule(rule: Rule) -> Rule:
    if any(r.name == rule.name for r in _RULES):
        raise ValueError(f"rule {rule.name!r} is already registered")
    _RULES.append(rule)
    return rule


def registered_rules() -> list[Rule]:
    return list(_RULES)


def run_rules(facts: KernelFacts, space: Any, device: DeviceLimits, rules: list[Rule] | None = None) -> RuleOutcome:
    """Apply every rule whose facts are present; seeds that normalise to one point are kept once."""
    seeds: list[Seed] = []
    declined: list[Declined] = []
    fired: list[str] = []
    not_applicable: list[str] = []
    seen: set[str] = set()
    for rule in rules if rules is not None else registered_rules():
        if not rule.applies(facts):
            not_applicable.append(rule.name)
            continue
        result = rule.emit(facts, space, device)
        if isinstance(result, Declined):
            declined.append(result)
            continue
        if not result:
            declined.append(Declined(rule.name, "no proposal fits this kernel's space"))
            continue
        fired.append(rule.name)
        for seed in result:
            key = repr(sorted(seed.params.items()))
            if key not in seen:
                seen.add(key)
                seeds.append(seed)
    return RuleOutcome(seeds=tuple(seeds), declined=tuple(declined), fired=tuple(fired),
                       not_applicable=tuple(not_applicable))


def point(space: Any, overrides: Mapping[str, Any]) -> dict[str, Any] | None:
    """The space's default with `overrides`, or None when any override is not a value the
    space allows (the CPU and GPU spaces offer different choices) or a constraint fails."""
    params = {**space.default, **overrides}
    if set(overrides) - set(space.names) or space.violations(params):
        return None
    return space.ordered(params)


def allowed(space: Any, name: str, value: Any) -> bool:
    """Whether the space has the slot `name` and offers `value` for it."""
    return name in space.names and space.parameter(name).contains(value)
