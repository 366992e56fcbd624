"""Whole jobs (one kernel and shape each, say) spread over the workers of a cluster.

A job is a picklable callable `job(db_path) -> dict` that records into the database it is
given and returns a small JSON-able summary.  With no cluster the jobs run one after another
in this process, into `db_path` itself.  On a cluster each job runs on a worker into a private
temporary database whose bytes come back here, where this process, the single writer, merges
them into `db_path` as each job ends.  A failed job is reported (with whatever it recorded
before failing merged, as for a killed session) and never stops the others; a job whose
worker died is run once more elsewhere.
"""

from __future__ import annotations

import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from autotune.store.cache import Cache
from autotune.distributed import on_worker
from autotune.distributed.stream import Failed, run_on_cluster

Job = Callable[[Path], dict]


@dataclass(frozen=True)
class JobOutcome:
    """How one job ended."""

    index: int  # its place in the list given
    name: str
    ok: bool
    summary: dict | None = None
    error: str = ""
    worker: str = ""  # the worker that ran it ("" in this process)
    merged: dict[str, int] = field(default_factory=dict)  # rows merged into the database


def job_name(job: Job) -> str:
    return str(getattr(job, "name", None) or getattr(job, "__name__", None) or repr(job))


def run_jobs(jobs: Sequence[Job], db_path: Path, workers: str | Any | None = None) -> list[JobOutcome]:
    """Run every job, recording into `db_path`; outcomes in the order of `jobs`.

    `workers`: None (here, one after another), a `--workers` value (a cluster is started or
    joined, and closed at the end) or a Dask client.
    """
    db_path = Path(db_path)
    if workers is None:
        return [_run_here(index, job, db_path) for index, job in enumerate(jobs)]
    if isinstance(workers, str):
        from autotune.distributed.cluster import connect

        client, close = connect(workers)
    else:
        client, close = workers, None
    outcomes: dict[int, JobOutcome] = {}
    target = Cache.open(db_path, create=True)
    try:
        for index, answer in run_on_cluster(client, on_worker.run_job, list(jobs), retry_on_error=False):
            outcomes[index] = _merge_answer(target, index, jobs[index], answer)
    finally:
        target.close()
        if close is not None:
            close()
    return [outcomes[index] for index in range(len(jobs))]


def _run_here(index: int, job: Job, db_path: Path) -> JobOutcome:
    try:
        return JobOutcome(index, job_name(job), ok=True, summary=job(db_path))
    except Exception as error:  # noqa: BLE001 - a failed job is reported, never fatal
        return JobOutcome(index, job_name(job), ok=False,
                          error=f"{type(error).__name__}: {error}\n{traceback.format_exc()[-2000:]}")


def _merge_answer(target: Cache, index: int, job: Job, answer: Any) -> JobOutcome:
    """Merge a worker's answer (its database's bytes) into the target; the job's outcome."""
    name = job_name(job)
    if isinstance(answer, Failed):
        return JobOutcome(index, name, ok=False, error=answer.message)
    worker, summary, error, database = answer
    merged: dict[str, int] = {}
    if database is not None:
        with tempfile.TemporaryDirectory(prefix="autotune-merge-") as folder:
            path = Path(folder) / "job.db"
            path.write_bytes(database)
            try:
                merged = target.merge_from(path)
            except Exception as merge_error:  # noqa: BLE001 - a job whose database cannot be merged failed
                error = error or f"its database could not be merged: {type(merge_error).__name__}: {merge_error}"
    return JobOutcome(index, name, ok=not error, summary=summary, error=error, worker=worker, merged=merged)
