"""The held-out experiment read back from the database, through the store alone.

One `Run` per recorded session of the study (the latest finished one for each problem, arm,
strategy and seed).  Times are read off the rows' recording times (`EvaluationRow.created`)
against the moment the job started (the `job_started` tag, taken before the kernel was bound
and the evaluator started), so every figure counts the set-up.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from autotune.store.cache import Cache, EvaluationRow
from autotune.databases import open_for_reading
from autotune.experiment import experiment_tags
from autotune.strategies.lineage import same_source
from experiments.softmax_study.data import Start, best_origin, session_start
from search_spaces import SearchSpace

from . import definition as d
from .definition import Problem

# Sessions that ended by their own limits; one interrupted (a deadline, Ctrl-C) or failed is
# left out, and the runner runs it again.
DONE = ("budget", "seconds", "strategy finished", "strategy exhausted")
USER = "user"  # the origin of Helion's pick in its re-timing session (a --config)
HEURISTIC = "heuristic"
CACHE = "cache"
SEED_ORIGINS = (HEURISTIC, CACHE)  # the seed sources of the warm arms

Key = tuple[str, str, str, str, str, int]  # kernel, shape, dtype, arm, strategy, seed


@dataclass
class Run:
    """One recorded run of an arm: its times from the job's start, its answer and where it came from."""

    problem: Problem
    arm: str
    strategy: str
    seed: int
    session_id: int
    start: Start
    setup_s: float | None  # job start to the session's start (binding, evaluator and workers)
    wall_s: float | None  # job start to the last config measured (Helion: its autotune returned)
    session_s: float | None  # job start to the session's end (with our baselines and final re-timing)
    final_ms: float | None  # the answer, re-timed (ours: the final re-benchmark; Helion: its pick)
    best_origin: str  # where the answer's config came from: default, heuristic, cache, search, user
    curve: list[tuple[float, float]] = field(default_factory=list)  # (s since job start, best so far ms)
    # (configs measured so far, best so far ms) at each improvement: search and evaluator speed told apart
    config_curve: list[tuple[int, float]] = field(default_factory=list)
    heuristic_ms: float | None = None  # the fastest seed the heuristic source gave (search-time reading)
    rule_ms: float | None = None  # the fastest of the rules' own seeds among them (Helion's compiler seeds aside)
    rule_params: dict[str, Any] | None = None  # that seed's point
    rule_seeds: int = 0  # how many seeds the rules gave (rule_ms is the fastest of them)
    # each rule seed (in the rules' order) with its time in this run: None where it failed or was not run
    rule_seed_times: list[tuple[dict[str, Any], float | None]] = field(default_factory=list)
    final_params: dict[str, Any] | None = None  # the point of the run's answer
    default_ms: float | None = None
    default_status: str | None = None  # how the default config's measurement ended (None: not measured)
    cache_from: tuple[str, ...] = ()  # the shapes whose recorded configs seeded a warm-cache run
    cache_ms: float | None = None  # the fastest of the seeds the cache source gave
    # origin (heuristic, cache) -> status -> how many of the seeds it gave ended so: a warm arm whose
    # seeds all failed ran as a cold one, and the report has to say so
    seed_statuses: dict[str, dict[str, int]] = field(default_factory=dict)
    fresh_caches: bool = False  # compiled into empty caches of its own (gpu_process.fresh_compile_caches)
    early_setups: bool = False  # ours: every compile worker set up at the evaluator's start (gpu.EARLY_SETUPS)
    evaluations: int = 0
    searched: int = 0  # rows of the search itself (the final re-timing left out)
    helion_configs: int | None = None  # Helion quick: configs its search timed
    # Helion quick: why the space with our elements-per-thread limit refused its pick, re-timed in the
    # space without the limit (a config none of our arms could have found); None when it fits
    helion_past_thread_limit: str | None = None
    limit_s: float | None = None  # ours: the search time it was given (`--seconds`, from the evaluator ready)
    seeds_tag: str | None = None  # a warm arm: the version of its seed source it recorded (definition.seeds_version)
    ended_by: str | None = None  # why its session ended: its search limit ('seconds'), the config budget, ...
    retimes_search_of: int | None = None  # Helion quick: the session whose search this one's pick re-times

    @property
    def key(self) -> Key:
        return run_key(self.problem, self.arm, self.strategy, self.seed)

    def time_to(self, target_ms: float | None) -> float | None:
        """Seconds from the job's start until the best so far was at or under `target_ms`."""
        return time_to(self.curve, target_ms)

    def configs_to(self, target_ms: float | None) -> int | None:
        """Configs measured until the best so far was at or under `target_ms`."""
        if target_ms is None:
            return None
        return next((n for n, ms in self.config_curve if ms <= target_ms), None)

    @property
    def configs_per_s(self) -> float | None:
        """Configs measured per second of the search (the wall time less the set-up)."""
        searched = self.wall_s - self.setup_s if self.wall_s is not None and self.setup_s is not None else None
        configs = self.helion_configs if self.helion_configs is not None else self.searched
        return configs / searched if searched and searched > 0 and configs else None


