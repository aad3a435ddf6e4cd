"""Dense linear algebra on Tensors, every operation rounded in the Tensor's format.

`lu` (partial pivoting, unblocked or blocked through `lowprec.matmul`), `cholesky`,
`qr` (Householder), `solve_triangular`, `solve`, `inv`, `det`, `lstsq`, `norm`, and
`refine`, mixed-precision iterative refinement. Each algorithm is the textbook one
with its order of operations written in its docstring, so that a result can be
checked bit for bit against a reference that follows the same order. This module
never computes a value of a result in float64 and rounds it afterwards: every
multiplication, subtraction, division and square root is a rounded Tensor
operation (the context's mode and options), every sum is `Tensor.sum` (pairwise,
in the format unless said otherwise) and every blocked update is one `lowprec.matmul`.
Only pivot choices (comparisons, exact) and `refine`'s error measurements (a
diagnostic, in float64, never fed back) read the values directly.
"""

from __future__ import annotations

import math
from typing import Any, TypedDict, cast

import numpy as np
from numpy.typing import ArrayLike

from .formats import FP32, Format, FormatLike
from .formats import format as _format
from .tensorcore import Model
from .tensors import Tensor, matmul, result_format, tensor

__all__ = ["lu", "cholesky", "qr", "solve_triangular", "solve", "inv", "det", "lstsq",
           "norm", "refine", "Step", "LinAlgError"]

LinAlgError = np.linalg.LinAlgError


# -- checks and helpers -------------------------------------------------------------

def _as_tensor(x: Any, name: str) -> Tensor:
    if isinstance(x, Tensor):
        return x
    raise TypeError(f"{name} must be a lowprec.Tensor (its format says where every "
                    f"operation rounds), got {type(x).__name__}: wrap it with "
                    f"lp.tensor({name}, fmt)")


def _square(a: Any, name: str = "a") -> Tensor:
    a = _as_tensor(a, name)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {a.shape}")
    return a


def _exact(values: ArrayLike, fmt: Format) -> Tensor:
    """A Tensor of values already in ``fmt`` (0, 1, permuted or copied values): RNE
    leaves them unchanged and draws nothing from the context's generator."""
    return tensor(values, fmt, mode="rne")


def _rhs(a: Tensor, b: Any, name: str = "b") -> tuple[Tensor, Tensor]:
    """``a`` and ``b`` in their common format; ``b`` of shape (n,) or (n, k)."""
    b = _as_tensor(b, name)
    if b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise ValueError(f"{name} must have shape ({a.shape[0]},) or ({a.shape[0]}, k) "
                         f"for a of shape {a.shape}, got {b.shape}")
    if a.fmt != b.fmt:
        fmt = result_format(a.fmt, b.fmt)   # promotion is exact
        a, b = a.astype(fmt), b.astype(fmt)
    return a, b


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


def _factor(a: Tensor, block: int | None, model: str | Model | None,
            ) -> tuple[Tensor, np.ndarray[Any, Any]]:
    """The packed LU factors (L strictly below the diagonal, unit diagonal implied)
    and the row permutation ``perm`` with ``a[perm] = L @ U``."""
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
        # into the format by the model's output conversion.
        w[e:, e:] = matmul(-w[e:, k:e], w[k:e, e:], model=model, c=w[e:, e:],
                           out_fmt=w.fmt)
    return w, perm


def _permutation(perm: np.ndarray[Any, Any], fmt: Format) -> Tensor:
    n = perm.size
    p = np.zeros((n, n))
    p[perm, np.arange(n)] = 1.0      # a[perm] = L U  <=>  a = P L U with P[perm[i], i] = 1
    return _exact(p, fmt)


# -- factorizations -----------------------------------------------------------------

