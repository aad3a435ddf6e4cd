"""lowprec.linalg against oracles it did not produce: step-by-step `Fraction`
references rounded by `lowprec.testing.reference_round` after each operation, the
classical backward-error bound of LU (Higham, Theorem 9.3), and the theory of
mixed-precision iterative refinement (Carson and Higham 2018)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp
import lowprec.linalg as la
from helpers import assert_values
from lowprec.testing import reference_round

F = Fraction


def _random(n, fmt, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    return lp.tensor(rng.standard_normal((n, n)) * scale, fmt)


def _ref_lu(a, fmt, block=None):
    """LU with partial pivoting on lists, every operation exact then rounded once
    (``reference_round``); with ``block``, the trailing update ``a22 - l21 u12`` is the
    exact sum rounded once (the ``"exact"`` model)."""
    def rnd(q):
        return reference_round(q, fmt)
    n = len(a)
    w = [[float(v) for v in row] for row in a]
    perm = list(range(n))

    def step(i, stop):
        r = max(range(i, n), key=lambda k: (abs(w[k][i]), -k))   # first largest
        if w[r][i] == 0:
            raise np.linalg.LinAlgError("zero pivot")
        w[i], w[r] = w[r], w[i]
        perm[i], perm[r] = perm[r], perm[i]
        for j in range(i + 1, n):
            w[j][i] = rnd(F(w[j][i]) / F(w[i][i]))
            for k in range(i + 1, stop):
                w[j][k] = rnd(F(w[j][k]) - F(rnd(F(w[j][i]) * F(w[i][k]))))

    if block is None:
        for i in range(n):
            step(i, n)
        return w, perm
    for k0 in range(0, n, block):
        e = min(k0 + block, n)
        for i in range(k0, e):
            step(i, e)
        for i in range(k0, e - 1):
            for j in range(i + 1, e):
                for k in range(e, n):
                    w[j][k] = rnd(F(w[j][k]) - F(rnd(F(w[j][i]) * F(w[i][k]))))
        for j in range(e, n):
            for k in range(e, n):
                exact = F(w[j][k]) - sum(F(w[j][t]) * F(w[t][k]) for t in range(k0, e))
                w[j][k] = rnd(exact)
    return w, perm


def _packed(p, lo, u):
    """The packed factors and permutation of lu's output (p[perm[i], i] = 1)."""
    perm = np.argmax(p.values, axis=0)
    return np.tril(lo.values, -1) + np.triu(u.values), perm


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "fp16"])
@pytest.mark.parametrize("n", [3, 5, 6])
@pytest.mark.parametrize("seed", range(3))
def test_lu_equals_the_fraction_reference(fmt, n, seed):
    a = _random(n, fmt, seed)
    try:
        w, perm = _ref_lu(a.values.tolist(), fmt)
    except np.linalg.LinAlgError:      # rounding made it singular: so must lu
        with pytest.raises(np.linalg.LinAlgError):
            la.lu(a)
        return
    p, lo, u = la.lu(a)
    got, got_perm = _packed(p, lo, u)
    assert got_perm.tolist() == perm
    assert np.array_equal(got, np.array(w))      # values: the reference has no -0
    assert np.array_equal(np.diag(lo.values), np.ones(n))
    assert lo.fmt == u.fmt == p.fmt == a.fmt


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "fp16"])
@pytest.mark.parametrize("n,block", [(5, 2), (6, 3), (7, 3), (4, 1), (4, 4)])
def test_blocked_lu_with_the_exact_model_equals_the_reference(fmt, n, block):
    a = _random(n, fmt, 10 + n + block)
    w, perm = _ref_lu(a.values.tolist(), fmt, block=block)
    p, lo, u = la.lu(a, block=block, model="exact")
    got, got_perm = _packed(p, lo, u)
    assert got_perm.tolist() == perm
    assert np.array_equal(got, np.array(w))


def test_blocked_lu_runs_through_a_tensor_core_model():
    a = _random(8, "fp16", 3)
    p, lo, u = la.lu(a, block=4, model="h100")
    r = p.values @ lo.values @ u.values
    assert np.max(np.abs(r - a.values)) < 0.05 * np.max(np.abs(a.values))
    with lp.context(matmul="exact"):   # the default model is the context's
        assert np.array_equal(la.lu(a, block=4)[2].values,
                              la.lu(a, block=4, model="exact")[2].values)


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("block", [None, 4])
@pytest.mark.parametrize("seed", range(3))
def test_lu_backward_error_bound(fmt, block, seed):
    # Higham, Theorem 9.3: P L U = A + dA with |dA| <= gamma_n P |L| |U|.
    n = 12
    a = _random(n, fmt, 100 + seed)
    p, lo, u = la.lu(a, block=block, model="exact")
    un = lp.finfo(fmt).eps / 2
    gamma = n * un / (1 - n * un)
    P, L, U = p.values, lo.values, u.values
    # float64 products and sums of these values err by at most ~n 2**-53 |L||U|,
    # far below gamma_n of a format of at most 24 bits.
    err = np.abs(P @ L @ U - a.values)
    bound = gamma * (P @ np.abs(L) @ np.abs(U))
    assert np.all(err <= bound * (1 + 1e-6))
    assert np.all(np.abs(L) <= 1)      # partial pivoting


def _ref_forward(a, b, fmt, unit=False):
    """Row-oriented forward substitution, left to right, each operation rounded."""
    def rnd(q):
        return reference_round(q, fmt)
    x = []
    for i, bi in enumerate(b):
        s = float(bi)
        for j in range(i):
            s = rnd(F(s) - F(rnd(F(a[i][j]) * F(x[j]))))
        x.append(s if unit else rnd(F(s) / F(a[i][i])))
    return x


@pytest.mark.parametrize("fmt", ["e4m3", "bf16", "fp16"])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular_equals_the_row_loop(fmt, unit):
    rng = np.random.default_rng(7)
    n = 6
    a = lp.tensor(np.tril(rng.standard_normal((n, n))) + 3 * np.eye(n), fmt)
    b = lp.tensor(rng.standard_normal(n), fmt)
    want = _ref_forward(a.values.tolist(), b.values.tolist(), fmt, unit)
    got = la.solve_triangular(a, b, lower=True, unit_diagonal=unit)
    assert np.array_equal(got.values, want)
    # Upper: the same loop on the reversed system.
    au = lp.tensor(a.values[::-1, ::-1].T.copy(), fmt)
    got_u = la.solve_triangular(au.T.T, b, lower=False, unit_diagonal=unit)
    rev = _ref_forward(au.values[::-1, ::-1].tolist(), b.values[::-1].tolist(), fmt, unit)
    assert np.array_equal(got_u.values, rev[::-1])
    # Several right-hand sides: column by column.
    bb = lp.tensor(rng.standard_normal((n, 3)), fmt)
    many = la.solve_triangular(a, bb, lower=True, unit_diagonal=unit)
    for k in range(3):
        assert np.array_equal(many.values[:, k],
                              la.solve_triangular(a, bb[:, k], lower=True,
                                                  unit_diagonal=unit).values)


