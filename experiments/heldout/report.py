"""The held-out experiment's report, regenerated from the database alone: Markdown, PNGs, JSON.

    python -m experiments.heldout.report --db cache.db          # anywhere: no GPU needed
    python -m experiments.heldout.report --db runs/heldout.db   # with the shipped cache.db beside it
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, Collection, Sequence

from autotune.errors import UserError
from autotune.experiment import ExperimentOptions

from . import definition as d
from . import plots
from .analysis import ArmSummary, BudgetEnd, ProblemSummary, budget_ends, summarise, us_text
from .devices import device_lines, device_to_read, report_folder, study_devices
from .data import (Key, Run, Unfinished, load_every_run, load_unfinished, search_rows, session_spaces, standing,
                   superseded)
from .history import how_run
from .isolation import other_kernels
from .moves import cold_walks, moves_section
from .runs_apart import superseded_section, unfinished_section
from .stops import StoppedShort, stopped_short, stops_json, stops_section
from .tooling import ToolingPair, tooling_json, tooling_pairs, tooling_section
from .verdicts import HOW_READ, Verdict, headline, unbeaten, verdicts


def report(options: ExperimentOptions, console: Any) -> Path:
    recorded = study_devices(options.db, options.shipped)
    device = device_to_read(recorded, options.device) if recorded else options.device
    options = replace(options, out=report_folder(options, device))
    every_run = load_every_run(options.db, options.shipped, device)
    runs = standing(every_run)
    problems = [p for p in d.PROBLEMS if not options.shapes or p.shape in options.shapes]
    summaries = summarise(runs, problems, every_run)
    if not summaries:
        raise UserError(f"{options.db} holds no {d.STUDY} sessions: record them on a GPU machine with "
                        "`python -m experiments.heldout.runner --db runs/heldout.db` and report from that database")
    judged = verdicts(summaries)
    others = other_kernels(options.db, options.shipped, [s.problem for s in summaries])
    options.out.mkdir(parents=True, exist_ok=True)
    figures = {"ratios to Helion quick": plots.ratios(summaries, options.out / "ratios.png"),
               "convergence": plots.convergence(summaries, options.out / "convergence.png"),
               "where the searches started": plots.starts(summaries, options.out / "starts.png")}
    unfinished = [u for u in load_unfinished(options.db, options.shipped, device) if u.problem in problems]
    path = options.out / "README.md"
    again = [(run, by) for run, by in superseded(every_run) if run.problem in problems]
    finished = {run.key for run in runs}
    ends = budget_ends(summaries)
    stops = stopped_short(summaries, runs, partial(session_spaces, options.db, options.shipped))
    tooling = tooling_pairs(summaries, partial(search_rows, options.db, options.shipped))
    path.write_text(render(summaries, judged, options, figures, others,
                           budget_section(summaries, ends)
                           + tooling_section(tooling, summaries)
                           + moves_section(cold_walks((r for r in runs if r.problem in problems),
                                                      partial(search_rows, options.db, options.shipped)))
                           + stops_section(stops)
                           + unfinished_section(unfinished, finished)
                           + superseded_section(again), again, device, recorded))
    (options.out / "results.json").write_text(json.dumps(
        {"device": device, **as_json(summaries, judged, unfinished, finished, again, ends, stops, tooling)}, indent=1))
    console.print("\n".join(f"{v.subject}: {v.target}: {v.status}" for v in judged))
    return path


def _origins(arm: ArmSummary) -> str:
    return ", ".join(f"{origin} ×{n}" for origin, n in arm.provenance.most_common())


def _seed_outcomes(arm: ArmSummary) -> str:
    """How the seeds of each source fared over the arm's runs, e.g. 'cache 6: out_of_resources 6'."""
    totals: dict[str, Counter[str]] = {}
    for run in arm.runs:
        for origin, counts in run.seed_statuses.items():
            totals.setdefault(origin, Counter()).update(counts)
    return "; ".join(f"{origin} {sum(counts.values())}: " + ", ".join(f"{status} {n}" for status, n in
                                                                       sorted(counts.items()))
                     for origin, counts in sorted(totals.items()))


