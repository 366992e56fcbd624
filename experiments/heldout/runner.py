"""Runs the held-out experiment on a GPU machine: one job per (problem, arm, strategy, seed).

    python -m experiments.heldout.runner --db runs/heldout.db [--shapes 2048x100000,...]
        [--arms cold,warm-cache] [--strategies pattern,evolution] [--seeds 1,2,3] [--seconds 60|target]
        [--deadline 3000]

Each job records one session, tagged with the study, arm, strategy, seed and the moment the job
started (before anything was bound or started), so the report counts the set-up.  Runs already
recorded are skipped: a run cut short is continued by the same command.  A run that fails or is
interrupted (`--deadline`, Ctrl-C) is recorded as such, Helion quick's with what its search had
logged, and the report lists it; a Helion search that finished before the re-timing of its pick
was cut is not run again: the next plan re-times its pick alone.  Our arms measure
every config anew (`fresh`), so no run is answered from another's measurements; the
warm-cache arm reads its seeds from the shipped data alone (it records into a scratch
database merged home afterwards), so a held-out shape never seeds itself, and a problem whose
shape the shipped data records is refused.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from autotune.cli import positive_float
from autotune.errors import UserError
from autotune.evaluators.gpu_process import COMPILE_CACHES, fresh_compile_caches  # noqa: F401 - tests read both here
from autotune.experiment import ExperimentOptions, execute_jobs

from . import definition as d
from .definition import Problem
from .limits import TARGET, parse_seconds

if TYPE_CHECKING:
    from .data import FinishedSearch, JobTime
    from .limits import TargetLimit


@dataclass(frozen=True)
class Plan:
    """What to run: the problems, arms, strategies and seeds, and each session's limits."""

    problems: tuple[Problem, ...] = d.PROBLEMS
    arms: tuple[str, ...] = d.ARMS
    strategies: tuple[str, ...] = d.STRATEGIES
    seeds: tuple[int, ...] = d.SEEDS
    helion_seeds: tuple[int, ...] = d.HELION_SEEDS
    seconds: float = d.SECONDS
    # `--seconds target`: each run of ours is given the time its target allows at its shape
    # (limits.py); `seconds` stands where there is no such time yet.
    limit_to_target: bool = False
    budget: int = d.BUDGET
    shipped: Path | None = Path("cache.db")
    again: bool = False
    # What the warm-cache arm's seeds read: the shipped data without this study's sessions
    # (data.without_study); the shipped data itself where not set.
    seed_data: Path | None = None


@dataclass(frozen=True)
class ArmJob:
    """One of our arms: one `autotune tune` session (the same path as the command)."""

    problem: Problem
    arm: str
    strategy: str
    seed: int
    budget: int
    seconds: float
    shipped: Path | None
    cache_from: tuple[str, ...] = ()  # warm-cache: the shapes its seeds come from (recorded as a tag)
    expected_s: float | None = field(default=None, compare=False)  # how long it should take (with_expected_times)

    @property
    def key(self) -> tuple:
        return (self.problem.kernel, self.problem.shape, self.problem.dtype, self.arm, self.strategy, self.seed)

    def describe(self) -> str:
        return f"{self.arm} {self.strategy} seed {self.seed} at {self.problem.label}"

    def __call__(self, db_path: Path) -> dict[str, Any]:
        started = time.time()
        tags = {"study": d.STUDY, "arm": self.arm, "strategy": self.strategy, "seed": self.seed,
                "job_started": round(started, 3), "compile_caches": d.FRESH_CACHES}
        if self.cache_from:
            tags["cache_from"] = list(self.cache_from)
        version = d.seeds_version(self.problem, self.arm)
        if version is not None:
            tags["seeds"] = version
        request = tune_request(db_path, self.problem, strategy=self.strategy, budget=self.budget,
                               seconds=self.seconds, seed=self.seed, seed_from=d.SEED_FROM[self.arm],
                               shipped=self.shipped, tags=tags)
        # Only the warm-cache arm reads earlier measurements (its seeds): from the shipped data
        # alone, never from runs of this experiment recorded in `db_path`.  Each job compiles into
        # empty caches: a later arm at the same shape would otherwise find the configs an earlier
        # one compiled already built (Helion quick runs first).
        with fresh_compile_caches():
            outcome = in_scratch(request, db_path) if self.arm == d.WARM_CACHE else _run(request)
        return {"session": outcome.session_id, "evaluations": outcome.evaluations}