def _ref_sqrt(q, fmt):
    """Correctly rounded sqrt of a Fraction: floor(sqrt(q) 2**k) + 1/2 over 2**k lies
    strictly between two multiples of 2**-k, and no midpoint of the format does (k =
    400 is far finer than any of its grids for these magnitudes); exact squares stay
    exact."""
    import math
    k = 400
    y = q * 4**k
    s = math.isqrt(y.numerator // y.denominator)
    exact = F(s * s) == y
    return reference_round(F(s, 2**k) if exact else F(2 * s + 1, 2**(k + 1)), fmt)


def _ref_cholesky(a, fmt):
    def rnd(q):
        return reference_round(q, fmt)
    n = len(a)
    w = [[float(a[i][j]) if j <= i else 0.0 for j in range(n)] for i in range(n)]
    for j in range(n):
        if not w[j][j] > 0:
            raise np.linalg.LinAlgError("not positive definite")
        w[j][j] = _ref_sqrt(F(w[j][j]), fmt)
        for i in range(j + 1, n):
            w[i][j] = rnd(F(w[i][j]) / F(w[j][j]))
        for i in range(j + 1, n):
            for k in range(j + 1, i + 1):
                w[i][k] = rnd(F(w[i][k]) - F(rnd(F(w[i][j]) * F(w[k][j]))))
    return w


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "bf16", "fp16"])
@pytest.mark.parametrize("seed", range(3))
def test_cholesky_equals_the_fraction_reference(fmt, seed):
    rng = np.random.default_rng(40 + seed)
    m = rng.standard_normal((5, 5))
    a = lp.tensor(m @ m.T + 5 * np.eye(5), fmt)
    try:
        want = _ref_cholesky(a.values.tolist(), fmt)
    except np.linalg.LinAlgError:     # not positive definite in the format: so says lowprec
        with pytest.raises(np.linalg.LinAlgError):
            la.cholesky(a)
        return
    assert np.array_equal(la.cholesky(a).values, np.array(want))


def test_solve_inv_det():
    a = lp.tensor([[0.0, 2.0, 1.0], [1.0, 1.0, 0.0], [3.0, 0.0, 1.0]], "fp32")
    # Small integers: every operation of the elimination is exact in FP32 except the
    # multipliers; the determinant -5 comes out exactly (NumPy's answer, float64).
    assert float(la.det(a)) == pytest.approx(np.linalg.det(a.values), rel=1e-6)
    x = la.solve(a, lp.tensor([1.0, 2.0, 3.0], "fp32"))
    assert np.allclose(x.values, np.linalg.solve(a.values, [1.0, 2.0, 3.0]), rtol=1e-6)
    ai = la.inv(a)
    assert np.allclose(ai.values, np.linalg.inv(a.values), rtol=1e-6, atol=1e-7)
    assert float(la.det(lp.tensor([[1.0, 2.0], [2.0, 4.0]], "fp16"))) == 0.0
    assert float(la.det(lp.tensor([[0.0, 1.0], [1.0, 0.0]], "fp16"))) == -1.0
    b2 = lp.tensor(np.ones((3, 2)), "fp32")
    assert la.solve(a, b2).shape == (3, 2)


def test_cholesky_qr_lstsq_norm_against_numpy():
    rng = np.random.default_rng(5)
    m = rng.standard_normal((6, 6))
    spd = lp.tensor(m @ m.T + 6 * np.eye(6), "fp32")
    c = la.cholesky(spd)
    assert np.allclose(c.values, np.linalg.cholesky(spd.values), rtol=1e-5, atol=1e-5)
    a = lp.tensor(rng.standard_normal((7, 4)), "fp32")
    q, r = la.qr(a)
    assert q.shape == (7, 4) and r.shape == (4, 4)
    assert np.allclose(q.values @ r.values, a.values, atol=1e-5)
    assert np.allclose(q.values.T @ q.values, np.eye(4), atol=1e-5)
    b = lp.tensor(rng.standard_normal(7), "fp32")
    want = np.linalg.lstsq(a.values, b.values, rcond=None)[0]
    assert np.allclose(la.lstsq(a, b).values, want, atol=1e-5)
    assert np.allclose(la.norm(a).values, np.linalg.norm(a.values), rtol=1e-6)
    ints = lp.tensor([[1.0, -2.0], [3.0, 4.0]], "fp16")
    assert float(la.norm(ints, 1)) == 6.0 and float(la.norm(ints, np.inf)) == 7.0
    assert float(la.norm(ints[1], 2)) == 5.0
    assert np.array_equal(la.norm(ints, axis=1).values,
                          lp.tensor(np.linalg.norm(ints.values, axis=1), "fp16").values)
    # FP16 squares that overflow FP16 do not overflow the FP32 accumulation.
    assert float(la.norm(lp.tensor([300.0, 400.0], "fp16"))) == 500.0



@pytest.mark.parametrize("products", [None, 1, 600])
def test_lstsq_of_columns_in_chunks_equals_each_column_alone(monkeypatch, products):
    # b's columns one at a time (1), two of 300 products at a time with a last
    # chunk of one (600) or all at once (the default); each column's x and residual
    # are those of the 1-D b of that column alone (its own code path).
    rng = np.random.default_rng(14)
    a = lp.tensor(rng.standard_normal((30, 10)), "bf16")
    b = lp.tensor(rng.standard_normal((30, 7)), "bf16")
    if products is not None:
        monkeypatch.setattr(la.core, "PRODUCTS", products)
    with lp.context(mode="rz"):
        x = la.lstsq(a, b)
        x2, res, rank, _ = np.linalg.lstsq(a, b)
        alone = [np.linalg.lstsq(a, b[:, j]) for j in range(7)]
    assert x.shape == (10, 7) and rank == 10 and res.shape == (7,)
    for j, (xj, rj, _, _) in enumerate(alone):
        assert np.array_equal(x.values[:, j], xj.values), j
        assert np.array_equal(x2.values[:, j], xj.values), j
        assert np.array_equal(res.values[j:j + 1], rj.values), j


def test_lstsq_memory_is_bounded_by_its_column_chunks():
    # all m * n * k products at once made a peak of 35 MiB here (183 MiB for
    # (300, 150) operands); in chunks of columns of at most 2**16 products the peak
    # stays near the bound's 7 MiB.
    import tracemalloc
    rng = np.random.default_rng(15)
    a = lp.tensor(rng.standard_normal((100, 30)), "fp32")
    b = lp.tensor(rng.standard_normal((100, 300)), "fp32")
    tracemalloc.start()
    try:
        np.linalg.lstsq(a, b)       # lstsq's q^T b, then the residuals' a x
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20


def _conditioned(n, kappa, seed):
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.standard_normal((n, n)))
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    s = np.logspace(0, -np.log10(kappa), n)
    a = (u * s) @ v.T
    x = rng.standard_normal(n)
    return a, a @ x, x


