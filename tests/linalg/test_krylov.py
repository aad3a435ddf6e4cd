"""`gmres` against exact rational arithmetic: the residual of its answer, and the
finite-termination property of GMRES in exact arithmetic (n steps at most)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp
from lowprec.linalg.core import apply
from lowprec.linalg.krylov import gmres


def _exact_relative_residual(a, d, s):
    r = [Fraction(si) - sum(Fraction(aij) * Fraction(dj) for aij, dj in zip(row, d))
         for si, row in zip(s, a)]
    return float(max(abs(v) for v in r) / max(abs(Fraction(v)) for v in s))


def test_solves_to_the_format_precision_in_at_most_n_steps():
    gen = np.random.default_rng(0)
    n = 20
    a = gen.standard_normal((n, n)) + 8 * np.eye(n)
    s = gen.standard_normal(n)
    for fmt, u in (("fp32", 2.0 ** -24), ("fp64", 2.0 ** -53)):
        at, st = lp.tensor(a, fmt), lp.tensor(s, fmt)
        d, res = gmres(lambda v, at=at: apply(at, v), st, tol=0.0, max_iter=100)
        assert d.fmt == lp.format(fmt) and len(res) <= n
        assert _exact_relative_residual(at.values, d.values, st.values) < 100 * n * u
        assert all(b <= a_ * (1 + 1e-3) for a_, b in zip(res, res[1:]))   # monotone


def test_tolerance_and_breakdown():
    gen = np.random.default_rng(1)
    a = lp.tensor(gen.standard_normal((10, 10)) + 6 * np.eye(10), "fp32")
    s = lp.tensor(gen.standard_normal(10), "fp32")
    d, res = gmres(lambda v: apply(a, v), s, tol=1e-2, max_iter=10)
    assert res[-1] <= 1e-2 and all(r > 1e-2 for r in res[:-1])
    assert _exact_relative_residual(a.values, d.values, s.values) < 2e-2
    # identity: the exact solution is in the first Krylov space, found in one step.
    eye = lp.tensor(np.eye(4), "fp16")
    d, res = gmres(lambda v: apply(eye, v), lp.tensor([1.0, 2.0, 3.0, 4.0], "fp16"),
                   tol=1e-2, max_iter=4)
    assert len(res) == 1 and np.allclose(d.values, [1.0, 2.0, 3.0, 4.0], rtol=2e-3)
    zero = lp.tensor(np.zeros(3), "fp16")
    d, res = gmres(lambda v: v, zero, tol=0.0, max_iter=3)
    assert res == [] and np.array_equal(d.values, np.zeros(3))


def test_bad_arguments():
    v = lp.tensor([1.0, 2.0], "fp32")
    with pytest.raises(TypeError, match="lp.tensor"):
        gmres(lambda x: x, np.ones(2), tol=0.0, max_iter=2)
    with pytest.raises(ValueError, match="one right-hand side"):
        gmres(lambda x: x, lp.tensor(np.ones((2, 2)), "fp32"), tol=0.0, max_iter=2)
    with pytest.raises(ValueError, match="max_iter"):
        gmres(lambda x: x, v, tol=0.0, max_iter=-1)
    with pytest.raises(ValueError, match="tol"):
        gmres(lambda x: x, v, tol=float("nan"), max_iter=2)


def test_every_value_is_in_the_format():
    # NumPy's float16 as the oracle of FP16 membership: d and each basis product.
    gen = np.random.default_rng(2)
    a = lp.tensor(gen.standard_normal((8, 8)) + 4 * np.eye(8), "fp16")
    seen = []

    def op(v):
        seen.append(v.values.copy())
        return apply(a, v)

    d, res = gmres(op, lp.tensor(gen.standard_normal(8), "fp16"), tol=1e-3, max_iter=8)
    for vals in [d.values, *seen]:
        assert np.array_equal(vals.astype(np.float16).astype(np.float64), vals)
    assert res[-1] <= 1e-3 or len(res) == 8
