"""`lu`, `cholesky` and `qr` of Tensors, every operation rounded in the format."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..formats import Format
from ..tensorcore import ModelLike, resolve_model
from ..tensors import Tensor
from .core import LinAlgError, as_tensor, exact, product, square, stacked
from .norms import norm

# NumPy's named tuple, taken from a call (its class lives in a private module).
_QR: Any = type(np.linalg.qr(np.eye(1)))


def _pivot(w: Tensor, i: int, col: int, stop: int) -> int:
    """The row (from ``i``) of the largest ``|w[r, col]|``, the first one on ties as
    LAPACK's ``idamax``; `LinAlgError` where the whole column is zero."""
    column = np.abs(w.values[i:stop, col])   # comparisons only: exact
    r = i + int(np.argmax(column))
    if w.values[r, col] == 0:
        raise LinAlgError(f"singular matrix: zero pivot in column {col}")
    return r


def _swap(w: Tensor, perm: np.ndarray[Any, Any], i: int, r: int) -> None:
    if r != i:
        w[[i, r]] = w[[r, i]]
        perm[[i, r]] = perm[[r, i]]


def _eliminate(w: Tensor, i: int, stop: int) -> None:
    """Step ``i`` of right-looking elimination on rows ``i+1:`` and columns ``i+1:stop``:
    ``l = a[j, i] / a[i, i]`` then ``a[j, k] = a[j, k] - l * a[i, k]``, a rounded
    product then a rounded difference (not fused), as plain code does."""
    if i + 1 >= w.shape[0]:
        return
    lcol = w[i + 1:, i] / w[i, i]
    w[i + 1:, i] = lcol
    if i + 1 < stop:
        w[i + 1:, i + 1:stop] = (w[i + 1:, i + 1:stop]
                                 - lcol.reshape(-1, 1) * w[i, i + 1:stop].reshape(1, -1))


def lu_factor(a: Tensor, block: int | None, model: ModelLike | None,
            ) -> tuple[Tensor, np.ndarray[Any, Any]]:
    """The packed LU factors (L strictly below the diagonal, unit diagonal implied)
    and the row permutation ``perm`` with ``a[perm] = L @ U``."""
    if model is not None:
        resolve_model(model)    # checked where only the blocked update would use it
    n = a.shape[0]
    w = a.copy()
    perm = np.arange(n)
    if block is None:
        for i in range(n):
            _swap(w, perm, i, _pivot(w, i, i, n))
            _eliminate(w, i, n)
        return w, perm
    if isinstance(block, bool) or not isinstance(block, int):
        raise TypeError(f"block must be an int or None, got {type(block).__name__}")
    if block < 1:
        raise ValueError(f"block must be at least 1, got {block}")
    for k in range(0, n, block):
        e = min(k + block, n)
        for i in range(k, e):            # the panel: unblocked, whole-row swaps
            _swap(w, perm, i, _pivot(w, i, i, n))
            _eliminate(w, i, e)
        if e == n:
            break
        for i in range(k, e - 1):        # U12 = L11^-1 A12, right-looking (as _eliminate)
            w[i + 1:e, e:] = (w[i + 1:e, e:]
                              - w[i + 1:e, i].reshape(-1, 1) * w[i, e:].reshape(1, -1))
        # A22 - L21 @ U12 as one GEMM, (-L21) @ U12 + A22 (negation is exact), rounded
        # into the format once (`product`).
        w[e:, e:] = product(-w[e:, k:e], w[k:e, e:], model, c=w[e:, e:])
    return w, perm


def _permutation(perm: np.ndarray[Any, Any], fmt: Format) -> Tensor:
    n = perm.size
    p = np.zeros((n, n))
    p[perm, np.arange(n)] = 1.0      # a[perm] = L U  <=>  a = P L U with P[perm[i], i] = 1
    return exact(p, fmt)


# -- factorizations -----------------------------------------------------------------

