"""Seed configs evaluated before a strategy's own proposals (`--seed-from`).

* `default`: the compiler's default config (always evaluated; named for clarity);
* `heuristic`: the rules in `heuristics/` and the seeds the kernel's ConfigSpec offers
  (Helion's compiler seeds, recorded with the space);
* `cache`: the fastest config recorded at each of the nearest shapes of the same kernel and
  dtype (same kernel source), then the next fastest of each in turn while places are left,
  translated into this task's space where they fit; a whole-row reduction recorded at a
  narrower row keeps the chunk it was measured with (`heuristics.transfer`).

Configs the user gives (`--config`) are seeds too, evaluated first, with origin "user".
Unlike the other sources they are never skipped: one that does not fit the space is an
error, reported before any database is created (`read_configs`, then `user_seeds`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from autotune.errors import UserError
from autotune.types import Params
from search_spaces.parameters import Integer, JsonValue, Parameter, PowerOfTwo
from search_spaces.space import InvalidConfig, SearchSpace

if TYPE_CHECKING:  # the CLI reads --config before importing the cache or the kernels (torch)
    from autotune.store.cache import Cache
    from autotune.task import TuningTask

SOURCES = ("default", "heuristic", "cache")
USER = "user"  # the origin of configs given with --config
CACHE_SEEDS = 3


def parse_sources(text: str) -> list[str]:
    sources = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in sources if s not in SOURCES]
    if unknown:
        raise ValueError(f"unknown seed source(s) {', '.join(unknown)} (known: {', '.join(SOURCES)})")
    return sources


def collect_seeds(task: TuningTask, cache: Cache | None, sources: Sequence[str]) -> list[tuple[str, Params]]:
    """(origin, point) pairs, in the order the sources were given; configs that do not fit are skipped."""
    seeds: list[tuple[str, Params]] = []
    for source in sources:
        if source == "heuristic":
            from heuristics import seeds_for

            seeds += [("heuristic", seed.params) for seed in seeds_for(task)]
            natives = task.space.extras.get("compiler_seeds", [])
            seeds += [("heuristic", p) for p in _points(task, natives)]
        elif source == "cache" and cache is not None:
            seeds += [("cache", p) for p in _points(task, _carried(task, _nearest_best(task, cache)), moved=True)]
    return seeds


def heuristic_provenance(task: TuningTask, sources: Sequence[str]) -> dict[str, Any]:
    """{"heuristics": ...} for a session's options: every heuristic seed's rule, reason, facts
    and constants, and the rules that declined and why; {} when heuristics are not a source."""
    if "heuristic" not in sources:
        return {}
    from heuristics import analyse

    return {"heuristics": analyse(task).to_record()}


def shape_distance(a: Sequence[int], b: Sequence[int]) -> float:
    """Sum of |log2| ratios of the extents: 0 for the same shape, inf for another rank."""
    if len(a) != len(b):
        return math.inf
    return sum(abs(math.log2(x) - math.log2(y)) for x, y in zip(a, b))


def nearest_shapes(shapes: Iterable[Sequence[int]], shape: Sequence[int],
                   count: int = CACHE_SEEDS) -> list[tuple[int, ...]]:
    """The `count` distinct shapes of `shapes` nearest to `shape` (`shape_distance`), nearest first;
    shapes at the same distance in the order of their extents."""
    distinct = {tuple(int(d) for d in s) for s in shapes}
    return sorted(distinct, key=lambda s: (shape_distance(s, shape), s))[:count]


def seed_records(cache: Cache, kernel: str, dtype: str, source_hash: str) -> list[Any]:
    """The recorded spaces the cache source reads: the kernel's, at this dtype, of this kernel
    source, with measurements."""
    return [r for r in cache.find_spaces(kernel, dtype=dtype) if r.source_hash == source_hash and r.evaluations]


def _nearest_best(task: TuningTask, cache: Cache) -> list[tuple[dict[str, Any], Any, tuple[int, ...]]]:
    """(native, result, the shape it was recorded at): the fastest config at each of the CACHE_SEEDS
    nearest recorded shapes, nearest first, then the next fastest of each in turn while places are
    left.  Why not the fastest configs of the nearest shape alone: they are often variants of one
    config (the held-out study's warm-cache arm got three of one looped chunk at four long rows,
    and its search stayed there), while the nearest shapes' bests differ where the shapes do."""
    records = seed_records(cache, task.spec.name, task.dtype, task.identity.source_hash)
    ranked = []
    for near in nearest_shapes((r.shape for r in records), task.shape):
        here = [(native, result, near) for r in records if tuple(r.shape) == near
                for native, result in cache.best_configs(r.fingerprint, CACHE_SEEDS)]
        ranked.append(sorted(here, key=lambda item: item[1].objective))
    picks: list[tuple[dict[str, Any], Any, tuple[int, ...]]] = []
    for rank in range(CACHE_SEEDS):
        picks += [here[rank] for here in ranked if rank < len(here)]
    return picks[:CACHE_SEEDS]


