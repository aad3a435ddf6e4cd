"""`solve_triangular`, `solve`, `inv`, `det`, `slogdet`, `lstsq`, `matrix_power` and
`multi_dot` of Tensors, every operation rounded in the format."""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

from ..tensorcore import ModelLike
from ..tensors import Tensor, matmul, result_format, tensor
from .core import LinAlgError, as_tensor, by_columns, exact, product, rhs, square, stacked
from .factor import lu_factor, qr

# NumPy's named tuple, taken from a call (its class lives in a private module).
_SLOGDET: Any = type(np.linalg.slogdet(np.eye(1)))


# -- solves -------------------------------------------------------------------------

def solve_triangular(a: Tensor, b: Tensor, *, lower: bool,
                     unit_diagonal: bool = False) -> Tensor:
    """Solve ``a @ x = b`` for triangular ``a`` (only its ``lower`` or upper triangle
    is read), ``b`` of shape (n,) or (n, k).

    Column-oriented substitution, for ``j`` in order (forward for ``lower``, backward
    otherwise). First ``x[j] = b[j] / a[j, j]``, with no division for
    ``unit_diagonal``. Then ``b[i] = b[i] - a[i, j] * x[j]`` for the rows still to
    solve, a rounded product then a rounded difference. Each ``x[i]`` so sees
    exactly the operations of the row loop
    ``(b[i] - a[i, 0] x[0] - a[i, 1] x[1] - ...) / a[i, i]``, left to right.

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> a = lp.tensor([[2.0, 0.0], [1.0, 3.0]], "fp16")
    >>> la.solve_triangular(a, lp.tensor([1.0, 1.0], "fp16"), lower=True)
    Tensor([0.5, 0.1666259765625], fmt=FP16)
    """
    a = square(a)
    a, b = rhs(a, b)
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


def lu_solve(w: Tensor, perm: np.ndarray[Any, Any], b: Tensor) -> Tensor:
    n = w.shape[0]
    v = w.values
    lo = exact(np.tril(v, -1) + np.eye(n), w.fmt)
    up = exact(np.triu(v), w.fmt)
    y = solve_triangular(lo, b[perm], lower=True, unit_diagonal=True)
    return solve_triangular(up, y, lower=False)


def solve(a: Tensor, b: Tensor) -> Tensor:
    """Solve ``a @ x = b``: `lu` (unblocked), then ``l y = b[perm]`` and ``u x = y``
    by `solve_triangular`.

    Stacks are as in `numpy.linalg.solve` (NumPy 2). ``a`` has shape (..., n, n).
    ``b`` of shape (n,) is one vector for every matrix, otherwise it has shape
    (..., n, k), the leading shapes broadcast. Each system is solved on its own, in
    C order of the leading indices. NaNs in ``a`` or ``b`` give NaNs (nothing
    raises).

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> a = lp.tensor([[1.0, 2.0], [3.0, 4.0]], "fp32")
    >>> la.solve(a, lp.tensor([5.0, 6.0], "fp32"))
    Tensor([-4.0, 4.5], fmt=FP32)
    """
    a = square(a, stack=True)
    b = as_tensor(b, "b")
    if a.ndim == 2 and b.ndim <= 2:
        a, b = rhs(a, b)
        w, perm = lu_factor(a, None, None)
        return lu_solve(w, perm, b)
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
    return stacked(parts, batch, core, result_format(a.fmt, b.fmt))


def inv(a: Tensor) -> Tensor:
    """The inverse: `solve` with the identity (each matrix of a stack on its own).

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> la.inv(lp.tensor([[2.0, 0.0], [0.0, 3.0]], "bf16"))
    Tensor([[0.5, 0.0],
            [0.0, 0.333984375]], fmt=BF16)
    """
    a = square(a, stack=True)
    return solve(a, exact(np.eye(a.shape[-1]), a.fmt))


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
    """The determinant, as `numpy.linalg.det`.

    ``u``'s diagonal of `lu` is multiplied left to right (rounded products), then
    negated (exact) for an odd permutation. The result is zero where `lu` meets a
    zero pivot. A stack gives the determinant of each matrix.

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> la.det(lp.tensor([[1.0, 2.0], [3.0, 4.0]], "fp16"))
    Tensor(-2.0, fmt=FP16)
    """
    a = square(a, stack=True)
    if a.ndim > 2:
        batch = a.shape[:-2]
        return stacked([det(a[i]) for i in np.ndindex(*batch)], batch, (), a.fmt)
    try:
        w, perm = lu_factor(a, None, None)
    except LinAlgError:
        return exact(0.0, a.fmt)
    d = exact(1.0, a.fmt)
    for i in range(a.shape[0]):
        d = d * w[i, i]
    return -d if _parity(perm) else d


