"""Per-operation kernels: ``add sub mul div sqrt fma`` (and the copy a sum starts with).

Each kernel takes one chunk of float64 operands and returns ``(hi, lo)``: ``hi`` a
faithful rounding of the exact result and ``lo`` of the exact sign of the rest (None
where every error term is zero), from error-free transformations; elements near the
ends of float64's range and IEEE 754's special cases take slow paths normalised by
powers of two. A kernel writes only into its scratch (`Work`), never into its
operands, and never rounds to the format: the chunk driver does that, once.
"""

from __future__ import annotations

import math

import numpy as np

from ..engine.eft import (
    three_sum,
    three_sum_parts,
    two_prod_err,
    two_prod_err_alloc,
    two_sum,
    two_sum_err,
)
from ..engine.float64 import operand
from ..engine.kernel import subset_plan
from .fp64 import (
    MAX64,
    fp64_past_max,
    fp64_scaled_nearest,
    fp64_sum_overflow,
    nearest_pair,
    rescale,
)

__all__ = ["Work", "add_kernel", "sub_kernel", "mul_kernel", "div_kernel", "sqrt_kernel",
           "fma_kernel", "copy_kernel"]


_U = np.uint64
_ABS = operand(0x7FFF_FFFF_FFFF_FFFF)
# Fast-path range: exponents in [-960, 1020] keep every product, remainder and
# error term of the transformations below normal and finite.
_LO_BITS = _U((1023 - 960) << 52)
_HI_BITS = _U((1023 + 1021) << 52)


def _in_range(bits, buf):
    """Whether every |value| (given as raw bits) lies in the fast-path range."""
    np.bitwise_and(bits, _ABS, out=buf)
    return np.minimum.reduce(buf) >= _LO_BITS and np.maximum.reduce(buf) <= _HI_BITS


def _out_of_range(x):
    ax = x.view(_U) & _ABS
    return (ax < _LO_BITS) | (ax > _HI_BITS)


def _count_invalid(counts, result, *operands):
    bad = np.isnan(result)
    for x in operands:
        bad &= ~np.isnan(x)
    counts["invalid"] += int(np.count_nonzero(bad))


# -- per-chunk kernels: return (hi, lo) with hi faithful and lo's sign exact -------

class Work:
    """Scratch buffers for ``n`` elements, reused across chunks."""

    _FLOATS = ("h", "l", "t1", "t2", "t3", "t4", "t5", "t6")

    def __init__(self, n):
        for name in self._FLOATS:
            setattr(self, name, np.empty(n))
        self.u = np.empty(n, _U)
        self.b = np.empty(n, bool)

    def take(self, k):
        w = Work.__new__(Work)
        for name in (*self._FLOATS, "u", "b"):
            setattr(w, name, getattr(self, name)[:k])
        return w


_ALL = slice(None)
_HALF_QUANTUM_MASKS = [operand((1 << (51 - m)) - 1) for m in range(51)]


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
    np.bitwise_and(hi.view(_U), _HALF_QUANTUM_MASKS[m], out=w.u)
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
    ls = error(subset_plan(plan, sel), *(x[sel] for x in operands), hs, Work(hs.size), counts)
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


def add_kernel(plan, a, b, w, counts):
    s = np.add(a, b, out=w.h)
    return _with_error(plan, _add_error, s, w, counts, a, b)


def sub_kernel(plan, a, b, w, counts):
    return add_kernel(plan, a, np.negative(b), w, counts)


def _add_error(plan, a, b, s, w, counts):
    t = two_sum_err(a, b, s, w.l, w.t1)
    if not math.isfinite(np.add.reduce(t)):
        _add_special(plan, a, b, s, t, counts)
    if plan.identity:
        # fl(a + b) == ±max with an error of its sign: max < |a + b| < max + ulp/2.
        past = np.flatnonzero((np.abs(s) == MAX64) & (t != 0)
                              & (np.signbit(t) == np.signbit(s)))
        if past.size:
            s[past] = fp64_past_max(subset_plan(plan, past), s[past], t[past], counts)
            t[past] = 0.0
    _zero_sign_rd(plan, s, a, b)
    return t


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
            si[ov] = np.copysign(MAX64, si[ov])
        else:
            si[ov] = fp64_sum_overflow(subset_plan(plan, idx[ov]), ai[ov], bi[ov], counts)
    s[idx], t[idx] = si, ti


