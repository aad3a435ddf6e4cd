"""`gmres`: restart-free GMRES on Tensors, every operation rounded in one format.

The operator is a callable, so the caller decides in which format each product with it
is formed (`refine`'s GMRES-IR applies ``U^-1 L^-1 A`` in its own format). This module
never computes an iterate, a basis vector or a rotation in float64.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import numpy as np

from ..engine.checks import check_int
from ..formats import Format
from ..tensors import Tensor
from .core import apply, as_tensor, exact
from .norms import norm
from .solvers import solve_triangular


def _givens(a: Tensor, b: Tensor) -> tuple[float, float, float]:
    """``(c, s, rho)`` with ``[c s; -s c] [a; b] = [rho; 0]``, each operation rounded
    in the format of the 0-d Tensors ``a``, ``b``.

    ``a`` and ``b`` are divided by ``t = max(|a|, |b|)`` before squaring, so that no
    square overflows or underflows (``|a / t|, |b / t| <= 1``).
    """
    t = abs(a if abs(float(a.values)) >= abs(float(b.values)) else b)
    if float(t.values) == 0:
        return 1.0, 0.0, 0.0
    p, q = a / t, b / t
    rho = t * cast(Tensor, np.sqrt(p * p + q * q))
    return float((a / rho).values), float((b / rho).values), float(rho.values)


def _rotate(h: list[float], rot: list[tuple[Tensor, Tensor]], fmt: Format) -> None:
    """Apply the rotations ``rot`` to the column ``h`` in place, in order: ``h[i],
    h[i+1] = c h[i] + s h[i+1], c h[i+1] - s h[i]``, products and sums rounded (one
    2-vector operation per step; negation is exact)."""
    for i, (cc, ss) in enumerate(rot):
        p = exact(np.array([h[i], h[i + 1]]), fmt)
        q = exact(np.array([h[i + 1], h[i]]), fmt)
        h[i], h[i + 1] = (float(v) for v in (cc * p + ss * q).values)


def gmres(op: Callable[[Tensor], Tensor], s: Tensor, *, tol: float,
          max_iter: int) -> tuple[Tensor, list[float]]:
    """Solve ``op(d) = s`` by GMRES from ``d = 0``, in ``s``'s format.

    Arnoldi with classical Gram-Schmidt applied twice (CGS2). Twice keeps the basis
    orthogonal to the format's precision (Giraud, Langou, Rozloznik, Comput. Math.
    Appl. 50, 2005), as Householder Arnoldi does. Each projection ``V^T w`` and
    ``V h`` is `apply`: products rounded, each row summed pairwise. The two
    coefficient vectors are added rounded. Norms are `norm` (FP32 inside for
    narrower formats). Givens rotations update the least-squares residual ``|g[k]|``.
    The iteration stops when ``|g[k]| <= tol * ||s||``, at a zero subdiagonal
    entry (the exact solution is in the space), or after ``max_iter`` steps.
    ``d = V y`` with ``R y = g`` solved by `solve_triangular`.

    Returns ``d`` and the residual estimates ``|g[k]| / ||s||``, one per step.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> from lowprec.linalg.core import apply
    >>> from lowprec.linalg.krylov import gmres
    >>> a = lp.tensor([[2.0, 1.0], [0.0, 3.0]], "fp32")
    >>> d, res = gmres(lambda v: apply(a, v), lp.tensor([3.0, 6.0], "fp32"),
    ...                tol=1e-6, max_iter=2)
    >>> d.fmt, d.values.round(6), len(res)
    (lp.FP32, array([0.5, 2. ]), 2)
    """
    s = as_tensor(s, "s")
    if s.ndim != 1:
        raise ValueError(f"s must be a vector (one right-hand side), got shape {s.shape}: "
                         "solve each column on its own")
    max_iter = check_int("max_iter", max_iter, minimum=0)
    if not float(tol) >= 0:
        raise ValueError(f"tol must be a non-negative number, got {tol!r}")
    fmt = s.fmt
    n = s.shape[0]
    beta = norm(s)
    if float(beta.values) == 0 or max_iter == 0:
        return exact(np.zeros(n), fmt), []
    basis = [s / beta]
    cols: list[list[float]] = []         # the rotated columns of the Hessenberg matrix
    rot: list[tuple[Tensor, Tensor]] = []
    g = [float(beta.values)]
    residuals: list[float] = []
    for _ in range(min(max_iter, n)):
        w = op(basis[-1]).astype(fmt)
        v = exact(np.stack([b.values for b in basis], axis=1), fmt)
        vt = exact(v.values.T, fmt)
        h1 = apply(vt, w)                # classical Gram-Schmidt, twice (CGS2)
        w = w - apply(v, h1)
        h2 = apply(vt, w)
        w = w - apply(v, h2)
        h = [float(x) for x in (h1 + h2).values]
        sub = norm(w)
        _rotate(h, rot, fmt)
        c, sn, h[-1] = _givens(exact(np.float64(h[-1]), fmt), sub)
        rot.append((exact(np.array([c, c]), fmt), exact(np.array([sn, -sn]), fmt)))
        gk = exact(np.array([c, -sn]), fmt) * exact(np.float64(g[-1]), fmt)
        g[-1], nxt = (float(x) for x in gk.values)
        g.append(nxt)
        cols.append(h)
        residuals.append(abs(nxt) / float(beta.values))
        if float(sub.values) == 0 or residuals[-1] <= tol:
            break
        basis.append(w / sub)
    k = len(cols)
    r = np.zeros((k, k))
    for j, col in enumerate(cols):
        r[:j + 1, j] = col
    y = solve_triangular(exact(r, fmt), exact(np.array(g[:k]), fmt), lower=False)
    v = exact(np.stack([b.values for b in basis[:k]], axis=1), fmt)
    return apply(v, y), residuals
