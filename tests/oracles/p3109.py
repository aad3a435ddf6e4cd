"""IEEE P3109 Interim Report v4.0, written out in exact arithmetic: the oracle of
`lowprec.p3109`.

Each function follows one definition of the report (§4.7.2 ωDecode, §4.7.4
ωRoundToPrecision, §4.7.5 ωSaturate, §4.7.6 ωEncode, §4.7.3 ωProject), rule by rule
and in the report's order. Finite values are Fractions; ±∞ are the floats ±inf and
NaN is the string "NaN". Nothing here calls lowprec.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

__all__ = ["NAN", "bias", "project_many", "omega_add", "omega_subtract", "omega_multiply",
           "omega_divide", "omega_fma", "omega_sqrt", "decode", "finite_range",
           "round_to_precision", "round_away", "saturate", "encode", "project",
           "value_table", "ROUNDINGS", "SATURATIONS"]

NAN = "NaN"
INF = math.inf
ROUNDINGS = ("NearestTiesToEven", "NearestTiesToAway", "TowardPositive", "TowardNegative",
             "TowardZero", "ToOdd")
SATURATIONS = ("SatFinite", "SatPropagate", "SatNone")


def bias(k, p, signed):
    """§3.1: B = 2**(K - P - 1) signed, 2**(K - P) unsigned."""
    return 2 ** (k - p - 1) if signed else 2 ** (k - p)


def decode(k, p, signed, extended, x):
    """§4.7.2 ωDecodeAux(Σ, Δ, x) for the code point ``x``."""
    if signed and x == 2 ** (k - 1):
        return NAN
    if not signed and x == 2 ** k - 1:
        return NAN
    if signed and extended and x == 2 ** (k - 1) - 1:
        return INF
    if signed and extended and x == 2 ** k - 1:
        return -INF
    if not signed and extended and x == 2 ** k - 2:
        return INF
    if signed and 2 ** (k - 1) < x < 2 ** k:
        return -decode(k, p, signed, extended, x - 2 ** (k - 1))
    t = x % 2 ** (p - 1)                        # trailing significand
    e_biased = x // 2 ** (p - 1)
    b = bias(k, p, signed)
    if e_biased == 0:
        return (0 + t * Fraction(2) ** (1 - p)) * Fraction(2) ** (1 - b)
    return (1 + t * Fraction(2) ** (1 - p)) * Fraction(2) ** (e_biased - b)


@functools.cache
def value_table(k, p, signed, extended):
    """Every code point's datum, code by code."""
    return tuple(decode(k, p, signed, extended, x) for x in range(2 ** k))


@functools.cache
def finite_range(k, p, signed, extended):
    """(M_lo, M_hi): the datums of MinFiniteOf(f) and MaxFiniteOf(f)."""
    finite = [v for v in value_table(k, p, signed, extended) if isinstance(v, Fraction)]
    return min(finite), max(finite)


def _floor_log2(a):
    """floor(log2(a)) of a positive Fraction, exactly."""
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    return e


def _rnite(x):
    """The report's RNITE: round a Fraction to the nearest integer, ties to even."""
    f = math.floor(x)
    if x < f + Fraction(1, 2) or (x == f + Fraction(1, 2) and f % 2 == 0):
        return f
    return f + 1


def round_away(mode, nu, x_positive, code_is_even, n=None, r=None):
    """§4.7.4's RoundAway(µ) for the fraction ``nu`` in [0, 1)."""
    if mode == "TowardZero":
        return False
    if mode == "TowardPositive":
        return nu > 0 and x_positive
    if mode == "TowardNegative":
        return nu > 0 and not x_positive
    if mode == "NearestTiesToAway":
        return nu >= Fraction(1, 2)
    if mode == "NearestTiesToEven":
        return nu > Fraction(1, 2) or (nu == Fraction(1, 2) and not code_is_even)
    if mode == "ToOdd":
        return nu > 0 and code_is_even
    if mode == "StochasticA":
        return math.floor(nu * 2 ** n) + r >= 2 ** n
    if mode == "StochasticB":
        return math.floor(nu * 2 ** (n + 1)) + (2 * r + 1) >= 2 ** (n + 1)
    if mode == "StochasticC":
        return _rnite(nu * 2 ** n) + r >= 2 ** n
    raise ValueError(mode)


