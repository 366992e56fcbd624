"""The matmul + epilogue formulation rule (heuristics/matmul_formulation.py) and its experiment
(experiments/matmul_formulations.py): the rule's picks and seeds, the runner, and the report
read from fake recordings."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from autotune.kernels import present_source_hash
from tests.test_matmul_tiled import _space

# -- the formulation rule --------------------------------------------------------------------------
@pytest.mark.parametrize("epilogue, shape, dtype, formulation", [
    ("rmsnorm", (131072, 256, 512), "bfloat16", "resident"),
    ("sum", (131072, 256, 256), "bfloat16", "resident"),
    ("layernorm", (131072, 512, 512), "float32", "resident"),
    ("layernorm", (1024, 1024, 1024), "bfloat16", "split"),  # [M, N]: split however small
    ("l2norm", (2048, 2048, 2048), "bfloat16", "split"),
    ("max", (1024, 1024, 1024), "bfloat16", "tiled"),
    ("l2norm", (2048, 2048, 2048), "float32", "split"),  # fp32: the library's SGEMM at any size
    ("sum", (8192, 4096, 1024), "float32", "split"),
    ("logsumexp", (131072, 512, 4096), "bfloat16", "tiled"),  # an [M] epilogue, however large
    ("rmsnorm", (32768, 1024, 1536), "bfloat16", "split"),
    ("softmax", (16384, 768, 3072), "bfloat16", "split"),
    ("layernorm", (65536, 2048, 1024), "bfloat16", "split"),
    ("softmax", (131072, 512, 2048), "float32", "split"),
])
def test_rule_picks_resident_for_small_n_then_tiled_or_split(epilogue, shape, dtype, formulation):
    from autotune.kernels import get_kernel
    from heuristics.device import H100
    from heuristics.matmul_formulation import pick_formulation

    pick = pick_formulation(epilogue, *shape, dtype, H100)
    assert "\n" not in pick.why and len(pick.why) > 40
    assert pick.formulation == formulation
    if formulation == "resident":
        assert pick.why.startswith("resident:")
    else:  # past the resident budget: the budget's reason, then the formulation's own
        assert pick.why.startswith("not resident:") and "comfort budget" in pick.why
        assert f"; {formulation}:" in pick.why
        assert ("fp32 products" in pick.why) == (dtype == "float32")
    if formulation == "tiled":
        assert pick.kernel == f"matmul-tiled-{epilogue}"
        assert not _space(dtype, shape).violations(pick.config)
    elif formulation == "split":
        assert pick.kernel == f"matmul-split-{epilogue}" and ("[M, N] epilogue" in pick.why or dtype == "float32")
        space = get_kernel(pick.kernel).triton_space(shape, getattr(__import__("torch"), dtype))
        assert not space.violations(pick.config)
    else:
        assert pick.kernel == f"matmul-{epilogue}" and {"block_sizes[0]", "block_sizes[1]"} <= set(pick.config)


def test_the_rules_row_limit_is_the_split_kernels():
    from autotune.kernels import matmul_split
    from heuristics import matmul_formulation
    from heuristics.device import H100

    assert matmul_formulation.MAX_N == matmul_split.MAX_N
    wide = matmul_formulation.pick_formulation("rmsnorm", 65536, 1024, matmul_split.MAX_N + 16, "bfloat16", H100)
    assert wide.formulation == "tiled" and "wider than the split row pass holds" in wide.why


def test_rule_goes_tiled_with_the_resident_rules_reason_when_it_declines():
    from heuristics.device import DeviceLimits
    from heuristics.matmul_formulation import pick_formulation

    tiny = DeviceLimits(name="tiny", smem_per_block=4096, sm_count=8, source="test")
    pick = pick_formulation("max", 4096, 512, 256, "bfloat16", tiny)  # a 16-bit [M] epilogue: tiled
    assert pick.formulation == "tiled" and "resident rule declines" in pick.why


def test_tiled_seed_is_a_valid_point_at_every_cell_of_the_experiment():
    from experiments.matmul_formulations import all_cells
    from heuristics.device import H100
    from heuristics.matmul_formulation import tiled_seed

    cells = all_cells()
    assert len([c for c in cells if c.source == "seed study"]) == 30
    assert len([c for c in cells if c.source == "larger N" and c.dims[2] >= 1024]) >= 6
    assert len([c for c in cells if c.source == "rule check"]) >= 6  # not fitted on: the rule's judges
    assert len([c for c in cells if c.source == "rule check 2"]) >= 8  # judges of the revised rule
    assert len({c.name for c in cells}) == len(cells)  # no cell declared twice
    for cell in cells:
        seed = tiled_seed(*cell.dims, cell.dtype, H100)
        assert not _space(cell.dtype, cell.dims).violations(seed), cell.name
    small = tiled_seed(1024, 1024, 1024, "bfloat16", H100)  # 8 x 8 tiles of 128 on 132 SMs: halved
    assert small["BLOCK_M"] < 128


def test_the_seed_takes_two_launches_and_the_wide_tile_and_tma_only_where_the_fitted_rule_says():
    from heuristics.device import H100
    from heuristics.matmul_formulation import TMA_MIN_MACS, pick_formulation, tiled_seed

    # [M] epilogues: two launches like every other (the row-block form lost wherever it was seeded)
    lse = pick_formulation("logsumexp", 32768, 1024, 8192, "float16", H100)
    assert lse.config["ROW_BLOCK"] == 0 and "two launches" in lse.why
    assert lse.config["BLOCK_N"] == 256  # a 16-bit [M] output: the wide tile at any K (the revision)
    assert tiled_seed(65536, 512, 1536, "bfloat16", H100, writes_rows=False)["BLOCK_N"] == 256
    assert tiled_seed(65536, 512, 1536, "bfloat16", H100)["BLOCK_N"] == 128  # [M, N] at K = 512: not
    # 16-bit [M, N] epilogue, K >= 768, large: the 256-wide tile, tiles by TMA
    wide = SimpleNamespace(config=tiled_seed(32768, 1024, 1536, "bfloat16", H100))
    assert (wide.config["BLOCK_N"], wide.config["TMA"], wide.config["ROW_BLOCK"]) == (256, 1, 0)
    # the same at K = 512 keeps the 128-wide tile
    assert tiled_seed(131072, 512, 4096, "bfloat16", H100)["BLOCK_N"] == 128
    # fp32, and a 16-bit problem under TMA_MIN_MACS: pointer loads, though descriptors are offered
    fp32 = SimpleNamespace(config=tiled_seed(8192, 4096, 1024, "float32", H100, writes_rows=False))
    assert fp32.config["TMA"] == 0
    assert 2048 ** 3 < TMA_MIN_MACS and tiled_seed(2048, 2048, 2048, "bfloat16", H100)["TMA"] == 0
    # rows that are no 16-byte multiple: no descriptor is offered at all (an [M] epilogue stays tiled)
    odd = pick_formulation("max", 4096, 1024, 1004, "bfloat16", H100)  # rows of 2008 B
    assert odd.formulation == "tiled" and "TMA" not in odd.config and "rows not 16-byte multiples" in odd.why
    for pick, dtype, shape in ((lse, "float16", (32768, 1024, 8192)), (fp32, "float32", (8192, 4096, 1024)),
                               (wide, "bfloat16", (32768, 1024, 1536))):
        assert not _space(dtype, shape).violations(pick.config)


# -- the experiment: runner and report on a fake recording ------------------------------------------
# (epilogue, shape, dtype) -> fake times (ms) of each formulation and of the baselines
TIMES = {
    ("rmsnorm", "64x32x256", "bfloat16"): {"resident": 0.5, "tiled": 0.6, "split": 0.7, "compile": 0.8},
    ("softmax", "64x32x2048", "bfloat16"): {"resident": 2.0, "tiled": 0.5, "split": 0.45, "compile": 1.0},
    ("layernorm", "64x32x1024", "float32"): {"resident": 0.4, "tiled": 0.5, "split": 0.45, "compile": 0.45},
}


def _fake_tune(calls: list, db_times: dict):
    """Stands in for autotune.tune: one 'GPU' session answered by a fake evaluator."""
    def tune(kernel, *, shape, dtype, db, configs, seed_from, **_):
        from autotune.store.cache import Cache
        from autotune.evaluators.fake import FakeEvaluator
        from autotune.kernels import get_kernel, parse_dtype, parse_shape
        from autotune.session import Session, SessionSettings
        from autotune.strategies import get_strategy
        from autotune.task import bind_live

        formulation = next((f for f in ("tiled", "split") if kernel.startswith(f"matmul-{f}-")), "resident")
        epilogue = kernel.removeprefix(f"matmul-{formulation}-").removeprefix("matmul-")
        times = db_times[epilogue, shape, dtype]
        spec = get_kernel(kernel)
        task = bind_live(spec, parse_shape(shape, 3), parse_dtype(dtype), "cpu")
        fake = FakeEvaluator(lambda p: times[formulation], baselines={"torch": 9.0, "torch.compile": times["compile"]})
        journal = Cache.open(db, create=True)
        try:
            outcome = Session(task, fake, get_strategy("random")(task.space, seed=0),
                              SessionSettings(strategy="random", seed=0, budget=2, mode="gpu"), journal,
                              seeds=[("user", c) for c in configs], options={"user_configs": list(configs)}).run()
        finally:
            journal.close()
        calls.append((kernel, list(configs), seed_from))
        return SimpleNamespace(session_id=outcome.session_id, best_ms=times[formulation], exit_reason="budget")
    return tune


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    from experiments import matmul_formulations as mf

    db = tmp_path_factory.mktemp("formulations") / "f.db"
    cells = [mf.Cell(e, s, d, "fixture") for e, s, d in TIMES]
    args = SimpleNamespace(db=db, shipped=None, seconds=1.0, strategy="random", seed=0, compile_timeout=60.0,
                           resident="missing")
    calls: list = []
    tune = _fake_tune(calls, TIMES)
    mf.tune_cell(cells[0], SimpleNamespace(**{**vars(args), "resident": "never"}), tune, say=lambda _: None)
    first = [mf.tune_cell(cell, args, tune, say=lambda _: None) for cell in cells]
    again = [mf.tune_cell(cell, args, tune, say=lambda _: None) for cell in cells]
    return SimpleNamespace(db=db, cells=cells, calls=calls, first=first, again=again, mf=mf)


def test_runner_seeds_the_tiled_session_and_skips_what_is_recorded(recorded):
    from heuristics.device import current_device
    from heuristics.matmul_formulation import split_seed, tiled_seed

    kernels = [kernel for kernel, _, _ in recorded.calls]
    assert kernels == ["matmul-tiled-rmsnorm", "matmul-split-rmsnorm", "matmul-rmsnorm",
                       "matmul-tiled-softmax", "matmul-split-softmax", "matmul-softmax",
                       "matmul-tiled-layernorm", "matmul-split-layernorm", "matmul-layernorm"]
    first = recorded.first[0]
    assert first["tiled"] == first["split"] == "recorded" and isinstance(first["resident"], dict)
    assert all(o["tiled"] == o["split"] == o["resident"] == "recorded" for o in recorded.again)
    kernel, configs, seed_from = recorded.calls[0]
    assert configs == [tiled_seed(64, 32, 256, "bfloat16", current_device())] and seed_from == "default"
    assert recorded.calls[1][1:] == ([split_seed(64, 256, "bfloat16", current_device())], "default")
    assert recorded.calls[2][1:] == ([], "default,heuristic")


def test_runner_measures_only_the_formulations_asked_and_offered(tmp_path):
    from experiments import matmul_formulations as mf

    calls: list = []
    args = SimpleNamespace(db=tmp_path / "f.db", shipped=None, seconds=1.0, strategy="random", seed=0,
                           compile_timeout=60.0, resident="never", formulations=("split",))
    cell = mf.Cell("rmsnorm", "64x32x256", "bfloat16", "fixture")
    times = {("rmsnorm", "64x32x256", "bfloat16"): TIMES[("rmsnorm", "64x32x256", "bfloat16")]}
    tune = _fake_tune(calls, times)
    assert mf.tune_cell(cell, args, tune, say=lambda _: None).keys() == {"cell", "split"}
    assert mf.tune_cell(cell, args, tune, say=lambda _: None) == {"cell": cell.name, "split": "recorded"}
    again = mf.tune_cell(cell, SimpleNamespace(**{**vars(args), "again": True}), tune, say=lambda _: None)
    assert isinstance(again["split"], dict)  # --again: measured once more
    assert [kernel for kernel, _, _ in calls] == ["matmul-split-rmsnorm"] * 2
    assert mf.Cell("max", "64x32x256", "bfloat16", "fixture").offers("split")
    assert not mf.Cell("rmsnorm", "64x32x65536", "bfloat16", "fixture").offers("split")  # over MAX_N


def test_report_reads_best_times_baselines_and_judges_the_pick(recorded, tmp_path):
    from heuristics.device import H100

    data = recorded.mf.report(recorded.db, None, tmp_path, cells=recorded.cells, device=H100)
    rows = {r["cell"]: r for r in data["cells"]}
    small, wide, fp32 = (rows[c.name] for c in recorded.cells)
    assert (small["pick"], small["resident_ms"], small["tiled_ms"], small["best"]) == ("resident", 0.5, 0.6, "resident")
    assert small["pick_within_5pct"] is True and small["compile_ms"] == 0.8
    assert wide["pick"] == "split" and wide["pick_within_5pct"] is True
    assert wide["tiled_speedup_vs_compile"] == pytest.approx(2.0)
    assert wide["speedup_vs_compile"] == pytest.approx(1 / 0.45)
    assert fp32["pick"] == "split" and fp32["pick_within_5pct"] is False  # 0.45 against the resident's 0.4
    assert data["summary"] == {**data["summary"], "cells": 3, "judged": 3, "pick_within_5pct": 2,
                               "tiled_beats_compile": 2, "split_beats_compile": 2}  # not the fp32 cell
    assert wide["split_ms"] == 0.45 and fp32["split_speedup_vs_compile"] == pytest.approx(1.0)
    # the family's best against torch.compile: 1.6x, 2.2x, and 0.45 / 0.4 for the fp32 cell
    assert data["summary"]["family_at_09_of_compile"] == {"fixture": [3, 3]}
    assert data["summary"]["pick_within_5pct_by_set"] == {"fixture": [2, 3]}
    # the rule's seed in the picked formulation: every config of a fake session times the same
    assert [r["pick_seed_within_5pct_of_best"] for r in (small, wide, fp32)] == [None, True, False]
    assert [r["pick_seed_is_the_rules_now"] for r in (small, wide, fp32)] == [None, True, True]
    assert json.loads((tmp_path / "matmul_formulations.json").read_text())["summary"] == data["summary"]
    text = (tmp_path / "matmul_formulations.md").read_text()
    assert wide["repeat_spread"] is None  # the fake sessions time no config twice
    assert ("| softmax 64x32x2048 bfloat16 | fixture | split | 2.0000 | 0.5000 | - | 0.4500 | 1.0000 | 2.22x | - "
            "| 2.00x | 2.22x | yes | 0.4500 | yes |" in text)
    assert "**no**" in text and "comfort budget" in text


def test_cells_filter_and_a_report_without_sessions(tmp_path):
    from experiments import matmul_formulations as mf

    assert [c.name for c in mf.select(mf.all_cells(), "32768x1024x1536")] == ["rmsnorm 32768x1024x1536 bfloat16"]
    assert len(mf.select(mf.all_cells(), None)) == len(mf.all_cells())
    assert [c.source for c in mf.select(mf.all_cells(), "rule check")] == ["rule check"] * len(mf.RULE_CHECK)
    assert len(mf.select(mf.all_cells(), "rule check 2")) == len(mf.RULE_CHECK_2)
    from autotune.store.cache import Cache

    Cache.open(tmp_path / "empty.db", create=True).close()
    data = mf.report(tmp_path / "empty.db", None, tmp_path / "out", cells=mf.select(mf.all_cells(), "sum"))
    assert all(r["tiled_ms"] is None and r["pick_within_5pct"] is None for r in data["cells"])
    assert (tmp_path / "out" / "matmul_formulations.md").exists()


# -- the report counts only sessions of the kernel's current source ---------------------------------
def _record_at_source(db, kernel: str, cell, ms: float, source: str | None, baselines: dict | None = None) -> int:
    """One fake 'GPU' session of `kernel` at the cell, every config timed `ms`; its space records
    `source` as the kernel's source hash (None: the current one), as a session before a change would."""
    import dataclasses

    from autotune.store.cache import Cache
    from autotune.evaluators.fake import FakeEvaluator
    from autotune.kernels import get_kernel, parse_dtype, parse_shape
    from autotune.session import Session, SessionSettings
    from autotune.strategies import get_strategy
    from autotune.task import bind_live

    task = bind_live(get_kernel(kernel), parse_shape(cell.shape, 3), parse_dtype(cell.dtype), "cpu")
    if source is not None:
        task = dataclasses.replace(task, identity=dataclasses.replace(task.identity, source_hash=source))
    journal = Cache.open(db, create=True)
    try:
        return Session(task, FakeEvaluator(lambda p: ms, baselines=baselines),
                       get_strategy("random")(task.space, seed=0),
                       SessionSettings(strategy="random", seed=0, budget=2, mode="gpu"), journal).run().session_id
    finally:
        journal.close()


