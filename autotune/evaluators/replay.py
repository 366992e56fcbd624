"""Answers configs from recorded measurements: tuning without a GPU."""

from __future__ import annotations

from typing import Iterator, Mapping, Sequence

from autotune.types import Candidate, Result, Source, Status


class ReplayEvaluator:
    """An oracle over a recorded space.

    A config measured before is answered with its latest recorded measurement (status,
    times, compile seconds), marked `replayed`.  A config never recorded is answered
    `not_recorded`: it counts against the budget and the strategy sees it as a failure,
    so results never silently depend on configs nobody measured.
    """

    def __init__(self, measurements: Mapping[str, Sequence[Result]], baselines: Mapping[str, Result],
                 description: str, rebench: Mapping[str, Sequence[Result]] | None = None) -> None:
        self._latest = {key: results[-1] for key, results in measurements.items() if results}
        self._rebench = {key: results[-1] for key, results in (rebench or {}).items() if results}
        self._baselines = dict(baselines)
        self.description = description
        self.not_recorded = 0

    def evaluate(self, candidates: Sequence[Candidate]) -> Iterator[Result]:
        for candidate in candidates:
            recorded = self._latest.get(candidate.key)
            if recorded is None:
                self.not_recorded += 1
                yield Result(key=candidate.key, status=Status.NOT_RECORDED, source=Source.REPLAYED,
                             error="no measurement of this config is recorded for this space")
            else:
                yield recorded.as_source(Source.REPLAYED)

    def rebenchmark(self, candidates: Sequence[Candidate]) -> dict[str, Result]:
        """The recorded final re-benchmark of each config, else its search-time measurement."""
        answered = {}
        for candidate in candidates:
            found = self._rebench.get(candidate.key) or self._latest.get(candidate.key)
            if found is not None:
                answered[candidate.key] = found.as_source(Source.REPLAYED)
        return answered

    def baselines(self) -> dict[str, Result]:
        return {name: result.as_source(Source.REPLAYED) for name, result in self._baselines.items()}

    def close(self) -> None:
        pass