def came_in_time(run: Run, reference_ms: float | None, allowed_s: float) -> bool:
    """Whether the run came within WITHIN of `reference_ms` (Helion quick's final time) within
    `allowed_s` of its job's start: what a time target asks of each seed (the report's verdicts
    and the runner's gate)."""
    took = run.time_to(reference_ms * (1 + d.WITHIN)) if reference_ms else None
    return took is not None and took <= allowed_s


def time_to(curve: Iterable[tuple[float, float]], target_ms: float | None) -> float | None:
    """The first time in a best-so-far `curve` (seconds, ms) at or under `target_ms`; None if never."""
    if target_ms is None:
        return None
    return next((t for t, ms in curve if ms <= target_ms), None)


def run_key(problem: Problem, arm: str, strategy: str, seed: int) -> Key:
    return (problem.kernel, problem.shape, problem.dtype, arm, strategy, int(seed))


def load_runs(db: Path, shipped: Path | None, device: str | None = None) -> list[Run]:
    """Every finished run of the study in `db` and the shipped data beside it (on `device`; None:
    on any, devices.py): the latest session of each run's key."""
    return standing(load_every_run(db, shipped, device))


def load_every_run(db: Path, shipped: Path | None, device: str | None = None) -> list[Run]:
    """Every finished session of the study (on `device`; None: on any) as a run, runs recorded
    again included, in session order."""
    cache = open_for_reading(db, shipped)
    try:
        return [read_run(cache, session) for _, session in _finished(cache, device)]
    finally:
        cache.close()


def standing(runs: Sequence[Run]) -> list[Run]:
    """The run that stands for each key in every figure: its latest session."""
    return list({run.key: run for run in sorted(runs, key=lambda r: r.session_id)}.values())


def superseded(runs: Sequence[Run]) -> list[tuple[Run, int]]:
    """Runs recorded again later under the same key (the same arm, strategy and seed: a repeated
    command, `--again`, or two earlier versions of a seed source, both labelled '(earlier seeds)'):
    each earlier run and the session that stands for its key instead."""
    latest = {run.key: run.session_id for run in standing(runs)}
    return [(run, latest[run.key]) for run in runs if latest[run.key] != run.session_id]


def latest_per_seed_source(runs: Sequence[Run]) -> list[Run]:
    """The latest run of each key under each version of its seed source: a figure read by the
    version of the seeds (definition.seeds_version) finds its runs even where a later version's
    runs of the same key stand in the other figures."""
    return list({(run.key, run.seeds_tag): run for run in sorted(runs, key=lambda r: r.session_id)}.values())


