"""Runs one fake-evaluator session in its own process, for the kill and concurrency tests.

    python -m tests.session_runner DB SEED BUDGET DELAY_S [RESUME_ID]

Prints "started <session id>" once the session row exists, then "done" at the end.
"""

from __future__ import annotations

import sys

import torch

from autotune.store.cache import Cache
from autotune.evaluators.fake import FakeEvaluator
from autotune.kernels import get_kernel
from autotune.session import Session, SessionSettings, SilentReporter
from autotune.strategies import get_strategy
from autotune.task import bind_live
from tests.conftest import hashed_cost


class AnnouncingReporter(SilentReporter):
    def session_started(self, session_id, *args) -> None:
        print(f"started {session_id}", flush=True)


def main(argv: list[str]) -> None:
    db, seed, budget, delay = argv[0], int(argv[1]), int(argv[2]), float(argv[3])
    resume = int(argv[4]) if len(argv) > 4 else None
    task = bind_live(get_kernel("softmax-triton"), (64, 1000), torch.float16, "cpu")
    settings = SessionSettings("random", seed, budget, generation_size=8, mode="gpu")
    strategy = get_strategy("random")(task.space, seed=seed)
    Session(task, FakeEvaluator(hashed_cost, delay_s=delay), strategy, settings, Cache.open(db, create=True),
            reporter=AnnouncingReporter(), resume_session=resume).run()
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
