"""The load-width diagnostic: a launch intercepted (Triton launch or Helion's generated host
code) and compiled for sm_90 on the CPU, its global loads counted by bytes.  Rows of 50257
fp16 values defeat 16-byte loads in code that indexes them as they are; softmax-persistent
keeps them."""

from __future__ import annotations

from collections import Counter

import pytest

pytest.importorskip("triton")


def _widest_load(kernel: str, shape: tuple[int, int], config: dict | None = None) -> int:
    import torch

    from autotune.kernels import get_kernel
    from autotune.task import bind_live
    from experiments.load_widths import intercept, memory_ops

    spec = get_kernel(kernel)
    task = bind_live(spec, shape, torch.float16, "cpu")
    native = task.candidate_from_native({**task.default_candidate().native, **(config or {})}).native
    launches = intercept(spec, native, spec.make_inputs(shape, torch.float16, "cpu", 0))
    assert launches, "nothing was launched"
    counts = sum((memory_ops(launch) for launch in launches), start=Counter())
    assert any(kind == "store" for kind, _ in counts), "no global store compiled"
    return max(size for kind, size in counts if kind == "load")


@pytest.mark.parametrize("kernel, config", [("softmax", None), ("softmax-triton", {"BLOCK_SIZE": 4096})])
def test_rows_indexed_as_they_are_get_two_byte_loads_only_when_misaligned(kernel, config):
    assert _widest_load(kernel, (8, 50257), config) == 2
    assert _widest_load(kernel, (8, 32000), config) == 16


def test_softmax_persistent_keeps_sixteen_byte_loads_on_misaligned_rows():
    config = {"CHUNK": 8192, "PER_SM": 4, "num_warps": 16, "num_stages": 2}
    assert _widest_load("softmax-persistent", (8, 50257), config) == 16


def test_the_script_prints_one_row_per_kernel_and_refuses_unknown_ones(capsys, tmp_path):
    from experiments.load_widths import main

    assert main(["--kernels", "softmax-triton", "--shape", "8x1001", "--db", str(tmp_path / "none.db")]) == 0
    out = capsys.readouterr().out
    assert "| softmax-triton | default | 2 |" in out
    assert main(["--kernels", "no-such-kernel"]) == 2
    assert "unknown kernel" in capsys.readouterr().err


def test_softmax_resident_keeps_sixteen_byte_loads_when_a_row_is_shared_out_evenly():
    """100000 = 13 pieces of 7696 (not 12 of 8192 and 1696): a runtime width, still 16-byte loads."""
    config = {"CHUNK": 8192, "STREAM_LOADS": 1, "num_warps": 4, "num_stages": 1}
    assert _widest_load("softmax-resident", (8, 100000), config) == 16