_LOW27 = operand((1 << 27) - 1)


def mul_kernel(plan, a, b, w, counts):
    p = np.multiply(a, b, out=w.h)
    return _with_error(plan, _mul_error, p, w, counts, a, b)


def _mul_error(plan, a, b, p, w, counts):
    if _in_range(p.view(_U), w.u):
        np.bitwise_or(a.view(_U), b.view(_U), out=w.u)
        np.bitwise_and(w.u, _LOW27, out=w.u)
        if not w.u.any():
            return None      # factors of <= 26 bits, product in range: exact in float64
        e = two_prod_err(a, b, p, w.l, w.t1, w.t2, w.t3, w.t4)
        if math.isfinite(np.add.reduce(e)):
            return e
    e = two_prod_err(a, b, p, w.l, w.t1, w.t2, w.t3, w.t4)
    idx = np.flatnonzero(_out_of_range(p) | ~np.isfinite(e))
    p[idx], e[idx] = _mul_slow(subset_plan(plan, idx), a[idx], b[idx], p[idx], counts)
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
        hi[gen], lo[gen] = rescale(subset_plan(plan, gen), h, two_prod_err_alloc(ma, mb, h),
                                    ea.astype(np.int64) + eb, ref[gen], counts)
    return hi, lo


def div_kernel(plan, a, b, w, counts):
    q = np.divide(a, b, out=w.h)
    return _with_error(plan, _div_error, q, w, counts, a, b)


def _div_error(plan, a, b, q, w, counts):
    if not (_in_range(a.view(_U), w.u) and _in_range(b.view(_U), w.u)
            and _in_range(q.view(_U), w.u)):
        bad = _out_of_range(a) | _out_of_range(b) | _out_of_range(q)
        good, idx = np.flatnonzero(~bad), np.flatnonzero(bad)
        lo = w.l
        lo[good] = _div_lo(plan, a[good], b[good], q[good])
        q[idx], lo[idx] = _div_slow(subset_plan(plan, idx), a[idx], b[idx], q[idx], counts)
        return lo
    pq, e = w.t5, w.t6
    np.multiply(q, b, out=pq)
    two_prod_err(q, b, pq, e, w.t1, w.t2, w.t3, w.t4)
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
    r = (a - pq) - two_prod_err_alloc(q, b, pq)   # r == a - q*b exactly
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
        hi[gen], lo[gen] = rescale(subset_plan(plan, gen), q, _div_lo(plan, ma, mb, q),
                                    ea.astype(np.int64) - eb, ref[gen], counts)
    return hi, lo


def sqrt_kernel(plan, a, w, counts):
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
        s[idx], lo[idx] = _sqrt_slow(subset_plan(plan, idx), a[idx], s[idx], counts)
        return lo
    ps, e = w.t5, w.t6
    np.multiply(s, s, out=ps)
    two_prod_err(s, s, ps, e, w.t1, w.t2, w.t3, w.t4)
    r = np.subtract(a, ps, out=w.t1)            # Sterbenz: fl(s*s) is within 2x of a
    np.subtract(r, e, out=r)                    # r == a - s*s exactly (s = RN(sqrt(a)))
    lo = np.divide(r, s, out=w.l)               # sign of sqrt(a) - s, and never 0 when r != 0
    # sqrt(a) - s == r / (sqrt(a) + s), and r / (2s) is that to within 2**-53 of it.
    lo *= 0.5 * _tail_scale(plan)
    return lo


