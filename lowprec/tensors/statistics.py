"""NumPy's statistics on Tensors, composed of rounded Tensor operations in NumPy's
order.

The functions are quantiles, the NaN-skipping reductions, ``ptp``, ``cov``,
``corrcoef``, ``interp``, ``gradient``, ``trapezoid``, ``histogram`` with weights and
their kin. Selections are exact. Indices, counts and edges are plain arrays. Each
handler is registered beside its def by `core.implements`. None computes a result in
float64 and hands it back unrounded.

Some numbers only say where to look or how to weigh: quantile levels, a quantile's
interpolation weight, histogram edges and counts. They are not rounded into the
format. An operation taking one is one correct rounding of its exact result. Data
given as plain arrays enter the format once, as plain operands do (`operands`).
`cov` sums its rounded products pairwise, so its diagonal is `var`'s."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import arith
from .core import Tensor, exact_operands, implements, operands, values_of
from .defaults import round_ctx
from .functions import given, refuse, rounded

__all__: list[str] = []

_QUANTILE = ("composed", "sorted; position `(n-1)*q` in float64 (q never rounded; "
             "percentile q/100 in float64); linear: `lo` where the weight g is 0, else "
             "`d = hi - lo`, then `lo + d*g` (g < 0.5) or `hi - d*(1-g)`, each rounded "
             "(NumPy's lerp); lower/higher/nearest exact; midpoint `0.5*lo + 0.5*hi` one "
             "rounding; other methods refused")
_NAN_QUANTILE = (_QUANTILE[0], "NaNs skipped (n the non-NaN count; all-NaN gives NaN), "
                               "then as `numpy.quantile`: " + _QUANTILE[1].split("; ", 1)[1])
_PLAIN_EDGES = ("plain", "counts and edges as NumPy's plain arrays; `weights=`/`density=` "
                         "refused")
_TRAPEZOID = ("NumPy's `(d * (y[1:] + y[:-1]) / 2.0).sum()`: each addition, product and "
              "halving rounded, the sum as `numpy.sum`; `dx` rounded into the format once, "
              "`x` differenced as `numpy.diff`")
_NAN_ARG = ("plain", "indices of the values, NaNs skipped (NumPy's on the values)")

_WHY = {
    "out": "results are new Tensors",
    "dtype": "the result's format is the operands' (convert with .astype())",
    "initial": "a start value has no place in the rounding order; multiply it in "
               "explicitly",
    "where": "mask the Tensor explicitly (np.where) first",
    "mean": "the mean is part of the rounding order; it is computed here",
    "fweights": "weighted covariances are not emulated",
    "aweights": "weighted covariances are not emulated",
    "weights": "weighted quantiles (method='inverted_cdf') are not emulated",
    "period": "the wrapped coordinates would be computed outside the format; unwrap x "
              "and xp first",
}


def _flag(value: Any) -> bool:
    """A NumPy flag such as ``keepdims``, whose default may be ``np._NoValue``."""
    return given(value) and bool(value)


def _refuse(func: str, why: dict[str, str] | None = None, **kwargs: Any) -> None:
    """`functions.refuse` with this module's reasons (``why`` overrides them)."""
    refuse(func, _WHY | (why or {}), **kwargs)


def _reduced(v: np.ndarray, axis: Any) -> tuple[np.ndarray, tuple[int, ...], tuple[int, ...]]:
    """``v`` as a 2-D array (the kept axes flattened, the reduced ones flattened last),
    the kept shape, and the reduced axes (normalized)."""
    axes = (tuple(range(v.ndim)) if axis is None
            else tuple(np.lib.array_utils.normalize_axis_tuple(axis, v.ndim)))
    keep = [i for i in range(v.ndim) if i not in axes]
    rest = tuple(v.shape[i] for i in keep)
    n = int(np.prod([v.shape[i] for i in axes]))
    w = np.transpose(v, keep + list(axes)).reshape(int(np.prod(rest)), n)
    return w, rest, axes


def _kept_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> list[int]:
    return [1 if i in axes else s for i, s in enumerate(shape)]


# -- ptp and the NaN-skipping reductions -----------------------------------------------

@implements(np.ptp, "composed", "max and min selected (exact), one rounded subtraction")
def _ptp(a, axis=None, out=None, keepdims=np._NoValue):
    """The largest value minus the smallest (both exact selections): one rounded
    subtraction. A NaN gives NaN, as in NumPy.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> np.ptp(lp.tensor([-0.875, 3.0, 1.0], "fp8_e4m3"))    # 3.875 rounds to 4
    Tensor(4.0, fmt=FP8_E4M3)
    """
    _refuse("ptp", out=out)
    keep = _flag(keepdims)
    hi = np.max(a._v, axis=axis, keepdims=keep)
    lo = np.min(a._v, axis=axis, keepdims=keep)
    return Tensor(rounded(arith.sub, hi, lo, fmt=a.fmt), a.fmt)


def _nan_as(a: Tensor, value: float) -> Tensor:
    # 0 and 1 are values of every format: the replacement is exact.
    return Tensor(np.where(np.isnan(a._v), value, a._v), a.fmt)


