"""lowprec.tensorcore (the models of lp.matmul) against oracles it did not produce.

* Published GPU measurements (tests/data/tensorcore, Khattak & Mikaitis, BSD-2-Clause):
  every row of every file, bit for bit, by the model TENSORCORE.md §6 names.
* The vectors of TENSORCORE.md §5 (V100's non-monotonic sum).
* `exact`, `fp32` and `fp16` against loops on `Fraction`s (tests/oracles/loops.py),
  whose Fraction rounding is checked here against NumPy's casts; NumPy float32 loops
  where they are exact.
* The block-FMA models against a slow scalar reference of TENSORCORE.md §2 and §4
  (tests/oracles/block_fma.py), sharing no code with lowprec.tensorcore.
* Shapes against np.matmul on integer data (exact in float64), and NumPy's errors.
"""

from __future__ import annotations

import copy
import gc
import math
import pickle
import re
import sys
import tracemalloc
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import lowprec as lp
from helpers import DATA, assert_bits, assert_same
from lowprec.tensorcore import matmul  # the kernel itself (lp.matmul may wrap it for Tensors)
from oracles.block_fma import reference_dot
from oracles.loops import (
    FP16_GRID,
    FP32_GRID,
    exact_loop,
    round_fraction,
    round_signed,
    sequential_loop,
    signed,
)
from peers import ml_dtypes, requires_ml_dtypes

DATA = DATA / "tensorcore"
FILES = sorted(DATA.glob("*.npz"))


# -- the Fraction rounding of the loops, against NumPy's casts ---------------------------

@given(st.floats(allow_nan=False, allow_infinity=False))
def test_round_fraction_matches_numpy_casts(x):
    # NumPy's float64 -> float32 / float16 casts are single IEEE roundings.
    with np.errstate(over="ignore"):
        assert round_fraction(x, **FP32_GRID) == float(np.float32(x))
        assert round_fraction(x, **FP16_GRID) == float(np.float16(x))


@given(st.lists(st.floats(width=64), min_size=1, max_size=40))
@example([-float("nan"), float("nan"), -1e10, -0.0])
def test_fast_fp16_rounding_matches_numpys_cast(xs):
    # The kernels round to FP16 arithmetically; NumPy's (slow) cast is the oracle.
    x = np.array(xs)
    with np.errstate(all="ignore"):
        expected = x.astype(np.float16).astype(np.float64)
        got = sys.modules["lowprec.tensorcore.blockfma"].round_fp16(x)
    assert np.array_equal(got.view(np.uint64), expected.view(np.uint64)) or (
        np.array_equal(got, expected, equal_nan=True)
        and np.array_equal(np.signbit(got), np.signbit(expected)))


def _every_input_class(fmt, seed=0):
    """float64 inputs of every class for a rounding to ``fmt``, both signs: random bit
    patterns over float64's whole range, random values around the format's range,
    exact ties (normal and subnormal), the subnormal boundary and values below the
    smallest subnormal, the overflow threshold and around it, ±0, ±inf and NaN."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 0x7FF0_0000_0000_0000, 4000, dtype=np.uint64)
    anywhere = bits.view(np.float64)                       # every finite binade of float64
    near = rng.standard_normal(4000) * 2.0 ** rng.integers(
        fmt.emin - fmt.mantissa_bits - 8, fmt.emax + 4, 4000)
    e = rng.integers(fmt.emin, fmt.emax + 1, 2000)        # a binade of normal values
    k = rng.integers(0, 2**fmt.mantissa_bits, 2000)        # even and odd last bits
    sub = float(fmt.smallest_subnormal)
    ties = np.concatenate([(2.0**fmt.mantissa_bits + k + 0.5) * 2.0 ** (e - fmt.mantissa_bits),
                           (k + 0.5) * sub])               # normal and subnormal midpoints
    top, ulp = float(fmt.max), 2.0 ** (fmt.emax - fmt.mantissa_bits)
    edges = [2.0**fmt.emin, sub, sub / 2, sub / 4, sub * 1.5, sub * 2.5, sub * 2**-40,
             5e-324, 2.0**-1022, top, top + ulp / 2, top + ulp, 2.0 ** (fmt.emax + 1),
             top * 2, 2.0**128, 2.0**1023, 1.7976931348623157e308]
    edges = np.array(edges)
    with np.errstate(over="ignore"):                       # past float64's max: inf
        edges = np.concatenate([edges, np.nextafter(edges, 0.0), np.nextafter(edges, np.inf)])
    x = np.concatenate([anywhere, near, ties, edges, [0.0, np.inf, np.nan]])
    return np.concatenate([x, -x])


@pytest.mark.parametrize("path", ["round_fp16", "rz FP32", "rz e8m13", "rne FP32", "rne FP16",
                                  "rne e8m13", "cast FP32", "cast FP16"])
def test_fast_roundings_equal_lp_round(path):
    # The kernels' own fast roundings implement the one kernel's rule: each equals
    # lp.round bit for bit on the whole domain its comment states.
    bf = sys.modules["lowprec.tensorcore.blockfma"]
    sq = sys.modules["lowprec.tensorcore.sequential"]
    name, _, fmt_name = path.partition(" ")
    bits = 13 if fmt_name == "e8m13" else 10 if fmt_name == "FP16" else 23
    fmt = lp.FP16 if fmt_name in ("FP16", "") else lp.Format(8, bits)
    x = _every_input_class(fmt)
    with np.errstate(all="ignore"):
        if name == "round_fp16":                          # every float64 array
            got = bf.round_fp16(x)
        elif name == "cast":                              # every float64 array
            got = sq.Sequential(lp.FP16, fmt, fmt, 2**20)._cast(x.copy())
        elif name == "rne":                               # every float64 array
            got, _ = bf._to_output(x.copy(), fmt if bits != 10 else lp.FP16, "rne", bits,
                                   (True, True))
        else:                                             # NaNs quiet, as arithmetic makes them
            got, _ = bf._to_output(x.copy(), lp.FP32, "rz", bits, (True, True))
        expected = lp.round(x, fmt, "rz" if name == "rz" else "rne")
    if name == "rz":             # §2.8: past the range is ±inf, even rounding toward zero
        beyond = np.isfinite(x) & (np.abs(x) >= 2.0**128)
        expected[beyond] = np.copysign(np.inf, x[beyond])
    assert x.dtype == np.float64 and got.shape == x.shape
    assert_same(got, expected)


@pytest.mark.parametrize("bits", [23, 13])
def test_fast_rz_without_extremes_equals_lp_round(bits):
    # _to_output's RZ mask when the caller rules out results below 2**-126 and from
    # 2**128 up (the block's exponents say so): lp.round's RZ on exactly that domain.
    bf = sys.modules["lowprec.tensorcore.blockfma"]
    fmt = lp.Format(8, bits)
    x = _every_input_class(fmt, seed=1)
    x = x[~np.isfinite(x) | (x == 0) | ((np.abs(x) >= 2.0**-126) & (np.abs(x) < 2.0**128))]
    got, _ = bf._to_output(x.copy(), lp.FP32, "rz", bits, (False, False))
    assert_same(got, lp.round(x, fmt, "rz"))


# -- published hardware data ---------------------------------------------------------

def _cases():
    for path in FILES:
        gpu, fmt = path.stem.split("_")
        with np.load(path) as data:
            keys = [k for k in ("d_fp32", "d_fp16") if k in data.files]
        for key in keys:
            yield pytest.param(path, gpu, fmt, key, id=f"{path.stem}-{key}")


def _model_for(gpu, fmt, key):
    """TENSORCORE.md §6: which model and which c each file's results need."""
    fp8 = fmt in ("e4m3", "e5m2")
    if fp8 and gpu == "b200":
        return "b200-mma", True
    if fp8 and gpu == "h100":
        return ("h100-mma", True) if key == "d_fp16" else ("h100", False)
    return gpu, True


def test_the_data_is_all_there():
    assert len(FILES) == 19
    assert (DATA / "LICENCE").exists() and (DATA / "README.md").exists()
    rows = sum(np.load(p)["a"].shape[0] for p in FILES)
    assert rows == 95_000