def lu(a: Tensor, *, block: int | None = None,
       model: str | Model | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """LU factorization with partial pivoting, ``a = p @ l @ u`` (SciPy's convention).

    Right-looking Gaussian elimination in ``a``'s format. Step ``i`` takes as pivot
    the first row of largest ``|a[r, i]|`` (``r >= i``, LAPACK's ``idamax``), swaps
    it into row ``i``, computes each multiplier ``l[j, i] = a[j, i] / a[i, i]``
    (rounded) and updates ``a[j, k] = a[j, k] - l[j, i] * a[i, k]`` as a rounded
    product then a rounded difference (not fused).

    With ``block=b``: the blocked right-looking algorithm (LAPACK's ``getrf``). Each
    panel of ``b`` columns is factored as above (row swaps applied to whole rows);
    ``U12 = L11^-1 A12`` by the same rounded steps; then the trailing matrix
    ``A22 - L21 @ U12`` is one `lowprec.matmul`, ``(-L21) @ U12 + A22`` (GEMM with
    ``c``), under ``model`` (default: the context's matmul model), its result rounded
    into the format once by the model's output conversion. With ``model="exact"``
    each entry of the update is the exact ``a22 - sum(l * u)`` rounded once.

    Parameters
    ----------
    a : Tensor
        A square matrix.
    block : int, optional
        Panel width of the blocked algorithm; None (default) is unblocked.
    model : str or TensorCoreModel, optional
        The matmul model of the blocked update (see `lowprec.matmul`).

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
    a = _square(a)
    w, perm = _factor(a, block, model)
    v = w.values
    n = a.shape[0]
    # Zeros, ones and copied values: exact in every format.
    return (_permutation(perm, a.fmt), _exact(np.tril(v, -1) + np.eye(n), a.fmt),
            _exact(np.triu(v), a.fmt))


def cholesky(a: Tensor) -> Tensor:
    """Cholesky factor ``l`` (lower), ``a = l @ l.T``, of a symmetric positive definite
    matrix; only the lower triangle of ``a`` is read.

    Right-looking: step ``j`` takes ``l[j, j] = sqrt(a[j, j])``, ``l[i, j] = a[i, j] /
    l[j, j]`` and updates ``a[i, k] = a[i, k] - l[i, j] * l[k, j]`` (``k <= i``), each
    operation rounded (product then difference, not fused).

    Raises
    ------
    numpy.linalg.LinAlgError
        Where a pivot ``a[j, j]`` is not positive (not positive definite, in the
        format's arithmetic).

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> la.cholesky(lp.tensor([[4.0, 2.0], [2.0, 3.0]], "bf16"))
    Tensor([[2.0, 0.0],
            [1.0, 1.4140625]], fmt=BF16)
    """
    a = _square(a)
    n = a.shape[0]
    w = _exact(np.tril(a.values), a.fmt)
    for j in range(n):
        d = w.values[j, j]
        if not d > 0:
            raise LinAlgError(f"matrix is not positive definite: pivot {d} in column {j}")
        w[j, j] = np.sqrt(w[j, j])
        if j + 1 < n:
            col = w[j + 1:, j] / w[j, j]
            w[j + 1:, j] = col
            upd = w[j + 1:, j + 1:] - col.reshape(-1, 1) * col.reshape(1, -1)
            w[j + 1:, j + 1:] = _exact(np.tril(upd.values), a.fmt)
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


def qr(a: Tensor) -> tuple[Tensor, Tensor]:
    """Reduced QR factorization ``a = q @ r`` of an ``m x n`` matrix, ``m >= n``, by
    Householder reflections (``q`` is ``m x n``, ``r`` ``n x n`` upper triangular).

    Column ``j``: ``x = r[j:, j]``, ``alpha = -sign(x0) * norm(x)`` (`norm`: FP32 or
    wider accumulation), ``v = x`` with ``v0 = x0 - alpha``, ``beta = 2 / sum(v * v)``;
    then ``r[j:, j:] = r - (beta * v) * (v^T r)`` and ``q[:, j:] = q - (q v) * (beta
    v)^T`` (``q`` from the identity), each product, sum (pairwise, in the format) and
    difference rounded; ``r[j, j] = alpha`` and ``r[j+1:, j] = 0`` are set. A column
    already zero below the diagonal is left as it is (no reflection), so ``r``'s
    diagonal may have either sign.

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> q, r = la.qr(lp.tensor([[3.0, 1.0], [4.0, 2.0]], "fp16"))
    >>> r
    Tensor([[-5.0, -2.19921875],
            [0.0, 0.400390625]], fmt=FP16)
    """
    a = _as_tensor(a, "a")
    if a.ndim != 2 or a.shape[0] < a.shape[1]:
        raise ValueError(f"qr needs an m x n matrix with m >= n, got shape {a.shape}")
    m, n = a.shape
    r = a.copy()
    q = _exact(np.eye(m), a.fmt)
    for j in range(min(n, m - 1)):   # a 1 x 1 last column needs no reflection
        h = _household(r[j:, j])
        if h is None:
            continue
        v, beta, alpha = h
        bv = beta * v
        vr = (v.reshape(-1, 1) * r[j:, j:]).sum(axis=0)
        r[j:, j:] = r[j:, j:] - bv.reshape(-1, 1) * vr.reshape(1, -1)
        r[j, j] = alpha
        r[j + 1:, j] = _exact(np.zeros(m - j - 1), a.fmt)
        qv = (q[:, j:] * v.reshape(1, -1)).sum(axis=1)
        q[:, j:] = q[:, j:] - qv.reshape(-1, 1) * bv.reshape(1, -1)
    return q[:, :n], _exact(np.triu(r.values[:n]), a.fmt)


# -- solves -------------------------------------------------------------------------

def solve_triangular(a: Tensor, b: Tensor, *, lower: bool,
                     unit_diagonal: bool = False) -> Tensor:
    """Solve ``a @ x = b`` for triangular ``a`` (only its ``lower`` or upper triangle
    is read), ``b`` of shape (n,) or (n, k).

    Column-oriented substitution: for ``j`` in order (forward for ``lower``, backward
    otherwise) ``x[j] = b[j] / a[j, j]`` (no division with ``unit_diagonal``), then
    ``b[i] = b[i] - a[i, j] * x[j]`` for the rows still to solve, a rounded product then
    a rounded difference. Each ``x[i]`` so sees exactly the operations of the row
    loop ``(b[i] - a[i, 0] x[0] - a[i, 1] x[1] - ...) / a[i, i]``, left to right.

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> a = lp.tensor([[2.0, 0.0], [1.0, 3.0]], "fp16")
    >>> la.solve_triangular(a, lp.tensor([1.0, 1.0], "fp16"), lower=True)
    Tensor([0.5, 0.1666259765625], fmt=FP16)
    """
    a = _square(a)
    a, b = _rhs(a, b)
    if not isinstance(lower, bool) or not isinstance(unit_diagonal, bool):
        raise TypeError("lower and unit_diagonal must be bools")
    n = a.shape[0]
    x = b.copy()
    order = range(n) if lower else range(n - 1, -1, -1)
    for j in order:
        if not unit_diagonal:
            if a.values[j, j] == 0:
                raise LinAlgError(f"singular matrix: zero diagonal entry {j}")
            x[j] = x[j] / a[j, j]
        rows = slice(j + 1, n) if lower else slice(0, j)
        if rows.start == rows.stop:
            continue
        col = a[rows, j]
        x[rows] = x[rows] - (col * x[j] if x.ndim == 1 else
                             col.reshape(-1, 1) * x[j].reshape(1, -1))
    return x


def _lu_solve(w: Tensor, perm: np.ndarray[Any, Any], b: Tensor) -> Tensor:
    n = w.shape[0]
    v = w.values
    lo = _exact(np.tril(v, -1) + np.eye(n), w.fmt)
    up = _exact(np.triu(v), w.fmt)
    y = solve_triangular(lo, b[perm], lower=True, unit_diagonal=True)
    return solve_triangular(up, y, lower=False)


def solve(a: Tensor, b: Tensor) -> Tensor:
    """Solve ``a @ x = b``: `lu` (unblocked), then ``l y = b[perm]`` and ``u x = y``
    by `solve_triangular`.

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> a = lp.tensor([[1.0, 2.0], [3.0, 4.0]], "fp32")
    >>> la.solve(a, lp.tensor([5.0, 6.0], "fp32"))
    Tensor([-4.0, 4.5], fmt=FP32)
    """
    a = _square(a)
    a, b = _rhs(a, b)
    w, perm = _factor(a, None, None)
    return _lu_solve(w, perm, b)


def inv(a: Tensor) -> Tensor:
    """The inverse: `solve` with the identity.

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> la.inv(lp.tensor([[2.0, 0.0], [0.0, 3.0]], "bf16"))
    Tensor([[0.5, 0.0],
            [0.0, 0.333984375]], fmt=BF16)
    """
    a = _square(a)
    return solve(a, _exact(np.eye(a.shape[0]), a.fmt))


def det(a: Tensor) -> Tensor:
    """The determinant: ``u``'s diagonal of `lu` multiplied left to right (rounded
    products), negated (exact) for an odd permutation; zero where `lu` meets a zero
    pivot, as `numpy.linalg.det`.

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> la.det(lp.tensor([[1.0, 2.0], [3.0, 4.0]], "fp16"))
    Tensor(-2.0, fmt=FP16)
    """
    a = _square(a)
    n = a.shape[0]
    try:
        w, perm = _factor(a, None, None)
    except LinAlgError:
        return _exact(0.0, a.fmt)
    d = _exact(1.0, a.fmt)
    for i in range(n):
        d = d * w[i, i]
    # The permutation's parity: n minus its number of cycles.
    seen, cycles = np.zeros(n, bool), 0
    for i in range(n):
        if not seen[i]:
            cycles += 1
            j = i
            while not seen[j]:
                seen[j] = True
                j = int(perm[j])
    return -d if (n - cycles) % 2 else d


def lstsq(a: Tensor, b: Tensor) -> Tensor:
    """Least-squares solution of ``a @ x ~ b`` (``m >= n``, full rank) by `qr`:
    ``x = r^-1 (q^T b)``, the products of ``q^T b`` summed pairwise in the format.
    Returns ``x`` only (not NumPy's residuals, rank and singular values).

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> a = lp.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], "fp32")
    >>> la.lstsq(a, lp.tensor([1.0, 2.0, 3.0], "fp32"))
    Tensor([1.0, 2.0], fmt=FP32)
    """
    a = _as_tensor(a, "a")
    b = _as_tensor(b, "b")
    if a.ndim != 2 or a.shape[0] < a.shape[1]:
        raise ValueError(f"lstsq needs an m x n matrix with m >= n, got shape {a.shape}")
    if b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise ValueError(f"b must have {a.shape[0]} rows, got shape {b.shape}")
    if a.fmt != b.fmt:
        fmt = result_format(a.fmt, b.fmt)
        a, b = a.astype(fmt), b.astype(fmt)
    q, r = qr(a)
    y = ((q * b.reshape(-1, 1)).sum(axis=0) if b.ndim == 1 else
         (q.reshape(*q.shape, 1) * b.reshape(b.shape[0], 1, -1)).sum(axis=0))
    return solve_triangular(r, y, lower=False)


# -- norms --------------------------------------------------------------------------

def _wide(fmt: Format) -> Format:
    """FP32, or ``fmt`` where FP32 does not hold it (FP64)."""
    return FP32 if result_format(fmt, FP32) == FP32 else fmt


def norm(x: Tensor, ord: float | str | None = None, axis: int | None = None) -> Tensor:  # noqa: A002
    """Vector and matrix norms, as `numpy.linalg.norm`, in ``x``'s format.

    2-norms (vectors, ``ord=None`` or 2) and the Frobenius norm (matrices, ``ord=None``
    or ``"fro"``; any ``ndim`` with ``ord=None`` and ``axis=None``): ``x`` converted to
    FP32 (or kept in its format where that is wider, FP64), squared and summed
    pairwise in it, its square root taken in it, the result rounded into ``x``'s
    format (so twice rounded; FP32's range bounds the squares: BF16 values past
    ``2**64`` give inf). 1-norms and the matrix 1/inf norms (largest column/row sum)
    sum ``|x|`` pairwise in ``x``'s format; inf/-inf norms of vectors are the exact
    largest/smallest ``|x|``. Other orders raise `ValueError` (no matrix 2-norm: it
    needs an SVD).

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> v = lp.tensor([3.0, 4.0], "e4m3")
    >>> la.norm(v), la.norm(v, 1), la.norm(v, float("inf"))
    (Tensor(5.0, fmt=FP8_E4M3), Tensor(7.0, fmt=FP8_E4M3), Tensor(4.0, fmt=FP8_E4M3))
    """
    x = _as_tensor(x, "x")
    if axis is not None and (isinstance(axis, bool) or not isinstance(axis, int)):
        raise TypeError(f"axis must be an int or None, got {type(axis).__name__}")
    matrix = axis is None and x.ndim == 2
    if ord is None or (ord == "fro" and matrix) or (ord == 2 and not matrix):
        if axis is None and ord is not None and x.ndim != 1 and not matrix:
            raise ValueError(f"ord={ord!r} needs a vector or a matrix, got ndim {x.ndim}")
        w = x.astype(_wide(x.fmt)) if axis is not None else x.ravel().astype(_wide(x.fmt))
        s = (w * w).sum(axis=axis)
        return cast(Tensor, np.sqrt(s)).astype(x.fmt)
    absx = abs(x)
    if matrix:
        if ord in (1, -1):
            sums = absx.sum(axis=0)
        elif ord in (math.inf, -math.inf):
            sums = absx.sum(axis=1)
        else:
            raise ValueError(f"matrix norm ord={ord!r} is not supported (None, 'fro', 1, "
                             "-1, inf, -inf)")
        return sums.max() if ord > 0 else sums.min()
    if x.ndim != 1 and axis is None:
        raise ValueError(f"ord={ord!r} needs a vector or a matrix, got ndim {x.ndim}")
    if ord == 1:
        return absx.sum(axis=axis)
    if ord == math.inf:
        return absx.max(axis=axis)
    if ord == -math.inf:
        return absx.min(axis=axis)
    raise ValueError(f"vector norm ord={ord!r} is not supported (None, 1, 2, inf, -inf)")


# -- iterative refinement -----------------------------------------------------------

class Step(TypedDict, total=False):
    """One row of `refine`'s history."""
    iteration: int
    backward_error: float
    forward_error: float
    correction: float


