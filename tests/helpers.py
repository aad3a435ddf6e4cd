"""The suite's shared helpers, defined once: comparisons of floating-point results and
oracles that decode bit patterns from a format's definition alone.

``from helpers import same, assert_same`` (like ``from peers import ...``: the tests
directory is on ``sys.path``). Nothing here calls lowprec's rounding or decoding, so the
oracles stay independent of the code they check; and nothing here uses an optional peer
(the root ``conftest.py`` finds a test's peers through its own module only).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

__all__ = ["same", "all_same", "assert_same", "equal_or_both_nan", "assert_bitwise_equal",
           "fp32_bits", "from_fp32_bits", "decode_layout", "decode_by_definition"]


# -- comparisons -----------------------------------------------------------------------

def same(a, b):
    """Elementwise: equal as floats, any NaN equal to any NaN, zeros of equal sign."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (np.isnan(a) & np.isnan(b)) | ((a == b) & (np.signbit(a) == np.signbit(b)))


def all_same(a, b):
    """Whether `same` holds for every element (after broadcasting): one bool."""
    return bool(np.all(same(a, b)))


def assert_same(got, want, *context):
    """Assert `same` everywhere; the message shows the first five mismatches, with the
    matching elements of each array in ``context`` (the inputs, say)."""
    ok = same(got, want)
    if not ok.all():
        i = np.flatnonzero(~ok.reshape(-1))[:5]
        pieces = [repr(np.asarray(c).reshape(-1)[i] if np.size(c) > 1 else c) for c in context]
        raise AssertionError(f"{(~ok).sum()} mismatches; got {np.asarray(got).reshape(-1)[i]!r}"
                             f" want {np.asarray(want).reshape(-1)[i]!r} for {pieces}")


def equal_or_both_nan(a, b):
    """Two scalars: ``a == b`` (so 0.0 equals -0.0), or both NaN."""
    return a == b or (math.isnan(a) and math.isnan(b))


def assert_bitwise_equal(got, expected):
    """Assert equal shapes and equal float64 bit patterns: infinities, the signs of
    zeros and NaN payloads included."""
    assert np.array_equal(np.asarray(got).view(np.uint64), np.asarray(expected).view(np.uint64))


# -- FP32 bit patterns (the form the GPU measurements are stored in) ---------------------

def fp32_bits(x):
    """FP32 bit patterns (uint32) of float64 values that are FP32 values."""
    return np.asarray(x).astype(np.float32).view(np.uint32)


def from_fp32_bits(bits):
    """The float64 values of FP32 bit patterns (uint32)."""
    return bits.view(np.float32).astype(np.float64)


# -- decoding by the definition (DESIGN.md's format table) -------------------------------

@functools.cache
def decode_layout(e, m, bias, subnormals=True, kind="ieee"):
    """Finite non-negative values, as sorted Fractions, of the format with ``e`` exponent
    bits, ``m`` mantissa bits, ``bias`` and ``kind``, from every bit pattern with the sign
    bit clear: exponent field 0 is zero and the subnormals (none without ``subnormals``);
    an 'ieee' format's top exponent field is inf and NaN, an 'fn' format's all-ones
    pattern is NaN; 'fnuz' and 'finite' formats have no special positive pattern."""
    top, out = 2**e - 1, set()
    for code in range(2 ** (e + m)):
        E, M = divmod(code, 2**m)
        if (kind == "ieee" and E == top) or (kind == "fn" and E == top and M == 2**m - 1):
            continue                                       # inf and NaN
        if E == 0:
            if M and not subnormals:
                continue                                   # no subnormals
            out.add(Fraction(M, 2**m) * Fraction(2) ** (1 - bias))
        else:
            out.add((1 + Fraction(M, 2**m)) * Fraction(2) ** (E - bias))
    return tuple(sorted(out))


def decode_by_definition(fmt):
    """`decode_layout` of a format object's own parameters (its fields, not its derived
    constants)."""
    return decode_layout(fmt.exponent_bits, fmt.mantissa_bits, fmt.bias, fmt.subnormals,
                         fmt.kind)
