"""The compile farm on worker processes: compile workers hand artifacts to GPU workers, and a
compile worker or a GPU worker that dies mid-config costs only its configs in flight (run once
more elsewhere); the artifacts a dead compile worker held are compiled again."""

from __future__ import annotations


import pytest

pytest.importorskip("distributed")

from autotune.distributed.cluster import connect  # noqa: E402
from autotune.distributed.evaluator import distributed_evaluator  # noqa: E402
from autotune.distributed.fake_farm import FakeFarmFactory  # noqa: E402
from autotune.types import Status  # noqa: E402
from distributed_fakes import KillsItsCompileWorker, KillsItsWorker, collect_results, generation_of  # noqa: E402
from search_spaces.space import canonical_json  # noqa: E402


@pytest.fixture(scope="module")
def processes():
    client, close = connect("local:2+compile:2")
    yield client
    close()


def test_a_dying_compile_worker_or_gpu_worker_costs_only_its_config(triton_task, processes, tmp_path):
    candidates = generation_of(triton_task, 12)
    compile_victim, gpu_victim = (canonical_json(candidates[i].params) for i in (3, 8))
    log, timed = tmp_path / "compiled", tmp_path / "timed"
    factory = FakeFarmFactory(KillsItsWorker(victim=gpu_victim, marker=str(tmp_path / "gpu-kills"), log=str(timed)),
                              KillsItsCompileWorker(victim=compile_victim, marker=str(tmp_path / "compile-kills"),
                                                    log=str(log)), bench_s=0.01)
    evaluator = distributed_evaluator(processes, factory, farm=True)
    assert evaluator.pipeline.farm and "compiling on 2 (compile0, compile1)" in evaluator.description
    try:
        evaluator.submit(candidates)
        results = collect_results(evaluator, len(candidates), 45.0)
    finally:
        evaluator.close()
    assert (tmp_path / "compile-kills").read_text().count("killed") == 1
    assert (tmp_path / "gpu-kills").read_text().count("killed") == 1
    assert sorted(r.key for r in results) == sorted(c.key for c in candidates) and all(r.ok for r in results)
    keys = [canonical_json(c.params) for c in candidates]
    compiled, timed_lines = log.read_text().splitlines(), timed.read_text().splitlines()
    assert compiled.count(compile_victim) == 2  # compiled again after its worker died
    # Timed once each, but for the config whose GPU worker died while timing it.
    assert {key: timed_lines.count(key) for key in keys} == {key: 1 + (key == gpu_victim) for key in keys}
    # Compiled again: only those whose artifact died with the compile worker before a GPU took it.
    assert all(compiled.count(key) <= 2 for key in keys) and sum(map(compiled.count, keys)) < 2 * len(keys)
    assert {r.measured_on for r in results} == {"cpu0", "cpu1"}  # timed on GPU workers only


def test_a_config_whose_compile_worker_dies_twice_is_recorded_as_crash(triton_task, processes, tmp_path):
    candidates = generation_of(triton_task, 4)
    victim = canonical_json(candidates[1].params)
    factory = FakeFarmFactory(KillsItsWorker(victim="none", marker=str(tmp_path / "unused")),
                              KillsItsCompileWorker(victim=victim, marker=str(tmp_path / "kills"), every_time=True))
    evaluator = distributed_evaluator(processes, factory, farm=True)
    try:
        evaluator.submit(candidates)
        results = {r.key: r for r in collect_results(evaluator, len(candidates), 45.0)}
    finally:
        evaluator.close()
    assert (tmp_path / "kills").read_text().count("killed") == 2  # on each compile worker once, no more
    crashed = results.pop(candidates[1].key)
    assert crashed.status is Status.CRASH and "died twice" in crashed.error and "compile" in crashed.error
    assert all(r.ok for r in results.values())
