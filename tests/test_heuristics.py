"""Facts read off bound kernels, the composed epilogue fact, and the row-reduction rule."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from autotune.kernels import get_kernel
from autotune.seeds import collect_seeds, heuristic_provenance
from autotune.task import bind_live
from heuristics import analyse, seeds_for
from heuristics import row_reduction as rr
from heuristics.device import H100, DeviceLimits
from heuristics.facts import REDUCTION_LOOP, RESIDENT, USER_TILE, MatmulFact, ReductionFact, compose_epilogue
from search_spaces.helion_space import MAX_ELEMENTS_PER_THREAD

FAMILY_KINDS = {  # what each kernel's epilogue reduces with, as written in its source
    "matmul-rmsnorm": ("mean",), "matmul-layernorm": ("mean", "mean"), "matmul-softmax": ("max", "sum"),
    "matmul-l2norm": ("sum",), "matmul-logsumexp": ("max", "sum"), "matmul-sum": ("sum",), "matmul-max": ("max",),
}
M, K, N = 128, 64, 384


@pytest.fixture(scope="module")
def family_facts():
    facts = {}
    for name in [*FAMILY_KINDS, "matmul"]:
        facts[name] = analyse(bind_live(get_kernel(name), (M, K, N), torch.float16, "cpu"), device=H100).facts
    return facts


@pytest.fixture(scope="module")
def online_task():
    return bind_live(get_kernel("softmax-online"), (64, 1000), torch.float16, "cpu")


# -- facts ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(FAMILY_KINDS))
def test_epilogue_fact_forms_on_every_family_member(family_facts, name):
    facts = family_facts[name]
    assert len(facts.matmuls) == 1 and len(facts.reductions) == 1
    matmul, reduction = facts.matmuls[0], facts.reductions[0]
    assert (matmul.m, matmul.k, matmul.n) == (M, K, N)
    assert matmul.lhs_dtype == matmul.rhs_dtype == "float16"
    # hl.specialize: N is one tile with no slot (Helion still gives a non-power-of-two N a block id)
    assert matmul.n_resident and matmul.n_slot is None
    assert matmul.m_slot == "block_sizes[0]" and matmul.k_slot == "block_sizes[1]"
    assert reduction.extent == N and reduction.axis == 1 and reduction.residency == RESIDENT
    assert reduction.loop_slot is None and reduction.over_matmul_output is True
    assert reduction.kinds == FAMILY_KINDS[name]
    assert reduction.rows == M and reduction.row_slot == "block_sizes[0]"
    assert facts.epilogue is not None and facts.epilogue.matmul == matmul and facts.epilogue.reduction == reduction
    assert facts.epilogue.n_extent == N
    assert facts.compiler_epilogue_fact is True  # Helion's own composed fact agrees


def test_pure_matmul_forms_no_epilogue(family_facts):
    facts = family_facts["matmul"]
    assert len(facts.matmuls) == 1 and facts.reductions == () and facts.epilogue is None
    assert facts.matmuls[0].n_slot == "block_sizes[1]" and not facts.matmuls[0].n_resident
    assert facts.compiler_epilogue_fact is False


def test_pure_reductions_form_no_epilogue(helion_task, online_task):
    facts = analyse(helion_task).facts
    assert facts.matmuls == () and facts.epilogue is None and facts.compiler_epilogue_fact is False
    (reduction,) = facts.reductions
    assert reduction.extent == helion_task.shape[-1] and reduction.axis == 1
    assert reduction.residency == REDUCTION_LOOP and reduction.loop_slot == "reduction_loops[0]"
    assert reduction.kinds == ("max", "sum") and reduction.over_matmul_output is False
    assert reduction.rows == helion_task.shape[0] and reduction.passes == 3
    (online,) = analyse(online_task).facts.reductions
    assert online.residency == USER_TILE and online.loop_slot == "block_sizes[1]"


def test_a_triton_kernel_has_no_facts_and_no_seeds(triton_task):
    analysis = analyse(triton_task)
    assert analysis.facts.all() == [] and analysis.facts.notes
    assert seeds_for(triton_task) == []


def _matmul(**changes):
    base = MatmulFact(m=64, k=32, n=256, lhs_dtype="float16", rhs_dtype="float16", m_block_id=0, n_block_id=None,
                      k_block_id=1, m_slot="block_sizes[0]", n_slot=None, k_slot="block_sizes[1]")
    return dataclasses.replace(base, **changes)


def _reduction(**changes):
    base = ReductionFact(block_id=2, axis=1, extent=256, residency=RESIDENT, loop_slot=None, kinds=("sum",),
                         input_itemsize=2, rows=64, row_slot="block_sizes[0]", over_matmul_output=True)
    return dataclasses.replace(base, **changes)


def test_composition_needs_exactly_one_of_each_over_the_n_axis():
    assert compose_epilogue((_matmul(),), (_reduction(),)) is not None
    assert compose_epilogue((), (_reduction(),)) is None  # pure reduction
    assert compose_epilogue((_matmul(),), ()) is None  # pure matmul
    assert compose_epilogue((_matmul(), _matmul()), (_reduction(),)) is None
    assert compose_epilogue((_matmul(),), (_reduction(), _reduction(block_id=3))) is None
    assert compose_epilogue((_matmul(),), (_reduction(over_matmul_output=False),)) is None
    assert compose_epilogue((_matmul(),), (_reduction(over_matmul_output=None),)) is None  # not known: not formed
    assert compose_epilogue((_matmul(),), (_reduction(extent=64),)) is None  # reduces M, not N
    assert compose_epilogue((_matmul(n_block_id=5, n_slot="block_sizes[2]"),), (_reduction(),)) is None


# -- the row rule ----------------------------------------------------------------------------------
@pytest.mark.parametrize("row", [1000, 4096, 32000, 50257])
def test_row_seeds_are_valid_points_with_bounded_registers(row):
    task = bind_live(get_kernel("softmax"), (16, row), torch.float16, "cpu")
    seeds = seeds_for(task)
    assert 1 <= len(seeds) <= rr.MAX_SEEDS
    keys = set()
    for seed in seeds:
        assert task.space.violations(seed.params) == []
        keys.add(task.candidate(seed.params).key)  # Helion accepts it
        p = seed.params
        assert p["block_sizes[0]"] in (1, rr.FEW_ROWS)
        chunk = min(p["reduction_loops[0]"], 1 << (row - 1).bit_length())
        assert chunk / (p["num_warps"] * 32) <= MAX_ELEMENTS_PER_THREAD
        assert seed.rule == rr.NAME and seed.reason and seed.constants
        assert seed.facts and isinstance(seed.facts[0], ReductionFact)
    assert len(keys) == len(seeds), "two seeds normalise to the same config"


@pytest.fixture(scope="module")
def long_row_task():
    return bind_live(get_kernel("softmax"), (64, 32000), torch.float16, "cpu")


# 64 rows on 2 SMs is many rows per SM (the measured two-pass config's regime, 4096 rows on 132);
# on the H100's 132 SMs they are few.
MANY_ROWS_DEVICE = DeviceLimits("two SMs", H100.smem_per_block, sm_count=2, source="test")


def _rule_seeds(task, device):
    return [s for s in analyse(task, device=device).outcome.seeds if s.rule == rr.NAME]


def _two_pass(seeds):
    return [s for s in seeds if s.params.get("load_eviction_policies[0]") == "last" and s.params["pid_type"] == "flat"]


def test_long_rows_get_the_measured_two_pass_config(long_row_task):
    assert not rr.few_long_rows(64, 32000, MANY_ROWS_DEVICE.sm_count)
    seeds = _rule_seeds(long_row_task, MANY_ROWS_DEVICE)
    padded = 32768
    resident = seeds[0].params
    assert resident["num_warps"] == padded // (32 * rr.RESIDENT_ELEMENTS_PER_THREAD)
    assert resident["reduction_loops[0]"] >= 32000
    two_pass = [s.params for s in _two_pass(seeds)]
    # half the padded row (32 values a thread, the measured best), then 16 values a thread
    assert [p["reduction_loops[0]"] for p in two_pass] == [padded // 2, 16 * 32 * 16] == [16384, 8192]
    for p in two_pass:
        assert (p["num_warps"], p["num_stages"], p["pid_type"]) == (16, 3, "flat")
        evictions = [p[f"load_eviction_policies[{i}]"] for i in range(4)]
        assert evictions == ["last", "last", "first", ""]  # three reads (max, sum, write); the last evicts
    assert not [s for s in seeds if s.params["pid_type"] == rr.PERSISTENT_PID]


@pytest.mark.parametrize("row", [49152, 65536, 131072])
def test_two_pass_chunks_of_wider_rows_stay_at_32_and_16_values_a_thread(row):
    # Half the padded row would be 32768 or more: 64+ values a thread over 16 warps.
    task = bind_live(get_kernel("softmax"), (64, row), torch.float16, "cpu")
    two_pass = _two_pass(_rule_seeds(task, MANY_ROWS_DEVICE))
    assert [s.params["reduction_loops[0]"] for s in two_pass] == [16384, 8192]
    assert [s.constants["TWO_PASS_ELEMENTS_PER_THREAD"] for s in two_pass] == [32, 16]
    assert "32 values a thread" in two_pass[0].reason and "half the padded row" not in two_pass[0].reason
    # With few rows per SM the same values a thread spread over 32 warps: chunks twice as long.
    few = _two_pass(_rule_seeds(task, H100))
    assert [(s.params["reduction_loops[0]"], s.params["num_warps"]) for s in few] == [(32768, 32), (16384, 32)]
    assert [s.constants["TWO_PASS_ELEMENTS_PER_THREAD"] for s in few] == [32, 16]


def test_few_long_rows_get_persistent_programs_with_the_two_pass_chunk_and_hints(long_row_task):
    wide = bind_live(get_kernel("softmax"), (64, 131072), torch.float16, "cpu")
    for task, chunk in ((wide, 32768), (long_row_task, 16384)):  # 32 a thread, or half the padded row
        seeds = _rule_seeds(task, H100)
        (persistent,) = [s.params for s in seeds if s.params["pid_type"] == rr.PERSISTENT_PID]
        first = _two_pass(seeds)[0].params
        assert first["reduction_loops[0]"] == persistent["reduction_loops[0]"] == chunk
        assert persistent["num_warps"] == rr.FEW_ROWS_WARPS == 32
        assert persistent["num_stages"] == rr.PERSISTENT_STAGES
        assert persistent["num_sm_multiplier"] == rr.PERSISTENT_SM_MULTIPLIER
        hints = [f"load_eviction_policies[{i}]" for i in range(4)]
        assert [persistent[h] for h in hints] == [first[h] for h in hints] == ["last", "last", "first", ""]


def test_persistent_seed_only_with_few_rows_per_sm(long_row_task):
    def persistent(device):
        return [s for s in _rule_seeds(long_row_task, device) if s.params["pid_type"] == rr.PERSISTENT_PID]

    at_bound = DeviceLimits("bound", H100.smem_per_block, sm_count=64 // rr.PERSISTENT_MAX_ROWS_PER_SM, source="test")
    past_bound = dataclasses.replace(at_bound, sm_count=64 // rr.PERSISTENT_MAX_ROWS_PER_SM - 1)
    assert rr.few_long_rows(64, 32000, at_bound.sm_count) and not rr.few_long_rows(64, 32000, past_bound.sm_count)
    (seed,) = persistent(at_bound)
    assert seed.params["num_warps"] == rr.FEW_ROWS_WARPS
    assert persistent(past_bound) == []
    assert not rr.few_long_rows(64, rr.LONG_ROW - 1, at_bound.sm_count)  # short rows never


def test_the_row_rule_does_not_fire_on_a_matmul_epilogue(family_facts):
    from heuristics.rules import registered_rules

    row_rule = next(r for r in registered_rules() if r.name == rr.NAME)
    assert not row_rule.applies(family_facts["matmul-softmax"])
    assert not row_rule.applies(family_facts["matmul"])


def test_replayed_tasks_get_the_same_seeds(helion_task):
    replayed = dataclasses.replace(helion_task, bound=None)  # as a replay: no bound kernel
    assert [s.params for s in seeds_for(replayed)] == [s.params for s in seeds_for(helion_task)]


def test_heuristic_seeds_reach_the_session_seed_list(helion_task):
    seeds = collect_seeds(helion_task, None, ["heuristic"])
    assert seeds and all(origin == "heuristic" for origin, _ in seeds)
    assert [p for _, p in seeds][: len(seeds_for(helion_task))] == [s.params for s in seeds_for(helion_task)]


def test_provenance_records_rule_reason_facts_and_constants(helion_task):
    assert heuristic_provenance(helion_task, ["default"]) == {}
    record = heuristic_provenance(helion_task, ["heuristic"])["heuristics"]
    json.dumps(record)  # stored in the session's options
    assert len(record["seeds"]) == len(seeds_for(helion_task))
    for seed in record["seeds"]:
        assert seed["rule"] == rr.NAME and seed["reason"] and seed["constants"]
        assert seed["facts"][0]["fact"] == "ReductionFact" and seed["facts"][0]["extent"] == helion_task.shape[-1]
    assert record["device"]["smem_per_block"] > 0
