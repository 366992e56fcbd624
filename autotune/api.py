"""The Python API: tune a kernel of your own, get its best config, serve configs by shape.

    import autotune
    result = autotune.tune(kernel, (x, w), strategy="evolution", budget=200)  # kernel: an autotune.Kernel
    result.config            # helion.Config (or triton.Config) of the best found
    result.table             # best found, default config and baselines: ms, ratio, GB/s, TFLOP/s
    fast = autotune.configured(kernel)     # picks the best recorded config at each call's shape

`tune` runs the same session as `autotune tune` (one loop for the CLI, the API and the
experiments); every evaluation is recorded in `db` as it completes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from autotune.errors import UserError
from autotune.evaluators.timing_target import SEARCH_TARGET_MS
from autotune.kernel import Kernel, Shape
from autotune.kernel_loader import as_kernel, resolve_kernel


@dataclass(frozen=True)
class TableRow:
    """One line of a session's comparison: the best found, the default config, seeds, baselines."""

    name: str
    status: str
    median_ms: float | None
    ratio: float | None  # time / best found's time: above 1 is slower
    gbps: float | None  # when the kernel says how many bytes a call moves
    tflops: float | None  # when the kernel says how many flops a call does


@dataclass
class TuneResult:
    """What a tuning session found, and where it is recorded."""

    kernel: Kernel
    session_id: int
    db: Path
    shape: Shape
    dtype: str
    mode: str  # "gpu" (measured), "replay" (answered from recorded data) or "interpret"
    exit_reason: str
    evaluations: int
    wall_s: float
    best_native: dict[str, Any] | None
    best_ms: float | None
    table: list[TableRow] = field(default_factory=list)
    timeline: list[Any] = field(default_factory=list)  # GenerationSummary per generation (0: seeds, -1: final)

    @property
    def config(self) -> Any:
        """The best config as a `helion.Config` or a `triton.Config` (None when nothing ran)."""
        if self.best_native is None:
            return None
        if self.kernel.family == "helion":
            import helion

            return helion.Config.from_dict(dict(self.best_native))
        from search_spaces.triton_space import to_triton_config

        return to_triton_config(self.best_native)

    def speedup_over(self, name: str) -> float | None:
        """How many times faster the best found is than a row of the table (e.g. 'torch')."""
        for row in self.table:
            if row.name == name and row.ratio:
                return row.ratio
        return None

    def plot(self, path: str | Path | None = None) -> Any:
        """Best time against generation (a matplotlib Figure; saved to `path` when given)."""
        import matplotlib

        matplotlib.use("Agg") if path is not None else None
        import matplotlib.pyplot as plt

        points = [(s.generation, s.best_ms) for s in self.timeline if s.generation >= 0 and s.best_ms]
        figure, axis = plt.subplots(figsize=(6, 3.5))
        if points:
            axis.step([g for g, _ in points], [ms for _, ms in points], where="post")
        axis.set_xlabel("generation")
        axis.set_ylabel("best time so far (ms)")
        axis.set_title(f"{self.kernel.name} {'x'.join(map(str, self.shape))} {self.dtype}: session {self.session_id}")
        figure.tight_layout()
        if path is not None:
            figure.savefig(path, dpi=120)
        return figure


_CHECKOUT = "checkout"  # tune()'s default shipped data: this checkout's, from any directory


def _shipped(shipped: str | Path | None) -> Path | None:
    from autotune import databases

    if shipped is None:
        return None
    return databases.ready(databases.checkout_shipped() if shipped == _CHECKOUT else Path(shipped))


