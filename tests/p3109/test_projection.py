"""lowprec.p3109.project against the report's ωProject written out in Fractions
(tests/oracles/p3109.py), and its table path against its reference path."""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp
from helpers import assert_bits
from lowprec import p3109
from lowprec.p3109 import projection
from oracles import p3109 as oracle


def formats_up_to(k_max, k_min=3):
    return [(k, p, s, e) for k in range(k_min, k_max + 1) for s in (True, False)
            for p in range(1, k + (0 if s else 1)) for e in (True, False)]


def build(k, p, s, e):
    return p3109.format(k, p, signed=s, domain="extended" if e else "finite")


@functools.cache
def probes(params):
    """Every finite datum, the points 1/4, 1/2 and 3/4 of the way to the next one, the
    same steps past the largest, far beyond it, and below the smallest subnormal; with
    both signs, ±inf and NaN. Every one is a float64 value."""
    finite = sorted({v for v in oracle.value_table(*params) if isinstance(v, Fraction)
                     and v >= 0})
    gap = finite[-1] - finite[-2]
    finite += [finite[-1] + gap, finite[-1] + 2 * gap]
    out = set(finite)
    for lo, hi in zip(finite, finite[1:]):
        out.update(lo + (hi - lo) * Fraction(i, 4) for i in (1, 2, 3))
    out.update({finite[-1] * 4, Fraction(2) ** 1000, Fraction(2) ** -1074})
    out |= {-v for v in out}
    values = sorted(out)
    assert all(Fraction(float(v)) == v for v in values)
    return values


def expected(params, values, rounding, saturations):
    """The oracle's codes for ``values`` under each saturation (ωRoundToPrecision once)."""
    k, p, s, e = params
    b = oracle.bias(k, p, s)
    m_lo, m_hi = oracle.finite_range(*params)
    rounded = [oracle.round_to_precision(p, b, rounding, v) for v in values]
    codes = {}
    encoded = {}
    for sat in saturations:
        row = []
        for r in rounded:
            z = oracle.saturate(sat, rounding, r, s, e, m_lo, m_hi)
            key = (z, type(z))
            if key not in encoded:
                encoded[key] = oracle.encode(k, p, s, z)
            row.append(encoded[key])
        codes[sat] = np.array(row)
    return codes


SPECIALS = [math.inf, -math.inf, math.nan]


@pytest.mark.parametrize("k", range(3, 9))
@pytest.mark.parametrize("rounding", oracle.ROUNDINGS)
def test_every_format_up_to_8_bits_against_the_report(k, rounding):
    for params in formats_up_to(k, k):
        fmt = build(*params)
        values = probes(params)
        x = np.array([float(v) for v in values] + SPECIALS)
        want = expected(params, values + [math.inf, -math.inf, oracle.NAN], rounding,
                        oracle.SATURATIONS)
        for sat in oracle.SATURATIONS:
            assert_bits(p3109.project(x, fmt, rounding, sat), want[sat], params, sat)
            if fmt.p <= 4:          # the table path above; the reference path here
                out = np.empty(x.size, np.uint16)
                with np.errstate(all="ignore"):
                    projection._reference(x, fmt, rounding, sat, None, 0, out)
                assert_bits(out, want[sat], params, sat, "reference")


