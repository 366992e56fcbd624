"""A process that dies under a config (a compiler's assertion aborting it, a segfault) costs only
that config: driven on the CPU through the GPU evaluator's real worker and benchmark processes,
with the fake targets of fake_gpu_workers aborting and segfaulting for real.

Checked: the configs after a death are compiled and timed in fresh processes and measured ok;
baselines are timed in a fresh benchmark process, never one that timed configs; a config that
kills its process every time is tried MAX_ATTEMPTS times, then recorded `crash` with the reason;
a config whose neighbour killed the benchmark worker (built ahead while it was timed) is timed
again and passes; what a dying compiler writes to fd 1 and 2 lands in the config's error and
log file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autotune.evaluators.gpu import GPUEvaluator
from autotune.evaluators.gpu_generation import MAX_ATTEMPTS
from autotune.types import Candidate, Status
from tests import fake_gpu_workers
from tests.test_gpu_orchestration import read_log

SESSION = 41


def candidate(name: str, behaviour: str = "ok", ms: float = 1.0) -> Candidate:
    return Candidate(params={"name": name}, native={"behaviour": behaviour, "ms": ms, "name": name}, key=name)


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    """One evaluator for the module (starting one takes seconds), its fakes logging to a file and
    remembering their first deaths in a folder; its failing configs' output under `logs`."""
    folder = tmp_path_factory.mktemp("dead-workers")
    (folder / "marks").mkdir()
    names = {"FAKE_GPU_LOG": str(folder / "gpu.log"), "FAKE_GPU_MARKS": str(folder / "marks")}
    before = {name: os.environ.get(name) for name in names}
    os.environ.update(names)  # workers take the environment of their start, replacements too
    evaluator = GPUEvaluator("softmax-triton", (4, 8), "float16", device_name="fake", compile_workers=2,
                             compile_target=fake_gpu_workers.compile_target,
                             bench_target=fake_gpu_workers.bench_target, compile_timeout_s=20.0,
                             run_timeout_s=20.0, bench_timeout_s=20.0, log_root=folder / "logs")
    evaluator.session_started(SESSION)
    try:
        yield evaluator, folder
    finally:
        evaluator.close()
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def attempts(folder: Path, kind: str, key: str) -> int:
    """How often the fakes started `kind` ("attempt": a compile, "bench": a timing) for `key`."""
    return [k for k, _, _ in read_log(folder / "gpu.log").get(kind, [])].count(key)


def served_by(folder: Path) -> dict[str, set[str]]:
    """request kind -> the benchmark processes (pids) that served requests of that kind."""
    pids: dict[str, set[str]] = {}
    for entry, _, _ in read_log(folder / "gpu.log").get("request", []):
        kind, _key, pid = entry.split(":")
        pids.setdefault(kind, set()).add(pid)
    return pids


def test_aborts_and_segfaults_cost_only_their_configs_and_the_baselines_are_measured(setting):
    evaluator, folder = setting
    kinds = {"ok1": "ok", "abort-c": "abort_compile", "ok2": "ok", "segv-c": "segv_compile", "ok3": "ok",
             "abort-b": "abort_bench", "ok4": "ok", "segv-b": "segv_bench", "ok5": "ok", "ok6": "ok"}
    results = {r.key: r for r in evaluator.evaluate([candidate(k, b, ms=1 + i / 10)
                                                      for i, (k, b) in enumerate(kinds.items())])}
    assert set(results) == set(kinds)
    for key in ("ok1", "ok2", "ok3", "ok4", "ok5", "ok6"):
        assert results[key].status is Status.OK and results[key].median_ms is not None, results[key]
    assert results["abort-c"].status is Status.CRASH
    assert "died during compile (killed by SIGABRT)" in results["abort-c"].error
    assert "died during compile (killed by SIGSEGV)" in results["segv-c"].error
    assert results["abort-b"].status is Status.CRASH
    assert "benchmark process died (killed by SIGABRT)" in results["abort-b"].error
    assert "benchmark process died (killed by SIGSEGV)" in results["segv-b"].error
    assert all(f"{MAX_ATTEMPTS} attempts" in results[k].error for k in ("abort-c", "segv-c", "abort-b", "segv-b"))
    # a later generation is measured too, by the replacements
    again = list(evaluator.evaluate([candidate(f"later{i}", ms=2.0) for i in range(4)]))
    assert [r.status for r in again] == [Status.OK] * 4
    baselines = evaluator.baselines()
    assert set(baselines) == {"torch.softmax", "torch.compile", "device copy"}
    assert all(r.status is Status.OK for r in baselines.values()), baselines
    served = served_by(folder)
    assert served["baseline"] and served["copy"]
    assert not (served["baseline"] | served["copy"]) & served["config"]  # a fresh process, not one that timed