def study_sessions(cache: Cache, device: str | None = None) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Every session the study recorded, finished or not, with its tags, in session order: those
    recorded on `device` (the name sessions record), or on any device where it is None."""
    for session in sorted(cache.sessions(limit=1_000_000), key=lambda s: s["id"]):
        tags = experiment_tags(session["options"])
        if tags.get("study") == d.STUDY and (device is None or session["device"] == device):
            yield session, tags


def _measured_to_its_end(session: dict[str, Any]) -> bool:
    """A session that ended as a run ends (limit, budget, done) and measured something."""
    return session["exit_reason"] in DONE and session["evaluations"] > 0


def _finished(cache: Cache, device: str | None = None) -> Iterator[tuple[Key, dict[str, Any]]]:
    """Every finished session of the study (on `device`; None: on any) with its run's key, in session order."""
    for session, tags in study_sessions(cache, device):
        if session["mode"] == "gpu" and _measured_to_its_end(session):
            yield run_key(_problem(session), tags.get("arm", "?"), strategy_label(session), tags.get("seed", 0)), session


EARLIER = " (earlier version)"  # the label of a run of a strategy whose source has changed since
# The label of a warm run whose seeds were taken by an earlier version of its seed source than
# `definition.SEEDS_VERSION`: a mark of its own, so that it never shares a run's key with a run
# that is earlier in its strategy instead (each key keeps one session, the latest).
EARLIER_SEEDS = " (earlier seeds)"
TIMING_MARK = "@"  # '@250ms': a run of our arms under another timing target than the study's


def kept_apart(label: str) -> bool:
    """Whether a strategy label (or a verdict's subject) names runs reported and judged apart: of
    an earlier source, of earlier seeds, or under another timing target (`strategy_label`)."""
    return any(mark in label for mark in (EARLIER, EARLIER_SEEDS, TIMING_MARK))


def strategy_label(session: dict[str, Any]) -> str:
    """The run's strategy, marked where one of our arms ran under another timing target than the
    study's (`definition.TIMING_MS`: '@250ms'), ran a strategy whose source has changed since
    (' (earlier version)'), or (a warm arm) took seeds that its present seed source would not
    give (' (earlier seeds)', `definition.seeds_changed_at`): such a run is reported and judged
    apart.  A run that loaded its compile workers' code is marked too (' (worker-built)'), and one
    that compiled its next generations ahead (' (compiled ahead)'): judged apart from the runs
    before that tooling, but not kept apart (it is today's tooling)."""
    tags = experiment_tags(session["options"])
    strategy = tags.get("strategy", "?")
    arm = tags.get("arm")
    if arm not in d.OUR_ARMS:
        return strategy
    timing = session["options"]["timing_target_ms"]  # older records read as the target they ran under
    if timing != d.TIMING_MS:
        strategy = f"{strategy}{TIMING_MARK}{timing:g}ms"
    strategy += d.tooling_mark(bool(session["options"].get("build_from_worker")),
                               bool(session["options"].get("compile_ahead")))
    if not same_source(tags.get("strategy", "?"), session["options"].get("strategy_source")):
        strategy += EARLIER
    problem = _problem(session)
    version = d.seeds_version(problem, arm)
    if version is not None and tags.get("seeds") != version and d.seeds_changed_at(
            problem, arm, tags.get("seeds")):
        strategy += EARLIER_SEEDS
    return strategy


def rule_seeds(session: dict[str, Any]) -> list[dict[str, Any]]:
    """The points the seed rules gave the session (recorded with its options)."""
    return [dict(s.get("params", {})) for s in (session["options"].get("heuristics") or {}).get("seeds", [])]


def _problem(session: dict[str, Any]) -> Problem:
    return Problem(session["kernel"], "x".join(map(str, session["shape"])), session["dtype"])


@dataclass(frozen=True)
class Unfinished:
    """A run of the study that did not finish, so no figure reads it and the runner runs it
    again: a failure recorded as such (`definition.FAILED`), a session interrupted (a deadline,
    Ctrl-C), one that measured nothing, or one that never ended (its process was killed)."""

    problem: Problem
    arm: str
    strategy: str
    seed: int
    session_id: int
    after_s: float | None  # from the job's start to the failure (a recorded failure)
    reason: str
    helion_configs: int | None = None  # Helion quick: the configs its search had logged
    helion_best_ms: float | None = None  # and the fastest of them, in Helion's own timer (not re-timed)

    @property
    def key(self) -> Key:
        return run_key(self.problem, self.arm, self.strategy, self.seed)