@pytest.mark.parametrize("path, gpu, fmt, key", list(_cases()))
def test_published_tensor_core_results_bit_for_bit(path, gpu, fmt, key):
    with np.load(path) as data:
        a, b, c = (data[k].view(np.float32).astype(np.float64) for k in ("a", "b", "c"))
        expected = data[key]
    model, use_c = _model_for(gpu, fmt, key)
    c = c if use_c else np.zeros_like(c)
    out = "fp32" if key == "d_fp32" else "fp16"
    # One output per row: a stack of (1 x K) @ (K x 1) products.
    d = matmul(a[:, None, :], b[:, :, None], model=model, c=c[:, None, None],
                  in_fmt=fmt, out_fmt=out)[:, 0, 0]
    got = d.astype(np.float32).view(np.uint32)
    mismatched = np.flatnonzero(got != expected)
    assert mismatched.size == 0, (
        f"{path.stem} {key} with {model}: {expected.size - mismatched.size}/{expected.size} "
        f"rows match; first bad row {mismatched[:1]}")


# -- TENSORCORE.md §5 ----------------------------------------------------------------

U = 2.0**-24
VECTORS = {  # id: (a, b, c, {model: FP32 bits})
    "D1": ([1], [1], -(1 - U), dict(v100=0x34000000, a100=0x33800000, h100=0x33800000,
                                    exact=0x33800000)),
    "D3": ([1, 1], [1, -U], -1 + U, dict(v100=0x34000000, a100=0, h100=0, exact=0)),
    "D2": ([1] * 4, [U] * 4, 1 - U, dict(v100=0x3F800001, a100=0x3F800001,
                                         h100=0x3F800001, exact=0x3F800002)),
    "D5": ([1] * 4, [U] * 4, 1.0, dict(v100=0x3F800000, a100=0x3F800002,
                                       h100=0x3F800002, exact=0x3F800002)),
    "C1": ([1, 1], [2, 3 * U], 0.0, dict(v100=0x40000000, a100=0x40000000,
                                         h100=0x40000000, exact=0x40000001)),
    "C2": ([1, 1], [-2, -3 * U], 0.0, dict(v100=0xC0000000, a100=0xC0000000,
                                           h100=0xC0000000, exact=0xC0000001)),
    "D4c": ([1] * 4, [1] * 4, 1 + 2**-22 + 2**-23,
            dict(v100=0x40A00000, a100=0x40A00000, h100=0x40A00000, exact=0x40A00001)),
}


@pytest.mark.parametrize("vid", list(VECTORS))
@pytest.mark.parametrize("model", ["v100", "a100", "h100", "exact"])
def test_tensorcore_md_vectors(vid, model):
    a, b, c, expected = VECTORS[vid]
    A, B = np.zeros((1, 16)), np.zeros((16, 1))
    A[0, :len(a)], B[:len(b), 0] = a, b
    d = matmul(A, B, model=model, c=[[c]], in_fmt="fp16")
    assert int(np.float32(d[0, 0]).view(np.uint32)) == expected[model]


def test_v100_sum_is_not_monotonic_in_c():
    a, b = np.ones((1, 4)), np.full((4, 1), U)
    small = matmul(a, b, model="v100", c=[[1 - U]], in_fmt="fp16")[0, 0]
    large = matmul(a, b, model="v100", c=[[1.0]], in_fmt="fp16")[0, 0]
    assert 1 - U < 1.0 and small > large


# -- sequential and exact models against Fraction loops ---------------------------------

def _patterns(dtype, bits):
    return st.integers(0, 2**bits - 1).map(
        lambda v: float(np.array(v, dtype=f"u{bits // 8}").view(dtype)))


def _tf32_values():
    # float32 patterns with the low 13 fraction bits cleared are TF32 values.
    return st.integers(0, 2**32 - 1).map(
        lambda v: float(np.array(v & ~0x1FFF, np.uint32).view(np.float32)))


FINITE_VALUES = {
    "fp16": _patterns(np.float16, 16),
    "bf16": _patterns(ml_dtypes.bfloat16, 16),
    "tf32": _tf32_values(),
    "e4m3": _patterns(ml_dtypes.float8_e4m3fn, 8),
    "e5m2": _patterns(ml_dtypes.float8_e5m2, 8),
    "fp32": _patterns(np.float32, 32),
}


def _finite(fmt):
    return FINITE_VALUES[fmt].filter(math.isfinite)


@st.composite
def operands(draw, fmt, max_k=24, finite=True, max_mn=3):
    """(a, b, c): small matrices of values of fmt, often with cancelling pairs."""
    m, n = draw(st.integers(1, max_mn)), draw(st.integers(1, max_mn))
    k = draw(st.integers(1, max_k))
    values = _finite(fmt) if finite else FINITE_VALUES[fmt]
    pool = draw(st.lists(values, min_size=1, max_size=6))
    pool += [-v for v in pool] + [0.0]
    pick = st.sampled_from(pool) | values
    a = np.array(draw(st.lists(pick, min_size=m * k, max_size=m * k))).reshape(m, k)
    b = np.array(draw(st.lists(pick, min_size=k * n, max_size=k * n))).reshape(k, n)
    c = np.array(draw(st.lists(pick, min_size=m * n, max_size=m * n))).reshape(m, n)
    return a, b, c



@requires_ml_dtypes
@pytest.mark.oracle
@settings(max_examples=60)
@given(st.sampled_from(["fp16", "bf16", "tf32", "e4m3", "e5m2", "fp32"]).flatmap(
    lambda f: st.tuples(st.just(f), operands(f))))
def test_fp32_model_is_a_float32_loop_of_exact_products(case):
    fmt, (a, b, c) = case
    c = np.array([[float(np.float32(v)) for v in row] for row in c])
    got = matmul(a, b, model="fp32", c=c, in_fmt=fmt)
    assert_bits(got, sequential_loop(a, b, c, FP32_GRID))


BF16_GRID = dict(p=8, emin=-126, emax=127)


@requires_ml_dtypes
@pytest.mark.oracle
@settings(max_examples=30)
@given(st.sampled_from(["fp16", "bf16", "e4m3"]).flatmap(
    lambda f: st.tuples(st.just(f), operands(f))))
@example(("bf16", (np.array([[1.0, 2.0**-9, 2.0**-9]]), np.ones((3, 1)), np.zeros((1, 1)))))
def test_a_hand_built_bf16_accumulator_is_a_bf16_loop_of_exact_products(case):
    # An accumulation model in a format other than FP32 and FP16 (built by hand, not in
    # MODELS) rounds each addition to its own format; it used to round to FP16.
    from lowprec.tensorcore.models import Accumulating
    fmt, (a, b, c) = case
    c = np.vectorize(lambda v: round_signed(signed(v), BF16_GRID))(c)
    c[~np.isfinite(c)] = 0.0
    model = Accumulating(lp.BF16, "bf16-loop")
    got = matmul(a, b, model=model, c=c, in_fmt=fmt, out_fmt="bf16")
    assert_bits(got, sequential_loop(a, b, c, BF16_GRID))


@requires_ml_dtypes
@pytest.mark.oracle
@settings(max_examples=40)
@given(st.sampled_from(["fp16", "bf16", "e5m2", "fp32"]).flatmap(
    lambda f: st.tuples(st.just(f), operands(f))))
def test_fp16_model_is_an_fp16_loop_of_exact_products(case):
    fmt, (a, b, c) = case
    c = np.vectorize(lambda v: round_signed(signed(v), FP16_GRID))(c)
    c[~np.isfinite(c)] = 0.0
    got = matmul(a, b, model="fp16", c=c, in_fmt=fmt)
    assert got.dtype == np.float64
    assert_bits(got, sequential_loop(a, b, c, FP16_GRID))


@requires_ml_dtypes
@pytest.mark.oracle
@settings(max_examples=80)
@given(st.sampled_from(["fp16", "bf16", "tf32", "e4m3", "fp32"]).flatmap(
    lambda f: st.tuples(st.just(f), operands(f, max_k=40))),
    st.sampled_from(["fp32", "fp16"]))
