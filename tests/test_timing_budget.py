"""experiments.timing_budget: what a smaller timing target would have reported, from the samples
recorded in order, on hand-made sessions whose answers are known."""

from __future__ import annotations

import pytest

from experiments import timing_budget as tb


def _samples(kernel_ms: float, slow_first: int = 0, factor: float = 1.5, count: int = 200) -> tuple[float, ...]:
    """`count` samples of `kernel_ms`, the first `slow_first` of them `factor` times slower."""
    return tuple([kernel_ms * factor] * slow_first + [kernel_ms] * (count - slow_first))


def _session(slow_fastest: bool) -> list[tuple[str, tuple[float, ...]]]:
    """25 configs of 0.10 to 0.34 ms; the fastest one's first 90 runs are 1.5x slow (a warm-up
    its median over 200 runs hides, and a median over its first 100 does not)."""
    return [(f"c{i}", _samples(0.1 + 0.01 * i, slow_first=90 if (i == 0 and slow_fastest) else 0)) for i in range(25)]


def test_a_target_whose_runs_stop_inside_a_slow_start_misranks_and_a_longer_one_does_not():
    assert tb.reps_under(10.0, 0.1) == 100 and tb.reps_under(25.0, 0.1) == 200  # capped at 200
    data = tb.analyse({1: _session(slow_fastest=True), 2: _session(slow_fastest=False)}, targets_ms=(10.0, 25.0))
    short, enough = data["targets"][10.0], data["targets"][25.0]
    assert data["measurements"] == 50 and short["ranked_sessions"] == 2
    # under 10 ms the fastest config reads 1.5x slow, so 0.11 ms is picked over 0.10 ms
    assert short["deviation"]["0.05 to 0.5 ms"]["max"] == pytest.approx(0.5)
    assert short["pick_over_fastest"]["max"] == pytest.approx(0.1)
    assert short["sessions_losing_over_near"] == 1
    assert enough["sessions_losing_over_near"] == 0 and enough["deviation"]["0.05 to 0.5 ms"]["max"] == 0
    # kernel time spent timing: k runs of each config against its 200 recorded
    times = [0.1 + 0.01 * i for i in range(25)]

    def share(target: float) -> float:
        return sum(m * min(200, max(10, int(target / m))) for m in times) / sum(m * 200 for m in times)

    assert short["timing_share"] == pytest.approx(share(10.0), rel=1e-6)
    assert enough["timing_share"] == pytest.approx(share(25.0), rel=1e-6) and share(10.0) < share(25.0) < 1


def test_small_sessions_are_not_ranked_and_the_report_says_so():
    data = tb.analyse({1: _session(slow_fastest=True)[:5]}, targets_ms=(10.0,))
    figures = data["targets"][10.0]
    assert figures["ranked_sessions"] == 0 and figures["pick_over_fastest"]["n"] == 0
    text = tb.markdown(data, "python -m experiments.timing_budget")
    assert "| 10 |" in text and "- / - / -" in text


def test_a_missing_database_is_refused_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        tb.main(["--db", str(tmp_path / "none.db"), "--out", str(tmp_path / "out")])
    assert "no such database" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists() and not (tmp_path / "out").exists()