@implements(np.nanprod, "composed", "NaNs as ones, then as `numpy.prod`")
def _nanprod(a, axis=None, dtype=None, out=None, keepdims=np._NoValue,
             initial=np._NoValue, where=np._NoValue):
    """NaNs as ones, then `numpy.prod` (left to right, each product rounded)."""
    _refuse("nanprod", out=out, dtype=dtype, initial=initial, where=where)
    return np.prod(_nan_as(a, 1.0), axis=axis, keepdims=_flag(keepdims))


@implements(np.nancumsum, "composed", "NaNs as zeros, then as `numpy.cumsum`")
def _nancumsum(a, axis=None, dtype=None, out=None):
    """NaNs as zeros, then `numpy.cumsum` (sequential, each addition rounded)."""
    _refuse("nancumsum", out=out, dtype=dtype)
    return np.cumsum(_nan_as(a, 0.0), axis=axis)


@implements(np.nancumprod, "composed", "NaNs as ones, then as `numpy.cumprod`")
def _nancumprod(a, axis=None, dtype=None, out=None):
    """NaNs as ones, then `numpy.cumprod` (sequential, each product rounded)."""
    _refuse("nancumprod", out=out, dtype=dtype)
    return np.cumprod(_nan_as(a, 1.0), axis=axis)


def _nanvar_values(a, axis, ddof, keep):
    """NumPy's ``nanvar`` in the format.

    Without NaNs it is `numpy.var`. Otherwise NaNs count as zeros, in this order:

    * The mean as `numpy.nanmean` (the pairwise sum, one division by the count of
      the others).
    * Deviations ``a - mean`` rounded (zeros where the NaNs were).
    * Squares rounded.
    * Their sum as `numpy.sum` (pairwise, the zeros in their places).
    * One division by ``count - ddof``.

    Where that count is <= 0 the result is NaN, with NumPy's warning."""
    mask = np.isnan(a._v)
    if not mask.any():
        return np.var(a, axis=axis, ddof=ddof, keepdims=keep)
    fmt = a.fmt
    z = Tensor(np.where(mask, 0.0, a._v), fmt)
    count = np.sum(~mask, axis=axis, keepdims=True).astype(np.float64)
    mean = rounded(arith.div, np.sum(z, axis=axis, keepdims=True)._v, count, fmt=fmt)
    d = np.where(mask, 0.0, rounded(arith.sub, z._v, mean, fmt=fmt))
    sq = Tensor(rounded(arith.mul, d, d, fmt=fmt), fmt)
    s = np.sum(sq, axis=axis, keepdims=keep)._v
    dof = np.sum(~mask, axis=axis, keepdims=keep) - ddof
    r = rounded(arith.div, s, np.asarray(dof, dtype=np.float64), fmt=fmt)
    if np.any(dof <= 0):
        warnings.warn("Degrees of freedom <= 0 for slice.", RuntimeWarning, stacklevel=3)
        r = np.where(dof <= 0, np.nan, r)
    return Tensor(np.asarray(r), fmt)


@implements(np.nanvar, "composed", "NaNs as zeros (none: `numpy.var`); mean as "
            "`numpy.nanmean`; deviations rounded (zeros at the NaNs); squares rounded; sum as "
            "`numpy.sum`; one rounded division by `count - ddof` (NaN where <= 0)")
def _nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=np._NoValue, *,
            where=np._NoValue, mean=np._NoValue, correction=np._NoValue):
    """The variance with NaNs skipped (`_nanvar_values`).

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> np.nanvar(lp.tensor([1.0, np.nan, 2.0, 4.0], "bf16"))
    Tensor(1.5625, fmt=BF16)
    """
    _refuse("nanvar", out=out, dtype=dtype, where=where, mean=mean)
    ddof = correction if given(correction) else ddof
    return _nanvar_values(a, axis, ddof, _flag(keepdims))


@implements(np.nanstd, "composed", "`numpy.nanvar`, then a correctly rounded square root")
def _nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=np._NoValue, *,
            where=np._NoValue, mean=np._NoValue, correction=np._NoValue):
    """`_nanvar`, then a correctly rounded square root."""
    _refuse("nanstd", out=out, dtype=dtype, where=where, mean=mean)
    ddof = correction if given(correction) else ddof
    return np.sqrt(_nanvar_values(a, axis, ddof, _flag(keepdims)))


def _nan_arg(fn):
    """nanargmax/nanargmin: indices (plain), NumPy's on the values."""
    def handler(a, axis=None, out=None, *, keepdims=np._NoValue):
        if isinstance(out, Tensor):
            raise TypeError(f"lowprec.Tensor cannot be the out= of numpy.{fn.__name__}: "
                            "its values would leave the format")
        kw = {} if keepdims is np._NoValue else {"keepdims": keepdims}
        return fn(values_of(a), axis=axis, out=out, **kw)
    return handler


# -- quantiles -----------------------------------------------------------------------

