"""`autotune tune`: validate the request, pick GPU or replay, build the pieces, run."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from autotune.store.cache import Cache, SpaceRecord
from autotune.store.merge import FORKED
from autotune.databases import SHIPPED_DB, open_for_reading, open_for_writing
from autotune.errors import UserError
from autotune.evaluators.timing_target import SEARCH_TARGET_MS
from autotune.experiment import experiment_tags
from autotune.session import Session, SessionOutcome, SessionSettings
from autotune.session_options import SessionOptions, thread_limit_option
from autotune.strategies import strategy_source
from autotune.task import TuningTask, bind_live, bind_recorded
from search_spaces.space import canonical_json


@dataclass(frozen=True)
class TuneRequest:
    kernel: Any  # an autotune.Kernel, or its locator: a built-in name, FILE.py:NAME or module:NAME
    shape: str
    dtype: str
    strategy: str
    budget: int | None
    seconds: float | None
    seed: int
    generation_size: int | None
    db: Path  # the user's database: every session is recorded here, and read with the shipped data
    replay: bool
    space: str | None
    fresh: bool
    compile_workers: int | None
    compile_timeout_s: float
    grid: tuple[str, ...] = ()
    grid_sample: bool = False
    seed_from: str = "default"
    resume: int | None = None
    strategy_options: tuple[tuple[str, Any], ...] = ()
    configs: tuple[str, ...] = ()  # --config: JSON objects or files, evaluated first (seeds of origin "user")
    timing_target_ms: float = SEARCH_TARGET_MS  # kernel time spent timing one config (more: steadier medians)
    slow_factor: float = 3.0  # over this many times the fastest so far, a config keeps its estimate
    compile_timeout_factor: float = 10.0  # the compile limit tightens to this times the median compile
    run_timeout_s: float = 30.0  # a compiled config's first run; longer and its worker is killed
    # Set by an experiment runner: which study and job a session belongs to (stored in its options,
    # so reports find their sessions in the database alone).
    experiment: tuple[tuple[str, Any], ...] = ()
    workers: str | None = None  # --workers: spread evaluation over a Dask cluster (local-gpus, local:N, address)
    interpret: bool = False  # run configs on the CPU through the Triton interpreter (correctness, not speed)
    shipped: Path | None = SHIPPED_DB  # the shipped measurements: read beside `db`, never written
    resume_last: bool = False  # --resume last: the latest unfinished session of `db`
    # False: a Helion space without our elements-per-thread limit, so that a config past it (one
    # another tuner picked) can be given and measured; the space, and its fingerprint, differ.
    thread_limit: bool = True


def gpu_available() -> bool:
    import os

    from autotune.device import gpu_available as available, gpu_device_present

    # No NVIDIA driver (nor WSL's GPU device, where the driver shows no files): no GPU, and a
    # replay need not import torch to say so.
    return (gpu_device_present() or os.path.exists("/dev/dxg")) and available()


FINISHED = ("budget", "strategy finished", "strategy exhausted", FORKED)


def resumed_request(request: TuneRequest) -> TuneRequest:
    """The request a stopped session was started with, read back from its database.  A
    `--seconds` given now is this call's wall clock (a long recording made in short calls);
    without one, each call gets the session's own."""
    mode_replay = request.replay or not gpu_available()
    path = request.db
    if not path.exists():
        raise UserError(f"no database {path}: nothing to resume (sessions are recorded in --db, default user.db)")
    journal = open_for_reading(path, request.shipped)
    try:
        if request.resume_last:
            request = replace(request, resume=_last_session(journal, path))
        session = journal.session(request.resume)
        own = journal.holds_session(request.resume)
    finally:
        journal.close()
    if session is None:
        raise UserError(f"no session {request.resume} in {path}")
    if not own:
        raise UserError(f"session {request.resume} is part of the shipped data ({request.shipped}), which is "
                        f"read-only: start a new session instead (what it measured is reused, or replayed)")
    if session["exit_reason"] == FORKED:
        fork = session["options"].forked_from or {}
        raise UserError(f"session {request.resume} is a fork of session {fork.get('session')} kept by a merge: it "
                        f"lacks the history before generation {fork.get('generation')}, so it cannot be resumed")
    if session["mode"] != ("replay" if mode_replay else "gpu"):
        raise UserError(f"session {request.resume} was a {session['mode']} session; resume it the same way")
    budget = session["budget"]
    if session["exit_reason"] == "budget" and request.budget is not None and budget is not None \
            and request.budget > budget:
        if session["strategy"] == "grid":
            raise UserError("a grid session's sample depends on its budget: start a new session with the larger one")
        budget = request.budget  # go on past the budget it reached: generation by generation
    elif session["exit_reason"] in FINISHED:
        more = " (a larger --budget continues it)" if session["exit_reason"] == "budget" else ""
        raise UserError(f"session {request.resume} already finished ({session['exit_reason']}){more}; "
                        "nothing to resume")
    options: SessionOptions = session["options"]
    return replace(
        request, kernel=options.kernel_locator or session["kernel"], shape="x".join(map(str, session["shape"])),
        dtype=session["dtype"], strategy=session["strategy"], seed=session["seed"], budget=budget,
        seconds=request.seconds if request.seconds is not None else session["seconds"],
        generation_size=options.generation_size, fresh=options.fresh, grid=options.grid,
        grid_sample=options.grid_sample, seed_from=options.seed_from,
        strategy_options=tuple(options.strategy_options.items()),
        configs=tuple(canonical_json(point) for point in options.user_configs),
        timing_target_ms=options.timing_target_ms, slow_factor=options.slow_factor,
        compile_timeout_factor=options.compile_timeout_factor,
        experiment=tuple(experiment_tags(options).items()), workers=request.workers or options.workers,
        thread_limit=options.thread_limit is not False,
    )


