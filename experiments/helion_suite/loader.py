"""Import an example file from the user's folder and build the suite's `autotune.Kernel` for it.

Why a kernel file per kernel (`kernel_file`): measuring processes and the CLI find a kernel by
locator (`FILE.py:NAME`), so each suite kernel gets a two-line file naming the examples folder
and the kernel; loading it builds the same Kernel, with the suite's hooks, in every process.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from autotune.kernel_loader import load_file
from experiments.helion_suite.hooks import hooks_for
from experiments.helion_suite.manifest import BY_NAME, SuiteKernel


class ExamplesMissing(ValueError):
    """The examples folder or one of its files is missing (one line for the user)."""


def load_module(examples: Path, file: str) -> ModuleType:
    """The example file imported as a module of its own (once per process and path)."""
    path = (Path(examples).expanduser() / file).resolve()
    if not path.is_file():
        raise ExamplesMissing(f"no {file} in {examples}: point --examples at a checkout of Helion's examples/")
    return load_file(path)


def build(name: str, examples: Path) -> Any:
    """The `autotune.Kernel` of suite kernel `name` from the examples folder, with the suite's hooks."""
    import autotune

    entry: SuiteKernel = BY_NAME[name]
    module = load_module(examples, entry.file)
    fn = getattr(module, entry.function, None)
    if fn is None:
        raise ExamplesMissing(f"{entry.file} in {examples} has no {entry.function}: another Helion version?")
    return autotune.Kernel(fn, name=name, rank=entry.rank, **hooks_for(name, module))


KERNEL_FILE = '''"""The suite kernel {name} ({file}:{function} in {examples}), written by experiments.helion_suite.loader."""
from experiments.helion_suite.loader import build

kernel = build({name!r}, {examples!r})
'''


def kernel_file(name: str, examples: Path, folder: Path) -> str:
    """Write the kernel file of suite kernel `name` into `folder`; returns its locator."""
    entry = BY_NAME[name]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"suite_{name}.py"
    text = KERNEL_FILE.format(name=name, file=entry.file, function=entry.function,
                              examples=str(Path(examples).expanduser().resolve()))
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return f"{path.resolve()}:kernel"
