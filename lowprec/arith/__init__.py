"""Correctly rounded arithmetic in any format: ``add sub mul div sqrt fma``, ``sum``, ``dot``.

Each operation computes, in float64, an unevaluated pair ``hi + lo`` that pins down
the exact real result (error-free transformations: TwoSum, Dekker's product, exact
remainders of division and square root), collapses it to the float64 value
round-to-odd would give (innocuous for formats of at most 51 bits, so every mode
then sees the exact result's side of every rounding boundary), and rounds that
once with the rounding kernel (`lowprec.engine.kernel`), chunk by chunk. Operands whose
error terms would overflow or underflow are normalised by powers of two first.
Operands that float64 cannot hold (64-bit integers, long doubles, wider Python
ints: rare) take an exact path on Python integers, element by element, that
hands the same normalised form to the same final rounding.
This package must never round a result twice (float64 first, then the format: that
is the double rounding it exists to avoid), never read a global default, and never
modify its inputs.

The package's files, in layer order (docs/design/DESIGN.md, "Layout"): `fp64` (the
FP64-target paths), `kernels` (per operation), `exact` (the exact integer path),
`driver` (the chunk driver), `elementwise`, `sequential` (sequential sums by binade
runs) and `reductions` (the public functions);
this file re-exports their public names.
"""

from __future__ import annotations

from .driver import MEMORY_CHUNKS as MEMORY_CHUNKS
from .elementwise import add, div, fma, mul, sqrt, sub
from .reductions import ORDERS, cumsum, dot, sum  # noqa: A004

__all__ = ["add", "sub", "mul", "div", "sqrt", "fma", "sum", "cumsum", "dot", "ORDERS"]
