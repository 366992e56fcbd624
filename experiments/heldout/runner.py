"""Runs the held-out experiment on a GPU machine: one job per (problem, arm, strategy, seed).

    python -m experiments.heldout.runner --db runs/heldout.db [--shapes 2048x100000,...]
        [--arms cold,warm-cache] [--strategies pattern,evolution] [--seeds 1,2,3] [--seconds 60|target]
        [--deadline 3000]

Each job (jobs.py) records one session, tagged with the study, arm, strategy, seed and the moment
the job started (before anything was bound or started), so the report counts the set-up.  Runs
already recorded are skipped: a run cut short is continued by the same command.  A run that fails
or is interrupted (`--deadline`, Ctrl-C) is recorded as such, Helion quick's with what its search
had logged, and the report lists it; a Helion search that finished before the re-timing of its pick
was cut is not run again: the next plan re-times its pick alone.  Our arms measure
every config anew (`fresh`), so no run is answered from another's measurements; the
warm-cache arm reads its seeds from the shipped data alone (it records into a scratch
database merged home afterwards), so a held-out shape never seeds itself, and a problem whose
shape the shipped data records is refused.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from autotune.cli import positive_float
from autotune.errors import UserError
from autotune.evaluators.compile_ahead import COMPILE_AHEAD
from autotune.evaluators.generated_module import BUILD_FROM_WORKER
from autotune.experiment import DeadlineReached, ExperimentOptions, execute_jobs
from autotune.experiment_devices import recording_gpu

from . import definition as d
from .definition import Problem
from .gate import VerdictGate
from .jobs import ArmJob, HelionQuickJob, Job
from .limits import TARGET, parse_seconds

if TYPE_CHECKING:
    from .data import JobTime, Run
    from .limits import TargetLimit


@dataclass(frozen=True)
class Plan:
    """What to run: the problems, arms, strategies and seeds, and each session's limits."""

    problems: tuple[Problem, ...] = d.PROBLEMS
    arms: tuple[str, ...] = d.ARMS
    strategies: tuple[str, ...] = d.STRATEGIES
    # Strategies run by one arm alone, (arm, strategy), after the plan's `strategies`
    # (`--strategies pattern-ends,cold:pattern-ties`): a strategy judged cold need not run warm.
    arm_strategies: tuple[tuple[str, str], ...] = ()
    seeds: tuple[int, ...] = d.SEEDS
    helion_seeds: tuple[int, ...] = d.HELION_SEEDS
    seconds: float = d.SECONDS
    # `--seconds target`: each run of ours is given the time its target allows at its shape
    # (limits.py); `seconds` stands where there is no such time yet.
    limit_to_target: bool = False
    budget: int = d.BUDGET
    shipped: Path | None = Path("data/shipped.db")
    # Whether our arms' benchmark processes load the compile workers' code, and whether their
    # evaluators compile ahead (the evaluator's switches, which the commands below read): their
    # runs are labelled and judged apart.
    worker_built: bool = False
    compiled_ahead: bool = False
    again: bool = False
    # What the warm-cache arm's seeds read: the shipped data without this study's sessions
    # (isolation.without_study); the shipped data itself where not set.
    seed_data: Path | None = None
    # The GPU the runs are recorded on, as sessions name it: only its recorded runs are skipped,
    # give the search limits and decide verdicts (devices.py).  `execute` sets the GPU's own, a
    # dry run `--device` or the study's (None reads every device's runs: tests of one device).
    device: str | None = None


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
            jobs += [ArmJob(problem, arm, strategy, seed, plan.budget, seconds, shipped, shapes, plan.worker_built,
                            plan.compiled_ahead)
                     for strategy in strategies_of(plan, arm) for seed in plan.seeds]
    return [job for job in jobs if plan.again or job.key not in recorded]


