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
diagnostic, in float64, never fed back) read the values directly; the quantities
that need an SVD or an eigendecomposition (`norm`'s matrix ``ord=2``, ``-2``,
``"nuc"``, `numpy.linalg.lstsq`'s singular values and rank, and np.linalg's `eigh`,
`eigvalsh`, `eig`, `eigvals`, `svd`, `svdvals`, `pinv`, `cond` with p None/2/-2) and
`slogdet`'s logarithm are the one exception, evaluated in float64 and rounded once
into the format, and said so where they are documented; `matrix_rank` counts with the
format's eps in NumPy's tolerance, and `eig` refuses complex eigenvalues.
Stacks (``ndim > 2``) of `solve`, `inv`, `det`, `slogdet`, `cholesky` and `qr` are
looped over, each matrix factored on its own in C order of the leading indices.
"""

from __future__ import annotations

import math
from typing import Any, TypedDict, cast

import numpy as np
from numpy.typing import ArrayLike

from .formats import FP32, Format, FormatLike
from .formats import format as _format
from .tensorcore import Model, resolve_model
from .tensors import Tensor, get_context, matmul, result_format, tensor

__all__ = ["lu", "cholesky", "qr", "solve_triangular", "solve", "inv", "det", "slogdet",
           "lstsq", "norm", "matrix_power", "multi_dot", "refine", "Step", "LinAlgError"]

LinAlgError = np.linalg.LinAlgError
# NumPy's named tuples, taken from a call (their classes live in a private module).
_QR: Any = type(np.linalg.qr(np.eye(1)))
_SLOGDET: Any = type(np.linalg.slogdet(np.eye(1)))


# -- checks and helpers -------------------------------------------------------------

def _as_tensor(x: Any, name: str) -> Tensor:
    if isinstance(x, Tensor):
        return x
    raise TypeError(f"{name} must be a lowprec.Tensor (its format says where every "
                    f"operation rounds), got {type(x).__name__}: wrap it with "
                    f"lp.tensor({name}, fmt)")


def _square(a: Any, name: str = "a", stack: bool = False) -> Tensor:
    """``a`` as a square matrix (or, with ``stack``, a stack of them); `LinAlgError`
    otherwise, as NumPy (it is a `ValueError`)."""
    a = _as_tensor(a, name)
    if (a.ndim < 2 if stack else a.ndim != 2) or a.shape[-1] != a.shape[-2]:
        what = "a square matrix or a stack of them" if stack else "a square matrix"
        raise LinAlgError(f"{name} must be {what}, got shape {a.shape}")
    return a


def _stacked(parts: list[Tensor], batch: tuple[int, ...], core: tuple[int, ...],
             fmt: Format) -> Tensor:
    """The results of each matrix of a stack, stacked (copied values: exact)."""
    if not parts:
        return _exact(np.zeros(batch + core), fmt)
    return _exact(np.stack([p.values for p in parts]).reshape(batch + parts[0].shape),
                  parts[0].fmt)


def _product(a: Tensor, b: Tensor, model: str | Model | None,
             c: Tensor | None = None) -> Tensor:
    """``a @ b (+ c)`` by `lowprec.matmul` under ``model`` (default: the context's),
    rounded into ``a``'s format once: by the model's output conversion where it has
    an output in that format, else from its FP32 output (its default where it has no
    FP32) by one rounding in the context's mode, as a GEMM epilogue converts (BF16
    or FP8 inputs on ``"h100"``, whose outputs are FP32 and FP16)."""
    fmt = a.fmt
    model = get_context().matmul if model is None else model
    allowed = resolve_model(model).out_formats(fmt)
    if allowed is None or fmt in allowed:
        return matmul(a, b, model=model, c=c, out_fmt=fmt)
    out = FP32 if FP32 in allowed else resolve_model(model).default_out_format()
    return matmul(a, b, model=model, c=c, out_fmt=out).astype(fmt)


#: The column products (`_apply`, `lstsq`'s ``q^T b``) form at most
#: ``max(_PRODUCTS, m * n)`` products at a time: the columns of ``x`` (``b``) in chunks.
_PRODUCTS = 1 << 16


def _by_columns(f: Any, x: Tensor, per_column: int) -> Tensor:
    """``f(x)`` for a 2-D ``x`` whose columns ``f`` treats independently (each output
    column its own products and sums), computed on chunks of columns of at most
    ``max(_PRODUCTS, per_column)`` products and put side by side (copies: exact); one
    call where all fit."""
    step = max(1, _PRODUCTS // max(per_column, 1))
    k = x.shape[1]
    if step >= k:
        return cast(Tensor, f(x))
    parts = [f(x[:, c:c + step]) for c in range(0, k, step)]
    return _exact(np.concatenate([p.values for p in parts], axis=1), parts[0].fmt)


def _apply(a: Tensor, x: Tensor) -> Tensor:
    """``a @ x`` with each product rounded and the products of a row summed pairwise,
    in the format (``x`` of shape (n,) or (n, k)); columns of ``x`` in chunks
    (`_by_columns`)."""
    if x.ndim == 1:
        return (a * x.reshape(1, -1)).sum(axis=1)
    return _by_columns(lambda c: (a.reshape(*a.shape, 1) * c.reshape(1, *c.shape)).sum(axis=1),
                       x, a.size)


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
        # into the format once (`_product`).
        w[e:, e:] = _product(-w[e:, k:e], w[k:e, e:], model, c=w[e:, e:])
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
    into the format once by the model's output conversion (where the model has no
    output in the format, BF16 or FP8 on ``"h100"``, its FP32 output rounded once into
    it, as a GEMM epilogue converts). With ``model="exact"`` each entry of the update
    is the exact ``a22 - sum(l * u)`` rounded once.

    A NaN in the pivot column is taken as the pivot (`numpy.argmax`), so NaNs spread
    through the factors; nothing raises (as `numpy.linalg.solve`, which returns NaNs).

    Parameters
    ----------
    a : Tensor
        A square matrix.
    block : int, optional
        Panel width of the blocked algorithm; None (default) is unblocked.
    model : str or TensorCoreModel, optional
        The matmul model of the blocked update (see `lowprec.matmul`); checked
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
    a = _square(a)
    w, perm = _factor(a, block, model)
    v = w.values
    n = a.shape[0]
    # Zeros, ones and copied values: exact in every format.
    return (_permutation(perm, a.fmt), _exact(np.tril(v, -1) + np.eye(n), a.fmt),
            _exact(np.triu(v), a.fmt))


def cholesky(a: Tensor) -> Tensor:
    """Cholesky factor ``l`` (lower), ``a = l @ l.T``, of a symmetric positive definite
    matrix (or of each matrix of a stack); only the lower triangle of ``a`` is read.

    Right-looking: step ``j`` takes ``l[j, j] = sqrt(a[j, j])``, ``l[i, j] = a[i, j] /
    l[j, j]`` and updates ``a[i, k] = a[i, k] - l[i, j] * l[k, j]`` (``k <= i``), each
    operation rounded (product then difference, not fused).

    Raises
    ------
    numpy.linalg.LinAlgError
        Where a pivot ``a[j, j]`` is not positive (not positive definite, in the
        format's arithmetic), a NaN pivot included (LAPACK's ``potrf`` rule; NumPy 2
        returns NaNs there instead).

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> la.cholesky(lp.tensor([[4.0, 2.0], [2.0, 3.0]], "bf16"))
    Tensor([[2.0, 0.0],
            [1.0, 1.4140625]], fmt=BF16)
    """
    a = _square(a, stack=True)
    if a.ndim > 2:
        batch = a.shape[:-2]
        return _stacked([cholesky(a[i]) for i in np.ndindex(*batch)], batch, a.shape[-2:],
                        a.fmt)
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


_QR_MODES = ("reduced", "complete", "r")


def qr(a: Tensor, mode: str = "reduced") -> Any:
    """QR factorization ``a = q @ r`` of an ``m x n`` matrix (or of each matrix of a
    stack) by Householder reflections, with NumPy's modes: ``"reduced"`` (``q`` is
    ``m x k``, ``r`` ``k x n``, ``k = min(m, n)``), ``"complete"`` (``q`` ``m x m``,
    ``r`` ``m x n``) and ``"r"`` (``r`` only, ``k x n``: the same values, ``q`` not
    formed). ``"raw"`` (LAPACK's packed reflectors) is refused.

    Column ``j < min(n, m - 1)``: ``x = r[j:, j]``, ``alpha = -sign(x0) * norm(x)``
    (`norm`: FP32 or wider accumulation), ``v = x`` with ``v0 = x0 - alpha``, ``beta =
    2 / sum(v * v)``; then ``r[j:, j:] = r - (beta * v) * (v^T r)`` and ``q[:, j:] = q -
    (q v) * (beta v)^T`` (``q`` from the identity), each product, sum (pairwise, in
    the format) and difference rounded; ``r[j, j] = alpha`` and ``r[j+1:, j] = 0`` are
    set. A column already zero below the diagonal is left as it is (no reflection),
    so ``r``'s diagonal may have either sign.

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
    a = _as_tensor(a, "a")
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
        r = _stacked([p if mode == "r" else p[1] for p in parts], batch, (k, n), a.fmt)
        if mode == "r":
            return r
        return _QR(_stacked([p[0] for p in parts], batch, (m, k), a.fmt), r)
    m, n = a.shape
    k = m if mode == "complete" else min(m, n)
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
        if mode != "r":
            qv = (q[:, j:] * v.reshape(1, -1)).sum(axis=1)
            q[:, j:] = q[:, j:] - qv.reshape(-1, 1) * bv.reshape(1, -1)
    rk = _exact(np.triu(r.values[:k]), a.fmt)
    return rk if mode == "r" else _QR(q[:, :k], rk)


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

    Stacks as `numpy.linalg.solve` (NumPy 2): ``a`` of shape (..., n, n); ``b`` of
    shape (n,) is one vector for every matrix, otherwise (..., n, k), the leading
    shapes broadcast; each system is solved on its own, in C order of the leading
    indices. NaNs in ``a`` or ``b`` give NaNs (nothing raises).

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> a = lp.tensor([[1.0, 2.0], [3.0, 4.0]], "fp32")
    >>> la.solve(a, lp.tensor([5.0, 6.0], "fp32"))
    Tensor([-4.0, 4.5], fmt=FP32)
    """
    a = _square(a, stack=True)
    b = _as_tensor(b, "b")
    if a.ndim == 2 and b.ndim <= 2:
        a, b = _rhs(a, b)
        w, perm = _factor(a, None, None)
        return _lu_solve(w, perm, b)
    n = a.shape[-1]
    if b.ndim == 1:
        if b.shape[0] != n:
            raise ValueError(f"b must have shape ({n},) or (..., {n}, k) for a of shape "
                             f"{a.shape}, got {b.shape}")
        batch, core = a.shape[:-2], b.shape
    else:
        if b.shape[-2] != n:
            raise ValueError(f"b must have shape ({n},) or (..., {n}, k) for a of shape "
                             f"{a.shape}, got {b.shape}")
        batch, core = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), b.shape[-2:]
        b = cast(Tensor, np.broadcast_to(b, batch + core))
    a = cast(Tensor, np.broadcast_to(a, batch + a.shape[-2:]))
    parts = [solve(a[i], b if b.ndim == 1 else b[i]) for i in np.ndindex(*batch)]
    return _stacked(parts, batch, core, result_format(a.fmt, b.fmt))


def inv(a: Tensor) -> Tensor:
    """The inverse: `solve` with the identity (each matrix of a stack on its own).

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> la.inv(lp.tensor([[2.0, 0.0], [0.0, 3.0]], "bf16"))
    Tensor([[0.5, 0.0],
            [0.0, 0.333984375]], fmt=BF16)
    """
    a = _square(a, stack=True)
    return solve(a, _exact(np.eye(a.shape[-1]), a.fmt))


def _parity(perm: np.ndarray[Any, Any]) -> int:
    """The permutation's parity: n minus its number of cycles, mod 2."""
    n = perm.size
    seen, cycles = np.zeros(n, bool), 0
    for i in range(n):
        if not seen[i]:
            cycles += 1
            j = i
            while not seen[j]:
                seen[j] = True
                j = int(perm[j])
    return (n - cycles) % 2


def det(a: Tensor) -> Tensor:
    """The determinant: ``u``'s diagonal of `lu` multiplied left to right (rounded
    products), negated (exact) for an odd permutation; zero where `lu` meets a zero
    pivot, as `numpy.linalg.det`. A stack gives the determinant of each matrix.

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> la.det(lp.tensor([[1.0, 2.0], [3.0, 4.0]], "fp16"))
    Tensor(-2.0, fmt=FP16)
    """
    a = _square(a, stack=True)
    if a.ndim > 2:
        batch = a.shape[:-2]
        return _stacked([det(a[i]) for i in np.ndindex(*batch)], batch, (), a.fmt)
    try:
        w, perm = _factor(a, None, None)
    except LinAlgError:
        return _exact(0.0, a.fmt)
    d = _exact(1.0, a.fmt)
    for i in range(a.shape[0]):
        d = d * w[i, i]
    return -d if _parity(perm) else d


def slogdet(a: Tensor) -> Any:
    """Sign and logarithm of ``|det(a)|``, as `numpy.linalg.slogdet` (its named tuple
    ``(sign, logabsdet)``, both Tensors of ``a``'s format; a stack gives one per matrix).

    From the factors of `lu` (unblocked): ``sign`` is the product of the signs of
    ``u``'s diagonal and of the permutation (exact: -1, 0 or 1); ``logabsdet`` is
    ``sum(log|u[i, i]|)`` evaluated in float64 (`math.fsum` of the logarithms) and
    rounded once into the format, so that it does not overflow where `det` does. A
    zero pivot gives ``(0, -inf)`` (``-inf`` is NaN in formats without infinities,
    E4M3); NaNs give ``(nan, nan)``.

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> sign, logdet = la.slogdet(lp.tensor([[1.0, 2.0], [3.0, 4.0]], "fp16"))
    >>> float(sign), float(logdet)
    (-1.0, 0.69384765625)
    """
    a = _square(a, stack=True)
    if a.ndim > 2:
        batch = a.shape[:-2]
        parts = [slogdet(a[i]) for i in np.ndindex(*batch)]
        return _SLOGDET(_stacked([p[0] for p in parts], batch, (), a.fmt),
                        _stacked([p[1] for p in parts], batch, (), a.fmt))
    try:
        w, perm = _factor(a, None, None)
    except LinAlgError:
        return _SLOGDET(_exact(0.0, a.fmt), tensor(-np.inf, a.fmt))
    d = np.diag(w.values)
    if np.isnan(d).any():
        return _SLOGDET(_exact(np.nan, a.fmt), _exact(np.nan, a.fmt))
    sign = float(np.prod(np.sign(d))) * (-1.0 if _parity(perm) else 1.0)
    logabs = math.fsum(math.log(abs(float(x))) for x in d) if d.size else 0.0
    return _SLOGDET(_exact(sign, a.fmt), tensor(logabs, a.fmt))


def lstsq(a: Tensor, b: Tensor) -> Tensor:
    """Least-squares solution of ``a @ x ~ b`` (``m >= n``, full rank) by `qr`:
    ``x = r^-1 (q^T b)``, the products of ``q^T b`` summed pairwise in the format.
    Memory: the products of ``q^T b`` are formed for a chunk of ``b``'s columns at a
    time, at most ``max(2**16, m * n)`` of them (``m * n``: one column), some 100
    bytes each in the working arrays (about 7 MiB), beside the operands, `qr`'s
    ``O(m n)`` and the result. Each column's products and sums are its own, so the
    chunks give the values of one call (under ``"sr"``, where a call needs more than
    one chunk, each chunk draws its own streams).
    Returns ``x`` only; `numpy.linalg.lstsq` on Tensors returns NumPy's tuple
    ``(x, residuals, rank, s)`` (rank and singular values from a float64 SVD of the
    values, rounded once) and refuses a rank-deficient ``a`` (`LinAlgError`: QR
    without pivoting has no minimum-norm solution).

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> a = lp.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], "fp32")
    >>> la.lstsq(a, lp.tensor([1.0, 2.0, 3.0], "fp32"))
    Tensor([1.0, 2.0], fmt=FP32)
    """
    a, b = _lstsq_operands(a, b)
    q, r = qr(a)
    if b.ndim == 1:
        y = (q * b.reshape(-1, 1)).sum(axis=0)
    else:
        y = _by_columns(lambda c: (q.reshape(*q.shape, 1) * c.reshape(c.shape[0], 1, -1))
                        .sum(axis=0), b, q.size)
    return solve_triangular(r, y, lower=False)


def _lstsq_operands(a: Any, b: Any) -> tuple[Tensor, Tensor]:
    a = _as_tensor(a, "a")
    b = _as_tensor(b, "b")
    if a.ndim != 2 or a.shape[0] < a.shape[1]:
        raise LinAlgError(f"lstsq needs an m x n matrix with m >= n (QR; no minimum-norm "
                          f"solutions), got shape {a.shape}")
    if b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise LinAlgError(f"b must have {a.shape[0]} rows, got shape {b.shape}")
    if a.fmt != b.fmt:
        fmt = result_format(a.fmt, b.fmt)
        a, b = a.astype(fmt), b.astype(fmt)
    return a, b


# -- products -----------------------------------------------------------------------

def matrix_power(a: Tensor, n: int, *, model: str | Model | None = None) -> Tensor:
    """``a`` to the integer power ``n`` (each matrix of a stack), in ``a``'s format.

    NumPy's order: ``n = 0`` the identity (exact), ``n < 0`` the power of `inv`
    (``a``); ``n = 1`` a copy, ``2`` ``a @ a``, ``3`` ``(a @ a) @ a``; larger ``n`` by
    binary powering (``z`` runs through ``a, a^2, a^4, ...``, multiplied into the
    result from the lowest set bit up, ``result @ z``). Each product is one
    `lowprec.matmul` under ``model`` (default: the context's) rounded into ``a``'s
    format once (by the model's output conversion, or from its FP32 output where it
    has none in the format), so that every power stays in the format.

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> la.matrix_power(lp.tensor([[1.0, 1.0], [0.0, 1.0]], "e4m3"), 5)
    Tensor([[1.0, 5.0],
            [0.0, 1.0]], fmt=FP8_E4M3)
    """
    import operator
    a = _square(a, stack=True)
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"exponent must be an integer, got {type(n).__name__}") from None
    if n == 0:
        return _exact(np.broadcast_to(np.eye(a.shape[-1]), a.shape).copy(), a.fmt)
    if n < 0:
        a, n = inv(a), -n
    if n == 1:
        return a.copy()
    if n in (2, 3):
        sq = _product(a, a, model)
        return sq if n == 2 else _product(sq, a, model)
    z: Tensor | None = None
    result: Tensor | None = None
    while n > 0:
        z = a if z is None else _product(z, z, model)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else _product(result, z, model)
    return cast(Tensor, result)