def _inf_norm(v: np.ndarray[Any, Any]) -> float:
    return float(np.max(np.abs(v))) if v.size else 0.0


def refine(a: Tensor | ArrayLike, b: Tensor | ArrayLike, *, factor: FormatLike = "fp16",
           working: FormatLike = "fp64", residual: FormatLike = "fp64",
           model: str | Model | None = None, block: int | None = None, max_iter: int = 10,
           tol: float | None = None, x_true: ArrayLike | Tensor | None = None,
           ) -> tuple[Tensor, list[Step]]:
    """Mixed-precision iterative refinement of ``a @ x = b`` (Carson and Higham, SISC
    2018, Algorithm 1.1, with LU).

    ``a`` and ``b`` are rounded into ``working`` (Tensors or plain float data: the
    data of the problem). ``a`` rounded into ``factor`` is factored once by `lu`
    (``block`` and ``model`` as there); ``x0`` solves with those factors (``b``
    rounded into ``factor``) and is converted to ``working``. Each iteration: ``r = b -
    a x`` in ``residual`` (``a``, ``x``, ``b`` converted to it; products rounded, sums
    pairwise, the difference rounded); ``r`` scaled by a power of two near ``1 /
    max|r|`` (exact) so that rounding it into ``factor`` neither underflows nor
    overflows, rounded, solved with the factors, rounded into ``working`` and
    scaled back (exact); ``x = x + d`` in ``working``.

    History: one entry per iterate ``x_i`` (``i = 0`` the first solve), with its
    normwise backward error ``||r||_inf / (||a||_inf ||x||_inf + ||b||_inf)``, the
    ``forward_error``
    ``||x - x_true||_inf / ||x_true||_inf`` when ``x_true`` is given, and the
    ``correction`` ``||d||_inf / ||x||_inf`` that led to it (measurements in float64
    on the exact values, never fed back). Stops after ``max_iter`` corrections, when
    the backward error is at most ``tol`` (default: the unit roundoff of
    ``working``), when a correction leaves ``x`` unchanged, or when ``x`` stops being
    finite.

    Examples
    --------
    >>> import numpy as np, lowprec.linalg as la
    >>> a = np.array([[4.0, 1.0], [1.0, 3.0]])
    >>> x, history = la.refine(a, [1.0, 2.0], x_true=np.linalg.solve(a, [1.0, 2.0]))
    >>> history[0]["forward_error"] > 1e-5, history[-1]["forward_error"] < 1e-15
    (True, True)
    """
    fw, ff, fr = _format(working), _format(factor), _format(residual)
    aw = a.astype(fw) if isinstance(a, Tensor) else tensor(a, fw)
    bw = b.astype(fw) if isinstance(b, Tensor) else tensor(b, fw)
    _square(aw)
    _rhs(aw, bw)
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 0:
        raise ValueError(f"max_iter must be a non-negative int, got {max_iter!r}")
    tol = fw.eps / 2 if tol is None else float(tol)
    truth = None if x_true is None else np.asarray(
        x_true.values if isinstance(x_true, Tensor) else x_true, dtype=np.float64)
    w, perm = _factor(aw.astype(ff), block, model)
    x = _lu_solve(w, perm, bw.astype(ff)).astype(fw)
    ar, br = aw.astype(fr), bw.astype(fr)
    norm_a = _inf_norm(np.abs(aw.values).sum(axis=1))
    norm_b = _inf_norm(bw.values)
    history: list[Step] = []

    def measure(r: Tensor, i: int, correction: float | None) -> Step:
        xv = x.values
        den = norm_a * _inf_norm(xv) + norm_b
        step: Step = {"iteration": i,
                      "backward_error": _inf_norm(r.values) / den if den else 0.0}
        if truth is not None:
            step["forward_error"] = _inf_norm(xv - truth) / _inf_norm(truth)
        if correction is not None:
            step["correction"] = correction
        history.append(step)
        return step

    def resid() -> Tensor:
        xr = x.astype(fr)
        ax = (ar * xr.reshape(1, -1) if xr.ndim == 1 else
              ar.reshape(*ar.shape, 1) * xr.reshape(1, *xr.shape))
        return br - ax.sum(axis=1)

    r = resid()
    step = measure(r, 0, None)
    for i in range(1, max_iter + 1):
        big = _inf_norm(r.values)
        if not (math.isfinite(big) and np.all(np.isfinite(x.values))):
            break
        if step["backward_error"] <= tol or big == 0:
            break
        scale = 2.0 ** -math.frexp(big)[1]    # a power of two: r * scale is exact
        d = _lu_solve(w, perm, (r * scale).astype(ff)).astype(fw) * (1 / scale)
        old = x
        x = x + d
        r = resid()
        step = measure(r, i, _inf_norm(d.values) / max(_inf_norm(x.values), np.finfo(float).tiny))
        if np.array_equal(old.values, x.values):
            break
    return x, history


