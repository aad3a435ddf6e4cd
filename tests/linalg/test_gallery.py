"""`randsvd` against its definition: singular values from a float64 SVD (LAPACK)."""

from __future__ import annotations

import numpy as np
import pytest

import lowprec.linalg as la


@pytest.mark.parametrize("mode", [1, 2, 3, 4])
@pytest.mark.parametrize("kappa", [1.0, 1e3, 1e8])
def test_singular_values_follow_the_mode(mode, kappa):
    n = 12
    s = np.linalg.svd(la.randsvd(n, kappa, mode=mode, rng=3), compute_uv=False)
    t = np.arange(n) / (n - 1)
    want = {1: np.where(t > 0, 1 / kappa, 1.0), 2: np.where(t < 1, 1.0, 1 / kappa),
            3: kappa ** -t, 4: 1 - (1 - 1 / kappa) * t}[mode]
    # backward stable SVD: absolute errors of a few 2**-53 (sigma_0 = 1)
    assert np.allclose(s, np.sort(want)[::-1], rtol=0, atol=1e-14)


def test_seeded_and_orthogonal_factors():
    a = la.randsvd(6, 10.0, rng=1)
    assert np.array_equal(a, la.randsvd(6, 10.0, rng=np.random.default_rng(1)))
    assert not np.array_equal(a, la.randsvd(6, 10.0, rng=2))
    assert la.randsvd(1, 1.0, rng=0).shape == (1, 1)


def test_bad_arguments():
    with pytest.raises(ValueError, match="kappa"):
        la.randsvd(3, 0.5)
    with pytest.raises(ValueError, match="kappa"):
        la.randsvd(3, float("inf"))
    with pytest.raises(ValueError, match="1-by-1"):
        la.randsvd(1, 2.0)
    with pytest.raises(ValueError, match="mode"):
        la.randsvd(3, 2.0, mode=5)
    with pytest.raises(TypeError):
        la.randsvd(3.0, 2.0)
