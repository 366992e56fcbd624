"""How often would compiling ahead have guessed the next generation, on recorded GPU runs?

Why: compiling ahead (autotune/evaluators/compile_ahead.py) pays only where its guess, the
strategy's copy told a generation's results with the configs still compiling as failures, names
the configs the next generation asks for, and only as far as the compile workers get with them
before that generation starts.  Both can be read off recorded runs without a GPU.

Each recorded run is re-run through the session loop against its own answers
(`autotune.simulation.rerun`, which also checks that today's strategy asks what the run asked).
At each generation the guess is made at the moment the run's recorded timeline says the GPU had
nothing left to time while configs still compiled: the generation's configs are taken to start
compiling when the generation starts (the previous generation's last result), each to finish
after its recorded compile time, and each to be known when its row was recorded; the moment is
the first at which at least half the generation is known, every config compiled by then has
been timed, and the others are still compiling.  Those others are the guess's unknowns.  The
compile workers would then have had until the generation's last result for the guessed configs
(the window).  A run whose generations are not asked again identically is read up to the first
that differs.

This is a reading of the recorded timelines, not a measurement: what compiling ahead saves on a
GPU is measured by `experiments.bench_overhead` (its compile-ahead variant) and the held-out
study's runs marked '(compiled ahead)'.

    python -m experiments.compile_ahead_replay                        # the study's worker-built cold runs
    python -m experiments.compile_ahead_replay --strategy pattern-ends --db cache.db --out runs/replay.md
"""

from __future__ import annotations

import argparse
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from autotune.store.cache import Cache
from autotune.errors import UserError
from autotune.experiment import experiment_tags
from autotune.experiment_devices import on_one_device
from autotune.simulation.rerun import rerun_session
from autotune.types import Candidate, Result
from experiments.heldout.data import study_sessions
from experiments.heldout.definition import STUDY

REPORT = Path("experiments/reports/compile_ahead_replay.md")


@dataclass(frozen=True)
class Moment:
    """When, in a generation, the GPU had nothing left to time: the keys known and still out then,
    and the seconds from then to the generation's last result."""

    known: frozenset[str]
    out: tuple[str, ...]
    window_s: float


def guess_moment(rows: Sequence[Any], started: float) -> Moment | None:
    """The moment for one generation's recorded rows (each with .candidate.key, .created and
    .result.compile_s), the generation having started at `started`; None where the GPU was busy
    until only the last config was left, or a row lacks its timing."""
    if len(rows) < 2 or any(row.created is None for row in rows):
        return None
    compiled = sorted(rows, key=lambda row: started + (row.result.compile_s or 0.0))
    end = max(row.created for row in rows)
    for count in range(math.ceil(len(rows) / 2), len(rows)):
        done, rest = compiled[:count], compiled[count:]
        timed_by = max(row.created for row in done)
        if timed_by <= started + (rest[0].result.compile_s or 0.0):
            return Moment(frozenset(row.candidate.key for row in done), tuple(row.candidate.key for row in rest),
                          max(0.0, end - timed_by))
    return None


@dataclass
class Probe:
    """An evaluator around a re-run's replay evaluator: answers as it does and, at each
    generation's moment, asks the session's guess, remembering what it named."""

    inner: Any
    rows: dict[str, Any]  # config key -> its recorded row
    asked: list[list[str]] = field(default_factory=list)  # per evaluate call, the keys asked
    guessed: list[list[str] | None] = field(default_factory=list)  # per call, the guess (None: no moment)
    windows: list[float] = field(default_factory=list)
    ended: float | None = None  # the previous generation's last result
    compiles_ahead = True

    @property
    def description(self) -> str:
        return self.inner.description

    def evaluate(self, candidates: Sequence[Candidate], guess: Any = None) -> Iterator[Result]:
        results = list(self.inner.evaluate(candidates))
        rows = [self.rows[c.key] for c in candidates if c.key in self.rows]
        moment = guess_moment(rows, self.ended) if guess is not None and self.ended is not None else None
        named = None
        if moment is not None:
            named = [c.key for c in guess([r for r in results if r.key in moment.known], list(moment.out))]
        self.asked.append([c.key for c in candidates])
        self.guessed.append(named)
        self.windows.append(moment.window_s if moment else 0.0)
        created = [row.created for row in rows if row.created is not None]
        if created:
            self.ended = max(created)
        yield from results

    def rebenchmark(self, candidates: Sequence[Candidate]) -> dict[str, Result]:
        return self.inner.rebenchmark(candidates)

    def baselines(self) -> dict[str, Result]:
        return self.inner.baselines()

    def close(self) -> None:
        self.inner.close()


@dataclass(frozen=True)
class RunReading:
    """One re-run: per generation after the first, how the guess made in the one before fared."""

    session: int
    shape: str
    seed: int
    generations: int  # generations read (those asked again identically, less the last)
    moments: int  # of those, generations whose predecessor had a moment to guess at
    next_configs: int  # configs the read generations asked
    named: int  # of which the guess before named
    unused: int  # guessed configs no generation asked next
    window_s: float  # the compile workers' time for the guesses, summed
    search_s: float  # the run's search time: from its first recorded result (the default config's) to its last

    @property
    def named_share(self) -> float:
        return self.named / self.next_configs if self.next_configs else 0.0


