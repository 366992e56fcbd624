"""What the experiment tunes: each example kernel, its shapes, and which shapes are held out.

Row kernels: configs are tuned at every shape; the run-time rules are then given only the
`fit` shapes and judged at the `held_out` ones (each held-out shape's own tuned best is the
yardstick).  The held-out shapes were chosen before anything was measured on them.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Part:
    locator: str
    dtype: str
    fit: tuple[tuple[int, ...], ...]
    held_out: tuple[tuple[int, ...], ...] = ()
    seconds: float = 25.0  # search time per shape
    strategy: str = "evolution"
    configs: tuple[dict, ...] = ()  # the user's own configs, evaluated first (point form)
    compile_workers: int | None = None


def _attention_configs() -> tuple[dict, ...]:
    """Tiles a flash attention author would try first on a Hopper GPU (queries x keys per program)."""
    configs = []
    for rows, cols, warps, stages, indexing in ((128, 64, 8, 3, "tensor_descriptor"), (128, 128, 8, 2, "tensor_descriptor"),
                                                (128, 64, 4, 3, "tensor_descriptor"), (64, 64, 4, 3, "pointer"),
                                                (128, 64, 8, 2, "pointer"), (64, 128, 4, 2, "tensor_descriptor")):
        config = {"block_sizes[0]": 1, "block_sizes[1]": rows, "block_sizes[2]": cols, "num_warps": warps,
                  "num_stages": stages}
        config.update({f"indexing[{i}]": indexing for i in range(4)})
        configs.append(config)
    return tuple(configs)


PARTS = {
    "rms_norm": Part("examples/rms_norm.py:kernel", "float16",
                     fit=((2048, 4096), (8192, 8192), (4096, 16384)),
                     held_out=((4096, 8192), (16384, 2048), (1024, 32768))),
    "cross_entropy": Part("examples/cross_entropy.py:kernel", "bfloat16",
                          fit=((2048, 32000), (4096, 128256), (8192, 50257)),
                          held_out=((4096, 50257), (2048, 151936), (16384, 32000))),
    "layer_norm": Part("examples/layer_norm.py:kernel", "float16",
                       fit=((2048, 4096), (8192, 8192), (4096, 16384)),
                       held_out=((4096, 8192), (16384, 2048), (1024, 32768))),
    "attention": Part("examples/attention.py:kernel", "float16", fit=((16, 96, 4096, 64), (16, 96, 4096, 128)),
                      seconds=150.0, configs=_attention_configs(), compile_workers=6),
}
