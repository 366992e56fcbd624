"""The suite: twelve of Helion's example kernels, each at realistic GPU shapes and a small CPU shape.

Why a manifest: the GPU runner, the interpreter check and the tests read one list, so a kernel
or a shape is added in one place.  Each entry names the example file (in the user's checkout of
Helion's `examples/`), the `@helion.kernel` in it, the problem shape's dimensions (what `--shape`
means for it, which `hooks.INPUTS[name]` turns into the kernel's arguments) and its shapes: GPU
shapes are those of Helion's own `main()` checks or typical transformer sizes; the CPU shape is
small enough for the Triton interpreter to run a config in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SuiteKernel:
    name: str  # the suite's name, also the hooks' key
    file: str  # the example file, relative to the examples folder
    function: str  # the @helion.kernel in it
    dims: str  # what the shape's dimensions are, e.g. "M x N"
    gpu: tuple[tuple[tuple[int, ...], str], ...]  # (shape, dtype) measured on a GPU
    cpu: tuple[int, ...]  # the interpreter check's shape (float32)

    @property
    def rank(self) -> int:
        return len(self.cpu)


def _k(name: str, file: str, function: str, dims: str, gpu: list, cpu: tuple[int, ...]) -> SuiteKernel:
    return SuiteKernel(name, file, function, dims, tuple((tuple(s), d) for s, d in gpu), cpu)


KERNELS: tuple[SuiteKernel, ...] = (
    _k("attention", "attention.py", "attention", "batch x heads x seq x head_dim",
       [((2, 32, 1024, 64), "float16"), ((4, 16, 2048, 128), "bfloat16")], (1, 2, 16, 16)),
    _k("cross_entropy", "cross_entropy.py", "cross_entropy", "tokens x vocab",
       [((4096, 32000), "float32"), ((8192, 128256), "bfloat16")], (8, 64)),
    _k("embedding", "embedding.py", "embedding", "tokens x vocab x dim",
       [((8192, 32000, 4096), "float16"), ((16384, 128256, 2048), "bfloat16")], (16, 32, 16)),
    _k("geglu", "geglu.py", "_geglu", "rows x cols",
       [((16384, 4096), "float16"), ((32768, 8192), "bfloat16")], (8, 64)),
    _k("jsd", "jsd.py", "jsd_forward", "tokens x vocab",
       [((8192, 65536), "float32"), ((4096, 128256), "float32")], (8, 64)),
    _k("kl_div", "kl_div.py", "kl_div_forward", "tokens x vocab",
       [((4096, 65536), "float32"), ((4096, 131072), "float32")], (8, 64)),
    _k("layer_norm", "layer_norm.py", "layer_norm_fwd", "rows x cols",
       [((4096, 10240), "float16"), ((16384, 4096), "bfloat16")], (8, 64)),
    _k("rms_norm", "rms_norm.py", "rms_norm_fwd", "rows x cols",
       [((4096, 8192), "float16"), ((16384, 4096), "bfloat16")], (8, 64)),
    _k("rope", "rope.py", "rope_fwd", "batch x q_heads x k_heads x seq x head_dim",
       [((8, 32, 8, 2048, 128), "float16"), ((4, 32, 32, 4096, 64), "bfloat16")], (1, 2, 1, 8, 16)),
    _k("softmax", "softmax.py", "softmax", "rows x cols",
       [((4096, 32000), "float16"), ((8192, 8192), "bfloat16")], (8, 64)),
    _k("swiglu", "swiglu.py", "_swiglu_fwd", "rows x cols",
       [((32768, 4096), "float16"), ((16384, 11008), "bfloat16")], (8, 64)),
    _k("welford", "welford.py", "welford", "rows x cols",
       [((262144, 1024), "float32"), ((262144, 2048), "float32")], (8, 64)),
)

BY_NAME = {kernel.name: kernel for kernel in KERNELS}


def select(names: str | None) -> tuple[SuiteKernel, ...]:
    """The kernels a comma-separated list names (all when None); ValueError names an unknown one."""
    if not names:
        return KERNELS
    chosen = []
    for name in (n.strip() for n in names.split(",") if n.strip()):
        if name not in BY_NAME:
            raise ValueError(f"no suite kernel {name!r} (known: {', '.join(BY_NAME)})")
        chosen.append(BY_NAME[name])
    return tuple(chosen)
