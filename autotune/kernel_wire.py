"""A kernel sent by value to the processes that measure it.

Why: a measuring process used to find the kernel again by its locator, so a kernel or hooks
defined in `__main__`, a notebook cell, `python -c` or inside a helper function were lost (the
worker found the bare Helion kernel and gave it default hooks).  Now the `autotune.Kernel`
itself, every hook given to its constructor included, is pickled with cloudpickle: code that
no other process can import (the user's script, a file loaded by path, a notebook) travels by
value, the rest by reference.

Two things Helion needs are restored on arrival:

* A Helion kernel's function must have a real module's namespace as its globals (Helion
  imports the kernel's globals from `sys.modules[fn.__module__]` and checks it is the same
  dict).  A function that travelled by value gets a fresh module, registered in `sys.modules`,
  holding what it referred to, and the Helion kernel is rebuilt around it.
* Helion reads the kernel's source.  The source lines the sending process saw travel with the
  kernel and are put into `linecache`, so a notebook cell's kernel binds in a worker too.  A
  kernel written in `python -c` has no source anywhere: it is refused before anything starts.
"""

from __future__ import annotations

import hashlib
import inspect
import linecache
import pickle
import sys
import types
from typing import Any

from autotune.kernel import Kernel, KernelError, is_helion_kernel

_FILE_MODULE_PREFIX = "autotune_user_"  # the loader's names for files loaded by path
_WIRE_PREFIX = "autotune_wire_"  # modules made here for functions that travelled by value
HOOK_NAMES = ("inputs", "reference", "baselines", "bytes_moved", "flops", "shape_of")


def _travels_by_value(module: types.ModuleType | None) -> bool:
    """Whether no other process could import `module` by its name."""
    if module is None:
        return False
    name = module.__name__
    return (name in ("__main__", "__mp_main__") or name.startswith(_FILE_MODULE_PREFIX)
            or name.startswith(_WIRE_PREFIX) or getattr(module, "__spec__", None) is None)


def helion_source_problem(kernel: Kernel) -> str | None:
    """Why Helion could not read the kernel's source (so could not bind it), or None."""
    if kernel.family != "helion":
        return None
    fn = kernel.helion_kernel.fn
    try:
        inspect.getsource(fn)
    except (OSError, TypeError):
        where = fn.__code__.co_filename
        how = "in `python -c` or from stdin" if where in ("<string>", "<stdin>") else f"in {where}"
        return (f"{kernel.name} is a Helion kernel written {how}: Helion reads a kernel's source to bind it and "
                "cannot read this one; put the kernel in a .py file")
    return None


def to_wire(kernel: Kernel) -> bytes:
    """`kernel` pickled for another process; KernelError (one line, naming the hook and why)
    when it cannot be."""
    problem = helion_source_problem(kernel)
    if problem:
        raise KernelError(problem)
    import cloudpickle

    registered = [m for m in _modules_of(kernel) if _travels_by_value(m) and m.__name__ not in ("__main__",)]
    for module in registered:
        cloudpickle.register_pickle_by_value(module)
    try:
        return _dumps(kernel)
    except Exception as error:  # noqa: BLE001 - find which hook, for the one line
        raise KernelError(_which_part_fails(kernel, error)) from None
    finally:
        for module in registered:
            cloudpickle.unregister_pickle_by_value(module)


def check_sendable(kernel: Kernel, *, measuring_elsewhere: bool) -> None:
    """Refuse, before anything starts, a kernel that cannot be bound (Helion cannot read its
    source) or, when other processes measure it, cannot be sent there (one line)."""
    problem = helion_source_problem(kernel)
    if problem:
        raise KernelError(problem)
    if measuring_elsewhere:
        wire_form(kernel)


