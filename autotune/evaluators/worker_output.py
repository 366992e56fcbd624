"""What the GPU evaluator's workers write to stdout and stderr: kept out of the user's terminal
and filed with the evaluation it belongs to.

Each worker process writes its file descriptors 1 and 2 to a file of its own
(gpu_process.capture_output).  The parent knows which config each worker is busy with, so it
marks where that worker's file stands when the config is handed over and when the worker is
done with it; a config that fails gets what was written in between: the first lines in its
recorded error, the full text in `<db>.logs/<session>/<config key>.txt`.  Why: a compiler
assertion (Triton's C++ `assert`, which aborts the process) comes with hundreds of lines of
MLIR module and pass pipeline, written straight to fd 2.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from autotune.types import Result, Status

LINES_IN_ERROR = 8  # of a failing config's output, in its recorded error
LINE_LIMIT = 300  # characters kept of each of those lines
# Lines that say why a process died, best first; else the last line is the reason's detail.
_TELLING = (re.compile(r"Assertion .* failed"),
            re.compile(r"\b(error|fatal|abort(ed)?|segmentation fault|exception|panic|terminate)\b", re.IGNORECASE))
_DIED = "process died"  # in the first line of every error the evaluator writes for a dead process


class WorkerOutput:
    """The workers' output files (a folder of its own) and what each config in flight wrote."""

    def __init__(self, log_root: Path | None = None) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="autotune-worker-output-")
        self.folder = Path(self._folder.name)  # one file per worker process
        self.log_root = log_root  # `<db>.logs`: a session's failing configs' output goes under it
        self.log_dir: Path | None = None
        self._marks: dict[str, list[list[Any]]] = {}  # key -> [file, start, end or None], in order

    def session_started(self, session_id: int) -> None:
        """The session's id is known: its configs' output goes to `<log_root>/<session_id>/`."""
        self.log_dir = self.log_root / str(session_id) if self.log_root is not None else None

    def begin(self, key: str, worker: Any) -> None:
        """`worker` starts on config `key`: what it writes from here on is the config's."""
        mark = worker.output_mark()
        if mark is not None:
            self._marks.setdefault(key, []).append([mark[0], mark[1], None])

    def end(self, key: str, worker: Any) -> None:
        """`worker` is done with config `key` (it goes on to others)."""
        mark = worker.output_mark()
        if mark is None:
            return
        for entry in reversed(self._marks.get(key, [])):
            if entry[0] == mark[0] and entry[2] is None:
                entry[2] = mark[1]
                return

    def text(self, key: str) -> str:
        """What the workers wrote while busy with `key` (its marks are forgotten)."""
        parts = []
        for path, start, end in self._marks.pop(key, []):
            try:
                with open(path, "rb") as handle:
                    handle.seek(start)
                    data = handle.read() if end is None else handle.read(max(0, end - start))
            except OSError:
                continue
            parts.append(data.decode("utf-8", errors="replace"))
        return "".join(parts)

    def attach(self, result: Result) -> Result:
        """`result` with its config's output: a failure's error gains the first lines and the
        log file's path; a success's output is dropped (the workers' files keep it)."""
        text = self.text(result.key)
        if result.status is Status.OK or not text.strip():
            return result
        path = self._write(result.key, text)
        return replace(result, error=with_output(result.error, text, path))

    def forget(self) -> None:
        """Drop the marks of configs nobody will ask about (a generation cut short)."""
        self._marks.clear()

    def _write(self, key: str, text: str) -> Path | None:
        if self.log_dir is None:
            return None
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", key)[:120] or "config"
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            path = self.log_dir / f"{name}.txt"
            with open(path, "a", encoding="utf-8") as handle:  # a config evaluated twice keeps both
                handle.write(text)
        except OSError:
            return None
        return path

    def close(self) -> None:
        """Keep the workers' non-empty files beside the session's logs (what configs that passed
        wrote, diagnostics such as AUTOTUNE_PROFILE_BENCH's), then remove the folder."""
        if self.log_dir is not None:
            kept = [path for path in self.folder.glob("*.txt") if path.stat().st_size]
            if kept:
                try:
                    (self.log_dir / "workers").mkdir(parents=True, exist_ok=True)
                    for path in kept:
                        shutil.move(str(path), self.log_dir / "workers" / path.name)
                except OSError:
                    pass
        self._folder.cleanup()


def with_output(error: str, text: str, path: Path | None) -> str:
    """The error with the config's output: a dead process's reason names the output's telling
    line (the assertion that aborted it, say), then the first lines and where the rest is."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    head, _, rest = error.partition("\n")
    if _DIED in head and lines:
        head = f"{head}: {telling_line(lines)[:LINE_LIMIT]}"
    where = f"; full text in {path}" if path is not None else ""
    shown = [line[:LINE_LIMIT] for line in lines[:LINES_IN_ERROR]]
    more = f" (first {len(shown)} shown)" if len(lines) > len(shown) else ""
    parts = [head, rest.strip(), f"output: {len(lines)} lines{more}{where}", *shown]
    return "\n".join(part for part in parts if part)


def telling_line(lines: list[str]) -> str:
    """The first line that names a failed assertion, else an error or abort, else the last line."""
    for pattern in _TELLING:
        found = next((line.strip() for line in lines if pattern.search(line)), None)
        if found:
            return found
    return lines[-1].strip()
