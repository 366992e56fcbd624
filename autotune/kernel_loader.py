"""Finding a kernel: a built-in name, `path/to/file.py:name` or `package.module:name`.

The same text (the kernel's locator) names the kernel in every process: the CLI's argument,
the measuring workers' start-up and a session's record all go through `resolve_kernel`, so a
user's kernel is measured in worker processes exactly as the user wrote it.

A file is imported as a module of its own (its `if __name__ == "__main__":` block does not
run), once per process until `forget_loaded_files`.  `name` may be an `autotune.Kernel` or a
`@helion.kernel`; a Helion kernel that the file also wraps in an `autotune.Kernel` (to give it
inputs, a reference or baselines) is refused with the wrapper's name where a user names a
kernel to tune or serve (the wrapper is what is tuned, so that no hook is silently left
behind), and taken with the wrapper's hooks where a recorded locator is read back.  Measuring processes receive the kernel
itself (kernel_wire.py); the locator names it for the CLI and for `--resume`.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from autotune.errors import UserError
from autotune.kernel import Kernel, KernelError, is_helion_kernel


class KernelNotFound(UserError):
    """The kernel named cannot be found or is not a kernel (one line, exit status 2)."""


def is_locator(text: str) -> bool:
    """Whether a kernel argument names a file or module (`x.py:name`, `pkg.mod:name`), not a built-in."""
    return ":" in text


def check_kernel_name(text: str) -> int | None:
    """What can be checked of a kernel argument without importing any kernel (so torch, triton
    and helion): a built-in name exists, a locator is well formed and its file exists.  Returns
    the rank of a built-in kernel (None for a user's); KernelNotFound (one line) otherwise."""
    if not is_locator(text):
        from autotune.kernels.names import UnknownKernel, builtin_kernel

        try:
            return builtin_kernel(text).rank
        except UnknownKernel as error:
            registry = sys.modules.get("autotune.kernels.registry")
            registered = getattr(registry, "_REGISTRY", {})
            if text in registered:  # registered in this process, beside the built-in ones
                return registered[text].rank
            raise KernelNotFound(f"{error.args[0]}; a kernel of your own is named FILE.py:NAME") from None
    where, _, attribute = text.rpartition(":")
    if not where or not attribute.isidentifier():
        raise KernelNotFound(f"{text!r} is not FILE.py:NAME or module:NAME")
    if _is_file_locator(where):
        path = Path(where).expanduser()
        if not path.is_file():
            raise KernelNotFound(f"no file {where}" if not path.exists() else f"{where} is not a file")
    return None


def _is_file_locator(where: str) -> bool:
    return where.endswith(".py") or "/" in where


def resolve_kernel(text: str, *, refuse_wrapped: bool = False) -> Kernel:
    """The kernel a locator or built-in name stands for; KernelNotFound (one line) if none.
    `refuse_wrapped` (what a user names to tune or serve): a Helion kernel its file wraps in an
    autotune.Kernel is refused, naming the wrapper; otherwise (a recorded locator, read back for
    `show` or `--resume`) the wrapper is taken."""
    if not is_locator(text):
        from autotune.kernels.registry import UnknownKernel, get_kernel

        try:
            return get_kernel(text)
        except UnknownKernel as error:
            raise KernelNotFound(f"{error.args[0]}; a kernel of your own is named FILE.py:NAME") from None
    check_kernel_name(text)
    where, _, attribute = text.rpartition(":")
    module = _load_file(where) if _is_file_locator(where) else _import(where)
    if not hasattr(module, attribute):
        found = ", ".join(sorted(_kernels_in(module))) or "none"
        raise KernelNotFound(f"{where} has no {attribute!r} (kernels there: {found})")
    kernel = as_kernel(getattr(module, attribute), module, label=f"{attribute!r} in {where}",
                       refuse_wrapped=refuse_wrapped)
    kernel.locator = kernel.locator or f"{_canonical(where)}:{attribute}"
    return kernel


def as_kernel(obj: Any, module: ModuleType | None = None, *, label: str | None = None,
              refuse_wrapped: bool = False) -> Kernel:
    """`obj` as an autotune.Kernel: itself, or a Helion kernel with the hooks its module's
    wrapper gives it (refused instead, naming the wrapper, with `refuse_wrapped`), or with
    defaults where there is none."""
    if isinstance(obj, Kernel):
        return obj
    label = label or repr(getattr(obj, "__name__", obj))
    if not is_helion_kernel(obj):
        kind = "a function" if callable(obj) else f"a {type(obj).__name__}"
        raise KernelNotFound(f"{label} is {kind}, not a @helion.kernel or an autotune.Kernel (a Triton launcher "
                             "is tuned as autotune.Kernel(launch, space=...))")
    module = module or sys.modules.get(getattr(obj.fn, "__module__", ""), None)
    for name, value in vars(module).items() if module is not None else ():
        if isinstance(value, Kernel) and value.fn is obj:  # its hooks live on the wrapper
            if not refuse_wrapped:
                return value
            where = getattr(module, "__file__", None) or module.__name__
            raise KernelNotFound(f"{label} is wrapped in autotune.Kernel {name!r} (in {where}), which carries its "
                                 f"hooks: tune {name!r} itself (FILE.py:{name} on the command line)")
    try:
        return Kernel(obj)
    except KernelError as error:
        raise KernelNotFound(str(error)) from None


def locator_of(kernel: Kernel) -> str:
    """How another process (`--resume`, `autotune show`) finds `kernel` again: its locator, or the
    module-level name the Kernel is bound to in the file or module that defines it.  Raises
    KernelNotFound for a kernel no other process can import (a notebook cell, inside a function);
    measuring processes need none (kernel_wire.py)."""
    if kernel.locator:
        return kernel.locator
    fn = kernel.helion_kernel.fn if kernel.family == "helion" else kernel.triton_launch
    module = sys.modules.get(getattr(fn, "__module__", ""), None)
    names = [name for name, value in vars(module).items() if value is kernel] if module else []
    path = getattr(module, "__file__", None)
    if not names or not path:
        raise KernelNotFound(f"{kernel.name} is not defined at the top level of a .py file, so the measuring "
                             "processes cannot import it: put it in a file (and import it from there)")
    importable = module.__name__ not in ("__main__", "__mp_main__") and not module.__name__.startswith(_PREFIX)
    where = module.__name__ if importable else _canonical(path)
    kernel.locator = f"{where}:{names[0]}"
    return kernel.locator


_PREFIX = "autotune_user_"


def _canonical(where: str) -> str:
    """A file's path as given when it is relative to the working directory, else absolute."""
    if not where.endswith(".py"):
        return where
    path = Path(where).resolve()
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def load_file(where: str | Path) -> ModuleType:
    """A Python file imported as a module of its own, once per process: under a name derived
    from its path (the same in every process), with its folder importable while it loads; a
    file that fails to import is one line (KernelNotFound)."""
    return _load_file(str(where))


def _load_file(where: str) -> ModuleType:
    path = Path(where).expanduser()
    if not path.is_file():
        raise KernelNotFound(f"no file {where}" if not path.exists() else f"{where} is not a file")
    resolved = path.resolve()
    for module in list(sys.modules.values()):  # the user's script itself, or a file loaded before
        if getattr(module, "__file__", None) and _same_file(module.__file__, resolved):
            return module
    name = _PREFIX + resolved.stem + "_" + hashlib.sha256(str(resolved).encode()).hexdigest()[:8]
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise KernelNotFound(f"{where} cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(resolved.parent))  # the file may import its neighbours
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # noqa: BLE001 - the user's code: one line, with its own message
        del sys.modules[name]
        raise KernelNotFound(f"{where} failed to import: {type(error).__name__}: {_one_line(error)}") from None
    finally:
        sys.path.remove(str(resolved.parent))
    return module


def forget_loaded_files() -> None:
    """Forget every kernel file loaded so far, so the next `resolve_kernel` reads it as it is
    now (a long-lived process, such as `autotune serve`, outlives the user's edits)."""
    for name in [n for n in sys.modules if n.startswith(_PREFIX)]:
        del sys.modules[name]


def _same_file(a: str, b: Path) -> bool:
    try:
        return Path(a).resolve() == b
    except OSError:
        return False


def _import(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise KernelNotFound(f"module {name} cannot be imported ({_one_line(error)})") from None


def _kernels_in(module: ModuleType) -> list[str]:
    return [name for name, value in vars(module).items()
            if not name.startswith("_") and (isinstance(value, Kernel) or is_helion_kernel(value))]


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:300]
