"""autotune: tuning sessions, strategies, evaluators, the measurement cache and the CLI.

The public API (see README, "Tune your own kernel"):

* `Kernel`: a `@helion.kernel`, or a Triton launcher with its declared space, and its optional
  hooks (inputs, reference, baselines, bytes and flops);
* `tune(kernel, args, ...) -> TuneResult`: a tuning session, every evaluation recorded;
* `configured(kernel, db=...)`: the kernel picking the best recorded config per call shape;
* `ConfigTable`: a kernel's tuned configs by shape, as JSON, a Python module or Helion's AOT file.
"""

from typing import Any

__all__ = ["Baseline", "ConfigTable", "Kernel", "TuneResult", "configured", "tune"]

_WHERE = {"Kernel": "autotune.kernel", "Baseline": "autotune.kernel", "tune": "autotune.api",
          "TuneResult": "autotune.api",
          "configured": "autotune.serving", "ConfigTable": "autotune.config_table"}


def __getattr__(name: str) -> Any:
    # Imported on first use: the command line starts without importing torch, helion or triton.
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'autotune' has no attribute {name!r}")
