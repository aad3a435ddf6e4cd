"""Correctly rounded arithmetic in any format: ``add sub mul div sqrt fma``, ``sum``, ``dot``.

Each operation computes, in float64, an unevaluated pair ``hi + lo`` that pins down
the exact real result (error-free transformations: TwoSum, Dekker's product, exact
remainders of division and square root), collapses it to the float64 value
round-to-odd would give (innocuous for formats of at most 51 bits, so every mode
then sees the exact result's side of every rounding boundary), and rounds that
once with the kernel of :mod:`lowprec.rounding`, chunk by chunk. Operands whose
error terms would overflow or underflow are normalised by powers of two first.
Operands that float64 cannot hold (64-bit integers, long doubles, wider Python
ints: rare) take an exact path on Python integers, element by element, that
hands the same normalised form to the same final rounding.
This module must never round a result twice (float64 first, then the format: that
is the double rounding it exists to avoid), never read a global default, and never
modify its inputs.
"""

from __future__ import annotations

import inspect
import math
import numbers
import warnings
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..engine import parallel
from ..engine.checks import broadcast_shape, check_bool, check_int, check_mode
from ..engine.eft import odd, two_sum
from ..engine.inputs import as_array, as_real_array, signalling_nans
from ..engine.kernel import draw, round_fp64, round_into, steps_toward_lo
from ..engine.parallel import in_spans
from ..engine.plan import plan as _rounding_plan
from ..formats import FormatLike
from ..status import recording

__all__ = ["add", "sub", "mul", "div", "sqrt", "fma", "sum", "dot", "ORDERS"]

#: Summation orders of `sum` and `dot`.
ORDERS = ("sequential", "pairwise", "kahan")

_U = np.uint64
_ABS = _U(0x7FFF_FFFF_FFFF_FFFF)
# Fast-path range: exponents in [-960, 1020] keep every product, remainder and
# error term of the transformations below normal and finite.
_LO_BITS = _U((1023 - 960) << 52)
_HI_BITS = _U((1023 + 1021) << 52)
_SPLIT_ADD = _U(1 << 26)
_SPLIT_MASK = _U(0xFFFF_FFFF_F800_0000)      # clears the low 27 of 52 fraction bits
_MAX64 = np.finfo(np.float64).max
#: Bound on the extra memory of one operation, in float64 chunks of ``CHUNK`` elements
#: per thread (48 MiB at 2**17), whatever the input's size and dtype.
MEMORY_CHUNKS = 48
_TINY64 = 2.0 ** -1022
_HALF_TINY64 = 2.0 ** -1023


# -- error-free transformations (float64, elementwise) --------------------------

def _two_sum_err(a, b, s, t, tmp):
    """t = a + b - s exactly, for s == fl(a + b) (Knuth's TwoSum, into ``t``)."""
    np.subtract(s, a, out=tmp)                 # b' = s - a
    np.subtract(s, tmp, out=t)                 # a' = s - b'
    np.subtract(a, t, out=t)                   # a - a'
    np.subtract(b, tmp, out=tmp)               # b - b'
    np.add(t, tmp, out=t)                      # TwoSum: s + t == a + b exactly
    return t


def _split(a, hi, lo):
    """a == hi + lo with hi and lo of at most 26 significant bits each."""
    hb = hi.view(_U)
    # Rounding the bit pattern at bit 26 (ties away) leaves 26 significant bits in hi;
    # lo = a - hi is exact and |lo| <= 2**26 units of a's last place: 26 bits with sign.
    np.add(a.view(_U), _SPLIT_ADD, out=hb)
    np.bitwise_and(hb, _SPLIT_MASK, out=hb)
    np.subtract(a, hi, out=lo)


def _two_prod_err(a, b, p, e, w1, w2, w3, w4):
    """e = a*b - p exactly, for p == fl(a*b) (Dekker), unless the range forbids it.

    Exact when |p| is in [2**-960, 2**1021] and a, b are finite below 2**1023.99;
    otherwise the result may be wrong (callers check the range and that e is finite).
    """
    _split(a, w1, w2)
    _split(b, w3, w4)
    np.multiply(w1, w3, out=e)                 # products of 26-bit halves are exact
    np.subtract(e, p, out=e)
    np.multiply(w1, w4, out=w1)
    np.add(e, w1, out=e)
    np.multiply(w2, w3, out=w3)
    np.add(e, w3, out=e)
    np.multiply(w2, w4, out=w2)
    np.add(e, w2, out=e)                       # Dekker: p + e == a*b exactly
    return e


def _two_prod_err_alloc(a, b, p):
    e = np.empty_like(p)
    w = [np.empty_like(p) for _ in range(4)]
    return _two_prod_err(a, b, p, e, *w)


def _in_range(bits, buf):
    """Whether every |value| (given as raw bits) lies in the fast-path range."""
    np.bitwise_and(bits, _ABS, out=buf)
    return buf.min() >= _LO_BITS and buf.max() <= _HI_BITS


def _out_of_range(x):
    ax = x.view(_U) & _ABS
    return (ax < _LO_BITS) | (ax > _HI_BITS)


# -- rescaling of normalised results ----------------------------------------------

def _scale_back(x1, E):
    """A float64 that any format of <= 51 bits rounds as it rounds ``x1 * 2**E``.

    ``x1`` is a round-to-odd value near 1 (nonzero, finite), ``E`` an int array."""
    x = np.ldexp(x1, E)      # exact unless it overflows or lands below 2**-1022
    big = np.isinf(x)
    # Beyond 2**1024 - 2**970 > max + ulp/2 of every format of <= 51 bits: max64 stands in.
    x[big] = np.copysign(_MAX64, x1[big])
    small = np.abs(x) < _TINY64
    if small.any():
        xs, Es = x[small], E[small]
        # ldexp(xs, -Es) is exact (back near x1): d has the sign of x1*2**E - xs.
        d = x1[small] - np.ldexp(xs, -Es)
        # Round-to-odd at 2**-1074 leaves 52 bits below any format's quantum (>= 2**-1022).
        x[small] = odd(xs, d, np.empty_like(xs))
    return x


def _fp64_scaled_nearest(h, l_, E):
    """RN(v) in FP64 for ``v = (h + l) * 2**E``, ``h`` and ``l`` as `_nearest` makes them."""
    x = np.ldexp(h, E)       # exact, or inf (RN(v) is too: h is v's 53-bit RN), or subnormal
    sub = np.abs(x) <= _TINY64
    if sub.any():
        # Below 2**-1022 ldexp rounds h once more, which rounds v twice only where h
        # is a midpoint of the subnormal grid: l then says on which side v lies.
        xs, hs, ls, Es = x[sub], h[sub], l_[sub], E[sub]
        # Exact: h less its rounding to a coarser grid (h's last bits, or h when xs == 0).
        d = hs - np.ldexp(xs, -Es)
        # h and half the grid's quantum are multiples of h's 53-bit spacing, |l| at most
        # half of it: only |d| == half leaves v's side to l.
        half = np.ldexp(1.0, -1075 - Es)
        off = (np.abs(d) == half) & (ls != 0) & (np.signbit(ls) == np.signbit(d))
        xs[off] = np.nextafter(xs[off], np.copysign(np.inf, d[off]))
        x[sub] = xs
    return x


def _fp64_slow(plan, h, l_, E, ref, counts):
    """FP64 (p = 53) results of normalised elements: ``v = (h + l) * 2**E`` exactly,
    or, where ``h + l`` is not a midpoint, ``l`` of exact sign and (under sr) of
    the size of the error to within a rounding; ``h`` the 53-bit RN of ``v * 2**-E``,
    ``ref == RN(v)``."""
    out = np.array(ref, dtype=np.float64)
    mode = plan.mode
    inf = np.isinf(ref)
    if inf.any():
        out[inf] = _fp64_beyond(plan, h[inf], l_[inf], E[inf], counts)
    fin = ~inf
    hf, lf, Ef, rf = h[fin], l_[fin], E[fin], ref[fin]
    back = np.ldexp(rf, -Ef)                       # exact: ref * 2**-E lies near h
    # h - back is exact (Sterbenz, or back == 0), so fl(that + l) has the sign of v - ref.
    d = (hf - back) + lf
    n = np.nextafter(rf, np.copysign(np.inf, d))
    # Past max the next point of an unbounded exponent range is 2**1024 (scaled: exact).
    n2 = np.where(np.isinf(n), np.copysign(np.ldexp(1.0, 1024 - Ef), rf), np.ldexp(n, -Ef))
    take = steps_toward_lo(mode, rf, d)
    if mode == "rne":
        take = np.zeros(d.shape, bool)
    elif mode == "rna":
        take = _midpoint(hf, lf, back, n2) & (np.abs(n) > np.abs(rf))
    elif mode == "sr":
        frac = np.abs(d) / np.abs(n2 - back)
        take = draw(plan, np.empty(d.shape)) < frac      # never when d == 0
    res = np.where(take, n, rf)
    final = res if plan.subnormals else _fp64_flush(plan, rf, d, Ef, res, counts)
    out[fin] = final
    inexact = (d != 0) | (final != rf)
    counts["inexact"] += int(np.count_nonzero(inexact))
    counts["overflow"] += int(np.count_nonzero(inexact & np.isinf(final)))
    counts["underflow"] += int(np.count_nonzero(inexact & _fp64_tiny(plan, hf, lf, Ef, final)))
    return out


