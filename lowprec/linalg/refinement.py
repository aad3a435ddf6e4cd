"""`refine`: mixed-precision iterative refinement of a linear solve, with a verdict.

The correction equation is solved with the low-precision LU factors (LU-IR) or by GMRES
preconditioned with them (GMRES-IR). Every operation is a rounded Tensor operation in
the format the caller names. Only the history's error measurements read values in
float64, and they are never fed back into the iteration.
"""

from __future__ import annotations

import math
from typing import Any, Literal, TypedDict, get_args

import numpy as np
from numpy.typing import ArrayLike

from ..formats import FP64, Format, FormatLike
from ..formats import format as _format
from ..tensorcore import ModelLike
from ..tensors import Tensor, get_context, tensor
from .core import apply, exact, rhs, square
from .factor import lu_factor
from .krylov import gmres
from .solvers import lu_solve

Status = Literal["converged", "stalled", "diverged", "max_iterations"]
Solver = Literal["lu", "gmres"]

#: A correction must be at most this fraction of the one before (Demmel et al.,
#: ACM TOMS 32(2), 2006, their rho_thresh), else the iteration has stalled.
STALL_RATIO = 0.5
#: Corrections that grew twice running, by this factor over the two steps, diverge.
DIVERGE_GROWTH = 2.0


class Step(TypedDict, total=False):
    """One row of `refine`'s history."""
    iteration: int
    backward_error: float
    residual_norm: float
    forward_error: float
    correction: float
    correction_ratio: float
    gmres_iterations: int


class Refinement(tuple[Tensor, list[Step]]):
    """`refine`'s result: ``x`` and ``history``, and the verdict.

    It unpacks as ``x, history = refine(...)``, the pair `refine` returned before.
    ``status`` is one of ``"converged"``, ``"stalled"``, ``"diverged"`` and
    ``"max_iterations"``. ``iterations`` counts the corrections applied.
    ``reason`` says which stopping rule fired, with the numbers.
    """

    status: Status
    iterations: int
    reason: str

    def __new__(cls, x: Tensor, history: list[Step], status: Status,
                reason: str) -> Refinement:
        self = super().__new__(cls, (x, history))
        self.status, self.reason = status, reason
        self.iterations = history[-1]["iteration"] if history else 0
        return self

    @property
    def x(self) -> Tensor:
        """The last iterate, in the working format."""
        return self[0]

    @property
    def history(self) -> list[Step]:
        """One `Step` per iterate, ``x_0`` (the first solve) included."""
        return self[1]

    def __repr__(self) -> str:
        return (f"Refinement(status={self.status!r}, iterations={self.iterations}, "
                f"reason={self.reason!r})")


def _inf_norm(v: np.ndarray[Any, Any]) -> float:
    return float(np.max(np.abs(v))) if v.size else 0.0


def _relative(err: float, size: float) -> float:
    """``err / size`` as IEEE 754 divides (inf for a nonzero ``err`` over 0, NaN for
    NaN), except ``0 / 0``: no error relative to a zero truth is 0."""
    if size == 0:
        return 0.0 if err == 0 else math.inf if err > 0 else math.nan
    return err / size


def _verdict(history: list[Step], tol: float | None, u: float, floor: float | None,
             finite: bool, unchanged: bool = False) -> tuple[Status, str] | None:
    """The stopping rule that fires at the last step of ``history``, or None (the
    rules are `refine`'s, in its order)."""
    step = history[-1]
    i = step["iteration"]
    if not finite:
        return "diverged", f"x_{i} or its residual is not finite"
    be = step["backward_error"]
    if tol is not None and be <= tol:
        return "converged", f"backward error {be:.3g} <= tol = {tol:.3g} at x_{i}"
    if i == 0:
        return None
    if unchanged:
        return "converged", f"x_{i} equals x_{i - 1}: d_{i} is below half an ulp of x"
    d = step["correction"]
    if d <= u:
        return "converged", f"||d_{i}||/||x_{i}|| = {d:.3g} <= u = {u:.3g}"
    ratio = step.get("correction_ratio", 0.0)
    before = history[-2].get("correction_ratio", 0.0)
    if ratio > 1 and before > 1 and ratio * before >= DIVERGE_GROWTH:
        return "diverged", (f"the correction grew twice running, ||d_{i}||/||d_{i - 1}|| = "
                            f"{ratio:.3g} after {before:.3g}")
    if ratio > 1 and before <= 1:
        return None                      # a first growth: the next step decides
    if ratio > STALL_RATIO and floor is not None and be <= floor:
        return "converged", (f"||d_{i}||/||d_{i - 1}|| = {ratio:.3g} at backward error "
                             f"{be:.3g} <= 3 n u = {floor:.3g}: x is backward stable")
    if ratio > STALL_RATIO:
        return "stalled", (f"||d_{i}||/||d_{i - 1}|| = {ratio:.3g} > {STALL_RATIO}: "
                           f"the correction shrinks too slowly")
    return None


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    return value