def strategies_of(plan: Plan, arm: str) -> list[str]:
    """The strategies `arm` runs: the plan's, then those named for the arm alone."""
    strategies = list(plan.strategies)
    return strategies + [s for a, s in plan.arm_strategies if a == arm and s not in strategies]


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

    from .isolation import cache_sources, foreign_sessions

    if plan.shipped is None or not plan.shipped.exists():
        if d.WARM_CACHE in plan.arms:
            raise UserError("the warm-cache arm seeds from the shipped data: name it with --shipped (cache.db)")
        return {}
    from autotune.store.cache import Cache

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


def with_strategies(plan: Plan, names: Sequence[str]) -> Plan:
    """The plan running `names`: a strategy for every arm of ours, or 'arm:strategy' for that arm
    alone; an unknown arm or strategy is refused before anything runs."""
    from autotune.strategies import strategy_names

    known = set(strategy_names(retired=True))  # the study re-runs retired presets it declared
    every: list[str] = []
    alone: list[tuple[str, str]] = []
    for name in names:
        arm, _, strategy = name.rpartition(":")
        if arm and arm not in d.OUR_ARMS:
            raise UserError(f"{name!r}: {arm!r} is not one of our arms ({', '.join(d.OUR_ARMS)})")
        if strategy not in known:
            raise UserError(f"{name!r}: unknown strategy {strategy!r} (known: {', '.join(sorted(known))})")
        if arm:
            alone.append((arm, strategy))
        else:
            every.append(strategy)
    return replace(plan, strategies=tuple(every), arm_strategies=tuple(alone))


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


def execute(plan: Plan, options: ExperimentOptions, console: Any, until_missed: bool = False,
            until_decided: bool = False) -> None:
    """Run the plan's pending jobs, phase by phase; with `until_missed`, no run of a series
    that has missed its time target at a shape starts, and with `until_decided` also no seed
    of a series at a shape where it has met its target (gate.py)."""
    from autotune.tuning import gpu_available

    from .isolation import without_study

    if not gpu_available():
        raise UserError("the held-out experiment measures on a GPU and this machine has none; "
                        f"`python -m experiments.heldout.report --db {options.db}` regenerates the report")
    plan = replace(plan, device=recording_gpu(plan.device))
    with without_study(plan.shipped) as seed_data:
        import helion  # noqa: F401 - imported once here, so no job's time counts the imports
        import torch  # noqa: F401

        import autotune.tuning  # noqa: F401
        not_started: list[str] = []
        for phase in phases(replace(plan, seed_data=seed_data)):
            # read once for both the search limits and the gate: a few seconds on the shipped data
            runs = recorded_runs(phase, options.db) if (until_missed or until_decided) and any(
                arm in d.OUR_ARMS for arm in phase.arms) else None
            jobs = pending_jobs(phase, options.db, console, runs)
            arm_jobs = [job for job in jobs if isinstance(job, ArmJob)]
            past_deadline = options.deadline_at is not None and time.monotonic() >= options.deadline_at
            if arm_jobs and not past_deadline:  # past it, execute_jobs says what was not started
                warm_up(console, [job.problem for job in arm_jobs])
            gate = verdict_gate(phase, options.db, runs, until_decided) if runs is not None and arm_jobs else None
            try:
                execute_jobs(jobs, options, console, describe=lambda job: job.describe(), noun="run",
                             skip=gate.skip_reason if gate else None, finished=gate.finished if gate else None)
            except DeadlineReached as reached:
                if reached.interrupted is not None:  # the deadline itself: nothing more starts
                    raise DeadlineReached(reached.interrupted, not_started + list(reached.not_started)) from None
                not_started += reached.not_started  # runs that would not fit: the next phase's may
        if not_started:
            raise DeadlineReached(not_started=not_started)


def recorded_runs(plan: Plan, db: Path) -> list[Run]:
    """The study's finished runs in `db` and the shipped data (none where neither exists)."""
    from .data import load_runs

    nothing_recorded = not db.exists() and (plan.shipped is None or not plan.shipped.exists())
    return [] if nothing_recorded else load_runs(db, plan.shipped, plan.device)