# -- np.linalg on Tensors ----------------------------------------------------------------
# The dispatch tables of lowprec.tensors are filled by the files that implement their
# entries; these are this module's (np.linalg.solve(t, b) runs `solve`, and so on).

def _np_solve(a, b):
    return solve(a, b)


def _np_inv(a):
    return inv(a)


def _np_det(a):
    return det(a)


def _np_cholesky(a, /, *, upper=False):
    if upper:
        raise TypeError("numpy.linalg.cholesky(upper=True) is not implemented for "
                        "lowprec.Tensor; take lowprec.linalg.cholesky(a).T")
    return cholesky(a)


def _np_norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002 - NumPy's name
    if keepdims:
        raise TypeError("numpy.linalg.norm(keepdims=True) is not implemented for "
                        "lowprec.Tensor")
    return norm(x, ord=ord, axis=axis)


def _register() -> None:
    from .tensors.core import HANDLED_FUNCTIONS
    from .tensors.functions import KINDS
    for np_fn, fn, order in (
            (np.linalg.solve, _np_solve, "lowprec.linalg.solve: LU with partial pivoting, "
                                         "then two triangular solves"),
            (np.linalg.inv, _np_inv, "lowprec.linalg.inv: solve with the identity"),
            (np.linalg.det, _np_det, "lowprec.linalg.det: the product of U's diagonal, "
                                     "left to right, signed by the pivots"),
            (np.linalg.cholesky, _np_cholesky, "lowprec.linalg.cholesky: right-looking, "
                                               "a rounded sqrt per column"),
            (np.linalg.norm, _np_norm, "lowprec.linalg.norm: 2-norms summed pairwise in "
                                       "FP32 (FP64 for FP64) and rounded once")):
        HANDLED_FUNCTIONS[np_fn] = fn
        KINDS[np_fn] = ("composed", order)


_register()
