"""The held-out experiment on a CPU: its shapes are held out (of cache.db and of the rules), its
runner plans, skips and isolates as documented, and its report, generated from a recorded
fixture, gives the wall times, times to 2%, provenance and verdicts that the fixture's rows give
when computed here independently (from the raw rows, not through the experiment's code)."""

from __future__ import annotations

import json
import math
import random
import re
import sqlite3
import statistics
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest
import torch

from autotune import cli
from autotune.cache import Cache
from autotune.errors import UserError
from autotune.evaluators.fake import FakeEvaluator
from autotune.evaluators.gpu_process import COMPILE_CACHES
from autotune.experiment import experiment_tags
from autotune.kernels import get_kernel
from autotune.seeds import collect_seeds, heuristic_provenance
from autotune.session import Session, SessionSettings
from autotune.session_options import SessionOptions
from autotune.strategies import get_strategy, strategy_names, strategy_source
from autotune.task import bind_live
from autotune.types import Result, Status
from conftest import REPO, hashed_cost
from experiments.heldout import analysis
from experiments.heldout import definition as d
from experiments.heldout import jobs as heldout_jobs
from experiments.heldout import runner
from experiments.heldout.analysis import LATER_STRATEGY_SUBJECT, REVISED_SUBJECT
from experiments.heldout.report import as_json, helion_spread, in_short, superseded_section
from experiments.heldout.data import (EARLIER, EARLIER_SEEDS, JobTime, curve, load_every_run, load_runs,
                                      recorded_keys, run_key, search_rows, standing, superseded)
from experiments.heldout.isolation import foreign_sessions, without_study
from search_spaces.space import canonical_json

HELDOUT_DIR = REPO / "experiments" / "heldout"
SOFTMAX = d.Problem("softmax", "32768x1000", "float16")
MATMUL = d.Problem("matmul-l2norm", "16384x1024x2048", "bfloat16")
RETIMED = 1.01  # the fixture's re-benchmark reads every config 1% slower than its search-time reading
HELION_JOB_S, HELION_WALL_S = 100.0, 90.0
# Helion's own log: (s since its search began, ms in its timer).  Scaled to our re-timing of its
# pick (1.4 ms x 1.01), its first reading is over 2% slower than the pick, unscaled it is not.
HELION_LOG = [[2.0, 1.35], [4.0, None], [9.0, 1.3]]


# -- held out ---------------------------------------------------------------------------------------
def test_the_declared_problems_have_no_session_of_their_kernel_in_cache_db():
    shipped = Cache.open(REPO / "cache.db", migrate=False)
    try:
        sessions = shipped.sessions(limit=1_000_000)
        at = {(s["kernel"], "x".join(map(str, s["shape"])), s["dtype"]) for s in sessions
              if experiment_tags(s["options"]).get("study") != d.STUDY}
        for problem in d.PROBLEMS:
            assert (problem.kernel, problem.shape, problem.dtype) not in at, problem.label
        assert foreign_sessions(shipped, d.PROBLEMS) == []
        # the check can fail: a recorded shape is found
        recorded = d.Problem("softmax", "4096x32000", "float16")
        assert foreign_sessions(shipped, [recorded]) and ("softmax", "4096x32000", "float16") in at
    finally:
        shipped.close()
    with without_study(REPO / "cache.db") as seed_data:  # what the warm-cache arm's seeds read
        copy = Cache.open(seed_data, migrate=False)
        try:
            for problem in d.PROBLEMS:  # nothing a cache seed could read at the problem itself
                spaces = copy.find_spaces(problem.kernel, problem.dims, problem.dtype)
                assert not [s for s in spaces if s.evaluations], problem.label
        finally:
            copy.close()


def _named_shapes(text: str) -> set[str]:
    """Every shape a module's text names: 4096x32000, 131072x512x512, [1024, 50257]."""
    found = set(re.findall(r"\b\d{3,}(?:x\d+){1,2}\b", text))
    found |= {"x".join(m.replace(" ", "").split(",")) for m in re.findall(r"\[(\d{3,}(?:, ?\d+){1,2})\]", text)}
    return found


def test_the_declared_shapes_are_none_the_rules_name_or_the_seed_study_measured():
    named = set()
    for module in sorted((REPO / "heuristics").glob("*.py")):
        named |= _named_shapes(module.read_text())
    assert {"4096x32000", "1024x50257", "131072x512x512"} <= named  # the parser finds the fitted shapes
    # Only the shapes a rule was declared revised after may be named (and they are).
    assert {p.shape for p in d.PROBLEMS} & named == set(d.SEEN_BY_REVISIONS)
    # The shapes that judge the latest change of each rule or strategy: the row rule's third revision,
    # pattern-ends, pattern-full, the cache source (12288x10000: the third revision was fitted on 1024x196608, a
    # rule the cache source does not read) and the resident matmul rule's third revision.
    judging = (set(d.FEW_ROWS_SHAPES) | set(d.ENDS_SHAPES) | set(d.FULL_SHAPES) | {"12288x10000"}
               | {p.shape for p in d.MATMUL_THIRD})
    assert not judging & set(d.SEEN_BY_REVISIONS)
    from experiments.seed_study.definition import CELLS

    assert not {p.shape for p in d.MATMUL} & {c.shape for c in CELLS}
    assert len(d.SOFTMAX) >= 6 and len(d.MATMUL_FIRST) == len(d.MATMUL_REVISED) == len(d.MATMUL_HOST_DESCRIPTORS) \
        == len(d.MATMUL_THIRD) == 4
    assert len(set(d.PROBLEMS)) == len(d.PROBLEMS)


# -- the fixture: runs recorded through the session loop, tagged as the runner tags them --------------
class Retiming(FakeEvaluator):
    def rebenchmark(self, candidates):
        out = {}
        for result in self.evaluate(candidates):
            out[result.key] = Result(key=result.key, status=Status.OK, median_ms=result.median_ms * RETIMED,
                                     min_ms=result.median_ms, max_ms=result.median_ms * 1.02, repetitions=10)
        return out


def _costs(task, special: list[tuple[dict, float]]) -> Callable[[dict], float]:
    """Search configs cost 1.1-2.1 ms; the special points (normalised) cost what they are given."""
    lookup = {canonical_json(task.candidate(p).params): ms for p, ms in special}
    return lambda params: lookup.get(canonical_json(dict(params)), 1.0 + hashed_cost(params))


def _record(cache, task, *, arm, strategy, seed, setup_s, seeds=(), seed_from="default", costs, budget=6,
            extra=None, fixed=None, interrupt=None, timing_ms=d.TIMING_MS, source=None, seconds=None) -> None:
    tags = {"study": d.STUDY, "arm": arm, "strategy": strategy, "seed": seed, **(extra or {})}
    sources = [s for s in seed_from.split(",") if s]
    options = SessionOptions(seed_from=seed_from, seeds=tuple(o for o, _ in seeds), fresh=True,
                             heuristics=heuristic_provenance(task, sources).get("heuristics"), experiment=tags,
                             timing_target_ms=timing_ms,
                             strategy_source=source or (strategy_source(strategy) if strategy in strategy_names() else None))
    if fixed is not None:
        made = get_strategy("fixed")(task.space, seed=seed, configs={d.HELION_QUICK: fixed})
    else:
        made = get_strategy(strategy)(task.space, seed=seed)
    settings = SessionSettings(strategy if fixed is None else "fixed", seed, budget, seconds=seconds,
                               generation_size=3, mode="gpu")
    evaluator = Retiming(costs, delay_s=0.004, interrupt_after=interrupt)
    tags["job_started"] = round(time.time() - setup_s, 3)
    try:
        Session(task, evaluator, made, settings, cache, options=options.but(experiment=tags), seeds=list(seeds)).run()
    except KeyboardInterrupt:
        assert interrupt is not None


@pytest.fixture(scope="module")
def heldout_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("heldout") / "heldout.db"
    cache = Cache.open(path, create=True)
    for problem in (SOFTMAX, MATMUL):
        task = bind_live(get_kernel(problem.kernel), problem.dims, getattr(torch, problem.dtype), "cpu")
        default_key = task.default_candidate().key
        heuristic = [seed for seed in collect_seeds(task, None, ["heuristic"])
                     if task.candidate(seed[1]).key != default_key]  # the default is measured anyway
        assert heuristic, problem.label
        cached = [("cache", task.space.sample(random.Random(11)))]
        pick = task.space.sample(random.Random(7))
        # The softmax seed lands between 2% and 5% of the best found (1.02 re-timed): within 5%, never 2%.
        seeded = 1.07 if problem is SOFTMAX else 1.05
        costs = _costs(task, [(task.space.default, 1.5), (pick, 1.4), (heuristic[0][1], seeded), (cached[0][1], 1.02)])
        _record(cache, task, arm=d.HELION_QUICK, strategy=d.NATIVE, seed=1, setup_s=0.5, seeds=[("user", pick)],
                seed_from="", costs=costs, budget=1, fixed=pick,
                extra={"helion_job_s": HELION_JOB_S, "helion_wall_s": HELION_WALL_S, "helion_configs": 3,
                       "helion_timeline": HELION_LOG})
        for seed in (1, 2, 3) if problem is SOFTMAX else (1,):
            _record(cache, task, arm=d.COLD, strategy="pattern", seed=seed, setup_s=1.0, costs=costs)
        for seed in (1, 2):
            _record(cache, task, arm=d.WARM_HEURISTIC, strategy="pattern", seed=seed, setup_s=1.0, seeds=heuristic,
                    seed_from="default,heuristic", costs=costs, seconds=600.0 + seed,  # the budget ends them first
                    extra={"seeds": d.seeds_version(problem, d.WARM_HEURISTIC)})
        if problem is SOFTMAX:  # the budget ends it at the default, slower than Helion's pick, long before 20 s
            _record(cache, task, arm=d.COLD, strategy="evolution", seed=1, setup_s=1.0, costs=costs, budget=1)
        if problem is SOFTMAX:  # set-up of 30 s: within Helion's fifth (20 s) it is not, nor its tenth
            for seed in (1, 2):
                _record(cache, task, arm=d.WARM_CACHE, strategy="evolution", seed=seed, setup_s=30.0, seeds=cached,
                        seed_from="default,cache", costs=costs, seconds=0.01,  # the limit ends them first
                        extra={"cache_from": ["1024x1024"], "seeds": d.SEEDS_VERSION[d.WARM_CACHE]})
        else:  # cut short: never counted, and planned again
            _record(cache, task, arm=d.COLD, strategy="pattern", seed=3, setup_s=1.0, costs=costs, interrupt=3)
    # not this study's, or not finished: never read
    other = bind_live(get_kernel("softmax"), SOFTMAX.dims, torch.float16, "cpu")
    Session(other, Retiming(lambda p: 0.01), get_strategy("random")(other.space, seed=0),
            SessionSettings("random", 0, 3, mode="gpu"), cache).run()
    cache.close()
    return path


def _raw_runs(db: Path) -> dict[int, dict[str, Any]]:
    """Each finished study session's rows and tags, read with plain SQL (independent of the store)."""
    conn = sqlite3.connect(db)
    try:
        runs = {}
        for sid, kernel, shape, dtype, options, reason, seconds in conn.execute(
                "SELECT id, kernel, shape, dtype, options, exit_reason, seconds FROM sessions"):
            tags = json.loads(options).get("experiment") or {}
            if tags.get("study") != d.STUDY or reason == "interrupted":
                continue
            rows = conn.execute("SELECT created, generation, ordinal, status, median_ms, config_key, origin "
                                "FROM evaluations WHERE session_id = ? ORDER BY created, generation, ordinal",
                                (sid,)).fetchall()
            runs[sid] = {"problem": (kernel, "x".join(map(str, json.loads(shape))), dtype), "tags": tags,
                         "rows": rows, "options": json.loads(options), "seconds": seconds, "reason": reason}
        return runs
    finally:
        conn.close()


