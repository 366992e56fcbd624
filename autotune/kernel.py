"""`Kernel`: the one object the API, the CLI, the evaluators, the seeds and the store take.

A kernel is a `@helion.kernel`, or a Triton launcher `launch(config, *inputs)` given with its
declared space.  Everything else is optional, with defaults that work for the common case:

* `inputs(shape, dtype, device)`: the inputs for a problem shape.  Default: one random tensor
  of `shape` for every tensor parameter (parameters with a default value keep it).  Measuring
  processes rebuild the inputs from the shape, so a measurement can be repeated and replayed.
* `reference(*inputs)`: the trusted output, called with the inputs cast to float64.  Default for
  a Helion kernel: the kernel's own body run eagerly by PyTorch (Helion's eager reference mode),
  in float64; it checks that a compiled config computes what the code says.  A body that
  cannot run in float64 is run in float32, else the baseline named by `reference_baseline=`
  (autotune/reference_choice.py); the session says which.  A Triton launcher
  has no eager body: by default every config is checked against the declared default config's
  output, which catches configs that disagree with each other but not a wrong kernel.
* `baselines`: named library implementations timed beside the kernel (`fn(*inputs)`), each
  checked against the reference on the outputs it returns (`Baseline(fn, outputs=(0,))` names them).
* `bytes_moved(shape, dtype)`, `flops(shape, dtype)`: for GB/s and TFLOP/s, shown when known.
* `shape_of(*args)`: the problem shape of a call (default: the first tensor's shape), which is
  what run-time config selection keys on.

Built-in kernels are made with this same constructor and registered by name.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping, Sequence

from autotune.errors import UserError

Shape = tuple[int, ...]
Inputs = tuple[Any, ...]

DTYPE_NAMES = ("float16", "bfloat16", "float32")


class KernelError(UserError, ValueError):
    """A kernel or one of its hooks cannot do what was asked (one line, for the user)."""


def is_helion_kernel(obj: Any) -> bool:
    """Whether `obj` is a `@helion.kernel` (checked without importing helion where it is absent)."""
    cls = type(obj)
    return cls.__name__ == "Kernel" and cls.__module__.startswith("helion.")


class Baseline:
    """A baseline and which of the kernel's outputs it computes.

    >>> baselines={"torch": autotune.Baseline(torch_rms_norm, outputs=(0,))}

    A plain callable in `baselines=` is compared with the kernel's outputs by position (a tensor
    with output 0, a tuple of k with the first k); `outputs` names them instead, when a kernel
    returns more than the library computes (the output and its statistics, say)."""

    def __init__(self, fn: Callable[..., Any], outputs: Sequence[int] | None = None) -> None:
        if not callable(fn):
            raise KernelError(f"autotune.Baseline takes a function, not {type(fn).__name__}")
        if outputs is not None:
            outputs = tuple(outputs)
            if not outputs or not all(isinstance(i, int) and i >= 0 for i in outputs) \
                    or len(set(outputs)) != len(outputs):
                raise KernelError(f"autotune.Baseline outputs={outputs!r}: give distinct output indices (0, 1, ...)")
        self.fn, self.outputs = fn, outputs

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)


def _baseline_hooks(baselines: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, tuple[int, ...] | None]]:
    """(each baseline as the evaluators call it, the kernel outputs each is compared on or None)."""
    hooks, outputs = {}, {}
    for label, hook in baselines.items():
        if not callable(hook):
            raise KernelError(f"baseline {label!r} is a {type(hook).__name__}, not a function or autotune.Baseline")
        plain = hook.fn if isinstance(hook, Baseline) else hook
        hooks[label] = _tupled(plain)
        outputs[label] = hook.outputs if isinstance(hook, Baseline) else None
    return hooks, outputs


class Kernel:
    """A kernel the framework can tune, measure, replay and serve configs for.

    >>> kernel = autotune.Kernel(rms_norm, inputs=make_inputs, baselines={"torch": torch_rms_norm})

    `fn` is a `@helion.kernel`, or a Triton launcher called as `fn(config, *inputs)` (config: a
    dict of meta-parameters, num_warps and num_stages), which then needs `space`: a
    `SearchSpace`, or `space(shape, dtype) -> SearchSpace`.  See the module docstring for the
    optional hooks.  Calling the Kernel calls `fn` (a Helion kernel with its own config choice).
    """

    def __init__(self, fn: Any, *, name: str | None = None, space: Any = None,
                 inputs: Callable[..., Inputs] | None = None, reference: Callable[..., Any] | None = None,
                 baselines: Mapping[str, Callable[..., Any]] | None = None,
                 bytes_moved: Callable[[Shape, Any], int] | None = None,
                 flops: Callable[[Shape, Any], int] | None = None,
                 shape_of: Callable[..., Shape] | None = None, dtypes: Sequence[str] = DTYPE_NAMES,
                 rank: int | None = None, description: str | None = None, sources: Sequence[Any] = (),
                 reference_baseline: str | None = None) -> None:
        if isinstance(fn, Kernel):
            raise KernelError(f"{fn.name} is already an autotune.Kernel")
        if is_helion_kernel(fn):
            self.family = "helion"
            self.helion_kernel, self.triton_launch, self.triton_space = fn, None, None
            python_fn = fn.fn
            if space is not None:
                raise KernelError("a Helion kernel's space is read from the kernel itself: do not give space=")
        elif callable(fn):
            if space is None:
                raise KernelError(f"{getattr(fn, '__name__', fn)!r} is not a @helion.kernel; a Triton launcher "
                                  "needs its declared space: autotune.Kernel(launch, space=...)")
            self.family = "triton"
            self.helion_kernel, self.triton_launch = None, fn
            self.triton_space = space if callable(space) else (lambda shape, dtype, _s=space: _s)
            python_fn = fn
        else:
            raise KernelError(f"{fn!r} is neither a @helion.kernel nor a Triton launcher")
        self.fn = fn
        self.name = name or python_fn.__name__
        self.description = description or (inspect.getdoc(python_fn) or "").split("\n")[0] or self.name
        self._signature = _parameters(python_fn, skip_first=self.family == "triton")
        self.make_inputs = _with_seed(inputs) if inputs is not None else self._default_inputs
        self.inputs_given = inputs is not None
        self.reference = _tupled(reference) if reference is not None else None
        self.baselines, self.baseline_outputs = _baseline_hooks(baselines or {})
        if reference_baseline is not None and reference_baseline not in self.baselines:
            raise KernelError(f"reference_baseline={reference_baseline!r} names no baseline (baselines: "
                              f"{', '.join(self.baselines) or 'none'})")
        self.reference_baseline = reference_baseline  # the last resort of autotune/reference_choice.py
        self.reference_plan: tuple[str, ...] | None = None  # which reference the session chose (and sends)
        self.bytes_moved = bytes_moved
        self.flops = flops
        self.shape_of = shape_of or _first_tensor_shape
        self.shape_of_given = shape_of is not None
        self.dtypes = tuple(dtypes)
        self.rank = rank
        self.source_objects = tuple(sources) or ((fn,) if self.family == "helion" else _launcher_sources(fn))
        self.locator: str | None = None  # how another process finds it: set by the loader or the registry
        self.overrides: dict[str, Any] = {}  # hooks given with with_hooks (sent to measuring processes)
        self._eager = None

    # -- what the evaluators call ---------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"autotune.Kernel({self.name!r}, {self.family}{', ' + self.locator if self.locator else ''})"

    def __getstate__(self) -> dict[str, Any]:
        """What travels to a measuring process (autotune/kernel_wire.py): not the eager kernel it rebuilds."""
        state = {**self.__dict__, "_eager": None}
        try:  # the copy fingerprints as the sender's does, whether or not its source files are at hand
            state["_sent_source"] = self.source_text()
        except (OSError, TypeError):
            pass
        return state

    def with_hooks(self, **hooks: Any) -> "Kernel":
        """A copy with some hooks replaced (reference=, baselines=, ...); it keeps the locator."""
        unknown = set(hooks) - {"reference", "baselines", "bytes_moved", "flops", "inputs", "shape_of"}
        if unknown:
            raise KernelError(f"unknown kernel hook(s): {', '.join(sorted(unknown))}")
        copy = object.__new__(Kernel)
        copy.__dict__.update(self.__dict__)
        copy.overrides = {**self.overrides, **{k: v for k, v in hooks.items() if v is not None}}
        copy.reference_plan = None  # chosen again for the new hooks
        for key, value in hooks.items():
            if value is None:
                continue
            if key == "inputs":
                copy.make_inputs, copy.inputs_given = _with_seed(value), True
            elif key == "baselines":
                copy.baselines, copy.baseline_outputs = _baseline_hooks(value)
            elif key == "reference":
                copy.reference = _tupled(value)
            else:
                setattr(copy, key, value)
        return copy

    def reference_output(self, inputs64: Inputs) -> Any:
        """The trusted output for float64 inputs; None for a Triton kernel without a reference
        (its configs are then checked against the default config's output)."""
        if getattr(self, "reference_plan", None) is not None:  # chosen by the session (reference_choice.py)
            from autotune.reference_choice import run_plan

            return run_plan(self, self.reference_plan, inputs64)
        if self.reference is not None:
            return self.reference(inputs64)
        if self.family == "helion":
            return self.eager_kernel()(*inputs64)
        return None

    def eager_kernel(self) -> Any:
        """The Helion kernel's body run eagerly by PyTorch (Helion's reference mode)."""
        if self._eager is None:
            import helion

            settings = self.helion_kernel.settings
            self._eager = helion.kernel(self.helion_kernel.fn, ref_mode=helion.RefMode.EAGER,
                                        static_shapes=settings.static_shapes)
        return self._eager

    def bytes_for(self, shape: Shape, dtype: Any) -> int | None:
        return int(self.bytes_moved(shape, dtype)) if self.bytes_moved is not None else None

    def flops_for(self, shape: Shape, dtype: Any = None) -> int | None:
        if self.flops is None:
            return None
        if len(_parameters(self.flops, skip_first=False)) == 1:  # flops(shape) alone
            return int(self.flops(shape))
        return int(self.flops(shape, dtype))

    def problem_shape(self, args: Sequence[Any]) -> Shape:
        """The problem shape a call's arguments stand for (what configs are looked up by)."""
        return tuple(int(d) for d in self.shape_of(*args))

    def compile_without_launch(self, native: Mapping[str, Any], inputs: Inputs, bound: Any = None) -> Any:
        """Compile every Triton kernel one call with `native` would launch, launching none:
        what a compile worker does while another process may be timing on the GPU.
        `bound` is the Helion kernel bound to `inputs` (bound here when not given).  Returns,
        for a Helion kernel, where the generated host function lives (a `GeneratedModule`,
        which the benchmark worker loads instead of generating the code again); else None."""
        from autotune.kernels import compile_only

        if self.family == "helion":
            return compile_only.compile_helion(bound or self.helion_kernel.bind(inputs), dict(native), inputs)
        with compile_only.triton_launches_compile_only():
            self.triton_launch(dict(native), *inputs)
        return None

    def source_text(self) -> str:
        """The text that fingerprints the kernel: a measurement is reused only for the same text."""
        if self.__dict__.get("_sent_source"):
            return self.__dict__["_sent_source"]
        parts = []
        for obj in self.source_objects:
            fn = getattr(obj, "fn", obj)  # helion.Kernel and triton.JITFunction keep the function in .fn
            parts.append(inspect.getsource(fn))
        return "\n".join(parts)

    def source_hash(self) -> str:
        """The hash of `source_text` that recorded spaces carry: which measurements are of this source."""
        from search_spaces.fingerprint import source_hash

        return source_hash(self.source_text())

    # -- defaults ---------------------------------------------------------------------------
    def default_input_names(self) -> list[str]:
        """The parameters the default inputs make a random tensor for (those before the first default)."""
        names = []
        for parameter in self._signature:
            if parameter.default is not inspect.Parameter.empty:
                break
            names.append(parameter.name)
        return names

    def _default_inputs(self, shape: Shape, dtype: Any, device: str, seed: int) -> Inputs:
        """One random tensor of `shape` for every tensor parameter without a default."""
        import torch

        generator = torch.Generator(device=device).manual_seed(seed)
        indexing = _index_parameters(self.helion_kernel.fn) if self.family == "helion" else []
        if indexing:
            raise KernelError(f"{self.name}'s parameter {indexing[0]!r} indexes another tensor, so it needs integer "
                              "indices in range, which the default inputs (one random float tensor of --shape per "
                              "tensor parameter) are not: give the kernel an inputs(shape, dtype, device) hook")
        tensors = []
        for parameter in self._signature:
            if parameter.default is not inspect.Parameter.empty:
                break
            if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                raise KernelError(f"{self.name} takes *{parameter.name}: its inputs cannot be guessed; "
                                  "give the kernel an inputs(shape, dtype, device) hook")
            if not _is_tensor_annotation(parameter.annotation):
                raise KernelError(f"{self.name}'s parameter {parameter.name!r} ({_annotation_text(parameter)}) is "
                                  "not a tensor and has no default, so the default inputs (one random tensor of "
                                  "--shape per tensor parameter) cannot build it: give the kernel an "
                                  "inputs(shape, dtype, device) hook")
            tensors.append(torch.randn(shape, generator=generator, dtype=torch.float32, device=device).to(dtype))
        if not tensors:
            raise KernelError(f"{self.name} takes no tensor: give the kernel an inputs(shape, dtype, device) hook")
        return tuple(tensors)


def _parameters(fn: Callable, *, skip_first: bool) -> list[inspect.Parameter]:
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []
    return parameters[1:] if skip_first else parameters


def _is_tensor_annotation(annotation: Any) -> bool:
    """A bare tensor (or no annotation): not a list or tuple of them, not a scalar."""
    if annotation is inspect.Parameter.empty:
        return True
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    return str(text).replace(" ", "") in ("Tensor", "torch.Tensor") or str(text).endswith(".Tensor")


def _index_parameters(fn: Callable) -> list[str]:
    """The parameters whose values index another tensor (`w[x[i]]`, `w[idx]`, also through a
    local made from them, `flat = x.reshape(-1)`): they need integer tensors in range."""
    import ast
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return []
    function = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if function is None:
        return []
    params = [a.arg for a in function.args.args]
    origin = {name: name for name in params}  # a local -> the parameter it was made from

    def root(node: ast.AST) -> str | None:  # None also for a size or shape (a number, not a tensor)
        while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
            if isinstance(node, ast.Attribute) and node.attr in ("size", "shape", "numel", "stride", "dim", "ndim"):
                return None
            node = node.func if isinstance(node, ast.Call) else node.value
        return origin.get(node.id) if isinstance(node, ast.Name) else None

    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            made_from = root(node.value)
            if made_from is not None:
                origin.setdefault(node.targets[0].id, made_from)
    found: list[str] = []
    for node in ast.walk(function):
        if not isinstance(node, ast.Subscript) or root(node.value) is None:
            continue
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        for part in parts:
            if isinstance(part, (ast.Name, ast.Subscript)):
                name = root(part)
                if name is not None and name != root(node.value) and name not in found:
                    found.append(name)
    return found


def _annotation_text(parameter: inspect.Parameter) -> str:
    annotation = parameter.annotation
    text = annotation if isinstance(annotation, str) else \
        annotation.__name__ if isinstance(annotation, type) else str(annotation)
    return f"annotated {text}"


def _with_seed(hook: Callable[..., Inputs]) -> Callable[[Shape, Any, str, int], Inputs]:
    """inputs(shape, dtype, device[, seed]) -> make_inputs(shape, dtype, device, seed): a hook
    without a seed parameter runs after torch's generators are seeded."""
    try:
        takes_seed = len(inspect.signature(hook).parameters) >= 4
    except (TypeError, ValueError):
        takes_seed = True

    def make_inputs(shape: Shape, dtype: Any, device: str, seed: int) -> Inputs:
        if takes_seed:
            made = hook(shape, dtype, device, seed)
        else:
            import torch

            torch.manual_seed(seed)
            made = hook(shape, dtype, device)
        return tuple(made) if isinstance(made, (tuple, list)) else (made,)

    make_inputs.__wrapped__ = hook  # type: ignore[attr-defined]
    return make_inputs


def _tupled(hook: Callable[..., Any]) -> Callable[[Inputs], Any]:
    """A hook written as `fn(x, w)` called as `fn(inputs)`: the form the evaluators use."""
    def call(inputs: Inputs) -> Any:
        return hook(*inputs)

    call.__wrapped__ = hook  # type: ignore[attr-defined]
    call.__name__ = getattr(hook, "__name__", "hook")
    return call


def _first_tensor_shape(*args: Any) -> Shape:
    for arg in args:
        if hasattr(arg, "shape") and hasattr(arg, "dtype"):
            return tuple(arg.shape)
    raise KernelError("the call has no tensor argument: give the kernel a shape_of(*args) hook")


def _launcher_sources(launch: Callable) -> tuple[Any, ...]:
    """A launcher and the @triton.jit functions it names: what fingerprints a Triton kernel."""
    sources: list[Any] = [launch]
    names = getattr(getattr(launch, "__code__", None), "co_names", ())
    for name in names:
        obj = getattr(launch, "__globals__", {}).get(name)
        if type(obj).__name__ == "JITFunction":
            sources.append(obj)
    return tuple(sources)
