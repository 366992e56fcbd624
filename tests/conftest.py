"""Shared fixtures for the CPU test suite.

Helion kernels are bound once per test session (binding takes seconds); every database a test
writes lives under pytest's tmp_path.  Tests that need the shipped measurements read them where
they are (`shipped_db`: the database built from data/batches/, only ever read), never a copy;
tests of the store use the fixture batch in tests/fixtures/batches/.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
# The suite runs on two processes (pyproject: `-n 2`), and pytest-xdist starts each with
# COLUMNS=80, which no plain run has: the CLI would then render its tables 80 columns wide and
# cut their cells, as on a narrow terminal (autotune.cli.make_console).  Tests that want a
# width set their own.
if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get("COLUMNS") == "80":
    del os.environ["COLUMNS"]

import torch  # noqa: E402

from autotune.store.cache import Cache  # noqa: E402
from autotune.kernels import get_kernel  # noqa: E402
from autotune.task import TuningTask, bind_live  # noqa: E402
from autotune.types import Candidate  # noqa: E402
from search_spaces.space import canonical_json, config_key  # noqa: E402

SHAPE = (64, 1000)
DTYPE = torch.float16


# -- guard: the repository's own database is never touched -------------------------------------
@pytest.fixture(scope="session", autouse=True)
def _session_in_tmp(tmp_path_factory):
    """Module- and session-scoped fixtures run before the per-test directory below: they too must
    not find the repository's cache.db as the default shipped data (tests that want it name it)."""
    previous = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("cwd"))
    yield
    os.chdir(previous)


@pytest.fixture(autouse=True)
def _work_in_tmp(tmp_path, monkeypatch):
    """Every test runs in its own temporary directory, so a default path such as 'cache.db' or
    'replays.db' can never resolve to the repository's shipped database; and no command is
    forwarded to an `autotune serve` the developer may have running (tests that want a server
    start their own)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AUTOTUNE_SERVER", "off")


@pytest.fixture(autouse=True)
def _triton_interpret_put_back():
    """`--interpret` run in a test's own process sets TRITON_INTERPRET; monkeypatch cannot put
    back a variable that was absent when it was deleted, so it is put back here, or every
    later test of this worker would import Triton kernels as interpreted."""
    before = os.environ.get("TRITON_INTERPRET")
    yield
    if before is None:
        os.environ.pop("TRITON_INTERPRET", None)
    else:
        os.environ["TRITON_INTERPRET"] = before


# -- tasks ----------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def helion_task() -> TuningTask:
    """The Helion softmax bound to 64x1000 fp16 CPU tensors (its real ConfigSpec)."""
    return bind_live(get_kernel("softmax"), SHAPE, DTYPE, "cpu")


@pytest.fixture(scope="session")
def triton_task() -> TuningTask:
    """The hand-written Triton softmax's declared space at 64x1000 fp16."""
    return bind_live(get_kernel("softmax-triton"), SHAPE, DTYPE, "cpu")


# -- databases -----------------------------------------------------------------------------
@pytest.fixture(scope="session")
def shipped_db() -> Path:
    """The shipped measurements: data/shipped.db, built from data/batches/ when missing or stale
    (once for the whole run: parallel workers wait on the builder's lock).  Commands open it
    read-only, so tests read it in place instead of copying it."""
    from autotune.databases import SHIPPED_DB, ready

    path = ready(REPO / SHIPPED_DB)
    if path is None or not path.exists():
        pytest.skip("no shipped data in this checkout")
    return path


@pytest.fixture
def tmp_db(tmp_path):
    cache = Cache.open(tmp_path / "t.db", create=True)
    yield cache
    cache.close()


def table_count(path: Path | str, table: str, where: str = "", args: Sequence[Any] = ()) -> int:
    """Row count read through an independent sqlite connection."""
    conn = sqlite3.connect(str(path))
    try:
        sql = f"SELECT COUNT(*) FROM {table}" + (f" WHERE {where}" if where else "")
        return int(conn.execute(sql, tuple(args)).fetchone()[0])
    finally:
        conn.close()


def all_counts(path: Path | str) -> dict[str, int]:
    return {t: table_count(path, t) for t in ("spaces", "sessions", "evaluations", "aliases", "baselines", "meta")}


# -- synthetic costs -------------------------------------------------------------------------
def hashed_cost(params: Mapping[str, Any]) -> float:
    """A deterministic, practically collision-free cost in [0.1, 1.1) ms for any point."""
    digest = hashlib.sha256(canonical_json(dict(params)).encode()).hexdigest()
    return 0.1 + int(digest[:12], 16) / 16**12


def make_candidate(native: Mapping[str, Any], params: Mapping[str, Any] | None = None) -> Candidate:
    return Candidate(params=dict(params if params is not None else native), native=dict(native),
                     key=config_key(native))


# -- subprocesses ----------------------------------------------------------------------------
def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("TRITON_INTERPRET", None)
    env["COLUMNS"] = "240"  # rich wraps and truncates tables at 80 columns otherwise
    env.update(extra)
    return env


