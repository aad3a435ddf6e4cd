"""NumPy's products and polynomials on Tensors.

The functions are ``convolve``, ``correlate``, ``kron``, ``vdot``, ``cross``,
``vecdot``/``matvec``/``vecmat``, the ``poly*`` functions, ``vander`` and ``einsum``
in general. Each is composed of rounded Tensor operations in a documented order, or
runs through the context's matmul model. Each handler is registered beside its def
by `core.implements`, a ufunc among them by its name. None computes a result in
float64 and hands it back unrounded.

Examples
--------
>>> import numpy as np, lowprec as lp
>>> np.convolve(lp.tensor([1.0, 2.0, 3.0], "bf16"), lp.tensor([1.0, 0.5], "bf16"))
Tensor([1.0, 2.5, 4.0, 1.5], fmt=FP32)
>>> np.polyval(lp.tensor([1.0, 0.0, -2.0], "fp16"), 1.5)
Tensor(0.25, fmt=FP16)
>>> np.einsum("ii", lp.tensor([[1.0, 9.0], [9.0, 2.0]], "e4m3"))
Tensor(3.0, fmt=FP8_E4M3)
"""

from __future__ import annotations

import string
import warnings
from typing import Any

import numpy as np

from .. import arith, rounding
from .core import Tensor, implements, operands, values_of
from .defaults import round_ctx
from .functions import matmul, refuse, rounded

__all__: list[str] = []

_CONV = ("matmul model", "each output the dot product of the overlapping terms, products "
                         "in increasing index of `a`, through `lp.matmul` (context's "
                         "model): full-overlap outputs one window matrix times a vector, "
                         "each shorter end output its own; no zero padding; result in "
                         "`matmul`'s format (FP32 by default)")


def _refuse(func, **kwargs):
    """`functions.refuse`; ``dtype=``: the format is the model's or the Tensor's."""
    refuse(func, {"dtype": "the result's format is the model's or the Tensor's (convert "
                           "with .astype())"}, **kwargs)


def _tensors(*xs):
    """``xs`` as Tensors of their common format (promoted exactly); plain operands
    rounded in once with the context's mode, as `operands` does."""
    vals, fmt = operands(*xs)
    return [Tensor(np.asarray(v, dtype=np.float64), fmt) for v in vals]


def _matmul_operands(*xs):
    """Tensors kept as they are (`matmul` promotes them, or takes a mixed pair as an
    instruction does); plain operands rounded into the Tensors' common format with
    RNE, as `lp.matmul` rounds them."""
    _, fmt = operands(*(x for x in xs if isinstance(x, Tensor)))
    return [x if isinstance(x, Tensor) else
            Tensor(np.asarray(rounding.round(np.asarray(x, dtype=np.float64), fmt)), fmt)
            for x in xs]


# -- convolve, correlate, polymul: the matmul model ------------------------------------

def _mode(mode, func):
    if not isinstance(mode, str) or not mode or mode.lower()[0] not in "fsv":
        raise ValueError(f"numpy.{func}: mode must be 'full', 'same' or 'valid', got {mode!r}")
    return mode.lower()[0]


def _sequences(a, v, func):
    ta, tv = _matmul_operands(a, v)
    if ta.ndim > 1 or tv.ndim > 1:
        raise ValueError(f"numpy.{func} needs 1-D sequences, got shapes {ta.shape} and "
                         f"{tv.shape}")
    ta, tv = ta.reshape(-1), tv.reshape(-1)
    if ta.size == 0:
        raise ValueError(f"numpy.{func}: a cannot be empty")
    if tv.size == 0:
        raise ValueError(f"numpy.{func}: v cannot be empty")
    return ta, tv


