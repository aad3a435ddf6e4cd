"""Matrix products as low-precision hardware computes them, bit for bit.

`matmul` computes ``D = A @ B (+ C)`` under a *model* of how the products are summed:
``"exact"`` (one rounding of the exact dot product), ``"fp32"`` and ``"fp16"``
(left-to-right accumulation, every addition rounded) and the NVIDIA Tensor Core
block-FMA models of ``docs/design/TENSORCORE.md`` (`TensorCoreModel`: unnormalised exact
products, terms truncated to ``F`` fraction bits below the block's largest exponent,
one rounding per block). Every model is vectorised over the outputs (Python loops
run only over K-blocks and over chunks of outputs) and works on float64, float32 and
integer arrays whose exactness is argued where it is used. This package is a kernel: it
takes ndarrays and `Format`\\ s, returns float64 ndarrays, and must never import `Tensor`,
read a context default or keep state between calls.

Files, in layer order (docs/design/DESIGN.md): `models` (what a model is), `catalogue`
(the named models, `resolve_model`), `blockfma` (the Tensor Core kernel and the helpers
the kernels share), `exact`, `sequential` (the other kernels), `driver` (`matmul`).
"""

from __future__ import annotations

from .catalogue import MODELS, resolve_model
from .driver import MEMORY_BOUND, matmul
from .models import Model, ModelLike, TensorCoreModel

__all__ = ["matmul", "TensorCoreModel", "MODELS", "MEMORY_BOUND", "Model", "ModelLike",
           "resolve_model"]
