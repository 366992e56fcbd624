"""Records the large random samples that `autotune simulate` benchmarks strategies on.

On a GPU machine, from the project root:

    python -m experiments.record_large PART [--db user.db] [--seconds 480]
    python -m experiments.record_large --status        # where every part stands (any machine)

A part is done when its space holds TARGET distinct configs that ran correctly (measured by
any session), or every point of the space where it has fewer.  Until then each call
continues the part's unfinished random-search session, or starts the next one (seed 11,
then 12, ...: a finished session whose configs partly failed or repeated others leaves the
part short), measuring for about SECONDS (plus the set-up and the configs in flight at the
end).  Each config is committed as it is measured, so a long recording is made in short calls
and a killed call loses at most the config in flight.  Exit status: 0 when the part is done or --status, 2 for bad input, else the tune command's.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from autotune.store.cache import Cache
from autotune.databases import open_for_reading
from autotune.tuning import FINISHED  # a session's exit reasons that leave nothing to resume

TARGET = 2000  # distinct valid configs per part (the floor for a benchmark space)
FIRST_SEED = 11
SESSION_BUDGET = 2000
# A generation waits for its slowest compile (up to the compile timeout): on the H100, 64-config
# generations of the Helion softmax took ~14 s without a timeout and ~30-50 s with one (about
# 1 config in 20 timed out), so new sessions ask 256 at a time; a resumed one keeps its own.
GENERATION_SIZE = 256
COMPILE_TIMEOUT_S = 30  # as the earlier recordings of these spaces: their oracles stay comparable
TIMING_MS = 40  # GPU time spent timing each config, as the earlier recordings (the tune default is 250)


@dataclass(frozen=True)
class Part:
    name: str
    kernel: str
    shape: str
    dtype: str
    # Options of the random strategy: a screen restricts the sample to the configs that can fit
    # (`heuristics.screen`); sessions with other options (an earlier, unscreened sample) count
    # towards the part's valid configs but are not continued.
    strategy_options: tuple[tuple[str, str], ...] = ()

    @property
    def dims(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.shape.split("x"))


PARTS = {part.name: part for part in (
    Part("softmax-4096", "softmax", "4096x32000", "float16"),
    Part("softmax-1024", "softmax", "1024x50257", "float16"),
    Part("online-4096", "softmax-online", "4096x32000", "float16"),
    # Two of the matmul + reduction-epilogue family (MxKxN), at a size between seed 004's tables.
    # Three in four of their random configs fail, mostly past the shared-memory or register
    # limits (layernorm's first session, 143, unscreened: 1,031 configs), so their sessions
    # sample only what the footprint screen lets through.
    Part("layernorm-16k", "matmul-layernorm", "16384x512x1024", "bfloat16", (("screen", "footprint"),)),
    Part("rmsnorm-16k", "matmul-rmsnorm", "16384x512x1024", "bfloat16", (("screen", "footprint"),)),
)}


@dataclass(frozen=True)
class Standing:
    """Where a part stands: its distinct valid configs, the target, and what to do next."""

    part: Part
    valid: int
    target: int
    resume: int | None  # the unfinished sample session to continue
    next_seed: int  # the seed of the next session, when none is unfinished

    @property
    def done(self) -> bool:
        return self.valid >= self.target

    def describe(self) -> str:
        state = ("done" if self.done else f"continue session {self.resume}" if self.resume is not None
                 else f"start a session with seed {self.next_seed}")
        return f"{self.part.name}: {self.valid}/{self.target} distinct valid configs; {state}"


def standing(cache: Cache, part: Part) -> Standing:
    """Read the part's state off the database: the GPU sessions of its kernel, shape and dtype."""
    sessions = [s for s in cache.sessions(limit=1_000_000)
                if (s["kernel"], tuple(s["shape"]), s["dtype"], s["mode"]) == (part.kernel, part.dims, part.dtype, "gpu")]
    if not sessions:
        return Standing(part, 0, TARGET, None, FIRST_SEED)
    fingerprint = max(sessions, key=lambda s: s["id"])["space_fingerprint"]
    samples = [s for s in sessions if s["space_fingerprint"] == fingerprint and s["strategy"] == "random"
               and s["seed"] >= FIRST_SEED and s["budget"] == SESSION_BUDGET]
    unfinished = [s["id"] for s in samples if s["exit_reason"] not in FINISHED
                  and s["options"].get("strategy_options", {}) == dict(part.strategy_options)]
    record = cache.get_space(fingerprint)
    target = min(TARGET, record.space.cardinality()) if record is not None else TARGET
    return Standing(part, cache.distinct_valid(fingerprint), target, max(unfinished, default=None),
                    max((s["seed"] for s in samples), default=FIRST_SEED - 1) + 1)


def tune_arguments(step: Standing, db: Path, seconds: float) -> list[str]:
    """The `autotune tune` command line that makes the next step of a part."""
    common = ["--db", str(db), "--seconds", str(seconds), "--compile-timeout", str(COMPILE_TIMEOUT_S),
              "--timing-ms", str(TIMING_MS)]
    if step.resume is not None:
        return ["tune", "--resume", str(step.resume), *common]
    part = step.part
    return ["tune", part.kernel, "--shape", part.shape, "--dtype", part.dtype, "--strategy", "random",
            "--seed", str(step.next_seed), "--budget", str(SESSION_BUDGET), "--generation-size",
            str(GENERATION_SIZE), *[f"--option={k}={v}" for k, v in part.strategy_options], *common]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.record_large", description=__doc__.split("\n")[0])
    parser.add_argument("part", nargs="?", choices=sorted(PARTS), help="the sample to record")
    parser.add_argument("--status", action="store_true", help="print where every part stands and exit")
    parser.add_argument("--db", type=Path, default=Path("user.db"),
                        help="records here; reads it with the shipped cache.db (merge into cache.db to ship)")
    parser.add_argument("--seconds", type=float, default=480.0,
                        help="seconds of measuring (default 480); the GPU set-up before it (about 40 s) and the "
                             "configs in flight when it ends (up to the 30 s compile timeout) come on top")
    args = parser.parse_args(argv)
    if not args.status and args.part is None:
        parser.error("name a part or give --status")
    if args.seconds <= 0:
        parser.error("--seconds must be positive")
    if not args.db.exists() and not Path("data/shipped.db").exists():
        print(f"record_large: no database {args.db} (nor cache.db)", file=sys.stderr)
        return 2
    cache = open_for_reading(args.db)
    try:
        steps = [standing(cache, part) for part in (PARTS.values() if args.status else [PARTS[args.part]])]
    finally:
        cache.close()
    for step in steps:
        print(step.describe())
    if args.status or steps[0].done:
        return 0
    from autotune.cli import main as autotune_main

    return autotune_main(tune_arguments(steps[0], args.db, args.seconds))


if __name__ == "__main__":
    sys.exit(main())
