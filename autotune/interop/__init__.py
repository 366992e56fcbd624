"""Recorded tuning spaces exchanged with other autotuners (Kernel Tuner cache files so far).

`kernel_tuner` knows the file format, `kernel_tuner_db` moves spaces between files and our
cache, `kernel_tuner_sim` runs Kernel Tuner's own strategies on a file in simulation mode
(it needs the kernel_tuner package, installed with the dev extra).
"""

from autotune.interop.kernel_tuner import (
    KernelTunerEntry,
    KernelTunerFileError,
    KernelTunerSpace,
    read_kernel_tuner_file,
    write_kernel_tuner_file,
)
from autotune.interop.kernel_tuner_db import export_kernel_tuner, import_into_cache, resolve_space


def __getattr__(name: str):  # kernel_tuner_simulate needs Kernel Tuner (the dev extra): imported on use
    if name == "kernel_tuner_simulate":
        from autotune.interop.kernel_tuner_sim import kernel_tuner_simulate

        return kernel_tuner_simulate
    raise AttributeError(name)


__all__ = [
    "KernelTunerEntry", "KernelTunerFileError", "KernelTunerSpace", "export_kernel_tuner", "import_into_cache",
    "kernel_tuner_simulate", "read_kernel_tuner_file", "resolve_space", "write_kernel_tuner_file",
]
