"""The `fixed` strategy and labelled lists run through the session: order, labels in the record,
refusals, resumption of a list cut short, and `autotune tune --strategy fixed` end to end."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from autotune.store.cache import Cache
from autotune.evaluators.fake import FakeEvaluator
from autotune.fixed_list import LEGACY_STRATEGY, is_finished, labels_by_key, measure_fixed, unfinished_session
from autotune.strategies import get_strategy
from autotune.strategies.fixed import LABEL_JOIN, FixedList
from autotune.types import Result, Status
from conftest import record_fake_session
from search_spaces.space import params_key


def point(block: int, warps: int, stages: int) -> dict:
    return {"BLOCK_SIZE": block, "num_warps": warps, "num_stages": stages}


A, B, C = point(256, 4, 1), point(512, 2, 3), point(256, 16, 4)
DEFAULT = point(1024, 8, 2)  # the triton softmax's default at 64x1000


def _ok(params) -> Result:
    return Result(key=params_key(params), status=Status.OK, median_ms=1.0)


# -- the strategy ---------------------------------------------------------------------------------
def test_it_asks_the_list_in_order_across_generations_and_then_nothing(triton_task):
    strategy = get_strategy("fixed").from_task(triton_task, configs=[("a", A), ("b", B), ("c", C)], budget=3)
    assert strategy.ask(2) == [A, B]
    strategy.tell([(p, _ok(p)) for p in (A, B)])
    assert strategy.ask(2) == [C]
    assert strategy.ask(2) == [] and strategy.ask(1) == []


def test_a_point_under_several_labels_is_asked_once_and_keeps_every_label(triton_task):
    strategy = FixedList(triton_task.space, configs={"default": DEFAULT, "grid 1": A, "grid 2": dict(DEFAULT)})
    assert strategy.seeds() == [(f"default{LABEL_JOIN}grid 2", DEFAULT), ("grid 1", A)]
    assert strategy.labelled() == [("default", DEFAULT), ("grid 2", DEFAULT), ("grid 1", A)]
    assert strategy.ask(10) == [DEFAULT, A]


def test_partial_points_are_completed_and_json_text_is_read(triton_task):
    strategy = FixedList(triton_task.space, configs=json.dumps({"wide": {"num_warps": 16}}))
    assert strategy.ask(5) == [{**DEFAULT, "num_warps": 16}]


def test_warm_started_configs_are_not_asked_again(triton_task):
    strategy = FixedList(triton_task.space, configs=[("a", A), ("b", B)])
    strategy.warm_start([(dict(A), _ok(A))])  # as a session does with its seeds
    assert strategy.ask(5) == [B]


@pytest.mark.parametrize("configs, words", [
    ({"too big": point(4096, 4, 1)}, ["'too big'", "BLOCK_SIZE"]),
    ({"typo": {"num_warp": 4}}, ["'typo'", "num_warp"]),
    ([("no point", 3)], ["a label and a point"]),
    ("{not json", ["malformed JSON"]),
    ({}, ["needs its configs"]),
])
def test_what_is_not_a_labelled_point_is_refused_by_name(triton_task, configs, words):
    with pytest.raises(ValueError) as refused:
        FixedList(triton_task.space, configs=configs)
    for word in words:
        assert word in str(refused.value)


def test_more_configs_than_the_budget_is_refused(triton_task):
    with pytest.raises(ValueError, match="3 fixed configs but a budget of 2"):
        FixedList.from_task(triton_task, budget=2, configs=[("a", A), ("b", B), ("c", C)])


# -- through the session -------------------------------------------------------------------------
def _times(params) -> float:
    return 0.5 + params["num_warps"] / 16 + params["num_stages"] / 10


def test_a_labelled_list_is_recorded_with_its_labels_as_origins(triton_task, tmp_path):
    configs = [("default", DEFAULT), ("seed 1", A), ("grid 1", B), ("grid 2", A), ("off", point(4096, 4, 1))]
    journal = Cache.open(tmp_path / "j.db", create=True)
    fake = FakeEvaluator(_times, baselines={"torch": 2.0})
    run = measure_fixed(triton_task, fake, configs, journal, options={"experiment": {"study": "x"}})
    keys = {label: triton_task.candidate(p).key for label, p in configs[:3]}
    assert len(fake.calls) == 3 and set(run.results) == set(keys.values())  # A once, "off" never
    assert run.results[keys["grid 1"]].median_ms == pytest.approx(_times(B))
    assert set(run.baselines) == {"torch"} and run.resumed == 0
    session = journal.session(run.session_id)
    assert session["strategy"] == "fixed" and session["exit_reason"] == "strategy finished" and is_finished(session)
    assert session["options"]["labels"] == {keys["default"]: "default", keys["seed 1"]: f"seed 1{LABEL_JOIN}grid 2",
                                            keys["grid 1"]: "grid 1"}
    assert "BLOCK_SIZE" in session["options"]["invalid"]["off"] and session["options"]["experiment"] == {"study": "x"}
    assert journal.origins(run.session_id) == {keys["default"]: "default", keys["seed 1"]: f"seed 1{LABEL_JOIN}grid 2",
                                               keys["grid 1"]: "grid 1"}
    assert {row.generation for row in journal.session_evaluations(run.session_id)} == {0}
    journal.close()


def test_a_list_cut_short_is_resumed_with_only_the_configs_it_lacks(triton_task, tmp_path):
    configs = [("default", DEFAULT)] + [(f"grid {i}", point(b, w, 1)) for i, (b, w) in
                                        enumerate(((256, 1), (256, 2), (512, 4), (512, 8), (1024, 16)), start=1)]
    options = {"experiment": {"study": "x", "job_started": 1.0}}
    journal = Cache.open(tmp_path / "j.db", create=True)
    with pytest.raises(KeyboardInterrupt):
        measure_fixed(triton_task, FakeEvaluator(_times, baselines={"torch": 2.0}, interrupt_after=2), configs, journal, options=options)
    (cut,) = journal.sessions()
    assert cut["exit_reason"] == "interrupted" and cut["evaluations"] == 2 and not is_finished(cut)
    # another run of the same list (another start time) finds it; another list does not
    later = {**options, "experiment": {"study": "x", "job_started": 2.0}}
    assert unfinished_session(journal, triton_task.fingerprint, {**later, "labels": cut["options"]["labels"]},
                              "gpu") == cut["id"]
    assert unfinished_session(journal, triton_task.fingerprint, {**later, "labels": {}}, "gpu") is None

    rest = FakeEvaluator(_times, baselines={"torch": 2.0})
    run = measure_fixed(triton_task, rest, configs, journal, options=later)
    assert run.session_id == cut["id"] and run.resumed == 2 and len(rest.calls) == 4 and len(run.results) == 6
    (done,) = journal.sessions()
    assert is_finished(done) and done["evaluations"] == 6 and set(journal.baselines(session_id=done["id"])) == {"torch"}
    again = measure_fixed(triton_task, FakeEvaluator(_times), configs, journal, options=later)
    assert again.session_id != cut["id"] and again.resumed == 0  # a finished list is measured anew
    journal.close()


def test_a_list_cut_short_before_lists_ran_through_the_session_is_resumed_too(triton_task, tmp_path):
    """Sessions the experiments recorded with their own loop (strategy "experiment", never ended)."""
    configs = [("default", DEFAULT), ("grid 1", A), ("grid 2", B)]
    labels, _ = labels_by_key(triton_task, configs)
    options = {"experiment": {"study": "x"}, "labels": labels, "invalid": {}}
    journal = Cache.open(tmp_path / "j.db", create=True)
    journal.put_space(triton_task.identity)
    old = journal.start_session(
        kernel="softmax-triton", shape=(64, 1000), dtype="float16", strategy=LEGACY_STRATEGY, seed=0, budget=3,
        seconds=None, fingerprint=triton_task.fingerprint, device="cpu", versions={}, mode="gpu", options=options)
    first = triton_task.candidate(A)
    (measured,) = FakeEvaluator(_times).evaluate([first])
    journal.record(old, triton_task.fingerprint, 0, 0, first, measured)
    fake = FakeEvaluator(_times)
    run = measure_fixed(triton_task, fake, configs, journal, options={"experiment": {"study": "x"}})
    assert run.session_id == old and run.resumed == 1 and len(fake.calls) == 2 and len(run.results) == 3
    assert is_finished(journal.session(old))
    journal.close()


# -- through `autotune tune` -----------------------------------------------------------------------
def test_tune_with_the_fixed_strategy_replays_the_given_configs_and_stops(triton_task, tmp_path):
    from autotune.tuning import TuneRequest, run_tune

    shipped = tmp_path / "shipped.db"
    record_fake_session(triton_task, shipped, strategy="grid", budget=72)  # every point recorded
    request = TuneRequest(
        kernel="softmax-triton", shape="64x1000", dtype="float16", strategy="fixed", budget=4, seconds=None, seed=0,
        generation_size=None, db=tmp_path / "user.db", replay=True, space=None, fresh=False, compile_workers=None,
        compile_timeout_s=30.0, seed_from="", shipped=shipped,
        # one labelled config also given as a --config (as the softmax study's Helion pick is): asked no more
        configs=(json.dumps(B),), strategy_options=(("configs", {"picked": B, "a": A, "c": C}),))
    outcome = run_tune(request, Console(quiet=True))
    journal = Cache.open(tmp_path / "user.db")
    session = journal.session(outcome.session_id)
    assert session["strategy"] == "fixed" and session["exit_reason"] == "strategy finished"
    assert session["options"]["strategy_options"]["configs"]["picked"] == B
    rows = journal.session_evaluations(outcome.session_id)
    by_generation = [(r.generation, r.candidate.params) for r in rows if r.generation >= 0]
    assert by_generation == [(0, DEFAULT), (0, B), (1, A), (1, C)]
    assert all(r.result.ok for r in rows)
    journal.close()