def _pow2(e):
    """2**e as an int or a Fraction."""
    return 2 ** e if e >= 0 else Fraction(1, 2 ** -e)


def round_to_precision(p, b, mode, x, n=None, r=None):
    """§4.7.4 ωRoundToPrecision_{P,B,µ}(X)."""
    if isinstance(x, (float, str)) or x == 0:          # ±inf, NaN, 0
        return x
    a = abs(x)
    q = max(_floor_log2(a), 1 - b) - p + 1
    s_real = a / _pow2(q)
    fl = math.floor(s_real)
    nu = s_real - fl
    code_is_even = fl % 2 == 0 if p > 1 else (fl == 0 or (q + b) % 2 == 0)
    s = fl + 1 if round_away(mode, nu, x > 0, code_is_even, n, r) else fl
    return Fraction((1 if x > 0 else -1) * s * _pow2(q))


def saturate(sat, rnd, x, signed, extended, m_lo, m_hi):
    """§4.7.5 ωSaturate_{M_lo, M_hi}(Sat, Round, X, Σ, Δ), first matching rule."""
    if isinstance(x, str):
        return NAN
    if not isinstance(x, float) and m_lo <= x <= m_hi:     # floats are ±inf
        return x
    if sat == "SatFinite":
        return m_hi if x > m_hi else m_lo
    if sat == "SatPropagate":
        if x == INF:
            return INF if extended else m_hi
        if x == -INF:
            return -INF if signed and extended else m_lo
        return m_lo if x < m_lo else m_hi
    # SatNone
    if x == INF:
        return INF if extended else m_hi
    if x == -INF:
        if signed and extended:
            return -INF
        if not signed:
            return NAN
        return m_lo
    if rnd == "ToOdd" and not signed and extended and x > m_hi:
        return m_hi
    if rnd in ("TowardZero", "TowardNegative") and x > m_hi:
        return m_hi
    if rnd in ("TowardZero", "TowardPositive") and x < m_lo:
        return m_lo
    if signed and extended and x < m_lo:
        return -INF
    if not signed and x < m_lo:
        return NAN
    if x < m_lo:
        return m_lo
    if extended and x > m_hi:
        return INF
    return m_hi


def encode(k, p, signed, x):
    """§4.7.6 ωEncode_f(X) for a datum X of the format."""
    if isinstance(x, str):
        return 2 ** (k - 1) if signed else 2 ** k - 1
    if x == INF:
        return 2 ** (k - 1) - 1 if signed else 2 ** k - 2
    if x < 0:
        return encode(k, p, signed, -x) + 2 ** (k - 1)
    if x == 0:
        return 0
    b = bias(k, p, signed)
    e = max(_floor_log2(x), 1 - b)
    s = x * Fraction(2) ** -e * 2 ** (p - 1)
    assert s.denominator == 1, "not a datum of the format"
    t = int(s) % 2 ** (p - 1)
    return t if s < 2 ** (p - 1) else t + (e + b) * 2 ** (p - 1)


def project(k, p, signed, extended, x, rounding="NearestTiesToEven", sat="SatNone",
            n=None, r=None):
    """§4.7.3 ωProject_{f, rho}(X): the code point of X in the format."""
    if isinstance(x, str):
        return encode(k, p, signed, NAN)
    m_lo, m_hi = finite_range(k, p, signed, extended)
    rounded = round_to_precision(p, bias(k, p, signed), rounding, x, n, r)
    return encode(k, p, signed, saturate(sat, rounding, rounded, signed, extended, m_lo, m_hi))


# §4.10's auxiliary operations on the closed extended reals, rule by rule.

