"""`Tensor`: an ndarray of values in one format, with NumPy's protocols.

`lp.context` / `lp.get_context` (the defaults, read only by `context`), `result_format`
and the literal `PROMOTION` table (`promotion`), the `Tensor` class and `lp.tensor`
(`core`), and the NumPy dispatch tables `HANDLED_UFUNCS` and `HANDLED_FUNCTIONS`
(docs/design/DESIGN.md, "Layout").
"""

from .core import (
                   HANDLED_FUNCTIONS,
                   HANDLED_UFUNCS,
                   PROMOTION,
                   Tensor,
                   context,
                   get_context,
                   matmul,
                   result_format,
                   tensor,
)

__all__ = ["Tensor", "tensor", "context", "get_context", "result_format", "matmul",
           "PROMOTION", "HANDLED_UFUNCS", "HANDLED_FUNCTIONS"]