def _starts(arm: ArmSummary) -> str:
    if arm.arm == d.HELION_QUICK:
        return "Helion's own search"
    texts = sorted({run.start.text() for run in arm.runs})
    return "; ".join(texts)


def render(summaries: list[ProblemSummary], judged: list[Verdict], options: ExperimentOptions,
           figures: dict[str, Path], others: dict[str, list[str]] | None = None,
           unfinished_lines: Sequence[str] = (), again: Sequence[tuple[Run, int]] = (),
           device: str | None = None, devices: Counter[str] | None = None) -> str:
    out = [f"# Held-out shapes: our tuning against Helion quick ({d.STUDY})", "",
           *in_short(judged, summaries), "## How the study was run", "",
           *how_run(options.db, others), *device_lines(device, devices or Counter()),
           "Every time is read back from the recorded sessions. **search limit s** is the search time each of "
           "our runs was given (`--seconds`, counted once its evaluator was ready): a run that had not come within "
           "2% when its limit ran out counts as 'never', whatever it would have found later. **wall s** runs from "
           "the job's start (before the kernel is bound and the evaluator and its compile workers start: the "
           "set-up is counted) to the last config measured; for Helion quick, from the job's start to its "
           "autotune call's return. **s to 2%** is "
           f"the time from the job's start until the best so far came within {d.WITHIN:.0%} of the best time anyone "
           "found at the problem (the re-timed answers of every run) or of Helion quick's; Helion's own timeline is "
           "in its timer, scaled so its best equals our re-timing of its pick. **final µs** is the answer re-timed "
           "by our harness (our final re-benchmark; Helion's pick re-timed). **best from** is where each run's "
           "answer came from: the search, a seed (heuristic, cache) or the default. Each cell is the median "
           "[range] over the runs (seeds); 'never' is a run that did not get there. Helion quick's search is "
           "random too: the targets read its final time and its wall time as the median over its runs, and each "
           "verdict says how many runs that is. Our arms measure every config "
           f"anew (nothing reused), timing each config for about {d.TIMING_MS:g} ms of kernel time; a strategy "
           "labelled '@250ms' is a run recorded under another timing target (`--timing-ms`), and one labelled "
           "'(earlier version)' a run of the strategy's source before its last change (sessions record the hash of "
           "their strategy's module): both are kept and judged apart. A strategy labelled "
           f"'{d.WORKER_BUILT.strip()}' is a run whose benchmark process loaded the code its compile workers "
           "generated instead of generating it again (`build_from_worker`, faster tooling than the runs before it): "
           "judged apart from the runs without it, so runs under either tooling are never mixed; one labelled "
           f"'{d.COMPILED_AHEAD.strip()}' also compiled each next generation's likely configs on the compile "
           "workers its slowest compiles left idle (`compile_ahead`), judged apart likewise. "
           "The warm-cache arm's seeds are the fastest "
           "recorded config of each of the nearest other shapes in the shipped data without this study's own "
           "sessions (runs seeded by the nearest shape's fastest configs alone are labelled '(earlier seeds)'). "
           "The runner process imports torch, Triton and Helion, starts the workers' fork server and binds each "
           "kernel its jobs tune (at a shape no job tunes) before its first job; no job counts that (Helion "
           "quick's included). A runner that did not yet start the fork server early left it to its first job, "
           "whose set-up is then several times the others'; one that did not yet bind each kernel first left the "
           "kernel's first binding to its first job (about a second more: `set_up.bind_s` in that session).", "",
           "## Targets", "", HOW_READ, ""]
    present = [v for v in judged if not v.of_runs_kept_apart]
    apart = [v for v in judged if v.of_runs_kept_apart]
    header = ["| subject | target | status | not met at | not yet measured at |", "|---|---|---|---|---|"]
    out += header + [f"| {v.subject} | {v.target} | {_status_cells(v)} |" for v in present] + [""]
    if apart:
        out += ["Runs kept apart (an earlier strategy, earlier seeds or another timing target), judged by the same "
                "targets:", ""] + header + [f"| {v.subject} | {v.target} | {_status_cells(v)} |" for v in apart] + [""]
    for verdict in present + apart:
        if verdict.details:
            out += [f"{verdict.subject}:", ""] + [f"- {line}" for line in verdict.details] + [""]
    out += helion_spread(summaries, again)
    out += starting_points(summaries)
    out += list(unfinished_lines)
    for name, path in figures.items():
        out += [f"![{name}]({path.name})", ""]
    for summary in summaries:
        out += problem_section(summary)
    return "\n".join(out) + "\n"


