"""The heuristic-seeds experiment off the GPU: its plan, its dry run, and its table from given results."""

from __future__ import annotations

import sys

from autotune.types import Result, Status
from experiments import heuristic_seeds as hs


def test_plan_holds_the_default_the_seed_and_grid_points_of_the_space():
    item = hs.plan("matmul-l2norm", "256x128x512", "float16", "cpu", sample=5, seed=0)
    labels = [label for label, _, _ in item["candidates"]]
    assert labels[0] == "default" and labels[1] == "seed 1: matmul_epilogue_resident"
    assert sum(label.startswith("grid") for label in labels) == 5
    task = item["task"]
    for _, candidate, _ in item["candidates"]:
        assert candidate is not None and task.space.violations(candidate.params) == []


def test_dry_run_lists_declines_and_measures_nothing(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["heuristic_seeds", "--dry-run", "--kernels", "matmul-max",
                                      "--shapes", "64x64x8192", "--grid-sample", "2"])
    hs.main()
    out = capsys.readouterr().out
    assert "declined matmul_epilogue_resident" in out and "default:" in out and "grid 2:" in out


def test_table_ratios_are_other_time_over_seed_time():
    item = hs.plan("matmul-sum", "256x128x512", "float16", "cpu", sample=2, seed=0)
    # the rule's choice and its program-order variants: a row each
    times = {"default": 2.0, "seed 1: matmul_epilogue_resident": 1.0, "seed 2: matmul_epilogue_resident": 1.25,
             "seed 3: matmul_epilogue_resident": 0.8, "grid 1": 1.5, "grid 2": None}
    results = {}
    for label, candidate, _ in item["candidates"]:
        ms = times[label]
        status = Status.OK if ms is not None else Status.OUT_OF_RESOURCES
        results[candidate.key] = Result(key=candidate.key, status=status, median_ms=ms)
    baselines = {"torch": Result(key="torch", status=Status.OK, median_ms=4.0),
                 "torch.compile": Result(key="tc", status=Status.OK, median_ms=0.5)}
    rows = hs.report_rows("matmul-sum", "256x128x512", item, {"results": results, "baselines": baselines})
    assert [row["seed"] for row in rows] == [f"seed {i}: matmul_epilogue_resident" for i in (1, 2, 3)]
    assert [row["seed_ms"] for row in rows] == [1.0, 1.25, 0.8]
    row = rows[0]
    assert (row["seed_ms"], row["default_ms"], row["grid_ms"], row["grid_ok"]) == (1.0, 2.0, 1.5, 1)
    table = hs.markdown(rows, "float16", "test")
    assert "| 2.00x | 1.50x | 4.00x | 0.50x |" in table and "| 2.50x | 1.88x | 5.00x | 0.62x |" in table


def test_rows_of_earlier_runs_are_kept(tmp_path, monkeypatch):
    """A run over other kernels or shapes adds to the report instead of replacing it."""
    import json

    earlier = {"kernel": "matmul-max", "shape": "1x1x1", "seed": "s", "seed_ms": 1.0, "seed_status": "ok",
               "default_ms": 1.0, "default_status": "ok", "grid_ms": None, "grid_ok": 0, "grid_n": 0,
               "torch_ms": None, "compile_ms": None}
    (tmp_path / "heuristic_seeds_float16.json").write_text(json.dumps([earlier]))
    fake = {"results": {}, "baselines": {}, "wall_s": 0.0}
    monkeypatch.setattr(hs, "measure", lambda item, args: fake)
    monkeypatch.setattr(sys, "argv", ["heuristic_seeds", "--kernels", "matmul-sum", "--shapes", "256x128x512",
                                      "--grid-sample", "1", "--out", str(tmp_path), "--device", "cpu"])
    hs.main()
    rows = json.loads((tmp_path / "heuristic_seeds_float16.json").read_text())
    seeds = len(hs.plan("matmul-sum", "256x128x512", "float16", "cpu", sample=1, seed=0)["analysis"].outcome.seeds)
    assert seeds == 3  # the rule's choice and its two program-order variants, a row each
    assert [(r["kernel"], r["shape"]) for r in rows] == [("matmul-max", "1x1x1")] + [("matmul-sum", "256x128x512")] * 3
    assert "matmul-max" in (tmp_path / "heuristic_seeds_float16.md").read_text()