def verdict_gate(plan: Plan, db: Path, runs: Sequence[Run], skip_met: bool = False) -> VerdictGate:
    """The series that have missed a time target at any of the study's shapes (not only the
    plan's: a series missed anywhere has missed), and with `skip_met` where each has met it, from
    the runs recorded so far (`recorded_runs`); it hears of each run that finishes after, read
    back from `db`."""
    from .limits import target_limits

    gate = VerdictGate(target_limits(runs, d.PROBLEMS, d.OUR_ARMS), len(d.SEEDS), db, plan.shipped, skip_met)
    gate.read(runs)
    return gate


def phases(plan: Plan) -> list[Plan]:
    """The plan in the order its runs are planned: with `--seconds target`, Helion quick's runs
    first and then our arms', planned once Helion's are recorded, since each arm's search limit
    is read from them (a shape measured for the first time would otherwise give our arms the
    default `--seconds`)."""
    ours = tuple(arm for arm in plan.arms if arm != d.HELION_QUICK)
    if not plan.limit_to_target or d.HELION_QUICK not in plan.arms or not ours:
        return [plan]
    return [replace(plan, arms=(d.HELION_QUICK,)), replace(plan, arms=ours)]


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


def pending_jobs(plan: Plan, db: Path, console: Any, runs: Sequence[Run] | None = None) -> list[Job]:
    """The plan's jobs not yet recorded in `db` or the shipped data, after checking that its
    problems are still held out; `runs`: the recorded runs where the caller read them already."""
    from .data import finished_searches, job_times

    sources = check_held_out(plan)
    times = job_times(db, plan.shipped, plan.device)
    recorded = set() if plan.again else set(times)
    limits = read_target_limits(plan, db, console, runs) if plan.limit_to_target else None
    jobs = with_expected_times(plan_jobs(plan, recorded, sources, limits), times)
    if not plan.again:  # a Helion run whose search finished before its re-timing was cut: re-timed alone
        searches = finished_searches(db, plan.shipped, plan.device)
        jobs = [replace(job, searched=searches[job.key], expected_s=None)
                if isinstance(job, HelionQuickJob) and job.key in searches else job for job in jobs]
    skipped = len(plan_jobs(replace(plan, again=True), set(), sources)) - len(jobs)
    if skipped:
        console.print(f"{skipped} run(s) already recorded in {db} or {plan.shipped} (--again repeats them)")
    return jobs