def in_short(judged: list[Verdict], summaries: Sequence[ProblemSummary] = ()) -> list[str]:
    """The issue's four targets, each for its arm's best strategy, before the full list; and how many
    Helion quick runs the references rest on."""
    rows = []
    for name, verdict in headline(judged):
        if verdict is None:
            rows.append(f"| {name} | - | nothing recorded | | | |")
            continue
        rows.append(f"| {name} | {verdict.subject} | {_status_cells(verdict)} | {verdict.target} |")
    return ["## In short", "",
            "Each of the issue's targets for the arm's strategy that met it at the most shapes (or cells); how the "
            "study was run, which shapes each change was fitted on and judged at, and every verdict with its "
            "figures follow.", "",
            "| target | arm and strategy | status | not met at | not yet measured at | target in full |",
            "|---|---|---|---|---|---|", *rows, "", *_unbeaten(judged), *_references(summaries),
            *_changes_judged(judged)]


def _unbeaten(judged: Sequence[Verdict]) -> list[str]:
    """The strategies the headline leaves out that have not missed yet: where the next runs can still
    meet a target, which the headline alone (the most shapes met) does not say."""
    found = [f"{v.subject} ({name}: met at {len(v.met_at)}, not yet measured at {len(v.unmeasured)})"
             for name, v in unbeaten(judged)]
    return [f"Still able to meet its target (met at every shape measured so far): {'; '.join(found)}.", ""] \
        if found else []


def _changes_judged(judged: Sequence[Verdict]) -> list[str]:
    """Each change (a strategy, a seed rule's revision) by its verdict on the shapes declared after
    it, where any of them was measured: the figures above mix shapes a change was fitted on."""
    later = [v for v in judged if not v.of_runs_kept_apart and "declared after" in v.subject
             and (v.met_at or v.missed_at)]
    if not later:
        return []
    rows = [f"| {v.subject} | {_status_cells(v)} |" for v in later]
    return ["Each change judged only where it was not fitted: on the shapes (or cells) declared after it, where "
            "any was measured (the targets as above).", "",
            "| subject | status | not met at | not yet measured at |", "|---|---|---|---|", *rows, ""]


def _status_cells(verdict: Verdict) -> str:
    """A verdict's status (met at how many of the places it judges), where it was not met and
    where it is not yet measured: three cells of a table row."""
    judged_at = len(verdict.met_at) + len(verdict.missed_at) + len(verdict.unmeasured)
    return (f"**{verdict.status.split(' at ')[0]}** (met at {len(verdict.met_at)} of {judged_at}) | "
            f"{', '.join(verdict.missed_at) or '-'} | {', '.join(verdict.unmeasured) or '-'}")


FAMILIES = (("softmax", "softmax shape", "softmax shapes"), ("matmul", "matmul cell", "matmul cells"))


def _references(summaries: Sequence[ProblemSummary]) -> list[str]:
    """'Helion quick runs behind each reference: 13 softmax shapes with 2 runs, 4 with 1; ...'."""
    parts = []
    for family, one, many in FAMILIES:
        counts: Counter[int] = Counter()
        for summary in summaries:
            if summary.problem.family == family:
                counts[len(summary.helion_runs)] += 1
        groups = []
        for i, (runs, n) in enumerate(sorted(counts.items(), reverse=True)):
            noun = f" {one if n == 1 else many}" if i == 0 else ""
            groups.append(f"{n}{noun} with {runs} run{'' if runs == 1 else 's'}")
        if groups:
            parts.append(", ".join(groups))
    return [f"Helion quick runs behind each reference (their median): {'; '.join(parts)}.", ""] if parts else []