_METHODS = ("linear", "lower", "higher", "nearest", "midpoint")
_NUMPY_ONLY = ("inverted_cdf", "averaged_inverted_cdf", "closest_observation",
               "interpolated_inverted_cdf", "hazen", "weibull", "median_unbiased",
               "normal_unbiased")


def _quantiles(a, q, axis, method, keep, skip_nan, func):
    """The quantiles ``q`` (levels in [0, 1], float64) of ``a`` along ``axis``.

    As NumPy, the values are sorted. The virtual index is ``(n - 1) * q`` in
    float64, ``n`` the count of non-NaN values when NaNs are skipped. Its floor is
    ``i`` and the weight ``g = index - i`` (float64, exact).

    * "lower", "higher" and "nearest" select ``floor``, ``ceil``, ``around`` of the
      index (exact).
    * "midpoint" selects where the index is whole. Else it gives
      ``0.5*lo + 0.5*hi`` with one rounding, as `numpy.median`. The halvings are
      exact in float64.
    * "linear" selects ``lo`` where ``g == 0`` or the index is the last. Else it is
      NumPy's ``_lerp``: ``d = hi - lo`` rounded, then ``lo + d*g`` for
      ``g < 0.5`` and ``hi - d*(1 - g)`` for ``g >= 0.5``. ``1 - g`` is exact
      (Sterbenz), and each product and sum is rounded.

    The levels are never rounded into the format. Without ``skip_nan`` a slice with
    a NaN gives NaN. An all-NaN slice gives NaN with NumPy's warning.
    """
    if method not in _METHODS:
        if method in _NUMPY_ONLY:
            raise TypeError(f"lowprec.Tensor does not support method={method!r} in "
                            f"numpy.{func}: only {', '.join(_METHODS)} are emulated")
        raise ValueError(f"{method!r} is not a valid method. Use one of: "
                         f"{', '.join(_METHODS + _NUMPY_ONLY)}")
    fmt = a.fmt
    w, rest, axes = _reduced(a._v, axis)
    m, n = w.shape
    if n == 0 and not skip_nan:
        raise ValueError(f"numpy.{func} of an empty Tensor has no value")
    w = np.sort(w, axis=-1)                          # NaNs sort last
    nans = np.isnan(w)
    k = n - nans.sum(axis=-1) if skip_nan else np.full(m, n)
    bad = (k == 0) if skip_nan else nans[:, -1] if n else np.zeros(m, bool)
    if skip_nan and bad.any():
        warnings.warn("All-NaN slice encountered", RuntimeWarning, stacklevel=4)
    qf = q.ravel()
    vi = (k - 1)[None, :] * qf[:, None]              # NumPy's (n - 1) * q, float64
    top = np.maximum(k - 1, 0)[None, :]
    rows = np.arange(m)[None, :]

    def at(index):
        return w[rows, np.clip(index, 0, top).astype(np.intp)] if n else np.full(index.shape,
                                                                               np.nan)

    with np.errstate(invalid="ignore"):
        if method in ("lower", "higher", "nearest"):
            pick = {"lower": np.floor, "higher": np.ceil, "nearest": np.around}[method]
            r = at(pick(vi))
        else:
            fl = np.floor(vi)
            lo = at(fl)
            hi = at(np.ceil(vi) if method == "midpoint" else fl + 1)
            r = lo.copy()
            mix = (vi != fl) & ~bad[None, :]        # a whole index selects
            sel = np.nonzero(mix)
            if method == "midpoint":
                # 0.5*x is exact in float64 for the values of every format narrower
                # than FP64: one correctly rounded addition.
                r[sel] = rounded(arith.add, 0.5 * lo[sel], 0.5 * hi[sel], fmt=fmt)
            elif sel[0].size:
                lo_s, hi_s, g = lo[sel], hi[sel], (vi - fl)[sel]
                d = rounded(arith.sub, hi_s, lo_s, fmt=fmt)
                out = np.empty_like(lo_s)
                up = g >= 0.5
                out[~up] = rounded(arith.add, lo_s[~up],
                               rounded(arith.mul, d[~up], g[~up], fmt=fmt), fmt=fmt)
                # g in [0.5, 1): 1 - g is exact in float64 (Sterbenz).
                out[up] = rounded(arith.sub, hi_s[up],
                              rounded(arith.mul, d[up], 1.0 - g[up], fmt=fmt), fmt=fmt)
                r[sel] = out
    nan_fill = w[:, -1] if n else np.full(m, np.nan)
    r = np.where(bad[None, :], nan_fill[None, :], r)
    shape = _kept_shape(a.shape, axes) if keep else list(rest)
    return Tensor(np.asarray(r.reshape(list(q.shape) + shape)), fmt)


def _levels(q, scale, func):
    """The quantile levels as float64 (a Tensor's values as they are), divided by 100
    in float64 for percentiles as NumPy does; checked to lie in [0, 1]."""
    q = np.asarray(values_of(q), dtype=np.float64)
    if scale != 1:
        q = np.true_divide(q, scale)
    if not np.all((q >= 0) & (q <= 1)):
        what = "Percentiles must be in the range [0, 100]" if scale != 1 else \
            "Quantiles must be in the range [0, 1]"
        raise ValueError(f"{what} (numpy.{func})")
    return q


