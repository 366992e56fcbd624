"""GPU machine: tune an example kernel at its shapes and judge run-time config choices.

    python -m experiments.user_kernels.run rms_norm [--db user.db] [--seconds S]

For every shape of the part, one `autotune.tune` session (recorded in the database).  For a
part with held-out shapes, then, in one process and interleaved (cold L2, CUDA events, the
median of many runs, each output checked against the kernel's reference): at each held-out
shape, the config tuned there (the yardstick), the nearest fit shape's config (our rule), the
config Helion's AOT heuristic generator picks when given the fit shapes' measurements, and
Helion's default config.  Results go to report/results_PART.json.

Helion's AOT flow has three steps: collect (Helion's own autotune at each fit shape), measure
(every collected config at every fit shape) and build (a decision tree over shape features).
Here collect is replaced by our sessions at the fit shapes (Helion's autotune at every shape
does not fit a short GPU slot); measure and build are Helion's: the fit shapes' configs are
timed at every fit shape and Helion's `generate_heuristic` builds its tree from that file.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from experiments.user_kernels.definition import PARTS, Part

REPORT = Path(__file__).parent / "report"


def tune_part(part: Part, db: str, seconds: float | None) -> list[dict[str, Any]]:
    import autotune

    sessions = []
    for shape in (*part.fit, *part.held_out):
        started = time.monotonic()
        result = autotune.tune(part.locator, shape=shape, dtype=part.dtype, strategy=part.strategy,
                               seconds=seconds or part.seconds, seed=1, db=db, configs=part.configs,
                               compile_workers=part.compile_workers)
        sessions.append({"shape": list(shape), "session": result.session_id, "best_ms": result.best_ms,
                         "wall_s": round(time.monotonic() - started, 1), "evaluations": result.evaluations,
                         "exit": result.exit_reason, "config": result.best_native,
                         "table": [row.__dict__ for row in result.table]})
        print(json.dumps(sessions[-1]["table"]), flush=True)
    return sessions


def judge_choices(part: Part, db: str) -> dict[str, Any]:
    """Our rule and Helion's AOT heuristic at the held-out shapes, against each shape's own best."""
    from autotune.config_table import ConfigTable
    from autotune.device import device_name
    from autotune.kernel_loader import resolve_kernel
    from autotune.kernels.registry import DTYPES

    kernel = resolve_kernel(part.locator)
    dtype = DTYPES[part.dtype]
    table = ConfigTable.from_db(kernel, db, device=device_name(0), shipped="data/shipped.db")
    fit_configs = {tuple(s): table.pick(s, part.dtype).config for s in part.fit}
    helion_pick = _helion_aot_rule(kernel, part, dtype, fit_configs)
    rows = []
    for shape in part.held_out:
        inputs = kernel.make_inputs(shape, dtype, "cuda", 0)
        own = table.pick(shape, part.dtype)
        ours = table.pick(shape, part.dtype, exclude=part.held_out)
        contenders = {"own tuned best": own.config, "ours (nearest fit shape)": ours.config,
                      "Helion AOT heuristic": helion_pick(inputs), "Helion default": None}
        timed = _time_configs(kernel, inputs, contenders)
        best = timed["own tuned best"]["median_ms"]
        for name, row in timed.items():
            row["ratio_to_own_best"] = row["median_ms"] / best if row["median_ms"] and best else None
        rows.append({"shape": list(shape), "nearest_fit_shape": list(ours.shape or ()), "results": timed})
        print(json.dumps(rows[-1]), flush=True)
    return {"fit": [list(s) for s in part.fit], "held_out": rows}


def _time_configs(kernel: Any, inputs: tuple, configs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each config compiled, checked against the reference and timed, round-robin (5 rounds)."""
    import helion
    import torch

    from autotune.evaluators import timing

    bound = kernel.helion_kernel.bind(inputs)
    reference = kernel.reference_output(tuple(x.double() if x.is_floating_point() else x for x in inputs))
    tolerance = timing.tolerance_for(inputs[0].dtype)
    runners, out = {}, {}
    for name, config in configs.items():
        config = config if config is not None else dict(bound.config_spec.default_config())
        try:
            compiled = bound.compile_config(helion.Config.from_dict(dict(config)), allow_print=False)
            result, _ = timing.run_poisoned(lambda: compiled(*inputs))
            error = timing.relative_error(result, reference)
        except Exception as failure:  # noqa: BLE001 - recorded as the contender's result
            out[name] = {"config": config, "status": f"failed: {' '.join(str(failure).split())[:200]}",
                         "median_ms": None}
            continue
        status = "ok" if error <= tolerance else f"wrong_result ({error:.3g})"
        out[name] = {"config": config, "status": status, "rel_error": error, "median_ms": None, "samples": []}
        if status == "ok":
            runners[name] = compiled
    options = timing.TimingOptions(min_reps=20, max_reps=100, target_ms=100.0, slow_factor=float("inf"))
    for _round in range(5):
        for name, compiled in runners.items():
            out[name]["samples"] += timing.time_gpu(lambda: compiled(*inputs), options).samples_ms
    for name in runners:
        out[name]["median_ms"] = statistics.median(out[name]["samples"])
        out[name]["samples"] = len(out[name]["samples"])
    torch.cuda.synchronize()
    return out