def load_unfinished(db: Path, shipped: Path | None, device: str | None = None) -> list[Unfinished]:
    """Every run of the study in `db` (with the shipped data; on `device`, None: on any) that did
    not finish, in session order."""
    cache = open_for_reading(db, shipped)
    try:
        found = []
        for session, tags in study_sessions(cache, device):
            if _measured_to_its_end(session):
                continue
            reason = session["exit_reason"]
            if reason in DONE:
                reason += " (its limit came before any config was measured)"
            after = tags.get("failed_after_s")
            logged = [ms for _, ms in tags.get("helion_timeline", []) if ms is not None]
            found.append(Unfinished(_problem(session), tags.get("arm", "?"), strategy_label(session),
                                    int(tags.get("seed", 0)), session["id"],
                                    float(after) if after is not None else None,
                                    reason or "never ended (its process was stopped, or it is still running)",
                                    tags.get("helion_configs"), min(logged, default=None)))
        return found
    finally:
        cache.close()


@dataclass(frozen=True)
class FinishedSearch:
    """A try of a Helion quick run whose search finished (its pick is recorded) but whose re-timing
    of the pick was interrupted or never ended: the runner re-times that pick alone instead of
    searching again, so minutes of a GPU are not spent twice on one search."""

    session_id: int
    tags: dict[str, Any]  # the try's tags: its job's start, Helion's times, log and pick


def finished_searches(db: Path, shipped: Path | None, device: str | None = None) -> dict[Key, FinishedSearch]:
    """For each Helion quick run not finished yet (on `device`; None: on any), its latest try whose
    search finished though its re-timing was cut.  A re-timing that failed is searched again
    instead: its pick may fail again."""
    if not db.exists() and (shipped is None or not shipped.exists()):
        return {}
    cache = open_for_reading(db, shipped)
    try:
        done = {key for key, _ in _finished(cache, device)}
        found: dict[Key, FinishedSearch] = {}
        for session, tags in study_sessions(cache, device):
            reason = session["exit_reason"] or d.INTERRUPTED  # None: never ended, its process stopped
            if tags.get("arm") != d.HELION_QUICK or "helion_pick" not in tags or not reason.startswith(d.INTERRUPTED):
                continue
            key = run_key(_problem(session), d.HELION_QUICK, strategy_label(session), tags.get("seed", 0))
            if key not in done:  # an interrupted or unended session is never a finished run
                found[key] = FinishedSearch(session["id"], dict(tags))
        return found
    finally:
        cache.close()


def recorded_keys(db: Path, shipped: Path | None, device: str | None = None) -> set[Key]:
    """The runs `db` (with the shipped data) already holds on `device` (None: on any): the runner skips them."""
    return set(job_times(db, shipped, device))


@dataclass(frozen=True)
class JobTime:
    """How long a finished run's job took, from its start to its session's end, and the search
    time it was given (`--seconds`; None: Helion quick, or no limit)."""

    seconds: float
    limit_s: float | None


def job_times(db: Path, shipped: Path | None, device: str | None = None) -> dict[Key, JobTime | None]:
    """Every finished run in `db` (with the shipped data; on `device`, None: on any), the latest of
    each key, with how long its job took (None where its session did not record the job's start)."""
    if not db.exists() and (shipped is None or not shipped.exists()):
        return {}
    cache = open_for_reading(db, shipped)
    try:
        found: dict[Key, JobTime | None] = {}
        for key, session in _finished(cache, device):
            tags = experiment_tags(session["options"])
            started = tags.get("job_started")
            if "retime_started" in tags:  # a pick re-timed after its search's try was cut: the two parts
                found[key] = JobTime(tags["helion_job_s"] + session["ended"] - tags["retime_started"], None)
                continue
            found[key] = None if started is None or session["ended"] is None else \
                JobTime(session["ended"] - float(started), session.get("seconds"))
        return found
    finally:
        cache.close()