def test_report_keeps_sessions_of_an_older_tiled_source_out_of_the_comparison(tmp_path):
    """The older source's session is the faster one: without the filter it would be the tiled time."""
    from autotune.store.cache import Cache
    from experiments import matmul_formulations as mf
    from heuristics.device import H100

    db = tmp_path / "f.db"
    cell = mf.Cell("rmsnorm", "64x32x256", "bfloat16", "fixture")
    kernel = cell.kernel("tiled")
    assert present_source_hash(kernel) != "0" * 24
    older = _record_at_source(db, kernel, cell, 0.3, "0" * 24, baselines={"torch.compile": 0.9})
    current = _record_at_source(db, kernel, cell, 0.6, None)  # no baselines: torch.compile from the older one
    cache = Cache.open(db)
    try:
        spaces = {s["id"]: cache.get_space(s["space_fingerprint"]).source_hash for s in cache.sessions()}
    finally:
        cache.close()
    assert spaces == {older: "0" * 24, current: present_source_hash(kernel)}
    data = mf.report(db, None, tmp_path / "out", cells=[cell], device=H100)
    (row,) = data["cells"]
    assert (row["tiled_ms"], row["tiled_sessions"]) == (0.6, [current])
    assert (row["tiled_older_ms"], row["tiled_older_sessions"]) == (0.3, [older])
    assert row["tiled_config"] is not None and row["resident_older_ms"] is None and row["resident_older_sessions"] == []
    assert row["compile_ms"] == 0.9 and row["tiled_speedup_vs_compile"] == pytest.approx(0.9 / 0.6)
    assert data["summary"] == {**data["summary"], "with_tiled": 1, "tiled_older_cells": 1, "tiled_beats_compile": 1}
    text = (tmp_path / "out" / "matmul_formulations.md").read_text()
    assert "| tiled ms | tiled ms (older source) |" in text and "current source" in text
    assert "| rmsnorm 64x32x256 bfloat16 | fixture | resident | - | 0.6000 | 0.3000 | - | 0.9000 |" in text


