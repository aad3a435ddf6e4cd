"""The FP64-target paths: results past float64's range, rescaling, flush.

Where the result format is FP64 itself there are no spare bits for round-to-odd, so
the normalised pairs ``(h + l) * 2**E`` of the kernels' slow paths are rounded here
by the mode's rule: overflow past float64's max as with an unbounded exponent,
tininess after rounding, and the flush of subnormals (`rescale` also hands the other
formats their round-to-odd stand-in, scaled back). Nothing here may round a value
twice or read a global default.
"""

from __future__ import annotations

import numpy as np

from ..engine.eft import odd, two_sum
from ..engine.kernel import draw, steps_toward_lo, subset_plan

__all__ = ["MAX64", "rescale", "fp64_scaled_nearest", "fp64_past_max",
           "fp64_sum_overflow", "nearest_pair"]


_U = np.uint64
MAX64 = np.finfo(np.float64).max
_TINY64 = 2.0 ** -1022
_HALF_TINY64 = 2.0 ** -1023


# -- rescaling of normalised results ----------------------------------------------

def _draw(plan, shape, k=8):
    """`draw` for the elements of a special-range step ("sr" results of FP64 that need
    more than float64's own rounding): stream ``k`` (`Stream.derived`; 8, and 9 for
    the flush after it) at each element's own position (`subset_plan` hands each step the
    positions of its elements), so the result is the same for any split."""
    size = int(np.prod(shape))
    return draw(plan.with_stream(plan.stream.derived(k)), np.arange(size)).reshape(shape)


def _scale_back(x1, E):
    """A float64 that any format of <= 51 bits rounds as it rounds ``x1 * 2**E``.

    ``x1`` is a round-to-odd value near 1 (nonzero, finite), ``E`` an int array."""
    x = np.ldexp(x1, E)      # exact unless it overflows or lands below 2**-1022
    big = np.isinf(x)
    # Beyond 2**1024 - 2**970 > max + ulp/2 of every format of <= 51 bits: max64 stands in.
    x[big] = np.copysign(MAX64, x1[big])
    small = np.abs(x) < _TINY64
    if small.any():
        xs, Es = x[small], E[small]
        # ldexp(xs, -Es) is exact (back near x1): d has the sign of x1*2**E - xs.
        d = x1[small] - np.ldexp(xs, -Es)
        # Round-to-odd at 2**-1074 leaves 52 bits below any format's quantum (>= 2**-1022).
        x[small] = odd(xs, d, np.empty_like(xs))
    return x


def fp64_scaled_nearest(h, l_, E):
    """RN(v) in FP64 for ``v = (h + l) * 2**E``, ``h`` and ``l`` as `nearest_pair` makes them."""
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
        out[inf] = _fp64_beyond(subset_plan(plan, inf), h[inf], l_[inf], E[inf], counts)
    fin = ~inf
    plan = subset_plan(plan, fin)
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
        take = _draw(plan, d.shape) < frac      # never when d == 0
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
    rounding with an unbounded exponent exceeds max, as `fp64_sum_overflow` counts it."""
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
        frac = ((np.abs(h[below]) - np.ldexp(MAX64, -E[below])) - np.abs(l_[below])) \
            / np.ldexp(1.0, 971 - E[below])
        up[below] = _draw(subset_plan(plan, below), frac.shape) < frac
    counts["overflow"] += int(np.count_nonzero(up | ~below))
    counts["inexact"] += h.size
    return np.copysign(np.where(up, np.inf, MAX64), h)


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
    half the gap only at a midpoint (fma, by `nearest_pair`)."""
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
        up = _draw(subset_plan(plan, small), r.shape, 9) < frac
    out = res.copy()
    out[small] = np.copysign(np.where(up, _TINY64, 0.0), r)
    return out


def rescale(plan, h, l_, E, ref, counts):
    """(hi, lo) for normalised elements, as the chunk loop wants them."""
    if plan.fmt.p <= 51:
        return _scale_back(odd(h, l_, np.empty_like(h)), E), np.zeros_like(h)
    return _fp64_slow(plan, h, l_, E, ref, counts), np.zeros_like(h)


def fp64_past_max(plan, s, t, counts):
    """FP64 results of finite sums ``s + t`` with ``s == ±max`` and ``0 < |t| < ulp/2`` of
    s's sign, with their flags: overflow where the mode rounds up to the next point of
    an unbounded exponent range, 2**1024 (ru, rd, sr; nearest stays below the tie)."""
    if plan.mode == "sr":
        # Up with probability |t| / 2**971 (the gap from max to 2**1024); exact scaling.
        up = _draw(plan, s.shape) < np.abs(t) * 2.0 ** -971
    else:
        # Nearest: below the tie max + ulp/2.
        up = _past_max_to_inf(plan.mode, np.signbit(s), nearest_up=False)
    counts["overflow"] += int(np.count_nonzero(up))
    counts["inexact"] += s.size
    return np.where(up, np.copysign(np.inf, s), s)


def fp64_sum_overflow(plan, a, b, counts):
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
    x = np.abs(hs) - 0.5 * MAX64
    y = np.where(neg, -ht, ht)
    beyond = (x > 2.0 ** 970) | ((x == 2.0 ** 970) & (y >= 0))
    if plan.mode != "sr":
        up = _past_max_to_inf(plan.mode, neg, nearest_up=True)
    else:
        # Up (to 2**1024, so inf) with probability (|a + b| - max) / 2**971, or 1 beyond.
        up = _draw(plan, hs.shape) < (x + y) * 2.0 ** -970
    counts["overflow"] += int(np.count_nonzero(up | beyond))
    counts["inexact"] += hs.size
    return np.copysign(np.where(up, np.inf, MAX64), hs)


def nearest_pair(s, r1, r2):
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