def helion_spread(summaries: list[ProblemSummary], again: Sequence[tuple[Run, int]] = ()) -> list[str]:
    """Helion quick from seed to seed, where it ran more than once: how far apart its runs' final
    times and wall times are (every target's reference is their median); and each run made again
    at the same seed, which the latest replaces in the reference but which shows the same spread."""
    repeats = [f"- {run.problem.label}, seed {run.seed}: {us_text(run.final_ms)} µs in {run.wall_s:.0f} s "
               f"(session {run.session_id}); session {by} stands in its place."
               for run, by in again if run.arm == d.HELION_QUICK and run.wall_s is not None]
    rows = []
    for summary in summaries:
        runs = summary.helion_runs
        finals = [r.final_ms for r in runs if r.final_ms is not None and math.isfinite(r.final_ms)]
        walls = [r.wall_s for r in runs if r.wall_s is not None]
        if len(finals) < 2 or len(walls) < 2:
            continue
        rows.append(f"| {summary.problem.label} | {', '.join(str(r.seed) for r in runs)} | "
                    f"{' / '.join(us_text(ms) for ms in finals)} | {max(finals) / min(finals):.3f} | "
                    f"{' / '.join(f'{w:.0f}' for w in walls)} | {max(walls) / min(walls):.2f} |")
    if not rows and not repeats:
        return []
    return ["## Helion quick, seed to seed", "",
            "Helion quick's search is random: where it ran more than once, its runs' final times and wall times "
            "(each run's, in seed order) and the slowest over the fastest. Every target above reads their median.",
            "", "| problem | seeds | final µs | slowest / fastest | wall s | longest / shortest |",
            "|---|---|---|---:|---|---:|", *rows, ""] + (
        ["Runs made again at the same seed: the latest of a seed stands in the reference above, and the earlier "
         "one counts towards the best found. The same seed does not give the same search (Helion's choices "
         "follow its timings):", "", *repeats, ""] if repeats else [])


def starting_points(summaries: Sequence[ProblemSummary]) -> list[str]:
    """Where each of our arms started at each problem, against the best anyone found: the default
    (cold), the fastest heuristic seed (warm-heuristic) and the fastest cache seed (warm-cache).
    A start within 2% leaves the search nothing to find; one far off is what it has to make up."""
    def cell(summary: ProblemSummary, ms: float | None) -> str:
        ratio = summary.over_best(ms)
        return "-" if ratio is None else f"{us_text(ms)} ({ratio:.3f})"

    rows = []
    for summary in summaries:
        sources = sorted({s for r in summary.present_cache_runs for s in r.cache_from})
        cells = [cell(summary, ms) for _, ms in summary.starts()]
        cells[0] = summary.default_failure or cells[0]  # the default: how it failed, where it never ran
        rows.append(f"| {summary.problem.label} | {us_text(summary.best_ms)} | {' | '.join(cells)} | "
                    f"{', '.join(sources) or '-'} |")
    if not rows:
        return []
    return ["## Where the searches started", "",
            "Each arm's start against the best time anyone found (µs, and over the best in brackets): the default "
            "config (the cold arm's start; median over our runs that measured it), the heuristic seed (the "
            "warm-heuristic arm's, as in each problem's section) and the fastest seed of the cache source (the "
            "warm-cache arm's: the fastest recorded config of each of the nearest other shapes; median over the "
            "warm-cache runs of the present cache source). A status in place of a time: the default did not run in "
            "any of our runs, and how it failed; '-': no run measured it. The shapes the cache seeds came from are "
            "the last column.", "",
            "| problem | best found µs | default | heuristic seed | cache seed | cache seeds from |",
            "|---|---:|---:|---:|---:|---|", *rows, ""]