def test_refine_converges_when_kappa_u16_is_below_one():
    # kappa 1e2, u_16 = 2**-11: kappa u < 1, so the error contracts by ~kappa u each
    # step down to the working precision (x differs from the exact solution of the
    # float64 data by about kappa 2**-53, far below 1e-12).
    a, b, x = _conditioned(12, 1e2, 0)
    sol, hist = la.refine(a, b, x_true=x)
    assert hist[0]["forward_error"] > 1e-5          # the FP16 solve alone
    assert hist[-1]["forward_error"] < 1e-12
    assert hist[-1]["backward_error"] < 1e-14
    assert len(hist) <= 11 and sol.fmt == lp.FP64
    assert [h["iteration"] for h in hist] == list(range(len(hist)))


def test_refine_fails_when_kappa_u16_is_above_one():
    # kappa 1e8: kappa u_16 ~ 5e4 > 1, the FP16 factors carry no correct digit of the
    # correction and refinement stalls or diverges.
    a, b, x = _conditioned(12, 1e8, 0)
    _, hist = la.refine(a, b, x_true=x)
    assert min(h["forward_error"] for h in hist) > 1e-3


def test_refine_with_a_tensor_core_lu_and_fp32_working():
    a, b, x = _conditioned(16, 1e2, 1)
    sol, hist = la.refine(a, b, working="fp32", residual="fp64", block=8, model="h100",
                          x_true=x)
    assert sol.fmt == lp.FP32
    assert hist[-1]["forward_error"] < 1e-6


def test_errors():
    with pytest.raises(TypeError, match="lp.tensor"):
        la.lu(np.eye(2))
    with pytest.raises(ValueError, match="square"):
        la.lu(lp.tensor(np.ones((2, 3)), "fp16"))
    with pytest.raises(np.linalg.LinAlgError):
        la.lu(lp.tensor([[1.0, 2.0], [2.0, 4.0]], "fp16"))
    with pytest.raises(np.linalg.LinAlgError):
        la.solve(lp.tensor(np.zeros((2, 2)), "fp16"), lp.tensor([1.0, 1.0], "fp16"))
    with pytest.raises(ValueError, match="shape"):
        la.solve(lp.tensor(np.eye(2), "fp16"), lp.tensor([1.0, 1.0, 1.0], "fp16"))
    with pytest.raises(TypeError):
        la.solve(lp.tensor(np.eye(2), "fp16"), [1.0, 1.0])
    with pytest.raises(np.linalg.LinAlgError):
        la.cholesky(lp.tensor([[1.0, 2.0], [2.0, 1.0]], "fp32"))
    with pytest.raises(np.linalg.LinAlgError):
        la.solve_triangular(lp.tensor([[1.0, 0.0], [1.0, 0.0]], "fp16"),
                            lp.tensor([1.0, 1.0], "fp16"), lower=True)
    with pytest.raises(ValueError):
        la.qr(lp.tensor(np.ones((2, 3)), "fp16"), mode="raw")
    with pytest.raises(ValueError):
        la.norm(lp.tensor(np.eye(2), "fp16"), 3)
    with pytest.raises(ValueError):
        la.lu(lp.tensor(np.eye(2), "fp16"), block=0)
    with pytest.raises(TypeError):
        la.lu(lp.tensor(np.eye(2), "fp16"), block=2.0)
    with pytest.raises(ValueError, match="square"):
        la.refine(np.ones((2, 3)), [1.0, 1.0])
    assert la.LinAlgError is np.linalg.LinAlgError