def tune(kernel: Any, args: Sequence[Any] | None = None, *, shape: Sequence[int] | str | None = None,
         dtype: Any = None, strategy: str = "auto", budget: int | None = None, seconds: float | None = None,
         seed: int = 0, seed_from: str = "default", configs: Sequence[Mapping[str, Any]] = (),
         db: str | Path = "user.db", shipped: str | Path | None = _CHECKOUT, replay: bool = False,
         interpret: bool = False,
         reference: Callable[..., Any] | None = None, baselines: Mapping[str, Callable[..., Any]] | None = None,
         options: Mapping[str, Any] | None = None, generation_size: int | None = None,
         compile_workers: int | None = None, compile_timeout_s: float = 60.0, timing_ms: float = SEARCH_TARGET_MS,
         fresh: bool = False, console: Any = None, quiet: bool = False) -> TuneResult:
    """Tune `kernel` (an `autotune.Kernel`, a `@helion.kernel`, or a locator 'file.py:name')
    for the problem that `args` (the call's arguments) or `shape`/`dtype` describe.

    The measuring processes rebuild the inputs from the shape with the kernel's `inputs` hook,
    so `args` only say which problem: they must match what the hook builds.  `reference=` and
    `baselines=` override the kernel's own (any function that pickles: the kernel travels to the
    measuring processes with every hook, kernel_wire.py).  A `@helion.kernel` that its module
    wraps in an `autotune.Kernel` is refused, naming the wrapper: tune the wrapper, which carries
    the hooks.  The session is recorded in `db` (yours); earlier measurements are read from it
    and from `shipped` (the shipped data, never written; by default this checkout's, built from
    its batches on first use).
    Without a GPU the session replays recorded data (`replay=True` forces it), or
    with `interpret=True` runs every config through the Triton interpreter on the CPU.
    Progress is printed as the session goes (in a terminal or a notebook; `quiet=True` hides it).
    """
    from rich.console import Console

    from autotune.tuning import TuneRequest, run_tune

    kernel = resolve_kernel(kernel, refuse_wrapped=True) if isinstance(kernel, str) \
        else as_kernel(kernel, refuse_wrapped=True)
    if reference is not None or baselines is not None:
        kernel = kernel.with_hooks(reference=reference, baselines=baselines)
    shape_text, dtype_name = _problem(kernel, args, shape, dtype)
    request = TuneRequest(
        kernel=kernel, shape=shape_text, dtype=dtype_name, strategy=strategy, budget=budget, seconds=seconds,
        seed=seed, generation_size=generation_size, db=Path(db), replay=replay, space=None,
        shipped=_shipped(shipped), fresh=fresh, compile_workers=compile_workers, compile_timeout_s=compile_timeout_s,
        seed_from=seed_from,
        strategy_options=tuple((options or {}).items()), configs=tuple(_config_text(c) for c in configs),
        timing_target_ms=timing_ms, interpret=interpret,
    )
    console = console or Console(quiet=quiet)
    outcome = run_tune(request, console)
    return result_of(kernel, outcome, db=Path(db), shipped=request.shipped)


def result_of(kernel: Kernel, outcome: Any, *, db: Path, shipped: Path | None = None) -> TuneResult:
    """A TuneResult for a finished session's outcome."""
    from autotune.databases import open_for_reading
    from autotune.kernels.registry import DTYPES
    from autotune.report import outcome_rows

    task = outcome.task
    journal = open_for_reading(db, shipped) if db.exists() else None
    recorded = journal.best(task.fingerprint) if journal is not None else None
    mode = journal.session(outcome.session_id)["mode"] if journal is not None else "gpu"
    if journal is not None:
        journal.close()
    best = outcome.best
    best_ms = best[1].median_ms if best else None
    dtype = DTYPES[task.dtype]
    moved, work = kernel.bytes_for(task.shape, dtype), kernel.flops_for(task.shape, dtype)
    rows = []
    for name, result in outcome_rows(task, outcome, recorded):
        ms = result.median_ms if result.ok else None
        rates = name != "device copy"  # the copy moves its own bytes and does no flops
        rows.append(TableRow(
            name=name, status=result.status.value, median_ms=ms,
            ratio=ms / best_ms if ms and best_ms else None,
            gbps=moved / (ms * 1e-3) / 1e9 if ms and moved and rates else None,
            tflops=work / (ms * 1e-3) / 1e12 if ms and work and rates else None))
    return TuneResult(
        kernel=kernel, session_id=outcome.session_id, db=db, shape=tuple(task.shape), dtype=task.dtype, mode=mode,
        exit_reason=outcome.exit_reason, evaluations=outcome.evaluations, wall_s=outcome.wall_s,
        best_native=dict(best[0].native) if best else None, best_ms=best_ms, table=rows,
        timeline=list(outcome.generations))


