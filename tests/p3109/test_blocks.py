"""lowprec.p3109's block operations against §5 of the report written out in Fractions.

The oracle below follows §5.1-§5.5 rule by rule (ωBlockDecode, ωBlockProject,
reduce over ωAdd and ωMultiply) on the Fraction definitions of tests/oracles/p3109.py.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowprec as lp
from helpers import assert_bits
from lowprec import p3109
from oracles import p3109 as oracle

NAN, INF = oracle.NAN, math.inf


def build(params):
    k, p, s, e = params
    return p3109.format(k, p, signed=s, domain="extended" if e else "finite")


def datum(params, code):
    return oracle.decode(*params, int(code))


def block_decode(s, xs):
    """§5.1.1: Z_i = ωMultiply(S, X_i)."""
    return [oracle.omega_multiply(s, x) for x in xs]


def _sgn(v):
    return (v > 0) - (v < 0)


def block_project_value(s, x):
    """§5.1.2's Z_i, before ωProject."""
    if isinstance(s, str) or isinstance(x, str):
        return NAN
    if not isinstance(s, float) and s == 0:
        return Fraction(0)
    if isinstance(s, float):
        return Fraction(_sgn(x) * _sgn(s))
    return oracle.omega_divide(x, s)


def reduce(f, values):
    acc = values[0]
    for v in values[1:]:
        acc = f(acc, v)
    return acc


def proj(params, value, rounding="NearestTiesToEven", sat="SatNone", n=None, r=None):
    return oracle.project(*params, value, rounding, sat, n, r)


ROUND_SAT = list(itertools.product(oracle.ROUNDINGS, oracle.SATURATIONS))
E4 = (4, 2, True, True)          # binary4p2se
F4 = (4, 2, True, False)         # binary4p2sf
U4 = (4, 1, False, False)        # binary4p1uf: scales 0, 2**-7 ... 2**6, NaN
S5 = (5, 3, False, True)         # binary5p3ue: scales that are not powers of two
R5 = (5, 3, True, True)          # binary5p3se results


def test_dot_product_of_every_pair_of_two_element_blocks():
    fx = build(E4)
    fs = build(U4)
    codes = np.array(list(itertools.product(range(16), repeat=2)))        # 256 blocks
    x = np.repeat(codes, 256, axis=0)
    y = np.tile(codes, (256, 1))
    rng = np.random.default_rng(1)
    sx, sy = rng.integers(0, 16, x.shape[0]), rng.integers(0, 16, x.shape[0])
    want = []
    for i in range(x.shape[0]):
        xs = block_decode(datum(U4, sx[i]), [datum(E4, c) for c in x[i]])
        ys = block_decode(datum(U4, sy[i]), [datum(E4, c) for c in y[i]])
        total = reduce(oracle.omega_add, [Fraction(0)] + [oracle.omega_multiply(a, b)
                                                           for a, b in zip(xs, ys)])
        want.append(proj(R5, total))
    got = p3109.block_dot_product((sx, x), (sy, y), (fs, fx), (fs, fx), build(R5))
    assert_bits(got, want, "BlockDotProduct")


@pytest.mark.parametrize("op", ["add", "multiply"])
def test_reduce_of_every_three_element_block_and_scale(op):
    fx, fs = build(F4), build(U4)
    codes = np.array(list(itertools.product(range(16), repeat=3)))
    s = np.arange(codes.shape[0]) % 16
    f, start = ((oracle.omega_add, Fraction(0)) if op == "add"
                else (oracle.omega_multiply, Fraction(1)))
    exact = [reduce(f, [start] + block_decode(datum(U4, s[i]), [datum(F4, c) for c in row]))
             for i, row in enumerate(codes)]
    fn = getattr(p3109, f"block_reduce_{op}")
    for rounding, sat in ROUND_SAT[::4]:
        got = fn((s, codes), (fs, fx), build(R5), rounding, sat)
        assert_bits(got, [proj(R5, v, rounding, sat) for v in exact], op, rounding, sat)