def _expected(run: dict[str, Any]) -> dict[str, Any]:
    """wall, final, provenance and the best-so-far steps of one raw run, computed here."""
    tags, rows = run["tags"], run["rows"]
    search = [r for r in rows if r[1] >= 0]
    final_rows = [r for r in rows if r[1] < 0 and r[3] == "ok"] or [r for r in rows if r[3] == "ok"]
    origin_of = {}
    for r in search:
        origin_of.setdefault(r[5], r[6])
    if tags["arm"] == d.HELION_QUICK:
        pick = [r for r in search if r[1] == 0 and r[6] == "user"][-1]
        final = min(r[4] for r in rows if r[1] < 0 and r[5] == pick[5])
        setup = tags["helion_job_s"] - tags["helion_wall_s"]
        scale = final / min(ms for _, ms in tags["helion_timeline"] if ms is not None)
        steps = [(setup + t, ms * scale) for t, ms in tags["helion_timeline"] if ms is not None]
        counted = [(n, ms * scale) for n, (_, ms) in enumerate(tags["helion_timeline"], start=1) if ms is not None]
        return {"wall": tags["helion_job_s"], "final": final, "origin": "search", "steps": steps, "limit": None,
                "counted": counted, "rate": len(tags["helion_timeline"]) / tags["helion_wall_s"], "seed_statuses": {}}
    best = min(final_rows, key=lambda r: r[4])
    seed_statuses: dict[str, dict[str, int]] = {}
    for r in search:
        if r[1] == 0 and r[6] in ("heuristic", "cache"):
            seed_statuses.setdefault(r[6], {})[r[3]] = seed_statuses.get(r[6], {}).get(r[3], 0) + 1
    steps = [(r[0] - tags["job_started"], r[4]) for r in search if r[3] == "ok"]
    counted = [(n, r[4]) for n, r in enumerate(search, start=1) if r[3] == "ok"]  # rows come in time order
    return {"wall": max(r[0] for r in search) - tags["job_started"], "final": best[4], "origin": origin_of[best[5]],
            "steps": steps, "counted": counted, "searched": len(search), "seed_statuses": seed_statuses,
            "limit": run["seconds"]}


def _time_to(steps, target):
    best = math.inf
    for t, ms in steps:
        best = min(best, ms)
        if best <= target:
            return t
    return None