def _past_max_to_inf(mode, neg, nearest_up):
    """Whether a deterministic mode rounds a value beyond ±max (sign bits ``neg``) to
    ±inf, the next point of an unbounded exponent range, rather than to ±max.
    ``nearest_up``: whether the values are at or beyond the tie max + ulp/2."""
    if mode in ("rne", "rna"):
        return np.full(neg.shape, nearest_up)
    if mode == "ru":
        return ~neg
    if mode == "rd":
        return neg.copy()
    return np.zeros(neg.shape, bool)     # rz; ro: max is odd


def _fp64_beyond(plan, h, l_, E, counts):
    """FP64 results of normalised elements with ``RN(v) == ±inf`` (``h == RN53(v *
    2**-E)``, so ``|v| >= max + ulp/2``), with their flags: overflow where the mode's
    rounding with an unbounded exponent exceeds max, as `_fp64_sum_overflow` counts it."""
    neg = np.signbit(h)
    top = np.copysign(np.ldexp(1.0, 1024 - E), h)      # ±2**1024 scaled by 2**-E: exact
    # h rounds v monotonically and 2**1024 has 53 bits: |v| < 2**1024 exactly when h is
    # that point and l points back toward zero.
    below = (h == top) & (l_ != 0) & (np.signbit(l_) != neg)
    if plan.mode != "sr":
        up = _past_max_to_inf(plan.mode, neg, nearest_up=True)
    else:
        # Up with probability (|v| - max) / 2**971, or 1 from 2**1024 on. Scaled by 2**-E:
        # |h| - max is exact (Sterbenz) where below, and l shifts it by its own rounding.
        up = np.ones(h.shape, bool)
        frac = ((np.abs(h[below]) - np.ldexp(_MAX64, -E[below])) - np.abs(l_[below])) \
            / np.ldexp(1.0, 971 - E[below])
        up[below] = draw(plan, np.empty(frac.shape)) < frac
    counts["overflow"] += int(np.count_nonzero(up | ~below))
    counts["inexact"] += h.size
    return np.copysign(np.where(up, np.inf, _MAX64), h)


def _fp64_tiny(plan, h, l_, E, final):
    """Tininess after rounding, as the rounding kernel detects it: whether v rounded to
    53 bits by the mode with an unbounded exponent lies below 2**-1022 (sr: the result)."""
    if plan.mode == "sr":
        return np.abs(final) < _TINY64
    mode = plan.mode
    # h == RN(v) at 53 bits (scaled by 2**-E, exact), l with the sign of v - h: the
    # directed and odd roundings step once toward l. rna differs from rne only on ties
    # whose lower neighbour is even, and 2**-1022 - 2**-1075 (53 ones) is odd.
    step = steps_toward_lo(mode, h, l_)
    if step is None:
        step = np.zeros(h.shape, bool)
    r = np.where(step, np.nextafter(h, np.copysign(np.inf, l_)), h)
    # |r| * 2**E < 2**-1022, read off the exponents (no rounding of r * 2**E).
    return (np.frexp(r)[1].astype(np.int64) - 1 + E < -1022) | (r == 0)


def _midpoint(h, l_, back, n2):
    """Whether ``h + l`` is exactly halfway between ``back`` and ``n2`` (all scaled
    by 2**-E, ``back`` the nearest). Needs ``l`` exact where it is nonzero (mul), or
    half the gap only at a midpoint (fma, by `_nearest`)."""
    # A midpoint of float64's subnormal range has at most 53 bits: it is h, and l == 0.
    # One of the normal range has 54 bits: h = RN(it) == back, and l is half the gap.
    half = np.where(l_ == 0, h - back, np.where(h == back, l_, 0.0))
    return 2 * half == n2 - back


def _fp64_flush(plan, rf, d, E, res, counts):
    """``res`` with the elements ``|v| < 2**-1022`` rounded once, from ``v`` itself, to
    FP64 without subnormals: ±0 or ±2**-1022 by the mode's rule (``rf == RN(v)``, ``d``
    with the sign of ``(v - rf) * 2**-E``). Counts the flushed ones."""
    ar = np.abs(rf)
    away = (d != 0) & (np.signbit(d) == np.signbit(rf))        # |v| > |rf|
    small = (ar < _TINY64) | ((ar == _TINY64) & (d != 0) & ~away)
    small &= (rf != 0) | (d != 0)                               # an exact 0 stays
    if not small.any():
        return res
    # Flushed: what rounding with subnormals gives is one (sr: RN, as `round` counts).
    sub = (rf if plan.mode == "sr" else res)[small]
    counts["flushed"] += int(np.count_nonzero((sub != 0) & (np.abs(sub) < _TINY64)))
    r, dr, ar_, aw = rf[small], d[small], ar[small], away[small]
    # |v| against 2**-1023: RN(v) is on v's side of that float64, or is it (then d decides).
    above = (ar_ > _HALF_TINY64) | ((ar_ == _HALF_TINY64) & aw)
    mode = plan.mode
    if mode == "rne":
        up = above
    elif mode == "rna":
        up = above | ((ar_ == _HALF_TINY64) & (dr == 0))
    elif mode == "rz":
        up = np.zeros(r.shape, bool)
    elif mode == "ru":
        up = ~np.signbit(r)
    elif mode == "rd":
        up = np.signbit(r)
    elif mode == "ro":
        up = np.ones(r.shape, bool)      # v is inexact; 2**-1022 is odd (1 * 2**-1022)
    else:
        # |v| * 2**1022: the correction is below 2**-53, and a lost (underflowed) one
        # is below the draw's resolution.
        frac = np.abs(np.ldexp(r, 1022) + np.ldexp(dr, E[small] + 1022))
        up = draw(plan, np.empty(r.shape)) < frac
    out = res.copy()
    out[small] = np.copysign(np.where(up, _TINY64, 0.0), r)
    return out


def _rescale(plan, h, l_, E, ref, counts):
    """(hi, lo) for normalised elements, as the chunk loop wants them."""
    if plan.fmt.p <= 51:
        return _scale_back(odd(h, l_, np.empty_like(h)), E), np.zeros_like(h)
    return _fp64_slow(plan, h, l_, E, ref, counts), np.zeros_like(h)


def _count_invalid(counts, result, *operands):
    bad = np.isnan(result)
    for x in operands:
        bad &= ~np.isnan(x)
    counts["invalid"] += int(np.count_nonzero(bad))


# -- per-chunk kernels: return (hi, lo) with hi faithful and lo's sign exact -------

class _Work:
    """Scratch buffers for ``n`` elements, reused across chunks."""

    _FLOATS = ("h", "l", "t1", "t2", "t3", "t4", "t5", "t6")

    def __init__(self, n):
        for name in self._FLOATS:
            setattr(self, name, np.empty(n))
        self.u = np.empty(n, _U)
        self.b = np.empty(n, bool)

    def take(self, k):
        w = _Work.__new__(_Work)
        for name in (*self._FLOATS, "u", "b"):
            setattr(w, name, getattr(self, name)[:k])
        return w


_ALL = slice(None)


