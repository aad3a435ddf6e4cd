"""NumPy's statistics on Tensors: quantiles, the NaN-skipping reductions, ``ptp``,
``cov``, ``corrcoef``, ``interp``, ``gradient``, ``trapezoid`` and their kin, each
composed of rounded Tensor operations in a documented order (or exact, for
selections). Fills its entries of `HANDLED_FUNCTIONS` and `KINDS` at import; it
never computes a result in float64 and hands it back unrounded.
"""

from __future__ import annotations

__all__: list[str] = []
