"""Re-run a recorded session's strategy against the session's own answers.

Why: a session records the hash of its strategy's source, so a study can keep the runs of a
changed strategy apart from those of the one it measures now.  A refactor that changes no
proposal (a helper moved, a loop replaced by a shared one) changes the hash all the same.  This
check says whether today's source asks, generation by generation, exactly what the recorded
run asked when told the same results: if it does for every recorded run, those runs are runs
of today's strategy too (`autotune.strategies.lineage` declares such sources the same).

The re-run goes through the one session loop, with the strategy built as the original was (its
name, seed, budget and options) on the recorded space, and an evaluator that answers from the
session's own rows alone.  Generation 0 is given the default and the seeds as the session was
(a session recorded before `seed_points` gets its seeds' recorded configs: see `_seeds`).  It
stops after the last recorded generation.  Every generation must ask the same new configs as the recorded
one (a set: a GPU evaluator records them in the order they finish).  The last one may ask more,
because the original's search limit could cut it short.  A config the session never measured
answers `not_recorded`; the comparison then shows the difference.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from autotune.store.cache import Cache
from autotune.store.merge import FORKED
from autotune.errors import UserError
from autotune.evaluators.replay import ReplayEvaluator
from autotune.session import Session, SessionSettings
from autotune.simulation.oracle import Oracle
from autotune.task import bind_recorded


@dataclass(frozen=True)
class Rerun:
    """What re-running one recorded session asked, against what it recorded."""

    session: int
    strategy: str
    source: str | None  # the strategy source hash the session recorded
    generations: int  # recorded generations, the default's and seeds' (0) included
    matched: int  # leading generations asked the same
    difference: str | None  # the first generation that differs, in words; None: none did
    seeds_recorded: bool = True  # the seeds were given as the session was given them (`_seeds`)

    @property
    def same(self) -> bool:
        return self.difference is None

    @property
    def conclusive(self) -> bool:
        """Whether the re-run proves something: it asked the same, or differed from seeds given
        exactly as the session's were."""
        return self.same or self.seeds_recorded


def by_generation(rows: list[Any]) -> dict[int, set[str]]:
    """Generation -> the config keys of a session's rows in it (its final re-timing left out)."""
    asked: dict[int, set[str]] = defaultdict(set)
    for row in rows:
        if row.generation >= 0:
            asked[row.generation].add(row.candidate.key)
    return dict(asked)


def rerun_session(cache: Cache, session_id: int, strategy: str | None = None, *,
                  wrap: Callable[[Any, list[Any]], Any] | None = None) -> Rerun:
    """Re-run recorded session `session_id` with today's source of its strategy, or of
    `strategy` (whether another walk would have asked the same).  `wrap(evaluator, rows)` may
    put a probe around the evaluator that answers from the session's rows (one that also asks
    the session's guesses: experiments/compile_ahead_replay.py).  One-line `UserError` for a
    session that cannot be re-run."""
    session = cache.session(session_id)
    if session is None:
        raise UserError(f"no session {session_id} in {cache.path}")
    if session["mode"] == "replay":
        raise UserError(f"session {session_id} was a replay: its strategy was offered only the recorded sample")
    if session["exit_reason"] == FORKED:
        raise UserError(f"session {session_id} is a fork kept by a merge: it lacks its first generations")
    rows = [row for row in cache.session_evaluations(session_id) if row.generation >= 0]
    if not rows:
        raise UserError(f"session {session_id} recorded no evaluation")
    record = cache.get_space(session["space_fingerprint"])
    if record is None:
        raise UserError(f"session {session_id}'s space is not in {cache.path}")
    recorded = by_generation(rows)
    name = strategy or session["strategy"]
    options = session["options"]
    task = bind_recorded(_kernel(session), record, cache.aliases(record.fingerprint))
    seeds, seeds_recorded = _seeds(cache, session, task, rows)
    evaluator = ReplayEvaluator(Oracle.from_results({row.candidate.key: [row.result] for row in rows}), {},
                                description=f"the answers session {session_id} recorded")
    if wrap is not None:
        evaluator = wrap(evaluator, rows)
    settings = SessionSettings(strategy=name, seed=session["seed"] or 0, budget=session["budget"],
                               seconds=None if session["budget"] else 1e9, fresh=True,
                               generation_size=options.generation_size, mode="replay", generations=max(recorded))
    walk = _strategy(name, session, task)
    with tempfile.TemporaryDirectory(prefix="autotune-rerun-") as folder:
        journal = Cache.open(Path(folder) / "rerun.db", create=True)
        try:
            loop = Session(task, evaluator, walk, settings, journal, options=options, seeds=seeds)
            loop.run()
            asked = by_generation(journal.session_evaluations(loop.session_id))
        finally:
            journal.close()
    return replace(_compare(session, name, recorded, asked), seeds_recorded=seeds_recorded)


