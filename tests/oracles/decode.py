"""Values of a format decoded from its definition alone (DESIGN.md's format table): the
oracle of `lowprec.testing.representable_values` and of the formats' derived constants.
Nothing here calls lowprec's decoding.
"""

from __future__ import annotations

import functools
from fractions import Fraction

__all__ = ["decode_layout", "decode_by_definition"]


@functools.cache
def decode_layout(e, m, bias, subnormals=True, kind="ieee"):
    """Finite non-negative values, as sorted Fractions, of the format with ``e`` exponent
    bits, ``m`` mantissa bits, ``bias`` and ``kind``, from every bit pattern with the sign
    bit clear: exponent field 0 is zero and the subnormals (none without ``subnormals``);
    an 'ieee' format's top exponent field is inf and NaN, an 'fn' format's all-ones
    pattern is NaN; 'fnuz' and 'finite' formats have no special positive pattern."""
    top, out = 2**e - 1, set()
    for code in range(2 ** (e + m)):
        E, M = divmod(code, 2**m)
        if (kind == "ieee" and E == top) or (kind == "fn" and E == top and M == 2**m - 1):
            continue                                       # inf and NaN
        if E == 0:
            if M and not subnormals:
                continue                                   # no subnormals
            out.add(Fraction(M, 2**m) * Fraction(2) ** (1 - bias))
        else:
            out.add((1 + Fraction(M, 2**m)) * Fraction(2) ** (E - bias))
    return tuple(sorted(out))


def decode_by_definition(fmt):
    """`decode_layout` of a format object's own parameters (its fields, not its derived
    constants)."""
    return decode_layout(fmt.exponent_bits, fmt.mantissa_bits, fmt.bias, fmt.subnormals,
                         fmt.kind)
