"""The folded pattern walk asks, under each preset's options, exactly what that walk's own class
asked before the fold (`tests/pattern_golden.py` recorded it): recorded sessions of the old
names remain runs of today's source."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from autotune.strategies import get_strategy
from autotune.strategies.pattern import PatternSearch
from autotune.strategies.pattern_presets import PRESETS
from pattern_golden import GOLDEN, PRESETS as RECORDED, SPACES, asked_hashes

GOLDEN_RUNS = json.loads(GOLDEN.read_text())["runs"]


def test_every_preset_was_recorded_on_every_space_cold_and_warm():
    assert set(PRESETS) == set(RECORDED)
    assert set(GOLDEN_RUNS) == {f"{p}|{s}|{m}" for p in RECORDED for s in SPACES for m in ("cold", "warm")}


@pytest.mark.parametrize("preset", RECORDED)
@pytest.mark.parametrize("space", SPACES)
@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_pattern_with_a_presets_options_asks_what_its_class_asked(preset, space, warm):
    golden = GOLDEN_RUNS[f"{preset}|{space}|{'warm' if warm else 'cold'}"]
    options = asdict(PRESETS[preset])
    folded = asked_hashes(lambda s, seed: PatternSearch(s, seed=seed, **options), space, warm)
    assert folded == [list(a) for a in golden]
    by_name = asked_hashes(lambda s, seed: get_strategy(preset)(s, seed=seed), space, warm)
    assert by_name == folded


def test_the_presets_differ_somewhere_so_the_records_can_tell_them_apart():
    for i, a in enumerate(RECORDED):
        for b in RECORDED[i + 1:]:
            assert any(GOLDEN_RUNS[f"{a}|{s}|{m}"] != GOLDEN_RUNS[f"{b}|{s}|{m}"]
                       for s in SPACES for m in ("cold", "warm")), (a, b)
