"""lowprec.p3109's transcendental operations against MPFR (gmpy2): every code of
several formats, every rounding and saturation. The report's special cases (§4.10.9 -
§4.10.16) are written out here rule by rule; finite results come from MPFR, rounded
toward zero at 200 bits and made odd where inexact, then projected by the Fraction
oracle (tests/oracles/p3109.py)."""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np
import pytest

from helpers import assert_bits
from lowprec import p3109
from oracles import p3109 as oracle

gmpy2 = pytest.importorskip("gmpy2")
pytestmark = pytest.mark.oracle

NAN, INF = oracle.NAN, oracle.INF
BITS = 200


def _ro(fn, *xs):
    """fn(*xs) rounded to odd at BITS bits: exact results stay exact. Beyond 2**±2000,
    where every format rounds alike, a stand-in of 2**±3000."""
    ctx = gmpy2.context(precision=BITS, round=gmpy2.RoundToZero,
                        emax=gmpy2.get_emax_max(), emin=gmpy2.get_emin_min())
    with ctx:
        v = fn(*(gmpy2.mpfr(x) for x in xs))
        inexact = gmpy2.get_context().inexact       # the active context's flags
    if gmpy2.is_nan(v):
        return NAN
    sign = -1 if v < 0 else 1
    if gmpy2.is_infinite(v) or (v != 0 and gmpy2.get_exp(v) > 2000):
        return sign * Fraction(2) ** 3000
    if (v == 0 and inexact) or (v != 0 and gmpy2.get_exp(v) < -2000):
        return sign * Fraction(2) ** -3000
    n, d = v.as_integer_ratio()
    f = Fraction(int(n), int(d))
    if inexact:                                   # the sticky bit: strictly above |v|
        f += Fraction(2) ** (gmpy2.get_exp(v) - BITS - 1) * sign
    return f


def _wide(fn):
    """fn at 2 * BITS bits to nearest: an inner step of a composite function."""
    def inner(*a):
        with gmpy2.context(precision=2 * BITS, round=gmpy2.RoundToNearest,
                           emax=gmpy2.get_emax_max(), emin=gmpy2.get_emin_min()):
            return fn(*a)
    return inner


PI = _wide(lambda: gmpy2.const_pi())


def _positive(d):
    """log1p(exp(-x)) > 0 for every x: MPFR underflows it past x = 2**30 or so, where
    it is below 2**-10**6, which stands in for it."""
    return d if d > 0 else gmpy2.mpfr(2) ** -10 ** 6


def _special(x, rules):
    for match, value in rules:
        if match(x):
            return value
    return None


def _nan(x):
    return isinstance(x, str)


def _is(v):
    return lambda x: (not isinstance(x, str) and x == v
                      and isinstance(x, float) == isinstance(v, float))


def _finite(x):
    return isinstance(x, Fraction)


def _half_multiple(x, d):
    return _finite(x) and (x * d).denominator == 1


