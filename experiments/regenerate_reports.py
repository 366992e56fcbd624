"""Regenerate the reports that are made from the shipped data alone, for maintainers.

`python -m experiments.regenerate_reports` builds the shipped database from `data/batches/`
(when missing or stale) and runs each report's own command from the repository's root; `git
diff` then shows what changed.  `--only NAME` runs some of them; `--list` lists them.  Reports
that measure (GPU runs, replays through the tuner) are not here: their own pages say how they
are made.  `tests/test_reports_regenerate.py` checks the quick ones byte for byte.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHIPPED = "data/shipped.db"

# name -> the command that writes it (run from the repository's root)
REPORTS: dict[str, str] = {
    "softmax_study": "autotune experiment report experiments/softmax_study",
    "seed_study": "autotune experiment report experiments/seed_study --dtype all",
    "compile_floor": f"python -m experiments.compile_floor --db {SHIPPED}",
    "compile_floor-nvidia-h200": f'python -m experiments.compile_floor --db {SHIPPED} --device "NVIDIA H200"',
    "timing_budget": f"python -m experiments.timing_budget --db {SHIPPED}",
    "timing_budget-nvidia-h200": f'python -m experiments.timing_budget --db {SHIPPED} --device "NVIDIA H200"',
    "bench_overhead": f"python -m experiments.bench_overhead --report --db {SHIPPED} --shape 4096x32000",
    "matmul_formulations": f"python -m experiments.matmul_formulations --report-only --db {SHIPPED}",
    "slot_pairs_host_tensor_descriptors": "python -m experiments.slot_pairs --kernels 'matmul-*' --slot "
                                          "host_tensor_descriptors --values false,true --dtype bfloat16",
    "slot_pairs_pid_type": "python -m experiments.slot_pairs --kernels 'matmul-*' --slot pid_type --values "
                           "flat,persistent_interleaved --dtype bfloat16",
    "heldout": f"python -m experiments.heldout.report --db {SHIPPED} --shipped none",
    "heldout-nvidia-h200": f'python -m experiments.heldout.report --db {SHIPPED} --shipped none --device "NVIDIA H200"',
    "user_kernels": "python -m experiments.user_kernels.report",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.regenerate_reports", description=__doc__)
    parser.add_argument("--only", default="", help="comma-separated names (default: all)")
    parser.add_argument("--list", action="store_true", help="list the reports and their commands")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(REPORTS)
    unknown = [n for n in names if n not in REPORTS]
    if unknown:
        parser.error(f"unknown report(s) {', '.join(unknown)}; --list lists them")
    if args.list:
        for name in names:
            print(f"{name}: {REPORTS[name]}")
        return 0
    from autotune.databases import ready

    ready(REPO / SHIPPED)  # built once here, not by the first report
    failed = []
    for name in names:
        started = time.monotonic()
        done = subprocess.run(shlex.split(REPORTS[name]), cwd=REPO)
        print(f"{name}: {'ok' if done.returncode == 0 else f'failed ({done.returncode})'} "
              f"in {time.monotonic() - started:.0f} s", file=sys.stderr)
        if done.returncode:
            failed.append(name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