def test_exact_model_is_the_fraction_dot_product_rounded_once(case, out):
    fmt, (a, b, c) = case
    grid = FP32_GRID if out == "fp32" else FP16_GRID
    c = np.vectorize(lambda v: round_signed(signed(v), grid))(c)
    c[~np.isfinite(c)] = 0.0
    got = matmul(a, b, model="exact", c=c, in_fmt=fmt, out_fmt=out)
    assert_bits(got, exact_loop(a, b, c, grid))


def test_exact_model_survives_cancellation_beyond_float64():
    # 2**30 + 2**-48 - 2**30: float64 loses the small term; the exact model must not.
    a = np.array([[2.0**15, 2.0**-24, -(2.0**15)]])
    b = np.array([[2.0**15], [2.0**-24], [2.0**15]])
    assert matmul(a, b, model="exact", in_fmt="fp16")[0, 0] == 2.0**-48
    assert matmul(a, b, model="exact", in_fmt="fp16", out_fmt="fp16")[0, 0] == 0.0


# -- signed zeros of the exact and sequential models -----------------------------------

# Zeros of both signs, the smallest subnormal (whose products underflow FP32, or FP16
# for FP16 inputs), and values that cancel: zero results of every kind.
ZERO_POOLS = {
    "fp32": [0.0, 2.0**-149, 2.0**-76, 2.0**-106, 1.0, 3.0],
    "bf16": [0.0, 2.0**-133, 2.0**-70, 1.0, 3.0],
    "fp16": [0.0, 2.0**-24, 2.0**-12, 1.0, 3.0],
}
RUNS = [("exact", "fp32", FP32_GRID, None), ("exact", "fp16", FP16_GRID, None),
        ("fp32", "fp32", FP32_GRID, None), ("fp32", "fp16", FP32_GRID, FP16_GRID),
        ("fp16", "fp16", FP16_GRID, None)]


@st.composite
def signed_zero_operands(draw):
    fmt = draw(st.sampled_from(sorted(ZERO_POOLS)))
    pool = st.sampled_from([s * v for v in ZERO_POOLS[fmt] for s in (1.0, -1.0)])
    m, k, n = draw(st.integers(1, 3)), draw(st.integers(1, 6)), draw(st.integers(1, 3))
    a = np.array(draw(st.lists(pool, min_size=m * k, max_size=m * k))).reshape(m, k)
    b = np.array(draw(st.lists(pool, min_size=k * n, max_size=k * n))).reshape(k, n)
    c = draw(st.none() | st.lists(pool, min_size=m * n, max_size=m * n).map(
        lambda v: np.array(v).reshape(m, n)))
    return fmt, a, b, c


@settings(max_examples=150)
@given(signed_zero_operands(), st.sampled_from(RUNS))
def test_zero_signs_follow_ieee_additions(case, run):
    fmt, a, b, c = case
    model, out, grid, final = run
    got = matmul(a, b, model=model, c=c, in_fmt=fmt, out_fmt=out)
    if model == "exact":
        assert_bits(got, exact_loop(a, b, c, grid))
    else:
        assert_bits(got, sequential_loop(a, b, c, grid, final))


@pytest.mark.parametrize("fmt, out, x", [("fp32", "fp32", 2.0**-100),
                                         ("bf16", "fp32", 2.0**-100),
                                         ("fp16", "fp16", 2.0**-24),
                                         ("fp32", "bf16", 2.0**-100),
                                         ("fp32", "e4m3", 2.0**-20)])
@pytest.mark.parametrize("model", ["exact", "fp32", "fp16"])
def test_a_negative_result_that_rounds_to_zero_is_minus_zero(model, fmt, out, x):
    # x * -x is far below half the smallest subnormal of out: IEEE gives -0.
    a, b = np.array([[x, 1.0, -1.0]]), np.array([[-x], [3.0], [3.0]])
    grid = dict(p=lp.format(out).p, emin=lp.format(out).emin, emax=lp.format(out).emax)
    acc = {"exact": None, "fp32": FP32_GRID, "fp16": FP16_GRID}[model]
    for aa, bb in ((a[:, :1], b[:1]), (a, b), (a[:, ::-1], b[::-1])):
        got = matmul(aa, bb, model=model, in_fmt=fmt, out_fmt=out)
        if acc is None:
            want = exact_loop(aa, bb, None, grid)
        else:
            want = sequential_loop(aa, bb, None, acc, grid if acc != grid else None)
        if aa.shape[1] == 1:
            assert np.signbit(want[0, 0])   # the oracle's -0, before any cancellation
        assert_bits(got, want)


def test_exact_model_sign_where_float64_bounds_straddle_zero():
    # 2**-152 - 2**-212 - 2**-152: float64 loses the middle term, and its error bound,
    # below 2**-150, rounds to -0 on one side and +0 on the other.
    a = np.array([[2.0**-76, 2.0**-106, -(2.0**-76)]])
    b = np.array([[2.0**-76], [-(2.0**-106)], [2.0**-76]])
    for perm in ([0, 1, 2], [1, 0, 2], [0, 2, 1]):
        got = matmul(a[:, perm], b[perm], model="exact", in_fmt="fp32")
        assert_bits(got, exact_loop(a[:, perm], b[perm], None, FP32_GRID))
        assert np.signbit(got[0, 0])


@pytest.mark.parametrize("model", ["exact", "fp32", "fp16"])
def test_exact_zero_sums_and_sums_of_negative_zeros(model):
    # Rows: -0 products only; -0 and +0 products; 1 and -1 (exact cancellation);
    # a zero row of A (products -0 with the negative column, +0 with the other).
    a = np.array([[-0.0, 0.0, -0.0], [-0.0, 0.0, 0.0], [1.0, -1.0, 0.0], [0.0, 0.0, 0.0]])
    b = np.array([[1.0, -2.0], [-1.0, 2.0], [2.0, -1.0]])
    for c in (None, np.full((4, 2), -0.0), np.zeros((4, 2)),
              np.array([[-0.0, 0.0]] * 4)):
        got = matmul(a, b, model=model, c=c, in_fmt="fp16")
        grid = FP16_GRID if model == "fp16" else FP32_GRID
        want = (exact_loop(a, b, c, grid) if model == "exact"
                else sequential_loop(a, b, c, grid))
        assert_bits(got, want)
        # NumPy's float32 loop is exact on these small integers: the same signs.
        acc = np.zeros((4, 2), np.float32) if c is None else c.astype(np.float32)
        for k in range(3):
            acc = acc + a[:, k, None].astype(np.float32) * b[None, k, :].astype(np.float32)
        assert_bits(got, acc.astype(np.float64))
    assert np.signbit(matmul(a, b, model=model, c=np.full((4, 2), -0.0), in_fmt="fp16")[0])\
        .tolist() == [True, False]


def test_exact_model_zero_signs_do_not_come_from_blas(monkeypatch):
    # -((-A) @ B) is A @ B with every exact zero sum turned into -0: the signs of
    # zeros must come from the model's rule, not from how BLAS orders its additions.
    mm = sys.modules["lowprec.tensorcore.exact"]
    monkeypatch.setattr(mm, "_blas", lambda a, b, out: np.negative(np.matmul(-a, b), out=out))
    a = np.array([[1.0, -1.0, 0.0], [0.0, -0.0, 0.0], [2.0, 0.5, -0.0]])
    b = np.array([[3.0, -0.0], [3.0, 0.0], [-0.0, 1.0]])
    for c in (None, np.zeros((3, 2)), np.full((3, 2), -0.0)):
        got = matmul(a, b, model="exact", c=c, in_fmt="fp16")
        assert_bits(got, exact_loop(a, b, c, FP32_GRID))


