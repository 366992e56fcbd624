"""What the user sees: live progress, the per-generation timeline and the result tables."""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from autotune.evaluators.failures import failure_lines
from autotune.session import GenerationSummary, SessionOutcome, SessionSettings
from autotune.task import TuningTask
from autotune.types import Candidate, Result


def gbps(bytes_moved: int | None, ms: float | None) -> float | None:
    return bytes_moved / (ms * 1e-3) / 1e9 if ms and bytes_moved else None


def timeline_line(summary: GenerationSummary) -> str:
    best = f"{summary.best_ms:.4f} ms" if summary.best_ms is not None else "none yet"
    improvement = f"{summary.improvement_pct:+.1f}%" if summary.improvement_pct is not None else "-"
    changed = ", ".join(summary.changed[:6]) + (" ..." if len(summary.changed) > 6 else "") if summary.changed else "-"
    label = {0: "seeds", -1: "final"}.get(summary.generation, f"gen {summary.generation}")
    return (f"{label:>8}: {summary.tested:3d} tested, {summary.failures:3d} failed, best {best}, "
            f"improved {improvement}, changed: {changed}  ({summary.elapsed_s:.1f} s)")


class RichReporter:
    """Progress bar per generation and a timeline line after each one, followed by one line per
    group of that generation's failures (failures.failure_groups): what a compiler printed stays
    in the records and logs, never here."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=False)
        self._progress: Progress | None = None
        self._task_id: Any = None
        self._failed = 0
        self._failures: list[Result] = []  # this generation's

    def session_started(self, session_id: int, task: TuningTask, settings: SessionSettings, source: str) -> None:
        budget = f"budget {settings.budget}" if settings.budget else ""
        seconds = f"{settings.seconds:g} s" if settings.seconds else ""
        limits = ", ".join(x for x in (budget, seconds) if x)
        self.console.print(
            f"session {session_id}: {task.spec.name} {'x'.join(map(str, task.shape))} {task.dtype}, "
            f"strategy {settings.strategy} (seed {settings.seed}, {limits}); {source}"
        )

    def generation_started(self, generation: int, size: int) -> None:
        self._failed = 0
        self._failures = []
        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[failed]} failed"), TimeElapsedColumn(), console=self.console, transient=True,
        )
        self._progress.start()
        label = {0: "seeds", -1: "final"}.get(generation, f"gen {generation}")
        self._task_id = self._progress.add_task(label, total=size, failed=0)

    def result(self, candidate: Candidate, result: Result) -> None:
        if result.status.failed:
            self._failures.append(result)
        if self._progress is None:
            return
        self._failed += result.status.failed
        self._progress.update(self._task_id, advance=1, failed=self._failed)

    def generation_finished(self, summary: GenerationSummary) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        self.console.print(timeline_line(summary))
        for line in failure_lines(self._failures, indent=" " * 10):
            self.console.print(escape(line), highlight=False, soft_wrap=True)  # recorded text is data, never markup
        self._failures = []


def comparison_table(rows: Iterable[tuple[str, Result]], bytes_moved: int, reference_ms: float | None,
                     title: str, copy_ms: float | None = None) -> Table:
    """Time, GB/s, % of the measured copy bandwidth and time relative to the best, per row."""
    table = Table(title=title)
    for column in ("", "status", "median ms", "min-max ms", "GB/s", "% of copy", "time / best"):
        table.add_column(column, justify="right" if column not in ("", "status") else "left")
    for label, result in rows:
        if result.ok:
            ratio = f"{result.median_ms / reference_ms:.3f}" if reference_ms else "-"
            rate = gbps(bytes_moved, result.median_ms)
            share = f"{100 * copy_ms / result.median_ms:.0f}%" if copy_ms else "-"
            table.add_row(label, "ok", f"{result.median_ms:.4f}", f"{result.min_ms:.4f}-{result.max_ms:.4f}",
                          f"{rate:.0f}" if rate else "-", share, ratio)
        else:
            table.add_row(label, result.status.value, "-", "-", "-", "-", "-")
    return table


def outcome_rows(task: TuningTask, outcome: SessionOutcome,
                 recorded_best: tuple[Candidate, Result] | None) -> list[tuple[str, Result]]:
    default_label = "Helion default config" if task.space.family == "helion" else "declared default config"
    rows: list[tuple[str, Result]] = []
    if outcome.best:
        rows.append(("best found" + (" (re-timed)" if outcome.rebenchmarked else ""), outcome.best[1]))
    if outcome.default:
        rows.append((default_label, outcome.default[1]))
    for origin, (_candidate, result) in sorted(outcome.seeds.items()):
        rows.append((f"best {origin} seed", result))
    if recorded_best is not None:
        rows.append(("best recorded for this space", recorded_best[1]))
    rows += [(name, result) for name, result in outcome.baselines.items()]
    return rows


def outcome_counts(outcome: SessionOutcome) -> tuple[Counter, str | None]:
    """(per-status counts of the configs counted against the budget, the status of the default
    config when it was evaluated free of budget).  A session's counts include the default, its
    budget does not: told apart, the configs tested equal the statuses' sum and, once the budget
    is reached, the budget."""
    counts = Counter({status: n for status, n in outcome.status_counts.items() if n})
    if outcome.default is None or sum(counts.values()) - outcome.evaluations != 1:
        return counts, None
    candidate, result = outcome.default
    # A default re-timed at the end was ok when first evaluated (only ok configs are re-timed).
    status = "ok" if candidate.key in outcome.rebenchmarked else result.status.value
    if not counts[status]:
        return counts, None
    counts[status] -= 1
    return +counts, status


def tested_text(counts: Counter, default_status: str | None, budget: int | None = None) -> str:
    """'10 configs tested (budget 10) + the default config': what a session's title says."""
    budget_text = f" (budget {budget})" if budget else ""
    return (f"{sum(counts.values())} configs tested{budget_text}"
            + (" + the default config" if default_status is not None else ""))


