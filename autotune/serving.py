"""Run-time use of tuned configs: a kernel that picks, at each call, the best recorded config
for the call's shape.

    fast = autotune.configured(rms_norm)            # from cache.db, or db=, or table="x.json"
    y = fast(x, w)                                  # exact shape, else nearest recorded, else default
    fast.last                                       # which it used, and why

It never tunes at run time unless asked (`tune_unseen={"budget": 50}` tunes a shape that has no
exact entry once, records it, and uses the result).  Each new (shape, dtype) is compiled once
and its choice logged (logger "autotune", level INFO) and kept in `choices`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

from autotune.config_table import DEFAULT, EXACT, ConfigTable, Pick
from autotune.kernel import Kernel
from autotune.kernel_loader import as_kernel, resolve_kernel

LOG = logging.getLogger("autotune")


class ConfiguredKernel:
    """`kernel` with a config chosen per call shape from `table` (see the module docstring)."""

    def __init__(self, kernel: Kernel, table: ConfigTable, *, tune_unseen: Mapping[str, Any] | None = None,
                 db: str | Path = "user.db") -> None:
        self.kernel, self.table = kernel, table
        self.tune_unseen = dict(tune_unseen) if tune_unseen is not None else None
        self.db = Path(db)
        self.choices: dict[tuple[tuple[int, ...], str], tuple[Pick, str]] = {}
        self.last: tuple[Pick, str] | None = None
        self._runners: dict[tuple[tuple[int, ...], str], Any] = {}

    def choose(self, *args: Any) -> Pick:
        """The config a call with these arguments gets (nothing is compiled or run)."""
        shape, dtype = self._key(args)
        return self.table.pick(shape, dtype)

    def __call__(self, *args: Any) -> Any:
        key = self._key(args)
        runner = self._runners.get(key)
        if runner is None:
            pick = self.table.pick(*key)
            if pick.how != EXACT and self.tune_unseen is not None:
                pick = self._tune(args, key)
            runner, pick, note = self._build(pick, args)
            self._runners[key] = runner
            self.choices[key] = (pick, pick.describe(self.kernel.name, key[0], key[1]) + note)
            LOG.info(self.choices[key][1])
        self.last = self.choices[key]
        return runner(*args)

    # -- internals ------------------------------------------------------------------------
    def _key(self, args: Sequence[Any]) -> tuple[tuple[int, ...], str]:
        from autotune.kernels.registry import dtype_name

        first = next((a for a in args if hasattr(a, "dtype") and hasattr(a, "shape")), None)
        if first is None:
            raise TypeError(f"{self.kernel.name} was called without a tensor argument")
        return self.kernel.problem_shape(args), dtype_name(first.dtype)

    def _build(self, pick: Pick, args: Sequence[Any]) -> tuple[Any, Pick, str]:
        """A callable running the picked config; a picked config that does not fit this shape's
        space (a tile larger than the new extent allows) falls back to the default config."""
        if self.kernel.family == "triton":
            config = pick.config if pick.config is not None else dict(self.kernel.triton_space(
                self.kernel.problem_shape(args), args[0].dtype).default)
            return (lambda *call: self.kernel.triton_launch(dict(config), *call)), pick, ""
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

    def _tune(self, args: Sequence[Any], key: tuple[tuple[int, ...], str]) -> Pick:
        from autotune.api import tune

        result = tune(self.kernel, args, db=self.db, **self.tune_unseen)
        if result.best_native is None:
            return self.table.pick(*key)
        return Pick(EXACT, dict(result.best_native), key[0])


def configured(kernel: Any, *, db: str | Path | Sequence[str | Path] = "user.db", table: str | Path | None = None,
               device: str | None = None, tune_unseen: Mapping[str, Any] | None = None,
               shipped: str | Path | None = "cache.db") -> ConfiguredKernel:
    """`kernel` (an autotune.Kernel, a @helion.kernel or a locator) choosing its config per call
    shape from the recorded sessions in `db` (one path or several), or from a table written by
    `autotune export KERNEL --format json` (`table=`, no database needed).  The shipped data
    (`shipped`) is read beside each database.  `device` keeps only measurements made on that GPU."""
    kernel = resolve_kernel(kernel) if isinstance(kernel, str) else as_kernel(kernel)
    if table is not None:
        loaded = ConfigTable.load(table)
    else:
        loaded = ConfigTable.from_db(kernel, db, device=device, shipped=shipped)
    first_db = db if isinstance(db, (str, Path)) else (list(db) or ["user.db"])[0]
    return ConfiguredKernel(kernel, loaded, tune_unseen=tune_unseen, db=first_db)
