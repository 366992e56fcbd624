"""Run-time use of tuned configs: a kernel that picks, at each call, the best recorded config
for the call's shape, measured on the GPU it runs on.

    fast = autotune.configured(rms_norm)            # your user.db and the shipped data, or table="x.json"
    y = fast(x, w)                                  # exact shape, else nearest recorded, else default
    fast.last                                       # which it used, and why
    fast.compiled_for(x, w)                         # the bare compiled kernel (CUDA-graph capture)

Configs measured on another GPU serve only where declared (`fallback="any-gpu"` or a tuple of
GPU names), with a warning naming both GPUs; an empty table, one tuned for another version of
the kernel's code, or interpreter sessions left out, are said once (`ConfigWarning`
subclasses); a table of another kernel is refused.  It never tunes at run time unless asked
(`tune_unseen={"budget": 50}` tunes a shape with no exact entry once, records it, and uses it).

Why the call path is one lookup: a configured call should cost what the compiled kernel
costs.  The first call at a signature (each argument's shape, dtype and device) picks and
compiles; it also builds a key function for that argument layout, so every later call is
that key, one dict lookup, and the compiled callable.  Each choice is logged (logger
"autotune", level INFO) and kept in `choices`.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from autotune import device as _device
from autotune.config_table import (DEFAULT, EXACT, INTERPRETED, OTHER_SOURCE, ConfigTable, ConfigWarning,
                                   EmptyTableWarning, OtherGpuWarning, Pick, SourceMismatchWarning)
from autotune.errors import UserError
from autotune.kernel import Kernel
from autotune.kernel_loader import as_kernel, resolve_kernel

LOG = logging.getLogger("autotune")
ANY_GPU = "any-gpu"
_SHIPPED = object()  # configured()'s default: the shipped data, wherever databases.py keeps it


class ConfiguredKernel:
    """`kernel` with a config chosen per call signature from `table` (see the module docstring)."""

    def __init__(self, kernel: Kernel, table: ConfigTable, *, tune_unseen: Mapping[str, Any] | None = None,
                 db: str | Path | None = None, fallback: str | Sequence[str] | None = None,
                 device: str | None = None) -> None:
        from autotune.databases import USER_DB

        self.kernel, self.table = kernel, table
        self.tune_unseen = dict(tune_unseen) if tune_unseen is not None else None
        self.db = Path(db) if db is not None else USER_DB
        self.fallback = _fallback(fallback)
        self.device = device  # serve as if on this GPU (None: the GPU each call runs on)
        self.choices: dict[Any, tuple[Pick, str]] = {}
        self._runners: dict[Any, Callable[..., Any]] = {}  # key -> compiled callable: the whole call path
        self._layout: tuple[Any, ...] | None = None  # the argument layout `_key` was built for
        self._key: Callable[..., Any] = _never  # set at the first call
        self._last: Any = None
        self._warned: set[Any] = set()
        self._warn_table()

    def __call__(self, *args: Any) -> Any:
        try:
            key = self._key(*args)
            runner = self._runners[key]
        except (KeyError, TypeError, AttributeError):
            key, runner = self._first_call(args)
        self._last = key
        return runner(*args)

    def compiled_for(self, *args: Any) -> Callable[..., Any]:
        """The compiled callable calls with these arguments' signature run (picked and compiled
        now if not yet): call it directly, or capture it in a CUDA graph."""
        return self._first_call(args)[1]

    def choose(self, *args: Any) -> Pick:
        """The config a call with these arguments gets (nothing is compiled or run)."""
        shape, dtype = self._shape_dtype(args)
        return self.table.pick(shape, dtype, devices=self._devices(self._running_on(args)))

    @property
    def last(self) -> tuple[Pick, str] | None:
        """The latest call's pick and why."""
        return self.choices.get(self._last)

    def __repr__(self) -> str:
        table = self.table
        shapes = len({(e.shape, e.dtype) for e in table.entries})
        devices = ", ".join(table.devices()) or "no GPU"
        fallback = "" if not self.fallback else f"; fallback {ANY_GPU if self.fallback == ANY_GPU else self.fallback}"
        return (f"ConfiguredKernel({self.kernel.name}: {shapes} shape(s) measured on {devices}, from "
                f"{table.origin or 'a table'}{fallback}; {len(self.choices)} signature(s) compiled)")

    # -- the first call at a signature ----------------------------------------------------------
    def _first_call(self, args: Sequence[Any]) -> tuple[Any, Callable[..., Any]]:
        layout = _layout(args)
        if layout != self._layout:
            self._layout, self._key = layout, _key_function(layout)  # keys carry their layout: none is lost
        key = self._key(*args)
        runner = self._runners.get(key)
        if runner is not None:
            return key, runner
        shape, dtype = self._shape_dtype(args)
        here = self._running_on(args)
        pick = self.table.pick(shape, dtype, devices=self._devices(here))
        if pick.how != EXACT and self.tune_unseen is not None:
            pick = self._tune(args, shape, dtype, here)
        runner, pick, note = self._build(pick, args)
        self._warn_pick(pick, here)
        self._runners[key] = runner
        self.choices[key] = (pick, pick.describe(self.kernel.name, shape, dtype) + note)
        LOG.info(self.choices[key][1])
        return key, runner

    def _shape_dtype(self, args: Sequence[Any]) -> tuple[tuple[int, ...], str]:
        from autotune.kernels.registry import dtype_name

        first = next((a for a in args if hasattr(a, "dtype") and hasattr(a, "shape")), None)
        if first is None:
            raise TypeError(f"{self.kernel.name} was called without a tensor argument")
        return self.kernel.problem_shape(args), dtype_name(first.dtype)

    def _running_on(self, args: Sequence[Any]) -> str:
        if self.device is not None:
            return self.device
        first = next((a for a in args if hasattr(a, "device") and hasattr(a, "shape")), None)
        where = getattr(first, "device", None)
        index = where.index if getattr(where, "type", None) == "cuda" else None
        return _device.running_device_name(index)

    def _devices(self, here: str) -> list[str]:
        """The GPUs whose measurements may serve a call on `here`, most preferred first."""
        if self.fallback == ANY_GPU:
            return [here] + [d for d in self.table.devices() if d != here]
        return [here] + [d for d in self.fallback if d != here]

    def _build(self, pick: Pick, args: Sequence[Any]) -> tuple[Callable[..., Any], Pick, str]:
        """A callable running the picked config; a picked config that does not fit this shape's
        space (a tile larger than the new extent allows) falls back to the default config."""
        if self.kernel.family == "triton":
            config = pick.config if pick.config is not None else dict(self.kernel.triton_space(
                self.kernel.problem_shape(args), args[0].dtype).default)
            launch = self.kernel.triton_launch
            return (lambda *call: launch(dict(config), *call)), pick, ""  # a copy: launchers may edit it
        import helion

        bound = self.kernel.helion_kernel.bind(tuple(args))
        if pick.config is None:
            return bound.compile_config(bound.config_spec.default_config(), allow_print=False), pick, ""
        try:
            return bound.compile_config(helion.Config.from_dict(dict(pick.config)), allow_print=False), pick, ""
        except Exception as error:  # noqa: BLE001 - the config does not fit this shape
            fallback = Pick(DEFAULT, None, None)
            compiled = bound.compile_config(bound.config_spec.default_config(), allow_print=False)
            return compiled, fallback, f" (the {pick.how} config did not fit: {' '.join(str(error).split())[:120]})"

    def _tune(self, args: Sequence[Any], shape: tuple[int, ...], dtype: str, here: str) -> Pick:
        from autotune.api import tune

        result = tune(self.kernel, args, db=self.db, **self.tune_unseen)
        if result.best_native is None:
            return self.table.pick(shape, dtype, devices=self._devices(here))
        return Pick(EXACT, dict(result.best_native), shape, device=here)

    # -- saying what is served --------------------------------------------------------------------
    def _warn_once(self, key: Any, message: str, category: type[ConfigWarning]) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, category, stacklevel=5)  # the caller of configured() or of the kernel

    def _warn_table(self) -> None:
        table, name = self.table, self.kernel.name
        other = table.skipped.get(OTHER_SOURCE, 0)
        if other:
            self._warn_once("source", f"{name}: {other} recorded shape(s) in {table.origin} were tuned for another "
                            "version of its code and are not used (tune again to serve this code)",
                            SourceMismatchWarning)
        if table.skipped.get(INTERPRETED) and table.entries:
            self._warn_once("interpreter", f"{name}: {table.skipped[INTERPRETED]} interpreter session(s) left out: "
                            "they check accuracy, their times are not GPU timings", ConfigWarning)
        if not table.entries:
            self._warn_once("empty", f"{name}: no tuned config in {table.origin or 'the table'}"
                            f"{table.skipped_note()}; every call runs the compiler's default config", EmptyTableWarning)

    def _warn_pick(self, pick: Pick, here: str) -> None:
        name = self.kernel.name
        if pick.device and pick.device != here:
            declared = ANY_GPU if self.fallback == ANY_GPU else "fallback"
            self._warn_once(("gpu", here, pick.device), f"{name} runs on {here} with configs measured on "
                            f"{pick.device} ({declared}): none measured on {here} served this call", OtherGpuWarning)
        elif pick.how == DEFAULT and self.table.entries and here not in self.table.devices():
            self._warn_once(("none", here), f"{name}: no config measured on {here} (the table's are of "
                            f"{', '.join(self.table.devices())}); the compiler's default config runs "
                            f"(fallback='{ANY_GPU}' uses theirs)", EmptyTableWarning)


