"""NumPy functions on Tensors: exact ones against NumPy on the decoded
values, composed ones against a step-by-step Fraction-then-round reference, the
refusal message, and docs/numpy-support.md against the dispatch tables."""

from fractions import Fraction

import numpy as np
import pytest
from tensor_inputs import draw, rr

import lowprec as lp
from helpers import ROOT, assert_values
from lowprec.tensors.core import KINDS
from lowprec.tensors.coverage import REFUSED, support_table, unclassified

SIGNED = [f for f in lp.NAMED_FORMATS.values() if f.signed]    # the formats of Tensors
FEW = [lp.FP16, lp.BF16, lp.FP8_E4M3, lp.FP32, lp.FP4_E2M1, lp.FP8_E5M2FNUZ]
ids = lambda f: f.name   # noqa: E731


# -- exact -------------------------------------------------------------------------

EXACT = {
    "sort": lambda v: np.sort(v), "sort0": lambda v: np.sort(v, axis=0),
    "diag": lambda v: np.diag(v), "diag1": lambda v: np.diag(v[0]),
    "diagonal": lambda v: np.diagonal(v, 1), "triu": lambda v: np.triu(v),
    "tril": lambda v: np.tril(v, -1), "flip": lambda v: np.flip(v),
    "fliplr": lambda v: np.fliplr(v), "flipud": lambda v: np.flipud(v),
    "roll": lambda v: np.roll(v, 2, axis=1), "rot90": lambda v: np.rot90(v),
    "unique": lambda v: np.unique(v), "take": lambda v: np.take(v, [0, 5, 3]),
    "median_odd": lambda v: np.median(v[:, :5], axis=1),
    "median_all_odd": lambda v: np.median(v[:3, :5]),
    "nanmax": lambda v: np.nanmax(v, axis=0), "nanmin": lambda v: np.nanmin(v),
}


@pytest.mark.parametrize("fmt", SIGNED, ids=ids)
@pytest.mark.parametrize("name", sorted(EXACT))
def test_exact_functions_equal_numpy_on_the_values(fmt, name):
    v = draw(fmt, (4, 6), seed=len(name))
    t = lp.tensor(v, fmt)
    r = EXACT[name](t)
    assert isinstance(r, lp.Tensor) and r.fmt == fmt
    assert_values(r.values, EXACT[name](v))


@pytest.mark.parametrize("fmt", SIGNED, ids=ids)
def test_exact_functions_with_plain_results(fmt):
    v = draw(fmt, (4, 6), seed=1)
    t = lp.tensor(v, fmt)
    assert np.array_equal(np.argsort(t, axis=None, kind="stable"),
                          np.argsort(v, axis=None, kind="stable"))
    s = np.sort(v.ravel())
    assert np.array_equal(np.searchsorted(lp.tensor(s, fmt), t), np.searchsorted(s, v))
    u, idx, counts = np.unique(t, return_index=True, return_counts=True)
    eu, eidx, ecounts = np.unique(v, return_index=True, return_counts=True)
    assert u.fmt == fmt
    assert_values(u.values, eu)
    assert np.array_equal(idx, eidx) and np.array_equal(counts, ecounts)
    counts, edges = np.histogram(t, bins=5)
    ecounts, eedges = np.histogram(v, bins=5)
    assert type(counts) is np.ndarray and np.array_equal(counts, ecounts)
    assert np.array_equal(edges, eedges)
    # (weights= and density= are composed: tests/test_numpy_statistics.py)


def test_tensor_sort_is_in_place_and_exact():
    v = draw(lp.BF16, (3, 5), seed=2)
    t = lp.tensor(v, "bf16")
    assert t.sort() is None
    assert_values(t.values, np.sort(v))
    assert t.fmt == lp.BF16


@pytest.mark.parametrize("fmt", FEW, ids=ids)
@pytest.mark.parametrize("seed", range(3))
def test_median_of_an_even_count_rounds_the_mean_once(fmt, seed):
    v = draw(fmt, (3, 6), seed)
    r = np.median(lp.tensor(v, fmt), axis=1)
    s = np.sort(v, axis=1)
    expected = [rr((Fraction(a) + Fraction(b)) / 2, fmt) for a, b in zip(s[:, 2], s[:, 3])]
    assert r.fmt == fmt
    assert_values(r.values, expected)
    assert np.isnan(np.median(lp.tensor([1.0, np.nan, 2.0], fmt)).item())


# -- composed ------------------------------------------------------------------------

def seq_sum(xs, fmt):
    s = xs[0]
    for x in xs[1:]:
        s = rr(Fraction(s) + Fraction(x), fmt)
    return s


