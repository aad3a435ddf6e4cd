"""lowprec.arith against exact references it did not produce.

Oracles: `lowprec.testing.reference_round` on exact `Fraction` results (exhaustive
for FP8, FP6 and FP4), MPFR through gmpy2 (square roots, FP64), and, for the large
FP16/BF16/FP32 samples, the vectorised exact oracle on Python integers
(tests/oracles/ieee_fraction.py), itself checked against `reference_round` first.
"""

from __future__ import annotations

import math
import zlib
from fractions import Fraction
from functools import cache

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import lowprec as lp
import lowprec.engine.parallel
from helpers import assert_same
from lowprec.testing import reference_round, values
from oracles.ieee_fraction import exact_operand, exact_result, fma_rounded, oracle, rounded_result
from oracles.sums import SUMS, rounded_add, sequential_sum
from peers import gmpy2, requires_gmpy2

DET_MODES = ("rne", "rna", "rz", "ru", "rd", "ro")
SMALL = ("FP8_E4M3", "FP8_E5M2", "FP6_E2M3", "FP6_E3M2", "FP4_E2M1")
OPS = ("add", "sub", "mul", "div")


# -- every pair of the small formats against the Fraction side ----------------------

def _all_values(fmt):
    """Every value of a format of 8 bits or fewer (one per bit pattern), from the definition."""
    fmt = lp.format(fmt)
    pos = lp.testing.representable_values(fmt)
    vals = pos + [-v for v in pos]
    vals.append(-0.0)
    if fmt.has_inf:
        vals += [math.inf, -math.inf]
    if fmt.has_nan:
        vals.append(math.nan)
    return np.array(vals)


@cache
def _exhaustive_case(name, op):
    """Operands of every pair and the exact results (cached: shared by the modes)."""
    v = _all_values(name)
    a, b = np.repeat(v, v.size), np.tile(v, v.size)
    pairs = list(zip(a.tolist(), b.tolist()))
    exact = {"rne": [exact_result(op, x, y, "rne") for x, y in pairs]}
    # Only the sign of an exact zero sum depends on the mode (-0 under rd).
    exact["rd"] = [exact_result(op, x, y, "rd") if e == 0 else e
                   for (x, y), e in zip(pairs, exact["rne"])]
    for mode in DET_MODES:
        exact.setdefault(mode, exact["rne"])
    return a, b, exact


_ROUNDED = {}


def _rounded(value, name, mode):
    # Keyed by type and repr too: -0.0 == 0.0, and Fraction(1) == 1.0.
    key = (type(value), value, repr(value), name, mode)
    if key not in _ROUNDED:
        _ROUNDED[key] = reference_round(value, name, mode)
    return _ROUNDED[key]


@pytest.mark.slow
@pytest.mark.parametrize("name", SMALL)
@pytest.mark.parametrize("op", OPS)
def test_exhaustive_small_formats(name, op):
    a, b, exact = _exhaustive_case(name, op)
    for mode in DET_MODES:
        want = np.array([_rounded(e, name, mode) for e in exact[mode]])
        got = getattr(lp, op)(a, b, name, mode)
        assert_same(got, want, a, b, [mode])


# -- the vectorised exact oracle, checked against reference_round -------------------

def test_exact_oracle_agrees_with_reference_round():
    rng = np.random.default_rng(7)
    for name in ("FP16", "BF16", "FP32", "FP8_E4M3", "FP6_E3M2"):
        a = _mixed_operands(rng, name, 300)
        b = _mixed_operands(rng, name, 300)
        for op in OPS:
            want_all = oracle(op, a, b, name)
            for mode in DET_MODES:
                want = np.array([reference_round(exact_result(op, x, y, mode), name, mode)
                                 for x, y in zip(a.tolist(), b.tolist())])
                assert_same(want_all[mode], want, a, b, [op, mode, name])


# -- operands for the big samples -------------------------------------------------

def _format_values(rng, name, n):
    """Random values of FP16, BF16, FP32 (and others) from random bit patterns."""
    with np.errstate(invalid="ignore"):        # NaN patterns widen with a warning
        return _format_values_quiet(rng, name, n)


def _format_values_quiet(rng, name, n):
    if name == "FP16":
        bits = rng.integers(0, 2**16, n, dtype=np.uint64).astype(np.uint16)
        return bits.view(np.float16).astype(np.float64)
    if name == "BF16":
        bits = rng.integers(0, 2**16, n, dtype=np.uint64).astype(np.uint32) << np.uint32(16)
        return bits.view(np.float32).astype(np.float64)
    if name == "FP32":
        bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
        return bits.view(np.float32).astype(np.float64)
    v = _all_values(name)
    return rng.choice(v, n)


def _scaled_values(rng, name, n):
    """Format values with exponents near the middle of the range (more interaction)."""
    fmt = lp.format(name)
    m = fmt.mantissa_bits
    mant = 1 + rng.integers(0, 2**m, n) / 2.0**m
    e = rng.integers(max(fmt.emin - 2, -1000), min(fmt.emax, 1000) + 1, n)
    e = np.clip(e, -8, 8) if rng.random() < 0.5 else e
    x = np.ldexp(mant * rng.choice([-1.0, 1.0], n), e)
    return lp.round(x, name, "rz")


def _arbitrary_floats(rng, n):
    """Any float64: random bit patterns (huge, tiny, subnormal) and scaled normals."""
    bits = rng.integers(0, 2**63, n, dtype=np.uint64)
    bits |= rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(63)
    x = bits.view(np.float64)
    y = rng.standard_normal(n) * np.ldexp(1.0, rng.integers(-30, 30, n))
    return np.where(rng.random(n) < 0.5, x, y)


def _mixed_operands(rng, name, n):
    parts = [_format_values(rng, name, n), _scaled_values(rng, name, n),
             _arbitrary_floats(rng, n)]
    which = rng.integers(0, 3, n)
    return np.choose(which, parts)


def _targeted_pairs(rng, name, op, n):
    """Cancellations, exact ties and ties nudged by a float64 ulp, near-overflow and
    subnormal results."""
    fmt = lp.format(name)
    a = _scaled_values(rng, name, n)
    ulp = np.ldexp(1.0, np.frexp(a)[1] - 1 - fmt.mantissa_bits)
    kind = rng.integers(0, 5, n)
    tiny = np.ldexp(np.abs(a), -60)
    if op in ("add", "sub"):
        sgn = 1.0 if op == "add" else -1.0
        half = ulp / 2 * rng.choice([-1.0, 1.0], n)
        nudge = rng.choice([-1.0, 0.0, 1.0], n) * tiny
        b = np.choose(kind, [
            sgn * (-a + ulp * rng.integers(-3, 4, n)),              # cancellation
            sgn * (half + nudge),                                    # ties, nudged ties
            sgn * (half * rng.integers(1, 8, n) + nudge),
            sgn * np.copysign(fmt.max, a) * rng.choice([0.5, 1.0, -1.0], n),  # overflow
            sgn * (-a + rng.choice([-1.0, 1.0], n) * fmt.smallest_subnormal
                   * rng.integers(0, 5, n)),
        ])
    elif op == "mul":
        b = np.choose(kind, [
            1 + rng.choice([-1.0, 1.0], n) * np.ldexp(1.0, -rng.integers(1, 60, n)),
            np.ldexp(1.0, rng.integers(-60, 60, n)) * (1 + np.ldexp(1.0, -fmt.mantissa_bits - 1)),
            fmt.max / np.abs(a) * rng.choice([0.999, 1.0, 1.001, 2.0], n),
            fmt.smallest_subnormal / np.abs(a) * rng.choice([0.5, 0.75, 1.5, 3.0], n),
            _scaled_values(rng, name, n),
        ])
    else:
        b = np.choose(kind, [
            a * (1 + rng.choice([-1.0, 1.0], n) * np.ldexp(1.0, -rng.integers(1, 60, n))),
            _scaled_values(rng, name, n),
            np.abs(a) / fmt.max * rng.choice([0.999, 1.0, 1.001, 0.5], n),
            np.abs(a) / fmt.smallest_subnormal * rng.choice([2.0, 1.0, 4 / 3, 3.0], n),
            rng.choice([3.0, 5.0, 7.0, 0.1, -3.0], n),
        ])
    return a, b


def _sample(name, op, n, seed):
    rng = np.random.default_rng(seed)
    n1 = n // 2
    a1, b1 = _mixed_operands(rng, name, n1), _mixed_operands(rng, name, n1)
    a2, b2 = _targeted_pairs(rng, name, op, n - n1)
    return np.concatenate([a1, a2]), np.concatenate([b1, b2])


N_BIG = 100_000


@pytest.mark.parametrize("name", ("FP16", "BF16", "FP32"))
@pytest.mark.parametrize("op", OPS)
def test_large_samples_against_exact(name, op):
    a, b = _sample(name, op, N_BIG, seed=zlib.crc32(f"{name} {op}".encode()))
    want = oracle(op, a, b, name)
    for mode in DET_MODES:
        got = getattr(lp, op)(a, b, name, mode)
        assert_same(got, want[mode], a, b, [mode])