def _is_inf(x):
    return isinstance(x, float)                       # floats here are ±inf only


def omega_add(x, y):
    """§4.10.3 ωAdd."""
    if isinstance(x, str) or isinstance(y, str):
        return NAN
    if (x, y) in ((INF, -INF), (-INF, INF)):
        return NAN
    if INF in (x, y) and ((_is_inf(x) and x > 0) or (_is_inf(y) and y > 0)):
        return INF
    if _is_inf(x) or _is_inf(y):
        return -INF
    return x + y


def omega_subtract(x, y):
    """§4.10.3 ωSubtract."""
    if isinstance(x, str) or isinstance(y, str):
        return NAN
    if (x, y) in ((INF, INF), (-INF, -INF)):
        return NAN
    if y == INF and _is_inf(y):
        return -INF
    if x == INF and _is_inf(x):
        return INF
    if y == -INF and _is_inf(y):
        return INF
    if x == -INF and _is_inf(x):
        return -INF
    return x - y


def _sign(v):
    return (v > 0) - (v < 0)


def omega_multiply(x, y):
    """§4.10.4 ωMultiply."""
    if isinstance(x, str) or isinstance(y, str):
        return NAN
    if _is_inf(x) or _is_inf(y):
        s = _sign(x) * _sign(y)
        return NAN if s == 0 else (INF if s > 0 else -INF)
    return x * y


def omega_divide(x, y):
    """§4.10.5 ωDivide: X/0 and ±∞/±∞ are NaN, X/±∞ is 0."""
    if isinstance(x, str) or isinstance(y, str):
        return NAN
    if _is_inf(x) and _is_inf(y):
        return NAN
    if y == 0:
        return NAN
    if _is_inf(x):
        return INF if _sign(x) * _sign(y) > 0 else -INF
    if _is_inf(y):
        return Fraction(0)
    return x / y


def omega_fma(x, y, z):
    """§4.10.6 ωFMA: ωAdd(ωMultiply(X, Y), Z) with the product exact."""
    return omega_add(omega_multiply(x, y), z)


def omega_sqrt(x, bits=200):
    """§4.10 ωSqrt. An irrational root is returned rounded to odd at ``bits`` bits:
    floor(sqrt(X) * 2**k) plus a half when inexact, which every projection with
    P + N + 2 <= bits rounds as it would the root itself (round-to-odd)."""
    if isinstance(x, str) or x == -INF or (not _is_inf(x) and x < 0):
        return NAN
    if x == INF or x == 0:
        return x
    k = bits - _floor_log2(x) // 2
    scaled = x * Fraction(4) ** k                  # X * 2**(2k)
    n = scaled.numerator // scaled.denominator
    r = math.isqrt(n)
    exact = r * r == n and scaled.denominator == 1
    return Fraction(2 * r + (0 if exact else 1), 2 ** (k + 1))


def omega_copysign(x, y):
    """§4.10.2 ωCopySign: NaN if either is NaN; else |X| with Y's sign (Y >= 0: |X|)."""
    if isinstance(x, str) or isinstance(y, str):
        return NAN
    return -abs(x) if y < 0 else abs(x)


def omega_recip(x):
    """§4.10.8 ωRecip: NaN and 0 give NaN, ±∞ gives 0."""
    if isinstance(x, str) or x == 0:
        return NAN
    if isinstance(x, float):
        return Fraction(0)
    return 1 / x


def omega_rsqrt(x):
    """§4.10.8 ωRSqrt: NaN, -∞ and X <= 0 give NaN, +∞ gives 0; else sqrt(1/X)."""
    if isinstance(x, str) or x == -INF or (not isinstance(x, float) and x <= 0):
        return NAN
    if x == INF:
        return Fraction(0)
    return omega_sqrt(1 / x)