@pytest.fixture(scope="module")
def heldout_report(heldout_db, tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("report")
    code = cli.main(["experiment", "report", str(HELDOUT_DIR), "--db", str(heldout_db), "--shipped", "none",
                     "--out", str(out)])
    assert code == 0
    return out, json.loads((out / "results.json").read_text())


def test_the_report_is_written_from_the_database_alone(heldout_report):
    out, _ = heldout_report
    for name in ("README.md", "results.json", "ratios.png", "convergence.png", "starts.png"):
        assert (out / name).is_file(), name
    for name in ("ratios.png", "convergence.png", "starts.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    text = (out / "README.md").read_text()
    assert "![where the searches started](starts.png)" in text
    assert "## Targets" in text and f"## {SOFTMAX.label}" in text and f"## {MATMUL.label}" in text


def test_verdicts_on_runs_kept_apart_are_listed_after_the_present_ones():
    from experiments.heldout.analysis import Verdict
    from experiments.heldout.report import render

    def verdict(subject: str) -> Verdict:
        return Verdict("a target", subject, "not met", [f"{subject} detail"])

    subjects = ["cold pattern", "cold pattern" + EARLIER, "warm-cache pattern" + EARLIER_SEEDS, "cold pattern@250ms",
                "warm-heuristic pattern" + REVISED_SUBJECT]
    assert [verdict(s).of_runs_kept_apart for s in subjects] == [False, True, True, True, False]
    options = SimpleNamespace(db=Path("x.db"))
    text = render([], [verdict(s) for s in subjects], options, {})
    targets, apart = text.split("## Targets")[1].split("Runs kept apart")
    assert "| cold pattern | a target |" in targets and f"| warm-heuristic pattern{REVISED_SUBJECT} |" in targets
    # each row says where its target was missed and where nothing is measured yet, as 'In short' does
    placed = Verdict("a target", "cold pattern-ends", "not met", [], ["a"], ["b"], ["c", "d"])
    row = render([], [placed], options, {}).split("## Targets")[1]
    assert "| cold pattern-ends | a target | **not met** (met at 1 of 4) | b | c, d |" in row
    for subject in subjects[1:4]:
        assert f"| {subject} |" in apart and f"| {subject} |" not in targets


def test_wall_times_times_to_2_percent_finals_and_provenance_follow_the_rows(heldout_db, heldout_report):
    _, results = heldout_report
    raw = _raw_runs(heldout_db)
    for problem in results["problems"]:
        mine = [run for run in raw.values() if run["problem"] == (problem["kernel"], problem["shape"],
                                                                    problem["dtype"])]
        expected = {run["tags"]["arm"] + str(run["tags"]["seed"]) + run["tags"]["strategy"]: _expected(run)
                    for run in mine}
        best = min(e["final"] for e in expected.values())
        helion = next(e for k, e in expected.items() if k.startswith(d.HELION_QUICK))
        assert problem["best_ms"] == pytest.approx(best) and problem["helion_ms"] == pytest.approx(helion["final"])
        assert problem["helion_wall_s"] == pytest.approx(HELION_JOB_S)
        reported = 0
        for arm in problem["arms"]:
            for run in arm["runs"]:
                want = expected[arm["arm"] + str(run["seed"]) + arm["strategy"]]
                assert run["wall_s"] == pytest.approx(want["wall"], abs=2e-3)
                assert run["final_ms"] == pytest.approx(want["final"])
                assert run["limit_s"] == want["limit"]
                assert run["best_origin"] == want["origin"]
                for key, target in (("to_best_s", best), ("to_helion_s", helion["final"])):
                    took = _time_to(want["steps"], target * (1 + d.WITHIN))
                    assert (run[key] is None) == (took is None), (arm["arm"], key)
                    if took is not None:
                        assert run[key] == pytest.approx(took, abs=2e-3)
                assert run["configs_to_best"] == _time_to(want["counted"], best * (1 + d.WITHIN))
                rate = want.get("rate") or want["searched"] / (want["wall"] - run["setup_s"])
                assert run["configs_per_s"] == pytest.approx(rate, rel=1e-3)
                assert run["seed_statuses"] == want["seed_statuses"]
                assert bool(run["seed_statuses"]) == (arm["arm"] in (d.WARM_HEURISTIC, d.WARM_CACHE))
                reported += 1
            for key, target in (("to_best_s", best), ("to_helion_s", helion["final"])):
                took = [_time_to(expected[arm["arm"] + str(r["seed"]) + arm["strategy"]]["steps"],
                                 target * (1 + d.WITHIN)) for r in arm["runs"]]
                middle = statistics.median(math.inf if t is None else t for t in took)
                assert arm[key]["median"] == (None if math.isinf(middle) else pytest.approx(middle, abs=2e-3))
                assert arm[key]["missing"] == sum(t is None for t in took)
            walls = [r["wall_s"] for r in arm["runs"]]
            assert arm["wall_s"]["median"] == pytest.approx(statistics.median(walls))
            assert arm["wall_s"]["low"] == min(walls) and arm["wall_s"]["high"] == max(walls)
            ratios = [r["final_ms"] / helion["final"] for r in arm["runs"]]
            assert arm["final_ratio"]["median"] == pytest.approx(statistics.median(ratios))
        assert reported == len(mine)  # every finished run, and only those (the interrupted one is left out)
        counts = [r["configs_to_best"] for a in problem["arms"] for r in a["runs"]]
        assert any(c is not None and c > 1 for c in counts)  # the count check above is not None == None alone
    softmax = next(p for p in results["problems"] if p["shape"] == SOFTMAX.shape)
    warm = next(a for a in softmax["arms"] if a["arm"] == d.WARM_CACHE)
    assert warm["provenance"] == {"cache": 2}  # the fixture's cache seed is the fastest config
    assert all(r["start"] == "warm" and r["seeds"] == ["cache"] for r in warm["runs"])
    cold = next(a for a in softmax["arms"] if a["arm"] == d.COLD)
    assert all(r["start"] == "cold" and r["seed_from"] == "default" for r in cold["runs"])
    heuristic = next(a for a in softmax["arms"] if a["arm"] == d.WARM_HEURISTIC)
    assert heuristic["limit_s"]["low"] == 601.0 and heuristic["limit_s"]["high"] == 602.0  # each run's own limit
    assert next(a for a in softmax["arms"] if a["arm"] == d.HELION_QUICK)["limit_s"]["runs"] == 0


def test_target_verdicts_follow_the_rows(heldout_db, heldout_report):
    _, results = heldout_report
    raw = _raw_runs(heldout_db)
    here = [run for run in raw.values() if run["problem"] == (SOFTMAX.kernel, SOFTMAX.shape, SOFTMAX.dtype)]
    helion = next(_expected(r) for r in here if r["tags"]["arm"] == d.HELION_QUICK)["final"]
    targets = {t["subject"]: t for t in results["targets"]}
    for arm, strategy, share in ((d.COLD, "pattern", d.COLD_WALL_SHARE),
                                 (d.WARM_HEURISTIC, "pattern", d.WARM_WALL_SHARE),
                                 (d.WARM_CACHE, "evolution", d.WARM_WALL_SHARE)):
        took = [_time_to(_expected(r)["steps"], helion * (1 + d.WITHIN)) for r in here
                if (r["tags"]["arm"], r["tags"]["strategy"]) == (arm, strategy)]
        met = statistics.median(math.inf if t is None else t for t in took) <= HELION_JOB_S * share
        verdict = targets[f"{arm} {strategy}"]
        detail = next(line for line in verdict["details"] if line.startswith(SOFTMAX.shape))
        assert detail.endswith(": met" if met else ": not met"), detail
        others = [p.shape for p in d.SOFTMAX if p != SOFTMAX]
        assert verdict["status"] == ("not met" if not met else f"not yet measured at {', '.join(others)}")
    assert not targets[f"{d.WARM_CACHE} evolution"]["met"]  # the fixture's 30 s set-up is over 10 s
    # The warm arms' present seeds are judged apart on the shapes declared after their revision; the
    # row rule's third revision was fitted on one of them, which no longer judges the warm-heuristic arm.
    for arm in d.WARM_ARMS:
        revised = targets[f"{arm} pattern{REVISED_SUBJECT}"]
        judged = [s for s in d.REVISED_SHAPES if arm != d.WARM_HEURISTIC or s not in d.FEW_ROWS_FITTED]
        assert revised["status"] == f"not yet measured at {', '.join(judged)}" and not revised["details"]
    assert "1536x131072" in d.REVISED_SHAPES and "1536x131072" in d.FEW_ROWS_FITTED
    # A strategy added later is judged apart, cold, on the shapes declared after it.
    later = targets[f"{d.COLD} pattern-ends{LATER_STRATEGY_SUBJECT}"]
    assert later["status"] == f"not yet measured at {', '.join(d.ENDS_SHAPES)}" and not later["details"]
    assert targets[f"{d.COLD} pattern"]["details"][0].endswith(": met")
    # matmul: the heuristic seed against the best found, from the warm-heuristic runs' seed rows
    cell = [run for run in raw.values() if run["problem"] == (MATMUL.kernel, MATMUL.shape, MATMUL.dtype)]
    best = min(_expected(r)["final"] for r in cell)
    seed_ms = statistics.median(min(r[4] for r in run["rows"] if r[1] == 0 and r[6] == "heuristic")
                                for run in cell if run["tags"]["arm"] == d.WARM_HEURISTIC)
    matmul = next(p for p in results["problems"] if p["shape"] == MATMUL.shape)
    assert matmul["seed_ratio"] == pytest.approx(seed_ms / best)
    line = next(x for x in targets["matmul cells"]["details"] if x.startswith(MATMUL.label))
    assert line.endswith(": met" if seed_ms / best <= 1 + d.SEED_NEAR else ": not met")


def test_runs_the_config_budget_ended_are_counted_and_those_it_decided_listed(heldout_db, heldout_report):
    """The budget is meant to bind after the search limit: the report lists every softmax run of our
    arms it ended, and as decided by it those not yet within 2% of Helion quick before their target's time."""
    out, results = heldout_report
    here = {sid: r for sid, r in _raw_runs(heldout_db).items()
            if r["problem"] == (SOFTMAX.kernel, SOFTMAX.shape, SOFTMAX.dtype)}
    helion = next(_expected(r) for r in here.values() if r["tags"]["arm"] == d.HELION_QUICK)
    expected = {}
    for sid, run in here.items():
        if run["tags"]["arm"] not in d.OUR_ARMS or run["reason"] != "budget":
            continue
        allowed = helion["wall"] * (d.COLD_WALL_SHARE if run["tags"]["arm"] == d.COLD else d.WARM_WALL_SHARE)
        mine = _expected(run)
        reached = _time_to(mine["steps"], helion["final"] * (1 + d.WITHIN))
        expected[sid] = reached is None and mine["wall"] < allowed
    assert expected and {e["session"]: e["cut_short"] for e in results["budget_ends"]} == expected
    assert any(r["reason"] != "budget" for r in here.values() if r["tags"]["arm"] in d.OUR_ARMS)  # not listed
    assert set(expected.values()) == {True, False}  # the fixture has both kinds
    text = (out / "README.md").read_text()
    section = text.split("## Runs the config budget ended")[1].split("\n## ")[0]
    assert f"{len(expected)} of our softmax runs ended at the budget" in section
    listed = {int(line.split(" | ")[3]) for line in section.splitlines() if line.startswith(f"| {SOFTMAX.shape} |")}
    assert listed == {sid for sid, short in expected.items() if short}


# -- the runner ---------------------------------------------------------------------------------------
def test_helion_quicks_reference_is_the_median_over_its_runs_and_verdicts_say_how_many(tmp_path):
    """Helion's search is random: with several Helion quick runs at a problem, the targets' reference
    (its final time and its wall time) is the median over them, and the verdict names their number."""
    problem = d.Problem("softmax", "64x512", "float16")
    task = bind_live(get_kernel(problem.kernel), problem.dims, torch.float16, "cpu")
    db = tmp_path / "h.db"
    cache = Cache.open(db, create=True)
    picks = [task.space.sample(random.Random(n)) for n in (1, 2, 3)]
    assert len({canonical_json(task.candidate(p).params) for p in picks}) == 3
    picked_ms = (1.9, 1.4, 1.2)  # the median is neither the first, the last, the fastest nor the mean
    costs = _costs(task, [(task.space.default, 2.5), *zip(picks, picked_ms)])
    walls = (160.0, 130.0, 90.0)
    earlier = task.space.sample(random.Random(4))  # seed 2 run before: the later run of seed 2 replaces it
    _record(cache, task, arm=d.HELION_QUICK, strategy=d.NATIVE, seed=2, setup_s=0.5, seeds=[("user", earlier)],
            seed_from="", costs=_costs(task, [(earlier, 1.0)]), budget=1, fixed=earlier,
            extra={"helion_job_s": 70.0, "helion_wall_s": 65.0, "helion_configs": 3, "helion_timeline": HELION_LOG})
    for seed, (pick, wall) in enumerate(zip(picks, walls), start=1):
        _record(cache, task, arm=d.HELION_QUICK, strategy=d.NATIVE, seed=seed, setup_s=0.5, seeds=[("user", pick)],
                seed_from="", costs=costs, budget=1, fixed=pick,
                extra={"helion_job_s": wall, "helion_wall_s": wall - 5.0, "helion_configs": 3,
                       "helion_timeline": HELION_LOG})
    _record(cache, task, arm=d.COLD, strategy="pattern", seed=1, setup_s=1.0, costs=costs)
    cache.close()
    runs = load_runs(db, None)
    (summary,) = analysis.summarise(runs, problems=(problem,))
    finals = sorted(r.final_ms for r in runs if r.arm == d.HELION_QUICK)
    assert finals == pytest.approx(sorted(ms * RETIMED for ms in picked_ms))
    assert summary.helion_ms == pytest.approx(statistics.median(finals))
    assert summary.helion_wall_s == pytest.approx(statistics.median(walls))
    verdict = analysis._time_target([summary], d.COLD, "pattern", (problem,))
    (detail,) = verdict.details
    assert f"of {statistics.median(walls) * d.COLD_WALL_SHARE:.1f} s allowed" in detail
    assert "Helion quick 3 runs)" in detail
    # The report lists each run's final and wall time in seed order, and how far apart they are.
    again = superseded(load_every_run(db, None))
    section = "\n".join(helion_spread([summary], again))
    shown = " / ".join(f"{ms * RETIMED * 1e3:.1f}" for ms in picked_ms)
    assert "Helion quick runs behind each reference (their median): 1 softmax shape with 3 runs." \
        in in_short([], [summary])
    assert f"| {problem.label} | 1, 2, 3 | {shown} | {max(picked_ms) / min(picked_ms):.3f} | 160 / 130 / 90 | " \
           f"{160 / 90:.2f} |" in section
    # A seed run again: the earlier run is shown beside the table, with the session that replaced it.
    ((replaced, by),) = again
    standing_two = next(r for r in runs if r.arm == d.HELION_QUICK and r.seed == 2)
    assert (replaced.seed, by) == (2, standing_two.session_id)
    assert (f"- {problem.label}, seed 2: {1.0 * RETIMED * 1e3:.1f} µs in 70 s (session {replaced.session_id}); "
            f"session {by} stands in its place.") in section


def test_in_short_gives_each_issue_target_for_the_arms_best_present_strategy():
    """The headline picks, per target, the present strategy met at the most shapes: never runs kept
    apart, nor a verdict on a subset of the shapes, however many of those it met."""
    every = "within 2% of Helion quick at every softmax shape in at most 1/5 of its wall time"
    subset = "within 2% of Helion quick at each shape declared after pattern-ends in at most 1/5 of its wall time"

    def verdict(subject, target, met, missed=(), unmeasured=()):
        status = "not met" if missed else "met" if not unmeasured else f"not yet measured at {', '.join(unmeasured)}"
        return analysis.Verdict(target, subject, status, [], list(met), list(missed), list(unmeasured))

    judged = [
        verdict(f"{d.COLD} pattern", every, ["a", "b"], missed=["c"]),
        verdict(f"{d.COLD} pattern-ends", every, ["a", "b", "c"], missed=["d"]),
        verdict(f"{d.COLD} evolution", every, [], unmeasured=["a", "b", "c", "d"]),
        verdict(f"{d.COLD} pattern (earlier version)", every, ["a", "b", "c", "d"]),  # kept apart
        verdict(f"{d.COLD} pattern-ends{LATER_STRATEGY_SUBJECT}", subset, ["c", "d", "e", "f", "g"]),
        verdict(f"{d.WARM_HEURISTIC} pattern", every, ["a"], unmeasured=["b", "c", "d"]),
        verdict(f"{d.WARM_HEURISTIC} evolution", every, ["a"], unmeasured=["b"]),
        verdict("matmul cells", "heuristic seed within 5% of the best found", ["x"], missed=["y"]),
        verdict(f"{d.COLD} pattern-full{LATER_STRATEGY_SUBJECT}", subset, [], unmeasured=["h", "i"]),  # none yet
        verdict(f"{d.WARM_HEURISTIC} pattern (earlier seeds){REVISED_SUBJECT}", subset, ["e"]),  # kept apart
    ]
    picked = dict(analysis.headline(judged))
    assert picked["cold"] is judged[1]
    assert picked["warm"] is judged[6]  # met at as many, with fewer shapes not yet measured
    assert picked["warm from the cache"] is None
    assert picked["matmul seeds"] is judged[7]
    text = "\n".join(in_short(judged))
    assert f"| cold | {d.COLD} pattern-ends | **not met** (met at 3 of 4) | d | - | {every} |" in text
    assert "| warm from the cache | - | nothing recorded |" in text
    # Each change on the shapes declared after it, where any was measured; runs kept apart never.
    changes = text.split("Each change judged only where it was not fitted")[1]
    assert [line.split(" | ")[0] for line in changes.splitlines() if line.startswith(f"| {d.COLD}")] == [
        f"| {d.COLD} pattern-ends{LATER_STRATEGY_SUBJECT}"]
    assert f"| {d.COLD} pattern-ends{LATER_STRATEGY_SUBJECT} | **met** (met at 5 of 5) | - | - |" in changes
    assert "earlier seeds" not in changes and "pattern-full" not in changes


def test_each_planned_job_expects_the_time_its_arms_recorded_runs_took(heldout_db):
    """`--deadline` starts no job that would not end by then: each job carries the longest time a
    finished run of its arm took at its problem (else of its kernel at any shape), read from the
    sessions (job start to session end); our arms' as the time around their search limit, plus
    the job's own limit; none where its arm has no finished run.  That is scaled by the arm's
    seed-to-seed spread: the median, over runs of one strategy at one problem with one limit, of
    their longest job time over their shortest."""
    from experiments.heldout.data import job_times

    times = job_times(heldout_db, None)
    conn = sqlite3.connect(heldout_db)
    try:
        recorded = []  # (kernel, shape, arm, strategy, job seconds, search limit) of every finished session
        for kernel, shape, ended, options, limit, exit_reason in conn.execute(
                "SELECT kernel, shape, ended, options, seconds, exit_reason FROM sessions WHERE mode = 'gpu' AND "
                "EXISTS (SELECT 1 FROM evaluations WHERE session_id = sessions.id AND generation >= 0)"):
            tags = json.loads(options).get("experiment", {})
            if tags.get("study") == d.STUDY and exit_reason in ("budget", "seconds", "strategy finished",
                                                                "strategy exhausted"):
                recorded.append((kernel, shape, tags["arm"], tags["strategy"], ended - tags["job_started"], limit))
    finally:
        conn.close()
    assert sorted(t.seconds for t in times.values()) == pytest.approx(sorted(r[4] for r in recorded))

    def longest_around(kernel: str, arm: str) -> float:
        return max(max(0.0, s - (lim or 0.0)) for k, _, a, _, s, lim in recorded if (k, a) == (kernel, arm))

    def spread(arm: str) -> float:
        groups: dict[tuple, list[float]] = {}
        for kernel, shape, a, strategy, seconds, limit in recorded:
            if a == arm:
                groups.setdefault((kernel, shape, strategy, limit), []).append(seconds)
        ratios = [max(g) / min(g) for g in groups.values() if len(g) > 1]
        return statistics.median(ratios) if ratios else 1.0

    # the fixture's cold runs at the softmax shape differ; its warm runs have limits of their own
    assert spread(d.COLD) > 1.0
    assert runner.seed_spread(times) == pytest.approx({d.COLD: spread(d.COLD), d.WARM_CACHE: spread(d.WARM_CACHE)})
    plan = runner.Plan(problems=(MATMUL, SOFTMAX), arms=(d.HELION_QUICK, d.COLD), strategies=("pattern",),
                       seeds=(4,), helion_seeds=(4,), seconds=7.0, shipped=None)
    jobs = runner.with_expected_times(runner.plan_jobs(plan, set(times)), times)
    expected = {(j.problem, j.arm): j.expected_s for j in jobs}
    assert expected[(MATMUL, d.HELION_QUICK)] == pytest.approx(longest_around(MATMUL.kernel, d.HELION_QUICK))
    assert expected[(MATMUL, d.COLD)] == pytest.approx((longest_around(MATMUL.kernel, d.COLD) + 7.0) * spread(d.COLD))
    # a run that ended before its limit (the warm runs' 601 s limits) counts as using all of it
    (warm,) = runner.with_expected_times([runner.replace(jobs[-1], arm=d.WARM_HEURISTIC)], times)
    assert warm.expected_s == pytest.approx(7.0)
    # another shape of a kernel with runs: the kernel's longest; a kernel without any: no estimate
    other = d.Problem(SOFTMAX.kernel, "64x1000", SOFTMAX.dtype)
    unknown = d.Problem("softmax-triton", "64x1000", "float16")
    (at_other, at_unknown) = runner.with_expected_times(
        [heldout_jobs.HelionQuickJob(other, 1, None), heldout_jobs.HelionQuickJob(unknown, 1, None)], times)
    assert at_other.expected_s == pytest.approx(longest_around(SOFTMAX.kernel, d.HELION_QUICK))
    assert at_unknown.expected_s is None
    assert at_other == heldout_jobs.HelionQuickJob(other, 1, None)  # the estimate is no part of the job's identity


def test_a_job_is_expected_to_take_as_much_longer_as_its_arm_varies_seed_to_seed():
    """Two Helion runs at one problem took 100 and 120 s, one at another 200 s: a third run at
    the first is expected to take 120 s times 1.2, and a run at the second 200 s times 1.2."""
    first, second = (d.Problem("softmax", shape, "float16") for shape in ("64x1000", "64x2000"))
    times = {(first.kernel, first.shape, first.dtype, d.HELION_QUICK, d.NATIVE, 1): JobTime(100.0, None),
             (first.kernel, first.shape, first.dtype, d.HELION_QUICK, d.NATIVE, 2): JobTime(120.0, None),
             (second.kernel, second.shape, second.dtype, d.HELION_QUICK, d.NATIVE, 1): JobTime(200.0, None)}
    assert runner.seed_spread(times) == pytest.approx({d.HELION_QUICK: 1.2})
    jobs = runner.with_expected_times([heldout_jobs.HelionQuickJob(first, 3, None), heldout_jobs.HelionQuickJob(second, 2, None)],
                                      times)
    assert [job.expected_s for job in jobs] == pytest.approx([144.0, 240.0])
    # runs with different search limits are not seeds of one another
    ours = {(first.kernel, first.shape, first.dtype, d.COLD, "pattern", seed): JobTime(seconds, limit)
            for seed, seconds, limit in ((1, 30.0, 20.0), (2, 50.0, 40.0))}
    assert runner.seed_spread(ours) == {}


def test_the_dry_run_says_how_long_each_run_should_take(heldout_db, capsys):
    from experiments.heldout.data import job_times

    runner.main(["--db", str(heldout_db), "--shipped", "none", "--shapes", MATMUL.shape, "--arms", d.HELION_QUICK,
                 "--helion-seeds", "2", "--dry-run"])
    (job,) = runner.with_expected_times([heldout_jobs.HelionQuickJob(MATMUL, 2, None)], job_times(heldout_db, None))
    out = capsys.readouterr().out
    assert f"{job.describe()} (about {job.expected_s:.0f} s)" in out
    assert f"about {job.expected_s:.0f} s in all for the 1 run(s)" in out


def _shortest_set_up(db: Path, kernel: str) -> float:
    """The shortest job start to session start of a finished run of our arms at `kernel`, by SQL."""
    conn = sqlite3.connect(db)
    try:
        set_ups = [started - json.loads(options)["experiment"]["job_started"]
                   for started, options in conn.execute(
                       "SELECT started, options FROM sessions WHERE kernel = ? AND exit_reason IN "
                       "('budget', 'seconds', 'strategy finished', 'strategy exhausted')", (kernel,))
                   if json.loads(options).get("experiment", {}).get("arm") in d.OUR_ARMS]
    finally:
        conn.close()
    assert set_ups
    return min(set_ups)


def test_with_seconds_target_each_run_searches_the_time_its_target_allows(heldout_db, capsys):
    """`--seconds target`: each run of ours is given the time its arm's target allows at its
    shape (a fifth of Helion quick's median wall time cold, a tenth warm) less the shortest set-up
    any run of ours at the kernel took, so no run is stopped before its target's time has passed
    since its job started; a problem with no time target (a matmul cell) keeps `--seconds`'s
    default, and the plan's estimates follow the limits."""
    from experiments.heldout.data import job_times

    floor = _shortest_set_up(heldout_db, SOFTMAX.kernel)
    assert 1.0 <= floor < 2.0  # the fixture's cold runs: 1 s of set-up and the session's own start
    plan = runner.Plan(problems=(SOFTMAX, MATMUL), arms=(d.COLD, d.WARM_HEURISTIC), strategies=("pattern",),
                       seeds=(4,), shipped=None, limit_to_target=True)
    printed: list[str] = []
    jobs = runner.pending_jobs(plan, heldout_db, SimpleNamespace(print=printed.append))
    limits = {(job.problem, job.arm): job.seconds for job in jobs}
    assert limits[(SOFTMAX, d.COLD)] == pytest.approx(HELION_JOB_S / 5 - floor, abs=1e-3)
    assert limits[(SOFTMAX, d.WARM_HEURISTIC)] == pytest.approx(HELION_JOB_S / 10 - floor, abs=1e-3)
    assert limits[(MATMUL, d.COLD)] == limits[(MATMUL, d.WARM_HEURISTIC)] == d.SECONDS
    assert any(line.startswith(f"cold at {SOFTMAX.label}: {HELION_JOB_S / 5 - floor:.1f} s of search "
                               f"({HELION_JOB_S / 5:.1f} s allowed") for line in printed)
    assert any(f"{d.SECONDS:g} s of search: cold at {MATMUL.label}" in line for line in printed)
    # the estimates are read with each job's own limit
    default = runner.pending_jobs(runner.replace(plan, limit_to_target=False), heldout_db,
                                  SimpleNamespace(print=lambda *a: None))
    by_key = {job.key: job for job in default}
    cold = next(job for job in jobs if (job.problem, job.arm) == (SOFTMAX, d.COLD))
    assert by_key[cold.key].expected_s - cold.expected_s == pytest.approx(
        (d.SECONDS - cold.seconds) * runner.seed_spread(job_times(heldout_db, None)).get(d.COLD, 1.0))
    # the command line: 'target', or a positive number; anything else is refused in one line
    runner.main(["--db", str(heldout_db), "--shipped", "none", "--shapes", SOFTMAX.shape, "--arms", d.COLD,
                 "--strategies", "pattern", "--seeds", "4", "--seconds", "target", "--dry-run"])
    assert f"{HELION_JOB_S / 5 - floor:.1f} s of search" in capsys.readouterr().out
    for bad in ("soon", "0"):
        with pytest.raises(SystemExit):
            runner.main(["--db", str(heldout_db), "--seconds", bad, "--dry-run"])
        assert "--seconds" in capsys.readouterr().err


def test_the_plan_skips_recorded_runs_and_reruns_cut_short_ones(heldout_db):
    plan = runner.Plan(problems=(MATMUL,), arms=(d.HELION_QUICK, d.COLD, d.WARM_HEURISTIC), strategies=("pattern",),
                       seeds=(1, 2, 3), shipped=None)
    recorded = recorded_keys(heldout_db, None)
    jobs = runner.plan_jobs(plan, recorded)
    # Helion quick runs with our arms' seeds: the fixture recorded its seed 1 only.
    assert d.HELION_SEEDS == d.SEEDS
    assert [(j.arm, j.strategy, j.seed) for j in jobs] == [
        (d.HELION_QUICK, d.NATIVE, 2), (d.HELION_QUICK, d.NATIVE, 3),
        (d.COLD, "pattern", 2), (d.COLD, "pattern", 3), (d.WARM_HEURISTIC, "pattern", 3)]
    everything = runner.plan_jobs(runner.replace(plan, again=True), recorded)
    assert len(everything) == 3 + 2 * 3 and all(isinstance(j, heldout_jobs.HelionQuickJob) for j in everything[:3])
    assert runner.select(runner.Plan(), ["32768x1000"], ["cold"]).problems == (SOFTMAX,)
    with pytest.raises(UserError, match="not in the experiment"):
        runner.select(runner.Plan(), ["7x7"])
    with pytest.raises(UserError, match="warm-lukewarm"):
        runner.select(runner.Plan(), arms=["warm-lukewarm"])


def _fake_run(requests: list) -> Callable[[Any], Any]:
    """Stands in for `autotune tune`: records a small fake session into the request's database."""
    def run(request):
        requests.append(request)
        task = bind_live(get_kernel(request.kernel), tuple(map(int, request.shape.split("x"))), torch.float16, "cpu")
        cache = Cache.open(request.db, create=True)
        options = SessionOptions(seed_from=request.seed_from, fresh=request.fresh, experiment=dict(request.experiment),
                                 timing_target_ms=request.timing_target_ms, early_setups=request.seed % 2 == 1)
        try:
            return Session(task, FakeEvaluator(hashed_cost), get_strategy("random")(task.space, seed=request.seed),
                           SessionSettings("random", request.seed, 2, mode="gpu"), cache, options=options).run()
        finally:
            cache.close()
    return run


def test_our_arms_measure_anew_and_warm_cache_records_apart_then_merges_home(tmp_path, monkeypatch):
    requests: list = []
    monkeypatch.setattr(heldout_jobs, "run_session", _fake_run(requests))
    problem = d.Problem("softmax-triton", "64x1000", "float16")
    db = tmp_path / "home.db"
    cold_said = heldout_jobs.ArmJob(problem, d.COLD, "pattern", 2, 50, 30.0, None)(db)
    cold = requests[-1]
    assert cold.db == db and cold.fresh and cold.seed_from == "default" and cold.seed == 2
    assert cold.timing_target_ms == d.TIMING_MS  # the study's, whatever the tool's default
    assert dict(cold.experiment)["arm"] == d.COLD and dict(cold.experiment)["job_started"] <= time.time()
    warm_said = heldout_jobs.ArmJob(problem, d.WARM_CACHE, "pattern", 1, 50, 30.0, None, ("128x1000",))(db)
    warm = requests[-1]
    assert warm.db != db and not warm.db.exists() and warm.seed_from == "default,cache"
    home = Cache.open(db)
    sessions = home.sessions()
    home.close()
    tags = [s["options"]["experiment"] for s in sessions]
    assert [(t["arm"], t.get("cache_from"), t.get("seeds")) for t in tags] == [
        (d.WARM_CACHE, ["128x1000"], d.SEEDS_VERSION[d.WARM_CACHE]), (d.COLD, None, None)]
    # Each job names its session as the home database numbers it: the scratch copy's first
    # session is 1 too, which is the cold run's id here.
    by_arm = {s["options"]["experiment"]["arm"]: s["id"] for s in sessions}
    assert cold_said["session"] == by_arm[d.COLD] == 1
    assert warm_said["session"] == by_arm[d.WARM_CACHE] == 2


def test_a_problem_recorded_in_the_shipped_data_is_refused(tmp_path, triton_task):
    problem = d.Problem("softmax-triton", "64x1000", "float16")
    plan = runner.Plan(problems=(problem,), arms=(d.WARM_CACHE,), shipped=tmp_path / "shipped.db")

    def record(path: Path, task, tags=None) -> None:
        cache = Cache.open(path, create=True)
        Session(task, FakeEvaluator(hashed_cost), get_strategy("random")(task.space, seed=0),
                SessionSettings("random", 0, 2, mode="gpu"), cache, options={"experiment": tags or {}}).run()
        cache.close()

    other = bind_live(get_kernel("softmax-triton"), (128, 1000), torch.float16, "cpu")
    record(plan.shipped, other)
    assert runner.check_held_out(plan) == {problem: ["128x1000"]}  # the nearest other shape seeds it
    record(plan.shipped, triton_task, {"study": d.STUDY})  # this study's own run, merged into the shipped data
    with pytest.raises(UserError, match="would seed itself"):
        runner.check_held_out(plan)  # read as it is, the shipped data would seed the shape from itself
    before = plan.shipped.read_bytes()
    with without_study(plan.shipped) as seed_data:
        seeded = runner.replace(plan, seed_data=seed_data)
        assert runner.check_held_out(seeded) == {problem: ["128x1000"]}  # the study's run is not in the copy
        copy = Cache.open(seed_data, migrate=False)
        assert [s["shape"] for s in copy.sessions()] == [(128, 1000)]
        assert not copy.find_spaces("softmax-triton", (64, 1000), "float16")[0].evaluations
        copy.close()
        jobs = runner.plan_jobs(seeded)
        assert jobs and all(j.arm == d.WARM_CACHE and j.shipped == seed_data for j in jobs)  # seeds read the copy
        cold = runner.plan_jobs(runner.replace(seeded, arms=(d.COLD,)))
        assert cold and all(j.shipped == plan.shipped for j in cold)  # the other arms read the shipped data
    assert plan.shipped.read_bytes() == before and not seed_data.exists()  # only read; the copy is gone
    record(plan.shipped, triton_task)  # anyone else's session at the shape
    with pytest.raises(UserError, match="no longer held out"):
        runner.check_held_out(plan)
    with without_study(plan.shipped) as seed_data, pytest.raises(UserError, match="no longer held out"):
        runner.check_held_out(runner.replace(plan, seed_data=seed_data))


def test_helion_quick_is_timed_from_its_jobs_start_and_its_pick_retimed(monkeypatch):
    """Helion's search (a stand-in that writes its CSV log) is timed with its set-up, its log kept
    as the run's timeline, and its pick handed to our harness as the one config to re-time."""
    import csv

    import helion

    seen: dict = {}

    def autotune(kernel, inputs):
        seen["effort"] = kernel.settings.autotune_effort
        time.sleep(0.05)
        with open(f"{kernel.settings.autotune_log}.csv", "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["timestamp_s", "config_index", "status", "perf_ms"])
            writer.writerows([["0.5", 0, "ok", "0.3"], ["0.9", 1, "error", ""], ["1.2", 2, "ok", "0.2"]])
        return helion.Config(block_sizes=[8], num_warps=4)

    requests: list = []
    monkeypatch.setattr(heldout_jobs, "run_session", lambda request: requests.append(request) or
                        type("Outcome", (), {"session_id": 1})())
    before = time.time()
    heldout_jobs.HelionQuickJob(d.Problem("softmax", "64x1000", "float16"), 2, None, autotune=autotune, device="cpu")(
        Path("home.db"))
    (request,) = requests
    tags = dict(request.experiment)
    assert seen["effort"] == "quick" and tags["arm"] == d.HELION_QUICK and tags["seed"] == 2
    assert before - 1e-3 <= tags["job_started"] and tags["helion_job_s"] >= tags["helion_wall_s"] >= 0.05
    assert tags["helion_timeline"] == [[0.5, 0.3], [0.9, None], [1.2, 0.2]] and tags["helion_configs"] == 3
    assert request.strategy == "fixed" and request.budget == 1 and request.fresh and request.seed_from == ""
    assert request.thread_limit and "helion_pick_past_thread_limit" not in tags  # 8 x 1024 values over 128 threads: 64
    (pick,) = request.configs
    assert json.loads(pick)["num_warps"] == 4 and dict(request.strategy_options)["configs"] == {
        d.HELION_QUICK: json.loads(pick)}


def _helion_log_and_pick(kernel) -> Any:
    """Stands in for Helion's search at the end of one: its CSV log written, its pick returned."""
    import csv

    import helion

    with open(f"{kernel.settings.autotune_log}.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["timestamp_s", "config_index", "status", "perf_ms"])
        writer.writerows([["0.5", 0, "ok", "0.3"]])
    return helion.Config(block_sizes=[8], num_warps=4)


def test_a_helion_pick_past_our_limit_is_retimed_in_the_space_without_it(monkeypatch):
    """Helion's search is not bound by our elements-per-thread limit: a pick past it is re-timed
    in the space without the limit (said in its tags), not refused and dropped from the reference."""
    import helion

    def picks_past_the_limit(kernel, inputs):
        _helion_log_and_pick(kernel)
        return helion.Config(block_sizes=[64], reduction_loops=[None], num_warps=4)  # 64 x 1024 / 128: 512

    requests: list = []
    monkeypatch.setattr(heldout_jobs, "run_session", lambda request: requests.append(request) or
                        type("Outcome", (), {"session_id": 1})())
    heldout_jobs.HelionQuickJob(d.Problem("softmax", "64x1000", "float16"), 1, None, autotune=picks_past_the_limit,
                          device="cpu")(Path("home.db"))
    (request,) = requests
    tags = dict(request.experiment)
    assert request.thread_limit is False and "exceeds 128" in tags["helion_pick_past_thread_limit"]
    (pick,) = request.configs
    assert (json.loads(pick)["block_sizes[0]"], json.loads(pick)["num_warps"]) == (64, 4)


def test_a_failed_retiming_of_a_pick_past_the_limit_is_recorded_in_the_space_without_it(tmp_path, monkeypatch):
    """A run whose pick lay past our limit and whose re-timing then failed is recorded as a
    finished one would have been: in the space without the limit, said in its options."""
    import helion

    from experiments.heldout.data import load_unfinished

    problem = d.Problem("softmax", "64x1000", "float16")

    def picks_past_the_limit(kernel, inputs):
        _helion_log_and_pick(kernel)
        return helion.Config(block_sizes=[64], reduction_loops=[None], num_warps=4)

    def refused(request):
        raise UserError("the GPU went away")

    monkeypatch.setattr(heldout_jobs, "run_session", refused)
    db = tmp_path / "home.db"
    for seed, autotune in ((1, picks_past_the_limit), (2, lambda k, i: _helion_log_and_pick(k))):
        with pytest.raises(UserError, match="went away"):
            heldout_jobs.HelionQuickJob(problem, seed, None, autotune=autotune, device="cpu")(db)
    stored = Cache.open(db)
    try:
        past, within = (stored.session(u.session_id) for u in load_unfinished(db, None))
    finally:
        stored.close()
    spec = get_kernel("softmax")
    without = bind_live(spec, problem.dims, torch.float16, "cpu", thread_limit=False).fingerprint
    assert (past["space_fingerprint"], past["options"].thread_limit) == (without, False)
    assert within["space_fingerprint"] == bind_live(spec, problem.dims, torch.float16, "cpu").fingerprint != without
    assert within["options"].thread_limit is None


def test_a_helion_pick_past_the_limit_is_said_in_its_problem_section(tmp_path):
    from experiments.heldout.report import as_json, problem_section

    problem, task, db, cache = _small_study(tmp_path)
    pick = task.space.sample(random.Random(7))
    for seed, past in ((1, None), (2, "x = 512 exceeds 128")):
        extra = {"helion_job_s": 10.0, "helion_wall_s": 9.0, "helion_configs": 3, "helion_timeline": HELION_LOG,
                 **({"helion_pick_past_thread_limit": past} if past else {})}
        _record(cache, task, arm=d.HELION_QUICK, strategy=d.NATIVE, seed=seed, setup_s=0.5, seeds=[("user", pick)],
                seed_from="", costs=lambda p: 1.0 + hashed_cost(p), budget=1, fixed=pick, extra=extra)
    cache.close()
    (summary,) = analysis.summarise(load_runs(db, None), [problem])
    said = [line for line in problem_section(summary) if "elements-per-thread" in line]
    assert len(said) == 1 and said[0].startswith(
        "Helion quick's pick at seed 2 lies past our searches' elements-per-thread limit (x = 512 exceeds 128)")
    (arm,) = as_json([summary], [])["problems"][0]["arms"]
    assert [r["helion_pick_past_thread_limit"] for r in arm["runs"]] == [None, "x = 512 exceeds 128"]


def test_a_failed_helion_run_is_recorded_with_its_reason_left_out_of_the_figures_and_planned_again(
        tmp_path, monkeypatch):
    """Minutes of Helion's search are not lost without a trace: a run whose search raised, and
    one whose pick could not be re-timed, are each recorded with why and when, the error still
    reaches the runner, no figure reads them, the plan runs them again, and the report lists
    them until a run of the same seed finishes."""
    from experiments.heldout.data import load_unfinished
    from experiments.heldout.report import as_json, unfinished_section

    problem = d.Problem("softmax", "64x1000", "float16")
    db = tmp_path / "home.db"

    def crashes(kernel, inputs):
        time.sleep(0.05)
        raise RuntimeError("the search died")

    with pytest.raises(RuntimeError, match="the search died"):
        heldout_jobs.HelionQuickJob(problem, 2, None, autotune=crashes, device="cpu")(db)

    def refused(request):
        raise UserError("the pick is not a point of the space")

    monkeypatch.setattr(heldout_jobs, "run_session", refused)
    with pytest.raises(UserError, match="not a point"):
        heldout_jobs.HelionQuickJob(problem, 3, None, autotune=lambda k, i: _helion_log_and_pick(k), device="cpu")(db)

    search, retiming = load_unfinished(db, None)
    assert (search.problem, search.arm, search.strategy, search.seed) == (problem, d.HELION_QUICK, d.NATIVE, 2)
    assert search.reason == "failed in search: RuntimeError: the search died" and search.after_s >= 0.05
    assert retiming.seed == 3 and retiming.reason.startswith("failed in re-timing its pick: UserError: the pick")
    stored = Cache.open(db)
    try:
        sessions = [stored.session(u.session_id) for u in (search, retiming)]
    finally:
        stored.close()
    assert [s["evaluations"] for s in sessions] == [0, 0]
    died, picked = (experiment_tags(s["options"]) for s in sessions)
    assert "helion_pick" not in died and died["failed_after_s"] == search.after_s
    assert picked["helion_pick"]["num_warps"] == 4 and picked["helion_configs"] == 1
    assert load_runs(db, None) == [] and recorded_keys(db, None) == set()
    plan = runner.Plan(problems=(problem,), arms=(d.HELION_QUICK,), helion_seeds=(2, 3), shipped=None)
    assert [job.seed for job in runner.plan_jobs(plan, recorded_keys(db, None))] == [2, 3]

    finished = {run_key(problem, d.HELION_QUICK, d.NATIVE, 3)}
    section = "\n".join(unfinished_section([search, retiming], finished))
    assert "| softmax 64x1000 float16 | helion-quick native | 2 |" in section
    rows = [line for line in section.splitlines() if line.startswith("| softmax")]
    assert rows[0].endswith("| not yet |") and rows[1].endswith("| yes |")
    listed = as_json([], [], [search, retiming], finished)["unfinished"]
    assert [(u["seed"], u["finished_since"]) for u in listed] == [(2, False), (3, True)]
    assert unfinished_section([], finished) == []


def test_a_helion_run_cut_by_the_deadline_is_recorded_with_what_its_search_had_logged(tmp_path):
    """`--deadline` interrupts Helion's search mid-way (a real timer, as in a batch job): the
    interruption still stops the run, and the record keeps the configs Helion had logged by then."""
    from autotune.experiment import DeadlineReached, ExperimentOptions, execute_jobs
    from experiments.heldout.data import load_unfinished

    def slow(kernel, inputs):
        _helion_log_and_pick(kernel)  # one config logged, then the search goes on past the deadline
        time.sleep(30)

    db = tmp_path / "home.db"
    job = heldout_jobs.HelionQuickJob(d.Problem("softmax", "64x1000", "float16"), 1, None, autotune=slow, device="cpu")
    options = ExperimentOptions(folder=tmp_path, db=db, out=tmp_path, deadline_at=time.monotonic() + 1.0)
    began = time.monotonic()
    with pytest.raises(DeadlineReached) as reached:
        execute_jobs([job], options, SimpleNamespace(print=lambda *a, **k: None), describe=lambda j: j.describe())
    assert time.monotonic() - began < 15 and reached.value.interrupted == job.describe()
    (cut,) = load_unfinished(db, None)
    assert cut.reason == "interrupted in search: DeadlineReached" and 0.9 <= cut.after_s < 15
    assert (cut.helion_configs, cut.helion_best_ms) == (1, 0.3) and load_runs(db, None) == []


def test_a_helion_search_whose_retiming_was_cut_is_not_run_again(tmp_path, monkeypatch):
    """Minutes of Helion's search are not spent twice: when the re-timing of a finished search's
    pick is cut (a deadline, Ctrl-C), the plan re-times that pick alone with the search's start,
    times and log; the run's job time is its search's plus the new re-timing; the report says so.
    A re-timing that failed is searched again (its pick may fail again)."""
    from dataclasses import replace

    from experiments.heldout.data import finished_searches, job_times
    from experiments.heldout.report import problem_section

    problem = d.Problem("softmax", "64x1000", "float16")
    db = tmp_path / "home.db"
    searched = lambda kernel, inputs: _helion_log_and_pick(kernel)  # noqa: E731

    def cut(request):
        raise KeyboardInterrupt

    def refused(request):
        raise UserError("the pick is not a point of the space")

    for seed, retiming in ((2, cut), (3, refused)):
        monkeypatch.setattr(heldout_jobs, "run_session", retiming)
        with pytest.raises((KeyboardInterrupt, UserError)):
            heldout_jobs.HelionQuickJob(problem, seed, None, autotune=searched, device="cpu")(db)
    key = run_key(problem, d.HELION_QUICK, d.NATIVE, 2)
    searches = finished_searches(db, None)
    assert set(searches) == {key} and searches[key].tags["helion_pick"]["num_warps"] == 4
    plan = runner.Plan(problems=(problem,), arms=(d.HELION_QUICK,), helion_seeds=(2, 3), shipped=None)
    again, anew = runner.pending_jobs(plan, db, SimpleNamespace(print=lambda *a, **k: None))
    assert (again.seed, anew.seed, anew.searched) == (2, 3, None) and again.searched == searches[key]
    assert again.expected_s is None and f"search finished in session {searches[key].session_id}" in again.describe()

    def searches_again(kernel, inputs):
        raise AssertionError("the search ran again")

    requests: list = []
    monkeypatch.setattr(heldout_jobs, "run_session", lambda request: requests.append(request) or SimpleNamespace(session_id=9))
    began = time.time()
    replace(again, autotune=searches_again, device="cpu")(db)
    (request,) = requests
    tags, first = dict(request.experiment), searches[key].tags
    assert {k: tags[k] for k in heldout_jobs.SEARCH_TAGS} == {k: first[k] for k in heldout_jobs.SEARCH_TAGS}
    assert tags["retimes_search_of"] == searches[key].session_id and tags["retime_started"] >= began - 1e-3
    assert json.loads(request.configs[0])["num_warps"] == 4

    # Recorded as the runner records it: the job time is the search's and the re-timing's, not the
    # hours between the two tries; the run stands, and no try is re-timed again.
    task = bind_live(get_kernel(problem.kernel), problem.dims, torch.float16, "cpu")
    pick = task.space.sample(random.Random(7))
    cache = Cache.open(db)
    _record(cache, task, arm=d.HELION_QUICK, strategy=d.NATIVE, seed=2, setup_s=3600.0, seeds=[("user", pick)],
            seed_from="", costs=lambda p: 1.0, budget=1, fixed=pick,
            extra={"helion_job_s": 50.0, "helion_wall_s": 45.0, "helion_configs": 1, "helion_timeline": [[1.0, 0.9]],
                   "retimes_search_of": 1, "retime_started": round(time.time() - 2.0, 3)})
    cache.close()
    conn = sqlite3.connect(db)
    ended, options = conn.execute("SELECT ended, options FROM sessions WHERE exit_reason = 'budget'").fetchone()
    conn.close()
    retimed_from = json.loads(options)["experiment"]["retime_started"]
    assert job_times(db, None)[key].seconds == pytest.approx(50.0 + ended - retimed_from)
    assert job_times(db, None)[key].seconds < 60 and finished_searches(db, None) == {}
    (run,) = load_runs(db, None)
    assert (run.wall_s, run.retimes_search_of) == (50.0, 1)
    (summary,) = analysis.summarise([run], [problem])
    assert any("re-timed by a later job" in line and "(session 1) was cut" in line for line in problem_section(summary))


def _small_study(tmp_path) -> tuple[d.Problem, Any, Path, Cache]:
    """A small Triton softmax problem, its task on the CPU and a fresh database for its runs."""
    problem = d.Problem("softmax-triton", "64x1000", "float16")
    task = bind_live(get_kernel(problem.kernel), problem.dims, torch.float16, "cpu")
    db = tmp_path / "h.db"
    return problem, task, db, Cache.open(db, create=True)


def test_sessions_interrupted_or_never_ended_are_listed_as_unfinished(tmp_path):
    from experiments.heldout.data import load_unfinished

    _, task, db, cache = _small_study(tmp_path)
    _record(cache, task, arm=d.COLD, strategy="pattern", seed=1, setup_s=1.0, costs=lambda p: 1.0 + hashed_cost(p),
            interrupt=3)
    _record(cache, task, arm=d.COLD, strategy="pattern", seed=2, setup_s=1.0, costs=lambda p: 1.0 + hashed_cost(p))
    _record(cache, task, arm=d.COLD, strategy="pattern", seed=3, setup_s=1.0, costs=lambda p: 1.0 + hashed_cost(p))
    killed = max(s["id"] for s in cache.sessions())
    cache.db.execute("UPDATE sessions SET ended = NULL, exit_reason = NULL WHERE id = ?", (killed,))
    cache.db.conn.commit()
    cache.close()
    interrupted, never_ended = load_unfinished(db, None)
    assert (interrupted.seed, interrupted.after_s, interrupted.reason) == (1, None, "interrupted")
    assert never_ended.seed == 3 and never_ended.reason.startswith("never ended")
    assert [run.seed for run in load_runs(db, None)] == [2]


def test_a_run_timed_under_another_target_is_kept_apart_and_run_again(tmp_path):
    """A cold run recorded under the old 250 ms timing target is reported as its own strategy
    ('pattern@250ms'), and the study's cold pattern run is still planned."""
    problem, task, db, cache = _small_study(tmp_path)
    _record(cache, task, arm=d.COLD, strategy="pattern", seed=1, setup_s=1.0, costs=lambda p: 1.0 + hashed_cost(p),
            timing_ms=250.0)
    cache.close()
    key = run_key(problem, d.COLD, "pattern", 1)
    recorded = recorded_keys(db, None)
    assert recorded == {run_key(problem, d.COLD, "pattern@250ms", 1)} and key not in recorded
    plan = runner.Plan(problems=(problem,), arms=(d.COLD,), strategies=("pattern",), seeds=(1,), shipped=None)
    assert [(j.arm, j.strategy, j.seed) for j in runner.plan_jobs(plan, recorded)] == [(d.COLD, "pattern", 1)]
    (run,) = load_runs(db, None)
    assert run.strategy == "pattern@250ms"


def test_a_run_of_a_changed_strategy_is_kept_apart_and_run_again(tmp_path, monkeypatch):
    """A run recorded by another version of the strategy's source (or before sessions recorded
    it) is reported as '(earlier version)', and the study's run with today's strategy is planned;
    unless that source is declared in `lineage.PROVEN_SAME` against today's (a change whose
    recorded runs re-ran identically): then it counts as today's and nothing is planned."""
    from autotune.strategies import lineage

    problem = d.Problem("softmax-triton", "64x1000", "float16")
    task = bind_live(get_kernel(problem.kernel), problem.dims, torch.float16, "cpu")
    db = tmp_path / "h.db"
    cache = Cache.open(db, create=True)
    _record(cache, task, arm=d.COLD, strategy="pattern", seed=1, setup_s=1.0, costs=lambda p: 1.0 + hashed_cost(p),
            source="0" * 24)
    _record(cache, task, arm=d.COLD, strategy="evolution", seed=1, setup_s=1.0, costs=lambda p: 1.0 + hashed_cost(p))
    cache.close()
    recorded = recorded_keys(db, None)
    assert recorded == {run_key(problem, d.COLD, "pattern" + EARLIER, 1), run_key(problem, d.COLD, "evolution", 1)}
    plan = runner.Plan(problems=(problem,), arms=(d.COLD,), strategies=("pattern", "evolution"), seeds=(1,),
                       shipped=None)
    assert [(j.arm, j.strategy, j.seed) for j in runner.plan_jobs(plan, recorded)] == [(d.COLD, "pattern", 1)]
    monkeypatch.setattr(lineage, "PROVEN_SAME", {"pattern": {strategy_source("pattern"): ("0" * 24,)}})
    recorded = recorded_keys(db, None)
    assert recorded == {run_key(problem, d.COLD, "pattern", 1), run_key(problem, d.COLD, "evolution", 1)}
    assert runner.plan_jobs(plan, recorded) == []


def test_a_warm_run_seeded_by_an_earlier_seed_source_is_kept_apart_and_run_again(tmp_path):
    """Warm runs recorded before their seed source's last change (`definition.SEEDS_VERSION`) are
    an earlier version of the arm where that change alters their seeds: reported apart, and the
    run is planned again.  Warm-heuristic runs at rows too short for the revised two-pass seeds
    had the present seeds and stay current."""
    from heuristics.row_reduction import LONG_ROW

    long_row = d.Problem("softmax-triton", f"64x{LONG_ROW}", "float16")
    short_row = d.Problem("softmax-triton", f"64x{LONG_ROW - 1}", "float16")
    db = tmp_path / "h.db"
    cache = Cache.open(db, create=True)
    for problem in (long_row, short_row):
        task = bind_live(get_kernel(problem.kernel), problem.dims, torch.float16, "cpu")
        for arm in d.WARM_ARMS:
            runs = ((1, {}, None), (2, {"seeds": d.seeds_version(problem, arm)}, None), (1, {}, "0" * 24))
            for seed, extra, source in runs:
                _record(cache, task, arm=arm, strategy="pattern", seed=seed, setup_s=1.0, seed_from=d.SEED_FROM[arm],
                        costs=lambda p: 1.0 + hashed_cost(p), extra=extra, source=source)
    cache.close()
    # Seed 1 twice, once also by an earlier pattern search: two runs, neither hiding the other.
    earlier = {run_key(problem, arm, label, 1) for problem, arm in
               ((long_row, d.WARM_HEURISTIC), (long_row, d.WARM_CACHE), (short_row, d.WARM_CACHE))
               for label in ("pattern" + EARLIER_SEEDS, "pattern" + EARLIER + EARLIER_SEEDS)}
    current = {run_key(problem, arm, "pattern", 2) for problem in (long_row, short_row) for arm in d.WARM_ARMS}
    same_seeds = {run_key(short_row, d.WARM_HEURISTIC, "pattern", 1),
                  run_key(short_row, d.WARM_HEURISTIC, "pattern" + EARLIER, 1)}
    assert recorded_keys(db, None) == earlier | current | same_seeds
    plan = runner.Plan(problems=(long_row, short_row), arms=d.WARM_ARMS, strategies=("pattern",), seeds=(1, 2),
                       shipped=None)
    assert [(j.problem, j.arm, j.seed) for j in runner.plan_jobs(plan, recorded_keys(db, None))] == [
        (long_row, d.WARM_HEURISTIC, 1), (long_row, d.WARM_CACHE, 1), (short_row, d.WARM_CACHE, 1)]


def test_each_job_compiles_into_empty_caches_of_its_own(tmp_path, monkeypatch):
    """Seen from inside the job (where its workers start): both compile caches point into a new,
    empty folder, a different one per job; after the job the environment is as before and the
    folder is gone.  The run is tagged, and the report counts it."""
    import os

    seen: list[dict[str, str]] = []
    requests: list = []
    fake = _fake_run(requests)

    def run(request):
        caches = {name: os.environ[name] for name in COMPILE_CACHES}
        folder = Path(caches["TRITON_CACHE_DIR"]).parent
        assert folder.is_dir() and not any(folder.iterdir())  # empty at the job's start
        seen.append(caches)
        return fake(request)

    monkeypatch.setattr(heldout_jobs, "run_session", run)
    monkeypatch.setenv("TRITON_CACHE_DIR", "/somewhere/shared")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    problem = d.Problem("softmax-triton", "64x1000", "float16")
    db = tmp_path / "home.db"
    for seed in (1, 2):
        heldout_jobs.ArmJob(problem, d.COLD, "pattern", seed, 50, 30.0, None)(db)
    first, second = seen
    assert first["TRITON_CACHE_DIR"] != second["TRITON_CACHE_DIR"]
    assert Path(first["TRITON_CACHE_DIR"]).parent == Path(first["TORCHINDUCTOR_CACHE_DIR"]).parent
    assert not Path(first["TRITON_CACHE_DIR"]).parent.exists()  # removed after the job
    assert os.environ["TRITON_CACHE_DIR"] == "/somewhere/shared" and "TORCHINDUCTOR_CACHE_DIR" not in os.environ
    runs = load_runs(db, None)
    assert [r.fresh_caches for r in runs] == [True, True]
    from experiments.heldout import report as heldout_report_module

    (summary,) = analysis.summarise(runs, problems=(problem,))
    text = "\n".join(heldout_report_module.problem_section(summary))
    assert "Compile caches empty at the run's start: 2 of 2 runs." in text
    assert [r.early_setups for r in runs] == [True, False]  # as each session recorded it (seeds 1 and 2 here)
    assert "every compile worker set up at the evaluator's start: 1 of 2 (the others" in text


def test_search_rows_are_the_rows_a_run_is_read_from_in_the_order_they_were_measured(tmp_path, monkeypatch):
    """The report reads a run's rows apart from `load_runs` (`moves.py`): the same rows, in the
    order its figures read them."""
    monkeypatch.setattr(heldout_jobs, "run_session", _fake_run([]))
    problem = d.Problem("softmax-triton", "64x1000", "float16")
    db = tmp_path / "home.db"
    for seed in (1, 2):
        heldout_jobs.ArmJob(problem, d.COLD, "pattern", seed, 50, 30.0, None)(db)
    runs = load_runs(db, None)
    rows = search_rows(db, None, [r.session_id for r in runs])
    for run in runs:
        mine = rows[run.session_id]
        assert len(mine) == run.searched and all(r.generation >= 0 for r in mine)
        assert [r.created for r in mine] == sorted(r.created for r in mine)
        assert curve((n, r.result.objective) for n, r in enumerate(mine, start=1)) == run.config_curve


def test_warm_up_binds_each_kernel_once_at_a_shape_no_job_tunes(monkeypatch):
    import autotune.task

    from experiments.heldout import report, runner

    bound = []
    monkeypatch.setattr(autotune.task, "bind_live", lambda spec, shape, dtype, device: bound.append(
        (spec.name, shape, str(dtype), device)))
    problems = [d.SOFTMAX[0], d.SOFTMAX[1], d.SOFTMAX[0], d.MATMUL[0]]
    assert runner._bind_once_each(problems, "cpu") == 2  # one softmax, one matmul kernel
    assert [b[0] for b in bound] == ["softmax", d.MATMUL[0].kernel]
    tuned = {p.dims for p in d.PROBLEMS}
    for name, shape, dtype, device in bound:
        assert shape not in tuned and device == "cpu"
    assert bound[0][1] == tuple(n // 2 for n in d.SOFTMAX[0].dims) and bound[0][2] == "torch.float16"
    assert not {runner.warm_up_shape(p) for p in d.PROBLEMS} & tuned  # for every declared problem


def test_runs_of_the_row_rules_second_revision_are_earlier_only_where_rows_are_few_and_long(tmp_path):
    """The row rule's third revision changed the warm-heuristic seeds only with few long rows
    (`heuristics.row_reduction.few_long_rows`): a run recorded under the second revision's seeds is
    kept apart and planned again there, and stays current where rows are many."""
    from heuristics.device import H100_SM_COUNT
    from heuristics.row_reduction import LONG_ROW, PERSISTENT_MAX_ROWS_PER_SM, few_long_rows

    many = PERSISTENT_MAX_ROWS_PER_SM * H100_SM_COUNT + 1
    few_rows = d.Problem("softmax-triton", f"64x{LONG_ROW}", "float16")
    many_rows = d.Problem("softmax-triton", f"{many}x{LONG_ROW}", "float16")
    assert few_long_rows(64, LONG_ROW, H100_SM_COUNT) and not few_long_rows(many, LONG_ROW, H100_SM_COUNT)
    db = tmp_path / "h.db"
    cache = Cache.open(db, create=True)
    for problem in (few_rows, many_rows):
        task = bind_live(get_kernel(problem.kernel), problem.dims, torch.float16, "cpu")
        for seed, version in ((1, d.TWO_PASS_SEEDS), (2, d.seeds_version(problem, d.WARM_HEURISTIC))):
            _record(cache, task, arm=d.WARM_HEURISTIC, strategy="pattern", seed=seed, setup_s=1.0,
                    seed_from=d.SEED_FROM[d.WARM_HEURISTIC], costs=lambda p: 1.0 + hashed_cost(p),
                    extra={"seeds": version})
    cache.close()
    assert d.seeds_version(few_rows, d.WARM_HEURISTIC) != d.TWO_PASS_SEEDS
    # The fitted shapes are exactly the declared ones with few long rows before the judging shapes.
    earlier = d.SOFTMAX[:d.SOFTMAX_SHAPES.index(d.FEW_ROWS_SHAPES[0])]
    assert {p.shape for p in earlier if few_long_rows(*p.dims, H100_SM_COUNT)} == set(d.FEW_ROWS_FITTED)
    assert all(few_long_rows(*d.Problem("softmax", s, "float16").dims, H100_SM_COUNT) for s in d.FEW_ROWS_SHAPES)
    assert recorded_keys(db, None) == {run_key(few_rows, d.WARM_HEURISTIC, "pattern" + EARLIER_SEEDS, 1),
                                       run_key(few_rows, d.WARM_HEURISTIC, "pattern", 2),
                                       run_key(many_rows, d.WARM_HEURISTIC, "pattern", 1),
                                       run_key(many_rows, d.WARM_HEURISTIC, "pattern", 2)}
    plan = runner.Plan(problems=(few_rows, many_rows), arms=(d.WARM_HEURISTIC,), strategies=("pattern",),
                       seeds=(1, 2), shipped=None)
    assert [(j.problem, j.seed) for j in runner.plan_jobs(plan, recorded_keys(db, None))] == [(few_rows, 1)]
    # Runs recorded before the second revision are earlier at every long row, few or many.
    assert d.seeds_changed_at(many_rows, d.WARM_HEURISTIC, None)
    assert not d.seeds_changed_at(d.Problem("softmax", f"64x{LONG_ROW - 1}", "float16"), d.WARM_HEURISTIC, None)


def test_matmul_runs_seeded_before_the_resident_rules_third_revision_are_kept_apart(tmp_path):
    """At the matmul cells the warm-heuristic arm's seeds changed with each revision of the resident
    rule (`definition.MATMUL_SEEDS_VERSION`); the third added seeds at every cell, so a run of any
    earlier version is earlier.  Two earlier versions' runs of one seed share the key '(earlier
    seeds)': the later stands in the figures and the earlier is listed as recorded again, yet the
    figure read by version still finds it, and its answer still counts towards the best found."""
    problem = d.Problem("matmul-rmsnorm", "256x64x128", "bfloat16")
    db = tmp_path / "h.db"
    cache = Cache.open(db, create=True)
    task = bind_live(get_kernel(problem.kernel), problem.dims, torch.bfloat16, "cpu")
    heuristic = collect_seeds(task, None, ["heuristic"])
    present = d.seeds_version(problem, d.WARM_HEURISTIC)
    # Recorded in this order: an untagged run (the first seed source), one tagged with the softmax
    # arm's version, the present one, the first revision's and then the second's under one seed.
    # The first revision's run alone finds a faster default: the best anyone found.
    fast_default = _costs(task, [(task.space.default, 0.5)])
    for seed, version in ((4, None), (1, d.SEEDS_VERSION[d.WARM_HEURISTIC]), (2, present),
                          (3, d.MATMUL_FIRST_REVISION), (3, d.MATMUL_SECOND_REVISION)):
        _record(cache, task, arm=d.WARM_HEURISTIC, strategy="pattern", seed=seed, setup_s=1.0, seeds=heuristic,
                seed_from=d.SEED_FROM[d.WARM_HEURISTIC],
                costs=fast_default if version == d.MATMUL_FIRST_REVISION else lambda p: 1.0 + hashed_cost(p),
                extra={} if version is None else {"seeds": version})
    cache.close()
    assert len({present, d.MATMUL_FIRST_REVISION, d.MATMUL_SECOND_REVISION, d.SEEDS_VERSION[d.WARM_HEURISTIC]}) == 4
    for version in (None, d.SEEDS_VERSION[d.WARM_HEURISTIC], d.MATMUL_FIRST_REVISION, d.MATMUL_SECOND_REVISION):
        assert d.seeds_changed_at(problem, d.WARM_HEURISTIC, version)
    assert recorded_keys(db, None) == {run_key(problem, d.WARM_HEURISTIC, "pattern" + EARLIER_SEEDS, 4),
                                       run_key(problem, d.WARM_HEURISTIC, "pattern" + EARLIER_SEEDS, 1),
                                       run_key(problem, d.WARM_HEURISTIC, "pattern", 2),
                                       run_key(problem, d.WARM_HEURISTIC, "pattern" + EARLIER_SEEDS, 3)}
    every = load_every_run(db, None)
    by = {(run.seed, run.seeds_tag): run for run in every}
    assert len(every) == 5 and [r.session_id for r in load_runs(db, None)] == [
        by[key].session_id for key in ((4, None), (1, d.SEEDS_VERSION[d.WARM_HEURISTIC]), (2, present),
                                       (3, d.MATMUL_SECOND_REVISION))]
    first, second = by[(3, d.MATMUL_FIRST_REVISION)], by[(3, d.MATMUL_SECOND_REVISION)]
    assert superseded(every) == [(first, second.session_id)]
    (summary,) = analysis.summarise(standing(every), problems=(problem,), every_run=every)
    # The CPU space offers the three program orders: the rule gives three seeds, the figure their fastest.
    assert by[(2, present)].rule_seeds == 3 and summary.seed.kind == "fastest of 3 rule seeds"
    assert summary.seed.runs == 1 and summary.seed.ms == by[(2, present)].rule_ms is not None
    assert summary.seed_recorded_as(d.MATMUL_FIRST_REVISION).ms == first.rule_ms is not None
    assert summary.seed_recorded_as(d.MATMUL_SECOND_REVISION).ms == second.rule_ms is not None
    # The earlier figure reads the latest earlier version alone, never a median across two.
    assert summary.earlier_seed.runs == 1 and summary.earlier_seed.ms == second.rule_ms
    assert summary.best_run.session_id == first.session_id and summary.best_ms == pytest.approx(0.5 * RETIMED)
    verdict = analysis._seed_target([summary], (problem,), "cells")
    ratio = summary.seed.ms / summary.best_ms
    assert ratio > 1 + d.SEED_NEAR and verdict.details == [
        f"{problem.label}: fastest of 3 rule seeds {ratio:.3f}x the best found: not met"]
    # The report lists the run recorded again, with its own final time; results.json too.
    text = "\n".join(superseded_section(superseded(every)))
    assert text.startswith("## Runs recorded again")
    assert f"| {problem.label} | warm-heuristic pattern (earlier seeds) | 3 | {first.session_id} | " \
           f"{first.final_ms * 1000:.1f} | {first.wall_s:.0f} | {second.session_id} |" in text
    (row,) = as_json([summary], [verdict], again=superseded(every))["superseded"]
    assert (row["session"], row["stands_instead"], row["final_ms"]) == (first.session_id, second.session_id,
                                                                        first.final_ms)
    assert superseded_section([]) == []


@pytest.mark.parametrize("problem", [SOFTMAX, MATMUL], ids=["softmax", "matmul"])
def test_the_report_names_where_the_best_found_differs_from_the_rule_seed(heldout_db, heldout_report, problem):
    """Per problem: the best answer's point (a config its best session measured at that time) and
    the rule seed's (the point of a row that is the rule's seed), and the parameters where they
    differ, in the report and its results file; none where the rule seed is the best found (the
    fixture's matmul cell)."""
    folder, results = heldout_report
    (summary,) = analysis.summarise(load_runs(heldout_db, None), problems=(problem,))
    best_run = min((r for a in summary.arms for r in a.runs if r.final_ms is not None), key=lambda r: r.final_ms)
    warm = next(r for a in summary.arms if a.arm == d.WARM_HEURISTIC for r in a.runs)
    conn = sqlite3.connect(heldout_db)
    points = [json.loads(p) for (p,) in conn.execute("SELECT params_json FROM evaluations WHERE session_id = ? AND "
                                                      "median_ms = ?", (best_run.session_id, best_run.final_ms))]
    (options,) = conn.execute("SELECT options FROM sessions WHERE id = ?", (warm.session_id,)).fetchone()
    conn.close()
    assert list(summary.best_params.values()) in points
    rules = [seed["params"] for seed in json.loads(options)["heuristics"]["seeds"]]
    rule_params = summary.seed.rule_params
    assert any(rule.items() <= rule_params.items() for rule in rules)
    expected = [(k, rule_params[k], v) for k, v in summary.best_params.items() if rule_params[k] != v]
    assert summary.rule_differences() == expected
    # the fixture's softmax best is a cache seed; its matmul best the rule's
    assert bool(expected) == (problem is SOFTMAX)
    section = (folder / "README.md").read_text().split(f"## {problem.label}")[1].split("\n## ")[0]
    lines = [x for x in section.splitlines() if x.startswith("The best found differs from the rule seed in:")]
    assert len(lines) == bool(expected)
    assert all(f"{name} {rule_value!r} → {best!r}" in lines[0] for name, rule_value, best in expected)
    reported = next(p for p in results["problems"] if p["shape"] == problem.shape)["rule_differences"]
    assert [(x["parameter"], x["rule"], x["best"]) for x in reported] == expected


def test_each_rule_seed_of_a_matmul_cell_is_reported_with_its_time(heldout_db, heldout_report):
    """At a matmul cell the report and its results file give every rule seed (the rule's choice
    first, each variant by how it differs from it) with its median time over the present
    warm-heuristic runs, as read from their rows; the first seed alone is a figure of its own."""
    folder, results = heldout_report
    (summary,) = analysis.summarise(load_runs(heldout_db, None), problems=(MATMUL,))
    runs = [r for r in summary.warm_heuristic if EARLIER_SEEDS not in r.strategy]
    assert len(runs) == 2 and all(r.rule_seeds == 3 for r in runs)
    conn = sqlite3.connect(heldout_db)
    try:
        def time_of(run, seed):  # the seed's row in generation 0, read with plain SQL
            rows = [(json.loads(p), ms) for p, ms in conn.execute(
                "SELECT params_json, median_ms FROM evaluations WHERE session_id = ? AND generation = 0 "
                "AND status = 'ok'", (run.session_id,))]
            names = list(run.rule_seed_times[0][0])
            return min(ms for p, ms in rows if all(dict(zip(run.final_params, p)).get(k) == seed[k] for k in names))
        expected = [statistics.median(time_of(r, r.rule_seed_times[i][0]) for r in runs) for i in range(3)]
    finally:
        conn.close()
    seeds = summary.rule_seed_times()
    assert [label for label, _ in seeds] == ["first", "pid_type 'persistent_blocked'", "pid_type 'flat'"]
    assert [ms for _, ms in seeds] == pytest.approx(expected)
    assert summary.first_rule_seed.ms == pytest.approx(expected[0]) and summary.seed.ms == pytest.approx(min(expected))
    section = (folder / "README.md").read_text().split(f"## {MATMUL.label}")[1].split("\n## ")[0]
    assert ("The rule's 3 seeds (median over the runs): first: " + f"{expected[0] * 1000:.1f} µs; "
            + f"pid_type 'persistent_blocked': {expected[1] * 1000:.1f} µs; pid_type 'flat': {expected[2] * 1000:.1f} µs.") \
        in section
    softmax = (folder / "README.md").read_text().split(f"## {SOFTMAX.label}")[1].split("\n## ")[0]
    assert "The rule's" not in softmax  # only where the seed target is judged
    cell = next(p for p in results["problems"] if p["shape"] == MATMUL.shape)
    assert [row["seed"] for row in cell["rule_seeds"]] == [label for label, _ in seeds]
    assert [row["ms"] for row in cell["rule_seeds"]] == pytest.approx(expected)
    assert cell["first_rule_seed_ms"] == pytest.approx(expected[0])


def test_where_each_arm_started_is_reported_from_its_rows(heldout_db, heldout_report):
    """The report's table of starting points gives, per problem, the default config's time (median
    over our runs), the heuristic seed's and the fastest cache seed's (median over the present
    warm-cache runs), each over the best found, as read from the rows with plain SQL."""
    folder, results = heldout_report
    conn = sqlite3.connect(heldout_db)
    try:
        def fastest_seed(session: int, origin: str) -> float | None:
            (ms,) = conn.execute("SELECT MIN(median_ms) FROM evaluations WHERE session_id = ? AND generation = 0 "
                                 "AND origin = ? AND status = 'ok'", (session, origin)).fetchone()
            return ms

        standing_sessions = {r.session_id for r in load_runs(heldout_db, None)}

        def sessions_of(problem: d.Problem, arms: tuple[str, ...]) -> list[int]:
            found = []
            for session, options in conn.execute("SELECT id, options FROM sessions WHERE kernel = ? AND shape = ?",
                                                  (problem.kernel, json.dumps(list(problem.dims)))):
                if json.loads(options).get("experiment", {}).get("arm") in arms and session in standing_sessions:
                    found.append(session)
            return found

        ours = sessions_of(SOFTMAX, d.OUR_ARMS)
        default = statistics.median(m for m in (fastest_seed(s, "default") for s in ours) if m is not None)
        cache = statistics.median(fastest_seed(s, "cache") for s in sessions_of(SOFTMAX, (d.WARM_CACHE,)))
    finally:
        conn.close()
    (summary,) = analysis.summarise(load_runs(heldout_db, None), problems=(SOFTMAX,))
    best = summary.best_ms
    assert cache < default and summary.cache_seed.runs == 2
    table = (folder / "README.md").read_text().split("## Where the searches started")[1].split("\n## ")[0]
    (row,) = [line for line in table.splitlines() if line.startswith(f"| {SOFTMAX.label} |")]
    assert row == (f"| {SOFTMAX.label} | {best * 1000:.1f} | {default * 1000:.1f} ({default / best:.3f}) | "
                   f"{summary.seed.ms * 1000:.1f} ({summary.seed.ms / best:.3f}) | "
                   f"{cache * 1000:.1f} ({cache / best:.3f}) | 1024x1024 |")
    (matmul,) = [line for line in table.splitlines() if line.startswith(f"| {MATMUL.label} |")]
    assert matmul.endswith("| - | - |")  # no warm-cache run there
    problem = next(p for p in results["problems"] if p["shape"] == SOFTMAX.shape)
    assert (problem["default_ms"], problem["cache_seed_ms"]) == (pytest.approx(default), pytest.approx(cache))
    assert problem["cache_seed_ratio"] == pytest.approx(cache / best)


def test_a_default_that_never_ran_is_reported_by_how_it_failed():
    """Where our runs measured the default and it failed every time, the table says how, not '-'."""
    from experiments.heldout.data import Run
    from experiments.heldout.report import starting_points
    from experiments.softmax_study.data import Start

    def run(seed: int, status: str | None, ms: float | None) -> Run:
        return Run(problem=MATMUL, arm=d.COLD, strategy="pattern", seed=seed, session_id=seed,
                   start=Start("default", ()), setup_s=1.0, wall_s=2.0, session_s=2.0, final_ms=0.5,
                   best_origin="search", default_status=status, default_ms=ms)

    def default_cell(runs: list[Run]) -> str:
        (summary,) = analysis.summarise(runs, problems=(MATMUL,))
        (row,) = [line for line in starting_points([summary]) if line.startswith(f"| {MATMUL.label}")]
        return row.split(" | ")[2]

    assert default_cell([run(1, "out_of_resources", None), run(2, "out_of_resources", None)]) == "out_of_resources"
    assert default_cell([run(1, "out_of_resources", None), run(2, "ok", 0.6)]) == "600.0 (1.200)"
    assert default_cell([run(1, None, None)]) == "-"


def test_the_history_lists_each_judged_strategy_once_with_the_shapes_that_judge_it():
    from experiments.heldout.history import changes, how_run

    items = changes()
    for strategy, shapes in d.JUDGED_AT.items():
        assert len([c for c in items if f"`{strategy}` (" in c and all(s in c for s in shapes)]) == 1, strategy
    lines = how_run(Path("x.db"), {"64x128": ["softmax-resident (session 7)"]})
    assert sum(line.startswith("- ") for line in lines) == len(items)
    assert lines[0].startswith("Regenerated from `x.db`")
    assert lines[-2].startswith("Sessions of other kernels") and "64x128: softmax-resident (session 7)" in lines[-2]
    assert not any(line.startswith("Sessions of other kernels") for line in how_run(Path("x.db")))
