"""The fast paths of lowprec.tensorcore against the semantics they must keep, bit for bit.

* `fp32` and `fp16` (`Sequential`) against an exact step-by-step loop on `Fraction`s
  (tests/oracles/loops.py), on adversarial data: FP32 inputs whose float64 sums land on FP32
  midpoints (where one cast would round the wrong way), products past FP32's range
  and below its subnormals, the overflow threshold, BF16 data whose exponents do and
  do not allow float32 arithmetic in one call, signed zeros; and on larger random and
  special (inf, NaN) data against `Sequential.reference`, the plain loop without the
  fast paths.
* The block-FMA models' float32 products and int32 sums against their float64 terms
  (`BlockFMA.float32_terms = False`), which compute the same by TENSORCORE.md §2.
* `round_fp16`, whose passes depend on what the array holds, against `lp.round` on
  arrays of each kind of value alone and mixed.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

import lowprec as lp
from helpers import assert_bits, assert_same
from lowprec.tensorcore import matmul
from oracles.loops import FP16_GRID, FP32_GRID, fma_loop

FP32_MAX = (2 - 2.0**-23) * 2.0**127


def _module(name):
    return sys.modules[f"lowprec.tensorcore.{name}"]


# -- adversarial data ----------------------------------------------------------------

def _fp32_ties(rng, m, k, n):
    """FP32 operands whose float64 sums often land exactly on an FP32 midpoint while
    the exact sum does not: (1 + i u)(1 - i u) = 1 - i**2 u**2 (u = 2**-23) puts a
    product 2**-46 i**2 below a power of two, far under float64's last bit."""
    u = 2.0**-23
    i = rng.integers(1, 64, (m, k)).astype(float)
    a = (1 + i * u) * rng.choice([1.0, -1.0], (m, k))
    b = np.empty((k, n))
    # Column k0 builds an odd accumulator; later columns add half an FP32 ulp of it,
    # minus a bit: the float64 sum is the midpoint, the exact sum just below it.
    for kk in range(k):
        scale = 2.0 ** rng.integers(-26, -22, n)
        b[kk] = (1 - i[kk % m, kk] * u) * scale if kk else 1.0
    a[:, 0] = 1 + u
    return a, b


def _fp32_mixture(rng, m, k, n):
    """FP32 values of every kind, finite: random, a few significant bits, near 1,
    huge (products past FP32's range), tiny (products below its subnormals), signed
    zeros, subnormals, the largest value."""
    kinds = [
        lambda s: rng.standard_normal(s).astype(np.float32).astype(float),
        lambda s: rng.integers(-8, 9, s) * 2.0 ** rng.integers(-30, 30, s),
        lambda s: (1 + rng.integers(-4, 5, s) * 2.0**-23) * 2.0 ** rng.integers(-3, 3, s),
        lambda s: rng.choice([1.0, -1.0], s) * 2.0 ** rng.integers(60, 127, s),
        lambda s: rng.choice([1.0, -1.0], s) * 2.0 ** rng.integers(-149, -60, s),
        lambda s: rng.choice([0.0, -0.0], s),
        lambda s: rng.choice([FP32_MAX, -FP32_MAX, 2.0**-126, 2.0**-149, 3 * 2.0**-149], s),
    ]

    def draw(shape):
        pick = rng.integers(0, len(kinds), shape)
        out = np.zeros(shape)
        for j, kind in enumerate(kinds):
            out[pick == j] = kind(shape)[pick == j]
        return out.astype(np.float32).astype(float)

    return draw((m, k)), draw((k, n))


def _spy(monkeypatch, cls, name):
    """Count the calls of ``cls.name`` (to check that a test reaches a path)."""
    calls = []
    original = getattr(cls, name)

    def spy(self, *args):
        calls.append(1)
        return original(self, *args)

    monkeypatch.setattr(cls, name, spy)
    return calls


# -- the fp32 model on FP32 inputs: the midpoint check ----------------------------------

