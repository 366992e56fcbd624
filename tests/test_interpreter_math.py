"""libdevice math under the Triton interpreter, and a Helion example that needs it.

Helion's generated code calls `libdevice.rsqrt`, `tanh`, `erf`, ...; without
`autotune.evaluators.interpreter_math` every such call returned None under the interpreter and
every config failed.  The values are checked against torch, then a real Helion example
(rms_norm, which calls `libdevice.rsqrt`) is tuned with `--interpret`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = Path("/work/shared/helion-examples")

KERNEL_FILE = '''
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def many(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=1.0)
    a = tl.abs(x) + 0.5
    tl.store(out_ptr + 0 * n + offsets, libdevice.rsqrt(a), mask=mask)
    tl.store(out_ptr + 1 * n + offsets, libdevice.tanh(x), mask=mask)
    tl.store(out_ptr + 2 * n + offsets, libdevice.erf(x), mask=mask)
    tl.store(out_ptr + 3 * n + offsets, libdevice.log1p(a), mask=mask)
    tl.store(out_ptr + 4 * n + offsets, libdevice.pow(a, 2.5), mask=mask)
    tl.store(out_ptr + 5 * n + offsets, libdevice.fmod(x, 0.7), mask=mask)
    tl.store(out_ptr + 6 * n + offsets, libdevice.atan2(x, a), mask=mask)
    tl.store(out_ptr + 7 * n + offsets, libdevice.nearbyint(x * 3.0), mask=mask)
    tl.store(out_ptr + 8 * n + offsets, libdevice.exp(x), mask=mask)
    tl.store(out_ptr + 9 * n + offsets, libdevice.lgamma(a), mask=mask)
    tl.store(out_ptr + 10 * n + offsets, libdevice.erfinv(x * 0.3), mask=mask)
    tl.store(out_ptr + 11 * n + offsets, libdevice.isnan(x / (x - x)).to(tl.float32), mask=mask)
    tl.store(out_ptr + 12 * n + offsets, libdevice.signbit(x).to(tl.float32), mask=mask)
'''


def _expected(x: torch.Tensor) -> list[torch.Tensor]:
    a = x.abs() + 0.5
    return [torch.rsqrt(a), torch.tanh(x), torch.erf(x), torch.log1p(a), a.pow(2.5), torch.fmod(x, 0.7),
            torch.atan2(x, a), torch.round(x * 3.0), torch.exp(x), torch.lgamma(a), torch.erfinv(x * 0.3),
            torch.isnan(x / (x - x)).float(), torch.signbit(x).float()]


def test_libdevice_functions_compute_torchs_values_under_the_interpreter(tmp_path: Path) -> None:
    """In a fresh process with TRITON_INTERPRET=1, as `autotune tune --interpret` runs."""
    (tmp_path / "many.py").write_text(KERNEL_FILE)
    script = textwrap.dedent(f'''
        import json, sys, torch
        sys.path.insert(0, {str(tmp_path)!r})
        from many import many
        from autotune.evaluators.interpreter_math import installed
        x = torch.linspace(-2.0, 2.0, 50, dtype=torch.float32)
        x[7] = 0.0
        out = torch.full((13, 50), float("nan"))
        with installed() as names:
            many[(1,)](x, out, 50, BLOCK=64)
        json.dump({{"names": names, "out": out.tolist()}}, sys.stdout)
    ''')
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout)
    assert {"rsqrt", "tanh", "erf", "exp", "pow", "isnan"} <= set(answer["names"])
    out = torch.tensor(answer["out"])
    x = torch.linspace(-2.0, 2.0, 50, dtype=torch.float32)
    x[7] = 0.0
    for row, want in enumerate(_expected(x)):
        torch.testing.assert_close(out[row], want.float(), rtol=2e-6, atol=2e-6, msg=f"row {row}")


def test_the_stubs_are_put_back_after_use() -> None:
    from triton.language.extra import libdevice

    from autotune.evaluators.interpreter_math import installed

    stub = libdevice.rsqrt
    with installed():
        assert libdevice.rsqrt is not stub
    assert libdevice.rsqrt is stub  # a GPU compile in this process still sees Triton's own


@pytest.mark.skipif(not (EXAMPLES / "rms_norm.py").exists(), reason="Helion's examples are not at hand")
def test_helions_rms_norm_example_is_ok_under_the_interpreter_without_persistent_configs(tmp_path: Path) -> None:
    """rms_norm_fwd calls libdevice.rsqrt: every config was a compile_error before; and 4-9 of 11
    proposals were persistent pid_types, which cannot run on a CPU."""
    (tmp_path / "rms.py").write_text(textwrap.dedent(f'''
        import sys, torch
        sys.path.insert(0, {str(EXAMPLES)!r})
        import rms_norm
        import autotune

        def inputs(shape, dtype, device):
            return torch.randn(shape, dtype=dtype, device=device), torch.randn(shape[1], dtype=dtype, device=device)

        kernel = autotune.Kernel(rms_norm.rms_norm_fwd, inputs=inputs)
    '''))
    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "rms.py:kernel", "--shape", "8x32", "--dtype", "float32",
         "--interpret", "--strategy", "random", "--budget", "3", "--seed", "3", "--db", "i.db", "--shipped", "none"],
        capture_output=True, text=True, timeout=240, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "pid_type persistent_blocked, persistent_interleaved left out" in done.stdout
    with sqlite3.connect(tmp_path / "i.db") as db:
        rows = db.execute("select status, rel_error, config_json from evaluations").fetchall()
        mode, options = db.execute("select mode, options from sessions").fetchone()
    assert mode == "interpret"
    # the session records the kernel's code identity, by which a table matches it through comments
    spec = importlib.util.spec_from_file_location("rms_norm_example", EXAMPLES / "rms_norm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from autotune import Kernel
    from autotune.config_table import kernel_code_hash

    assert json.loads(options)["code_hash"] == kernel_code_hash(Kernel(module.rms_norm_fwd))
    assert len(rows) >= 4 and {status for status, _, _ in rows} == {"ok"}, rows
    assert all(error is not None and error < 1e-4 for _, error, _ in rows)  # checked against the fp64 reference
    assert not any("persistent" in json.loads(config).get("pid_type", "") for _, _, config in rows)


@pytest.mark.skipif(not (EXAMPLES / "rms_norm.py").exists(), reason="Helion's examples are not at hand")
def test_a_wrong_reference_is_caught_by_the_default_config_which_runs_with_libdevice_math() -> None:
    """The set-up runs the default config against the reference: with libdevice's stubs it
    could not run, and a wrong reference went unnoticed until every config failed.  In a fresh
    process: TRITON_INTERPRET must be set before triton is first imported."""
    script = textwrap.dedent(f'''
        import torch
        from pathlib import Path
        from autotune.evaluators.gpu_worker import ReferenceMismatch
        from autotune.evaluators.interpreter import InterpreterEvaluator
        from experiments.helion_suite.loader import build

        kernel = build("rms_norm", Path({str(EXAMPLES)!r}))
        try:
            InterpreterEvaluator(kernel.with_hooks(reference=lambda x, w: (x, x[:, :1])), (4, 16), torch.float32)
            print("accepted")
        except ReferenceMismatch as error:
            print("refused:", error)
        InterpreterEvaluator(kernel, (4, 16), torch.float32)  # the right reference is accepted
        print("right one accepted")
    ''')
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused: the reference disagrees with rms_norm at its default config" in done.stdout
    assert done.stdout.strip().endswith("right one accepted")