def multi_dot(arrays: Any, *, model: str | Model | None = None) -> Tensor:
    """The product of two or more Tensors, left to right: ``multi_dot([a, b, c])`` is
    ``(a @ b) @ c``, each ``@`` one `lowprec.matmul` under ``model`` (default: the
    context's; its output format, FP32 by default, as ``@``). Unlike
    `numpy.linalg.multi_dot`, no cheaper order is chosen: the order is part of the
    result. The first may be 1-D (a row), the last 1-D (a column), the others 2-D.

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> a = lp.tensor([[1.0, 2.0**-11]], "fp16")
    >>> la.multi_dot([a, lp.tensor([[1.0], [1.0]], "fp16"), lp.tensor([[2.0]], "fp16")])
    Tensor([[2.0009765625]], fmt=FP32)
    """
    arrays = [_as_tensor(x, f"arrays[{i}]") for i, x in enumerate(arrays)]
    if len(arrays) < 2:
        raise ValueError("multi_dot needs at least two arrays")
    last = len(arrays) - 1
    for i, x in enumerate(arrays):
        if x.ndim != 2 and not (x.ndim == 1 and i in (0, last)):
            raise ValueError(f"multi_dot: arrays[{i}] must be 2-D (the first and the "
                             f"last may be 1-D), got shape {x.shape}")
    r = arrays[0]
    for x in arrays[1:]:
        r = matmul(r, x, model=model)
    return r


