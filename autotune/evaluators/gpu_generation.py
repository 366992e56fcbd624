"""One generation on the GPU evaluator: one event loop over the compile workers and the
benchmark worker, so configs compile while others are timed (the rules, and why, are in the
docstring of gpu.py).

Each config goes: dispatched to an idle compile worker -> 'compiled' (no GPU work yet) ->
waits for a grant -> granted ("run", key) -> 'ran' -> queued for the benchmark worker ->
timed.  The parent alone decides who may use the GPU: no lock is shared with the workers,
since a killed process would hold it forever.

Beside its own configs, a generation may compile the next generation's likely configs on the
compile workers its slowest compiles leave idle, and starts with those compiled ahead for it
(compile_ahead.py).

A process that dies (an abort, a segfault, a CUDA context it could not keep) costs only the
config it was busy with, which is tried again in a fresh process: the death may not be its own
(the benchmark worker builds the next config while it times the current one, and a retried
config is timed without that).  A config whose every one of MAX_ATTEMPTS attempts killed its
process is recorded `crash` with the reason.  What the workers write to fd 1 and 2 is read
back per config (worker_output.py).
"""

from __future__ import annotations

import os
import time
from collections import Counter, deque
from multiprocessing.connection import wait
from typing import Any, Iterator, Sequence

from autotune.evaluators.compile_ahead import Ahead, AheadJob, Guess
from autotune.evaluators.failures import exit_description
from autotune.evaluators.gpu_jobs import COMPILE, RUN, WAITING, BenchJob, Job, result_from_reply
from autotune.evaluators.gpu_process import BOOTED, BOOTING, READY, SETTING_UP, STOPPED, Worker, WorkerSetupError
from autotune.evaluators.worker_output import WorkerOutput
from autotune.types import Candidate, Result, Status

POLL_S = 1.0  # longest sleep between looks at booting workers
BENCH_DRAIN_S = 2.0  # an abandoned benchmark's reply is awaited this long before its worker is replaced
# AUTOTUNE_BUILD_AHEAD=0: the benchmark worker builds each config only when asked to time it
# (the behaviour before building ahead, for measuring what building ahead gains).
BUILD_AHEAD = os.environ.get("AUTOTUNE_BUILD_AHEAD", "1") != "0"
MAX_ATTEMPTS = 2  # a config whose process died is tried again in a fresh one, this many times in all


