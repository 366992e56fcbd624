"""What a new user met trying the project on a CPU machine from a fresh clone (issue 25, item 6),
each checked here: exports read back as --config, check-config against the recorded GPU space,
Kernel Tuner files without a device name, typed strategy options, piped output not cut,
`sessions` saying what it leaves out, counts that agree with the budget, and quick refusals.

The shipped measurements are read in place (the built database is only ever read)."""

from __future__ import annotations

import inspect
import json
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import autotune.tuning
from autotune.store.cache import Cache
from conftest import assert_one_line_error, hashed_cost, run_main, subprocess_env, table_count

HELION_SESSION, TRITON_SESSION = 3, 1  # of the shipped data: softmax and softmax-triton at 4096x32000
SHAPE = "4096x32000"


@pytest.fixture(scope="module")
def shipped(shipped_db) -> Path:
    """The shipped measurements, read in place (as --shipped, or as a --db that opens read-only)."""
    return shipped_db


@pytest.fixture(autouse=True)
def _no_gpu(monkeypatch):
    """As on the newcomer's machine: no GPU, so tune replays and check-config reads the recorded space."""
    monkeypatch.setattr(autotune.tuning, "gpu_available", lambda: False)
    monkeypatch.setenv("COLUMNS", "400")


def _session(path: Path, session_id: int) -> dict:
    cache = Cache.open(path)
    try:
        return cache.session(session_id)
    finally:
        cache.close()


def _check_config_json(capsys, kernel: str, config: str, *extra: str) -> dict:
    code, out, err = run_main(["check-config", kernel, "--shape", SHAPE, "--config", config, "--format", "json",
                               *extra], capsys)
    assert code == 0, err
    (item,) = json.loads(out)
    return item


# -- 1. what export writes, --config reads --------------------------------------------------------
@pytest.mark.parametrize("kernel, session_id", [("softmax", HELION_SESSION), ("softmax-triton", TRITON_SESSION)])
def test_a_session_export_is_read_back_by_check_config_and_tune(kernel, session_id, shipped, tmp_path, capsys):
    exported = tmp_path / "best.json"
    code, _, err = run_main(["export", str(session_id), "--shipped", str(shipped), "--format", "json",
                             "--out", str(exported)], capsys)
    assert code == 0, err
    native = json.loads(exported.read_text())
    item = _check_config_json(capsys, kernel, str(exported), "--shipped", str(shipped))
    assert item["native"] == native  # the config checked is the very config exported
    assert item["space"] == _session(shipped, session_id)["space_fingerprint"]
    code, out, err = run_main(["tune", kernel, "--shape", SHAPE, "--budget", "2", "--config", str(exported),
                               "--db", str(tmp_path / "u.db"), "--shipped", str(shipped)], capsys)
    assert code == 0, err
    journal = Cache.open(tmp_path / "u.db")
    (session,) = journal.sessions()
    rows = [r for r in journal.session_evaluations(session["id"]) if r.generation == 0]
    journal.close()
    given = [r for r in rows if r.candidate.native == native]
    assert given and all(r.result.ok for r in given)  # replayed from the recorded measurement, not not_recorded


@pytest.mark.parametrize("kernel", ["softmax", "softmax-triton"])
def test_a_kernel_table_export_is_read_back_as_its_entry_for_the_shape(kernel, shipped, tmp_path, capsys):
    code, out, err = run_main(["export", kernel, "--shipped", str(shipped), "--format", "json"], capsys)
    assert code == 0, err
    table = json.loads(out)
    (entry,) = [e for e in table["entries"] if e["shape"] == [4096, 32000] and e["dtype"] == "float16"]
    path = tmp_path / "table.json"
    path.write_text(out)
    item = _check_config_json(capsys, kernel, str(path), "--shipped", str(shipped))
    assert item["native"] == entry["config"] and item["given_as"] == "table"
    assert "4096x32000 float16" in item["label"]


def test_a_table_of_another_kernel_and_a_native_list_of_the_wrong_length_are_refused(shipped, tmp_path, capsys):
    code, out, _ = run_main(["export", "softmax-triton", "--shipped", str(shipped), "--format", "json"], capsys)
    path = tmp_path / "triton.json"
    path.write_text(out)
    line = assert_one_line_error(*run_main(["check-config", "softmax", "--shape", SHAPE, "--config", str(path),
                                            "--shipped", str(shipped)], capsys))
    assert "softmax-triton" in line and "config table" in line
    line = assert_one_line_error(*run_main(["check-config", "softmax", "--shape", SHAPE, "--shipped", str(shipped),
                                            "--config", '{"indexing": ["pointer"]}'], capsys))
    assert "indexing has 1 element(s)" in line and "indexing[5]" in line


