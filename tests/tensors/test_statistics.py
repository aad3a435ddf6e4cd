"""NumPy's statistics on Tensors (lowprec/tensors/statistics.py): each composed
function against a step-by-step Fraction reference of its documented order (one
`reference_round` per operation), in several formats and seeds; FP64 Tensors against
NumPy itself where NumPy's float64 operations are that same order; exact and plain
ones against NumPy on the decoded values; NaN rules; refused options."""

import functools
import math
import operator
import warnings
from fractions import Fraction

import numpy as np
import pytest
from tensor_inputs import draw as _draw
from tensor_inputs import rr

import lowprec as lp
from helpers import assert_values
from lowprec.tensors import HANDLED_FUNCTIONS
from lowprec.tensors.core import KINDS

FMTS = [lp.FP16, lp.BF16, lp.FP8_E4M3, lp.FP32, lp.FP4_E2M1]
ids = lambda f: f.name   # noqa: E731
draw = functools.partial(_draw, ones=0.15)


def op(f, a, b, fmt):
    """``f(a, b)`` exactly, rounded once; IEEE's answer when an operand is not finite."""
    a, b = float(a), float(b)
    if not (math.isfinite(a) and math.isfinite(b)):
        with np.errstate(all="ignore"):
            return float(f(np.float64(a), np.float64(b)))
    if f is operator.truediv and b == 0:
        return math.nan if a == 0 else math.copysign(math.inf, a) * math.copysign(1, b)
    return rr(f(Fraction(a), Fraction(b)), fmt)


def add(a, b, fmt):
    return op(operator.add, a, b, fmt)


def sub(a, b, fmt):
    return op(operator.sub, a, b, fmt)


def mul(a, b, fmt):
    return op(operator.mul, a, b, fmt)


def div(a, b, fmt):
    return op(operator.truediv, a, b, fmt)


def pairwise(xs, fmt):
    """`lp.sum`'s documented pairwise order: x0 + x1, x2 + x3, ..., level by level, an
    odd last term moving up unchanged."""
    level = [float(x) for x in xs]
    if not level:
        return 0.0
    while len(level) > 1:
        nxt = [add(level[i], level[i + 1], fmt) for i in range(0, len(level) - 1, 2)]
        level = nxt + level[-1:] if len(level) % 2 else nxt
    return level[0]


def with_nans(v, seed, frac=0.3):
    w = v.copy()
    w[np.random.default_rng(seed).random(v.shape) < frac] = np.nan
    return w


# -- ptp and the NaN-skipping reductions ------------------------------------------------

@pytest.mark.parametrize("fmt", FMTS, ids=ids)
@pytest.mark.parametrize("seed", range(2))
def test_ptp_is_one_rounded_subtraction(fmt, seed):
    v = draw(fmt, (3, 5), seed, scale=float(fmt.max) / 3)   # differences may overflow
    t = lp.tensor(v, fmt)
    r = np.ptp(t, axis=1)
    expected = [sub(row.max(), row.min(), fmt) for row in v]
    assert r.fmt == fmt
    assert_values(r.values, expected)
    assert_values(np.ptp(t).values, sub(v.max(), v.min(), fmt))
    assert np.ptp(t, axis=0, keepdims=True).shape == (1, 5)
    assert np.isnan(np.ptp(lp.tensor([1.0, np.nan], fmt)).item())