def wire_form(kernel: Kernel) -> str | bytes:
    """What a measuring process is sent: a built-in kernel's name (found in its registry), else
    the kernel itself."""
    default_plan = kernel.reference_plan in (None, ("hook",), ("body", "float64"), ("default config",))
    if kernel.locator and ":" not in kernel.locator and not kernel.overrides and default_plan:
        return kernel.locator
    return to_wire(kernel)


def from_wire(payload: bytes) -> Kernel:
    """The kernel `to_wire` sent, its Helion kernel bound to a real module's namespace."""
    kernel = pickle.loads(payload)
    if not isinstance(kernel, Kernel):
        raise KernelError(f"the payload holds a {type(kernel).__name__}, not an autotune.Kernel")
    return kernel


# -- sending ---------------------------------------------------------------------------------
def _dumps(obj: Any) -> bytes:
    import io

    import cloudpickle

    class _Pickler(cloudpickle.Pickler):
        def reducer_override(self, value: Any) -> Any:  # a Helion kernel: its recipe, not its caches
            if is_helion_kernel(value):
                return _rebuild_helion, (value.fn, value.settings, list(value.configs),
                                         getattr(value, "_key_fn", None), _source_lines(value.fn))
            if type(value).__name__ == "JITFunction" and type(value).__module__.startswith("triton."):
                options = {name: getattr(value, attribute, None) for name, attribute in _JIT_OPTIONS}
                return _rebuild_jit, (value.fn, options, _source_lines(value.fn))
            return super().reducer_override(value)

    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


def _source_lines(fn: Any) -> tuple[str, list[str]]:
    filename = fn.__code__.co_filename
    return filename, list(linecache.getlines(filename, getattr(sys.modules.get(fn.__module__), "__dict__", None)))


def _modules_of(kernel: Kernel) -> list[types.ModuleType]:
    """The modules the kernel and its hooks were defined in."""
    objects = [kernel.fn, *kernel.source_objects, *_hooks(kernel).values()]
    found = []
    for obj in objects:
        target = getattr(obj, "__wrapped__", obj)
        target = getattr(target, "fn", target)
        module = sys.modules.get(getattr(target, "__module__", None) or "")
        if module is not None and module not in found:
            found.append(module)
    return found


def _hooks(kernel: Kernel) -> dict[str, Any]:
    """Each hook the user gave, by the name the one-line errors use."""
    hooks: dict[str, Any] = {}
    if kernel.inputs_given:
        hooks["inputs"] = getattr(kernel.make_inputs, "__wrapped__", kernel.make_inputs)
    if kernel.reference is not None:
        hooks["reference"] = getattr(kernel.reference, "__wrapped__", kernel.reference)
    for label, hook in kernel.baselines.items():
        hooks[f"baselines[{label!r}]"] = getattr(hook, "__wrapped__", hook)
    for name in ("bytes_moved", "flops"):
        if getattr(kernel, name) is not None:
            hooks[name] = getattr(kernel, name)
    if getattr(kernel, "shape_of_given", False):
        hooks["shape_of"] = kernel.shape_of
    return hooks


def _which_part_fails(kernel: Kernel, error: BaseException) -> str:
    for name, hook in _hooks(kernel).items():
        try:
            _dumps(hook)
        except Exception as hook_error:  # noqa: BLE001
            return (f"{kernel.name}'s {name} hook cannot be sent to the measuring processes "
                    f"({_reason(hook_error)}): make it a function that captures only picklable values")
    return f"{kernel.name} cannot be sent to the measuring processes ({_reason(error)})"


def _reason(error: BaseException) -> str:
    return " ".join(f"{type(error).__name__}: {error}".split())[:200]


# -- arriving --------------------------------------------------------------------------------
def _rebuild_helion(fn: types.FunctionType, settings: Any, configs: list[Any], key: Any,
                    source: tuple[str, list[str]]) -> Any:
    """The Helion kernel again, its function's globals a registered module's namespace."""
    from helion.runtime.kernel import Kernel as HelionKernel

    fn = _restored(fn, source)
    home = _importable_home(fn.__module__)
    if home is None:
        fn = _in_module_of_its_own(fn)
    elif home.__dict__ is not fn.__globals__:
        fn = _rebound(fn, home)
    return HelionKernel(fn, configs=configs, settings=settings, key=key)