def _last_session(journal: Cache, path: Path) -> int:
    """--resume last: the newest session of the user's database."""
    for session in journal.sessions(limit=1_000_000):
        if journal.holds_session(session["id"]):
            return int(session["id"])
    raise UserError(f"no session in {path} to resume")


def run_tune(request: TuneRequest, console: Console) -> SessionOutcome:
    from autotune import startup
    from autotune.kernel import Kernel
    from autotune.kernel_loader import resolve_kernel
    from autotune.kernels.names import check_dtype, parse_shape
    from autotune.seeds import collect_seeds, heuristic_provenance, parse_sources, read_configs, user_seeds
    from autotune.strategies import UnknownStrategy, get_strategy

    clock = startup.take()  # from the command's start: what the session's first line says
    if (request.resume is not None or request.resume_last) and request.configs:
        raise UserError("--config cannot be given with --resume: a resumed session evaluates its own configs")
    if request.resume is not None or request.resume_last:
        request = resumed_request(request)
    elif not request.kernel or not request.shape:
        raise UserError("tune needs a kernel and --shape (or --resume SESSION)")
    # Validate everything before any database is opened or created.
    try:
        sources = parse_sources(request.seed_from)
    except ValueError as error:
        raise UserError(str(error)) from None
    configs = read_configs(request.configs)
    # A kernel named now must be the autotune.Kernel; a recorded locator (--resume) is read back.
    resumed = request.resume is not None or request.resume_last
    spec = request.kernel if isinstance(request.kernel, Kernel) else \
        _light_kernel(request) or resolve_kernel(request.kernel, refuse_wrapped=not resumed)
    try:
        strategy_cls = get_strategy(request.strategy)
    except UnknownStrategy as error:
        raise UserError(error.args[0]) from None
    try:
        shape = parse_shape(request.shape, spec.rank)
        dtype: Any = check_dtype(request.dtype, spec.dtypes)  # a catalogue entry's replay: the name is enough
        if isinstance(spec, Kernel):
            from autotune.kernels.registry import parse_dtype

            dtype = parse_dtype(request.dtype, spec.dtypes)
    except ValueError as error:
        raise UserError(str(error)) from None
    budget = request.budget if request.budget is not None or request.seconds is not None else 60
    if budget is not None and len(configs) > budget:  # they would be cut silently otherwise
        raise UserError(f"{len(configs)} configs given with --config but a budget of {budget}: "
                        "raise --budget or give fewer configs")
    settings = SessionSettings(
        strategy=request.strategy, seed=request.seed, budget=budget, seconds=request.seconds, fresh=request.fresh,
        generation_size=request.generation_size, mode=_mode(request),
    )
    if request.workers is not None:
        _check_workers(request, settings)
    if settings.mode != "replay":  # a kernel that cannot be bound, or sent to the measuring processes
        from autotune.kernel_wire import check_sendable

        check_sendable(spec, measuring_elsewhere=True)
    # Build the task and strategy (both may still refuse the request) before any database
    # is created and before GPU workers are started.
    started = time.perf_counter()
    clock.mark("imports")  # and reading the request; for a live kernel, its module's imports too
    caches = _compile_caches() if settings.mode == "gpu" else None  # before any worker compiles
    if settings.mode == "replay":
        task, cache, make_evaluator, journal_path = _replay_parts(request, spec, shape, console)
    elif settings.mode == "interpret":
        task, cache, make_evaluator, journal_path = _interpreter_parts(request, spec, shape, dtype, console)
    else:
        task, cache, make_evaluator, journal_path = _gpu_parts(request, spec, shape, dtype, console)
    bound = time.perf_counter()
    clock.mark("binding")
    strategy = _make_strategy(strategy_cls, task, request, budget)
    user = user_seeds(task, configs)  # a config that does not fit the space stops here, before any write
    seeds = user + collect_seeds(task, cache, sources)
    reference = _choose_reference(spec, shape, dtype, settings.mode, request.seed, console)
    from autotune.report import RichReporter, print_outcome

    seeded = time.perf_counter()
    clock.mark("strategy and seeds")
    evaluator = _start(make_evaluator)
    clock.mark("evaluator" if settings.mode == "replay" else "workers")
    # Where a session's start-up goes (binding the kernel here; starting and binding the
    # evaluator's workers), so it can be seen and cut.
    set_up = {"bind_s": round(bound - started, 2), "strategy_and_seeds_s": round(seeded - bound, 2),
              "evaluator_s": round(time.perf_counter() - seeded, 2)}
    total = sum(set_up.values())
    phases = getattr(evaluator, "setup_phases", {})  # inside the evaluator's wait, per worker
    set_up.update(phases)
    if settings.mode == "gpu":
        within = ", ".join(f"{name.removesuffix('_s').replace('_', ' ')} {s:.1f}" for name, s in phases.items())
        console.print(f"set up in {total:.1f} s: kernel bound in {set_up['bind_s']:.1f} s, "
                      f"strategy and seeds {set_up['strategy_and_seeds_s']:.1f} s, "
                      f"evaluator ready in {set_up['evaluator_s']:.1f} s" + (f" ({within} s)" if within else ""))
    console.print(clock.line())
    try:
        journal = open_for_writing(journal_path, request.shipped)
        cache = journal  # reads see the user's rows and the shipped ones
        options = SessionOptions(
            db=str(request.db), shipped=str(request.shipped) if request.shipped else None, kernel_locator=_locator(spec),
            reference=reference,
            seed_from=request.seed_from, grid=tuple(request.grid), grid_sample=request.grid_sample,
            seeds=tuple(origin for origin, _ in seeds), seed_points=tuple(dict(point) for _, point in seeds),
            heuristics=heuristic_provenance(task, sources).get("heuristics"),
            strategy_options=dict(request.strategy_options), strategy_source=strategy_source(request.strategy),
            user_configs=tuple(p for _, p in user),
            timing_target_ms=request.timing_target_ms, slow_factor=request.slow_factor,
            compile_timeout_factor=request.compile_timeout_factor, set_up=set_up, startup=clock.record(),
            build_ahead=_builds_ahead() if settings.mode == "gpu" else None,
            early_setups=_early_setups() if settings.mode == "gpu" else None,
            build_from_worker=_builds_from_worker() if settings.mode == "gpu" else None,
            compile_ahead=_compiles_ahead(evaluator) if settings.mode == "gpu" else None,
            compile_caches=caches,
            experiment=dict(request.experiment), workers=request.workers,
            replay=getattr(evaluator, "replay_note", None), thread_limit=thread_limit_option(request.thread_limit),
            extra=_code_identity(spec, settings.mode))
        session = Session(task, evaluator, strategy, settings, journal, cache=cache, reporter=RichReporter(console),
                          options=options, seeds=seeds, resume_session=request.resume)
        outcome = session.run()
    finally:
        evaluator.close()
    print_outcome(console, task, outcome, db=str(journal.path), recorded_best=cache.best(task.fingerprint))
    compared = compared_line(getattr(evaluator, "compared", {}))
    if compared:
        console.print(compared)
    ahead = getattr(getattr(evaluator, "ahead", None), "counts", None)
    if ahead and ahead.get("guessed"):
        console.print(f"compiled ahead: {ahead['guessed']} config(s), {ahead.get('used', 0)} of them asked for")
    if settings.mode == "replay":
        console.print(f"replay recorded as session {outcome.session_id} in {journal.path}"
                      f" (autotune show {outcome.session_id} --db {journal.path})")
        not_recorded = getattr(evaluator, "not_recorded", 0)
        if not_recorded:
            console.print(f"{not_recorded} asked config(s) had no recorded measurement (status not_recorded)")
    return outcome