# -- 2. check-config checks against the recorded GPU space -----------------------------------------
def test_check_config_uses_the_recorded_gpu_space_and_says_so(shipped, capsys):
    gpu_only = '{"host_tensor_descriptors": true, "maxnreg": 128}'  # settings Helion offers on a GPU only
    item = _check_config_json(capsys, "softmax", gpu_only, "--shipped", str(shipped))
    assert item["config"]["host_tensor_descriptors"] is True and item["config"]["maxnreg"] == 128
    assert item["space"] == _session(shipped, HELION_SESSION)["space_fingerprint"]
    assert "recorded on NVIDIA H100" in item["checked_against"]
    code, out, err = run_main(["check-config", "softmax", "--shape", SHAPE, "--config", gpu_only,
                               "--shipped", str(shipped)], capsys)
    assert code == 0 and "checked against the space recorded on NVIDIA H100" in out.splitlines()[0]
    # the kernel bound on this CPU has neither setting: --live checks against it, and says so
    line = assert_one_line_error(*run_main(["check-config", "softmax", "--shape", SHAPE, "--config", gpu_only,
                                            "--shipped", str(shipped), "--live"], capsys))
    assert "host_tensor_descriptors" in line


def test_check_config_without_recorded_data_checks_the_live_space_and_says_why(capsys):
    item = _check_config_json(capsys, "softmax-triton", '{"num_warps": 4}', "--shipped", "none")
    assert "bound on this machine (cpu; no recorded GPU space" in item["checked_against"]


# -- 3. a Kernel Tuner file with an empty device name ----------------------------------------------
def _kernel_tuner_document(device: str) -> dict:
    return {"device_name": device, "kernel_name": "vector_add", "problem_size": [1024],
            "tune_params_keys": ["block_size_x"], "tune_params": {"block_size_x": [32, 64, 128]}, "objective": "time",
            "cache": {"32": {"block_size_x": 32, "time": 0.5, "times": [0.5, 0.5]},
                      "64": {"block_size_x": 64, "time": 0.25, "times": [0.25, 0.25]},
                      "128": {"block_size_x": 128, "time": "RuntimeFailedConfig"}}}


def test_a_kernel_tuner_file_with_an_empty_device_name_imports_as_kernel_tuner_reads_it(tmp_path, capsys):
    from autotune.interop.kernel_tuner_sim import kernel_tuner_simulate

    path = tmp_path / "vector_add.json"
    path.write_text(json.dumps(_kernel_tuner_document("")))
    _, env = kernel_tuner_simulate(path, strategy="random_sample", max_fevals=3)  # Kernel Tuner itself reads it
    assert env["device_name"] == ""
    code, out, err = run_main(["import-space", str(path), "--db", str(tmp_path / "k.db"), "--shipped", "none"], capsys)
    assert code == 0, err
    cache = Cache.open(tmp_path / "k.db")
    (session,) = cache.sessions()
    assert session["device"] == "" and session["evaluations"] == 3
    assert cache.best(session["space_fingerprint"])[1].median_ms == 0.25
    cache.close()
    again = tmp_path / "again.json"
    code, _, err = run_main(["export-space", "--session", str(session["id"]), "--db", str(tmp_path / "k.db"),
                             "--shipped", "none", "--out", str(again)], capsys)
    assert code == 0, err
    assert json.loads(again.read_text())["device_name"] == ""  # written back as it came
    code, out, _ = run_main(["sessions", "--db", str(tmp_path / "k.db"), "--shipped", "none"], capsys)
    assert "(unnamed)" in out


def test_a_device_name_that_is_not_a_string_is_still_refused(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_kernel_tuner_document(None)))  # type: ignore[arg-type]
    line = assert_one_line_error(*run_main(["import-space", str(path), "--db", str(tmp_path / "k.db")], capsys))
    assert "device_name" in line and not (tmp_path / "k.db").exists()


