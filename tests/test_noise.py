"""`autotune noise`: spread, repeatability, bootstrap rank stability and the verdict, checked on
hand-made spaces whose answers are known, plus the CLI on a copy of the shipped database."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

from autotune.store.cache import Cache
from autotune.cli import main
from autotune.noise import analyse, collect, rank_stability, repeatability, within_spread
from autotune.types import Result, Source, Status
from search_spaces.fingerprint import SpaceIdentity
from search_spaces.parameters import Integer
from search_spaces.space import SearchSpace
from tests.conftest import make_candidate

SHAPE = (8, 8)
REBENCH = -1


def toy_identity(source: str = "s") -> SpaceIdentity:
    space = SearchSpace(kernel="toy", family="triton", parameters=(Integer("x", low=0, high=1000, default_value=0),),
                        default={"x": 0})
    return SpaceIdentity(space=space, signature={"shape": list(SHAPE), "dtype": "float16"}, source_hash=source * 24,
                         versions={"torch": "t", "triton": "t", "helion": "t"}, device="test-gpu")


def timed(key: str, samples: Sequence[float], *, median: float | None = None, keep_samples: bool = True) -> Result:
    return Result(key=key, status=Status.OK, median_ms=median if median is not None else statistics.median(samples),
                  min_ms=min(samples), max_ms=max(samples), repetitions=len(samples),
                  samples_ms=tuple(samples) if keep_samples else ())


def write_space(path: Path, configs: dict[int, list[tuple[int, Sequence[float]]]], *, source: str = "s",
                keep_samples: bool = True) -> str:
    """One session of the toy space; `configs` maps x -> [(generation, samples), ...]
    (generation -1 is the final re-benchmark)."""
    cache = Cache.open(path, create=True)
    identity = toy_identity(source)
    fingerprint = cache.put_space(identity)
    session = cache.start_session(kernel="toy", shape=SHAPE, dtype="float16", strategy="random", seed=0, budget=None,
                                  seconds=None, fingerprint=fingerprint, device="test-gpu", versions={}, mode="gpu",
                                  options={})
    ordinals: dict[int, int] = {}
    for x, rows in configs.items():
        candidate = make_candidate({"x": x})
        for generation, samples in rows:
            ordinal = ordinals[generation] = ordinals.get(generation, -1) + 1
            cache.record(session, fingerprint, generation, ordinal, candidate,
                         timed(candidate.key, samples, keep_samples=keep_samples))
    cache.end_session(session, "budget", None)
    cache.close()
    return fingerprint


def noisy(center: float, n: int = 100, rel: float = 0.01, seed: int = 0) -> list[float]:
    return (center * (1 + rel * np.random.default_rng(seed).standard_normal(n))).tolist()


def load(path: Path, fingerprint: str):
    cache = Cache.open(path)
    try:
        return cache.measurements(fingerprint), cache.measurements(fingerprint, rebench=True)
    finally:
        cache.close()


def key_of(x: int) -> str:
    return make_candidate({"x": x}).key


# -- rank stability -----------------------------------------------------------------------------
def test_identical_distributions_are_unresolved_and_far_ones_resolved(tmp_path):
    same = noisy(1.0, seed=1)
    fp = write_space(tmp_path / "t.db", {1: [(0, same)], 2: [(0, list(same))], 3: [(0, noisy(1.5, seed=2))]})
    ranks = analyse(*load(tmp_path / "t.db", fp), k=3, resamples=200, seed=0).ranks
    by_key = {c.key: c for c in ranks.top}
    twins = [by_key[key_of(1)], by_key[key_of(2)]]
    slow = by_key[key_of(3)]
    pairs = {frozenset((p.faster, p.slower)): p for p in ranks.pairs}
    twin_pair = pairs[frozenset((key_of(1), key_of(2)))]
    assert not twin_pair.resolved and 0.3 < twin_pair.agreement < 0.7
    assert twin_pair.rel_diff == 0.0
    for twin in twins:  # each wins about half the time, and its rank interval spans both places
        assert 0.2 < twin.p_first < 0.8
        assert twin.rank_low <= 1.5 and twin.rank_high >= 1.5
    for twin in twins:
        far = pairs[frozenset((twin.key, slow.key))]
        assert far.resolved and far.agreement == 1.0 and far.slower == slow.key
    assert slow.rank == 3 and slow.p_first == 0.0 and slow.rank_low == slow.rank_high == 3
    assert ranks.largest_unresolved == 0.0
    assert ranks.smallest_resolved == pytest.approx(statistics.median(noisy(1.5, seed=2)) / statistics.median(same) - 1)


def test_far_apart_configs_keep_their_ranks(tmp_path):
    fp = write_space(tmp_path / "t.db", {x: [(0, noisy(1.0 + 0.2 * x, seed=x))] for x in range(6)})
    ranks = analyse(*load(tmp_path / "t.db", fp), k=3, resamples=100, seed=3).ranks
    assert [c.key for c in ranks.top] == [key_of(0), key_of(1), key_of(2)]
    assert ranks.pool == 6
    for place, config in enumerate(ranks.top, start=1):
        assert config.rank_low == config.rank_high == place
        assert config.p_top == 1.0 and config.p_first == (1.0 if place == 1 else 0.0)
        assert config.ci_low_ms <= config.best_ms <= config.ci_high_ms
        assert config.resolved_from_next is (True if place < 3 else None)
    assert all(p.resolved for p in ranks.pairs) and len(ranks.pairs) == 3
    times = [c.best_ms for c in ranks.top]  # 1.0, 1.2, 1.4 give relative gaps 20%, 40% and 16.7%
    assert ranks.largest_unresolved is None and ranks.smallest_resolved == pytest.approx(times[2] / times[1] - 1)
    assert ranks.smallest_resolved == pytest.approx(1.4 / 1.2 - 1, rel=0.02)


def test_a_close_outsider_can_enter_the_top_k(tmp_path):
    """The bootstrap ranks configs beyond the top k, so one just outside can take a place."""
    same = noisy(1.0, seed=4)
    fp = write_space(tmp_path / "t.db", {0: [(0, noisy(0.5, seed=5))], 1: [(0, same)], 2: [(0, list(same))]})
    ranks = analyse(*load(tmp_path / "t.db", fp), k=2, resamples=200, seed=0).ranks
    second = ranks.top[1]
    assert ranks.top[0].p_top == 1.0
    assert 0.2 < second.p_top < 0.8  # its twin, ranked third, takes its place about half the time


def test_bootstrap_is_deterministic_for_a_seed(tmp_path):
    fp = write_space(tmp_path / "t.db", {x: [(0, noisy(1.0 + 0.002 * x, seed=x))] for x in range(8)})
    data = load(tmp_path / "t.db", fp)
    first = analyse(*data, k=5, seed=7).to_dict()
    assert analyse(*data, k=5, seed=7).to_dict() == first
    other = analyse(*data, k=5, seed=8).to_dict()
    assert [c["ci_low_ms"] for c in other["ranks"]["top"]] != [c["ci_low_ms"] for c in first["ranks"]["top"]]


def test_measurements_without_samples_rank_by_their_median(tmp_path):
    fp = write_space(tmp_path / "t.db", {1: [(0, [2.0, 2.0, 2.2])], 2: [(0, [1.0, 1.1, 1.3])]}, keep_samples=False)
    report = analyse(*load(tmp_path / "t.db", fp), k=2)
    assert [c.key for c in report.ranks.top] == [key_of(2), key_of(1)]
    assert report.ranks.pairs[0].agreement == 1.0
    assert report.within.rel_iqr.count == 0  # no samples, no IQR
    assert report.within.rel_range.count == 2 and report.within.rel_range.max == pytest.approx(0.3 / 1.1)
    assert report.verdict.threshold is None and report.verdict.text.startswith("no verdict")


# -- spreads ---------------------------------------------------------------------------------------
def test_within_measurement_spread_of_known_samples(tmp_path):
    fp = write_space(tmp_path / "t.db", {1: [(0, [1.0, 2.0, 3.0, 4.0, 5.0])], 2: [(0, [10.0, 10.0, 10.0, 10.0])]})
    within = within_spread(collect(*load(tmp_path / "t.db", fp)))
    by_key = {m.key: m for m in within.measurements}
    assert by_key[key_of(1)].rel_iqr == pytest.approx(2.0 / 3.0)  # quartiles 2 and 4 around 3
    assert by_key[key_of(1)].rel_range == pytest.approx(4.0 / 3.0)
    assert by_key[key_of(2)].rel_iqr == 0.0 and by_key[key_of(2)].rel_range == 0.0
    assert within.rel_iqr.count == 2 and within.rel_iqr.max == pytest.approx(2.0 / 3.0)
    assert within.rel_iqr.median == pytest.approx(1.0 / 3.0)


def test_repeat_spread_of_known_medians(tmp_path):
    constant = lambda value: [value] * 5  # noqa: E731 - one median per measurement
    configs = {
        1: [(0, constant(1.00)), (REBENCH, constant(1.02))],  # search then re-benchmark
        2: [(0, constant(2.0)), (1, constant(2.0))],  # repeated exactly
        3: [(0, constant(1.0)), (1, constant(1.1)), (REBENCH, constant(1.2))],
        4: [(0, constant(5.0))],  # measured once: not a repeat
    }
    path = tmp_path / "t.db"
    fp = write_space(path, configs)
    cache = Cache.open(path)  # failed and reused rows are not measurements of the config
    session = cache.start_session(kernel="toy", shape=SHAPE, dtype="float16", strategy="random", seed=1, budget=None,
                                  seconds=None, fingerprint=fp, device="test-gpu", versions={}, mode="gpu", options={})
    cache.record(session, fp, 0, 0, make_candidate({"x": 4}), Result(key=key_of(4), status=Status.RUN_TIMEOUT))
    cache.record(session, fp, 0, 1, make_candidate({"x": 4}),
                 timed(key_of(4), constant(9.0)).as_source(Source.REUSED))
    cache.close()
    report = analyse(*load(path, fp), k=4)
    repeats = {r.key: r for r in report.repeatability.repeats}
    assert set(repeats) == {key_of(1), key_of(2), key_of(3)}
    assert repeats[key_of(1)].kinds == ["search", "rebench"]
    assert repeats[key_of(1)].rel_range == pytest.approx(0.02 / 1.01)
    assert repeats[key_of(1)].cv == pytest.approx(0.02 / math.sqrt(2) / 1.01)
    assert repeats[key_of(2)].rel_range == 0.0 and repeats[key_of(2)].cv == 0.0
    assert repeats[key_of(3)].cv == pytest.approx(0.1 / 1.1)
    assert repeats[key_of(3)].rel_range == pytest.approx(0.2 / 1.1)
    # re-benchmark vs search, per config: 1.02/1.00 - 1 and 1.2/1.05 - 1
    shift = report.repeatability.rebench_shift
    assert shift.count == 2 and shift.median == pytest.approx((0.02 + (1.2 / 1.05 - 1)) / 2)
    # verdict: p90 of the three repeat differences (linear interpolation between the top two)
    low, high = 0.02 / 1.01, 0.2 / 1.1
    expected = low + 0.8 * (high - low)
    assert report.verdict.threshold == pytest.approx(expected)
    assert report.verdict.text.startswith(f"differences under {100 * expected:.1f}% are noise on this space")
    assert "3 configs" in report.verdict.text


def test_verdict_falls_back_on_the_bootstrap_without_repeats(tmp_path):
    fp = write_space(tmp_path / "t.db", {x: [(0, noisy(1.0 + 0.5 * x, rel=0.05, seed=x))] for x in range(4)})
    report = analyse(*load(tmp_path / "t.db", fp), k=4)
    assert report.repeatability.cv.count == 0
    assert report.verdict.threshold == report.ranks.median_ci_rel.p90
    # a median of 100 samples with 5% spread is known to about +-1%: the interval is a few percent wide
    assert 0.005 < report.verdict.threshold < 0.05
    assert "measured twice" in report.verdict.text


def test_repeatability_ignores_configs_measured_once():
    grouped = collect({"a": [Result(key="a", status=Status.OK, median_ms=1.0)]})
    assert repeatability(grouped).repeats == [] and rank_stability(grouped, k=3).k == 1


def test_json_holds_only_finite_numbers(tmp_path):
    fp = write_space(tmp_path / "t.db", {x: [(0, noisy(1.0 + 0.01 * x, seed=x))] for x in range(4)})
    data = analyse(*load(tmp_path / "t.db", fp), k=10).to_dict()
    text = json.dumps(data, allow_nan=False)  # raises on NaN or infinity
    assert json.loads(text)["ranks"]["k"] == 4


# -- command line --------------------------------------------------------------------------------------
def run_noise(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["noise", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "240")


def assert_one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autotune: error: ")
    for fragment in fragments:
        assert fragment in lines[0]


def test_cli_errors_are_one_line(tmp_path, capsys):
    write_space(tmp_path / "t.db", {1: [(0, noisy(1.0))]})
    db = str(tmp_path / "t.db")
    assert_one_line_error(*run_noise(capsys, "toy", "--shape", "8x", "--db", db)[::2], "malformed shape")
    assert_one_line_error(*run_noise(capsys, "toy", "--shape", "4x4", "--db", db)[::2], "no recorded space",
                          "8x8 float16")
    assert_one_line_error(*run_noise(capsys, "toy", "--shape", "8x8", "--dtype", "bfloat16", "--db", db)[::2],
                          "no recorded space")
    assert_one_line_error(*run_noise(capsys, "toy", "--shape", "8x8", "--dtype", "int3", "--db", db)[::2], "dtype")
    assert_one_line_error(*run_noise(capsys, "toy", "--shape", "8x8", "--top", "0", "--db", db)[::2], "--top")
    assert_one_line_error(*run_noise(capsys, "toy", "--shape", "8x8", "--db", str(tmp_path / "none.db"))[::2],
                          "does not exist")
    assert_one_line_error(*run_noise(capsys, "toy", "--db", db)[::2], "--shape")


def test_cli_unknown_kernel_and_kernel_without_data(tmp_path, capsys):
    write_space(tmp_path / "t.db", {1: [(0, noisy(1.0))]})
    db = str(tmp_path / "t.db")
    assert_one_line_error(*run_noise(capsys, "no-such-kernel", "--shape", "8x8", "--db", db)[::2],
                          "unknown kernel 'no-such-kernel'", "toy")
    assert_one_line_error(*run_noise(capsys, "softmax", "--shape", "8x8", "--db", db)[::2],
                          "no recorded measurements for softmax", "toy")


def test_cli_picks_the_space_with_most_data_unless_told(tmp_path, capsys, wide):
    path = tmp_path / "t.db"
    big = write_space(path, {x: [(0, noisy(1.0 + 0.1 * x, seed=x))] for x in range(3)}, source="a")
    small = write_space(path, {x: [(0, noisy(2.0 + 0.1 * x, seed=x))] for x in range(2)}, source="b")
    assert big != small
    code, out, _ = run_noise(capsys, "toy", "--shape", "8x8", "--db", str(path), "--json", "big.json")
    assert code == 0 and big in out
    assert json.loads(Path("big.json").read_text())["space"]["fingerprint"] == big
    code, out, _ = run_noise(capsys, "toy", "--shape", "8x8", "--db", str(path), "--space", small[:6],
                             "--json", "small.json")
    data = json.loads(Path("small.json").read_text())
    assert code == 0 and data["space"]["fingerprint"] == small and data["configs"] == 2
    assert_one_line_error(*run_noise(capsys, "toy", "--shape", "8x8", "--db", str(path), "--space", "zz")[::2],
                          "no recorded space 'zz'", big, small)


def test_cli_on_the_shipped_database(shipped_db, capsys, wide):
    db = shipped_db  # read in place: the built shipped data opens read-only
    code, out, err = run_noise(capsys, "softmax", "--shape", "4096x32000", "--dtype", "float16", "--db", str(db),
                               "--json", "noise.json")
    assert code == 0, err
    for title in ("1. within one measurement", "2. between measurements", "3. rank stability of the top 10",
                  "verdict: differences under"):
        assert title in out
    data = json.loads(Path("noise.json").read_text())
    assert data["space"]["kernel"] == "softmax" and data["space"]["shape"] == [4096, 32000]
    top = data["ranks"]["top"]
    assert len(top) == 10 and [c["rank"] for c in top] == list(range(1, 11))
    bests = [c["best_ms"] for c in top]
    assert bests == sorted(bests) and all(math.isfinite(b) and b > 0 for b in bests)
    for config in top:
        assert 0.0 <= config["p_top"] <= 1.0 and 1 <= config["rank_low"] <= config["rank_high"]
        assert config["ci_low_ms"] <= config["ci_high_ms"] and config["key"] in out
        assert data["top_configs"][config["key"]]  # the native config, for plotting and export
    for spread in (data["within"]["rel_iqr"], data["within"]["rel_range"], data["repeatability"]["rel_range"]):
        assert spread["count"] > 0 and 0 <= spread["median"] <= spread["p90"] <= spread["max"]
    threshold = data["verdict"]["threshold"]
    assert math.isfinite(threshold) and 0 < threshold < 1
    assert len(data["ranks"]["pairs"]) == 45