def test_a_config_that_kills_its_worker_every_time_is_tried_at_most_max_attempts_times(setting):
    evaluator, folder = setting
    results = {r.key: r for r in evaluator.evaluate(
        [candidate("always-c", "crash_compile"), candidate("always-b", "abort_bench"),
         candidate("once-c", "crash_once_compile"), candidate("fine", "ok")])}
    assert MAX_ATTEMPTS == 2
    assert results["always-c"].status is Status.CRASH and attempts(folder, "attempt", "always-c") == MAX_ATTEMPTS
    assert "exit code 7" in results["always-c"].error  # the fake's own exit status, in words
    assert results["always-b"].status is Status.CRASH and attempts(folder, "bench", "always-b") == MAX_ATTEMPTS
    # a process that died once under a config: the config is measured in a fresh one
    assert results["once-c"].status is Status.OK and attempts(folder, "attempt", "once-c") == 2
    assert results["fine"].status is Status.OK and attempts(folder, "attempt", "fine") == 1


def test_a_config_is_not_blamed_for_the_neighbour_built_ahead_that_killed_the_benchmark(setting):
    """The benchmark worker builds the next config while it times one: a build that aborts kills
    the process under the config being timed, which is timed again on its own and passes."""
    evaluator, folder = setting
    names = ["n1", "n2", "n3", "n4"]
    behaviours = {"n2": "abort_build"}
    results = {r.key: r for r in evaluator.evaluate([candidate(k, behaviours.get(k, "ok")) for k in names])}
    assert results["n2"].status is Status.CRASH and "benchmark process died (killed by SIGABRT)" in results["n2"].error
    assert all(results[k].status is Status.OK for k in ("n1", "n3", "n4")), results


def test_a_dying_compilers_output_is_in_the_configs_error_and_log_file(setting):
    evaluator, folder = setting
    results = {r.key: r for r in evaluator.evaluate(
        [candidate("loud-abort", "noisy_abort"), candidate("loud-error", "noisy_compile"), candidate("quiet")])}
    aborted, failed = results["loud-abort"], results["loud-error"]
    assert aborted.status is Status.CRASH and failed.status is Status.COMPILE_ERROR
    assert results["quiet"].status is Status.OK and results["quiet"].error == ""
    # the reason names the assertion that aborted the process
    first = aborted.error.splitlines()[0]
    assert first.startswith("worker process died during compile (killed by SIGABRT)")
    assert fake_gpu_workers.ASSERTION in first
    lines = fake_gpu_workers.NOISY_LINES
    for key, result in (("loud-abort", aborted), ("loud-error", failed)):
        log = folder / "logs" / str(SESSION) / f"{key}.txt"
        assert f"full text in {log}" in result.error
        assert f"stdout {key} line 0:" in result.error and f"stderr {key} line 0:" in result.error
        assert len(result.error.splitlines()) < 20  # the first lines, not hundreds
        text = log.read_text()
        # every line written to either descriptor, by every attempt, and nothing of another config
        assert text.count(f"stdout {key} line {lines - 1}:") == text.count(f"stderr {key} line 0:") >= 1
        assert len([line for line in text.splitlines() if line.startswith(("stdout", "stderr"))]) \
            == 2 * lines * text.count(f"stderr {key} line 0:")
        assert "loud-error" not in text if key == "loud-abort" else "loud-abort" not in text
    assert failed.error.splitlines()[0] == "CompilationError: the fake compiler gave up"
    assert attempts(folder, "attempt", "loud-abort") == MAX_ATTEMPTS
    assert (folder / "logs" / str(SESSION) / "loud-abort.txt").read_text().count("stderr loud-abort line 0:") \
        == MAX_ATTEMPTS


def test_a_device_that_no_longer_runs_work_is_reported_broken():
    """The benchmark worker asks this after a failed run, and exits (to be replaced) when it answers;
    here the CPU runs the probe, and a device this machine cannot use stands for a broken context."""
    import torch

    from autotune.evaluators.gpu_worker import context_broken

    assert context_broken(torch, "cpu") is None
    if not torch.cuda.is_available():
        assert context_broken(torch, "cuda")


def test_a_worker_that_dies_while_starting_says_how_and_why(monkeypatch):
    """Its output is captured like a config's: the failed assertion is named in the one-line
    reason instead of being printed on the terminal."""
    from autotune.evaluators.gpu_process import WorkerSetupError

    monkeypatch.setenv("FAKE_GPU_ABORT_AT_START", "1")
    with pytest.raises(WorkerSetupError) as raised:
        GPUEvaluator("softmax-triton", (4, 8), "float16", device_name="fake", compile_workers=1,
                     compile_target=fake_gpu_workers.compile_target, bench_target=fake_gpu_workers.bench_target)
    first = str(raised.value).splitlines()[0]
    assert first.startswith("compile-0 died while starting (killed by SIGABRT): python: ")
    assert first.endswith(fake_gpu_workers.ASSERTION)
