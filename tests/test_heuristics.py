"""The softmax row rule: facts formed on the right kernels, seeds inside the space and the budget."""

from __future__ import annotations

import pytest
import torch

from autotune.kernels import get_kernel
from autotune.seeds import collect_seeds
from autotune.task import bind_live
from heuristics import seeds_for
from heuristics.softmax import ELEMENTS_PER_THREAD, LONG_ROW, MAX_SEEDS, WARP_CHOICES_LONG, WARP_CHOICES_SHORT, \
    row_reduction_fact


@pytest.fixture(scope="module")
def online_task():
    return bind_live(get_kernel("softmax-online"), (64, 1000), torch.float16, "cpu")


def test_fact_forms_only_for_the_one_row_tile_form(helion_task, triton_task, online_task):
    fact = row_reduction_fact(helion_task.space, helion_task.shape)
    assert fact is not None and fact.row == helion_task.shape[-1]
    assert row_reduction_fact(triton_task.space, triton_task.shape) is None
    assert row_reduction_fact(online_task.space, online_task.shape) is None
    assert seeds_for(triton_task) == [] and seeds_for(online_task) == []


@pytest.mark.parametrize("row", [1000, 4096, 32000, 50257])
def test_seeds_are_valid_points_with_bounded_registers(row):
    task = bind_live(get_kernel("softmax"), (16, row), torch.float16, "cpu")
    seeds = seeds_for(task)
    assert 1 <= len(seeds) <= MAX_SEEDS
    keys = set()
    for seed in seeds:
        assert task.space.violations(seed.params) == []
        keys.add(task.candidate(seed.params).key)  # Helion accepts it
        p = seed.params
        assert p["block_sizes[0]"] == 1  # one row per program
        per_thread = p["reduction_loops[0]"] / (p["num_warps"] * 32)
        assert per_thread <= max(ELEMENTS_PER_THREAD)
        assert p["num_warps"] in (WARP_CHOICES_LONG if row >= LONG_ROW else WARP_CHOICES_SHORT)
        assert seed.rule == "softmax_row" and "elements per thread" in seed.reason
        assert seed.constants["LONG_ROW"] == LONG_ROW
    assert len(keys) == len(seeds), "two seeds normalise to the same config"


def test_heuristic_seeds_reach_the_session_seed_list(helion_task):
    seeds = collect_seeds(helion_task, None, ["heuristic"])
    assert seeds and all(origin == "heuristic" for origin, _ in seeds)
    assert [p for _, p in seeds][: len(seeds_for(helion_task))] == [s.params for s in seeds_for(helion_task)]
