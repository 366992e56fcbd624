"""Search strategies, looked up by name.

The registry is lazy (a name maps to a module and class) so a strategy whose optional
dependency is missing fails only when it is asked for.
"""

from __future__ import annotations

import importlib

from autotune.strategies.base import Observation, Strategy

_REGISTRY: dict[str, tuple[str, str]] = {
    "evolution": ("autotune.strategies.evolution", "EvolutionSearch"),
    "fixed": ("autotune.strategies.fixed", "FixedList"),
    "gp": ("autotune.strategies.optuna_search", "GPSearch"),
    "grid": ("autotune.strategies.grid", "GridSearch"),
    "helion-lfbo": ("autotune.strategies.helion_search", "HelionLFBOSearch"),
    "helion-pattern": ("autotune.strategies.helion_search", "HelionPatternSearch"),
    "pattern": ("autotune.strategies.pattern", "PatternSearch"),
    "pattern-ends": ("autotune.strategies.pattern_ends", "EndsPatternSearch"),
    "pattern-focus": ("autotune.strategies.pattern_focus", "FocusPatternSearch"),
    "pattern-full": ("autotune.strategies.pattern_full", "FullPatternSearch"),
    "pattern-lines": ("autotune.strategies.pattern_lines", "LinesPatternSearch"),
    "pattern-orders": ("autotune.strategies.pattern_orders", "OrdersPatternSearch"),
    "pattern-reach": ("autotune.strategies.pattern_reach", "ReachPatternSearch"),
    "pattern-ties": ("autotune.strategies.pattern_ties", "TiesPatternSearch"),
    "random": ("autotune.strategies.random_search", "RandomSearch"),
    "surrogate": ("autotune.strategies.surrogate", "SurrogateSearch"),
    "tpe": ("autotune.strategies.optuna_search", "TPESearch"),
}


class UnknownStrategy(KeyError):
    pass


def strategy_names() -> list[str]:
    return sorted(_REGISTRY)


def get_strategy(name: str) -> type[Strategy]:
    if name not in _REGISTRY:
        raise UnknownStrategy(f"unknown strategy {name!r} (known: {', '.join(strategy_names())})")
    module, cls = _REGISTRY[name]
    return getattr(importlib.import_module(module), cls)


def strategy_source(name: str) -> str:
    """The hash of the source of the modules that define strategy `name`: its own and those of
    the strategies it extends (not the shared base class).  Sessions record it, so a study can
    tell runs of a changed strategy from runs of the one it measures now (as a kernel's source
    hash does for its measurements)."""
    import inspect

    from search_spaces.fingerprint import source_hash

    modules: list = []
    for cls in get_strategy(name).__mro__:
        module = inspect.getmodule(cls)
        if issubclass(cls, Strategy) and cls is not Strategy and module not in modules:
            modules.append(module)
    return source_hash("".join(inspect.getsource(module) for module in modules))


__all__ = ["Observation", "Strategy", "UnknownStrategy", "get_strategy", "strategy_names", "strategy_source"]
