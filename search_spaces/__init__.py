"""Config spaces: named parameters, constraints, codecs and fingerprints.

Helion- and Triton-specific code lives here and only here.
"""

from search_spaces.codec import Codec, DeclaredCodec, RecordedCodec
from search_spaces.fingerprint import SpaceIdentity, source_hash, toolchain_versions
from search_spaces.parameters import Choice, Integer, Ordinal, Parameter, PowerOfTwo
from search_spaces.space import (
    InvalidConfig,
    Params,
    ProductLimit,
    SearchSpace,
    config_key,
    iter_grid,
    params_key,
)

__all__ = [
    "Choice", "Codec", "DeclaredCodec", "Integer", "InvalidConfig", "Ordinal", "Parameter", "Params",
    "PowerOfTwo", "ProductLimit", "RecordedCodec", "SearchSpace", "SpaceIdentity", "config_key",
    "iter_grid", "params_key", "source_hash", "toolchain_versions",
]
