"""The ``np.linalg`` functions on Tensors, each registered with its class and order by
`lowprec.tensors.core.implements`: ``np.linalg.solve(t, b)`` runs `solve`, and so on."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..formats import Format
from ..tensors import Tensor, matmul, tensor
from ..tensors.core import implements
from .core import LinAlgError, apply, as_tensor, exact, square, stacked
from .factor import cholesky, qr
from .norms import norm, wide
from .solvers import det, inv, lstsq, lstsq_operands, matrix_power, multi_dot, slogdet, solve

_STACK = "; stacks looped over, each matrix on its own"
_MM = ("matmul model", "as `numpy.matmul`: `lp.matmul` with the context's model "
                       "(FP32 result by default)")
_NORM = ("2-norms and Frobenius: squares summed pairwise in FP32 (FP64 for FP64), sqrt, "
         "rounded into the format; 1/inf norms: |x| summed pairwise in the format; matrix "
         "2/-2/'nuc': float64 SVD of the values, rounded once")

_ONCE = "NumPy's float64 (LAPACK) "


def _numpy(name: str, kind: str, order: str) -> Callable[[Any], Any]:
    """`implements` for ``np.linalg.<name>``, where this NumPy has it (NumPy 2 added
    several); elsewhere the handler stays unregistered."""
    np_fn = getattr(np.linalg, name, None)
    return implements(np_fn, kind, order) if np_fn is not None else (lambda handler: handler)


# -- np.linalg on Tensors ----------------------------------------------------------------
# The dispatch tables of lowprec.tensors are filled by the files that implement their
# entries; these are this module's (np.linalg.solve(t, b) runs `solve`, and so on).

@_numpy("cholesky", "composed",
        "lowprec.linalg.cholesky: right-looking, a rounded sqrt per column; upper=True the "
        "transpose of the lower factor of a^T" + _STACK)
def _np_cholesky(a, /, *, upper=False):
    if not upper:
        return cholesky(a)
    # U with U^T U = a, from a's upper triangle: the lower factor of a^T, transposed
    # (the same rounded operations; transposes are exact).
    return np.swapaxes(cholesky(np.swapaxes(as_tensor(a, "a"), -1, -2)), -1, -2)


@_numpy("norm", "composed", "lowprec.linalg.norm: " + _NORM)
def _np_norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002 - NumPy's name
    return norm(x, ord=ord, axis=axis, keepdims=bool(keepdims))


@_numpy("vector_norm", "composed",
        "lowprec.linalg.norm over the flattened axes: " + _NORM)
def _np_vector_norm(x, /, *, axis=None, keepdims=False, ord=2):  # noqa: A002
    x = as_tensor(x, "x")
    keep = bool(keepdims)
    if axis is None:
        r = norm(x.ravel(), ord=ord, axis=0)
        return r.reshape((1,) * x.ndim) if keep else r
    axes = tuple(np.lib.array_utils.normalize_axis_tuple(
        axis if isinstance(axis, tuple) else (axis,), x.ndim))
    rest = [i for i in range(x.ndim) if i not in axes]
    # Several axes: one vector of their elements, in C order of the axes as given.
    flat = np.transpose(x, rest + list(axes)).reshape([x.shape[i] for i in rest] + [-1])
    r = norm(flat, ord=ord, axis=-1)
    if keep:
        r = r.reshape(tuple(1 if i in axes else s for i, s in enumerate(x.shape)))
    return r


@_numpy("matrix_norm", "composed",
        "lowprec.linalg.norm over the last two axes: " + _NORM)
def _np_matrix_norm(x, /, *, keepdims=False, ord="fro"):  # noqa: A002
    x = as_tensor(x, "x")
    if x.ndim < 2:
        raise ValueError(f"matrix_norm needs at least 2 dimensions, got shape {x.shape}")
    return norm(x, ord=ord, axis=(-2, -1), keepdims=bool(keepdims))


@_numpy("qr", "composed",
        "lowprec.linalg.qr: Householder, every product, sum (pairwise) and difference "
        "rounded; modes reduced, complete, r" + _STACK)
def _np_qr(a, mode="reduced"):
    return qr(a, mode)


@_numpy("lstsq", "composed",
        "lowprec.linalg.lstsq: QR, x = R^-1 (Q^T b); residuals rounded as `norm`; rank and "
        "s from a float64 SVD (s rounded once); rank-deficient a refused")
def _np_lstsq(a, b, rcond=None):
    """NumPy's tuple ``(x, residuals, rank, s)``.

    * ``x`` comes from `lstsq`.
    * ``residuals`` are the squared 2-norms of the columns of ``b - a x``, empty
      unless ``m > n``. The products are rounded and summed pairwise, and the
      difference is rounded. The squares are summed as `norm` does, rounded once.
      The products of ``a x`` are formed for a chunk of columns at a time, as in
      `lstsq`.
    * ``rank`` and ``s`` come from a float64 SVD of the values, ``s`` rounded once.
      Singular values at most ``rcond * s[0]`` count as zero. The default ``rcond``
      is the format's eps times ``max(m, n)``, NumPy's rule in the format."""
    a, b = lstsq_operands(a, b)
    m, n = a.shape
    s = np.linalg.svd(a.values, compute_uv=False)
    cut = (a.fmt.eps * max(m, n) if rcond is None else float(rcond)) * (s[0] if s.size else 0)
    rank = int(np.sum(s > cut))
    if rank < n:
        raise LinAlgError(f"a has rank {rank} < {n} columns (rcond cut-off {cut:.3g}): "
                          "lowprec's lstsq (QR without pivoting) needs full column rank")
    x = lstsq(a, b)
    if m > n:
        w = (b - apply(a, x)).astype(wide(a.fmt))
        res = (w * w).sum(axis=0).astype(a.fmt).reshape(-1)
    else:
        res = exact(np.zeros(0), a.fmt)
    return x, res, rank, tensor(s, a.fmt)


@_numpy("outer", "correctly rounded", "as `numpy.outer` (1-D only): each product "
        "rounded once")
def _np_outer(x1, x2, /):
    if np.ndim(x1) != 1 or np.ndim(x2) != 1:
        raise ValueError(f"numpy.linalg.outer needs 1-D arrays, got ndim {np.ndim(x1)} "
                         f"and {np.ndim(x2)}")
    return np.outer(x1, x2)


@_numpy("cross", "composed", "two rounded products, then a rounded difference "
        "(not fused), per component")
def _np_cross(x1, x2, /, *, axis=-1):
    """``c0 = a1 b2 - a2 b1`` and cyclically: two rounded products, then a rounded
    difference (not fused), for 3-vectors along ``axis``."""
    if np.shape(np.moveaxis(x1, axis, -1))[-1] != 3 or \
            np.shape(np.moveaxis(x2, axis, -1))[-1] != 3:
        raise ValueError("numpy.linalg.cross needs 3-element vectors along axis, got "
                         f"shapes {np.shape(x1)} and {np.shape(x2)}")
    return np.cross(x1, x2, axis=axis)    # the Tensor's numpy.cross: the same rounding order


@_numpy("vecdot", "matmul model", "each dot product a 1 x k by k x 1 `lp.matmul` "
        "(context's model, FP32 result by default)")
def _np_vecdot(x1, x2, /, *, axis=-1):
    a, b = np.moveaxis(x1, axis, -1), np.moveaxis(x2, axis, -1)
    k = np.shape(a)[-1]
    if np.shape(b)[-1] != k:
        raise ValueError(f"numpy.linalg.vecdot: axis lengths differ, {k} and "
                         f"{np.shape(b)[-1]}")
    r = matmul(a.reshape(*np.shape(a)[:-1], 1, k), b.reshape(*np.shape(b)[:-1], k, 1))
    return r.reshape(r.shape[:-2])


@_numpy("matrix_transpose", "exact", "the last two axes swapped")
def _np_matrix_transpose(x, /):
    if np.ndim(x) < 2:
        raise ValueError(f"matrix_transpose needs at least 2 dimensions, got {np.ndim(x)}")
    return np.swapaxes(x, -1, -2)


@_numpy("trace", "composed", "the diagonal of the last two axes summed as "
        "`numpy.sum` (pairwise in the format)")
def _np_trace(x, /, *, offset=0, dtype=None):
    return np.trace(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


@_numpy("diagonal", "exact", "the diagonal of the last two axes")
def _np_diagonal(x, /, *, offset=0):
    return np.diagonal(x, offset=offset, axis1=-2, axis2=-1)


@_numpy("tensordot", "matmul model", "as `numpy.tensordot`: one 2-D "
        "`lp.matmul` with the context's model")
def _np_tensordot(x1, x2, /, *, axes=2):
    return np.tensordot(x1, x2, axes=axes)


@_numpy("matmul", *_MM)
def _np_matmul(x1, x2, /):
    return matmul(x1, x2)


@_numpy("multi_dot", "matmul model",
        "lowprec.linalg.multi_dot: left to right, each `@` through `lp.matmul` (no order "
        "optimisation)")
def _np_multi_dot(arrays, *, out=None):
    if out is not None:
        raise TypeError("lowprec.Tensor does not support out= in numpy.linalg.multi_dot: "
                        "results are new Tensors")
    return multi_dot(arrays)


# The spectral functions below (eigenvalues, SVD, pseudo-inverse) are not emulated step
# by step: NumPy's float64 LAPACK result for the decoded values, each floating array of
# it rounded once into the Tensor's format (the context's mode), as the array-API
# namespace does (docs/array-api.md). NumPy's named tuples, taken from a call.
_EIG: Any = type(np.linalg.eig(np.eye(1)))
_EIGH: Any = type(np.linalg.eigh(np.eye(1)))
_SVD: Any = type(np.linalg.svd(np.eye(1)))
_UNSET: Any = object()     # pinv's rtol not given (NumPy's own sentinel is private)


def _plain(x: Any) -> Any:
    """A Tensor option (``tol``, ``rtol``, ``rcond``) as its float64 values."""
    return x.values if isinstance(x, Tensor) else x


def _once(values: Any, fmt: Format) -> Tensor:
    """float64 values (NumPy's result for the decoded values) rounded once into ``fmt``
    by the context's mode."""
    return tensor(np.asarray(values, dtype=np.float64), fmt)


@_numpy("eigh", "rounded once", _ONCE + "eigh (UPLO as NumPy): eigenvalues and "
        "eigenvectors each rounded once")
def _np_eigh(a, UPLO="L"):
    """NumPy's float64 ``eigh`` of the values, ``eigenvalues`` and ``eigenvectors``
    each rounded once (NumPy's ``EighResult``).

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> w, v = np.linalg.eigh(lp.tensor([[2.0, 1.0], [1.0, 2.0]], "bf16"))
    >>> w
    Tensor([1.0, 3.0], fmt=BF16)
    >>> abs(v.values).tolist()      # 1/sqrt(2) rounded once
    [[0.70703125, 0.70703125], [0.70703125, 0.70703125]]
    """
    a = square(a, stack=True)
    w, v = np.linalg.eigh(a.values, UPLO=UPLO)
    return _EIGH(_once(w, a.fmt), _once(v, a.fmt))


@_numpy("eigvalsh", "rounded once", _ONCE + "eigvalsh, rounded once")
def _np_eigvalsh(a, UPLO="L"):
    a = square(a, stack=True)
    return _once(np.linalg.eigvalsh(a.values, UPLO=UPLO), a.fmt)


def _real_spectrum(name: str, parts: tuple[Any, ...]) -> None:
    """`TypeError` where NumPy's float64 ``eig`` is complex (it returns real arrays
    exactly when every eigenvalue's imaginary part is zero)."""
    if any(np.iscomplexobj(p) for p in parts):
        raise TypeError(f"numpy.linalg.{name}: the eigenvalues are complex (NumPy's float64 "
                        f"result) and lowprec has no complex formats; "
                        f"np.linalg.{name}(np.asarray(t)) gives the float64 result")


@_numpy("eig", "rounded once", _ONCE + "eig, eigenvalues and eigenvectors each rounded "
        "once where real; complex eigenvalues refused (TypeError: no complex formats)")
def _np_eig(a):
    """NumPy's float64 ``eig`` of the values, eigenvalues and eigenvectors each rounded
    once (NumPy's ``EigResult``), where they are real; `TypeError` where they are
    complex (lowprec has no complex formats).

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> np.linalg.eig(lp.tensor([[2.0, 1.0], [0.0, 3.0]], "fp16")).eigenvalues
    Tensor([2.0, 3.0], fmt=FP16)
    >>> np.linalg.eig(lp.tensor([[0.0, -1.0], [1.0, 0.0]], "fp16"))
    Traceback (most recent call last):
    ...
    TypeError: numpy.linalg.eig: the eigenvalues are complex (NumPy's float64 result) ...
    """
    a = square(a, stack=True)
    w, v = np.linalg.eig(a.values)
    _real_spectrum("eig", (w, v))
    return _EIG(_once(w, a.fmt), _once(v, a.fmt))


@_numpy("eigvals", "rounded once", _ONCE + "eigvals, rounded once where real; "
        "complex eigenvalues refused (TypeError: no complex formats)")
def _np_eigvals(a):
    a = square(a, stack=True)
    w = np.linalg.eigvals(a.values)
    _real_spectrum("eigvals", (w,))
    return _once(w, a.fmt)


@_numpy("svd", "rounded once", _ONCE + "svd (NumPy's options): U, S and Vh each "
        "rounded once")
def _np_svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """NumPy's float64 ``svd`` of the values (its options), ``U``, ``S`` and ``Vh``
    each rounded once (NumPy's ``SVDResult``), or ``S`` alone with
    ``compute_uv=False``.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> np.linalg.svd(lp.tensor([[3.0, 0.0], [0.0, -0.1]], "fp16")).S
    Tensor([3.0, 0.0999755859375], fmt=FP16)
    """
    a = as_tensor(a, "a")
    if not compute_uv:
        return _once(np.linalg.svd(a.values, compute_uv=False, hermitian=hermitian), a.fmt)
    u, s, vh = np.linalg.svd(a.values, full_matrices=full_matrices, hermitian=hermitian)
    return _SVD(_once(u, a.fmt), _once(s, a.fmt), _once(vh, a.fmt))


@_numpy("svdvals", "rounded once", _ONCE + "singular values, rounded once")
def _np_svdvals(x, /):
    x = as_tensor(x, "x")
    return _once(np.linalg.svd(x.values, compute_uv=False), x.fmt)


@_numpy("pinv", "rounded once", _ONCE + "pinv (rcond, rtol as NumPy; rtol=None: "
        "max(M, N) * the format's eps), rounded once")
def _np_pinv(a, rcond=None, hermitian=False, *, rtol=_UNSET):
    """NumPy's float64 ``pinv`` of the values, rounded once. The cut-off is NumPy's
    (``rcond``, or ``rtol``; neither: ``1e-15``), but ``rtol=None`` means
    ``max(M, N)`` times the format's eps (NumPy's rule, which takes float64's eps
    from the dtype of the values: here the format's, as `numpy.linalg.matrix_rank`
    and `numpy.linalg.lstsq` on Tensors).

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> np.linalg.pinv(lp.tensor([[2.0, 0.0], [0.0, 0.0]], "fp16"))
    Tensor([[0.5, 0.0],
            [0.0, 0.0]], fmt=FP16)
    """
    a = as_tensor(a, "a")
    if rtol is None and rcond is None and a.ndim >= 2:
        rtol = max(a.shape[-2:]) * float(a.fmt.eps)
    kw = {} if rtol is _UNSET else {"rtol": _plain(rtol)}
    return _once(np.linalg.pinv(a.values, _plain(rcond), hermitian, **kw), a.fmt)


@_numpy("matrix_rank", "plain", "a count: singular values of a float64 SVD "
        "of the values above tol (default max(M, N) * the format's eps * the largest)")
def _np_matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    """NumPy's rule on a float64 SVD of the values: the count of singular values above
    ``tol`` (default ``s.max() * rtol``, ``rtol`` defaulting to ``max(M, N)`` times the
    format's eps, where NumPy takes float64's), a plain integer as NumPy's.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> a = lp.tensor([[1.0, 1.0], [1.0, 1.0 + 2.0**-10]], "fp16")
    >>> int(np.linalg.matrix_rank(a)), int(np.linalg.matrix_rank(a.values))
    (1, 2)
    """
    a = as_tensor(A, "A")
    v = a.values
    if v.ndim < 2:
        return int(not np.all(v == 0))
    s = np.linalg.svd(v, compute_uv=False, hermitian=hermitian)
    if tol is None:
        if rtol is None:
            rtol = max(v.shape[-2:]) * float(a.fmt.eps)
        else:
            rtol = np.asarray(_plain(rtol))[..., np.newaxis]
        tol = s.max(axis=-1, keepdims=True, initial=0.0) * rtol   # no values: rank 0
    else:
        tol = np.asarray(_plain(tol))[..., np.newaxis]
    return np.count_nonzero(s > tol, axis=-1)


def _cond_matrix(x: Tensor, p: Any) -> Tensor:
    """``norm(x, p) * norm(inv(x), p)`` for one square matrix; a matrix `inv` finds
    singular (a zero pivot) has condition number inf, as NumPy's."""
    nx = norm(x, p)       # first: an unknown p raises ValueError even where x is singular
    try:
        ix = inv(x)
    except LinAlgError:
        return _once(np.inf, x.fmt)
    return nx * norm(ix, p)


@_numpy("cond", "composed", "p None/2/-2: s_max / s_min of a float64 SVD, rounded "
        "once; other p: lowprec.linalg.inv, then norm(x, p) and norm(inv(x), p) as "
        "lowprec.linalg.norm, their product rounded; singular: inf" + _STACK)
def _np_cond(x, p=None):
    """The condition number, as `numpy.linalg.cond`.

    * ``p`` None, 2 or -2: the ratio of the largest and smallest singular values of
      a float64 SVD of the values, computed in float64 and rounded once.
    * Other ``p`` (1, -1, inf, -inf, ``"fro"``, ``"nuc"``): `inv` (LU in the
      format), then `norm` of ``x`` and of ``inv(x)`` as `norm` documents. Their
      product is rounded. Each matrix of a stack goes on its own.

    A singular matrix (``inv`` meets a zero pivot) gives inf. A NaN result becomes
    inf unless ``x`` holds a NaN (NumPy's rule). inf is rounded into the format like
    any value: NaN in formats without infinities, or their max under ``saturate``.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> d = lp.tensor([[3.0, 0.0], [0.0, 0.5]], "fp16")
    >>> np.linalg.cond(d), np.linalg.cond(d, 1)
    (Tensor(6.0, fmt=FP16), Tensor(6.0, fmt=FP16))
    """
    x = as_tensor(x, "x")
    if x.size == 0 and math.prod(x.shape[-2:]) == 0:
        raise LinAlgError("cond is not defined on empty arrays")
    if x.ndim < 2:
        raise LinAlgError(f"cond needs a matrix or a stack of them, got shape {x.shape}")
    nan_in = np.isnan(x.values).any(axis=(-2, -1))
    if p is None or (not isinstance(p, str) and p in (2, -2)):
        s = np.linalg.svd(x.values, compute_uv=False)
        with np.errstate(all="ignore"):
            r = s[..., -1] / s[..., 0] if p == -2 else s[..., 0] / s[..., -1]
        return _once(np.where(np.isnan(r) & ~nan_in, np.inf, r), x.fmt)
    x = square(x, "x", stack=True)
    batch = x.shape[:-2]
    if batch:
        r = stacked([_cond_matrix(x[i], p) for i in np.ndindex(*batch)], batch, (),
                     x.fmt)
    else:
        r = _cond_matrix(x, p)
    fix = np.isnan(r.values) & ~nan_in
    if not fix.any():
        return r
    return exact(np.where(fix, _once(np.inf, x.fmt).values, r.values), x.fmt)


def _tensor_pair(a: Any, b: Any) -> tuple[Tensor, Tensor]:
    """``a`` and ``b`` as Tensors: a plain operand is rounded into the other's format
    (context mode), as the ufuncs round a plain operand in."""
    if not isinstance(a, Tensor):
        a = tensor(a, as_tensor(b, "b").fmt)
    if not isinstance(b, Tensor):
        b = tensor(b, a.fmt)
    return a, b


@_numpy("tensorinv", "composed", "reshaped to a square matrix (exact), "
        "lowprec.linalg.inv (LU in the format), reshaped back")
def _np_tensorinv(a, ind=2):
    """NumPy's ``tensorinv``: ``a`` reshaped (exact) to ``prod(a.shape[ind:])`` rows,
    `inv` (LU in the format), reshaped to ``a.shape[ind:] + a.shape[:ind]``.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> a = lp.tensor(np.eye(4).reshape(4, 2, 2) * 3.0, "bf16")
    >>> np.linalg.tensorinv(a, ind=1).shape, float(np.linalg.tensorinv(a, ind=1)[0, 0, 0])
    ((2, 2, 4), 0.333984375)
    """
    a = as_tensor(a, "a")
    if isinstance(ind, (bool, np.bool_)) or not isinstance(ind, (int, np.integer)):
        raise TypeError(f"ind must be a positive int (NumPy's number of first indices "
                        f"in the inverse sum), got {type(ind).__name__} {ind!r}")
    if not ind > 0:
        raise ValueError(f"Invalid ind argument: {ind!r} (it must be positive)")
    shape = a.shape
    rows = math.prod(shape[ind:])
    return inv(a.reshape(rows, -1)).reshape(shape[ind:] + shape[:ind])


@_numpy("tensorsolve", "composed", "a plain operand rounded into the format; "
        "a's axes moved, reshaped to a square matrix, b flattened (exact), "
        "lowprec.linalg.solve (LU, two triangular solves), reshaped")
def _np_tensorsolve(a, b, axes=None):
    """NumPy's ``tensorsolve``, by `solve`.

    ``a``'s ``axes`` are moved to the end, and ``a`` is reshaped into a square
    matrix. ``b`` is flattened (exact). `solve` runs (LU in the format, two
    triangular solves), and the result is reshaped. A plain operand is rounded into
    the other's format first. ``axes`` are ints naming axes of ``a``, negative ones
    from the end. One out of range or repeated raises `ValueError`, a non-int
    `TypeError`.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> a = lp.tensor(np.eye(6).reshape(6, 2, 3) * 2.0, "fp16")
    >>> np.linalg.tensorsolve(a, np.arange(6.0))
    Tensor([[0.0, 0.5, 1.0],
            [1.5, 2.0, 2.5]], fmt=FP16)
    """
    a, b = _tensor_pair(a, b)
    an = a.ndim
    if axes is not None:
        items = tuple(axes) if isinstance(axes, (tuple, list)) else (axes,)
        if any(isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer))
               for k in items):
            raise TypeError(f"axes must be a sequence of ints (axes of a), got {axes!r}")
        # AxisError (a ValueError) names an axis out of range; repeated axes refused.
        axes = np.lib.array_utils.normalize_axis_tuple(items, an, "axes")
        order = list(range(an))
        for k in axes:
            order.remove(k)
            order.insert(an, k)
        a = a.transpose(order)
    shape = a.shape[-(an - b.ndim):]
    n = math.prod(shape)
    if a.size != n * n:
        raise LinAlgError("Input arrays must satisfy the requirement prod(a.shape[b.ndim:])"
                          f" == prod(a.shape[:b.ndim]), got shapes {a.shape} and {b.shape}")
    return solve(a.reshape(n, n), b.ravel()).reshape(shape)


@_numpy("solve", "composed",
        "lowprec.linalg.solve: LU with partial pivoting, then two triangular solves" + _STACK)
def _np_solve(a, b):
    return solve(a, b)


@_numpy("inv", "composed", "lowprec.linalg.inv: solve with the identity" + _STACK)
def _np_inv(a):
    return inv(a)


@_numpy("det", "composed",
        "lowprec.linalg.det: the product of U's diagonal, left to right, signed by the "
        "pivots" + _STACK)
def _np_det(a):
    return det(a)


@_numpy("slogdet", "composed",
        "lowprec.linalg.slogdet: LU; sign exact; log|det| the float64 sum of log|u_ii| "
        "rounded once" + _STACK)
def _np_slogdet(a):
    return slogdet(a)


@_numpy("matrix_power", "matmul model",
        "lowprec.linalg.matrix_power: NumPy's binary powering, each product `lp.matmul` "
        "(context's model) rounded into the format")
def _np_matrix_power(a, n):
    return matrix_power(a, n)