def slogdet(a: Tensor) -> Any:
    """Sign and logarithm of ``|det(a)|``, as `numpy.linalg.slogdet`.

    The result is NumPy's named tuple ``(sign, logabsdet)``, both Tensors of ``a``'s
    format. A stack gives one per matrix. Both come from the factors of `lu`
    (unblocked).

    * ``sign`` is the product of the signs of ``u``'s diagonal and of the
      permutation (exact: -1, 0 or 1).
    * ``logabsdet`` is ``sum(log|u[i, i]|)`` evaluated in float64 (`math.fsum` of
      the logarithms) and rounded once into the format. So it does not overflow
      where `det` does.

    A zero pivot gives ``(0, -inf)``, ``-inf`` being NaN in formats without
    infinities (E4M3). NaNs give ``(nan, nan)``.

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> sign, logdet = la.slogdet(lp.tensor([[1.0, 2.0], [3.0, 4.0]], "fp16"))
    >>> float(sign), float(logdet)
    (-1.0, 0.69384765625)
    """
    a = square(a, stack=True)
    if a.ndim > 2:
        batch = a.shape[:-2]
        parts = [slogdet(a[i]) for i in np.ndindex(*batch)]
        return _SLOGDET(stacked([p[0] for p in parts], batch, (), a.fmt),
                        stacked([p[1] for p in parts], batch, (), a.fmt))
    try:
        w, perm = lu_factor(a, None, None)
    except LinAlgError:
        return _SLOGDET(exact(0.0, a.fmt), tensor(-np.inf, a.fmt))
    d = np.diag(w.values)
    if np.isnan(d).any():
        return _SLOGDET(exact(np.nan, a.fmt), exact(np.nan, a.fmt))
    sign = float(np.prod(np.sign(d))) * (-1.0 if _parity(perm) else 1.0)
    logabs = math.fsum(math.log(abs(float(x))) for x in d) if d.size else 0.0
    return _SLOGDET(exact(sign, a.fmt), tensor(logabs, a.fmt))


def lstsq(a: Tensor, b: Tensor) -> Tensor:
    """Least-squares solution of ``a @ x ~ b`` (``m >= n``, full rank) by `qr`:
    ``x = r^-1 (q^T b)``, the products of ``q^T b`` summed pairwise in the format.

    Memory: the products of ``q^T b`` are formed for a chunk of ``b``'s columns at a
    time. A chunk holds at most ``max(2**16, m * n)`` of them (``m * n``: one
    column), some 100 bytes each in the working arrays (about 7 MiB). That is beside
    the operands, `qr`'s ``O(m n)`` and the result. Each column's products and sums
    are its own, so the chunks give the values of one call. Under ``"sr"``, where a
    call needs more than one chunk, each chunk draws its own streams.

    Returns ``x`` only. `numpy.linalg.lstsq` on Tensors returns NumPy's tuple
    ``(x, residuals, rank, s)``, the rank and singular values from a float64 SVD of
    the values, rounded once. It refuses a rank-deficient ``a`` (`LinAlgError`):
    QR without pivoting has no minimum-norm solution.

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> a = lp.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], "fp32")
    >>> la.lstsq(a, lp.tensor([1.0, 2.0, 3.0], "fp32"))
    Tensor([1.0, 2.0], fmt=FP32)
    """
    a, b = lstsq_operands(a, b)
    q, r = qr(a)
    if b.ndim == 1:
        y = (q * b.reshape(-1, 1)).sum(axis=0)
    else:
        y = by_columns(lambda c: (q.reshape(*q.shape, 1) * c.reshape(c.shape[0], 1, -1))
                        .sum(axis=0), b, q.size)
    return solve_triangular(r, y, lower=False)


def lstsq_operands(a: Any, b: Any) -> tuple[Tensor, Tensor]:
    a = as_tensor(a, "a")
    b = as_tensor(b, "b")
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

def matrix_power(a: Tensor, n: int, *, model: ModelLike | None = None) -> Tensor:
    """``a`` to the integer power ``n`` (each matrix of a stack), in ``a``'s format.

    NumPy's order:

    * ``n = 0``: the identity (exact).
    * ``n < 0``: the power of `inv` (``a``).
    * ``n = 1``: a copy. ``2``: ``a @ a``. ``3``: ``(a @ a) @ a``.
    * Larger ``n``: binary powering. ``z`` runs through ``a, a^2, a^4, ...``, and is
      multiplied into the result from the lowest set bit up, ``result @ z``.

    Each product is one `lowprec.matmul` under ``model`` (default: the context's).
    It is rounded into ``a``'s format once, by the model's output conversion. Where
    the model has no output in the format, its FP32 output is rounded. So every
    power stays in the format.

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> la.matrix_power(lp.tensor([[1.0, 1.0], [0.0, 1.0]], "e4m3"), 5)
    Tensor([[1.0, 5.0],
            [0.0, 1.0]], fmt=FP8_E4M3)
    """
    import operator
    a = square(a, stack=True)
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"exponent must be an integer, got {type(n).__name__}") from None
    if n == 0:
        return exact(np.broadcast_to(np.eye(a.shape[-1]), a.shape).copy(), a.fmt)
    if n < 0:
        a, n = inv(a), -n
    if n == 1:
        return a.copy()
    if n in (2, 3):
        sq = product(a, a, model)
        return sq if n == 2 else product(sq, a, model)
    z: Tensor | None = None
    result: Tensor | None = None
    while n > 0:
        z = a if z is None else product(z, z, model)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else product(result, z, model)
    return cast(Tensor, result)


def multi_dot(arrays: Any, *, model: ModelLike | None = None) -> Tensor:
    """The product of two or more Tensors, left to right.

    ``multi_dot([a, b, c])`` is ``(a @ b) @ c``. Each ``@`` is one `lowprec.matmul`
    under ``model``, by default the context's. The result is in its output format,
    FP32 by default, as for ``@``. Unlike `numpy.linalg.multi_dot`, no cheaper
    order is chosen: the order is part of the result. The first may be 1-D (a row),
    the last 1-D (a column), the others 2-D.

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> a = lp.tensor([[1.0, 2.0**-11]], "fp16")
    >>> la.multi_dot([a, lp.tensor([[1.0], [1.0]], "fp16"), lp.tensor([[2.0]], "fp16")])
    Tensor([[2.0009765625]], fmt=FP32)
    """
    arrays = [as_tensor(x, f"arrays[{i}]") for i, x in enumerate(arrays)]
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
