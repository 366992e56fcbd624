"""`autotune check-config`: is this config a point of the kernel's space, and what does it become?

Runs the same validation as `autotune tune --config` without tuning anything, against the space
that command would use here (the recorded GPU space on a machine without a GPU), and prints
the config completed from the space's default, in canonical form, beside the compiler config
it normalises to (helion.Config / triton.Config), and which space it was checked against.
Nothing is written anywhere.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console

from autotune.commands import add_task_arguments
from autotune.databases import add_arguments as add_database_arguments
from autotune.errors import UserError

NAME = "check-config"


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(NAME, help="check configs against a kernel's space; print them completed")
    add_task_arguments(parser)
    parser.add_argument("--config", action="append", required=True, metavar="JSON_OR_FILE",
                        help="a JSON object of parameter -> value (partial is fine), or a file holding one or a "
                             "list (repeatable)")
    add_database_arguments(parser)
    parser.set_defaults(db=None)  # None: not given, so a recorded space is used only where one exists
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--replay", action="store_true",
                       help="check against the recorded space (what a replay uses) even on a GPU machine")
    where.add_argument("--live", action="store_true",
                       help="check against the kernel bound on this machine, even where a recorded GPU space exists")
    parser.add_argument("--space", default=None, help="fingerprint (or prefix) of the recorded space to check against")
    parser.add_argument("--format", choices=("text", "json"), default="text")


def run(args: argparse.Namespace, console: Console) -> int:
    from autotune.commands import kernel_task_inputs
    from autotune.seeds import read_configs, resolve_user_configs

    if args.space and args.live:
        raise UserError("--space names a recorded space; it cannot be given with --live")
    configs = read_configs(args.config)  # unreadable input fails before any kernel is bound
    spec, shape, dtype = kernel_task_inputs(args)
    task, where = _task(spec, shape, dtype, args)
    checked = []
    for config in resolve_user_configs(task, configs):
        candidate = task.candidate(config.point)
        native = None if "__unrecorded_point__" in candidate.native else dict(candidate.native)
        checked.append({"config": config.point, "from_default": [n for n in task.space.names if n not in config.given],
                        "native": native, "config_key": candidate.key if native is not None else None,
                        "given_as": config.form, "label": config.label, "space": task.fingerprint,
                        "checked_against": where})
    if args.format == "json":
        console.print(json.dumps(checked, indent=2), markup=False, highlight=False, soft_wrap=True)
        return 0
    _print_text(console, task, where, checked)
    return 0


def _task(spec: Any, shape: tuple[int, ...], dtype: Any, args: argparse.Namespace) -> tuple[Any, str]:
    """The space `autotune tune --config` would check against here: on a machine without a GPU,
    the recorded GPU space a replay uses (a Helion kernel bound on the CPU has another space:
    no tensor descriptors, no maxnreg...), else the kernel bound on this machine.  Without a
    recorded space (and unless --db, --space or --replay asked for one), the live one, saying so."""
    from autotune.tuning import gpu_available

    if args.live:
        return _live_task(spec, shape, dtype, "--live given")
    explicit = args.db is not None or args.space is not None or args.replay
    if not explicit and gpu_available():
        return _live_task(spec, shape, dtype, "a GPU is present: what a tune here measures")
    from autotune.databases import USER_DB

    readable = [p for p in (USER_DB, args.shipped) if p is not None and p.exists()]
    if not explicit and not readable:
        return _live_task(spec, shape, dtype, f"no recorded GPU space to check against: neither {USER_DB} nor "
                                              f"{args.shipped or 'shipped data'} exists")
    try:
        return _recorded_task(spec, shape, args)  # a damaged or foreign database is refused, never skipped
    except UserError as error:
        if explicit:
            raise
        return _live_task(spec, shape, dtype, f"no recorded GPU space to check against: {error}")


def _live_task(spec: Any, shape: tuple[int, ...], dtype: Any, why: str) -> tuple[Any, str]:
    from autotune.task import bind_live
    from autotune.tuning import gpu_available

    device = "cuda" if gpu_available() else "cpu"
    task = bind_live(spec, shape, dtype, device)
    where = f"the kernel bound on this machine ({task.identity.device}; {why})"
    if device == "cpu" and spec.family == "helion":
        where += "; a Helion kernel's space on a CPU differs from its GPU space"
    return task, where


def _recorded_task(spec: Any, shape: tuple[int, ...], args: argparse.Namespace) -> tuple[Any, str]:
    from autotune.databases import USER_DB, open_for_reading
    from autotune.kernels.registry import DTYPES, dtype_name
    from autotune.task import bind_recorded
    from autotune.tuning import choose_recorded_space

    db = args.db if args.db is not None else USER_DB
    cache = open_for_reading(db, args.shipped)
    try:
        record = choose_recorded_space(cache, spec, shape, dtype_name(DTYPES[args.dtype]), args.space)
        task = bind_recorded(spec, record, cache.aliases(record.fingerprint))
    finally:
        cache.close()
    read = f"{db}" + (f" + {args.shipped}" if args.shipped is not None else "")
    return task, f"the space recorded on {record.device} (read from {read}), as a replay uses"


def _print_text(console: Console, task: Any, where: str, checked: list[dict[str, Any]]) -> None:
    from autotune.export import export_config
    from search_spaces.space import canonical_json

    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    say(f"{task.spec.name} {'x'.join(map(str, task.shape))} {task.dtype}: space {task.fingerprint[:12]} "
        f"({len(task.space.parameters)} parameters); checked against {where}")
    for index, item in enumerate(checked, start=1):
        filled = ", ".join(item["from_default"]) or "none"
        given = {"native": ", given as a native config",
                 "table": f", given as a config table: {item['label']}"}.get(item["given_as"], "")
        say(f"config {index}: valid{given}; {len(item['from_default'])} parameter(s) from the default ({filled})")
        say(canonical_json(item["config"]))
        if item["native"] is None:
            say("native config: this point was never normalised in the database, so a replay answers it "
                "not_recorded")
        else:
            say(export_config(item["native"], family=task.space.family, kernel=task.spec.name,
                              fmt="python").rstrip("\n"))