def _light_kernel(request: TuneRequest) -> Any:
    """A replay of a built-in kernel binds nothing, so its catalogue entry stands for it and
    torch, Triton and Helion are not imported (autotune/kernels/catalogue.py); None otherwise."""
    if not isinstance(request.kernel, str) or request.interpret or not (request.replay or not gpu_available()):
        return None
    from autotune.kernels.catalogue import light_kernel

    return light_kernel(request.kernel)


def _choose_reference(spec: Any, shape: Any, dtype: Any, mode: str, seed: int, console: Console) -> str | None:
    """What a measuring session checks configs against (reference_choice.py), said in one line;
    None for a replay, which checks nothing."""
    if mode == "replay":
        return None
    from autotune.reference_choice import choose_reference
    from autotune.task import build_inputs

    device = "cpu" if mode == "interpret" else "cuda"
    said = choose_reference(spec, lambda: build_inputs(spec, shape, dtype, device, seed))
    if device == "cuda":  # what the trial held stays cached in this process otherwise, beside the workers'
        import torch

        torch.cuda.empty_cache()
    console.print(f"reference: {said}")
    return said


def _locator(spec: Any) -> str | None:
    """How `--resume` finds the kernel again; None for one no other process can import."""
    from autotune.kernel_loader import KernelNotFound, locator_of

    try:
        return locator_of(spec)
    except (KernelNotFound, AttributeError):  # AttributeError: a stand-in for a kernel, not one
        return getattr(spec, "locator", None)