@dataclass(frozen=True)
class HelionQuickJob:
    """Helion's own quick autotune, run natively and timed from the job's start (set-up
    included); its pick is then re-timed by our harness (one recorded session, as the softmax
    study does), so every figure uses one timer."""

    problem: Problem
    seed: int
    shipped: Path | None
    arm: str = d.HELION_QUICK
    strategy: str = d.NATIVE
    autotune: Callable[[Any, tuple], Any] | None = field(default=None, compare=False)  # tests: a stand-in
    device: str = field(default="cuda", compare=False)  # tests: "cpu", with the stand-in
    expected_s: float | None = field(default=None, compare=False)  # how long it should take (with_expected_times)
    # An earlier try of this run whose search finished but whose re-timing was cut (data.finished_searches):
    # its pick is re-timed alone, and the run's figures are that search's.
    searched: FinishedSearch | None = field(default=None, compare=False)

    @property
    def key(self) -> tuple:
        return (self.problem.kernel, self.problem.shape, self.problem.dtype, self.arm, self.strategy, self.seed)

    def describe(self) -> str:
        again = "" if self.searched is None else \
            f" (its search finished in session {self.searched.session_id}: its pick re-timed alone)"
        return f"{self.arm} seed {self.seed} at {self.problem.label}{again}"

    def __call__(self, db_path: Path) -> dict[str, Any]:
        started = time.time()
        from autotune.baselines.helion_native import QUICK, pick_params, run_native
        from autotune.kernels import get_kernel, parse_dtype, parse_shape

        tags: dict[str, Any] = {"study": d.STUDY, "arm": self.arm, "strategy": self.strategy, "seed": self.seed,
                                "job_started": round(started, 3), "compile_caches": d.FRESH_CACHES}
        stage, thread_limit = "search", True
        with tempfile.TemporaryDirectory() as scratch:
            log_stem = Path(scratch) / "helion_quick"
            try:
                spec = get_kernel(self.problem.kernel)
                shape, dtype = parse_shape(self.problem.shape, spec.rank), parse_dtype(self.problem.dtype)
                if self.searched is not None:  # the earlier try's start and search; this re-timing's own start
                    tags.update({k: v for k, v in self.searched.tags.items() if k in SEARCH_TAGS},
                                retimes_search_of=self.searched.session_id, retime_started=round(started, 3))
                else:
                    with fresh_compile_caches():
                        native = run_native(spec, shape, dtype, log_stem, effort=QUICK, device=self.device,
                                            autotune=self.autotune or seeded_autotune(self.seed))
                    tags.update({"helion_job_s": round(time.time() - started, 3),
                                 "helion_wall_s": round(native.wall_s, 3), "helion_pick": native.config,
                                 **timeline_tags(native.timeline)})
                stage = "re-timing its pick"
                pick = pick_params(spec, shape, dtype, self.device, tags["helion_pick"])
                thread_limit = pick.thread_limit
                if pick.past_thread_limit:
                    tags["helion_pick_past_thread_limit"] = pick.past_thread_limit
                # The pick is a --config (generation 0, after the default) and the fixed strategy's one config.
                request = replace(tune_request(db_path, self.problem, strategy="fixed", budget=1, seconds=None,
                                               seed=self.seed, seed_from="", shipped=self.shipped, tags=tags),
                                  configs=(json.dumps(pick.params),),
                                  strategy_options=(("configs", {self.arm: pick.params}),), thread_limit=thread_limit)
                outcome = _run(request)
            except (Exception, KeyboardInterrupt) as error:  # a deadline or Ctrl-C too: recorded, then raised on
                tags["failed_after_s"] = round(time.time() - started, 3)
                if "helion_timeline" not in tags:  # what Helion's search had logged when it stopped
                    tags.update(timeline_tags(_logged_so_far(log_stem)))
                how = d.FAILED if isinstance(error, Exception) else d.INTERRUPTED
                said = f": {error}" if isinstance(error, Exception) and str(error) else ""
                record_failure(db_path, self.shipped, self.problem, self.device, tags,
                               f"{how} in {stage}: {type(error).__name__}{said}", thread_limit=thread_limit)
                raise
        return {"session": outcome.session_id, "helion_job_s": tags["helion_job_s"],
                "helion_configs": tags["helion_configs"]}


