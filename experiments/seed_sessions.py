"""Recording a heuristic-seed measurement as it happens, and resuming one that was cut short.

A cell of the seed study measures 70 to 80 configs, several minutes on a GPU where a config
can take a minute to compile; a run stopped half-way (a time limit, a lost machine) must keep
what it measured.  So the session is opened before the first config, every result is written
as it arrives, and the session is marked finished only after the baselines.  Measuring the
same plan again finds the unfinished session (same space, same labelled candidates, same
experiment tags) and evaluates only the configs it lacks.
"""

from __future__ import annotations

from typing import Any, Mapping

from autotune.cache import Cache
from autotune.types import Candidate, Result

# Tags that differ between two runs of the same plan (when the run started), so not compared.
RUN_SPECIFIC_TAGS = ("job_started",)


class SeedSessionRecorder:
    """The one session a plan's measurements go to; `recorded` holds what an earlier,
    unfinished run of the same plan already measured."""

    def __init__(self, cache: Cache, session_id: int, task: Any, unique: Mapping[str, Candidate],
                 recorded: dict[str, Result]) -> None:
        self.cache, self.session_id, self.task = cache, session_id, task
        self.recorded = recorded
        self._ordinals = {key: ordinal for ordinal, key in enumerate(unique)}
        self._candidates = dict(unique)

    @classmethod
    def open(cls, db: str, task: Any, unique: Mapping[str, Candidate], options: Mapping[str, Any]
             ) -> "SeedSessionRecorder":
        """Resume the unfinished session of this plan, or start one.  `options` are the new
        session's options: its "experiment" tags and "labels" identify the plan."""
        cache = Cache.open(db, create=True)
        try:
            cache.put_space(task.identity)
            earlier = _unfinished_session(cache, task.fingerprint, options)
            if earlier is not None:
                recorded = {row.candidate.key: row.result for row in cache.session_evaluations(earlier)
                            if row.generation >= 0 and row.candidate.key in unique}
                return cls(cache, earlier, task, unique, recorded)
            session_id = cache.start_session(
                kernel=task.spec.name, shape=task.shape, dtype=task.dtype, strategy="experiment", seed=0,
                budget=len(unique), seconds=None, fingerprint=task.fingerprint, device=task.identity.device,
                versions=task.identity.versions, mode="gpu", options=options)
        except BaseException:
            cache.close()
            raise
        return cls(cache, session_id, task, unique, {})

    def record(self, result: Result) -> None:
        """Write one config's result now (its own committed row)."""
        candidate = self._candidates[result.key]
        self.cache.record_alias(self.task.fingerprint, candidate.params, candidate)
        self.cache.record(self.session_id, self.task.fingerprint, 0, self._ordinals[result.key], candidate, result)

    def finish(self, results: Mapping[str, Result], baselines: Mapping[str, Result]) -> None:
        """Record the baselines and mark the session finished, naming its fastest config."""
        for name, result in baselines.items():
            self.cache.record_baseline(self.session_id, self.task.fingerprint, name, result)
        best = min((r for r in results.values() if r.ok), key=lambda r: r.objective, default=None)
        self.cache.end_session(self.session_id, "completed", best.key if best else None)

    def close(self) -> None:
        self.cache.close()


def _unfinished_session(cache: Cache, fingerprint: str, options: Mapping[str, Any]) -> int | None:
    """The newest session of the same plan that never finished, if any."""
    for session in cache.sessions(limit=1_000_000):  # newest first
        if (session["ended"] is None and session["strategy"] == "experiment" and session["mode"] == "gpu"
                and session["space_fingerprint"] == fingerprint
                and session["options"].get("labels") == options.get("labels")
                and _plan_tags(session["options"].get("experiment")) == _plan_tags(options.get("experiment"))):
            return int(session["id"])
    return None


def _plan_tags(tags: Any) -> Any:
    if isinstance(tags, dict):
        return {name: value for name, value in tags.items() if name not in RUN_SPECIFIC_TAGS}
    return tags