def test_runner_measures_again_a_cell_recorded_only_with_an_older_source(tmp_path):
    from autotune.store.cache import Cache
    from experiments import matmul_formulations as mf

    db = tmp_path / "f.db"
    cell = mf.Cell("rmsnorm", "64x32x256", "bfloat16", "fixture")
    _record_at_source(db, cell.kernel("tiled"), cell, 0.3, "0" * 24)
    cache = Cache.open(db)
    try:
        assert not mf.is_recorded(cache, cell, "tiled")
    finally:
        cache.close()
    _record_at_source(db, cell.kernel("tiled"), cell, 0.6, None)
    cache = Cache.open(db)
    try:
        assert mf.is_recorded(cache, cell, "tiled")
    finally:
        cache.close()


def test_report_times_the_seed_each_session_was_given_against_the_tiled_best(tmp_path):
    """The seed's time is read for the config the session recorded as its given seed (not the
    rule's seed of today), and judged against the best over every current session."""
    from autotune.store.cache import Cache
    from autotune.evaluators.fake import FakeEvaluator
    from autotune.kernels import get_kernel, parse_dtype, parse_shape
    from autotune.session import Session, SessionSettings
    from autotune.strategies import get_strategy
    from autotune.task import bind_live
    from experiments import matmul_formulations as mf
    from heuristics.device import H100

    cell = mf.Cell("rmsnorm", "64x32x256", "bfloat16", "fixture")
    task = bind_live(get_kernel(cell.kernel("tiled")), parse_shape(cell.shape, 3), parse_dtype(cell.dtype), "cpu")
    given = {**task.space.default, "GROUP_M": 16, "COMBINE_ROWS": 1}  # not what the rule seeds here
    assert task.space.violations(given) == []
    cost = lambda p: 1.0 if dict(p) == given else 0.5 + 0.01 * p["BLOCK_K"] / 16  # noqa: E731
    db = tmp_path / "f.db"
    journal = Cache.open(db, create=True)
    try:
        Session(task, FakeEvaluator(cost), get_strategy("random")(task.space, seed=0),
                SessionSettings(strategy="random", seed=0, budget=6, mode="gpu"), journal,
                seeds=[("user", given)], options={"user_configs": [given]}).run()
    finally:
        journal.close()
    (row,) = mf.report(db, None, tmp_path / "out", cells=[cell], device=H100)["cells"]
    assert row["seed"] == given and row["seed_ms"] == 1.0
    assert row["tiled_ms"] < 1.0 / 1.05 and row["seed_within_5pct"] is False
    assert row["seed_is_the_rules_now"] is False
    text = (tmp_path / "out" / "matmul_formulations.md").read_text()
    assert "| 1.0000 | **no** (rule changed) |" in text


