"""Error-free transformations on float64 arrays, and round-to-odd of their results.

TwoSum gives ``s + t == a + b`` exactly; `odd` turns an exact ``hi + lo`` into one
float64 value that rounds, once, as ``hi + lo`` would (for formats of at most 51 bits).
"""

from __future__ import annotations

import numpy as np

__all__ = ["two_sum", "two_sum_into", "odd"]


def two_sum(a, b):
    """TwoSum (Knuth): s + t == a + b exactly and s == fl(a + b), for finite s."""
    s = a + b
    bb = s - a
    t = (a - (s - bb)) + (b - bb)
    return s, t

def two_sum_into(a, b, bufs):
    """TwoSum (Knuth) in work buffers: (s, t) with s == fl(a + b) and s + t == a + b
    exactly, for finite s; overwrites ``a`` and ``b`` (t is returned in ``b``)."""
    s, bb = bufs.tmp[:a.size], bufs.tmp2[:a.size]
    np.add(a, b, out=s)
    np.subtract(s, a, out=bb)
    np.subtract(b, bb, out=b)                  # b - bb
    np.subtract(s, bb, out=bb)
    np.subtract(a, bb, out=a)                  # a - (s - bb)
    np.add(a, b, out=b)                        # TwoSum: s + t == a + b exactly
    return s, b

def odd(hi, lo, out):
    """Round-to-odd of the exact value ``v`` at float64's precision.

    ``hi`` is either float64 neighbour of ``v`` (a faithful rounding; ±0 carries
    ``v``'s sign) and ``lo`` has the sign of ``v - hi`` (zero iff ``v == hi``).
    An inexact ``v`` becomes whichever neighbour has an odd last bit: it lies on the
    same side of every point of a format of at most 51 bits, and of its midpoints,
    as ``v`` does, so rounding it once in any mode rounds ``v`` correctly.
    """
    nz = lo != 0
    if not nz.any():
        return hi
    hb, ob = hi.view(np.uint64), out.view(np.uint64)
    np.bitwise_xor(hb, lo.view(np.uint64), out=ob)
    np.right_shift(ob, np.uint64(63), out=ob)     # 1 where lo points toward zero
    ob &= nz
    np.subtract(hb, ob, out=ob)                 # even hi, lo toward zero: the lower neighbour
    ob |= nz                                    # even hi, lo away from zero: the upper one
    return out
