"""`refine`: mixed-precision iterative refinement of a linear solve, and its `Step`."""

from __future__ import annotations

import math
from typing import Any, TypedDict

import numpy as np
from numpy.typing import ArrayLike

from ..formats import FormatLike
from ..formats import format as _format
from ..tensorcore import ModelLike
from ..tensors import Tensor, tensor
from .core import apply, rhs, square
from .factor import lu_factor
from .solvers import lu_solve

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
           model: ModelLike | None = None, block: int | None = None, max_iter: int = 10,
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
    square(aw)
    rhs(aw, bw)
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 0:
        raise ValueError(f"max_iter must be a non-negative int, got {max_iter!r}")
    tol = fw.eps / 2 if tol is None else float(tol)
    truth = None if x_true is None else np.asarray(
        x_true.values if isinstance(x_true, Tensor) else x_true, dtype=np.float64)
    if truth is not None and truth.shape != bw.shape:
        raise ValueError(f"x_true must have the shape of b, {bw.shape}, got {truth.shape}")
    w, perm = lu_factor(aw.astype(ff), block, model)
    x = lu_solve(w, perm, bw.astype(ff)).astype(fw)
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
        return br - apply(ar, x.astype(fr))

    r = resid()
    step = measure(r, 0, None)
    for i in range(1, max_iter + 1):
        big = _inf_norm(r.values)
        if not (math.isfinite(big) and np.all(np.isfinite(x.values))):
            break
        if step["backward_error"] <= tol or big == 0:
            break
        scale = 2.0 ** -math.frexp(big)[1]    # a power of two: r * scale is exact
        d = lu_solve(w, perm, (r * scale).astype(ff)).astype(fw) * (1 / scale)
        old = x
        x = x + d
        r = resid()
        step = measure(r, i, _inf_norm(d.values) / max(_inf_norm(x.values), np.finfo(float).tiny))
        if np.array_equal(old.values, x.values):
            break
    return x, history