@pytest.mark.parametrize("scale", [U4, S5])
def test_convert_to_block_of_every_code_and_scale(scale):
    fx, fs = build((5, 2, True, True)), build(scale)
    x, s = np.meshgrid(np.arange(32), np.arange(2 ** scale[0]), indexing="ij")
    values = [block_project_value(datum(scale, b), datum((5, 2, True, True), a))
              for a, b in zip(x.ravel(), s.ravel())]
    for rounding, sat in ROUND_SAT:
        got_s, got = p3109.convert_to_block(x.reshape(-1, 1), s.reshape(-1), fx, fs,
                                            build(E4), rounding, sat)
        assert_bits(got.ravel(), [proj(E4, v, rounding, sat) for v in values], rounding, sat)
        assert np.array_equal(got_s, s.reshape(-1))


def test_max_abs_finite_of_every_two_element_block():
    fx, fs = build(E4), build(S5)
    codes = np.array(list(itertools.product(range(16), repeat=2)))
    for rho_s, rho in [(("TowardPositive", "SatFinite"), ("NearestTiesToEven", "SatNone")),
                       (("NearestTiesToAway", "SatPropagate"), ("TowardZero", "SatFinite"))]:
        s, r = p3109.convert_to_block_max_abs_finite(codes, fx, fs, build(E4), *rho_s, *rho)
        for i, row in enumerate(codes):
            xs = [datum(E4, c) for c in row]
            m = [abs(v) if not isinstance(v, str) else v for v in xs]
            finite = [v for v in m if isinstance(v, Fraction)]
            big = max(finite) if finite else (INF if INF in m else NAN)
            want_s = proj(S5, big, *rho_s)
            assert s[i] == want_s, (row, rho_s)
            sv = datum(S5, want_s)
            assert list(r[i]) == [proj(E4, block_project_value(sv, v), *rho) for v in xs]


BINARY = {"add": oracle.omega_add, "subtract": oracle.omega_subtract,
          "multiply": oracle.omega_multiply, "divide": oracle.omega_divide,
          "copysign": oracle.omega_copysign, "minimum_finite": None}


def _min_finite(a, b):
    fa, fb = isinstance(a, Fraction), isinstance(b, Fraction)
    if fa and not fb:
        return a
    if fb and not fa:
        return b
    if isinstance(a, str):
        return b
    if isinstance(b, str):
        return a
    return min(a, b)


@pytest.mark.parametrize("op", sorted(BINARY))
def test_elementwise_binary_blocks(op):
    fx, fs = build(E4), build(U4)
    rng = np.random.default_rng(7)
    x1, x2 = rng.integers(0, 16, (2, 400, 3))
    s1, s2, sr = rng.integers(0, 16, (3, 400))
    rule = BINARY[op] or _min_finite
    sr_out, got = getattr(p3109, f"block_{op}")((s1, x1), (s2, x2), sr, (fs, fx), (fs, fx),
                                                fs, build(R5), "NearestTiesToAway", "SatFinite")
    want = []
    for i in range(400):
        a = block_decode(datum(U4, s1[i]), [datum(E4, c) for c in x1[i]])
        b = block_decode(datum(U4, s2[i]), [datum(E4, c) for c in x2[i]])
        want.append([proj(R5, block_project_value(datum(U4, sr[i]), rule(u, v)),
                          "NearestTiesToAway", "SatFinite") for u, v in zip(a, b)])
    assert np.array_equal(sr_out, sr)
    assert_bits(got, np.array(want), op)


def test_exact_operations_take_any_result_scale_and_rounding_ones_power_of_two():
    fx, fs = build(E4), build(S5)
    x = np.arange(16).reshape(4, 4)
    s = np.arange(4)
    sr = np.full(4, 9)                               # a scale that is no power of two
    assert datum(S5, 9).numerator not in (1, 2, 4, 8)
    _, got = p3109.block_negate((s, x), sr, (fs, fx), fs, build(R5))
    want = [[proj(R5, block_project_value(datum(S5, 9), oracle.omega_multiply(
        Fraction(-1), z) if not isinstance(z, str) else z))
        for z in block_decode(datum(S5, s[i]), [datum(E4, c) for c in x[i]])] for i in range(4)]
    assert_bits(got, np.array(want))
    with pytest.raises(ValueError, match="power of two"):
        p3109.block_add((s, x), (s, x), sr, (fs, fx), (fs, fx), fs, build(R5))


