"""How wide are a softmax kernel's global loads and stores at a shape?  Compiled for an
H100 (sm_90) on any machine, no GPU needed.

Why: at [1024, 50257] every softmax of this project but one stayed under torch.softmax,
whatever its config.  Rows of 50257 fp16 values start at a different 16-byte phase each,
and code that indexes them as `row * 50257 + column` cannot be given 16-byte loads.  This
script shows it for any built-in softmax and config: it runs the kernel's launch (a Triton
kernel) or Helion's generated host code (a Helion kernel) with the launch intercepted, and
compiles what would have been launched with the specialisations a real launch makes
(tensors on 16-byte boundaries, integers divisible by 16 marked so, integers equal to 1
folded), then counts the PTX's global loads and stores by bytes per instruction.

    python -m experiments.load_widths --shape 1024x50257 --dtype float16
    python -m experiments.load_widths --kernels softmax --shape 4096x32000 --config '{"num_warps": 8}'
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Iterator, Sequence

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

KERNELS = ("softmax", "softmax-online", "softmax-triton", "softmax-split", "softmax-persistent")
H100 = {"capability": 90, "warp_size": 32, "sms": 132}
POINTER_TYPES = {"float16": "*fp16", "bfloat16": "*bf16", "float32": "*fp32", "int32": "*i32", "int64": "*i64"}
_MEMORY_OP = re.compile(r"\b(ld|st)\.global(?:\.[\w:]+)*?(?:\.v(\d))?\.b(\d+)\b")


class Launch:
    """One intercepted launch: the jit function and what it was called with."""

    def __init__(self, fn: Any, args: Sequence[Any], options: dict[str, Any]) -> None:
        self.fn, self.args, self.options = fn, list(args), dict(options)


def _signature(launch: Launch) -> tuple[dict[str, str], dict[str, Any], dict[tuple[int, ...], list]]:
    """Triton's signature, constexprs and divisibility attributes for the intercepted call."""
    import torch

    fn = launch.fn
    values = dict(zip(fn.arg_names, launch.args))
    values.update({k: v for k, v in launch.options.items() if k in fn.arg_names})
    signature, constexprs, attrs = {}, {}, {}
    for index, name in enumerate(fn.arg_names):
        value = values.get(name)
        if fn.params[index].is_constexpr or value is None or (isinstance(value, int) and value == 1):
            signature[name], constexprs[name] = "constexpr", value
        elif isinstance(value, torch.Tensor):
            signature[name] = POINTER_TYPES[str(value.dtype).removeprefix("torch.")]
            if value.data_ptr() % 16 == 0:
                attrs[(index,)] = [["tt.divisibility", 16]]
        elif isinstance(value, bool):
            signature[name] = "i1"
        elif isinstance(value, int):
            signature[name] = "i32" if -2**31 <= value < 2**31 else "i64"
            if value % 16 == 0:
                attrs[(index,)] = [["tt.divisibility", 16]]
        elif isinstance(value, float):
            signature[name] = "fp32"
        else:
            raise TypeError(f"{fn.__name__}: cannot type argument {name}={value!r}")
    return signature, constexprs, attrs


def sm90_ptx(launch: Launch) -> str:
    """The sm_90 PTX of the intercepted launch, compiled on this machine (no GPU needed)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature, constexprs, attrs = _signature(launch)
    source = ASTSource(fn=launch.fn, signature=signature, constexprs=constexprs, attrs=attrs)
    options = {k: int(launch.options[k]) for k in ("num_warps", "num_stages") if k in launch.options}
    compiled = triton.compile(source, target=GPUTarget("cuda", H100["capability"], H100["warp_size"]),
                              options=options)
    return compiled.asm["ptx"]


def memory_ops(launch: Launch) -> Counter:
    """(kind, bytes per instruction) -> count in the sm_90 PTX of the intercepted launch."""
    counts: Counter = Counter()
    for kind, vector, bits in _MEMORY_OP.findall(sm90_ptx(launch)):
        counts[("load" if kind == "ld" else "store", int(vector or 1) * int(bits) // 8)] += 1
    return counts


@contextlib.contextmanager
def _sm_count_of_an_h100() -> Iterator[None]:
    """Helion's host code asks the tensor's device for its SM count, which a CPU has not."""
    import helion.runtime

    original = helion.runtime.get_num_sm
    helion.runtime.get_num_sm = lambda *args, **kwargs: H100["sms"]
    try:
        yield
    finally:
        helion.runtime.get_num_sm = original


@functools.lru_cache(maxsize=1)
def _generated_folder() -> Any:
    """Where Helion's generated modules are written; removed when the interpreter exits."""
    import tempfile

    return tempfile.TemporaryDirectory(prefix="load-widths-")