# -- norms --------------------------------------------------------------------------

def _wide(fmt: Format) -> Format:
    """FP32, or ``fmt`` where FP32 does not hold it (FP64)."""
    return FP32 if result_format(fmt, FP32) == FP32 else fmt


def _two_norm(x: Tensor, axis: int | tuple[int, ...] | None) -> Tensor:
    w = x.astype(_wide(x.fmt))
    s = (w * w).sum(axis=axis)
    return cast(Tensor, np.sqrt(s)).astype(x.fmt)


def _axes(axis: Any, ndim: int) -> tuple[int, ...] | None:
    if axis is None:
        return None
    items = axis if isinstance(axis, tuple) else (axis,)
    if any(isinstance(i, bool) or not isinstance(i, (int, np.integer)) for i in items):
        raise TypeError(f"axis must be an int, a tuple of ints or None, got {axis!r}")
    axes = tuple(np.lib.array_utils.normalize_axis_tuple(items, ndim))
    if len(axes) > 2:
        raise ValueError("improper number of dimensions to norm: axis names more than two")
    return axes


def norm(x: Tensor, ord: float | str | None = None,  # noqa: A002 - NumPy's name
         axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Tensor:
    """Vector and matrix norms, as `numpy.linalg.norm`, in ``x``'s format.

    ``axis``: None (a vector or a matrix, or with ``ord=None`` every element), an int
    (vectors along it) or a pair (matrices over those two axes); ``keepdims`` as NumPy.

    2-norms of vectors (``ord=None`` or 2) and the Frobenius norm (``ord=None`` or
    ``"fro"``): ``x`` converted to FP32 (or kept in its format where that is wider,
    FP64), squared and summed pairwise in it, its square root taken in it, the result
    rounded into ``x``'s format (so twice rounded; FP32's range bounds the squares:
    BF16 values past ``2**64`` give inf). 1-norms and the matrix 1/inf norms (largest
    column/row sum) sum ``|x|`` pairwise in ``x``'s format; inf/-inf norms of vectors
    are the exact largest/smallest ``|x|``, ``ord=0`` the count of nonzeros rounded
    once. The matrix ``ord=2``, ``-2`` and ``"nuc"`` (largest, smallest singular value,
    their sum) need an SVD: a float64 SVD of the values (`numpy.linalg.svd`), the
    result rounded once into the format (not an emulated algorithm; NaNs make NumPy's
    SVD raise `LinAlgError`). Other orders raise `ValueError`.

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> v = lp.tensor([3.0, 4.0], "e4m3")
    >>> la.norm(v), la.norm(v, 1), la.norm(v, float("inf"))
    (Tensor(5.0, fmt=FP8_E4M3), Tensor(7.0, fmt=FP8_E4M3), Tensor(4.0, fmt=FP8_E4M3))
    >>> la.norm(lp.tensor([[3.0, 0.0], [0.0, -4.0]], "fp16"), 2)
    Tensor(4.0, fmt=FP16)
    """
    x = _as_tensor(x, "x")
    if not isinstance(keepdims, (bool, np.bool_)):
        raise TypeError(f"keepdims must be a bool, got {type(keepdims).__name__}")
    axes = _axes(axis, x.ndim)
    if axes is None:
        if ord is None:
            r = _two_norm(x.ravel(), None)
            return r.reshape((1,) * x.ndim) if keepdims else r
        if x.ndim not in (1, 2):
            raise ValueError(f"ord={ord!r} needs a vector or a matrix (or axis=), got "
                             f"ndim {x.ndim}")
        axes = tuple(range(x.ndim))
    r = _vector_norm(x, ord, axes[0]) if len(axes) == 1 else _matrix_norm(x, ord, axes)
    if keepdims:
        r = r.reshape(tuple(1 if i in axes else s for i, s in enumerate(x.shape)))
    return r


def _vector_norm(x: Tensor, ord: Any, ax: int) -> Tensor:  # noqa: A002
    if isinstance(ord, str):
        raise ValueError(f"invalid norm order {ord!r} for vectors")
    if ord is None or ord == 2:
        return _two_norm(x, ax)
    if ord == 1:
        return abs(x).sum(axis=ax)
    if ord == math.inf:
        return _largest(abs(x), ax)
    if ord == -math.inf:
        return abs(x).min(axis=ax)
    if ord == 0:
        # Counts below 2**53: exact in float64, one rounding into the format.
        return tensor(np.count_nonzero(x.values, axis=ax).astype(np.float64), x.fmt)
    raise ValueError(f"vector norm ord={ord!r} is not supported (None, 0, 1, 2, inf, -inf:"
                     " |x|**p is not emulated)")


def _matrix_norm(x: Tensor, ord: Any, axes: tuple[int, ...]) -> Tensor:  # noqa: A002
    r, c = axes
    if r == c:
        raise ValueError("duplicate axes given to norm")
    if ord is None or ord == "fro":
        return _two_norm(x, axes)
    if ord in (2, -2, "nuc"):
        s = np.linalg.svd(np.moveaxis(x.values, axes, (-2, -1)), compute_uv=False)
        # s descends: its largest is s[..., 0], +0 for an empty matrix (NumPy's answer);
        # the smallest of none raises NumPy's ValueError, as NumPy.
        v = (s.sum(axis=-1) if ord == "nuc" else s.max(axis=-1, initial=0.0) if ord == 2
             else s.min(axis=-1))
        return tensor(v, x.fmt)      # float64, rounded once
    if ord in (1, -1):
        sums, other = abs(x).sum(axis=r), c - (c > r)
    elif ord in (math.inf, -math.inf):
        sums, other = abs(x).sum(axis=c), r - (r > c)
    else:
        raise ValueError(f"matrix norm ord={ord!r} is not supported (None, 'fro', 'nuc', "
                         "1, -1, 2, -2, inf, -inf)")
    return _largest(sums, other) if ord > 0 else sums.min(axis=other)


def _largest(t: Tensor, axis: int) -> Tensor:
    """``t.max(axis=axis)`` of values ``>= 0``; +0 along an empty axis (the least norm,
    NumPy's answer), where the smallest stays refused as NumPy refuses it."""
    if t.shape[axis] == 0:
        return _exact(np.zeros(t.shape[:axis] + t.shape[axis + 1:]), t.fmt)
    return t.max(axis=axis)


# -- iterative refinement -----------------------------------------------------------

class Step(TypedDict, total=False):
    """One row of `refine`'s history."""
    iteration: int
    backward_error: float
    forward_error: float
    correction: float


def _inf_norm(v: np.ndarray[Any, Any]) -> float:
    return float(np.max(np.abs(v))) if v.size else 0.0


def _relative(err: float, size: float) -> float:
    """``err / size`` as IEEE 754 divides (inf for a nonzero ``err`` over 0, NaN for
    NaN), except ``0 / 0``: no error relative to a zero truth is 0."""
    if size == 0:
        return 0.0 if err == 0 else math.inf if err > 0 else math.nan
    return err / size


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
    ``||x - x_true||_inf / ||x_true||_inf`` when ``x_true`` is given (of ``b``'s
    shape, else `ValueError`; a zero ``x_true`` gives 0 where ``x`` equals it, inf
    where it does not, NaN where ``x`` holds a NaN), and the
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
    if truth is not None and truth.shape != bw.shape:
        raise ValueError(f"x_true must have the shape of b, {bw.shape}, got {truth.shape}")
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
            step["forward_error"] = _relative(_inf_norm(xv - truth), _inf_norm(truth))
        if correction is not None:
            step["correction"] = correction
        history.append(step)
        return step

    def resid() -> Tensor:
        return br - _apply(ar, x.astype(fr))

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

def _np_cholesky(a, /, *, upper=False):
    if not upper:
        return cholesky(a)
    # U with U^T U = a, from a's upper triangle: the lower factor of a^T, transposed
    # (the same rounded operations; transposes are exact).
    return np.swapaxes(cholesky(np.swapaxes(_as_tensor(a, "a"), -1, -2)), -1, -2)


def _np_norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002 - NumPy's name
    return norm(x, ord=ord, axis=axis, keepdims=bool(keepdims))


def _np_vector_norm(x, /, *, axis=None, keepdims=False, ord=2):  # noqa: A002
    x = _as_tensor(x, "x")
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


def _np_matrix_norm(x, /, *, keepdims=False, ord="fro"):  # noqa: A002
    x = _as_tensor(x, "x")
    if x.ndim < 2:
        raise ValueError(f"matrix_norm needs at least 2 dimensions, got shape {x.shape}")
    return norm(x, ord=ord, axis=(-2, -1), keepdims=bool(keepdims))


def _np_qr(a, mode="reduced"):
    return qr(a, mode)


def _np_lstsq(a, b, rcond=None):
    """NumPy's tuple: ``x`` by `lstsq`; ``residuals`` the squared 2-norms of the
    columns of ``b - a x`` (products rounded, summed pairwise, the difference rounded;
    squares summed as `norm` does, rounded once; the products of ``a x`` formed for a
    chunk of columns at a time, as `lstsq`'s), empty unless ``m > n``; ``rank`` and
    ``s`` from a float64 SVD of the values (``s`` rounded once), singular values at
    most ``rcond * s[0]`` counted as zero (default ``rcond``: the format's eps times
    ``max(m, n)``, NumPy's rule in the format)."""
    a, b = _lstsq_operands(a, b)
    m, n = a.shape
    s = np.linalg.svd(a.values, compute_uv=False)
    cut = (a.fmt.eps * max(m, n) if rcond is None else float(rcond)) * (s[0] if s.size else 0)
    rank = int(np.sum(s > cut))
    if rank < n:
        raise LinAlgError(f"a has rank {rank} < {n} columns (rcond cut-off {cut:.3g}): "
                          "lowprec's lstsq (QR without pivoting) needs full column rank")
    x = lstsq(a, b)
    if m > n:
        w = (b - _apply(a, x)).astype(_wide(a.fmt))
        res = (w * w).sum(axis=0).astype(a.fmt).reshape(-1)
    else:
        res = _exact(np.zeros(0), a.fmt)
    return x, res, rank, tensor(s, a.fmt)


def _np_outer(x1, x2, /):
    if np.ndim(x1) != 1 or np.ndim(x2) != 1:
        raise ValueError(f"numpy.linalg.outer needs 1-D arrays, got ndim {np.ndim(x1)} "
                         f"and {np.ndim(x2)}")
    return np.outer(x1, x2)


def _np_cross(x1, x2, /, *, axis=-1):
    """``c0 = a1 b2 - a2 b1`` and cyclically: two rounded products, then a rounded
    difference (not fused), for 3-vectors along ``axis``."""
    if np.shape(np.moveaxis(x1, axis, -1))[-1] != 3 or \
            np.shape(np.moveaxis(x2, axis, -1))[-1] != 3:
        raise ValueError("numpy.linalg.cross needs 3-element vectors along axis, got "
                         f"shapes {np.shape(x1)} and {np.shape(x2)}")
    return np.cross(x1, x2, axis=axis)    # the Tensor's numpy.cross: the same rounding order


def _np_vecdot(x1, x2, /, *, axis=-1):
    a, b = np.moveaxis(x1, axis, -1), np.moveaxis(x2, axis, -1)
    k = np.shape(a)[-1]
    if np.shape(b)[-1] != k:
        raise ValueError(f"numpy.linalg.vecdot: axis lengths differ, {k} and "
                         f"{np.shape(b)[-1]}")
    r = matmul(a.reshape(*np.shape(a)[:-1], 1, k), b.reshape(*np.shape(b)[:-1], k, 1))
    return r.reshape(r.shape[:-2])


def _np_matrix_transpose(x, /):
    if np.ndim(x) < 2:
        raise ValueError(f"matrix_transpose needs at least 2 dimensions, got {np.ndim(x)}")
    return np.swapaxes(x, -1, -2)


def _np_trace(x, /, *, offset=0, dtype=None):
    return np.trace(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


def _np_diagonal(x, /, *, offset=0):
    return np.diagonal(x, offset=offset, axis1=-2, axis2=-1)


def _np_tensordot(x1, x2, /, *, axes=2):
    return np.tensordot(x1, x2, axes=axes)


def _np_matmul(x1, x2, /):
    return matmul(x1, x2)


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
    a = _square(a, stack=True)
    w, v = np.linalg.eigh(a.values, UPLO=UPLO)
    return _EIGH(_once(w, a.fmt), _once(v, a.fmt))


def _np_eigvalsh(a, UPLO="L"):
    a = _square(a, stack=True)
    return _once(np.linalg.eigvalsh(a.values, UPLO=UPLO), a.fmt)


def _real_spectrum(name: str, parts: tuple[Any, ...]) -> None:
    """`TypeError` where NumPy's float64 ``eig`` is complex (it returns real arrays
    exactly when every eigenvalue's imaginary part is zero)."""
    if any(np.iscomplexobj(p) for p in parts):
        raise TypeError(f"numpy.linalg.{name}: the eigenvalues are complex (NumPy's float64 "
                        f"result) and lowprec has no complex formats; "
                        f"np.linalg.{name}(np.asarray(t)) gives the float64 result")


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
    a = _square(a, stack=True)
    w, v = np.linalg.eig(a.values)
    _real_spectrum("eig", (w, v))
    return _EIG(_once(w, a.fmt), _once(v, a.fmt))


def _np_eigvals(a):
    a = _square(a, stack=True)
    w = np.linalg.eigvals(a.values)
    _real_spectrum("eigvals", (w,))
    return _once(w, a.fmt)


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
    a = _as_tensor(a, "a")
    if not compute_uv:
        return _once(np.linalg.svd(a.values, compute_uv=False, hermitian=hermitian), a.fmt)
    u, s, vh = np.linalg.svd(a.values, full_matrices=full_matrices, hermitian=hermitian)
    return _SVD(_once(u, a.fmt), _once(s, a.fmt), _once(vh, a.fmt))


def _np_svdvals(x, /):
    x = _as_tensor(x, "x")
    return _once(np.linalg.svd(x.values, compute_uv=False), x.fmt)


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
    a = _as_tensor(a, "a")
    if rtol is None and rcond is None and a.ndim >= 2:
        rtol = max(a.shape[-2:]) * float(a.fmt.eps)
    kw = {} if rtol is _UNSET else {"rtol": _plain(rtol)}
    return _once(np.linalg.pinv(a.values, _plain(rcond), hermitian, **kw), a.fmt)


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
    a = _as_tensor(A, "A")
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


def _np_cond(x, p=None):
    """The condition number, as `numpy.linalg.cond`. ``p`` None, 2 or -2: the ratio of
    the largest and smallest singular values of a float64 SVD of the values, computed
    in float64 and rounded once. Other ``p`` (1, -1, inf, -inf, ``"fro"``, ``"nuc"``):
    `inv` (LU in the format), `norm` of ``x`` and of ``inv(x)`` (each as `norm`
    documents), their product rounded; each matrix of a stack on its own. A singular
    matrix (``inv`` meets a zero pivot) gives inf; a NaN result becomes inf unless
    ``x`` holds a NaN (NumPy's rule); inf is rounded into the format like any value
    (NaN in formats without infinities, or their max under ``saturate``).

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> d = lp.tensor([[3.0, 0.0], [0.0, 0.5]], "fp16")
    >>> np.linalg.cond(d), np.linalg.cond(d, 1)
    (Tensor(6.0, fmt=FP16), Tensor(6.0, fmt=FP16))
    """
    x = _as_tensor(x, "x")
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
    x = _square(x, "x", stack=True)
    batch = x.shape[:-2]
    if batch:
        r = _stacked([_cond_matrix(x[i], p) for i in np.ndindex(*batch)], batch, (),
                     x.fmt)
    else:
        r = _cond_matrix(x, p)
    fix = np.isnan(r.values) & ~nan_in
    if not fix.any():
        return r
    return _exact(np.where(fix, _once(np.inf, x.fmt).values, r.values), x.fmt)


def _tensor_pair(a: Any, b: Any) -> tuple[Tensor, Tensor]:
    """``a`` and ``b`` as Tensors: a plain operand is rounded into the other's format
    (context mode), as the ufuncs round a plain operand in."""
    if not isinstance(a, Tensor):
        a = tensor(a, _as_tensor(b, "b").fmt)
    if not isinstance(b, Tensor):
        b = tensor(b, a.fmt)
    return a, b


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
    a = _as_tensor(a, "a")
    if isinstance(ind, (bool, np.bool_)) or not isinstance(ind, (int, np.integer)):
        raise TypeError(f"ind must be a positive int (NumPy's number of first indices "
                        f"in the inverse sum), got {type(ind).__name__} {ind!r}")
    if not ind > 0:
        raise ValueError(f"Invalid ind argument: {ind!r} (it must be positive)")
    shape = a.shape
    rows = math.prod(shape[ind:])
    return inv(a.reshape(rows, -1)).reshape(shape[ind:] + shape[:ind])


def _np_tensorsolve(a, b, axes=None):
    """NumPy's ``tensorsolve``: ``a``'s ``axes`` moved to the end and ``a`` reshaped
    into a square matrix, ``b`` flattened (exact), `solve` (LU in the format, two
    triangular solves), the result reshaped; a plain operand rounded into the other's
    format first. ``axes``: ints naming axes of ``a`` (negative ones from the end);
    one out of range or repeated raises `ValueError`, a non-int `TypeError`.

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


_STACK = "; stacks looped over, each matrix on its own"
_MM = ("matmul model", "as `numpy.matmul`: `lp.matmul` with the context's model "
                       "(FP32 result by default)")
_NORM = ("2-norms and Frobenius: squares summed pairwise in FP32 (FP64 for FP64), sqrt, "
         "rounded into the format; 1/inf norms: |x| summed pairwise in the format; matrix "
         "2/-2/'nuc': float64 SVD of the values, rounded once")

_ONCE = "NumPy's float64 (LAPACK) "

#: (numpy.linalg name, handler, class, order): what this module registers.
_NUMPY = (
    ("solve", lambda a, b: solve(a, b), "composed",
     "lowprec.linalg.solve: LU with partial pivoting, then two triangular solves" + _STACK),
    ("inv", lambda a: inv(a), "composed", "lowprec.linalg.inv: solve with the identity" + _STACK),
    ("det", lambda a: det(a), "composed",
     "lowprec.linalg.det: the product of U's diagonal, left to right, signed by the "
     "pivots" + _STACK),
    ("slogdet", lambda a: slogdet(a), "composed",
     "lowprec.linalg.slogdet: LU; sign exact; log|det| the float64 sum of log|u_ii| "
     "rounded once" + _STACK),
    ("cholesky", _np_cholesky, "composed",
     "lowprec.linalg.cholesky: right-looking, a rounded sqrt per column; upper=True the "
     "transpose of the lower factor of a^T" + _STACK),
    ("qr", _np_qr, "composed",
     "lowprec.linalg.qr: Householder, every product, sum (pairwise) and difference "
     "rounded; modes reduced, complete, r" + _STACK),
    ("lstsq", _np_lstsq, "composed",
     "lowprec.linalg.lstsq: QR, x = R^-1 (Q^T b); residuals rounded as `norm`; rank and "
     "s from a float64 SVD (s rounded once); rank-deficient a refused"),
    ("matrix_power", lambda a, n: matrix_power(a, n), "matmul model",
     "lowprec.linalg.matrix_power: NumPy's binary powering, each product `lp.matmul` "
     "(context's model) rounded into the format"),
    ("multi_dot", _np_multi_dot, "matmul model",
     "lowprec.linalg.multi_dot: left to right, each `@` through `lp.matmul` (no order "
     "optimisation)"),
    ("norm", _np_norm, "composed", "lowprec.linalg.norm: " + _NORM),
    ("vector_norm", _np_vector_norm, "composed",
     "lowprec.linalg.norm over the flattened axes: " + _NORM),
    ("matrix_norm", _np_matrix_norm, "composed",
     "lowprec.linalg.norm over the last two axes: " + _NORM),
    ("outer", _np_outer, "correctly rounded", "as `numpy.outer` (1-D only): each product "
                                              "rounded once"),
    ("cross", _np_cross, "composed", "two rounded products, then a rounded difference "
                                     "(not fused), per component"),
    ("vecdot", _np_vecdot, "matmul model", "each dot product a 1 x k by k x 1 `lp.matmul` "
                                           "(context's model, FP32 result by default)"),
    ("matmul", _np_matmul, *_MM),
    ("tensordot", _np_tensordot, "matmul model", "as `numpy.tensordot`: one 2-D "
                                                 "`lp.matmul` with the context's model"),
    ("matrix_transpose", _np_matrix_transpose, "exact", "the last two axes swapped"),
    ("diagonal", _np_diagonal, "exact", "the diagonal of the last two axes"),
    ("trace", _np_trace, "composed", "the diagonal of the last two axes summed as "
                                     "`numpy.sum` (pairwise in the format)"),
    ("eigh", _np_eigh, "rounded once", _ONCE + "eigh (UPLO as NumPy): eigenvalues and "
     "eigenvectors each rounded once"),
    ("eigvalsh", _np_eigvalsh, "rounded once", _ONCE + "eigvalsh, rounded once"),
    ("eig", _np_eig, "rounded once", _ONCE + "eig, eigenvalues and eigenvectors each rounded "
     "once where real; complex eigenvalues refused (TypeError: no complex formats)"),
    ("eigvals", _np_eigvals, "rounded once", _ONCE + "eigvals, rounded once where real; "
     "complex eigenvalues refused (TypeError: no complex formats)"),
    ("svd", _np_svd, "rounded once", _ONCE + "svd (NumPy's options): U, S and Vh each "
     "rounded once"),
    ("svdvals", _np_svdvals, "rounded once", _ONCE + "singular values, rounded once"),
    ("pinv", _np_pinv, "rounded once", _ONCE + "pinv (rcond, rtol as NumPy; rtol=None: "
     "max(M, N) * the format's eps), rounded once"),
    ("matrix_rank", _np_matrix_rank, "plain", "a count: singular values of a float64 SVD "
     "of the values above tol (default max(M, N) * the format's eps * the largest)"),
    ("cond", _np_cond, "composed", "p None/2/-2: s_max / s_min of a float64 SVD, rounded "
     "once; other p: lowprec.linalg.inv, then norm(x, p) and norm(inv(x), p) as "
     "lowprec.linalg.norm, their product rounded; singular: inf" + _STACK),
    ("tensorinv", _np_tensorinv, "composed", "reshaped to a square matrix (exact), "
     "lowprec.linalg.inv (LU in the format), reshaped back"),
    ("tensorsolve", _np_tensorsolve, "composed", "a plain operand rounded into the format; "
     "a's axes moved, reshaped to a square matrix, b flattened (exact), "
     "lowprec.linalg.solve (LU, two triangular solves), reshaped"),
)


def _register() -> None:
    from .tensors.core import implements
    for name, fn, kind, order in _NUMPY:
        np_fn = getattr(np.linalg, name, None)    # NumPy 2 added several
        if np_fn is not None:
            implements(np_fn, kind, order)(fn)


_register()