# -- 4. strategy options: typed in one place ------------------------------------------------------
def test_a_strategy_option_of_the_wrong_type_is_one_clear_line(capsys):
    line = assert_one_line_error(*run_main(["tune", "softmax-triton", "--shape", "64x1000", "--strategy", "pattern",
                                            "--option", "copies=many"], capsys))
    assert "copies" in line and "integer" in line and "'many'" in line and "not supported" not in line


def test_every_declared_option_refuses_a_value_of_the_wrong_type_naming_option_type_and_value():
    from autotune.strategies.options import OPTIONS, StrategyOptionError, check_options

    for strategy, table in OPTIONS.items():
        for name, option in table.items():
            with pytest.raises(StrategyOptionError) as info:
                check_options(strategy, {name: "@@"})
            message = str(info.value)
            assert name in message and option.describe() in message and "'@@'" in message, message
        with pytest.raises(StrategyOptionError, match="takes no option 'colour'"):
            check_options(strategy, {"colour": "blue"})


@pytest.mark.parametrize("strategy, given, expected", [
    ("pattern", {"copies": "4", "min_improvement": "0.01", "max_neighbours": "none"},
     {"copies": 4, "min_improvement": 0.01, "max_neighbours": None}),
    ("evolution", {"population": 8, "mutation": "0.5"}, {"population": 8, "mutation": 0.5}),
    ("helion-pattern", {"effort": "full"}, {"effort": "full"}),
    ("random", {"screen": "footprint"}, {"screen": "footprint"}),
])
def test_options_given_as_text_or_typed_come_out_typed(strategy, given, expected):
    from autotune.strategies.options import check_options

    typed = check_options(strategy, given)
    assert typed == expected and all(type(typed[k]) is type(v) for k, v in expected.items())


@pytest.mark.parametrize("strategy, given, words", [
    ("pattern", {"copies": "0"}, ["copies", ">= 1", "'0'"]),
    ("pattern", {"copies": True}, ["copies", "integer", "True"]),
    ("evolution", {"mutation": "2"}, ["mutation", "from 0 to 1", "'2'"]),
    ("surrogate", {"initial_points": "2.5"}, ["initial_points", "integer", "'2.5'"]),
    ("helion-lfbo", {"effort": "medium"}, ["effort", "quick, full", "'medium'"]),
    ("tpe", {"n_startup_trials": "nan"}, ["n_startup_trials", "'nan'"]),
])
def test_out_of_range_values_are_refused_too(strategy, given, words):
    from autotune.strategies.options import StrategyOptionError, check_options

    with pytest.raises(StrategyOptionError) as info:
        check_options(strategy, given)
    for word in words:
        assert word in str(info.value), str(info.value)


def test_the_option_table_matches_every_strategy_and_its_signature():
    """Every registered strategy has its options declared, exactly the keyword arguments its
    constructor takes (less those the tuner passes itself), with the same choices."""
    from autotune.strategies import Strategy, get_strategy, strategy_names
    from autotune.strategies.helion_search import EFFORTS
    from autotune.strategies.options import OPTIONS
    from heuristics.screen import SCREENS

    passed_by_the_tuner = {"space", "seed", "task", "budget", "names", "sample", "seeds", "options"}
    for name in strategy_names():
        assert name in OPTIONS, f"declare {name}'s options in autotune/strategies/options.py"
        taken = set()
        for klass in get_strategy(name).__mro__:  # a constructor that forwards **options takes its base's too
            if klass is Strategy or "__init__" not in vars(klass):
                continue
            parameters = inspect.signature(klass.__init__).parameters.values()
            taken |= {p.name for p in parameters if p.kind is p.KEYWORD_ONLY}
            if not any(p.kind is p.VAR_KEYWORD for p in parameters):
                break
        assert taken - passed_by_the_tuner == set(OPTIONS[name]), name
    assert OPTIONS["helion-pattern"]["effort"].choices == OPTIONS["helion-lfbo"]["effort"].choices == EFFORTS
    assert OPTIONS["random"]["screen"].choices == tuple(sorted(SCREENS))


def test_a_typed_option_reaches_the_strategy_and_the_session_record(shipped, tmp_path, capsys):
    code, _, err = run_main(["tune", "softmax-triton", "--shape", SHAPE, "--strategy", "pattern", "--budget", "4",
                             "--option", "copies=3", "--db", str(tmp_path / "u.db"), "--shipped", str(shipped)], capsys)
    assert code == 0, err
    journal = Cache.open(tmp_path / "u.db")
    (session,) = journal.sessions()
    journal.close()
    assert dict(session["options"]["strategy_options"]) == {"copies": 3}


