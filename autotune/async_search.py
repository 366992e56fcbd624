"""The session's search loop for an evaluator that takes configs while others are out.

Why: a generation that waits for its slowest config idles every other worker meanwhile (on
two H200s, 248 of 256 configs were back by 21 s and the wall was 73 s, set by a few compile
timeouts).  Here the session keeps a window of configs in flight: the strategy is asked for
its next generation as soon as fewer than `window` configs of the earlier ones are still
untold, every config is submitted at once, and each result is recorded the moment it comes
back.  Generations remain what the strategy asked in one call: rows carry their generation
and a line is printed per generation, but nothing waits for a generation to end.

What the strategy is told, and when (`SessionSettings.tell_order`):

* `ask` (the default): results are told in the order their configs were asked, through a
  reorder buffer, and the strategy is asked again at fixed points of that order (when fewer
  than `window` asked configs are untold).  Under a fixed seed the strategy therefore sees
  the same results in the same order at every ask, whatever the number of workers or their
  speed: same proposals, same session.  Its cost: a config that takes long holds the telling
  of those asked after it, so once `window` configs are untold behind it no more are asked
  and workers idle until it is back (bounded by the compile deadline).
* `completion`: results are told as they come back.  Workers never wait for a slow config,
  but what the strategy has been told at each ask depends on timing, so two runs of one seed
  may propose differently; every row is still recorded with its generation and arrival
  ordinal, so the run itself can be read back.

Both tell the strategy every result exactly once; both ask at most `budget` configs.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from autotune.types import Candidate, Params, Result, Status
from search_spaces.space import InvalidConfig, params_key

TELL_ORDERS = ("ask", "completion")
POLL_S = 0.05  # how long one poll of the evaluator waits for a result
MAX_EMPTY_GENERATIONS = 3


@dataclass
class _Entry:
    """One point the strategy asked, until it is told."""

    generation: int
    raw: Params
    candidate: Candidate | None  # None: rejected by the space (its result is known at once)
    result: Result | None = None


@dataclass
class _Generation:
    size: int  # configs new to the session (measured or reused)
    left: int  # submitted and not back yet
    started: float
    previous_best: Any
    results: list[Result] = field(default_factory=list)


class AsyncSearch:
    """The search of one session (`Session._search` hands over to it); returns the exit reason."""

    def __init__(self, session: Any) -> None:
        self.s = session
        settings = session.settings
        self.order = settings.tell_order
        self.window = max(1, settings.in_flight or session.evaluator.slots())
        self.size = settings.generation_size or session.strategy.generation_size
        self.pending: deque[_Entry] = deque()  # asked and not yet told, in ask order
        self.waiting: dict[str, list[_Entry]] = {}  # config key -> entries waiting for its result
        self.gens: dict[int, _Generation] = {}
        self.generation = 0
        self.counted = 0  # configs counted against the budget: answered, or submitted
        self.summarised = 0  # generations whose line has been printed
        self.empty = 0  # consecutive generations with nothing new
        self.starved = False  # the strategy had nothing to ask while results were out
        self.reason: str | None = None

    def run(self) -> str:
        evaluator = self.s.evaluator
        try:
            while True:
                self._advance()
                if self.reason is not None and not self.pending:
                    self._summarise_finished()
                    return self.reason
                if self.s._out_of_time():
                    self._stop_now()
                    return "seconds"
                for result in evaluator.poll(POLL_S):
                    self._arrive(result)
        except BaseException:
            evaluator.cancel()
            raise

    # -- asking ---------------------------------------------------------------------------
    def _advance(self) -> None:
        """Ask while the window has room, and tell what the order rule lets through, each
        ask at the point of the told sequence where the window opens (so deterministic in
        `ask` order)."""
        while True:
            self._fill()
            ready = self._ready()
            if not ready:
                return
            room = len(self.pending) - self.window + 1
            limit = room if room > 0 and self.reason is None and not self.starved else len(ready)
            self._tell(ready[:max(1, limit)])

    def _fill(self) -> None:
        while self.reason is None:
            if self.starved:
                if self.pending:
                    return
                self.starved = False  # everything told: ask once more before calling it finished
            elif len(self.pending) >= self.window:
                return
            reason = self._stop_reason()
            if reason is not None:
                self.reason = reason
                return
            self._ask()

    def _stop_reason(self) -> str | None:
        settings = self.s.settings
        if settings.budget is not None and self.counted >= settings.budget:
            return "budget"
        if self.s._out_of_time():
            return "seconds"
        if settings.generations is not None and self.generation >= settings.generations:
            return "generations"
        if self.empty >= MAX_EMPTY_GENERATIONS:
            return "strategy exhausted"
        return None

    def _ask(self) -> None:
        s, budget = self.s, self.s.settings.budget
        asked = s.strategy.ask(self.size if budget is None else min(self.size, budget - self.counted))
        if not asked:
            if self.pending:
                self.starved = True
            else:
                self.reason = "strategy finished"
            return
        self.generation += 1
        generation = self.generation
        entries, new = [], []
        for raw in asked:
            try:
                candidate = s.task.candidate(raw)
            except InvalidConfig as error:
                entries.append(_Entry(generation, raw, None, Result(key=params_key(raw), status=Status.INVALID,
                                                                   error=str(error))))
                continue
            s.journal.record_alias(s.task.fingerprint, raw, candidate)
            entry = _Entry(generation, raw, candidate, s.seen.get(candidate.key))
            entries.append(entry)
            if entry.result is None and candidate.key in self.waiting:
                self.waiting[candidate.key].append(entry)  # in flight already: told its result too
            elif entry.result is None:
                self.waiting[candidate.key] = [entry]
                new.append(candidate)
        self.pending.extend(entries)
        self.empty = 0 if new else self.empty + 1
        s.reporter.generation_started(generation, len(new))
        state = self.gens[generation] = _Generation(size=len(new), left=0, started=time.monotonic(),
                                                    previous_best=s.best)
        submit = []
        for candidate in new:
            self.counted += 1
            known = s.recorded.pop(candidate.key, None)  # resuming: measured before it was stopped
            record = known is None
            if known is None:
                known = s._reusable(candidate)
            if known is None:
                submit.append(candidate)
                state.left += 1
            else:
                self._answer(generation, candidate, known, record=record)
        if submit:
            s.evaluator.submit(submit)
        self._summarise_finished()

    # -- results ----------------------------------------------------------------------------
    def _arrive(self, result: Result) -> None:
        entries = self.waiting.get(result.key)
        if not entries:
            return  # not ours (cancelled, or a duplicate)
        generation = entries[0].generation
        self.gens[generation].left -= 1
        self._answer(generation, entries[0].candidate, result)
        self._summarise_finished()

    def _answer(self, generation: int, candidate: Candidate, result: Result, *, record: bool = True) -> None:
        state = self.gens[generation]
        accepted = self.s._accept(generation, len(state.results), candidate, result, True, record=record)
        state.results.append(accepted)
        for entry in self.waiting.pop(candidate.key, []):
            entry.result = accepted

    def _ready(self) -> list[_Entry]:
        """Entries whose result may be told now, in the order they will be told."""
        if self.order == "completion":
            return [entry for entry in self.pending if entry.result is not None]
        ready = []
        for entry in self.pending:
            if entry.result is None:
                break
            ready.append(entry)
        return ready

    def _tell(self, entries: list[_Entry]) -> None:
        told = {id(entry) for entry in entries}
        self.pending = deque(entry for entry in self.pending if id(entry) not in told)
        self.s.strategy.tell([(entry.raw, entry.result) for entry in entries])

    def _stop_now(self) -> None:
        """Out of time: drop what is out, tell what came back (in order, past the gaps)."""
        self.s.evaluator.cancel()
        arrived = [entry for entry in self.pending if entry.result is not None]
        if arrived:
            self._tell(arrived)
        self.pending.clear()
        self.waiting.clear()
        for state in self.gens.values():
            state.left = 0
        self._summarise_finished()

    def _summarise_finished(self) -> None:
        """A line per generation once all of it is back, in generation order."""
        while self.summarised + 1 in self.gens and self.gens[self.summarised + 1].left == 0:
            self.summarised += 1
            state = self.gens[self.summarised]
            self.s._summarise(self.summarised, state.results, state.previous_best, state.started)
