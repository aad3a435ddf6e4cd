"""Constants of the float64 bit pattern the kernels work on (IEEE 754 binary64)."""

from __future__ import annotations

import numpy as np

__all__ = ["EXP", "ABS", "SIGN", "QUIET", "ONE_BITS", "operand"]


EXP = np.uint64(0x7FF0_0000_0000_0000)

ABS = np.uint64(0x7FFF_FFFF_FFFF_FFFF)

SIGN = np.uint64(0x8000_0000_0000_0000)

QUIET = np.uint64(1 << 51)

ONE_BITS = 1023 << 52


def operand(value: int) -> np.ndarray:
    """``value`` as a read-only 0-d uint64 array, a cheap ufunc operand.

    As an operand of a ufunc it costs less per call than a NumPy scalar, with the
    same result. A small call's dozen ufuncs feel the difference."""
    a = np.array(value, dtype=np.uint64)
    a.flags.writeable = False
    return a