@pytest.mark.parametrize("fmt", FEW, ids=ids)
@pytest.mark.parametrize("seed", range(3))
def test_var_and_std_step_by_step(fmt, seed):
    v = draw(fmt, 7, seed, scale=2.0)
    t = lp.tensor(v, fmt)
    for ddof in (0, 1):
        m = rr(Fraction(seq_sum(list(v), fmt)) / len(v), fmt)
        sq = [rr(Fraction(d) ** 2, fmt) for d in (rr(Fraction(x) - Fraction(m), fmt) for x in v)]
        var = rr(Fraction(seq_sum(sq, fmt)) / (len(v) - ddof), fmt)
        got = t.var(ddof=ddof, order="sequential")     # NumPy's var takes no order=
        assert got.fmt == fmt
        assert_values(got.values, var)
        std = t.std(ddof=ddof, order="sequential")
        assert_values(std.values, lp.sqrt(var, fmt))
    # The default order is Tensor.sum's, pairwise: the kernel lp.sum on the same steps.
    m = rr(Fraction(float(lp.sum(v, fmt))) / len(v), fmt)
    sq = np.array([rr(Fraction(rr(Fraction(x) - Fraction(m), fmt)) ** 2, fmt) for x in v])
    var = rr(Fraction(float(lp.sum(sq, fmt))) / len(v), fmt)
    assert_values(t.var().values, var)
    assert_values(np.var(t).values, var)
    assert_values(np.std(t).values, lp.sqrt(var, fmt))


@pytest.mark.parametrize("fmt", FEW, ids=ids)
@pytest.mark.parametrize("seed", range(3))
def test_prod_cumprod_diff_trace_step_by_step(fmt, seed):
    v = draw(fmt, (3, 4), seed, scale=1.5)
    t = lp.tensor(v, fmt)
    rows = []
    for row in v:
        p, out = row[0], [row[0]]
        for x in row[1:]:
            p = rr(Fraction(p) * Fraction(x), fmt)
            out.append(p)
        rows.append(out)
    rows = np.array(rows)
    assert_values(np.prod(t, axis=1).values, rows[:, -1])
    assert_values(t.prod(axis=1).values, rows[:, -1])
    assert_values(np.cumprod(t, axis=1).values, rows)
    assert_values(t.cumprod(axis=1).values, rows)
    d1 = np.array([[rr(Fraction(b) - Fraction(a), fmt) for a, b in zip(r, r[1:])] for r in v])
    d2 = np.array([[rr(Fraction(b) - Fraction(a), fmt) for a, b in zip(r, r[1:])] for r in d1])
    assert_values(np.diff(t).values, d1)
    assert_values(np.diff(t, n=2).values, d2)
    assert np.diff(t).fmt == fmt
    tr = seq_sum(list(np.diagonal(v)), fmt)   # three terms: pairwise is sequential here
    assert_values(np.trace(t).values, tr)
    assert_values(t.trace().values, tr)
    assert_values(t.diagonal().values, np.diagonal(v))


@pytest.mark.parametrize("fmt", FEW, ids=ids)
def test_nansum_nanmean(fmt):
    v = draw(fmt, 5, seed=4)
    w = v.copy()
    w[[1, 3]] = np.nan
    t = lp.tensor(w, fmt)
    kept = [x for x in w if not np.isnan(x)]
    total = float(lp.sum(np.array(kept), fmt))       # pairwise, as Tensor.sum
    assert_values(np.nansum(t).values, total)
    assert_values(np.nanmean(t).values, rr(Fraction(total) / len(kept), fmt))
    assert_values(np.average(lp.tensor(v, fmt)).values, np.mean(lp.tensor(v, fmt)).values)


@pytest.mark.parametrize("fmt", FEW, ids=ids)
@pytest.mark.parametrize("seed", range(3))
def test_weighted_average_step_by_step(fmt, seed):
    v, w = draw(fmt, (2, 5), seed), np.abs(draw(fmt, 5, seed + 10)) + 0.5
    wf = np.asarray(lp.round(w, fmt))                   # the weights enter the format
    r, den = np.average(lp.tensor(v, fmt), axis=1, weights=w, returned=True)
    prods = np.array([[rr(Fraction(x) * Fraction(y), fmt) for x, y in zip(row, wf)]
                      for row in v])
    num = np.asarray(lp.sum(prods, fmt, axis=1))        # pairwise, as Tensor.sum
    d = float(lp.sum(wf, fmt))
    expected = [rr(Fraction(float(n)) / Fraction(d), fmt) if np.isfinite(n) else n / d
                for n in num]
    assert r.fmt == fmt
    assert_values(r.values, expected)
    assert_values(den.values, [d, d])


@pytest.mark.parametrize("fmt", FEW, ids=ids)
def test_outer_rounds_each_product_once(fmt):
    a, b = draw(fmt, 4, seed=5), draw(fmt, 3, seed=6)
    r = np.outer(lp.tensor(a, fmt), lp.tensor(b, fmt))
    expected = [[rr(Fraction(x) * Fraction(y), fmt) for y in b] for x in a]
    assert r.fmt == fmt
    assert_values(r.values, expected)