def _carried(task: TuningTask, best: Sequence[tuple[dict[str, Any], Any, tuple[int, ...]]]) -> list[dict[str, Any]]:
    """The configs as they should run at this shape (`heuristics.transfer`: a whole-row reduction
    recorded at a narrower row keeps the chunk it was measured with, and stages no more whole
    rows than this GPU's shared memory holds)."""
    if not best or task.spec.family != "helion":
        return [native for native, _, _ in best]
    from heuristics.device import current_device
    from heuristics.extract import facts_for_task
    from heuristics.transfer import carry

    try:
        facts = facts_for_task(task)
    except Exception:  # noqa: BLE001 - no facts (a replayed kernel of the user's, say): carried as recorded
        return [native for native, _, _ in best]
    smem = current_device().smem_per_block
    return [carry(native, facts, shape, task.shape, smem) for native, _, shape in best]


def _points(task: TuningTask, natives: Sequence[dict[str, Any]], moved: bool = False) -> list[Params]:
    """The configs that are points of the task's space, once each.  With `moved`, a config recorded
    at another shape that is not a point here becomes its nearest point instead: the best configs
    of a narrower row can name a block wider than this row allows, or an indexing this shape does
    not offer, and dropping them left the cache source with nothing to give."""
    points: list[Params] = []
    for native in natives:
        try:
            point = task.codec.params_of(native)
        except InvalidConfig:
            if not moved:
                continue
            try:
                point = task.codec.params_near(native)
            except InvalidConfig:
                continue
        if point not in points:
            points.append(point)
    return points


# -- configs given by the user (--config) -------------------------------------------------------
class ConfigInputError(UserError):
    """A --config that cannot be read, or that is not a point of the space; one line."""


