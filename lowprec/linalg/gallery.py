"""`randsvd`: random test matrices of a chosen condition number, in float64.

Test data, not an emulated algorithm: the matrix is formed in float64 and is the
caller's to round into a format. Nothing here reads the context or rounds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..engine.checks import as_generator, check_int
from ..types import RNGLike


def _haar(n: int, gen: np.random.Generator) -> np.ndarray[Any, Any]:
    """A Haar-distributed orthogonal matrix: Q of a Gaussian's QR, columns signed by
    R's diagonal (Mezzadri, Notices AMS 54(5), 2007)."""
    q, r = np.linalg.qr(gen.standard_normal((n, n)))
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


def randsvd(n: int, kappa: float, *, mode: int = 3,
            rng: RNGLike = None) -> np.ndarray[Any, Any]:
    """A random n-by-n float64 matrix with 2-norm condition number ``kappa``.

    ``U diag(sigma) V^T`` with ``U``, ``V`` Haar-random orthogonal matrices. The
    singular values follow MATLAB's ``gallery("randsvd", n, kappa, mode)`` (Higham,
    Accuracy and Stability of Numerical Algorithms, 2nd ed., section 28.3), with
    ``i = 0 .. n-1``:

    - ``mode=1``: one large, ``sigma_0 = 1`` and the rest ``1 / kappa``.
    - ``mode=2``: one small, ``sigma_{n-1} = 1 / kappa`` and the rest 1.
    - ``mode=3`` (default): geometric, ``sigma_i = kappa ** (-i / (n - 1))``.
    - ``mode=4``: arithmetic, ``sigma_i = 1 - (1 - 1 / kappa) i / (n - 1)``.

    ``U`` is drawn before ``V`` from ``rng`` (a Generator, a seed or None). The
    float64 product perturbs the singular values by a few units of 2**-53 times
    ``sigma_0``.

    Examples
    --------
    >>> import numpy as np, lowprec.linalg as la
    >>> a = la.randsvd(8, 1e4, rng=0)
    >>> s = np.linalg.svd(a, compute_uv=False)
    >>> float(s[0]), round(float(s[0] / s[-1]))
    (1.0..., 10000)
    """
    n = check_int("n", n, minimum=1)
    kappa = float(kappa)
    if not kappa >= 1 or not np.isfinite(kappa):
        raise ValueError(f"kappa must be a finite number at least 1, got {kappa!r}")
    if n == 1 and kappa != 1:
        raise ValueError(f"a 1-by-1 matrix has condition number 1, got kappa={kappa!r}")
    if mode not in (1, 2, 3, 4):
        raise ValueError(f"mode must be 1, 2, 3 or 4 (MATLAB's randsvd modes), got {mode!r}")
    gen = as_generator(rng)
    u, v = _haar(n, gen), _haar(n, gen)
    t = np.arange(n) / max(n - 1, 1)
    sigma = {1: np.where(t > 0, 1 / kappa, 1.0), 2: np.where(t < 1, 1.0, 1 / kappa),
             3: kappa ** -t, 4: 1 - (1 - 1 / kappa) * t}[mode]
    return (u * sigma) @ v.T