def _quantile_handler(func, scale, skip_nan):
    def handler(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=np._NoValue, *, weights=None, **kwargs):
        _refuse(func, out=out, weights=weights, **kwargs)
        if not isinstance(a, Tensor):   # a Tensor only as the levels: NumPy's plain answer
            return getattr(np, func)(a, values_of(q), axis=axis,
                                     overwrite_input=overwrite_input, method=method,
                                     keepdims=keepdims)
        return _quantiles(a, _levels(q, scale, func), axis, method, _flag(keepdims),
                          skip_nan, func)
    handler.__name__ = f"_{func}"
    handler.__doc__ = (f"numpy.{func} by `_quantiles` (q{' / 100' if scale != 1 else ''}"
                       f"{', NaNs skipped' if skip_nan else ''}); ``overwrite_input`` "
                       "changes nothing (the Tensor is never written).")
    return handler


@implements(np.nanmedian, "correctly rounded", "NaNs skipped; the middle value of an odd "
            "count; of an even count `0.5*a + 0.5*b`, one correctly rounded addition; all-NaN "
            "gives NaN")
def _nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=np._NoValue):
    """`numpy.median` with NaNs skipped: the middle value of an odd count (exact), of
    an even count ``0.5*lo + 0.5*hi`` with one rounding (`_quantiles`, "midpoint" at
    0.5); an all-NaN slice gives NaN with NumPy's warning.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> np.nanmedian(lp.tensor([[1.0, np.nan, 2.0], [5.0, 1.0, 3.0]], "fp16"), axis=1)
    Tensor([1.5, 3.0], fmt=FP16)
    """
    _refuse("nanmedian", out=out)
    return _quantiles(a, np.asarray(0.5), axis, "midpoint", _flag(keepdims), True,
                      "nanmedian")


# -- cov and corrcoef ---------------------------------------------------------------

def _cov_tensor(m, y, rowvar, bias, ddof):
    if ddof is not None and ddof != int(ddof):
        raise ValueError("ddof must be integer")
    vals, fmt = operands(*([m] if y is None else [m, y]))
    vm = np.asarray(vals[0], dtype=np.float64)
    if vm.ndim > 2:
        raise ValueError("m has more than 2 dimensions")
    x = np.atleast_2d(vm)
    if not rowvar and vm.ndim != 1:
        x = x.T
    if x.shape[0] == 0:
        return Tensor(np.empty((0, 0)), fmt)
    if y is not None:
        vy = np.asarray(vals[1], dtype=np.float64)
        if vy.ndim > 2:
            raise ValueError("y has more than 2 dimensions")
        vy = np.atleast_2d(vy)
        if not rowvar and vy.shape[0] != 1:
            vy = vy.T
        x = np.concatenate((x, vy), axis=0)
    ddof = (0 if bias else 1) if ddof is None else int(ddof)
    fact = x.shape[1] - ddof
    if fact <= 0:
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=4)
        fact = 0
    t = Tensor(x, fmt)
    dev = (t - np.mean(t, axis=1, keepdims=True))._v
    c = np.empty((x.shape[0], x.shape[0]))
    for i in range(x.shape[0]):   # a row at a time: p*n products in memory, not p*p*n
        c[i] = np.sum(Tensor(rounded(arith.mul, dev[i][None, :], dev, fmt=fmt), fmt),
                      axis=-1)._v
    return Tensor(rounded(arith.div, c, float(fact), fmt=fmt).squeeze(), fmt)


@implements(np.cov, "composed", "means as `numpy.mean`; deviations rounded; each product "
            "`d_i*d_j` rounded, summed as `numpy.sum` (pairwise); one rounded division by `n - "
            "ddof`; fweights/aweights/dtype refused")
def _cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
         dtype=None):
    """Rows are variables (``rowvar=False``: columns), as NumPy.

    ``y`` joins ``m``: operands are promoted, plain ones rounded in once. The means
    are as `numpy.mean` (pairwise sum, one division). Deviations ``x - mean`` are
    rounded, and each product ``d_i*d_j`` is rounded. The products are summed as
    `numpy.sum`, pairwise in the format. Last comes one correctly rounded division
    by ``n - ddof``. NumPy multiplies by ``1/(n - ddof)``, but a division is one
    rounding, not two. So ``cov(x)[i, i]`` is ``var(x[i], ddof=1)`` bit for bit.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> np.cov(lp.tensor([[1.0, 2.0, 4.0], [1.0, 3.0, 2.0]], "fp16"))
    Tensor([[2.33203125, 0.5],
            [0.5, 1.0]], fmt=FP16)
    """
    _refuse("cov", fweights=fweights, aweights=aweights, dtype=dtype)
    return _cov_tensor(m, y, rowvar, bias, ddof)


@implements(np.corrcoef, "composed", "`numpy.cov`; `s = sqrt(diag)` rounded; `c / s_i` "
            "rounded, then `/ s_j` rounded; clipped to [-1, 1] (exact)")