def read_target_limits(plan: Plan, db: Path, console: Any, runs: Sequence[Run] | None = None
                       ) -> dict[tuple[Problem, str], TargetLimit]:
    """`--seconds target`: each (problem, arm)'s search limit from the recorded runs (`runs`, else
    read here), said."""
    from .limits import target_limits

    limits = target_limits(recorded_runs(plan, db) if runs is None else runs, plan.problems, plan.arms)
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
    plan = select(Plan(shipped=options.shipped, again=options.again, worker_built=BUILD_FROM_WORKER,
                       compiled_ahead=COMPILE_AHEAD), options.shapes,
                  options.methods)
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
    parser.add_argument("--shipped", default="data/shipped.db", help="the shipped data, read beside --db ('none': none)")
    parser.add_argument("--shapes", default="", help="comma-separated shapes (or 'kernel shape') of the experiment")
    parser.add_argument("--arms", default="", help=f"comma-separated subset of {', '.join(d.ARMS)}")
    parser.add_argument("--strategies", default=",".join(d.STRATEGIES),
                        help="comma-separated strategies for every arm of ours, or 'arm:strategy' for one arm alone "
                             "(pattern-ends,cold:pattern-ties)")
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
    parser.add_argument("--until-missed", action="store_true",
                        help="start no run of a series (arm and strategy) once it has missed its time target at a "
                             "shape (most of the shape's seeds not within 2%% of Helion quick in the time allowed), "
                             "counting the runs recorded before")
    parser.add_argument("--until-decided", action="store_true",
                        help="as --until-missed, and start no further seed of a series at a shape where most of "
                             "the study's seeds already met its time target there (the median meets it whatever "
                             "the others find)")
    parser.add_argument("--device", default=None,
                        help="the GPU whose recorded runs count, as sessions name it (default: this machine's; in "
                             f"a dry run without one, the only one recorded, or {d.DEVICE!r} among several)")
    parser.add_argument("--dry-run", action="store_true", help="print the runs that would run, and stop")
    started = time.monotonic()
    args = parser.parse_args(argv)
    listed = (lambda text: tuple(x.strip() for x in text.split(",") if x.strip()))  # noqa: E731
    shipped = None if args.shipped.lower() in ("", "none") else Path(args.shipped)
    plan = select(Plan(seeds=tuple(map(int, listed(args.seeds))),
                       helion_seeds=tuple(map(int, listed(args.helion_seeds))),
                       seconds=d.SECONDS if args.seconds == TARGET else args.seconds,
                       limit_to_target=args.seconds == TARGET,
                       budget=args.budget, shipped=shipped, again=args.again, worker_built=BUILD_FROM_WORKER,
                       compiled_ahead=COMPILE_AHEAD, device=args.device),
                  listed(args.shapes), listed(args.arms))
    plan = with_strategies(plan, listed(args.strategies))
    args.db.parent.mkdir(parents=True, exist_ok=True)
    options = ExperimentOptions(folder=Path(__file__).parent, db=args.db, out=Path(__file__).parent / "report",
                                shipped=shipped, again=args.again,
                                deadline_at=started + args.deadline if args.deadline is not None else None)
    console = Console(width=150)
    if args.dry_run:
        from .isolation import without_study

        from autotune.tuning import gpu_available

        from .devices import device_to_read, study_devices

        if plan.device is None and gpu_available():
            plan = replace(plan, device=recording_gpu(None))
        elif plan.device is None:  # without a GPU: the device the recorded runs name, as the report reads them
            recorded = study_devices(args.db, shipped)
            plan = replace(plan, device=device_to_read(recorded, None) if recorded else d.DEVICE)
        console.print(f"runs recorded on {plan.device} count")
        with without_study(shipped) as seed_data:
            runs = recorded_runs(plan, args.db) if args.until_missed or args.until_decided else None
            jobs = pending_jobs(replace(plan, seed_data=seed_data), args.db, console, runs)
            if len(phases(plan)) > 1:
                console.print("Helion quick's runs come first: our arms' search limits are read once they are "
                              "recorded (below, from what is recorded now)")
                jobs.sort(key=lambda job: not isinstance(job, HelionQuickJob))
            gate = verdict_gate(plan, args.db, runs, args.until_decided) if runs is not None else None
            reasons = {id(job): gate.skip_reason(job) for job in jobs} if gate else {}
            jobs = [job for job in jobs if reasons.get(id(job)) is None]
            for reason in dict.fromkeys(r for r in reasons.values() if r is not None):
                console.print(f"not started (its verdict is decided): {reason}")
            for job in jobs:
                console.print(job.describe() + ("" if job.expected_s is None else f" (about {job.expected_s:.0f} s)"))
            known = [job.expected_s for job in jobs if job.expected_s is not None]
            if known:
                console.print(f"about {sum(known):.0f} s in all for the {len(known)} run(s) with recorded runs of "
                              "their arm (the longest of each, times its seed-to-seed spread), before the runner's "
                              "own start")
        return
    execute(plan, options, console, until_missed=args.until_missed, until_decided=args.until_decided)


if __name__ == "__main__":
    from autotune.store.schema import CacheError
    from autotune.commands.experiment import EXIT_DEADLINE

    try:
        main()
    except (UserError, CacheError) as error:
        raise SystemExit(f"heldout: {error}") from None
    except DeadlineReached as reached:  # what finished, and the interrupted run, are recorded
        print(f"heldout: {reached}", file=sys.stderr)
        raise SystemExit(EXIT_DEADLINE) from None
