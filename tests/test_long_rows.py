"""The long-row report: read back from recorded study sessions, each kernel's best as a share
of the copy measured in its own session, the target verdict at the long rows, and the best
before the new formulation beside the best with it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from autotune.store.cache import Cache
from autotune.evaluators.fake import FakeEvaluator
from autotune.kernels import get_kernel
from autotune.session import Session, SessionSettings
from autotune.strategies import get_strategy
from autotune.task import bind_live
from experiments import long_rows
from experiments.softmax_study import definition as d

# Stand-ins for a long-row shape, a long row declared later to judge a revision, and one of seed 000's
LONG, JUDGE, SHORT = "8x4096", "4x8192", "32x128"
COPY_MS = {LONG: 0.10, JUDGE: 0.05, SHORT: 0.004}
# kernel -> (shape -> the fake time of every config, in copies): at LONG the new kernel
# reaches 0.95 of copy (target met), at JUDGE 0.85 (not met), at SHORT it loses to the persistent one.
TIMES = {"softmax-resident": {LONG: 1 / 0.95, JUDGE: 1 / 0.85, SHORT: 2.0},
         "softmax-persistent": {LONG: 1.25, JUDGE: 1.5, SHORT: 1.5}}


def _record(cache: Cache, kernel: str, shape: str) -> None:
    dims = tuple(int(x) for x in shape.split("x"))
    task = bind_live(get_kernel(kernel), dims, torch.float16, "cpu")
    copy_ms = COPY_MS[shape]
    evaluator = FakeEvaluator(lambda p: copy_ms * TIMES[kernel][shape],
                              baselines={"torch.softmax": copy_ms * 2.0, "device copy": copy_ms})
    tags = {"study": d.STUDY, "method": d.method_of(kernel), "job_started": time.time() - 2}
    strategy = get_strategy("random")(task.space, seed=0)
    Session(task, evaluator, strategy, SessionSettings("random", 0, 3, generation_size=3, mode="gpu"), cache,
            options={"experiment": tags}).run()


@pytest.fixture(scope="module")
def summary(tmp_path_factory) -> list[dict]:
    path = tmp_path_factory.mktemp("long") / "long.db"
    cache = Cache.open(path, create=True)
    for kernel in TIMES:
        for shape in COPY_MS:
            _record(cache, kernel, shape)
    cache.close()
    patch = pytest.MonkeyPatch()
    patch.setattr(d, "LONG_ROWS", (LONG,))
    patch.setattr(d, "JUDGING_LONG_ROWS", (JUDGE,))
    patch.setattr(d, "SHAPES", (SHORT,))
    try:
        yield long_rows.summarise(Path(path))
    finally:
        patch.undo()


def test_each_kernel_is_measured_against_its_own_sessions_copy(summary):
    by_shape = {s["shape"]: s for s in summary}
    assert set(by_shape) == {LONG, JUDGE, SHORT}
    for shape, entry in by_shape.items():
        assert entry["copy_ms"] == pytest.approx(COPY_MS[shape])
        for row in entry["rows"]:
            assert row["of_copy"] == pytest.approx(COPY_MS[shape] / row["ms"])
    resident = next(r for r in by_shape[LONG]["rows"] if r["method"] == "tuned softmax-resident")
    assert resident["of_copy"] == pytest.approx(0.95)


def test_the_target_is_judged_at_the_long_rows_only(summary):
    by_shape = {s["shape"]: s for s in summary}
    assert by_shape[LONG]["met"] is True and by_shape[LONG]["long_row"] and not by_shape[LONG]["judging"]
    assert by_shape[JUDGE]["met"] is False and by_shape[JUDGE]["long_row"] and by_shape[JUDGE]["judging"]
    assert by_shape[SHORT]["met"] is None and not by_shape[SHORT]["long_row"]


def test_the_long_rows_that_judge_the_revision_have_a_section_of_their_own(summary):
    text = long_rows.render(summary)
    fitted, judging = text.split("## Long rows declared after")[0], text.split("## Long rows declared after")[1]
    assert f"| {LONG} |" in fitted and f"| {JUDGE} |" not in fitted
    assert f"| {JUDGE} |" in judging.split("## Seed 000")[0] and "not met" in judging.split("## Seed 000")[0]


def test_the_best_before_the_new_kernel_is_shown_beside_the_best(summary):
    by_shape = {s["shape"]: s for s in summary}
    assert by_shape[LONG]["best"]["method"] == "tuned softmax-resident"
    assert by_shape[LONG]["best_without_new"]["method"] == "tuned softmax-persistent"
    assert by_shape[SHORT]["best"]["method"] == by_shape[SHORT]["best_without_new"]["method"] == \
        "tuned softmax-persistent"
    text = long_rows.render(summary)
    assert "| 8x4096 |" in text and "| met |" in text and "Seed 000's shapes" in text