def test_a_float64_sum_on_an_fp32_midpoint_rounds_as_the_exact_sum(monkeypatch):
    # acc = 1 + 2**-23 (odd); p = (1 + u)(1 - u) 2**-24 = 2**-24 - 2**-70: the float64
    # sum is the midpoint 1 + 3 * 2**-24, which a cast takes to the even 1 + 2**-22;
    # the exact sum lies below it, so its FP32 rounding is 1 + 2**-23. The same at the
    # overflow threshold: FP32_MAX + 2**103 (1 - 2**-46) stays FP32_MAX, not inf.
    u = 2.0**-23
    calls = _spy(monkeypatch, _module("sequential").Sequential, "_exact")
    a = np.array([[1 + u, 1 + u], [-(1 + u), -(1 + u)]])
    b = np.array([[1.0], [(1 - u) * 2.0**-24]])
    got = matmul(a, b, model="fp32", in_fmt="fp32")
    assert got[0, 0] == 1 + u and got[1, 0] == -(1 + u)
    big = np.array([[FP32_MAX, 1 + u]])
    tail = np.array([[1.0], [(1 - u) * 2.0**103]])
    assert matmul(big, tail, model="fp32", in_fmt="fp32")[0, 0] == FP32_MAX
    assert calls, "the exact step was never taken"
    for x, y in ((a, b), (big, tail)):
        c = np.zeros((x.shape[0], y.shape[1]))
        assert_bits(matmul(x, y, model="fp32", in_fmt="fp32"),
                             fma_loop(x, y, c, **FP32_GRID))


@pytest.mark.parametrize("K", [1, 2, 3, 31, 33])
@pytest.mark.parametrize("data", ["ties", "mixture"])
def test_fp32_inputs_against_the_exact_loop(K, data):
    rng = np.random.default_rng(K + 100 * len(data))
    m, n = 3, 4
    a, b = (_fp32_ties if data == "ties" else _fp32_mixture)(rng, m, K, n)
    c = rng.choice([0.0, -0.0, 1.0, -2.0**-140, 3.0], (m, n))
    got = matmul(a, b, model="fp32", c=c, in_fmt="fp32")
    assert_bits(got, fma_loop(a, b, c, **FP32_GRID))


@pytest.mark.parametrize("bound", [None, 3000])
def test_fp32_inputs_against_the_plain_loop(monkeypatch, bound):
    # Larger operands, chunks and spans (a small MEMORY_BOUND), steps of all three
    # kinds in one call (products below FP32's subnormals take TwoSum), and inf/NaN.
    mm = _module("driver")
    if bound is not None:
        monkeypatch.setattr(mm, "MEMORY_BOUND", bound)
    rng = np.random.default_rng(7)
    a, b = _fp32_mixture(rng, 20, 45, 18)
    ta, tb = _fp32_ties(rng, 20, 45, 18)
    a[:, ::3], b[::3] = ta[:, ::3], tb[::3]
    a[3, 5], b[7, 2], a[4, 9], b[9, 4] = np.inf, -np.inf, np.nan, np.inf
    c = rng.choice([0.0, -0.0, 1.0, FP32_MAX, -2.0**-149], (20, 18))
    kernel = _module("sequential").Sequential(lp.FP32, lp.FP32, lp.FP32, 2**20)
    with np.errstate(all="ignore"):
        want = kernel.reference(a[None], b[None], c[None])[0]
    assert_bits(matmul(a, b, model="fp32", c=c, in_fmt="fp32"), want)


@pytest.mark.parametrize("bound", [None, 4000])
def test_fp32_midpoints_in_a_stack_of_matrices(monkeypatch, bound):
    # The midpoint fixes of a chunk that holds several matrices of a stack (and, under
    # a small MEMORY_BOUND, chunks of rows and columns of them) land on their own
    # outputs: each matrix against the exact loop.
    if bound is not None:
        monkeypatch.setattr(_module("driver"), "MEMORY_BOUND", bound)
    rng = np.random.default_rng(11)
    pairs = [_fp32_ties(rng, 6, 9, 5) for _ in range(4)]
    a, b = np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])
    a[1::2] *= -1
    c = rng.choice([0.0, 1.0, -3.0], (4, 6, 5))
    got = matmul(a, b, model="fp32", c=c, in_fmt="fp32")
    for n in range(4):
        assert_bits(got[n], fma_loop(a[n], b[n], c[n], **FP32_GRID))


def test_the_plan_mixes_checked_and_exact_steps():
    # Steps whose products can fall below FP32's smallest subnormal take TwoSum;
    # the others the midpoint check.
    sq = _module("sequential")
    kernel = sq.Sequential(lp.FP32, lp.FP32, lp.FP32, 2**20)
    at = np.array([1.0, 2.0**-100, 3.0, 0.0]).reshape(4, 1, 1, 1)
    bt = np.array([1.0, 2.0**-60, 2.0**-149, 0.0]).reshape(4, 1, 1, 1)
    assert list(kernel._plan(at, bt)) == [sq._CHECKED, sq._EXACT, sq._EXACT, sq._CHECKED]