def read_configs(texts: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    """(label, JSON object) for each config in `--config` arguments (inline JSON, or a file
    holding one object or a list of them).  Reads only: no space is needed yet, so this runs
    before anything else in a command.

    An object is a point of the space (`block_sizes[0]`...), a native config as `autotune export
    SESSION --format json` writes it (`block_sizes: [...]`), or a whole config table as `autotune
    export KERNEL --format json` writes it (its entry for the task's shape is used): what this
    framework exports, it reads back (`resolve_user_configs`)."""
    configs: list[tuple[str, dict[str, Any]]] = []
    for text in texts:
        data, where = _load(text)
        if isinstance(data, list) and not data:
            raise ConfigInputError(f"{where} holds an empty list; give at least one config")
        items = data if isinstance(data, list) else [data]
        for index, item in enumerate(items, start=1):
            label = f"{where} item {index}" if isinstance(data, list) else where
            if not isinstance(item, dict):
                raise ConfigInputError(f"{label} is {_json_kind(item)}, not a JSON object of parameter name -> value")
            if _is_table(item):
                _check_table(item, label)
            configs.append((label, item))
    return configs


@dataclass(frozen=True)
class UserConfig:
    """One --config resolved against a task's space."""

    label: str
    point: Params  # the completed, canonical point
    given: tuple[str, ...]  # the parameters the config set (the others come from the default)
    form: str  # "point", "native" (a compiler config) or "table" (an entry of a config table)


def resolve_user_configs(task: TuningTask, configs: Sequence[tuple[str, Mapping[str, JsonValue]]]
                         ) -> list[UserConfig]:
    """Each config as a point of the task's space; ConfigInputError (one line) for the first that
    does not fit (including a config the compiler itself rejects when normalising it)."""
    resolved = []
    for label, raw in configs:
        form = "point"
        if _is_table(raw):
            label, raw = _table_entry(task, label, raw)
            form = "table"
        partial, found = _as_partial_point(task, raw, label)
        if form == "point" and any(key not in task.space.names for key in raw):
            form = "native"
        # the codec's space: a replay offers its strategy only the recorded sample (task.space),
        # but a --config outside it is still a config of the space (answered not_recorded)
        point = user_point(task.codec.space, found if found is not None else partial, label)
        try:
            task.candidate(point)
        except InvalidConfig as error:
            raise ConfigInputError(f"{label}: {_one_line(str(error))}") from None
        resolved.append(UserConfig(label=label, point=point, given=tuple(n for n in task.space.names if n in partial),
                                   form=form))
    return resolved


def _as_partial_point(task: TuningTask, raw: Mapping[str, JsonValue], label: str
                      ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(the parameters `raw` sets, by the space's names; for a native config the codec
    recognises, its complete point, else None).  A point's names are the space's own; a native
    config (helion.Config's keyword arguments) holds each list-valued setting as one list:
    `block_sizes: [64]` is `block_sizes[0]: 64`."""
    space = task.space
    names = set(space.names)
    if all(key in names for key in raw) or space.family != "helion":  # elsewhere a point is its own config
        return dict(raw), None
    partial: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in raw.items():
        slots = [name for name in space.names if name.startswith(f"{key}[")]
        if key in names:
            partial[key] = value
        elif isinstance(value, list) and len(value) == len(slots):  # both empty: a setting this space lacks
            partial.update({f"{key}[{i}]": v for i, v in enumerate(value)})
        elif isinstance(value, list) and slots:
            shown = ", ".join(slots[:6]) + (", ..." if len(slots) > 6 else "")
            raise ConfigInputError(f"{label}: {key} has {len(value)} element(s); {space.kernel}'s space has "
                                   f"{len(slots)} ({shown})")
        else:
            unknown.append(key)
    if unknown:
        raise ConfigInputError(f"{label}: {_unknown_message(space, unknown)}")
    try:  # the codec knows the compiler's spelling best: a recorded config is found as recorded
        found = task.codec.params_of(dict(raw))
    except (InvalidConfig, TypeError, ValueError, KeyError):
        found = None
    return partial, found


def _number(value: Any) -> float:
    """A table entry's time, for ties between shapes equally near; a missing or odd one sorts last."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.inf


def _is_table(raw: Mapping[str, Any]) -> bool:
    from autotune.config_table import FORMAT

    return raw.get("format") == FORMAT and "entries" in raw


def _check_table(raw: Mapping[str, Any], label: str) -> None:
    """A config table's structure, checked before any kernel is bound."""
    entries = raw.get("entries")
    if not isinstance(raw.get("kernel"), str) or not isinstance(entries, list) or not entries:
        raise ConfigInputError(f"{label} is a config table with no kernel or no entries")
    for number, entry in enumerate(entries, start=1):
        ok = (isinstance(entry, dict) and isinstance(entry.get("dtype"), str) and isinstance(entry.get("config"), dict)
              and isinstance(entry.get("shape"), list) and entry["shape"]
              and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in entry["shape"]))
        if not ok:
            raise ConfigInputError(f"{label}: config table entry {number} needs a shape, a dtype and a config")


def _table_entry(task: TuningTask, label: str, raw: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(label, native config) of the table's entry for the task: its shape, else the nearest
    recorded shape of its dtype and rank (the rule `autotune.configured` serves by)."""
    from autotune.config_table import EXACT, Entry, ConfigTable

    if raw["kernel"] != task.spec.name:
        raise ConfigInputError(f"{label} is a config table of {raw['kernel']}, not of {task.spec.name}")
    table = ConfigTable(kernel=raw["kernel"], family=str(raw.get("family", "")), source_hash="",
                        entries=[Entry(shape=tuple(e["shape"]), dtype=e["dtype"], config=e["config"],
                                       median_ms=_number(e.get("median_ms"))) for e in raw["entries"]])
    pick = table.pick(task.shape, task.dtype)
    at = f"{'x'.join(map(str, task.shape))} {task.dtype}"
    if pick.config is None:
        raise ConfigInputError(f"{label}: the config table has no entry for {task.dtype} at rank {len(task.shape)}")
    if pick.how == EXACT:
        return f"{label} (its entry for {at})", pick.config
    return f"{label} (its entry for {'x'.join(map(str, pick.shape or ()))}, the nearest to {at})", pick.config


def user_point(space: SearchSpace, raw: Mapping[str, JsonValue], label: str = "config") -> dict[str, JsonValue]:
    """The completed, canonical point of a (possibly partial) user config; missing parameters
    come from the space's default.  Every refusal names the parameter and what it allows."""
    unknown = [name for name in raw if name not in space.names]
    if unknown:
        raise ConfigInputError(f"{label}: {_unknown_message(space, unknown)}")
    problems = [f"{p.name}={_show(raw[p.name])} is not allowed ({allowed_values(p)})"
                for p in space.parameters if p.name in raw and not p.contains(raw[p.name])]
    if problems:
        raise ConfigInputError(f"{label}: {'; '.join(problems)}")
    point = {p.name: p.canonical(v) for p, v in zip(space.parameters, space.complete(raw).values())}
    broken = [v for c in space.constraints if (v := c.violation(point)) is not None]
    if broken:
        raise ConfigInputError(f"{label}: breaks a limit of {space.kernel}'s space: {'; '.join(broken)}")
    if not space.is_member(point):
        raise ConfigInputError(f"{label}: not one of the {space.cardinality()} recorded points of this finite space")
    return space.validate(point)


def user_seeds(task: TuningTask, configs: Sequence[tuple[str, Mapping[str, JsonValue]]]
               ) -> list[tuple[str, Params]]:
    """("user", point) seeds for a task; raises ConfigInputError for the first that does not fit
    (including a config the compiler itself rejects when normalising it)."""
    return [(USER, config.point) for config in resolve_user_configs(task, configs)]


def allowed_values(parameter: Parameter) -> str:
    """What a parameter accepts, in a few words (ranges as ranges, choices listed as JSON)."""
    if isinstance(parameter, PowerOfTwo):
        return f"allowed: powers of two from {parameter.low} to {parameter.high}"
    if isinstance(parameter, Integer):
        return f"allowed: integers from {parameter.low} to {parameter.high}"
    values = parameter.values()
    shown = ", ".join(json.dumps(v) for v in values[:MAX_LISTED])
    more = f", ... ({len(values)} values)" if len(values) > MAX_LISTED else ""
    return f"allowed: {shown}{more}"


MAX_LISTED = 12
MAX_SHOWN_CHARS = 60


def _load(text: str) -> tuple[Any, str]:
    """The JSON value of one --config argument, and how to name it in messages."""
    where = f"--config {_echo(text)}"
    if text.strip()[:1] in ("{", "[", ""):
        return _parse(text, where), where
    kind = _file_kind(text)
    if kind == "file":
        where = f"--config file {_echo(text, tail=True)}"
        try:
            return _parse(Path(text).read_text(encoding="utf-8"), where), where
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigInputError(f"{where} cannot be read ({_one_line(str(error))})") from None
    if kind == "other":
        raise ConfigInputError(f"{where} is a directory or special file, not a JSON file")
    try:
        return _parse(text, where), where
    except ConfigInputError:
        raise ConfigInputError(f"{where} is neither a JSON object nor an existing file") from None


def _file_kind(text: str) -> str:
    """'file', 'other' (a directory, a device) or 'none' (no such path, or not a path at all)."""
    try:
        path = Path(text)
        return "file" if path.is_file() else "other" if path.exists() else "none"
    except (OSError, ValueError):  # a name too long, an embedded NUL
        return "none"


def _parse(text: str, where: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as error:
        raise ConfigInputError(f"{where}: malformed JSON ({error.msg} at line {error.lineno} column {error.colno})"
                               ) from None
    except (ValueError, RecursionError) as error:  # a duplicate key, an int of too many digits, deep nesting
        raise ConfigInputError(f"{where}: unreadable JSON ({_one_line(str(error)) or type(error).__name__})") from None


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise ValueError(f"{_show(key)} is given twice")
        data[key] = value
    return data


def _unknown_message(space: SearchSpace, unknown: list[str]) -> str:
    named = ", ".join(_show(n) for n in unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
    hints = [p for n in unknown[:5] for p in space.names if p.startswith(f"{n}[")]  # Helion list slots
    hint = f" (list values are one parameter per element: {', '.join(hints[:6])})" if hints else ""
    listed = ", ".join(space.names[:30]) + (", ..." if len(space.names) > 30 else "")
    return f"unknown parameter(s) {named}{hint}; {space.kernel}'s parameters are: {listed}"


def _json_kind(value: Any) -> str:
    kinds = {list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number",
             type(None): "null"}
    return kinds.get(type(value), type(value).__name__)


def _show(value: Any) -> str:
    """A value as JSON, on one line and cut short, for messages."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 3] + "..."


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _echo(text: str, tail: bool = False) -> str:
    """The user's own text, on one line, printable and cut short (keeping the end of a path,
    where its name is), for messages."""
    line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in _one_line(text))
    if len(line) <= MAX_SHOWN_CHARS:
        return line
    return "..." + line[3 - MAX_SHOWN_CHARS:] if tail else line[: MAX_SHOWN_CHARS - 3] + "..."
