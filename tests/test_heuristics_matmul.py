"""The footprint-capped matmul-epilogue rule, checked against footprint arithmetic done here.

The staged shared-memory footprint of the resident matmul + epilogue kernel is
max(1, num_stages - 1) * K_BLOCK * (M_BLOCK + N_pad) * itemsize (N_pad: N rounded up to a
power of two), capped at a fraction of the device's shared memory per block.  The tests
recompute the expected M_BLOCK, warps and band, the boundaries where the cap starts to bite
and where the rule must decline, and check the rule's seed (or refusal) at and around them,
for 16-bit operands, fp32 on tensor cores (tf32) and IEEE fp32 on CUDA cores.
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
ROWS = 131072  # the M of the checked facts: enough rows that the occupancy steps never bite
CAP = math.floor(H100.smem_per_block * me.STAGED_SMEM_FRACTION)
SMALLEST_M = 16  # tl.dot's smallest M tile


def footprint(stages: int, k_block: int, m_block: int, n: int, itemsize: int) -> int:
    n_pad = 2 ** math.ceil(math.log2(n))
    return max(1, stages - 1) * k_block * (m_block + n_pad) * itemsize


@pytest.fixture(scope="module", params=["fp16", "fp32-tf32", "fp32-ieee"])
def bound(request):
    """One real binding per dtype (the kernels multiply in IEEE precision; tf32 is the same fact
    with the kernel's other precision); other N and M reuse its space, which does not depend on them."""
    dtype = torch.float16 if request.param == "fp16" else torch.float32
    task = bind_live(get_kernel("matmul-rmsnorm"), (M, K, 256), dtype, "cpu")
    facts = analyse(task, device=H100).facts
    if request.param == "fp32-tf32":
        matmul = dataclasses.replace(facts.epilogue.matmul, dot_precision="tf32")
        facts = dataclasses.replace(facts, epilogue=dataclasses.replace(facts.epilogue, matmul=matmul))
    return task, facts, request.param


def itemsize_of(bound) -> int:
    return 2 if bound[2] == "fp16" else 4


def cuda_cores(bound) -> bool:
    return bound[2] == "fp32-ieee"


def expected_m_block(bound, n: int, rows: int = ROWS, sm_count: int = H100.sm_count) -> int:
    """IEEE fp32: the smallest M tile.  Else the largest power of two with m * N_pad * 4 <=
    budget, capped by dtype, at least 16, halved (not below 16) while the grid has fewer than
    MIN_PROGRAMS_PER_SM programs per SM."""
    if cuda_cores(bound):
        return SMALLEST_M
    n_pad = 2 ** math.ceil(math.log2(n))
    cap = 64 if itemsize_of(bound) == 2 else 32
    m = 1
    while m * 2 * n_pad * 4 <= me.ACC_REGISTER_BUDGET_BYTES and m * 2 <= cap:
        m *= 2
    if m >= me.WIDE_M_BLOCK and m * n_pad * 4 > me.WIDE_M_ACC_BUDGET_BYTES:
        m = max(1, me.WIDE_M_ACC_BUDGET_BYTES // (n_pad * 4))  # a power of two: both are
    m = max(m, SMALLEST_M)
    while m // 2 >= SMALLEST_M and math.ceil(rows / m) < me.MIN_PROGRAMS_PER_SM * sm_count:
        m //= 2
    return m


def expected_warps(m_block: int, n: int, rows: int = ROWS, sm_count: int = H100.sm_count) -> int:
    n_pad = 2 ** math.ceil(math.log2(n))
    few_programs = math.ceil(rows / m_block) < me.FEW_PROGRAMS_PER_SM * sm_count
    return 8 if m_block * n_pad > me.WARPS_RAMP_ELEMENTS or few_programs else 4


def expected_band(bound, n: int, m: int, warps: int) -> tuple[int, int] | None:
    """(K_BLOCK, stages).  IEEE fp32: K_BLOCK 32 then 16 at one stage.  Else the wide K_BLOCK 64
    at 3 stages first for 16-bit operands at 8 warps, then K_BLOCK 32 then 16 at 3 stages, then
    fewer stages at 16; the first that fits the cap."""
    itemsize = itemsize_of(bound)
    if cuda_cores(bound):
        bands: tuple[tuple[int, int], ...] = ((32, 1), (16, 1))
    else:
        bands = ((32, 3), (16, 3), (16, 2), (16, 1))
        if itemsize == 2 and warps == 8:
            bands = ((64, 3),) + bands
    for k_block, stages in bands:
        if footprint(stages, k_block, m, n, itemsize) <= CAP:
            return k_block, stages
    return None


def rule_at(bound, n: int, device: DeviceLimits = H100, m: int = ROWS):
    task, facts, _ = bound
    matmul = dataclasses.replace(facts.epilogue.matmul, n=n, m=m)
    epilogue = dataclasses.replace(facts.epilogue, matmul=matmul,
                                   reduction=dataclasses.replace(facts.epilogue.reduction, extent=n))
    return me.emit(dataclasses.replace(facts, epilogue=epilogue), task.space, device)


def boundaries(bound) -> dict[str, int]:
    """Powers of two N where (a) K_BLOCK 32 at the first band's stages first exceeds the cap,
    (b) the first band's stages at K_BLOCK 16 first exceed it, (c) even one buffer at K_BLOCK 16
    exceeds it (the rule declines)."""
    itemsize, stages = itemsize_of(bound), (1 if cuda_cores(bound) else 3)
    found: dict[str, int] = {}
    for exp in range(6, 16):
        n = 2 ** exp
        m = expected_m_block(bound, n)
        if "k_drops" not in found and footprint(stages, 32, m, n, itemsize) > CAP:
            found["k_drops"] = n
        if "stages_drop" not in found and footprint(stages, 16, m, n, itemsize) > CAP:
            found["stages_drop"] = n
        if "declines" not in found and footprint(1, 16, m, n, itemsize) > CAP:
            found["declines"] = n
    return found


def test_the_staged_footprint_counts_num_stages_minus_one_buffers():
    assert [me.staged_buffers(s) for s in (1, 2, 3, 4)] == [1, 1, 2, 3]
    # The recorded case behind it: 2 stages at N = 4096 bf16 compiled on the H100.
    assert 2 * 16 * (16 + 4096) * 2 > H100.smem_per_block >= me.staged_bytes(2, 16, 16, 4096, 2)


def test_boundaries_are_where_the_reasoning_says(bound):
    edges = boundaries(bound)
    if cuda_cores(bound):  # one stage only: where K_BLOCK 16 no longer fits, the rule declines
        assert edges["k_drops"] < edges["stages_drop"] == edges["declines"]
    else:
        assert edges["k_drops"] <= edges["stages_drop"] < edges["declines"]
    if itemsize_of(bound) == 2:  # the feasible range of Helion PR #2846's measurements
        assert edges["declines"] == 8192
    else:
        assert edges["declines"] == 4096


def test_below_the_cap_the_seed_is_the_largest_band(bound):
    itemsize = itemsize_of(bound)
    n = boundaries(bound)["k_drops"] // 2
    seed = rule_at(bound, n)[0]
    p = seed.params
    m = expected_m_block(bound, n)
    assert p["block_sizes[0]"] == m
    stages = 1 if cuda_cores(bound) else 3
    assert footprint(stages, 32, m, n, itemsize) <= CAP
    if itemsize == 2 and expected_warps(m, n) == 8 and footprint(3, 64, m, n, itemsize) <= CAP:
        assert (p["block_sizes[1]"], p["num_stages"]) == (64, 3)
    else:
        assert (p["block_sizes[1]"], p["num_stages"]) == (32, stages)


def test_the_wide_k_band_only_at_eight_warps_with_sixteen_bit_operands(bound):
    itemsize = itemsize_of(bound)
    for n in (256, 512, 1024):
        seed = rule_at(bound, n)[0]
        p = seed.params
        m = expected_m_block(bound, n)
        wide = itemsize == 2 and expected_warps(m, n) == 8 and footprint(3, 64, m, n, itemsize) <= CAP
        assert (p["block_sizes[1]"] == 64) == wide, n
    if itemsize == 2:  # N = 256: 4 warps, no wide band; N = 512: it fits; N = 1024: over the cap
        assert footprint(3, 64, 64, 256, itemsize) <= CAP  # N = 256 would fit: warps decide
        assert footprint(3, 64, 64, 512, itemsize) <= CAP < footprint(3, 64, 64, 1024, itemsize)
        assert [rule_at(bound, n)[0].params["block_sizes[1]"] for n in (256, 512, 1024)] == [32, 64, 32]


def test_a_whole_register_file_accumulator_only_below_the_wide_m_tile(bound):
    """M 64 keeps its accumulator to half the register file (N <= 512 for 16-bit operands);
    at N = 1024 the whole-file budget's M 64 becomes M 32, and N = 2048 keeps M 32's
    whole-file accumulator."""
    if cuda_cores(bound) or itemsize_of(bound) != 2:
        pytest.skip("the M_BLOCK cap is 32 for 32-bit operands")
    m_blocks = [rule_at(bound, n)[0].params["block_sizes[0]"] for n in (512, 1024, 2048)]
    assert m_blocks == [64, 32, 32]
    assert "M_BLOCK 64 would need 262144 B, over the 131072 B allowed from M_BLOCK 64" in rule_at(bound, 1024)[0].reason
    assert "would need" not in rule_at(bound, 512)[0].reason + rule_at(bound, 2048)[0].reason
    assert 64 * 512 * 4 == me.WIDE_M_ACC_BUDGET_BYTES < 64 * 1024 * 4 <= me.ACC_REGISTER_BUDGET_BYTES
    assert 32 * 2048 * 4 == me.ACC_REGISTER_BUDGET_BYTES  # M 32 may take the whole file


def test_ieee_fp32_runs_one_stage_at_the_smallest_m_block(bound):
    for n in (256, 1024, 2048):
        seed = rule_at(bound, n)[0]
        p = seed.params
        if cuda_cores(bound):
            assert (p["block_sizes[0]"], p["num_stages"]) == (SMALLEST_M, me.CUDA_CORE_STAGES) == (16, 1)
            assert seed.constants["cuda_cores"] and "CUDA cores" in seed.reason
        else:
            assert p["num_stages"] > 1 and not seed.constants["cuda_cores"] and "tensor cores" in seed.reason


def test_short_matrices_get_a_smaller_m_block_to_fill_the_sms(bound):
    """M_BLOCK halves while the grid gives fewer than MIN_PROGRAMS_PER_SM programs per SM."""
    if cuda_cores(bound):
        pytest.skip("IEEE fp32 products always take the smallest M_BLOCK")
    n = 256
    m_block = expected_m_block(bound, n)
    wanted = me.MIN_PROGRAMS_PER_SM * H100.sm_count
    enough = math.ceil(wanted) * m_block  # exactly enough rows for the budget's M_BLOCK
    assert rule_at(bound, n, m=enough)[0].params["block_sizes[0]"] == m_block
    assert math.ceil((enough - m_block) / m_block) < wanted
    assert rule_at(bound, n, m=enough - m_block)[0].params["block_sizes[0]"] == m_block // 2
    for rows in (512, 1024):  # the study's square cells: down to the floor
        seed = rule_at(bound, n, m=rows)[0]
        assert seed.params["block_sizes[0]"] == me.MIN_M_BLOCK
        assert seed.constants["sm_count"] == H100.sm_count
    small = DeviceLimits("few SMs", smem_per_block=H100.smem_per_block, sm_count=8, source="test")
    assert rule_at(bound, n, small, m=1024)[0].params["block_sizes[0]"] == m_block  # 8 SMs are full


def test_a_grid_with_fewer_programs_than_sms_gets_eight_warps(bound):
    n = 256  # a small accumulator: the programs alone decide
    for rows, sm_count in ((1024, 132), (ROWS, 132), (1024, 8)):
        device = DeviceLimits("test", smem_per_block=H100.smem_per_block, sm_count=sm_count, source="test")
        m_block = expected_m_block(bound, n, rows, sm_count)
        seed = rule_at(bound, n, device, m=rows)[0]
        assert seed.params["block_sizes[0]"] == m_block
        assert seed.params["num_warps"] == expected_warps(m_block, n, rows, sm_count)
    assert expected_warps(16, 256, 1024) == 8 and expected_warps(16, 256, ROWS) == 4  # both branches checked


def test_where_the_cap_starts_to_bite_k_block_drops_first(bound):
    itemsize = itemsize_of(bound)
    n = boundaries(bound)["k_drops"]
    seed = rule_at(bound, n)[0]
    p = seed.params
    m = expected_m_block(bound, n)
    stages = 1 if cuda_cores(bound) else 3
    assert footprint(stages, 32, m, n, itemsize) > CAP  # why it dropped
    assert p["block_sizes[0]"] == m and p["block_sizes[1]"] == 16
    bands = (1,) if cuda_cores(bound) else (3, 2, 1)
    expected_stages = next(s for s in bands if footprint(s, 16, m, n, itemsize) <= CAP)
    assert p["num_stages"] == expected_stages
    assert seed.constants["staged_bytes"] == footprint(p["num_stages"], 16, m, n, itemsize) <= CAP


def test_past_the_feasible_range_the_rule_declines(bound):
    edge = boundaries(bound)["declines"]
    last = rule_at(bound, edge // 2)
    assert not isinstance(last, Declined)
    seed = last[0]
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
    m = expected_m_block(bound, n)
    if isinstance(result, Declined):
        assert footprint(1, 16, m, n, itemsize) > CAP
        return
    seed = result[0]
    p = seed.params
    k_block, stages = p["block_sizes[1]"], p["num_stages"]
    warps = expected_warps(m, n)
    assert p["block_sizes[0]"] == m
    assert p["num_warps"] == warps
    assert (k_block, stages) == expected_band(bound, n, m, warps)
    assert footprint(stages, k_block, m, n, itemsize) <= CAP
    if k_block == 16:  # K_BLOCK dropped: 32 at the most stages did not fit
        assert footprint(1 if cuda_cores(bound) else 3, 32, m, n, itemsize) > CAP
    if stages < 3 and not cuda_cores(bound):  # stages dropped only at the smallest K_BLOCK
        assert k_block == 16 and footprint(stages + 1, 16, m, n, itemsize) > CAP
    assert m * 2 ** math.ceil(math.log2(n)) * 4 <= me.REGISTER_FILE_BYTES
    assert task.space.violations(p) == []
    task.candidate(p)  # Helion accepts it
    assert seed.rule == me.NAME and seed.facts and seed.constants["staged_cap"] == CAP


def test_the_cap_follows_the_device(bound):
    """A device with half the shared memory per block declines where the H100 still fits."""
    itemsize = itemsize_of(bound)
    small = DeviceLimits("small", smem_per_block=H100.smem_per_block // 2, sm_count=132, source="test")
    small_cap = math.floor(small.smem_per_block * me.STAGED_SMEM_FRACTION)
    n = boundaries(bound)["declines"] // 2
    assert footprint(1, 16, expected_m_block(bound, n), n, itemsize) > small_cap
    assert not isinstance(rule_at(bound, n), Declined)
    declined = rule_at(bound, n, small)
    assert isinstance(declined, Declined) and str(small_cap) in declined.reason


def test_a_tiled_n_is_declined_not_seeded(bound):
    task, facts, _ = bound
    tiled = dataclasses.replace(facts.epilogue.matmul, n_block_id=7, n_slot="block_sizes[2]")
    result = me.emit(dataclasses.replace(facts, epilogue=dataclasses.replace(facts.epilogue, matmul=tiled)),
                     task.space, H100)
    assert isinstance(result, Declined) and "tiled" in result.reason


def test_the_fact_carries_the_kernels_dot_precision(bound):
    assert bound[1].epilogue.matmul.dot_precision == ("tf32" if bound[2] == "fp32-tf32" else "ieee")


@pytest.mark.parametrize("n,declines", [(1024, False), (8192, True)])
def test_real_bindings_at_the_edges(n, declines):
    task = bind_live(get_kernel("matmul-softmax"), (256, 128, n), torch.float16, "cpu")
    outcome = analyse(task, device=H100).outcome
    if declines:
        assert outcome.seeds == () and [d.rule for d in outcome.declined] == [me.NAME]
    else:
        seed = outcome.seeds[0]
        assert task.space.violations(seed.params) == [] and seed.params["block_sizes[1]"] == 32
        assert seed.params["num_warps"] == 8  # 256 rows: 16 programs for 132 SMs
        assert outcome.fired == (me.NAME,)


def with_descriptors(space):
    """The space as a GPU that has tensor descriptors offers it (the CPU space offers pointers
    only): every indexing slot may also be a descriptor, built on the device or the host."""
    from search_spaces.space import SearchSpace

    data = space.to_dict()
    for parameter in data["parameters"]:
        if parameter["name"].startswith("indexing["):
            parameter["choices"] = ["pointer", me.TMA]
    data["parameters"].append({"name": me.HOST_DESCRIPTORS, "kind": "choice", "choices": [False, True],
                               "default": False})
    data["default"] = {**data["default"], me.HOST_DESCRIPTORS: False}
    return SearchSpace.from_dict(data)


def rule_in(bound, space, n: int):
    task, facts, _ = bound
    matmul = dataclasses.replace(facts.epilogue.matmul, n=n, m=ROWS)
    epilogue = dataclasses.replace(facts.epilogue, matmul=matmul,
                                   reduction=dataclasses.replace(facts.epilogue.reduction, extent=n))
    return me.emit(dataclasses.replace(facts, epilogue=epilogue), space, H100)


@pytest.mark.parametrize("n", [512, 1024, 1536, 2048, 3072, 4096])
def test_descriptors_at_the_smallest_m_tile_only_past_half_the_register_file(bound, n):
    """Where descriptors are offered, 16-bit operands on tensor cores whose accumulator at the
    register-file-capped M tile would take over half the file get M 16 and every indexing slot a
    descriptor built on the host, with the K band and stages that fit at M 16; elsewhere the seed is the one the
    space without descriptors gets.  Tensor-core products take the persistent program order."""
    task = bound[0]
    space = with_descriptors(task.space)
    found, without = rule_in(bound, space, n), rule_in(bound, task.space, n)
    if isinstance(without, Declined):  # past the feasible range descriptors change nothing
        assert isinstance(found, Declined)
        return
    seed, plain = found[0], without[0]
    m = expected_m_block(bound, n)
    n_pad = 2 ** math.ceil(math.log2(n))
    indexing = {k: v for k, v in seed.params.items() if k.startswith("indexing[")}
    assert indexing
    if itemsize_of(bound) == 2 and m * n_pad * 4 > me.REGISTER_FILE_BYTES // 2:
        warps = expected_warps(SMALLEST_M, n)
        assert seed.params["block_sizes[0]"] == SMALLEST_M and set(indexing.values()) == {me.TMA}
        assert seed.params[me.HOST_DESCRIPTORS] is True and "built on the host" in seed.reason
        assert (seed.params["block_sizes[1]"], seed.params["num_stages"]) == expected_band(bound, n, SMALLEST_M, warps)
        assert "tensor_descriptor" in seed.reason
    else:
        assert set(indexing.values()) == {"pointer"} and seed.params[me.HOST_DESCRIPTORS] is False
        assert {k: v for k, v in seed.params.items() if k not in ("pid_type", me.HOST_DESCRIPTORS)} == {
            k: v for k, v in plain.params.items() if k != "pid_type"}
    assert seed.params["pid_type"] == ("flat" if cuda_cores(bound) else me.PROGRAM_ORDER)
    assert space.violations(seed.params) == []


@pytest.mark.parametrize("n", [512, 1024, 1536, 2048, 3072, 4096])
def test_the_other_program_orders_and_the_budgets_m_tile_follow_the_rules_choice(bound, n):
    """The rule's third revision: after its choice, the same tile in the two other program orders;
    where descriptors dropped the M tile to 16, then the register budget's M tile with descriptors,
    its own warps and band, in the rule's order.  IEEE fp32 products keep the one seed (no order)."""
    space = with_descriptors(bound[0].space)
    found = rule_in(bound, space, n)
    if isinstance(found, Declined):
        return
    first = found[0]
    assert all(space.violations(seed.params) == [] for seed in found)
    assert len({repr(sorted(seed.params.items())) for seed in found}) == len(found)
    if cuda_cores(bound):
        assert len(found) == 1 and first.params["pid_type"] == "flat"
        return
    assert [seed.params["pid_type"] for seed in found[:3]] == list(me.PROGRAM_ORDERS)
    assert me.PROGRAM_ORDERS[0] == me.PROGRAM_ORDER
    for seed in found[1:3]:
        assert {k: v for k, v in seed.params.items() if k != "pid_type"} == {
            k: v for k, v in first.params.items() if k != "pid_type"}
        assert "program-order variants" in seed.reason
    m = expected_m_block(bound, n)
    n_pad = 2 ** math.ceil(math.log2(n))
    descriptors = itemsize_of(bound) == 2 and m * n_pad * 4 > me.REGISTER_FILE_BYTES // 2
    if not descriptors or m == SMALLEST_M:
        assert len(found) == 3
        return
    (variant,) = found[3:]
    warps = expected_warps(m, n)
    assert variant.params["block_sizes[0]"] == m > first.params["block_sizes[0]"] == SMALLEST_M
    assert (variant.params["block_sizes[1]"], variant.params["num_stages"]) == expected_band(bound, n, m, warps)
    assert variant.params["num_warps"] == warps and variant.params["pid_type"] == me.PROGRAM_ORDER
    assert {v for k, v in variant.params.items() if k.startswith("indexing[")} == {me.TMA}
    assert variant.params[me.HOST_DESCRIPTORS] is True and "M-tile variant" in variant.reason


def test_without_the_persistent_order_in_the_space_the_rule_proposes_no_order(bound):
    """A space that does not offer PROGRAM_ORDER gets the one seed in the space's default order."""
    from search_spaces.space import SearchSpace

    data = bound[0].space.to_dict()
    pid = next(p for p in data["parameters"] if p["name"] == "pid_type")
    pid["choices"] = ["flat", "persistent_blocked"]
    space = SearchSpace.from_dict(data)
    found = rule_in(bound, space, 1024)
    assert len(found) == 1 and found[0].params["pid_type"] == space.default["pid_type"]
