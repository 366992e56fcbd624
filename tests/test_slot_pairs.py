"""The one-slot comparison over recorded measurements: which configs pair, which time each side
takes, what counts as near the best, and the command's report and refusals."""

from __future__ import annotations

import json
import math
import statistics

import pytest
import torch

from autotune.simulation.oracle import Oracle
from autotune.task import bind_live
from autotune.types import Result, Status
from experiments import slot_pairs
from tests.conftest import record_fake_session


def _row(point: dict, ms: float, status: Status = Status.OK) -> tuple[dict, Result]:
    return point, Result(json.dumps(point, sort_keys=True), status, median_ms=ms)


def test_only_configs_differing_in_the_slot_alone_pair_each_at_the_oracles_answer():
    rows = [
        _row({"a": 1, "slot": "x"}, 1.2), _row({"a": 1, "slot": "x"}, 1.0),  # measured twice: the median, 1.1
        _row({"a": 1, "slot": "y"}, 0.8),
        _row({"a": 2, "slot": "x"}, 2.0), _row({"a": 2, "slot": "y"}, 2.5),
        _row({"a": 2, "slot": "y"}, 0.1, Status.WRONG_RESULT),  # inaccurate: never counted
        _row({"a": 3, "slot": "x"}, 0.9),  # no partner
        _row({"a": 3, "slot": "y"}, 0.2, Status.WRONG_RESULT),  # its partner never ran accurately
        _row({"a": 4, "slot": "z"}, 0.9), _row({"a": 4, "slot": "y"}, 0.9),  # a third value: not compared
        _row({"a": 5, "slot": "x", "old": 1}, 0.1), _row({"a": 5, "slot": "y", "old": 1}, 9.0),  # another space's
    ]
    times = slot_pairs.accurate_times(Oracle.from_rows(rows, ["a", "slot"]))
    # The replay's and the simulation's answer for the twice-measured config, read the same way.
    assert times[json.dumps({"a": 1, "slot": "x"}, sort_keys=True)][1] == pytest.approx(1.1)
    every, close = slot_pairs.pair_ratios(times, "slot", "x", "y", near=1.5)
    assert sorted(every) == [pytest.approx(0.8), pytest.approx(1.375)]
    # The fastest config is 0.8 ms, so near the best means both within 1.2 ms: only the a=1 pair.
    assert close == [pytest.approx(1.375)]
    tally = slot_pairs.Tally.of(every)
    assert (tally.pairs, tally.second_faster) == (2, 1)
    assert tally.geomean_first_over_second == pytest.approx(math.sqrt(0.8 * 1.375))


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
    from autotune.store.cache import Cache

    code = slot_pairs.main(["--kernels", "softmax-tri*", "--slot", "num_warps", "--values", "4,8", "--near", "100",
                            "--db", str(recorded), "--shipped", "none", "--out", str(tmp_path)])
    assert code == 0, capsys.readouterr().err
    report = json.loads((tmp_path / "slot_pairs_num_warps.json").read_text())
    # Counted here independently, from the session's rows.
    cache = Cache.open(recorded)
    measured: dict[tuple, dict[int, list[float]]] = {}
    for row in cache.session_evaluations(1):
        if row.generation >= 0 and row.result.ok:
            rest = tuple(sorted((k, v) for k, v in row.candidate.params.items() if k != "num_warps"))
            warps = row.candidate.params["num_warps"]
            measured.setdefault(rest, {}).setdefault(warps, []).append(row.result.median_ms)
    cache.close()
    times = {rest: {w: statistics.median(ms) for w, ms in by_warps.items()} for rest, by_warps in measured.items()}
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