def _corrcoef(x, y=None, rowvar=True, bias=np._NoValue, ddof=np._NoValue, *, dtype=None):
    """`numpy.cov` (``ddof=1``), then as NumPy: the square roots of the diagonal
    rounded, ``c / s_i`` rounded, then ``/ s_j`` rounded, clipped to [-1, 1] (exact);
    a single variable gives ``c / c``. ``bias``/``ddof`` (gone in NumPy 2.4) change
    nothing, as in NumPy, with its warning.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> np.corrcoef(lp.tensor([[1.0, 2.0, 4.0], [1.0, 3.0, 2.0]], "bf16"))
    Tensor([[1.0, 0.326171875],
            [0.326171875, 1.0]], fmt=BF16)
    """
    _refuse("corrcoef", dtype=dtype)
    if given(bias) or given(ddof):
        warnings.warn("bias and ddof have no effect and are deprecated",
                      DeprecationWarning, stacklevel=3)
    c = _cov_tensor(x, y, rowvar, False, None)
    fmt = c.fmt
    if c.ndim == 0:
        return Tensor(rounded(arith.div, c._v, c._v, fmt=fmt), fmt)
    s = rounded(arith.sqrt, np.diagonal(c._v), fmt=fmt)
    r = rounded(arith.div, c._v, s[:, None], fmt=fmt)
    r = rounded(arith.div, r, s[None, :], fmt=fmt)
    return Tensor(np.clip(r, -1.0, 1.0), fmt)   # ±1 are values of every format


# -- interp, gradient, trapezoid, ediff1d, cumulative sums --------------------------------

@implements(np.interp, "composed", "interval by binary search (exact); `slope = (fp[j+1] - "
            "fp[j]) / (xp[j+1] - xp[j])`, then `slope*(x - xp[j]) + fp[j]`, each rounded "
            "(NumPy's C order and NaN fallback); at sample points and outside, selections; "
            "plain operands rounded in once; `period=` refused")
def _interp(x, xp, fp, left=None, right=None, period=None):
    """NumPy's C loop, each operation rounded in the promoted format of the Tensor
    operands.

    Plain ``x``, ``xp``, ``fp``, ``left`` and ``right`` are rounded in once.

    * The interval is found by binary search (exact).
    * Outside it the result is ``left`` or ``right`` (default ``fp[0]`` and
      ``fp[-1]``). At the last point or at a sample point it is ``fp[j]`` (exact).
    * Else ``slope = (fp[j+1] - fp[j]) / (xp[j+1] - xp[j])``, then
      ``slope*(x - xp[j]) + fp[j]``.
    * Where that is NaN: ``slope*(x - xp[j+1]) + fp[j+1]``. If still NaN and
      ``fp[j] == fp[j+1]``, ``fp[j]``.

    NaN ``x`` gives NaN. ``period=`` is refused.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> np.interp(2.5, lp.tensor([1.0, 2.0, 3.0], "fp16"), lp.tensor([3.0, 2.0, 0.0], "fp16"))
    Tensor(1.0, fmt=FP16)
    """
    _refuse("interp", period=period)
    if any(np.iscomplexobj(values_of(v)) for v in (fp, left, right) if v is not None):
        raise TypeError("lowprec.Tensor does not support complex fp in numpy.interp: "
                        "lowprec has no complex formats")
    ends = [v for v in (left, right) if v is not None]
    vals, fmt = operands(x, xp, fp, *ends)
    vx, vxp, vfp = (np.asarray(v, dtype=np.float64) for v in vals[:3])
    if vxp.ndim != 1 or vfp.ndim != 1:
        raise ValueError("numpy.interp: xp and fp must be 1-D sequences")
    if vxp.size != vfp.size:
        raise ValueError("fp and xp are not of the same length.")
    if vxp.size == 0:
        raise ValueError("array of sample points is empty")
    given = iter(vals[3:])
    lval = float(np.asarray(next(given))) if left is not None else vfp[0]
    rval = float(np.asarray(next(given))) if right is not None else vfp[-1]
    xf = vx.ravel()
    size = vxp.size
    if size == 1:   # NumPy's own branch: no search, NaN x gives fp[0]
        res = np.where(xf < vxp[0], lval, np.where(xf > vxp[0], rval, vfp[0]))
        return Tensor(np.asarray(res, dtype=np.float64).reshape(vx.shape), fmt)
    j = np.searchsorted(vxp, xf, side="right") - 1
    j[xf > vxp[-1]] = size
    res = np.empty_like(xf)
    res[j == -1] = lval
    res[j == size] = rval
    res[j == size - 1] = vfp[-1]
    inner = (j >= 0) & (j < size - 1)
    jc = np.clip(j, 0, size - 2)
    hit = inner & (vxp[jc] == xf)     # NumPy: avoid a non-finite interpolation
    res[hit] = vfp[jc[hit]]
    mid = inner & ~hit & ~np.isnan(xf)
    if mid.any():
        jj, xm = jc[mid], xf[mid]
        slope = rounded(arith.div, rounded(arith.sub, vfp[jj + 1], vfp[jj], fmt=fmt),
                    rounded(arith.sub, vxp[jj + 1], vxp[jj], fmt=fmt), fmt=fmt)
        r = rounded(arith.add, rounded(arith.mul, slope, rounded(arith.sub, xm, vxp[jj], fmt=fmt),
                               fmt=fmt), vfp[jj], fmt=fmt)
        again = np.isnan(r)
        if again.any():   # NumPy: "if we get nan in one direction, try the other"
            j1 = jj[again] + 1
            r2 = rounded(arith.add, rounded(arith.mul, slope[again],
                                    rounded(arith.sub, xm[again], vxp[j1], fmt=fmt), fmt=fmt),
                     vfp[j1], fmt=fmt)
            flat = np.isnan(r2) & (vfp[j1 - 1] == vfp[j1])
            r[again] = np.where(flat, vfp[j1 - 1], r2)
        res[mid] = r
    res[np.isnan(xf)] = xf[np.isnan(xf)]
    return Tensor(res.reshape(vx.shape), fmt)