def _needs_error(plan, hi, w):
    """The elements whose rounding may depend on more than ``hi = fl(x)``.

    The exact ``x`` lies within half a float64 ulp of ``hi``. Where ``hi`` is not a
    multiple of half the format's quantum (its low 51 - m bits are not all zero),
    the nearest such multiples (points of the format and their midpoints, two or
    more ulps apart) are beyond that reach, so ``x`` and ``hi`` round alike in every
    mode: only the other elements (and inf, NaN, zeros) need the error term.
    Returns None (no element), ``_ALL`` (most of them) or their indices."""
    m = plan.fmt.mantissa_bits
    if m > 50 or hi.size < 256:      # tiny arrays: the test would cost more than it saves
        return _ALL
    np.bitwise_and(hi.view(_U), _U((1 << (51 - m)) - 1), out=w.u)
    need = np.equal(w.u, 0, out=w.b)
    count = np.count_nonzero(need)
    if count == 0:
        return None
    if 8 * count >= need.size:
        return _ALL
    return np.flatnonzero(need)


def _with_error(plan, error, hi, w, counts, *operands):
    """(hi, lo) for a chunk: ``error`` fills in lo (and fixes hi where it must) on
    the elements that need it; lo is None where every error term is zero."""
    sel = _needs_error(plan, hi, w)
    if sel is None:
        return hi, None
    if sel is _ALL:
        return hi, error(plan, *operands, hi, w, counts)
    hs = hi[sel]
    ls = error(plan, *(x[sel] for x in operands), hs, _Work(hs.size), counts)
    hi[sel] = hs
    if ls is None:
        return hi, None
    lo = w.l
    lo.fill(0.0)
    lo[sel] = ls
    return hi, lo


def _zero_sign_rd(plan, s, a, b):
    """An exact zero sum is -0 under rd unless both terms are +0 (IEEE 754 6.3)."""
    if plan.mode != "rd":
        return
    z = s == 0
    if z.any():
        # -((-a) + (-b)) is the float64 sum with round-down's zero sign.
        s[z] = -((-a[z]) + (-b[z]))


def _add_kernel(plan, a, b, w, counts):
    s = np.add(a, b, out=w.h)
    return _with_error(plan, _add_error, s, w, counts, a, b)


def _sub_kernel(plan, a, b, w, counts):
    return _add_kernel(plan, a, np.negative(b), w, counts)


def _add_error(plan, a, b, s, w, counts):
    t = _two_sum_err(a, b, s, w.l, w.t1)
    if not np.isfinite(np.add.reduce(t)):
        _add_special(plan, a, b, s, t, counts)
    if plan.identity:
        # fl(a + b) == ±max with an error of its sign: max < |a + b| < max + ulp/2.
        past = np.flatnonzero((np.abs(s) == _MAX64) & (t != 0)
                              & (np.signbit(t) == np.signbit(s)))
        if past.size:
            s[past] = _fp64_past_max(plan, s[past], t[past], counts)
            t[past] = 0.0
    _zero_sign_rd(plan, s, a, b)
    return t


def _fp64_past_max(plan, s, t, counts):
    """FP64 results of finite sums ``s + t`` with ``s == ±max`` and ``0 < |t| < ulp/2`` of
    s's sign, with their flags: overflow where the mode rounds up to the next point of
    an unbounded exponent range, 2**1024 (ru, rd, sr; nearest stays below the tie)."""
    if plan.mode == "sr":
        # Up with probability |t| / 2**971 (the gap from max to 2**1024); exact scaling.
        up = draw(plan, np.empty(s.shape)) < np.abs(t) * 2.0 ** -971
    else:
        # Nearest: below the tie max + ulp/2.
        up = _past_max_to_inf(plan.mode, np.signbit(s), nearest_up=False)
    counts["overflow"] += int(np.count_nonzero(up))
    counts["inexact"] += s.size
    return np.where(up, np.copysign(np.inf, s), s)


def _add_special(plan, a, b, s, t, counts):
    idx = np.flatnonzero(~np.isfinite(t))
    ai, bi, si = a[idx], b[idx], s[idx]
    ti = np.zeros_like(si)
    fin = np.isfinite(ai) & np.isfinite(bi)
    _count_invalid(counts, si, ai, bi)
    # Finite terms, finite sum, an intermediate of TwoSum overflowed: then both
    # |a|, |b| > 2**969, so halving is exact and TwoSum of the halves does not overflow.
    mid = fin & np.isfinite(si)
    if mid.any():
        hs, ht = two_sum(ai[mid] * 0.5, bi[mid] * 0.5)
        si[mid], ti[mid] = 2 * hs, 2 * ht
    # Finite terms whose float64 sum overflowed: |a + b| >= 2**1024 - 2**970.
    ov = fin & np.isinf(si)
    if ov.any():
        if plan.fmt.p <= 51:
            # max64 > max + ulp/2 of every format of <= 51 bits: it overflows the same way.
            si[ov] = np.copysign(_MAX64, si[ov])
        else:
            si[ov] = _fp64_sum_overflow(plan, ai[ov], bi[ov], counts)
    s[idx], t[idx] = si, ti


def _fp64_sum_overflow(plan, a, b, counts):
    """FP64 results of finite ``a + b`` at or beyond max + ulp/2, with their flags:
    overflow where the mode's rounding with an unbounded exponent exceeds max (as
    the rounding kernel counts other formats' overflows), always inexact."""
    # Neither term reaches max + ulp/2 alone, so |a|, |b| >= 2**970: halving is exact,
    # and so is TwoSum of the halves: hs + ht == (a + b) / 2.
    hs, ht = two_sum(0.5 * a, 0.5 * b)
    neg = np.signbit(hs)
    # (|a + b| - max) / 2 == x + y: x is exact (Sterbenz) and a multiple of 2**970, and
    # |y| <= 2**969 where x == 0: |a + b| >= 2**1024 (x + y >= 2**970) exactly when
    # x > 2**970, or x == 2**970 and y >= 0.
    x = np.abs(hs) - 0.5 * _MAX64
    y = np.where(neg, -ht, ht)
    beyond = (x > 2.0 ** 970) | ((x == 2.0 ** 970) & (y >= 0))
    if plan.mode != "sr":
        up = _past_max_to_inf(plan.mode, neg, nearest_up=True)
    else:
        # Up (to 2**1024, so inf) with probability (|a + b| - max) / 2**971, or 1 beyond.
        up = draw(plan, np.empty(hs.shape)) < (x + y) * 2.0 ** -970
    counts["overflow"] += int(np.count_nonzero(up | beyond))
    counts["inexact"] += hs.size
    return np.copysign(np.where(up, np.inf, _MAX64), hs)


_LOW27 = _U((1 << 27) - 1)


def _mul_kernel(plan, a, b, w, counts):
    p = np.multiply(a, b, out=w.h)
    return _with_error(plan, _mul_error, p, w, counts, a, b)


def _mul_error(plan, a, b, p, w, counts):
    if _in_range(p.view(_U), w.u):
        np.bitwise_or(a.view(_U), b.view(_U), out=w.u)
        np.bitwise_and(w.u, _LOW27, out=w.u)
        if not w.u.any():
            return None      # factors of <= 26 bits, product in range: exact in float64
        e = _two_prod_err(a, b, p, w.l, w.t1, w.t2, w.t3, w.t4)
        if np.isfinite(np.add.reduce(e)):
            return e
    e = _two_prod_err(a, b, p, w.l, w.t1, w.t2, w.t3, w.t4)
    idx = np.flatnonzero(_out_of_range(p) | ~np.isfinite(e))
    p[idx], e[idx] = _mul_slow(plan, a[idx], b[idx], p[idx], counts)
    return e


def _mul_slow(plan, a, b, ref, counts):
    hi, lo = ref.copy(), np.zeros_like(ref)
    # Zeros and non-finite operands: the float64 product is the exact IEEE result.
    gen = np.isfinite(a) & np.isfinite(b) & (a != 0) & (b != 0)
    _count_invalid(counts, ref, a, b)
    if gen.any():
        ma, ea = np.frexp(a[gen])
        mb, eb = np.frexp(b[gen])
        h = ma * mb                      # significands in [0.5, 1): Dekker is exact
        hi[gen], lo[gen] = _rescale(plan, h, _two_prod_err_alloc(ma, mb, h),
                                    ea.astype(np.int64) + eb, ref[gen], counts)
    return hi, lo


def _div_kernel(plan, a, b, w, counts):
    q = np.divide(a, b, out=w.h)
    return _with_error(plan, _div_error, q, w, counts, a, b)


