"""Inputs and comparisons the NumPy-on-Tensor tests share (`test_numpy_support`,
`test_numpy_statistics`, `test_numpy_products`): values of a format to build Tensors
from, array equality, and one Fraction rounding (the reference, `lowprec.testing`).
``draw`` rounds with `lp.round` only to make its inputs values of the format; no
expected value comes from here but through `rr`, the Fraction reference.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

import lowprec as lp
from lowprec import testing as lpt

__all__ = ["draw", "rr"]


def draw(fmt, shape, seed, scale=None, *, cap=4.0, share=8, ones=0.2):
    """Finite values of ``fmt`` of both signs (normal, standard deviation ``scale``,
    default ``min(cap, max / share)``), a fraction ``ones`` of them exactly 1 (repeats,
    ties for sorting); overflows replaced by 1."""
    rng = np.random.default_rng(seed)
    scale = min(cap, float(fmt.max) / share) if scale is None else scale
    x = rng.normal(0.0, scale, size=shape)
    x[rng.random(shape) < ones] = 1.0
    v = np.asarray(lp.round(x, fmt))
    return np.where(np.isfinite(v), v, 1.0)


def rr(x, fmt):
    """One exact rounding of a real number into ``fmt`` (RNE; the Fraction reference).
    Non-finite floats pass through."""
    if isinstance(x, float) and not np.isfinite(x):
        return x
    return lpt.reference_round(Fraction(x), fmt)