def test_refine_forward_error_against_a_zero_truth():
    # ||x - x_true|| / ||x_true|| with x_true = 0 divided by zero.
    a = np.array([[4.0, 1.0], [1.0, 3.0]])
    x, history = la.refine(a, [0.0, 0.0], x_true=[0.0, 0.0])
    assert np.array_equal(x.values, [0.0, 0.0])
    assert [h["forward_error"] for h in history] == [0.0] * len(history)
    _, history = la.refine(a, [1.0, 2.0], x_true=[0.0, 0.0])      # x != 0: no bound
    assert all(h["forward_error"] == math.inf for h in history)
    _, history = la.refine(a, [math.nan, 0.0], x_true=[0.0, 0.0])
    assert math.isnan(history[0]["forward_error"])
    with pytest.raises(ValueError, match=r"x_true must have the shape of b, \(2,\)"):
        la.refine(a, [1.0, 2.0], x_true=[0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="x_true must have the shape of b"):
        la.refine(a, [1.0, 2.0], x_true=[[1.0, 2.0]])


def test_an_unknown_model_is_refused_without_block():
    # the model is used only by the blocked update, but is checked always.
    t = lp.tensor(np.eye(2), "fp16")
    with pytest.raises(ValueError, match="unknown matmul model 'nope'"):
        la.lu(t, model="nope")
    with pytest.raises(TypeError, match="model must be a model name"):
        la.lu(t, model=5)
    with pytest.raises(ValueError, match="unknown matmul model 'nope'"):
        la.refine(np.eye(2), [1.0, 1.0], model="nope")
    assert np.array_equal(la.lu(t, model="exact")[2].values, np.eye(2))


def test_numpy_linalg_dispatches_to_lowprec_linalg():
    """np.linalg.X on a Tensor is lowprec.linalg.X, bit for bit; others are refused."""
    rng = np.random.default_rng(9)
    m = rng.standard_normal((5, 5))
    a = lp.tensor(m @ m.T + 5 * np.eye(5), "fp16")
    b = lp.tensor(rng.standard_normal(5), "fp16")
    for got, want in ((np.linalg.solve(a, b), lp.linalg.solve(a, b)),
                      (np.linalg.inv(a), lp.linalg.inv(a)),
                      (np.linalg.det(a), lp.linalg.det(a)),
                      (np.linalg.cholesky(a), lp.linalg.cholesky(a)),
                      (np.linalg.norm(a), lp.linalg.norm(a))):
        assert isinstance(got, lp.Tensor) and got.fmt == want.fmt
        assert np.array_equal(got.values, want.values)
    with pytest.raises(TypeError, match="complex"):     # a rotation: eigenvalues +-i
        np.linalg.eig(lp.tensor([[0.0, -1.0], [1.0, 0.0]], "fp16"))


# -- Householder QR against its Fraction reference ------------------------------------

def _ref_pairwise(terms, rnd):
    """`lp.sum`'s pairwise order: level by level, the odd last term carried up a level
    and added (``last + carry``) where the next odd level ends."""
    level, carry = list(terms), None
    n = len(level)
    while len(level) + (carry is not None) > 1:
        pairs = [rnd(F(level[2 * i]) + F(level[2 * i + 1])) for i in range(len(level) // 2)]
        if len(level) % 2 and carry is None:
            carry = level[-1]
        elif len(level) % 2:
            pairs.append(rnd(F(level[-1]) + F(carry)))
            carry = None
        level = pairs
    return rnd(F(level[0])) if n == 1 else level[0]


def _ref_norm(x, fmt):
    """`norm`'s 2-norm: squares and a pairwise sum in FP32, the sqrt in FP32, rounded
    into the format."""
    def r32(q):
        return reference_round(q, "fp32")
    s = _ref_pairwise([r32(F(v) * F(v)) for v in x], r32)
    return reference_round(F(_ref_sqrt(F(s), "fp32")), fmt)


def _ref_qr(a, fmt):
    """Householder QR as `qr` documents it, on lists, every operation rounded once."""
    def rnd(q):
        return reference_round(q, fmt)
    m, n = len(a), len(a[0])
    r = [[float(v) for v in row] for row in a]
    q = [[1.0 if i == j else 0.0 for j in range(m)] for i in range(m)]
    for j in range(min(n, m - 1)):
        x = [r[i][j] for i in range(j, m)]
        if not any(x[1:]):
            continue
        nx = _ref_norm(x, fmt)
        alpha = -nx if x[0] >= 0 else nx
        v = [rnd(F(x[0]) - F(alpha))] + x[1:]
        beta = rnd(F(2) / F(_ref_pairwise([rnd(F(t) * F(t)) for t in v], rnd)))
        bv = [rnd(F(beta) * F(t)) for t in v]
        vr = [_ref_pairwise([rnd(F(v[i - j]) * F(r[i][k])) for i in range(j, m)], rnd)
              for k in range(j, n)]
        for i in range(j, m):
            for k in range(j, n):
                r[i][k] = rnd(F(r[i][k]) - F(rnd(F(bv[i - j]) * F(vr[k - j]))))
        r[j][j] = alpha
        for i in range(j + 1, m):
            r[i][j] = 0.0
        qv = [_ref_pairwise([rnd(F(q[i][k]) * F(v[k - j])) for k in range(j, m)], rnd)
              for i in range(m)]
        for i in range(m):
            for k in range(j, m):
                q[i][k] = rnd(F(q[i][k]) - F(rnd(F(qv[i]) * F(bv[k - j]))))
    return q, [[r[i][k] if k >= i else 0.0 for k in range(n)] for i in range(m)]


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "fp16"])
@pytest.mark.parametrize("shape", [(3, 3), (5, 3), (3, 5), (6, 4)])
@pytest.mark.parametrize("seed", range(2))
def test_qr_equals_the_fraction_reference(fmt, shape, seed):
    rng = np.random.default_rng(60 + seed)
    a = lp.tensor(rng.standard_normal(shape), fmt)
    q, r = _ref_qr(a.values.tolist(), fmt)
    m, n = shape
    k = min(m, n)
    got_q, got_r = la.qr(a)
    assert np.all(np.isfinite(got_q.values)) and np.all(np.isfinite(got_r.values))
    assert np.array_equal(got_q.values, np.array(q)[:, :k])
    assert np.array_equal(got_r.values, np.array(r)[:k])
    full_q, full_r = la.qr(a, mode="complete")
    assert np.array_equal(full_q.values, np.array(q))
    assert np.array_equal(full_r.values, np.array(r))
    assert np.array_equal(la.qr(a, mode="r").values, got_r.values)
    assert got_q.fmt == got_r.fmt == a.fmt


def _ref_solve(a, b, fmt):
    """LU (the reference), then forward and back substitution, rounded as `solve`."""
    w, perm = _ref_lu(a, fmt)
    n = len(a)
    lo = [[w[i][j] if j < i else 0.0 for j in range(n)] for i in range(n)]
    y = _ref_forward(lo, [b[p] for p in perm], fmt, unit=True)
    up = [[w[n - 1 - i][n - 1 - j] if j <= i else 0.0 for j in range(n)] for i in range(n)]
    return _ref_forward(up, y[::-1], fmt)[::-1], w, perm


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "fp16"])
@pytest.mark.parametrize("seed", range(3))
def test_solve_det_slogdet_equal_the_fraction_reference(fmt, seed):
    n = 4
    rng = np.random.default_rng(80 + seed)
    a = lp.tensor(rng.standard_normal((n, n)) + 2 * np.eye(n), fmt)
    b = lp.tensor(rng.standard_normal(n), fmt)
    x, w, perm = _ref_solve(a.values.tolist(), b.values.tolist(), fmt)
    assert np.array_equal(la.solve(a, b).values, x)
    d = 1.0
    for i in range(n):
        d = reference_round(F(d) * F(w[i][i]), fmt)
    odd = sum(perm[i] > perm[j] for i in range(n) for j in range(i + 1, n)) % 2
    assert float(la.det(a)) == (-d if odd else d)
    sign, logdet = la.slogdet(a)
    diag = [w[i][i] for i in range(n)]
    assert float(sign) == np.prod(np.sign(diag)) * (-1 if odd else 1)
    import math
    assert float(logdet) == reference_round(F(math.fsum(math.log(abs(v)) for v in diag)), fmt)


def test_matrix_power_with_the_exact_model_rounds_each_product_once():
    rng = np.random.default_rng(3)
    a = lp.tensor(rng.standard_normal((3, 3)) * 0.5, "fp16")

    def prod(x, y):    # the exact product, rounded once
        return [[reference_round(sum(F(x[i][t]) * F(y[t][j]) for t in range(3)), "fp16")
                 for j in range(3)] for i in range(3)]
    v = a.values.tolist()
    a2 = prod(v, v)
    a4 = prod(a2, a2)
    want = {2: a2, 3: prod(a2, v), 5: prod(v, a4), 6: prod(a2, a4)}   # NumPy's order
    with lp.context(matmul="exact"):
        for n, w in want.items():
            got = la.matrix_power(a, n)
            assert got.fmt == lp.FP16 and np.array_equal(got.values, w), n
            assert np.array_equal(np.linalg.matrix_power(a, n).values, w)
    assert np.array_equal(la.matrix_power(a, 0).values, np.eye(3))
    assert np.array_equal(la.matrix_power(a, -1).values, la.inv(a).values)
    with pytest.raises(TypeError, match="integer"):
        la.matrix_power(a, 2.0)
    # No E4M3 output on "h100": its FP32 output is rounded once into E4M3.
    e = lp.tensor(np.eye(2) * 2, "e4m3")
    assert np.array_equal(la.matrix_power(e, 3, model="h100").values, np.eye(2) * 8)


def test_blocked_lu_in_bf16_on_a_model_without_bf16_output():
    a = _random(8, "bf16", 4)
    p, lo, u = la.lu(a, block=4, model="h100")
    assert u.fmt == lp.BF16
    assert np.max(np.abs(p.values @ lo.values @ u.values - a.values)) < 0.1


