"""The suite on GPUs: every kernel x shape x arm, each arm in its own process, restartable.

Why this shape: a GPU slot can end at any time, so each finished (or failed, or timed-out) arm
is appended to results.jsonl the moment it ends, and a run started again skips what is there.
Arms of different cells run side by side, one process per GPU (`--gpus 0,1`); each process has
a deadline (`deadline_s`) and is killed past it, recorded `timeout`.  Its wall time is measured
here from the process's start, so it counts imports, binding and compiles: what a user waits.
Every process gets fresh compile caches (Triton's and Inductor's), so each arm starts cold.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from experiments.helion_suite.arms import ARMS
from experiments.helion_suite.manifest import SuiteKernel

ROOT = Path(__file__).resolve().parent.parent.parent


@dataclass(frozen=True)
class Job:
    """One arm of one cell (a kernel at a shape and dtype)."""

    kernel: str
    shape: tuple[int, ...]
    dtype: str
    arm: str

    @property
    def key(self) -> str:
        return f"{self.kernel}|{'x'.join(map(str, self.shape))}|{self.dtype}|{self.arm}"


def plan(kernels: Sequence[SuiteKernel], arms: Sequence[str] = ARMS) -> list[Job]:
    """Every cell's arms, cell by cell (so a cut run leaves whole cells where it can)."""
    unknown = [arm for arm in arms if arm not in ARMS]
    if unknown:
        raise ValueError(f"unknown arm(s) {', '.join(unknown)} (arms: {', '.join(ARMS)})")
    return [Job(k.name, shape, dtype, arm) for k in kernels for shape, dtype in k.gpu for arm in arms]


def deadline_s(arm: str, seconds: float) -> float:
    """How long an arm's process may run: the search time and room for its start and compiles."""
    if arm == "ours":
        return 3 * seconds + 300
    if arm == "helion_quick":
        return 1800.0
    return 600.0


class Results:
    """results.jsonl: one record per finished job; appended under a lock, read on restart."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def records(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        records = []
        for line in self.path.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut by a killed run: that job runs again
                continue
        return records

    def done(self, retry_failed: bool = False) -> set[str]:
        keep = {"ok"} if retry_failed else {"ok", "failed", "timeout"}
        return {r["key"] for r in self.records() if r.get("status") in keep}

    def append(self, record: dict[str, Any]) -> None:
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as handle:
                handle.write(json.dumps(record) + "\n")


Execute = Callable[[Job, str, float], dict[str, Any]]  # (job, gpu, deadline) -> record fields


def run_jobs(jobs: Sequence[Job], results: Results, gpus: Sequence[str], execute: Execute, *, seconds: float,
             retry_failed: bool = False, say: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Run the jobs not yet in `results`, one at a time per GPU; returns the records written."""
    done = results.done(retry_failed)
    todo: "queue.Queue[Job]" = queue.Queue()
    for job in jobs:
        if job.key not in done:
            todo.put(job)
    say(f"{len(jobs)} jobs planned, {len(jobs) - todo.qsize()} already recorded, {todo.qsize()} to run "
        f"on GPU(s) {','.join(gpus)}")
    written: list[dict[str, Any]] = []

    def worker(gpu: str) -> None:
        while True:
            try:
                job = todo.get_nowait()
            except queue.Empty:
                return
            limit = deadline_s(job.arm, seconds)
            started = time.time()
            try:
                fields = execute(job, gpu, limit)
            except Exception as error:  # noqa: BLE001 - recorded; the run goes on
                fields = {"status": "failed", "error": f"{type(error).__name__}: {error}"[:300]}
            record = {"key": job.key, **asdict(job), "shape": list(job.shape), "gpu": gpu, "started": started,
                      "seconds": seconds, "deadline_s": limit, **fields}
            results.append(record)
            written.append(record)
            say(f"{job.key}: {record.get('status')} in {record.get('wall_s', 0):.0f} s")

    threads = [threading.Thread(target=worker, args=(gpu,), daemon=True) for gpu in gpus]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return written


def arm_command(job: Job, examples: Path, seconds: float, work: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "experiments.helion_suite.arms", job.arm, "--kernel", job.kernel,
            "--examples", str(examples), "--shape", "x".join(map(str, job.shape)), "--dtype", job.dtype,
            "--seconds", str(seconds), "--work", str(work), "--out", str(out)]


def subprocess_execute(examples: Path, seconds: float, work: Path,
                       command: Callable[..., list[str]] = arm_command) -> Execute:
    """An Execute that runs each job as `python -m experiments.helion_suite.arms ...` on its GPU,
    with fresh compile caches, killed at its deadline; wall_s from the process's start."""

    def execute(job: Job, gpu: str, limit: float) -> dict[str, Any]:
        work.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=work, prefix="caches_") as caches:
            out = Path(caches) / "answer.json"
            env = {**os.environ, "CUDA_VISIBLE_DEVICES": gpu, "TRITON_CACHE_DIR": f"{caches}/triton",
                   "TORCHINDUCTOR_CACHE_DIR": f"{caches}/inductor",
                   "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
            started = time.monotonic()
            # A session of its own, so that the deadline also ends what the arm started (`ours`
            # runs `autotune tune`, which starts compile workers).
            process = subprocess.Popen(command(job, examples, seconds, work, out), env=env, cwd=work, text=True,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
            try:
                _, stderr = process.communicate(timeout=limit)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.communicate()
                return {"status": "timeout", "wall_s": round(time.monotonic() - started, 3),
                        "error": f"killed at its deadline of {limit:g} s"}
            wall = round(time.monotonic() - started, 3)
            if not out.exists():
                tail = stderr.strip().splitlines()[-1:] or ["no output"]
                return {"status": "failed", "wall_s": wall, "error": f"exit {process.returncode}: {tail[0][:300]}"}
            return {**json.loads(out.read_text()), "wall_s": wall}

    return execute