# (special rules in the report's order, MPFR function of the finite rest)
UNARY = {
    "exp": ([(_is(INF), INF), (_is(-INF), Fraction(0))], gmpy2.exp),
    "exp2": ([(_is(INF), INF), (_is(-INF), Fraction(0))], gmpy2.exp2),
    "expm1": ([(_is(INF), INF), (_is(-INF), Fraction(-1))], gmpy2.expm1),
    "log": ([(_is(-INF), NAN), (_is(INF), INF), (lambda x: x < 0, NAN),
             (lambda x: x == 0, -INF)], gmpy2.log),
    "log2": ([(_is(-INF), NAN), (_is(INF), INF), (lambda x: x < 0, NAN),
              (lambda x: x == 0, -INF)], gmpy2.log2),
    "log1p": ([(_is(-INF), NAN), (_is(INF), INF), (lambda x: x < -1, NAN),
               (lambda x: x == -1, -INF)], gmpy2.log1p),
    "softplus": ([(_is(INF), INF), (_is(-INF), Fraction(0))],
                 lambda x: (x + _positive(_wide(lambda a: gmpy2.log1p(gmpy2.exp(-a)))(x))
                            if x > 0 else gmpy2.log1p(_wide(gmpy2.exp)(x)))),
    "sin": ([(lambda x: _is(INF)(x) or _is(-INF)(x), NAN)], gmpy2.sin),
    "cos": ([(lambda x: _is(INF)(x) or _is(-INF)(x), NAN)], gmpy2.cos),
    "tan": ([(lambda x: _is(INF)(x) or _is(-INF)(x), NAN)], gmpy2.tan),
    "arcsin": ([(lambda x: not _finite(x) or abs(x) > 1, NAN)], gmpy2.asin),
    "arccos": ([(lambda x: not _finite(x) or abs(x) > 1, NAN)], gmpy2.acos),
    "arctan": ([(_is(INF), "pi/2"), (_is(-INF), "-pi/2")], gmpy2.atan),
    "sinh": ([(_is(INF), INF), (_is(-INF), -INF)], gmpy2.sinh),
    "cosh": ([(_is(INF), INF), (_is(-INF), INF)], gmpy2.cosh),
    "tanh": ([(_is(INF), Fraction(1)), (_is(-INF), Fraction(-1))], gmpy2.tanh),
    "arcsinh": ([(_is(INF), INF), (_is(-INF), -INF)], gmpy2.asinh),
    "arccosh": ([(_is(INF), INF), (_is(-INF), NAN), (lambda x: x < 1, NAN)], gmpy2.acosh),
    "arctanh": ([(lambda x: not _finite(x), NAN), (lambda x: x == 1, INF),
                 (lambda x: x == -1, -INF), (lambda x: abs(x) > 1, NAN)], gmpy2.atanh),
    # Niven: sin, cos and tan of a rational multiple of π are rational only at
    # multiples of π/2 (π/4 for tan); those are the exact cases.
    "sinpi": ([(lambda x: not _finite(x), NAN),
               (lambda x: _half_multiple(x, 2), "sinpi")],
              lambda x: gmpy2.sin(_wide(lambda: x * PI())())),
    "cospi": ([(lambda x: not _finite(x), NAN),
               (lambda x: _half_multiple(x, 2), "cospi")],
              lambda x: gmpy2.cos(_wide(lambda: x * PI())())),
    "tanpi": ([(lambda x: not _finite(x), NAN),
               (lambda x: _half_multiple(x, 4), "tanpi")],
              lambda x: gmpy2.tan(_wide(lambda: x * PI())())),
    "arcsinpi": ([(lambda x: not _finite(x) or abs(x) > 1, NAN),
                  (lambda x: x in (0, 1, -1), "arcsinpi")],
                 lambda x: _wide(gmpy2.asin)(x) / PI()),
    "arccospi": ([(lambda x: not _finite(x) or abs(x) > 1, NAN),
                  (lambda x: x in (0, 1, -1), "arccospi")],
                 lambda x: _wide(gmpy2.acos)(x) / PI()),
    "arctanpi": ([(_is(INF), Fraction(1, 2)), (_is(-INF), Fraction(-1, 2)),
                  (lambda x: x in (0, 1, -1), "arctanpi")],
                 lambda x: _wide(gmpy2.atan)(x) / PI()),
}

EXACT = {   # the rational results of the π-functions, from their definitions
    "sinpi": lambda x: [0, 1, 0, -1][int(2 * x) % 4],
    "cospi": lambda x: [1, 0, -1, 0][int(2 * x) % 4],
    "tanpi": lambda x: [0, 1, NAN, -1][int(4 * x) % 4],
    "arcsinpi": lambda x: x / 2,
    "arccospi": lambda x: (1 - x) / 2,
    "arctanpi": lambda x: x / 4,
}


def omega(name, x):
    if _nan(x):
        return NAN
    rules, fn = UNARY[name]
    v = _special(x, rules)
    if v == "pi/2" or v == "-pi/2":
        return _ro(lambda: gmpy2.const_pi() / (2 if v == "pi/2" else -2))
    if isinstance(v, str) and v != NAN:
        r = EXACT[name](x)
        return r if isinstance(r, str) else Fraction(r)
    if v is not None:
        return v
    return _ro(fn, x)


def omega_hypot(x, y):
    """§4.10.14 ωHypot: NaN first, then ±inf gives +inf."""
    if _nan(x) or _nan(y):
        return NAN
    if not _finite(x) or not _finite(y):
        return INF
    return oracle.omega_sqrt(x * x + y * y)