def project_many(params, values, rounding, saturations):
    """ωProject of each closed extended real of ``values`` under each saturation, as
    {saturation: [code, ...]}; ωRoundToPrecision runs once per value."""
    k, p, s, e = params
    b = bias(k, p, s)
    m_lo, m_hi = finite_range(*params)
    rounded = [round_to_precision(p, b, rounding, v) for v in values]
    out = {}
    codes = {}                                    # datum -> code, encoded once

    def code(z):
        if z not in codes:
            codes[z] = encode(k, p, s, z)
        return codes[z]
    for sat in saturations:
        out[sat] = [code(saturate(sat, rounding, r, s, e, m_lo, m_hi)) for r in rounded]
    return out


# §4.12, §4.13 and §4.16, rule by rule.

COMPARE_RULES = {
    # (rules as (x pattern, y pattern, result)), then the real comparison.
    "less": ([(NAN, "*", False), ("*", NAN, False), (INF, "*", False), ("*", INF, True),
              (-INF, -INF, False), (-INF, "*", True), ("*", -INF, False)],
             lambda x, y: x < y),
    "less_equal": ([(NAN, "*", False), ("*", NAN, False), ("*", INF, True),
                    (-INF, "*", True), (INF, "*", False), ("*", -INF, False)],
                   lambda x, y: x <= y),
    "equal": ([(NAN, "*", False), ("*", NAN, False), (INF, INF, True), (-INF, -INF, True),
               (INF, "*", False), (-INF, "*", False), ("*", -INF, False),
               ("*", INF, False)], lambda x, y: x == y),
    "greater_equal": ([(NAN, "*", False), ("*", NAN, False), (INF, "*", True),
                       (-INF, -INF, True), (-INF, "*", False), ("*", INF, False),
                       ("*", -INF, True)], lambda x, y: x >= y),
    "greater": ([(NAN, "*", False), ("*", NAN, False), ("*", INF, False),
                 (-INF, -INF, False), ("*", -INF, True), (INF, "*", True),
                 (-INF, "*", False)], lambda x, y: x > y),
}


def _matches(pattern, v):
    if pattern == "*":
        return True
    if pattern == NAN:
        return isinstance(v, str)
    return isinstance(v, float) and v == pattern


def compare(name, x, y):
    """§4.12's ωCompare<name>(X, Y), first matching rule."""
    rules, real = COMPARE_RULES[name]
    for px, py, result in rules:
        if _matches(px, x) and _matches(py, y):
            return result
    return real(x, y)


def total_order(x, y):
    """§4.12.1 TotalOrder."""
    if isinstance(x, str):
        return True
    if isinstance(y, str):
        return False
    return compare("less_equal", x, y)


def next_code(k, p, signed, extended, x, up):
    """§4.16 NextGreaterThanAux / NextLessThanAux on the code point ``x``."""
    table = value_table(k, p, signed, extended)
    m_lo, m_hi = finite_range(k, p, signed, extended)
    nan = encode(k, p, signed, NAN)
    v = table[x]
    max_finite, min_finite = encode(k, p, signed, m_hi), encode(k, p, signed, m_lo)
    inf = encode(k, p, signed, INF) if extended else None
    neg_inf = encode(k, p, signed, -INF) if extended and signed else None
    least = min(u for u in table if isinstance(u, Fraction) and u > 0)
    smallest_negative = encode(k, p, signed, -least) if signed else None
    minus = not isinstance(v, str) and v < 0
    if up:
        if isinstance(v, str) or (extended and x == inf):
            return nan
        if not extended and x == max_finite:
            return nan
        if extended and x == max_finite:
            return inf
        if signed and extended and x == neg_inf:
            return min_finite
        if signed and x == smallest_negative:
            return 0
        return x - 1 if signed and minus else x + 1
    if isinstance(v, str) or (not extended and x == min_finite):
        return nan
    if not signed and x == 0:
        return nan
    if signed and extended and x == neg_inf:
        return nan
    if signed and extended and x == min_finite:
        return neg_inf
    if extended and x == inf:
        return max_finite
    if signed and x == 0:
        return smallest_negative
    return x + 1 if signed and minus else x - 1