def _import_source(code: str, name: str) -> Any:
    """Import Helion's generated module from a file (Triton reads a jit function's source)."""
    import importlib.util

    path = Path(_generated_folder().name) / f"{name}.py"
    path.write_text(code)
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def intercept(spec: Any, native: dict[str, Any], inputs: tuple) -> list[Launch]:
    """The launches one call of `spec` with config `native` makes, none of them run."""
    launches: list[Launch] = []
    if spec.family == "helion":
        import helion

        code = spec.helion_kernel.bind(inputs).to_triton_code(helion.Config(**native))
        host = getattr(_import_source(code, f"generated_{spec.name.replace('-', '_')}"), spec.helion_kernel.fn.__name__)

        def launcher(fn: Any, grid: Any, *args: Any, **options: Any) -> None:
            launches.append(Launch(fn, args, options))

        with _sm_count_of_an_h100():
            host(*inputs, _launcher=launcher)
        return launches
    module = sys.modules[spec.triton_launch.__module__]
    kernels = {name: value for name, value in vars(module).items() if type(value).__name__ == "JITFunction"}

    class Recorder:
        def __init__(self, fn: Any) -> None:
            self.fn = fn

        def __getitem__(self, grid: Any):
            return lambda *args, **options: launches.append(Launch(self.fn, args, options))

    saved = dict(kernels)
    try:
        for name, fn in kernels.items():
            setattr(module, name, Recorder(fn))
        spec.triton_launch(native, *inputs)
    finally:
        for name, fn in saved.items():
            setattr(module, name, fn)
    return launches


# Launch options of a GPU binding that Helion's CPU binding refuses.  Harmless here: a
# tensor descriptor needs 16-byte aligned strides, which the rows this script is for have not.
GPU_ONLY_OPTIONS = ("host_tensor_descriptors",)


def chosen_config(task: Any, db: Path, given: str | None) -> tuple[dict[str, Any], str]:
    """The config to inspect: `--config` (partial, over the default), else the fastest recorded
    for this kernel's present source at this shape in `db` (as recorded: a GPU binding's Helion
    space is wider than a CPU's), else the default."""
    if given:
        return task.candidate_from_native({**task.default_candidate().native, **json.loads(given)}).native, "--config"
    from autotune.databases import open_for_reading

    best = []
    if db.exists():
        cache = open_for_reading(db)
        try:
            for record in cache.find_spaces(task.spec.name, task.shape, task.dtype):
                if record.source_hash != task.identity.source_hash:
                    continue  # measured on an earlier version of the kernel
                found = cache.best(record.fingerprint)
                if found is not None:
                    best.append(found)
        finally:
            cache.close()
    if not best:
        return task.default_candidate().native, "default"
    candidate, result = min(best, key=lambda pair: pair[1].median_ms)
    native = dict(candidate.native)
    dropped = [key for key in GPU_ONLY_OPTIONS if native.pop(key, None) is not None]
    origin = f"fastest recorded ({result.median_ms * 1e3:.1f} us)"
    return native, origin + (f", {', '.join(dropped)} dropped" if dropped else "")


def summary(counts: Counter) -> str:
    parts = [f"{kind}s {', '.join(f'{n}x{size} B' for (k, size), n in sorted(counts.items()) if k == kind)}"
             for kind in ("load", "store")]
    return "; ".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.load_widths", description=__doc__.split("\n")[0])
    parser.add_argument("--kernels", default=",".join(KERNELS), help="comma-separated built-in softmax kernels")
    parser.add_argument("--shape", default="1024x50257")
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--config", help="a JSON config (partial is fine) instead of the fastest recorded one")
    parser.add_argument("--db", type=Path, default=REPO / "data" / "shipped.db")
    args = parser.parse_args(argv)
    from autotune.kernels import UnknownKernel, get_kernel, parse_dtype, parse_shape
    from autotune.task import bind_live

    rows = []
    for name in [k.strip() for k in args.kernels.split(",") if k.strip()]:
        try:
            spec = get_kernel(name)
            shape, dtype = parse_shape(args.shape, spec.rank), parse_dtype(args.dtype, spec.dtypes)
        except (UnknownKernel, ValueError) as error:
            print(f"load_widths: {error}", file=sys.stderr)
            return 2
        task = bind_live(spec, shape, dtype, "cpu")
        native, origin = chosen_config(task, args.db, args.config)
        inputs = spec.make_inputs(shape, dtype, "cpu", 0)
        counts: Counter = Counter()
        for launch in intercept(spec, native, inputs):
            counts += memory_ops(launch)
        widest = max((size for (kind, size) in counts if kind == "load"), default=0)
        rows.append(f"| {name} | {origin} | {widest} | {summary(counts)} |")
    print(f"Global memory instructions in the code compiled for sm_90: {args.shape} {args.dtype}\n")
    print("| kernel | config | widest load (bytes) | loads and stores in the code (count x bytes each) |")
    print("|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