@pytest.mark.parametrize("kappa", [1e1, 1e2, 1e3])
def test_refine_converges_for_kappa_u16_below_one(kappa):
    # kappa_2 u_16 <= 0.49: each step contracts the error (by about kappa u), down to
    # FP64 accuracy within the iterations allowed.
    a, b, x = _conditioned(24, kappa, 2)
    _, hist = la.refine(a, b, x_true=x, max_iter=20)
    assert hist[-1]["forward_error"] < 1e-12
    assert hist[1]["forward_error"] < hist[0]["forward_error"]


@pytest.mark.parametrize("kappa", [1e5, 1e6, 1e7, 1e8])
def test_refine_stalls_or_diverges_for_kappa_u16_above_one(kappa):
    a, b, x = _conditioned(24, kappa, 2)
    _, hist = la.refine(a, b, x_true=x, max_iter=10)
    fe = [h["forward_error"] for h in hist]
    assert not min(fe) < 1e-3


def test_stacks_are_each_matrix_on_its_own():
    rng = np.random.default_rng(11)
    m = rng.standard_normal((2, 3, 4, 4))
    a = lp.tensor(m @ np.swapaxes(m, -1, -2) + 4 * np.eye(4), "fp16")
    b = lp.tensor(rng.standard_normal(4), "fp16")
    bb = lp.tensor(rng.standard_normal((3, 4, 2)), "fp16")
    x, xx, ai, d = la.solve(a, b), la.solve(a, bb), la.inv(a), la.det(a)
    c, (q, r), (s, ld) = la.cholesky(a), la.qr(a), la.slogdet(a)
    assert x.shape == (2, 3, 4) and xx.shape == (2, 3, 4, 2) and d.shape == (2, 3)
    for i in np.ndindex(2, 3):
        assert np.array_equal(x[i].values, la.solve(a[i], b).values)
        assert np.array_equal(xx[i].values, la.solve(a[i], bb[i[1]]).values)
        assert np.array_equal(ai[i].values, la.inv(a[i]).values)
        assert float(d[i]) == float(la.det(a[i]))
        assert np.array_equal(c[i].values, la.cholesky(a[i]).values)
        assert np.array_equal(q[i].values, la.qr(a[i])[0].values)
        assert np.array_equal(r[i].values, la.qr(a[i])[1].values)
        assert float(s[i]) == float(la.slogdet(a[i])[0])
        assert float(ld[i]) == float(la.slogdet(a[i])[1])
    assert np.array_equal(np.linalg.det(a).values, d.values)


def test_norms_match_numpy_rounded():
    rng = np.random.default_rng(12)
    v = rng.standard_normal((3, 4, 5))
    t = lp.tensor(v, "fp32")
    tv = t.values
    for o in (2, -2, "nuc"):   # float64 SVD, rounded once
        want = lp.tensor(np.linalg.norm(tv[0], o), "fp32").values
        assert np.array_equal(la.norm(t[0], o).values, want)
    assert np.allclose(la.norm(t, "fro", axis=(1, 2)).values,
                       np.linalg.norm(tv, "fro", axis=(1, 2)), rtol=1e-6)
    for o in (1, -1, np.inf, -np.inf):
        assert np.allclose(la.norm(t, o, axis=(0, 2)).values,
                           np.linalg.norm(tv, o, axis=(0, 2)), rtol=1e-6)
    assert la.norm(t, axis=1, keepdims=True).shape == (3, 1, 5)
    assert float(la.norm(lp.tensor([0.0, 2.0, -1.0], "fp16"), 0)) == 2.0
    assert np.allclose(np.linalg.vector_norm(t, axis=(0, 2)).values,
                       np.linalg.vector_norm(tv, axis=(0, 2)), rtol=1e-6)
    assert np.array_equal(np.linalg.matrix_norm(t, ord=2).values,
                          lp.tensor(np.linalg.matrix_norm(tv, ord=2), "fp32").values)
    assert np.linalg.vector_norm(t, keepdims=True).shape == (1, 1, 1)
    with pytest.raises(ValueError, match="vectors"):
        la.norm(t[0, 0], "fro")



@pytest.mark.parametrize("shape", [(0,), (0, 3), (3, 0), (2, 0, 3), (2, 3, 0)])
def test_norms_and_rank_of_empty_tensors_are_numpys(shape):
    # The largest of no values is refused by max(); NumPy's answer is 0.
    z = np.zeros(shape)
    t = lp.tensor(z, "fp16")
    axis = (1, 2) if len(shape) == 3 else None
    ords = [None, 1, 2, np.inf, 0] if len(shape) == 1 else [None, 1, -1, 2, np.inf,
                                                                  -np.inf, "fro", "nuc"]
    for o in ords:
        try:
            want = np.linalg.norm(z, o, axis=axis)
        except ValueError:
            with pytest.raises(ValueError, match="zero-size array"):
                la.norm(t, o, axis=axis)
            continue
        got = la.norm(t, o, axis=axis)
        assert got.fmt == lp.FP16 and got.shape == np.shape(want), o
        assert np.array_equal(got.values, want), o
    with pytest.raises(ValueError, match="zero-size array"):
        la.norm(t, -np.inf if len(shape) == 1 else -2, axis=axis)
    assert np.array_equal(np.linalg.matrix_rank(t), np.linalg.matrix_rank(z))


def test_numpy_linalg_functions_of_numpy_2():
    rng = np.random.default_rng(13)
    a = lp.tensor(rng.standard_normal((4, 3)), "fp16")
    b = lp.tensor(rng.standard_normal(4), "fp16")
    x, res, rank, s = np.linalg.lstsq(a, b)
    assert np.array_equal(x.values, la.lstsq(a, b).values) and rank == 3
    assert res.shape == (1,) and s.fmt == lp.FP16
    assert float(res[0]) == pytest.approx(np.sum((b.values - a.values @ x.values) ** 2),
                                          rel=1e-2)
    with pytest.raises(np.linalg.LinAlgError, match="rank"):
        np.linalg.lstsq(lp.tensor(np.ones((3, 2)), "fp16"), lp.tensor(np.ones(3), "fp16"))
    q, r = np.linalg.qr(a)
    assert np.array_equal(q.values, la.qr(a)[0].values)
    assert np.array_equal(r.values, la.qr(a)[1].values)
    assert np.linalg.qr(a, mode="complete")[0].shape == (4, 4)
    sq = lp.tensor(rng.standard_normal((3, 3)), "fp16")
    assert np.array_equal(np.linalg.multi_dot([sq, sq, sq]).values,
                          ((sq @ sq) @ sq).values)
    sign, logdet = np.linalg.slogdet(sq)
    assert float(sign) == np.sign(np.linalg.det(sq.values))
    assert float(logdet) == float(la.slogdet(sq)[1])
    spd = lp.tensor(sq.values @ sq.values.T + 3 * np.eye(3), "fp16")
    assert np.array_equal(np.linalg.cholesky(spd, upper=True).values,
                          la.cholesky(spd).values.T)
    u, w = lp.tensor([1.0, 2.0, 3.0], "fp16"), lp.tensor([4.0, 5.0, 6.0], "fp16")
    if hasattr(np.linalg, "cross"):
        assert np.linalg.cross(u, w).values.tolist() == [-3.0, 6.0, -3.0]
        assert float(np.linalg.vecdot(u, w)) == 32.0
        assert np.linalg.outer(u, w).fmt == lp.FP16
        assert np.linalg.matrix_transpose(a).shape == (3, 4)
        assert np.array_equal(np.linalg.diagonal(a).values, np.diagonal(a.values))
        assert float(np.linalg.trace(sq)) == float(np.trace(sq))
        assert np.linalg.matmul(sq, sq).fmt == lp.FP32
        assert np.linalg.tensordot(sq, sq, axes=1).shape == (3, 3)
        with pytest.raises(ValueError):
            np.linalg.outer(sq, u)
        with pytest.raises(ValueError):
            np.linalg.cross(u[:2], w[:2])


