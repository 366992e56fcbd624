"""`autotune seeds`: facts, rules (fired, declined, not applicable) and seeds; clean errors."""

from __future__ import annotations

import json

import pytest

from autotune.cli import main


@pytest.fixture(autouse=True)
def _wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "240")  # rich wraps tables at 80 columns otherwise


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["seeds", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_prints_facts_rules_and_the_seed_for_a_fused_kernel(capsys):
    code, out, _ = run(capsys, "matmul-layernorm", "--shape", "512x256x1024")
    assert code == 0
    for text in ("MatmulFact", "ReductionFact", "MatmulWithReductionEpilogueFact", "mean+mean",
                 "matmul_epilogue_resident", "fired: 3 seed(s)", "row_reduction", "not applicable",
                 "num_warps=8", "staged 2 buffer(s) x 32 x (16 + 1024)"):
        assert text in out, text


def test_shows_why_a_rule_declined(capsys):
    code, out, _ = run(capsys, "matmul-sum", "--shape", "64x64x4096", "--dtype", "float32")
    assert code == 0
    assert "declined: N=4096" in out and "shared memory per block" in out and "no seeds" in out


def test_row_reduction_seeds_for_softmax(capsys):
    code, out, _ = run(capsys, "softmax", "--shape", "64x32000")
    assert code == 0
    assert "row_reduction" in out and "fired: 6 seed(s)" in out and "half the padded row" in out
    assert "MatmulWithReductionEpilogueFact" not in out.split("rules")[0]


def test_json_output_is_the_recorded_provenance(capsys):
    code, out, _ = run(capsys, "matmul-max", "--shape", "256x128x512", "--format", "json")
    assert code == 0
    record = json.loads(out)
    assert [f["fact"] for f in record["facts"]] == ["MatmulFact", "ReductionFact", "MatmulWithReductionEpilogueFact"]
    seed, *variants = record["seeds"]  # the rule's choice, then its other program orders
    assert [s["params"]["pid_type"] for s in record["seeds"]] == ["persistent_interleaved", "persistent_blocked", "flat"]
    assert all(s["rule"] == "matmul_epilogue_resident" and "program-order variants" in s["reason"] for s in variants)
    assert seed["rule"] == "matmul_epilogue_resident"
    assert seed["params"]["block_sizes[0]"] == 16  # 256 rows: M_BLOCK halved from 64 to fill the SMs
    assert seed["constants"]["MIN_PROGRAMS_PER_SM"] * seed["constants"]["sm_count"] > 256 // 32
    assert seed["constants"]["staged_bytes"] <= seed["constants"]["staged_cap"]


@pytest.mark.parametrize("args,message", [
    (["nope", "--shape", "4x4"], "unknown kernel 'nope'"),
    (["matmul-sum", "--shape", "64x64"], "this kernel takes 3"),
    (["matmul-sum", "--shape", "64xax8"], "malformed shape"),
    (["matmul-sum", "--shape", "64x64x64", "--dtype", "int8"], "unsupported dtype"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, args, message):
    code, out, err = run(capsys, *args)
    assert code == 2 and message in err and err.startswith("autotune: error:") and err.count("\n") == 1


def test_a_heuristic_seeded_session_records_where_its_seeds_came_from(tmp_path, capsys, shipped_db):
    """A replay of the shipped H100 measurements, seeded by the rules: the session's options
    hold every heuristic seed's rule, reason, facts and constants."""
    from autotune.store.cache import Cache
    from autotune.store.layers import USER_SESSIONS_FROM

    code = main(["tune", "softmax", "--shape", "1024x50257", "--seed-from", "heuristic", "--budget", "2", "--replay",
                 "--shipped", str(shipped_db), "--db", str(tmp_path / "r.db")])
    capsys.readouterr()
    assert code == 0
    cache = Cache.open(tmp_path / "r.db")
    try:
        options = cache.session(USER_SESSIONS_FROM)["options"]
    finally:
        cache.close()
    record = options["heuristics"]
    assert record["seeds"] and options["seeds"].count("heuristic") >= len(record["seeds"])
    for seed in record["seeds"]:
        assert seed["rule"] == "row_reduction" and seed["reason"] and seed["constants"]
        assert seed["facts"][0]["extent"] == 50257 and seed["facts"][0]["rows"] == 1024
    # each seed's point as given, in order, so `autotune rerun` can give them again exactly
    assert len(options["seed_points"]) == len(options["seeds"])
    assert all(seed["params"] in options["seed_points"] for seed in record["seeds"])


@pytest.mark.parametrize("kernel, shape, dtype, picked", [
    ("matmul-sum", "64x64x64", "float32", "resident (run matmul-sum)"),
    ("matmul-tiled-max", "1024x256x2048", "bfloat16", "tiled (run matmul-tiled-max)"),
    ("matmul-split-l2norm", "1024x256x2048", "bfloat16", "split (run matmul-split-l2norm)"),
])
def test_a_matmul_epilogue_kernel_shows_the_formulation_the_rule_picks_and_why(capsys, kernel, shape, dtype, picked):
    from heuristics.matmul_formulation import pick_formulation

    code, out, _ = run(capsys, kernel, "--shape", shape, "--dtype", dtype)
    assert code == 0 and f"formulation: {picked}" in out
    m, k, n = map(int, shape.split("x"))
    pick = pick_formulation(kernel.rsplit("-", 1)[1], m, k, n, dtype)
    assert "why: " + pick.why[:60] in " ".join(out.split())
    code, out, _ = run(capsys, kernel, "--shape", shape, "--dtype", dtype, "--format", "json")
    assert code == 0 and json.loads(out)["formulation"] == {"formulation": pick.formulation, "kernel": pick.kernel,
                                                            "config": pick.config, "why": pick.why}


def test_a_kernel_outside_the_matmul_epilogue_family_shows_no_formulation(capsys):
    code, out, _ = run(capsys, "softmax", "--shape", "64x1000")
    assert code == 0 and "formulation" not in out
    code, out, _ = run(capsys, "matmul", "--shape", "64x64x64", "--dtype", "float32", "--format", "json")
    assert code == 0 and "formulation" not in json.loads(out)