def compared_line(compared: dict[str, str]) -> str:
    """Under the comparison table: which of the kernel's outputs each row was checked on."""
    rows = ([f"every config on {compared['configs']}"] if compared.get("configs") else []) + \
        [f"{name} on {text}" for name, text in compared.items() if name != "configs" and text]
    return "compared with the reference: " + "; ".join(rows) if rows else ""


def _mode(request: TuneRequest) -> str:
    """Where results come from: the GPU, the recorded data, or the Triton interpreter on the CPU."""
    if request.interpret:
        if request.replay:
            raise UserError("--interpret and --replay exclude each other")
        return "interpret"
    return "replay" if request.replay or not gpu_available() else "gpu"


def _builds_ahead() -> bool:
    """Whether the GPU evaluator's benchmark worker builds the next config while the GPU times
    the current one (recorded so that an A/B of the switch can tell its sessions apart)."""
    from autotune.evaluators import gpu_generation

    return gpu_generation.BUILD_AHEAD


def _builds_from_worker() -> bool:
    """Whether the benchmark worker loads a Helion config's host function as a compile worker
    generated it, rather than generating it again (recorded for the same reason)."""
    from autotune.evaluators import generated_module

    return generated_module.BUILD_FROM_WORKER


def _compiles_ahead(evaluator: Any) -> bool:
    """Whether the evaluator compiled the next generation's likely configs ahead (recorded for
    the same reason)."""
    return bool(getattr(evaluator, "compiles_ahead", False))


def _compile_caches() -> str:
    """Whether the on-disk compile caches were empty at the start (recorded for the same reason:
    a session's compile times depend on it)."""
    from autotune.evaluators.gpu_process import compile_caches_state

    return compile_caches_state()


def _early_setups() -> bool:
    """Whether every compile worker set up at the evaluator's start (recorded for the same reason)."""
    from autotune.evaluators import gpu

    return gpu.EARLY_SETUPS