def test_an_inexact_float64_sum_on_a_subnormal_midpoint():
    # acc = (2**22 + 1) 2**-149 (odd), p = (1 + u)(1 - u) 2**-150 = 2**-150 - 2**-196:
    # the float64 sum (ulp 2**-179) is acc + 2**-150, halfway between two FP32
    # subnormals (a pattern the normal-range check does not see), the exact sum just
    # below it: acc, not the even acc + 2**-149. Such products (bits below 2**-149)
    # take TwoSum.
    u = 2.0**-23
    acc = (2**22 + 1) * 2.0**-149
    a, b, c = np.array([[(1 + u) * 2.0**-75]]), np.array([[(1 - u) * 2.0**-75]]), [[acc]]
    got = matmul(a, b, model="fp32", c=c, in_fmt="fp32")
    assert got[0, 0] == acc
    assert_bits(got, fma_loop(a, b, np.array(c), **FP32_GRID))


# -- the fp32 model on BF16 and TF32 inputs: float32 where the data allow ---------------

@pytest.mark.parametrize("a, b, c, want", [
    # acc = BF16's max, then -2**64 * 2**64 = -2**128 (past float32: -inf): -2**120.
    ([[2.0**127 * (2 - 2.0**-7), -2.0**64]], [[1.0], [2.0**64]], 0.0, -2.0**120),
    # 3 * 2**-150 is a tie on FP32's subnormal grid, which a float32 product would round
    # (to 2**-148) before the odd c = 2**-149 is added: 2.5 * 2**-149, a tie, to 2**-148.
    ([[3 * 2.0**-76]], [[2.0**-74]], 2.0**-149, 2.0**-148),
])
def test_bf16_products_that_float32_cannot_form(a, b, c, want):
    a, b, c = np.array(a), np.array(b), np.full((1, 1), c)
    got = matmul(a, b, model="fp32", c=c, in_fmt="bf16")
    assert got[0, 0] == want
    assert_bits(got, fma_loop(a, b, c, **FP32_GRID))


@pytest.mark.parametrize("fmt", ["bf16", "tf32"])
@pytest.mark.parametrize("K", [1, 2, 3, 31, 33])
def test_narrow_inputs_whose_exponents_do_and_do_not_fit_float32(fmt, K):
    # Columns of k alternate between products well inside FP32's normal range and
    # products past it or below it, so that one call switches between float32 steps
    # and float64 steps; the results must not show it.
    rng = np.random.default_rng(K)
    m, n = 3, 4
    a = lp.round(rng.standard_normal((m, K)), fmt)
    b = lp.round(rng.standard_normal((K, n)), fmt)
    wild = rng.integers(0, 3, K)
    wild[:2] = [1, 2][:K]
    a[:, wild == 1] *= 2.0**60                       # products past 2**128
    b[wild == 1] *= 2.0**60
    a[:, wild == 2] *= 2.0**-72                      # products near 2**-150: a float32
    b[wild == 2] *= 2.0**-72                         # product would round them
    b[0, 0] = -0.0
    c = rng.choice([0.0, -0.0, 1.0, 2.0**-130], (m, n))
    if K >= 3:
        # acc = max, then a product of -2**128: exactly -2**120 (float32: -inf).
        a[0, :3], b[:3, 1] = [2.0**127 * (2 - 2.0**-7), -2.0**64, 1.0], [1.0, 2.0**64, 0.0]
        c[0, 1] = 0.0
    got = matmul(a, b, model="fp32", c=c, in_fmt=fmt)
    assert_bits(got, fma_loop(a, b, c, **FP32_GRID))


def test_the_plan_takes_float32_only_where_every_product_is_a_normal_float32():
    sq = _module("sequential")
    kernel = sq.Sequential(lp.BF16, lp.FP32, lp.FP32, 2**20)
    at = np.array([1.0, 2.0**64, 2.0**-63, 2.0**-64, np.inf, 0.0]).reshape(6, 1, 1, 1)
    bt = np.array([3.0, 2.0**64, 2.0**-63, 2.0**-63, 1.0, 5.0]).reshape(6, 1, 1, 1)
    assert list(kernel._plan(at, bt)) == [sq._FLOAT32, sq._CAST, sq._FLOAT32, sq._CAST,
                                          sq._CAST, sq._FLOAT32]


