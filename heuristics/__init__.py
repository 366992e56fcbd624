"""Heuristic seeding: facts read off a kernel's space and shape, rules that emit seed configs.

So far one rule: `softmax_row` for row reductions in the one-row-tile form
(`heuristics.softmax`).  `seeds_for(task)` returns every seed with its rule and reason.
"""

from __future__ import annotations

from typing import Any

from heuristics.softmax import Seed, row_reduction_fact, softmax_row_seeds


def seeds_for(task: Any) -> list[Seed]:
    """All seeds the rules emit for a tuning task (empty when no rule's facts are present)."""
    fact = row_reduction_fact(task.space, tuple(task.shape))
    return softmax_row_seeds(fact, task.space) if fact is not None else []


__all__ = ["Seed", "seeds_for"]
