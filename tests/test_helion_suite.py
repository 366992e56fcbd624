"""The Helion example suite on a CPU: its manifest and hooks against Helion's own examples, and
the GPU runner's plan, restart, deadlines and report on fake results (no GPU is used)."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from experiments.helion_suite import report as suite_report
from experiments.helion_suite.arms import ARMS
from experiments.helion_suite.manifest import KERNELS, select
from experiments.helion_suite.runner import Job, Results, plan, run_jobs, subprocess_execute
from tests.conftest import assert_one_line_error, run_main

EXAMPLES = Path("/work/shared/helion-examples")
needs_examples = pytest.mark.skipif(not EXAMPLES.is_dir(), reason="Helion's examples are not at hand")


# -- the manifest and hooks, against Helion's examples -------------------------------------------
@needs_examples
def test_all_twelve_kernels_load_with_inputs_of_their_shape() -> None:
    from experiments.helion_suite.loader import build

    assert len(KERNELS) == 12 and all(len(k.gpu) >= 2 for k in KERNELS)
    for entry in KERNELS:
        kernel = build(entry.name, EXAMPLES)
        assert kernel.family == "helion" and kernel.rank == len(entry.cpu)
        assert set(kernel.baselines) == {"torch", "torch.compile"}
        inputs = kernel.make_inputs(entry.cpu, torch.float32, "cpu", 0)
        assert kernel.problem_shape(inputs) == entry.cpu, entry.name  # shape_of reads back the shape


@needs_examples
@pytest.mark.parametrize("name", ["attention", "rope", "welford"])  # the kernels with hooks of their own
def test_the_torch_baseline_agrees_with_the_reference(name: str) -> None:
    from autotune.evaluators.timing import baseline_error
    from experiments.helion_suite.loader import build
    from experiments.helion_suite.manifest import BY_NAME

    kernel = build(name, EXAMPLES)
    inputs = kernel.make_inputs(BY_NAME[name].cpu, torch.float32, "cpu", 0)
    kernel.helion_kernel.bind(inputs)  # Helion accepts the inputs (its space can be read)
    reference = kernel.reference_output(tuple(
        x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs))
    error, _ = baseline_error(kernel.baselines["torch"](inputs), reference)
    assert error < 1e-5, error  # the hooks compute what the kernel computes


@needs_examples
def test_the_kernel_file_finds_the_kernel_with_the_suites_hooks(tmp_path: Path) -> None:
    from autotune.kernel_loader import resolve_kernel
    from experiments.helion_suite.loader import kernel_file

    locator = kernel_file("welford", EXAMPLES, tmp_path)
    kernel = resolve_kernel(locator)
    assert kernel.name == "welford" and kernel.inputs_given and kernel.locator.endswith("suite_welford.py:kernel")
    weight, bias, x = kernel.make_inputs((4, 8), torch.float32, "cpu", 0)
    assert x.shape == (4, 8) and weight.shape == bias.shape == (8,)


def test_unknown_kernels_and_arms_are_refused() -> None:
    with pytest.raises(ValueError, match="no suite kernel 'nope'"):
        select("rms_norm,nope")
    with pytest.raises(ValueError, match="unknown arm"):
        plan(select("rms_norm"), ["ours", "fastest"])


# -- the runner: plan, restart, deadlines ---------------------------------------------------------
def test_the_plan_has_every_arm_of_every_gpu_shape_cell_by_cell() -> None:
    jobs = plan(select("rms_norm,softmax"))
    assert len(jobs) == 2 * 2 * len(ARMS) and len({job.key for job in jobs}) == len(jobs)
    assert [job.arm for job in jobs[:len(ARMS)]] == list(ARMS)  # one cell's arms together
    assert jobs[0].key == "rms_norm|4096x8192|float16|default"


def _fake(fail: set[str], calls: list[str]):
    def execute(job: Job, gpu: str, limit: float) -> dict:
        calls.append(job.key)
        if job.key in fail:
            return {"status": "failed", "error": "boom", "wall_s": 1.0}
        return {"status": "ok", "ms": 1.0 + len(job.arm), "rel_error": 1e-6, "wall_s": 2.0}
    return execute


def test_a_run_again_skips_what_is_recorded_and_retries_failures_only_when_asked(tmp_path: Path) -> None:
    jobs = plan(select("softmax"))
    results = Results(tmp_path / "results.jsonl")
    calls: list[str] = []
    failing = {jobs[1].key}
    first = run_jobs(jobs, results, ["0", "1"], _fake(failing, calls), seconds=20, say=lambda _: None)
    assert len(first) == len(jobs) and sorted(calls) == sorted(j.key for j in jobs)
    assert {r["gpu"] for r in first} <= {"0", "1"}
    with results.path.open("a") as handle:  # a record cut by a killed run is run again
        handle.write('{"key": "softmax|4096x32000|float16|torch", "sta')
    calls.clear()
    assert run_jobs(jobs, results, ["0"], _fake(set(), calls), seconds=20, say=lambda _: None) == []
    assert calls == []
    again = run_jobs(jobs, results, ["0"], _fake(set(), calls), seconds=20, retry_failed=True, say=lambda _: None)
    assert calls == [jobs[1].key] and again[0]["status"] == "ok"


def test_an_arm_past_its_deadline_is_killed_and_recorded_timeout(tmp_path: Path) -> None:
    script = tmp_path / "sleeper.py"  # a child that starts a grandchild, as `ours` starts `autotune tune`
    script.write_text(textwrap.dedent(f'''
        import os, subprocess, sys, time
        if len(sys.argv) > 1:
            open({str(tmp_path / "grandchild.pid")!r}, "w").write(str(os.getpid()))
        else:
            subprocess.Popen([sys.executable, __file__, "grandchild"])
        time.sleep(60)
    '''))

    def sleeper(job, examples, seconds, work, out):
        return [sys.executable, str(script)]

    def answerer(job, examples, seconds, work, out):
        return [sys.executable, "-c", f"import json; open({str(out)!r}, 'w').write(json.dumps({{'status': 'ok', "
                                      f"'ms': 0.5, 'rel_error': 0.0}}))"]

    job = Job("softmax", (8, 64), "float16", "torch")
    started = time.monotonic()
    record = subprocess_execute(EXAMPLES, 20, tmp_path, sleeper)(job, "0", 5.0)
    assert record["status"] == "timeout" and time.monotonic() - started < 20
    grandchild = int((tmp_path / "grandchild.pid").read_text())  # it was started, and is gone
    time.sleep(0.5)
    assert not Path(f"/proc/{grandchild}").exists() or "Z" in Path(f"/proc/{grandchild}/stat").read_text().split()[2]
    record = subprocess_execute(EXAMPLES, 20, tmp_path, answerer)(job, "0", 60.0)
    assert record["status"] == "ok" and record["ms"] == 0.5 and record["wall_s"] > 0  # timed from its start


# -- the report ----------------------------------------------------------------------------------
def _records(tmp_path: Path) -> Path:
    path = tmp_path / "results.jsonl"
    ms = {"default": 2.0, "ours": 1.0, "helion_quick": 1.25, "torch": 4.0, "torch.compile": 1.6}
    lines = []
    for arm, value in ms.items():
        lines.append({"key": f"rms_norm|4096x8192|float16|{arm}", "kernel": "rms_norm", "shape": [4096, 8192],
                      "dtype": "float16", "arm": arm, "status": "ok", "ms": value, "rel_error": 2e-4, "wall_s": 30.0})
    lines.append({"key": "softmax|4096x32000|float16|ours", "kernel": "softmax", "shape": [4096, 32000],
                  "dtype": "float16", "arm": "ours", "status": "timeout", "error": "killed at its deadline of 360 s",
                  "wall_s": 360.0})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_the_report_is_regenerated_from_the_results_alone(tmp_path: Path) -> None:
    readme = suite_report.write_report(_records(tmp_path), tmp_path / "out")
    text = readme.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| rms_norm"))
    assert "| 2.00x | 1.25x | 1.60x | 30 | 30 | 2.0e-04 |" in row  # ours vs default, Helion quick, compile
    softmax = next(line for line in text.splitlines() if line.startswith("| softmax"))
    assert "| timeout |" in softmax and "not run" in softmax
    assert "softmax 4096x32000 ours: timeout" in text
    png = tmp_path / "out" / "speedups.png"
    assert png.exists() and 0 < png.stat().st_size < 200_000 and "speedups.png" in text


def test_the_suite_command_reports_and_refuses_in_one_line(tmp_path: Path, capsys) -> None:
    _records(tmp_path)
    code, out, err = run_main(["suite", "report", "--out", str(tmp_path)], capsys)
    assert code == 0 and (tmp_path / "README.md").exists(), err
    assert_one_line_error(*run_main(["suite", "report", "--out", str(tmp_path / "none")], capsys))
    assert_one_line_error(*run_main(["suite", "run", "--examples", str(tmp_path / "missing")], capsys))
    assert_one_line_error(*run_main(["suite", "run", "--examples", str(tmp_path), "--gpus", "a,b"], capsys))
    assert not (tmp_path / "missing").exists()
