"""Error-free transformations on float64 arrays, and round-to-odd of their results.

- TwoSum gives ``s + t == a + b`` exactly.
- Dekker's product gives ``p + e == a*b`` exactly. It splits each factor into two
  halves of 26 bits.
- Three TwoSums give ``s + t + u == p + e + c`` exactly.
- `odd` turns an exact ``hi + lo`` into one float64 value. That value rounds once as
  ``hi + lo`` would, for formats of at most 51 bits.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from .float64 import operand

__all__ = ["two_sum", "two_sum_into", "two_sum_err", "split", "two_prod_err",
           "two_prod_err_alloc", "three_sum", "three_sum_parts", "odd"]

_U = np.uint64
_SPLIT_ADD = operand(1 << 26)
_SPLIT_MASK = operand(0xFFFF_FFFF_F800_0000)      # clears the low 27 of 52 fraction bits
_SIGN_SHIFT = operand(63)

#: The float64 arrays every transform reads and writes.
F64 = NDArray[np.float64]


def two_sum(a: F64, b: F64) -> tuple[F64, F64]:
    """TwoSum (Knuth): s + t == a + b exactly and s == fl(a + b), for finite s."""
    s = a + b
    bb = s - a
    t = (a - (s - bb)) + (b - bb)
    return s, t

def two_sum_into(a: F64, b: F64, bufs: Any) -> tuple[F64, F64]:
    """TwoSum (Knuth) in work buffers: (s, t) with s == fl(a + b) and s + t == a + b
    exactly, for finite s.

    It overwrites ``a`` and ``b``, and t is returned in ``b``."""
    s, bb = bufs.tmp[:a.size], bufs.tmp2[:a.size]
    np.add(a, b, out=s)
    np.subtract(s, a, out=bb)
    np.subtract(b, bb, out=b)                  # b - bb
    np.subtract(s, bb, out=bb)
    np.subtract(a, bb, out=a)                  # a - (s - bb)
    np.add(a, b, out=b)                        # TwoSum: s + t == a + b exactly
    return s, b


def two_sum_err(a: F64, b: F64, s: F64, t: F64, tmp: F64) -> F64:
    """t = a + b - s exactly, for s == fl(a + b) (Knuth's TwoSum, into ``t``)."""
    np.subtract(s, a, out=tmp)                 # b' = s - a
    np.subtract(s, tmp, out=t)                 # a' = s - b'
    np.subtract(a, t, out=t)                   # a - a'
    np.subtract(b, tmp, out=tmp)               # b - b'
    np.add(t, tmp, out=t)                      # TwoSum: s + t == a + b exactly
    return t


def split(a: F64, hi: F64, lo: F64) -> None:
    """a == hi + lo with hi and lo of at most 26 significant bits each."""
    hb = hi.view(_U)
    # Rounding the bit pattern at bit 26 (ties away) leaves 26 significant bits in hi;
    # lo = a - hi is exact and |lo| <= 2**26 units of a's last place: 26 bits with sign.
    np.add(a.view(_U), _SPLIT_ADD, out=hb)
    np.bitwise_and(hb, _SPLIT_MASK, out=hb)
    np.subtract(a, hi, out=lo)


def two_prod_err(a: F64, b: F64, p: F64, e: F64,
                 w1: F64, w2: F64, w3: F64, w4: F64) -> F64:
    """e = a*b - p exactly, for p == fl(a*b) (Dekker), unless the range forbids it.

    Exact when |p| is in [2**-960, 2**1021] and a, b are finite below 2**1023.99.
    Otherwise the result may be wrong: callers check the range and that e is finite.
    """
    split(a, w1, w2)
    split(b, w3, w4)
    np.multiply(w1, w3, out=e)                 # products of 26-bit halves are exact
    np.subtract(e, p, out=e)
    np.multiply(w1, w4, out=w1)
    np.add(e, w1, out=e)
    np.multiply(w2, w3, out=w3)
    np.add(e, w3, out=e)
    np.multiply(w2, w4, out=w2)
    np.add(e, w2, out=e)                       # Dekker: p + e == a*b exactly
    return e


def two_prod_err_alloc(a: F64, b: F64, p: F64) -> F64:
    """`two_prod_err` in buffers of its own: e = a*b - p exactly, as that says."""
    e = np.empty_like(p)
    w = [np.empty_like(p) for _ in range(4)]
    return two_prod_err(a, b, p, e, *w)


def three_sum(p: F64, e: F64, c: F64) -> tuple[F64, F64]:
    """(s, d): s a faithful rounding of p + e + c, d with the sign of p + e + c - s.

    Needs |e| <= ulp(p)/2 (e is p's product error) and no overflow."""
    s3, t3, t2 = three_sum_parts(p, e, c)
    # fl(t3 + t2) has the sign of t3 + t2, which is exact - s3.
    return s3, t3 + t2


def three_sum_parts(p: F64, e: F64, c: F64) -> tuple[F64, F64, F64]:
    """(s, t, u): p + e + c == s + t + u exactly, s faithful, |t + u| < ulp(s)."""
    s1, t1 = two_sum(p, c)                # p + c == s1 + t1
    s2, t2 = two_sum(t1, e)               # t1 + e == s2 + t2
    s3, t3 = two_sum(s1, s2)              # exact value == s3 + t3 + t2
    # Either p + c is exact (t1 = t2 = 0: s3 = RN of the exact value), or
    # |s1| >= max(|p|, |c|)/2, so |s2| <= 2 ulp(s1) and |t2| <= 2**-49 ulp(s3):
    # s3 is faithful.
    return s3, t3, t2


def odd(hi: F64, lo: F64, out: F64) -> F64:
    """Round-to-odd of the exact value ``v`` at float64's precision.

    ``hi`` is either float64 neighbour of ``v``, a faithful rounding. A zero ``hi``
    carries ``v``'s sign. ``lo`` has the sign of ``v - hi``, zero iff ``v == hi``.
    An inexact ``v`` becomes whichever neighbour has an odd last bit. That neighbour
    lies on the same side of every point of a format of at most 51 bits, and of its
    midpoints, as ``v`` does. So rounding it once in any mode rounds ``v`` correctly.
    """
    if not np.count_nonzero(lo):                # -0.0 counts as zero, NaN does not
        return hi
    nz = lo != 0
    hb, ob = hi.view(np.uint64), out.view(np.uint64)
    np.bitwise_xor(hb, lo.view(np.uint64), out=ob)
    np.right_shift(ob, _SIGN_SHIFT, out=ob)       # 1 where lo points toward zero
    ob &= nz
    np.subtract(hb, ob, out=ob)                 # even hi, lo toward zero: the lower neighbour
    ob |= nz                                    # even hi, lo away from zero: the upper one
    return out
