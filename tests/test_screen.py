"""heuristics.screen and random search with a screen: a sample restricted to configs that can fit."""

from __future__ import annotations

import random

import pytest
import torch

from autotune.kernels.registry import get_kernel
from autotune.strategies.random_search import RandomSearch
from autotune.task import bind_live
from heuristics.device import H100
from heuristics.extract import facts_for_task
from heuristics.screen import (
    ACC_ELEMENTS_PER_THREAD_LIMIT,
    STAGED_SMEM_LIMIT,
    FootprintScreen,
    ScreenUnavailable,
    footprint_screen,
)
from search_spaces import Ordinal, PowerOfTwo, SearchSpace

SCREEN = FootprintScreen(m_slot="m", k_slot="k", n_pad=1024, itemsize=2, smem_per_block=232448)


def _point(m: int, k: int, stages: int, warps: int) -> dict:
    return {"m": m, "k": k, "num_stages": stages, "num_warps": warps}


def test_the_footprint_screen_rejects_only_configs_far_past_a_limit_and_says_which():
    # 2 buffers x 64 x (32 + 1024) x 2 B = 270,336 B: over the device's 232,448 B, within twice it.
    assert 232448 < 2 * 64 * (32 + 1024) * 2 <= STAGED_SMEM_LIMIT * 232448
    assert SCREEN.reason(_point(32, 64, 3, 8)) is None
    staged = SCREEN.reason(_point(128, 128, 4, 8))  # 3 x 128 x 1152 x 2 = 884,736 B
    assert staged is not None and "884736 B" in staged and "shared memory" in staged
    # [64, 1024] over 4 warps = 512 fp32 per thread; over 8 warps, 256: at the limit, kept.
    accumulator = SCREEN.reason(_point(64, 16, 1, 4))
    assert accumulator is not None and "512 fp32 per thread" in accumulator
    assert 64 * 1024 / (8 * 32) == ACC_ELEMENTS_PER_THREAD_LIMIT and SCREEN.passes(_point(64, 16, 1, 8))


def _screened_space() -> SearchSpace:
    parameters = (PowerOfTwo(name="m", low=1, high=1024, default_value=32),
                  PowerOfTwo(name="k", low=16, high=512, default_value=32),
                  Ordinal(name="num_stages", choices=(1, 2, 3, 4, 5, 6, 7, 8), default_value=1),
                  PowerOfTwo(name="num_warps", low=1, high=32, default_value=4))
    return SearchSpace(kernel="tiny-matmul", family="triton", parameters=parameters,
                       default={"m": 32, "k": 32, "num_stages": 1, "num_warps": 4})


def test_random_search_with_a_screen_proposes_only_what_passes_deterministically_and_counts_the_rest():
    space = _screened_space()
    first = RandomSearch(space, seed=3, screen=SCREEN)
    batch = first.ask(200)
    assert len(batch) == 200 and all(SCREEN.passes(p) for p in batch)
    assert first.screened > 0
    assert RandomSearch(space, seed=3, screen=SCREEN).ask(200) == batch  # a resume proposes the same
    unscreened = RandomSearch(space, seed=3).ask(200)
    assert any(not SCREEN.passes(p) for p in unscreened)  # the screen, not the space, removed them


def test_on_a_finite_space_the_screen_skips_listed_points_and_the_walk_ends_with_the_passing_ones():
    space = _screened_space()
    rng = random.Random(0)
    finite = space.restricted_to(space.sample(rng) for _ in range(300))
    strategy = RandomSearch(finite, seed=1, screen=SCREEN)
    asked = []
    while batch := strategy.ask(16):
        asked += batch
    passing = {tuple(sorted(m.items())) for m in finite.members if SCREEN.passes(m)}
    assert {tuple(sorted(p.items())) for p in asked} == passing
    assert strategy.screened == len(finite.members) - len(passing) > 0


@pytest.fixture(scope="module")
def layernorm_task():
    return bind_live(get_kernel("matmul-layernorm"), (256, 128, 512), torch.bfloat16, "cpu")


def test_the_screen_is_built_from_a_matmul_epilogue_kernels_facts(layernorm_task):
    screen = footprint_screen(facts_for_task(layernorm_task), layernorm_task.space.names, device=H100)
    assert (screen.n_pad, screen.itemsize, screen.smem_per_block) == (512, 2, H100.smem_per_block)
    assert {screen.m_slot, screen.k_slot} <= set(layernorm_task.space.names)
    strategy = RandomSearch.from_task(layernorm_task, seed=0, screen="footprint")
    assert all(strategy.screen.passes(p) and not layernorm_task.space.violations(p) for p in strategy.ask(32))


def test_a_screen_the_kernel_cannot_have_or_an_unknown_one_is_a_clear_error(triton_task, layernorm_task):
    with pytest.raises(ScreenUnavailable, match="matmul with a row-reduction epilogue"):
        RandomSearch.from_task(triton_task, seed=0, screen="footprint")
    with pytest.raises(ScreenUnavailable, match="unknown screen 'bogus'"):
        RandomSearch.from_task(layernorm_task, seed=0, screen="bogus")
