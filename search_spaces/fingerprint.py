"""Stable fingerprints: what must match for a recorded measurement to be reused.

A measurement is only valid for the same kernel source, the same space definition, the
same input signature, the same toolchain and the same device.  The fingerprint hashes
all of them; the parts are stored beside it so a user can see where data came from.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from typing import Mapping

from search_spaces.space import SearchSpace, canonical_json, sha256_hex


def toolchain_versions() -> dict[str, str]:
    """Versions of the libraries that change generated code or timing."""
    versions: dict[str, str] = {"python": platform.python_version()}
    for module in ("torch", "triton", "helion"):
        try:
            from importlib.metadata import version

            versions[module] = version(module)
        except Exception:  # not installed: recorded as absent, which changes the fingerprint
            versions[module] = "absent"
    return versions


def current_device_name() -> str:
    """The GPU's name, or 'cpu' where there is none (see autotune.device)."""
    from autotune.device import device_name

    return device_name(0)


@dataclass(frozen=True)
class SpaceIdentity:
    """Everything a measurement depends on, apart from the config itself."""

    space: SearchSpace
    signature: Mapping[str, object]  # {"shape": [..], "dtype": "float16"}
    source_hash: str
    versions: Mapping[str, str] = field(default_factory=toolchain_versions)
    device: str = field(default_factory=current_device_name)

    def parts(self) -> dict[str, object]:
        return {
            "kernel": self.space.kernel,
            "signature": dict(self.signature),
            "source_hash": self.source_hash,
            "space": self.space.definition_hash(),
            "versions": {k: self.versions.get(k, "absent") for k in ("torch", "triton", "helion")},
            "device": self.device,
        }

    @property
    def fingerprint(self) -> str:
        return sha256_hex(canonical_json(self.parts()))[:24]


def source_hash(*texts: str) -> str:
    """Hash of the kernel's source text (and of any helper whose text shapes the code)."""
    return sha256_hex("\n\0".join(texts))[:24]


def code_hash(*texts: str) -> str:
    """Hash of what the kernel's code says, not how it is written: its syntax tree with comments,
    docstrings, layout and quoting gone.  Used to match tables and configs to a kernel whose
    source gained a comment or was reformatted; recorded spaces stay keyed by `source_hash`."""
    return "code-" + sha256_hex("\n\0".join(_code_form(text) for text in texts))[:24]


def _code_form(text: str) -> str:
    """The text's AST dump (docstrings dropped); where it does not parse alone, its tokens
    without comments and line structure; else the text itself."""
    import ast
    import io
    import textwrap
    import tokenize

    dedented = textwrap.dedent(text)
    try:
        tree = ast.parse(dedented)
    except SyntaxError:
        skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                tokenize.ENCODING, tokenize.ENDMARKER}
        try:
            tokens = tokenize.generate_tokens(io.StringIO(dedented).readline)
            return "tokens:" + " ".join(t.string for t in tokens if t.type not in skip)
        except (tokenize.TokenError, IndentationError, SyntaxError):
            return "text:" + text
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return "ast:" + ast.dump(tree, annotate_fields=False)
