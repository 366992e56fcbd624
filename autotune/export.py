"""Frozen configs as code or JSON, ready to paste into production kernels.

A config read from the database is data: it is rendered literal by literal from JSON
values (None, bools, numbers, strings, lists), never evaluated, so nothing stored in a
database can inject code into an export.
"""

from __future__ import annotations

import json
import keyword
import math
import re
from typing import Any, Mapping

from autotune.errors import UserError
from search_spaces.triton_space import split_launch_config

INTERPRETER_MODE = "interpret"  # a session's mode when its configs ran through the Triton interpreter


class ExportError(ValueError):
    pass


def refuse_interpreted(session: Mapping[str, Any]) -> None:
    """Interpreter sessions check accuracy; their times are interpreter seconds, so no config of
    theirs is exported as a tuned one (one line)."""
    if session.get("mode") == INTERPRETER_MODE:
        raise UserError(f"session {session.get('id')} ran through the Triton interpreter: its times are not GPU "
                        "timings, so it has no tuned config to export")


def refuse_interpreted_space(cache: Any, fingerprint: str) -> None:
    """Refuses (one line) a space whose measurements include interpreter sessions' rows."""
    rows = cache.session_modes(fingerprint)
    interpreted = [str(i) for i, mode in rows if mode == INTERPRETER_MODE]
    if not interpreted:
        return
    timed = [str(i) for i, mode in rows if mode != INTERPRETER_MODE]
    if not timed:
        raise UserError(f"space {fingerprint[:12]} was only run through the Triton interpreter: its times are not "
                        "GPU timings, nothing to export")
    raise UserError(f"space {fingerprint[:12]} holds interpreter session(s) {', '.join(interpreted)}, whose times are "
                    f"not GPU timings: export a timed session with --session ({', '.join(timed[:5])})")


def literal(value: Any) -> str:
    """Python source for a JSON value; refuses anything else."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ExportError(f"cannot export non-finite number {value!r}")
        return repr(float(value))
    if isinstance(value, str):
        return repr(str(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in sorted(value.items())) + "}"
    raise ExportError(f"cannot export a value of type {type(value).__name__}")


def _comment_safe(text: str) -> str:
    """A name fit for a one-line comment: anything but word characters, '.' and '-' becomes '?'."""
    return re.sub(r"[^\w.\-]", "?", str(text))


def _keyword_arguments(config: Mapping[str, Any]) -> str:
    parts = []
    for name in sorted(config):
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise ExportError(f"config key {name!r} is not a valid Python identifier")
        parts.append(f"{name}={literal(config[name])}")
    return ", ".join(parts)


def helion_python(config: Mapping[str, Any], kernel: str) -> str:
    return (
        "import helion\n\n"
        f"# Tuned config for {_comment_safe(kernel)}; use as @helion.kernel(config=CONFIG, static_shapes=True)\n"
        f"CONFIG = helion.Config({_keyword_arguments(config)})\n"
    )


def triton_python(config: Mapping[str, Any], kernel: str) -> str:
    meta, options = split_launch_config(config)
    meta_text = "{" + ", ".join(f"{literal(str(k))}: {literal(v)}" for k, v in sorted(meta.items())) + "}"
    option_text = "".join(f", {k}={literal(v)}" for k, v in sorted(options.items()))
    return (
        "import triton\n\n"
        f"# Tuned launch config for {_comment_safe(kernel)}; use as @triton.autotune(configs=[CONFIG], key=[])\n"
        f"CONFIG = triton.Config({meta_text}{option_text})\n"
    )


def export_config(config: Mapping[str, Any], *, family: str, kernel: str, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(dict(config), indent=2, sort_keys=True) + "\n"
    if fmt == "python":
        return helion_python(config, kernel) if family == "helion" else triton_python(config, kernel)
    raise ExportError(f"unknown export format {fmt!r} (use python or json)")
