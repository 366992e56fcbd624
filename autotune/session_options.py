"""What a session was started with, as a typed and versioned record.

Why: `--resume` rebuilds a session from what it stored, reports find experiments' sessions by
their tags, and databases outlive the code that wrote them.  An untyped dict let a misspelt
key or a changed default pass silently; here every field has a type and a default, the record
carries its version, a newer version than this code knows is refused, and keys this version
does not know (written by experiments, or by older versions) are kept in `extra` rather than
dropped.  The record reads like a mapping (`options["seed_from"]`, `options.get(...)`), which
is what reports and the stored JSON need.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Iterator

OPTIONS_VERSION = 1
_FACTORS = ("slow_factor", "compile_timeout_factor")  # infinity is stored as null (JSON has none)


def thread_limit_option(on: bool) -> bool | None:
    """The `thread_limit` a session records for a Helion space with (`on`) or without our
    elements-per-thread limit: nothing when with it, as every session recorded before the option
    was, so their stored options (and hashes) stay as they were; False when without."""
    return None if on else False


class NewerOptions(ValueError):
    """A session's options were written by a newer autotune."""


@dataclass(frozen=True, eq=False)  # equality as a mapping: equal to the dict it stores
class SessionOptions(Mapping):
    version: int = OPTIONS_VERSION
    db: str | None = None  # the user's database the session recorded into
    shipped: str | None = None  # the shipped data it read beside it
    kernel_locator: str | None = None  # how --resume finds the kernel (measuring processes get it by value)
    reference: str | None = None  # what every config was checked against (autotune/reference_choice.py)
    seed_from: str = "default"
    seeds: tuple[str, ...] = ()  # the origin of each seed, in order
    seed_points: tuple[Mapping[str, Any], ...] = ()  # each seed's point as given (before normalising), in order
    grid: tuple[str, ...] = ()
    grid_sample: bool = False
    strategy_options: Mapping[str, Any] = field(default_factory=dict)
    strategy_source: str | None = None  # hash of the strategy's module source (autotune.strategies)
    user_configs: tuple[Mapping[str, Any], ...] = ()  # --config points, evaluated first
    timing_target_ms: float = 250.0  # what sessions recorded before this key was written were timed under
    slow_factor: float = 3.0
    compile_timeout_factor: float = 10.0
    build_ahead: bool | None = None  # GPU sessions: whether the benchmark worker built the next config ahead
    early_setups: bool | None = None  # GPU sessions: whether all compile workers set up at the evaluator's start
    build_from_worker: bool | None = None  # GPU sessions: whether Helion configs were loaded as compiled
    compile_ahead: bool | None = None  # GPU sessions: whether the next generation's likely configs compiled ahead
    compile_caches: str | None = None  # GPU sessions: 'empty' or 'warm', the on-disk compile caches at the start
    thread_limit: bool | None = None  # False: a Helion space without our elements-per-thread limit (None: with it)
    fresh: bool = False
    generation_size: int | None = None
    workers: str | None = None
    set_up: Mapping[str, float] = field(default_factory=dict)  # where the start-up went, in seconds
    # Where the command's start went, from the command's start (python, imports, database, binding,
    # strategy and seeds, workers: autotune/startup.py), in seconds; None before it was recorded.
    startup: Mapping[str, float] | None = None
    experiment: Mapping[str, Any] = field(default_factory=dict)  # study and job tags (autotune.experiment)
    heuristics: Mapping[str, Any] | None = None  # the rules' record when heuristics were a seed source
    replay: Mapping[str, Any] | None = None  # a replay: which recorded space and sample answered it
    forked_from: Mapping[str, Any] | None = None  # kept by a merge: the session this one forks
    file: str | None = None  # an imported space: the file it came from
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys this version does not type

    # -- the stored form ---------------------------------------------------------------------
    def to_record(self) -> dict[str, Any]:
        """JSON-ready: infinities as null, empty optional fields left out, `extra` merged in."""
        return dict(self._record)

    @functools.cached_property
    def _record(self) -> dict[str, Any]:
        """Built once (the record is frozen): reading it as a mapping key by key costs a lookup."""
        record: dict[str, Any] = {}
        for item in fields(self):
            if item.name == "extra":
                continue
            value = getattr(self, item.name)
            if item.name in _FACTORS:
                value = value if math.isfinite(value) else None
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, Mapping):
                value = dict(value)
            if value is None and item.name not in _FACTORS:
                continue
            record[item.name] = value
        return {**dict(self.extra), **record}

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> "SessionOptions":
        """Read stored options; a record without a version (written before records were versioned)
        is read as version 0, whose keys are the same; a newer version is refused."""
        version = int(data.get("version", 0))
        if version > OPTIONS_VERSION:
            raise NewerOptions(f"session options of version {version}; this autotune reads up to {OPTIONS_VERSION}")
        known = {item.name for item in fields(cls)} - {"extra", "version"}
        values: dict[str, Any] = {}
        for name in known & set(data):
            value = data[name]
            if name in _FACTORS:
                value = math.inf if value is None else float(value)
            elif name in ("seeds", "seed_points", "grid", "user_configs"):
                value = tuple(value or ())
            values[name] = value
        extra = {k: v for k, v in data.items() if k not in known and k != "version"}
        return cls(version=OPTIONS_VERSION, extra=extra, **values)

    def but(self, **changes: Any) -> "SessionOptions":
        return replace(self, **changes)

    # -- read as a mapping (reports, experiments) ----------------------------------------------
    def __getitem__(self, key: str) -> Any:
        return self._record[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._record)

    def __len__(self) -> int:
        return len(self._record)

    def __hash__(self) -> int:
        return id(self)
