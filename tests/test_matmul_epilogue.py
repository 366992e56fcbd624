"""The matmul-epilogue kernel family: registry entries, references, inputs, accounting, bound spaces.

The Helion kernels cannot run on a CPU; `test_kernels_match_reference_on_gpu` runs them where
a GPU is present (default config and the heuristic seed, against the fp64 reference).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from autotune.kernels import get_kernel
from autotune.kernels.matmul_epilogue import EPS
from autotune.task import bind_live

FAMILY = ["matmul-rmsnorm", "matmul-layernorm", "matmul-softmax", "matmul-l2norm", "matmul-logsumexp",
          "matmul-sum", "matmul-max"]
ROW_OUTPUT = {"matmul-logsumexp", "matmul-sum", "matmul-max"}  # [M] fp32 outputs

# The epilogues written independently with torch.nn.functional, applied to an fp64 product.
EXPECTED = {
    "matmul-rmsnorm": lambda y: F.rms_norm(y, (y.shape[-1],), eps=EPS),
    "matmul-layernorm": lambda y: F.layer_norm(y, (y.shape[-1],), eps=EPS),
    "matmul-softmax": lambda y: F.softmax(y, dim=-1),
    "matmul-l2norm": lambda y: F.normalize(y, dim=-1, eps=EPS),
    "matmul-logsumexp": lambda y: torch.logsumexp(y, dim=-1),
    "matmul-sum": lambda y: y.sum(dim=-1),
    "matmul-max": lambda y: y.max(dim=-1).values,
}


@pytest.mark.parametrize("name", FAMILY + ["matmul"])
def test_registered_with_baselines_and_rank_three(name):
    spec = get_kernel(name)
    assert spec.family == "helion" and spec.rank == 3
    assert set(spec.baselines) == {"torch", "torch.compile"}
    assert spec.helion_kernel is not None and spec.source_text()


@pytest.mark.parametrize("name", FAMILY)
def test_reference_is_the_epilogue_of_the_fp64_product(name):
    spec = get_kernel(name)
    x, w = spec.make_inputs((8, 16, 24), torch.float32, "cpu", 3)
    y = x.double() @ w.double()
    reference = spec.reference((x.double(), w.double()))
    assert reference.dtype == torch.float64
    assert reference.shape == ((8,) if name in ROW_OUTPUT else (8, 24))
    torch.testing.assert_close(reference, EXPECTED[name](y), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", FAMILY + ["matmul"])
def test_eager_baseline_agrees_with_the_reference(name):
    spec = get_kernel(name)
    inputs = spec.make_inputs((32, 64, 48), torch.float32, "cpu", 0)
    out = spec.baselines["torch"](inputs)
    reference = spec.reference(tuple(t.double() for t in inputs))
    assert out.dtype == (torch.float32 if name in ROW_OUTPUT or name == "matmul" else inputs[0].dtype)
    error = float(torch.linalg.vector_norm(out.double() - reference) / torch.linalg.vector_norm(reference))
    assert error < 1e-5


def test_inputs_have_the_shape_dtype_and_a_unit_scale_product():
    spec = get_kernel("matmul-sum")
    x, w = spec.make_inputs((256, 1024, 128), torch.float16, "cpu", 0)
    assert x.shape == (256, 1024) and w.shape == (1024, 128) and x.dtype == w.dtype == torch.float16
    std = float((x.float() @ w.float()).std())
    assert 0.8 < std < 1.2  # w ~ N(0, 1/K) keeps the product O(1) whatever K is
    again = spec.make_inputs((256, 1024, 128), torch.float16, "cpu", 0)
    assert torch.equal(again[0], x) and torch.equal(again[1], w)


@pytest.mark.parametrize("name,out_bytes", [("matmul-softmax", 2 * 64 * 96), ("matmul-sum", 4 * 64)])
def test_bytes_and_flops(name, out_bytes):
    spec = get_kernel(name)
    m, k, n = 64, 32, 96
    assert spec.bytes_moved((m, k, n), torch.float16) == 2 * (m * k + k * n) + out_bytes
    assert spec.flops((m, k, n)) >= 2 * m * k * n


@pytest.fixture(scope="module")
def bound_tasks():
    return {name: bind_live(get_kernel(name), (128, 64, 256), torch.float16, "cpu") for name in FAMILY + ["matmul"]}


def test_fused_kernels_keep_n_resident_and_tile_m_and_k(bound_tasks):
    for name in FAMILY:
        names = bound_tasks[name].space.names
        assert "block_sizes[0]" in names and "block_sizes[1]" in names, name
        assert "block_sizes[2]" not in names and not any(n.startswith("reduction_loops") for n in names), name
    plain = bound_tasks["matmul"].space.names
    assert "block_sizes[2]" in plain  # M, N and K all tiled


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the Helion kernels need a GPU to run")
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("name", FAMILY)
def test_kernels_match_reference_on_gpu(name, dtype):
    import helion

    from autotune.evaluators.timing import relative_error, tolerance_for
    from heuristics import seeds_for

    spec = get_kernel(name)
    shape = (512, 256, 1024)
    task = bind_live(spec, shape, dtype, "cuda")
    inputs = spec.make_inputs(shape, dtype, "cuda", 0)
    reference = spec.reference(tuple(t.double() for t in inputs))
    configs = [task.default_candidate().native] + [task.candidate(s.params).native for s in seeds_for(task)]
    assert len(configs) >= 2
    for native in configs:
        out = task.bound.compile_config(helion.Config.from_dict(dict(native)), allow_print=False)(*inputs)
        error = relative_error(out, reference)
        assert math.isfinite(error) and error <= tolerance_for(dtype), (native, error)