def test_stochastic_dot_products_follow_the_report_formulas():
    fx, fs, fr = build((8, 3, True, True)), build((8, 1, False, False)), build(E4)
    rng = np.random.default_rng(3)
    x, y = rng.integers(0, 256, (2, 200, 4))
    sx, sy = rng.integers(100, 150, (2, 200))
    for rounding in p3109.STOCHASTIC:
        for n in (1, 3, 8):
            bits = rng.integers(0, 2 ** n, 200)
            got = p3109.block_dot_product((sx, x), (sy, y), (fs, fx), (fs, fx), fr, rounding,
                                          "SatPropagate", random_bits=bits, n_bits=n)
            want = []
            for i in range(200):
                xs = block_decode(datum((8, 1, False, False), sx[i]),
                                  [datum((8, 3, True, True), c) for c in x[i]])
                ys = block_decode(datum((8, 1, False, False), sy[i]),
                                  [datum((8, 3, True, True), c) for c in y[i]])
                total = reduce(oracle.omega_add, [Fraction(0)] + [
                    oracle.omega_multiply(a, b) for a, b in zip(xs, ys)])
                want.append(proj(E4, total, rounding, "SatPropagate", n, int(bits[i])))
            assert_bits(got, want, rounding, n)


WIDE = (8, 1, True, True)        # binary8p1se: values 2**-63 ... 2**62


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 255), min_size=16, max_size=16),
       st.lists(st.integers(1, 254), min_size=2, max_size=2),
       st.sampled_from(oracle.ROUNDINGS))
def test_sums_across_the_widest_ranges_cancel_exactly(codes, scales, rounding):
    # binary8p1se blocks under Binary8p1uf scales: products from 2**-382 to 2**376,
    # adversarial for the exact sum (cancellation of the largest terms, tiny rests).
    x = np.array(codes[:8])
    y = np.array(codes[8:])
    y[1] = x[0] ^ 0x80 if x[0] not in (0, 0x80) else y[1]   # a term cancelling another
    fx, fs = build(WIDE), build((8, 1, False, False))
    got = p3109.block_dot_product((scales[0], x), (scales[1], y), (fs, fx), (fs, fx),
                                  build(R5), rounding)
    xs = block_decode(datum((8, 1, False, False), scales[0]), [datum(WIDE, c) for c in x])
    ys = block_decode(datum((8, 1, False, False), scales[1]), [datum(WIDE, c) for c in y])
    total = reduce(oracle.omega_add, [Fraction(0)] + [oracle.omega_multiply(a, b)
                                                       for a, b in zip(xs, ys)])
    assert int(got) == proj(R5, total, rounding)


def test_scaled_operations_are_blocks_of_one():
    fx, fs = build(E4), build(U4)
    a, b = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    s1, s2 = (a * 3) % 16, (b * 5) % 16
    for op, rule in [("add", oracle.omega_add), ("subtract", oracle.omega_subtract),
                     ("multiply", oracle.omega_multiply)]:
        got = getattr(p3109, f"scaled_{op}")((s1, a), (s2, b), (fs, fx), (fs, fx), build(R5))
        want = [proj(R5, rule(oracle.omega_multiply(datum(U4, u), datum(E4, v)),
                              oracle.omega_multiply(datum(U4, w), datum(E4, z))))
                for u, v, w, z in zip(s1.ravel(), a.ravel(), s2.ravel(), b.ravel())]
        assert_bits(got.ravel(), want, op)


def test_e8m0_and_binary8p1uf_scales_name_the_same_powers_of_two():
    e8m0 = np.arange(254)
    p1uf = p3109.from_e8m0(e8m0)
    # E8M0 (OCP MX v1.0 §5.4.1): code c is 2**(c - 127); Binary8p1uf's bias is 128.
    assert [datum((8, 1, False, False), c) for c in p1uf] == [
        Fraction(2) ** (int(c) - 127) for c in e8m0]
    assert np.array_equal(p3109.to_e8m0(p1uf), e8m0)
    assert p3109.from_e8m0(255) == 255 and p3109.to_e8m0(255) == 255
    with pytest.raises(ValueError, match="2\\*\\*127"):
        p3109.from_e8m0([254])
    with pytest.raises(ValueError, match="zero"):
        p3109.to_e8m0([0])