def omega_faa(x, y, z):
    """§4.10.7 ωFAA: equivalent to ωAdd(ωAdd(X, Y), Z) with the inner sum exact."""
    return omega_add(omega_add(x, y), z)


# §4.11.1-§4.11.3, rule by rule (first match).

def _nan(v):
    return isinstance(v, str)


def omega_minimum(x, y):
    if _nan(x) or _nan(y):
        return NAN
    if _is_inf(x) and _is_inf(y):
        return INF if x == INF and y == INF else -INF
    if x == INF and _is_inf(x):
        return y
    if y == INF and _is_inf(y):
        return x
    if _is_inf(x) or _is_inf(y):               # a -inf operand
        return -INF
    return x if x < y else y


def omega_maximum(x, y):
    if _nan(x) or _nan(y):
        return NAN
    if _is_inf(x) and _is_inf(y):
        return -INF if x == -INF and y == -INF else INF
    if (_is_inf(x) and x == INF) or (_is_inf(y) and y == INF):
        return INF
    if _is_inf(x):                             # -inf
        return y
    if _is_inf(y):
        return x
    return y if x < y else x


def _number(omega):
    def rule(x, y):
        if _nan(x) and _nan(y):
            return NAN
        if _nan(y):
            return x
        if _nan(x):
            return y
        return omega(x, y)
    return rule


def omega_minimum_magnitude(x, y):
    if _nan(x) or _nan(y):
        return NAN
    if _is_inf(x) and _is_inf(y):
        return INF if x == INF and y == INF else -INF
    if _is_inf(x):
        return y
    if _is_inf(y):
        return x
    if abs(x) < abs(y):
        return x
    if abs(x) > abs(y):
        return y
    return x if x < y else y


def omega_maximum_magnitude(x, y):
    if _nan(x) or _nan(y):
        return NAN
    if (_is_inf(x) and x == INF) or (_is_inf(y) and y == INF):
        return INF
    if _is_inf(x) or _is_inf(y):
        return -INF
    if abs(x) > abs(y):
        return x
    if abs(x) < abs(y):
        return y
    return y if x < y else x


def _finite_variant(smaller):
    def rule(x, y):
        if _nan(x) and _nan(y):
            return NAN
        if _nan(x):
            return y
        if _nan(y):
            return x
        if _is_inf(x) and _is_inf(y):
            if x == y:
                return x
            return -INF if smaller else INF
        if _is_inf(x):
            return y
        if _is_inf(y):
            return x
        if smaller:
            return x if x < y else y
        return y if x < y else x
    return rule


EXTREMA = {
    "minimum": omega_minimum, "maximum": omega_maximum,
    "minimum_number": _number(omega_minimum), "maximum_number": _number(omega_maximum),
    "minimum_magnitude": omega_minimum_magnitude,
    "maximum_magnitude": omega_maximum_magnitude,
    "minimum_magnitude_number": _number(omega_minimum_magnitude),
    "maximum_magnitude_number": _number(omega_maximum_magnitude),
    "minimum_finite": _finite_variant(True), "maximum_finite": _finite_variant(False),
}


def omega_clamp(x, lo, hi):
    """§4.11.4 ωClamp, first matching rule."""
    if _nan(x) or _nan(lo) or _nan(hi):
        return NAN
    if lo > hi:
        return NAN
    if lo == INF and hi == INF:
        return INF
    if lo == -INF and hi == -INF:
        return -INF
    if hi == -INF or lo == INF:
        return NAN
    if x == INF and hi == INF:
        return INF
    if x == INF:
        return hi
    if x == -INF and lo == -INF:
        return -INF
    if x == -INF:
        return lo
    if lo == -INF and hi == INF:
        return x
    if lo == -INF:
        return x if x <= hi else hi
    if hi == INF:
        return lo if x <= lo else x
    return lo if x <= lo else (hi if x >= hi else x)
