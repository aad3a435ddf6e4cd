"""lowprec: bit-exact emulation of low-precision floating point in pure NumPy.

The public names are re-exported here. docs/design/DESIGN.md lists the modules.
"""

from .formats import (BF16, E8M0, UE4M3, FP4_E2M1, FP6_E2M3, FP6_E3M2, FP8_E4M3, FP8_E4M3FNUZ,
                      FP8_E5M2, FP8_E5M2FNUZ, FP16, FP32, FP64, NAMED_FORMATS, TF32,
                      Format, finfo, format)
from .status import Flags, flags
from .rounding import MODES, round, round_exact, threads
from .bits import decode, encode, fields
from .arith import add, cumsum, div, dot, fma, mul, sqrt, sub, sum
from .tensorcore import MODELS, TensorCoreModel
from .tensors import Context, Tensor, context, get_context, matmul, result_format, tensor
from .teaching import Explanation, explain
from . import amp, fft, linalg, mx, nn, p3109, testing  # noqa: F401  (public modules, imported with the package)
from .array_api import array_namespace
from .sweeps import sweep
from . import daskarrays  # noqa: F401  (Dask arrays through lp.round, lp.add, ...)
from .engine.heap import keep_freed as _keep_freed

_keep_freed()      # freed work arrays stay mapped: no page faults per call (engine/heap.py)

__version__ = "0.1.0"

__all__ = [
    "Format", "format", "finfo", "NAMED_FORMATS",
    "FP64", "FP32", "TF32", "FP16", "BF16", "FP8_E4M3", "FP8_E5M2", "FP8_E4M3FNUZ",
    "FP8_E5M2FNUZ", "FP6_E2M3", "FP6_E3M2", "FP4_E2M1", "E8M0", "UE4M3",
    "Flags", "flags", "MODES", "round", "round_exact", "threads", "encode", "decode",
    "fields",
    "add", "sub", "mul", "div", "sqrt", "fma", "sum", "cumsum", "dot",
    "matmul", "TensorCoreModel", "MODELS",
    "Tensor", "tensor", "Context", "context", "get_context", "result_format",
    "explain", "Explanation",
    "array_namespace", "sweep",
    "amp", "linalg", "nn", "p3109",
]
