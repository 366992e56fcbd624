"""`--run-timeout` and `--compile-timeout` under `--interpret`: each config runs in a child
process with a deadline; a config past it is recorded and the session goes on."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SLOW_FILE = '''
import time
import torch
import triton
import triton.language as tl

import autotune
from search_spaces.triton_space import declare_triton_space


@triton.jit
def _double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2, mask=mask)


def launch(config, x):
    if config["BLOCK"] == 32:
        time.sleep(120)  # the deliberately slow config
    out = torch.empty_like(x)
    n = x.numel()
    _double[(triton.cdiv(n, config["BLOCK"]),)](x, out, n, BLOCK=config["BLOCK"], num_warps=config["num_warps"],
                                                  num_stages=config["num_stages"])
    return out


def space(shape, dtype):
    return declare_triton_space("slow_double", meta={"BLOCK": [32, 64, 128]}, num_warps=[1], num_stages=[1],
                                default={"BLOCK": 64, "num_warps": 1, "num_stages": 1})


slow = autotune.Kernel(launch, name="slow_double", space=space, reference=lambda x: x * 2, dtypes=("float32",))
'''


def test_a_slow_config_is_recorded_run_timeout_within_the_deadline_and_the_session_goes_on(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(SLOW_FILE)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "slow.py:slow", "--shape", "4x100", "--dtype", "float32",
         "--interpret", "--strategy", "grid", "--budget", "3", "--run-timeout", "3", "--db", "s.db",
         "--shipped", "none"],
        capture_output=True, text=True, timeout=100, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-2000:]
    assert elapsed < 60, elapsed  # the slow config sleeps 120 s
    with sqlite3.connect(tmp_path / "s.db") as db:
        rows = db.execute("select status, error, config_json from evaluations").fetchall()
    statuses = {config: status for status, _, config in rows}
    slow = [status for config, status in statuses.items() if '"BLOCK": 32' in config or '"BLOCK":32' in config]
    fast = [status for config, status in statuses.items() if '"BLOCK": 32' not in config and '"BLOCK":32' not in config]
    assert slow == ["run_timeout"], rows
    assert fast and set(fast) == {"ok"}, rows  # the configs after it were still measured
    assert any("over 3 s" in (error or "") for status, error, _ in rows if status == "run_timeout")


def test_a_config_whose_code_generation_hangs_is_recorded_compile_timeout(tmp_path: Path) -> None:
    """The evaluator alone, with a candidate whose build never returns (a stand-in for a
    compiler that hangs): compile_timeout after the deadline, and the next config is measured."""
    script = textwrap.dedent(f'''
        import os, sys, time
        os.environ["TRITON_INTERPRET"] = "1"
        sys.path.insert(0, {str(tmp_path)!r})
        import torch
        from autotune.evaluators import interpreter
        from autotune.kernel_loader import resolve_kernel
        from autotune.types import Candidate

        kernel = resolve_kernel("{tmp_path}/slow.py:slow")
        evaluator = interpreter.InterpreterEvaluator(kernel, (4, 100), torch.float32, compile_timeout_s=2,
                                                     run_timeout_s=5)
        real = interpreter.build_runner
        def build(spec, bound, native):
            if native["BLOCK"] == 128:
                time.sleep(120)
            return real(spec, bound, native)
        interpreter.build_runner = build  # inherited by the forked children
        hang = Candidate(params={{}}, native={{"BLOCK": 128, "num_warps": 1, "num_stages": 1}}, key="hang")
        fine = Candidate(params={{}}, native={{"BLOCK": 64, "num_warps": 1, "num_stages": 1}}, key="fine")
        begin = time.monotonic()
        results = list(evaluator.evaluate([hang, fine]))
        print(results[0].status.value, results[1].status.value, round(time.monotonic() - begin))
    ''')
    (tmp_path / "slow.py").write_text(SLOW_FILE)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=100, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    first, second, seconds = done.stdout.split()[-3:]
    assert (first, second) == ("compile_timeout", "ok") and int(seconds) < 30
