"""Answers configs from recorded measurements: tuning without a GPU."""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Sequence

from autotune.simulation.oracle import Oracle
from autotune.types import Candidate, Result, Source, Status


class ReplayEvaluator:
    """The recorded space's oracle (`autotune.simulation.oracle.Oracle`) behind the Evaluator protocol.

    A config measured before is answered as the oracle answers it (the same answer
    `autotune simulate` gives: one measurement as recorded; several by the oracle's rule, the
    median of the correct runs' medians, else the latest failure), marked `replayed`.  A config
    never recorded (only seeds or --config can name one: a replay's strategy is offered the
    recorded points alone) is answered `not_recorded`: it counts against the budget and the
    strategy sees it as a failure, so results never silently depend on configs nobody measured.

    `measurements` is the oracle, or results grouped by config key oldest first (what
    `Cache.measurements` returns), from which one is built.  `note` says which recorded space
    and sample the replay answers from; the session stores it in its options.
    """

    def __init__(self, measurements: Oracle | Mapping[str, Sequence[Result]], baselines: Mapping[str, Result],
                 description: str, rebench: Mapping[str, Sequence[Result]] | None = None,
                 note: Mapping[str, Any] | None = None) -> None:
        self.oracle = measurements if isinstance(measurements, Oracle) else Oracle.from_results(measurements)
        self._rebench = {key: results[-1] for key, results in (rebench or {}).items() if results}
        self._baselines = dict(baselines)
        self.description = description
        self.replay_note = dict(note) if note is not None else None
        self.not_recorded = 0

    def evaluate(self, candidates: Sequence[Candidate]) -> Iterator[Result]:
        for candidate in candidates:
            recorded = self.oracle.result(candidate.key)
            if recorded is None:
                self.not_recorded += 1
                yield Result(key=candidate.key, status=Status.NOT_RECORDED, source=Source.REPLAYED,
                             error="no measurement of this config is recorded for this space")
            else:
                yield recorded.as_source(Source.REPLAYED)

    def rebenchmark(self, candidates: Sequence[Candidate]) -> dict[str, Result]:
        """The recorded final re-benchmark of each config (its latest), else the oracle's answer."""
        answered = {}
        for candidate in candidates:
            found = self._rebench.get(candidate.key) or self.oracle.result(candidate.key)
            if found is not None:
                answered[candidate.key] = found.as_source(Source.REPLAYED)
        return answered

    def baselines(self) -> dict[str, Result]:
        return {name: result.as_source(Source.REPLAYED) for name, result in self._baselines.items()}

    def close(self) -> None:
        pass
