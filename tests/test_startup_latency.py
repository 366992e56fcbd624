"""experiments.startup_latency: its report from recorded runs (the GPU runs themselves need a GPU)."""

from __future__ import annotations

from experiments import startup_latency


def _cpu(label: str, walls: list[float], cpus: list[float]) -> dict:
    runs = [{"wall_s": w, "cpu_s": c, "load_1min": 4.0, "started_line": "started in 1.0 s: python 0.1, imports 0.5 s"}
            for w, c in zip(walls, cpus)]
    return {"mode": "cpu", "label": label, "command": "autotune tune softmax", "runs": runs,
            "machine": {"cpus": 2, "python": "3.11"}}


def test_the_cpu_report_gives_medians_and_judges_the_target_on_the_current_sources():
    text = startup_latency.report([_cpu("now", [1.5, 1.2, 2.1], [1.2, 1.1, 1.3]),
                                   _cpu("before (abc)", [12.0, 11.7, 12.2], [8.4, 8.3, 8.8])])
    rows = [line for line in text.splitlines() if line.startswith("| now") or line.startswith("| before")]
    assert rows == ["| now | 3 | 1.50 [1.20-2.10] | 1.20 [1.10-1.30] | 4.00 [4.00-4.00] |",
                    "| before (abc) | 3 | 12.00 [11.70-12.20] | 8.40 [8.30-8.80] | 4.00 [4.00-4.00] |"]
    assert "Median wall 1.50 s (met at this load)" in text
    assert "Not measured yet" in text  # no GPU runs


def test_the_gpu_report_counts_the_runs_within_the_target():
    runs = [{"first_result_s": f, "ready_s": 2.0, "command_s": 9.0, "started_line": None} for f in (4.0, 6.0, 4.5)]
    text = startup_latency.report([{"mode": "gpu", "label": "now", "command": "autotune tune softmax",
                                    "machine": {"device": "NVIDIA H200"}, "runs": runs}])
    assert "first evaluation recorded 4.50 [4.00-6.00] s after the command" in text
    assert "Target 5 s: 2 of 3 runs." in text