def _helion_aot_rule(kernel: Any, part: Part, dtype: Any, fit_configs: dict) -> Any:
    """Helion's measure and build steps over the fit shapes' configs; returns args -> config."""
    import importlib.util
    import tempfile

    from helion.autotuner.aot_kernel import extract_shape_features
    from helion.autotuner.heuristic_generator import PerformanceTarget, generate_heuristic

    work = Path(tempfile.mkdtemp(prefix="helion_aot_"))
    measurements = work / "measurements.csv"
    configs = [c for c in fit_configs.values() if c is not None]
    with measurements.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, ["kernel_name", "shape_hash", "config_hash", "config", "shape_features",
                                         "timing_ms"])
        writer.writeheader()
        for shape in part.fit:
            inputs = kernel.make_inputs(shape, dtype, "cuda", 0)
            features = {k: v for k, v in extract_shape_features(inputs).items()}
            timed = _time_configs(kernel, inputs, {f"c{i}": c for i, c in enumerate(configs)})
            for i, config in enumerate(configs):
                ms = timed[f"c{i}"]["median_ms"]
                writer.writerow({"kernel_name": kernel.helion_kernel.fn.__name__, "shape_hash": "x".join(map(str, shape)),
                                 "config_hash": f"c{i}", "config": json.dumps(config),
                                 "shape_features": json.dumps(features), "timing_ms": ms if ms else "inf"})
            del inputs
    target = PerformanceTarget(print_score_matrix=False, verbose=False)
    results = generate_heuristic(measurements, work / "out", target=target)
    name = kernel.helion_kernel.fn.__name__
    path = next((work / "out").glob(f"*{name}*.py"))
    spec = importlib.util.spec_from_file_location(f"helion_aot_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (REPORT / f"helion_aot_heuristic_{name}.py").write_text(path.read_text())
    print(f"Helion heuristic for {name}: {len(results)} kernel(s), file {path.name}", flush=True)
    return lambda inputs: getattr(module, f"autotune_{name}")(*inputs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("part", choices=sorted(PARTS))
    parser.add_argument("--db", default="user.db", help="records here; reads it with the shipped data")
    parser.add_argument("--seconds", type=float, default=None, help="search seconds per shape (default: the part's)")
    parser.add_argument("--skip-tuning", action="store_true", help="only judge the run-time choices")
    args = parser.parse_args(argv)
    part = PARTS[args.part]
    REPORT.mkdir(exist_ok=True)
    out = REPORT / f"results_{args.part}.json"
    results: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    results.update({"part": args.part, "kernel": part.locator, "dtype": part.dtype})
    if not args.skip_tuning:
        results["sessions"] = tune_part(part, args.db, args.seconds)
        out.write_text(json.dumps(results, indent=1))
    if part.held_out:
        results["choices"] = judge_choices(part, args.db)
    out.write_text(json.dumps(results, indent=1))
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