def run_python(code: str, *, cwd: Path | str | None = None, timeout: float = 120, **env: str
               ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=subprocess_env(**env), capture_output=True,
                          text=True, timeout=timeout)


def run_report_script(code: str, *, timeout: float = 300, shared: bool = False, **env: str) -> Any:
    """Run `code` in a fresh interpreter (env set, e.g. TRITON_INTERPRET=1) and return the JSON
    it printed on its one line starting with "REPORT ".  `shared=True` runs it instead in one
    interpreter kept for the whole test session with TRITON_INTERPRET=1 (each fresh one pays
    seconds of torch, Triton and Helion imports); for scripts that change no state a later one reads."""
    if shared:
        assert env == {"TRITON_INTERPRET": "1"}, "the shared interpreter runs Triton's interpreter only"
        stdout = _SHARED_INTERPRETER.run(code, timeout)
    else:
        done = run_python(code, timeout=timeout, **env)
        assert done.returncode == 0, done.stderr[-4000:]
        stdout = done.stdout
    lines = [x for x in stdout.splitlines() if x.startswith("REPORT ")]
    assert len(lines) == 1, stdout[-2000:]
    return json.loads(lines[0].removeprefix("REPORT "))


_RESULT_MARK = "@@shared-interpreter-result@@ "
_SHARED_LOOP = f"""
import contextlib, io, json, sys, traceback
for line in sys.stdin:
    captured, error = io.StringIO(), ""
    try:
        with contextlib.redirect_stdout(captured):
            exec(compile(json.loads(line), "<report script>", "exec"), {{"__name__": "__main__"}})
    except BaseException:
        error = traceback.format_exc()
    sys.stdout.write({_RESULT_MARK!r} + json.dumps({{"stdout": captured.getvalue(), "error": error}}) + "\\n")
    sys.stdout.flush()
"""


class _SharedInterpreter:
    """One Python process under TRITON_INTERPRET=1 that runs report scripts one after another,
    each in a namespace of its own; started on first use, replaced if it dies."""

    def __init__(self) -> None:
        import queue

        self.process: subprocess.Popen | None = None
        self.errors: Any = None
        self.lines: queue.Queue = queue.Queue()  # the process's stdout, a line at a time; "" once it ends

    def run(self, code: str, timeout: float) -> str:
        import queue
        import tempfile
        import threading

        if self.process is None or self.process.poll() is not None:
            self.errors = tempfile.TemporaryFile(mode="w+")
            self.process = subprocess.Popen([sys.executable, "-u", "-c", _SHARED_LOOP], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=self.errors, text=True,
                                            env=subprocess_env(TRITON_INTERPRET="1"))
            self.lines = queue.Queue()
            threading.Thread(target=_forward_lines, args=(self.process.stdout, self.lines), daemon=True).start()
        self.process.stdin.write(json.dumps(code) + "\n")
        self.process.stdin.flush()
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                self.process.kill()
                raise AssertionError(f"the shared interpreter printed nothing for {timeout} s") from None
            if not line:
                self.errors.seek(0)
                raise AssertionError("the shared interpreter died: " + self.errors.read()[-4000:])
            if line.startswith(_RESULT_MARK):
                result = json.loads(line.removeprefix(_RESULT_MARK))
                assert not result["error"], result["error"][-4000:]
                return result["stdout"]

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=30)


def _forward_lines(stream: Any, lines: Any) -> None:
    for line in stream:
        lines.put(line)
    lines.put("")


_SHARED_INTERPRETER = _SharedInterpreter()


@pytest.fixture(scope="session", autouse=True)
def _close_the_shared_interpreter():
    yield
    _SHARED_INTERPRETER.close()


def timed(point: Mapping[str, Any], time_ms: Any) -> tuple:
    """The observation a strategy is told for `point`: measured, in `time_ms(point)` ms."""
    from autotune.types import Result, Status
    from search_spaces import params_key

    return (point, Result(key=params_key(point), status=Status.OK, median_ms=time_ms(point)))


def walk_until_done(strategy: Any, start: Mapping[str, Any], time_ms: Any, limit: int = 400) -> list[dict[str, Any]]:
    """Warm-start `strategy` with `start`, then ask 16 at a time and tell each point's
    `time_ms(point)` until it stops (or `limit` points); the points asked, in order."""
    strategy.warm_start([timed(start, time_ms)])
    asked: list[dict[str, Any]] = []
    while len(asked) < limit:
        batch = strategy.ask(16)
        if not batch:
            break
        asked += batch
        strategy.tell([timed(p, time_ms) for p in batch])
    return asked


def walked_best_ms(cls: Any, seed: int, space: Any, time_ms: Any, **options: Any) -> float:
    """The best time a pattern walk of class `cls` (no restarts) finds on `time_ms` from the
    space's default, walked by `walk_until_done`."""
    strategy = cls(space, seed, restarts=0, **options)
    walk_until_done(strategy, space.default, time_ms, limit=400)
    return strategy.best()[1].median_ms


