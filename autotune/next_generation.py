"""A guess at the next generation, for an evaluator that compiles it ahead
(autotune/evaluators/compile_ahead.py says why).

The guess is the strategy's own answer: a copy of the strategy is told what the real one will
be told once the generation ends, with the configs still out as failures, and asked for the
next generation.  Where those configs would not have changed its mind (a pattern walk whose
best neighbour is known, a random search, which reads no results) the guess is exactly what the
real strategy will ask.  The real strategy is never touched.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping, Sequence

from autotune.strategies.base import Observation, Strategy
from autotune.types import Candidate, Params, Result, Status
from search_spaces.space import InvalidConfig

STILL_OUT = "still being evaluated when the next generation was guessed"


class NextGeneration:
    """Called by the evaluator with the generation's results so far and the keys still out."""

    def __init__(self, strategy: Strategy, task: Any, pairs: Sequence[tuple[Params, Candidate]],
                 told: Sequence[Observation], seen: Mapping[str, Result], size: int) -> None:
        self.strategy, self.task = strategy, task
        self.pairs = list(pairs)  # the generation's points as the strategy asked them, with their candidates
        self.told = list(told)  # what the strategy will be told beside them (points the task rejected)
        self.seen = seen  # the session's results so far, by key (a live view)
        self.size = size  # how many configs the next generation will ask for

    def __call__(self, results: Sequence[Result], outstanding: Sequence[str]) -> list[Candidate]:
        if self.size <= 0:
            return []
        # The space is shared, not copied: it is never changed, and large ones are slow to copy.
        guesser = copy.deepcopy(self.strategy, memo={id(self.strategy.space): self.strategy.space})
        by_key = {result.key: result for result in results}
        observations = list(self.told)
        for raw, candidate in self.pairs:
            result = by_key.get(candidate.key) or self.seen.get(candidate.key)
            if result is None:
                result = Result(key=candidate.key, status=Status.COMPILE_TIMEOUT, error=STILL_OUT)
            observations.append((raw, result))
        guesser.tell(observations)
        guesses: list[Candidate] = []
        for raw in guesser.ask(self.size):
            try:
                candidate = self.task.candidate(raw)
            except InvalidConfig:
                continue
            if candidate.key not in self.seen:
                guesses.append(candidate)
        return guesses
