"""The README restates no measured figure: it cites the reports generated from data, and every
report or page it cites exists, so a figure cannot drift away from the data behind it."""

from __future__ import annotations

import re

from conftest import REPO

# A number with a unit of time, rate or speed-up: what a measured figure looks like.
FIGURE = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)?\s?(?:ms|µs|us|s|GB/s|TB/s|TFLOP/s|evaluations/s|%|×|x)(?![\w/])")


def _prose(markdown: str) -> str:
    """The text outside fenced code blocks (commands and code may carry numbers: sizes, budgets)."""
    return re.sub(r"```.*?```", "", markdown, flags=re.S)


def test_the_readme_restates_no_measured_figure():
    found = [(line.strip(), match.group(0)) for line in _prose((REPO / "README.md").read_text()).splitlines()
             for match in FIGURE.finditer(line)]
    assert not found, f"figures in the README's prose (cite the report instead): {found}"


def test_the_figure_pattern_recognises_figures():
    # The check above is only as good as its pattern: it must catch the usual ways of writing one.
    for text in ("took 181.8 µs", "at 98% of copy", "1.35× torch.softmax", "2940 GB/s", "in 46 s", "0.41x SDPA"):
        assert FIGURE.search(text), text
    for text in ("softmax 4096x32000", "--budget 40", "sm_90", "issue 24", "H100"):
        assert not FIGURE.search(text), text


def test_every_page_and_report_the_readme_cites_exists():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", (REPO / "README.md").read_text())
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert local, "the README cites no page"
    missing = [link for link in local if not (REPO / link).exists()]
    assert not missing, f"the README cites missing files: {missing}"