@pytest.mark.parametrize("params", [(8, 3, True, True)])
@pytest.mark.parametrize("rounding", p3109.STOCHASTIC)
def test_stochastic_rounding_follows_the_formulas_for_every_n_and_r(params, rounding):
    # Between a datum and its successor at every fraction j / 512 of the gap (every
    # boundary of N <= 8 random bits, ties of RNITE included), both signs, every N in
    # 1..8 and every R in [0, 2**N): the decision is RoundAway's formula, in Fractions.
    fmt = build(*params)
    finite = sorted(v for v in oracle.value_table(*params) if isinstance(v, Fraction)
                    and v > 0)
    lo, hi = finite[len(finite) // 2], finite[len(finite) // 2 + 1]
    j = np.arange(512)
    x = float(lo) + j / 512 * float(hi - lo)           # exact: gaps are powers of two
    base = int(p3109.project(float(lo), fmt))
    for n in range(1, 9):
        r = np.arange(2 ** n)
        away = np.array([[oracle.round_away(rounding, Fraction(int(i), 512), True, True, n,
                                            int(ri)) for ri in r] for i in j])
        got = p3109.project(x[:, None], fmt, rounding, random_bits=r[None, :], n_bits=n)
        assert_bits(got, base + away, params, n)
        if params[2]:                                  # signed: -x mirrors x
            neg = p3109.project(-x[:, None], fmt, rounding, random_bits=r[None, :],
                                n_bits=n)
            sign = 2 ** (params[0] - 1)
            assert_bits(neg, np.where(base + away == 0, 0, base + away + sign), params, n)


@pytest.mark.parametrize("rounding", p3109.STOCHASTIC)
def test_stochastic_rounding_across_the_range_against_the_oracle(rounding):
    rng = np.random.default_rng(7)
    for params in [(8, 3, True, True), (8, 1, False, True), (5, 2, True, False)]:
        fmt = build(*params)
        values = probes(params)
        pick = rng.choice(len(values), 300)
        for n in (1, 3, 8):
            r = rng.integers(0, 2 ** n, 300)
            for sat in oracle.SATURATIONS:
                want = [oracle.project(*params, values[i], rounding, sat, n, int(ri))
                        for i, ri in zip(pick, r)]
                got = p3109.project([float(values[i]) for i in pick], fmt, rounding, sat,
                                    random_bits=r, n_bits=n)
                assert_bits(got, want, params, n, sat)


@pytest.mark.parametrize("rounding", oracle.ROUNDINGS)
def test_table_path_is_bit_for_bit_the_reference(rounding):
    # Random float64 patterns, and each tie and datum of the format one ulp either side.
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2**64, 20000, dtype=np.uint64, endpoint=False)
    for params in [(8, 3, True, True), (8, 4, False, True), (8, 1, True, False),
                   (10, 4, True, True), (4, 2, False, False)]:
        fmt = build(*params)
        grid = np.array([float(v) for v in probes(params)])
        x = np.concatenate([bits.view(np.float64), grid, np.nextafter(grid, np.inf),
                            np.nextafter(grid, -np.inf), SPECIALS, [0.0, -0.0]])
        for sat in oracle.SATURATIONS:
            ref = np.empty(x.size, np.uint16)
            with np.errstate(all="ignore"):
                projection._reference(x, fmt, rounding, sat, None, 0, ref)
            assert_bits(p3109.project(x, fmt, rounding, sat), ref, params, sat)


def test_p1_ties_follow_code_parity_where_lp_round_follows_the_significand():
    # binary8p1se: 1.5 lies between 1 (code 64) and 2 (code 65). The report sends
    # ties to the even code, 1.0; lp.round sends them to the even significand, 2.0.
    # 3.0, between 2 (code 65) and 4 (code 66), goes up under both.
    fmt = lp.format("binary8p1se")
    assert_bits(p3109.project([1.5, 3.0], fmt), [64, 66])
    assert [oracle.project(8, 1, True, True, Fraction(v)) for v in (1.5, 3)] == [64, 66]
    assert list(lp.round([1.5, 3.0], fmt)) == [2.0, 4.0]


def test_saturation_differs_from_lp_round_where_documented():
    # Finite domain, SatNone, nearest: the report gives the largest finite value;
    # lp.round gives NaN ('fnuz' has no inf), or max with saturate=True.
    fmt = lp.format("binary8p4sf")
    assert int(p3109.project(1e6, fmt)) == 0x7F
    assert math.isnan(lp.round(1e6, fmt))
    assert lp.round(1e6, fmt, saturate=True) == lp.decode(0x7F, fmt)
    # Unsigned: a negative value that rounds to zero projects to 0 (no -0 exists).
    assert int(p3109.project(-1e-30, "binary8p3ue")) == 0
    assert int(p3109.project(-1.0, "binary8p3ue")) == 0xFF        # NaN under SatNone
    assert int(p3109.project(-1.0, "binary8p3ue", saturation="SatFinite")) == 0


def test_shapes_input_and_errors():
    x = np.array([[1.0, 2.0], [3.0, np.nan]])
    before = x.copy()
    out = p3109.project(x, "binary8p3se")
    assert out.shape == (2, 2) and out.dtype == np.uint8 and np.array_equal(x, before, True)
    assert p3109.project(1.0, "binary12p7se").dtype == np.uint16
    assert isinstance(p3109.project(1.0, "binary8p3se"), np.uint8)
    assert p3109.project(np.float32(1.0), "binary8p3se") == 0x40
    with pytest.raises(ValueError, match="not a P3109 format"):
        p3109.project(1.0, "e4m3")
    with pytest.raises(ValueError, match="rounding must be one of"):
        p3109.project(1.0, "binary8p3se", "rne")
    with pytest.raises(ValueError, match="saturation must be one of"):
        p3109.project(1.0, "binary8p3se", saturation="SatInf")
    with pytest.raises(ValueError, match="needs random_bits"):
        p3109.project(1.0, "binary8p3se", "StochasticA")
    with pytest.raises(ValueError, match=r"\[0, 2\*\*3\)"):
        p3109.project(1.0, "binary8p3se", "StochasticA", random_bits=8, n_bits=3)
    with pytest.raises(TypeError, match="must be integers"):
        p3109.project(1.0, "binary8p3se", "StochasticA", random_bits=0.5, n_bits=3)
    with pytest.raises(ValueError, match="for the Stochastic"):
        p3109.project(1.0, "binary8p3se", random_bits=1, n_bits=3)
    with pytest.raises(TypeError):
        p3109.project("1.0", "binary8p3se")
