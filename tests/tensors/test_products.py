"""NumPy's products and polynomials on Tensors (lowprec/tensors/products.py): composed
and correctly rounded ones against a step-by-step Fraction reference of the
documented order; matmul-model ones against the ``"exact"`` model's definition (the
exact dot product, computed with Fraction, rounded once into FP32), against the
``"fp32"`` model's (products exact, added left to right in the documented order, each
addition rounded to FP32), and against `lp.matmul` of the explicitly built matrix (a
dispatch check); refusals and errors by name."""

import functools
import warnings
from fractions import Fraction

import numpy as np
import pytest
from tensor_inputs import draw as _draw
from tensor_inputs import rr

import lowprec as lp
from helpers import assert_values
from lowprec.tensors import HANDLED_FUNCTIONS, HANDLED_UFUNCS
from lowprec.tensors.core import KINDS

FORMATS = [lp.FP16, lp.BF16, lp.FP8_E4M3, lp.FP32]
ids = lambda f: f.name   # noqa: E731
draw = functools.partial(_draw, cap=3.0, share=16, ones=0.15)
CLASSES = {"exact", "correctly rounded", "rounded once", "composed", "matmul model", "plain"}


def exact_dot(xs, ys):
    """The exact dot product, rounded once into FP32: the ``"exact"`` model."""
    return rr(sum((Fraction(x) * Fraction(y) for x, y in zip(xs, ys)), Fraction(0)), lp.FP32)


def fp32_dot(xs, ys):
    """The ``"fp32"`` model: exact products added in the given order, each addition
    rounded to FP32."""
    s = 0.0
    for x, y in zip(xs, ys):
        s = rr(Fraction(s) + Fraction(x) * Fraction(y), lp.FP32)
    return s


def pairwise(xs, fmt):
    """`lp.sum`'s pairwise order: level by level, an odd last term moved up."""
    xs = [rr(x, fmt) for x in xs]
    if not xs:
        return 0.0
    while len(xs) > 1:
        nxt = [rr(Fraction(xs[i]) + Fraction(xs[i + 1]), fmt) for i in range(0, len(xs) - 1, 2)]
        xs = nxt + ([xs[-1]] if len(xs) % 2 else [])
    return xs[0]


# -- convolve, correlate, polymul ----------------------------------------------------

def conv_terms(a, v):
    """Per output of the full convolution: the pairs (a[j], v[k - j]), j increasing."""
    n, m = len(a), len(v)
    return [[(a[j], v[k - j]) for j in range(n) if 0 <= k - j < m] for k in range(n + m - 1)]


def corr_terms(a, v):
    """NumPy's correlation, c[k] = sum_i a[i + k] v[i] for k from -(m-1) to n-1: the
    pairs in increasing index of a."""
    n, m = len(a), len(v)
    return [[(a[i + k], v[i]) for i in range(m) if 0 <= i + k < n] for k in range(-(m - 1), n)]


