"""The exact path: the elements whose operands float64 cannot hold exactly.

64-bit integers, long doubles and Python ints wider than 64 bits (rare) are computed
element by element on Python integers and Fractions, a block at a time, and handed in
the normalised form of the kernels' slow paths to the same final rounding. Nothing
here may round an exact result before that one rounding.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..engine.kernel import subset_plan
from .fp64 import fp64_scaled_nearest, rescale
from .kernels import (
    add_kernel,
    copy_kernel,
    div_kernel,
    fma_kernel,
    mul_kernel,
    sqrt_kernel,
    sub_kernel,
)

__all__ = ["with_exact"]


#: Bits of the integer significand that the exact path rounds from: 67 below the 53
#: of FP64, so that a sticky bit read as half a unit moves no probability of "sr" by
#: more than 2**-67 of the gap.
_EXACT_BITS = 120
_EXACT_BLOCK = 4096     # elements per block of the exact path


def _odd_float(t):
    """The Python int ``t`` rounded to odd at float64's precision (exact if it fits;
    otherwise of ``t``'s side and never a power of two, so never a false tie)."""
    f = float(t)
    if int(f) != t and (int(math.frexp(f)[0] * 2.0 ** 53) & 1) == 0:
        f = math.nextafter(f, math.inf if t > int(f) else -math.inf)
    return f


def _split_int(q, sticky, k):
    """(h, l, E) of ``v = (q + s) * 2**-k``, ``q`` a positive int of 60 bits or more,
    ``s`` in (0, 1) when ``sticky`` else 0: ``h`` the 53-bit RN (ties to even) of
    ``v * 2**-E`` in [1, 2], ``l`` the rest, rounded to odd, as `fp64._fp64_slow` and
    `fp64._scale_back` want them."""
    shift = q.bit_length() - 53
    H = q >> shift
    R = q - (H << shift)
    half = 1 << (shift - 1)
    if R > half or (R == half and (sticky or H & 1)):
        H += 1
    # 2 * (v * 2**k - H * 2**shift) with s read as 1/2: the same side of 0 as the exact
    # remainder, and within 2**-shift of the gap 2**shift of it.
    t = 2 * (q - (H << shift)) + int(sticky)
    # Exact scalings: H has 53 bits, |t| < 2**(shift + 2) far above float64's underflow.
    return math.ldexp(float(H), -52), math.ldexp(_odd_float(t), -53 - shift), 52 + shift - k


def _from_rational(v):
    """(h, l, E) of the nonzero Fraction ``v`` (negative: h and l negated)."""
    num, den = abs(v.numerator), v.denominator
    k = _EXACT_BITS - (num.bit_length() - den.bit_length())
    q, r = divmod(num << k, den) if k >= 0 else divmod(num, den << -k)
    h, l_, E = _split_int(q, r != 0, k)     # q has _EXACT_BITS or one more bits
    return (-h, -l_, E) if v < 0 else (h, l_, E)


def _from_sqrt(v):
    """(h, l, E) of the square root of the positive Fraction ``v``."""
    num, den = v.numerator, v.denominator
    k = (2 * _EXACT_BITS - (num.bit_length() - den.bit_length())) // 2 + 1
    X, r = divmod(num << 2 * k, den) if k >= 0 else divmod(num, den << -2 * k)
    q = math.isqrt(X)      # floor(sqrt(v) * 2**k): floor(sqrt(y)) == isqrt(floor(y))
    return _split_int(q, r != 0 or q * q != X, k)


def _exact_values(xc, hi, lo, idx):
    """The exact values (Fractions) of the chunk ``xc`` at ``idx``."""
    kind = xc.dtype.kind
    if kind in "iub":
        return [Fraction(int(v)) for v in xc[idx].tolist()]
    if kind == "O":
        return [Fraction(v) if isinstance(v, float) else Fraction(int(v))
                for v in xc[idx].tolist()]
    # Floats, long doubles included: hi + lo is exact (`as_real_array`).
    his = hi[idx].tolist()
    los = [0.0] * len(his) if lo is None else lo[idx].tolist()
    return [Fraction(h) + Fraction(l_) for h, l_ in zip(his, los)]


def _exact_result(kernel, xs, hs, mode):
    """(h, l, E) of one exact result, from the exact operands ``xs`` (Fractions) and
    their float64 parts ``hs`` (for the sign of a zero); operands finite, no x / 0."""
    rd = mode == "rd"
    if kernel is sqrt_kernel:
        return _from_sqrt(xs[0])
    if kernel is copy_kernel:
        v = xs[0]
    elif kernel is add_kernel:
        v = xs[0] + xs[1]
    elif kernel is sub_kernel:
        v = xs[0] - xs[1]
    elif kernel is mul_kernel:
        v = xs[0] * xs[1]
    elif kernel is div_kernel:
        v = xs[0] / xs[1]
    else:
        v = xs[0] * xs[1] + xs[2]
    if v != 0:
        return _from_rational(v)
    if kernel in (mul_kernel, div_kernel):      # a zero factor or dividend
        zero = -0.0 if math.copysign(1, hs[0]) != math.copysign(1, hs[1]) else 0.0
    elif kernel is fma_kernel and (xs[0] == 0 or xs[1] == 0):
        p = hs[0] * hs[1]                         # ±0 with the product's sign
        zero = -((-p) + (-hs[2])) if rd else p + hs[2]
    else:
        # Opposite nonzero terms (one carries a tail) cancelling exactly (IEEE 754 6.3).
        zero = -0.0 if rd else 0.0
    return zero, 0.0, 0


def with_exact(plan, kernel, raw, parts, w, counts):
    """``kernel`` on a chunk whose operands include values float64 cannot hold: those
    elements (finite operands, no division by zero, no negative square root) are
    computed exactly, rounded once; the others, whose results depend only on signs and
    infinities, by ``kernel`` on the float64 parts."""
    his = [h for h, _ in parts]
    tail = np.logical_or.reduce([lo != 0 for _, lo in parts if lo is not None])
    sel = tail & np.logical_and.reduce([np.isfinite(h) for h in his])
    if kernel is div_kernel:
        sel &= his[1] != 0
    elif kernel is sqrt_kernel:
        sel &= his[0] > 0
    idx = np.flatnonzero(sel)
    if idx.size == 0:
        return kernel(plan, *his, w, counts)
    # 1 op 1 (and 1 * 1 + 1) is exact: the kernel counts no flags for these elements.
    stand_ins = []
    for h in his:
        h = np.array(h)
        h[idx] = 1.0
        stand_ins.append(h)
    hi, lo = kernel(plan, *stand_ins, w, counts)
    # Python numbers cost a few hundred bytes each: a block at a time bounds them.
    for start in range(0, idx.size, _EXACT_BLOCK):
        block = idx[start:start + _EXACT_BLOCK]
        exact = [_exact_values(xc, h, lo_, block) for xc, (h, lo_) in zip(raw, parts)]
        floats = [h[block].tolist() for h in his]
        hle = [_exact_result(kernel, xs, hs, plan.mode)
               for xs, hs in zip(zip(*exact), zip(*floats))]
        h, l_, E = (np.array(c) for c in zip(*hle))
        E = E.astype(np.int64)
        ref = fp64_scaled_nearest(h, l_, E) if plan.identity else None
        hi[block] = rescale(subset_plan(plan, block), h, l_, E, ref, counts)[0]
    if lo is not None:
        lo[idx] = 0.0
    return hi, lo