def refine(a: Tensor | ArrayLike, b: Tensor | ArrayLike, *, factor: FormatLike = "fp16",
           working: FormatLike = "fp64", residual: FormatLike = "fp64",
           model: ModelLike | None = None, block: int | None = None, max_iter: int = 10,
           tol: float | None = None, x_true: ArrayLike | Tensor | None = None,
           solver: Solver = "lu", krylov: FormatLike | None = None,
           precond: FormatLike | None = None, gmres_tol: float = 1e-4,
           gmres_max_iter: int | None = None) -> Refinement:
    """Mixed-precision iterative refinement of ``a @ x = b``, with a verdict.

    Carson and Higham, SIAM J. Sci. Comput. 40(2), 2018, Algorithm 1.1: ``factor`` is
    their u_f, ``working`` u, ``residual`` u_r.

    - ``a`` and ``b`` are rounded into ``working``. They are the data of the problem.
    - ``a`` rounded into ``factor`` is factored once by `lu` (``block``, ``model``).
    - ``x_0`` solves with those factors (``b`` rounded into ``factor``), then is
      converted to ``working``.
    - Each iteration forms ``r = b - a x`` in ``residual``: products rounded, sums
      pairwise, the difference rounded.
    - ``r`` is scaled by a power of two near ``1 / max|r|`` (exact). So rounding it
      into a narrow format neither underflows nor overflows.
    - ``solver="lu"`` (LU-IR): the scaled ``r`` is rounded into ``factor`` and solved
      with the factors there.
    - ``solver="gmres"`` (GMRES-IR, Carson and Higham, SISC 39(6), 2017): `gmres`
      solves ``U^-1 L^-1 a d = U^-1 L^-1 r`` in ``krylov`` (default ``working``; pass
      ``residual`` for the variant that runs GMRES in u_r). Each product with
      ``U^-1 L^-1 a`` is formed in ``precond`` (default ``residual``), then rounded
      into ``krylov``. GMRES stops at a relative residual ``gmres_tol`` or after
      ``gmres_max_iter`` steps (default n). An FP64 ``precond`` under the default
      rounding (`native_fp64`) runs on NumPy's float64 operations, in the same order
      and with the same bits.
    - The correction ``d`` is rounded into ``working`` and scaled back (exact), and
      ``x = x + d`` is rounded in ``working``.

    The result unpacks as ``x, history``. It also carries ``status``,
    ``iterations`` and ``reason``. The stopping rules, checked after each iterate:

    - ``x`` or ``r`` not finite: ``"diverged"``.
    - normwise backward error at most ``tol``, where ``tol`` is given:
      ``"converged"``.
    - ``x_i`` equal to ``x_{i-1}``, or ``||d_i|| / ||x_i|| <= u`` (``working``'s
      unit roundoff): ``"converged"``. The update no longer changes ``x`` beyond its
      last bits. Once the iteration contracts, this ratio estimates the forward
      error (Carson and Higham 2018, section 2).
    - ``||d_i|| / ||d_{i-1}|| > 1`` twice running, growing by at least 2 over the
      two steps: ``"diverged"``. A first growth waits for the next step.
    - ``||d_i|| / ||d_{i-1}|| > 0.5``: ``"stalled"``. The iteration contracts too
      slowly to reach u (Demmel et al., ACM TOMS 32(2), 2006, rho_thresh). Where
      ``residual`` is no more precise than ``working``, a backward error of at most
      ``3 n u`` there is ``"converged"`` instead. Such refinement aims at backward
      stability, and its forward error is limited to about ``kappa u`` (Higham,
      Accuracy and Stability of Numerical Algorithms, 2nd ed., section 12.2).
    - ``max_iter`` corrections without a verdict: ``"max_iterations"``.

    History: one `Step` per iterate ``x_i`` (``i = 0`` the first solve):

    - ``residual_norm`` ``||r||_inf`` of the computed residual.
    - ``backward_error`` ``||r||_inf / (||a||_inf ||x||_inf + ||b||_inf)``.
    - ``forward_error`` ``||x - x_true||_inf / ||x_true||_inf`` where ``x_true`` is
      given. It must have ``b``'s shape, else `ValueError`. A zero ``x_true`` gives
      0 where ``x`` equals it, inf where it does not, NaN where ``x`` holds a NaN.
    - ``correction`` ``||d||_inf / ||x||_inf`` of the update that led to it.
    - ``correction_ratio`` ``||d_i||_inf / ||d_{i-1}||_inf``, from ``i = 2``.
    - ``gmres_iterations`` with GMRES-IR: the GMRES steps of that update.

    These are measured in float64 on the exact values and never fed back.

    Examples
    --------
    >>> import numpy as np, lowprec.linalg as la
    >>> a = np.array([[4.0, 1.0], [1.0, 3.0]])
    >>> result = la.refine(a, [1.0, 2.0], x_true=np.linalg.solve(a, [1.0, 2.0]))
    >>> result.status, result.iterations
    ('converged', 5)
    >>> x, history = result
    >>> history[0]["forward_error"] > 1e-5, history[-1]["forward_error"] < 1e-15
    (True, True)
    """
    fw, ff, fr = _format(working), _format(factor), _format(residual)
    if solver not in get_args(Solver):
        raise ValueError(f"solver must be 'lu' (LU-IR) or 'gmres' (GMRES-IR), got {solver!r}")
    fk = fw if krylov is None else _format(krylov)
    fp = fr if precond is None else _format(precond)
    aw = a.astype(fw) if isinstance(a, Tensor) else tensor(a, fw)
    bw = b.astype(fw) if isinstance(b, Tensor) else tensor(b, fw)
    square(aw)
    rhs(aw, bw)
    max_iter = _positive_int(max_iter, "max_iter")
    if gmres_max_iter is not None:
        _positive_int(gmres_max_iter, "gmres_max_iter")
    tol = None if tol is None else float(tol)
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
    sizes: list[float] = []              # ||d_i||_inf, for the ratios
    correct = (_lu_correction(w, perm, ff) if solver == "lu" else
               _gmres_correction(aw, w, perm, fk, fp, gmres_tol,
                                 aw.shape[0] if gmres_max_iter is None else gmres_max_iter))

    def measure(r: Tensor, i: int, d: Tensor | None, inner: int | None) -> None:
        xv = x.values
        big = _inf_norm(r.values)
        den = norm_a * _inf_norm(xv) + norm_b
        step: Step = {"iteration": i, "residual_norm": big,
                      "backward_error": big / den if den else 0.0 if big == 0 else math.inf}
        if truth is not None:
            step["forward_error"] = _relative(_inf_norm(xv - truth), _inf_norm(truth))
        if d is not None:
            size = _inf_norm(d.values)
            step["correction"] = size / max(_inf_norm(xv), np.finfo(float).tiny)
            if sizes:
                step["correction_ratio"] = _relative(size, sizes[-1])
            sizes.append(size)
        if inner is not None:
            step["gmres_iterations"] = inner
        history.append(step)

    def resid() -> Tensor:
        return br - apply(ar, x.astype(fr))

    def finite(r: Tensor) -> bool:
        return bool(np.all(np.isfinite(r.values)) and np.all(np.isfinite(x.values)))

    r = resid()
    measure(r, 0, None, None)
    # Residuals no more precise than x: backward stability is the goal (Higham 2002,
    # section 12.2), and 3 n u bounds what a stable solver leaves (Theorem 9.4).
    floor = 3 * aw.shape[0] * fw.eps / 2 if fr.eps >= fw.eps else None
    verdict = _verdict(history, tol, fw.eps / 2, floor, finite(r))
    for i in range(1, max_iter + 1):
        if verdict is not None:
            break
        big = _inf_norm(r.values)
        scale = 2.0 ** -math.frexp(big)[1]    # a power of two: r * scale is exact
        d, inner = correct(r * scale)
        d = d.astype(fw) * (1 / scale)
        old, x = x, x + d
        r = resid()
        measure(r, i, d, inner)
        verdict = _verdict(history, tol, fw.eps / 2, floor, finite(r),
                           np.array_equal(old.values, x.values))
    if verdict is not None:
        return Refinement(x, history, *verdict)
    return Refinement(x, history, "max_iterations",
                      f"no rule fired within max_iter = {max_iter} corrections")