def budget_section(summaries: Sequence[ProblemSummary], ends: Sequence[BudgetEnd]) -> list[str]:
    """How many of our softmax runs the config budget ended before their search limit, by arm and
    strategy, and each one it ended before its target's time without having come within 2%."""
    if not ends:
        return []
    counted: Counter = Counter()  # our softmax runs per arm and strategy
    for summary in summaries:
        for arm in summary.arms:
            if summary.problem.family == "softmax" and arm.arm in d.OUR_ARMS:
                counted[arm.name] += len(arm.runs)
    by_arm = Counter(f"{e.run.arm} {e.run.strategy}" for e in ends)
    short = [e for e in ends if e.cut_short]
    short_by_arm = Counter(f"{e.run.arm} {e.run.strategy}" for e in short)
    rows = [f"| {name} | {counted[name]} | {by_arm[name]} | {short_by_arm[name]} |" for name in sorted(by_arm)]
    listed = [f"| {e.run.problem.shape} | {e.run.arm} {e.run.strategy} | {e.run.seed} | {e.run.session_id} | "
              f"{e.run.wall_s:.1f} | {e.allowed_s:.1f} |" for e in short]
    return ["## Runs the config budget ended", "",
            f"Each of our runs ends at its search limit or after {d.BUDGET} configs (`definition.BUDGET`), "
            f"whichever comes first; the limit is meant to come first. {len(ends)} of our softmax runs ended at "
            "the budget. One that had not come within 2% of Helion quick by then counts as 'never'; where that "
            "was before the time its target allows, the budget decided the run, not the target, and only against "
            f"us. {len(short) or 'None'} of them did so.", "",
            "| arm and strategy | softmax runs | ended at the budget | of them, before the allowed time and not "
            "within 2% |", "|---|---:|---:|---:|", *rows, ""] + (
        ["| shape | arm and strategy | seed | session | wall s | allowed s |", "|---|---|---:|---:|---:|---:|",
         *listed, ""] if short else [])