def test_exact_sums_past_float64s_range_are_infinite():
    # Products near 2**1022 (a format with emax 510): their float64 sum overflows, so
    # the exact sum decides, and a sum of 2**1024 or more is ±inf in FP32.
    fmt = lp.Format(10, 10, bias=512)
    m = float(fmt.max)
    for K, negative in ((5, 0), (7, 1), (9, 1), (3, 1)):
        a = np.full((1, K), m)
        b = np.full((K, 1), m)
        b[K - negative:] = -m
        for sign in (1.0, -1.0):
            with np.errstate(over="ignore", invalid="ignore"):
                got = matmul(a, sign * b, model="exact", in_fmt=fmt)
            assert_bits(got, exact_loop(a, sign * b, None, FP32_GRID))


@pytest.mark.parametrize("model", ["exact", "fp32", "fp16"])
def test_negative_zero_sums_in_stacks_and_chunks(model, monkeypatch):
    # Stacks of matrices with zero rows and columns of both signs, in small chunks.
    mm = sys.modules["lowprec.tensorcore.driver"]
    rng = np.random.default_rng(7)
    a = rng.integers(-2, 3, (3, 6, 5)) * rng.choice([1.0, -1.0], (3, 6, 5))
    b = rng.integers(-2, 3, (5, 4)) * rng.choice([1.0, -1.0], (5, 4))
    a[:, 1] = -0.0
    a[1, 2] = 0.0
    b[:, 3] = np.copysign(0.0, rng.choice([1.0, -1.0], 5))
    c = np.copysign(0.0, rng.choice([1.0, -1.0], (6, 4)))
    c[0] = -0.0
    grid = FP16_GRID if model == "fp16" else FP32_GRID
    for bound in (mm.MEMORY_BOUND, 3000):
        monkeypatch.setattr(mm, "MEMORY_BOUND", bound)
        got = matmul(a, b, model=model, c=c, in_fmt="fp16")
        for i in range(3):
            oracle = exact_loop if model == "exact" else sequential_loop
            assert_bits(got[i], oracle(a[i], b, c, grid))


@pytest.mark.parametrize("model", ["exact", "fp32", "fp16"])
def test_no_products_give_c(model):
    c = np.array([[-0.0, 0.0, -2.0]])
    got = matmul(np.zeros((1, 0)), np.zeros((0, 3)), model=model, c=c, in_fmt="fp16")
    assert_bits(got, c)
    assert_bits(matmul(np.zeros((1, 0)), np.zeros((0, 3)), model=model, in_fmt="fp16"),
          np.matmul(np.zeros((1, 0)), np.zeros((0, 3))))   # NumPy's empty sum: +0


def test_exact_model_into_a_format_without_negative_zero():
    # fnuz formats have no -0 (DESIGN.md): the tiny negative result is +0 there.
    got = matmul([[2.0**-100]], [[-(2.0**-100)]], model="exact", in_fmt="fp32",
                 out_fmt="e4m3fnuz")
    assert got[0, 0] == 0 and not np.signbit(got[0, 0])


def test_fp32_model_matches_numpy_float32_on_a_largerproduct():
    # FP16 products are exact float32s and float32 addition is one IEEE rounding, so
    # NumPy's own float32 loop is the oracle here.
    rng = np.random.default_rng(1)
    a = rng.standard_normal((37, 300)).astype(np.float16).astype(np.float64)
    b = rng.standard_normal((300, 29)).astype(np.float16).astype(np.float64)
    acc = np.zeros((37, 29), np.float32)
    for k in range(300):
        acc += a[:, k, None].astype(np.float32) * b[None, k, :].astype(np.float32)
    assert np.array_equal(matmul(a, b, in_fmt="fp16"), acc.astype(np.float64))


# -- a scalar reference of the block FMA (TENSORCORE.md §2, §4) --------------------------

# The parameters of TENSORCORE.md §3, restated from the spec (not read from lowprec/tensorcore/).
SPEC = {
    ("v100", "fp16"): dict(block=4, F=23, elim=None, elim_fp16=-19),
    ("t4", "fp16"): dict(block=8, F=24, elim=-132, elim_fp16=-20),
    ("a100", "fp16"): dict(block=8, F=24, elim=-132, elim_fp16=-20),
    ("a100", "bf16"): dict(block=8, F=24, elim=-132, elim_fp16=-20),
    ("a100", "tf32"): dict(block=4, F=24, elim=-132, elim_fp16=None),
    ("ada", "bf16"): dict(block=8, F=24, elim=-132, elim_fp16=-20),
    ("ada", "tf32"): dict(block=4, F=24, elim=-132, elim_fp16=None),
    ("ada", "e4m3"): dict(block=16, F=13, out_bits=13, elim=-132, elim_fp16=None),
    ("ada", "e5m2"): dict(block=16, F=13, out_bits=13, elim=-132, elim_fp16=None),
    ("h100", "fp16"): dict(block=16, F=25, elim=-133, elim_fp16=-21),
    ("h100", "bf16"): dict(block=16, F=25, elim=-133, elim_fp16=-21),
    ("h100", "tf32"): dict(block=8, F=25, elim=-133, elim_fp16=None),
    ("h100", "e4m3"): dict(block=32, F=13, out_bits=13, elim=-133, elim_fp16=-133),
    ("h100-mma", "e5m2"): dict(block=16, F=25, elim=-133, elim_fp16=-21, split=True),
    ("b200", "bf16"): dict(block=16, F=25, elim=-133, elim_fp16=-21),
    ("b200", "tf32"): dict(block=8, F=25, elim=-133, elim_fp16=None),
    ("b200", "e5m2"): dict(block=32, F=25, elim=-133, elim_fp16=-21),
    ("b200-mma", "e4m3"): dict(block=16, F=25, elim=-133, elim_fp16=-21, split=True),
}


def _check_against_reference(model, fmt, params, a, b, c, out):
    got = matmul(a, b, model=model, c=c, in_fmt=fmt, out_fmt=out)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            want = reference_dot(list(a[i]), list(b[:, j]), c[i, j], fmt, params, out)
            if math.isnan(want):
                assert math.isnan(got[i, j]), (i, j, got[i, j], want)
            else:
                assert got[i, j] == want and (
                    math.copysign(1, got[i, j]) == math.copysign(1, want)), \
                    (i, j, got[i, j], want)


def _addend(c, out):
    grid = FP16_GRID if out == "fp16" else FP32_GRID
    return np.vectorize(lambda v: v if not math.isfinite(v)
                        else round_fraction(Fraction(v), **grid))(c)


@pytest.mark.slow
@settings(max_examples=150)
@given(st.sampled_from(sorted(SPEC)).flatmap(lambda key: st.tuples(
    st.just(key), operands(key[1], max_k=70, finite=False, max_mn=2),
    st.sampled_from(["fp32", "fp16"] if SPEC[key]["elim_fp16"] is not None or
                    key[1] in ("e4m3", "e5m2") else ["fp32"]))))
def test_named_models_agree_with_the_scalar_reference(case):
    (model, fmt), (a, b, c), out = case
    _check_against_reference(model, fmt, SPEC[(model, fmt)], a, b, _addend(c, out), out)


@requires_ml_dtypes
@pytest.mark.oracle
@settings(max_examples=120)
@given(st.integers(1, 9), st.integers(3, 30), st.one_of(st.none(), st.integers(-140, 5)),
       st.sampled_from(["fp16", "bf16", "e4m3"]).flatmap(
           lambda f: st.tuples(st.just(f), operands(f, max_k=30, finite=False, max_mn=2))),
       st.sampled_from(["fp32", "fp16"]))
def test_custom_models_agree_with_the_scalar_reference(block, F, elim, case, out):
    fmt, (a, b, c) = case
    model = lp.TensorCoreModel(block=block, fraction_bits=F, elim=elim, elim_fp16=elim,
                               inputs=(fmt,))
    params = dict(block=block, F=F, elim=elim, elim_fp16=elim)
    _check_against_reference(model, fmt, params, a, b, _addend(c, out), out)


@pytest.mark.parametrize("model, fmt", [("a100", "bf16"), ("h100", "bf16"), ("b200", "tf32"),
                                        ("a100", "fp16"), ("h100", "e4m3")])