class Generation:
    """Evaluates one generation's candidates; `results()` yields each result as soon as it is known."""

    def __init__(self, compilers: Sequence[Worker], bench: Worker, candidates: Sequence[Candidate], *,
                 compile_timeout_s: float, run_timeout_s: float, bench_timeout_s: float,
                 compile_timeout_note: str = "", ahead: Ahead | None = None, guess: Guess | None = None,
                 output: WorkerOutput | None = None) -> None:
        self.compilers, self.bench = list(compilers), bench
        self.timeouts = {COMPILE: compile_timeout_s, RUN: run_timeout_s}
        self.notes = {COMPILE: compile_timeout_note, RUN: ""}  # why the deadline is what it is
        self.bench_timeout_s = bench_timeout_s
        self.pending: deque[Candidate] = deque(candidates)
        self.jobs: dict[int, Job] = {}  # compile worker index -> its config
        self.to_grant: list[int] = []  # compiled, waiting for the GPU, in the order they compiled
        self.to_bench: deque[Job] = deque()  # ran, in the order they ran
        self.bench_job: BenchJob | None = None
        self.setup_failures: list[str] = []
        # Compiling ahead (compile_ahead.py): the evaluator's store, kept across generations,
        # and what to ask for the next generation's configs (None: nothing is compiled ahead).
        self.ahead = ahead if ahead is not None else Ahead()
        self.guess = guess
        self.size = len(self.pending)
        self.keys = {candidate.key for candidate in self.pending}
        self.known: list[Result] = []  # this generation's results so far
        self.guessed = False
        self.complete = False
        self.attempts: Counter = Counter()  # key -> attempts its process died under
        self.output = output  # where the workers' fd 1 and 2 go, read back per config

    def _begin(self, key: str, worker: Worker, end: bool = False) -> None:
        """Mark where `worker`'s output stands as `key` is handed to it (or, `end`, done with)."""
        if self.output is not None:
            (self.output.end if end else self.output.begin)(key, worker)

    def _another_attempt(self, key: str) -> bool:
        """Its process died under it: whether it is tried again (in a fresh process)."""
        self.attempts[key] += 1
        return self.attempts[key] < MAX_ATTEMPTS

    def _attempts_text(self, key: str) -> str:
        n = self.attempts[key]
        return f"; {n} attempts, each in a fresh process" if n > 1 else ""

    def results(self) -> Iterator[Result]:
        try:
            for result in self._run():
                yield self._finish(result)
        finally:  # also when the caller stopped early (time budget, Ctrl-C)
            self.abandon()

    def _finish(self, result: Result) -> Result:
        """A result as it leaves: with its config's output (worker_output.py), and known."""
        if self.output is not None:
            result = self.output.attach(result)
        self.known.append(result)
        return result

    @property
    def busy(self) -> bool:
        """Some config is still waiting, compiling, running or being timed."""
        return bool(self.pending or self.jobs or self.to_bench or self.bench_job)

    def add(self, candidates: Sequence[Candidate]) -> None:
        """More configs, evaluated after those already given (the asynchronous evaluator's
        submit: one long-lived generation takes configs while others are out)."""
        self.pending.extend(candidates)
        self.size += len(candidates)
        self.keys.update(candidate.key for candidate in candidates)

    def step(self, timeout: float) -> list[Result]:
        """Drive the workers until a result is known or `timeout` seconds have passed; returns
        the results known by then (none where nothing is out)."""
        deadline = time.monotonic() + timeout
        results: list[Result] = []
        while self.busy and not results:
            results = [self._finish(result) for result in self._cycle(max(0.0, deadline - time.monotonic()))]
            if time.monotonic() >= deadline:
                break
        return results

    def abandon(self) -> None:
        """Drop every config still out, killing or draining the workers busy with them."""
        self._abandon()
        self.pending.clear()
        self.to_bench.clear()
        if self.output is not None:
            self.output.forget()

    def _run(self) -> Iterator[Result]:
        yield from self._take_over_ahead()
        while self.busy:
            yield from self._cycle()
        self.complete = True

    def _cycle(self, cap: float = POLL_S) -> Iterator[Result]:
        """One pass of the event loop: feed and watch the workers, then wait at most `cap` s."""
        yield from self._tend_compilers()
        yield from self._tend_bench()
        yield from self._use_gpu()
        self._compile_ahead()
        ready = self._wait(cap)
        yield from self._read(ready)
        yield from self._expire()

    # -- who may use the GPU -----------------------------------------------------------------
    def _compilers_on_gpu(self) -> bool:
        """A granted smoke run or set-up is in flight."""
        return (any(job.stage == RUN for job in self.jobs.values())
                or any(worker.state == SETTING_UP for worker in self.compilers))

    def _use_gpu(self) -> Iterator[Result]:
        """Never time while a config or a set-up runs, never grant while timing.  Grants first
        (they free compile workers for the next config), then the next benchmark."""
        if self.bench_job is not None:
            return
        granted, self.to_grant = self.to_grant, []
        for index in granted:
            yield from self._grant_run(index)
        if self.pending:  # set-ups only for workers this generation can still use
            for worker in self.compilers:
                if worker.state == BOOTED:
                    yield from self._grant_setup(worker)
        if self.to_bench and not self._compilers_on_gpu():
            self._send_benchmark()

    def _grant_run(self, index: int) -> Iterator[Result]:
        job = self.jobs[index]
        job.stage, job.deadline = RUN, time.monotonic() + self.timeouts[RUN]
        try:
            self.compilers[index].conn.send(("run", job.candidate.key))
        except OSError:  # it died while waiting: the EOF says so
            yield from self._died(index)

    def _grant_setup(self, worker: Worker) -> Iterator[Result]:
        try:
            worker.grant_setup()
        except WorkerSetupError as error:
            yield from self._setup_failed(str(error))

    def _send_benchmark(self) -> None:
        if self.bench.state == STOPPED:
            self.bench.start()
        if self.bench.state != READY:
            return  # booting: its conn is watched
        ran = self.to_bench.popleft()
        # the config timed after this one, if known: the worker builds it while the GPU times this one
        after = self.to_bench[0] if self.to_bench and BUILD_AHEAD and not ran.retry else None
        upcoming = (after.candidate.key, dict(after.candidate.native), after.generated) if after else None
        self._begin(ran.candidate.key, self.bench)  # before it is sent: the worker writes at once
        try:
            self.bench.conn.send(("config", ran.candidate.key, dict(ran.candidate.native), upcoming, ran.generated))
        except OSError:  # it died while idle: replace it, the config waits
            self.bench.restart()
            self.to_bench.appendleft(ran)
            return
        now = time.monotonic()
        self.bench_job = BenchJob(ran.candidate, ran.compile_s, now, now + self.bench_timeout_s, ran)

    # -- compile workers ---------------------------------------------------------------------
    def _tend_compilers(self) -> Iterator[Result]:
        """Start, watch and feed the idle compile workers; never block on one that is booting."""
        for index, worker in enumerate(self.compilers):
            if index in self.jobs or index in self.ahead.jobs:
                continue
            if worker.state == STOPPED:
                if not self.pending:
                    continue
                worker.start()
            try:
                state = worker.poll()
            except WorkerSetupError as error:
                yield from self._setup_failed(str(error))
                continue
            if state == READY:
                self.setup_failures.clear()  # set-ups do not keep failing (a long-lived generation's count)
                if self.pending:
                    self._dispatch(index, self.pending.popleft())

    def _setup_failed(self, error: str) -> Iterator[Result]:
        """The worker is already stopped (a later pass starts another); if set-ups keep failing,
        the kernel cannot be set up at all: what is left of the generation is a crash."""
        self.setup_failures.append(error)
        if len(self.setup_failures) >= 2 * len(self.compilers):
            while self.pending:
                yield Result(key=self.pending.popleft().key, status=Status.CRASH, error=error)

    def _dispatch(self, index: int, candidate: Candidate) -> None:
        worker = self.compilers[index]
        self._begin(candidate.key, worker)  # before it is sent: the worker writes at once
        try:
            worker.conn.send((candidate.key, dict(candidate.native)))
        except OSError:  # it died while idle: replace it and retry the candidate
            worker.restart()
            self.pending.appendleft(candidate)
            return
        self.jobs[index] = Job(candidate, COMPILE, time.monotonic() + self.timeouts[COMPILE],
                                limit=(self.timeouts[COMPILE], self.notes[COMPILE]))

    def _on_compiler_message(self, index: int) -> Iterator[Result]:
        worker, job = self.compilers[index], self.jobs[index]
        try:
            message = worker.conn.recv()
        except (EOFError, OSError):
            yield from self._died(index)
            return
        kind = message[0]
        if kind == "compiled":
            job.stage, job.compile_s, job.generated, job.deadline = WAITING, message[2], message[3], None
            self.to_grant.append(index)
        elif kind == "ran":
            self._drop(index)
            self._begin(job.candidate.key, worker, end=True)
            self.to_bench.append(job)
        elif kind == "failed":
            self._drop(index)
            yield self._compile_failure(index, message)

    def _compile_failure(self, index: int, message: tuple) -> Result:
        """A compile worker's 'failed' reply as a result; the worker is replaced where it died or
        the failure was a crash (its CUDA context may be unusable)."""
        _, key, status, error, seconds = message
        worker = self.compilers[index]
        if not worker.alive() or Status(status) is Status.CRASH:
            worker.restart()
        return Result(key=key, status=Status(status), error=error, compile_s=seconds)

    def _died(self, index: int) -> Iterator[Result]:
        job, worker = self._drop(index), self.compilers[index]
        code = worker.exit_code()
        worker.restart()
        key = job.candidate.key
        if self._another_attempt(key):
            self.pending.appendleft(job.candidate)  # compiled again, in the fresh process
            return
        during = "while waiting to run" if job.stage == WAITING else f"during {job.stage}"
        yield Result(key=key, status=Status.CRASH, compile_s=job.compile_s,
                     error=f"worker process died {during} ({exit_description(code)}){self._attempts_text(key)}")

    def _drop(self, index: int) -> Job:
        if index in self.to_grant:
            self.to_grant.remove(index)
        return self.jobs.pop(index)

    # -- the benchmark worker ----------------------------------------------------------------
    def _tend_bench(self) -> Iterator[Result]:
        if self.bench.state != BOOTING:
            return
        try:
            self.bench.poll()
        except WorkerSetupError as error:  # the next config to time pays, once it has no attempt left
            if self.to_bench and not self._another_attempt(self.to_bench[0].candidate.key):
                ran = self.to_bench.popleft()
                key = ran.candidate.key
                yield Result(key=key, status=Status.CRASH, compile_s=ran.compile_s,
                             error=f"{error}{self._attempts_text(key)}")

    def _on_bench_reply(self) -> Result | None:
        """The benchmark's result; None where its process died and the config is queued again."""
        job, self.bench_job = self.bench_job, None
        assert job is not None
        key = job.candidate.key
        try:
            reply = self.bench.conn.recv()
        except (EOFError, OSError):
            code = self.bench.exit_code()
            self.bench.restart()
            if job.ran is not None and self._another_attempt(key):
                job.ran.retry = True
                self.to_bench.appendleft(job.ran)
                return None
            reply = {"status": Status.CRASH.value, "bench_s": time.monotonic() - job.started,
                     "error": f"benchmark process died ({exit_description(code)}){self._attempts_text(key)}"}
        else:
            self._begin(key, self.bench, end=True)
            if reply.get("status") == Status.CRASH.value or not self.bench.alive():
                self.bench.restart()  # it exits after a crash: never send it the next config
        return result_from_reply(key, reply, job.compile_s)

    # -- waiting, deadlines, early stop ----------------------------------------------------------
    def _wait(self, cap: float = POLL_S) -> set[Any]:
        """Sleep until a watched pipe has something, the next deadline passes or `cap` s pass."""
        conns = [self.compilers[index].conn for index in self.jobs]
        conns += [self.compilers[index].conn for index, job in self.ahead.jobs.items() if not job.compiled]
        conns += [w.conn for w in self.compilers if w.state in (BOOTING, SETTING_UP) and w.conn is not None]
        if self.bench_job is not None or self.bench.state == BOOTING:
            conns.append(self.bench.conn)
        now = time.monotonic()
        deadlines = [job.deadline for job in [*self.jobs.values(), *self.ahead.jobs.values()]
                     if job.deadline is not None]
        if self.bench_job is not None:
            deadlines.append(self.bench_job.deadline)
        timeout = max(0.0, min([*deadlines, now + min(cap, POLL_S)]) - now)
        if not conns:
            time.sleep(min(timeout, 0.05))
            return set()
        return set(wait(conns, timeout=timeout))

    def _read(self, ready: set[Any]) -> Iterator[Result]:
        for index in [i for i in list(self.jobs) if self.compilers[i].conn in ready]:
            yield from self._on_compiler_message(index)
        for index in [i for i, job in list(self.ahead.jobs.items()) if not job.compiled
                      and self.compilers[i].conn in ready]:
            self._on_ahead_message(index)
        if self.bench_job is not None and self.bench.conn in ready:
            result = self._on_bench_reply()
            if result is not None:
                yield result

    def _expire(self) -> Iterator[Result]:
        now = time.monotonic()
        for index, job in list(self.jobs.items()):
            if job.deadline is not None and job.deadline <= now:
                self._drop(index)
                self.compilers[index].restart()
                status = Status.COMPILE_TIMEOUT if job.stage == COMPILE else Status.RUN_TIMEOUT
                limit_s, note = job.limit if job.stage == COMPILE and job.limit else \
                    (self.timeouts[job.stage], self.notes[job.stage])
                yield Result(key=job.candidate.key, status=status, compile_s=job.compile_s,
                             error=_overran(job.stage, limit_s, note))
        for index, ahead in list(self.ahead.jobs.items()):
            if ahead.deadline is not None and ahead.deadline <= now:
                del self.ahead.jobs[index]
                self.compilers[index].restart()
                if not ahead.dropped:  # asked for later, it is answered so: it would time out again
                    key = ahead.candidate.key
                    self.ahead.failed[key] = Result(key=key, status=Status.COMPILE_TIMEOUT,
                                                    error=_overran(COMPILE, ahead.limit_s, ahead.note))
        job = self.bench_job
        if job is not None and job.deadline <= now:
            self.bench_job = None
            self.bench.restart()
            yield result_from_reply(job.candidate.key, {
                "status": Status.RUN_TIMEOUT.value, "bench_s": now - job.started,
                "error": f"benchmark did not finish within {self.bench_timeout_s:g} s; worker killed"}, job.compile_s)

    def _abandon(self) -> None:
        """Workers mid-job would answer for configs nobody asks about any more: kill those compile
        workers (a later generation starts them again when it has configs for them: an early stop
        usually ends the session, and replacements still importing would hold up its close), and
        after an early stop those compiling ahead too; give the benchmark a moment to answer, else
        replace it."""
        for index in list(self.jobs):
            self.compilers[index].kill()
        self.jobs.clear()
        self.to_grant.clear()
        if not self.complete:
            drop_ahead(self.ahead, self.compilers)
        job, self.bench_job = self.bench_job, None
        if job is None:
            return
        patience = min(BENCH_DRAIN_S, max(0.0, job.deadline - time.monotonic()))
        try:
            answered = self.bench.conn.poll(patience) and self.bench.conn.recv()
        except (EOFError, OSError):
            answered = None
        if not answered or answered.get("status") == Status.CRASH.value or not self.bench.alive():
            self.bench.restart()

    # -- compiling ahead (compile_ahead.py) ---------------------------------------------------------
    def _take_over_ahead(self) -> Iterator[Result]:
        """Start from what was compiled ahead for this generation's configs (a failure is its
        answer); free the workers holding configs it does not ask for."""
        ahead, wanted = self.ahead, {candidate.key: candidate for candidate in self.pending}
        taken: set[str] = set()
        for key in wanted:
            failure = ahead.failed.pop(key, None)
            if failure is not None:
                taken.add(key)
                yield failure
        ahead.counts["used"] += len(taken)
        ahead.counts["dropped"] += len(ahead.failed)
        ahead.failed.clear()
        for index, job in list(ahead.jobs.items()):
            key = job.candidate.key
            if job.dropped:
                continue  # still compiling for nobody: freed when it ends
            if key not in wanted or key in taken:
                ahead.counts["dropped"] += 1
                self._free_ahead(index)
                continue
            taken.add(key)
            ahead.counts["used"] += 1
            del ahead.jobs[index]
            if job.compiled:
                self.jobs[index] = Job(wanted[key], WAITING, None, job.compile_s, job.generated)
                self.to_grant.append(index)
            else:
                self.jobs[index] = Job(wanted[key], COMPILE, job.deadline)
        if taken:
            self.pending = deque(candidate for candidate in self.pending if candidate.key not in taken)

    def _free_ahead(self, index: int) -> None:
        """A compiled config is let go at once; one still compiling, once its compile ends."""
        job = self.ahead.jobs[index]
        if not job.compiled:
            job.dropped = True
            return
        del self.ahead.jobs[index]
        try:
            self.compilers[index].conn.send(("skip", job.candidate.key))
        except OSError:
            self.compilers[index].restart()

    def _compile_ahead(self) -> None:
        """Once the GPU waits on compiles alone and most of the generation is known, compile the
        guessed next configs on the idle compile workers (once per generation)."""
        if self.guess is None or self.guessed or self.pending or not self.jobs or 2 * len(self.known) < self.size:
            return
        if self.bench_job is not None or self.to_bench or any(job.stage != COMPILE for job in self.jobs.values()):
            return
        idle = [index for index, worker in enumerate(self.compilers)
                if index not in self.jobs and index not in self.ahead.jobs and worker.state == READY]
        if not idle:
            return
        self.guessed = True
        try:
            guesses = list(self.guess(list(self.known), [job.candidate.key for job in self.jobs.values()]))
        except Exception:  # noqa: BLE001 - a guess that fails costs the generation nothing
            self.ahead.counts["guess_failed"] += 1
            return
        for candidate in guesses:
            if not idle:
                break
            if candidate.key in self.keys or self.ahead.holds(candidate.key):
                continue
            index = idle.pop(0)
            try:
                self.compilers[index].conn.send((candidate.key, dict(candidate.native)))
            except OSError:  # it died while idle
                self.compilers[index].restart()
                continue
            self.ahead.jobs[index] = AheadJob(candidate, time.monotonic() + self.timeouts[COMPILE],
                                              limit_s=self.timeouts[COMPILE], note=self.notes[COMPILE])
            self.ahead.counts["guessed"] += 1

    def _on_ahead_message(self, index: int) -> None:
        worker, job = self.compilers[index], self.ahead.jobs[index]
        try:
            message = worker.conn.recv()
        except (EOFError, OSError):
            del self.ahead.jobs[index]
            worker.restart()
            return
        if message[0] == "compiled":
            job.deadline, job.compile_s, job.generated = None, message[2], message[3]
            if job.dropped:
                self._free_ahead(index)
        elif message[0] == "failed":
            del self.ahead.jobs[index]
            failure = self._compile_failure(index, message)
            if not job.dropped:
                self.ahead.failed[failure.key] = failure


def _overran(stage: str, limit_s: float, note: str) -> str:
    """Why a worker was killed: its stage ran past its limit (`note`: why the limit is what it is)."""
    return f"{stage} did not finish within {limit_s:g} s{note}; worker killed"


def drop_ahead(ahead: Ahead, compilers: Sequence[Worker]) -> None:
    """Forget every compile ahead, killing the workers still holding one (restarted when needed)."""
    for index in list(ahead.jobs):
        compilers[index].kill()
    ahead.counts["dropped"] += sum(not job.dropped for job in ahead.jobs.values()) + len(ahead.failed)
    ahead.jobs.clear()
    ahead.failed.clear()