@implements(np.gradient, "composed", "`(f[i+1] - f[i-1]) / 2h` inside, `(f[1] - f[0]) / h` at "
            "the edges (edge_order=2: NumPy's three-term formula), each rounded; `2h`, `h` "
            "rounded into the format once; scalar spacings only")
def _gradient(f, *varargs, axis=None, edge_order=1):
    """NumPy's uniform-spacing gradient, each operation rounded in the promoted format
    of the Tensors among ``f`` and the spacings: interior ``(f[i+1] - f[i-1]) / (2h)``,
    edges ``(f[1] - f[0]) / h`` and ``(f[-1] - f[-2]) / h`` (``edge_order=2``:
    NumPy's ``(a*f[0] + b*f[1]) + c*f[2]`` with ``a, b, c = -1.5/h, 2/h, -0.5/h``, and
    ``0.5/h, -2/h, 1.5/h`` at the end). The divisors ``2h``, ``h`` and the coefficients
    are NumPy's float64 numbers (``2h`` exact), each rounded into the format once, as
    NumPy rounds a Python scalar into the array's dtype. Only scalar spacings; one
    axis gives a Tensor, several a tuple.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> np.gradient(lp.tensor([1.0, 2.0, 4.0, 7.0, 11.0], "fp8_e4m3"))
    Tensor([1.0, 1.5, 2.5, 3.5, 4.0], fmt=FP8_E4M3)
    """
    if any(np.ndim(values_of(s)) != 0 for s in varargs):
        raise TypeError("lowprec.Tensor supports numpy.gradient with scalar spacings "
                        "only: coordinate arrays are not emulated")
    if edge_order not in (1, 2):
        raise ValueError("'edge_order' greater than 2 not supported" if edge_order > 2
                         else "edge_order must be 1 or 2")
    vals, fmt = exact_operands(f, *varargs)
    vf = vals[0] if isinstance(f, Tensor) else np.asarray(round_ctx(vals[0], fmt, None))
    axes = (tuple(range(vf.ndim)) if axis is None
            else tuple(np.lib.array_utils.normalize_axis_tuple(axis, vf.ndim)))
    hs = [float(v) for v in vals[1:]]
    if not hs:
        hs = [1.0] * len(axes)
    elif len(hs) == 1:
        hs = hs * len(axes)
    elif len(hs) != len(axes):
        raise TypeError("invalid number of arguments")

    def into(c):
        return float(round_ctx(c, fmt, None))

    def combo(coefs, terms):
        p = [rounded(arith.mul, into(c), t, fmt=fmt) for c, t in zip(coefs, terms)]
        return rounded(arith.add, rounded(arith.add, p[0], p[1], fmt=fmt), p[2], fmt=fmt)

    outs = []
    for ax, h in zip(axes, hs):
        if vf.shape[ax] < edge_order + 1:
            raise ValueError("Shape of array too small to calculate a numerical gradient, "
                             "at least (edge_order + 1) elements are required.")
        g = np.moveaxis(vf, ax, -1)
        out = np.empty(g.shape)
        # 2.0 * h is exact in float64; NumPy rounds it into the dtype once.
        out[..., 1:-1] = rounded(arith.div, rounded(arith.sub, g[..., 2:], g[..., :-2], fmt=fmt),
                             into(2.0 * h), fmt=fmt)
        if edge_order == 1:
            out[..., 0] = rounded(arith.div, rounded(arith.sub, g[..., 1], g[..., 0], fmt=fmt),
                              into(h), fmt=fmt)
            out[..., -1] = rounded(arith.div, rounded(arith.sub, g[..., -1], g[..., -2], fmt=fmt),
                               into(h), fmt=fmt)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                first, last = (-1.5 / h, 2.0 / h, -0.5 / h), (0.5 / h, -2.0 / h, 1.5 / h)
            out[..., 0] = combo(first, (g[..., 0], g[..., 1], g[..., 2]))
            out[..., -1] = combo(last, (g[..., -3], g[..., -2], g[..., -1]))
        outs.append(Tensor(np.moveaxis(out, -1, ax), fmt))
    return outs[0] if len(outs) == 1 else tuple(outs)