def valid_points(space: Any, fixed: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every point of a (small, declared) space that breaks none of its constraints; `fixed`
    holds some parameters at one value (those no constraint reads, to keep the product small)."""
    import itertools

    fixed = fixed or {}
    axes = [[fixed[name]] if name in fixed else space.parameter(name).choices for name in space.names]
    return [p for p in (dict(zip(space.names, values)) for values in itertools.product(*axes))
            if not space.violations(p)]


def softmax_run(out: Any, ref: Any) -> dict[str, Any]:
    """One interpreter run as `assert_softmax_runs_match` reads it (called inside the report
    scripts, which import it from here)."""
    import torch

    from autotune.evaluators.timing import relative_error

    return {"rel": relative_error(out, ref), "nan": bool(torch.isnan(out).any()), "dtype": str(out.dtype),
            "shape": list(out.shape)}


def matmul_epilogue_run(spec: Any, config: Mapping[str, Any], x: Any, w: Any, dtype: Any) -> dict[str, Any]:
    """One interpreter run of a matmul + epilogue kernel into an output filled with NaN (an element
    it never writes stays NaN), as `assert_matmul_epilogue_runs_match` reads it (called inside the
    report scripts, which import it from here)."""
    import torch

    from autotune.evaluators.timing import relative_error, tolerance_for

    ref = spec.reference((x.double(), w.double()))
    out = torch.full(ref.shape, float("nan"), dtype=dtype if ref.dim() == 2 else torch.float32)
    got = spec.triton_launch(config, x, w, out)
    return {"rel": relative_error(got, ref), "tol": tolerance_for(dtype), "nan": bool(torch.isnan(got).any()),
            "same": got is out, "shape": list(got.shape), "dtype": str(got.dtype)[6:]}


def assert_matmul_epilogue_runs_match(runs: Mapping[str, Mapping[str, Any]]) -> None:
    """Interpreter runs keyed 'epilogue/dtype/...': every output element written and none NaN, the
    relative error within the dtype's tolerance, the given out returned, in the epilogue's shape
    and dtype ([M, N] in the input dtype, or [M] in fp32)."""
    for name, run in runs.items():
        assert not run["nan"], name
        assert run["rel"] <= run["tol"], (name, run)
        assert run["same"], name
        epilogue, dtype = name.split("/")[:2]
        rows_out = epilogue in ("rmsnorm", "layernorm", "softmax", "l2norm")
        assert run["dtype"] == (dtype if rows_out else "float32"), name
        assert len(run["shape"]) == (2 if rows_out else 1), name


def assert_softmax_runs_match(runs: Mapping[str, Mapping[str, Any]], tolerances: Mapping[str, float]) -> None:
    """Interpreter runs keyed 'ROWSxCOLS/dtype[/...]' (others, such as 'extremes', are fp32):
    no NaN, relative error under the dtype's tolerance, output of the input's shape and dtype."""
    for name, run in runs.items():
        assert not run["nan"], name
        dtype = name.split("/")[1] if "/" in name else "float32"
        assert run["rel"] < tolerances[dtype], (name, run)
        if "/" in name:
            shape = name.split("/")[0]
            assert run["shape"] == [int(d) for d in shape.split("x")] and run["dtype"] == f"torch.{dtype}"


def run_main(argv: list[str], capsys) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of one in-process `autotune` command."""
    from autotune import cli

    return cli.main(argv), *capsys.readouterr()


def assert_one_line_error(code: int, out: str, err: str) -> str:
    """A user error: exit status 2 and one line on stderr, no traceback; returns the line."""
    assert code == 2, (code, out, err)
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("autotune: error: ") and len(lines[0]) > len("autotune: error: ") + 5, err
    assert "Traceback" not in err + out
    return lines[0]


def cli_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "autotune.cli", *args]


def run_cli(args: Sequence[str], cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(cli_command(*args), cwd=cwd, env=subprocess_env(), capture_output=True, text=True,
                          timeout=timeout)


def record_fake_session(task: TuningTask, path: Path, *, strategy: str, budget: int, seed: int = 0) -> int:
    """A 'GPU' session of `task` answered by the fake evaluator (hashed costs), recorded in `path`."""
    from autotune.evaluators.fake import FakeEvaluator
    from autotune.session import Session, SessionSettings
    from autotune.strategies import get_strategy

    db = Cache.open(path, create=True)
    options = {"budget": budget} if strategy == "grid" else {}
    strat = get_strategy(strategy)(task.space, seed=seed, **options)
    settings = SessionSettings(strategy=strategy, seed=seed, budget=budget, mode="gpu")
    outcome = Session(task, FakeEvaluator(hashed_cost, baselines={"torch.softmax": 0.2}), strat, settings, db).run()
    db.close()
    return outcome.session_id


@pytest.fixture(scope="module")
def heldout_db(tmp_path_factory) -> Path:
    """The held-out experiment's recorded fixture (tests/heldout_records.py), once per module."""
    from heldout_records import record_study

    return record_study(tmp_path_factory.mktemp("heldout") / "heldout.db")