@pytest.mark.parametrize("fmt", [lp.FP16, lp.BF16, lp.FP8_E4M3], ids=ids)
def test_tensordot_and_inner_are_matmul_products(fmt):
    a, b = draw(fmt, (2, 3, 4), seed=7), draw(fmt, (4, 3, 5), seed=8)
    ta, tb = lp.tensor(a, fmt), lp.tensor(b, fmt)
    r = np.tensordot(ta, tb, axes=([1, 2], [1, 0]))
    # The oracle: the same contraction written as one 2-D product of lp.matmul on arrays.
    expected = lp.matmul(a.reshape(2, 12), b.transpose(1, 0, 2).reshape(12, 5), in_fmt=fmt)
    assert r.fmt == lp.FP32
    assert_values(r.values, expected)
    c = draw(fmt, (3, 4), seed=9)
    r = np.inner(ta, lp.tensor(c, fmt))
    expected = lp.matmul(a.reshape(6, 4), c.T, in_fmt=fmt).reshape(2, 3, 3)
    assert_values(r.values, expected)


@pytest.mark.parametrize("fmt", [lp.FP16, lp.BF16, lp.FP8_E4M3], ids=ids)
def test_einsum_is_a_batched_matmul_product(fmt):
    a, b = draw(fmt, (2, 3, 4), seed=11), draw(fmt, (2, 4, 5), seed=12)
    ta, tb = lp.tensor(a, fmt), lp.tensor(b, fmt)
    r = np.einsum("bij,bjk->bki", ta, tb)
    expected = np.transpose(lp.matmul(a, b, in_fmt=fmt), (0, 2, 1))
    assert r.fmt == lp.FP32
    assert_values(r.values, expected)
    r = np.einsum("ij,kj", ta[0], lp.tensor(b[0].T, fmt))     # implicit output: ik
    assert_values(r.values, lp.matmul(a[0], b[0], in_fmt=fmt))
    p = np.einsum("bij->jib", ta)
    assert p.fmt == fmt
    assert_values(p.values, np.einsum("bij->jib", a))
    # a trace: the diagonal (exact) summed as np.sum, in the Tensor's format
    tr = np.einsum("ii", ta[0, :3, :3])
    diag = lp.tensor(np.diagonal(a[0, :3, :3]), fmt)
    assert tr.fmt == fmt
    assert_values(tr.values, np.sum(diag).values)


@pytest.mark.parametrize("fmt", FEW + [lp.FP64], ids=ids)
def test_round_to_decimals_rounds_once(fmt):
    v = draw(fmt, 8, seed=10, scale=3.0)
    t = lp.tensor(v, fmt)
    for d in (0, 1, 2, -1):
        expected = [rr(Fraction(round(float(x), d)), fmt) for x in v]
        assert_values(np.round(t, d).values, expected, d)
        assert_values(np.around(t, d).values, expected)
        assert_values(t.round(d).values, expected)
    assert_values(np.round(t).values, np.rint(v))


# -- refusal and the page --------------------------------------------------------------

@pytest.mark.parametrize("call", [lambda t: np.fft.fft2(t), lambda t: np.poly(t),
                                  lambda t: np.gcd(t, t)],
                         ids=["fft2", "poly", "gcd"])
def test_refusals_say_not_implemented(call):
    with pytest.raises(TypeError, match=r"is not implemented for lowprec\.Tensor.*; see "
                                        r"docs/numpy-support\.md; np\.asarray\(t\) gives"):
        call(lp.tensor([1.0, 2.0], "fp16"))


def test_every_handled_call_has_a_class_and_the_page_is_generated():
    from lowprec.tensors import HANDLED_FUNCTIONS, HANDLED_UFUNCS
    assert set(KINDS) == set(HANDLED_FUNCTIONS) | set(HANDLED_UFUNCS)
    page = ROOT / "docs" / "numpy-support.md"
    text = page.read_text()
    version = ".".join(np.__version__.split(".")[:2])
    if f"with NumPy {version} " not in text:
        pytest.skip(f"docs/numpy-support.md was generated with another NumPy than {version} "
                    "(its lists of NumPy's functions depend on the version)")
    assert text == support_table(), (
        "regenerate: python -c 'from lowprec.tensors.coverage import support_table; "
        "print(support_table(), end=\"\")' > docs/numpy-support.md")


