"""The Hypothesis strategies of `lowprec.testing` keep their docstrings' promises.

Oracle: each format's values come from decoding every bit pattern with NumPy's float16
or ml_dtypes, or, for formats those do not have, from a `Fraction` decoding of the
patterns written here from the format's definition (checked against ml_dtypes on the
formats both know). Ties are checked in `Fraction` arithmetic. Nothing here uses
lowprec's rounding or `representable_values`.
"""

import functools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import lowprec as lp
from lowprec import testing as lpt
from oracles.decode import decode_by_definition
from peers import ml_dtypes

# Formats whose midpoints were not all ties: an fn format's NaN slot, and formats
# without subnormals. (IEEE, fnuz and finite formats with subnormals were right.)
E5M10_NOSUB = lp.Format(5, 10, subnormals=False, name="e5m10_nosub")
E4M3FN_NOSUB = lp.Format(4, 3, kind="fn", subnormals=False, name="e4m3fn_nosub")
FORMATS = [lp.FP8_E4M3, E5M10_NOSUB, E4M3FN_NOSUB,
           lp.Format(3, 4, kind="fn", name="e3m4fn"),
           lp.Format(5, 2, subnormals=False, name="e5m2_nosub")]
# Same layouts with subnormals, decoded by NumPy / ml_dtypes.
DTYPES = {lp.FP8_E4M3: ml_dtypes.float8_e4m3fn, E5M10_NOSUB: np.float16,
          E4M3FN_NOSUB: ml_dtypes.float8_e4m3fn}
SETTINGS = settings(max_examples=300, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
# Many draws per example for the rare ones at the top of the range; no shrinking
# (the failing draw is printed as it is).
MANY = settings(SETTINGS, max_examples=20, phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck))


def decode_with_dtype(dtype, fmt):
    """Finite non-negative values of ``fmt`` from every pattern of ``dtype`` (same
    layout), its subnormals dropped where ``fmt`` has none."""
    codes = np.arange(2 ** fmt.bits, dtype=np.uint16 if fmt.bits > 8 else np.uint8)
    vals = codes.view(dtype).astype(np.float64)
    smallest_normal = float(ml_dtypes.finfo(dtype).smallest_normal)
    return tuple(sorted({Fraction(float(v)) for v in vals if np.isfinite(v) and v >= 0
                   and (fmt.subnormals or v == 0 or v >= smallest_normal)}))


@functools.cache
def ties(fmt):
    """The exact ties of ``fmt`` (non-negative): halfway between adjacent values, and
    the overflow threshold, max plus half the gap below max."""
    if fmt in DTYPES:
        vals = decode_with_dtype(DTYPES[fmt], fmt)
        assert vals == decode_by_definition(fmt)   # the definition agrees with ml_dtypes
    else:
        vals = decode_by_definition(fmt)
    pairs = list(zip(vals, vals[1:]))
    return frozenset([(a + b) / 2 for a, b in pairs] + [vals[-1] + (vals[-1] - vals[-2]) / 2])


def is_tie_or_nudged_tie(x, fmt):
    near = {x, math.nextafter(x, math.inf), math.nextafter(x, -math.inf)}
    return any(math.isfinite(y) and abs(Fraction(y)) in ties(fmt) for y in near)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@MANY
@given(data=st.data())
def test_midpoints_are_ties_or_one_ulp_from_one(fmt, data):
    # E4M3 once gave 496, halfway between the NaN slot 480 and 512; formats without
    # subnormals gave values halfway between "subnormals" they do not have.
    for x in data.draw(st.lists(lpt.midpoints(fmt), min_size=200, max_size=200)):
        assert is_tie_or_nudged_tie(x, fmt), x


@pytest.mark.parametrize("fmt", [f for f in FORMATS if not f.subnormals],
                         ids=lambda f: f.name)
@SETTINGS
@given(data=st.data())
def test_midpoints_below_the_smallest_normal_are_its_half(fmt, data):
    # Without subnormals the neighbours there are 0 and the smallest normal, whose tie
    # (from the decoded values, not from the format's attributes) is the only one.
    x = abs(data.draw(lpt.midpoints(fmt)))
    smallest_normal = decode_by_definition(fmt)[1]
    if Fraction(x) < smallest_normal * 3 / 4:
        assert abs(Fraction(x) - smallest_normal / 2) <= Fraction(x) * 2 ** -52, x


def test_midpoints_of_fp64_raise():
    # No float64 lies halfway between two adjacent float64s (values(FP64) is drawn below).
    with pytest.raises(ValueError, match="no ties that are float64 values"):
        lpt.midpoints(lp.FP64)


@SETTINGS
@given(data=st.data())
def test_values_of_fp64_without_infinity_are_never_infinite(data):
    # near_overflow(FP64) once stepped from max to inf.
    x = data.draw(lpt.values(lp.FP64, allow_infinity=False, allow_nan=False))
    assert math.isfinite(x), x


@SETTINGS
@given(x=lpt.near_overflow(lp.FP64))
def test_near_overflow_of_fp64_is_finite_and_near_max(x):
    assert math.isfinite(x), x
    big = float(np.finfo(np.float64).max)
    assert 0 <= big - abs(x) <= 3 * math.ulp(big), x