@pytest.mark.parametrize("name", ("BF16", "FP8_E4M3"))
@pytest.mark.parametrize("op", OPS)
def test_threads_split_the_operands_without_changing_the_result(monkeypatch, name, op):
    # Small chunks and spans, so that a short input is cut across several threads.
    import lowprec.engine.parallel as kernel
    monkeypatch.setattr(kernel, "CHUNK", 256)
    monkeypatch.setattr(kernel, "PARALLEL_MIN", 512)
    a, b = _sample(name, op, 4000, seed=zlib.crc32(f"threads {name} {op}".encode()))
    want = oracle(op, a, b, name)
    before = lp.threads(3)
    try:
        for mode in DET_MODES:
            with lp.flags() as threaded:
                got = getattr(lp, op)(a, b, name, mode)
            assert_same(got, want[mode], a, b, [mode])
    finally:
        lp.threads(before)
    monkeypatch.setattr(kernel, "PARALLEL_MIN", a.size + 1)   # one thread
    with lp.flags() as single:
        getattr(lp, op)(a, b, name, DET_MODES[-1])
    assert threaded.as_dict() == single.as_dict() and threaded.inexact > 0


def _sqrt_operands(name, n, seed):
    rng = np.random.default_rng(seed)
    fmt = lp.format(name)
    parts = [_format_values(rng, name, n), _scaled_values(rng, name, n),
             _arbitrary_floats(rng, n)]
    a = np.choose(rng.integers(0, 3, n), parts)
    # Squares of midpoints (exact ties when representable in float64) and neighbours.
    m = np.abs(_scaled_values(rng, name, n // 4))
    mid = m + np.ldexp(1.0, np.frexp(m)[1] - 2 - fmt.mantissa_bits)
    sq = mid * mid
    sq = np.concatenate([sq, np.nextafter(sq, 0), np.nextafter(sq, np.inf), np.abs(a[: n // 4])])
    a[: sq.size] = sq[: min(sq.size, n)]
    return a


@pytest.mark.parametrize("name", ("FP16", "BF16", "FP32"))
def test_sqrt_large_samples_against_exact(name):
    a = _sqrt_operands(name, N_BIG, seed=len(name))
    want = oracle("sqrt", a, None, name)
    for mode in DET_MODES:
        assert_same(lp.sqrt(a, name, mode), want[mode], a, [mode])


_GMPY_MODES = {"rne": "RoundToNearest", "rz": "RoundToZero", "ru": "RoundUp",
               "rd": "RoundDown"}


def _mpfr_context(fmt, mode):
    fmt = lp.format(fmt)
    # MPFR's exponents are those of significands in [1/2, 1): emax + 1, and emin
    # chosen so that subnormalize gives the smallest subnormal 2**(emin - m).
    return gmpy2.context(precision=fmt.p, emax=fmt.emax + 1,
                         emin=fmt.emin - fmt.mantissa_bits + 1, subnormalize=True,
                         round=getattr(gmpy2, _GMPY_MODES[mode]))


def _mpfr_map(fn, fmt, mode, *columns):
    exact = gmpy2.context(precision=53, emin=-1073, emax=1024, subnormalize=True)
    with gmpy2.context(exact):
        cols = [[gmpy2.mpfr(float(x)) for x in c] for c in columns]
    ctx = _mpfr_context(fmt, mode)
    with gmpy2.context(ctx):
        return np.array([float(fn(*xs)) for xs in zip(*cols)])


@requires_gmpy2
@pytest.mark.oracle
@pytest.mark.parametrize("name", ("FP16", "BF16", "FP32"))
@pytest.mark.parametrize("mode", sorted(_GMPY_MODES))
def test_sqrt_against_mpfr(name, mode):
    a = np.abs(_sqrt_operands(name, 20_000, seed=3 + len(name)))
    a = a[np.isfinite(a)]
    want = _mpfr_map(gmpy2.sqrt, name, mode, a)
    assert_same(lp.sqrt(a, name, mode), want, a)


def _fp64_operands(op, n, seed):
    """Normal-range operands, cancellations, and pairs whose results land in
    float64's subnormal range (exact ties included) or beyond its max."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n) * np.ldexp(1.0, rng.integers(-200, 200, n))
    b = rng.standard_normal(n) * np.ldexp(1.0, rng.integers(-200, 200, n))
    k = n // 5
    b[:k] = -a[:k] * (1 + rng.standard_normal(k) * 1e-10)
    a[k:2 * k] = _arbitrary_floats(rng, k)
    b[k:2 * k] = _arbitrary_floats(rng, k)
    small = np.ldexp(rng.integers(1, 64, k).astype(float), -1074)
    if op in ("mul", "div"):
        a[2 * k:3 * k] = small
        b[2 * k:3 * k] = rng.choice([0.5, 0.25, 0.75, 1.5, 3.0, 2.0 / 3.0], k)
        b[3 * k:4 * k] = np.ldexp(rng.standard_normal(k), rng.integers(-560, -500, k))
        a[3 * k:4 * k] = np.ldexp(rng.standard_normal(k), rng.integers(-560, -460, k))
        if op == "div":
            b[3 * k:4 * k] = 1 / b[3 * k:4 * k]
    else:
        a[2 * k:3 * k] = small * 2.0**52
        b[2 * k:3 * k] = -np.nextafter(a[2 * k:3 * k], 0) * rng.choice([1.0, 0.5], k)
        a[3 * k:4 * k] = np.ldexp(rng.random(k) + 1, 1023)
        b[3 * k:4 * k] = np.ldexp(rng.random(k) + 1, rng.integers(960, 1024, k))
    keep = np.isfinite(a) & np.isfinite(b)
    return a[keep], b[keep]


def _mpfr_sqrt_rna_ro(a, name):
    """sqrt in rna and ro from MPFR's directed results: for x = sqrt(a) > 0 inexact,
    rz and ru are its neighbours; ro takes the odd one; rna takes ru exactly when
    x is their midpoint (x exact at one more bit of precision)."""
    fmt = lp.format(name)
    down = _mpfr_map(gmpy2.sqrt, name, "rz", a)
    up = _mpfr_map(gmpy2.sqrt, name, "ru", a)
    nearest = _mpfr_map(gmpy2.sqrt, name, "rne", a)
    wide = lp.Format(fmt.exponent_bits, fmt.mantissa_bits + 1, bias=fmt.bias)
    half_down = _mpfr_map(gmpy2.sqrt, wide, "rz", a)
    half_up = _mpfr_map(gmpy2.sqrt, wide, "ru", a)
    e = np.maximum(np.frexp(down)[1] - 1, fmt.emin)
    k = np.ldexp(down, fmt.mantissa_bits - e)             # integer significand of rz
    ro = np.where((down == up) | (k % 2 == 1), down, up)
    tie = (down != up) & (half_down == half_up) & (half_down == (down + up) / 2)
    rna = np.where(tie, up, nearest)
    return rna, ro


@requires_gmpy2
@pytest.mark.oracle
@pytest.mark.parametrize("name", ("FP16", "BF16", "FP32"))
def test_sqrt_rna_ro_against_mpfr(name):
    fmt = lp.format(name)
    a = np.abs(_sqrt_operands(name, 20_000, seed=9 + len(name)))
    with np.errstate(all="ignore"):
        a = a[np.isfinite(a) & (a > 0) & (np.sqrt(a) < fmt.max / 2)]
    rna, ro = _mpfr_sqrt_rna_ro(a, name)
    assert_same(lp.sqrt(a, name, "rna"), rna, a)
    assert_same(lp.sqrt(a, name, "ro"), ro, a)


@requires_gmpy2
@pytest.mark.oracle
@pytest.mark.parametrize("mode", sorted(_GMPY_MODES))
@pytest.mark.parametrize("op", ("add", "sub", "mul", "div", "sqrt"))
def test_fp64_against_mpfr(op, mode):
    a, b = _fp64_operands(op, 5000, seed=11)
    if op == "sqrt":
        a = np.abs(a)
        want = _mpfr_map(gmpy2.sqrt, "FP64", mode, a)
        assert_same(lp.sqrt(a, "FP64", mode), want, a)
        return
    fn = {"add": gmpy2.add, "sub": gmpy2.sub, "mul": gmpy2.mul, "div": gmpy2.div}[op]
    want = _mpfr_map(fn, "FP64", mode, a, b)
    assert_same(getattr(lp, op)(a, b, "FP64", mode), want, a, b)


@pytest.mark.parametrize("mode", ("rna", "ro"))
@pytest.mark.parametrize("op", OPS)
def test_fp64_other_modes_against_fraction(op, mode):
    a, b = _fp64_operands(op, 2000, seed=12)
    want = [reference_round(exact_result(op, x, y, mode), "FP64", mode)
            for x, y in zip(a.tolist(), b.tolist())]
    assert_same(getattr(lp, op)(a, b, "FP64", mode), want, a, b)


def _fp64_ties(rng, n, s):
    """Pairs (a, b) whose exact products are float64 midpoints (54 bits, the last
    one set) in [1.5, 3) * 2**s, and fma triples (a, 2**s, c) with exact products
    whose sums are midpoints in [1, 2) * 2**s (None where c cannot be a float64)."""
    # m odd, 3m in [2**53, 2**54): m * 2**-52 * 1.5 * 2**s == 3m * 2**(s - 53).
    m = rng.integers(2**53 // 3 + 1, 2**53, 4 * n) | 1
    m = m[3 * m < 2**54][:n]
    a = np.ldexp(m.astype(float), -52) * rng.choice([-1.0, 1.0], m.size)
    b = np.full(m.size, math.ldexp(1.5, s))
    if s - 53 < -1074:
        return a, b, None
    # With 53-bit m2, m2 * 2**(s - 52) ± 2**(s - 53) == (2 m2 ± 1) * 2**(s - 53).
    m2 = rng.integers(2**52, 2**53, n).astype(float)
    fa = np.ldexp(m2, -52) * rng.choice([-1.0, 1.0], n)
    c = rng.choice([-1.0, 1.0], n) * math.ldexp(1.0, s - 53)
    return a, b, (fa, np.full(n, math.ldexp(1.0, s)), c)


@pytest.mark.parametrize("mode", ("rna", "rne"))
@pytest.mark.parametrize("s", (-1022, -1021, -1000, -962, -961, 0, 1021, 1022))
def test_fp64_ties_outside_the_fast_range(mode, s):
    # Products and fma results outside about [2**-960, 2**1021] take the rescaled
    # path, where a tie must still go away from zero under rna.
    rng = np.random.default_rng(20 + s % 97)
    a, b, triples = _fp64_ties(rng, 400, s)
    want = [reference_round(Fraction(x) * Fraction(y), "FP64", mode)
            for x, y in zip(a.tolist(), b.tolist())]
    assert_same(lp.mul(a, b, "FP64", mode), want, a, b)
    if triples is not None:
        want = [reference_round(Fraction(x) * Fraction(y) + Fraction(z), "FP64", mode)
                for x, y, z in zip(*(v.tolist() for v in triples))]
        assert_same(lp.fma(*triples, "FP64", mode), want, *triples)


def _exact_values(op, ops, mode):
    """The exact results (Fractions) of ``op`` on the operand arrays ``ops``."""
    columns = zip(*(v.tolist() for v in ops))
    if op == "fma":
        return [Fraction(x) * Fraction(y) + Fraction(z) for x, y, z in columns]
    return [exact_result(op, x, y, mode) for x, y in columns]


def _near_smallest_normal(rng, op, n):
    """Operands whose exact products, quotients or fma results lie near 2**-1023
    (the tie between 0 and 2**-1022 without subnormals) and near 2**-1022."""
    a = np.ldexp(rng.random(n) + 1, rng.integers(-540, -480, n)) * rng.choice([-1, 1], n)
    t = np.ldexp(rng.random(n) + 0.5, rng.integers(-1026, -1021, n))
    k = n // 3
    t[:k] = np.ldexp(1.0 + rng.integers(-3, 4, k) * 2.0**-52, -1023)
    t[k:2 * k] = np.ldexp(1.0 - rng.integers(0, 4, k) * 2.0**-53, -1022)
    if op == "fma":
        # 26-bit factors: the product is exact in float64's arithmetic, not its range.
        a = np.ldexp(rng.integers(2**25, 2**26, n).astype(float), -540)
        m, e = np.frexp(t / a)
        b = np.ldexp(np.trunc(np.ldexp(m, 26)), e - 26) * rng.choice([-1, 1], n)
        c = np.ldexp(rng.integers(-8, 9, n).astype(float), -1074)
        return a, b, c
    b = t / a if op == "mul" else a / t
    return a, b


@pytest.mark.parametrize("mode", DET_MODES)
@pytest.mark.parametrize("op", ("mul", "div", "fma"))
def test_fp64_without_subnormals_rounds_once(op, mode):
    # One rounding of the exact value into FP64 without subnormals: rounding to a
    # float64 subnormal first, then flushing, would round twice.
    ops = _near_smallest_normal(np.random.default_rng(21), op, 1500)
    exact = _exact_values(op, ops, mode)
    want = np.array([reference_round(e, "FP64", mode, subnormals=False) for e in exact])
    with lp.flags() as f:
        got = getattr(lp, op)(*ops, "FP64", mode, subnormals=False)
    assert_same(got, want, *ops)
    assert f.inexact == sum(Fraction(w) != e for w, e in zip(want.tolist(), exact))
    sub = [abs(reference_round(e, "FP64", mode)) for e in exact]
    assert f.flushed == sum(0 < v < 2.0**-1022 for v in sub)


def _sqrt_bounds(a):
    """(down, up, P): the float64 neighbours of sqrt(a) and (sqrt(a) - down) / (up -
    down), to about 2**-150, from an integer square root."""
    q = Fraction(a)
    k = 300
    root = Fraction(math.isqrt(q.numerator * 4**k * q.denominator), 2**k * q.denominator)
    down = Fraction(reference_round(root, "FP64", "rd"))
    up = Fraction(reference_round(root, "FP64", "ru"))
    return down, up, (root - down) / (up - down)


@pytest.mark.parametrize("op, operands, kw", [
    ("div", (1.0, 3.0), {}),                         # the fast path
    ("div", (2.0**1020, 0.75), {}),                  # rescaled: beyond 2**1021
    ("div", (3.0 * 2.0**-1000, 7.0 * 2.0**50), {}),  # rescaled: a subnormal result
    ("sqrt", (2.0,), {}),
    ("sqrt", (3.0 * 2.0**-1001,), {}),               # rescaled: a tiny operand
    ("mul", (0.3, 2.0**-1022), {"subnormals": False}),
    ("add", (np.finfo(np.float64).max, 1.5 * 2.0**970), {}),   # beyond max: inf or max
    ("add", (np.finfo(np.float64).max, 2.0**969), {}),          # max + ulp/4: inf or max
    ("mul", (float.fromhex("0x1.cfbecp+1023"), float.fromhex("0x1.1aa355099d137p+0")), {}),
    ("mul", (float.fromhex("0x1.de86p+1023"), float.fromhex("0x1.11e8c52c572f5p+0")), {}),
])
def test_fp64_stochastic_rounding_probability(op, operands, kw):
    n = 100_000
    got = getattr(lp, op)(np.full(n, operands[0]), *operands[1:], "FP64", "sr",
                          rng=4, **kw)
    if op == "sqrt":
        down, up, p = _sqrt_bounds(operands[0])
    else:
        exact = exact_result(op, *operands, "rne")
        down = Fraction(reference_round(exact, "FP64", "rd", **kw))
        up = reference_round(exact, "FP64", "ru", **kw)
        # Beyond max, rounding up means inf: the neighbour 2**1024 past max.
        up = Fraction(2) ** 1024 if math.isinf(up) else Fraction(up)
        p = (exact - down) / (up - down)
    up_value = math.inf if up == 2**1024 else float(up)
    assert set(np.unique(got).tolist()) <= {float(down), up_value}
    p = float(p)
    assert 0.05 < p < 0.95
    rate = np.count_nonzero(got == up_value) / n
    assert abs(rate - p) <= 4 * math.sqrt(p * (1 - p) / n), (rate, p)


def _mpfr_overflows(a, b, mode):
    """Whether a + b rounded with an unbounded exponent exceeds FP64's max (MPFR)."""
    # rna goes beyond max exactly when rne does (max + ulp/2, the one tie there,
    # rounds up to even 2**1024), and ro exactly when rz does (max is odd).
    rnd = _GMPY_MODES[{"rna": "rne", "ro": "rz"}.get(mode, mode)]
    with gmpy2.context(precision=53, round=getattr(gmpy2, rnd)):
        return [abs(gmpy2.add(gmpy2.mpfr(x), gmpy2.mpfr(y))) > np.finfo(np.float64).max
                for x, y in zip(a.tolist(), b.tolist())]


@requires_gmpy2
@pytest.mark.oracle
@pytest.mark.parametrize("mode", DET_MODES)
def test_fp64_sum_overflow_counts_overflow_and_inexact(mode):
    big = np.finfo(np.float64).max
    ulp = 2.0**971
    # Sums at max + ulp/2, between it and 2**1024, at 2**1024, beyond, both signs.
    a = np.array([1.7e308, big, big, big, big, big, 1.5 * 2.0**1023])
    b = np.array([1.7e308, ulp / 2, 0.75 * ulp, ulp, 1.5 * ulp, big, 2.0**1022])
    a, b = np.concatenate([a, -a]), np.concatenate([b, -b])
    want = [reference_round(Fraction(x) + Fraction(y), "FP64", mode)
            for x, y in zip(a.tolist(), b.tolist())]
    for op, bb in ((lp.add, b), (lp.sub, -b)):
        with lp.flags() as f:
            got = op(a, bb, "FP64", mode)
        assert_same(got, want, a, b)
        assert f.overflow == sum(_mpfr_overflows(a, b, mode))
        assert f.inexact == a.size


def _unbounded53(exact, mode, scale):
    """``exact`` rounded to 53 bits by ``mode`` with an unbounded exponent range: FP64's
    rounding of ``exact * 2**scale`` (chosen to land in its normal range), scaled back."""
    return Fraction(reference_round(exact * Fraction(2) ** scale, "FP64", mode)) \
        / Fraction(2) ** scale


# Reviewed FP64 fma cases (the fast path with a subnormal c, and the rescaled path
# with a subnormal result): the faithful sum is not RN, or is rounded twice.
_FMA_CASES = [("-0x1.c371854p-405", "-0x1.6a240ccp-492", "-0x0.058p-1022"),
              ("0x1.bef417cp-447", "-0x1.82498ecp-438", "0x0.001cp-1022"),
              ("-0x1.bd419479c5378p-406", "0x1.ae748affce35fp-630", "-0x0.f6e0ee36312cep-1022"),
              ("0x1.0000004p-600", "0x1.ffffff8p-475", "0x0.0000000000003p-1022"),
              ("0x1.00000004p-600", "0x1.fffffff8p-475", "0x0.0000000000003p-1022")]


def _fma_near_midpoints(rng, n):
    """fma triples whose exact results lie on or next to midpoints: products that are
    float64 midpoints (54 bits) plus a c far below their last bit (the fast path), and
    products next to midpoints of the subnormal grid plus whole quanta (rescaled)."""
    fixed = np.array([[float.fromhex(x) for x in t] for t in _FMA_CASES]).T
    # m odd, 3m in [2**53, 2**54): (m * 2**-52) * (1.5 * 2**s) == 3m * 2**(s - 53).
    m = rng.integers(2**53 // 3 + 1, 2**53, 4 * n) | 1
    m = m[3 * m < 2**54][:n]
    # s outside [-960, 1020] takes the rescaled path, with the same need.
    s = rng.choice(np.r_[-1021:-958, -900:1000:7, 1019:1023], m.size)
    a1 = np.ldexp(m.astype(float), -52) * rng.choice([-1.0, 1.0], m.size)
    b1 = np.ldexp(1.5, s)
    c1 = np.ldexp(rng.random(m.size) + 1, np.maximum(s - 53 - rng.integers(1, 200, m.size),
                                                     -1074)) * rng.choice([-1.0, 1.0], m.size)
    # T = (2k + 1) * 2**-1075, k of up to 51 bits: a * b within a rounding of T (b = fl(T / a)),
    # or T itself (a a power of two).
    k = np.floor(np.ldexp(rng.random(n), rng.integers(0, 52, n)))
    t = np.ldexp(2 * k + 1, -1075 + 600)                  # T * 2**600, exact
    a2 = np.ldexp(rng.random(n) + 1, -600 + rng.integers(-20, 20, n))
    a2[: n // 4] = np.ldexp(1.0, -600 + rng.integers(-20, 20, n // 4))
    b2 = t / np.ldexp(a2, 600)                           # fl(T / a), exact scalings
    b2 *= rng.choice([-1.0, 1.0], n)
    c2 = np.ldexp(rng.integers(-40, 40, n).astype(float), -1074)
    return (np.concatenate([fixed[0], a1, a2]), np.concatenate([fixed[1], b1, b2]),
            np.concatenate([fixed[2], c1, c2]))


@pytest.mark.parametrize("subnormals", (True, False))
@pytest.mark.parametrize("mode", DET_MODES)
def test_fp64_fma_near_midpoints_rounds_once(mode, subnormals):
    # The three-term sum is only faithful: FP64's nearest modes need RN itself, and
    # rna a remainder that is half the gap exactly when v is a midpoint; a result
    # below 2**-1022 must not be rounded to 53 bits first and then to the subnormal grid.
    a, b, c = _fma_near_midpoints(np.random.default_rng(31), 300)
    exact = [Fraction(x) * Fraction(y) + Fraction(z)
             for x, y, z in zip(a.tolist(), b.tolist(), c.tolist())]
    want = [reference_round(e, "FP64", mode, subnormals=subnormals) if e != 0 else
            (-0.0 if mode == "rd" else 0.0) for e in exact]
    assert_same(lp.fma(a, b, c, "FP64", mode, subnormals=subnormals), want, a, b, c)


def _near_max(rng, op, n):
    """Operands whose exact sums, products or fma results lie within a few ulps of
    FP64's max, on both sides, most of them in (max, max + ulp/2) and around 2**1024."""
    big, ulp = np.finfo(np.float64).max, 2.0**971
    sign = rng.choice([-1.0, 1.0], n)
    if op in ("add", "sub"):
        a = big - rng.integers(0, 4, n) * ulp
        b = (big - a) + np.ldexp(rng.random(n), rng.integers(900, 971, n))
        picks = [2.0**-1074, 1.0, 2.0**969, 2.0**970, 3 * 2.0**969, ulp, 1.5 * ulp, 2.0**1000]
        b[: n // 8] = (big - a[: n // 8]) + rng.choice(picks, n // 8)
        b[n // 8: n // 4] = -b[n // 8: n // 4]                   # just below max
        a, b = a * sign, b * sign
        return (a, -b) if op == "sub" else (a, b)
    a = np.ldexp(rng.random(n) + 1, 1023 - rng.integers(0, 3, n))
    b = big / a
    b = b + rng.integers(-3, 4, n) * np.spacing(b)
    a = a * sign
    if op == "mul":
        return a, b
    c = np.ldexp(rng.random(n), rng.integers(960, 972, n)) * rng.choice([-1.0, 1.0], n)
    return a, b, c


@pytest.mark.parametrize("mode", DET_MODES)
@pytest.mark.parametrize("op", ("add", "sub", "mul", "fma"))
def test_fp64_overflow_flags_near_max(op, mode):
    # Overflow counts where the mode's rounding with an unbounded exponent exceeds max
    # (as the rounding kernel counts other formats'), inf or not; with saturate every
    # overflow also counts as saturated and gives ±max.
    ops = _near_max(np.random.default_rng(32), op, 400)
    exact = _exact_values(op, ops, mode)
    big = Fraction(np.finfo(np.float64).max)
    overflow = sum(abs(_unbounded53(e, mode, -200)) > big for e in exact)
    assert 0 < overflow < len(exact)
    for saturate in (False, True):
        want = [reference_round(e, "FP64", mode, saturate=saturate) for e in exact]
        with lp.flags() as f:
            got = getattr(lp, op)(*ops, "FP64", mode, saturate=saturate)
        assert_same(got, want, *ops)
        assert f.overflow == overflow
        assert f.inexact == sum(not math.isfinite(w) or Fraction(w) != e
                                for w, e in zip(want, exact))
        assert f.saturated == (overflow if saturate else 0)


def test_fp64_saturated_counts_as_other_formats_do():
    big = np.finfo(np.float64).max
    with lp.flags() as f64:
        r = lp.add([big, -big, 1.0], [big, -big, 1.0], "fp64", saturate=True)
    with lp.flags() as f16:
        lp.add([6e4, -6e4, 1.0], [6e4, -6e4, 1.0], "fp16", saturate=True)
    assert_same(r, [big, -big, 2.0])
    assert (f64.overflow, f64.saturated) == (f16.overflow, f16.saturated) == (2, 2)
    # Reductions saturate each addition too.
    with lp.flags() as f:
        s = lp.sum([big, big, -big], "fp64", saturate=True)
    assert s == 0.0 and f.saturated == 1
    # x / 0 is no overflow: ±inf, as in FP16.
    with lp.flags() as f:
        q = lp.div([1.0, -1.0], 0.0, "fp64", saturate=True)
    assert_same(q, lp.div([1.0, -1.0], 0.0, "fp16", saturate=True))
    assert_same(q, [np.inf, -np.inf])
    assert (f.saturated, f.divide_by_zero) == (0, 2)


def _near_smallest_normal_below(rng, op, n):
    """Operands whose exact products, quotients or fma results lie within a few
    2**-1075 of ±2**-1022, most of them just below it (tiny, rounding up to it)."""
    sign = rng.choice([-1.0, 1.0], n)
    if op == "fma":
        a = np.ldexp(rng.random(n) + 1, -500)
        b = np.ldexp(rng.random(n) + 1, -576 + rng.integers(-1, 2, n))   # a*b < 2**-1073
        c = np.ldexp(1.0, -1022) - rng.integers(-1, 3, n) * 2.0**-1074
        return a * sign, b, np.where(rng.random(n) < 0.8, c, -c) * sign
    a = np.ldexp(rng.random(n) + 1, -500)
    if op == "mul":
        b = np.ldexp(1.0, -1022) / a               # fl: a*b within 2**-1075 of 2**-1022
        return a * sign, b + rng.integers(-3, 4, n) * np.spacing(b)
    b = np.ldexp(a, 1022)
    return a * sign, b + rng.integers(-3, 4, n) * np.spacing(b)


@pytest.mark.parametrize("subnormals", (True, False))
@pytest.mark.parametrize("mode", DET_MODES)
@pytest.mark.parametrize("op", ("mul", "div", "fma"))
def test_fp64_underflow_is_tininess_after_rounding(op, mode, subnormals):
    # Underflow: inexact, and tiny after rounding to 53 bits with an unbounded exponent
    # (as on x86, and as the rounding kernel detects it for other formats): v just
    # below 2**-1022 that rounds to 2**-1022 in FP64 still underflows.
    ops = _near_smallest_normal_below(np.random.default_rng(33), op, 400)
    exact = _exact_values(op, ops, mode)
    want = [reference_round(e, "FP64", mode, subnormals=subnormals) for e in exact]
    with lp.flags() as f:
        got = getattr(lp, op)(*ops, "FP64", mode, subnormals=subnormals)
    assert_same(got, want, *ops)
    tiny = Fraction(2) ** -1022
    inexact = [Fraction(w) != e for w, e in zip(want, exact)]
    underflow = [i and abs(_unbounded53(e, mode, 200)) < tiny for i, e in zip(inexact, exact)]
    assert f.inexact == sum(inexact)
    assert f.underflow == sum(underflow)
    # Not vacuous: some results are tiny after rounding yet come out as ±2**-1022 (rz and
    # ro never round a tiny v up to it, and no quotient lies within 2**-1075 below it).
    assert mode in ("rz", "ro") or (op == "div" and subnormals) or sum(
        u and abs(w) == 2.0**-1022 for u, w in zip(underflow, want)) > 0


# -- Hypothesis: the format's interesting values, any float64 --------------------

@settings(max_examples=300)
@given(st.sampled_from(("FP16", "BF16", "FP32", "TF32", "FP8_E5M2", "FP8_E4M3FNUZ",
                        "FP8_E5M2FNUZ", "FP6_E2M3", "FP64")),
       st.sampled_from(OPS), st.sampled_from(DET_MODES), st.data())
def test_hypothesis_values(name, op, mode, data):
    a = data.draw(values(name))
    b = data.draw(values(name))
    want = reference_round(exact_result(op, a, b, mode), name, mode)
    got = getattr(lp, op)(a, b, name, mode)
    assert_same(got, want, (a, b, got, want))


@settings(max_examples=300)
@given(st.sampled_from(("FP16", "BF16", "TF32")), st.sampled_from(DET_MODES), st.data())
def test_hypothesis_fma_short_operands(name, mode, data):
    a = float(lp.round(data.draw(values(name, allow_nan=False, allow_infinity=False)), name))
    b = float(lp.round(data.draw(values(name, allow_nan=False, allow_infinity=False)), name))
    c = data.draw(st.floats(allow_nan=False, allow_infinity=False))
    assume(math.isfinite(a) and math.isfinite(b))
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    assume(exact != 0)
    want = reference_round(exact, name, mode)
    assert_same(lp.fma(a, b, c, name, mode), want, (a, b, c))


@pytest.mark.parametrize("name", ("FP16", "BF16", "FP8_E4M3"))
@pytest.mark.parametrize("mode", DET_MODES)
def test_fma_against_fraction(name, mode):
    rng = np.random.default_rng(5)
    n = 3000
    a = _format_values(rng, name, n)
    b = _format_values(rng, name, n)
    with np.errstate(invalid="ignore"):      # inf * 0 among the random patterns
        c = np.where(rng.random(n) < 0.5, -lp.round(a * b, name, "rz"),
                     _arbitrary_floats(rng, n))
        c[:200] = -a[:200] * b[:200]          # exact zeros
    keep = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    a, b, c = a[keep], b[keep], c[keep]
    assert_same(lp.fma(a, b, c, name, mode), fma_rounded(a, b, c, name, mode), a, b, c)


@pytest.mark.parametrize("name", ("BF16", "FP32"))
@pytest.mark.parametrize("mode", DET_MODES)
def test_fma_arbitrary_float64_operands(name, mode):
    rng = np.random.default_rng(6)
    n = 3000
    a, b = _arbitrary_floats(rng, n), _arbitrary_floats(rng, n)
    with np.errstate(all="ignore"):
        near = -(a * b) * (1 + np.ldexp(rng.standard_normal(n), rng.integers(-60, -20, n)))
    c = np.where(rng.random(n) < 0.5, near, _arbitrary_floats(rng, n))
    c[:300] = np.ldexp(rng.standard_normal(300), rng.integers(-1074, 1000, 300))
    keep = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    a, b, c = a[keep], b[keep], c[keep]
    assert_same(lp.fma(a, b, c, name, mode), fma_rounded(a, b, c, name, mode), a, b, c)


# -- IEEE special cases and flags -------------------------------------------------

@pytest.mark.parametrize("name", ("FP16", "BF16", "FP32", "FP64", "FP8_E5M2"))
def test_signed_zeros_of_sums(name):
    x = np.array([1.0, -3.0, 0.0, 2.0**-10])
    for mode in DET_MODES:
        z = lp.add(x, -x, name, mode)
        assert (z == 0).all() and (np.signbit(z) == (mode == "rd")).all()
        z = lp.sub(x, x, name, mode)
        assert (np.signbit(z) == (mode == "rd")).all()
        assert np.signbit(lp.add(-0.0, -0.0, name, mode))
        assert not np.signbit(lp.add(0.0, 0.0, name, mode))


@pytest.mark.parametrize("name", ("FP16", "BF16", "FP32", "FP64"))
def test_invalid_and_divide_by_zero(name):
    with lp.flags() as f:
        r = [lp.sub(np.inf, np.inf, name), lp.add(-np.inf, np.inf, name),
             lp.mul(0.0, np.inf, name), lp.div(0.0, 0.0, name), lp.sqrt(-1.0, name),
             lp.div(np.inf, -np.inf, name), lp.fma(0.0, np.inf, 1.0, name),
             lp.fma(np.inf, 1.0, -np.inf, name)]
    assert np.isnan(r).all()
    assert f.invalid == len(r) and f.divide_by_zero == 0
    with lp.flags() as f:
        q = lp.div([1.0, -2.0, 1.0, -0.0, np.inf], [0.0, 0.0, -0.0, 0.0, 0.0], name)
    np.testing.assert_array_equal(q, [np.inf, -np.inf, -np.inf, np.nan, np.inf])
    assert f.divide_by_zero == 3 and f.invalid == 1
    assert_same(lp.sqrt(-0.0, name), -0.0)
    assert_same(lp.sqrt(np.inf, name), np.inf)
    with lp.flags() as f:
        lp.add(np.nan, 1.0, name)
    assert f.invalid == 0


def test_divide_by_zero_in_formats_without_inf():
    with lp.flags() as f:
        assert np.isnan(lp.div(1.0, 0.0, "e4m3"))
        assert lp.div(-1.0, 0.0, "fp4") == -6.0
    assert f.divide_by_zero == 2


def test_flags_inexact_underflow_overflow():
    with lp.flags() as f:
        lp.add([1.0, 1.0, 60000.0], [2.0**-12, 1.0, 60000.0], "fp16")
        lp.mul(2.0**-20, 2.0**-10, "fp16")
    assert f.inexact == 3 and f.overflow == 1 and f.underflow == 1


# -- stochastic rounding ----------------------------------------------------------

@pytest.mark.parametrize("a, b, name", [(1.0, 3 * 2.0**-9 + 2.0**-60, "BF16"),
                                        (1.0, -(2.0**-13) - 2.0**-70, "FP16"),
                                        (3.0, 1.0 / 3.0, "FP8_E5M2")])
def test_stochastic_sum_is_unbiased(a, b, name):
    n = 100_000
    got = lp.add(np.full(n, a), b, name, mode="sr", rng=1)
    exact = Fraction(a) + Fraction(b)
    down = Fraction(reference_round(exact, name, "rd"))
    up = Fraction(reference_round(exact, name, "ru"))
    assert set(np.unique(got)) <= {float(down), float(up)}
    p = float((exact - down) / (up - down))
    se = float(up - down) * math.sqrt(p * (1 - p) / n)
    assert abs(float(Fraction(float(got.mean())) - exact)) <= 4 * se
    assert np.array_equal(got, lp.add(np.full(n, a), b, name, mode="sr", rng=1))


def test_stochastic_div_and_sqrt_are_unbiased():
    n = 100_000
    got = lp.div(np.ones(n), 3.0, "BF16", mode="sr", rng=2)
    exact = Fraction(1, 3)
    down, up = (Fraction(reference_round(exact, "BF16", m)) for m in ("rd", "ru"))
    p = float((exact - down) / (up - down))
    se = float(up - down) * math.sqrt(p * (1 - p) / n)
    assert abs(got.mean() - 1 / 3) <= 4 * se
    got = lp.sqrt(np.full(n, 2.0), "FP16", mode="sr", rng=3)
    lo_, hi_ = lp.sqrt(2.0, "FP16", "rd"), lp.sqrt(2.0, "FP16", "ru")
    p = (math.sqrt(2) - lo_) / (hi_ - lo_)
    se = (hi_ - lo_) * math.sqrt(p * (1 - p) / n)
    assert abs(got.mean() - math.sqrt(2)) <= 4 * se


# -- broadcasting, scalars, arguments ---------------------------------------------

def test_broadcasting_and_scalars():
    a = np.arange(6.0).reshape(2, 3) / 7
    b = np.array([1.0, 2.0, 3.0]) / 3
    got = lp.mul(a, b, "bf16")
    assert got.shape == (2, 3)
    want = oracle("mul", np.broadcast_to(a, (2, 3)).ravel(), np.broadcast_to(b, (2, 3)).ravel(),
                  "BF16", ("rne",))["rne"].reshape(2, 3)
    assert_same(got, want)
    s = lp.add(1.0, 2.0, "fp16")
    assert isinstance(s, np.float64) and s == 3.0
    assert lp.fma(2, 3, [1, 2], "fp16").tolist() == [7.0, 8.0]
    x = np.array([0.1, 0.2])
    before = x.copy()
    lp.div(x, 3.0, "fp16", "ru")
    assert np.array_equal(x, before)


def test_bad_arguments():
    with pytest.raises(ValueError, match="rounding mode"):
        lp.add(1.0, 2.0, "fp16", mode="nearest")
    with pytest.raises(ValueError):
        lp.add(1.0, 2.0, "fp12")
    with pytest.raises(TypeError):
        lp.add(1j, 2.0, "fp16")
    with pytest.raises(ValueError, match="order"):
        lp.sum([1.0], "fp16", order="random")
    with pytest.raises(ValueError, match="precision"):
        lp.add(1.0, 2.0, lp.Format(11, 51))


@pytest.mark.parametrize("mode", DET_MODES)
def test_no_subnormals_and_saturate_against_fraction(mode):
    rng = np.random.default_rng(13)
    n = 2000
    a = np.ldexp(rng.random(n) + 0.5, rng.integers(-14, -6, n)) * rng.choice([-1, 1], n)
    b = np.ldexp(rng.random(n) + 0.5, rng.integers(-12, 0, n))
    b[: n // 4] = rng.random(n // 4) * 4e5
    for op in OPS:
        for kw in ({"subnormals": False}, {"saturate": True}):
            want = [reference_round(exact_result(op, x, y, mode), "FP16", mode, **kw)
                    for x, y in zip(a.tolist(), b.tolist())]
            assert_same(getattr(lp, op)(a, b, "FP16", mode, **kw), want, a, b, [op, kw])


def test_saturate_and_subnormals_options():
    assert lp.add(60000.0, 60000.0, "fp16", saturate=True) == 65504.0
    assert lp.mul(2.0**-20, 2.0**-5, "fp16", subnormals=False) == 0.0
    assert lp.mul(2.0**-20, 2.0**-5, "fp16", "ru", subnormals=False) == 2.0**-14


# -- edge cases of fma and the specials ------------------------------------------------

@pytest.mark.parametrize("a, b, c", [(1.0, 2.0**-1000, -2.0**-1000),
                                     (2.0**1000, 2.0**23, -2.0**1023),
                                     (-1.0, -5e-324, -5e-324), (1.0, 2.0**-10, -2.0**-10)])
@pytest.mark.parametrize("fmt", ["bf16", "fp16", "fp32", "fp64"])
def test_fma_exact_cancellation_is_minus_zero_only_in_rd(a, b, c, fmt):
    # IEEE 754: an exact zero sum of operands of opposite signs is +0, -0 under rd.
    assert np.signbit(lp.fma(a, b, c, fmt, "rd"))
    for mode in ("rne", "rna", "rz", "ru", "ro"):
        r = lp.fma(a, b, c, fmt, mode)
        assert r == 0 and not np.signbit(r)


def test_dot_over_an_empty_axis_is_zero():
    assert lp.dot([], [], "fp16") == 0.0
    for fused in (False, True):
        r = lp.dot(np.zeros((3, 0)), np.zeros((3, 0)), "fp16", fused=fused)
        assert r.shape == (3,) and not r.any()


def test_fp64_results_count_inexact_in_every_mode():
    for mode in ("rne", "ru", "rz"):
        with lp.flags() as f:
            lp.add(1.0, 2.0**-60, "fp64", mode)
            lp.sqrt(2.0, "fp64", mode)
        assert f.inexact == 2, mode


def test_fp64_saturate_clamps_finite_overflow_only():
    big = np.finfo(np.float64).max
    for op in (lp.add, lp.mul):
        for mode in ("rne", "ru", "rd"):
            assert op(big, big, "fp64", mode, saturate=True) == big
    assert lp.div(-big, 0.5, "fp64", saturate=True) == -big
    assert lp.add(np.inf, 1.0, "fp64", saturate=True) == np.inf   # inf in, inf out (FP64 has inf)


# -- option types ----------------------------------------------------------------------

_CALLS = {
    "add": lambda **kw: lp.add(1.0, 2.0**-9, "bf16", **kw),
    "sub": lambda **kw: lp.sub(1.0, 2.0**-9, "bf16", **kw),
    "mul": lambda **kw: lp.mul(1.0 + 2.0**-7, 3.0, "bf16", **kw),
    "div": lambda **kw: lp.div(1.0, 3.0, "bf16", **kw),
    "sqrt": lambda **kw: lp.sqrt(2.0, "bf16", **kw),
    "fma": lambda **kw: lp.fma(1.0, 3.0, 2.0**-9, "bf16", **kw),
    "sum": lambda **kw: lp.sum([1.0, 2.0**-9], "bf16", **kw),
    "dot": lambda **kw: lp.dot([1.0, 1.0], [1.0, 2.0**-9], "bf16", **kw),
}


@pytest.mark.parametrize("op", sorted(_CALLS))
@pytest.mark.parametrize("name, value", [("subnormals", "no"), ("subnormals", 0),
                                         ("saturate", "yes"), ("saturate", 1),
                                         ("rng", "abc"), ("rng", True), ("rng", 1.5),
                                         ("mode", 0), ("mode", None), ("mode", b"rne")])
def test_wrong_typed_options_raise_type_error_naming_them(op, name, value):
    # Before: subnormals="no" and saturate=1 were truthy, rng="abc"/True ignored outside
    # "sr", mode=0 a ValueError; each silently changed or hid what the caller asked for.
    with pytest.raises(TypeError, match=name):
        _CALLS[op](**{name: value})


@pytest.mark.parametrize("op", ("sum", "dot"))
def test_wrong_typed_reduction_options(op):
    with pytest.raises(TypeError, match="order"):
        _CALLS[op](order=1)
    with pytest.raises(ValueError, match="order"):
        _CALLS[op](order="random")
    with pytest.raises(ValueError, match="mode"):
        _CALLS[op](mode="")


def test_dot_fused_must_be_a_bool():
    for value in ("yes", 1, None):
        with pytest.raises(TypeError, match="fused"):
            _CALLS["dot"](fused=value)


def test_well_typed_options_still_accepted():
    # NumPy bools and ints are the types the checks allow; results from the reference.
    want = reference_round(Fraction(1) + Fraction(2) ** -9, "BF16", "ru")
    assert lp.add(1.0, 2.0**-9, "bf16", "ru", subnormals=np.True_, saturate=np.False_) == want
    assert lp.add(1.0, 2.0**-9, "bf16", "sr", rng=np.int64(3)) in (1.0, 1.0078125)
    assert lp.dot([1.0], [1.0], "bf16", fused=np.True_) == 1.0


# -- many dimensions -------------------------------------------------------------------

@pytest.mark.parametrize("ndim", (33, 40, 64))
def test_arrays_of_up_to_64_dimensions(ndim):
    # Before: np.broadcast_shapes raised RuntimeError past 32 dimensions. NumPy's own
    # ufuncs go to 64; the oracle broadcasts with them and rounds each exact result.
    rng = np.random.default_rng(40)
    shape_a = (2,) + (1,) * (ndim - 3) + (3, 1)
    shape_b = (1,) * (ndim - 2) + (1, 2)
    a = rng.standard_normal(shape_a)
    b = rng.standard_normal(shape_b)
    c = rng.standard_normal(2)
    out_shape = (a + b).shape                         # NumPy's broadcast, 64 dims allowed
    A, B = np.broadcast_to(a, out_shape), np.broadcast_to(b, out_shape)
    C = np.broadcast_to(c, out_shape)
    cases = {
        "add": (lp.add(a, b, "bf16", "rd"), [Fraction(x) + Fraction(y) for x, y in
                                             zip(A.ravel().tolist(), B.ravel().tolist())]),
        "mul": (lp.mul(a, b, "bf16", "rd"), [Fraction(x) * Fraction(y) for x, y in
                                             zip(A.ravel().tolist(), B.ravel().tolist())]),
        "fma": (lp.fma(a, b, c, "bf16", "rd"),
                [Fraction(x) * Fraction(y) + Fraction(z) for x, y, z in
                 zip(A.ravel().tolist(), B.ravel().tolist(), C.ravel().tolist())]),
    }
    for op, (got, exact) in cases.items():
        assert got.shape == out_shape, op
        want = np.array([reference_round(e, "BF16", "rd") for e in exact]).reshape(out_shape)
        assert_same(got, want, [op, ndim])
    x = A * 3.0                                       # a 64-dim operand with 12 elements
    for axis in (None, 0, ndim - 2, -1):
        got = lp.sum(x, "bf16", axis=axis, mode="rd", order="sequential")
        cols = ([x.ravel()] if axis is None
                else list(np.moveaxis(x, axis, -1).reshape(-1, x.shape[axis])))
        want = np.array([sequential_sum(col.tolist(), "BF16", "rd") for col in cols])
        want_shape = () if axis is None else np.sum(x, axis=axis).shape
        assert np.shape(got) == want_shape
        assert_same(np.reshape(got, -1), want, [axis])
    got = lp.dot(A, B, "bf16", "rd")
    assert got.shape == out_shape[:-1]
    want = [rounded_add(reference_round(Fraction(r[0]) * Fraction(s[0]), "BF16", "rd"),
                     reference_round(Fraction(r[1]) * Fraction(s[1]), "BF16", "rd"), "BF16", "rd")
            for r, s in zip(A.reshape(-1, 2).tolist(), B.reshape(-1, 2).tolist())]
    assert_same(got.reshape(-1), want, ["dot"])
    with pytest.raises(ValueError, match="broadcast"):
        lp.add(np.ones((1,) * 39 + (3,)), np.ones((1,) * 39 + (2,)), "bf16")


# -- operands float64 cannot hold: one rounding, as lp.round ---------------------------

def _double_rounding_traps(kind):
    """Values just off a midpoint or a point of BF16 (p = 8), FP32 (24), FP16 (11) and
    E4M3 (4), by less than half a float64 ulp: rounding them through float64 first lands
    on that midpoint (nearest modes) or point (directed modes) and rounds wrongly."""
    if kind == "longdouble":
        one = np.longdouble(1)
        tiny = np.ldexp(one, -60)
        return [one + np.ldexp(one, -p) + s * tiny for p in (8, 24, 11, 4) for s in (1, -1)] \
            + [one + np.ldexp(one, 1 - p) - tiny for p in (8, 24, 11, 4)]
    top = {"int64": 62, "uint64": 63, "pyint": 100}[kind]
    return [2**top + 2**(top - p) + s for p in (8, 24) for s in (1, -1)] \
        + [2**top + 2**(top + 1 - p) - 1 for p in (8, 24)]


def _wide_operands(kind, n, seed):
    """Operands of one kind, most with more bits than float64 holds, some small, signed
    (uint64 unsigned), with exact negatives of each other so that sums cancel, and
    double-rounding traps at the end."""
    rng = np.random.default_rng(seed)
    traps = _double_rounding_traps(kind)
    if kind == "int64":
        big = rng.integers(2**53, 2**63 - 1, n, dtype=np.int64, endpoint=True)
        big[: n // 8] = rng.integers(-2**12, 2**12, n // 8)          # exact in float64
        big[n // 4: n // 2] *= -1
        big[n - len(traps):] = traps
        return big
    if kind == "uint64":
        big = rng.integers(2**53, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
        big[n - len(traps):] = traps
        return big
    if kind == "pyint":
        e = rng.integers(65, 1000, n)
        vals = [int(rng.integers(1, 2**62)) << int(x - 62) | int(rng.integers(0, 2**40))
                for x in e]
        vals[:4] = [(2**53 + 1) ** 2, 2**200 + 2**100 + 1, 2**64 + 1, 2**70 - 1]
        vals = [-v if i % 3 == 1 else v for i, v in enumerate(vals)]
        return vals[: n - len(traps)] + traps
    # long double: 64 significant bits on x86-64, over a wide exponent range
    hi = np.ldexp(rng.random(n) + 0.5, rng.integers(-40, 40, n)) * rng.choice([-1, 1], n)
    x = hi.astype(np.longdouble)
    x += x * np.ldexp(rng.integers(1, 2**11, n).astype(np.longdouble), -64)
    x[n - len(traps):] = traps
    return x


_PARTNERS = np.array([1.0, -1.0, 3.0, 0.1, 2.0**-30, -2.0**40, 1e-300, 0.0, -0.0,
                      np.inf, -np.inf, np.nan, 7.5, 2.0**-1074])

_KINDS = ["int64", "uint64", "pyint"]
if np.finfo(np.longdouble).nmant >= 63:
    _KINDS.append("longdouble")


def _wide_second(kind, x):
    """A second wide operand: x reversed, its first eighth -x (x itself for uint64,
    so that sub cancels), as the user would pass it."""
    n = len(x)
    if kind == "pyint":
        y = x[n // 2:] + x[: n // 2]
        return [-v for v in x[: n // 8]] + y[n // 8:]
    y = np.concatenate([x[n // 2:], x[: n // 2]])
    y[: n // 8] = x[: n // 8] if kind == "uint64" else -x[: n // 8]
    return y


@pytest.mark.parametrize("kind", _KINDS)
@pytest.mark.parametrize("name", ("BF16", "FP16", "FP32", "FP8_E4M3", "FP64"))
def test_wide_operands_round_once(kind, name):
    # Before: operands were rounded to float64 first, then to the format (lp.add(
    # np.int64(2**62 + 2**54 + 1), 0, "bf16") gave 2**62, lp.round 2**62 + 2**55).
    n = 48
    x = _wide_operands(kind, n, seed=len(name) + len(kind))
    y = _wide_second(kind, x)
    rng = np.random.default_rng(7)
    f = rng.choice(_PARTNERS, n)
    f[-12:] = [0.0, 1.0, -0.0, -1.0] * 3       # the traps unchanged: add 0, multiply by 1
    c = rng.choice(_PARTNERS[:9], n)
    for mode in DET_MODES:
        for op in OPS:
            for a, b, label in ((x, y, "wide"), (x, f, "float"), (f, x, "float first")):
                got = getattr(lp, op)(a, b, name, mode)
                want = [rounded_result(op, (u, v), name, mode) for u, v in zip(list(a), list(b))]
                assert_same(got, want, kind, name, mode, op, label)
        for a, b, cc, label in ((x, y, c, "a, b wide"), (c, x, y, "b, c wide"),
                                (f[:9].reshape(9, 1), x, c[0], "broadcast")):
            got = lp.fma(a, b, cc, name, mode)
            A, B, C = (np.broadcast_to(np.asarray(v, dtype=object), np.shape(got)).ravel()
                       for v in (a, b, cc))
            want = [rounded_result("fma", t, name, mode) for t in zip(A, B, C)]
            assert_same(got, np.reshape(want, np.shape(got)), kind, name, mode, label)


def _as_input(values, kind):
    """A list of one kind of operand as the user would pass it."""
    if kind == "pyint":
        return list(values)
    if kind == "longdouble":
        return np.array(values, dtype=np.longdouble)
    return np.array(values, dtype=np.int64 if kind == "int64" else None)


@requires_gmpy2
@pytest.mark.oracle
@pytest.mark.parametrize("kind", _KINDS)
@pytest.mark.parametrize("name", ("BF16", "FP32", "FP64"))
def test_wide_operands_sqrt_against_mpfr(kind, name):
    x = _wide_operands(kind, 40, seed=3)
    xs = [abs(v) for v in (x if isinstance(x, list) else list(x))]
    if kind == "pyint":
        xs[0] = (2**53 + 1) ** 2          # sqrt is a 54-bit integer: an FP64 tie
        xs[1] = (2**24 + 1) ** 2 * 2**100  # an FP32 tie
    for mode in sorted(_GMPY_MODES):
        with gmpy2.context(precision=1100, emin=-20000, emax=20000):
            exact = [gmpy2.mpfr(gmpy2.mpq(exact_operand(v).numerator, exact_operand(v).denominator))
                     for v in xs]
        with gmpy2.context(_mpfr_context(name, mode)):
            want = [float(gmpy2.sqrt(v)) for v in exact]
        got = lp.sqrt(_as_input(xs, kind) if kind != "uint64" else np.array(xs, np.uint64),
                      name, mode)
        assert_same(got, want, kind, name, mode)


@pytest.mark.parametrize("kind", _KINDS)
def test_wide_operands_in_sums_and_dots(kind):
    x = _wide_operands(kind, 13, seed=21)
    xs = x if isinstance(x, list) else list(x)
    rng = np.random.default_rng(5)
    w = rng.choice([1.0, -1.0, 0.5, 3.0], 13)
    for mode in ("rne", "rz", "ro"):
        for order, ref in SUMS.items():
            got = lp.sum(_as_input(xs, kind) if kind != "uint64" else x, "BF16", mode,
                         order=order)
            want = ref([exact_operand(v) for v in xs], "BF16", mode)
            assert_same(got, want, [kind, mode, order])
        fd = "FP64" if kind == "pyint" else "FP32"     # no overflow on the way
        got = lp.dot(_as_input(xs, kind) if kind != "uint64" else x, w, fd, mode)
        acc = reference_round(exact_operand(xs[0]) * Fraction(w[0]), fd, mode)
        for u, v in zip(xs[1:], w[1:].tolist()):
            p = reference_round(exact_operand(u) * Fraction(v), fd, mode)
            acc = rounded_add(acc, p, fd, mode)
        assert_same(got, acc, [kind, mode, "dot"])
        got = lp.dot(w, _as_input(xs, kind) if kind != "uint64" else x, fd, mode, fused=True)
        acc = reference_round(exact_operand(xs[0]) * Fraction(w[0]), fd, mode)
        for u, v in zip(xs[1:], w[1:].tolist()):
            acc = reference_round(exact_operand(u) * Fraction(v) + Fraction(acc), fd, mode)
        assert_same(got, acc, [kind, mode, "fused dot"])


def test_wide_operand_examples_from_the_issue():
    v = 2**62 + 2**54 + 1
    want = reference_round(v, "BF16")                     # 2**62 + 2**55
    assert lp.add(np.int64(v), 0, "bf16") == want == lp.round(np.int64(v), "bf16")
    assert lp.mul(np.int64(v), 1, "bf16") == want
    assert lp.sum(np.array([v, 0], np.int64), "bf16") == want
    assert lp.dot(np.array([v], np.int64), [1.0], "bf16") == want
    with lp.flags() as f:
        r = lp.add(np.uint64(2**64 - 1), 0, "fp64", "rz")
    assert r == reference_round(2**64 - 1, "FP64", "rz") and f.inexact == 1
    with lp.flags() as f:
        r = lp.add(np.int64(v), np.inf, "fp16")
    assert r == np.inf and f.inexact == 0


@pytest.mark.parametrize("kind", _KINDS)
def test_wide_operands_stochastic_rounding_probability(kind):
    # Each value lies a quarter of an FP64 ulp above a float64: rounded through float64
    # first (as before) it is that float64, and "sr" never rounds up.
    x = {"int64": np.full(4000, 2**62 + 2**8, np.int64),
         "uint64": np.full(4000, 2**63 + 2**9, np.uint64),
         "pyint": [2**100 + 2**46] * 4000,
         "longdouble": np.full(4000, 1 + np.ldexp(np.longdouble(1), -54))}[kind]
    v = exact_operand(x[0])
    down = reference_round(v, "FP64", "rd")
    up = reference_round(v, "FP64", "ru")
    p = float((v - Fraction(down)) / (Fraction(up) - Fraction(down)))
    assert p == 0.25
    for op in (lambda: lp.add(x, 0.0, "fp64", "sr", rng=1),
               lambda: lp.mul(x, 1.0, "fp64", "sr", rng=2),
               lambda: lp.sum([x] if kind == "pyint" else x.reshape(1, -1), "fp64", "sr",
                              axis=0, rng=3)):
        got = np.asarray(op())
        assert set(np.unique(got)) <= {down, up}
        frac = np.mean(got == up)
        assert abs(frac - p) <= 5 * math.sqrt(p * (1 - p) / got.size), frac


# -- memory bound ----------------------------------------------------------------------

def _peak_extra(call):
    """Peak bytes a call allocates beyond its result (tracemalloc sees NumPy's buffers)."""
    import tracemalloc
    tracemalloc.start()
    try:
        out = call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak - out.nbytes


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ("float16", "float32", "float64", "int64", "longdouble"))
def test_extra_memory_is_bounded_per_thread(dtype):
    # Before: FP64 results went through whole-array hi, lo, copies (3x the input more),
    # and every operand was converted to float64 up front.
    n = 4_000_000
    rng = np.random.default_rng(60)
    x = (rng.standard_normal(n) * 1000).astype(dtype)
    y = x[::-1].copy()
    bound = lp.arith.MEMORY_CHUNKS * lowprec.engine.parallel.CHUNK * 8
    calls = {"add": lambda: lp.add(x, y, "fp64"), "mul": lambda: lp.mul(x, y, "fp64", "ru"),
             "div": lambda: lp.div(x, y, "fp64"), "fma": lambda: lp.fma(x, y, x, "fp64"),
             "sqrt": lambda: lp.sqrt(y, "fp64", "rz"), "bf16": lambda: lp.add(x, y, "bf16")}
    before = lp.threads(1)
    try:
        for name, call in calls.items():
            extra = _peak_extra(call)
            assert extra < bound, (name, extra / 2**20)
        lp.threads(3)                       # 4e6 elements: three spans of their own
        extra = _peak_extra(calls["fma"])
        assert extra < 3 * bound, extra / 2**20
    finally:
        lp.threads(before)


@pytest.mark.slow
def test_extra_memory_is_bounded_on_the_exact_path():
    rng = np.random.default_rng(61)
    x = rng.integers(2**60, 2**62, 150_000)           # every element has a tail
    before = lp.threads(1)
    try:
        extra = _peak_extra(lambda: lp.add(x, 1.5, "fp64", "rd"))
    finally:
        lp.threads(before)
    assert extra < lp.arith.MEMORY_CHUNKS * lowprec.engine.parallel.CHUNK * 8, extra / 2**20


# -- signalling NaN operands (IEEE 754 §7.2: invalid, a quiet NaN result) ----------------

_SNAN_BITS = {np.float64: (np.uint64, 0x7FF0_0000_0000_0001),
              np.float32: (np.uint32, 0x7F80_0001), np.float16: (np.uint16, 0x7C01)}


@pytest.mark.parametrize("dtype", list(_SNAN_BITS), ids=lambda d: d.__name__)
@pytest.mark.parametrize("fmt", ["bf16", "fp16", "e4m3", "fp64"])
def test_signalling_nan_operands_signal_invalid_once_per_element(dtype, fmt):
    udt, pattern = _SNAN_BITS[dtype]
    snan = np.array([pattern, pattern | (1 << (8 * np.dtype(udt).itemsize - 1))],
                    udt).view(dtype)                 # +sNaN and -sNaN
    assert np.isnan(snan).all()
    x = np.array([snan[0], 1.0, snan[1], 2.0, np.nan], dtype)   # 2 sNaNs, 1 quiet NaN
    y = np.array([1.0, snan[0], snan[1], 3.0, 1.0], dtype)      # one more on its own
    ops = {"add": lambda: lp.add(x, y, fmt), "sub": lambda: lp.sub(x, y, fmt),
           "mul": lambda: lp.mul(x, y, fmt), "div": lambda: lp.div(x, y, fmt),
           "fma": lambda: lp.fma(x, y, y, fmt)}
    for name, op in ops.items():
        with lp.flags() as f:
            r = op()
        # Elements 0, 1, 2 have a signalling operand (element 2 two of them: one signal).
        assert f.invalid == 3, name
        assert np.isnan(r[:3]).all() and np.isnan(r[4]) and not np.isnan(r[3]), name
    with lp.flags() as f:
        r = lp.sqrt(x, fmt)
    assert f.invalid == 2 and np.isnan(r[[0, 2, 4]]).all()
    for order in ("sequential", "pairwise", "kahan"):
        with lp.flags() as f:
            assert np.isnan(lp.sum(x[:4], fmt, order=order))
        assert f.invalid == 2, order     # each sNaN term signals; NaN + NaN later does not


@pytest.mark.parametrize("mode", ["rne", "ru", "rd"])
def test_lists_mixing_wide_ints_and_floats_are_operands_rounded_once(mode):
    # [2**60 + 1, 2.0] is float64 to NumPy (2**60 + 1 rounded): the exact ints are used.
    a, b = [2**60 + 1, 2.0, -(2**62 + 3)], [0.0, 0.5, 1.0]
    # A NaN in the list hides no wide int (a NaN maximum once did).
    got = lp.add([math.nan, 2**60 + 2**52 + 1], [0.0, 0.0], "bf16", mode)
    assert math.isnan(got[0])
    assert got[1] == reference_round(Fraction(2**60 + 2**52 + 1), "bf16", mode)
    exact = [Fraction(x) + Fraction(y) for x, y in zip(a, b)]
    want = [reference_round(v, "fp64", mode) for v in exact]
    assert lp.add(a, b, "fp64", mode).tolist() == want
    seq = reference_round(Fraction(a[0]) + Fraction(a[1]), "fp64", mode)
    seq = reference_round(Fraction(seq) + Fraction(a[2]), "fp64", mode)
    assert lp.sum(a, "fp64", mode, order="sequential") == seq


# -- fma without the split where every product is exact ---------------------------------

def _short(rng, n, bits=8, spread=30):
    """Random float64 values with ``bits``-bit significands (their products are exact)."""
    m = rng.integers(2 ** (bits - 1), 2**bits, n) * rng.choice([-1.0, 1.0], n)
    return np.ldexp(m.astype(float), rng.integers(-spread, spread, n) - bits)


def _fma_cases(fmt, rng):
    """Three chunks of operands: every product exact and in range (ties, cancellations
    to zero, the subnormal boundary and the overflow threshold of ``fmt`` among the
    results); zero products; and the first with some products that are not exact."""
    f = lp.format(fmt)
    a, b = _short(rng, 400), _short(rng, 400)
    c = -a * b + _short(rng, 400, spread=4) * 2.0 ** rng.integers(-30, 0, 400)
    # Exact ties: 3 * 0.5 + c lands halfway between two values of fmt in [1, 2).
    half = 2.0 ** -f.p
    ties_c = 1.0 + half * (2 * np.arange(20) + 1) - 1.5
    # Exact cancellations (+0, or -0 under rd).
    cancel_a, cancel_b = np.array([1.5, -1.5]), np.array([2.0, 2.0])
    cancel_c = np.array([-3.0, 3.0])
    with np.errstate(over="ignore"):
        # The largest value and the midpoint past it (the overflow threshold).
        edge = np.array([f.smallest_normal, f.smallest_subnormal, f.max,
                         f.max + half * 2.0 ** f.emax])
    short = (edge.view(np.uint64) & np.uint64(2**27 - 1)) == 0     # FP64's max is not
    edge = edge[np.isfinite(edge) & (edge > 2.0 ** -900) & short]
    edge_a, edge_b = np.repeat(edge, 2), np.tile([1.0, 0.75], edge.size)
    edge_c = np.tile([0.0, f.smallest_subnormal / 4], edge.size)
    A = np.concatenate([a, np.full(20, 3.0), cancel_a, edge_a])
    B = np.concatenate([b, np.full(20, 0.5), cancel_b, edge_b])
    C = np.concatenate([c, ties_c, cancel_c, edge_c])
    zeros = (np.array([0.0, -0.0, 0.0, 2.0, -0.0]), np.array([3.0, 3.0, -5.0, 0.0, -0.0]),
             np.array([-0.0, -0.0, -0.0, 1.0, 0.0]))
    mixed_a, mixed_b = A.copy(), B.copy()
    mixed_a[::37] = rng.standard_normal(mixed_a[::37].size)     # 53-bit factors
    mixed_b[::41] = 1 / 3
    return (A, B, C), zeros, (mixed_a, mixed_b, C)


def _no_split(*args):
    raise AssertionError("Dekker's split on a chunk whose products are all exact")


@pytest.mark.parametrize("fmt", ["bf16", "fp16", "tf32", "fp32", "e4m3", "e5m2", "fp4", "e3m2",
                                 "fp64"])
@pytest.mark.parametrize("mode", DET_MODES)
def test_fma_with_exact_products_is_the_correctly_rounded_value(monkeypatch, fmt, mode):
    exact, zeros, mixed = _fma_cases(fmt, np.random.default_rng(len(fmt) * 7 + len(mode)))
    for (a, b, c), split in ((exact, False), (zeros, True), (mixed, True)):
        with monkeypatch.context() as m:
            if not split:
                m.setattr(lp.arith.kernels, "two_prod_err", _no_split)
            got = lp.fma(a, b, c, fmt, mode)
        assert_same(got, fma_rounded(a, b, c, fmt, mode), a, b, c)


@pytest.mark.parametrize("saturate", [False, True])
def test_fma_flags_with_exact_products_are_those_of_the_rounding(saturate):
    rng = np.random.default_rng(6)
    a, b = _short(rng, 300, spread=12), _short(rng, 300, spread=12)
    c = _short(rng, 300, spread=12)
    with lp.flags() as fused:
        got = lp.fma(a, b, c, "e4m3", "rne", saturate=saturate)
    exact = [Fraction(x) * Fraction(y) + Fraction(z) for x, y, z in zip(a, b, c)]
    with lp.flags() as rounded:
        want = lp.round_exact(np.array([float(v) for v in exact]),
                              np.array([float(v - Fraction(float(v))) for v in exact]),
                              "e4m3", "rne", saturate=saturate)
    assert_same(got, want)
    assert fused.as_dict() == rounded.as_dict()
