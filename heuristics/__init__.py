"""Heuristic seeding: facts read off a bound kernel and its shape, rules that turn them into seeds.

* `heuristics.facts`: our fact types (matmul, reduction, matmul with a reduction epilogue);
* `heuristics.extract`: forms them from a bound Helion kernel (ConfigSpec and device IR);
* `heuristics.rules`: the `Rule` interface, `Seed` / `Declined`, the rule registry;
* rules: `row_reduction` (softmax-like rows) and `matmul_epilogue_resident` (footprint-capped
  tiles for matmul + reduction epilogues).

`analyse(task)` returns the facts and what every rule made of them; `seeds_for(task)` only
the seeds (each with its rule, reason, facts and constants).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from heuristics import matmul_epilogue as _matmul_epilogue  # noqa: F401 - registers its rule
from heuristics import row_reduction as _row_reduction  # noqa: F401 - registers its rule
from heuristics.device import DeviceLimits, current_device
from heuristics.extract import facts_for_task
from heuristics.facts import KernelFacts
from heuristics.rules import Declined, Rule, RuleOutcome, Seed, register_rule, registered_rules, run_rules


@dataclass(frozen=True)
class Analysis:
    facts: KernelFacts
    device: DeviceLimits
    outcome: RuleOutcome

    def to_record(self) -> dict[str, Any]:
        """Provenance of the heuristic seeds, JSON-able (recorded with a session)."""
        return {"device": {"name": self.device.name, "smem_per_block": self.device.smem_per_block,
                           "sm_count": self.device.sm_count, "source": self.device.source},
                "seeds": [s.to_record() for s in self.outcome.seeds],
                "declined": [d.to_record() for d in self.outcome.declined]}


def analyse(task: Any, device: DeviceLimits | None = None) -> Analysis:
    """Facts of the task's kernel and every rule's answer for its space."""
    device = device or current_device()
    facts = facts_for_task(task)
    return Analysis(facts=facts, device=device, outcome=run_rules(facts, task.space, device))


def seeds_for(task: Any) -> list[Seed]:
    """All seeds the rules emit for a tuning task (empty when no rule's facts are present)."""
    return list(analyse(task).outcome.seeds)


__all__ = ["Analysis", "Declined", "DeviceLimits", "Rule", "Seed", "analyse", "register_rule",
           "registered_rules", "seeds_for"]
