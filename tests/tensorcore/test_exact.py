"""lowprec.tensorcore.exact: the exact model rounded once to FP64, against a Fraction loop.

``model="exact", out_fmt="fp64"`` is the exact sum rounded once to float64. The oracle is
tests/oracles/loops.py's `exact_loop` on float64's grid (Fraction arithmetic, one
rounding written out); inf and NaN inputs follow IEEE 754's products and sums, written
out by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowprec as lp
from helpers import assert_bits
from oracles.loops import exact_loop

FP64_GRID = dict(p=53, emin=-1022, emax=1023)

#: 11 bits of precision and exponents in [-511, 510]: products reach float64's
#: subnormals (2**-1042) and its top binade (2**1023), and stay exact in float64.
WIDE = lp.Format(10, 10, bias=512)


def exact64(a, b, c=None, fmt="fp32"):
    return lp.matmul(np.asarray(a), np.asarray(b), model="exact", c=c, in_fmt=fmt,
                     out_fmt="fp64")


@st.composite
def wide_operands(draw, max_k=8):
    """(a, b, c) of WIDE values m * 2**e near one exponent, so that products cancel,
    tie and land anywhere in float64's range; c is a float64 value."""
    m, n, k = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, max_k))
    base = draw(st.integers(-521, 490))

    def value():
        sig = draw(st.integers(-2047, 2047))
        return math.ldexp(sig, min(501, base + draw(st.integers(0, 11))))

    a = np.array([[value() for _ in range(k)] for _ in range(m)])
    b = np.array([[value() for _ in range(n)] for _ in range(k)])
    c = np.array([[draw(st.floats(allow_nan=False, allow_infinity=False)) if draw(st.booleans())
                   else 0.0 for _ in range(n)] for _ in range(m)])
    return a, b, c


@settings(max_examples=150, deadline=None)
@given(wide_operands())
def test_fp64_output_is_the_fraction_sum_rounded_once(case):
    a, b, c = case
    with np.errstate(over="ignore"):
        got = exact64(a, b, c, WIDE)
    assert_bits(got, exact_loop(a, b, c, FP64_GRID))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40).flatmap(lambda k: st.tuples(
    st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=k,
             max_size=k),
    st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=k,
             max_size=k))))
def test_fp32_operands_to_fp64(case):
    a, b = np.array([case[0]]), np.array([case[1]]).T
    assert_bits(exact64(a, b), exact_loop(a, b, None, FP64_GRID))


U = 2.0**-53    # half an ulp of 1 in float64


@pytest.mark.parametrize(("terms", "want"), [
    ([1.0, U], 1.0),                              # a tie: to even, 1
    ([1.0, 2 * U, U], 1.0 + 4 * U),               # a tie: to even, 1 + 2**-51
    ([1.0, U, 2.0**-100], 1.0 + 2 * U),           # just above the tie
    ([1.0, U, -(2.0**-100)], 1.0),                # just below it
    ([-1.0, -U, 2.0**-100], -1.0),
    ([2.0**30, 2.0**-48, -(2.0**30)], 2.0**-48),  # cancellation beyond float64's sum
    ([2.0**100, 1.0, 2.0**-100, -(2.0**100)], 1.0),   # 1 + 2**-100 rounds to 1
])
def test_ties_and_cancellation(terms, want):
    a = np.array([terms])
    b = np.ones((len(terms), 1))
    got = exact64(a, b)
    assert_bits(got, exact_loop(a, b, None, FP64_GRID))
    assert got[0, 0] == want


def test_subnormal_results():
    tiny = math.ldexp(1.0, -521)                  # WIDE's least subnormal
    a = np.array([[tiny, 3 * tiny, -tiny], [math.ldexp(1.0, -500), tiny, 0.0]])
    b = np.array([[tiny], [5 * tiny], [7 * tiny]])
    got = exact64(a, b, fmt=WIDE)
    assert_bits(got, exact_loop(a, b, None, FP64_GRID))
    assert 0 < abs(got[0, 0]) < 2.0**-1022        # a float64 subnormal: 9 * 2**-1042