def _problem(kernel: Kernel, args: Sequence[Any] | None, shape: Any, dtype: Any) -> tuple[str, str]:
    """('4096x8192', 'float16') for a tune call: from the arguments, or from shape= and dtype=."""
    from autotune.kernels.registry import DTYPES, dtype_name

    if args is not None:
        if shape is not None:
            raise UserError("give the call's arguments or shape=, not both")
        args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
        problem = kernel.problem_shape(args)
        floats = [a for a in args if hasattr(a, "is_floating_point") and a.is_floating_point()]
        if not floats:
            raise UserError(f"{kernel.name}: no floating-point tensor among the arguments to take the dtype from")
        name = dtype_name(floats[0].dtype) if dtype is None else dtype_name(_as_dtype(dtype))
        check_rebuilt(kernel, args, problem, DTYPES.get(name, floats[0].dtype))
    else:
        if shape is None:
            raise UserError("give the call's arguments, or shape= (and dtype=)")
        problem = _as_shape(shape)
        name = dtype_name(_as_dtype(dtype or "float16"))
    return "x".join(map(str, problem)), name


def check_rebuilt(kernel: Kernel, args: Sequence[Any], shape: Shape, dtype: Any) -> None:
    """The inputs the kernel's hook builds for `shape` must look like the call's arguments
    (shapes and dtypes), or measurements would be of another problem than the one asked."""
    try:
        built = kernel.make_inputs(shape, dtype, "meta", 0)
    except Exception:  # noqa: BLE001 - a hook that cannot build on the meta device is checked at set-up
        return
    given = [(tuple(a.shape), a.dtype) for a in args if hasattr(a, "shape") and hasattr(a, "dtype")]
    rebuilt = [(tuple(b.shape), b.dtype) for b in built if hasattr(b, "shape") and hasattr(b, "dtype")]
    if given != rebuilt:
        show = lambda items: ", ".join(f"{list(s)} {str(d).removeprefix('torch.')}" for s, d in items)  # noqa: E731
        hint = "" if kernel.inputs_given else "; give the kernel an inputs(shape, dtype, device) hook"
        raise UserError(f"{kernel.name}: the inputs built for shape {'x'.join(map(str, shape))} ({show(rebuilt)}) "
                        f"do not match the arguments given ({show(given)}){hint}")


def _as_shape(shape: Any) -> Shape:
    from autotune.kernels.registry import parse_shape

    if isinstance(shape, str):
        try:
            return parse_shape(shape)
        except ValueError as error:
            raise UserError(str(error)) from None
    values = tuple(int(d) for d in shape)
    if not values or any(d <= 0 for d in values):
        raise UserError(f"shape {list(shape)} must be positive extents")
    return values


def _as_dtype(dtype: Any) -> Any:
    from autotune.kernels.registry import DTYPES

    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise UserError(f"unsupported dtype {dtype!r} (supported: {', '.join(DTYPES)})")
        return DTYPES[dtype]
    return dtype


def _config_text(config: Mapping[str, Any]) -> str:
    import json

    native = dict(config.config) if hasattr(config, "config") else dict(config)  # a helion.Config too
    if hasattr(config, "kwargs") and hasattr(config, "num_warps"):  # a triton.Config
        native = {**config.kwargs, "num_warps": config.num_warps, "num_stages": config.num_stages}
    return json.dumps(native)