def test_mx_blocks_decode_as_they_are():
    q = lp.mx.quantize(np.linspace(-3, 5, 64), "mxfp8_e4m3")
    fr = build((8, 4, True, True))
    codes = q.codes.reshape(q.scale_codes.shape + (q.block,))     # (blocks, 32)
    got = p3109.block_reduce_add((q.scale_codes, codes), (q.scale_fmt, q.elem), fr)
    values = q.dequantize().reshape(2, 32)
    want = [proj((8, 4, True, True), sum(Fraction(float(v)) for v in row)) for row in values]
    assert_bits(got, want)


def test_bad_blocks_are_refused_with_the_way_out():
    f, fs = build(E4), build(U4)
    with pytest.raises(TypeError, match="block"):
        p3109.block_reduce_add(np.zeros(3, np.uint8), (fs, f), f)
    with pytest.raises(ValueError, match="one scale per block"):
        p3109.block_reduce_add((np.zeros(3, np.uint8), np.zeros((2, 4), np.uint8)), (fs, f), f)
    with pytest.raises(ValueError, match="differ in size"):
        p3109.block_dot_product((0, np.zeros(3, np.uint8)), (0, np.zeros(4, np.uint8)),
                                (fs, f), (fs, f), f)
    with pytest.raises(ValueError, match="P3109"):
        p3109.block_reduce_add((0, np.zeros(3, np.uint8)), (fs, f), lp.FP8_E4M3)
    x = np.arange(6, dtype=np.uint8).reshape(2, 3)
    before = x.copy()
    p3109.block_reduce_multiply((np.array([3, 4]), x), (fs, f), f)
    assert np.array_equal(x, before)


@pytest.mark.parametrize("rounding", oracle.ROUNDINGS)
def test_ties_and_cancellations_a_float_sum_would_lose(rounding):
    fx, fs = build(WIDE), build((8, 1, False, False))
    rows = [[1.0, 2.0**-3, 2.0**-60, 0.0], [2.0**40, 2.0**-50, -2.0**40, 0.0],
            [-1.0, -2.0**-3, 2.0**-62, 2.0**-61], [2.0**60, -2.0**-63, -2.0**60, 2.0**-4]]
    x = lp.encode(np.array(rows), fx)
    y = lp.encode(np.ones((4, 4)), fx)
    one = np.full(4, 128)                             # Binary8p1uf's 1.0
    got = p3109.block_dot_product((one, x), (one, y), (fs, fx), (fs, fx), build(R5), rounding)
    want = [proj(R5, sum(Fraction(v) for v in row), rounding) for row in rows]
    assert_bits(got, want, rounding)


def _clamp(x, lo, hi):
    if any(isinstance(v, str) for v in (x, lo, hi)) or lo > hi:
        return NAN
    return min(max(x, lo), hi)


@pytest.mark.parametrize("op, rule", [("fma", oracle.omega_fma), ("faa", oracle.omega_faa),
                                      ("clamp", _clamp)])
def test_elementwise_ternary_blocks(op, rule):
    fx, fs = build(E4), build(U4)
    rng = np.random.default_rng(11)
    x = rng.integers(0, 16, (3, 300, 2))
    s = rng.integers(0, 16, (4, 300))
    pairs = [(s[i], x[i]) for i in range(3)]
    _, got = getattr(p3109, f"block_{op}")(*pairs, s[3], (fs, fx), (fs, fx), (fs, fx), fs,
                                           build(R5), "ToOdd", "SatPropagate")
    want = []
    for i in range(300):
        vals = [block_decode(datum(U4, s[j, i]), [datum(E4, c) for c in x[j, i]])
                for j in range(3)]
        want.append([proj(R5, block_project_value(datum(U4, s[3, i]), rule(*v)), "ToOdd",
                          "SatPropagate") for v in zip(*vals)])
    assert_bits(got, np.array(want), op)