@pytest.mark.parametrize("scale", [2.0**-60, 2.0**-66, 2.0**-70, 2.0**-75])
def test_fp32_subnormal_results_are_truncated(model, fmt, scale):
    # Products near 2**-140 (or a subnormal c with FP16/FP8 inputs) give FP32
    # subnormal results, truncated to multiples of 2**-149.
    rng = np.random.default_rng(int(-math.log2(scale)))
    small = fmt in ("fp16", "e4m3")
    a = lp.round(rng.standard_normal((3, 9)) * (1.0 if small else scale), fmt)
    b = lp.round(rng.standard_normal((9, 2)) * (2.0**-20 if small else scale), fmt)
    c = lp.round(rng.standard_normal((3, 2)) * scale**2 * 2.0**10, "fp32")
    if small:
        a[:, ::2] = 0.0
    _check_against_reference(model, fmt, SPEC[(model, fmt)], a, b, c, "fp32")


@requires_ml_dtypes
@pytest.mark.oracle
@settings(max_examples=40)
@given(st.integers(1, 6), st.integers(3, 26), st.integers(5, 23),
       operands("bf16", max_k=20, finite=False, max_mn=2))
def test_custom_round_to_nearest_fp32_output(block, F, bits, case):
    a, b, c = case
    model = lp.TensorCoreModel(block=block, fraction_bits=F, out_rounding="rne",
                               out_bits=bits, elim=-140, inputs=("bf16",))
    params = dict(block=block, F=F, elim=-140, elim_fp16=None, out_bits=bits, mode="rne")
    _check_against_reference(model, "bf16", params, a, b, _addend(c, "fp32"), "fp32")


@pytest.mark.parametrize("a, b, c, expected", [
    ([[2.0**-14 * 2**-10]], [[2.0**-24]], [[0.0]], 2.0**-48),     # subnormal inputs kept
    ([[65504.0, 65504.0]], [[65504.0], [65504.0]], [[0.0]], 2 * 65504.0**2),
    ([[1.0, -1.0]], [[3.0], [3.0]], [[-0.0]], 0.0),               # zero sum is +0
    ([[np.inf, 1.0]], [[0.0], [1.0]], [[0.0]], np.nan),           # inf * 0
    ([[np.inf, -np.inf]], [[1.0], [1.0]], [[0.0]], np.nan),       # inf - inf
    ([[np.inf, 1.0]], [[2.0], [1.0]], [[-5.0]], np.inf),
    ([[1.0]], [[1.0]], [[np.nan]], np.nan),
])
def test_block_fma_edge_cases(a, b, c, expected):
    d = matmul(a, b, model="a100", c=c, in_fmt="fp16")[0, 0]
    if np.isnan(expected):
        assert np.isnan(d)
    else:
        assert d == expected and not np.signbit(d)


@requires_ml_dtypes
@pytest.mark.oracle
def test_block_fma_overflow_is_inf_even_under_round_toward_zero():
    big = float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    with lp.flags() as f:
        d = matmul([[big, big]], [[big], [big]], model="h100", in_fmt="bf16")
    assert d[0, 0] == np.inf and f.overflow == 1 and f.invalid == 0


def test_flags_count_overflow_and_invalid_outputs():
    a = np.array([[60000.0, 60000.0], [np.inf, 1.0]])
    b = np.array([[60000.0, 0.0], [60000.0, 1.0]])
    for model in ("exact", "fp32", "fp16", "a100"):
        with lp.flags() as f:
            d = matmul(a, b, model=model, in_fmt="fp16", out_fmt="fp16")
        assert f.overflow == 1, model      # [0, 0]: 7.2e9 from finite inputs
        assert f.invalid == 1, model       # [1, 1]: inf * 0
        assert np.isnan(d[1, 1]) and d[1, 0] == np.inf


# -- shapes, chunks and operands ---------------------------------------------------------

SHAPES = [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
          ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((0, 4), (4, 2)), ((3, 0), (0, 2))]


@pytest.mark.parametrize("model", ["exact", "fp32", "fp16", "v100", "h100", "b200-mma"])
@pytest.mark.parametrize("sa, sb", SHAPES)
def test_shapes_follow_np_matmul(model, sa, sb):
    rng = np.random.default_rng(0)
    fmt = "e4m3" if model == "b200-mma" else "fp16"
    a = rng.integers(-4, 5, sa).astype(np.float64)
    b = rng.integers(-4, 5, sb).astype(np.float64)
    expected = np.matmul(a, b)          # small integers: exact in every model
    got = matmul(a, b, model=model, in_fmt=fmt)
    assert np.shape(got) == expected.shape
    assert np.array_equal(got, expected)


def test_chunks_do_not_change_results(monkeypatch):
    mm = sys.modules["lowprec.tensorcore.driver"]
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 7, 37)) * 2.0 ** rng.integers(-12, 8, (2, 7, 37))
    b = rng.standard_normal((37, 5)) * 2.0 ** rng.integers(-12, 8, (37, 5))
    a, b = lp.round(a, "fp16"), lp.round(b, "fp16")
    c = lp.round(rng.standard_normal((7, 5)), "fp32")
    monkeypatch.setattr(mm, "MEMORY_BOUND", 3000)
    for model in ("exact", "fp32", "a100", "h100"):
        got = matmul(a, b, model=model, c=c, in_fmt="fp16")
        params = SPEC.get((model, "fp16"))
        for i in range(2):
            for m in range(7):
                for n in range(5):
                    if params is not None:
                        want = reference_dot(list(a[i, m]), list(b[:, n]), c[m, n], "fp16",
                                             params, "fp32")
                    elif model == "exact":
                        want = exact_loop(a[i, m:m + 1], b[:, n:n + 1],
                                             c[m:m + 1, n:n + 1], FP32_GRID)[0, 0]
                    else:
                        want = sequential_loop(a[i, m:m + 1], b[:, n:n + 1],
                                                  c[m:m + 1, n:n + 1], FP32_GRID)[0, 0]
                    assert got[i, m, n] == want, (model, i, m, n)


class _Duck:
    """Stands in for lp.Tensor: values and a format."""

    def __init__(self, values, fmt):
        self.values, self.fmt = np.asarray(values, dtype=np.float64), lp.format(fmt)


def test_tensor_like_operands_supply_their_format():
    a, b = [[1.0, 2.0**-12]], [[1.0], [2.0**-11]]
    plain = matmul(a, b, model="exact", in_fmt="fp16")
    assert plain[0, 0] == 1 + 2.0**-23
    duck = matmul(_Duck(a, "fp16"), _Duck(b, "fp16"), model="exact")
    assert duck[0, 0] == 1 + 2.0**-23
    with pytest.raises(ValueError, match="different formats"):
        matmul(_Duck(a, "fp16"), _Duck(b, "bf16"))


def test_plain_arrays_are_rounded_into_in_fmt():
    # 1 + 2**-11 is a tie in FP16: RNE gives 1.
    assert matmul([[1 + 2.0**-11]], [[1.0]], model="exact", in_fmt="fp16")[0, 0] == 1.0


# -- errors -------------------------------------------------------------------------------

@pytest.mark.parametrize("sa, sb", [((3, 4), (3, 4)), ((2, 3, 4), (3, 4, 5)),
                                    ((), (3, 4)), ((4,), (3,))])
def test_shape_errors_are_numpys(sa, sb):
    with pytest.raises(ValueError) as numpy_error:
        np.matmul(np.zeros(sa), np.zeros(sb))
    with pytest.raises(ValueError) as ours:
        matmul(np.zeros(sa), np.zeros(sb), in_fmt="fp16")
    assert str(ours.value) == str(numpy_error.value)


def test_addend_broadcasts_to_vector_results():
    a, b = np.ones((3, 4)), np.ones(4)
    assert np.array_equal(matmul(a, b, c=[1.0, 2.0, 3.0], in_fmt="fp16"), [5.0, 6.0, 7.0])
    assert np.array_equal(matmul(b, a.T, c=2.0, model="a100", in_fmt="fp16"), [6.0] * 3)