def _div_error(plan, a, b, q, w, counts):
    if not (_in_range(a.view(_U), w.u) and _in_range(b.view(_U), w.u)
            and _in_range(q.view(_U), w.u)):
        bad = _out_of_range(a) | _out_of_range(b) | _out_of_range(q)
        good, idx = np.flatnonzero(~bad), np.flatnonzero(bad)
        lo = w.l
        lo[good] = _div_lo(plan, a[good], b[good], q[good])
        q[idx], lo[idx] = _div_slow(plan, a[idx], b[idx], q[idx], counts)
        return lo
    pq, e = w.t5, w.t6
    np.multiply(q, b, out=pq)
    _two_prod_err(q, b, pq, e, w.t1, w.t2, w.t3, w.t4)
    r = np.subtract(a, pq, out=w.t1)            # Sterbenz: fl(q*b) is within 2x of a
    np.subtract(r, e, out=r)                    # r == a - q*b exactly (q = RN(a/b))
    lo = np.divide(r, b, out=w.l)               # RN(a/b - q); |lo| <= ulp(q)/2
    lo *= _tail_scale(plan)
    return lo


def _tail_scale(plan):
    """The factor for the error terms of div and sqrt, which are exact only to a rounding.

    FP64's sr reads their size as its probability: the full size, correct to within
    2**-53 of the gap. The other modes read their sign, and FP64's rna also whether
    they are exactly half the gap: halved, below a quarter of it, they never look
    like a tie (and a quotient or square root of float64 values is never a tie in
    float64's normal range)."""
    return 1.0 if plan.mode == "sr" else 0.5


def _div_lo(plan, a, b, q):
    pq = q * b
    r = (a - pq) - _two_prod_err_alloc(q, b, pq)   # r == a - q*b exactly
    return _tail_scale(plan) * (r / b)


def _div_slow(plan, a, b, ref, counts):
    hi, lo = ref.copy(), np.zeros_like(ref)
    fa, fb = np.isfinite(a), np.isfinite(b)
    # Zeros and non-finite operands: the float64 quotient is the exact IEEE result.
    gen = fa & fb & (a != 0) & (b != 0)
    _count_invalid(counts, ref, a, b)
    counts["divide_by_zero"] += int(np.count_nonzero((b == 0) & fa & (a != 0)))
    if gen.any():
        ma, ea = np.frexp(a[gen])
        mb, eb = np.frexp(b[gen])
        q = ma / mb                      # in (0.5, 2): remainder and split stay normal
        hi[gen], lo[gen] = _rescale(plan, q, _div_lo(plan, ma, mb, q),
                                    ea.astype(np.int64) - eb, ref[gen], counts)
    return hi, lo


def _sqrt_kernel(plan, a, w, counts):
    s = np.sqrt(a, out=w.h)
    return _with_error(plan, _sqrt_error, s, w, counts, a)


def _sqrt_error(plan, a, s, w, counts):
    ab = a.view(_U)
    # Raw bits in range also excludes negative numbers (their sign bit is set).
    if not (ab.min() >= _LO_BITS and ab.max() <= _HI_BITS):
        bad = (ab < _LO_BITS) | (ab > _HI_BITS)
        good, idx = np.flatnonzero(~bad), np.flatnonzero(bad)
        lo = w.l
        lo[good] = _sqrt_lo(plan, a[good], s[good])
        s[idx], lo[idx] = _sqrt_slow(plan, a[idx], s[idx], counts)
        return lo
    ps, e = w.t5, w.t6
    np.multiply(s, s, out=ps)
    _two_prod_err(s, s, ps, e, w.t1, w.t2, w.t3, w.t4)
    r = np.subtract(a, ps, out=w.t1)            # Sterbenz: fl(s*s) is within 2x of a
    np.subtract(r, e, out=r)                    # r == a - s*s exactly (s = RN(sqrt(a)))
    lo = np.divide(r, s, out=w.l)               # sign of sqrt(a) - s, and never 0 when r != 0
    # sqrt(a) - s == r / (sqrt(a) + s), and r / (2s) is that to within 2**-53 of it.
    lo *= 0.5 * _tail_scale(plan)
    return lo


def _sqrt_lo(plan, a, s):
    ps = s * s
    r = (a - ps) - _two_prod_err_alloc(s, s, ps)   # r == a - s*s exactly
    return 0.5 * _tail_scale(plan) * (r / s)