def statuses_text(counts: Counter, default_status: str | None) -> str:
    """'statuses of the 10 configs: ok 9, compile_timeout 1; the default config (free of budget): ok'."""
    listed = ", ".join(f"{status} {n}" for status, n in sorted(counts.items())) or "none"
    default = f"; the default config (free of budget): {default_status}" if default_status is not None else ""
    return f"statuses of the {sum(counts.values())} configs: {listed}{default}"


def print_outcome(console: Console, task: TuningTask, outcome: SessionOutcome, db: str = "cache.db",
                  recorded_best: tuple[Candidate, Result] | None = None) -> None:
    best_ms = outcome.best[1].median_ms if outcome.best else None
    copy = outcome.baselines.get("device copy")
    counts, default_status = outcome_counts(outcome)
    console.print(comparison_table(outcome_rows(task, outcome, recorded_best), task.bytes_moved(), best_ms,
                                   f"session {outcome.session_id}: {tested_text(counts, default_status)}, "
                                   f"stopped by {outcome.exit_reason}, {outcome.wall_s:.1f} s",
                                   copy_ms=copy.median_ms if copy is not None and copy.ok else None))
    console.print(statuses_text(counts, default_status))
    if outcome.best:
        console.print(f"best config ({outcome.best[0].key}): {dict(outcome.best[0].native)}")
        if outcome.best_origin:
            console.print(f"the best config came from: {PROVENANCE.get(outcome.best_origin, 'seed ' + outcome.best_origin)}")
        console.print(f"export it: autotune export {outcome.session_id} --db {db} --format python")


# How a row's stored origin reads in reports: found by the search, or given before it.
PROVENANCE = {"search": "the search", "default": "the compiler's default (given)",
              "rebenchmark": "the final re-benchmark"}

MODE_LABELS = {"gpu": "measured", "replay": "replay"}  # where a session's results came from


def sessions_table(sessions: list[dict[str, Any]], wide: bool = False) -> Table:
    """One row per session, with where its data came from: measured on a device (which, with
    which toolchain) or replayed/imported from recorded data; `wide` adds the Python version,
    limits, start time, database and seed origins."""
    import time

    from rich.markup import escape

    columns = ["id", "kernel", "shape", "dtype", "strategy", "seed", "data", "evals", "failed", "exit", "device",
               "torch/triton/helion", "space"]
    if wide:
        columns += ["python", "budget", "started (UTC)", "data from", "seeds", "measured on"]
    table = Table(title="sessions")
    for column in columns:
        table.add_column(column)
    for s in sessions:
        v, options = s["versions"], s["options"]
        row = [str(s["id"]), s["kernel"], "x".join(map(str, s["shape"])), s["dtype"], s["strategy"], str(s["seed"]),
               MODE_LABELS.get(s["mode"], s["mode"]), str(s["evaluations"]), str(s["failures"]),
               s["exit_reason"] or "running?", s["device"] or "(unnamed)",  # an import's file may name none
               f"{v.get('torch')}/{v.get('triton')}/{v.get('helion')}",
               s["space_fingerprint"] if wide else s["space_fingerprint"][:12]]
        if wide:
            limits = [f"{s['budget']} configs" if s["budget"] else "", f"{s['seconds']:g} s" if s["seconds"] else ""]
            row += [str(v.get("python", "-")), ", ".join(x for x in limits if x) or "-",
                    time.strftime("%Y-%m-%d %H:%M", time.gmtime(s["started"])), _data_from(options),
                    ",".join(dict.fromkeys(options.get("seeds", []))) or "-", _workers_cell(s.get("measured_on", {}))]
        table.add_row(*(escape(str(cell)) for cell in row))  # recorded text is data, never markup
    return table


def where_measured(counts: dict[str, int], calibration: dict[str, Result]) -> list[str]:
    """Lines saying which workers measured a session's rows, and how the same reference config
    timed on each (so measurements mixed from several GPUs can be checked); none when the
    rows say nothing about workers."""
    lines = []
    if counts:
        lines.append("measured on: " + ", ".join(f"{worker} ({n})" for worker, n in counts.items()))
    medians = {worker: r.median_ms for worker, r in calibration.items() if r.median_ms}
    if medians:
        key = next(iter(calibration.values())).key  # one reference config per session
        low, high = min(medians.values()), max(medians.values())
        per_worker = ", ".join(f"{worker.split()[0]} {ms:.4f} ms" for worker, ms in medians.items())
        lines.append(f"calibration (config {key} on each worker): {per_worker}; slowest/fastest "
                     f"{high / low:.3f}")
    return lines


def _workers_cell(counts: dict[str, int]) -> str:
    """'gpu0 32, gpu1 31': the workers (their short names) that measured a session's rows."""
    return ", ".join(f"{worker.split()[0]} {n}" for worker, n in counts.items()) or "-"


def _data_from(options: dict[str, Any]) -> str:
    """The database a session recorded into (and the shipped data it read beside it), or the file
    it was imported from."""
    if options.get("db"):
        return str(options["db"]) + (f" + {options['shipped']}" if options.get("shipped") else "")
    return f"file {options['file']}" if options.get("file") else "-"
