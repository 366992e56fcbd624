"""experiments.setup_latency: its report from recorded runs (the runs themselves need a GPU)."""

from __future__ import annotations

from experiments import setup_latency


def run(variant: str, ready: float, first: float | None, sixteen: float | None) -> dict:
    return {"variant": variant, "kernel": "softmax", "shape": "4096x32000", "device": "H100", "ready_s": ready,
            "first_result_s": first, "first_results_s": sixteen, "configs": 20,
            "set_up": {"bench_context_s": ready / 10, "evaluator_s": ready / 2}}


def test_the_report_gives_each_variants_median_and_range_and_where_the_set_up_went():
    late, early, _ = setup_latency.VARIANTS
    results = [run(late, 6.0, 7.0, 11.0), run(early, 4.0, 5.0, 7.0), run(late, 8.0, 9.0, None),
               run(early, 5.0, 6.0, 8.0), run(late, 7.0, 8.0, 12.0)]
    text = setup_latency.report(results)
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert rows[late].startswith(f"| {late} | 3 | 7.00 [6.00-8.00] | 8.00 [7.00-9.00] | 11.50 [11.00-12.00] |")
    assert rows[early].startswith(f"| {early} | 2 | 4.50 [4.00-5.00] | 5.50 [5.00-6.00] | 7.50 [7.00-8.00] |")
    assert "- bench_context_s: 0.60" in text  # the median over all five runs


def test_the_server_variant_reports_its_own_start_apart_and_each_variant_is_judged_against_the_target():
    late, early, served = setup_latency.VARIANTS
    results = [run(early, 18.0, 20.0, 22.0), {**run(served, 3.0, 4.0, 6.0), "server_start_s": 21.0},
               {**run(served, 4.0, 5.5, 7.0), "server_start_s": 21.0}, run(early, 19.0, 21.0, 23.0)]
    text = setup_latency.report(results)
    assert "took 21.0 s to answer" in text  # one server, whose start is said once
    assert f"{early}: 0 of 2 runs (not met)" in text
    assert f"{served}: 1 of 2 runs (not met)" in text  # 5.5 s is over the 5 s target
    assert late not in text.split("Target:")[1]  # a variant not run is not judged
