"""The held-out experiment's jobs: one of our arms' tuning session, or Helion quick run natively
with its pick re-timed by our harness.  Each job records one session tagged with the study, arm,
strategy, seed and the moment it started (before anything was bound), so the report counts the
set-up; a Helion quick run that fails or is cut is recorded too, with what its search had logged."""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from autotune.evaluators.gpu_process import fresh_compile_caches

from . import definition as d
from .definition import Problem

if TYPE_CHECKING:
    from .data import FinishedSearch


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
    # Whether its benchmark process will load the compile workers' code, and whether its evaluator
    # will compile ahead: its run's label then carries definition.tooling_mark, and so must its
    # key, or the runner would plan it again.
    worker_built: bool = False
    compiled_ahead: bool = False
    expected_s: float | None = field(default=None, compare=False)  # how long it should take (with_expected_times)

    @property
    def key(self) -> tuple:
        return (self.problem.kernel, self.problem.shape, self.problem.dtype, self.arm, self.label, self.seed)

    @property
    def label(self) -> str:
        """The strategy label its run will be recorded under (data.strategy_label)."""
        return self.strategy + d.tooling_mark(self.worker_built, self.compiled_ahead)

    def describe(self) -> str:
        return f"{self.arm} {self.label} seed {self.seed} at {self.problem.label}"

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
            outcome = in_scratch(request, db_path) if self.arm == d.WARM_CACHE else run_session(request)
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
                outcome = run_session(request)
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


def run_session(request: Any) -> Any:
    """One `autotune tune` session, as the command runs it (tests replace it here)."""
    from rich.console import Console

    from autotune.tuning import run_tune

    return run_tune(request, Console(width=150))


def in_scratch(request: Any, db_path: Path) -> Any:
    """Run `request` recording into a fresh database beside nothing but the shipped data, then
    merge it into `db_path` (also when cut short: what it measured comes home).  A `db_path`
    not yet made (a distributed worker's private one, a first run) is already fresh."""
    from autotune.store.cache import checkpoint
    from autotune.databases import open_for_writing

    if not Path(db_path).exists():
        return run_session(request)
    with tempfile.TemporaryDirectory(prefix="heldout-") as folder:
        scratch = Path(folder) / "job.db"
        outcome = None
        try:
            outcome = run_session(replace(request, db=scratch))
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