def test_clear_errors():
    a, b = np.ones((2, 2)), np.ones((2, 2))
    with pytest.raises(ValueError, match="in_fmt"):
        matmul(a, b)
    with pytest.raises(ValueError, match="does not take BF16"):
        matmul(a, b, model="v100", in_fmt="bf16")
    with pytest.raises(ValueError, match="does not take FP16"):
        matmul(a, b, model="h100-mma", in_fmt="fp16")
    with pytest.raises(ValueError, match="FP32 output"):
        matmul(a, b, model="a100", in_fmt="tf32", out_fmt="fp16")
    with pytest.raises(ValueError, match="unknown matmul model"):
        matmul(a, b, model="tpu", in_fmt="fp16")
    with pytest.raises(ValueError, match="does not broadcast"):
        matmul(a, b, c=np.ones(3), in_fmt="fp16")
    with pytest.raises(ValueError, match="at most 51 bits"):
        matmul(a, b, model="fp32", in_fmt="fp16", out_fmt="fp64")
    with pytest.raises(ValueError, match="at most 26 bits"):
        matmul(a, b, model="exact", in_fmt="fp64")
    with pytest.raises(ValueError, match="fraction_bits"):
        lp.TensorCoreModel(block=32, fraction_bits=50)
    with pytest.raises(ValueError, match="at most 12 bits"):
        lp.TensorCoreModel(inputs=("fp32",))


def test_models_table():
    from lowprec.tensorcore.catalogue import MULTIPASS, UNITS  # tests/test_instructions.py
    assert list(lp.MODELS) == ["exact", "fp32", "fp16", "v100", "t4", "a100", "ada", "h100",
                               "h100-mma", "b200", "b200-mma", *MULTIPASS, *UNITS]
    for name, model in lp.MODELS.items():
        assert model.name == name and model.__doc__
    for name in ("v100", "a100", "h100", "b200"):
        assert isinstance(lp.MODELS[name], lp.TensorCoreModel)
        assert "arXiv 2512.07004" in lp.MODELS[name].__doc__


@pytest.mark.parametrize("model, fmt", [
    (lp.TensorCoreModel(block=1, fraction_bits=3, out_rounding="rne"), "e4m3"),
    (lp.TensorCoreModel(block=1, fraction_bits=3, out_rounding="rne"), "fp16"),
    ("a100", "fp16"), ("v100", "fp16"), ("h100", "fp16"), ("h100-mma", "e4m3")], ids=str)
def test_fp16_output_overflow_stays_infinite_in_later_blocks(model, fmt):
    # 64 * 64 = 4096 per term: the running FP16 result passes 65504 after 16 terms and
    # is +inf from then on (§2.8: an infinite c gives an infinite result).
    a, b = np.full((1, 40), 64.0), np.full((40, 1), 64.0)
    for K in (24, 33, 40):
        r = matmul(a[:, :K], b[:K], model=model, c=[[64.0]], in_fmt=fmt, out_fmt="fp16")
        assert r[0, 0] == np.inf


@pytest.mark.parametrize("model", ["exact", "fp32", "fp16"])
def test_accumulating_models_refuse_formats_whose_products_float64_cannot_hold(model):
    wide = lp.Format(10, 10, bias=100)          # emax 922: products up to 2**1846
    with pytest.raises(ValueError, match="too wide"):
        matmul([[2.0**600]], [[2.0**600]], model=model, in_fmt=wide)


def test_c_with_too_many_dimensions_gets_a_clear_error():
    with pytest.raises(ValueError, match=r"c of shape \(5, 2, 4\) does not broadcast"):
        matmul(np.ones((2, 3)), np.ones((3, 4)), model="fp32", in_fmt="fp16",
               c=np.ones((5, 2, 4)))


# -- argument checks -------------------------------------------------------------------

@pytest.mark.parametrize("field, value, error", [
    ("fp16_output", "no", TypeError), ("fp16_output", 1, TypeError),
    ("mma_split", "yes", TypeError), ("mma_split", None, TypeError),
    ("block", 4.0, TypeError), ("block", True, TypeError), ("block", 0, ValueError),
    ("fraction_bits", "24", TypeError), ("out_bits", 23.0, TypeError),
    ("out_bits", 24, ValueError), ("out_rounding", 0, TypeError),
    ("out_rounding", "rn", ValueError), ("elim", -132.0, TypeError),
    ("elim", "low", TypeError), ("elim", -301, ValueError), ("elim_fp16", 1.5, TypeError),
    ("inputs", 16, TypeError), ("inputs", ("fp16", 16), TypeError),
    ("inputs", ("fp16", "fp12"), ValueError), ("inputs", (), ValueError),
    ("variants", 5, TypeError), ("variants", "tf32", TypeError),
    ("variants", (("tf32", "a100"),), TypeError), ("variants", ((1, 2, 3),), TypeError),
    ("variants", (("tf32", lp.MODELS["v100"]),), ValueError),      # v100 takes no TF32
    ("variants", (("fp16", lp.MODELS["a100"]),), ValueError),      # a model with variants
    ("variants", (("tf32", lp.MODELS["a100"].for_format("tf32")),) * 2, ValueError),
    ("variants", ((16, lp.MODELS["v100"]),), TypeError),
    ("name", 3, TypeError), ("doc", None, TypeError),
], ids=lambda v: repr(v)[:30])
def test_tensor_core_model_fields_are_checked(field, value, error):
    # A wrong-typed option must never change a result silently ("no" is truthy).
    with pytest.raises(error, match=field):
        lp.TensorCoreModel(**{field: value})


@pytest.mark.parametrize("spec", ["fp16", lp.FP16, np.float16, np.dtype(np.float16)],
                         ids=repr)
def test_tensor_core_model_takes_one_input_format_as_a_one_element_tuple(spec):
    m = lp.TensorCoreModel(block=4, fraction_bits=23, inputs=spec)
    assert m.inputs == (lp.FP16,)
    assert m == lp.TensorCoreModel(block=4, fraction_bits=23, inputs=("fp16",))
    with pytest.raises(ValueError, match="does not take BF16"):
        m.for_format("bf16")


def test_tensor_core_model_fields_are_normalised():
    # NumPy ints become ints (so that equal models compare and hash equal); a dict of
    # variants is the tuple of its pairs.
    tf32 = lp.MODELS["a100"].for_format("tf32")
    m = lp.TensorCoreModel(block=np.int64(8), fraction_bits=np.int32(24),
                           elim=np.int16(-132), elim_fp16=np.int8(-20),
                           fp16_output=np.True_, inputs=("fp16", "bf16"),
                           variants={"tf32": tf32})
    ref = lp.TensorCoreModel(block=8, fraction_bits=24, elim=-132, elim_fp16=-20,
                             inputs=(lp.FP16, lp.BF16), variants=((lp.TF32, tf32),))
    assert m == ref and hash(m) == hash(ref) and m == lp.MODELS["a100"]
    assert type(m.block) is int and type(m.elim) is int and m.fp16_output is True


def _copies(model):
    return {"copy": copy.copy(model), "deepcopy": copy.deepcopy(model),
            "pickle": pickle.loads(pickle.dumps(model))}


@pytest.mark.parametrize("name", list(lp.MODELS))
def test_copied_and_pickled_models_compute_what_the_original_does(name):
    model = lp.MODELS[name]
    fmt = ("e4m3" if name.endswith("-mma") else "bf16" if name.startswith("amx")
           else "fp32" if name.startswith("xla") else "fp16")
    rng = np.random.default_rng(12)
    a = rng.standard_normal((3, 40)) * 2.0 ** rng.integers(-8, 8, (3, 40))
    a[0] = 0.0                                  # the first row of results is c, rounded
    b = rng.standard_normal((40, 5))
    # c = 1 + 2**-11 + 2**-30 rounds to FP16 differently directly (1 + 2**-10) and
    # through FP32 (a tie, 1 + 2**-11, then to even: 1): it shows the output format.
    c = np.full((3, 5), 1 + 2.0**-11 + 2.0**-30)
    for how, twin in _copies(model).items():
        assert twin == model and hash(twin) == hash(model), how
        assert twin.name == model.name and twin.__doc__ == model.__doc__, how
        for kw in ({}, {"c": c}, {"c": c, "out_fmt": "fp32"}):
            expected = matmul(a, b, model=model, in_fmt=fmt, **kw)
            got = matmul(a, b, model=twin, in_fmt=fmt, **kw)
            assert np.array_equal(got.view(np.uint64), expected.view(np.uint64)), (how, kw)