_JIT_OPTIONS = (("do_not_specialize", "do_not_specialize"),
                ("do_not_specialize_on_alignment", "do_not_specialize_on_alignment"),
                ("debug", "debug"), ("noinline", "noinline"), ("repr", "_repr"),
                ("launch_metadata", "launch_metadata"))


def _rebuild_jit(fn: types.FunctionType, options: dict[str, Any], source: tuple[str, list[str]]) -> Any:
    """A `@triton.jit` function again (Triton reads its source, as Helion does)."""
    import triton

    fn = _restored(fn, source)
    return triton.jit(fn, **{name: value for name, value in options.items() if value is not None})


def _restored(fn: types.FunctionType, source: tuple[str, list[str]]) -> types.FunctionType:
    """`fn` with the file name and source lines it had where it was sent from."""
    filename, lines = source
    if lines and not _same_lines_on_disk(filename, lines):
        linecache.cache[filename] = (sum(map(len, lines)), None, lines, filename)  # mtime None: kept
    if fn.__code__.co_filename != filename:  # cloudpickle sends code by value without its file name
        fn.__code__ = _with_filename(fn.__code__, filename)
    return fn


def _with_filename(code: types.CodeType, filename: str) -> types.CodeType:
    consts = tuple(_with_filename(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _importable_home(name: str) -> types.ModuleType | None:
    """The module `name` in this process, when it is the same module as the sender's."""
    if name in ("__main__", "__mp_main__") or name.startswith((_FILE_MODULE_PREFIX, _WIRE_PREFIX)):
        return sys.modules.get(name) if name.startswith(_WIRE_PREFIX) else None
    try:
        import importlib

        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - not importable here: the function keeps what it travelled with
        return None


def _same_lines_on_disk(filename: str, lines: list[str]) -> bool:
    try:
        with open(filename, encoding="utf-8") as handle:
            return handle.read() == "".join(lines)
    except OSError:
        return False


_MADE: dict[int, tuple[dict, types.ModuleType]] = {}  # id(travelled globals) -> (them, their module)


def _in_module_of_its_own(fn: types.FunctionType) -> types.FunctionType:
    """`fn` rebound to a fresh module holding the globals it travelled with (and every other
    function sharing those globals rebound there too, so Helion finds them in one module).
    Functions that shared globals on the way share one module here."""
    old = fn.__globals__
    made = _MADE.get(id(old))
    if made is not None and made[0] is old:
        return _rebound(fn, made[1])
    digest = hashlib.sha256(f"{fn.__code__.co_filename}:{len(_MADE)}".encode()).hexdigest()[:10]
    name = f"{_WIRE_PREFIX}{digest}"
    module = types.ModuleType(name)
    module.__dict__.update({k: v for k, v in old.items() if k not in ("__name__", "__spec__", "__loader__")})
    module.__file__ = fn.__code__.co_filename
    sys.modules[name] = module
    _MADE[id(old)] = (old, module)
    for key, value in list(module.__dict__.items()):
        if isinstance(value, types.FunctionType) and value.__globals__ is old:
            module.__dict__[key] = _rebound(value, module)
    return _rebound(fn, module)


def _rebound(f: types.FunctionType, module: types.ModuleType) -> types.FunctionType:
    """A copy of `f` whose globals are `module`'s namespace."""
    new = types.FunctionType(f.__code__, module.__dict__, f.__name__, f.__defaults__, f.__closure__)
    new.__kwdefaults__, new.__qualname__, new.__module__ = f.__kwdefaults__, f.__qualname__, module.__name__
    new.__annotations__, new.__doc__ = dict(f.__annotations__), f.__doc__
    new.__dict__.update(f.__dict__)
    return new
