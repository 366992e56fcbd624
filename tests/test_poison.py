"""The accuracy gate's poisoning: every output allocated by the kernel is filled with NaN, then
with a second sentinel, so an element it never writes is caught and counted (issue: a gate
that relied on the allocator reusing a freed block was never checked and mostly did nothing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import torch

from autotune.store.cache import Cache
from autotune.evaluators.poison import NOT_POISONED, POISONED, run_checked, sentinel_allocations
from conftest import REPO


def test_allocations_are_filled_while_active_and_torch_is_restored_after():
    x = torch.randn(8, 4)
    originals = (torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty)
    with sentinel_allocations(float("nan")) as filled:
        a, b, c = torch.empty(3), torch.empty_like(x), x.new_empty((2, 2))
        d = torch.empty_strided((2, 3), (3, 1), dtype=torch.int32)
    assert all(torch.isnan(t).all() for t in (a, b, c)) and (d == -7).all()
    assert {t.untyped_storage().data_ptr() for t in (a, b, c, d)} <= filled
    assert (torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty) == originals
    try:
        with sentinel_allocations(3.0):
            raise RuntimeError("a kernel that fails mid-check")
    except RuntimeError:
        pass
    assert (torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty) == originals


def _doubles(x: torch.Tensor, every: int = 1) -> torch.Tensor:
    out = torch.empty_like(x)
    out.view(-1)[::every] = (x.view(-1) * 2)[::every]
    return out


def test_a_kernel_that_writes_everything_passes_poisoned_twice():
    x = torch.randn(16, 8)
    out, check = run_checked(lambda: _doubles(x))
    assert check.poisoned and check.unwritten == 0 and check.text == POISONED
    assert torch.equal(out, x * 2)


def test_elements_never_written_are_counted():
    x = torch.randn(16, 8)
    out, check = run_checked(lambda: _doubles(x, every=2))
    assert check.poisoned and check.unwritten == x.numel() // 2
    assert torch.isnan(out.view(-1)[1::2]).all()  # the checked output carries the NaN poison
    assert "64 element(s) never written" in check.text


def test_an_output_not_allocated_through_torch_empty_is_reported_as_not_poisoned():
    x = torch.randn(4, 4)
    out, check = run_checked(lambda: x.mul_(1))  # in place: nothing allocated, nothing known
    assert not check.poisoned and check.text == NOT_POISONED


def test_tuple_outputs_are_each_checked():
    x = torch.randn(10)

    def two() -> tuple[torch.Tensor, torch.Tensor]:
        a, b = torch.empty_like(x), torch.empty_like(x)
        a.copy_(x)
        b[:5] = x[:5]
        return a, b

    _, check = run_checked(two)
    assert check.poisoned and check.unwritten == 5


def test_the_triton_interpreter_session_records_the_check_and_catches_unwritten_elements(tmp_path):
    """The faulty kernel's `unwritten` config, run through the Triton interpreter on the CPU: it
    passes no accuracy check and its row says how many elements it never wrote."""
    db = tmp_path / "i.db"
    configs = [json.dumps({"fault": f, "BLOCK_SIZE": 256}) for f in ("unwritten", "none")]
    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "faulty", "--shape", "32x64", "--dtype", "float32",
         "--interpret", "--budget", "2", "--db", str(db), "--shipped", "none",
         *[a for c in configs for a in ("--config", c)]],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    cache = Cache.open(db)
    (session,) = cache.sessions()
    rows = {r.candidate.native["fault"] + str(r.candidate.native["BLOCK_SIZE"]): r.result
            for r in cache.session_evaluations(session["id"]) if r.generation == 0}
    cache.close()
    assert rows["unwritten256"].status.value == "wrong_result"
    assert rows["unwritten256"].checked == f"{POISONED}: 1024 element(s) never written"
    assert rows["none256"].status.value == "ok" and rows["none256"].checked == POISONED
    assert rows["none1024"].checked == POISONED  # the default, free of budget
