"""Earlier sources of a strategy proven to ask what its present source asks.

A session records the hash of its strategy's source (`strategy_source`), and a study keeps the
runs of a changed strategy apart.  A change that moves code without changing one proposal (a
helper shared, a piece given its own module) changes the hash all the same.  The earlier sources
declared here are those whose every recorded session today's source re-ran and asked the same,
generation by generation (`autotune rerun --strategy NAME --source HASH`,
`autotune.simulation.rerun`): their runs count as runs of today's strategy.

Each declaration is keyed by the present source it was proven against, so it lapses by itself
at the strategy's next change; a later proof lists every source it covers.
"""

from __future__ import annotations

from functools import lru_cache

# strategy -> {present source: earlier sources proven to ask the same}
PROVEN_SAME: dict[str, dict[str, tuple[str, ...]]] = {}


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
