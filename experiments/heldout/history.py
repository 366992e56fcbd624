"""How the held-out study was run: each change to a strategy or seed rule, what led to it, and the
shapes (or cells) declared after it that judge it, as the report's list.

Why a module of its own: the list grows by one entry with every change the study judges, and it
is prose about the study's history, not a figure read from the data.
"""

from __future__ import annotations

from pathlib import Path

from . import definition as d


def how_run(db: Path, others: dict[str, list[str]] | None = None) -> list[str]:
    """The report's section body: where it was regenerated from, each change as a list item, and
    the sessions of other kernels recorded at the study's shapes (`others`: shape -> sessions)."""
    lines = [f"Regenerated from `{db}` (with the shipped data beside it) by `python -m experiments.heldout.report`. "
             "The shapes were declared in `experiments/heldout/definition.py` before anything was measured on them; "
             "no seed rule names them and no recorded session of their kernel is at them (`tests/test_heldout.py`). "
             "Each change below says which shapes (or cells) it was fitted on, and which, declared after it before "
             "anything was measured on them, judge it.", ""]
    lines += [f"- {change}" for change in changes()] + [""]
    if others:
        lines += ["Sessions of other kernels recorded at them (they say nothing about these kernels' configs, and no "
                  "seed source reads them): "
                  + "; ".join(f"{shape}: {', '.join(found)}" for shape, found in sorted(others.items())) + ".", ""]
    return lines