def _start(make_evaluator: Any) -> Any:
    """Start the evaluator; a kernel that cannot be set up at all (its inputs cannot be built, its
    reference disagrees with its default config) is the user's to fix: one line."""
    from autotune.evaluators.gpu_process import WorkerSetupError
    from autotune.kernel import KernelError

    try:
        return make_evaluator()
    except (WorkerSetupError, KernelError) as error:
        text = str(error).split("\n")[0].replace("bench could not set up: ", "")
        raise UserError(text) from None


def _check_workers(request: TuneRequest, settings: SessionSettings) -> None:
    """--workers: a valid value, and a session that measures (a replay has nothing to spread)."""
    from autotune.distributed.cluster import parse_workers

    try:
        parse_workers(request.workers)
    except ValueError as error:
        raise UserError(str(error)) from None
    if settings.mode == "replay":
        reason = "--replay given" if request.replay else "there is no GPU on this machine"
        raise UserError(f"--workers {request.workers} applies to measuring sessions; this one replays ({reason}) "
                        "and a replay is answered from the database: there is nothing to spread")


def _make_strategy(strategy_cls, task: TuningTask, request: TuneRequest, budget: int | None):
    from autotune.strategies.grid import GridSearch, GridTooLarge
    from autotune.strategies.options import check_options

    options = check_options(request.strategy, dict(request.strategy_options))  # typed, or one line
    if strategy_cls is GridSearch:
        options.update(names=request.grid or None, sample=request.grid_sample)
    elif request.grid:
        raise UserError("--grid applies to --strategy grid only")
    try:
        return strategy_cls.from_task(task, seed=request.seed, budget=budget, **options)
    except (GridTooLarge, ValueError) as error:
        raise UserError(str(error)) from None
    except TypeError as error:  # an option the strategy does not take
        raise UserError(str(error)) from None


def _gpu_parts(request: TuneRequest, spec, shape, dtype, console: Console):
    from autotune.evaluators.gpu import GPUEvaluator
    from autotune.evaluators.gpu_process import warm_workers
    from autotune.evaluators.timing import TimingOptions

    if request.workers is None:
        warm_workers()  # the workers' imports, once, while this process binds the kernel
    task = bind_live(spec, shape, dtype, "cuda", seed=request.seed, thread_limit=request.thread_limit)
    console.print(f"measuring on {task.identity.device}; space {task.fingerprint} "
                  f"({len(task.space.parameters)} parameters); recording into {request.db}")
    cache = _readable(request)  # the user's database is created once the request is valid

    def make_evaluator() -> Any:
        if request.workers is not None:
            from autotune.distributed.tune import distributed_gpu_evaluator

            return distributed_gpu_evaluator(request, spec, shape, task, console)
        return GPUEvaluator(spec, shape, task.dtype, device_name=task.identity.device,
                            compile_workers=request.compile_workers, compile_timeout_s=request.compile_timeout_s,
                            run_timeout_s=request.run_timeout_s, seed=request.seed,
                            timing=TimingOptions(target_ms=request.timing_target_ms, slow_factor=request.slow_factor),
                            compile_timeout_factor=request.compile_timeout_factor, log_root=f"{request.db}.logs")

    return task, cache, make_evaluator, request.db


def _interpreter_parts(request: TuneRequest, spec, shape, dtype, console: Console):
    """Configs run on the CPU through the Triton interpreter: every config's accuracy is real,
    its time is not (interpreter seconds); such sessions are never used to pick configs."""
    from autotune.evaluators.interpreter import InterpreterEvaluator, bind_interpreted

    task = bind_interpreted(spec, shape, dtype, request.seed, thread_limit=request.thread_limit, say=console.print)
    console.print(f"INTERPRETER: running {spec.name} on the CPU through the Triton interpreter (accuracy is "
                  f"checked; times are not GPU times); recording into {request.db}")
    cache = _readable(request)

    def make_evaluator() -> Any:
        return InterpreterEvaluator(spec, shape, dtype, seed=request.seed, compile_timeout_s=request.compile_timeout_s,
                                    run_timeout_s=request.run_timeout_s)

    return task, cache, make_evaluator, request.db