def configured(kernel: Any, *, db: str | Path | Sequence[str | Path] | None = None, table: str | Path | None = None,
               device: str | None = None, fallback: str | Sequence[str] | None = None,
               tune_unseen: Mapping[str, Any] | None = None, shipped: Any = _SHIPPED) -> ConfiguredKernel:
    """`kernel` (an autotune.Kernel, a @helion.kernel or a locator) choosing its config per call
    from the recorded sessions in `db` (default: your user.db; one path or several, each named
    one must exist) read with the shipped data beside it (`shipped=None`: without), or from a
    table written by `autotune export KERNEL --format json` (`table=`).  Measurements of the GPU
    a call runs on serve it (`device=NAME`: as if on that GPU); another GPU's only when declared
    in `fallback` ("any-gpu", or GPU names in order)."""
    kernel = resolve_kernel(kernel, refuse_wrapped=True) if isinstance(kernel, str) \
        else as_kernel(kernel, refuse_wrapped=True)  # the autotune.Kernel, not the Helion kernel it wraps
    shipped_path = _shipped_path(shipped)
    if table is not None:
        loaded = ConfigTable.load(table)
        if not loaded.check_kernel(kernel):
            warnings.warn(f"{table} was tuned for another version of {kernel.name}'s code; its configs are used "
                          "(export it again to silence this)", SourceMismatchWarning, stacklevel=2)
        first_db = db if isinstance(db, (str, Path)) else None
    else:
        from autotune.databases import USER_DB

        paths = [Path(db)] if isinstance(db, (str, Path)) else [Path(p) for p in db] if db is not None else [USER_DB]
        missing = [str(p) for p in paths if not p.exists()] if db is not None else []
        if missing:
            raise UserError(f"database {missing[0]} does not exist")
        loaded = ConfigTable.from_db(kernel, paths, shipped=shipped_path)
        loaded.origin = loaded.origin or str(paths[0])
        first_db = paths[0]
    return ConfiguredKernel(kernel, loaded, tune_unseen=tune_unseen, db=first_db, fallback=fallback, device=device)


