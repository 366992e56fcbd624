"""How many timed runs does a config need during a search?  Read from the samples already recorded.

Why: on long-row softmax shapes a cold pattern search spends most of its benchmark time timing
(up to 200 runs of a config under a `--timing-ms` target of 250 ms of kernel time, the default
before this analysis), and a search's speed in configs per second decides when it gets
anywhere.  Every recorded measurement keeps its samples in the order they were taken, so the
median a smaller target would have reported is the median of the first k of them, k being the repetitions the benchmark worker's own rule (`timing.repetitions`) gives
a kernel of that time under that target.  For each target this reports, over the fully timed
measurements of GPU sessions:

* how far that median lies from the full median (quantiles of the relative deviation, by the
  kernel's time);
* what choosing by it would have cost each session: the full median of the config the first-k
  medians rank fastest, over the session's fastest (the session's final re-timing of its best
  configs, which is not shortened, is left out: it would only shrink this);
* the kernel time spent timing, as a share of the recorded timing's.

It reads one GPU's sessions (`--device`; by default the only GPU recorded, or the shipped
data's among several): how noisy a kernel's timings are belongs to the GPU that took them.

The first k samples are a prefix of a longer run, taken after the same warm-up, not a
separate shorter run; that is the one difference from timing k runs afresh.

    python -m experiments.timing_budget                       # any machine: from cache.db
    python -m experiments.timing_budget --db runs/x.db --shipped none
    python -m experiments.timing_budget --device "NVIDIA H200"   # another GPU's: timing_budget-nvidia-h200.md
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[1]
NAME = "timing_budget"
TARGETS_MS = (10.0, 25.0, 50.0, 100.0, 250.0)
FULL_AT_LEAST = 100  # a measurement with fewer samples was cut short or is a small kernel's
BANDS = ((0.0, 0.05, "under 0.05 ms"), (0.05, 0.5, "0.05 to 0.5 ms"), (0.5, float("inf"), "0.5 ms and over"))
RANKED_AT_LEAST = 20  # sessions with fewer fully timed configs are not ranked
NEAR = 0.01  # a pick more than this over the session's fastest is a ranking loss


def measurements(cache: Any, device: str | None = None) -> tuple[str | None, dict[int, list[tuple[str, tuple[float, ...]]]]]:
    """The GPU read (`experiment_devices.on_one_device`: `device`, or the data's choice) and, per
    GPU session on it, its fully timed accurate measurements as (config key, samples), samples in
    the order they were taken (the final re-timing, generation < 0, left out)."""
    from autotune.experiment_devices import on_one_device

    gpu = [s for s in cache.sessions(limit=100000) if s["mode"] == "gpu"]
    device, sessions = on_one_device(gpu, device, study=NAME)
    found: dict[int, list[tuple[str, tuple[float, ...]]]] = {}
    for session in sessions:
        rows = [(r.candidate.key, tuple(r.result.samples_ms)) for r in cache.session_evaluations(session["id"])
                if r.generation >= 0 and r.result.ok and len(r.result.samples_ms) >= FULL_AT_LEAST]
        if rows:
            found[session["id"]] = rows
    return device, found


def reps_under(target_ms: float, kernel_ms: float) -> int:
    """The timed runs the benchmark worker gives a kernel of `kernel_ms` under a target."""
    from autotune.evaluators.timing import TimingOptions, repetitions

    return repetitions(kernel_ms, None, TimingOptions(target_ms=target_ms))


def analyse(sessions: dict[int, list[tuple[str, tuple[float, ...]]]],
            targets_ms: Sequence[float] = TARGETS_MS, device: str | None = None) -> dict[str, Any]:
    """The figures of the report, for each timing target, of the sessions of `device`."""
    rows = [samples for measured in sessions.values() for _, samples in measured]
    out: dict[str, Any] = {"device": device, "sessions": len(sessions), "measurements": len(rows), "targets": {}}
    for target in targets_ms:
        def short_median(samples: tuple[float, ...]) -> float:
            return statistics.median(samples[:reps_under(target, statistics.median(samples))])

        deviations: dict[str, list[float]] = {label: [] for *_, label in BANDS}
        for samples in rows:
            full = statistics.median(samples)
            label = next(label for low, high, label in BANDS if low <= full < high)
            deviations[label].append(abs(short_median(samples) / full - 1))
        losses = []
        for measured in sessions.values():
            if len(measured) < RANKED_AT_LEAST:
                continue
            full = {key: statistics.median(samples) for key, samples in measured}
            short = {key: short_median(samples) for key, samples in measured}
            pick = min(short, key=short.__getitem__)
            losses.append(full[pick] / min(full.values()) - 1)
        spent = sum(statistics.median(s) * min(reps_under(target, statistics.median(s)), len(s)) for s in rows)
        recorded = sum(statistics.median(s) * len(s) for s in rows)
        out["targets"][target] = {
            "deviation": {label: _quantiles(values) for label, values in deviations.items()},
            "ranked_sessions": len(losses),
            "pick_over_fastest": _quantiles(losses),
            "sessions_losing_over_near": sum(loss > NEAR for loss in losses),
            "timing_share": spent / recorded if recorded else None,
        }
    return out


def _quantiles(values: Sequence[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "median": None, "p90": None, "p99": None, "max": None}
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {"n": len(ordered), "median": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": ordered[-1]}


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}%"


def markdown(data: dict[str, Any], command: str) -> str:
    lines = ["# How many timed runs a config needs: medians of the first k recorded samples", "",
             f"Generated by `{command}` from the samples recorded with every measurement. Measurements: "
             f"{data['measurements']} fully timed ({FULL_AT_LEAST} samples or more) in {data['sessions']} GPU "
             f"sessions, all recorded on {data.get('device') or 'no GPU'} (`--device` reads another). For a "
             f"timing target (`--timing-ms`), k is the repetitions the benchmark worker gives a "
             f"kernel of the measurement's time (between 10 and 200). Deviation: |median of the first k samples / "
             f"median of all - 1|. Pick over fastest: the full median of the config that the first-k medians rank "
             f"fastest in a session, over the session's fastest full median (sessions with at least "
             f"{RANKED_AT_LEAST} such measurements). Timing share: kernel time spent timing k runs per config, "
             f"over the recorded timings' (each recorded under its session's own target; where k exceeds the samples "
             f"recorded, all of them count).", "",
             "| target ms | deviation, median / p90 / p99 / max: " + " | ".join(label for *_, label in BANDS) +
             " | sessions ranked | pick over fastest, median / p99 / max | sessions losing over "
             f"{int(NEAR * 100)}% | timing share |",
             "|---|" + "---|" * len(BANDS) + "---|---|---|---|"]
    for target, figures in data["targets"].items():
        cells = []
        for *_, label in BANDS:
            q = figures["deviation"][label]
            cells.append("-" if not q["n"] else
                         f"{_pct(q['median'])} / {_pct(q['p90'])} / {_pct(q['p99'])} / {_pct(q['max'])} (n={q['n']})")
        loss = figures["pick_over_fastest"]
        lines.append(f"| {target:g} | " + " | ".join(cells) + f" | {figures['ranked_sessions']} | "
                     f"{_pct(loss['median'])} / {_pct(loss['p99'])} / {_pct(loss['max'])} | "
                     f"{figures['sessions_losing_over_near']} | {_pct(figures['timing_share'])} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", type=Path, default=REPO / "data" / "shipped.db", help="the database read (default: the shipped data)")
    parser.add_argument("--shipped", default="none", help="shipped data read beside --db ('none': --db alone)")
    parser.add_argument("--device", default=None,
                        help="the GPU whose sessions are read, as sessions name it (default: the only one recorded, "
                             "or the shipped data's among several)")
    parser.add_argument("--out", type=Path, default=REPO / "experiments" / "reports")
    args = parser.parse_args(argv)
    from autotune.databases import open_for_reading
    from autotune.errors import UserError
    from autotune.experiment_devices import report_stem

    if not args.db.exists():
        parser.error(f"{args.db}: no such database")
    cache = open_for_reading(args.db, None if args.shipped == "none" else Path(args.shipped))
    try:
        device, sessions = measurements(cache, args.device)
    except UserError as error:
        parser.error(str(error))
    finally:
        cache.close()
    data = analyse(sessions, device=device)
    command = ("python -m experiments.timing_budget" + ("" if args.db == REPO / "data" / "shipped.db" else f" --db {args.db}")
               + (f" --device {json.dumps(args.device)}" if args.device else ""))
    stem = report_stem(NAME, device)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(json.dumps(data, indent=1) + "\n")
    (args.out / f"{stem}.md").write_text(markdown(data, command))
    print(markdown(data, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
