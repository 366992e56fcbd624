"""A Helion config's generated host function, loaded from the file its compile wrote.

Why: for a Helion kernel, building a config's callable is mostly code generation (Python
work of several hundredths of a second per config), and the benchmark worker did it again
for every config a compile worker had just generated.  In a search it is the benchmark
worker, not the compile workers, that sets the pace, so that repeat came out of every
config's time.  Helion writes each generated module to a file before importing it; a
compile worker sends that file's path and the function's name with its 'compiled' reply,
and the benchmark worker imports the same file instead of generating it again.  The source
is byte for byte the one the compile worker compiled, so Triton finds its binaries in the
compile cache as before.

`AUTOTUNE_BUILD_FROM_WORKER=0` turns it off (every config generated again in the benchmark
worker, as before), for measuring what it gains; sessions record which way they ran.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import sys
from typing import Any, Callable, NamedTuple

BUILD_FROM_WORKER = os.environ.get("AUTOTUNE_BUILD_FROM_WORKER", "1") != "0"


class GeneratedModule(NamedTuple):
    """Where a config's generated host function lives: its module's file and its name."""

    path: str
    name: str


def generated_module_of(function: Any) -> GeneratedModule | None:
    """The file and name of a generated host function (None when it has no file to load)."""
    try:
        path = inspect.getfile(function)
    except TypeError:  # a builtin or a callable object without a module file
        return None
    name = getattr(function, "__name__", None)
    if not name or not os.path.isfile(path):
        return None
    return GeneratedModule(path, name)


_loaded: dict[str, Any] = {}  # path -> module, for this process


def load_generated(module: GeneratedModule) -> Callable[..., Any]:
    """Import the module file (once per process) and return its host function.

    Raises whatever the import raises (a file gone, a module that no longer imports); the
    caller then generates the code itself."""
    loaded = _loaded.get(module.path)
    if loaded is None:
        digest = hashlib.sha1(module.path.encode()).hexdigest()[:16]
        module_name = f"autotune_generated_{digest}"
        spec = importlib.util.spec_from_file_location(module_name, module.path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {module.path}")
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = loaded  # where inspect (Triton reads a jitted function's source) looks
        try:
            spec.loader.exec_module(loaded)
        except BaseException:
            del sys.modules[module_name]
            raise
        _loaded[module.path] = loaded
    return getattr(loaded, module.name)