def test_a_copied_fp16_model_still_gives_fp16_output():
    # One zero product: the result is c rounded once to FP16, the model's default output.
    c = 1 + 2.0**-11 + 2.0**-30
    expected = round_fraction(Fraction(c), **FP16_GRID)
    assert expected == 1 + 2.0**-10
    for how, twin in _copies(lp.MODELS["fp16"]).items():
        got = matmul([[0.0]], [[0.0]], model=twin, in_fmt="fp16", c=[[c]])
        assert got[0, 0] == expected, how


@pytest.mark.parametrize("kwargs, error, match", [
    ({"model": 5}, TypeError, "model must be"),
    ({"model": None}, TypeError, "model must be"),
    ({"model": lp.FP16}, TypeError, "model must be"),
    ({"model": "tpu"}, ValueError, "unknown matmul model"),
    ({"in_fmt": 16}, TypeError, "in_fmt"),
    ({"in_fmt": ["fp16"]}, TypeError, "in_fmt"),
    ({"in_fmt": "fp12"}, ValueError, "in_fmt"),
    ({"out_fmt": 32}, TypeError, "out_fmt"),
    ({"out_fmt": "fp33"}, ValueError, "out_fmt"),
    ({"c": "one"}, TypeError, "c must be real"),
    ({"c": [1j, 2j]}, TypeError, "c must be real"),
    ({"c": np.ones((3, 3))}, ValueError, r"c of shape \(3, 3\) .* result shape \(2, 2\)"),
    ({"c": np.ones((2, 2, 2))}, ValueError, r"c of shape \(2, 2, 2\) .* \(2, 2\)"),
], ids=repr)
def test_wrong_arguments_are_named(kwargs, error, match):
    kwargs = {"in_fmt": "fp16", **kwargs}
    with pytest.raises(error, match=match):
        matmul(np.ones((2, 3)), np.ones((3, 2)), **kwargs)


@pytest.mark.parametrize("model", ["exact", "fp32", "fp16", "a100", "h100"])
def test_stacks_of_more_than_32_dimensions_work_as_in_numpy(model):
    # np.matmul takes up to 64 dimensions (np.broadcast_shapes only 32). Small
    # integers: every product and sum is exact in FP16 and in float64.
    rng = np.random.default_rng(34)
    sa = (1,) * 29 + (2, 1, 1, 1) + (3, 4)           # 33 batch dimensions
    sb = (1,) * 30 + (2, 1, 1) + (4, 2)              # broadcasting with sa's
    a = rng.integers(-3, 4, sa).astype(np.float64)
    b = rng.integers(-3, 4, sb).astype(np.float64)
    c = rng.integers(-3, 4, (2, 1, 1, 3, 2)).astype(np.float64)
    expected = np.matmul(a, b) + c
    got = matmul(a, b, model=model, in_fmt="fp16", c=c)
    assert got.shape == expected.shape and got.ndim == 35
    assert np.array_equal(got, expected)
    with lp.flags():                                  # the flags pass sees every dimension
        assert np.array_equal(matmul(a[..., 0, :], b, model=model, in_fmt="fp16"),
                              np.matmul(a[..., 0, :], b))
    with pytest.raises(ValueError, match="mismatch"):
        matmul(a, b[..., :3, :], model=model, in_fmt="fp16")


DTYPE_FORMATS = [(np.float16, "fp16"), (np.float32, "fp32"), (ml_dtypes.bfloat16, "bf16"),
                 (ml_dtypes.float8_e4m3fn, "e4m3"), (ml_dtypes.float8_e5m2, "e5m2")]


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("dtype, fmt", DTYPE_FORMATS, ids=lambda v: getattr(v, "__name__", v))
@pytest.mark.parametrize("model", ["exact", "fp32", "fp16", "a100", "h100", "h100-mma"])
def test_dtypes_that_name_a_format_need_no_in_fmt(dtype, fmt, model):
    rng = np.random.default_rng(4)
    with np.errstate(over="ignore"):
        a = (rng.standard_normal((2, 3, 33)) * 4).astype(dtype)
        b = (rng.standard_normal((33, 5)) * 4).astype(dtype)
    c = rng.standard_normal((3, 5))
    values = dict(a=a.astype(np.float64), b=b.astype(np.float64))   # exact widenings
    try:
        expected = matmul(values["a"], values["b"], model=model, c=c, in_fmt=fmt)
    except ValueError as e:                   # the model does not take fmt
        with pytest.raises(ValueError, match=str(e)[:20]):
            matmul(a, b, model=model, c=c)
        return
    got = matmul(a, b, model=model, c=c)
    assert np.array_equal(got.view(np.uint64), expected.view(np.uint64))
    # The dtype's format agrees with an explicit in_fmt, and with a Tensor of it.
    assert np.array_equal(matmul(a, b, model=model, c=c, in_fmt=fmt), expected)
    assert np.array_equal(matmul(_Duck(values["a"], fmt), b, model=model, c=c), expected)


def test_float16_operands_against_a_float32_loop():
    # FP16 products are exact in float32 (22 bits): NumPy's float32 loop is the oracle.
    rng = np.random.default_rng(16)
    a = rng.standard_normal((4, 50)).astype(np.float16)
    b = rng.standard_normal((50, 3)).astype(np.float16)
    acc = np.zeros((4, 3), np.float32)
    for k in range(50):
        acc += a[:, k, None].astype(np.float32) * b[None, k, :].astype(np.float32)
    assert np.array_equal(matmul(a, b, model="fp32"), acc.astype(np.float64))


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("da, db", [(np.float16, ml_dtypes.bfloat16),
                                    (np.float32, np.float16),
                                    (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2)],
                         ids=lambda d: getattr(d, "__name__", repr(d)))
def test_operands_of_two_dtype_formats_are_refused_naming_both(da, db):
    a, b = np.ones((2, 2), da), np.ones((2, 2), db)
    with pytest.raises(ValueError, match=f"{np.dtype(da).name}.*{np.dtype(db).name}"):
        matmul(a, b, model="exact")
    assert np.array_equal(matmul(a, b, model="exact", in_fmt="fp32"), np.full((2, 2), 2.0))


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("dtype", [np.float64, np.int64, list, ml_dtypes.int4],
                         ids=["float64", "int64", "list", "int4"])
def test_float64_int_and_list_operands_still_need_in_fmt(dtype):
    # A float64 array is not FP64 input (no model takes FP64): the format must be said.
    a = [[1.0, 1.0]] * 2 if dtype is list else np.ones((2, 2), dtype)
    with pytest.raises(ValueError, match="needs in_fmt"):
        matmul(a, np.ones((2, 2), np.float16), model="exact")
    with pytest.raises(ValueError, match="needs in_fmt"):
        matmul(np.ones((2, 2), np.float16), a, model="exact")


# -- memory bound ----------------------------------------------------------------------

