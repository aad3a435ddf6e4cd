"""`refine`'s verdict and GMRES-IR against oracles it did not produce: residuals in
exact rational arithmetic (`Fraction`), solutions refined with exact residuals, and
the claims of Carson and Higham (SISC 40(2), 2018) for FP16 factors, FP32 working
and FP64 residuals."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp
import lowprec.linalg as la
from lowprec.linalg.factor import lu_factor
from lowprec.linalg.refinement import lu_solve_fp64
from lowprec.linalg.solvers import lu_solve

U32 = 2.0 ** -24                         # FP32's unit roundoff


def _exact_residual(a, x, b):
    """``b - a x`` exactly, as Fractions (float64 values are exact rationals)."""
    fx = [Fraction(v) for v in x]
    return [Fraction(bi) - sum(Fraction(aij) * xj for aij, xj in zip(row, fx))
            for bi, row in zip(b, a)]


def _exact_backward_error(a, x, b):
    """``||b - a x||_inf / (||a||_inf ||x||_inf + ||b||_inf)`` with the residual
    exact and the rest of float64 values, rounded once at the end."""
    r = max(abs(v) for v in _exact_residual(a, x, b))
    na = max(sum(abs(Fraction(v)) for v in row) for row in a)
    den = na * max(abs(Fraction(v)) for v in x) + max(abs(Fraction(v)) for v in b)
    return float(r / den)


def _solution(a, b, steps=2):
    """The solution of ``a x = b`` (float64 data) to float64 accuracy: a float64 solve,
    then ``steps`` corrections from exact residuals rounded once (kappa 2**-53 < 1)."""
    x = np.linalg.solve(a, b)
    for _ in range(steps):
        x = x + np.linalg.solve(a, np.array([float(v) for v in _exact_residual(a, x, b)]))
    return x


def _problem(n, kappa, mode, seed, working=np.float32):
    """randsvd data rounded into ``working`` (the problem's data) and the exact solution
    of that rounded system, so the forward error measures the refinement alone."""
    gen = np.random.default_rng(seed)
    a = la.randsvd(n, kappa, mode=mode, rng=gen).astype(working).astype(np.float64)
    b = (a @ gen.standard_normal(n)).astype(working).astype(np.float64)
    return a, b, _solution(a, b)


def test_converged_at_kappa_1e2_with_fp16_factors():
    # kappa u_f = 1e2 * 2**-11 ~ 0.05 < 1: the error contracts each step, and with
    # u_r = u**2 the limiting accuracy is ~u (Carson and Higham 2018, section 3).
    a, b, x = _problem(100, 1e2, 3, 0)
    res = la.refine(a, b, factor="fp16", working="fp32", residual="fp64", x_true=x)
    hist = res.history
    assert res.status == "converged" and res.iterations == len(hist) - 1 <= 6
    assert "<= u" in res.reason or "equals" in res.reason
    fe = [h["forward_error"] for h in hist]
    assert fe[0] > 1e-3 and fe[-1] <= 4 * U32
    assert all(later < 0.1 * earlier for earlier, later in zip(fe[:3], fe[1:4]))
    assert all(h["correction_ratio"] <= la.refinement.STALL_RATIO for h in hist[2:])
    # the backward error of the final x from its exact residual is at most u, and the
    # history's (from the FP64 residual) agrees with it to within a few percent.
    exact = _exact_backward_error(a, res.x.values, b)
    assert exact <= U32
    assert hist[-1]["backward_error"] == pytest.approx(exact, rel=0.05)
    assert res.x.fmt == lp.FP32


def test_stalled_at_kappa_1e6_with_fp16_lu_ir():
    # One singular value 1e-6 (randsvd mode 2): kappa u_f ~ 500 > 1, and rounding into
    # FP16 moves that singular value, so the correction's component along it is
    # wrong by a factor near 1: the corrections keep their size and the error stays.
    a, b, x = _problem(100, 1e6, 2, 1)
    res = la.refine(a, b, factor="fp16", working="fp32", residual="fp64", x_true=x)
    hist = res.history
    assert res.status == "stalled", res.reason
    assert la.refinement.STALL_RATIO < hist[-1]["correction_ratio"] <= 1
    fe = [h["forward_error"] for h in hist]
    assert min(fe) > 0.5 and max(fe) < 2 * min(fe)       # no progress, no blow-up
    # the stall is real: the exact residual of the last iterate is not at u.
    exact = _exact_backward_error(a, res.x.values, b)
    assert exact > 4 * U32
    assert hist[-1]["backward_error"] == pytest.approx(exact, rel=0.05)


def test_diverged_with_an_e4m3_factorization_at_kappa_1e5():
    # u_f = 2**-4: kappa u_f ~ 6e3 >> 1, each correction amplifies the error.
    gen = np.random.default_rng(0)
    a = la.randsvd(100, 1e5, rng=gen)
    x = gen.standard_normal(100)
    b = a @ x
    res = la.refine(a, b, factor="e4m3", x_true=x)
    hist = res.history
    assert res.status == "diverged", res.reason
    assert hist[-1]["correction_ratio"] > 1 and hist[-2]["correction_ratio"] > 1
    fe = [h["forward_error"] for h in hist]
    assert fe[-1] > 10 * fe[0] > 10
    assert all(later > earlier for earlier, later in zip(fe[1:], fe[2:]))


def test_max_iterations_and_not_finite():
    a, b, x = _problem(20, 1e2, 3, 2)
    res = la.refine(a, b, working="fp32", x_true=x, max_iter=1)
    assert res.status == "max_iterations" and res.iterations == 1
    res = la.refine(a, b, working="fp32", max_iter=0)
    assert res.status == "max_iterations" and res.iterations == 0
    res = la.refine(np.eye(2), [math.inf, 1.0])
    assert res.status == "diverged" and "not finite" in res.reason


def test_tol_stops_on_the_backward_error():
    a, b, _ = _problem(20, 1e2, 3, 3)
    res = la.refine(a, b, working="fp32", tol=1e-4)
    assert res.status == "converged" and "backward error" in res.reason
    assert res.history[-1]["backward_error"] <= 1e-4
    assert all(h["backward_error"] > 1e-4 for h in res.history[:-1])


def test_the_result_unpacks_as_before():
    a = np.array([[4.0, 1.0], [1.0, 3.0]])
    res = la.refine(a, [1.0, 2.0])
    x, history = res
    assert x is res.x and history is res.history and len(res) == 2
    assert res[0] is x and "converged" in repr(res)
    assert [h["iteration"] for h in history] == list(range(res.iterations + 1))


@pytest.mark.slow
@pytest.mark.parametrize("kappa", [1e5, 1e7])
def test_gmres_ir_converges_where_lu_ir_does_not(kappa):
    # Carson and Higham 2018, section 4: GMRES-IR with FP16 LU factors, u = single,
    # u_r = double reaches a forward error of order u for kappa_inf up to ~1e8.
    a, b, x = _problem(100, kappa, 3, 1)
    kw = dict(factor="fp16", working="fp32", residual="fp64", x_true=x)
    lu = la.refine(a, b, **kw)
    assert lu.status in ("stalled", "diverged")
    assert min(h["forward_error"] for h in lu.history) > 1e-2
    gm = la.refine(a, b, solver="gmres", **kw)
    assert gm.status == "converged", gm.reason
    assert gm.history[-1]["forward_error"] <= 4 * U32
    assert gm.iterations <= 5
    assert all(1 <= h["gmres_iterations"] <= 100 for h in gm.history[1:])
    assert _exact_backward_error(a, gm.x.values, b) <= U32


def test_gmres_ir_variant_in_the_residual_precision():
    # GMRES in u_r (FP64): the solve of the correction equation is more accurate.
    a, b, x = _problem(30, 1e4, 3, 4)
    res = la.refine(a, b, factor="fp16", working="fp32", residual="fp64",
                    solver="gmres", krylov="fp64", x_true=x)
    assert res.status == "converged" and res.history[-1]["forward_error"] <= 4 * U32


def test_gmres_ir_with_several_right_hand_sides():
    a, b, _ = _problem(12, 1e3, 3, 5)
    bb = np.stack([b, 2 * b], axis=1)
    res = la.refine(a, bb, working="fp32", solver="gmres",
                    x_true=np.stack([_solution(a, b), _solution(a, 2 * b)], axis=1))
    assert res.status == "converged" and res.x.shape == (12, 2)
    assert res.history[-1]["forward_error"] <= 4 * U32


def test_options_are_checked():
    with pytest.raises(ValueError, match="solver must be 'lu'"):
        la.refine(np.eye(2), [1.0, 1.0], solver="cg")
    with pytest.raises(ValueError, match="gmres_max_iter"):
        la.refine(np.eye(2), [1.0, 1.0], solver="gmres", gmres_max_iter=-1)
    with pytest.raises(ValueError, match="max_iter"):
        la.refine(np.eye(2), [1.0, 1.0], max_iter=1.5)
    with pytest.raises(ValueError):
        la.refine(np.eye(2), [1.0, 1.0], solver="gmres", krylov="no-such-format")


def test_inputs_are_not_modified():
    a, b, _ = _problem(10, 1e2, 3, 6)
    a0, b0 = a.copy(), b.copy()
    la.refine(a, b, working="fp32", solver="gmres")
    assert np.array_equal(a, a0) and np.array_equal(b, b0)


def _adversarial(gen, n, spread, scale):
    """Entries spread over ``2**+-spread``, ``b`` near ``2**scale``: subnormal results
    (scale -1060), overflow (scale 1020), signed zeros."""
    a = gen.standard_normal((n, n)) * np.exp2(gen.integers(-spread, spread, (n, n)))
    b = gen.standard_normal(n) * np.exp2(scale + gen.integers(-20, 3, n))
    b[:2] = [-0.0, 5e-324]
    return a, b


@pytest.mark.parametrize("seed", range(4))
def test_the_fp64_preconditioner_fast_path_is_the_tensor_solve(seed):
    # Same order of operations, each NumPy float64 operation correctly rounded (RNE):
    # bit for bit the Tensor `lu_solve`, subnormals, overflow and NaN included.
    gen = np.random.default_rng(seed)
    a, b = (_adversarial(gen, 24, *((6, -1060) if seed < 2 else (30, 1020))) if seed % 2 else
            (gen.standard_normal((24, 24)), gen.standard_normal(24)))
    w, perm = lu_factor(lp.tensor(a, "fp16" if seed < 2 else "fp64"), None, None)
    w = w.astype("fp64")
    want = lu_solve(w, perm, lp.tensor(b, "fp64")).values
    got = lu_solve_fp64(w.values, perm, b)
    real = ~np.isnan(want)
    assert np.array_equal(np.signbit(got[real]), np.signbit(want[real]))
    assert np.array_equal(got, want, equal_nan=True)
    if seed == 1:                    # the cases are what they claim to be
        assert np.all((want != 0) & (np.abs(want) < 2.0 ** -1022))
    if seed == 3:
        assert np.any(np.isinf(want)) and np.any(np.isfinite(want))


def test_the_fast_path_is_taken_only_where_it_is_exact():
    from lowprec.linalg.refinement import native_fp64
    assert native_fp64(lp.FP64) and not native_fp64(lp.FP32)
    with lp.context(mode="rz"):
        assert not native_fp64(lp.FP64)
    with lp.context(saturate=True):
        assert not native_fp64(lp.FP64)
    # under rz the GMRES-IR result is the Tensor path's, which differs from RNE's.
    a, b, _ = _problem(8, 1e3, 3, 7)
    with lp.context(mode="rz"):
        rz = la.refine(a, b, working="fp32", solver="gmres").x.values
    rne = la.refine(a, b, working="fp32", solver="gmres").x.values
    assert np.all(np.isfinite(rz)) and np.max(np.abs(rz - rne)) <= 1e-5 * np.max(np.abs(rne))