# -- 5. piped output is not cut -------------------------------------------------------------------
def test_piped_output_is_not_truncated(shipped, tmp_path):
    env = subprocess_env()
    env.pop("COLUMNS")  # as in a plain shell: rich would fall back to 80 columns
    done = subprocess.run([sys.executable, "-m", "autotune.cli", "sessions", "--wide", "--limit", "3",
                           "--db", str(shipped), "--shipped", "none"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    conn = sqlite3.connect(str(shipped))
    fingerprints = [r[0] for r in conn.execute("SELECT space_fingerprint FROM sessions ORDER BY id DESC LIMIT 3")]
    conn.close()
    for fingerprint in fingerprints:
        assert fingerprint in done.stdout  # whole, on one line
    assert "…" not in done.stdout


def test_the_console_is_wide_when_not_a_terminal_unless_columns_says(monkeypatch):
    from autotune.cli import PIPE_WIDTH, make_console

    monkeypatch.delenv("COLUMNS")
    assert make_console().width == PIPE_WIDTH  # pytest's stdout is not a terminal
    monkeypatch.setenv("COLUMNS", "123")
    assert make_console().width == 123


# -- 6. sessions says when it shows only some ----------------------------------------------------
def _listed_ids(out: str) -> list[int]:
    return [int(m) for m in re.findall(r"^│ (\d+)\s+│", out, flags=re.MULTILINE)]


def test_sessions_says_how_many_it_leaves_out(shipped, capsys):
    total = table_count(shipped, "sessions")
    assert total > 50
    code, out, _ = run_main(["sessions", "--db", str(shipped), "--shipped", "none"], capsys)
    assert code == 0 and len(_listed_ids(out)) == 50
    assert f"showing the latest 50 of {total} sessions (--limit N or --all for more)" in out
    code, out, _ = run_main(["sessions", "--db", str(shipped), "--shipped", "none", "--limit", "7"], capsys)
    assert len(_listed_ids(out)) == 7 and f"showing the latest 7 of {total} sessions" in out
    code, out, _ = run_main(["sessions", "--db", str(shipped), "--shipped", "none", "--all"], capsys)
    assert len(_listed_ids(out)) == total and "showing the latest" not in out
    code, out, _ = run_main(["sessions", "--db", str(shipped), "--shipped", "none", "--limit", str(total)], capsys)
    assert "showing the latest" not in out  # all of them shown: nothing to say
    assert_one_line_error(*run_main(["sessions", "--db", str(shipped), "--all", "--limit", "3"], capsys))


# -- 7. the configs tested agree with the statuses and the budget --------------------------------
STATUSES = re.compile(r"statuses of the (\d+) configs: (.*?)(?:; the default config \(free of budget\): (\w+))?$",
                      flags=re.MULTILINE)


def _counts(out: str) -> tuple[int, int, str | None]:
    """(configs the title says were tested, the statuses' sum, the default's status) of a report."""
    tested = int(re.search(r"session \d+: (\d+) configs tested", out).group(1))
    match = STATUSES.search(out)
    total = sum(int(part.rsplit(" ", 1)[1]) for part in match.group(2).split(", ") if part != "none")
    assert int(match.group(1)) == total
    return tested, total, match.group(3)


@pytest.fixture(scope="module")
def failing(tmp_path_factory) -> Path:
    """The Triton space at 64x40000, measured by a fake GPU: configs with one warp fail to compile."""
    from autotune.evaluators.fake import FakeEvaluator
    from autotune.kernels import get_kernel
    from autotune.session import Session, SessionSettings
    from autotune.strategies import get_strategy
    from autotune.task import bind_live
    from autotune.types import Status

    task = bind_live(get_kernel("softmax-triton"), (64, 40000), torch.float16, "cpu")
    path = tmp_path_factory.mktemp("failing") / "base.db"
    cache = Cache.open(path, create=True)
    cost = lambda p: Status.COMPILE_ERROR if p["num_warps"] == 1 else hashed_cost(p)  # noqa: E731
    settings = SessionSettings(strategy="grid", seed=0, budget=1000, mode="gpu")
    Session(task, FakeEvaluator(cost), get_strategy("grid")(task.space, seed=0, budget=1000), settings, cache).run()
    cache.close()
    return path


def test_the_closing_summary_and_show_agree_with_the_budget(failing, tmp_path, capsys):
    budget = 12
    args = ["tune", "softmax-triton", "--shape", "64x40000", "--budget", str(budget), "--seed", "5",
            "--config", '{"num_warps": 1}', "--db", str(tmp_path / "r.db"), "--shipped", str(failing)]
    code, out, err = run_main(args, capsys)
    assert code == 0, err
    tested, total, default = _counts(out)
    assert tested == total == budget and default == "ok"  # the default is evaluated free, beside the budget
    assert "compile_error" in STATUSES.search(out).group(2)  # the failing user config is one of them
    journal = Cache.open(tmp_path / "r.db")
    (session,) = journal.sessions()
    journal.close()
    code, out, err = run_main(["show", str(session["id"]), "--db", str(tmp_path / "r.db"), "--shipped",
                               str(failing)], capsys)
    assert code == 0, err
    assert _counts(out) == (budget, budget, "ok") and f"(budget {budget})" in out
    assert session["evaluations"] == budget + 1  # the rows: the budget's and the default's


def test_show_of_a_shipped_session_agrees_with_its_budget(shipped, capsys):
    session = _session(shipped, HELION_SESSION)
    assert session["exit_reason"] == "budget"
    code, out, err = run_main(["show", str(HELION_SESSION), "--shipped", str(shipped)], capsys)
    assert code == 0, err
    tested, total, default = _counts(out)
    assert tested == total == session["budget"] and default is not None


# -- 8. refusals answer at once, before torch is imported -----------------------------------------
REFUSED = {
    "unknown kernel": ["tune", "nosuchkernel", "--shape", "1x1"],
    "malformed shape": ["tune", "softmax", "--shape", "abc"],
    "unknown strategy to simulate": ["simulate", "softmax", "--shape", SHAPE, "--strategies", "nosuch"],
    "malformed --config": ["check-config", "softmax", "--shape", "1x1", "--config", "{bad"],
    "--option without =": ["tune", "softmax", "--option", "copies"],
    "option of the wrong type": ["tune", "softmax", "--shape", SHAPE, "--strategy", "pattern", "--option",
                                 "copies=many"],
    "unsupported dtype": ["check-config", "softmax-triton", "--shape", SHAPE, "--dtype", "int8", "--config", "{}"],
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_refused_command_answers_in_under_a_second(case, tmp_path):
    """Exit status 2 and one line, from a fresh interpreter, without importing torch, triton or
    helion.  The target is under 1 s; the bound is 2 s for a loaded CI machine."""
    probe = ("import sys; from autotune.cli import main; "
             f"code = main({REFUSED[case]!r}); "
             "heavy = sorted(m for m in ('torch', 'triton', 'helion') if m in sys.modules); "
             "print(code, heavy, file=sys.stdout)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=subprocess_env(), capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.strip() == "2 []", (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("autotune: error: "), done.stderr
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "autotune.cli", *REFUSED[case]], cwd=tmp_path, env=subprocess_env(),
                          capture_output=True, text=True, timeout=60)
    elapsed = time.perf_counter() - started
    print(f"{case}: {elapsed:.2f} s")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert elapsed < 2.0, f"{case} took {elapsed:.2f} s"


def test_the_static_kernel_table_matches_the_registry():
    """What the command line checks before importing the kernels is what the registry holds."""
    from autotune.kernels import all_kernels
    from autotune.kernels.names import BUILTIN_KERNELS

    kernels = {k.name: k for k in all_kernels()}
    assert set(kernels) == set(BUILTIN_KERNELS)
    for name, info in BUILTIN_KERNELS.items():
        kernel = kernels[name]
        fn = kernel.helion_kernel.fn if kernel.family == "helion" else kernel.triton_launch
        assert (kernel.rank, tuple(kernel.dtypes), kernel.family) == (info.rank, info.dtypes, info.family), name
        assert fn.__module__ == f"autotune.kernels.{info.module}", name


def test_simulate_refuses_a_strategy_that_only_asks_the_configs_it_is_given(capsys):
    from autotune.cli import main

    assert main(["simulate", "softmax", "--shape", "4096x32000", "--strategies", "random,fixed"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'fixed' only asks the configs it is given" in err