def read_session_run(db: Path, shipped: Path | None, session_id: int) -> Run | None:
    """One session read as a run (None where no such session is recorded)."""
    cache = open_for_reading(db, shipped)
    try:
        session = cache.session(session_id)
        return read_run(cache, session) if session is not None else None
    finally:
        cache.close()


def read_run(cache: Cache, session: dict[str, Any]) -> Run:
    tags = experiment_tags(session["options"])
    rows = cache.session_evaluations(session["id"])
    origins = cache.origins(session["id"])
    problem = Problem(session["kernel"], "x".join(map(str, session["shape"])), session["dtype"])
    job = float(tags["job_started"]) if "job_started" in tags else None
    since = (lambda t: t - job if job is not None and t is not None else None)  # noqa: E731
    search = [r for r in rows if r.generation >= 0]
    run = Run(problem=problem, arm=tags.get("arm", "?"), strategy=strategy_label(session),
              seed=int(tags.get("seed", 0)), session_id=session["id"], start=session_start(cache, session, rows),
              setup_s=since(session["started"]), session_s=since(session["ended"]),
              wall_s=since(max((r.created for r in search if r.created is not None), default=None)),
              final_ms=None, best_origin="?", evaluations=session["evaluations"], searched=len(search),
              cache_from=tuple(tags.get("cache_from", ())), fresh_caches=tags.get("compile_caches") == d.FRESH_CACHES,
              early_setups=bool(session["options"].get("early_setups")),
              limit_s=session.get("seconds") if tags.get("arm") in d.OUR_ARMS else None,
              seeds_tag=tags.get("seeds"), ended_by=session.get("exit_reason"))
    given: dict[str, list[EvaluationRow]] = {}  # origin -> the rows of generation 0 it gave
    for row in search:
        if row.generation == 0:
            given.setdefault(origins.get(row.candidate.key, ""), []).append(row)
    defaults = given.get("default", [])
    run.default_ms = _fastest(defaults)
    run.default_status = defaults[0].result.status.value if defaults else None
    for origin in SEED_ORIGINS:
        for row in given.get(origin, []):
            run.seed_statuses.setdefault(origin, Counter())[row.result.status.value] += 1
    seeded = given.get(HEURISTIC, [])
    run.heuristic_ms = _fastest(seeded)
    run.cache_ms = _fastest(given.get(CACHE, []))
    rules = rule_seeds(session)
    run.rule_seeds = len(rules)
    per_seed = [(seed, _fastest_row(r for r in seeded if _matches(r.candidate.params, seed))) for seed in rules]
    run.rule_seed_times = [(seed, row.result.median_ms if row is not None else None) for seed, row in per_seed]
    fastest_rule = _fastest_row(row for _, row in per_seed if row is not None)
    if fastest_rule is not None:
        run.rule_ms, run.rule_params = fastest_rule.result.median_ms, dict(fastest_rule.candidate.params)
    if run.arm == d.HELION_QUICK:
        _read_helion(run, tags, rows, origins)
    else:
        winner = _winner(rows)
        if winner is not None:
            run.final_ms = winner.result.median_ms
            run.final_params = dict(winner.candidate.params)
            run.best_origin = best_origin(cache, session["id"], winner.candidate.key, rows)
        ordered = _in_time_order(search)
        run.curve = curve((r.created - job, r.result.objective) for r in ordered
                          if job is not None and r.created is not None)
        run.config_curve = curve((n, r.result.objective) for n, r in enumerate(ordered, start=1))
    return run