def test_shape_format_and_nan_errors():
    h = lp.tensor(np.eye(3), "fp16")
    for f in (la.solve, la.lstsq):
        with pytest.raises(TypeError, match="lp.tensor"):
            f(np.eye(3), h[0])
    for f in (la.inv, la.det, la.cholesky, la.slogdet, la.lu):
        with pytest.raises(np.linalg.LinAlgError, match="square"):   # as NumPy
            f(lp.tensor(np.ones((2, 3)), "fp16"))
        with pytest.raises(TypeError, match="lp.tensor"):
            f(np.eye(2))
    with pytest.raises(np.linalg.LinAlgError):
        la.inv(lp.tensor(np.ones(3), "fp16"))
    with pytest.raises(np.linalg.LinAlgError):
        la.inv(lp.tensor([[1.0, 2.0], [2.0, 4.0]], "fp16"))
    assert [float(v) for v in la.slogdet(lp.tensor([[1.0, 2.0], [2.0, 4.0]], "fp16"))] \
        == [0.0, -np.inf]
    with pytest.raises(ValueError, match="shape"):
        la.solve(lp.tensor(np.ones((2, 3, 3)), "fp16"), lp.tensor(np.ones((2, 2, 1)), "fp16"))
    with pytest.raises(np.linalg.LinAlgError, match="m >= n"):
        la.lstsq(lp.tensor(np.ones((2, 3)), "fp16"), lp.tensor(np.ones(2), "fp16"))
    with pytest.raises(ValueError, match="at least two"):
        la.multi_dot([h])
    with pytest.raises(ValueError):
        la.refine(np.eye(2), [1.0, 1.0], factor="e8m0")
    with pytest.raises(ValueError):
        la.refine(np.eye(2), [1.0, 1.0], factor="no-such-format")
    # NaN: lu, solve, det and qr give NaNs (as NumPy); cholesky raises (LAPACK's potrf).
    nan = lp.tensor([[np.nan, 0.0], [0.0, 1.0]], "fp16")
    assert np.isnan(la.lu(nan)[2].values[0, 0])
    assert np.isnan(la.solve(nan, lp.tensor([1.0, 1.0], "fp16")).values[0])
    assert np.isnan(float(la.det(nan)))
    assert np.isnan(la.qr(nan)[1].values).any()
    with pytest.raises(np.linalg.LinAlgError, match="positive definite"):
        la.cholesky(nan)


# -- np.linalg's spectral functions, cond, tensorinv and tensorsolve on Tensors -----------
# eigh, eigvalsh, eig, eigvals, svd, svdvals and pinv are "rounded once" by definition:
# NumPy's float64 result for the decoded values, rounded into the format, which is the
# oracle here (lp.round is the rounding kernel, not the function under test); the
# properties below (orthonormality, reconstruction, rank, Fraction references) are
# checks that do not go through that definition.

SPECTRAL_FORMATS = ["fp16", "bf16", "e4m3", "fp32"]


def _symmetric(n, fmt, seed):
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, n))
    return lp.tensor(m + m.T, fmt)


def _same(got, want, fmt):
    """A Tensor of ``fmt`` with the values ``want`` (`helpers.assert_values`)."""
    assert isinstance(got, lp.Tensor) and got.fmt == lp.format(fmt)
    assert_values(got.values, want)


@pytest.mark.parametrize("fmt", SPECTRAL_FORMATS)
def test_spectral_functions_are_numpys_float64_result_rounded_once(fmt):
    rng = np.random.default_rng(40)
    s = _symmetric(5, fmt, 41)
    a = lp.tensor(rng.standard_normal((5, 3)), fmt)
    tri = lp.tensor(np.triu(rng.standard_normal((4, 4))) + 3 * np.eye(4), fmt)
    sv, av, tv = s.values, a.values, tri.values

    def once(x):
        return lp.round(x, fmt)

    r = np.linalg.eigh(s)
    assert type(r) is type(np.linalg.eigh(np.eye(2)))
    w, v = np.linalg.eigh(sv)
    _same(r.eigenvalues, once(w), fmt)
    _same(r.eigenvectors, once(v), fmt)
    _same(np.linalg.eigh(s, UPLO="U")[1], once(np.linalg.eigh(sv, UPLO="U")[1]), fmt)
    _same(np.linalg.eigvalsh(s), once(np.linalg.eigvalsh(sv)), fmt)
    r = np.linalg.eig(tri)      # upper triangular: real eigenvalues
    assert type(r) is type(np.linalg.eig(np.eye(2)))
    w, v = np.linalg.eig(tv)
    _same(r.eigenvalues, once(w), fmt)
    _same(r.eigenvectors, once(v), fmt)
    _same(np.linalg.eigvals(s), once(np.linalg.eigvals(sv)), fmt)
    for full in (True, False):
        r = np.linalg.svd(a, full_matrices=full)
        assert type(r) is type(np.linalg.svd(np.eye(2)))
        for got, want in zip(r, np.linalg.svd(av, full_matrices=full)):
            _same(got, once(want), fmt)
    _same(np.linalg.svd(a, compute_uv=False), once(np.linalg.svd(av, compute_uv=False)), fmt)
    _same(np.linalg.svd(s, hermitian=True)[1], once(np.linalg.svd(sv, hermitian=True)[1]),
          fmt)
    if hasattr(np.linalg, "svdvals"):
        _same(np.linalg.svdvals(a), once(np.linalg.svd(av, compute_uv=False)), fmt)
    _same(np.linalg.pinv(a), once(np.linalg.pinv(av)), fmt)
    _same(np.linalg.pinv(a, rcond=0.5), once(np.linalg.pinv(av, rcond=0.5)), fmt)
    # rtol=None: NumPy's rule max(M, N) * eps with the format's eps, not float64's.
    eps = float(lp.format(fmt).eps)
    _same(np.linalg.pinv(a, rtol=None), once(np.linalg.pinv(av, rtol=5 * eps)), fmt)
    _same(np.linalg.pinv(a, rtol=0.3), once(np.linalg.pinv(av, rtol=0.3)), fmt)
    with pytest.raises(ValueError):
        np.linalg.pinv(a, rcond=0.1, rtol=0.1)