def read_run(cache: Cache, session: dict[str, Any]) -> RunReading:
    probes: list[Probe] = []

    def wrap(evaluator: Any, rows: list[Any]) -> Probe:
        probes.append(Probe(evaluator, {row.candidate.key: row for row in rows}))
        return probes[0]

    rerun = rerun_session(cache, session["id"], wrap=wrap)
    probe = probes[0]
    rows = [row for row in cache.session_evaluations(session["id"]) if row.generation >= 0 and row.created]
    first_search = min((row.created for row in rows if row.generation == 0), default=None)
    search_s = (max(row.created for row in rows) - first_search) if rows and first_search else 0.0
    read = min(rerun.matched, len(probe.asked))  # generations asked as recorded (0: the default's)
    generations = moments = next_configs = named = unused = 0
    window = 0.0
    for index in range(1, read - 1):  # the guess made in generation `index` against generation index + 1
        guess, following = probe.guessed[index], set(probe.asked[index + 1])
        generations += 1
        next_configs += len(following)
        if guess is None:
            continue
        moments += 1
        named += len(set(guess) & following)
        unused += len(set(guess) - following)
        window += probe.windows[index]
    tags = experiment_tags(session["options"])
    return RunReading(session["id"], "x".join(map(str, session["shape"])), int(tags.get("seed", session["seed"] or 0)),
                      generations, moments, next_configs, named, unused, window, search_s)


def worker_built_runs(cache: Cache, strategy: str, arm: str = "cold",
                      device: str | None = None) -> list[dict[str, Any]]:
    """The held-out study's runs of `strategy` in `arm` whose benchmark process loaded the compile
    workers' code (today's tooling, whose timelines the moments are read from), in session order:
    those recorded on `device` (None: on any; a timeline's moments depend on its GPU's speed)."""
    return [session for session, tags in study_sessions(cache, device) if tags.get("arm") == arm
            and tags.get("strategy") == strategy and session["options"].get("build_from_worker")]


def report(readings: Sequence[RunReading], strategy: str, db: Path, device: str | None = None) -> str:
    lines = [f"# Compiling ahead, read from recorded runs: cold {strategy} (worker-built)", "",
             f"Generated by `python -m experiments.compile_ahead_replay --strategy {strategy} --db {db.name}` from the "
             f"held-out study's recorded runs{f' on {device}' if device else ''} (how the moments are read, and why "
             "this is a reading and not a "
             "measurement: the module's docstring). **generations**: those read (after the first search "
             "generation); **with a moment**: whose previous generation had a moment to guess at; **configs named**: "
             "of the configs those generations asked, the share the guess before them named; **guesses unused**: "
             "named configs no generation asked next (compiled for nothing); **window**: the compile workers' time "
             "for the guesses as a share of the run's search time. Each cell is the median [range] over the runs.",
             "", "| shape | runs | generations | with a moment | configs named | guesses unused | window |",
             "|---|---:|---|---|---|---|---|"]
    by_shape: dict[str, list[RunReading]] = {}
    for reading in readings:
        by_shape.setdefault(reading.shape, []).append(reading)
    for shape, runs in by_shape.items():
        lines.append(f"| {shape} | {len(runs)} | {_cell([r.generations for r in runs], 0)} | "
                     f"{_cell([r.moments / r.generations if r.generations else 0 for r in runs], pct=True)} | "
                     f"{_cell([r.named_share for r in runs], pct=True)} | {_cell([r.unused for r in runs], 0)} | "
                     f"{_cell([r.window_s / r.search_s if r.search_s else 0 for r in runs], pct=True)} |")
    total = sum(r.next_configs for r in readings)
    named = sum(r.named for r in readings)
    window = sum(r.window_s for r in readings)
    search = sum(r.search_s for r in readings)
    guessed = named + sum(r.unused for r in readings)
    lines += ["", f"Over all {len(readings)} runs: the guesses named {named} of the {total} configs the read "
                  f"generations asked ({_share(named, total)}); {_share(named, guessed)} of the configs guessed were "
                  f"asked; the windows add up to {_share(window, search)} of the search time."]
    return "\n".join(lines) + "\n"


def _cell(values: Sequence[float], digits: int = 0, pct: bool = False) -> str:
    shown = [f"{v:.0%}" if pct else f"{v:.{digits}f}" for v in (statistics.median(values), min(values), max(values))]
    return shown[0] if len(values) == 1 else f"{shown[0]} [{shown[1]}–{shown[2]}]"


def _share(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole else "-"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, default=Path("data/shipped.db"), help="the recorded runs (read only)")
    parser.add_argument("--strategy", default="pattern-ties", help="the cold arm's strategy whose runs are read")
    parser.add_argument("--out", type=Path, default=REPORT, help="where the report goes")
    parser.add_argument("--device", default=None, help="the GPU whose runs are read, as sessions name it (default: "
                                                       "the only one recorded, or the shipped data's among several)")
    args = parser.parse_args(argv)
    if not args.db.exists():
        parser.error(f"--db {args.db}: no such file")
    cache = Cache.open(args.db, migrate=False)
    try:
        every = worker_built_runs(cache, args.strategy)
        if not every:
            parser.error(f"{args.db}: no worker-built cold {args.strategy} run of the held-out study")
        try:
            device, sessions = on_one_device(every, args.device, study=STUDY)
        except UserError as error:
            parser.error(str(error))
        readings = []
        for number, session in enumerate(sessions, 1):
            readings.append(read_run(cache, session))
            print(f"{number}/{len(sessions)}: session {session['id']} read", flush=True)
    finally:
        cache.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report(readings, args.strategy, args.db, device))
    print(f"report written to {args.out}")


if __name__ == "__main__":
    main()
