"""What every experiment's figures share: matplotlib drawing to files only, and saving a figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """matplotlib.pyplot on the file-only backend (no display on measuring or CI machines)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(plt: Any, figure: Any, path: Path) -> Path:
    """Lay out, write at a fixed resolution, and free the figure."""
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
