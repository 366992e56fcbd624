"""Golden records of what each pattern preset asks, to prove a refactor of the walk asks the same.

Why: the pattern walks were eight classes; they are one `pattern` with named options now, and
sessions recorded under the old names must still mean what they meant.  Before the fold, each
preset was run on recorded spaces (cold: nothing given; warm: three recorded points given
first) and what it asked, ask by ask, was hashed into `tests/data/pattern_golden.json`.
`tests/test_pattern_golden.py` runs today's source the same way and compares.

Regenerate (only when a walk is meant to change): `python -m tests.pattern_golden`.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from autotune.simulation.oracle import NOT_RECORDED, RecordedSpace, point_text

REPO = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).parent / "data" / "pattern_golden.json"
PRESETS = ("pattern", "pattern-ends", "pattern-focus", "pattern-full", "pattern-lines", "pattern-orders",
           "pattern-reach", "pattern-ties")
# Three recorded spaces: a random sample of the Helion softmax (sparse: walks stall at once and
# advance by restarts), a long-row softmax recorded by the held-out study's walks (dense around
# the default, with its program orders `pid_type`, which `pattern-orders` and `pattern-lines`
# start across) and a whole Kernel Tuner space (no program order; walks move far).
SPACES = ("softmax-4096x32000", "softmax-1792x81920", "convolution_A4000")
BUDGET = 200
COLD_SEED, WARM_SEED = 0, 1


@lru_cache(maxsize=None)
def recorded_space(name: str) -> RecordedSpace:
    """One of `SPACES`, read from the shipped data or the Kernel Tuner file."""
    if name == "convolution_A4000":
        from experiments.kernel_tuner_comparison import HUB, _recorded

        return _recorded(HUB / "convolution_A4000.json.gz")
    from autotune.databases import SHIPPED_DB, open_for_reading

    shape = tuple(int(n) for n in name.split("-")[1].split("x"))
    cache = open_for_reading(REPO / "no-user.db", REPO / SHIPPED_DB)  # the shipped data alone
    try:
        record = max((r for r in cache.find_spaces("softmax", shape, "float16") if r.evaluations > 0),
                     key=lambda r: r.evaluations)
        return RecordedSpace.from_cache(cache, record.fingerprint)
    finally:
        cache.close()


def warm_points(recorded: RecordedSpace) -> list[dict[str, Any]]:
    """What a warm run is given before its first ask: the space's default where it was recorded
    (as a session gives it), and three recorded valid points at the middle, 70th and 90th
    percentile of time (slow ones: the walk has to move)."""
    lookup = recorded.lookup()
    valid = sorted((p for p in recorded.space.members if lookup(p) and lookup(p)[0] < float("inf")),
                   key=lambda p: (lookup(p)[0], point_text(p)))
    default = [recorded.space.default] if lookup(recorded.space.default) else []
    return default + [valid[int(len(valid) * q)] for q in (0.5, 0.7, 0.9)]


def asked_hashes(build: Callable[[Any, int], Any], space_name: str, warm: bool) -> list[list[Any]]:
    """Run the strategy `build(space, seed)` for `BUDGET` evaluations answered by the recorded
    space; per ask: [how many it asked, a short hash of their keys in order]."""
    recorded = recorded_space(space_name)
    lookup = recorded.lookup()
    strategy = build(recorded.space, WARM_SEED if warm else COLD_SEED)
    if warm:
        strategy.warm_start([(p, lookup(p)[2]) for p in warm_points(recorded)])
    asks: list[list[Any]] = []
    spent = 0
    while spent < BUDGET:
        batch = strategy.ask(min(strategy.generation_size, BUDGET - spent))
        if not batch:
            break
        spent += len(batch)
        text = "\n".join(point_text(p) for p in batch)
        asks.append([len(batch), hashlib.sha1(text.encode()).hexdigest()[:12]])
        observations = []
        for params in batch:
            answer = lookup(params)
            observations.append((params, NOT_RECORDED if answer is None else answer[2]))
        strategy.tell(observations)
    return asks


def record() -> dict[str, Any]:
    from autotune.strategies import get_strategy

    runs: dict[str, Any] = {}
    for preset in PRESETS:
        for space_name in SPACES:
            for warm in (False, True):
                runs[f"{preset}|{space_name}|{'warm' if warm else 'cold'}"] = asked_hashes(
                    lambda space, seed: get_strategy(preset)(space, seed=seed), space_name, warm)
    return {"budget": BUDGET, "runs": runs}


if __name__ == "__main__":
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    golden = record()
    lines = [f'{json.dumps(name)}: {json.dumps(asks, separators=(",", ":"))}' for name, asks in sorted(golden["runs"].items())]
    GOLDEN.write_text('{"budget": %d, "runs": {\n' % golden["budget"] + ",\n".join(lines) + "\n}}\n")
    print(f"wrote {GOLDEN}")