# The tags that carry a Helion run's start and search (its job time to the autotune call's
# return, Helion's own wall time, log and pick): a re-timing of its pick alone keeps them.
SEARCH_TAGS = ("job_started", "helion_job_s", "helion_wall_s", "helion_pick", "helion_configs", "helion_timeline")


def timeline_tags(timeline: Sequence[tuple[float, float]]) -> dict[str, Any]:
    """Helion's log as the run records it: each finished config's (s since its search began, ms;
    None for a failure), and their count."""
    return {"helion_configs": len(timeline),
            "helion_timeline": [[round(t, 3), ms if ms != float("inf") else None] for t, ms in timeline]}


def _logged_so_far(log_stem: Path) -> tuple[tuple[float, float], ...]:
    from autotune.baselines.helion_native import read_log

    try:
        return read_log(Path(f"{log_stem}.csv"))
    except (OSError, ValueError, KeyError):  # a line cut short where the search stopped
        return ()


def record_failure(db_path: Path, shipped: Path | None, problem: Problem, device: str, tags: dict[str, Any],
                   reason: str, thread_limit: bool = True) -> int | None:
    """Record a Helion quick run that failed or was interrupted as a session with no
    evaluations, its tags (the time spent, Helion's timeline so far, and its pick where its
    search finished) and `reason` as its exit: minutes of a GPU are not lost without a trace,
    and the report lists the run.  The report's figures leave it out and the runner plans it
    again.  The session is of the space the pick was re-timed in (`thread_limit`), as a finished
    run's would be.  None when even that cannot be written (the message is printed; the caller
    raises the job's own error)."""
    from autotune.databases import open_for_writing
    from autotune.kernels import get_kernel, parse_dtype, parse_shape
    from autotune.session_options import SessionOptions, thread_limit_option
    from autotune.task import bind_live

    try:
        spec = get_kernel(problem.kernel)
        task = bind_live(spec, parse_shape(problem.shape, spec.rank), parse_dtype(problem.dtype), device,
                         thread_limit=thread_limit)
        store = open_for_writing(db_path, shipped)
        try:
            store.put_space(task.identity)
            session_id = store.start_session(
                kernel=spec.name, shape=task.shape, dtype=task.dtype, strategy=d.NATIVE, seed=int(tags["seed"]),
                budget=None, seconds=None, fingerprint=task.fingerprint, device=task.identity.device,
                versions=task.identity.versions, mode="gpu",
                options=SessionOptions(db=str(db_path), shipped=str(shipped) if shipped else None, seed_from="",
                                       fresh=True, experiment=dict(tags),
                                       thread_limit=thread_limit_option(thread_limit)))
            store.end_session(session_id, reason, None)
            return session_id
        finally:
            store.close()
    except Exception as error:  # the failure itself is what the caller raises
        print(f"the failed run could not be recorded: {type(error).__name__}: {error}")
        return None


def seeded_autotune(seed: int) -> Callable[[Any, tuple], Any]:
    """Helion's search with its random seed set, forced even when its cache holds an answer."""

    def autotune(kernel: Any, inputs: tuple) -> Any:
        kernel.settings.autotune_random_seed = seed
        return kernel.autotune(inputs, force=True)

    return autotune


def tune_request(db_path: Path, problem: Problem, *, strategy: str, budget: int, seconds: float | None, seed: int,
                 seed_from: str, shipped: Path | None, tags: dict[str, Any]) -> Any:
    """The request `autotune tune` would build, measuring every config anew (`fresh`)."""
    from autotune.tuning import TuneRequest

    return TuneRequest(
        kernel=problem.kernel, shape=problem.shape, dtype=problem.dtype, strategy=strategy, budget=budget,
        seconds=seconds, seed=seed, generation_size=None, db=Path(db_path), replay=False, space=None, fresh=True,
        compile_workers=None, compile_timeout_s=d.COMPILE_TIMEOUT_S[problem.family], seed_from=seed_from,
        experiment=tuple(tags.items()), shipped=shipped, timing_target_ms=d.TIMING_MS)


