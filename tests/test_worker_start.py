"""Workers start from a fork server that must never initialise the CUDA driver (its forks could
not use the GPU): it starts with torch's NVML-based availability check, this process's own
environment left as it was."""

import os
import sys
import time
from multiprocessing import forkserver
from pathlib import Path

import pytest

from autotune.evaluators.gpu_process import SERVER_ENVIRONMENT, server_environment, worker_context

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; fork servers are POSIX")


def _environment_of(pid: int) -> dict[str, str]:
    """The environment `pid` was executed with (until its exec, /proc shows its parent's)."""
    deadline = time.monotonic() + 30
    while b"forkserver" not in Path(f"/proc/{pid}/cmdline").read_bytes() and time.monotonic() < deadline:
        time.sleep(0.05)
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def test_the_fork_server_starts_with_the_nvml_check_and_this_process_keeps_its_environment(monkeypatch):
    for name in SERVER_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    before = dict(os.environ)
    context = worker_context()
    assert context.get_start_method() == "forkserver"
    assert dict(os.environ) == before
    server = _environment_of(forkserver._forkserver._forkserver_pid)
    assert {name: server.get(name) for name in SERVER_ENVIRONMENT} == SERVER_ENVIRONMENT


def test_server_environment_restores_a_value_that_was_set(monkeypatch):
    name = next(iter(SERVER_ENVIRONMENT))
    monkeypatch.setenv(name, "0")
    with server_environment():
        assert os.environ[name] == SERVER_ENVIRONMENT[name]
    assert os.environ[name] == "0"