def test_every_numpy_function_is_in_exactly_one_class():
    from lowprec.tensors import HANDLED_FUNCTIONS, HANDLED_UFUNCS
    from lowprec.tensors.coverage import numpy_callables, public_name, undispatched
    handled = {public_name(f) for f in HANDLED_FUNCTIONS} | {f"numpy.{n}" for n in HANDLED_UFUNCS}
    assert unclassified() == []
    assert not handled & set(REFUSED), "handled and refused"
    assert not set(undispatched()) & (handled | set(REFUSED)), "dispatched twice"
    names = {n for n, _ in numpy_callables()}
    for must in ("numpy.var", "numpy.linalg.solve", "numpy.fft.fft", "numpy.save",
                 "numpy.zeros"):
        assert must in names


@pytest.mark.parametrize("call", [lambda t: np.bitwise_and(t, t), lambda t: np.save("x", t),
                                  lambda t: np.roots(t)], ids=["bitwise_and", "save", "roots"])
def test_refusals_give_their_reason(call):
    with pytest.raises(TypeError, match=r"is not implemented for lowprec\.Tensor \(.+\); "
                                        r"see docs/numpy-support\.md"):
        call(lp.tensor([1.0, 2.0], "fp16"))


# -- the issue's 24 calls, in every named format -----------------------------------------

def _matrix(fmt):
    """A well-conditioned 3x3 matrix of values of ``fmt`` (identity plus small terms)."""
    small = np.asarray(lp.round(np.arange(1, 10).reshape(3, 3) / 16, fmt))
    return np.asarray(lp.round(small + 2 * np.eye(3), fmt))


CALLS_24 = {
    "var": lambda t, v: np.var(t), "std": lambda t, v: np.std(t),
    "cumsum": lambda t, v: np.cumsum(t), "prod": lambda t, v: np.prod(t),
    "norm": lambda t, v: np.linalg.norm(t), "einsum": lambda t, v: np.einsum("ij,jk->ik", t, t),
    "solve": lambda t, v: np.linalg.solve(t, t), "inv": lambda t, v: np.linalg.inv(t),
    "det": lambda t, v: np.linalg.det(t), "inner": lambda t, v: np.inner(t, t),
    "outer": lambda t, v: np.outer(v, v), "tensordot": lambda t, v: np.tensordot(t, t),
    "sort": lambda t, v: np.sort(t), "median": lambda t, v: np.median(t),
    "diff": lambda t, v: np.diff(t), "round": lambda t, v: np.round(t, 1),
    "trace": lambda t, v: np.trace(t), "diag": lambda t, v: np.diag(t),
    "nansum": lambda t, v: np.nansum(t), "average": lambda t, v: np.average(t),
    "histogram": lambda t, v: np.histogram(v), "fft": lambda t, v: np.fft.fft(v),
    "t.var": lambda t, v: t.var(), "t.std": lambda t, v: t.std(),
}
MATMUL_24 = {"einsum", "inner", "tensordot"}     # the matmul model's output format


@pytest.mark.parametrize("fmt", SIGNED, ids=ids)
def test_the_issues_24_calls_work_in_every_named_format(fmt):
    t = lp.tensor(_matrix(fmt), fmt)
    v = lp.tensor(np.asarray(lp.round(np.linspace(-1.0, 1.0, 8), fmt)), fmt)
    with lp.context(matmul="exact"):     # every format goes through the exact model
        for name, call in CALLS_24.items():
            if name in MATMUL_24 and fmt.p > 26:
                # no model takes FP64 (no exact float64 products): a clear ValueError
                with pytest.raises(ValueError, match="at most 26 bits"):
                    call(t, v)
                continue
            r = call(t, v)
            if name == "histogram":
                assert r[0].dtype.kind == "i" and r[0].sum() == 8
            elif name == "fft":
                parts = np.concatenate([r.real, r.imag])
                assert np.array_equal(np.asarray(lp.round(parts, fmt)), parts), name
            else:
                assert isinstance(r, lp.Tensor), name
                assert r.fmt == (lp.FP32 if name in MATMUL_24 else fmt), (name, r.fmt)


@pytest.mark.parametrize("fmt", FEW, ids=ids)
def test_prod_and_median_over_several_axes(fmt):
    """Several axes: moved first and joined in C order, then the one-axis order."""
    v = draw(fmt, (3, 2, 5), seed=21, scale=1.5)
    t = lp.tensor(v, fmt)
    r = np.prod(t, axis=(0, 2))
    for j in range(2):
        acc = None
        for x in np.transpose(v, (0, 2, 1)).reshape(-1, 2)[:, j]:   # axes 0, 2 joined
            acc = float(x) if acc is None else rr(Fraction(acc) * Fraction(float(x)), fmt)
        assert_values(r.values[j], acc)
    med = np.median(t, axis=(0, 2))           # 15 values: the middle one, exact
    assert med.fmt == fmt
    assert_values(med.values, np.median(v, axis=(0, 2)))
    assert np.median(t, axis=(1, 2), keepdims=True).shape == (3, 1, 1)