def _trapezoid(y, x=None, dx=1.0, axis=-1):
    """NumPy's ``(d * (y[1:] + y[:-1]) / 2.0).sum(axis)``: each sum, product and
    halving rounded, the sum as `numpy.sum` (pairwise in the format). ``d`` is ``dx``
    (a plain number rounded into the format once) or ``diff(x)`` (``x`` rounded in
    once if plain, each difference rounded).

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> np.trapezoid(lp.tensor([1.0, 2.0, 3.0], "bf16"), dx=0.5)
    Tensor(2.0, fmt=BF16)
    """
    if x is None:
        (vy, d), fmt = operands(y, dx)
        vy = np.asarray(vy, dtype=np.float64)
    else:
        (vy, vx), fmt = operands(y, x)
        vy, vx = np.asarray(vy, dtype=np.float64), np.asarray(vx, dtype=np.float64)
        if vx.ndim == 1:
            d = rounded(arith.sub, vx[1:], vx[:-1], fmt=fmt)
            shape = [1] * vy.ndim
            shape[axis] = d.shape[0]
            d = d.reshape(shape)
        else:
            vx = np.moveaxis(vx, axis, -1)
            d = np.moveaxis(rounded(arith.sub, vx[..., 1:], vx[..., :-1], fmt=fmt), -1, axis)
    ym = np.moveaxis(vy, axis, -1)
    s = np.moveaxis(rounded(arith.add, ym[..., 1:], ym[..., :-1], fmt=fmt), -1, axis)
    half = rounded(arith.div, rounded(arith.mul, d, s, fmt=fmt), 2.0, fmt=fmt)
    return np.sum(Tensor(half, fmt), axis=axis)


@implements(np.ediff1d, "composed", "as `numpy.diff` of the flattened Tensor; "
            "`to_begin`/`to_end` rounded into its format once")
def _ediff1d(ary, to_end=None, to_begin=None):
    """`numpy.diff` of the flattened Tensor (each subtraction rounded), ``to_begin`` and
    ``to_end`` rounded into its format once (a Tensor of another format too: NumPy
    keeps ``ary``'s dtype)."""
    if isinstance(ary, Tensor):
        fmt = ary.fmt
    else:
        fmt = operands(*[v for v in (to_begin, to_end) if v is not None])[1]

    def into(v):
        if isinstance(v, Tensor) and v.fmt == fmt:
            return np.ravel(v._v)
        return np.ravel(np.asarray(round_ctx(values_of(v), fmt, None), dtype=np.float64))

    flat = into(ary)
    parts = [rounded(arith.sub, flat[1:], flat[:-1], fmt=fmt)]
    if to_begin is not None:
        parts.insert(0, into(to_begin))
    if to_end is not None:
        parts.append(into(to_end))
    return Tensor(np.concatenate(parts), fmt)


