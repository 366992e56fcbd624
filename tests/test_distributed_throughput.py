"""The throughput experiment's dry run (CPU worker processes, fake compile and timing): it
measures every (GPUs, farm) setting, appends its runs to the results file and regenerates the
report from that file alone; bad arguments are refused in one line."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("distributed")

from experiments import distributed_throughput as experiment  # noqa: E402


def test_the_dry_run_measures_every_setting_and_reports_from_its_results_file(tmp_path, capsys):
    results, report = tmp_path / "runs.json", tmp_path / "report.md"
    argv = ["--fake", "--configs", "24", "--gpus", "1,2", "--farm", "off,on", "--compile-workers", "1",
            "--pattern-seconds", "3", "--results", str(results), "--report", str(report)]
    assert experiment.main(argv) == 0
    runs = json.loads(results.read_text())
    generations = [r for r in runs if r["kind"] == "generation"]
    assert sorted((r["gpus"], r["farm"]) for r in generations) == [(1, False), (1, True), (2, False), (2, True)]
    assert all(r["configs"] == 24 == len(r["arrivals"]) for r in generations)
    assert all(r["ok"] >= 20 for r in generations)  # one config in 16 compiles past the 2 s limit at most
    used = {a["measured_on"] for r in generations if r["gpus"] == 2 for a in r["arrivals"]}
    assert used == {"gpu0", "gpu1"} and all(len(r["calibration"]) == r["gpus"] for r in runs)
    sessions = [r for r in runs if r["kind"] == "pattern"]
    assert len(sessions) == 4 and all(r["best_curve"] and r["evaluations"] > 0 for r in sessions)

    text = report.read_text()
    assert "| 24 | on | 2 | 1 |" in text and "| 24 | off | 1 | 0 |" in text and "1.00x" in text
    assert "time to within 2% of its final best" in text and "dry run" in text
    before = text
    report.unlink()
    assert experiment.main(["--report-only", "--results", str(results), "--report", str(report)]) == 0
    assert report.read_text() == before  # the report is the results file's, nothing else


def test_time_to_within_two_percent_and_the_spread():
    curve = [(1.0, 2.0), (3.0, 1.05), (7.0, 1.015), (9.0, 1.0)]
    assert experiment.time_to_within(curve) == 7.0
    assert experiment.time_to_within([]) is None
    assert experiment.spread({"a": 1.0, "b": 1.1}) == pytest.approx(1.1)
    assert experiment.spread({"a": 1.0}) is None


def test_the_report_gives_the_ratio_to_one_gpu():
    runs = [{"kind": "generation", "gpus": gpus, "farm": False, "compile_workers": 0, "configs": 64, "ok": 64,
             "wall_s": wall, "calibration": {}, "arrivals": [{"at_s": wall, "status": "ok"}]}
            for gpus, wall in [(1, 20.0), (2, 10.5), (4, 5.0)]]
    text = experiment.report(runs, description="test")
    assert "| 64 | off | 2 | 0 | 64 | 10.5 | 6.10 | 1.90x |" in text and "| 64 | off | 4 | 0 | 64 | 5.0 | 12.80 | 4.00x |" in text


@pytest.mark.parametrize("argv", [["--configs", "8"], ["--gpus", "3"], ["--farm", "maybe"],
                                  ["--compile-workers", "0"], ["--configs", "x"]])
def test_bad_arguments_are_refused_in_one_line(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        experiment.parse_args(argv)
    assert exited.value.code == 2 and argv[0] in capsys.readouterr().err.splitlines()[-1]


def test_without_a_gpu_it_refuses_in_one_line(capsys):
    assert experiment.main(["--configs", "64"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs a GPU" in err


def test_each_cluster_compiles_into_its_own_empty_cache(tmp_path):
    envs, roles = experiment.worker_environments(["3", "5"], 2, tmp_path, compilers=1)
    assert [env["CUDA_VISIBLE_DEVICES"] for env in envs.values()] == ["3", "5", ""]
    assert roles == {"gpu0": {"gpu": 1}, "gpu1": {"gpu": 1}, "compile0": {"compile": 1}}
    assert len({env["TRITON_CACHE_DIR"] for env in envs.values()}) == 1  # a run's workers share theirs
    with pytest.raises(FileExistsError):  # never a cache left from an earlier run
        experiment.worker_environments(["3", "5"], 2, tmp_path)