def _peak_bytes(fn):
    """Peak bytes NumPy and Python allocate while ``fn()`` runs (tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _allowance(a, b, c, result):
    """What the matmul docstring lets come on top of MEMORY_BOUND: 8 bytes per entry
    of a, b, c and the result, 2 per row of a and column of b (and lp.round's own
    buffers, which these sizes leave room for inside the bound)."""
    rows = math.prod(a.shape[:-1]) + math.prod(b.shape[:-2] + b.shape[-1:])
    c_size = 0 if c is None else np.size(c)
    return 8 * (a.size + b.size + c_size + result.size) + 2 * rows


MEMORY_CASES = [   # model, in_fmt, dtype, a's shape, b's shape, c's shape, specials
    ("exact", "fp16", np.float64, (128, 8192), (8192, 128), (128, 128), False),
    ("exact", "fp16", np.float64, (256, 4096), (4096, 256), None, False),
    ("exact", "bf16", np.float64, (8, 150_000), (150_000, 8), (8, 8), False),
    ("exact", "fp16", np.float64, (4, 200_000), (200_000, 4), None, True),
    ("exact", "fp16", np.float16, (512, 512), (512, 512), None, False),
    ("exact", "fp16", np.int64, (3, 64, 96), (96, 64), (64, 64), False),
    ("fp32", "tf32", np.float32, (16, 60_000), (60_000, 16), None, False),
    # The einsum path with a c of its own per output (an identity against c's rows).
    ("fp32", "bf16", np.float64, (1024, 1024), (1024, 1024), (1024, 1024), False),
    # Also holds rounding's reader free of reference cycles: this model calls round_exact
    # once per k, and a cycle kept every call's arrays alive until the cyclic GC ran.
    ("fp32", "fp32", np.float64, (256, 256), (256, 256), (256, 256), False),
    ("fp16", "fp16", np.float64, (96, 96), (96, 96), None, True),
    ("h100", "fp16", np.float64, (64, 30_000), (30_000, 64), (64, 64), False),
    ("h100", "e4m3", np.float32, (8, 20_000), (20_000, 8), None, True),
    ("h100-mma", "e5m2", np.float64, (64, 512), (512, 64), None, False),
    ("a100", "tf32", np.float32, (4, 64, 128), (4, 128, 64), None, False),
]


@pytest.mark.slow
@pytest.mark.parametrize("flags", [False, True], ids=["plain", "flags"])
@pytest.mark.parametrize("model, fmt, dtype, sa, sb, sc, specials", MEMORY_CASES,
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_peak_memory_stays_under_the_documented_bound(monkeypatch, model, fmt, dtype, sa,
                                                      sb, sc, specials, flags):
    # MEMORY_BOUND made small, so that moderate sizes need many chunks and spans. The
    # exact model held float64 quanta and masks of whole rows, and gathered whole
    # rows for its exact sums, at once: over the bound for large K.
    mm = sys.modules["lowprec.tensorcore.driver"]
    bound = 8 * 2**20
    monkeypatch.setattr(mm, "MEMORY_BOUND", bound)
    rng = np.random.default_rng(5)
    with np.errstate(over="ignore"):
        a = (rng.standard_normal(sa) * 8).astype(dtype)
        b = (rng.standard_normal(sb) * 8).astype(dtype)
    if specials:
        a.flat[::9973], b.flat[7::7919] = np.inf, np.nan
    c = None if sc is None else rng.standard_normal(sc)
    result = []

    def call():
        if flags:
            with lp.flags():
                result.append(matmul(a, b, model=model, c=c, in_fmt=fmt))
        else:
            result.append(matmul(a, b, model=model, c=c, in_fmt=fmt))
    call()      # lp.round makes its tables for a format once (docs/rounding.md)
    peak = _peak_bytes(call)
    allowed = bound + _allowance(a, b, c, result[0])
    assert peak <= allowed, f"peak {peak / 2**20:.1f} MiB, allowed {allowed / 2**20:.1f} MiB"


def test_exact_sums_of_rows_longer_than_a_span(monkeypatch):
    # Cancellation beyond float64 (so the outputs need the exact sum) in rows far
    # longer than the gathered span: the levels of the exact sum add up over spans.
    mm = sys.modules["lowprec.tensorcore.driver"]
    ex = sys.modules["lowprec.tensorcore.exact"]
    monkeypatch.setattr(mm, "MEMORY_BOUND", 4096)        # spans of 15 products
    rng = np.random.default_rng(9)
    K = 200
    a = lp.round(rng.standard_normal((3, K)) * 2.0 ** rng.integers(-24, 16, (3, K)), "fp16")
    b = lp.round(rng.standard_normal((K, 2)) * 2.0 ** rng.integers(-24, 16, (K, 2)), "fp16")
    a[:, K // 2:] = -a[:, :K // 2]                        # the big products cancel...
    b[K // 2:] = b[:K // 2]
    a[:, 7], b[7] = 2.0**-24, 2.0**-20                      # ... leaving small ones
    c = np.array([[0.0, 2.0**-60], [-0.0, 1.0], [2.0**-100, -(2.0**-100)]])
    blocks_seen = []
    exact_round = ex._exact_round

    def spy(blocks, m, out):
        blocks_seen.append(sum(1 for _ in blocks()))
        return exact_round(blocks, m, out)
    monkeypatch.setattr(ex, "_exact_round", spy)
    for out, grid in (("fp32", FP32_GRID), ("fp16", FP16_GRID)):
        got = matmul(a, b, model="exact", c=c, in_fmt="fp16", out_fmt=out)
        assert_bits(got, exact_loop(a, b, c, grid))
    assert blocks_seen and min(blocks_seen) > 10      # the sums did go span by span


@pytest.mark.parametrize("model", ["exact", "h100"])
def test_tensor_operands_stay_under_the_bound(monkeypatch, model):
    # Tensors hand over their float64 values: no copy, no rounding, so nothing of the
    # operands' size may come on top of the bound.
    mm = sys.modules["lowprec.tensorcore.driver"]
    bound = 4 * 2**20
    monkeypatch.setattr(mm, "MEMORY_BOUND", bound)
    rng = np.random.default_rng(6)
    a = lp.tensor(rng.standard_normal((16, 40_000)), "fp16")
    b = lp.tensor(rng.standard_normal((40_000, 16)), "fp16")
    result = matmul(a, b, model=model)
    assert np.array_equal(result, matmul(a.values, b.values, model=model, in_fmt="fp16"))
    peak = _peak_bytes(lambda: matmul(a, b, model=model))
    assert peak <= bound + 8 * result.size + 2 * 32


@pytest.mark.parametrize(("model", "fmt", "out", "way"), [
    ("h100", "fp32", None, "in_fmt='tf32'"),
    ("h100/wgmma", "fp32", None, "in_fmt='tf32'"),
    ("a100", "e4m3", None, "models that take FP8_E4M3: ada, h100"),
    ("v100", "bf16", None, "models that take BF16: a100"),
    ("b200/tcgen05", "e2m1", None, "lp.mx.matmul (model 'b200/tcgen05' or 'rtx50/mma')"),
    ("h100", "e4m3", "bf16", "the accumulation models ('exact', 'fp32', 'fp16') round"),
    ("fp32", "bf16", "fp64", "for an FP64 result use model='exact'"),
])
def test_refusals_name_what_would_work(model, fmt, out, way):
    with pytest.raises(ValueError, match=re.escape(way)):
        lp.matmul(np.ones((2, 4)), np.ones((4, 2)), model=model, in_fmt=fmt, out_fmt=out)


def test_float32_arrays_of_bf16_values_go_in_unrounded_with_the_same_result():
    # BF16 values held in float32 (torch's bfloat16 upcast): the driver skips rounding
    # them; the result must be what the rounding path (a listening lp.flags()) gives.
    rng = np.random.default_rng(5)
    a = np.asarray(lp.round(rng.standard_normal((6, 40)), "bf16"), np.float32)
    b = np.asarray(lp.round(rng.standard_normal((40, 3)), "bf16"), np.float32)
    a[0, :4] = [np.inf, -0.0, 2.0**-133, np.nan]
    b[5, 1] = -(2.0**-130)
    for model in ("fp32", "h100", "exact"):
        fast = matmul(a, b, model=model, in_fmt="bf16")
        with lp.flags():
            ref = matmul(a, b, model=model, in_fmt="bf16")
        assert_same(fast, ref)
    c = a.copy()
    c[1, 1] = np.float32(1.0 + 2.0**-10)           # not a BF16 value: rounded (to 1)
    with lp.flags():
        ref = matmul(c.astype(np.float64), b, model="fp32", in_fmt="bf16")
    assert_same(matmul(c, b, model="fp32", in_fmt="bf16"), ref)