def _run(request: Any) -> Any:
    from rich.console import Console

    from autotune.tuning import run_tune

    return run_tune(request, Console(width=150))


def in_scratch(request: Any, db_path: Path) -> Any:
    """Run `request` recording into a fresh database beside nothing but the shipped data, then
    merge it into `db_path` (also when cut short: what it measured comes home).  A `db_path`
    not yet made (a distributed worker's private one, a first run) is already fresh."""
    from autotune.cache import checkpoint
    from autotune.databases import open_for_writing

    if not Path(db_path).exists():
        return _run(request)
    with tempfile.TemporaryDirectory(prefix="heldout-") as folder:
        scratch = Path(folder) / "job.db"
        outcome = None
        try:
            outcome = _run(replace(request, db=scratch))
        finally:
            if scratch.exists():
                checkpoint(scratch)
                home = open_for_writing(db_path, request.shipped)
                try:
                    home.merge_from(scratch)
                    if outcome is not None:  # the session as `db_path` numbers it, not the scratch copy
                        outcome = replace(outcome, session_id=home.session_here(scratch, outcome.session_id))
                finally:
                    home.close()
        return outcome


Job = ArmJob | HelionQuickJob


def plan_jobs(plan: Plan, recorded: set[tuple] = frozenset(), cache_from: dict[Problem, list[str]] | None = None,
              limits: Mapping[tuple[Problem, str], TargetLimit] | None = None) -> list[Job]:
    """Every job of the plan not yet recorded, Helion quick first at each problem; our arms'
    search limit from `limits` where it has one (`--seconds target`), else the plan's."""
    jobs: list[Job] = []
    for problem in plan.problems:
        if d.HELION_QUICK in plan.arms:
            jobs += [HelionQuickJob(problem, seed, plan.shipped) for seed in plan.helion_seeds]
        for arm in (a for a in d.OUR_ARMS if a in plan.arms):
            shapes = tuple((cache_from or {}).get(problem, ())) if arm == d.WARM_CACHE else ()
            shipped = (plan.seed_data or plan.shipped) if arm == d.WARM_CACHE else plan.shipped
            limit = (limits or {}).get((problem, arm))
            seconds = plan.seconds if limit is None else limit.seconds
            jobs += [ArmJob(problem, arm, strategy, seed, plan.budget, seconds, shipped, shapes)
                     for strategy in plan.strategies for seed in plan.seeds]
    return [job for job in jobs if plan.again or job.key not in recorded]


def with_expected_times(jobs: Sequence[Job], times: Mapping[tuple, JobTime | None]) -> list[Job]:
    """Each job with how long it can be expected to take, from the finished runs of its arm: the
    longest at its problem, else the longest of its kernel at any shape (None where no run of
    the arm is recorded), times the arm's seed-to-seed spread (`seed_spread`).  Our arms' times
    are read as the set-up and final re-timing around the search time each run was given, plus
    the job's own search time.  `--deadline` starts no job that would not end by then
    (autotune.experiment.execute_jobs).

    Why the spread: the longest of one or two runs is no bound.  Helion quick's search is random,
    and a run started on the longest earlier time alone was cut at the deadline (its whole time
    lost) when it took a little longer than the run before it."""
    at_problem: dict[tuple, float] = {}
    of_kernel: dict[tuple, float] = {}
    for key, time_taken in times.items():
        if time_taken is None:
            continue
        kernel, shape, dtype, arm = key[:4]
        around = max(0.0, time_taken.seconds - (time_taken.limit_s or 0.0))  # one ended early: its whole limit
        at_problem[(kernel, shape, dtype, arm)] = max(around, at_problem.get((kernel, shape, dtype, arm), around))
        of_kernel[(kernel, dtype, arm)] = max(around, of_kernel.get((kernel, dtype, arm), around))
    spread = seed_spread(times)
    expected = []
    for job in jobs:
        p = job.problem
        around = at_problem.get((p.kernel, p.shape, p.dtype, job.arm), of_kernel.get((p.kernel, p.dtype, job.arm)))
        search = job.seconds if isinstance(job, ArmJob) else 0.0
        estimate = None if around is None else (around + search) * spread.get(job.arm, 1.0)
        expected.append(replace(job, expected_s=estimate))
    return expected