def test_repeat_spread_is_the_widest_ratio_between_timings_of_one_config_in_a_session():
    from experiments.matmul_formulations import repeat_spread

    def row(config: dict, ms: float | None, ok: bool = True):
        return SimpleNamespace(candidate=SimpleNamespace(native=config), result=SimpleNamespace(ok=ok, median_ms=ms))

    a, b = {"ROWS": 1, "num_warps": 4}, {"num_warps": 4, "ROWS": 2}
    rows = {1: [row(a, 1.0), row(b, 2.0), row(dict(reversed(a.items())), 1.1), row(b, 9.0, ok=False)],
            2: [row(b, 2.0), row(a, 3.0)]}  # a at 3.0 in another session: not a repeat within one
    cache = SimpleNamespace(session_evaluations=lambda sid: rows[sid])
    assert repeat_spread(cache, [{"id": 1}, {"id": 2}]) == pytest.approx(1.1)
    assert repeat_spread(cache, [{"id": 2}]) is None  # nothing timed twice


def test_the_report_and_the_runner_read_one_gpus_sessions(recorded, tmp_path):
    """A cell measured on another GPU is neither a time of this GPU's report nor recorded for
    this GPU's runner; a database of two GPUs, neither the shipped data's, needs one named."""
    import shutil
    import sqlite3

    from autotune.databases import open_for_reading
    from autotune.errors import UserError

    mf = recorded.mf
    db = tmp_path / "two.db"
    shutil.copy(recorded.db, db)
    moved = recorded.cells[1]  # its sessions, as if measured on another card
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE sessions SET device = 'NVIDIA H200' WHERE shape = ? AND dtype = ?",
                     (json.dumps(list(moved.dims)), moved.dtype))
    conn.close()
    with pytest.raises(UserError, match="several devices"):
        mf.report(db, None, tmp_path / "r", cells=recorded.cells)
    here = mf.report(db, None, tmp_path / "r", cells=recorded.cells, gpu="cpu")
    rows = {r["cell"]: r for r in here["cells"]}
    assert rows[moved.name]["best_ms"] is None and rows[recorded.cells[0].name]["best_ms"] is not None
    there = mf.report(db, None, tmp_path / "r", cells=recorded.cells, gpu="NVIDIA H200")
    assert [r["cell"] for r in there["cells"] if r["best_ms"] is not None] == [moved.name]
    text = (tmp_path / "r" / "matmul_formulations.md").read_text()
    assert there["gpu"] == "NVIDIA H200" and "recorded sessions on NVIDIA H200" in text
    cache = open_for_reading(db)
    try:
        assert all(mf.is_recorded(cache, moved, f, "NVIDIA H200") and not mf.is_recorded(cache, moved, f, "cpu")
                   for f in mf.FORMULATIONS)
    finally:
        cache.close()
