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
    # The eight pattern walks folded into one `pattern` with options, each old name a preset of
    # them (`pattern_presets`).  Proven three ways: every preset asks, ask by ask, what its class
    # asked before the fold on three recorded spaces, cold and warm (`tests/test_pattern_golden.py`);
    # the shipped sessions under each source below re-ran the same (`autotune rerun --strategy NAME`:
    # all of pattern-ties' 126, pattern-full's 57, pattern-reach's 48, pattern-focus' 27,
    # pattern-orders' 21 and pattern-lines' 12; of pattern and pattern-ends, the first and last
    # under each source, as `tests/test_rerun.py` does for every source); and each source listed
    # was itself proven against the one before it (two earlier moves of code: the line look given a
    # module of its own, a kick's move made a hook).  Only sources that recorded sessions are listed.
    "pattern": {"e8069e2d75c3c87332f0cedd": ("b21e1c392c7fc3e5e9732c00",)},
    "pattern-ends": {"acb54aeb725d5aa694371a32": ("730303fae2427c7d207720a6", "e9e2e756287f73e92b9329c5")},
    "pattern-full": {"e5acd9455ce6bb01ba369844": ("ee7b2739b3940bf1dedc7ce6",)},
    "pattern-focus": {"40e5ae99eefd461144c0fa9c": ("950fbdaa159f5eca9e35b70a",)},
    "pattern-orders": {"22ecf6cece7e7cb00f1e6ba6": ("8fc162aacdb6d7eed17e2847",)},
    "pattern-lines": {"97a7d347606bda22e002017a": ("feb872a3ce6830bb4173c5dc",)},
    "pattern-reach": {"efaa32674e7a695345443e37": ("c956ca43a40c2ce89ae85235", "c1b1126c8c1ec935a0508619")},
    "pattern-ties": {"8ee313e3e5f440255d69b278": ("fad6d91e3f204885a901cbe1",)},
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