def _sqrt_slow(plan, a, ref, counts):
    hi, lo = ref.copy(), np.zeros_like(ref)
    # Negative numbers (NaN, invalid), ±0 (itself, -0 included), inf and NaN are exact.
    counts["invalid"] += int(np.count_nonzero(a < 0))
    gen = np.isfinite(a) & (a > 0)
    if gen.any():
        m, e = np.frexp(a[gen])
        e = e.astype(np.int64)
        odd = (e & 1) == 1
        m[odd] *= 2.0                    # m in [0.5, 2), e even: sqrt(a) = sqrt(m) * 2**(e/2)
        e[odd] -= 1
        s = np.sqrt(m)
        # sqrt of a positive float64 is a normal float64: ldexp below is exact.
        hi[gen] = np.ldexp(s, e // 2)
        lo[gen] = np.ldexp(_sqrt_lo(plan, m, s), e // 2)
    return hi, lo


def _fma_kernel(plan, a, b, c, w, counts):
    p = np.multiply(a, b, out=w.t5)
    e = _two_prod_err(a, b, p, w.t6, w.t1, w.t2, w.t3, w.t4)
    ok = (_in_range(p.view(_U), w.u) and np.isfinite(np.add.reduce(e))
          and (np.bitwise_and(c.view(_U), _ABS, out=w.u).max() <= _HI_BITS))
    if not ok:
        bad = _out_of_range(p) | ~np.isfinite(e) | ((c.view(_U) & _ABS) > _HI_BITS)
        good, idx = np.flatnonzero(~bad), np.flatnonzero(bad)
        hi, lo = w.h, w.l
        hi[good], lo[good] = _fma_sum(plan, p[good], e[good], c[good])
        _fma_zero_sign(plan, hi, lo, p, c, good)
        hi[idx], lo[idx] = _fma_slow(plan, a[idx], b[idx], c[idx], counts)
        return hi, lo
    hi, lo = _fma_sum(plan, p, e, c)
    _fma_zero_sign(plan, hi, lo, p, c, slice(None))
    return hi, lo


def _fma_sum(plan, p, e, c):
    """(hi, lo) of p + e + c: hi faithful for round-to-odd, RN for FP64 (`_nearest`)."""
    if plan.identity:
        return _nearest(*_three_sum_parts(p, e, c))
    return _three_sum(p, e, c)


def _three_sum(p, e, c):
    """(s, d): s a faithful rounding of p + e + c, d with the sign of p + e + c - s.

    Needs |e| <= ulp(p)/2 (e is p's product error) and no overflow."""
    s3, t3, t2 = _three_sum_parts(p, e, c)
    # fl(t3 + t2) has the sign of t3 + t2, which is exact - s3.
    return s3, t3 + t2


def _three_sum_parts(p, e, c):
    """(s, t, u): p + e + c == s + t + u exactly, s faithful, |t + u| < ulp(s)."""
    s1, t1 = two_sum(p, c)                # p + c == s1 + t1
    s2, t2 = two_sum(t1, e)               # t1 + e == s2 + t2
    s3, t3 = two_sum(s1, s2)              # exact value == s3 + t3 + t2
    # Either p + c is exact (t1 = t2 = 0: s3 = RN of the exact value), or
    # |s1| >= max(|p|, |c|)/2, so |s2| <= 2 ulp(s1) and |t2| <= 2**-49 ulp(s3):
    # s3 is faithful.
    return s3, t3, t2


def _nearest(s, r1, r2):
    """(h, l) for FP64 from a faithful ``s`` of ``v = s + r1 + r2`` (exactly, no overflow):
    ``h == RN(v)`` (ties to even), ``l`` is ``v - h`` to within a rounding with its exact
    sign, and ``2|l|`` is the gap from ``h`` toward ``l`` exactly when ``v`` is a midpoint.

    This is what `round_fp64` (via the chunk loop) and `_fp64_slow` assume of a pair;
    ``s`` faithful alone may be the wrong neighbour, and ``fl(r1 + r2)`` may look like
    a tie when it is not one."""
    t, u = two_sum(r1, r2)                # TwoSum: t + u == r1 + r2 exactly
    n = np.nextafter(s, np.copysign(np.inf, t))
    g = np.abs(n - s)                      # exact: the gap between two neighbours
    tt = 2 * np.abs(t)                     # exact (|t| < g, far from overflow)
    # t = RN(r1 + r2) and g/2 is a float (or g = 2**-1074, and r1 + r2, a multiple of it,
    # is t itself), so |r1 + r2| against g/2 is |t| against it, or where 2|t| == g, u's sign.
    beyond = (u != 0) & (np.signbit(u) == np.signbit(t))
    tie = (tt == g) & (u == 0)
    odd = (s.view(_U) & _U(1)) == 1
    move = (tt > g) | ((tt == g) & beyond) | (tie & odd)
    # Sterbenz: g/2 <= |t| < g where it moves, so (s - n) + t is exact; then + u rounds once.
    l_ = np.where(move, ((s - n) + t) + u, t)
    h = np.where(move, n, s)
    # A remainder that rounded onto half the gap without being a midpoint: just inside it.
    false_tie = (2 * np.abs(l_) == g) & ~tie
    l_[false_tie] = np.nextafter(l_[false_tie], 0.0)
    return h, l_


def _fma_zero_sign(plan, hi, lo, p, c, sel):
    hs, ls = hi[sel], lo[sel]
    z = (hs == 0) & (ls == 0)
    if z.any():
        # An exact zero means p == a*b exactly: the zero sign is that of the sum p + c.
        ps, cs = p[sel][z], c[sel][z]
        hs[z] = -((-ps) + (-cs)) if plan.mode == "rd" else ps + cs
        hi[sel] = hs


def _fma_slow(plan, a, b, c, counts):
    hi, lo = np.empty_like(a), np.zeros_like(a)
    na, nb, nc = np.isnan(a), np.isnan(b), np.isnan(c)
    ia, ib, ic = np.isinf(a), np.isinf(b), np.isinf(c)
    zero_inf = ((a == 0) & ib) | (ia & (b == 0))
    # The exact product is infinite only when a factor is (float64 overflow is not).
    pinf = (ia | ib) & ~zero_inf & ~na & ~nb
    psign = np.signbit(a) ^ np.signbit(b)
    inf_inf = pinf & ic & (psign != np.signbit(c))
    invalid = (zero_inf & ~nc) | inf_inf
    counts["invalid"] += int(np.count_nonzero(invalid))
    hi[na | nb | nc | invalid] = np.nan
    pos = pinf & ~inf_inf & ~nc
    hi[pos] = np.where(psign[pos], -np.inf, np.inf)
    cinf = ic & ~(ia | ib) & ~na & ~nb
    hi[cinf] = c[cinf]
    fin = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    # A zero factor: the exact result is the float64 sum (+-0) + c.
    zero = fin & ((a == 0) | (b == 0))
    if zero.any():
        pz, cz = a[zero] * b[zero], c[zero]
        hi[zero] = -((-pz) + (-cz)) if plan.mode == "rd" else pz + cz
    gen = fin & ~zero
    if gen.any():
        h, l_, E = _fma_normalised(a[gen], b[gen], c[gen], plan.identity)
        ref = _fp64_scaled_nearest(h, l_, E) if plan.identity else None
        hg, lg = _rescale(plan, h, l_, E, ref, counts)
        # a*b != 0 here, so an exact zero is a cancellation: +0, or -0 under rd (a
        # zero result from a nonzero h + l, rounded or flushed, keeps its sign).
        hg = np.where((h == 0) & (l_ == 0), -0.0 if plan.mode == "rd" else 0.0, hg)
        hi[gen], lo[gen] = hg, lg
    return hi, lo


def _fma_normalised(a, b, c, nearest=False):
    """(h, l, E): a*b + c == (h + l') * 2**E up to sign-irrelevant parts, h faithful,
    or with ``nearest`` (FP64) h and l as `_nearest` makes them."""
    ma, ea = np.frexp(a)
    mb, eb = np.frexp(b)
    E = ea.astype(np.int64) + eb
    p = ma * mb
    e = _two_prod_err_alloc(ma, mb, p)           # exact: significands in [0.5, 1)
    mc, ec = np.frexp(c)
    ec = ec.astype(np.int64)
    h, l_ = np.empty_like(p), np.empty_like(p)
    # c far above the product (2**1000 beyond): the product only says which way.
    far = (c != 0) & (ec - E > 1000)
    h[far], l_[far] = mc[far], np.copysign(2.0 ** -1074, p[far])
    near = ~far
    # Scaled by the product's exponent, c loses at most bits far below 2**-1021,
    # where only its sign matters; a zero from underflow keeps its sign as 2**-1074.
    cs = np.ldexp(mc[near], ec[near] - E[near])
    lost = (cs == 0) & (c[near] != 0)
    cs[lost] = np.copysign(2.0 ** -1074, c[near][lost])
    # The bits of c lost above are below 2**-1074: no 53-bit midpoint (a multiple of
    # 2**-106 here, as p + e is) lies between the exact and the computed sum.
    parts = _three_sum_parts(p[near], e[near], cs)
    h[near], l_[near] = _nearest(*parts) if nearest else (parts[0], parts[1] + parts[2])
    E = np.where(far, ec, E)
    return h, l_, E


# -- the chunk loop ---------------------------------------------------------------

def _raw(x):
    """``x`` as an ndarray in its own dtype, checked as `as_real_array` checks it but
    not converted (each chunk is converted on its own: `_parts`). Python numbers that
    NumPy keeps as objects (ints beyond 64 bits) stay an object array."""
    a = as_array(x)
    if a.dtype.kind == "O":
        as_real_array(x)      # Python ints and floats only; an object ndarray raises
    else:
        as_real_array(np.empty(0, a.dtype))   # TypeError for complex, strings (no copy of a)
    return a


def _operands(*xs):
    """Real operands in their own dtypes, broadcast; returns (flat list, shape, scalar)."""
    arrays = [_raw(x) for x in xs]
    shape = broadcast_shape(*(x.shape for x in arrays))
    scalar = all(x.ndim == 0 for x in arrays)
    flat = []
    n = int(np.prod(shape, dtype=np.int64))
    for x in arrays:
        if x.shape == shape:
            flat.append(np.ascontiguousarray(x).reshape(-1))
        elif x.size == 1:
            flat.append(np.broadcast_to(x.reshape(-1), (n,)))   # stride 0, no copy
        else:
            flat.append(np.ascontiguousarray(np.broadcast_to(x, shape)).reshape(-1))
    return flat, shape, scalar


def _parts(xc):
    """(hi, lo) float64 of one chunk of operand values, as `as_real_array` splits them
    (lo None when every value is a float64)."""
    if xc.dtype == np.float64:
        return xc, None
    if xc.dtype.kind == "O":
        return as_real_array(xc.tolist())
    return as_real_array(xc)


def _plan(fmt, mode, rng, subnormals, saturate):
    # rounding's checks: wrong-typed options raise (subnormals="no" is truthy, rng="abc"
    # unused outside sr); Format itself refuses 51 < p < 53.
    return _rounding_plan(fmt, mode, rng=rng, subnormals=subnormals, saturate=saturate)


class _Buffers:
    """Everything one chunk needs: the kernels' scratch and the rounding's."""

    def __init__(self, size):
        self.size = size
        self.work = _Work(size)
        self.u, self.f, self.x = np.empty(size, _U), np.empty(size), np.empty(size)


def _apply(plan, kernel, operands, n, buffers=None):
    """Run ``kernel`` chunk by chunk and round its (hi, lo) pairs into a new array.

    Each chunk of the operands is converted to float64 on its own (`_parts`), and
    its elements that float64 cannot hold exactly take the exact path
    (`_with_exact`), so the memory beyond the output is a few chunks per thread."""
    out = np.empty(n, np.float64)
    listener = recording()
    wide = plan.identity      # FP64: no spare bits for round-to-odd

    def span_task(plan, span, counts):
        start, stop = span
        size = min(parallel.CHUNK, stop - start)
        bufs = buffers if span[0] == 0 and buffers is not None and buffers.size >= size \
            else _Buffers(size)
        if plan.spare is None or plan.spare.size < size:
            plan.spare = np.empty(size)
        listening = None if listener is None else counts
        overflow_before = counts["overflow"]
        with np.errstate(all="ignore"):
            for a in range(start, stop, parallel.CHUNK):
                b = min(a + parallel.CHUNK, stop)
                k = b - a
                w = bufs.work if k == bufs.size else bufs.work.take(k)
                raw = [x[a:b] for x in operands]
                overflow_in_chunk = counts["overflow"]
                parts = [_parts(xc) for xc in raw]
                if any(lo is not None for _, lo in parts):
                    hi, lo = _with_exact(plan, kernel, raw, parts, w, counts)
                else:
                    hi, lo = kernel(plan, *(h for h, _ in parts), w, counts)
                if wide:
                    x = hi if lo is None else round_fp64(plan, hi, lo, hi, counts)
                else:
                    x = hi if lo is None else odd(hi, lo, bufs.x[:k])
                top = round_into(plan, x, out[a:b], bufs.u[:k], bufs.f[:k], listening)
                # A signalling NaN operand makes a NaN result: only chunks holding inf or
                # NaN are read again for them, on the operands' own bits (invalid).
                if listening is not None and not top < np.inf:
                    counts["invalid"] += signalling_nans(*raw)
                if wide and plan.saturate and counts["overflow"] != overflow_in_chunk:
                    _fp64_clamp(plan, kernel, out[a:b], [h for h, _ in parts])
        if wide and plan.saturate:
            # Every FP64 overflow the kernels counted is saturated, as `round` counts
            # other formats' (the rounding kernel sees FP64 results as exact).
            counts["saturated"] += counts["overflow"] - overflow_before

    counts = in_spans(plan, n, True, span_task)
    if listener is not None:
        listener.add(counts)
    return out


def _fp64_clamp(plan, kernel, out, operands):
    """FP64 with saturate: clamp to ±max the infinite results of finite operands (an
    overflow; those that reached the kernel as an infinity stay, as in `round`)."""
    over = np.isinf(out) & np.logical_and.reduce([np.isfinite(x) for x in operands])
    if kernel is _div_kernel:
        over &= operands[1] != 0    # x / 0 divides by zero, not overflows: ±inf stays
    out[over] = np.copysign(plan.max, out[over])


# -- the exact path: operands float64 cannot hold (64-bit ints, long doubles, wide ints) --

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
    ``v * 2**-E`` in [1, 2], ``l`` the rest, rounded to odd, as `_fp64_slow` and
    `_scale_back` want them."""
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
    if kernel is _sqrt_kernel:
        return _from_sqrt(xs[0])
    if kernel is _copy_kernel:
        v = xs[0]
    elif kernel is _add_kernel:
        v = xs[0] + xs[1]
    elif kernel is _sub_kernel:
        v = xs[0] - xs[1]
    elif kernel is _mul_kernel:
        v = xs[0] * xs[1]
    elif kernel is _div_kernel:
        v = xs[0] / xs[1]
    else:
        v = xs[0] * xs[1] + xs[2]
    if v != 0:
        return _from_rational(v)
    if kernel in (_mul_kernel, _div_kernel):      # a zero factor or dividend
        zero = -0.0 if math.copysign(1, hs[0]) != math.copysign(1, hs[1]) else 0.0
    elif kernel is _fma_kernel and (xs[0] == 0 or xs[1] == 0):
        p = hs[0] * hs[1]                         # ±0 with the product's sign
        zero = -((-p) + (-hs[2])) if rd else p + hs[2]
    else:
        # Opposite nonzero terms (one carries a tail) cancelling exactly (IEEE 754 6.3).
        zero = -0.0 if rd else 0.0
    return zero, 0.0, 0


def _with_exact(plan, kernel, raw, parts, w, counts):
    """``kernel`` on a chunk whose operands include values float64 cannot hold: those
    elements (finite operands, no division by zero, no negative square root) are
    computed exactly, rounded once; the others, whose results depend only on signs and
    infinities, by ``kernel`` on the float64 parts."""
    his = [h for h, _ in parts]
    tail = np.logical_or.reduce([lo != 0 for _, lo in parts if lo is not None])
    sel = tail & np.logical_and.reduce([np.isfinite(h) for h in his])
    if kernel is _div_kernel:
        sel &= his[1] != 0
    elif kernel is _sqrt_kernel:
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
        ref = _fp64_scaled_nearest(h, l_, E) if plan.identity else None
        hi[block] = _rescale(plan, h, l_, E, ref, counts)[0]
    if lo is not None:
        lo[idx] = 0.0
    return hi, lo


def _elementwise(kernel, operands, fmt, mode, rng, subnormals, saturate):
    plan = _plan(fmt, mode, rng, subnormals, saturate)
    flat, shape, scalar = _operands(*operands)
    out = _apply(plan, kernel, flat, int(np.prod(shape, dtype=np.int64)))
    out = out.reshape(shape)
    return out[()] if scalar else out




# -- public operations ------------------------------------------------------------

_COMMON_DOC = """
    Parameters
    ----------
    {operands} : array_like
        Real operands, broadcast together as NumPy does (up to 64 dimensions): any
        values, not only values of ``fmt``: float16/32/64, long doubles, integers
        (64-bit, and Python ints below 2**1024 - 2**970), as `lowprec.round` takes
        them. The exact value of each is used, so the result is rounded once. They
        are never modified.
    fmt : Format or str
        Result format (anything `lowprec.format` accepts): formats of at most 51
        bits of precision, and FP64.
    mode : {{"rne", "rna", "rz", "ru", "rd", "ro", "sr"}}
        Rounding mode, as in `lowprec.round`. The deterministic modes are exact;
        ``"sr"`` draws against a 53-bit round-to-odd stand-in for the exact result,
        so its probabilities are exact to within ``2**(p - 53)`` of the gap (FP64:
        to within about ``2**-52`` of it).
    rng : numpy.random.Generator or int, optional
        Randomness for ``"sr"``.
    subnormals : bool, optional
        Override the format's subnormal support.
    saturate : bool
        Send overflows to ±max, as in `lowprec.round`.

    Returns
    -------
    numpy.ndarray or numpy.float64
        float64 values of ``fmt``, with the broadcast shape (a NumPy scalar when
        every operand is a scalar).

    Notes
    -----
    Operands are converted to float64 and computed chunk by chunk (2**17
    elements), so the memory beyond the result is at most ``MEMORY_CHUNKS`` (48)
    chunks of float64, 48 MiB, per thread (`lowprec.threads`), whatever the size
    of the input and its dtype (float16/32/64, integers, long double), FP64 results
    included. Operands that are not contiguous, and non-scalars that broadcast, are
    first copied as NumPy would copy them, in their own dtype.
"""


def add(a: ArrayLike, b: ArrayLike, fmt: FormatLike, mode: str = "rne", *,
        rng: np.random.Generator | int | None = None, subnormals: bool | None = None,
        saturate: bool = False) -> NDArray[np.float64] | np.float64:
    """``a + b`` rounded once to ``fmt``: correctly rounded in every mode.

    IEEE 754's special cases hold: ``inf - inf`` is NaN and counts as invalid;
    an exact zero sum of opposite-signed terms is +0, or -0 under ``"rd"``;
    ``-0 + -0`` is -0.
    {doc}
    Examples
    --------
    >>> import lowprec as lp
    >>> lp.add(1.0, 2.0**-9, "bf16"), lp.add(1.0, 2.0**-9, "bf16", mode="ru")
    (np.float64(1.0), np.float64(1.0078125))
    >>> lp.add(256.0, [1.0, 1.5], "bf16")    # 256 + 1 is a tie: it rounds to even
    array([256., 258.])
    >>> lp.add(1.0, -1.0, "fp16", mode="rd")
    np.float64(-0.0)
    """
    return _elementwise(_add_kernel, (a, b), fmt, mode, rng, subnormals, saturate)


def sub(a: ArrayLike, b: ArrayLike, fmt: FormatLike, mode: str = "rne", *,
        rng: np.random.Generator | int | None = None, subnormals: bool | None = None,
        saturate: bool = False) -> NDArray[np.float64] | np.float64:
    """``a - b`` rounded once to ``fmt``; see `add`.
    {doc}
    Examples
    --------
    >>> import lowprec as lp
    >>> lp.sub(1.0, 2.0**-30, "fp16"), lp.sub(1.0, 2.0**-30, "fp16", mode="rz")
    (np.float64(1.0), np.float64(0.99951171875))
    """
    return _elementwise(_sub_kernel, (a, b), fmt, mode, rng, subnormals, saturate)


def mul(a: ArrayLike, b: ArrayLike, fmt: FormatLike, mode: str = "rne", *,
        rng: np.random.Generator | int | None = None, subnormals: bool | None = None,
        saturate: bool = False) -> NDArray[np.float64] | np.float64:
    """``a * b`` rounded once to ``fmt``: correctly rounded in every mode.

    ``0 * inf`` is NaN and counts as invalid.
    {doc}
    Examples
    --------
    >>> import lowprec as lp
    >>> x = 1 + 2.0**-7                       # a BF16 value
    >>> lp.mul(x, x, "bf16"), lp.mul(x, x, "bf16", mode="ru")
    (np.float64(1.015625), np.float64(1.0234375))
    >>> lp.mul(448.0, 2.0, "e4m3"), lp.mul(448.0, 2.0, "e4m3", saturate=True)
    (np.float64(nan), np.float64(448.0))
    """
    return _elementwise(_mul_kernel, (a, b), fmt, mode, rng, subnormals, saturate)


def div(a: ArrayLike, b: ArrayLike, fmt: FormatLike, mode: str = "rne", *,
        rng: np.random.Generator | int | None = None, subnormals: bool | None = None,
        saturate: bool = False) -> NDArray[np.float64] | np.float64:
    """``a / b`` rounded once to ``fmt``: correctly rounded in every mode.

    ``x / 0`` for finite nonzero ``x`` is ±inf (NaN or ±max in formats without
    inf) and counts as divide_by_zero; ``0 / 0`` and ``inf / inf`` are NaN and
    count as invalid.
    {doc}
    Examples
    --------
    >>> import lowprec as lp
    >>> lp.div(1.0, 3.0, "fp16"), lp.div(1.0, 3.0, "fp16", mode="ru")
    (np.float64(0.333251953125), np.float64(0.33349609375))
    >>> with lp.flags() as f:
    ...     q = lp.div([1.0, -1.0, 0.0], 0.0, "fp16")
    >>> q, f.divide_by_zero, f.invalid
    (array([ inf, -inf,  nan]), 2, 1)
    """
    return _elementwise(_div_kernel, (a, b), fmt, mode, rng, subnormals, saturate)


def sqrt(a: ArrayLike, fmt: FormatLike, mode: str = "rne", *,
         rng: np.random.Generator | int | None = None, subnormals: bool | None = None,
         saturate: bool = False) -> NDArray[np.float64] | np.float64:
    """The square root of ``a`` rounded once to ``fmt``: correctly rounded in every mode.

    ``sqrt(-0)`` is -0; the square root of a negative number is NaN and counts
    as invalid.
    {doc}
    Examples
    --------
    >>> import lowprec as lp
    >>> lp.sqrt(2.0, "bf16"), lp.sqrt(2.0, "bf16", mode="ru")
    (np.float64(1.4140625), np.float64(1.421875))
    >>> lp.sqrt([-0.0, 4.0, -1.0], "fp16")
    array([-0.,  2., nan])
    """
    return _elementwise(_sqrt_kernel, (a,), fmt, mode, rng, subnormals, saturate)


def fma(a: ArrayLike, b: ArrayLike, c: ArrayLike, fmt: FormatLike, mode: str = "rne", *,
        rng: np.random.Generator | int | None = None, subnormals: bool | None = None,
        saturate: bool = False) -> NDArray[np.float64] | np.float64:
    """``a * b + c`` rounded once to ``fmt``.

    Correctly rounded in every mode whenever ``a * b`` is exact in float64 (always
    for operands of formats of 26 bits of precision or fewer), and for formats of
    at most 51 bits also otherwise, as the product's error term is carried along.
    IEEE 754's special cases hold (``0 * inf + c`` and ``inf - inf`` are invalid).
    {doc}
    Examples
    --------
    >>> import lowprec as lp
    >>> x = 1 + 2.0**-8                       # an FP16 value
    >>> lp.fma(x, x, -1.0, "fp16")            # 2**-7 + 2**-16, exact in FP16
    np.float64(0.0078277587890625)
    >>> lp.sub(lp.mul(x, x, "fp16"), 1.0, "fp16")
    np.float64(0.0078125)
    """
    return _elementwise(_fma_kernel, (a, b, c), fmt, mode, rng, subnormals, saturate)


for _f, _ops in ((add, "a, b"), (sub, "a, b"), (mul, "a, b"), (div, "a, b"),
                 (sqrt, "a"), (fma, "a, b, c")):
    if _f.__doc__ is not None:    # None under python -OO
        _f.__doc__ = _f.__doc__.replace("{doc}", _COMMON_DOC.format(operands=_ops))
del _f, _ops


# -- reductions -------------------------------------------------------------------

def _copy_kernel(plan, a, w, counts):
    h = w.h
    h[...] = a
    return h, None


def _reduce(plan, x, order):
    """Reduce axis 0 of the 2-D float64 array ``x`` with every addition rounded."""
    n, m = x.shape
    if n == 0:
        return np.zeros(m)
    buffers = _Buffers(max(1, min(parallel.CHUNK, m)))

    def step(kernel, *operands):
        return _apply(plan, kernel, [np.ascontiguousarray(v).reshape(-1) for v in operands],
                      operands[0].size, buffers)

    if order == "pairwise":
        # ``carry`` is the odd last term moving up unchanged: a row of x itself (in its
        # own dtype, so never rounded through float64) or a sum of an earlier level.
        level, carry = x, None
        while level.shape[0] + (carry is not None) > 1:
            k = level.shape[0] // 2
            pairs = step(_add_kernel, level[0:2 * k:2], level[1:2 * k:2]).reshape(k, m)
            if level.shape[0] % 2 and carry is None:
                carry = level[-1]
            elif level.shape[0] % 2:
                last = step(_add_kernel, level[-1], carry).reshape(1, m)
                pairs, carry = np.concatenate([pairs, last]), None
            level = pairs
        return step(_copy_kernel, level[0]) if n == 1 else level[0]
    acc = step(_copy_kernel, x[0])
    if order == "sequential":
        for i in range(1, n):
            acc = step(_add_kernel, acc, x[i])
        return acc
    comp = np.zeros(m)
    for i in range(1, n):
        # Kahan: comp carries the part of the previous term that the sum lost.
        y = step(_sub_kernel, x[i], comp)
        t = step(_add_kernel, acc, y)
        comp = step(_sub_kernel, step(_sub_kernel, t, acc), y)
        acc = t
    return acc


def _check_order(order):
    if not isinstance(order, str):
        raise TypeError(f"order must be a str, one of {', '.join(ORDERS)}; "
                        f"got {type(order).__name__} {order!r}")
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; valid orders: {', '.join(ORDERS)}")


_UNSET: Any = object()   # Any: the sentinel stands in for each default of sum
_LEGACY_SUM = ("lp.sum(x, fmt, axis, mode, order): pass axis=, mode=, order= as keywords; "
               "the positional order is now (x, fmt, mode)")


def _sum_arguments(args, axis, mode, order):
    """(axis, mode, order) of a `sum` call, old positional order included (deprecated)."""
    if len(args) > 3:
        raise TypeError(f"sum takes at most 3 positional arguments after x and fmt "
                        f"(the deprecated axis, mode, order), got {len(args)}")
    if not args or isinstance(args[0], str):
        if len(args) > 1:
            raise TypeError("sum(x, fmt, mode) takes mode as its only further positional "
                            "argument; pass axis= and order= as keywords")
        if args:
            if mode is not _UNSET:
                raise TypeError("sum got multiple values for argument 'mode'")
            mode = args[0]
        return axis, mode, order
    old = args[0]
    is_int = (isinstance(old, (numbers.Integral, np.integer))
              and not isinstance(old, (bool, np.bool_)))
    if old is not None and not isinstance(old, tuple) and not is_int:
        check_mode(old)          # neither a mode nor an old axis: TypeError naming mode
    warnings.warn(_LEGACY_SUM, DeprecationWarning, stacklevel=3)
    for name, _value, given in zip(("axis", "mode", "order"), args, (axis, mode, order)):
        if given is not _UNSET:
            raise TypeError(f"sum got multiple values for argument {name!r}")
    axis = old
    if len(args) > 1:
        mode = args[1]
    if len(args) > 2:
        order = args[2]
    return axis, mode, order


def _sum_axes(axis, ndim):
    """``axis`` (None, an int or a tuple of ints) as a sorted tuple of axes of ``ndim``."""
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, tuple) else (axis,)
    out = []
    for ax in axes:
        ax = check_int("axis", ax)
        if not -ndim <= ax < ndim:
            raise ValueError(f"axis {ax} is out of bounds for an array of dimension {ndim}")
        out.append(ax % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"axis {axis!r} repeats an axis")
    return tuple(sorted(out))


def sum(x: ArrayLike, fmt: FormatLike, *args: Any,  # noqa: A001
        axis: int | tuple[int, ...] | None = _UNSET, mode: str = _UNSET, order: str = _UNSET,
        rng: np.random.Generator | int | None = None, subnormals: bool | None = None,
        saturate: bool = False) -> NDArray[np.float64] | np.float64:
    """Sum of ``x`` along ``axis`` with every addition rounded to ``fmt``.

    Signature: ``sum(x, fmt, mode="rne", *, axis=None, order="pairwise", rng=None,
    subnormals=None, saturate=False)``, the mode third as in every other operation.

    The first term of each sum is rounded to ``fmt``, then each further term is
    added by `add` (terms are used as given: round them first to model stored
    ``fmt`` values). Orders:

    ``"pairwise"`` (the default)
        level by level: ``x0 + x1``, ``x2 + x3``, ... then the sums of those pairs,
        and so on; an odd last term moves up a level unchanged. The kind of order
        NumPy's own `numpy.sum` uses, and the fast one at scale.
    ``"sequential"``
        left to right, ``((x0 + x1) + x2) + ...``: the textbook recursive
        summation, whose error grows with ``n`` (and stagnates).
    ``"kahan"``
        compensated summation (Kahan), every operation rounded to ``fmt``.

    Work is vectorised across the other axes; the reduced axis is a Python loop
    (sequential, Kahan) or a loop over ``log2(n)`` levels (pairwise).

    The default order changed from ``"sequential"`` to ``"pairwise"`` (one default
    everywhere, as ``Tensor.sum``); pass ``order="sequential"`` for the old results.
    The old positional order ``sum(x, fmt, axis, mode, order)`` still works, with a
    `DeprecationWarning`, when the third argument is not a str (an int, a tuple or
    None: an axis); its order, when not given, is the new default.

    Parameters
    ----------
    x : array_like
        Real values.
    fmt : Format or str
        Format of every partial sum.
    mode, rng, subnormals, saturate
        As in `add`.
    axis : int or tuple of ints, optional
        Axes to reduce; by default all (the flattened array). Several axes are
        summed as one, in the C order of the elements they index.
    order : {"pairwise", "sequential", "kahan"}
        Summation order.

    Returns
    -------
    numpy.ndarray or numpy.float64
        The sums (0.0 for an empty axis), values of ``fmt``.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> ones = np.ones(1000)
    >>> lp.sum(ones, "bf16"), lp.sum(ones, "bf16", order="sequential")   # 256 + 1 == 256
    (np.float64(1000.0), np.float64(256.0))
    >>> lp.sum(ones, "bf16", order="kahan")
    np.float64(1000.0)
    >>> lp.sum([[1.0, 2.0], [3.0, 4.0]], "fp16", "rz", axis=0)
    array([4., 6.])
    """
    axis, mode, order = _sum_arguments(args, axis, mode, order)
    axis = None if axis is _UNSET else axis
    mode = "rne" if mode is _UNSET else mode
    order = "pairwise" if order is _UNSET else order
    _check_order(order)
    plan = _plan(fmt, mode, rng, subnormals, saturate)
    a = _raw(x)
    axes = _sum_axes(axis, a.ndim)
    keep = [i for i in range(a.ndim) if i not in axes]
    shape = tuple(a.shape[i] for i in keep)
    n = int(np.prod([a.shape[i] for i in axes], dtype=np.int64))
    # The reduced axes first (in C order), the kept ones flattened behind them.
    a = np.transpose(a, list(axes) + keep).reshape(n, int(np.prod(shape, dtype=np.int64)))
    with np.errstate(all="ignore"):
        out = _reduce(plan, a, order).reshape(shape)
    return out[()] if out.ndim == 0 else out


# The signature help() and inspect show: the new call, without the deprecated *args.
sum.__signature__ = inspect.Signature([  # type: ignore[attr-defined]
    inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD),
    inspect.Parameter("fmt", inspect.Parameter.POSITIONAL_OR_KEYWORD),
    inspect.Parameter("mode", inspect.Parameter.POSITIONAL_OR_KEYWORD, default="rne"),
    *(inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=v) for k, v in
      (("axis", None), ("order", "pairwise"), ("rng", None), ("subnormals", None),
       ("saturate", False))),
])


def dot(a: ArrayLike, b: ArrayLike, fmt: FormatLike, mode: str = "rne", *,
        order: str = "sequential", fused: bool = False,
        rng: np.random.Generator | int | None = None, subnormals: bool | None = None,
        saturate: bool = False) -> NDArray[np.float64] | np.float64:
    """Dot products over the last axis, every operation rounded to ``fmt``.

    ``a`` and ``b`` broadcast together and the last axis is contracted (as
    ``numpy.vecdot``; for 1-D arrays the ordinary dot product). Unfused, each
    product is rounded to ``fmt`` (`mul`) and the products are summed by `sum`
    in ``order``. With ``fused=True`` the sum is an FMA chain, ``acc = fma(a_i,
    b_i, acc)`` from left to right, one rounding per term (``order`` must then be
    ``"sequential"``).

    The default order is ``"sequential"``, unlike `sum`'s ``"pairwise"``: a dot
    product is the inner loop of a matrix product, which the accumulation models of
    `lp.matmul` (``"fp32"``, ``"fp16"``) and an FMA chain run left to right, so
    the unfused and fused dots and ``matmul`` agree in order by default.

    Parameters
    ----------
    a, b : array_like
        Real operands.
    fmt : Format or str
        Format of every product and partial sum.
    mode, rng, subnormals, saturate
        As in `add`.
    order : {"sequential", "pairwise", "kahan"}
        Summation order of the unfused products.
    fused : bool
        Accumulate with fused multiply-adds.

    Returns
    -------
    numpy.ndarray or numpy.float64
        Values of ``fmt`` with the broadcast shape less the last axis.

    Examples
    --------
    >>> import lowprec as lp
    >>> a = [1.0, 2.0**-11, 2.0**-11, 2.0**-11]
    >>> b = [1.0, 1.0, 1.0, 1.0]
    >>> lp.dot(a, b, "fp16"), lp.dot(a, b, "fp16", order="pairwise")
    (np.float64(1.0), np.float64(1.0009765625))
    >>> x = 1 + 2.0**-8
    >>> lp.dot([-1.0, x], [1.0, x], "fp16"), lp.dot([-1.0, x], [1.0, x], "fp16", fused=True)
    (np.float64(0.0078125), np.float64(0.0078277587890625))
    """
    _check_order(order)
    fused = check_bool("fused", fused)
    if fused and order != "sequential":
        raise ValueError("fused=True accumulates left to right: order must be 'sequential'")
    plan = _plan(fmt, mode, rng, subnormals, saturate)
    xa, xb = _raw(a), _raw(b)
    if xa.ndim == 0 or xb.ndim == 0:
        raise ValueError("dot needs arrays with at least one axis")
    shape = broadcast_shape(xa.shape, xb.shape)
    xa, xb = np.broadcast_to(xa, shape), np.broadcast_to(xb, shape)
    shape = xa.shape[:-1]
    n = xa.shape[-1]
    m = int(np.prod(shape, dtype=np.int64))
    xa = np.moveaxis(xa, -1, 0).reshape(n, m)    # (n, -1) cannot be inferred when n = 0
    xb = np.moveaxis(xb, -1, 0).reshape(n, m)
    with np.errstate(all="ignore"):
        if n == 0:
            out: NDArray[np.float64] = np.zeros(m)   # the empty sum is +0
        elif not fused:
            prods = _apply(plan, _mul_kernel, (np.ascontiguousarray(xa).ravel(),
                                               np.ascontiguousarray(xb).ravel()),
                           xa.size).reshape(xa.shape)
            out = _reduce(plan, prods, order)
        else:
            acc = _apply(plan, _mul_kernel, (np.ascontiguousarray(xa[0]),
                                             np.ascontiguousarray(xb[0])), m)
            for i in range(1, n):
                acc = _apply(plan, _fma_kernel, (np.ascontiguousarray(xa[i]),
                                                 np.ascontiguousarray(xb[i]), acc), m)
            out = acc
    out = out.reshape(shape)
    return out[()] if out.ndim == 0 else out