def test_rounded_once_takes_the_contexts_mode():
    a = lp.tensor(np.random.default_rng(42).standard_normal((4, 4)), "bf16")
    want = np.linalg.svd(a.values)
    with lp.context(mode="rz"):
        got = np.linalg.svd(a)
        pinv = np.linalg.pinv(a)
    for g, w in zip(got, want):
        _same(g, lp.round(w, "bf16", "rz"), "bf16")
    _same(pinv, lp.round(np.linalg.pinv(a.values), "bf16", "rz"), "bf16")


@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
@pytest.mark.parametrize("seed", range(2))
def test_eigh_vectors_orthonormal_and_svd_reconstructs_within_a_bound(fmt, seed):
    n = 6
    u = float(lp.format(fmt).eps) / 2
    s = _symmetric(n, fmt, 50 + seed)
    _, v = np.linalg.eigh(s)
    q = v.values
    # V' = V + dV with |dV| <= u |V| elementwise and V's columns unit vectors: every
    # entry of V'^T V' - I is at most 2u + u^2 (Cauchy-Schwarz), plus float64 noise.
    assert np.max(np.abs(q.T @ q - np.eye(n))) <= 2 * u + u * u + 1e-12
    a = lp.tensor(np.random.default_rng(60 + seed).standard_normal((n, n - 2)), fmt)
    uu, ss, vh = np.linalg.svd(a, full_matrices=False)
    rebuilt = uu.values @ np.diag(ss.values) @ vh.values
    # U, S, Vh each within relative u elementwise: ||dU||_2 <= u ||U||_F <= u sqrt(n).
    norm2 = np.linalg.norm(a.values, 2)
    bound = ((1 + u * np.sqrt(n)) ** 2 * (1 + u) - 1) * norm2 + 1e-12
    assert np.linalg.norm(rebuilt - a.values, 2) <= bound
    assert np.all(np.diff(ss.values) <= 0) and np.all(ss.values >= 0)


def test_eig_with_complex_eigenvalues_is_refused():
    rot = lp.tensor([[0.0, -1.0], [1.0, 0.0]], "fp16")
    for fn in (np.linalg.eig, np.linalg.eigvals):
        with pytest.raises(TypeError, match="complex.*np.asarray"):
            fn(rot)
    assert np.iscomplexobj(np.linalg.eigvals(rot.values))     # NumPy's result is complex


def test_matrix_rank_uses_the_formats_tolerance():
    rng = np.random.default_rng(70)
    # A rank-1 matrix rounded into FP16: the rounding error E has ||E||_2 <= u ||A||_F
    # = u s1, so s2 <= 2**-11 s1, below the FP16 tolerance 5 * 2**-10 * s1, far above
    # float64's.
    a = lp.tensor(np.outer(rng.standard_normal(5), rng.standard_normal(5)), "fp16")
    r = np.linalg.matrix_rank(a)
    assert not isinstance(r, lp.Tensor) and isinstance(r, (int, np.integer)) and r == 1
    assert np.linalg.matrix_rank(a.values) == 5          # float64's eps sees noise
    assert np.linalg.matrix_rank(a, tol=1e-300) == 5
    assert np.linalg.matrix_rank(a, rtol=1e-15) == 5
    # [[1, 1], [1, 1 + d]]: s1 s2 = d, s1 ~ 2, so s2 ~ d / 2 = 2**-11 < 2 * eps * s1.
    near = lp.tensor([[1.0, 1.0], [1.0, 1.0 + 2.0**-10]], "fp16")
    assert np.linalg.matrix_rank(near) == 1
    assert np.linalg.matrix_rank(near.astype("fp32")) == 2
    singular = lp.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], "fp16")
    assert np.linalg.matrix_rank(singular) == 2
    assert np.linalg.matrix_rank(lp.tensor(np.eye(3), "e4m3")) == 3
    stack = lp.tensor(np.stack([np.eye(3), singular.values]), "fp16")
    assert np.linalg.matrix_rank(stack).tolist() == [3, 2]
    assert np.linalg.matrix_rank(lp.tensor([0.0, 0.0], "fp16")) == 0
    assert np.linalg.matrix_rank(lp.tensor([0.0, 2.0], "fp16")) == 1


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "e4m3"])
def test_cond_of_a_diagonal_matrix_against_the_fraction_ratio(fmt):
    d = [3.0, -0.5, 7.25, 0.0625, 1.375]
    d = [float(lp.round(x, fmt)) for x in d]
    x = lp.tensor(np.diag(d), fmt)
    big, small = max(map(abs, d)), min(map(abs, d))
    # p = None / 2 / -2: the singular values are |d|; their ratio rounded once (the
    # float64 quotient of two values of at most 24 bits cannot sit on a midpoint of the
    # format unless the exact one does: one rounding either way).
    assert float(np.linalg.cond(x)) == reference_round(F(big) / F(small), fmt)
    assert float(np.linalg.cond(x, 2)) == reference_round(F(big) / F(small), fmt)
    assert float(np.linalg.cond(x, -2)) == reference_round(F(small) / F(big), fmt)
    # Other p: inv's diagonal is rnd(1 / d) (LU of a diagonal matrix does no other
    # rounding), the 1/inf norms of a diagonal matrix are its largest/smallest |d|
    # (sums with zeros), and their product is rounded.
    inv_d = [abs(reference_round(1 / F(v), fmt)) for v in d]
    for p, pick in ((1, max), (np.inf, max), (-1, min), (-np.inf, min)):
        want = reference_round(F(pick(map(abs, d))) * F(pick(inv_d)), fmt)
        got = np.linalg.cond(x, p)
        assert isinstance(got, lp.Tensor) and got.fmt == lp.format(fmt)
        assert float(got) == want, p


def test_cond_composes_lowprec_norm_and_inv_and_follows_numpy_on_edges():
    rng = np.random.default_rng(75)
    a = lp.tensor(rng.standard_normal((4, 4)), "fp16")
    for p in (1, -1, np.inf, "fro", "nuc"):
        want = la.norm(a, p) * la.norm(la.inv(a), p)
        _same(np.linalg.cond(a, p), want.values, "fp16")
    stack = lp.tensor(rng.standard_normal((2, 3, 3)), "bf16")
    got = np.linalg.cond(stack, 1)
    assert got.shape == (2,)
    assert [float(v) for v in got] == [float(np.linalg.cond(stack[i], 1)) for i in range(2)]
    singular = lp.tensor([[1.0, 2.0], [2.0, 4.0]], "fp16")
    assert float(np.linalg.cond(singular, 1)) == np.inf == np.linalg.cond(singular.values, 1)
    assert float(np.linalg.cond(singular)) == np.inf
    nan = lp.tensor([[np.nan, 0.0], [0.0, 1.0]], "fp16")
    assert np.isnan(float(np.linalg.cond(nan, 1))) and np.isnan(np.linalg.cond(nan.values, 1))
    wide = lp.tensor(rng.standard_normal((2, 3)), "fp16")
    _same(np.linalg.cond(wide), lp.round(np.linalg.cond(wide.values), "fp16"), "fp16")
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.cond(wide, 1)                  # not square, as NumPy
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.cond(lp.tensor(np.ones((0, 0)), "fp16"))
    with pytest.raises(ValueError):
        np.linalg.cond(a, 3)