def seed_spread(times: Mapping[tuple, JobTime | None]) -> dict[str, float]:
    """Per arm, how much longer one run's job takes than another's of the same strategy at the
    same problem with the same search limit: the median, over every such group of two or more
    finished runs (seeds), of its longest job time over its shortest.  An arm with no such group
    has none (1.0 is then assumed)."""
    groups: dict[tuple, list[float]] = {}
    for key, time_taken in times.items():
        if time_taken is not None and time_taken.seconds > 0:
            groups.setdefault((*key[:5], time_taken.limit_s), []).append(time_taken.seconds)
    ratios: dict[str, list[float]] = {}
    for group, seconds in groups.items():
        if len(seconds) > 1:
            ratios.setdefault(group[3], []).append(max(seconds) / min(seconds))
    return {arm: statistics.median(values) for arm, values in ratios.items()}


def check_held_out(plan: Plan) -> dict[Problem, list[str]]:
    """Refuse problems that are no longer held out (the shipped data records another session at
    their shape, or would seed a warm-cache run from their own shape); the shapes each
    problem's cache seeds come from."""
    from autotune.kernels import get_kernel

    from .data import cache_sources, foreign_sessions

    if plan.shipped is None or not plan.shipped.exists():
        if d.WARM_CACHE in plan.arms:
            raise UserError("the warm-cache arm seeds from the shipped data: name it with --shipped (cache.db)")
        return {}
    from autotune.cache import Cache

    # the data the warm-cache seeds read (the study's own sessions are in neither check)
    shipped = Cache.open(plan.seed_data or plan.shipped, migrate=False)  # read only: never migrated here
    try:
        foreign = foreign_sessions(shipped, plan.problems)
        if foreign:
            named = ", ".join(f"session {s['id']} ({s['kernel']} {'x'.join(map(str, s['shape']))})"
                              for s in foreign[:5])
            raise UserError(f"{plan.shipped} records {named}: those shapes are no longer held out for their kernels")
        sources = {}
        for problem in plan.problems:
            shapes, distance = cache_sources(shipped, problem, get_kernel(problem.kernel).source_hash())
            if distance == 0 and d.WARM_CACHE in plan.arms:
                raise UserError(f"{plan.shipped} records {problem.label} itself: a warm-cache run would seed itself")
            sources[problem] = shapes
        return sources
    finally:
        shipped.close()


def select(plan: Plan, shapes: Sequence[str] = (), arms: Sequence[str] = ()) -> Plan:
    """The plan narrowed to `shapes` (a shape or 'kernel shape') and `arms`; unknown ones refused."""
    if shapes:
        chosen = []
        for text in shapes:
            found = d.problem_named(text)
            if not found:
                known = ", ".join(p.shape for p in d.PROBLEMS)
                raise UserError(f"shape {text!r} is not in the experiment (its shapes: {known})")
            chosen += [p for p in found if p not in chosen]
        plan = replace(plan, problems=tuple(chosen))
    unknown = [a for a in arms if a not in d.ARMS]
    if unknown:
        raise UserError(f"arm(s) {', '.join(unknown)} are not in the experiment (its arms: {', '.join(d.ARMS)})")
    return replace(plan, arms=tuple(arms)) if arms else plan


def execute(plan: Plan, options: ExperimentOptions, console: Any) -> None:
    from autotune.tuning import gpu_available

    from .data import without_study

    if not gpu_available():
        raise UserError("the held-out experiment measures on a GPU and this machine has none; "
                        f"`python -m experiments.heldout.report --db {options.db}` regenerates the report")
    with without_study(plan.shipped) as seed_data:
        jobs = pending_jobs(replace(plan, seed_data=seed_data), options.db, console)
        import helion  # noqa: F401 - imported once here, so no job's time counts the imports
        import torch  # noqa: F401

        import autotune.tuning  # noqa: F401
        arm_jobs = [job for job in jobs if isinstance(job, ArmJob)]
        if arm_jobs:
            warm_up(console, [job.problem for job in arm_jobs])
        execute_jobs(jobs, options, console, describe=lambda job: job.describe(), noun="run")


