"""Measuring a fixed list of labelled configs as one recorded, resumable session.

Experiments measure configs they chose (the default, rule seeds, Helion's own seeds, a grid
sample) and their reports must tell which row is which.  Here the list runs through the one
session loop: the `fixed` strategy's configs are the session's seeds, so every row is
written as it arrives with its labels as its origin, and the session's options hold the full
map (config key -> labels) for configs given under several labels at once.

A cell of a study can take many minutes on a GPU; a run cut short must keep what it measured.
Measuring the same list again (same space, same labels, same experiment tags apart from
run-specific ones) resumes the newest such session that did not finish, and evaluates only
the configs it lacks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from autotune.store.cache import Cache
from autotune.session import Reporter, Session, SessionOutcome, SessionSettings
from autotune.strategies.fixed import LABEL_JOIN, FixedList
from autotune.types import Params, Result
from search_spaces.space import InvalidConfig

# Tags that differ between two runs of the same list (when the run started), so not compared.
RUN_SPECIFIC_TAGS = ("job_started",)
# Sessions of labelled lists recorded before they went through `Session` (by the experiments'
# own loop): an unfinished one is resumed all the same.
LEGACY_STRATEGY = "experiment"
UNFINISHED_REASONS = ("interrupted",)  # and "error: ...", and no reason at all (killed)


@dataclass(frozen=True)
class FixedListRun:
    """What a labelled list measured: every config's search-time result by config key (resumed
    ones included), the session's baselines, and how many results an earlier run had left."""

    session_id: int
    results: dict[str, Result]
    baselines: dict[str, Result]
    resumed: int
    outcome: SessionOutcome


def labels_by_key(task: Any, configs: Sequence[tuple[str, Params]]) -> tuple[dict[str, str], dict[str, str]]:
    """(config key -> its labels joined by LABEL_JOIN, label -> why it is not a config of the
    task): what a report needs to name each recorded row."""
    labels: dict[str, list[str]] = {}
    invalid: dict[str, str] = {}
    for label, point in configs:
        try:
            key = task.candidate(point).key
        except InvalidConfig as error:
            invalid[label] = str(error)
            continue
        labels.setdefault(key, []).append(label)
    return {key: LABEL_JOIN.join(names) for key, names in labels.items()}, invalid


def is_finished(session: Mapping[str, Any]) -> bool:
    """Whether a session ended by itself (not killed, interrupted or stopped by an error)."""
    reason = session.get("exit_reason") or ""
    return (session.get("ended") is not None and bool(reason) and reason not in UNFINISHED_REASONS
            and not reason.startswith("error"))


def unfinished_session(cache: Cache, fingerprint: str, options: Mapping[str, Any], mode: str) -> int | None:
    """The newest session of the same labelled list that did not finish, if any."""
    for session in cache.sessions(limit=1_000_000):  # newest first
        if (not is_finished(session) and session["strategy"] in (FixedList.name, LEGACY_STRATEGY)
                and session["mode"] == mode and session["space_fingerprint"] == fingerprint
                and cache.holds_session(session["id"])
                and session["options"].get("labels") == options.get("labels")
                and _plan_tags(session["options"].get("experiment")) == _plan_tags(options.get("experiment"))):
            return int(session["id"])
    return None


def measure_fixed(task: Any, evaluator: Any, configs: Sequence[tuple[str, Params]], journal: Cache, *,
                  options: Mapping[str, Any] | None = None, mode: str = "gpu", seed: int = 0,
                  reporter: Reporter | None = None, resume: bool = True) -> FixedListRun:
    """Measure `configs` ((label, point) pairs) afresh, with the compiler's default, through one
    session recorded in `journal`; baselines first, each config's row as it arrives.

    `options` become the session's options (experiment tags, a rule analysis...), plus
    `labels` and `invalid` (merged with the caller's).  With `resume`, an unfinished session
    of the same list is continued instead of starting a new one.  The caller owns `evaluator`."""
    labels, invalid = labels_by_key(task, configs)
    options = {**dict(options or {}), "labels": labels,
               "invalid": {**dict((options or {}).get("invalid", {})), **invalid}}
    valid = [(label, point) for label, point in configs if label not in invalid]
    strategy = FixedList(task.space, seed=seed, configs=valid or [("default", task.space.default)])
    earlier = unfinished_session(journal, task.fingerprint, options, mode) if resume else None
    resumed = 0
    if earlier is not None:
        resumed = len({row.candidate.key for row in journal.session_evaluations(earlier)
                       if row.generation >= 0} & set(labels))
    settings = SessionSettings(strategy=FixedList.name, seed=seed, budget=max(1, len(labels)), fresh=True, mode=mode)
    session = Session(task, evaluator, strategy, settings, journal, reporter=reporter, options=options,
                      seeds=strategy.seeds(), resume_session=earlier)
    outcome = session.run()
    return FixedListRun(session_id=outcome.session_id, results=dict(session.seen), baselines=dict(outcome.baselines),
                        resumed=resumed, outcome=outcome)


def _plan_tags(tags: Any) -> dict[str, Any]:
    """Experiment tags as compared between runs: a bare study name (older sessions) as
    {"study": name}, none as {}, run-specific tags left out."""
    if isinstance(tags, str):
        tags = {"study": tags} if tags else {}
    return {name: value for name, value in dict(tags or {}).items() if name not in RUN_SPECIFIC_TAGS}
