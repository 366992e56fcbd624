"""Compiling without launching (autotune/kernels/compile_only.py), checked on the CPU.

Triton cannot compile here, so the launches are recorded instead of compiled: what matters
is that every launch asks for `warmup=True` (compile only) with exactly the arguments and
options, in the same order, that the real launch passes, since Triton's in-memory kernel
cache is keyed on them.  Under the interpreter, kernels really run, so there the check is
that an output buffer stays untouched.
"""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from triton.runtime.jit import JITFunction

from autotune.kernels.compile_only import compile_only_launcher, triton_launches_compile_only
from tests.conftest import run_report_script


class RecordingKernel:
    """Stands in for a JITFunction: records each `run` call."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple, bool, list[tuple[str, object]]]] = []

    def run(self, *args, grid, warmup, **kwargs):
        self.calls.append((args, warmup, list(kwargs.items())))
        return "compiled"


@pytest.mark.parametrize("options", [
    {},
    {"launch_cooperative_grid": True, "maxnreg": 128},
    {"ptx_options": "--apply-controls x.json", "waves_per_eu": 2},
    {"_remote_copy_process_group_name": None, "maxnreg": 64},  # launcher-only options are dropped, as there
])
def test_the_helion_launcher_compiles_with_the_real_launch_options_in_their_order(options):
    from helion.runtime.triton.launcher import default_launcher

    x = torch.zeros(4)
    real, compile_only = RecordingKernel(), RecordingKernel()
    default_launcher(real, (2,), x, 7, num_warps=4, num_stages=2, **options)
    assert compile_only_launcher(compile_only, (2,), x, 7, num_warps=4, num_stages=2, **options) == "compiled"
    (real_args, real_warmup, real_options), = real.calls
    (args, warmup, launched_options), = compile_only.calls
    assert real_warmup is False and warmup is True
    assert args == real_args and launched_options == real_options


@triton.jit
def _double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2, mask=offsets < n)


def test_triton_launches_compile_only_inside_the_context_and_launch_again_after(monkeypatch):
    seen: list[tuple[bool, dict]] = []

    def recording_run(self, *args, grid, warmup, **kwargs):
        seen.append((warmup, kwargs))

    monkeypatch.setattr(JITFunction, "run", recording_run)  # stands in for compiling (no GPU here)
    x = torch.zeros(8)
    with triton_launches_compile_only():
        _double[(1,)](x, x, 8, BLOCK=8, num_warps=2)
    _double[(1,)](x, x, 8, BLOCK=8, num_warps=2)
    assert seen == [(True, {"BLOCK": 8, "num_warps": 2}), (False, {"BLOCK": 8, "num_warps": 2})]
    assert JITFunction.run is recording_run  # restored


def test_the_context_is_left_even_when_the_launch_raises():
    original = JITFunction.__dict__["run"]
    with pytest.raises(ValueError), triton_launches_compile_only():
        assert JITFunction.__dict__["run"] is not original
        raise ValueError("a config the launch function rejects")
    assert JITFunction.__dict__["run"] is original


_INTERPRETED = r"""
import json, os
assert os.environ.get("TRITON_INTERPRET") == "1"
import torch
from autotune.kernels import get_kernel
from autotune.kernels.compile_only import triton_launches_compile_only

report = {}
for name, native in (("softmax-triton", {"BLOCK_SIZE": 256, "num_warps": 4, "num_stages": 1}),
                     ("softmax-split", {"CHUNK": 256, "REVERSE": 1, "num_warps": 4, "num_stages": 1})):
    spec = get_kernel(name)
    (x,) = spec.make_inputs((4, 1000), torch.float32, "cpu", 0)
    out = torch.full_like(x, 7.0)
    with triton_launches_compile_only():
        spec.triton_launch(native, x, out)
    untouched = bool((out == 7.0).all())
    spec.compile_without_launch(native, (x,))
    spec.triton_launch(native, x, out)
    report[name] = {"untouched": untouched, "then_computed": bool(torch.allclose(out, torch.softmax(x, dim=1)))}
print("REPORT " + json.dumps(report))
"""


def test_compile_only_launches_run_no_kernel_under_the_interpreter():
    report = run_report_script(_INTERPRETED, timeout=300, TRITON_INTERPRET="1")
    assert report == {name: {"untouched": True, "then_computed": True}
                      for name in ("softmax-triton", "softmax-split")}
