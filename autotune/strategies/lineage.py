"""Earlier sources of a strategy proven to ask what its present source asks.

A session records the hash of its strategy's source (`strategy_source`), and a study keeps the
runs of a changed strategy apart.  A change that moves code without changing one proposal (a
helper shared, a piece given its own module) changes the hash all the same.  The earlier sources
declared here are those whose every recorded session today's source re-ran and asked the same,
generation by generation (`autotune rerun --strategy NAME --source HASH`,
`autotune.simulation.rerun`), save sessions it could not give their seeds exactly (reported
inconclusive, never different): their runs count as runs of today's strategy.

Each declaration is keyed by the present source it was proven against, so it lapses by itself
at the strategy's next change; a later proof lists every source it covers.
"""

from __future__ import annotations

from functools import lru_cache

# strategy -> {present source: earlier sources proven to ask the same}
PROVEN_SAME: dict[str, dict[str, tuple[str, ...]]] = {
    # Two changes that moved code without changing a proposal: the line look and noise floor given
    # a module of their own (`pattern_line_look`, which `pattern-reach` now extends directly
    # instead of switching off `pattern-orders`' starts), the looks de-duplicated with
    # `pattern._unique`, `pattern-orders` reading its parameter with `SearchSpace.parameter`; then
    # a kick's move made a hook (`PatternSearch._kick_move`), which `pattern-focus` overrides
    # instead of repeating the kick loop.  Every recorded session under each earlier source re-ran
    # the same (pattern 178 of 179, pattern-ends 411 of 412: each one more is inconclusive, its
    # seeds recorded only as the configs they became; pattern-full 57, -focus 27, -orders 21,
    # -lines 12, -reach 6).
    "pattern": {"e64092787d1daefc6f8ca3f9": ("b21e1c392c7fc3e5e9732c00",)},
    "pattern-ends": {"730303fae2427c7d207720a6": ("e9e2e756287f73e92b9329c5",)},
    "pattern-full": {"382169b666e3c8ed5f5a99c6": ("ee7b2739b3940bf1dedc7ce6",)},
    "pattern-focus": {"d8a2b59cdd3ee0d4d1e29eb1": ("950fbdaa159f5eca9e35b70a",)},
    "pattern-orders": {"4c94b381d36d39bd0ecc5376": ("8fc162aacdb6d7eed17e2847",)},
    "pattern-lines": {"7e704dddde8675c33bfa4ac1": ("feb872a3ce6830bb4173c5dc",)},
    "pattern-reach": {"c956ca43a40c2ce89ae85235": ("c1b1126c8c1ec935a0508619",)},
}


@lru_cache(maxsize=None)
def present_source(strategy: str) -> str | None:
    """Today's source hash of `strategy`; None for a name no longer registered."""
    from autotune.strategies import UnknownStrategy, strategy_source

    try:
        return strategy_source(strategy)
    except UnknownStrategy:
        return None


def same_source(strategy: str, recorded: str | None) -> bool:
    """Whether a run recorded under source `recorded` is a run of today's `strategy`: the same
    source, or one declared in PROVEN_SAME against today's."""
    present = present_source(strategy)
    if recorded == present:
        return True
    return present is not None and recorded in PROVEN_SAME.get(strategy, {}).get(present, ())