def _readable(request: TuneRequest) -> Cache | None:
    """What earlier measurements can be read (seeds from the nearest shape, reuse), if any yet."""
    if request.db.exists() or (request.shipped is not None and request.shipped.exists()):
        return open_for_reading(request.db, request.shipped)
    return None


def choose_recorded_space(cache: Cache, spec, shape, dtype: str, wanted: str | None) -> SpaceRecord:
    """The recorded space a replay uses: same kernel source, shape and dtype; most data first."""
    records = cache.find_spaces(spec.name, shape, dtype)
    label = f"{spec.name} at {'x'.join(map(str, shape))} {dtype}"
    if not records:
        raise UserError(f"no recorded measurements for {label} in {cache.path}; record some on a GPU machine first")
    current = spec.source_hash()
    matching = [r for r in records if r.source_hash == current]
    if not matching:
        raise UserError(f"{cache.path} has data for {label} only from a different version of the kernel's source")
    if wanted:
        matching = [r for r in matching if r.fingerprint.startswith(wanted)]
        if not matching:
            raise UserError(f"no recorded space {wanted!r} for {label}")
    return matching[0]


def _replay_parts(request: TuneRequest, spec, shape, console: Console):
    """A replay as `autotune simulate` runs one: the strategy is offered only the recorded points
    (`bind_recorded` with the space's oracle) and every answer comes from that one oracle.  A
    strategy whose points are the user's (`fixed`) keeps the whole space, as --config does."""
    from autotune import startup
    from autotune.evaluators.replay import ReplayEvaluator
    from autotune.kernels.names import dtype_name
    from autotune.simulation.oracle import Oracle
    from autotune.strategies import get_strategy
    from search_spaces.space import InvalidConfig

    cache = open_for_reading(request.db, request.shipped)
    dtype = dtype_name(request.dtype)
    record = choose_recorded_space(cache, spec, shape, dtype, request.space)
    oracle = Oracle.from_cache(cache, record.fingerprint, record.space.names)
    startup.mark("database")  # opened, the recorded space chosen, its measurements read
    try:
        task: TuningTask = bind_recorded(spec, record, cache.aliases(record.fingerprint), oracle)
    except InvalidConfig as error:
        raise UserError(f"cannot replay space {record.fingerprint[:12]}: {error}") from None
    restricted = not get_strategy(request.strategy).needs_configs
    if not restricted:
        task = replace(task, space=record.space)
    sample = dict(task.sample or {})
    source = " + ".join(str(p) for p in (cache.path, cache.shipped) if p is not None)
    note = {"space": record.fingerprint, "points": sample["points"], "valid": sample["valid"], "source": source,
            "restricted": restricted}
    if sample["left_out"]:
        note["left_out"] = sample["left_out"]
    v = record.versions
    offered = (f"the strategy proposes only the {sample['points']} configs" if restricted
               else f"the {request.strategy} strategy asks its own configs; {sample['points']} configs are")
    left_out = (f"; {sample['left_out']} recorded point(s) left out: the recorded normalisation does not reach a "
                "measured config" if sample["left_out"] else "")
    reason = "--replay given" if request.replay else "no GPU on this machine"
    console.print(f"REPLAY ({reason}): {offered} recorded for space {record.fingerprint} ({sample['valid']} valid), "
                  f"measured on {record.device} (torch {v.get('torch')}, triton {v.get('triton')}, helion "
                  f"{v.get('helion')}), read from {source}; a config outside them is answered not_recorded{left_out}")

    def make_evaluator() -> ReplayEvaluator:
        return ReplayEvaluator(oracle, cache.baselines(fingerprint=record.fingerprint),
                               description=f"replay of {record.device} data",
                               rebench=cache.measurements(record.fingerprint, rebench=True), note=note)

    return task, cache, make_evaluator, request.db


def _code_identity(spec: Any, mode: str) -> dict[str, str]:
    """The kernel's code identity (comments and layout aside) for a measuring session, so a
    table built from its rows still matches the kernel after a comment is added; a replay
    records none (its kernel's code is not loaded, and it measured nothing new)."""
    if mode == "replay":
        return {}
    from autotune.config_table import kernel_code_hash

    try:
        return {"code_hash": kernel_code_hash(spec)}
    except (OSError, TypeError):  # a source Python cannot read back: matched by source hash alone
        return {}