def test_block_sqrt_of_every_code_and_scale():
    fx, fs = build(E4), build(U4)
    x, s = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    _, got = p3109.block_sqrt((s.ravel(), x.reshape(-1, 1)), s.ravel()[::-1].copy(),
                              (fs, fx), fs, build(R5))
    want = [proj(R5, block_project_value(datum(U4, b2), oracle.omega_sqrt(
        oracle.omega_multiply(datum(U4, b), datum(E4, a)))))
        for a, b, b2 in zip(x.ravel(), s.ravel(), s.ravel()[::-1])]
    assert_bits(got.ravel(), want)


@pytest.mark.parametrize("op", ["recip", "rsqrt"])
def test_block_recip_rsqrt_of_every_code_and_scale(op):
    fx, fs = build(E4), build(U4)
    omega = getattr(oracle, f"omega_{op}")
    x, s = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    for rounding, sat in ROUND_SAT:
        _, got = getattr(p3109, f"block_{op}")(
            (s.ravel(), x.reshape(-1, 1)), s.ravel()[::-1].copy(), (fs, fx), fs, build(R5),
            rounding, sat)
        want = [proj(R5, block_project_value(datum(U4, b2), omega(
            oracle.omega_multiply(datum(U4, b), datum(E4, a)))), rounding, sat)
            for a, b, b2 in zip(x.ravel(), s.ravel(), s.ravel()[::-1])]
        assert_bits(got.ravel(), want, op, rounding, sat)


# The transcendental elementwise operations (§5.4): ωOp from MPFR, as in
# test_transcendental.py, then ωBlockProject and the Fraction projection.