def cut(full, n, m, mode):
    """NumPy's modes as slices of the full output: same is centred (length max(n, m)),
    valid where the shorter sequence overlaps completely."""
    s, big = min(n, m), max(n, m)
    start = {"full": 0, "same": (s - 1) // 2, "valid": s - 1}[mode]
    return full[start:start + {"full": n + m - 1, "same": big, "valid": big - s + 1}[mode]]


LENGTHS = [(7, 3), (3, 7), (5, 5), (1, 4), (6, 1)]


@pytest.mark.parametrize("fmt", FORMATS, ids=ids)
@pytest.mark.parametrize("n,m", LENGTHS)
def test_convolve_and_correlate_are_dot_products_of_the_overlap(fmt, n, m):
    a, v = draw(fmt, n, seed=n * 10 + m), draw(fmt, m, seed=n * 10 + m + 1)
    ta, tv = lp.tensor(a, fmt), lp.tensor(v, fmt)
    for mode in ("full", "same", "valid"):
        with lp.context(matmul="exact"):
            r = np.convolve(ta, tv, mode)
            c = np.correlate(ta, tv, mode)
        assert r.fmt == lp.FP32 and c.fmt == lp.FP32
        assert_values(r.values, cut([exact_dot(*zip(*p)) for p in conv_terms(a, v)], n, m, mode))
        assert_values(c.values, cut([exact_dot(*zip(*p)) for p in corr_terms(a, v)], n, m, mode))
        assert r.shape == np.convolve(a, v, mode).shape
        # The default "fp32" model: the products in increasing index of a.
        r = np.convolve(ta, tv, mode)
        assert_values(r.values, cut([fp32_dot(*zip(*p)) for p in conv_terms(a, v)], n, m, mode))
        c = np.correlate(ta, tv, mode)
        assert_values(c.values, cut([fp32_dot(*zip(*p)) for p in corr_terms(a, v)], n, m, mode))


@pytest.mark.parametrize("fmt", [lp.BF16, lp.FP8_E4M3], ids=ids)
def test_convolve_valid_is_the_window_matrix_through_matmul(fmt):
    a, v = draw(fmt, 9, seed=3), draw(fmt, 4, seed=4)
    windows = np.array([a[i:i + 4] for i in range(6)])        # built by hand
    for model in ("fp32", "h100", "fp16"):
        with lp.context(matmul=model):
            r = np.convolve(lp.tensor(a, fmt), lp.tensor(v, fmt), "valid")
        expected = lp.matmul(windows, v[::-1].copy(), model=model, in_fmt=fmt)
        assert_values(r.values, expected, model)
    # The longer second operand: a times a window matrix of v.
    vv = np.array([[v[k - j] for k in range(3, 4)] for j in range(4)])
    r = np.convolve(lp.tensor(a[:4], fmt), lp.tensor(v, fmt), "valid")
    assert_values(r.values, lp.matmul(a[:4], vv, in_fmt=fmt).reshape(-1))


def test_convolve_keeps_infinities_as_numpy_and_takes_plain_and_scalar_operands():
    r = np.convolve(lp.tensor([1.0, 1.0], "fp16"), lp.tensor([np.inf, 1.0], "fp16"))
    assert_values(r.values, np.convolve([1.0, 1.0], [np.inf, 1.0]))
    a = draw(lp.BF16, 5, seed=5)
    with lp.context(matmul="exact"):
        r = np.convolve(lp.tensor(a, "bf16"), [0.1, 1.0])
        p = np.polymul(lp.tensor(a, "bf16"), 3.0)
    w = [rr(Fraction(0.1), lp.BF16), 1.0]        # a plain operand rounded in (RNE)
    assert_values(r.values, [exact_dot(*zip(*t)) for t in conv_terms(a, w)])
    assert_values(p.values, [exact_dot([x], [3.0]) for x in a])


@pytest.mark.parametrize("fmt", [lp.FP16, lp.FP8_E4M3], ids=ids)
@pytest.mark.parametrize("seed", range(2))
def test_polymul_is_the_full_convolution(fmt, seed):
    a, b = draw(fmt, 4, seed), draw(fmt, 3, seed + 10)
    with lp.context(matmul="exact"):
        r = np.polymul(lp.tensor(a, fmt), lp.tensor(b, fmt))
    assert r.fmt == lp.FP32
    assert_values(r.values, [exact_dot(*zip(*t)) for t in conv_terms(a, b)])


def test_convolve_errors():
    t = lp.tensor([1.0, 2.0], "bf16")
    with pytest.raises(ValueError, match="mode"):
        np.convolve(t, t, "middle")
    with pytest.raises(ValueError, match="cannot be empty"):
        np.convolve(t, lp.tensor(np.zeros(0), "bf16"))
    with pytest.raises(ValueError, match="1-D"):
        np.correlate(lp.tensor(np.ones((2, 2)), "bf16"), t)


# -- kron, vdot, vecdot, matvec, vecmat, cross -------------------------------------------

def fractions(v):
    return np.vectorize(Fraction, otypes=[object])(np.asarray(v))


@pytest.mark.parametrize("fmt", FORMATS + [lp.FP4_E2M1], ids=ids)
@pytest.mark.parametrize("shapes", [((3,), (4,)), ((2, 3), (3, 2)), ((2, 2, 3), (3,)),
                                    ((2,), (2, 3))], ids=str)
def test_kron_rounds_each_product_once(fmt, shapes):
    a, b = draw(fmt, shapes[0], seed=1), draw(fmt, shapes[1], seed=2)
    r = np.kron(lp.tensor(a, fmt), lp.tensor(b, fmt))
    expected = np.vectorize(lambda x: rr(x, fmt), otypes=[float])(
        np.kron(fractions(a), fractions(b)))
    assert r.fmt == fmt
    assert_values(r.values, expected)


@pytest.mark.parametrize("fmt", FORMATS, ids=ids)
@pytest.mark.parametrize("seed", range(2))
def test_vdot_and_vecdot_are_matmul_dot_products(fmt, seed):
    a, b = draw(fmt, (3, 5), seed), draw(fmt, (3, 5), seed + 20)
    ta, tb = lp.tensor(a, fmt), lp.tensor(b, fmt)
    with lp.context(matmul="exact"):
        r = np.vdot(ta, tb)
        d = np.vecdot(ta, tb)
        e = np.vecdot(ta, tb[0])          # broadcast
    assert r.fmt == lp.FP32 and r.shape == () and r.item() == exact_dot(a.ravel(), b.ravel())
    assert_values(d.values, [exact_dot(x, y) for x, y in zip(a, b)])
    assert_values(e.values, [exact_dot(x, b[0]) for x in a])
    # The default model: the same products as lp.matmul of the explicit vectors.
    assert_values(np.vdot(ta, tb).values, lp.matmul(a.ravel(), b.ravel(), in_fmt=fmt))
    assert_values(np.vecdot(ta, tb).values, [lp.matmul(x, y, in_fmt=fmt) for x, y in zip(a, b)])
    assert_values(np.vdot(ta, tb).values, fp32_dot(a.ravel(), b.ravel()))


@pytest.mark.parametrize("fmt", FORMATS, ids=ids)
def test_matvec_and_vecmat_are_matmul_products(fmt):
    if not hasattr(np, "matvec"):
        pytest.skip("NumPy < 2.2 has no matvec/vecmat")
    m, v, w = draw(fmt, (2, 3, 4), seed=3), draw(fmt, 4, seed=4), draw(fmt, 3, seed=5)
    tm = lp.tensor(m, fmt)
    with lp.context(matmul="exact"):
        r = np.matvec(tm, lp.tensor(v, fmt))
        s = np.vecmat(lp.tensor(w, fmt), tm)
    assert r.fmt == lp.FP32 and r.shape == (2, 3) and s.shape == (2, 4)
    assert_values(r.values, [[exact_dot(row, v) for row in mat] for mat in m])
    assert_values(s.values, [[exact_dot(w, col) for col in mat.T] for mat in m])
    assert_values(np.matvec(tm, lp.tensor(v, fmt)).values, lp.matmul(m, v, in_fmt=fmt))
    assert_values(np.vecmat(lp.tensor(w, fmt), tm).values, lp.matmul(w, m, in_fmt=fmt))


def ref_cross(a, b, fmt):
    """NumPy's components, each product and difference rounded (Fraction)."""
    p = lambda x, y: rr(Fraction(x) * Fraction(y), fmt)          # noqa: E731
    d = lambda x, y: rr(Fraction(x) - Fraction(y), fmt)          # noqa: E731
    if len(a) == 2 and len(b) == 2:
        return d(p(a[0], b[1]), p(a[1], b[0]))
    if len(a) == 2:
        return [p(a[1], b[2]), -p(a[0], b[2]), d(p(a[0], b[1]), p(a[1], b[0]))]
    if len(b) == 2:
        return [-p(a[2], b[1]), p(a[2], b[0]), d(p(a[0], b[1]), p(a[1], b[0]))]
    return [d(p(a[1], b[2]), p(a[2], b[1])), d(p(a[2], b[0]), p(a[0], b[2])),
            d(p(a[0], b[1]), p(a[1], b[0]))]


@pytest.mark.parametrize("fmt", FORMATS, ids=ids)
@pytest.mark.parametrize("dims", [(3, 3), (2, 3), (3, 2), (2, 2)], ids=str)
def test_cross_two_rounded_products_and_a_rounded_difference(fmt, dims):
    a, b = draw(fmt, (4, dims[0]), seed=6), draw(fmt, (4, dims[1]), seed=7)
    ctx = pytest.warns(DeprecationWarning, match="2-dimensional") if 2 in dims else \
        warnings.catch_warnings()
    with ctx:
        r = np.cross(lp.tensor(a, fmt), lp.tensor(b, fmt))
    assert r.fmt == fmt
    assert_values(r.values, [ref_cross(x, y, fmt) for x, y in zip(a, b)])
    if dims == (3, 3):     # the vectors along axis 0, the result's along axis 0 too
        r = np.cross(lp.tensor(a.T, fmt), lp.tensor(b.T, fmt), axis=0)
        assert_values(r.values, np.transpose([ref_cross(x, y, fmt) for x, y in zip(a, b)]))
        r = np.cross(lp.tensor(a.T, fmt), lp.tensor(b, fmt), axisa=0, axisc=0)
        assert_values(r.values, np.transpose([ref_cross(x, y, fmt) for x, y in zip(a, b)]))


def test_cross_errors():
    with pytest.raises(ValueError, match="dimension must be 2 or 3"):
        np.cross(lp.tensor(np.ones(4), "bf16"), lp.tensor(np.ones(4), "bf16"))


# -- polynomials ---------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS, ids=ids)
@pytest.mark.parametrize("seed", range(2))
def test_polyval_is_horner_each_step_rounded(fmt, seed):
    p, x = draw(fmt, 5, seed, scale=1.0), draw(fmt, 6, seed + 30, scale=1.0)
    r = np.polyval(lp.tensor(p, fmt), lp.tensor(x, fmt))
    expected = []
    for xv in x:
        y = 0.0
        for c in p:
            y = rr(Fraction(rr(Fraction(y) * Fraction(xv), fmt)) + Fraction(c), fmt)
        expected.append(y)
    assert r.fmt == fmt
    assert_values(r.values, expected)


@pytest.mark.parametrize("fmt", FORMATS, ids=ids)
def test_polyadd_and_polysub_round_each_coefficient_once(fmt):
    a, b = draw(fmt, 5, seed=8), draw(fmt, 3, seed=9)
    ta, tb = lp.tensor(a, fmt), lp.tensor(b, fmt)
    pad = [0.0, 0.0] + list(b)
    add = [rr(Fraction(x) + Fraction(y), fmt) for x, y in zip(a, pad)]
    sub = [rr(Fraction(x) - Fraction(y), fmt) for x, y in zip(a, pad)]
    assert_values(np.polyadd(ta, tb).values, add)
    assert_values(np.polyadd(tb, ta).values, add)
    assert_values(np.polysub(ta, tb).values, sub)
    assert_values(np.polysub(tb, ta).values, [rr(-Fraction(s), fmt) for s in sub])
    assert np.polyadd(ta, tb).fmt == fmt


@pytest.mark.parametrize("fmt", FORMATS, ids=ids)
def test_polyder_and_polyint_one_rounding_per_coefficient_and_round(fmt):
    p = draw(fmt, 5, seed=10)
    der = [Fraction(c) for c in p]
    for m in range(4):
        assert_values(np.polyder(lp.tensor(p, fmt), m).values, der, m)
        n = len(der) - 1
        der = [rr(c * (n - i), fmt) for i, c in enumerate(der[:-1])]
    k = [0.1, -2.5]
    ki = [rr(Fraction(x), fmt) for x in k]                 # rounded in once
    ints = [Fraction(c) for c in p]
    for i in range(2):
        n = len(ints)
        ints = [rr(c / (n - j), fmt) for j, c in enumerate(ints)] + [ki[i]]
    r = np.polyint(lp.tensor(p, fmt), 2, k=k)
    assert r.fmt == fmt
    assert_values(r.values, ints)
    assert_values(np.polyint(lp.tensor(p, fmt)).values,
                  [rr(Fraction(c) / (5 - j), fmt) for j, c in enumerate(p)] + [0.0])
    with pytest.raises(ValueError, match="positive"):
        np.polyder(lp.tensor(p, fmt), -1)
    with pytest.raises(ValueError, match="k must be"):
        np.polyint(lp.tensor(p, fmt), 3, k=[1.0, 2.0])


@pytest.mark.parametrize("fmt", FORMATS, ids=ids)
def test_vander_is_a_cumulative_product_each_step_rounded(fmt):
    x = draw(fmt, 4, seed=11, scale=1.5)
    rows = []
    for xv in x:
        powers = [1.0, xv]
        for _ in range(3):
            powers.append(rr(Fraction(powers[-1]) * Fraction(xv), fmt))
        rows.append(powers)
    r = np.vander(lp.tensor(x, fmt), 5, increasing=True)
    assert r.fmt == fmt
    assert_values(r.values, rows)
    assert_values(np.vander(lp.tensor(x, fmt)).values, np.array(rows)[:, 3::-1])
    with pytest.raises(ValueError, match="one-dimensional"):
        np.vander(lp.tensor(np.ones((2, 2)), fmt))


# -- einsum --------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS, ids=ids)
def test_einsum_of_one_operand_diagonals_and_sums(fmt):
    a = draw(fmt, (5, 5), seed=12)
    t = lp.tensor(a, fmt)
    tr = np.einsum("ii", t)
    assert tr.fmt == fmt and tr.shape == () and tr.item() == pairwise(np.diagonal(a), fmt)
    d = np.einsum("ii->i", t)
    assert d.fmt == fmt
    assert_values(d.values, np.diagonal(a))
    s = np.einsum("ij->i", t[:, :4])
    assert s.fmt == fmt
    assert_values(s.values, [pairwise(row, fmt) for row in a[:, :4]])
    assert_values(np.einsum("ij->", t).values, pairwise(a.ravel(), fmt))
    assert_values(np.einsum("ji", t).values, a.T)
    b = draw(fmt, (3, 3, 2), seed=13)
    assert_values(np.einsum("iij->ji", lp.tensor(b, fmt)).values, np.einsum("iij->ji", b))


def exact_matmul(x, y):
    return np.array([[exact_dot(row, col) for col in np.asarray(y).T] for row in np.asarray(x)])


@pytest.mark.parametrize("fmt", FORMATS, ids=ids)
@pytest.mark.parametrize("seed", range(2))
def test_einsum_contractions_through_the_exact_model(fmt, seed):
    a, b, c = draw(fmt, (2, 3), seed), draw(fmt, (3, 4), seed + 1), draw(fmt, (4, 2), seed + 2)
    ta, tb, tc = lp.tensor(a, fmt), lp.tensor(b, fmt), lp.tensor(c, fmt)
    with lp.context(matmul="exact"):
        r = np.einsum("ij,jk,kl->il", ta, tb, tc)
        dot = np.einsum("i,i", tb[:, 0], tb[:, 1])
        x, y = draw(fmt, (2, 1, 3, 4), seed + 3), draw(fmt, (3, 4, 2), seed + 4)
        e = np.einsum("...ij,...jk", lp.tensor(x, fmt), lp.tensor(y, fmt))
        pre = np.einsum("ij,jk->k", ta, tb)
    # Left to right, the intermediate a @ b rounded into FP32 (the model's output).
    assert r.fmt == lp.FP32
    assert_values(r.values, exact_matmul(exact_matmul(a, b), c))
    assert dot.shape == () and dot.item() == exact_dot(b[:, 0], b[:, 1])
    assert e.shape == (2, 3, 3, 2)
    assert_values(e.values, [[exact_matmul(x[i, 0], y[j]) for j in range(3)] for i in range(2)])
    # i only in a: summed first as np.sum (pairwise, a's format), then the product.
    cols = [pairwise(a[:, j], fmt) for j in range(3)]
    assert_values(pre.values, exact_matmul([cols], b)[0])


@pytest.mark.parametrize("fmt", [lp.BF16, lp.FP8_E4M3], ids=ids)
def test_einsum_of_two_operands_is_the_batched_matmul(fmt):
    a, b = draw(fmt, (2, 3, 4), seed=14), draw(fmt, (2, 4, 5), seed=15)
    ta, tb = lp.tensor(a, fmt), lp.tensor(b, fmt)
    for model in ("fp32", "h100"):
        with lp.context(matmul=model):
            r = np.einsum("bij,bjk->bki", ta, tb, optimize="greedy")
        expected = np.transpose(lp.matmul(a, b, model=model, in_fmt=fmt), (0, 2, 1))
        assert r.fmt == lp.FP32
        assert_values(r.values, expected)
    # NumPy's other calling form, and a plain operand rounded in (RNE).
    r = np.einsum(ta[0], [0, 1], b[0], [1, 2], [0, 2])
    assert_values(r.values, lp.matmul(a[0], b[0], in_fmt=fmt))
    r = np.einsum("ij,jk", ta[0], np.full((4, 2), 0.1))
    assert_values(r.values, lp.matmul(a[0], np.full((4, 2), rr(Fraction(0.1), fmt)), in_fmt=fmt))


def test_einsum_refusals_and_errors():
    t = lp.tensor(np.ones((2, 3)), "bf16")
    with pytest.raises(TypeError, match="out="):
        np.einsum("ij->i", t, out=np.zeros(2))
    with pytest.raises(TypeError, match="dtype="):
        np.einsum("ij->i", t, dtype=np.float32)
    with pytest.raises(ValueError, match="diagonal needs equal sizes"):
        np.einsum("ii", t)
    with pytest.raises(ValueError, match="could not be broadcast"):
        np.einsum("ij,jk", t, t)
    with pytest.raises(ValueError, match="2 terms"):
        np.einsum("ij,jk", t)
    with pytest.raises(ValueError, match="ellipsis"):
        np.einsum("...j->j", t)
    path, _ = np.einsum_path("ij,jk,kl", t, t.T, t, optimize="greedy")
    assert path == np.einsum_path("ij,jk,kl", np.ones((2, 3)), np.ones((3, 2)),
                                  np.ones((2, 3)), optimize="greedy")[0]


# -- the tables ---------------------------------------------------------------------

def test_every_entry_has_a_class_and_an_order():
    names = [np.convolve, np.correlate, np.polymul, np.kron, np.vdot, np.cross, np.polyval,
             np.polyadd, np.polysub, np.polyder, np.polyint, np.vander, np.einsum,
             np.einsum_path]
    for fn in names:
        assert fn in HANDLED_FUNCTIONS and KINDS[fn][0] in CLASSES and KINDS[fn][1]
    for name in ("vecdot", "matvec", "vecmat"):
        fn = getattr(np, name, None)
        if isinstance(fn, np.ufunc):
            assert name in HANDLED_UFUNCS and KINDS[name][0] == "matmul model"
        elif fn is not None:
            assert fn in HANDLED_FUNCTIONS and KINDS[fn][0] == "matmul model"


@pytest.mark.parametrize("sa, sb", [((0,), (0,)), ((2, 0), (3, 0)), ((0,), (2, 0))])
def test_inner_of_empty_contractions_is_zero_as_numpy(sa, sb):
    # an empty contraction sums nothing (0.0), as np.dot, np.vdot and @ do.
    a, b = np.zeros(sa), np.zeros(sb)
    want = np.inner(a, b)
    got = np.inner(lp.tensor(a, "fp16"), lp.tensor(b, "fp16"))
    assert got.shape == want.shape and np.array_equal(np.asarray(got), want)
    e = lp.tensor(np.zeros(0), "fp16")
    assert np.dot(e, e).fmt == np.vdot(e, e).fmt == (e @ e).fmt == np.inner(e, e).fmt
    assert float(np.dot(e, e)) == float(np.vdot(e, e)) == float(e @ e) == 0.0
