"""`Tensor`: an ndarray of values in one format, with NumPy's protocols.

`lp.Context`, `lp.context` and `lp.get_context` (the defaults, read only by `defaults`),
`result_format` and the `PROMOTION` table, built at import (`promotion`), the `Tensor` class
and `lp.tensor` (`core`), and the NumPy dispatch tables `HANDLED_UFUNCS` (`ufuncs`) and
`HANDLED_FUNCTIONS` with the Tensor `matmul` (`functions`) (docs/design/DESIGN.md,
"Layout").
"""

# (manipulation, products and statistics fill HANDLED_FUNCTIONS; coverage, REFUSED)
from . import coverage, manipulation, products, statistics  # noqa: F401
from .core import HANDLED_FUNCTIONS, Tensor, tensor
from .defaults import Context, context, get_context
from .functions import matmul
from .promotion import PROMOTION, result_format
from .ufuncs import HANDLED_UFUNCS

__all__ = ["Tensor", "tensor", "Context", "context", "get_context", "result_format", "matmul",
           "PROMOTION", "HANDLED_UFUNCS", "HANDLED_FUNCTIONS"]
