"""The one-slot comparison over recorded measurements: which configs pair, which time each side
takes, what counts as near the best, and the command's report and refusals."""

from __future__ import annotations

import json
import math

import pytest
import torch

from autotune.task import bind_live
from autotune.types import Result, Status
from experiments import slot_pairs
from tests.conftest import record_fake_session


def _ok(ms: float) -> Result:
    return Result("k", Status.OK, median_ms=ms)


def test_only_configs_differing_in_the_slot_alone_pair_each_at_its_fastest_accurate_time():
    points = [
        ({"a": 1, "slot": "x"}, _ok(1.2)), ({"a": 1, "slot": "x"}, _ok(1.0)),  # measured twice: 1.0 counts
        ({"a": 1, "slot": "y"}, _ok(0.8)),
        ({"a": 2, "slot": "x"}, _ok(2.0)), ({"a": 2, "slot": "y"}, _ok(2.5)),
        ({"a": 2, "slot": "y"}, Result("k", Status.WRONG_RESULT, median_ms=0.1)),  # inaccurate: never counted
        ({"a": 3, "slot": "x"}, _ok(0.9)),  # no partner
        ({"a": 4, "slot": "z"}, _ok(0.9)), ({"a": 4, "slot": "y"}, _ok(0.9)),  # a third value: not compared
    ]
    every, close = slot_pairs.pair_ratios(points, "slot", "x", "y", near=1.25)
    assert sorted(every) == [pytest.approx(0.8), pytest.approx(1.25)]
    # The fastest config is 0.8 ms, so near the best means both within 1.0 ms: only the a=1 pair.
    assert close == [pytest.approx(1.25)]
    tally = slot_pairs.Tally.of(every)
    assert (tally.pairs, tally.second_faster) == (2, 1) and tally.geomean_first_over_second == pytest.approx(1.0)


def test_totals_weigh_each_space_by_its_pairs():
    tallies = [slot_pairs.Tally.of([2.0, 2.0, 2.0]), slot_pairs.Tally.of([0.5])]
    total = slot_pairs.totals(tallies)
    assert (total.pairs, total.second_faster) == (4, 3)
    assert total.geomean_first_over_second == pytest.approx(math.exp((3 * math.log(2) + math.log(0.5)) / 4))
    assert slot_pairs.totals([]) == slot_pairs.Tally(0, 0, None)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A grid session of softmax-triton recorded into a fresh database (hashed fake costs)."""
    from autotune.kernels import get_kernel

    db = tmp_path_factory.mktemp("pairs") / "user.db"
    task = bind_live(get_kernel("softmax-triton"), (64, 1000), torch.float16, "cpu")
    record_fake_session(task, db, strategy="grid", budget=1000)
    return db


def test_the_report_counts_the_pairs_the_recorded_session_holds(recorded, tmp_path, capsys):
    from autotune.cache import Cache

    code = slot_pairs.main(["--kernels", "softmax-tri*", "--slot", "num_warps", "--values", "4,8", "--near", "100",
                            "--db", str(recorded), "--shipped", "none", "--out", str(tmp_path)])
    assert code == 0, capsys.readouterr().err
    report = json.loads((tmp_path / "slot_pairs_num_warps.json").read_text())
    # Counted here independently, from the session's rows.
    cache = Cache.open(recorded)
    times: dict[tuple, dict[int, float]] = {}
    for row in cache.session_evaluations(1):
        if row.generation >= 0 and row.result.ok:
            rest = tuple(sorted((k, v) for k, v in row.candidate.params.items() if k != "num_warps"))
            warps = row.candidate.params["num_warps"]
            times.setdefault(rest, {})[warps] = min(row.result.median_ms, times.get(rest, {}).get(warps, math.inf))
    cache.close()
    ratios = [t[4] / t[8] for t in times.values() if 4 in t and 8 in t]
    [space] = report["spaces"]
    assert space["kernel"] == "softmax-triton" and space["shape"] == "64x1000"
    assert space["all"]["pairs"] == len(ratios) > 0
    assert space["all"]["second_faster"] == sum(r > 1 for r in ratios)
    assert space["near_best"] == space["all"]  # everything is within 100x of the best
    text = (tmp_path / "slot_pairs_num_warps.md").read_text()
    assert f"| softmax-triton | 64x1000 | float16 | {len(ratios)} |" in text


@pytest.mark.parametrize("argv, words", [
    (["--values", "4"], "two values"),
    (["--values", "4,8", "--near", "0.5"], "at least 1"),
    (["--values", "4,8", "--slot", "no_such_slot"], "no recorded configs"),
])
def test_bad_requests_are_one_line_and_write_nothing(recorded, tmp_path, capsys, argv, words):
    base = {"--kernels": "softmax-triton", "--slot": "num_warps"}
    flags = [x for k, v in base.items() if k not in argv for x in (k, v)]
    code = slot_pairs.main([*flags, *argv, "--db", str(recorded), "--shipped", "none", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())
