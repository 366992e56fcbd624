"""`autotune check-config`: is this config a point of the kernel's space, and what does it become?

Runs the same validation as `autotune tune --config` without tuning anything, and prints the
config completed from the space's default, in canonical form, beside the compiler config it
normalises to (helion.Config / triton.Config).  Nothing is written anywhere.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console

from autotune.commands import add_task_arguments
from autotune.errors import UserError

NAME = "check-config"


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(NAME, help="check configs against a kernel's space; print them completed")
    add_task_arguments(parser)
    parser.add_argument("--config", action="append", required=True, metavar="JSON_OR_FILE",
                        help="a JSON object of parameter -> value (partial is fine), or a file holding one or a "
                             "list (repeatable)")
    parser.add_argument("--db", default=None,
                        help="check against the space recorded in this database (what a replay uses) instead of "
                             "the kernel bound on this machine")
    parser.add_argument("--space", default=None, help="with --db: fingerprint (or prefix) of the recorded space")
    parser.add_argument("--format", choices=("text", "json"), default="text")


def run(args: argparse.Namespace, console: Console) -> int:
    from autotune.commands import kernel_task_inputs
    from autotune.seeds import read_configs, user_seeds

    if args.space and not args.db:
        raise UserError("--space needs --db (it names a space recorded in that database)")
    configs = read_configs(args.config)  # unreadable input fails before any kernel is bound
    spec, shape, dtype = kernel_task_inputs(args)
    task, where = _recorded_task(spec, shape, args) if args.db else _live_task(spec, shape, dtype)
    checked = []
    for (label, raw), (_, point) in zip(configs, user_seeds(task, configs)):
        candidate = task.candidate(point)
        native = None if "__unrecorded_point__" in candidate.native else dict(candidate.native)
        checked.append({"config": point, "from_default": [n for n in task.space.names if n not in raw],
                        "native": native, "config_key": candidate.key if native is not None else None})
    if args.format == "json":
        console.print(json.dumps(checked, indent=2), markup=False, highlight=False, soft_wrap=True)
        return 0
    _print_text(console, task, where, checked)
    return 0


def _live_task(spec: Any, shape: tuple[int, ...], dtype: Any) -> tuple[Any, str]:
    from autotune.task import bind_live
    from autotune.tuning import gpu_available

    device = "cuda" if gpu_available() else "cpu"
    task = bind_live(spec, shape, dtype, device)
    return task, f"the kernel bound on this machine ({task.identity.device})"


def _recorded_task(spec: Any, shape: tuple[int, ...], args: argparse.Namespace) -> tuple[Any, str]:
    from autotune.cache import Cache
    from autotune.kernels.registry import DTYPES, dtype_name
    from autotune.task import bind_recorded
    from autotune.tuning import choose_recorded_space

    cache = Cache.open(args.db)
    try:
        record = choose_recorded_space(cache, spec, shape, dtype_name(DTYPES[args.dtype]), args.space)
        task = bind_recorded(spec, record, cache.aliases(record.fingerprint))
    finally:
        cache.close()
    return task, f"the space recorded in {args.db} on {record.device}"


def _print_text(console: Console, task: Any, where: str, checked: list[dict[str, Any]]) -> None:
    from autotune.export import export_config
    from search_spaces.space import canonical_json

    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    say(f"{task.spec.name} {'x'.join(map(str, task.shape))} {task.dtype}: space {task.fingerprint[:12]} "
        f"({len(task.space.parameters)} parameters), from {where}")
    for index, item in enumerate(checked, start=1):
        filled = ", ".join(item["from_default"]) or "none"
        say(f"config {index}: valid; {len(item['from_default'])} parameter(s) from the default ({filled})")
        say(canonical_json(item["config"]))
        if item["native"] is None:
            say("native config: this point was never normalised in the database, so a replay answers it "
                "not_recorded")
        else:
            say(export_config(item["native"], family=task.space.family, kernel=task.spec.name,
                              fmt="python").rstrip("\n"))