def _sqrt_lo(plan, a, s):
    ps = s * s
    r = (a - ps) - two_prod_err_alloc(s, s, ps)   # r == a - s*s exactly
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


def _short_factors(a, b, buf):
    """Whether every ``a`` and ``b`` (finite) has a significand of at most 26 bits."""
    np.bitwise_or(a.view(_U), b.view(_U), out=buf)
    np.bitwise_and(buf, _LOW27, out=buf)
    return not buf.any()


def fma_kernel(plan, a, b, c, w, counts):
    p = np.multiply(a, b, out=w.t5)
    in_range = _in_range(p.view(_U), w.u)
    c_in_range = in_range and (np.bitwise_and(c.view(_U), _ABS, out=w.u).max() <= _HI_BITS)
    if c_in_range and _short_factors(a, b, w.u):
        # Factors of <= 26 bits, product in range: p == a*b exactly (its error term is
        # zero), so the Dekker split is skipped.
        if plan.identity:
            e = w.t6
            e.fill(0.0)
            hi, lo = _fma_sum(plan, p, e, c)
        else:
            # TwoSum: hi + lo == p + c == a*b + c exactly, hi = RN of it; three_sum with
            # e == 0 returns this very pair.
            hi = np.add(p, c, out=w.h)
            lo = two_sum_err(p, c, hi, w.l, w.t1)
        _fma_zero_sign(plan, hi, lo, p, c, slice(None))
        return hi, lo
    e = two_prod_err(a, b, p, w.t6, w.t1, w.t2, w.t3, w.t4)
    ok = c_in_range and math.isfinite(np.add.reduce(e))
    if not ok:
        bad = _out_of_range(p) | ~np.isfinite(e) | ((c.view(_U) & _ABS) > _HI_BITS)
        good, idx = np.flatnonzero(~bad), np.flatnonzero(bad)
        hi, lo = w.h, w.l
        hi[good], lo[good] = _fma_sum(plan, p[good], e[good], c[good])
        _fma_zero_sign(plan, hi, lo, p, c, good)
        hi[idx], lo[idx] = _fma_slow(subset_plan(plan, idx), a[idx], b[idx], c[idx], counts)
        return hi, lo
    hi, lo = _fma_sum(plan, p, e, c)
    _fma_zero_sign(plan, hi, lo, p, c, slice(None))
    return hi, lo


def _fma_sum(plan, p, e, c):
    """(hi, lo) of p + e + c: hi faithful for round-to-odd, RN for FP64 (`nearest_pair`)."""
    if plan.identity:
        return nearest_pair(*three_sum_parts(p, e, c))
    return three_sum(p, e, c)


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
        ref = fp64_scaled_nearest(h, l_, E) if plan.identity else None
        hg, lg = rescale(subset_plan(plan, gen), h, l_, E, ref, counts)
        # a*b != 0 here, so an exact zero is a cancellation: +0, or -0 under rd (a
        # zero result from a nonzero h + l, rounded or flushed, keeps its sign).
        hg = np.where((h == 0) & (l_ == 0), -0.0 if plan.mode == "rd" else 0.0, hg)
        hi[gen], lo[gen] = hg, lg
    return hi, lo


def _fma_normalised(a, b, c, nearest=False):
    """(h, l, E): a*b + c == (h + l') * 2**E up to sign-irrelevant parts, h faithful,
    or with ``nearest`` (FP64) h and l as `nearest_pair` makes them."""
    ma, ea = np.frexp(a)
    mb, eb = np.frexp(b)
    E = ea.astype(np.int64) + eb
    p = ma * mb
    e = two_prod_err_alloc(ma, mb, p)           # exact: significands in [0.5, 1)
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
    parts = three_sum_parts(p[near], e[near], cs)
    h[near], l_[near] = nearest_pair(*parts) if nearest else (parts[0], parts[1] + parts[2])
    E = np.where(far, ec, E)
    return h, l_, E


def copy_kernel(plan, a, w, counts):
    h = w.h
    h[...] = a
    return h, None
