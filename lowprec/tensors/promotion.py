"""`result_format` and the explicit `PROMOTION` table: the format of a mixed result.

Two operands of different formats give a result in the smallest storage format that
holds every value of both exactly (inf, NaN and -0 included); a pair that no format
holds is refused with `TypeError`, never computed in float64. This module knows
formats only: it never sees a Tensor or the context.
"""

from __future__ import annotations

from ..formats import (
    BF16,
    FP4_E2M1,
    FP6_E2M3,
    FP6_E3M2,
    FP8_E4M3,
    FP8_E4M3FNUZ,
    FP8_E5M2,
    FP8_E5M2FNUZ,
    FP16,
    FP32,
    FP64,
    TF32,
    Format,
    FormatLike,
)
from ..formats import format as _format

__all__ = ["result_format", "PROMOTION", "holds"]

#: Storage formats results may be promoted to, smallest first (TF32 is a compute
#: mode, not a storage type: FP16 with BF16 gives FP32, as in PyTorch).
_LADDER = (FP4_E2M1, FP6_E2M3, FP6_E3M2, FP8_E4M3, FP8_E5M2, FP8_E4M3FNUZ, FP8_E5M2FNUZ,
           FP16, BF16, FP32, FP64)


def holds(big: Format, small: Format) -> bool:
    """Whether every value of ``small`` (inf and NaN included) is a value of ``big``.

    Examples
    --------
    >>> import lowprec as lp
    >>> from lowprec.tensors.promotion import holds
    >>> holds(lp.FP32, lp.BF16), holds(lp.FP16, lp.BF16)
    (True, False)
    """
    def reach(f):   # the exponent of the format's smallest nonzero magnitude
        return f.emin - (f.mantissa_bits if f.subnormals else 0)

    return (big.p >= small.p and big.max >= small.max and reach(big) <= reach(small)
            and (big.has_inf or not small.has_inf) and (big.has_nan or not small.has_nan)
            and (big.has_negative_zero or not small.has_negative_zero))


def result_format(a: FormatLike, b: FormatLike) -> Format:
    """The format of a result from operands of formats ``a`` and ``b``.

    Same format: that format. Otherwise the smallest storage format (see the
    table in the docs) that holds every value of both exactly.

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.result_format("fp16", "bf16"), lp.result_format("e4m3", "fp16")
    (lp.FP32, lp.FP16)
    >>> lp.result_format("e4m3", "e5m2")
    lp.FP16
    """
    a, b = _format(a), _format(b)
    if a == b:
        return a
    found = PROMOTION.get((a, b))
    if found is not None:
        return found
    for fmt in _LADDER:
        if holds(fmt, a) and holds(fmt, b):
            return fmt
    raise TypeError(f"no format holds both {a!r} and {b!r} exactly; convert one "
                    "explicitly with .astype()")


#: The explicit promotion table for pairs of named formats (symmetric).
PROMOTION = {(a, b): next(f for f in _LADDER if holds(f, a) and holds(f, b))
             for a in (*_LADDER, TF32) for b in (*_LADDER, TF32) if a != b}
