"""Every strategy's options, typed in one place (what `--option KEY=VALUE` may set).

Why: a strategy used to receive whatever `--option` parsed to and fail deep inside on a
value of the wrong type (`copies=many` ended as "'<' not supported between instances of
'str' and 'int'").  Here each option has a type and bounds, so every bad value is refused
before anything is built, in one line naming the option, what it takes and what was given.
The table is static (no strategy module is imported: some import optuna, helion or torch);
`tests/test_newcomer.py` checks it against the strategies' own signatures.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Mapping

from autotune.errors import UserError

_TRUE, _FALSE = ("true", "yes", "1", "on"), ("false", "no", "0", "off")


class StrategyOptionError(UserError, ValueError):
    """An option a strategy does not take, or a value of the wrong type or out of range (one line)."""


@dataclass(frozen=True)
class Option:
    """One option: its type (int, float, bool, str or "json"), bounds, allowed words, and whether
    `none` (the strategy's own default) may be given."""

    kind: Any
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    nullable: bool = False

    def describe(self) -> str:
        """What the option takes, in a few words ("an integer >= 1", "one of quick, full")."""
        if self.choices:
            text = f"one of {', '.join(self.choices)}"
        else:
            text = {int: "an integer", float: "a number", bool: "true or false", str: "a string",
                    "json": "JSON text (or a mapping)"}[self.kind]
            if self.low is not None and self.high is not None:
                text += f" from {self.low:g} to {self.high:g}"
            elif self.low is not None:
                text += f" >= {self.low:g}"
        return text + (" (or none)" if self.nullable else "")

    def coerce(self, value: Any) -> Any:
        """`value` (text from the command line, or a typed value from the API or a resumed
        session) as this option's type; ValueError if it is not one."""
        if self.nullable and (value is None or (isinstance(value, str) and value.strip().lower() == "none")):
            return None
        if self.kind == "json":
            if isinstance(value, str):
                json.loads(value)  # malformed text is refused here, not deep in the strategy
            elif not isinstance(value, (Mapping, list, tuple)):
                raise ValueError(value)
            return value
        typed = _typed(self.kind, value)
        if self.choices and typed not in self.choices:
            raise ValueError(value)
        if self.low is not None and typed < self.low or self.high is not None and typed > self.high:
            raise ValueError(value)
        return typed


def _typed(kind: Any, value: Any) -> Any:
    text = value.strip() if isinstance(value, str) else None
    if kind is bool:
        if isinstance(value, bool):
            return value
        if text is not None and text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
        raise ValueError(value)
    if isinstance(value, bool):  # True is an int to Python, never to a user
        raise ValueError(value)
    if kind is int:
        if isinstance(value, int):
            return value
        if text is not None and text.lstrip("+-").isascii() and text.lstrip("+-").isdigit():
            return int(text)
        raise ValueError(value)
    if kind is float:
        number = float(text) if text is not None else value
        if not isinstance(number, (int, float)) or not math.isfinite(number):
            raise ValueError(value)
        return float(number)
    if kind is str:
        if text is None:
            raise ValueError(value)
        return text
    raise TypeError(f"unknown option kind {kind!r}")


# The pattern walk's options (`pattern.PatternOptions`), taken by `pattern`, each of its presets
# and `auto` alike: a preset's name sets the fields its options set, `--option` the ones it names.
_PATTERN = {"initial_population": Option(int, 1), "copies": Option(int, 1), "max_generations": Option(int, 1),
            "min_improvement": Option(float, 0.0), "max_neighbours": Option(int, 1, nullable=True),
            "radius": Option(int, 1), "explore": Option(str, choices=("stalled", "first")),
            "restarts": Option(int, 0), "look": Option(str, choices=("none", "ends", "full")),
            "line_reach": Option(int, 0), "orders": Option(bool), "focus": Option(bool), "ties": Option(bool),
            "paths": Option(int, 1)}
_OPTUNA = {"n_startup_trials": Option(int, 0)}
_HELION = {"effort": Option(str, choices=("quick", "full"))}

#: strategy name -> option name -> Option.  Options a strategy gets from elsewhere are not here:
#: the budget and task (every `from_task`), grid's names and sample (--grid, --grid-sample).
OPTIONS: dict[str, dict[str, Option]] = {
    "auto": _PATTERN,
    "evolution": {"population": Option(int, 2), "tournament": Option(int, 1),
                  "mutation": Option(float, 0.0, 1.0, nullable=True), "redraws": Option(int, 1),
                  "nearest": Option(float, 0.0, 1.0)},
    "fixed": {"configs": Option("json")},
    "gp": _OPTUNA,
    "grid": {},
    "helion-lfbo": _HELION,
    "helion-pattern": _HELION,
    "pattern": _PATTERN,
    "pattern-ends": _PATTERN,
    "pattern-focus": _PATTERN,
    "pattern-full": _PATTERN,
    "pattern-lines": _PATTERN,
    "pattern-orders": _PATTERN,
    "pattern-reach": _PATTERN,
    "pattern-ties": _PATTERN,
    "random": {"screen": Option(str, choices=("footprint",))},
    "surrogate": {"initial_points": Option(int, 2)},
    "tpe": _OPTUNA,
}


def check_options(strategy: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """`options` typed for `strategy`; StrategyOptionError (one line) for an option it does not
    take or a value that is not of the option's type.  A strategy missing from the table (one
    being written) gets its options as given: its constructor still refuses unknown ones."""
    table = OPTIONS.get(strategy)
    if table is None:
        return {name: _guessed(value) for name, value in options.items()}
    typed: dict[str, Any] = {}
    for name, value in options.items():
        option = table.get(name)
        if option is None:
            takes = f"its options: {', '.join(sorted(table))}" if table else "it takes none"
            raise StrategyOptionError(f"strategy {strategy!r} takes no option {name!r} ({takes})")
        try:
            typed[name] = option.coerce(value)
        except (ValueError, TypeError, OverflowError):
            raise StrategyOptionError(f"--option {name}: strategy {strategy!r} takes {option.describe()}, "
                                      f"got {_shown(value)}") from None
    return typed


def parse_option_items(items: list[str] | tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """['effort=full', 'copies=4'] -> (('effort', 'full'), ('copies', '4')): KEY=VALUE pairs as
    text; each strategy types its own (`check_options`)."""
    pairs = []
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise StrategyOptionError(f"--option takes KEY=VALUE, got {item!r}")
        pairs.append((key.strip(), text))
    return tuple(pairs)


def _guessed(value: Any) -> Any:
    """Text typed by its look (true/false, integers, numbers), for a strategy with no table."""
    if not isinstance(value, str):
        return value
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            continue
    return value


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
