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
PROVEN_SAME: dict[str, dict[str, tuple[str, ...]]] = {
    # The line look and noise floor given a module of their own (`pattern_line_look`), which
    # `pattern-reach` now extends directly instead of switching off `pattern-orders`' starts;
    # `pattern-full`'s look and `pattern-lines`' de-duplicated with `pattern._unique`;
    # `pattern-orders` reads its parameter with `SearchSpace.parameter`; `pattern-focus`'s
    # docstring.  Every recorded session under each earlier source re-ran the same: 57, 27, 21,
    # 12 and 6 sessions.
    "pattern-full": {"2fed39e2597babf7fcdcdd22": ("ee7b2739b3940bf1dedc7ce6",)},
    "pattern-focus": {"73245a9b0bbb618e94021604": ("950fbdaa159f5eca9e35b70a",)},
    "pattern-orders": {"492eff67111af92185b611c9": ("8fc162aacdb6d7eed17e2847",)},
    "pattern-lines": {"fe7ca7ed88a4f4f742f6a8aa": ("feb872a3ce6830bb4173c5dc",)},
    "pattern-reach": {"3417603eadb8e736321f0ca5": ("c1b1126c8c1ec935a0508619",)},
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