def changes() -> list[str]:
    """Each change, in the order made."""
    return [
        f"The pattern search was changed after its runs at the first {len(d.FIRST_SHAPES)} softmax shapes "
        "(its paths now start from the given configs, and a stalled search restarts): those shapes are no "
        "longer held out for it, and its runs there before the change are labelled '(earlier version)'. "
        f"{' and '.join(d.LATER_SHAPES)} were declared after the change, before anything was measured on them: "
        "they are where the change is judged.",
        "Two findings at those eight shapes then changed the warm arms' seeds (the row rule's two-pass seeds, "
        "now at 32 and 16 values a thread, and cache seeds carried to a wider row with the chunk they were "
        "measured with: `definition.SEEDS_VERSION`). For the warm arms the eight shapes are fitted since; runs "
        "there before the change are labelled '(earlier seeds)' where it changed their seeds, and "
        f"{', '.join(d.REVISED_SHAPES)}, declared after it before anything was measured on them, judge it.",
        "The cold pattern search stalled at 3072x49152 short of a whole-row config behind slower looped "
        "ones; `pattern-ends` (the same walk, looking at each ordered parameter's far ends before a path "
        "stops) was written after that, so those eleven shapes are fitted for it, and "
        f"{' and '.join(d.ENDS_SHAPES)}, declared after it before anything was measured on them, judge it.",
        f"The resident matmul rule was revised after the runs at the first {len(d.MATMUL_FIRST)} matmul cells "
        "(past half the register file, M 16 with tensor-descriptor loads; the persistent program order): "
        "those cells are fitted for it, its earlier seeds' runs there are labelled '(earlier seeds)', and "
        f"{', '.join(p.label for p in d.MATMUL_REVISED)}, declared after it before anything was measured on "
        "them, judge it by its seeds.",
        "A second revision followed the runs at those eight cells (descriptors "
        "built on the host): the eight are fitted for it, runs whose seeds it changed (where the rule loads "
        "through descriptors) are labelled '(earlier seeds)', and "
        f"{', '.join(p.label for p in d.MATMUL_HOST_DESCRIPTORS)}, declared after it before anything was "
        "measured on them, judge it by its seeds.",
        "A third revision followed the runs at those twelve cells "
        "(the rule's tile in each of the three program orders, and where descriptors drop the M tile to 16, "
        "the register budget's M tile beside it: several seeds where there was one, the first still the "
        "rule's choice, and the seed figure the fastest of them): the twelve are fitted for it, every run "
        "of the earlier seeds is labelled '(earlier seeds)', and "
        f"{', '.join(p.label for p in d.MATMUL_THIRD)}, declared after it before anything was measured on "
        "them, judge it.",
        "The cache seed source was changed after the warm-cache runs at the "
        f"{d.SOFTMAX_SHAPES.index(d.CACHE_SHAPES[0])} softmax shapes above (the fastest config of each of "
        "the nearest shapes, not the nearest shape's fastest configs alone): those shapes are fitted for that "
        f"change, and {' and '.join(d.CACHE_SHAPES)}, declared after it before anything was measured on them, "
        "judge it.",
        "The row rule was revised a third time after the warm-heuristic runs at those "
        f"{d.SOFTMAX_SHAPES.index(d.FEW_ROWS_SHAPES[0])} shapes (32 warps for its two-pass and persistent "
        "seeds where rows are few and long, at most 16 a SM): the five such shapes are fitted for it, runs "
        "there with the earlier seeds are labelled '(earlier seeds)', and "
        f"{' and '.join(d.FEW_ROWS_SHAPES)}, declared after it before anything was measured on them, judge it.",
        "The cold `pattern-ends` search stopped short at 1792x81920 where the random draw of a centre's "
        "neighbours (`max_neighbours`) had left out the one move after which the next chunk pays; "
        "`pattern-full` (the same walk, which also looks at the neighbours the draw left out before a path "
        f"stops) was written after that, so those {d.SOFTMAX_SHAPES.index(d.FULL_SHAPES[0])} shapes are fitted "
        f"for it, and {' and '.join(d.FULL_SHAPES)}, declared after it before anything was measured on them, "
        "judge it.",
        "`pattern-full` then stopped at 4096x65536 on a centre that only two moves together leave "
        "(16 warps and one load's eviction hint dropped), among many moves that change nothing; `pattern-focus` "
        "(the same walk, whose exploration kicks draw their moves by how much each parameter's moves changed the "
        f"time where the walk stopped) was written after that, so those {d.SOFTMAX_SHAPES.index(d.FOCUS_SHAPES[0])} "
        f"shapes are fitted for it, and {' and '.join(d.FOCUS_SHAPES)}, declared after it before anything was "
        "measured on them, judge it.",
        "Every cold pattern run that stopped short at 1792x81920, 3072x81920 and "
        "8192x12345 had stayed in the flat program order where the best ran persistent (the section on where "
        "the cold walks stopped); `pattern-orders` (the `pattern-full` walk whose first paths start one in each "
        f"program order) was written after that, so those {d.SOFTMAX_SHAPES.index(d.ORDERS_SHAPES[0])} shapes "
        f"are fitted for it, and {' and '.join(d.ORDERS_SHAPES)}, declared after it before anything was "
        "measured on them, judge it.",
        "At 2560x90112 the cold walks then stood at a chunk whose next value up "
        "tiles the row unevenly and is slower, while the best ran the chunk two doublings up, and one walk spent "
        "its last generations on moves within the timing noise; `pattern-lines` (the `pattern-orders` walk "
        "whose paths stop at the noise floor and look a few steps along each ordered parameter) was written "
        f"after that, so those {d.SOFTMAX_SHAPES.index(d.LINES_SHAPES[0])} shapes are fitted for it, and "
        f"{' and '.join(d.LINES_SHAPES)}, declared after it before anything was measured on them, judge it.",
        "Most `pattern-lines` and `pattern-orders` runs that stopped short at 1792x81920, 2560x90112 and "
        "3584x73728 were then still climbing when their search limit cut them (their first generations carry a "
        "path per program order), while one-path walks stood at 2560x90112 a chunk two doublings below the "
        "best's; `pattern-reach` (`pattern-lines`' noise floor and look on a single first path, as "
        f"`pattern-full`'s) was written after that, so those {d.SOFTMAX_SHAPES.index(d.REACH_SHAPES[0])} shapes "
        f"are fitted for it, and {' and '.join(d.REACH_SHAPES)}, declared after it before anything was measured "
        "on them, judge it.",
        "At 1792x81920 the cold `pattern-reach` walks that took the faster of two level moves "
        "from the default (two loads' eviction hints, within a percent of each other) never reached the larger "
        "chunk that pays only with the other hint, while the walk that took that one did; `pattern-ties` (the "
        "`pattern-reach` walk that follows the moves level with a path's best move as paths of their own) was "
        f"written after that, so those {d.SOFTMAX_SHAPES.index(d.TIES_SHAPES[0])} shapes are fitted for it, and "
        f"{' and '.join(d.TIES_SHAPES)}, declared after it before anything was measured on them, judge it.",
        "The cache source then kept a carried whole row to as many loop stages as shared memory holds "
        "(`heuristics/transfer.py`): its one config staged over several stages, the fastest at 1024x50257, "
        "had run out of shared memory at each of the "
        f"{sum(d.cache_stages_cut(p) for p in d.SOFTMAX)} shapes whose row pads to 64K values, where its runs "
        "are now labelled '(earlier seeds)'. Those shapes are fitted for the change and no declared shape "
        "judges it, since it changes the seeds nowhere else.",
    ]