def warm_up(console: Any, problems: Sequence[Problem] = (), device: str = "cuda") -> None:
    """Start the workers' fork server and fork one worker from it, and bind each kernel the jobs
    tune once, before the first job.  Like the imports, costs of the runner process once, not of
    whichever job happens to run first (later jobs of a process find the server warm and the
    kernel's binding machinery loaded, as later sessions of a user's process do; a first job's
    binding took several times a later one's, and at the shortest allowances that decided the
    verdict).  The kernels are bound at `warm_up_shape`, which no job tunes, so no job finds its
    own binding made."""
    from autotune.evaluators.gpu_process import worker_context

    started = time.time()
    worker = worker_context().Process(target=time.sleep, args=(0,))
    worker.start()
    worker.join()
    bound = _bind_once_each(problems, device)
    console.print(f"workers' fork server ready and {bound} kernel(s) bound in {time.time() - started:.1f} s, "
                  "before the first job (no job counts it)")


def warm_up_shape(problem: Problem) -> tuple[int, ...]:
    """A shape of the problem's kernel that no job tunes: each dimension halved (at least 16)."""
    return tuple(max(16, size // 2) for size in problem.dims)


def _bind_once_each(problems: Sequence[Problem], device: str) -> int:
    import torch

    from autotune.kernels import get_kernel
    from autotune.task import bind_live

    kernels = {}
    for problem in problems:
        kernels.setdefault((problem.kernel, problem.dtype), problem)
    for problem in kernels.values():
        bind_live(get_kernel(problem.kernel), warm_up_shape(problem), getattr(torch, problem.dtype), device)
    return len(kernels)


def pending_jobs(plan: Plan, db: Path, console: Any) -> list[Job]:
    """The plan's jobs not yet recorded in `db` or the shipped data, after checking that its
    problems are still held out."""
    from .data import finished_searches, job_times

    sources = check_held_out(plan)
    times = job_times(db, plan.shipped)
    recorded = set() if plan.again else set(times)
    limits = read_target_limits(plan, db, console) if plan.limit_to_target else None
    jobs = with_expected_times(plan_jobs(plan, recorded, sources, limits), times)
    if not plan.again:  # a Helion run whose search finished before its re-timing was cut: re-timed alone
        searches = finished_searches(db, plan.shipped)
        jobs = [replace(job, searched=searches[job.key], expected_s=None)
                if isinstance(job, HelionQuickJob) and job.key in searches else job for job in jobs]
    skipped = len(plan_jobs(replace(plan, again=True), set(), sources)) - len(jobs)
    if skipped:
        console.print(f"{skipped} run(s) already recorded in {db} or {plan.shipped} (--again repeats them)")
    return jobs


def read_target_limits(plan: Plan, db: Path, console: Any) -> dict[tuple[Problem, str], TargetLimit]:
    """`--seconds target`: each (problem, arm)'s search limit from the recorded runs, said."""
    from .data import load_runs
    from .limits import target_limits

    limits = target_limits(load_runs(db, plan.shipped), plan.problems, plan.arms)
    for (problem, arm), limit in limits.items():
        console.print(f"{arm} at {problem.label}: {limit.seconds:.1f} s of search ({limit.allowed_s:.1f} s allowed "
                      f"from the job's start, less the shortest set-up recorded, {limit.set_up_s:.1f} s)")
    rest = [f"{arm} at {p.label}" for p in plan.problems for arm in plan.arms
            if arm in d.OUR_ARMS and (p, arm) not in limits]
    if rest:
        console.print(f"no time target or no Helion quick run recorded yet, so {plan.seconds:g} s of search: "
                      + ", ".join(rest))
    return limits


def run(options: ExperimentOptions, console: Any) -> None:
    """`autotune experiment run experiments/heldout`: --methods picks arms; strategies and seeds
    are the definition's (the runner's own command line sets them)."""
    plan = select(Plan(shipped=options.shipped, again=options.again), options.shapes, options.methods)
    plan = replace(plan, seconds=options.seconds or plan.seconds, budget=options.budget or plan.budget)
    execute(plan, options, console)


def seconds_option(text: str) -> float | str:
    """argparse's reading of `--seconds` (limits.parse_seconds)."""
    try:
        return parse_seconds(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def main(argv: Sequence[str] | None = None) -> None:
    from rich.console import Console

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, default=Path("runs/heldout.db"), help="records here")
    parser.add_argument("--shipped", default="cache.db", help="the shipped data, read beside --db ('none': none)")
    parser.add_argument("--shapes", default="", help="comma-separated shapes (or 'kernel shape') of the experiment")
    parser.add_argument("--arms", default="", help=f"comma-separated subset of {', '.join(d.ARMS)}")
    parser.add_argument("--strategies", default=",".join(d.STRATEGIES))
    parser.add_argument("--seeds", default=",".join(map(str, d.SEEDS)))
    parser.add_argument("--helion-seeds", default=",".join(map(str, d.HELION_SEEDS)))
    parser.add_argument("--seconds", type=seconds_option, default=d.SECONDS,
                        help=f"search time per session, from its start ({d.SECONDS:g}); '{TARGET}': the time each "
                             "run's target allows at its shape, less the shortest set-up recorded (where a shape has "
                             f"no time target or no Helion quick run yet, {d.SECONDS:g})")
    parser.add_argument("--budget", type=int, default=d.BUDGET, help="configs per session")
    parser.add_argument("--again", action="store_true", help="run recorded runs again")
    parser.add_argument("--deadline", type=positive_float, default=None, metavar="SECONDS",
                        help="wall clock for the whole run (a batch job's limit): no run starts after it, nor one "
                             "that the recorded runs of its arm say would not end by then; the run going then is "
                             "interrupted and recorded as such; the same command runs what is left")
    parser.add_argument("--dry-run", action="store_true", help="print the runs that would run, and stop")
    started = time.monotonic()
    args = parser.parse_args(argv)
    listed = (lambda text: tuple(x.strip() for x in text.split(",") if x.strip()))  # noqa: E731
    shipped = None if args.shipped.lower() in ("", "none") else Path(args.shipped)
    plan = select(Plan(strategies=listed(args.strategies), seeds=tuple(map(int, listed(args.seeds))),
                       helion_seeds=tuple(map(int, listed(args.helion_seeds))),
                       seconds=d.SECONDS if args.seconds == TARGET else args.seconds,
                       limit_to_target=args.seconds == TARGET,
                       budget=args.budget, shipped=shipped, again=args.again), listed(args.shapes), listed(args.arms))
    args.db.parent.mkdir(parents=True, exist_ok=True)
    options = ExperimentOptions(folder=Path(__file__).parent, db=args.db, out=Path(__file__).parent / "report",
                                shipped=shipped, again=args.again,
                                deadline_at=started + args.deadline if args.deadline is not None else None)
    console = Console(width=150)
    if args.dry_run:
        from .data import without_study

        with without_study(shipped) as seed_data:
            jobs = pending_jobs(replace(plan, seed_data=seed_data), args.db, console)
            for job in jobs:
                console.print(job.describe() + ("" if job.expected_s is None else f" (about {job.expected_s:.0f} s)"))
            known = [job.expected_s for job in jobs if job.expected_s is not None]
            if known:
                console.print(f"about {sum(known):.0f} s in all for the {len(known)} run(s) with recorded runs of "
                              "their arm (the longest of each, times its seed-to-seed spread), before the runner's "
                              "own start")
        return
    execute(plan, options, console)


if __name__ == "__main__":
    from autotune.cache_schema import CacheError
    from autotune.commands.experiment import EXIT_DEADLINE
    from autotune.experiment import DeadlineReached

    try:
        main()
    except (UserError, CacheError) as error:
        raise SystemExit(f"heldout: {error}") from None
    except DeadlineReached as reached:  # what finished, and the interrupted run, are recorded
        print(f"heldout: {reached}", file=sys.stderr)
        raise SystemExit(EXIT_DEADLINE) from None