def median_ref(row, fmt):
    s = sorted(x for x in row if not np.isnan(x))
    if not s:
        return math.nan
    k = len(s)
    return s[k // 2] if k % 2 else rr((Fraction(s[k // 2 - 1]) + Fraction(s[k // 2])) / 2, fmt)


@pytest.mark.parametrize("fmt", FMTS, ids=ids)
@pytest.mark.parametrize("seed", range(3))
def test_nanmedian_skips_nans_and_rounds_an_even_mean_once(fmt, seed):
    v = with_nans(draw(fmt, (5, 6), seed), seed)
    v[0] = np.nan
    t = lp.tensor(v, fmt)
    with pytest.warns(RuntimeWarning, match="All-NaN slice"):
        r = np.nanmedian(t, axis=1)
    assert r.fmt == fmt
    assert_values(r.values, [median_ref(row, fmt) for row in v])
    r = np.nanmedian(t[1:], axis=0, keepdims=True)
    assert r.shape == (1, 6)
    assert_values(r.values[0], [median_ref(c, fmt) for c in v[1:].T])
    assert_values(np.nanmedian(t[1:]).values, median_ref(v[1:].ravel(), fmt))
    assert np.isnan(np.median(lp.tensor([1.0, np.nan], fmt)).item())


@pytest.mark.parametrize("fmt", FMTS, ids=ids)
def test_nanargmax_nanargmin_are_numpys_indices(fmt):
    v = with_nans(draw(fmt, (4, 6), 3), 3)
    v[:, 0] = 1.0
    t = lp.tensor(v, fmt)
    for fn in (np.nanargmax, np.nanargmin):
        assert np.array_equal(fn(t, axis=1), fn(v, axis=1))
        assert np.array_equal(fn(t, axis=0, keepdims=True), fn(v, axis=0, keepdims=True))
        assert fn(t) == fn(v)
    with pytest.raises(ValueError):
        np.nanargmax(lp.tensor([np.nan, np.nan], fmt))


@pytest.mark.parametrize("fmt", FMTS, ids=ids)
@pytest.mark.parametrize("seed", range(2))
def test_nanprod_nancumsum_nancumprod_step_by_step(fmt, seed):
    v = with_nans(draw(fmt, (3, 5), seed, scale=1.5), seed + 5)
    t = lp.tensor(v, fmt)
    prods, sums = [], []
    for row in v:
        p, s, po, so = None, 0.0, [], []
        for x in row:
            if not np.isnan(x):
                p = x if p is None else mul(p, x, fmt)
                s = add(s, x, fmt)
            po.append(1.0 if p is None else p)
            so.append(s)
        prods.append(po)
        sums.append(so)
    prods, sums = np.array(prods), np.array(sums)
    assert_values(np.nanprod(t, axis=1).values, prods[:, -1])
    assert np.nanprod(t, axis=1, keepdims=True).shape == (3, 1)
    assert_values(np.nancumprod(t, axis=1).values, prods)
    assert_values(np.nancumsum(t, axis=1).values, sums)
    assert np.nancumsum(t).shape == (15,) and np.nancumsum(t).fmt == fmt


def nanvar_ref(row, ddof, fmt):
    kept = [x for x in row if not np.isnan(x)]
    z = [0.0 if np.isnan(x) else x for x in row]
    if len(kept) - ddof <= 0:
        return math.nan
    m = div(pairwise(z, fmt), len(kept), fmt)
    d = [0.0 if np.isnan(x) else sub(x, m, fmt) for x in row]
    return div(pairwise([mul(x, x, fmt) for x in d], fmt), len(kept) - ddof, fmt)


@pytest.mark.parametrize("fmt", FMTS, ids=ids)
@pytest.mark.parametrize("seed", range(3))
def test_nanvar_nanstd_step_by_step(fmt, seed):
    v = with_nans(draw(fmt, (4, 7), seed, scale=1.5), seed + 1)
    v[0, :] = np.nan
    v[0, 2] = 1.5 if fmt != lp.FP4_E2M1 else 1.0       # one value: dof 0 with ddof=1
    t = lp.tensor(v, fmt)
    for ddof in (0, 1):
        expected = [nanvar_ref(row, ddof, fmt) for row in v]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            r = np.nanvar(t, axis=1, ddof=ddof)
            s = np.nanstd(t, axis=1, correction=ddof)
        assert r.fmt == fmt
        assert_values(r.values, expected)
        assert_values(s.values, lp.sqrt(np.array(expected), fmt))
    with pytest.warns(RuntimeWarning, match="Degrees of freedom"):
        np.nanvar(t, axis=1, ddof=1)
    assert_values(np.nanvar(t[1:]).values, nanvar_ref(v[1:].ravel(), 0, fmt))
    assert np.nanvar(t, axis=1, keepdims=True).shape == (4, 1)
    # no NaN: numpy.var's order, against the reference (np.var itself would be the code
    # under test, as nanvar hands such rows to it)
    w = draw(fmt, 6, seed)
    full = lp.tensor(w, fmt)
    assert_values(np.nanvar(full).values, nanvar_ref(w, 0, fmt))
    assert_values(np.var(full).values, nanvar_ref(w, 0, fmt))


# -- quantiles -------------------------------------------------------------------------

def quantile_ref(row, q, method, fmt, skip_nan):
    """NumPy's positions in float64, each operation of the documented order rounded."""
    if not skip_nan and any(np.isnan(row)):
        return math.nan
    s = sorted(x for x in row if not np.isnan(x))
    k = len(s)
    if k == 0:
        return math.nan
    vi = (k - 1) * float(q)
    i, c = math.floor(vi), math.ceil(vi)
    if method == "lower":
        return s[i]
    if method == "higher":
        return s[c]
    if method == "nearest":
        return s[int(np.around(vi))]
    if method == "midpoint":
        return s[i] if i == c else rr((Fraction(s[i]) + Fraction(s[c])) / 2, fmt)
    g = vi - i
    if g == 0 or i >= k - 1:
        return s[min(i, k - 1)]
    lo, hi = s[i], s[i + 1]
    d = sub(hi, lo, fmt)
    if g < 0.5:
        return add(lo, mul(d, g, fmt), fmt)
    return sub(hi, mul(d, 1 - g, fmt), fmt)


QS = np.array([0.0, 0.1, 0.25, 1 / 3, 0.5, 0.7, 0.95, 1.0])


@pytest.mark.parametrize("fmt", FMTS, ids=ids)
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("method", ["linear", "midpoint"])
def test_quantile_and_percentile_step_by_step(fmt, seed, method):
    v = draw(fmt, (3, 7), seed, scale=float(fmt.max) / 4 if seed == 2 else None)
    t = lp.tensor(v, fmt)
    r = np.quantile(t, QS, axis=1, method=method)
    expected = [[quantile_ref(row, q, method, fmt, False) for row in v] for q in QS]
    assert r.fmt == fmt
    assert_values(r.values, expected)
    p = np.percentile(t, QS * 100, axis=1, method=method)   # q/100 in float64, as NumPy
    expected = [[quantile_ref(row, q / 100, method, fmt, False) for row in v]
                for q in QS * 100]
    assert_values(p.values, expected)
    assert_values(np.quantile(t, 0.3, method=method).values,
                  quantile_ref(v.ravel(), 0.3, method, fmt, False))
    assert np.quantile(t, [0.2, 0.4], axis=0, keepdims=True).shape == (2, 1, 7)
    assert np.quantile(t, 0.5, keepdims=True).shape == (1, 1)


@pytest.mark.parametrize("fmt", FMTS, ids=ids)
@pytest.mark.parametrize("seed", range(2))
def test_nanquantile_and_nanpercentile_skip_nans(fmt, seed):
    v = with_nans(draw(fmt, (4, 8), seed), seed + 2)
    v[3] = np.nan
    t = lp.tensor(v, fmt)
    for method in ("linear", "lower", "higher", "nearest", "midpoint"):
        with pytest.warns(RuntimeWarning, match="All-NaN slice"):
            r = np.nanquantile(t, QS, axis=1, method=method)
        expected = [[quantile_ref(row, q, method, fmt, True) for row in v] for q in QS]
        assert_values(r.values, expected, method)
        with pytest.warns(RuntimeWarning, match="All-NaN slice"):
            p = np.nanpercentile(t, 40.0, axis=1, method=method)
        assert_values(p.values, [quantile_ref(row, 0.4, method, fmt, True) for row in v])
    # np.quantile: a slice with a NaN gives NaN.
    r = np.quantile(t, 0.5, axis=1)
    assert_values(r.values,
                  [math.nan if np.isnan(row).any()
                   else quantile_ref(row, 0.5, "linear", fmt, False) for row in v])


@pytest.mark.parametrize("fmt", FMTS + [lp.FP8_E5M2FNUZ], ids=ids)
@pytest.mark.parametrize("method", ["lower", "higher", "nearest"])
def test_selecting_quantiles_equal_numpy_on_the_values(fmt, method):
    v = draw(fmt, (4, 9), seed=7)
    t = lp.tensor(v, fmt)
    r = np.quantile(t, QS, axis=0, method=method)
    assert r.fmt == fmt
    assert_values(r.values, np.quantile(v, QS, axis=0, method=method))
    assert_values(np.percentile(t, [5, 50, 95], method=method).values,
                  np.percentile(v, [5, 50, 95], method=method))


@pytest.mark.parametrize("fmt", [lp.FP16, lp.BF16], ids=ids)
def test_quantile_selects_where_numpys_lerp_of_infinities_is_nan(fmt):
    t = lp.tensor([1.0, np.inf], fmt)
    assert_values(np.quantile(t, [0.0, 1.0]).values, [1.0, np.inf])
    assert_values(np.quantile(t, 0.25).values, np.inf)
    assert_values(np.quantile(lp.tensor([-np.inf, 1.0], fmt), 0.0).values, -np.inf)


def test_fp64_quantiles_are_numpys_own():
    """FP64 Tensors: every rounding is float64's, so the order is NumPy's exactly."""
    rng = np.random.default_rng(0)
    v = rng.normal(size=(5, 11)) * 10.0 ** rng.integers(-3, 4, size=(5, 11))
    t = lp.tensor(v, lp.FP64)
    qs = rng.random(20)
    assert_values(np.quantile(t, qs, axis=1).values, np.quantile(v, qs, axis=1))
    assert_values(np.percentile(t, qs * 100).values, np.percentile(v, qs * 100))
    w = with_nans(v, 1)
    assert_values(np.nanquantile(lp.tensor(w, lp.FP64), qs, axis=1).values,
                  np.nanquantile(w, qs, axis=1))


# -- cov and corrcoef --------------------------------------------------------------------

def cov_ref(x, ddof, fmt):
    n = x.shape[1]
    means = [div(pairwise(row, fmt), n, fmt) for row in x]
    d = [[sub(a, m, fmt) for a in row] for row, m in zip(x, means)]
    return np.array([[div(pairwise([mul(a, b, fmt) for a, b in zip(di, dj)], fmt),
                          n - ddof, fmt) for dj in d] for di in d])


@pytest.mark.parametrize("fmt", FMTS, ids=ids)
@pytest.mark.parametrize("seed", range(2))
def test_cov_and_corrcoef_step_by_step(fmt, seed):
    v = draw(fmt, (3, 6), seed, scale=1.5)
    t = lp.tensor(v, fmt)
    c = np.cov(t)
    expected = cov_ref(v, 1, fmt)
    assert c.fmt == fmt
    assert_values(c.values, expected)
    assert_values(np.cov(t, bias=True).values, cov_ref(v, 0, fmt))
    assert_values(np.cov(t, ddof=2).values, cov_ref(v, 2, fmt))
    assert_values(np.cov(t.T, rowvar=False).values, expected)
    assert_values(np.cov(t[0], t[1:]).values, expected)
    for i in range(3):   # the diagonal is numpy.var's order, bit for bit
        assert_values(c.values[i, i], np.var(t[i], ddof=1).values)
    assert np.cov(t[0]).shape == ()
    s = lp.sqrt(np.diagonal(expected), fmt)
    r = [[div(div(expected[i, j], s[i], fmt), s[j], fmt) for j in range(3)] for i in range(3)]
    cc = np.corrcoef(t)
    assert cc.fmt == fmt
    assert_values(cc.values, np.clip(r, -1, 1))
    assert_values(np.corrcoef(t[0]).values, div(expected[0, 0], expected[0, 0], fmt))


def test_cov_promotes_operands_and_refuses_weights():
    a = lp.tensor([1.0, 2.0, 3.5], "bf16")
    b = lp.tensor([0.5, 1.0, 3.0], "fp16")
    assert np.cov(a, b).fmt == lp.result_format(lp.BF16, lp.FP16)
    assert np.cov(a, [0.1, 0.2, 0.3]).fmt == lp.BF16
    for kw in ({"fweights": [1, 2, 1]}, {"aweights": [1.0, 2.0, 1.0]}, {"dtype": np.float32}):
        with pytest.raises(TypeError, match=f"{next(iter(kw))}="):
            np.cov(a, **kw)
    with pytest.raises(ValueError, match="ddof must be integer"):
        np.cov(a, ddof=0.5)
    with pytest.warns(RuntimeWarning, match="Degrees of freedom"):
        np.cov(a, ddof=3)


# -- interp, gradient, trapezoid, ediff1d, cumulative -----------------------------------------

def interp_ref(x, xp, fp, fmt, left=None, right=None):
    lval = fp[0] if left is None else left
    rval = fp[-1] if right is None else right
    out = []
    for xv in x:
        if np.isnan(xv):
            out.append(math.nan)
        elif xv < xp[0]:
            out.append(lval)
        elif xv > xp[-1]:
            out.append(rval)
        elif xv == xp[-1]:
            out.append(fp[-1])
        else:
            j = max(i for i in range(len(xp)) if xp[i] <= xv)
            if xp[j] == xv:
                out.append(fp[j])
                continue
            slope = div(sub(fp[j + 1], fp[j], fmt), sub(xp[j + 1], xp[j], fmt), fmt)
            r = add(mul(slope, sub(xv, xp[j], fmt), fmt), fp[j], fmt)
            if np.isnan(r):
                r = add(mul(slope, sub(xv, xp[j + 1], fmt), fmt), fp[j + 1], fmt)
                if np.isnan(r) and fp[j] == fp[j + 1]:
                    r = fp[j]
            out.append(r)
    return out


@pytest.mark.parametrize("fmt", FMTS, ids=ids)
@pytest.mark.parametrize("seed", range(3))
def test_interp_step_by_step(fmt, seed):
    xp = np.unique(draw(fmt, 8, seed))
    fp = draw(fmt, xp.size, seed + 10)
    x = np.concatenate([draw(fmt, 12, seed + 20, scale=float(xp.max()) * 1.3 + 0.5),
                        xp[:2], [np.nan]])
    tx, txp, tfp = (lp.tensor(a, fmt) for a in (x, xp, fp))
    r = np.interp(tx, txp, tfp)
    assert r.fmt == fmt
    assert_values(r.values, interp_ref(x, xp, fp, fmt))
    lo, hi = float(lp.round(-0.3, fmt)), float(lp.round(2.7, fmt))
    r = np.interp(tx, txp, tfp, left=-0.3, right=2.7)      # rounded into the format once
    assert_values(r.values, interp_ref(x, xp, fp, fmt, lo, hi))
    plain = np.interp(x * 1.01, txp, fp)                   # plain x, fp rounded in once
    assert_values(plain.values, interp_ref(np.asarray(lp.round(x * 1.01, fmt)), xp, fp, fmt))
    if fmt.has_inf:   # the NaN fallbacks: the other direction, then a flat piece
        fi = fp.copy()
        fi[[1, 2, 4]] = [np.inf, -np.inf, -np.inf]
        fi[5] = -np.inf
        r = np.interp(tx, txp, lp.tensor(fi, fmt))
        assert_values(r.values, interp_ref(x, xp, fi, fmt))
    one = np.interp(tx, txp[:1], tfp[:1])
    assert_values(one.values, np.interp(x, xp[:1], fp[:1]))
    assert np.interp(tx[0], txp, tfp).shape == ()


def test_fp64_interp_and_gradient_are_numpys_own():
    rng = np.random.default_rng(3)
    xp = np.sort(rng.normal(size=30))
    fp = rng.normal(size=30) * 100
    x = np.concatenate([rng.normal(size=200) * 1.5, xp[::3], [np.nan, np.inf, -np.inf]])
    t = lambda a: lp.tensor(a, lp.FP64)   # noqa: E731
    assert_values(np.interp(t(x), t(xp), t(fp)).values, np.interp(x, xp, fp))
    assert_values(np.interp(t(x), t(xp), t(fp), left=-7.5, right=np.nan).values,
                  np.interp(x, xp, fp, left=-7.5, right=np.nan))
    fp = np.array([0.0, np.inf, 1.0, -np.inf, -np.inf, 2.0, np.nan, 3.0])   # NaN fallbacks
    xp = np.arange(8.0)
    x = np.linspace(-1.0, 8.0, 37)
    assert_values(np.interp(t(x), t(xp), t(fp)).values, np.interp(x, xp, fp))
    f = rng.normal(size=(6, 7))
    for edge in (1, 2):
        for spacing in ((), (0.3,), (0.3, 1.7)):
            got, want = np.gradient(t(f), *spacing, edge_order=edge), \
                np.gradient(f, *spacing, edge_order=edge)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert_values(g.values, w)
    assert_values(np.gradient(t(f), 0.7, axis=1).values, np.gradient(f, 0.7, axis=1))


def gradient_ref(row, h, edge, fmt):
    two_h, hh = rr(2 * Fraction(h), fmt), rr(h, fmt)
    n = len(row)
    out = [div(sub(row[i + 1], row[i - 1], fmt), two_h, fmt) for i in range(1, n - 1)]
    if edge == 1:
        first = div(sub(row[1], row[0], fmt), hh, fmt)
        last = div(sub(row[-1], row[-2], fmt), hh, fmt)
    else:
        def combo(cs, fs):
            p = [mul(rr(c, fmt), f, fmt) for c, f in zip(cs, fs)]
            return add(add(p[0], p[1], fmt), p[2], fmt)
        first = combo((-1.5 / h, 2.0 / h, -0.5 / h), row[:3])
        last = combo((0.5 / h, -2.0 / h, 1.5 / h), row[-3:])
    return [first] + out + [last]


@pytest.mark.parametrize("fmt", FMTS, ids=ids)
@pytest.mark.parametrize("seed", range(2))
def test_gradient_step_by_step(fmt, seed):
    v = draw(fmt, (3, 6), seed, scale=1.5)
    t = lp.tensor(v, fmt)
    for h in (1.0, 0.3):
        for edge in (1, 2):
            gy, gx = np.gradient(t, h, edge_order=edge)
            assert gx.fmt == fmt and gy.fmt == fmt
            assert_values(gx.values, [gradient_ref(row, h, edge, fmt) for row in v], (h, edge))
            assert_values(gy.values.T, [gradient_ref(col, h, edge, fmt) for col in v.T])
    g = np.gradient(t[0])
    assert isinstance(g, lp.Tensor)
    assert_values(g.values, gradient_ref(v[0], 1.0, 1, fmt))
    with pytest.raises(TypeError, match="scalar spacings"):
        np.gradient(t[0], np.arange(6.0))
    with pytest.raises(ValueError, match="too small"):
        np.gradient(t[:2], axis=0, edge_order=2)


@pytest.mark.parametrize("fmt", FMTS, ids=ids)
@pytest.mark.parametrize("seed", range(2))
def test_trapezoid_step_by_step(fmt, seed):
    y = draw(fmt, (2, 9), seed, scale=1.5)
    x = np.sort(draw(fmt, 9, seed + 3, scale=2.0))
    t = lp.tensor(y, fmt)

    def ref(row, ds):
        return pairwise([div(mul(d, add(b, a, fmt), fmt), 2, fmt)
                         for a, b, d in zip(row[:-1], row[1:], ds)], fmt)

    d = rr(0.3, fmt)
    r = np.trapezoid(t, dx=0.3)
    assert r.fmt == fmt
    assert_values(r.values, [ref(row, [d] * 8) for row in y])
    assert_values(np.trapezoid(t).values, [ref(row, [1.0] * 8) for row in y])
    ds = [sub(b, a, fmt) for a, b in zip(x[:-1], x[1:])]
    assert_values(np.trapezoid(t, x=lp.tensor(x, fmt)).values, [ref(row, ds) for row in y])
    assert_values(np.trapezoid(t.T, x=x, axis=0).values, [ref(row, ds) for row in y])
    xs = np.sort(draw(fmt, (2, 9), seed + 4), axis=1)
    got = np.trapezoid(t, x=lp.tensor(xs, fmt))
    assert_values(got.values,
                  [ref(row, [sub(b, a, fmt) for a, b in zip(xr[:-1], xr[1:])])
                   for row, xr in zip(y, xs)])


@pytest.mark.parametrize("fmt", FMTS, ids=ids)
def test_ediff1d_and_cumulative(fmt):
    v = draw(fmt, (2, 4), 5)
    t = lp.tensor(v, fmt)
    flat = v.ravel()
    d = [sub(b, a, fmt) for a, b in zip(flat[:-1], flat[1:])]
    assert_values(np.ediff1d(t).values, d)
    r = np.ediff1d(t, to_begin=[0.1, 7.3], to_end=lp.tensor(-2.2, lp.FP64))
    assert r.fmt == fmt
    assert_values(r.values, [rr(0.1, fmt), rr(7.3, fmt)] + d + [rr(-2.2, fmt)])
    if hasattr(np, "cumulative_sum"):
        s = np.cumulative_sum(t, axis=1, include_initial=True)
        assert s.fmt == fmt
        assert_values(s.values[:, 1:], np.cumsum(t, axis=1).values)
        assert_values(s.values[:, 0], [0.0, 0.0])
        row = [flat[0]]
        for x in flat[1:4]:
            row.append(mul(row[-1], x, fmt))
        p = np.cumulative_prod(t[0], include_initial=True)
        assert_values(p.values, [1.0] + row)
        with pytest.raises(ValueError, match="axis"):
            np.cumulative_sum(t)
        with pytest.raises(TypeError, match="dtype="):
            np.cumulative_prod(t[0], dtype=np.float32)


# -- histograms --------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FMTS, ids=ids)
@pytest.mark.parametrize("seed", range(2))
def test_histogram_weights_and_density_step_by_step(fmt, seed):
    a = draw(fmt, 40, seed)
    w = draw(fmt, 40, seed + 1, scale=1.0)
    ta, tw = lp.tensor(a, fmt), lp.tensor(w, fmt)
    for bins, rng_ in ((5, None), (7, (-1.0, 2.0)), ([-3.0, -0.5, 0.0, 1.0, 1.5, 4.0], None)):
        counts, edges = np.histogram(a, bins=bins, range=rng_)
        idx = np.digitize(a, edges[1:-1], right=False)
        inside = (a >= edges[0]) & (a <= edges[-1])
        sums = [pairwise([x for x, i, k in zip(w, idx, inside) if i == b and k], fmt)
                for b in range(len(edges) - 1)]
        n, e = np.histogram(ta, bins=bins, range=rng_, weights=tw)
        assert n.fmt == fmt
        assert_values(n.values, sums)
        assert_values(e, edges)
        n, e = np.histogram(ta, bins=bins, range=rng_, weights=w * 1.01)   # plain: rounded in
        wr = np.asarray(lp.round(w * 1.01, fmt))
        assert_values(n.values,
                      [pairwise([x for x, i, k in zip(wr, idx, inside) if i == b and k], fmt)
                       for b in range(len(edges) - 1)])
        widths = np.diff(edges)
        total = pairwise(sums, fmt)
        dens, _ = np.histogram(ta, bins=bins, range=rng_, weights=tw, density=True)
        assert_values(dens.values,
                      [div(div(s, wd, fmt), total, fmt) for s, wd in zip(sums, widths)])
        dens, _ = np.histogram(ta, bins=bins, range=rng_, density=True)
        assert dens.fmt == fmt
        assert_values(dens.values,
                      [div(div(int(c), wd, fmt), int(counts.sum()), fmt)
                       for c, wd in zip(counts, widths)])


def test_histogram_bins_match_numpys_counts():
    a = np.arange(-2.0, 10.0, 0.25)        # values on the edges
    t = lp.tensor(a, lp.FP32)
    ones = lp.tensor(np.ones_like(a), lp.FP32)
    for bins, rng_ in ((8, (0.0, 8.0)), (12, None), ([0.0, 0.5, 0.5, 3.0, 9.75], None)):
        counts, edges = np.histogram(a, bins=bins, range=rng_)
        n, e = np.histogram(t, bins=bins, range=rng_, weights=ones)
        assert_values(n.values, counts)
        assert_values(e, edges)
        c, e2 = np.histogram(t, bins=bins, range=rng_)     # plain, as before
        assert c.dtype == counts.dtype
        assert np.array_equal(c, counts)
        assert_values(e2, edges)


@pytest.mark.parametrize("fmt", [lp.FP16, lp.FP8_E4M3], ids=ids)
def test_plain_histograms(fmt):
    x, y = draw(fmt, 30, 1), draw(fmt, 30, 2)
    tx, ty = lp.tensor(x, fmt), lp.tensor(y, fmt)
    assert_values(np.histogram_bin_edges(tx, bins=6), np.histogram_bin_edges(x, bins=6))
    assert_values(np.histogram_bin_edges(tx, bins="auto"), np.histogram_bin_edges(x, bins="auto"))
    for got, want in zip(np.histogram2d(tx, ty, bins=4), np.histogram2d(x, y, bins=4)):
        assert type(got) is np.ndarray
        assert_values(got, want)
    for got, want in zip(np.histogramdd(lp.tensor(np.stack([x, y], 1), fmt), bins=3)[1],
                         np.histogramdd(np.stack([x, y], 1), bins=3)[1]):
        assert_values(got, want)
    assert_values(np.histogramdd([tx, ty], bins=3)[0], np.histogramdd([x, y], bins=3)[0])
    with pytest.raises(TypeError, match="weights="):
        np.histogram2d(tx, ty, weights=x)
    with pytest.raises(TypeError, match="density="):
        np.histogramdd([tx, ty], density=True)


# -- refusals and the tables ---------------------------------------------------------------

REFUSALS = [
    (lambda t: np.ptp(t, out=np.empty(())), TypeError, "out="),
    (lambda t: np.nanprod(t, dtype=np.float32), TypeError, "dtype="),
    (lambda t: np.nanprod(t, initial=2.0), TypeError, "initial="),
    (lambda t: np.nanvar(t, where=np.ones(6, bool)), TypeError, "where="),
    (lambda t: np.nanstd(t, mean=np.zeros(())), TypeError, "mean="),
    (lambda t: np.nancumsum(t, dtype=np.float32), TypeError, "dtype="),
    (lambda t: np.quantile(t, 0.5, method="hazen"), TypeError, "method='hazen'"),
    (lambda t: np.quantile(t, 0.5, method="nonsense"), ValueError, "not a valid method"),
    (lambda t: np.quantile(t, 1.5), ValueError, r"range \[0, 1\]"),
    (lambda t: np.percentile(t, -5), ValueError, r"range \[0, 100\]"),
    (lambda t: np.quantile(t, 0.5, weights=np.ones(6), method="inverted_cdf"), TypeError,
     "weights="),
    (lambda t: np.nanmedian(t, out=np.empty(())), TypeError, "out="),
    (lambda t: np.interp(t, t, t, period=2.0), TypeError, "period="),
    (lambda t: np.interp(t, t[:3], t), ValueError, "same length"),
    (lambda t: np.nanargmax(t, out=t), TypeError, "out="),
    (lambda t: np.gradient(t, edge_order=3), ValueError, "edge_order"),
]


@pytest.mark.parametrize("call,exc,match", REFUSALS, ids=[m for _, _, m in REFUSALS])
def test_refused_options(call, exc, match):
    with pytest.raises(exc, match=match):
        call(lp.tensor([1.0, 2.0, 0.5, 3.0, 1.5, 2.5], "fp16"))


def test_every_registered_function_has_a_kind():
    names = ("ptp", "nanmedian", "nanargmax", "nanargmin", "nanprod", "nancumsum",
             "nancumprod", "nanvar", "nanstd", "quantile", "percentile", "nanquantile",
             "nanpercentile", "cov", "corrcoef", "interp", "gradient", "ediff1d",
             "histogram", "histogram_bin_edges", "histogram2d", "histogramdd", "trapezoid",
             "trapz", "cumulative_sum", "cumulative_prod")
    classes = {"exact", "correctly rounded", "rounded once", "composed", "matmul model",
               "plain"}
    for name in names:
        fn = getattr(np, name, None)
        if fn is None:
            continue
        assert fn in HANDLED_FUNCTIONS, name
        kind, order = KINDS[fn]
        assert kind in classes and order and "\n" not in order, name


def test_tensor_levels_with_plain_data_give_numpys_plain_answer():
    data = np.array([1.0, 2.0, 3.0, 4.0])
    q = lp.tensor([0.25, 0.5], "bf16")
    for fn, levels in ((np.quantile, q), (np.nanquantile, q),
                       (np.percentile, q * 100), (np.nanpercentile, q * 100)):
        r = fn(data, levels)
        assert type(r) is np.ndarray and np.array_equal(r, fn(data, levels.values))