@pytest.mark.parametrize("fmt", ["e4m3", "fp16"])
def test_tensorsolve_and_tensorinv_are_solve_and_inv_of_the_reshaped_matrix(fmt):
    rng = np.random.default_rng(80)
    a = lp.tensor(rng.standard_normal((2, 3, 6)) + np.eye(6).reshape(2, 3, 6) * 2, fmt)
    b = lp.tensor(rng.standard_normal((2, 3)), fmt)
    x = np.linalg.tensorsolve(a, b)
    want = la.solve(a.reshape(6, 6), b.ravel())
    assert x.shape == (6,) and x.fmt == lp.format(fmt)
    assert np.array_equal(x.values, want.values)
    ref, _, _ = _ref_solve(a.values.reshape(6, 6).tolist(), b.values.ravel().tolist(), fmt)
    assert np.array_equal(x.values, ref)                      # Fraction, step by step
    # axes: moved to the end first, as NumPy (a.shape (3, 6, 2) -> (6, 2, 3)).
    c = lp.tensor(rng.standard_normal((3, 6, 2)) + np.eye(6).reshape(6, 2, 3).transpose(2, 0, 1),
                  fmt)
    y = np.linalg.tensorsolve(c, b.reshape(6), axes=(0,))
    assert y.shape == (2, 3)
    moved = c.values.transpose(1, 2, 0).reshape(6, 6)
    assert np.array_equal(y.values.ravel(), la.solve(lp.tensor(moved, fmt), b.reshape(6)).values)
    # A plain operand is rounded into the Tensor's format (the context's mode).
    bp = rng.standard_normal((2, 3))
    with lp.context(mode="rz"):
        got = np.linalg.tensorsolve(a, bp)
        want = la.solve(a.reshape(6, 6), lp.tensor(bp.ravel(), fmt))
    assert np.array_equal(got.values, want.values)
    ap = rng.standard_normal((2, 3, 6)) + 2 * np.eye(6).reshape(2, 3, 6)
    got = np.linalg.tensorsolve(ap, b)
    assert got.fmt == lp.format(fmt)
    assert np.array_equal(got.values, la.solve(lp.tensor(ap.reshape(6, 6), fmt),
                                               b.ravel()).values)
    # tensorinv: inv of a.reshape(prod(shape[ind:]), -1), reshaped to shape[ind:] + shape[:ind].
    t = lp.tensor(rng.standard_normal((6, 2, 3)) + 2 * np.eye(6).reshape(6, 2, 3), fmt)
    ti = np.linalg.tensorinv(t, ind=1)
    assert ti.shape == (2, 3, 6) and ti.fmt == lp.format(fmt)
    assert np.array_equal(ti.values.reshape(6, 6), la.inv(t.reshape(6, 6)).values)
    ref_cols = [_ref_solve(t.values.reshape(6, 6).tolist(), list(e), fmt)[0] for e in np.eye(6)]
    assert np.array_equal(ti.values.reshape(6, 6), np.array(ref_cols).T)
    sq = lp.tensor(0.2 * rng.standard_normal((2, 3, 2, 3)) + np.eye(6).reshape(2, 3, 2, 3),
                   fmt)
    si = np.linalg.tensorinv(sq)
    assert np.array_equal(si.values.reshape(6, 6), la.inv(sq.reshape(6, 6)).values)
    # Well conditioned: near NumPy's float64 tensorinv (a sanity bound, a few ulps).
    assert np.allclose(si.values, np.linalg.tensorinv(sq.values), rtol=0,
                       atol=8 * float(lp.format(fmt).eps))


def test_tensorsolve_tensorinv_shape_errors_as_numpy():
    h = lp.tensor(np.ones((2, 3)), "fp16")
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.tensorsolve(h, lp.tensor(np.ones(2), "fp16"))
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.tensorsolve(np.ones((2, 3)), np.ones(2))       # NumPy too
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.tensorinv(h, ind=1)                            # 3 x 2: not square
    with pytest.raises(ValueError):
        np.linalg.tensorinv(lp.tensor(np.eye(4), "fp16"), ind=0)
    with pytest.raises(TypeError, match="complex"):
        np.linalg.tensorsolve(lp.tensor(np.eye(2), "fp16"), np.array([1j, 1.0]))
    for fn in (np.linalg.eigh, np.linalg.eigvalsh, np.linalg.eig, np.linalg.eigvals):
        with pytest.raises(np.linalg.LinAlgError):
            fn(h)
    for fn in (np.linalg.svd, np.linalg.pinv):
        with pytest.raises(np.linalg.LinAlgError):
            fn(lp.tensor([1.0, 2.0], "fp16"))



def test_tensorsolve_axes_and_tensorinv_ind_are_checked_by_name():
    # NumPy's own code said "list.remove(x): x not in list" and "'>' not supported".
    a = lp.tensor(np.eye(6).reshape(6, 2, 3) * 2.0, "fp16")
    b = lp.tensor(np.arange(6.0), "fp16")
    with pytest.raises(ValueError, match="axis 5 is out of bounds for array of dimension 3"):
        np.linalg.tensorsolve(a, b, axes=(5,))
    with pytest.raises(ValueError, match="repeated axis"):
        np.linalg.tensorsolve(a, b, axes=(0, 0))
    with pytest.raises(TypeError, match="axes must be a sequence of ints"):
        np.linalg.tensorsolve(a, b, axes=("x",))
    # A negative axis names the same axis as NumPy's positive one.
    assert np.array_equal(np.linalg.tensorsolve(a, b, axes=(-1,)).values,
                          np.linalg.tensorsolve(a, b, axes=(2,)).values)
    t = lp.tensor(np.eye(4).reshape(4, 2, 2) * 3.0, "bf16")
    for ind in ("a", 1.0, True):
        with pytest.raises(TypeError, match="ind must be a positive int"):
            np.linalg.tensorinv(t, ind=ind)
    assert np.linalg.tensorinv(t, ind=np.int64(1)).shape == (2, 2, 4)


def test_new_numpy_linalg_entries_have_their_classes():
    from lowprec.tensors.core import KINDS
    classes = {"eigh": "rounded once", "eigvalsh": "rounded once", "eig": "rounded once",
               "eigvals": "rounded once", "svd": "rounded once", "pinv": "rounded once",
               "svdvals": "rounded once", "matrix_rank": "plain", "cond": "composed",
               "tensorinv": "composed", "tensorsolve": "composed"}
    for name, kind in classes.items():
        fn = getattr(np.linalg, name, None)
        if fn is not None:
            assert KINDS[fn][0] == kind, name
