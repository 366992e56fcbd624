"""The Kernel Tuner comparison keeps each finished job, so a run that died is continued."""

from __future__ import annotations

import json

from experiments.kernel_tuner_comparison import _finished


def test_only_jobs_with_the_same_settings_are_taken_back_and_a_cut_line_is_ignored(tmp_path):
    settings = {"repeats": 50, "budgets": [50, 100, 200], "seed": 0}
    partial = tmp_path / "kernel_tuner_comparison.partial.jsonl"
    done = {"space": "a.json.gz", "strategy": "evolution", "family": "ours", "best": {"50": [1.0], "100": [0.9]}}
    other = {**done, "strategy": "random"}
    partial.write_text(json.dumps({**settings, "result": done}) + "\n"
                       + json.dumps({**settings, "repeats": 5, "result": other}) + "\n"
                       + json.dumps({**settings, "result": other})[:40] + "\n")  # the run died mid-line
    found = _finished(partial, settings)
    assert list(found) == [("a.json.gz", "evolution")]
    assert found["a.json.gz", "evolution"]["best"] == {50: [1.0], 100: [0.9]}  # budgets back to integers
    assert _finished(tmp_path / "missing.jsonl", settings) == {}