@pytest.mark.parametrize("fmt", ["bf16", "fp16", "tf32"])
def test_narrow_inputs_against_the_plain_loop(monkeypatch, fmt):
    monkeypatch.setattr(_module("driver"), "MEMORY_BOUND", 5000)
    rng = np.random.default_rng(3)
    a = lp.round(rng.standard_normal((9, 40)) * 2.0 ** rng.integers(-70, 70, (9, 40)), fmt)
    b = lp.round(rng.standard_normal((40, 11)), fmt)
    a[2, 3], b[5, 1] = np.nan, np.inf
    c = lp.round(rng.standard_normal((9, 11)), "fp32")
    kernel = _module("sequential").Sequential(lp.format(fmt), lp.FP32, lp.FP32, 2**20)
    with np.errstate(all="ignore"):
        want = kernel.reference(a[None], b[None], c[None])[0]
    assert_bits(matmul(a, b, model="fp32", c=c, in_fmt=fmt), want)


# -- the fp16 model ------------------------------------------------------------------

@pytest.mark.parametrize("K", [1, 2, 3, 31, 33])
def test_fp16_model_against_the_exact_loop(K):
    rng = np.random.default_rng(K)
    m, n = 3, 4
    scale = 2.0 ** rng.integers(-14, 8, (m, K))
    a = lp.round(rng.standard_normal((m, K)) * scale, "fp16")
    b = lp.round(rng.standard_normal((K, n)), "fp16")
    a[0] = 255.0                                      # overflows past 65504
    b[:, 0] = rng.choice([0.0, -0.0, 2.0**-24], K)    # zeros, subnormal sums
    c = rng.choice([0.0, -0.0, 1.0, 65504.0, -2.0**-24], (m, n))
    got = matmul(a, b, model="fp16", c=c, in_fmt="fp16")
    assert_bits(got, fma_loop(a, b, c, **FP16_GRID))


def test_fp16_model_against_the_plain_loop(monkeypatch):
    monkeypatch.setattr(_module("driver"), "MEMORY_BOUND", 8000)
    rng = np.random.default_rng(11)
    a = lp.round(rng.standard_normal((10, 37)) * 2.0 ** rng.integers(-20, 9, (10, 37)), "fp16")
    b = lp.round(rng.standard_normal((37, 12)), "fp16")
    a[1, 4], b[6, 3], a[2] = np.nan, -np.inf, 0.0
    c = lp.round(rng.standard_normal((10, 12)), "fp16")
    kernel = _module("sequential").Sequential(lp.FP16, lp.FP16, lp.FP16, 2**20)
    with np.errstate(all="ignore"):
        want = kernel.reference(a[None], b[None], c[None])[0]
    got = matmul(a, b, model="fp16", c=c, in_fmt="fp16")
    assert_bits(got, want)
    # The plain loop rounds through the same round_fp16 as the fast path: the outputs
    # without inf or NaN operands are also held to the exact loop.
    rows, cols = [i for i in range(10) if i != 1], [j for j in range(12) if j != 3]
    assert_bits(got[np.ix_(rows, cols)],
                         fma_loop(a[rows], b[:, cols], c[np.ix_(rows, cols)], **FP16_GRID))


# -- round_fp16, whose passes depend on the values -------------------------------------

def _fp16_kinds(rng):
    return {
        "normal": rng.standard_normal(64) * 2.0 ** rng.integers(-14, 15, 64),
        "ties": (2.0**10 + rng.integers(0, 2**10, 64) + 0.5) * 2.0 ** rng.integers(-24, 6, 64),
        "subnormal": rng.standard_normal(64) * 2.0**-18,
        "tiny": np.array([2.0**-25, -2.0**-25, 2.0**-26, 3 * 2.0**-26, 2.0**-60, 5e-324]),
        "zeros": np.array([0.0, -0.0]),
        "big": np.array([2.0**15, 65504.0, 65519.99, 65520.0, 2.0**16, 2.0**982, 2.0**1006,
                         1.7976931348623157e308]),
        "special": np.array([np.inf, -np.inf, np.nan]),
    }


def test_round_fp16_on_arrays_of_each_kind_alone_and_mixed():
    bf = _module("blockfma")
    rng = np.random.default_rng(0)
    kinds = _fp16_kinds(rng)
    names = list(kinds)
    groups = [[x] for x in names] + [[x, y] for i, x in enumerate(names) for y in names[i + 1:]]
    for group in groups:
        x = np.concatenate([kinds[g] for g in group])
        x = np.concatenate([x, -x])
        with np.errstate(all="ignore"):
            got = bf.round_fp16(x)
            out, work = np.full_like(x, 7.0), np.full_like(x, 7.0)
            into = bf.round_fp16(x, out, work)
        assert into is out
        assert_same(got, lp.round(x, lp.FP16), x)
        assert_bits(into, got)


# -- the block-FMA models: float32 products and int32 sums vs float64 terms ------------

