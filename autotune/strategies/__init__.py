"""Search strategies, looked up by name.

The registry is lazy (a name maps to a module and class) so a strategy whose optional
dependency is missing fails only when it is asked for.  The pattern walk's presets (old names
of walks that are options now, and `auto`, the default) are classes of `pattern_presets`; the
retired ones still run by name but are not offered (`strategy_names`).
"""

from __future__ import annotations

import importlib

from autotune.strategies.base import Observation, Strategy

_REGISTRY: dict[str, tuple[str, str]] = {
    "auto": ("autotune.strategies.pattern_presets", "AutoSearch"),
    "evolution": ("autotune.strategies.evolution", "EvolutionSearch"),
    "fixed": ("autotune.strategies.fixed", "FixedList"),
    "gp": ("autotune.strategies.optuna_search", "GPSearch"),
    "grid": ("autotune.strategies.grid", "GridSearch"),
    "helion-lfbo": ("autotune.strategies.helion_search", "HelionLFBOSearch"),
    "helion-pattern": ("autotune.strategies.helion_search", "HelionPatternSearch"),
    "pattern": ("autotune.strategies.pattern", "PatternSearch"),
    "pattern-ends": ("autotune.strategies.pattern_presets", "EndsPatternSearch"),
    "pattern-focus": ("autotune.strategies.pattern_presets", "FocusPatternSearch"),
    "pattern-full": ("autotune.strategies.pattern_presets", "FullPatternSearch"),
    "pattern-lines": ("autotune.strategies.pattern_presets", "LinesPatternSearch"),
    "pattern-orders": ("autotune.strategies.pattern_presets", "OrdersPatternSearch"),
    "pattern-reach": ("autotune.strategies.pattern_presets", "ReachPatternSearch"),
    "pattern-ties": ("autotune.strategies.pattern_presets", "TiesPatternSearch"),
    "random": ("autotune.strategies.random_search", "RandomSearch"),
    "surrogate": ("autotune.strategies.surrogate", "SurrogateSearch"),
    "tpe": ("autotune.strategies.optuna_search", "TPESearch"),
}


class UnknownStrategy(KeyError):
    pass


#: The strategy of a session that names none (`autotune tune`, `autotune.tune()`).
DEFAULT_STRATEGY = "auto"


def strategy_names(*, retired: bool = False) -> list[str]:
    """The strategies offered for new sessions; with `retired`, also those that only still run
    by name (presets the strategy-choice report does not support), so recorded sessions replay."""
    from autotune.strategies.pattern_presets import RETIRED

    return sorted(name for name in _REGISTRY if retired or name not in RETIRED)


def get_strategy(name: str) -> type[Strategy]:
    if name not in _REGISTRY:
        raise UnknownStrategy(f"unknown strategy {name!r} (known: {', '.join(strategy_names())})")
    module, cls = _REGISTRY[name]
    return getattr(importlib.import_module(module), cls)


def strategy_source(name: str) -> str:
    """The hash of the source of the modules that define strategy `name`: its own and those of
    the strategies it extends (not the shared base class), and for a pattern preset its options
    and the module its line-look values live in (not the preset table's own text, so that
    retiring one preset or choosing another for `auto` leaves the others' runs as they were).
    Sessions record it, so a study can tell runs of a changed strategy from runs of the one it
    measures now (as a kernel's source hash does for its measurements)."""
    import inspect

    from search_spaces.fingerprint import source_hash

    modules: list = []
    for cls in get_strategy(name).__mro__:
        module = inspect.getmodule(cls)
        if vars(cls).get("preset_only"):  # a preset's class: its options below, not the table's text
            continue
        if issubclass(cls, Strategy) and cls is not Strategy and module not in modules:
            modules.append(module)
    text = "".join(inspect.getsource(module) for module in modules)
    preset = getattr(get_strategy(name), "preset", None)
    if preset is not None:
        from autotune.strategies import pattern_line_look

        text += inspect.getsource(pattern_line_look) + repr(preset)
    return source_hash(text)


__all__ = ["DEFAULT_STRATEGY", "Observation", "Strategy", "UnknownStrategy", "get_strategy", "strategy_names", "strategy_source"]
