"""A whole `autotune tune` session whose configs abort, segfault and flood fd 1 and 2, run in a
subprocess (so everything that reaches its terminal is seen) through the real command line, the
real GPU evaluator and its worker and benchmark processes, the GPU parts faked (the fakes of
fake_gpu_workers play the `faulty` kernel's faults as told by FAKE_GPU_FAULTS).

Checked: the session finishes; every config is recorded with its status and reason; the configs
after each death and the baselines are measured ok; no line the compiler wrote reaches the
terminal, which shows one line per group of failures instead; the output is in the rows' errors
and in `<db>.logs/<session>/<key>.txt`; `autotune show` lists the reasons grouped with counts.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from autotune.databases import open_for_reading
from autotune.evaluators.gpu_generation import MAX_ATTEMPTS
from autotune.kernels import faulty_triton as faulty
from conftest import REPO, subprocess_env
from tests import fake_gpu_workers

# How the fakes play each fault of the `faulty` grid (two block sizes each: 18 configs).
PLAYED = {"none": "ok", "compile_error": "noisy_abort", "out_of_resources": "noisy_compile",
          "compile_hang": "segv_compile", "run_hang": "abort_bench", "illegal_address": "ok", "nan": "nan",
          "wrong": "ok", "unwritten": "ok"}

_SESSION = """
import functools, sys
from autotune import cli
from autotune.evaluators import gpu, gpu_process
import autotune.tuning as tuning
from tests import fake_gpu_workers

# what the fakes' processes import (WorkerInit's TimingOptions brings torch), not Triton nor Helion
gpu_process.PRELOAD = ("autotune.evaluators.gpu_worker", "autotune.evaluators.timing", "tests.fake_gpu_workers")
tuning.gpu_available = lambda: True
gpu.GPUEvaluator = functools.partial(gpu.GPUEvaluator, compile_target=fake_gpu_workers.compile_target,
                                     bench_target=fake_gpu_workers.bench_target)
sys.exit(cli.main(["tune", "faulty", "--shape", "1024x1024", "--dtype", "float32", "--strategy", "grid",
                   "--budget", "18", "--db", sys.argv[1], "--shipped", "none", "--fresh", "--seed-from", "default",
                   "--compile-workers", "2", "--compile-timeout", "20", "--run-timeout", "20"]))
"""


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    db = tmp_path_factory.mktemp("failure-output") / "user.db"
    done = subprocess.run([sys.executable, "-c", _SESSION, str(db)], cwd=REPO, capture_output=True, text=True,
                          env=subprocess_env(FAKE_GPU_FAULTS=json.dumps(PLAYED)), timeout=170)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    session_id = int(re.search(r"^session (\d+):", done.stdout, flags=re.M).group(1))
    rows = open_for_reading(db, None).session_evaluations(session_id)
    return {"tune": done.stdout, "stderr": done.stderr, "rows": rows, "db": db, "id": session_id}


def fault_of(row) -> str:
    return row.candidate.native["fault"]


def test_every_config_is_recorded_and_the_rest_and_the_baselines_are_measured(session):
    search = [row for row in session["rows"] if row.generation >= 0]
    assert {fault_of(row) for row in search} == set(faulty.FAULTS)
    assert len(search) == len(faulty.FAULTS) * len(faulty.BLOCK_SIZES)
    for row in search:
        played = PLAYED[fault_of(row)]
        status = row.result.status.value
        if played in ("noisy_abort", "segv_compile", "abort_bench"):
            assert status == "crash" and f"{MAX_ATTEMPTS} attempts" in row.result.error, row.result
        elif played == "noisy_compile":
            assert status == "compile_error"
        elif played == "nan":
            assert status == "wrong_result"
        else:
            assert status == "ok" and row.result.median_ms is not None, row.result
    # the baselines, timed after the deaths, in a fresh process
    baselines = open_for_reading(session["db"], None).baselines(session_id=session["id"])
    assert set(baselines) == {"torch", "device copy"}
    assert all(result.status.value == "ok" for result in baselines.values()), baselines


def test_no_compiler_output_reaches_the_terminal(session):
    terminal = session["tune"] + session["stderr"]
    assert "IR Dump" not in terminal and "arith.constant" not in terminal
    assert "stdout " not in terminal and "stderr " not in terminal
    assert len(terminal.splitlines()) < 120  # a few lines per generation and the tables, not hundreds


def test_the_output_is_in_the_rows_and_the_log_files(session):
    logs = session["db"].parent / "user.db.logs" / str(session["id"])
    noisy = [row for row in session["rows"] if PLAYED[fault_of(row)] in ("noisy_abort", "noisy_compile")]
    assert len(noisy) == 4
    for row in noisy:
        key = row.candidate.key
        log = logs / f"{key}.txt"
        assert f"full text in {log}" in row.result.error
        assert f"stderr {key} line 0:" in row.result.error and len(row.result.error.splitlines()) < 20
        text = log.read_text()
        assert text.count(f"stdout {key} line ") == text.count(f"stderr {key} line ") \
            == fake_gpu_workers.NOISY_LINES * (MAX_ATTEMPTS if PLAYED[fault_of(row)] == "noisy_abort" else 1)
    aborted = [row for row in noisy if PLAYED[fault_of(row)] == "noisy_abort"]
    assert all(fake_gpu_workers.ASSERTION in row.result.error.splitlines()[0] for row in aborted)
    assert not [path for path in logs.glob("*.txt") if path.stem not in {row.candidate.key for row in noisy}]


def test_the_session_prints_one_line_per_group_of_failures(session):
    tune = session["tune"]
    assert re.search(r"^\s+2 x crash: worker process died during compile \(killed by SIGABRT\); "
                     rf"{MAX_ATTEMPTS} attempts, each in a fresh process: python: .*"
                     + re.escape(fake_gpu_workers.ASSERTION), tune, flags=re.M), tune
    assert re.search(r"^\s+2 x crash: worker process died during compile \(killed by SIGSEGV\)", tune, flags=re.M)
    assert re.search(r"^\s+2 x crash: benchmark process died \(killed by SIGABRT\)", tune, flags=re.M)
    assert re.search(r"^\s+2 x compile_error: CompilationError: the fake compiler gave up$", tune, flags=re.M)
    assert re.search(r"^\s+2 x wrong_result: relative error inf", tune, flags=re.M)


def test_show_lists_the_reasons_grouped_with_counts(session, capsys, monkeypatch):
    from autotune import cli

    monkeypatch.setenv("COLUMNS", "240")
    assert cli.main(["show", str(session["id"]), "--db", str(session["db"]), "--shipped", "none"]) == 0
    show = capsys.readouterr().out
    assert "why configs failed" in show
    groups = re.findall(r"^\s+(\d+) x (\w+): (.*)$", show, flags=re.M)
    assert sorted((int(n), status) for n, status, _ in groups) == [
        (2, "compile_error"), (2, "crash"), (2, "crash"), (2, "crash"), (2, "wrong_result")]
    assert "IR Dump" not in show and "arith.constant" not in show