BLOCK_CASES = [("v100", "fp16"), ("t4", "fp16"), ("a100", "fp16"), ("a100", "bf16"),
               ("a100", "tf32"), ("ada", "e4m3"), ("h100", "fp16"), ("h100", "bf16"),
               ("h100", "tf32"), ("h100", "e5m2"), ("h100-mma", "e4m3"), ("b200", "fp16"),
               ("b200", "bf16"), ("b200", "e4m3"), ("b200-mma", "e5m2")]


def _block_operands(rng, fmt, m, k, n, wild):
    a = rng.standard_normal((m, k)) * 2.0 ** rng.integers(-6, 6, (m, k))
    b = rng.standard_normal((k, n))
    # BF16/TF32 exponents that float32 products cannot take:
    if wild == "tiny":           # a block of products near 2**-110: 2**(F - E) > 2**127
        a[:, :16] *= 2.0**-55
        b[:16] *= 2.0**-55
    if wild == "huge" and k >= 3:   # products of 2**140 that cancel
        a[:, :3] = [2.0**70, -2.0**69, -2.0**69]
        b[:3] = 2.0**70
    a, b = lp.round(a, fmt), lp.round(b, fmt)
    a[a.shape[0] // 2] = 0.0
    b[:, 0] = -0.0
    return a, b


# K per case: b200's FP8 blocks of 32 fit int32 sums of at most 16 float32 terms, so
# larger K would not reach the float32 path the test is about.
_FLOAT32_K = [(model, fmt, K) for model, fmt in BLOCK_CASES
              for K in ((1, 3, 16) if (model, fmt) == ("b200", "e4m3") else (1, 3, 31, 33, 40))]


@pytest.mark.parametrize("model, fmt, K", _FLOAT32_K)
def test_float32_terms_equal_float64_terms(monkeypatch, model, fmt, K):
    bf = _module("blockfma")
    calls = _spy(monkeypatch, bf.BlockFMA, "_narrow_sum")
    rng = np.random.default_rng(K)
    out_fmts = ["fp32"] + (["fp16"] if lp.FP16 in lp.MODELS[model].out_formats(fmt) else [])
    for wild in (None, "tiny", "huge"):
        a, b = _block_operands(rng, fmt, 5, K, 6, wild)
        for out in out_fmts:
            c = lp.round(rng.standard_normal((5, 6)) * 2.0 ** rng.integers(-30, 30, (5, 6)), out)
            c[:, ::2] = 0.0
            got = matmul(a, b, model=model, c=c, in_fmt=fmt, out_fmt=out)
            with monkeypatch.context() as patch:
                patch.setattr(bf.BlockFMA, "float32_terms", False)
                want = matmul(a, b, model=model, c=c, in_fmt=fmt, out_fmt=out)
            assert_bits(got, want)
    assert calls, "no span took the float32 products"


@pytest.mark.parametrize("model, fmt", [("h100", "bf16"), ("a100", "tf32"), ("b200", "fp16")])
def test_spans_that_do_and_do_not_fit_float32_in_one_call(monkeypatch, model, fmt):
    # Spans of K (a small MEMORY_BOUND): some with exponents float32 holds, some
    # without, some with inf and NaN, and c that overflows the FP16 output.
    bf, mm = _module("blockfma"), _module("driver")
    monkeypatch.setattr(mm, "MEMORY_BOUND", 40000)
    rng = np.random.default_rng(5)
    K = 160
    a = rng.standard_normal((12, K))
    b = rng.standard_normal((K, 10))
    a[:, 40:56] *= 2.0**90
    b[100:110] *= 2.0**-120
    a, b = lp.round(a, fmt), lp.round(b, fmt)
    a[3, 130], b[140, 2] = np.inf, np.nan
    c = lp.round(rng.standard_normal((12, 10)), "fp32")
    calls = _spy(monkeypatch, bf.BlockFMA, "_narrow_sum")
    with np.errstate(all="ignore"):
        got = matmul(a, b, model=model, c=c, in_fmt=fmt)
        assert calls, "no span took the float32 products"
        monkeypatch.setattr(bf.BlockFMA, "float32_terms", False)
        want = matmul(a, b, model=model, c=c, in_fmt=fmt)
    assert_bits(got, want)


# -- the fp32 model by float32 einsum (Sequential.prepare) ------------------------------

def _count(monkeypatch, module, name):
    """Count the calls of the function ``module.name`` (to check that a path is taken)."""
    calls = []
    original = getattr(module, name)

    def spy(*args):
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(module, name, spy)
    return calls


def _ties(rng, fmt, m, k, n):
    """Operands of ``fmt`` whose running FP32 sums meet a tie at most steps: column 0
    sets each sum near 2**E (2**24, or 2**16 where E4M3's range ends), the later
    products are multiples of a quarter of FP32's ulp there, 2**(E - 23), of both
    signs (ties to even, cancellations, sign changes)."""
    E = 16 if fmt == "e4m3" else 24
    a = rng.choice([1.0, -1.0, 2.0, 3.0, 0.5, -1.5], (m, k)) * 2.0 ** ((E - 24) // 2)
    b = rng.choice([1.0, -1.0, 0.5, 3.0, -2.0, -0.0], (k, n)) * 2.0 ** ((E - 24) // 2)
    a[:, 0], b[0] = 2.0 ** (E // 2), rng.choice([1.0, -1.0, 1.5], n) * 2.0 ** (E // 2)
    if m > 1:
        a[1], b[:, 0] = 0.0, -0.0                        # zero products of both signs
    a, b = lp.round(a, fmt), lp.round(b, fmt)
    assert np.isfinite(a).all() and np.isfinite(b).all()
    return a, b


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "tf32", "e4m3", "e5m2"])
@pytest.mark.parametrize("m, n", [(3, 4), (5, 1), (1, 6)])
@pytest.mark.parametrize("K", [1, 2, 33])
def test_einsum_path_against_the_exact_loop(monkeypatch, fmt, m, n, K):
    calls = _count(monkeypatch, _module("sequential"), "_in_order")
    rng = np.random.default_rng(K * 7 + m)
    a, b = _ties(rng, fmt, m, K, n)
    c = np.zeros((m, n))
    got = matmul(a, b, model="fp32", c=c, in_fmt=fmt)
    assert calls, "the chunks did not take einsum"
    assert_bits(got, fma_loop(a, b, c, **FP32_GRID))


@pytest.mark.parametrize("a, b, want", [
    # BF16 products near the top: 2**127 + 2**127 overflows to inf, which stays.
    ([[2.0**64, 2.0**64, -2.0**64]], [[2.0**63], [2.0**63], [2.0**63]], math.inf),
    # Normal products whose difference is an FP32 subnormal: (1 + 2**-7) 2**-126 - 2**-126.
    ([[2.0**-63 * (1 + 2.0**-7), -2.0**-63]], [[2.0**-63], [2.0**-63]], 2.0**-133),
])
def test_einsum_path_at_the_ends_of_float32(monkeypatch, a, b, want):
    calls = _count(monkeypatch, _module("sequential"), "_in_order")
    a, b = np.array(a), np.array(b)
    b = np.concatenate([b, b], axis=1)                   # two columns: einsum's layout
    got = matmul(a, b, model="fp32", in_fmt="bf16")
    assert calls
    assert list(got[0]) == [want, want]
    assert_bits(got, fma_loop(a, b, np.zeros(got.shape), **FP32_GRID))


@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
def test_einsum_path_against_the_plain_loop(monkeypatch, fmt):
    # Stacks, a broadcast batch, transposed operands and chunks of a small bound.
    sq = _module("sequential")
    monkeypatch.setattr(_module("driver"), "MEMORY_BOUND", 60000)
    calls = _count(monkeypatch, sq, "_in_order")
    rng = np.random.default_rng(21)
    a = lp.round(rng.standard_normal((3, 40, 57)) * 2.0 ** rng.integers(-9, 9, (3, 40, 57)), fmt)
    b = lp.round(rng.standard_normal((50, 57)).T * 2.0 ** rng.integers(-9, 9, (57, 50)), fmt)
    a[:, 3:5] = 0.0
    got = matmul(a, b, model="fp32", in_fmt=fmt)
    assert len(calls) > 3, "the small bound did not split the outputs into blocks"
    kernel = sq.Sequential(lp.format(fmt), lp.FP32, lp.FP32, 2**20)
    want = kernel.reference(a, np.broadcast_to(b, (3, 57, 50)), np.zeros((3, 40, 50)))
    assert_bits(got, want)


@pytest.mark.parametrize("fmt, x, y", [
    (lp.Format(9, 3), 2.0**140, 2.0**-50), (lp.Format(9, 3), 2.0**-160, 2.0**50),
    (lp.Format(8, 3, bias=200), 2.0**-150, 2.0**50),
    (lp.Format(8, 3, bias=60), 2.0**140, 2.0**-50)])
def test_factors_that_float32_cannot_hold_take_float64(fmt, x, y):
    # Formats wider than float32: each product 2**90 or 2**-110 is a normal float32,
    # but a factor is not a float32 value, so neither einsum nor the float32 steps
    # may copy it to float32 (found by a counterexample hunt).
    a, b = np.array([[x, 0.0], [0.0, x]]), np.full((2, 2), y)
    for way in ("einsum", "steps"):
        with pytest.MonkeyPatch.context() as patch:
            if way == "steps":
                patch.setattr(_module("sequential"), "einsum_adds_in_order", lambda: False)
            got = matmul(a, b, model="fp32", in_fmt=fmt)
        assert_bits(got, fma_loop(a, b, np.zeros((2, 2)), **FP32_GRID))


@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
@pytest.mark.parametrize("shape", ["row", "column", "stack"])
def test_einsum_path_with_a_bias_against_the_exact_loop(monkeypatch, fmt, shape):
    # c, one row repeated (a bias) or one column, enters as a first product 1 * c:
    # odd values near the ties' scale, so that the first additions tie too.
    calls = _count(monkeypatch, _module("sequential"), "_in_order")
    rng = np.random.default_rng(len(shape))
    m, n, K = (3, 4, 17)
    a, b = _ties(rng, fmt, m, K, n)
    bias = rng.choice([1.0, -3.0, 2.0**24 + 2, 0.0, 5 * 2.0**-140], n if shape != "column" else m)
    c = bias[None, :] if shape != "column" else bias[:, None]
    if shape == "stack":
        a = np.stack([a, -a, a[::-1]])                   # gathered copies of a stack
    got = matmul(a, b, model="fp32", c=c, in_fmt=fmt)
    assert calls
    for i, ai in enumerate(a if shape == "stack" else [a]):
        want = fma_loop(ai, b, np.broadcast_to(c, (m, n)), **FP32_GRID)
        assert_bits(got[i] if shape == "stack" else got, want)


@pytest.mark.parametrize("K", [1, 3, 40])
@pytest.mark.parametrize("bound", [None, 12000])
def test_einsum_path_with_any_c_against_the_exact_loop(monkeypatch, K, bound):
    # A c of its own per output enters as the block's rows of c against an identity
    # (products 1 * c[i, j] and 0 * c[t, j] first); a small bound makes row blocks of
    # several sizes, the last one shorter. c: FP32 values near the ties' scale, +0,
    # an FP32 subnormal, and one that is not an FP32 value (rounded in first).
    sq = _module("sequential")
    if bound:
        monkeypatch.setattr(_module("driver"), "MEMORY_BOUND", bound)
    calls = _count(monkeypatch, sq, "_in_order")
    rng = np.random.default_rng(K)
    a, b = _ties(rng, "bf16", 21, K, 5)
    c = rng.choice([1.0, -3.0, 2.0**24 + 2, 0.0, 5 * 2.0**-140, 0.1], (21, 5))
    got = matmul(a, b, model="fp32", c=c, in_fmt="bf16")
    assert calls and (bound is None or len(calls) > 2)
    assert_bits(got, fma_loop(a, b, lp.round(c, "fp32"), **FP32_GRID))


@pytest.mark.parametrize("case", ["-0", "-0 bias", "inf bias", "inf", "nan", "range",
                                  "dot", "order"])
def test_einsum_path_is_not_taken_where_it_could_differ(monkeypatch, case):
    sq = _module("sequential")
    calls = _count(monkeypatch, sq, "_in_order")
    rng = np.random.default_rng(2)
    a, b = _ties(rng, "bf16", 4, 9, 3)
    c = np.zeros((4, 3))
    if case == "-0":
        c[0, 0] = -0.0                                   # einsum's sums start at +0
    elif case in ("-0 bias", "inf bias"):
        c = np.array([1.0, -0.0 if case == "-0 bias" else np.inf, 2.0])
    elif case in ("inf", "nan"):
        a[2, 5] = np.inf if case == "inf" else np.nan
    elif case == "range":
        a[0, 1], b[1, 0] = 2.0**-70, 2.0**-70            # 2**-140: not a normal float32
    elif case == "dot":
        a, b, c = a[:1], b[:, :1], c[:1, :1]             # one output: einsum's own dot order
    else:
        monkeypatch.setattr(sq, "einsum_adds_in_order", lambda: False)
    got = matmul(a, b, model="fp32", c=c, in_fmt="bf16")
    assert not calls
    kernel = sq.Sequential(lp.BF16, lp.FP32, lp.FP32, 2**20)
    c = np.broadcast_to(c, got.shape)
    with np.errstate(all="ignore"):
        want = kernel.reference(a[None], b[None], c[None])[0]
    assert_bits(got, want)


@pytest.mark.parametrize("m", [1, 3])
def test_einsum_path_blocks_of_one_column_and_one_output(monkeypatch, m):
    # A small bound cuts N = 11 columns into blocks of 5, 5 and 1: the last block is a
    # single column (rows taken as columns) or, with one row, a single output, which
    # einsum would sum as a dot in its own order. Its terms 2**24, 1 (62 times),
    # -2**24 sum to 0 only in the order of k.
    sq = _module("sequential")
    K = 64
    monkeypatch.setattr(_module("driver"), "MEMORY_BOUND", 8 * 4 * K * 5)
    calls = _count(monkeypatch, sq, "_in_order")
    a, b = np.ones((m, K)), np.ones((K, 11))
    a[:, 0], a[:, -1], b[0], b[-1] = 4096.0, -4096.0, 4096.0, 4096.0
    got = matmul(a, b, model="fp32", in_fmt="bf16")
    assert len(calls) == 3
    assert not got.any()
    assert_bits(got, fma_loop(a, b, np.zeros((m, 11)), **FP32_GRID))


def _in_k_order(x, y):
    """x @ y in float32, each output's products added in the order of k."""
    acc = np.zeros((x.shape[0], y.shape[1]), np.float32)
    for k in range(x.shape[1]):
        acc += x[:, k, None] * y[None, k, :]
    return acc


def test_the_einsum_probe_sees_another_order(monkeypatch):
    sq = _module("sequential")
    sq.einsum_adds_in_order.cache_clear()
    # Backwards over k: -2**24 first, then the 1s are kept (not ties) and the sum is 62.
    # (BLAS's own order is no fixed counterexample: some kernels add these in order.)
    monkeypatch.setattr(sq.np, "einsum",
                        lambda spec, x, y, optimize: _in_k_order(x[:, ::-1], y[::-1]))
    try:
        assert sq.einsum_adds_in_order() is False
    finally:
        monkeypatch.undo()
        sq.einsum_adds_in_order.cache_clear()
    # Partial sums over 4 lanes (k mod 4), added in lane order.
    def lanes(spec, x, y, optimize):
        parts = [_in_k_order(x[:, j::4], y[j::4]) for j in range(4)]
        return ((parts[0] + parts[1]) + parts[2]) + parts[3]
    monkeypatch.setattr(sq.np, "einsum", lanes)
    try:
        assert sq.einsum_adds_in_order() is False
    finally:
        monkeypatch.undo()
        sq.einsum_adds_in_order.cache_clear()
    # A plain loop in the order of k passes it.
    monkeypatch.setattr(sq.np, "einsum", lambda spec, x, y, optimize: _in_k_order(x, y))
    try:
        assert sq.einsum_adds_in_order() is True
    finally:
        monkeypatch.undo()
        sq.einsum_adds_in_order.cache_clear()


def test_einsum_path_records_the_flags_of_the_plain_path(monkeypatch):
    # Finite operands: an infinite output is an overflow, counted as the driver's
    # per-output check counts it (held against the steps without einsum).
    sq = _module("sequential")
    a = lp.round(np.array([[2.0**64, 2.0**64, -2.0**64], [1.0, 2.0, 3.0]]), "bf16")
    b = lp.round(np.array([[2.0**63, 1.0], [2.0**63, 1.0], [2.0**63, 1.0]]), "bf16")
    calls = _count(monkeypatch, sq, "_in_order")
    with lp.flags() as got:
        r = matmul(a, b, model="fp32", in_fmt="bf16")
    assert calls and np.isinf(r[0, 0])
    monkeypatch.setattr(sq, "einsum_adds_in_order", lambda: False)
    with lp.flags() as want:
        r2 = matmul(a, b, model="fp32", in_fmt="bf16")
    assert len(calls) == 1
    assert_bits(r, r2)
    assert got.overflow == want.overflow == 1 and got.invalid == want.invalid == 0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_least_nonzero_magnitude_equals_the_masked_minimum(dtype):
    # `prepare` bounds products by the least nonzero factor; NumPy's masked minimum
    # (where=x > 0) is the oracle, on zeros, subnormals, the largest value and strides.
    rng = np.random.default_rng(5)
    info = np.finfo(dtype)
    x = np.abs(rng.standard_normal((40, 30))).astype(dtype)
    x[rng.random(x.shape) < 0.5] = 0
    cases = [x, x[:, ::-3], x.T, np.zeros((3, 4), dtype),
             np.array([0, info.smallest_subnormal, 1], dtype),
             np.array([info.max, 0], dtype), np.array([info.tiny, 0, info.max], dtype)]
    least = _module("blockfma").least_nonzero
    for case in cases:
        assert least(case) == case.min(initial=np.inf, where=case > 0)