def _sliding(ta, tv, mode):
    """The convolution of two 1-D Tensors: output ``k`` is the dot product of
    ``a[j]`` and ``v[k - j]`` over the ``j`` where both exist, in increasing ``j``,
    through `matmul`. No zero padding at the ends (a padded zero times an infinity
    would be a NaN NumPy does not give): the outputs of full overlap are one window
    matrix of ``a`` times ``v`` reversed (or ``a`` times a window matrix of ``v``), each
    shorter end output a product of its own length."""
    n, m = ta.size, tv.size
    s, big = min(n, m), max(n, m)
    first = {"f": 0, "s": s - 1 - s // 2, "v": s - 1}[mode]
    count = {"f": n + m - 1, "s": big, "v": big - s + 1}[mode]
    ks = np.arange(first, first + count)
    lo = np.maximum(0, ks - m + 1)
    length = np.minimum(ks, n - 1) - lo + 1
    r = np.empty(count)
    fmt = None
    for size in np.unique(length):
        at = np.flatnonzero(length == size)
        j = lo[at, None] + np.arange(size)          # the indices of a, increasing
        if size == s and n >= m:                    # full overlap: a's windows times v
            p = matmul(ta[j], tv[::-1])
        elif size == s:                             # full overlap: a times v's windows
            p = matmul(ta, tv[(ks[at, None] - j).T])
        else:                                       # the ends: at most two of each length
            p = matmul(ta[j][:, None, :], tv[ks[at, None] - j][:, :, None]).reshape(-1)
        r[at] = p.values
        fmt = p.fmt
    return Tensor(r, fmt)


@implements(np.convolve, *_CONV)
def _convolve(a, v, mode="full"):
    """Each output a dot product through `matmul` (the context's model).

    Its products come in increasing index of ``a``. The result is in `matmul`'s
    format (FP32 by default).

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> a, v = lp.tensor([1.0, 2.0, 3.0, 4.0], "fp16"), lp.tensor([1.0, -1.0], "fp16")
    >>> np.convolve(a, v, "valid"), np.correlate(a, v)
    (Tensor([1.0, 1.0, 1.0], fmt=FP32), Tensor([-1.0, -1.0, -1.0], fmt=FP32))
    """
    ta, tv = _sequences(a, v, "convolve")
    return _sliding(ta, tv, _mode(mode, "convolve"))


@implements(np.correlate, "matmul model", "`numpy.convolve(a, v[::-1], mode)`: " + _CONV[1])
def _correlate(a, v, mode="valid"):
    """``convolve(a, v[::-1], mode)``: NumPy's correlation of real sequences, in every
    mode and for either length order."""
    ta, tv = _sequences(a, v, "correlate")
    return _sliding(ta, tv[::-1], _mode(mode, "correlate"))


@implements(np.polymul, "matmul model", "`numpy.convolve(a1, a2)` (full): " + _CONV[1])
def _polymul(a1, a2):
    """`numpy.polymul`: ``convolve(a1, a2)`` of the coefficients (0-d as length 1)."""
    return _convolve(a1, a2, "full")


# -- kron, vdot, cross, vecdot, matvec, vecmat ------------------------------------------

@implements(np.kron, "correctly rounded", "each product rounded once (promoted format), in "
            "NumPy's layout")
def _kron(a, b):
    """Each product ``a[i] * b[j]`` rounded once (correctly), in NumPy's layout.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> np.kron(lp.tensor([1.0, 3.0], "e4m3"), lp.tensor([1.0, 1.375], "e4m3"))
    Tensor([1.0, 1.375, 3.0, 4.0], fmt=FP8_E4M3)
    """
    (va, vb), fmt = operands(a, b)
    va, vb = np.asarray(va, dtype=np.float64), np.asarray(vb, dtype=np.float64)
    nd = max(va.ndim, vb.ndim)
    sa = (1,) * (nd - va.ndim) + va.shape
    sb = (1,) * (nd - vb.ndim) + vb.shape
    # a's axis i at 2i, b's at 2i + 1: the product's element (i, j) lands at i*len(b)+j.
    xa = va.reshape([d for s in sa for d in (s, 1)])
    xb = vb.reshape([d for s in sb for d in (1, s)])
    r = rounded(arith.mul, xa, xb, fmt=fmt)
    return Tensor(np.asarray(r).reshape([p * q for p, q in zip(sa, sb)]), fmt)


@implements(np.vdot, "matmul model", "the flattened dot product through `lp.matmul` (context's "
            "model, FP32 result by default)")
def _vdot(a, b, /):
    """The flattened dot product through `matmul` (a 0-d Tensor of its format)."""
    ta, tb = _matmul_operands(a, b)
    if ta.size != tb.size:
        raise ValueError(f"numpy.vdot: vectors have different lengths, {ta.size} and "
                         f"{tb.size}")
    return matmul(ta.reshape(-1), tb.reshape(-1))


@implements(np.cross, "composed", "per component two rounded products, then a rounded "
            "difference (not fused); with a 2-vector (z = 0) NumPy's single product or its "
            "negation; two 2-vectors: the scalar z")
def _cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """NumPy's components: two rounded products, then a rounded difference (not fused).

    Where one operand is a 2-vector (its z zero), a component is NumPy's single
    product, or its negation. Two 2-vectors give the scalar z component.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> np.cross(lp.tensor([1.0, 2.0, 3.0], "bf16"), lp.tensor([4.0, 5.0, 6.0], "bf16"))
    Tensor([-3.0, 6.0, -3.0], fmt=BF16)
    """
    if axis is not None:
        axisa = axisb = axisc = axis
    ta, tb = _tensors(a, b)
    if ta.ndim < 1 or tb.ndim < 1:
        raise ValueError("numpy.cross: at least one array has zero dimension")
    ta, tb = np.moveaxis(ta, axisa, -1), np.moveaxis(tb, axisb, -1)
    na, nb = ta.shape[-1], tb.shape[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError("numpy.cross: incompatible dimensions for cross product "
                         "(dimension must be 2 or 3)")
    if na == 2 or nb == 2:
        warnings.warn("Arrays of 2-dimensional vectors are deprecated. Use arrays of "
                      "3-dimensional vectors instead. (deprecated in NumPy 2.0)",
                      DeprecationWarning, stacklevel=3)
    a0, a1, b0, b1 = ta[..., 0], ta[..., 1], tb[..., 0], tb[..., 1]
    z = a0 * b1 - a1 * b0
    if na == 2 and nb == 2:
        return z
    if na == 2:
        b2 = tb[..., 2]
        x, y = a1 * b2, -(a0 * b2)
    elif nb == 2:
        a2 = ta[..., 2]
        x, y = -(a2 * b1), a2 * b0
    else:
        a2, b2 = ta[..., 2], tb[..., 2]
        x, y = a1 * b2 - a2 * b1, a2 * b0 - a0 * b2
    x, y, z = np.broadcast_arrays(x.values, y.values, z.values)
    r = np.stack([x, y, z], axis=-1)
    return Tensor(np.ascontiguousarray(np.moveaxis(r, -1, axisc)), ta.fmt)


def _core(x, k, func, what):
    if x.ndim < k:
        raise ValueError(f"numpy.{func}: {what} needs at least {k} dimension"
                         f"{'s' if k > 1 else ''}, got shape {x.shape}")


def _vecdot(x1, x2, /):
    """Dot products of the last axes (leading axes broadcast), each a 1 x k by k x 1
    `matmul`."""
    a, b = _matmul_operands(x1, x2)
    _core(a, 1, "vecdot", "x1")
    _core(b, 1, "vecdot", "x2")
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(f"numpy.vecdot: last axes differ, {a.shape[-1]} and {b.shape[-1]}")
    r = matmul(a[..., None, :], b[..., :, None])
    return r[..., 0, 0]


def _matvec(x1, x2, /):
    """Matrices (..., m, n) times vectors (..., n): `matmul` of the vectors as columns."""
    a, b = _matmul_operands(x1, x2)
    _core(a, 2, "matvec", "x1")
    _core(b, 1, "matvec", "x2")
    return matmul(a, b[..., :, None])[..., 0]


def _vecmat(x1, x2, /):
    """Vectors (..., n) times matrices (..., n, m): `matmul` of the vectors as rows."""
    a, b = _matmul_operands(x1, x2)
    _core(a, 1, "vecmat", "x1")
    _core(b, 2, "vecmat", "x2")
    return matmul(a[..., None, :], b)[..., 0, :]


# -- polynomials --------------------------------------------------------------------

@implements(np.polyval, "composed", "Horner from y = 0: y = y * x + p[i], the product and the "
            "sum each rounded (not fused)")
def _polyval(p, x):
    """NumPy's Horner loop ``y = y * x + p[i]`` from ``y = 0``, the product and the sum
    each rounded (not fused); ``p`` and ``x`` in their common format.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> np.polyval(lp.tensor([3.0, 0.0, 1.0], "bf16"), lp.tensor([1.0, 0.1], "bf16"))
    Tensor([4.0, 1.03125], fmt=BF16)
    """
    tp, tx = _tensors(p, x)
    y = Tensor(np.zeros(tx.shape), tx.fmt)
    for pv in (tp if tp.ndim else [tp]):
        y = y * tx + pv
    return y


def _padded(a1, a2, fn):
    """NumPy's polyadd/polysub: the shorter operand zero-padded on the left (at the
    high powers), then each coefficient one correctly rounded ``fn``."""
    t1, t2 = _tensors(a1, a2)
    v1, v2 = np.atleast_1d(t1.values), np.atleast_1d(t2.values)
    d = len(v2) - len(v1)
    if d > 0:
        v1 = np.concatenate([np.zeros(d), v1])
    elif d < 0:
        v2 = np.concatenate([np.zeros(-d), v2])
    return Tensor(rounded(fn, v1, v2, fmt=t1.fmt), t1.fmt)


@implements(np.polyadd, "correctly rounded", "the shorter zero-padded at the high powers, each "
            "sum rounded once")
def _polyadd(a1, a2):
    return _padded(a1, a2, arith.add)


@implements(np.polysub, "correctly rounded", "the shorter zero-padded at the high powers, each "
            "difference rounded once")
def _polysub(a1, a2):
    return _padded(a1, a2, arith.sub)


@implements(np.polyder, "composed", "m rounds of coefficients times exact integers, each "
            "product rounded once")
def _polyder(p, m=1):
    """``m`` rounds of ``p[:-1] * [n, ..., 1]``: each coefficient times an exact
    integer, one correct rounding each round.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> np.polyder(lp.tensor([1.0, 1.0, 1.0, 1.0], "e4m3"), 2)
    Tensor([6.0, 2.0], fmt=FP8_E4M3)
    """
    m = int(m)
    if m < 0:
        raise ValueError("numpy.polyder: order of derivative must be positive "
                         "(see polyint)")
    (t,) = _tensors(p)
    v = np.atleast_1d(t.values)
    for _ in range(m):
        n = len(v) - 1
        # Integers below 2**53 are exact float64 operands: one rounding of the product.
        v = rounded(arith.mul, v[:-1], np.arange(n, 0, -1, dtype=np.float64), fmt=t.fmt)
    return Tensor(np.array(v, dtype=np.float64), t.fmt)


@implements(np.polyint, "composed", "m rounds of coefficients divided by exact integers, each "
            "quotient rounded once; k rounded into the format once")
def _polyint(p, m=1, k=None):
    """``m`` rounds of ``p / [len(p), ..., 1]`` (each quotient by an exact integer
    correctly rounded) with the next constant of ``k`` appended; ``k`` (default zeros)
    rounded into the format once, as a plain operand is.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> np.polyint(lp.tensor([1.0, 1.0, 1.0], "bf16"), k=0.1)
    Tensor([0.333984375, 0.5, 1.0, 0.10009765625], fmt=BF16)
    """
    m = int(m)
    if m < 0:
        raise ValueError("numpy.polyint: order of integral must be positive (see polyder)")
    kk = np.zeros(m) if k is None else k
    tp, tk = _tensors(p, kk)
    kv = np.atleast_1d(tk.values)
    if len(kv) == 1 and m > 1:
        kv = np.full(m, kv[0])
    if len(kv) < m:
        raise ValueError("numpy.polyint: k must be a scalar or a rank-1 array of length 1 "
                         "or >m")
    v = np.atleast_1d(tp.values)
    for i in range(m):
        q = rounded(arith.div, v, np.arange(len(v), 0, -1, dtype=np.float64), fmt=tp.fmt)
        v = np.concatenate([q.reshape(-1), kv[i:i + 1]])
    return Tensor(np.array(v, dtype=np.float64), tp.fmt)


@implements(np.vander, "composed", "x**k = x**(k-1) * x left to right (a cumulative product), "
            "each multiplication rounded; x**0 = 1, x**1 = x exact")
def _vander(x, N=None, increasing=False):
    """NumPy's columns: ``x**0 = 1``, ``x**1 = x``, then ``x**k = x**(k-1) * x``, each
    multiplication rounded (a cumulative product, left to right); ``increasing=False``
    puts the highest power first, as NumPy (below, 1.5**3 = 3.375 is a tie in FP8 E4M3).

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> np.vander(lp.tensor([1.5, 3.0], "e4m3"), 4)
    Tensor([[3.5, 2.25, 1.5, 1.0],
            [28.0, 9.0, 3.0, 1.0]], fmt=FP8_E4M3)
    """
    (t,) = _tensors(x)
    if t.ndim != 1:
        raise ValueError("numpy.vander: x must be a one-dimensional array or sequence")
    n = len(t) if N is None else int(N)
    v = np.empty((len(t), n))
    if n > 0:
        v[:, 0] = round_ctx(1.0, t.fmt, None)
    if n > 1:
        v[:, 1] = t.values
    for i in range(2, n):
        v[:, i] = rounded(arith.mul, v[:, i - 1], t.values, fmt=t.fmt)
    return Tensor(v if increasing else np.ascontiguousarray(v[:, ::-1]), t.fmt)


# -- einsum ---------------------------------------------------------------------------

def _letters_of(sub):
    """A sublist of NumPy's other calling form as letters (``...`` for Ellipsis)."""
    out = []
    for s in sub:
        if s is Ellipsis:
            out.append("...")
        elif isinstance(s, (int, np.integer)) and 0 <= int(s) < 52:
            out.append(string.ascii_letters[int(s)])
        else:
            raise ValueError(f"numpy.einsum: a subscript must be an integer in [0, 52) "
                             f"or Ellipsis, got {s!r}")
    return "".join(out)


def _einsum_args(args):
    """(subscripts, operands) from either calling form."""
    if not args:
        raise TypeError("numpy.einsum needs subscripts and operands")
    if isinstance(args[0], str):
        return args[0], list(args[1:])
    pairs = args[:len(args) - len(args) % 2]
    spec = ",".join(_letters_of(s) for s in pairs[1::2])
    if len(args) % 2:    # an odd count of arguments: the last is the output
        spec += "->" + _letters_of(args[-1])
    return spec, list(pairs[0::2])


def _einsum_spec(subscripts, shapes):
    """The terms and output as letters, ``...`` replaced by letters the spec does not
    use (aligned to the right, as broadcasting does), and each letter's size."""
    spec = subscripts.replace(" ", "")
    if spec.count("->") > 1 or any(c not in string.ascii_letters + ".,->" for c in spec):
        raise ValueError(f"numpy.einsum: invalid subscripts {subscripts!r}")
    ins, arrow, res = spec.partition("->")
    terms = ins.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"numpy.einsum: {len(terms)} terms in {subscripts!r} for "
                         f"{len(shapes)} operands")
    spare = [c for c in string.ascii_letters if c not in spec]
    counts = []
    for t, shp in zip(terms, shapes):
        if t.replace("...", "", 1).count(".") or ("-" in t or ">" in t):
            raise ValueError(f"numpy.einsum: invalid subscripts {subscripts!r}")
        has = "..." in t
        k = len(shp) - (len(t) - 3) if has else 0
        if (not has and len(t) != len(shp)) or k < 0:
            raise ValueError(f"numpy.einsum: term {t!r} does not match an operand of "
                             f"{len(shp)} dimensions")
        counts.append(k)
    nell = max(counts, default=0)
    if nell > len(spare):
        raise ValueError("numpy.einsum: too many broadcast dimensions for the letters left")
    ell = "".join(spare[:nell])
    terms = [t.replace("...", ell[nell - k:]) for t, k in zip(terms, counts)]
    if arrow:
        if res.replace("...", "", 1).count("."):
            raise ValueError(f"numpy.einsum: invalid output subscripts {res!r}")
        if "..." not in res and any(counts):
            raise ValueError("numpy.einsum: output has more dimensions than subscripts "
                             "given in einstein sum, but no '...' ellipsis provided to "
                             "broadcast the extra dimensions")
        res = res.replace("...", ell)
    else:
        letters = "".join(terms)
        res = ell + "".join(sorted(c for c in set(letters)
                                   if letters.count(c) == 1 and c not in ell))
    if len(set(res)) != len(res) or any(c not in "".join(terms) for c in res):
        raise ValueError(f"numpy.einsum: output subscripts {res!r} must be distinct and "
                         "each appear in an operand")
    size = {}
    for t, shp in zip(terms, shapes):
        for c in set(t):
            dims = {d for e, d in zip(t, shp) if e == c}
            if len(dims) > 1:
                raise ValueError(f"numpy.einsum: the repeated subscript {c!r} of term "
                                 f"{t!r} indexes axes of sizes {sorted(dims)}: a diagonal "
                                 "needs equal sizes")
        for c, d in zip(t, shp):
            if size.get(c, 1) not in (1, d) and d != 1:
                raise ValueError(f"numpy.einsum: operands could not be broadcast together "
                                 f"(subscript {c!r} has sizes {size[c]} and {d})")
            size[c] = max(size.get(c, d), d)
    return terms, res, size


def _diagonal(x, term):
    """A term's repeated letters taken once: the diagonal, an exact selection (NumPy's
    one-operand einsum that keeps every letter sums nothing)."""
    once = "".join(dict.fromkeys(term))
    if once == term:
        return x, term
    return Tensor(np.array(np.einsum(f"{term}->{once}", x.values)), x.fmt), once


def _contract(x, tx, y, ty, keep, size):
    """Two operands as one batched 2-D `matmul`: letters in both and in ``keep`` the
    batch, in both and not in ``keep`` contracted, the others free."""
    batch = [c for c in tx if c in ty and c in keep]
    summed = [c for c in tx if c in ty and c not in keep]
    free_a = [c for c in tx if c not in ty]
    free_b = [c for c in ty if c not in tx]

    def n(cs):
        return int(np.prod([size[c] for c in cs]))

    # Size-1 axes broadcast against the other operand's: values repeated, exact.
    x = np.broadcast_to(x, [size[c] for c in tx])
    y = np.broadcast_to(y, [size[c] for c in ty])
    xa = np.transpose(x, [tx.index(c) for c in batch + free_a + summed]).reshape(
        n(batch), n(free_a), n(summed))
    xb = np.transpose(y, [ty.index(c) for c in batch + summed + free_b]).reshape(
        n(batch), n(summed), n(free_b))
    order = batch + free_a + free_b
    return matmul(xa, xb).reshape([size[c] for c in order]), "".join(order)


@implements(np.einsum, "matmul model", "repeated letters: the diagonal (exact); letters of one "
            "operand only summed as `numpy.sum` (pairwise, its format); one operand: a "
            "transpose; several: left to right, each pair one batched 2-D `lp.matmul` "
            "(context's model), intermediates and result in its format (FP32 by default); "
            "`optimize=` ignored")
def _einsum(*args, out=None, optimize=False, dtype=None, order="K", casting="safe"):
    """``einsum`` in steps, each exact or rounded as stated.

    1. Each operand's diagonals (repeated letters) are taken exactly.
    2. Letters of one operand that no other operand and not the output has are
       summed as `numpy.sum`. The sum is pairwise in its format, several axes as
       one flattened axis.
    3. A single operand is then transposed (exact). Several operands are
       contracted left to right, each pair one batched 2-D `matmul` (the
       context's model).
       Intermediates and the result are in `matmul`'s format (FP32 by default).

    ``optimize=`` is accepted and ignored: the order is always left to right.
    ``out=`` and ``dtype=`` are refused.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> a = lp.tensor([[1.0, 2.0], [3.0, 4.0]], "bf16")
    >>> np.einsum("ij->i", a), np.einsum("ii->i", a)
    (Tensor([3.0, 7.0], fmt=BF16), Tensor([1.0, 4.0], fmt=BF16))
    >>> np.einsum("ij,jk,kl->il", a, a, a)
    Tensor([[37.0, 54.0],
            [81.0, 118.0]], fmt=FP32)
    """
    _refuse("einsum", out=out, dtype=dtype)
    subscripts, ops = _einsum_args(args)
    if not ops:
        raise ValueError("numpy.einsum needs at least one operand")
    ops = _matmul_operands(*ops)
    terms, res, size = _einsum_spec(subscripts, [x.shape for x in ops])
    pairs = [_diagonal(x, t) for x, t in zip(ops, terms)]
    summed = []
    for i, (x, t) in enumerate(pairs):
        elsewhere = set(res).union(*(s for j, (_, s) in enumerate(pairs) if j != i))
        gone = [c for c in t if c not in elsewhere]
        if gone:
            x = np.sum(x, axis=tuple(t.index(c) for c in gone))
            t = "".join(c for c in t if c not in gone)
        summed.append((x, t))
    x, t = summed[0]
    for i in range(1, len(summed)):
        keep = set(res).union(*(s for _, s in summed[i + 1:]))
        x, t = _contract(x, t, *summed[i], keep, size)
    if t == res:
        return x
    return np.transpose(x, [t.index(c) for c in res])


@implements(np.einsum_path, "plain", "NumPy's contraction path for the values (no values "
            "computed)")
def _einsum_path(*operands_, **kwargs):
    """NumPy's contraction path for the operands' values (it computes no values)."""
    return np.einsum_path(*(values_of(x) for x in operands_), **kwargs)


# -- the vector products, ufuncs or functions by NumPy version ------------------------

_VECTOR = {
    "vecdot": (_vecdot, "each dot product of the last axes a 1 x k by k x 1 `lp.matmul` "
                        "(context's model, FP32 result by default)"),
    "matvec": (_matvec, "`lp.matmul` of the matrices by the vectors as columns (context's "
                        "model, FP32 result by default)"),
    "vecmat": (_vecmat, "`lp.matmul` of the vectors as rows by the matrices (context's "
                        "model, FP32 result by default)"),
}


def _register_vector_products() -> None:
    """vecdot, matvec and vecmat where the running NumPy has them: ufuncs (NumPy 2.x,
    looked up by name) or functions."""
    for name, (fn, order) in _VECTOR.items():
        np_fn: Any = getattr(np, name, None)
        if np_fn is not None:
            implements(name if isinstance(np_fn, np.ufunc) else np_fn, "matmul model",
                       order)(fn)


_register_vector_products()