def problem_section(summary: ProblemSummary) -> list[str]:
    problem = summary.problem
    best_run = summary.best_run
    lines = [f"## {problem.label}", ""]
    if best_run is not None:
        lines.append(f"Best time anyone found: {us_text(summary.best_ms)} µs ({best_run.arm} {best_run.strategy} "
                     f"seed {best_run.seed}, session {best_run.session_id}).")
    if summary.helion_ms is not None:
        runs = len(summary.helion_runs)
        over = "its one run" if runs == 1 else f"the median over its {runs} runs"
        lines.append(f"Helion quick: {us_text(summary.helion_ms)} µs in {summary.helion_wall_s:.0f} s of wall time "
                     f"({over}).")
    for run in (r for r in summary.helion_runs if r.helion_past_thread_limit):
        lines.append(f"Helion quick's pick at seed {run.seed} lies past our searches' elements-per-thread limit "
                     f"({run.helion_past_thread_limit}): it was re-timed in the space without the limit, and none of "
                     "our arms could have found it.")
    for run in (r for r in summary.helion_runs if r.retimes_search_of is not None):
        lines.append(f"Helion quick's pick at seed {run.seed} was re-timed by a later job (session "
                     f"{run.session_id}): the re-timing after its search (session {run.retimes_search_of}) was cut. "
                     "Its wall time is that search's job, to its autotune call's return.")
    if summary.seed.ms is not None:
        lines.append(f"Heuristic seed ({summary.seed.kind}): {us_text(summary.seed.ms)} µs, "
                     f"{summary.ratio(summary.seed):.3f}x the best found.")
    seeds = summary.rule_seed_times()
    if len(seeds) > 1 and summary.problem.family == "matmul":
        lines.append(f"The rule's {len(seeds)} seeds (median over the runs): " + "; ".join(
            f"{label}: {'failed' if ms is None else f'{us_text(ms)} µs'}" for label, ms in seeds) + ".")
    changed = summary.rule_differences()
    if changed:
        lines.append("The best found differs from the rule seed in: "
                     + "; ".join(f"{name} {rule!r} → {best!r}" for name, rule, best in changed) + ".")
    if summary.earlier_seed.ms is not None:
        lines.append(f"Heuristic seed of the earlier seed source ({summary.earlier_seed.kind}): "
                     f"{us_text(summary.earlier_seed.ms)} µs, "
                     f"{summary.ratio(summary.earlier_seed):.3f}x the best found.")
    sources = sorted({s for a in summary.arms for r in a.runs for s in r.cache_from})
    if sources:
        lines.append(f"Cache seeds from: {', '.join(sources)}.")
    for arm in summary.arms:
        given = _seed_outcomes(arm)
        if given:
            lines.append(f"Seeds given to {arm.name}, over its {len(arm.runs)} run(s): {given}.")
    runs = [r for a in summary.arms for r in a.runs]
    fresh = sum(r.fresh_caches for r in runs)
    lines.append(f"Compile caches empty at the run's start: {fresh} of {len(runs)} runs"
                 + ("." if fresh == len(runs) else " (the others could find configs that an earlier run on the same "
                                                  "machine had compiled)."))
    ours = [r for r in runs if r.arm != d.HELION_QUICK]
    if ours:
        early = sum(r.early_setups for r in ours)
        lines.append(f"Our runs with every compile worker set up at the evaluator's start: {early} of {len(ours)}"
                     + ("." if early == len(ours) else " (the others set their compile workers up when the first "
                                                       "generation needed them, which held its first timing back)."))
    lines += ["", "| arm | runs | search limit s | wall s | set-up s | configs/s | s to 2% of best "
                  "| configs to 2% of best | s to 2% of Helion quick | final µs | final / Helion | wall / Helion "
                  "| best from | started from | sessions |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for arm in summary.arms:
        sessions = ", ".join(str(r.session_id) for r in arm.runs)
        lines.append(f"| {arm.name} | {len(arm.runs)} | {arm.limit.text(digits=0)} | {arm.wall.text()} | "
                     f"{arm.setup.text()} | {arm.rate.text()} | {arm.to_best.text()} | "
                     f"{arm.configs_to_best.text(digits=0)} | {arm.to_helion.text()} | {arm.final.text(scale=1e3)} | "
                     f"{arm.final_ratio.text(digits=3)} | {arm.wall_ratio.text(digits=3)} | {_origins(arm)} | "
                     f"{_starts(arm)} | {sessions} |")
    return lines + [""]


def as_json(summaries: list[ProblemSummary], judged: list[Verdict], unfinished: Sequence[Unfinished] = (),
            finished: Collection[Key] = (), again: Sequence[tuple[Run, int]] = (),
            ends: Sequence[BudgetEnd] = (), stops: Sequence[StoppedShort] = (),
            tooling: Sequence[ToolingPair] = ()) -> dict[str, Any]:
    """Every figure of the report, for plotting elsewhere; `finished`: the keys of the finished runs."""
    finite = (lambda v: v if v is not None and math.isfinite(v) else None)  # noqa: E731
    return {
        "unfinished": [{"kernel": u.problem.kernel, "shape": u.problem.shape, "dtype": u.problem.dtype,
                        "arm": u.arm, "strategy": u.strategy, "seed": u.seed, "session": u.session_id,
                        "after_s": u.after_s, "reason": u.reason, "helion_configs": u.helion_configs,
                        "helion_best_ms": u.helion_best_ms, "finished_since": u.key in finished}
                       for u in unfinished],
        "superseded": [{"kernel": run.problem.kernel, "shape": run.problem.shape, "dtype": run.problem.dtype,
                        "arm": run.arm, "strategy": run.strategy, "seed": run.seed, "session": run.session_id,
                        "final_ms": finite(run.final_ms), "wall_s": run.wall_s, "stands_instead": by}
                       for run, by in again],
        "budget_ends": [{"kernel": e.run.problem.kernel, "shape": e.run.problem.shape, "arm": e.run.arm,
                         "strategy": e.run.strategy, "seed": e.run.seed, "session": e.run.session_id,
                         "wall_s": finite(e.run.wall_s), "allowed_s": e.allowed_s, "reached_s": e.reached_s,
                         "cut_short": e.cut_short} for e in ends],
        "stopped_short": stops_json(stops),
        "tooling": tooling_json(tooling),
        "targets": [{"subject": v.subject, "target": v.target, "status": v.status, "met": v.met,
                     "details": v.details, "met_at": v.met_at, "missed_at": v.missed_at,
                     "not_yet_measured_at": v.unmeasured} for v in judged],
        "in_short": [{"target": name, "subject": v.subject if v else None, "status": v.status if v else None}
                     for name, v in headline(judged)],
        "unbeaten": [{"target": name, "subject": v.subject} for name, v in unbeaten(judged)],
        "problems": [{
            "kernel": s.problem.kernel, "shape": s.problem.shape, "dtype": s.problem.dtype, "best_ms": s.best_ms,
            "helion_ms": s.helion_ms, "helion_wall_s": s.helion_wall_s, "seed_ms": s.seed.ms,
            "seed_kind": s.seed.kind, "seed_ratio": s.ratio(s.seed),
            "rule_seeds": [{"seed": label, "ms": ms} for label, ms in s.rule_seed_times()],
            "first_rule_seed_ms": s.first_rule_seed.ms,
            "rule_differences": [{"parameter": n, "rule": r, "best": b} for n, r, b in s.rule_differences()],
            "earlier_seed_ms": s.earlier_seed.ms, "earlier_seed_ratio": s.ratio(s.earlier_seed),
            "cache_seed_ms": s.cache_seed.ms, "cache_seed_ratio": s.ratio(s.cache_seed), "default_ms": s.default_ms,
            "arms": [{
                "arm": a.arm, "strategy": a.strategy, "wall_s": a.wall.record(), "setup_s": a.setup.record(),
                "to_best_s": a.to_best.record(), "configs_to_best": a.configs_to_best.record(),
                "configs_per_s": a.rate.record(), "to_helion_s": a.to_helion.record(), "final_ms": a.final.record(),
                "final_ratio": a.final_ratio.record(), "wall_ratio": a.wall_ratio.record(),
                "limit_s": a.limit.record(),
                "provenance": dict(a.provenance),
                "runs": [{"session": r.session_id, "seed": r.seed, "wall_s": finite(r.wall_s),
                          "setup_s": finite(r.setup_s), "session_s": finite(r.session_s), "limit_s": r.limit_s,
                          "final_ms": finite(r.final_ms), "best_origin": r.best_origin,
                          "to_best_s": r.time_to(s.best_ms * (1 + d.WITHIN)) if s.best_ms else None,
                          "configs_to_best": r.configs_to(s.best_ms * (1 + d.WITHIN)) if s.best_ms else None,
                          "configs_per_s": r.configs_per_s,
                          "to_helion_s": r.time_to(s.helion_ms * (1 + d.WITHIN)) if s.helion_ms else None,
                          "seed_from": r.start.seed_from, "start": r.start.kind, "seeds": list(r.start.seeds),
                          "heuristic_ms": r.heuristic_ms, "rule_ms": r.rule_ms, "default_ms": r.default_ms,
                          "cache_from": list(r.cache_from), "seed_statuses": r.seed_statuses,
                          "evaluations": r.evaluations, "helion_configs": r.helion_configs,
                          "helion_pick_past_thread_limit": r.helion_past_thread_limit,
                          "curve": [list(p) for p in r.curve]}
                         for r in a.runs]}
                for a in s.arms]}
            for s in summaries]}


def main(argv: Sequence[str] | None = None) -> None:
    from rich.console import Console

    folder = Path(__file__).parent
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, default=Path("data/shipped.db"), help="the recorded sessions")
    parser.add_argument("--shipped", default="data/shipped.db", help="read beside --db ('none': --db alone)")
    parser.add_argument("--out", type=Path, default=folder / "report",
                        help=f"where to write it (default: report/; report-<device>/ for a GPU other than {d.DEVICE})")
    parser.add_argument("--shapes", default="", help="comma-separated subset of the shapes")
    parser.add_argument("--device", default=None, help="the GPU whose runs to report, as sessions name it (default: "
                                                       f"the only one recorded, or {d.DEVICE!r} among several)")
    args = parser.parse_args(argv)
    shipped = None if args.shipped.lower() in ("", "none") else Path(args.shipped)
    options = ExperimentOptions(folder=folder, db=args.db, out=args.out, shipped=shipped, device=args.device,
                                shapes=tuple(s.strip() for s in args.shapes.split(",") if s.strip()))
    path = report(options, Console(width=150))
    print(f"report written to {path}")


if __name__ == "__main__":
    from autotune.store.schema import CacheError

    try:
        main()
    except (UserError, CacheError) as error:
        raise SystemExit(f"heldout: {error}") from None