def lu(a: Tensor, *, block: int | None = None,
       model: ModelLike | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """LU factorization with partial pivoting, ``a = p @ l @ u`` (SciPy's convention).

    Right-looking Gaussian elimination in ``a``'s format. Step ``i`` takes as pivot
    the first row of largest ``|a[r, i]|`` (``r >= i``, LAPACK's ``idamax``). It
    swaps that row into row ``i``. It computes each multiplier
    ``l[j, i] = a[j, i] / a[i, i]`` (rounded). It updates
    ``a[j, k] = a[j, k] - l[j, i] * a[i, k]`` as a rounded product then a rounded
    difference (not fused).

    With ``block=b``, the algorithm is the blocked right-looking one (LAPACK's
    ``getrf``):

    1. Each panel of ``b`` columns is factored as above, row swaps applied to whole
       rows.
    2. ``U12 = L11^-1 A12`` by the same rounded steps.
    3. The trailing matrix ``A22 - L21 @ U12`` is one `lowprec.matmul`,
       ``(-L21) @ U12 + A22`` (GEMM with ``c``), under ``model``. The default is
       the context's matmul model. Its result is rounded into the format once by
       the model's output conversion. Where the model has no output in the format
       (BF16 or FP8 on ``"h100"``), its FP32 output is rounded once into it, as a
       GEMM epilogue converts.

    With ``model="exact"`` each entry of the update is the exact
    ``a22 - sum(l * u)`` rounded once.

    A NaN in the pivot column is taken as the pivot (`numpy.argmax`), so NaNs spread
    through the factors. Nothing raises, as in `numpy.linalg.solve`, which returns
    NaNs.

    Parameters
    ----------
    a : Tensor
        A square matrix.
    block : int, optional
        Panel width of the blocked algorithm. None (default) is unblocked.
    model : str or TensorCoreModel, optional
        The matmul model of the blocked update (see `lowprec.matmul`). It is checked
        (`ValueError`, `TypeError`) with or without ``block``.

    Returns
    -------
    p, l, u : Tensor
        Permutation matrix, unit lower triangular ``l``, upper triangular ``u``, all
        in ``a``'s format.

    Raises
    ------
    numpy.linalg.LinAlgError
        On a zero pivot (a singular matrix, or one that rounding made singular).

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> a = lp.tensor([[1.0, 2.0], [3.0, 4.0]], "fp16")
    >>> p, l, u = la.lu(a)
    >>> p.values.tolist(), l.values.tolist()
    ([[0.0, 1.0], [1.0, 0.0]], [[1.0, 0.0], [0.333251953125, 1.0]])
    >>> u
    Tensor([[3.0, 4.0],
            [0.0, 0.6669921875]], fmt=FP16)
    """
    a = square(a)
    w, perm = lu_factor(a, block, model)
    v = w.values
    n = a.shape[0]
    # Zeros, ones and copied values: exact in every format.
    return (_permutation(perm, a.fmt), exact(np.tril(v, -1) + np.eye(n), a.fmt),
            exact(np.triu(v), a.fmt))


def cholesky(a: Tensor) -> Tensor:
    """Cholesky factor ``l`` (lower), ``a = l @ l.T``, of a symmetric positive definite
    matrix (or of each matrix of a stack).

    Only the lower triangle of ``a`` is read. The algorithm is right-looking. Step
    ``j`` takes ``l[j, j] = sqrt(a[j, j])`` and ``l[i, j] = a[i, j] / l[j, j]``. It
    updates ``a[i, k] = a[i, k] - l[i, j] * l[k, j]`` (``k <= i``). Each operation
    is rounded: a product then a difference, not fused.

    Raises
    ------
    numpy.linalg.LinAlgError
        Where a pivot ``a[j, j]`` is not positive (not positive definite, in the
        format's arithmetic), a NaN pivot included. This is LAPACK's ``potrf`` rule.
        NumPy 2 returns NaNs there instead.

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> la.cholesky(lp.tensor([[4.0, 2.0], [2.0, 3.0]], "bf16"))
    Tensor([[2.0, 0.0],
            [1.0, 1.4140625]], fmt=BF16)
    """
    a = square(a, stack=True)
    if a.ndim > 2:
        batch = a.shape[:-2]
        return stacked([cholesky(a[i]) for i in np.ndindex(*batch)], batch, a.shape[-2:],
                        a.fmt)
    n = a.shape[0]
    w = exact(np.tril(a.values), a.fmt)
    for j in range(n):
        d = w.values[j, j]
        if not d > 0:
            raise LinAlgError(f"matrix is not positive definite: pivot {d} in column {j}")
        w[j, j] = np.sqrt(w[j, j])
        if j + 1 < n:
            col = w[j + 1:, j] / w[j, j]
            w[j + 1:, j] = col
            upd = w[j + 1:, j + 1:] - col.reshape(-1, 1) * col.reshape(1, -1)
            w[j + 1:, j + 1:] = exact(np.tril(upd.values), a.fmt)
    return w


def _household(x: Tensor) -> tuple[Tensor, Tensor, Tensor] | None:
    """``(v, beta, alpha)`` with ``(I - beta v v^T) x = alpha e_1``, or None where
    ``x[1:]`` is already zero (no reflection, as LAPACK's ``larfg`` with tau = 0)."""
    if not np.any(x.values[1:]):
        return None
    nx = norm(x)
    x0 = x[0]
    alpha = -nx if x0.values >= 0 else nx
    v = x.copy()
    v[0] = x0 - alpha            # x0 and -alpha have one sign: no cancellation
    beta = 2.0 / (v * v).sum()
    return v, beta, alpha


_QR_MODES = ("reduced", "complete", "r")


def qr(a: Tensor, mode: str = "reduced") -> Any:
    """QR factorization ``a = q @ r`` of an ``m x n`` matrix (or of each matrix of a
    stack) by Householder reflections.

    NumPy's modes are taken, with ``k = min(m, n)``:

    * ``"reduced"``: ``q`` is ``m x k``, ``r`` ``k x n``.
    * ``"complete"``: ``q`` is ``m x m``, ``r`` ``m x n``.
    * ``"r"``: ``r`` only, ``k x n``, the same values, ``q`` not formed.

    ``"raw"`` (LAPACK's packed reflectors) is refused.

    Column ``j < min(n, m - 1)`` goes in steps. ``q`` starts from the identity.

    1. ``x = r[j:, j]`` and ``alpha = -sign(x0) * norm(x)``, `norm` accumulating
       in FP32 or wider.
    2. ``v = x`` with ``v0 = x0 - alpha``, and ``beta = 2 / sum(v * v)``.
    3. ``r[j:, j:] = r - (beta * v) * (v^T r)`` and
       ``q[:, j:] = q - (q v) * (beta v)^T``.
    4. ``r[j, j] = alpha`` and ``r[j+1:, j] = 0`` are set.

    Each product, sum (pairwise, in the format) and difference is rounded. A column
    already zero below the diagonal is left as it is (no reflection). So ``r``'s
    diagonal may have either sign.

    Returns NumPy's named tuple ``(Q, R)``, or ``r`` for ``mode="r"``.

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> q, r = la.qr(lp.tensor([[3.0, 1.0], [4.0, 2.0]], "fp16"))
    >>> r
    Tensor([[-5.0, -2.19921875],
            [0.0, 0.400390625]], fmt=FP16)
    >>> la.qr(lp.tensor([[3.0, 1.0], [4.0, 2.0]], "fp16"), mode="r").values.tolist()
    [[-5.0, -2.19921875], [0.0, 0.400390625]]
    """
    a = as_tensor(a, "a")
    if not isinstance(mode, str):
        raise TypeError(f"mode must be a str, one of {', '.join(_QR_MODES)}")
    if mode not in _QR_MODES:
        raise ValueError(f"qr mode {mode!r} is not supported; modes: "
                         f"{', '.join(_QR_MODES)} (no 'raw': LAPACK's packed layout)")
    if a.ndim < 2:
        raise LinAlgError(f"qr needs a matrix or a stack of them, got shape {a.shape}")
    if a.ndim > 2:
        batch = a.shape[:-2]
        parts = [qr(a[i], mode) for i in np.ndindex(*batch)]
        m, n = a.shape[-2:]
        k = m if mode == "complete" else min(m, n)
        r = stacked([p if mode == "r" else p[1] for p in parts], batch, (k, n), a.fmt)
        if mode == "r":
            return r
        return _QR(stacked([p[0] for p in parts], batch, (m, k), a.fmt), r)
    m, n = a.shape
    k = m if mode == "complete" else min(m, n)
    r = a.copy()
    q = exact(np.eye(m), a.fmt)
    for j in range(min(n, m - 1)):   # a 1 x 1 last column needs no reflection
        h = _household(r[j:, j])
        if h is None:
            continue
        v, beta, alpha = h
        bv = beta * v
        vr = (v.reshape(-1, 1) * r[j:, j:]).sum(axis=0)
        r[j:, j:] = r[j:, j:] - bv.reshape(-1, 1) * vr.reshape(1, -1)
        r[j, j] = alpha
        r[j + 1:, j] = exact(np.zeros(m - j - 1), a.fmt)
        if mode != "r":
            qv = (q[:, j:] * v.reshape(1, -1)).sum(axis=1)
            q[:, j:] = q[:, j:] - qv.reshape(-1, 1) * bv.reshape(1, -1)
    rk = exact(np.triu(r.values[:k]), a.fmt)
    return rk if mode == "r" else _QR(q[:, :k], rk)