def _seeds(cache: Cache, session: dict[str, Any], task: Any, rows: list[Any]) -> tuple[list[tuple[str, Any]], bool]:
    """The seeds the session was given, each as its point before normalising (recorded since
    sessions recorded `seed_points`), and whether they are exactly those.  An older session's seeds
    are given as the configs its generation 0 recorded: where a seed's point normalised to another
    one, the strategy then starts from another point, and a difference says nothing either way."""
    options = session["options"]
    if options.seed_points and len(options.seed_points) == len(options.seeds):
        return [(origin, dict(point)) for origin, point in zip(options.seeds, options.seed_points)], True
    origins = cache.origins(session["id"])
    default_key = task.default_candidate().key
    given = [(origins.get(row.candidate.key) or "seed", row.candidate.params)
             for row in sorted(rows, key=lambda r: r.ordinal)
             if row.generation == 0 and row.candidate.key != default_key]
    return given, not given


def sessions_of(cache: Cache, strategy: str, source: str | None = None) -> list[dict[str, Any]]:
    """The recorded sessions of `strategy` that can be re-run (measured, not forks), oldest first;
    with `source`, only those recorded under that source hash (or a prefix of it)."""
    found = [s for s in cache.sessions(limit=cache.session_count())
             if s["strategy"] == strategy and s["mode"] != "replay" and s["exit_reason"] != FORKED]
    if source is not None:
        found = [s for s in found if (s["options"].get("strategy_source") or "").startswith(source)]
    return sorted(found, key=lambda s: s["id"])


def _compare(session: dict[str, Any], strategy: str, recorded: dict[int, set[str]],
             asked: dict[int, set[str]]) -> Rerun:
    last = max(recorded)
    matched, difference = 0, None
    for generation in range(last + 1):
        want, got = recorded.get(generation, set()), asked.get(generation, set())
        same = want <= got if generation == last else want == got
        if not same:
            difference = (f"generation {generation}: {len(want - got)} recorded config(s) not asked, "
                          f"{len(got - want)} asked that the session did not record")
            break
        matched += 1
    return Rerun(session=int(session["id"]), strategy=strategy,
                 source=session["options"].get("strategy_source"), generations=last + 1, matched=matched,
                 difference=difference)


def _kernel(session: dict[str, Any]) -> Any:
    """The session's kernel: where the session says it was loaded from, else a built-in by name."""
    from autotune.kernel_loader import resolve_kernel
    from autotune.kernels.catalogue import light_kernel

    name = session["options"].kernel_locator or session["kernel"]
    return light_kernel(name) or resolve_kernel(name)  # a built-in one without importing it


def _strategy(name: str, session: dict[str, Any], task: Any) -> Any:
    from autotune.strategies import get_strategy
    from autotune.strategies.options import check_options

    recorded = session["options"]
    options = check_options(name, dict(recorded.strategy_options))
    if name == "grid":  # as `autotune tune` builds it: the parameters listed and whether sampled
        options.update(names=list(recorded.grid) or None, sample=recorded.grid_sample)
    return get_strategy(name).from_task(task, seed=session["seed"] or 0, budget=session["budget"], **options)
