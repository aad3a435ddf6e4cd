"""Rounding into unsigned formats (the block scales `E8M0` and `UE4M3`).

A value is rounded through a signed twin with the same positive values (`twin`). The
unsigned format's own rules then apply (`settle`):

- A negative value that does not round to zero has no value, and gives NaN.
- A zero result is +0.
- In a format without zero (`E8M0`), an exact zero gives NaN. A positive underflow
  gives the least value, and an overflow NaN (the max with ``saturate``).

These rules are those of ml_dtypes' ``float8_e8m0fnu`` conversion. The module computes
on float64 arrays only and must never hold state.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from ..formats import Format

__all__ = ["twin", "settle"]


def twin(fmt: Format) -> Format:
    """A signed format whose positive values include every value of ``fmt``, with the
    same rounding between them.

    It is ``fmt`` with a sign bit. For a format without zero (E8M0) it is an IEEE
    format of one more exponent bit, with p = 1. Then every power of two from
    ``2**(1 - 2 * bias - 1)`` up is a value, and nearer ones round the same way."""
    if fmt.kind == "fn" and fmt.mantissa_bits == 0 and fmt.zero:
        # P3109's Binary{K}p1uf: a signed 'fn' format needs a mantissa bit. 'fnuz' has
        # the same finite values and one binade more, which `settle` sends to overflow.
        return Format(fmt.exponent_bits, 0, fmt.bias, subnormals=fmt.subnormals,
                      kind="fnuz")
    if fmt.zero:
        return Format(fmt.exponent_bits, fmt.mantissa_bits, fmt.bias,
                      subnormals=fmt.subnormals, kind=fmt.kind)
    return Format(fmt.exponent_bits + 1, fmt.mantissa_bits, 2 * cast(int, fmt.bias) + 1,
                  subnormals=False)


def settle(r: np.ndarray, zero_in: np.ndarray | bool, fmt: Format,
           saturate: bool, to_inf: bool = True) -> np.ndarray:
    """The unsigned format's result from ``r``, the twin's rounding of the input, and
    ``zero_in``, where the input is exactly zero. ``to_inf``: whether the rounding
    mode sends a positive overflow to inf (where the format has inf)."""
    r = np.array(r, dtype=np.float64)
    # No negative value, also one that rounds to -0 (as ml_dtypes): not a number of the
    # format; only a zero input (-0 included) gives zero.
    r[(r < 0) | ((r == 0) & np.signbit(r) & ~np.asarray(zero_in, dtype=bool))] = np.nan
    r += 0.0                             # -0 -> +0: no sign bit
    if not fmt.zero:
        tiny = (r < fmt.smallest_normal) & ~np.asarray(zero_in, dtype=bool)
        r[tiny] = fmt.smallest_normal                                  # underflow
        r[r == 0] = np.nan                                             # exact zero
        big = r > fmt.max
        r[big] = fmt.max if saturate else np.nan
    elif fmt.max < twin(fmt).max:
        big = np.isfinite(r) & (r > fmt.max)          # beyond fmt.max, within the twin's
        if saturate or (fmt.has_inf and not to_inf):
            r[big] = fmt.max
        else:
            r[big] = np.inf if fmt.has_inf else np.nan
    return r