def _mpfr_oracle():
    pytest.importorskip("gmpy2")
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).with_name("test_transcendental.py")
    spec = importlib.util.spec_from_file_location("_transcendental_oracle", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TRANSCENDENTAL = ["exp", "exp2", "expm1", "log", "log2", "log1p", "softplus", "sin", "cos",
                  "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh",
                  "arccosh", "arctanh", "sinpi", "cospi", "tanpi", "arcsinpi", "arccospi",
                  "arctanpi"]
E6 = (6, 3, True, True)          # binary6p3se
UF8 = (8, 1, False, False)       # binary8p1uf: scales 1 = code 128, 2**k = 128 + k
UE8 = (8, 1, False, True)        # binary8p1ue: also an infinite scale (code 254)
SCALES = [128, 125, 132]         # 1, 2**-3, 2**4
RESULT_SCALES = [128, 129, 126]  # 1, 2, 1/4
SPECIAL_SCALES = [255, 0, 254]   # NaN, 0, inf in binary8p1ue


def _transcendental_case(params, fs_params, scales, result_scales, block):
    """Every element code in blocks of ``block``, under each scale and result scale."""
    codes = np.arange(2 ** params[0]).reshape(-1, block)
    s, sr, x = (np.array(v) for v in zip(*[(a, b, row) for a in scales
                                             for b in result_scales for row in codes]))
    return s, sr, x


@pytest.mark.oracle
@pytest.mark.parametrize("name", TRANSCENDENTAL)
def test_block_transcendental_every_code_rounding_and_saturation(name):
    mp = _mpfr_oracle()
    fsr = build(UF8)
    for params, fs_params, scales, sr_codes, fsr_params in [
            (E4, UF8, SCALES, RESULT_SCALES, UF8), (E6, UF8, SCALES, RESULT_SCALES, UF8),
            (E4, UE8, SPECIAL_SCALES, [128, 126], UF8),
            (E4, UE8, [128], SPECIAL_SCALES, UE8)]:
        fx, fs, fsr = build(params), build(fs_params), build(fsr_params)
        s, sr, x = _transcendental_case(params, fs_params, scales, sr_codes,
                                        4 if params == E4 else 2)
        values = [proj_value
                  for si, ri, row in zip(s, sr, x)
                  for proj_value in (block_project_value(
                      datum(fsr_params, ri), mp.omega(name, v))
                      for v in block_decode(datum(fs_params, si),
                                            [datum(params, c) for c in row]))]
        fn = getattr(p3109, f"block_{name}")
        for rounding in oracle.ROUNDINGS:
            want = oracle.project_many(params, values, rounding, oracle.SATURATIONS)
            for sat in oracle.SATURATIONS:
                sr_out, got = fn((s, x), sr, (fs, fx), fsr, fx, rounding, sat)
                assert np.array_equal(sr_out, sr)
                assert_bits(got.ravel(), want[sat], name, params, scales, rounding, sat)


@pytest.mark.oracle
@pytest.mark.parametrize("name", ["hypot", "arctan2", "arctan2pi"])
def test_block_transcendental_binary_every_pair(name):
    mp = _mpfr_oracle()
    fx, fs = build(E4), build(UF8)
    a, b = (v.reshape(-1, 4) for v in np.meshgrid(np.arange(16), np.arange(16),
                                                  indexing="ij"))
    n = len(a)
    s1 = np.array([128, 125, 132, 128] * n)[:n]
    s2 = np.array([132, 128, 125] * n)[:n]
    sr = np.array(RESULT_SCALES * n)[:n]

    def rule(u, v):
        return mp.omega_hypot(u, v) if name == "hypot" else mp.omega_arctan2(
            u, v, name == "arctan2")
    values = []
    for i in range(n):
        u = block_decode(datum(UF8, s1[i]), [datum(E4, c) for c in a[i]])
        v = block_decode(datum(UF8, s2[i]), [datum(E4, c) for c in b[i]])
        values += [block_project_value(datum(UF8, sr[i]), rule(p, q)) for p, q in zip(u, v)]
    fn = getattr(p3109, f"block_{name}")
    for rounding in oracle.ROUNDINGS:
        want = oracle.project_many(E4, values, rounding, oracle.SATURATIONS)
        for sat in oracle.SATURATIONS:
            _, got = fn((s1, a), (s2, b), sr, (fs, fx), (fs, fx), fs, fx, rounding, sat)
            assert_bits(got.ravel(), want[sat], name, rounding, sat)


@pytest.mark.oracle
@pytest.mark.parametrize("name", ["exp", "log1p", "tanh", "cospi"])
def test_block_transcendental_stochastic(name):
    mp = _mpfr_oracle()
    fx, fs = build(E6), build(UF8)
    s, sr, x = _transcendental_case(E6, UF8, SCALES, RESULT_SCALES, 2)
    rng = np.random.default_rng(5)
    for rounding, nb in [("StochasticA", 2), ("StochasticC", 5)]:
        bits = rng.integers(0, 2 ** nb, x.shape)
        _, got = getattr(p3109, f"block_{name}")((s, x), sr, (fs, fx), fs, fx, rounding,
                                                 "SatFinite", random_bits=bits, n_bits=nb)
        want = [[oracle.project(*E6, block_project_value(datum(UF8, ri), mp.omega(name, v)),
                                rounding, "SatFinite", nb, int(r))
                 for v, r in zip(block_decode(datum(UF8, si), [datum(E6, c) for c in row]),
                                 rrow)]
                for si, ri, row, rrow in zip(s, sr, x, bits)]
        assert_bits(got, np.array(want), name, rounding, nb)


def test_block_transcendental_needs_a_power_of_two_result_scale_and_range():
    f, fs = "binary8p3se", "binary8p1uf"
    one, x = lp.encode(1.0, fs), lp.encode([[1.0, 2.0]], f)
    three = lp.encode(3.0, "binary5p3ue")
    with pytest.raises(ValueError, match="power of two"):
        p3109.block_exp((one, x), three, (fs, f), "binary5p3ue", f)
    big = (lp.encode(2.0 ** 10, fs), lp.encode([[1.0]], f))         # e**1024 > 2**1477
    with pytest.raises(ValueError, match="could bring it back"):
        p3109.block_exp(big, lp.encode(2.0 ** 100, fs), (fs, f), fs, f)
    _, r = p3109.block_exp(big, one, (fs, f), fs, f, "NearestTiesToEven", "SatFinite")
    assert lp.decode(r, f)[0, 0] == lp.format(f).max
