"""heuristics.transfer: a config recorded at a narrower row keeps the reduction chunk it was
measured with, so a cache seed does not run out of resources at a wider row."""

from __future__ import annotations

import pytest
import torch

from autotune.store.cache import Cache
from autotune.evaluators.fake import FakeEvaluator
from autotune.kernels import get_kernel
from autotune.seeds import collect_seeds
from autotune.session import Session, SessionSettings
from autotune.strategies import get_strategy
from autotune.task import bind_live
from heuristics.facts import REDUCTION_LOOP, RESIDENT, KernelFacts, ReductionFact
from heuristics.extract import facts_for_task
from heuristics.transfer import carry, extent_at, fitting_stages


def facts(extent: int, residency: str = REDUCTION_LOOP, slot: str = "reduction_loops[0]") -> KernelFacts:
    fact = ReductionFact(block_id=1, axis=1, extent=extent, residency=residency, loop_slot=slot, kinds=("max", "sum"),
                         input_itemsize=2, rows=64, row_slot="block_sizes[0]", over_matmul_output=False)
    return KernelFacts(kernel="k", shape=(64, extent), dtype="float16", reductions=(fact,))


@pytest.mark.parametrize("recorded, target, loops, carried", [
    ((1024, 50257), (2048, 100000), [None], [65536]),  # wider: looped in the recorded padded row
    ((64, 1000), (64, 5000), [None], [1024]),
    ((64, 5000), (64, 1000), [None], [None]),  # narrower: whole row, as recorded
    ((64, 1000), (64, 1020), [None], [None]),  # the same padded row
    ((64, 1000), (64, 5000), [256], [256]),  # already looped
])
def test_a_whole_row_grows_into_chunks_of_the_row_it_was_measured_at(recorded, target, loops, carried):
    native = {"reduction_loops": loops, "num_warps": 32}
    assert carry(native, facts(target[1]), recorded, target) == {"reduction_loops": carried, "num_warps": 32}


def test_nothing_is_carried_where_the_reduction_cannot_be_placed():
    native = {"reduction_loops": [None], "num_warps": 8}
    assert carry(native, facts(5000, residency=RESIDENT, slot=None), (64, 1000), (64, 5000)) == native
    assert extent_at(5000, (1000, 1000), (5000, 5000)) is None  # two dimensions match: ambiguous
    assert extent_at(5000, (64, 1000, 3), (64, 5000)) is None
    assert carry(native, facts(5000), (1000, 1000), (5000, 5000)) == native


def test_cache_seeds_from_a_narrower_row_keep_their_measured_chunk(tmp_path):
    narrow = bind_live(get_kernel("softmax"), (64, 1000), torch.float16, "cpu")
    wide = bind_live(get_kernel("softmax"), (64, 5000), torch.float16, "cpu")
    db = Cache.open(tmp_path / "t.db", create=True)
    # at 64x1000 the whole row in one chunk is fastest, so the recorded best are unlooped
    cost = lambda p: 1.0 / p["reduction_loops[0]"] + 1e-6 * p["num_warps"]  # noqa: E731
    settings = SessionSettings("random", 0, 40, generation_size=8, mode="gpu")
    Session(narrow, FakeEvaluator(cost), get_strategy("random")(narrow.space, seed=0), settings, db).run()
    best = [native for native, _ in db.best_configs(narrow.fingerprint, 3)]
    assert best and all(native["reduction_loops"] == [None] for native in best)
    # carried as recorded, each would reduce the wider row in a chunk it was never measured with
    assert all(wide.codec.params_near(native)["reduction_loops[0]"] > 1024 for native in best)

    seeds = collect_seeds(wide, db, ["cache"])
    assert seeds and all(point["reduction_loops[0]"] == 1024 for _, point in seeds)
    assert all(wide.space.violations(point) == [] for _, point in seeds)


# The fastest config recorded at 1024x50257 (shipped data): a whole row, four loop stages.
RECORDED_AT_50257 = {"block_sizes": [1], "num_warps": 32, "num_stages": 3, "pid_type": "persistent_interleaved",
                     "num_sm_multiplier": 4, "range_num_stages": [4], "reduction_loops": [None]}
H100_SMEM = 232448


@pytest.mark.parametrize("stages, staged, fitted", [
    (4, 65536 * 2, 2),  # a 64K-value fp16 row: one staged row fits, three did not (393344 B asked)
    (4, 32768 * 2, 4),  # a 32K-value row: three staged rows fit (192 KiB)
    (3, 32768 * 2, 3),  # never more stages than recorded
    (4, 300_000, 1),  # not even one staged row fits: nothing staged
])
def test_the_stages_kept_are_the_most_whose_staged_rows_fit(stages, staged, fitted):
    assert fitting_stages(stages, staged, H100_SMEM) == fitted


def test_a_whole_row_is_staged_in_no_more_stages_than_shared_memory_holds():
    """The softmax kernel's own facts: the 1024x50257 config carried to a 64K-padded aligned row
    keeps its whole row and two stages; to a 32K-padded row all four; to a wider row it is looped
    in 64K chunks, which its loop does not stage whole, so its stages stay."""
    def carried(columns: int, native=RECORDED_AT_50257, smem=H100_SMEM) -> dict:
        task = bind_live(get_kernel("softmax"), (16, columns), torch.float16, "cpu")
        return carry(native, facts_for_task(task), (1024, 50257), (16, columns), smem)

    assert carried(49152) == {**RECORDED_AT_50257, "range_num_stages": [2]}
    assert carried(24576) == RECORDED_AT_50257
    assert carried(100000) == {**RECORDED_AT_50257, "reduction_loops": [65536]}
    # two rows a program stage twice the bytes; a larger shared memory keeps more stages
    assert carried(24576, {**RECORDED_AT_50257, "block_sizes": [2]})["range_num_stages"] == [2]
    assert carried(49152, smem=3 * 65536 * 2 + 1)["range_num_stages"] == [4]
    # a config that stages nothing (no loop stages, or one) is carried as it is
    for stages in ([0], [1], []):
        plain = {**RECORDED_AT_50257, "range_num_stages": stages}
        assert carried(49152, plain) == plain
