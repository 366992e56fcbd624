"""SpaceIdentity fingerprints: stable across processes, sensitive to everything they cover."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from conftest import run_python
from search_spaces.fingerprint import SpaceIdentity, source_hash, toolchain_versions
from search_spaces.space import SearchSpace

VERSIONS = {"python": "3.11.7", "torch": "2.13.0", "triton": "3.9.0", "helion": "1.5.0"}

_SUBPROCESS = r"""
import json, sys, torch
from autotune.kernels.softmax_triton import triton_space, softmax_kernel, launch
from autotune.kernels import get_kernel
from search_spaces.fingerprint import SpaceIdentity, source_hash
spec = get_kernel("softmax-triton")
space = triton_space((64, 1000), torch.float16)
sig = {"shape": [64, 1000], "dtype": "float16"}
pinned = SpaceIdentity(space=space, signature=sig, source_hash=source_hash(spec.source_text()),
                       versions=json.loads(sys.argv[1]) if len(sys.argv) > 1 else %r, device="NVIDIA H100 80GB HBM3")
live = SpaceIdentity(space=space, signature=sig, source_hash=source_hash(spec.source_text()))
print("FINGERPRINTS " + json.dumps({"pinned": pinned.fingerprint, "live": live.fingerprint}))
""" % (VERSIONS,)


@pytest.fixture(scope="module")
def base(triton_task) -> SpaceIdentity:
    return SpaceIdentity(space=triton_task.space, signature={"shape": [64, 1000], "dtype": "float16"},
                         source_hash=source_hash(triton_task.spec.source_text()), versions=dict(VERSIONS),
                         device="NVIDIA H100 80GB HBM3")


def test_fingerprint_is_stable_across_processes(base, triton_task):
    # a different hash seed in the child: nothing may depend on set or dict-of-str iteration order
    done = run_python(_SUBPROCESS, PYTHONHASHSEED="12345")
    assert done.returncode == 0, done.stderr[-3000:]
    line = [x for x in done.stdout.splitlines() if x.startswith("FINGERPRINTS ")]
    assert len(line) == 1, done.stdout
    child = json.loads(line[0].removeprefix("FINGERPRINTS "))
    assert child["pinned"] == base.fingerprint
    assert child["live"] == triton_task.fingerprint  # default versions and device ("cpu" here)


def test_fingerprint_is_a_function_of_the_parts(base):
    rebuilt = SpaceIdentity(space=SearchSpace.from_dict(json.loads(json.dumps(base.space.to_dict()))),
                            signature={"dtype": "float16", "shape": (64, 1000)}, source_hash=base.source_hash,
                            versions=dict(reversed(list(VERSIONS.items()))), device=base.device)
    assert rebuilt.fingerprint == base.fingerprint
    assert len(base.fingerprint) == 24 and all(c in "0123456789abcdef" for c in base.fingerprint)


def _variants(base: SpaceIdentity) -> dict[str, SpaceIdentity]:
    space_dict = base.space.to_dict()
    other_default = SearchSpace.from_dict({**space_dict, "default": {**space_dict["default"], "num_stages": 3}})
    fewer_warps = dict(space_dict)
    fewer_warps["parameters"] = [
        {**p, "choices": [1, 2, 4, 8]} if p["name"] == "num_warps" else p for p in space_dict["parameters"]
    ]
    no_constraint = {**space_dict, "constraints": []}
    return {
        "device": dataclasses.replace(base, device="NVIDIA H200"),
        "cpu": dataclasses.replace(base, device="cpu"),
        "torch": dataclasses.replace(base, versions={**VERSIONS, "torch": "2.14.0"}),
        "triton": dataclasses.replace(base, versions={**VERSIONS, "triton": "3.8.0"}),
        "helion": dataclasses.replace(base, versions={**VERSIONS, "helion": "1.6.0"}),
        "no helion": dataclasses.replace(base, versions={k: v for k, v in VERSIONS.items() if k != "helion"}),
        "source": dataclasses.replace(base, source_hash=source_hash("def kernel(): pass")),
        "shape": dataclasses.replace(base, signature={"shape": [64, 1001], "dtype": "float16"}),
        "dtype": dataclasses.replace(base, signature={"shape": [64, 1000], "dtype": "bfloat16"}),
        "space default": dataclasses.replace(base, space=other_default),
        "space values": dataclasses.replace(base, space=SearchSpace.from_dict(fewer_warps)),
        "space constraints": dataclasses.replace(base, space=SearchSpace.from_dict(no_constraint)),
        "kernel": dataclasses.replace(base, space=SearchSpace.from_dict({**space_dict, "kernel": "other"})),
    }


@pytest.mark.parametrize("what", [
    "device", "cpu", "torch", "triton", "helion", "no helion", "source", "shape", "dtype", "space default",
    "space values", "space constraints", "kernel"])
def test_fingerprint_changes_with_each_part(base, what):
    variant = _variants(base)[what]
    assert variant.fingerprint != base.fingerprint
    assert variant.parts() != base.parts()


def test_all_variants_are_distinct(base):
    assert len(_variants(base)) == 13
    prints = [v.fingerprint for v in _variants(base).values()] + [base.fingerprint]
    assert len(set(prints)) == len(prints)


def test_source_hash():
    assert source_hash("a") == source_hash("a")
    assert source_hash("a") != source_hash("b")
    assert source_hash("ab", "c") != source_hash("a", "bc")  # parts are separated, not concatenated
    assert len(source_hash("x")) == 24


def test_toolchain_versions_names_the_installed_libraries():
    import platform

    import triton

    versions = toolchain_versions()
    assert versions["python"] == platform.python_version()
    assert versions["torch"].split("+")[0] == torch.__version__.split("+")[0]
    assert versions["triton"] == triton.__version__
    assert versions["helion"] != "absent"