def _cumulative(func, base, start):
    """cumulative_sum/cumulative_prod: as `numpy.cumsum`/`numpy.cumprod` on the Tensor
    along ``axis`` (required above 1-D), ``include_initial`` prepending an exact 0/1."""
    def handler(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        _refuse(func, out=out, dtype=dtype)
        v = np.atleast_1d(x._v)
        if v.ndim > 1 and axis is None:
            raise ValueError("For arrays which have more than one dimension ``axis`` "
                             "argument is required.")
        ax = 0 if axis is None else int(np.lib.array_utils.normalize_axis_index(axis, v.ndim))
        r = base(Tensor(v, x.fmt), axis=ax)
        if include_initial:
            shape = list(r.shape)
            shape[ax] = 1
            r = Tensor(np.concatenate([np.full(shape, start), r._v], axis=ax), x.fmt)
        return r
    handler.__name__ = f"_{func}"
    return handler


# -- histograms ------------------------------------------------------------------------

@implements(np.histogram, "composed", "edges float64 and counts int64 plain (NumPy's); "
            "`weights=`: each bin's weights summed as `numpy.sum`; `density=`: `n / width / "
            "total`, each division rounded (widths and counts exact)")
def _histogram(a, bins=10, range=None, density=None, weights=None):  # noqa: A002
    """Plain counts (int64) and edges (float64) as NumPy, without weights or density.
    The edges are always NumPy's (`numpy.histogram_bin_edges` on the values), a value
    in bin ``i`` when ``edges[i] <= v < edges[i+1]`` (the last bin closed). With
    ``weights=`` (a Tensor, or plain and rounded into ``a``'s format once), each bin's
    weights, in the flattened order, summed as `numpy.sum` (pairwise in the format).
    With ``density=True``: ``n / width / total`` as NumPy, each division rounded, the
    total as `numpy.sum` of the bin sums (or the exact count); counts and the float64
    widths enter the divisions exactly.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> t = lp.tensor([0.0, 0.25, 0.5, 1.0], "fp16")
    >>> np.histogram(t, bins=2, weights=lp.tensor([0.1, 0.2, 0.3, 0.4], "fp16"))[0]
    Tensor([0.2998046875, 0.7001953125], fmt=FP16)
    >>> np.histogram(t, bins=2, density=True)[0]
    Tensor([1.0, 1.0], fmt=FP16)
    """
    va = np.asarray(values_of(a), dtype=np.float64)
    vb = values_of(bins)
    if weights is None and not density:
        return np.histogram(va, bins=vb, range=range)
    vw = None if weights is None else values_of(weights)
    edges = np.histogram_bin_edges(va, bins=vb, range=range, weights=vw)
    fmt = next(t.fmt for t in (weights, a, bins) if isinstance(t, Tensor))
    nb = edges.size - 1
    flat = va.ravel()
    kept = (flat >= edges[0]) & (flat <= edges[-1])
    idx = np.searchsorted(edges, flat[kept], side="right") - 1
    idx[idx == nb] = nb - 1                    # the last edge closes the last bin
    if weights is None:
        n = np.bincount(idx, minlength=nb).astype(np.float64)   # exact counts
        total = float(n.sum())
    else:
        wv = weights._v if isinstance(weights, Tensor) and weights.fmt == fmt else \
            np.asarray(round_ctx(values_of(weights), fmt, None), dtype=np.float64)
        wv = np.ravel(wv)[kept]
        order = np.argsort(idx, kind="stable")     # flattened order within a bin
        ws, starts = wv[order], np.searchsorted(idx[order], np.arange(nb + 1))
        n = np.zeros(nb)
        for b in np.nonzero(np.diff(starts))[0]:
            n[b] = np.sum(Tensor(ws[starts[b]:starts[b + 1]], fmt))._v
        if not density:
            return Tensor(n, fmt), edges
        total = float(np.sum(Tensor(n, fmt))._v)
    r = rounded(arith.div, rounded(arith.div, n, np.diff(edges), fmt=fmt), total, fmt=fmt)
    return Tensor(r, fmt), edges


def _plain(fn):
    """Answers that are not values of a format (edges, counts): NumPy's on the values."""
    def handler(*args, **kwargs):
        return fn(*(values_of(x) for x in args), **{k: values_of(v) for k, v in kwargs.items()})
    return handler


_COUNTS_ONLY = {"weights": "weighted multi-dimensional histograms are not emulated "
                           "(numpy.histogram takes weights=)",
                "density": "densities of multi-dimensional histograms are not emulated "
                           "(numpy.histogram takes density=)"}


def _bins(bins):
    return [values_of(b) for b in bins] if isinstance(bins, (list, tuple)) else values_of(bins)


@implements(np.histogram2d, *_PLAIN_EDGES)
def _histogram2d(x, y, bins=10, range=None, density=None, weights=None):  # noqa: A002
    """Plain counts (float64, as NumPy) and edges; ``density=``/``weights=`` refused."""
    _refuse("histogram2d", _COUNTS_ONLY, density=density or None, weights=weights)
    return np.histogram2d(values_of(x), values_of(y), bins=_bins(bins), range=range)


@implements(np.histogramdd, *_PLAIN_EDGES)
def _histogramdd(sample, bins=10, range=None, density=None, weights=None):  # noqa: A002
    """Plain counts (float64, as NumPy) and edges; ``density=``/``weights=`` refused."""
    _refuse("histogramdd", _COUNTS_ONLY, density=density or None, weights=weights)
    if isinstance(sample, (list, tuple)):
        sample = [values_of(s) for s in sample]
    return np.histogramdd(values_of(sample), bins=_bins(bins), range=range)


# -- the factory-made handlers -------------------------------------------------------

_TABLE: list[tuple[Callable[..., object], Callable[..., object], tuple[str, str]]] = [
    (np.nanargmax, _nan_arg(np.nanargmax), _NAN_ARG),
    (np.nanargmin, _nan_arg(np.nanargmin), _NAN_ARG),
    (np.quantile, _quantile_handler("quantile", 1, False), _QUANTILE),
    (np.percentile, _quantile_handler("percentile", 100, False), _QUANTILE),
    (np.nanquantile, _quantile_handler("nanquantile", 1, True), _NAN_QUANTILE),
    (np.nanpercentile, _quantile_handler("nanpercentile", 100, True), _NAN_QUANTILE),
    (np.histogram_bin_edges, _plain(np.histogram_bin_edges),
     ("plain", "float64 edges, NumPy's on the values")),
]
for _fn, _handler, _kind in _TABLE:
    implements(_fn, *_kind)(_handler)

# NumPy 2 names trapz trapezoid (and NumPy 2.4 removed trapz); 2.1 added cumulative_*.
for _name, _new, _order in (
        ("trapezoid", _trapezoid, None), ("trapz", _trapezoid, None),
        ("cumulative_sum", _cumulative("cumulative_sum", np.cumsum, 0.0),
         "as `numpy.cumsum` along `axis`; `include_initial` prepends an exact 0"),
        ("cumulative_prod", _cumulative("cumulative_prod", np.cumprod, 1.0),
         "as `numpy.cumprod` along `axis`; `include_initial` prepends an exact 1")):
    _np_fn = getattr(np, _name, None)
    if _np_fn is not None:
        implements(_np_fn, "composed", _order or _TRAPEZOID)(_new)
