"""A Triton kernel the tests run under the interpreter (jit code must live in a file): it packs
each (max, sum) pair as softmax-resident publishes it and unpacks it as a waiting piece reads it."""

import triton
import triton.language as tl

from autotune.kernels.softmax_resident import pack_partials, unpack_partials


@triton.jit
def round_trip(max_ptr, sum_ptr, words_ptr, max_out_ptr, sum_out_ptr, N: tl.constexpr):
    """Program i packs pair i into words[i]; then every pair is unpacked from the words."""
    i = tl.program_id(0)
    tl.store(words_ptr + i, pack_partials(tl.load(max_ptr + i), tl.load(sum_ptr + i)))
    if i == N - 1:  # the interpreter runs programs in order: every word is written by now
        maxes, sums = unpack_partials(tl.load(words_ptr + tl.arange(0, N)))
        tl.store(max_out_ptr + tl.arange(0, N), maxes)
        tl.store(sum_out_ptr + tl.arange(0, N), sums)
