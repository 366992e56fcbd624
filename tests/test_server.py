"""autotune serve: commands forwarded to a warm server answer as they would here, a command
that stops or goes away stops its work there, and what the server must not serve runs here."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from autotune import kernel_loader, server, server_client, server_wire
from tests.conftest import REPO


class FakeCommands:
    """Stands for the CLI inside a server: records each command; 'wait' blocks until the command is interrupted."""

    def __init__(self) -> None:
        self.ran: list[tuple[list[str], str, str | None]] = []
        self.interrupted = threading.Event()
        self.started = threading.Event()

    def run(self, argv: list[str]) -> int:
        self.ran.append((argv, os.getcwd(), os.environ.get("PROBE")))
        print(f"ran {' '.join(argv)}")
        print("a warning", file=sys.stderr)
        self.started.set()
        if argv[:1] == ["wait"]:
            if not self.interrupted.wait(10):
                return 99
            return 130
        return int(argv[1]) if argv[:1] == ["exit"] else 0


@pytest.fixture
def served(tmp_path):
    """A server on its own thread, with fake commands and a fake interrupt; closed after the test."""
    commands = FakeCommands()
    instance = server.Server(tmp_path / "s.sock", log=lambda text: None, run=commands.run,
                             interrupt=commands.interrupted.set)
    instance.open()
    thread = threading.Thread(target=instance.serve, daemon=True)
    thread.start()
    yield instance, commands
    instance.stop()
    thread.join(5)
    instance.close()


def forward(instance, argv, **env):
    out, err = io.StringIO(), io.StringIO()
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        code = server_client.forward(argv, stdout=out, stderr=err, path=instance.path)
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    return code, out.getvalue(), err.getvalue()


def test_a_command_runs_in_the_server_with_its_directory_environment_output_and_exit_status(served, tmp_path):
    instance, commands = served
    work = tmp_path / "elsewhere"
    work.mkdir()
    os.chdir(work)
    code, out, err = forward(instance, ["exit", "3"], PROBE="from the command")
    assert (code, out) == (3, "ran exit 3\n")
    assert err == f"autotune: running in the server at {instance.path} (--no-server runs here)\na warning\n"
    assert commands.ran == [(["exit", "3"], str(work), "from the command")]
    assert os.environ.get("PROBE") is None and os.getcwd() == str(work)  # the server gave both back


def test_a_server_running_other_sources_or_devices_is_not_used(served):
    instance, commands = served
    instance.stamp = "other"
    code, _, err = forward(instance, ["exit", "0"])
    assert code is None and "other autotune sources" in err and "running here" in err
    instance.stamp = server_wire.sources_stamp()
    code, _, err = forward(instance, ["exit", "0"], CUDA_VISIBLE_DEVICES="3")
    assert code is None and "CUDA_VISIBLE_DEVICES" in err
    assert commands.ran == []


def test_a_command_that_goes_away_is_interrupted_and_the_next_one_is_served(served):
    instance, commands = served
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(instance.path))
    conn.sendall((json.dumps({"argv": ["wait"], "cwd": os.getcwd(), "env": dict(os.environ),
                              "stamp": instance.stamp}) + "\n").encode())
    assert commands.started.wait(10)
    conn.close()  # as a killed terminal would
    assert commands.interrupted.wait(10)
    code, out, _ = forward(instance, ["exit", "0"])
    assert code == 0 and out == "ran exit 0\n"


def test_a_second_command_waits_for_the_first_and_says_so(served):
    instance, commands = served
    first = threading.Thread(target=forward, args=(instance, ["wait"]))
    first.start()
    assert commands.started.wait(10)
    threading.Timer(2 * server_client.BUSY_NOTE_AFTER_S, commands.interrupted.set).start()
    code, _, err = forward(instance, ["exit", "0"])
    first.join(10)
    assert code == 0 and "running another session; this one waits" in err
    assert [argv for argv, _, _ in commands.ran] == [["wait"], ["exit", "0"]]


def test_status_and_stop_are_answered_while_a_command_runs(served):
    instance, commands = served
    assert server_client.control("status", instance.path)["running"] is None
    waiting = threading.Thread(target=forward, args=(instance, ["wait"]))
    waiting.start()
    assert commands.started.wait(10)
    status = server_client.control("status", instance.path)
    assert status["running"] == ["wait"] and status["served"] == 0 and status["pid"] == os.getpid()
    assert server_client.control("stop", instance.path)["running"] == ["wait"]
    assert commands.interrupted.wait(10)  # the running command was stopped as its Ctrl-C would
    waiting.join(10)
    code, _, err = forward(instance, ["exit", "0"])  # the server no longer serves
    assert code is None and "running here" in err


def test_no_server_or_a_stale_socket_means_the_command_runs_here(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    assert server_client.forward(["tune"], stdout=out, stderr=err, path=tmp_path / "none.sock") is None
    stale = tmp_path / "stale.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(stale))
    listener.close()  # the file stays, nobody listens
    assert server_client.forward(["tune"], stdout=out, stderr=err, path=stale) is None
    assert "no server answers" in err.getvalue()
    assert server_client.control("status", stale) is None and server_client.control("status", tmp_path / "none.sock") is None


def test_the_socket_comes_from_the_environment_and_off_turns_forwarding_off(monkeypatch, tmp_path):
    monkeypatch.setenv("AUTOTUNE_SERVER", str(tmp_path / "x.sock"))
    assert server_wire.socket_path() == tmp_path / "x.sock"
    monkeypatch.setenv("AUTOTUNE_SERVER", "off")
    assert server_wire.socket_path() is None
    monkeypatch.delenv("AUTOTUNE_SERVER")
    assert server_wire.socket_path().name == f"autotune-{os.getuid()}.sock"


def test_an_edited_kernel_file_is_read_again_once_loaded_files_are_forgotten(tmp_path):
    path = tmp_path / "k.py"
    text = ("import helion, torch\nVERSION = {v}\n@helion.kernel(static_shapes=True)\n"
            "def k(x: torch.Tensor) -> torch.Tensor:\n    return x\n")
    path.write_text(text.format(v=1))
    first = kernel_loader.resolve_kernel(f"{path}:k")
    path.write_text(text.format(v=2))
    assert sys.modules[first.helion_kernel.fn.__module__].VERSION == 1
    kernel_loader.forget_loaded_files()
    second = kernel_loader.resolve_kernel(f"{path}:k")
    assert sys.modules[second.helion_kernel.fn.__module__].VERSION == 2


def test_autotune_tune_through_a_real_server_replays_as_it_would_here(tmp_path, shipped_db):
    """The whole path: `autotune serve` in its own process, `autotune tune` forwarded to it."""
    sock = tmp_path / "real.sock"
    env = {**os.environ, "AUTOTUNE_SERVER": str(sock), "PYTHONPATH": str(REPO)}
    process = subprocess.Popen([sys.executable, "-m", "autotune.cli", "serve"], env=env, cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not server_wire.socket_answers(sock):
            assert process.poll() is None and time.monotonic() < deadline, process.stdout.read()
            time.sleep(0.2)
        work = tmp_path / "work"
        work.mkdir()
        tune = [sys.executable, "-m", "autotune.cli", "tune", "softmax", "--shape", "4096x32000", "--strategy",
                "random", "--budget", "6", "--seed", "1", "--shipped", str(shipped_db), "--db", "mine.db"]
        done = subprocess.run(tune, env=env, cwd=work, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("REPLAY") and (work / "mine.db").exists()
        refused = subprocess.run(tune[:4] + ["nosuch", "--shape", "4x4"], env=env, cwd=work, capture_output=True,
                                 text=True, timeout=60)
        note, error = refused.stderr.splitlines()[:2]
        assert note.startswith("autotune: running in the server at")
        assert refused.returncode == 2 and error.startswith("autotune: error: unknown kernel 'nosuch'")
    finally:
        process.terminate()
        output = process.communicate(timeout=30)[0]
    assert "tune softmax --shape 4096x32000" in output and "-> exit 0" in output and "-> exit 2" in output
    assert not sock.exists()  # removed when the server stopped


def test_serve_refuses_a_socket_another_server_answers_on_in_one_line(tmp_path, capsys):
    from autotune.cli import main

    taken = tmp_path / "taken.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(taken))
    listener.listen(1)
    try:
        code = main(["serve", "--socket", str(taken)])
    finally:
        listener.close()
    err = capsys.readouterr().err
    assert code == 2 and err == f"autotune: error: a server already answers at {taken}\n"