def native_fp64(fmt: Format) -> bool:
    """Whether an operation on ``fmt`` under the context is NumPy's float64 one:
    FP64, round to nearest even, subnormals kept, no saturation."""
    ctx = get_context()
    return (fmt == FP64 and ctx.mode == "rne" and ctx.subnormals in (None, True)
            and not ctx.saturate)


def lu_solve_fp64(w: np.ndarray[Any, Any], perm: np.ndarray[Any, Any],
                  b: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """`lu_solve` on float64 values, in its order of operations: the fast path where
    `native_fp64` holds (each NumPy operation is then the Tensor one, correctly
    rounded in binary64). ``w``'s diagonal must have no zero."""
    x = b[perm].astype(np.float64)
    n = w.shape[0]
    with np.errstate(all="ignore"):      # IEEE 754 results, as the Tensor operations
        for j in range(n - 1):           # L y = b[perm], unit diagonal, column by column
            x[j + 1:] = x[j + 1:] - w[j + 1:, j] * x[j]
        for j in range(n - 1, -1, -1):   # U x = y, backward
            x[j] = x[j] / w[j, j]
            x[:j] = x[:j] - w[:j, j] * x[j]
    return x


def _lu_correction(w: Tensor, perm: np.ndarray[Any, Any], ff: Format) -> Any:
    """LU-IR: the scaled residual rounded into ``ff``, solved with the factors there."""
    def correct(r: Tensor) -> tuple[Tensor, int | None]:
        return lu_solve(w, perm, r.astype(ff)), None
    return correct


def _gmres_correction(aw: Tensor, w: Tensor, perm: np.ndarray[Any, Any], fk: Format,
                      fp: Format, tol: float, max_iter: int) -> Any:
    """GMRES-IR: ``U^-1 L^-1 a d = U^-1 L^-1 r`` by `gmres` in ``fk``, each product
    with ``U^-1 L^-1 a`` formed in ``fp`` (the factors converted to it: exact where
    ``fp`` holds ``factor``, else rounded once)."""
    wp, ap = w.astype(fp), aw.astype(fp)

    def precondition(v: Tensor) -> Tensor:
        v = v.astype(fp)
        if native_fp64(fp) and not np.any(np.diag(wp.values) == 0):
            return exact(lu_solve_fp64(wp.values, perm, v.values), fp).astype(fk)
        return lu_solve(wp, perm, v).astype(fk)

    def correct(r: Tensor) -> tuple[Tensor, int | None]:
        cols = [r] if r.ndim == 1 else [r[:, j] for j in range(r.shape[1])]
        parts, steps = [], 0
        for c in cols:
            d, res = gmres(lambda v: precondition(apply(ap, v.astype(fp))),
                           precondition(c), tol=tol, max_iter=max_iter)
            parts.append(d.values)
            steps += len(res)
        values = parts[0] if r.ndim == 1 else np.stack(parts, axis=1)
        return exact(values, fk), steps
    return correct