def _shipped_path(shipped: Any) -> Path | None:
    """The shipped data to read: the default location (from autotune.databases), a named file
    (which must exist), or None."""
    from autotune import databases

    if shipped is None:
        return None
    if shipped is _SHIPPED:  # databases' location, in the checkout wherever the caller's directory is
        built = databases.ready(databases.checkout_shipped())  # built from its batches where kept so
        return built if built is not None and built.exists() else None
    if not Path(shipped).exists():
        raise UserError(f"shipped data {shipped} does not exist")
    return Path(shipped)


def _fallback(fallback: str | Sequence[str] | None) -> str | tuple[str, ...]:
    if fallback is None:
        return ()
    if isinstance(fallback, str):
        if fallback != ANY_GPU:
            raise UserError(f"fallback={fallback!r}: give '{ANY_GPU}' or a tuple of GPU names")
        return ANY_GPU
    return tuple(str(name) for name in fallback)


def _layout(args: Sequence[Any]) -> tuple[Any, ...]:
    """Which arguments are tensors (keyed by shape and dtype) and which are not (by type)."""
    return tuple(hasattr(a, "shape") and hasattr(a, "dtype") and hasattr(a, "device") for a in args)


def _key_function(layout: tuple[Any, ...]) -> Callable[..., Any]:
    """A function of the call's arguments returning its signature key, written out for one
    argument layout: no loop and no type test on the call path.  The key holds the layout (keys
    of different layouts never meet), the first tensor's device (a kernel's tensors share one),
    and each tensor's shape and dtype; each attribute read costs ~0.1 µs, so no more are read."""
    names = [f"a{i}" for i in range(len(layout))]
    parts = [f"{n}.shape, {n}.dtype" if tensor else f"type({n})" for n, tensor in zip(names, layout)]
    first = next((n for n, tensor in zip(names, layout) if tensor), None)
    device = f"{first}.device, " if first else ""
    source = f"lambda {', '.join(names)}: (_layout, {device}{', '.join(parts)})"
    return eval(source, {"_layout": layout, "type": type})  # noqa: S307 - built from argument counts only


def _never(*args: Any) -> Any:
    raise KeyError("no call yet")