def test_overflow_threshold():
    # WIDE's max is m = 2**511 - 2**500, and 4 m**2 + 4095 * 2**1002 - 2**970 is
    # 2**1024 - 2**970 exactly: float64's overflow threshold, a tie that goes to the
    # even 2**1024, inf. Just below it (- 2**971), float64's max.
    m = float(WIDE.max)
    assert m == 2.0**511 - 2.0**500
    for last, want in ((-(2.0**485), math.inf), (-(2.0**486), float(np.finfo(float).max))):
        a = np.array([[m, m, m, m, 45 * 2.0**501, last]])
        b = np.array([[m], [m], [m], [m], [91 * 2.0**501], [2.0**485]])
        for sign in (1.0, -1.0):
            got = exact64(sign * a, b, fmt=WIDE)
            assert_bits(got, exact_loop(sign * a, b, None, FP64_GRID))
            assert got[0, 0] == sign * want


def test_inf_and_nan_inputs_follow_ieee():
    inf, nan = math.inf, math.nan
    a = np.array([[inf, 1.0], [inf, 1.0], [inf, -inf], [nan, 1.0], [1.0, 2.0]])
    b = np.array([[1.0, 0.0], [1.0, 1.0]])
    c = np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [-inf, inf]])
    got = exact64(a, b, c)
    # inf*1 + 1 = inf; inf*0 = NaN; inf - inf = NaN; NaN; finite + (-inf) = -inf.
    want = np.array([[inf, nan], [inf, nan], [nan, nan], [nan, nan], [-inf, inf]])
    np.testing.assert_array_equal(got, want)


def test_fp64_output_is_refused_by_rounding_models():
    with pytest.raises(ValueError, match="for an FP64 result use model='exact'"):
        lp.matmul([[1.0]], [[1.0]], model="fp32", in_fmt="fp32", out_fmt="fp64")


@pytest.mark.parametrize(("fmt", "a", "b", "c"), [
    # 1 + 2**-53 + 2**-1074: just above a tie (the level at 2**-1074 is short).
    ("fp32", [[1.0, 2.0**-27]], [[1.0], [2.0**-26]], 2.0**-1074),
    ("fp32", [[-1.0, -(2.0**-27)]], [[1.0], [2.0**-26]], -(2.0**-1074)),
    (WIDE, [[-(2.0**-521)]], [[3 * 2.0**-521]], 2.0**-980),
    (lp.Format(10, 25, bias=512), [[-(2.0**-524)]], [[1.25 * 2.0**-532]], 2.0**-1002),
    ("fp32", [[-float.fromhex("0x1.bbcde2p+5"), -float.fromhex("0x1.fffffep+4"),
               -float.fromhex("0x1.c1551ep+2")]],
     [[float.fromhex("0x1.fffffep+4")], [float.fromhex("0x1.0f7d6p+5")],
      [-float.fromhex("0x1.84a3aap+2")]], -7 * 2.0**-1074),
])
def test_levels_that_end_at_the_least_subnormal(fmt, a, b, c):
    a, b, c = np.array(a), np.array(b), np.array([[c]])
    assert_bits(exact64(a, b, c, fmt), exact_loop(a, b, c, FP64_GRID))


def test_short_bottom_level_with_many_terms():
    # K = 64 makes the levels 45 bits wide, so that the last one is cut at 2**-1074.
    a = np.zeros((1, 64))
    b = np.zeros((64, 1))
    a[0, :3], b[:3, 0] = [1.0, 2.0**-27, 1.0], [1.0, 2.0**-26, -(2.0**-20)]
    c = np.array([[-(2.0**-1074)]])
    assert_bits(exact64(a, b, c), exact_loop(a, b, c, FP64_GRID))
