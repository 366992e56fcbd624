"""The default strategy (`auto`): chosen by the strategy-choice experiment, the default of the API
and the command line; the presets that experiment does not support are retired, yet still run."""

from __future__ import annotations

import inspect
import json
import time
from pathlib import Path

import pytest

import autotune
from autotune.cli import build_parser
from autotune.strategies import DEFAULT_STRATEGY, get_strategy, strategy_names
from autotune.strategies.pattern import PatternSearch
from autotune.strategies.pattern_presets import AUTO, PRESETS, RETIRED
from experiments import strategy_choice

REPO = Path(__file__).resolve().parents[1]
REPORT = REPO / "experiments" / "reports" / strategy_choice.JSON_NAME


def test_the_rule_takes_the_smallest_shortfall_then_the_held_out_study_among_level_ones():
    medians = {"spiky": {"a": 1.00, "b": 0.70, "held": 1.00},  # ahead on a, far behind on b
               "steady": {"a": 0.98, "b": 0.95, "held": 0.50},
               "level": {"a": 0.975, "b": 0.955, "held": 0.99}}
    met = {"steady": 3, "level": 5}
    # shortfalls on a, b: spiky 0.255, steady 0.02, level 0.025 (within 0.01): the held-out study decides
    assert strategy_choice.choose(medians, ["a", "b"], met) == "level"
    assert strategy_choice.choose(medians, ["a", "b"], {"steady": 5, "level": 3}) == "steady"
    medians["level"]["a"] = 0.90  # now 0.08 short: no longer level, whatever the study says
    assert strategy_choice.choose(medians, ["a", "b"], met) == "steady"
    assert strategy_choice.choose(medians, ["a", "held"], met) == "spiky"  # "held" fitted: spiky is never short


def test_the_quick_experiment_runs_and_its_report_regenerates_from_its_json(tmp_path):
    started = time.perf_counter()
    strategy_choice.main(["--quick", "--workers", "1", "--out", str(tmp_path)])
    assert time.perf_counter() - started < 60
    report = json.loads((tmp_path / strategy_choice.JSON_NAME).read_text())
    assert report["runs"] == strategy_choice.QUICK["runs"] and report["budget"] == 100
    assert {(r["space"], r["strategy"]) for r in report["results"]} == {
        (s, c) for s in strategy_choice.QUICK["spaces"] for c in strategy_choice.QUICK["candidates"]}
    for result in report["results"]:
        assert len(result["ratios"]) == report["runs"] and all(0 < r <= 1 for r in result["ratios"])
    written = (tmp_path / strategy_choice.MD_NAME).read_text()
    (tmp_path / strategy_choice.MD_NAME).unlink()
    strategy_choice.main(["--markdown-only", "--out", str(tmp_path)])
    assert (tmp_path / strategy_choice.MD_NAME).read_text() == written
    assert f"**Chosen: `{report['chosen']}`**" in written


def test_the_committed_report_regenerates_from_its_json_and_auto_runs_its_choice(tmp_path):
    report = json.loads(REPORT.read_text())
    (tmp_path / strategy_choice.JSON_NAME).write_text(REPORT.read_text())
    strategy_choice.main(["--markdown-only", "--out", str(tmp_path)])
    assert (tmp_path / strategy_choice.MD_NAME).read_text() == (REPORT.with_suffix(".md")).read_text()
    assert report["runs"] == 50 and set(report["spaces"]) == set(strategy_choice.SPACES)
    assert set(report["fit"]).isdisjoint(report["held_out"])
    medians: dict[str, dict[str, float]] = {}
    for result in report["results"]:
        medians.setdefault(result["strategy"], {})[result["space"]] = result["median"]
    assert report["chosen"] == strategy_choice.choose(medians, report["fit"], report["heldout_met"])
    assert AUTO == PRESETS[report["chosen"]]
    assert get_strategy("auto").preset == AUTO


def test_auto_is_the_default_of_the_api_and_of_the_command_line():
    assert DEFAULT_STRATEGY == "auto"
    assert inspect.signature(autotune.tune).parameters["strategy"].default == DEFAULT_STRATEGY
    args = build_parser().parse_args(["tune", "softmax", "--shape", "4096x32000"])
    assert args.strategy == DEFAULT_STRATEGY
    assert issubclass(get_strategy(DEFAULT_STRATEGY), PatternSearch)


@pytest.mark.parametrize("name", RETIRED)
def test_a_retired_preset_is_not_offered_but_still_runs_by_name(name):
    assert name in PRESETS and name not in strategy_names() and name in strategy_names(retired=True)
    strategy = get_strategy(name)
    assert strategy.preset == PRESETS[name]
    from autotune.precheck import check_tune

    args = build_parser().parse_args(["tune", "softmax", "--shape", "4096x32000", "--strategy", name])
    check_tune(args)  # a new session may still name it: it is only not listed


def test_every_preset_offered_or_retired_is_registered():
    offered = set(strategy_names())
    assert set(RETIRED) <= set(PRESETS) and "auto" in offered
    assert set(PRESETS) - set(RETIRED) <= offered


def test_each_retired_presets_recorded_sessions_still_replay():
    """`autotune rerun --strategy NAME` on a retired name: its shipped sessions re-run with today's
    source and ask what they asked (the first one of each here; test_rerun covers the sources)."""
    from autotune.databases import SHIPPED_DB, open_for_reading
    from autotune.simulation.rerun import rerun_session, sessions_of

    cache = open_for_reading(REPO / "no-user.db", REPO / SHIPPED_DB)
    try:
        for name in RETIRED:
            found = sessions_of(cache, name)
            assert found, f"no shipped session of {name}"
            assert rerun_session(cache, found[0]["id"]).same, name
    finally:
        cache.close()