def omega_arctan2(y, x, pi=True):
    """§4.10.15 ωArcTan2 (§4.10.16 ωArcTan2Pi with pi=False), rules in order."""
    if _nan(y) or _nan(x):
        return NAN
    unit = (lambda k: _ro(lambda: gmpy2.const_pi() * k)) if pi else Fraction
    if y == 0 and x == 0:
        return NAN
    if not _finite(y) and not _finite(x):
        return NAN
    if _is(INF)(x) or (y == 0 and x > 0):
        return Fraction(0)
    if _is(INF)(y) or (y > 0 and x == 0):
        return unit(Fraction(1, 2))
    if _is(-INF)(x) or (y == 0 and x < 0):
        return unit(Fraction(1))
    if _is(-INF)(y) or (y < 0 and x == 0):
        return unit(Fraction(-1, 2))
    if not pi and abs(y) == abs(x):
        return Fraction(1 if x > 0 else 3, 4) * (1 if y > 0 else -1)
    if pi:
        return _ro(gmpy2.atan2, y, x)
    return _ro(lambda a, b: _wide(gmpy2.atan2)(a, b) / PI(), y, x)


FORMATS = [(8, 3, True, True), (8, 4, True, True), (8, 1, False, False),
           (6, 3, True, True), (4, 2, True, True), (8, 3, True, False)]


def build(params):
    k, p, s, e = params
    return p3109.format(k, p, signed=s, domain="extended" if e else "finite")


@functools.cache
def exact_unary(name, params):
    return [omega(name, v) for v in oracle.value_table(*params)]


@pytest.mark.parametrize("params", FORMATS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_every_code_every_rounding(name, params):
    fmt = build(params)
    codes = np.arange(2 ** params[0])
    exact = exact_unary(name, params)
    for rounding in oracle.ROUNDINGS:
        want = oracle.project_many(params, exact, rounding, oracle.SATURATIONS)
        for sat in oracle.SATURATIONS:
            got = getattr(p3109, name)(codes, fmt, fmt, rounding, sat)
            assert_bits(got, want[sat], name, params, rounding, sat)


@pytest.mark.parametrize("params", [(6, 3, True, True), (4, 2, True, True),
                                    (4, 1, False, False)])
@pytest.mark.parametrize("name", ["hypot", "arctan2", "arctan2pi"])
def test_every_pair_every_rounding(name, params):
    fmt = build(params)
    n = 2 ** params[0]
    table = oracle.value_table(*params)
    a, b = (v.reshape(-1) for v in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    if name == "hypot":
        exact = [omega_hypot(table[i], table[j]) for i, j in zip(a, b)]
    else:
        exact = [omega_arctan2(table[i], table[j], name == "arctan2") for i, j in zip(a, b)]
    for rounding in oracle.ROUNDINGS:
        want = oracle.project_many(params, exact, rounding, oracle.SATURATIONS)
        for sat in oracle.SATURATIONS:
            got = getattr(p3109, name)(a, b, fmt, fmt, fmt, rounding, sat)
            assert_bits(got, want[sat], name, params, rounding, sat)


@pytest.mark.parametrize("name", ["exp", "log", "sin", "tanh", "arctanpi", "cospi"])
def test_stochastic_every_random_value(name):
    fx, fr = (8, 3, True, True), (6, 3, True, True)
    codes = np.arange(256)
    exact = exact_unary(name, fx)
    for rounding, n in [("StochasticA", 1), ("StochasticB", 3), ("StochasticC", 6)]:
        r = np.arange(2 ** n)
        x, rr = (v.reshape(-1) for v in np.meshgrid(codes, r, indexing="ij"))
        got = getattr(p3109, name)(x, build(fx), build(fr), rounding, "SatFinite",
                                   random_bits=rr, n_bits=n)
        want = [oracle.project(*fr, exact[c], rounding, "SatFinite", n, int(ri))
                for c, ri in zip(x, rr)]
        assert_bits(got, want, name, rounding, n)


def test_stochastic_many_random_bits_takes_the_slow_path():
    # N = 40 puts boundaries at 44 bits: NumPy's value rarely decides, decimal does.
    f = (8, 3, True, True)
    rng = np.random.default_rng(11)
    x = rng.integers(0, 256, 300)
    r = rng.integers(0, 2 ** 40, 300)
    exact = exact_unary("exp", f)
    got = p3109.exp(x, build(f), build(f), "StochasticC", "SatNone", random_bits=r, n_bits=40)
    want = [oracle.project(*f, exact[c], "StochasticC", "SatNone", 40, int(ri))
            for c, ri in zip(x, r)]
    assert_bits(got, want)


def test_errors():
    f = "binary8p3se"
    with pytest.raises(ValueError, match="n_bits <= 48"):
        p3109.exp(0, f, f, "StochasticA", random_bits=0, n_bits=50)
    with pytest.raises(ValueError, match="not a P3109 format"):
        p3109.exp(0, "e4m3", f)
