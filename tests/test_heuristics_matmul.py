"""The footprint-capped matmul-epilogue rule, checked against footprint arithmetic done here.

The staged shared-memory footprint of the resident matmul + epilogue kernel is
num_stages * K_BLOCK * (M_BLOCK + N_pad) * itemsize (N_pad: N rounded up to a power of two),
capped at a fraction of the device's shared memory per block.  The tests recompute the
expected M_BLOCK, the boundaries where the cap starts to bite and where the rule must
decline, and check the rule's seed (or refusal) at and around them.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from autotune.kernels import get_kernel
from autotune.task import bind_live
from heuristics import analyse
from heuristics import matmul_epilogue as me
from heuristics.device import H100, DeviceLimits
from heuristics.rules import Declined

M, K = 4096, 512
ROWS = 131072  # the M of the checked facts: enough rows that the occupancy step never bites
CAP = math.floor(H100.smem_per_block * me.STAGED_SMEM_FRACTION)
WIDE_CAP = math.floor(H100.smem_per_block * me.WIDE_K_SMEM_FRACTION)


def footprint(stages: int, k_block: int, m_block: int, n: int, itemsize: int) -> int:
    n_pad = 2 ** math.ceil(math.log2(n))
    return stages * k_block * (m_block + n_pad) * itemsize


def expected_m_block(n: int, itemsize: int) -> int:
    """Largest power of two with m * N_pad * 4 <= budget, capped by dtype, at least 16 (the space's minimum)."""
    n_pad = 2 ** math.ceil(math.log2(n))
    cap = 64 if itemsize == 2 else 32
    m = 1
    while m * 2 * n_pad * 4 <= me.ACC_REGISTER_BUDGET_BYTES and m * 2 <= cap:
        m *= 2
    return max(m, 16)


@pytest.fixture(scope="module", params=[torch.float16, torch.float32], ids=["fp16", "fp32"])
def bound(request):
    """One real binding per dtype; other N reuse its space (the space does not depend on N)."""
    task = bind_live(get_kernel("matmul-rmsnorm"), (M, K, 256), request.param, "cpu")
    return task, analyse(task, device=H100).facts


def expected_warps(m: int, n: int) -> int:
    n_pad = 2 ** math.ceil(math.log2(n))
    return 4 if m * n_pad <= me.WARPS_RAMP_ELEMENTS else 8


def expected_band(n: int, itemsize: int, m: int) -> tuple[int, int] | None:
    """(K_BLOCK, stages): the wide K_BLOCK 64 at 3 stages for 16-bit operands at 8 warps when it
    fits its higher cap, else K_BLOCK 32 then 16 at 3 stages, then fewer stages at 16."""
    if itemsize == 2 and expected_warps(m, n) == 8 and footprint(3, 64, m, n, itemsize) <= WIDE_CAP:
        return 64, 3
    for k_block, stages in ((32, 3), (16, 3), (16, 2), (16, 1)):
        if footprint(stages, k_block, m, n, itemsize) <= CAP:
            return k_block, stages
    return None


def rule_at(bound, n: int, device: DeviceLimits = H100, m: int = ROWS):
    task, facts = bound
    matmul = dataclasses.replace(facts.epilogue.matmul, n=n, m=m)
    epilogue = dataclasses.replace(facts.epilogue, matmul=matmul,
                                   reduction=dataclasses.replace(facts.epilogue.reduction, extent=n))
    return me.emit(dataclasses.replace(facts, epilogue=epilogue), task.space, device)


def itemsize_of(bound) -> int:
    return 2 if bound[0].dtype == "float16" else 4


def boundaries(itemsize: int) -> dict[str, int]:
    """Powers of two N where (a) K_BLOCK 32 at 3 stages first exceeds the cap, (b) 3 stages at
    K_BLOCK 16 first exceed it, (c) even 1 stage at K_BLOCK 16 exceeds it (the rule declines)."""
    found: dict[str, int] = {}
    for exp in range(6, 16):
        n = 2 ** exp
        m = expected_m_block(n, itemsize)
        if "k_drops" not in found and footprint(3, 32, m, n, itemsize) > CAP:
            found["k_drops"] = n
        if "stages_drop" not in found and footprint(3, 16, m, n, itemsize) > CAP:
            found["stages_drop"] = n
        if "declines" not in found and footprint(1, 16, m, n, itemsize) > CAP:
            found["declines"] = n
    return found


def test_boundaries_are_where_the_reasoning_says(bound):
    edges = boundaries(itemsize_of(bound))
    assert edges["k_drops"] <= edges["stages_drop"] < edges["declines"]
    if itemsize_of(bound) == 2:  # the feasible range of Helion PR #2846's measurements
        assert edges["declines"] == 8192
    else:
        assert edges["declines"] == 4096


def test_below_the_cap_the_seed_is_the_largest_band(bound):
    itemsize = itemsize_of(bound)
    n = boundaries(itemsize)["k_drops"] // 2
    (seed,) = rule_at(bound, n)
    p = seed.params
    m = expected_m_block(n, itemsize)
    assert p["block_sizes[0]"] == m
    assert footprint(3, 32, m, n, itemsize) <= CAP
    if itemsize == 2 and expected_warps(m, n) == 8:  # fp16 at N = 512: the wide band fits its cap
        assert footprint(3, 64, m, n, itemsize) <= WIDE_CAP
        assert (p["block_sizes[1]"], p["num_stages"], seed.constants["staged_cap"]) == (64, 3, WIDE_CAP)
    else:
        assert (p["block_sizes[1]"], p["num_stages"]) == (32, 3)


def test_the_wide_k_band_only_at_eight_warps_with_sixteen_bit_operands(bound):
    itemsize = itemsize_of(bound)
    for n in (256, 512, 1024):
        (seed,) = rule_at(bound, n)
        p = seed.params
        m = expected_m_block(n, itemsize)
        wide = itemsize == 2 and expected_warps(m, n) == 8 and footprint(3, 64, m, n, itemsize) <= WIDE_CAP
        assert (p["block_sizes[1]"] == 64) == wide, n
    if itemsize == 2:  # N = 256: 4 warps, no wide band; N = 1024: over even the higher cap
        assert footprint(3, 64, 64, 256, itemsize) <= CAP  # N = 256 would fit even the lower cap: warps decide
        assert footprint(3, 64, 64, 512, itemsize) > CAP  # N = 512 needs the higher cap
        assert [rule_at(bound, n)[0].params["block_sizes[1]"] for n in (256, 512, 1024)] == [32, 64, 16]


def test_short_matrices_get_a_smaller_m_block_to_fill_the_sms(bound):
    """M_BLOCK halves while the grid gives fewer than MIN_PROGRAMS_PER_SM programs per SM."""
    itemsize = itemsize_of(bound)
    n = 256
    m_block = expected_m_block(n, itemsize)
    wanted = me.MIN_PROGRAMS_PER_SM * H100.sm_count
    enough = math.ceil(wanted) * m_block  # exactly enough rows for the budget's M_BLOCK
    assert rule_at(bound, n, m=enough)[0].params["block_sizes[0]"] == m_block
    assert math.ceil((enough - m_block) / m_block) < wanted
    assert rule_at(bound, n, m=enough - m_block)[0].params["block_sizes[0]"] == m_block // 2
    for rows in (512, 1024):  # the study's square cells: down to the floor
        (seed,) = rule_at(bound, n, m=rows)
        assert seed.params["block_sizes[0]"] == me.MIN_M_BLOCK_FOR_OCCUPANCY
        assert seed.constants["sm_count"] == H100.sm_count
    small = DeviceLimits("few SMs", smem_per_block=H100.smem_per_block, sm_count=8, source="test")
    assert rule_at(bound, n, small, m=1024)[0].params["block_sizes[0]"] == m_block  # 8 SMs are full


def test_where_the_cap_starts_to_bite_k_block_drops_first(bound):
    itemsize = itemsize_of(bound)
    n = boundaries(itemsize)["k_drops"]
    (seed,) = rule_at(bound, n)
    p = seed.params
    m = expected_m_block(n, itemsize)
    assert footprint(3, 32, m, n, itemsize) > CAP  # why it dropped
    assert p["block_sizes[0]"] == m and p["block_sizes[1]"] == 16
    expected_stages = next(s for s in (3, 2, 1) if footprint(s, 16, m, n, itemsize) <= CAP)
    assert p["num_stages"] == expected_stages
    assert seed.constants["staged_bytes"] == footprint(p["num_stages"], 16, m, n, itemsize) <= CAP


def test_past_the_feasible_range_the_rule_declines(bound):
    itemsize = itemsize_of(bound)
    edge = boundaries(itemsize)["declines"]
    last = rule_at(bound, edge // 2)
    assert not isinstance(last, Declined)
    (seed,) = last
    assert seed.params["block_sizes[1]"] == 16 and seed.params["num_stages"] >= 1
    for n in (edge, edge + edge // 2, 2 * edge):
        result = rule_at(bound, n)
        assert isinstance(result, Declined), n
        assert result.rule == me.NAME and str(CAP) in result.reason and "shared memory" in result.reason


@pytest.mark.parametrize("n", [128, 256, 384, 512, 768, 1000, 1024, 1536, 2048, 3000, 4096, 6000, 8192])
def test_every_seed_fits_and_is_the_largest_fitting_band(bound, n):
    itemsize = itemsize_of(bound)
    task = bound[0]
    result = rule_at(bound, n)
    m = expected_m_block(n, itemsize)
    if isinstance(result, Declined):
        assert footprint(1, 16, m, n, itemsize) > CAP
        return
    (seed,) = result
    p = seed.params
    k_block, stages = p["block_sizes[1]"], p["num_stages"]
    assert p["block_sizes[0]"] == m
    assert (k_block, stages) == expected_band(n, itemsize, m)
    cap = WIDE_CAP if k_block == 64 else CAP
    assert footprint(stages, k_block, m, n, itemsize) <= cap
    if k_block == 16:  # K_BLOCK dropped: 32 at the most stages did not fit
        assert footprint(3, 32, m, n, itemsize) > CAP
    if stages < 3:  # stages dropped only at the smallest K_BLOCK, and one more would not fit
        assert k_block == 16 and footprint(stages + 1, 16, m, n, itemsize) > CAP
    assert p["num_warps"] == expected_warps(m, n)
    assert task.space.violations(p) == []
    task.candidate(p)  # Helion accepts it
    assert seed.rule == me.NAME and seed.facts and seed.constants["staged_cap"] == cap


def test_the_cap_follows_the_device(bound):
    """A device with half the shared memory per block declines where the H100 still fits."""
    itemsize = itemsize_of(bound)
    small = DeviceLimits("small", smem_per_block=H100.smem_per_block // 2, sm_count=100, source="test")
    small_cap = math.floor(small.smem_per_block * me.STAGED_SMEM_FRACTION)
    n = boundaries(itemsize)["declines"] // 2
    assert footprint(1, 16, expected_m_block(n, itemsize), n, itemsize) > small_cap
    assert not isinstance(rule_at(bound, n), Declined)
    declined = rule_at(bound, n, small)
    assert isinstance(declined, Declined) and str(small_cap) in declined.reason


def test_a_tiled_n_is_declined_not_seeded(bound):
    task, facts = bound
    tiled = dataclasses.replace(facts.epilogue.matmul, n_block_id=7, n_slot="block_sizes[2]")
    result = me.emit(dataclasses.replace(facts, epilogue=dataclasses.replace(facts.epilogue, matmul=tiled)),
                     task.space, H100)
    assert isinstance(result, Declined) and "tiled" in result.reason


@pytest.mark.parametrize("n,declines", [(1024, False), (8192, True)])
def test_real_bindings_at_the_edges(n, declines):
    task = bind_live(get_kernel("matmul-softmax"), (256, 128, n), torch.float16, "cpu")
    outcome = analyse(task, device=H100).outcome
    if declines:
        assert outcome.seeds == () and [d.rule for d in outcome.declined] == [me.NAME]
    else:
        (seed,) = outcome.seeds
        assert task.space.violations(seed.params) == [] and seed.params["block_sizes[1]"] == 16
        assert outcome.fired == (me.NAME,)
