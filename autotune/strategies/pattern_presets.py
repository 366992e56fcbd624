"""Named sets of pattern options: the walks once written one class each, and `auto`, the default.

Why presets: the pattern walks were eight classes, each written after a stall of the Helion
softmax at a long row (the held-out study, `experiments/heldout`), each extending the one
before.  They are one walk with options now (`pattern.PatternOptions`), and each old name
stands for the options its class had, so every recorded session still says what it ran
(`autotune rerun --strategy pattern-reach` re-runs it with today's source;
`tests/test_pattern_golden.py` proves each preset asks what its class asked).  `--option`s
given with a preset's name change only the fields they name.

`auto` is the default strategy of `autotune tune` and `autotune.tune()`; what it is was chosen
on every recorded space (`experiments/strategy_choice.py`, report in
`experiments/reports/strategy_choice.md`).  `RETIRED` presets are those that report does not
support: they still run by name (a recorded session replays), but are not offered for new
sessions (`strategy_names()`); docs/tuning.md says why for each.
"""

from __future__ import annotations

from autotune.strategies.pattern import PatternOptions, PatternSearch
from autotune.strategies.pattern_line_look import LINE_REACH, NOISE_FLOOR

_LINES = dict(look="full", line_reach=LINE_REACH, min_improvement=NOISE_FLOOR)

PRESETS: dict[str, PatternOptions] = {
    # the walk alone
    "pattern": PatternOptions(),
    # the far ends of each ordered parameter before a path stops (the whole row beyond slower chunks)
    "pattern-ends": PatternOptions(look="ends"),
    # also the neighbours the cap left out: a path stops only where no single move is better
    "pattern-full": PatternOptions(look="full"),
    # `pattern-full` whose kicks move the parameters that mattered where the walk stopped
    "pattern-focus": PatternOptions(look="full", focus=True),
    # `pattern-full` from one first path in each program order
    "pattern-orders": PatternOptions(look="full", orders=True),
    # the noise floor and the look along each ordered parameter, from one path per program order
    "pattern-lines": PatternOptions(orders=True, **_LINES),
    # the same from one first path (the program-order paths doubled the first generations' cost)
    "pattern-reach": PatternOptions(**_LINES),
    # `pattern-reach` that also follows moves within a percent of each path's best move
    "pattern-ties": PatternOptions(ties=True, **_LINES),
}

#: The default strategy's options: `pattern-ties`' (experiments/reports/strategy_choice.md: level
#: with every preset on the simulated spaces, and the one cold walk the held-out GPU study met at
#: all 29 softmax shapes).
AUTO = PRESETS["pattern-ties"]

#: Presets not offered for new sessions (still run by name): the two that missed on the held-out
#: shapes declared after them (`pattern-orders` at 2560x90112, `pattern-lines` at 3584x73728), and
#: that the simulated spaces find no better than the walks they extend.  docs/tuning.md says more.
RETIRED: tuple[str, ...] = ("pattern-lines", "pattern-orders")


def _preset(name: str, options: PatternOptions, class_name: str) -> type[PatternSearch]:
    return type(class_name, (PatternSearch,), {
        "name": name, "preset": options, "preset_only": True, "__module__": __name__,
        "__doc__": f"The pattern walk with the `{name}` options: {options.changed() or 'the defaults'}."})


EndsPatternSearch = _preset("pattern-ends", PRESETS["pattern-ends"], "EndsPatternSearch")
FullPatternSearch = _preset("pattern-full", PRESETS["pattern-full"], "FullPatternSearch")
FocusPatternSearch = _preset("pattern-focus", PRESETS["pattern-focus"], "FocusPatternSearch")
OrdersPatternSearch = _preset("pattern-orders", PRESETS["pattern-orders"], "OrdersPatternSearch")
LinesPatternSearch = _preset("pattern-lines", PRESETS["pattern-lines"], "LinesPatternSearch")
ReachPatternSearch = _preset("pattern-reach", PRESETS["pattern-reach"], "ReachPatternSearch")
TiesPatternSearch = _preset("pattern-ties", PRESETS["pattern-ties"], "TiesPatternSearch")
AutoSearch = _preset("auto", AUTO, "AutoSearch")