def _read_helion(run: Run, tags: dict[str, Any], rows: list[EvaluationRow], origins: dict[str, str]) -> None:
    """Helion quick: its wall time (set-up included) and search timeline from the tags the runner
    recorded, its answer from our re-timing of its pick; the timeline, in Helion's own timer, is
    scaled so its best equals that re-timing (one timer for every figure)."""
    picks = [r for r in rows if r.generation == 0 and origins.get(r.candidate.key) == USER]
    zero = [r for r in rows if r.generation == 0]
    pick = picks[-1] if picks else (zero[-1] if zero else None)
    if pick is not None:
        retimed = [r for r in rows if r.generation < 0 and r.candidate.key == pick.candidate.key and r.result.ok]
        timing = (retimed or [pick])[0].result
        run.final_ms = timing.median_ms if timing.ok else None
        run.final_params = dict(pick.candidate.params)
    run.best_origin = "search"  # Helion's own
    run.wall_s = run.session_s = tags.get("helion_job_s")
    autotune_s = tags.get("helion_wall_s")
    run.setup_s = run.wall_s - autotune_s if run.wall_s is not None and autotune_s is not None else None
    run.helion_configs = tags.get("helion_configs")
    run.helion_past_thread_limit = tags.get("helion_pick_past_thread_limit")
    run.retimes_search_of = tags.get("retimes_search_of")
    logged = [(float(t), float(ms) if ms is not None else math.inf) for t, ms in tags.get("helion_timeline", [])]
    finite = [ms for _, ms in logged if math.isfinite(ms)]
    if finite and run.final_ms and run.setup_s is not None:
        scale = run.final_ms / min(finite)
        run.curve = curve((run.setup_s + t, ms * scale) for t, ms in logged)
        run.config_curve = curve((n, ms * scale) for n, (_, ms) in enumerate(logged, start=1))


def curve(points: Iterable[tuple[Any, float]]) -> list[tuple[Any, float]]:
    """(time or count, best so far) at each improvement of an ordered (time or count, ms or inf) sequence."""
    best, steps = math.inf, []
    for t, ms in points:
        if ms < best:
            best = ms
            steps.append((t, ms))
    return steps


def search_rows(db: Path, shipped: Path | None, session_ids: Iterable[int]) -> dict[int, list[EvaluationRow]]:
    """Each session's search rows (generation 0 on: the final re-timing left out) in the order they
    were measured, as `read_run` reads them; for figures only the report draws (`moves.py`), so
    `load_runs`, which the runner calls too, does not."""
    cache = open_for_reading(db, shipped)
    try:
        return {sid: _in_time_order([r for r in cache.session_evaluations(sid) if r.generation >= 0])
                for sid in session_ids}
    finally:
        cache.close()


def session_spaces(db: Path, shipped: Path | None, session_ids: Iterable[int]) -> dict[int, SearchSpace]:
    """Each session's recorded space (which parameters are ordered, and their values); for the
    report's stops section only, like `search_rows`."""
    cache = open_for_reading(db, shipped)
    try:
        spaces: dict[int, SearchSpace] = {}
        by_fingerprint: dict[str, SearchSpace | None] = {}  # sessions share spaces: each is parsed once
        for sid in session_ids:
            session = cache.session(sid)
            if session is None:
                continue
            fingerprint = session["space_fingerprint"]
            if fingerprint not in by_fingerprint:
                record = cache.get_space(fingerprint)
                by_fingerprint[fingerprint] = record.space if record else None
            if by_fingerprint[fingerprint] is not None:
                spaces[sid] = by_fingerprint[fingerprint]
        return spaces
    finally:
        cache.close()


def _in_time_order(rows: list[EvaluationRow]) -> list[EvaluationRow]:
    return sorted(rows, key=lambda r: (r.created or 0.0, r.generation, r.ordinal))


def _winner(rows: list[EvaluationRow]) -> EvaluationRow | None:
    """The session's answer: the fastest of its final re-benchmark when there was one."""
    final = [r for r in rows if r.generation < 0 and r.result.ok]
    ok = final or [r for r in rows if r.result.ok]
    return min(ok, key=lambda r: r.result.objective) if ok else None


def _fastest_row(rows: Iterable[EvaluationRow]) -> EvaluationRow | None:
    return min((r for r in rows if r.result.ok), key=lambda r: r.result.median_ms, default=None)


def _fastest(rows: Iterable[EvaluationRow]) -> float | None:
    row = _fastest_row(rows)
    return row.result.median_ms if row is not None else None


def _matches(params: dict[str, Any], seed: dict[str, Any]) -> bool:
    return bool(seed) and all(params.get(name) == value for name, value in seed.items())
