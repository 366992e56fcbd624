"""Reading recorded sessions back: the timeline, the best config, the comparison table."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.console import Console
from rich.markup import escape

from autotune.store.cache import Cache, EvaluationRow
from autotune.evaluators.failures import failure_lines
from autotune.report import comparison_table, gbps, statuses_text, tested_text, timeline_line, where_measured
from autotune.session import DEFAULT, GenerationSummary
from autotune.types import Candidate, Result
from search_spaces.space import SearchSpace, params_key


def timeline(rows: list[EvaluationRow], space: SearchSpace | None) -> list[GenerationSummary]:
    """Per-generation summaries rebuilt from recorded rows (what the live session printed)."""
    summaries: list[GenerationSummary] = []
    best: EvaluationRow | None = None
    generations = sorted({r.generation for r in rows}, key=lambda g: (g < 0, g))  # the final re-benchmark last
    for generation in generations:
        members = [r for r in rows if r.generation == generation]
        previous = best
        for row in members:
            if row.result.ok and (best is None or row.result.objective < best.result.objective):
                best = row
        improvement, changed = None, []
        if best is not previous and best is not None and previous is not None:
            improvement = 100.0 * (previous.result.objective - best.result.objective) / previous.result.objective
            changed = space.changed(previous.candidate.params, best.candidate.params) if space else []
        summaries.append(GenerationSummary(
            generation=generation, tested=len(members), failures=sum(r.result.status.failed for r in members),
            best_ms=best.result.median_ms if best else None, improvement_pct=improvement, changed=changed,
            elapsed_s=0.0,
        ))
    return summaries


def session_best(cache: Cache, session_id: int) -> tuple[Candidate, Result] | None:
    """The winner: the fastest of the final re-benchmark when there was one, else of all rows."""
    rows = cache.session_evaluations(session_id)
    final = [r for r in rows if r.generation < 0 and r.result.ok]
    ok = final or [r for r in rows if r.result.ok]
    if not ok:
        return None
    row = min(ok, key=lambda r: r.result.objective)
    return row.candidate, row.result


def default_row(rows: list[EvaluationRow]) -> EvaluationRow | None:
    """The default config's row: generation 0's first (seeds start with the default), preferring
    its re-timed row from the final re-benchmark.  Callers check it is the default when it matters."""
    first = [r for r in rows if r.generation == 0][:1]
    if not first:
        return None
    retimed = [r for r in rows if r.generation < 0 and r.candidate.key == first[0].candidate.key]
    return (retimed or first)[0]


def print_session(cache: Cache, session: dict[str, Any], console: Console) -> None:
    rows = cache.session_evaluations(session["id"])
    record = cache.get_space(session["space_fingerprint"])
    space = record.space if record else None
    console.print(
        f"session {session['id']}: {session['kernel']} {'x'.join(map(str, session['shape']))} {session['dtype']}, "
        f"strategy {session['strategy']} seed {session['seed']}, mode {session['mode']}, on {session['device']}, "
        f"exit: {session['exit_reason'] or 'did not finish (killed?)'}"
    )
    for summary in timeline(rows, space):
        console.print(timeline_line(summary).rsplit("  (", 1)[0])
    best = session_best(cache, session["id"])
    default = default_row(rows)
    table_rows: list[tuple[str, Result]] = []
    if best:
        table_rows.append(("best found", best[1]))
    if default:
        table_rows.append(("default config", default.result))
    baselines = cache.baselines(session_id=session["id"])
    table_rows += list(baselines.items())
    bytes_moved = _bytes_moved(session)
    copy = baselines.get("device copy")
    counts, default_status = session_counts(cache, session, rows, space)
    console.print(comparison_table(table_rows, bytes_moved or 0, best[1].median_ms if best else None,
                                   f"session {session['id']}: {tested_text(counts, default_status, session['budget'])}",
                                   copy_ms=copy.median_ms if copy is not None and copy.ok else None))
    console.print(statuses_text(counts, default_status))
    reasons = failure_lines(r.result for r in rows)
    if reasons:
        console.print("why configs failed (rows per reason; full compiler output under the database's .logs folder):")
        for line in reasons:
            console.print(escape(line), highlight=False, soft_wrap=True)  # recorded text is data, never markup
    if best:
        console.print(f"best config ({best[0].key}): {dict(best[0].native)}")
    if bytes_moved and best:
        console.print(f"best moves {bytes_moved / 1e6:.1f} MB per call: {gbps(bytes_moved, best[1].median_ms):.0f} GB/s")
    for line in where_measured(cache.measured_on_counts(session["id"]), cache.calibrations(session["id"])):
        console.print(escape(line))  # worker labels are recorded text, never markup


# Sessions not run by `autotune.session.Session` (imports of another tuner's data): no default
# config is evaluated free of budget there.
NO_FREE_DEFAULT = ("imported",)


def session_counts(cache: Cache, session: dict[str, Any], rows: list[EvaluationRow],
                   space: SearchSpace | None) -> tuple[Counter, str | None]:
    """As `report.outcome_counts`, from the recorded rows: (per-status counts of the configs
    counted against the budget, the default config's status when it was evaluated free).
    The default's row is the one recorded with origin "default"; rows recorded before origins
    were (schema 5) are read as the session wrote them: generation 0 starts with the default."""
    search = [r for r in rows if r.generation >= 0]
    default = None
    if session["mode"] not in NO_FREE_DEFAULT:
        origins = cache.origins(session["id"])
        if origins:
            default = next((r for r in search if r.generation == 0 and origins.get(r.candidate.key) == DEFAULT),
                           None)
        else:
            first = default_row(search)
            if first is not None and space is not None and params_key(first.candidate.params) == \
                    params_key(space.default):
                default = first
    counts = Counter(r.result.status.value for r in search if r is not default)
    return counts, default.result.status.value if default is not None else None


def _bytes_moved(session: dict[str, Any]) -> int | None:
    """Bytes a call moves, when the session's kernel can be found here and says."""
    from autotune.errors import UserError
    from autotune.kernel_loader import resolve_kernel
    from autotune.kernels.catalogue import light_kernel

    name = session["options"].get("kernel_locator") or session["kernel"]
    light = light_kernel(name)  # a built-in kernel: its catalogue entry says, without importing it
    if light is not None:
        return light.bytes_for(tuple(session["shape"]), session["dtype"])
    try:
        spec = resolve_kernel(name)
    except UserError:
        return None
    from autotune.kernels.registry import DTYPES

    return spec.bytes_for(tuple(session["shape"]), DTYPES[session["dtype"]])
