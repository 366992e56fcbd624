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


MAX_PIXELS = 1_000_000  # a committed picture stays small (about 200 kB): reports are regenerated, not history
DPI = 110


def save(plt: Any, figure: Any, path: Path) -> Path:
    """Lay out, write at a resolution that keeps the picture under MAX_PIXELS, and free the figure.

    A figure of many panels is drawn at a lower resolution rather than growing the file: the
    pictures are committed beside their reports, and every regenerated version stays in history."""
    figure.tight_layout()
    width, height = figure.get_size_inches()
    dpi = min(DPI, (MAX_PIXELS / (width * height)) ** 0.5)
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
    _to_palette(path)
    return path


def _to_palette(path: Path) -> None:
    """Rewrite a PNG with a 256-colour palette: line plots lose nothing visible, the file a lot."""
    from PIL import Image

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)
