"""lowprec.p3109's arithmetic against §4.10 written out in Fractions
(tests/oracles/p3109.py): every operand pair of small formats, every rounding and
saturation."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from helpers import assert_bits
from lowprec import p3109
from oracles import p3109 as oracle


def formats_of(k):
    return [(k, p, s, e) for s in (True, False) for p in range(1, k + (0 if s else 1))
            for e in (True, False)]


def build(params):
    k, p, s, e = params
    return p3109.format(k, p, signed=s, domain="extended" if e else "finite")


BINARY = {"add": oracle.omega_add, "subtract": oracle.omega_subtract,
          "multiply": oracle.omega_multiply, "divide": oracle.omega_divide,
          "copysign": oracle.omega_copysign}


@functools.cache
def exact_results(op, params):
    """ω<op> of every pair of datums of the format, pairs in C order of codes."""
    table = oracle.value_table(*params)
    return [BINARY[op](a, b) for a in table for b in table]


def check_binary(op, params, rhos):
    fmt = build(params)
    n = 2 ** params[0]
    x, y = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    exact = exact_results(op, params)
    for rounding in sorted({r for r, _ in rhos}):
        sats = [s for r, s in rhos if r == rounding]
        want = oracle.project_many(params, exact, rounding, sats)
        for sat in sats:
            got = getattr(p3109, op)(x, y, fmt, fmt, fmt, rounding, sat)
            assert_bits(got.reshape(-1), want[sat], params, op, rounding, sat)


# Each rounding once and each saturation twice: the projection itself is tested in
# every combination in test_projection.py; here the exact result before it is at stake.
SIX = list(zip(oracle.ROUNDINGS, oracle.SATURATIONS * 2))


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("k", [4, 5])
def test_every_pair_of_small_formats(op, k):
    rhos = SIX if k == 4 else [("NearestTiesToEven", "SatNone")]
    for params in formats_of(k):
        check_binary(op, params, rhos)


@pytest.mark.slow
@pytest.mark.parametrize("op, params", [
    ("add", (8, 3, True, True)), ("multiply", (8, 4, True, True)),
    ("multiply", (8, 1, False, False)),
])
def test_every_pair_of_8_bit_formats(op, params):
    check_binary(op, params, [("NearestTiesToEven", "SatNone")])


@pytest.mark.parametrize("params", formats_of(4) + [(8, 3, True, True), (8, 1, False, False)])
def test_sqrt_negate_abs_of_every_code(params):
    fmt = build(params)
    codes = np.arange(2 ** params[0])
    table = oracle.value_table(*params)
    for rounding, sat in SIX:
        want = oracle.project_many(params, [oracle.omega_sqrt(v) for v in table],
                                   rounding, [sat])[sat]
        assert_bits(p3109.sqrt(codes, fmt, fmt, rounding, sat), want, params, rounding, sat)
    neg = [oracle.NAN if isinstance(v, str) else -v for v in table]
    absolute = [oracle.NAN if isinstance(v, str) else abs(v) for v in table]
    assert_bits(p3109.negate(codes, fmt, fmt, "TowardZero", "SatFinite"),
                oracle.project_many(params, neg, "TowardZero", ["SatFinite"])["SatFinite"])
    assert_bits(p3109.absolute(codes, fmt, fmt),
                oracle.project_many(params, absolute, "NearestTiesToEven",
                                    ["SatNone"])["SatNone"])


@pytest.mark.parametrize("params", [(4, 2, True, True), (4, 1, False, False),
                                    (4, 3, True, False)])
def test_fma_of_every_triple(params):
    fmt = build(params)
    n = 2 ** params[0]
    table = oracle.value_table(*params)
    x, y, z = (a.reshape(-1) for a in np.meshgrid(*[np.arange(n)] * 3, indexing="ij"))
    exact = [oracle.omega_fma(table[a], table[b], table[c]) for a, b, c in zip(x, y, z)]
    for rounding, sat in [("NearestTiesToEven", "SatNone"), ("TowardPositive", "SatFinite"),
                          ("ToOdd", "SatPropagate")]:
        want = oracle.project_many(params, exact, rounding, [sat])[sat]
        assert_bits(p3109.fma(x, y, z, fmt, fmt, fmt, fmt, rounding, sat), want,
                    params, rounding, sat)


@pytest.mark.parametrize("params", [(4, 2, True, True), (4, 1, True, False),
                                    (4, 3, False, True)])
def test_faa_of_every_triple(params):
    fmt = build(params)
    n = 2 ** params[0]
    table = oracle.value_table(*params)
    x, y, z = (a.reshape(-1) for a in np.meshgrid(*[np.arange(n)] * 3, indexing="ij"))
    exact = [oracle.omega_faa(table[a], table[b], table[c]) for a, b, c in zip(x, y, z)]
    for rounding, sat in [("NearestTiesToEven", "SatNone"), ("TowardNegative", "SatFinite"),
                          ("NearestTiesToAway", "SatPropagate")]:
        want = oracle.project_many(params, exact, rounding, [sat])[sat]
        assert_bits(p3109.faa(x, y, z, fmt, fmt, fmt, fmt, rounding, sat), want,
                    params, rounding, sat)


def test_faa_keeps_what_float64_sums_lose():
    # binary8p1se spans 2**-63 .. 2**62: x + y + z of its extremes needs 125 bits.
    f = p3109.format(8, 1)
    params = (8, 1, True, True)
    table = oracle.value_table(*params)
    rng = np.random.default_rng(5)
    x, y, z = (rng.integers(0, 256, 4000) for _ in range(3))
    exact = [oracle.omega_faa(table[a], table[b], table[c]) for a, b, c in zip(x, y, z)]
    for rounding in ("TowardPositive", "TowardNegative", "ToOdd"):
        want = oracle.project_many(params, exact, rounding, ["SatNone"])["SatNone"]
        assert_bits(p3109.faa(x, y, z, f, f, f, f, rounding), want, rounding)


def test_mixed_formats_and_stochastic_rounding():
    # Add<Binary8p3se, Binary4p2sf, Binary8p4se>, and StochasticB with N = 5.
    fx, fy, fr = (8, 3, True, True), (4, 2, True, False), (8, 4, True, True)
    tx, ty = oracle.value_table(*fx), oracle.value_table(*fy)
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, 3000)
    y = rng.integers(0, 16, 3000)
    r = rng.integers(0, 32, 3000)
    exact = [oracle.omega_add(tx[a], ty[b]) for a, b in zip(x, y)]
    got = p3109.add(x, y, build(fx), build(fy), build(fr))
    assert_bits(got, oracle.project_many(fr, exact, "NearestTiesToEven",
                                         ["SatNone"])["SatNone"])
    got = p3109.add(x, y, build(fx), build(fy), build(fr), "StochasticB", "SatFinite",
                    random_bits=r, n_bits=5)
    want = [oracle.project(*fr, v, "StochasticB", "SatFinite", 5, int(ri))
            for v, ri in zip(exact, r)]
    assert_bits(got, want)


def test_errors():
    f = "binary8p3se"
    with pytest.raises(ValueError, match="not a P3109 format"):
        p3109.add(0, 0, "e4m3", f, f)
    with pytest.raises(ValueError, match="n_bits <= 48"):
        p3109.add(0, 0, f, f, f, "StochasticA", random_bits=0, n_bits=50)
    with pytest.raises(ValueError, match="bit pattern 256"):
        p3109.add(256, 0, f, f, f)


@pytest.mark.parametrize("params", formats_of(4) + formats_of(5) + [
    (6, 3, True, True), (8, 3, True, True), (8, 4, True, True), (8, 1, False, False)])
def test_recip_rsqrt_of_every_code(params):
    fmt = build(params)
    codes = np.arange(2 ** params[0])
    table = oracle.value_table(*params)
    rhos = SIX if params[0] != 5 else [("NearestTiesToEven", "SatNone")]
    for name, omega in (("recip", oracle.omega_recip), ("rsqrt", oracle.omega_rsqrt)):
        exact = [omega(v) for v in table]
        for rounding, sat in rhos:
            want = oracle.project_many(params, exact, rounding, [sat])[sat]
            got = getattr(p3109, name)(codes, fmt, fmt, rounding, sat)
            assert_bits(got, want, params, name, rounding, sat)


def test_recip_rsqrt_into_another_format_stochastic():
    fx, fr = (8, 3, True, True), (8, 4, True, True)
    table = oracle.value_table(*fx)
    rng = np.random.default_rng(7)
    x = rng.integers(0, 256, 2000)
    r = rng.integers(0, 2 ** 6, 2000)
    for name, omega in (("recip", oracle.omega_recip), ("rsqrt", oracle.omega_rsqrt)):
        got = getattr(p3109, name)(x, build(fx), build(fr), "StochasticC", "SatPropagate",
                                   random_bits=r, n_bits=6)
        want = [oracle.project(*fr, omega(table[a]), "StochasticC", "SatPropagate", 6,
                               int(ri)) for a, ri in zip(x, r)]
        assert_bits(got, want, name)
