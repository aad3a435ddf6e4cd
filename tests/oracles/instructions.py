"""References of matrix-unit instructions, written from their descriptions:
NVIDIA's grouped fused dot-add on Fractions (MMA-Sim's README §5.2), Intel AMX's
TDPBF16PS on Fractions (the SDM's pseudocode), and XLA's multi-pass algorithms in
plain float32 NumPy.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

import lowprec as lp

__all__ = ["nv_reference", "amx_reference", "multipass_reference"]


# -- README §5.2 on Fractions, for matmul's chaining and padding ------------------------

def _split(x, emin):
    """(s, e) with x = s * 2**e, e = max(floor(log2|x|), emin); a zero gets -126."""
    if x == 0:
        return Fraction(0), -126
    e = max(math.frexp(x)[1] - 1, emin)
    return Fraction(x) / Fraction(2) ** e, e


def _round_fp16(v):
    return float(lp.round(float(v), "fp16")) if v else 0.0   # exact v: one rounding


def nv_reference(a, b, c, block, F, emin_in):
    """MMA-Sim's NVIDIA fused dot-add, chained over groups of ``block`` (zero-padded),
    FP16 output, computed term by term on Fractions."""
    d = c
    for j in range(0, len(a), block):
        ga, gb = list(a[j:j + block]), list(b[j:j + block])
        ga += [0.0] * (block - len(ga))
        gb += [0.0] * (block - len(gb))
        terms = []
        for x, y in zip(ga, gb):
            (sx, ex), (sy, ey) = _split(x, emin_in), _split(y, emin_in)
            terms.append((sx * sy, ex + ey))
        terms.append(_split(d, -14))
        E = max(e for _, e in terms)
        total = Fraction(0)
        for s, e in terms:
            t = s * Fraction(2) ** (F + e - E)
            total += math.trunc(t)                       # toward zero, F bits below 2**E
        d = _round_fp16(total * Fraction(2) ** (E - F))
    return d


# -- AMX TDPBF16PS, from the SDM's description ----------------------------------------

def _rne32(q):
    """q (a Fraction) rounded to nearest even into FP32, subnormals kept, >= 2**128 inf."""
    if q == 0:
        return 0.0
    m = abs(q)
    e = m.numerator.bit_length() - m.denominator.bit_length()
    if Fraction(2) ** e > m:
        e -= 1                                    # now 2**e <= m < 2**(e + 1)
    quantum = Fraction(2) ** (max(e, -126) - 23)
    v = round(m / quantum) * quantum              # Fraction's round: ties to even
    return math.copysign(math.inf if v >= 2**128 else float(v), q)


def amx_reference(a, b, c):
    daz = lambda x: math.copysign(0.0, x) if abs(x) < 2.0**-126 else x   # noqa: E731
    ftz = lambda x: math.copysign(0.0, x) if abs(x) < 2.0**-126 else x   # noqa: E731
    acc = ftz(c)
    for x, y in zip(a, b):
        x, y = daz(x), daz(y)
        exact = Fraction(acc) + Fraction(x) * Fraction(y)
        r = _rne32(exact)
        if exact == 0:                            # IEEE: x + y = 0 exactly is +0 (RNE)
            r = -0.0 if (math.copysign(1, acc) < 0 and math.copysign(1, x * y) < 0) else 0.0
        acc = ftz(r)
    return acc


# -- XLA's multi-pass algorithms in float32 ----------------------------------------------

def multipass_reference(a, b, c, split, pieces, terms):
    """The description in float32 NumPy (ml_dtypes' RNE casts for the splits): pieces
    by rounding what is left, each pass a left-to-right float32 accumulation onto the
    previous, NaN -> 0 before hi * hi, then + c."""
    f32 = np.float32

    def parts(x):
        out, rest = [], x.astype(f32)
        for _ in range(pieces):
            p = split(rest)
            out.append(p)
            rest = (rest - p).astype(f32)
        return out

    pa, pb = parts(a), parts(b)
    acc = np.zeros((a.shape[0], b.shape[1]), f32)
    for n, (i, j) in enumerate(terms):
        if n == len(terms) - 1:
            acc = np.where(np.isnan(acc), f32(0), acc)
        for k in range(a.shape[1]):       # products of two 8-bit pieces: exact in float32
            acc = (acc + pa[i][:, k:k + 1] * pb[j][k:k + 1, :]).astype(f32)
    return (acc + c.astype(f32)).astype(f32).astype(np.float64)
