"""Configs kept in flight on a Dask cluster: the asynchronous side of DistributedEvaluator.

Worker roles are Dask resources a worker declares: `gpu` (times configs; without a farm it
also compiles them) and `compile` (compiles only, CPU).  A cluster whose workers declare
neither (one joined by address, started before roles existed) has only GPU workers.

Each GPU worker runs one task at a time: a batch of `batch_size` configs (without a farm; the
worker's evaluator overlaps their compiles with their timing, and streams each result back
through a Dask queue as it is measured), or the timing of one config a compile worker has
compiled (with a farm).  A free worker gets the next config as soon as it is free; nothing
waits for a generation to end.  At most one task runs per worker, so a worker that dies takes
only its configs in flight with it: each is run once more elsewhere and recorded as `crash`
if its worker dies again (the scheduler never retries by itself: `allowed_failures=0`).

The compile deadline is the session's (autotune/evaluators/compile_deadline.py): this side
learns it from every result and hands it to each compile task.  Without a farm, each GPU
worker's own evaluator applies the same rule to the compiles it sees.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from autotune.distributed import farm, on_worker
from autotune.distributed.stream import ATTEMPTS, CANCELLED, DIED, _describe, _failure
from autotune.evaluators.compile_deadline import CompileDeadline
from autotune.types import Candidate, Result, Status

GPU, COMPILE = "gpu", "compile"


def roles(client: Any) -> dict[str, list[tuple[str, str]]]:
    """{"gpu": [(name, address)], "compile": [...]}, each sorted by name."""
    found: dict[str, list[tuple[str, str]]] = {GPU: [], COMPILE: []}
    workers = client.scheduler_info()["workers"]
    declared = any(GPU in (info.get("resources") or {}) for info in workers.values())
    for address, info in workers.items():
        resources = info.get("resources") or {}
        role = COMPILE if COMPILE in resources and GPU not in resources else GPU
        if role == GPU and declared and GPU not in resources:
            continue  # a worker with no role on a cluster that declares them: not ours
        found[role].append((str(info.get("name")), address))
    return {role: sorted(members) for role, members in found.items()}


@dataclass
class _Config:
    candidate: Candidate
    failures: list[tuple[str, str]] = field(default_factory=list)  # (worker, what happened)
    compiled: Any = None  # the compile task's future, with a farm


class Pipeline:
    """Submit configs any time; `poll` hands back results as they come (see the module doc)."""

    def __init__(self, client: Any, factory: Any, *, farm_on: bool | None = None, gpus: int | None = None,
                 batch_size: int = 1, deadline: CompileDeadline | None = None) -> None:
        self.client, self.factory, self.batch_size = client, factory, max(1, batch_size)
        self.gpus = gpus
        self.deadline = deadline or CompileDeadline(limit_s=getattr(factory, "compile_timeout_s", 60.0),
                                                    factor=getattr(factory, "compile_timeout_factor", 10.0))
        self._dead = False  # a worker died: look up the roles again until it is back
        self._refresh()
        if farm_on and not farm.can_farm(factory):
            raise ValueError(f"{type(factory).__name__} cannot compile apart from timing (no compiler())")
        if farm_on and not self.members[COMPILE]:
            raise ValueError("a compile farm needs workers with the `compile` resource; the cluster has none")
        self.farm = bool(self.members[COMPILE]) and farm.can_farm(factory) if farm_on is None else farm_on
        self.waiting: deque[_Config] = deque()  # to compile (farm) or to evaluate
        self.compiled: deque[_Config] = deque()  # compiling or compiled, waiting for a GPU worker
        self.running: dict[Any, tuple[str, list[_Config], str]] = {}  # future -> (stage, configs, worker address)
        self.received: set[str] = set()
        self.sink_name = f"autotune-results-{uuid.uuid4().hex}"
        self.sink: Any = None

    def _refresh(self) -> None:
        """The workers of each role (again after a death: a restarted worker has a new address)."""
        self.members = roles(self.client)
        if self.gpus is not None:
            self.members[GPU] = self.members[GPU][:self.gpus]
        if not self.members[GPU]:
            raise RuntimeError("the cluster has no GPU worker to time configs on")
        self._full = {role: len(members) for role, members in self.members.items()}
        self._next_refresh = 0.0

    def _refresh_when_short(self) -> None:
        """While a dead worker is being restarted, look for it again once a second."""
        short = any(len(self.members[role]) < count for role, count in self._full.items())
        if self._dead or short:
            now = time.monotonic()
            if now >= self._next_refresh:
                self._next_refresh = now + 1.0
                found = roles(self.client)
                if self.gpus is not None:
                    found[GPU] = found[GPU][:self.gpus]
                self.members = {role: found[role] for role in found}
                self._dead = any(len(found[role]) < count for role, count in self._full.items())

    def slots(self) -> int:
        """Configs that keep every worker busy: a running and a next task per GPU worker, and
        one per compile worker."""
        per_gpu = 2 * (1 if self.farm else self.batch_size)
        return per_gpu * len(self.members[GPU]) + (len(self.members[COMPILE]) if self.farm else 0)

    def submit(self, candidates: Sequence[Candidate]) -> None:
        self.received.difference_update(candidate.key for candidate in candidates)  # measured again: a new result
        self.waiting.extend(_Config(candidate) for candidate in candidates)

    def poll(self, timeout: float) -> list[Result]:
        from distributed import wait

        results = self._drain()
        self._refresh_when_short()
        self._recover_lost()
        self._start()
        if not results and self.running:
            with contextlib.suppress(TimeoutError):
                wait(list(self.running), timeout=timeout, return_when="FIRST_COMPLETED")
        elif not results:  # nothing to wait on (a worker restarting): do not spin
            time.sleep(timeout)
        for future in [f for f in self.running if f.done()]:
            results += self._settle(future)
        results += self._drain()
        self._refresh_when_short()  # a death just settled: the scheduler has dropped that worker by now
        self._recover_lost()
        self._start()
        for result in results:
            self.deadline.observe(result)
        return results

    def cancel(self) -> None:
        futures = list(self.running) + [c.compiled for c in self.compiled if c.compiled is not None]
        if futures:
            self.client.cancel(futures)
        self.running.clear()
        self.waiting.clear()
        self.compiled.clear()
        if self.sink is not None:
            with contextlib.suppress(Exception):
                self.sink.close()
            self.sink = None

    @property
    def outstanding(self) -> int:
        return len(self.waiting) + len(self.compiled) + sum(len(configs) for _, configs, _ in self.running.values())

    # -- starting tasks: each on a worker of its role that runs nothing ----------------------
    def _start(self) -> None:
        busy = {address for _, _, address in self.running.values()}
        submit = self.client.submit
        if self.farm:
            self._dispatch(COMPILE, self.waiting, busy, 1, "compile", lambda configs, address: submit(
                farm.compile_config, configs[0].candidate, self.factory, self.deadline.seconds(), pure=False,
                workers=[address], allow_other_workers=False))
            self._dispatch(GPU, self.compiled, busy, 1, "time", lambda configs, address: submit(
                farm.time_config, configs[0].candidate, configs[0].compiled, self.factory, pure=False,
                workers=[address], allow_other_workers=False))
        else:
            self._dispatch(GPU, self.waiting, busy, self.batch_size, "evaluate", lambda configs, address: submit(
                on_worker.evaluate, [c.candidate for c in configs], self.factory, self._sink_name(), pure=False,
                workers=[address], allow_other_workers=False))

    def _dispatch(self, role: str, queue: deque, busy: set[str], size: int, stage: str,
                  submit: Callable[[list[_Config], str], Any]) -> None:
        """Hand queued configs to the role's idle workers, avoiding a worker that failed them
        while another one of the role is left."""
        idle = [(name, address) for name, address in self.members[role] if address not in busy]
        while queue and idle:
            configs = [queue.popleft() for _ in range(min(size, len(queue)))]
            failed = {worker for config in configs for worker, _ in config.failures}
            choice = next(((n, a) for n, a in idle if n not in failed), None)
            if choice is None:
                if any(n not in failed for n, _ in self.members[role]):  # a worker it did not fail on is busy
                    queue.extendleft(reversed(configs))
                    return
                choice = idle[0]
            name, address = choice
            idle.remove((name, address))
            busy.add(address)
            future = submit(configs, address)
            self.running[future] = (stage, configs, address)

    def _recover_lost(self) -> None:
        """Tasks sent to a worker that had just died, and compiled artifacts a dead compile
        worker took with it: sent or compiled again (not counted against their configs),
        rather than left waiting for a worker that is gone."""
        live = {address for members in self.members.values() for _, address in members}
        for future, (stage, configs, address) in list(self.running.items()):
            if address not in live and not future.done():  # sent to a worker that was gone: send again
                del self.running[future]
                future.cancel()
                for config in reversed(configs):
                    if stage == "time" and _compiled_ok(config.compiled):
                        self.compiled.appendleft(config)
                    else:
                        config.compiled = None
                        self.waiting.appendleft(config)
        if not self.farm:
            return
        for config in [c for c in self.compiled if c.compiled.status != "finished"]:
            self.compiled.remove(config)
            self._recompile(config)
        for future, (stage, configs, _address) in list(self.running.items()):
            if stage == "time" and not future.done() and configs[0].compiled.status != "finished":
                del self.running[future]
                future.cancel()
                self._recompile(configs[0])

    def _recompile(self, config: _Config) -> None:
        config.compiled.cancel()
        config.compiled = None
        self.waiting.appendleft(config)

    def _sink_name(self) -> str | None:
        if self.batch_size == 1:
            return None  # a task's own result is as early as the queue would be
        if self.sink is None:
            from distributed import Queue

            self.sink = Queue(self.sink_name, client=self.client)
        return self.sink_name

    # -- results -----------------------------------------------------------------------------
    def _drain(self) -> list[Result]:
        if self.sink is None:
            return []
        try:
            return self._fresh(self.sink.get(batch=True))
        except Exception:  # noqa: BLE001 - every result also comes back with its task
            return []

    def _fresh(self, results: Sequence[Result]) -> list[Result]:
        out = []
        for result in results:
            if result.key not in self.received:
                self.received.add(result.key)
                out.append(result)
        return out

    def _settle(self, future: Any) -> list[Result]:
        stage, configs, _address = self.running.pop(future)
        if future.status == "finished" and stage == "compile":
            configs[0].compiled = future  # stays on its compile worker until a GPU worker fetches it
            self.compiled.append(configs[0])
            return []
        if future.status == "finished":
            value = future.result()
            return self._fresh([value] if stage == "time" else value[1])
        worker, what, _died = _failure(future)
        if what == CANCELLED:
            return []
        results = self._drain()  # a result put just before its worker died
        owed = [config for config in configs if config.candidate.key not in self.received]
        if what == DIED:
            self._dead, self._next_refresh = True, 0.0
        for config in owed:
            config.failures.append((worker, what))
            if len(config.failures) >= ATTEMPTS:
                results += self._fresh([Result(key=config.candidate.key, status=Status.CRASH,
                                               error=_describe(config.failures))])
            elif stage == "time" and _compiled_ok(config.compiled):
                self.compiled.appendleft(config)  # compiled already: only its timing again
            else:
                config.compiled = None
                self.waiting.appendleft(config)
        return results


def _compiled_ok(future: Any) -> bool:
    return future is not None and future.status == "finished"
