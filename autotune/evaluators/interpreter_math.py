"""libdevice math for the Triton interpreter.

Why: Helion's generated code (through Inductor's Triton lowering) calls `libdevice.rsqrt`,
`libdevice.tanh`, `libdevice.erf`, ... from `triton.language.extra.libdevice`.  On a GPU those
stubs are resolved by the compiler to the backend's device library; the Triton interpreter does
not resolve them, so each call runs the stub's empty body, returns None, and every config of
such a kernel failed with `AttributeError("'NoneType' object has no attribute 'dtype'")`.

`installed()` puts interpreter implementations in place of the stubs, the way the interpreter
implements its own builtins: a function of the `tl.math` builtins is delegated to that builtin
with the interpreter's semantic (`tl.math.rsqrt(x, _semantic=interpreter_semantic)`, which
computes with numpy), and the others compute with numpy on the tensor's data (with torch for
the special functions numpy lacks: erfinv, lgamma).  Values are those of the operation in the
argument's dtype, checked against torch in the tests.  Only for interpreter processes: the
stubs must stay in place wherever Triton compiles for a GPU, hence a context manager.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import numpy as np

# libdevice names that are tl.math builtins: the interpreter already implements them.
_MATH_BUILTINS = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "cos": "cos", "sin": "sin",
                  "sqrt": "sqrt_rn", "rsqrt": "rsqrt", "erf": "erf", "floor": "floor", "ceil": "ceil",
                  "abs": "abs", "fabs": "abs", "fma": "fma"}


def _torch_unary(name: str) -> Callable[[np.ndarray], np.ndarray]:
    def apply(data: np.ndarray) -> np.ndarray:
        import torch

        return getattr(torch.special, name)(torch.from_numpy(np.ascontiguousarray(data))).numpy()

    return apply


def _nearbyint(data: np.ndarray) -> np.ndarray:
    return np.rint(data)  # round half to even, as CUDA's nearbyint in the default rounding mode


_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "tanh": np.tanh, "fast_tanhf": np.tanh, "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh, "acosh": np.arccosh,
    "atanh": np.arctanh, "log10": np.log10, "log1p": np.log1p, "expm1": np.expm1, "trunc": np.trunc,
    "nearbyint": _nearbyint, "rint": _nearbyint, "round": np.round, "erfc": _torch_unary("erfc"),
    "erfinv": _torch_unary("erfinv"), "lgamma": _torch_unary("gammaln"), "exp10": lambda d: np.power(10, d),
    "rcp_rn": np.reciprocal,
}
_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "pow": np.power, "fmod": np.fmod, "atan2": np.arctan2, "hypot": np.hypot, "copysign": np.copysign,
    "nextafter": np.nextafter, "fmin": np.fmin, "fmax": np.fmax, "div_rn": np.divide,
    "ldexp": lambda x, e: np.ldexp(x, e.astype(np.int32)),
}
_PREDICATES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "isnan": np.isnan, "isinf": np.isinf, "signbit": np.signbit, "isfinited": np.isfinite,
}


def _semantic() -> Any:
    from triton.runtime.interpreter import interpreter_semantic

    return interpreter_semantic


def _tensor(value: Any) -> Any:
    """A value a kernel passed (tensor, constexpr or Python number) as an interpreter tensor."""
    import triton.language as tl

    if isinstance(value, tl.constexpr):
        value = value.value
    return value if isinstance(value, tl.tensor) else _semantic().to_tensor(value)


def _wrap(data: np.ndarray, scalar: Any) -> Any:
    """numpy data as an interpreter tensor of element type `scalar` (a block if it has a shape)."""
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle, _get_np_dtype

    data = np.asarray(data).astype(_get_np_dtype(scalar), copy=False)
    shape = data.shape
    kind = tl.block_type(scalar, list(shape)) if shape and shape != (1,) else scalar
    return tl.tensor(TensorHandle(data, scalar), kind)


def _result_scalar(tensors: list[Any]) -> Any:
    """The element type of a result: the first floating argument's (as libdevice overloads pick)."""
    for t in tensors:
        if t.dtype.scalar.is_floating():
            return t.dtype.scalar
    return tensors[0].dtype.scalar


def _unary(op: Callable[[np.ndarray], np.ndarray]) -> Callable[..., Any]:
    def function(arg0: Any, _semantic: Any = None, **_: Any) -> Any:
        x = _tensor(arg0)
        with np.errstate(all="ignore"):  # inf and nan are values here, as on the GPU
            return _wrap(op(x.handle.data), x.dtype.scalar)

    return function


def _binary(op: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., Any]:
    def function(arg0: Any, arg1: Any, _semantic: Any = None, **_: Any) -> Any:
        from triton.runtime.interpreter import _get_np_dtype

        x, y = _tensor(arg0), _tensor(arg1)
        scalar = _result_scalar([x, y])
        kind = _get_np_dtype(scalar)
        a, b = np.broadcast_arrays(x.handle.data, y.handle.data)
        with np.errstate(all="ignore"):
            result = op(a.astype(kind, copy=False), b.astype(kind, copy=False))
        return _wrap(result, scalar)

    return function


def _predicate(op: Callable[[np.ndarray], np.ndarray]) -> Callable[..., Any]:
    def function(arg0: Any, _semantic: Any = None, **_: Any) -> Any:
        import triton.language as tl

        return _wrap(op(_tensor(arg0).handle.data), tl.int1)

    return function


def _llrint(arg0: Any, _semantic: Any = None, **_: Any) -> Any:
    import triton.language as tl

    return _wrap(np.rint(_tensor(arg0).handle.data).astype(np.int64), tl.int64)


def _builtin(name: str) -> Callable[..., Any]:
    import triton.language as tl

    builtin = getattr(tl.math, name)

    def function(*args: Any, _semantic: Any = None, **kwargs: Any) -> Any:
        return builtin(*(_tensor(a) for a in args), _semantic=_semantic_or_default(_semantic), **kwargs)

    return function


def _semantic_or_default(semantic: Any) -> Any:
    return semantic if semantic is not None else _semantic()


def implementations() -> dict[str, Callable[..., Any]]:
    """Interpreter implementations by libdevice name."""
    table: dict[str, Callable[..., Any]] = {}
    table.update({name: _unary(op) for name, op in _UNARY.items()})
    table.update({name: _binary(op) for name, op in _BINARY.items()})
    table.update({name: _predicate(op) for name, op in _PREDICATES.items()})
    table["llrint"] = _llrint
    table.update({name: _builtin(target) for name, target in _MATH_BUILTINS.items()})
    return table


def _libdevice_modules() -> list[Any]:
    """Every module Helion's generated code may take `libdevice` from (all the same stubs)."""
    import importlib

    modules = []
    for path in ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice"):
        try:
            module = importlib.import_module(path)
        except ImportError:
            continue
        if module not in modules:
            modules.append(module)
    return modules


@contextlib.contextmanager
def installed() -> Iterator[list[str]]:
    """libdevice's stubs replaced by interpreter implementations while inside; restored after.
    Yields the names installed."""
    changes: list[tuple[Any, str, Any]] = []
    table = implementations()
    try:
        for module in _libdevice_modules():
            for name, function in table.items():
                if hasattr(module, name):
                    changes.append((module, name, getattr(module, name)))
                    setattr(module, name, function)
        yield sorted({name for _, name, _ in changes})
    finally:
        for module, name, original in reversed(changes):
            setattr(module, name, original)
