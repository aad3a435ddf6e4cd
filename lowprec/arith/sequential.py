# One module (~1,050 lines): the sums, the FMA chains and Kahan share the scalar steps
# (`_Rounding`, `_add`, `_binade`, `_Steps`), private here; a split would publish them.
"""Sequential sums at vector speed: ``acc = round(acc + x_i)``, left to right.

`sequential` computes the sums (or the prefix sums) of the columns of a 2-D array,
every addition a correct rounding in the plan's format and mode, bit for bit what
`stepwise` (the reference: one `apply` of `add_kernel` per step, the implementation
before this module) computes; `fused_dot` does the same for FMA chains (terms that
are exact products ``hi + lo``) and `kahan_sum` for Kahan's four roundings per step.
It runs in binade runs: while the exact partial sums stay inside one binade of the
accumulator, a run of steps is one cumulative sum of the terms rounded to that
binade's quantum (a vector window), or a scalar Python step of a few float
operations; a step that leaves the binade, or meets a tie, a zero or a special, is
rounded on its own (TwoSum on Python floats, then the grid of the exact sum's
binade), and anything rarer (overflow, results below 2**emin in "sr" or without
subnormals, a first NaN or inf operand, FP64 itself) takes the reference step. From
a NaN or inf running value on, the steps are the reference's, a window of them per
vector call (`_special_tail`, `_kahan_tail`: IEEE fixes such a value until the
opposite infinity or a NaN arrives, so it rarely changes). While a
``lp.flags()`` block listens, everything takes the reference (its counts are the
contract). This module must never round a sum twice, never modify its inputs, and
never hold more than a block (`BLOCK` terms per column) of float64 and Python copies.

Why a run is exact. Let the accumulator ``acc`` be a multiple of q = 2**(e - m) and
let the exact sum v = acc + x lie strictly inside the binade (2**e, 2**(e+1)) of one
sign (the top binade ends at max instead). The format's values in the closed binade
[2**e, 2**(e+1)] are exactly the multiples of q there (2**(e+1) itself included,
as 1.0 * 2**(e+1)), and each neighbour of v is in it, so round(v) is v rounded to
the q-grid: k*q with k even for RNE ties (the last significand bit is k's). The
q-grid is invariant under a shift by acc, so round(v) = acc + round_q(x), where
round_q is floor or ceil (rd, ru; rz: floor for a positive binade, ceil for a
negative one, the sum's sign being fixed inside it), nearest with ties away from
zero in the binade's direction (rna), nearest with ties to even (rne: the tie's
parity depends on acc's k, so a tie ends the run and the scalar step, which knows
k, does it). A sum that lands on 2**(e+1) (rounded up from inside) is a value and a
multiple of q: the next step may stay in the run. A sum on 2**e or 2**(e+1) exactly,
below 2**e, or of the other sign, leaves the run: the test is on fl(acc + x), and
fl is monotone, so 2**e < fl(v) < 2**(e+1) implies 2**e < v < 2**(e+1). Zero is
never inside a run (runs are only in normal binades), so the sign of a zero sum is
always the scalar step's: +0 for an exact zero sum, -0 under rd, -0 + -0 = -0
(IEEE 754 §6.3), fnuz +0, and a nonzero sum rounded to zero keeps its sign. Within
a run the partial sums are multiples of q of magnitude <= 2**(e+1), m + 2 bits, so
``acc + q * cumsum(round_q(x / q))`` is exact in float64 up to the first step that
leaves the run (and what follows it is discarded).
"""

from __future__ import annotations

import math

import numpy as np

from ..engine import parallel
from ..engine.eft import two_prod_err_alloc
from ..status import recording
from .driver import Buffers, apply
from .kernels import add_kernel, copy_kernel, fma_kernel, mul_kernel, sub_kernel

__all__ = ["sequential", "fused_dot", "kahan_sum", "stepwise", "fast_possible", "BLOCK",
           "NARROW"]


#: Terms converted to float64 (and Python floats) at a time, per column.
BLOCK = 1 << 15
#: Columns up to which the per-column fast path is used; wider arrays keep the
#: reference path, already vectorised across columns.
NARROW = 64
_MIN_RUN = 24       # scalar steps in one binade before a vector window is tried
_MIN_WINDOW, _MAX_WINDOW = 64, 1 << 14
_TWO52 = 2.0 ** 52
_TAIL_MIN = 256     # first window of the steps after a NaN or inf


def stepwise(plan, x, order="sequential", prefix=False):
    """The reference: reduce axis 0 of the 2-D array ``x`` with one `apply` per step
    (``order`` "sequential" or "kahan"); with ``prefix``, every partial sum (n, m).

    Examples
    --------
    >>> import numpy as np
    >>> from lowprec.engine.plan import plan
    >>> stepwise(plan("bf16", "rne"), np.array([[256.0], [1.0], [1.0], [2.0]]), prefix=True)
    array([[256.],
           [256.],
           [256.],
           [258.]])
    """
    n, m = x.shape
    if n == 0:
        return np.zeros((0, m)) if prefix else np.zeros(m)
    buffers = Buffers(max(1, min(parallel.CHUNK, m)))
    streams = step_streams(plan, order)

    def step(i, k, kernel, *operands):
        # "sr": the rounding of step i (term i, column j) draws position i*m + j of
        # its operation's stream (`step_streams`).
        here = plan if streams is None else plan.with_stream(streams[k].at(i * m))
        return apply(here, kernel, [np.ascontiguousarray(v).reshape(-1) for v in operands],
                     operands[0].size, buffers)

    acc = step(0, 0, copy_kernel, x[0])
    out = np.empty((n, m)) if prefix else None
    if out is not None:
        out[0] = acc
    if order == "sequential":
        for i in range(1, n):
            acc = step(i, 0, add_kernel, acc, x[i])
            if out is not None:
                out[i] = acc
        return acc if out is None else out
    comp = np.zeros(m)
    for i in range(1, n):
        # Kahan: comp carries the part of the previous term that the sum lost.
        y = step(i, 1, sub_kernel, x[i], comp)
        t = step(i, 0, add_kernel, acc, y)
        comp = step(i, 3, sub_kernel, step(i, 2, sub_kernel, t, acc), y)
        acc = t
    return acc


def step_streams(plan, order):
    """"sr": the streams of a step's roundings, by operation: 0 the accumulating
    addition (and term 0's own rounding), 1-3 Kahan's ``x - c``, ``t - acc`` and
    ``(t - acc) - y`` (`Stream.derived`); None in the other modes."""
    if plan.mode != "sr":
        return None
    s = plan.stream
    return [s] if order == "sequential" else [s, s.derived(1), s.derived(2), s.derived(3)]


def fast_possible(plan, x):
    """Whether the fast path computes what `stepwise` does for ``x`` (2-D): not while
    flags are counted (the reference's counts are the contract), not for FP64, nor
    for terms float64 cannot hold, nor for "sr" beyond one column, without
    subnormals or with a generator of 32-bit words (its stream is the reference's)."""
    n, m = x.shape
    if recording() is not None or plan.identity or m > NARROW or n == 0:
        return False
    kind, size = x.dtype.kind, x.dtype.itemsize
    if not ((kind == "f" and size <= 8) or kind == "b" or (kind in "iu" and size <= 4)):
        return False
    if plan.mode == "sr":
        return m == 1 and plan.subnormals
    return True


def _products(a, b):
    """(hi, lo) of the exact products of the float64 arrays ``a``, ``b``: Dekker's
    ``hi + lo == a*b`` exactly, lo None where every product is exact in float64
    (factors of at most 26 significant bits, as every format's but FP64's). Where
    Dekker is not exact (|hi| outside [2**-960, 2**1021], a product that underflowed
    to zero, factors not finite) hi is NaN: the reference step (`fma`) takes it."""
    hi = a * b
    ah = np.abs(hi)
    ok = (ah >= 2.0 ** -960) & (ah <= 2.0 ** 1021)
    ok |= (a == 0) | (b == 0)
    ok &= np.isfinite(a) & np.isfinite(b)
    lo = two_prod_err_alloc(a, b, hi)          # Dekker: hi + lo == a*b exactly (where ok)
    if not ok.all():
        hi[~ok] = np.nan
        lo[~ok] = 0.0
    return hi, (lo if lo.any() else None)


class _Rounding:
    """The constants of one plan that the scalar steps read, as Python numbers."""

    def __init__(self, plan):
        fmt = plan.fmt
        self.mode = plan.mode
        self.m = fmt.mantissa_bits
        self.emin, self.emax = fmt.emin, fmt.emax
        self.tiny = 2.0 ** fmt.emin
        self.max = fmt.max
        self.subnormals = plan.subnormals
        self.neg_zero = fmt.has_negative_zero
        shift = 52 - self.m
        self.shift = shift
        r = shift if plan.sr_bits is None else min(plan.sr_bits, shift)
        self.sr_drop, self.sr_up = 64 - r, shift - r
        self.carry = 1 << shift
        # The quantum 2**(e - m) of every normal binade e.
        self.quanta = {e: 2.0 ** (e - self.m) for e in range(fmt.emin, fmt.emax + 1)}
        # Where float64's own zero sign (round to nearest) is the format's.
        self.float_zero = self.neg_zero and self.mode != "rd"
        self.binades: dict = {}


def _round_pair(rd, s, err, word):
    """Round the exact value ``s + err`` (``s`` = fl(s + err), finite, nonzero) to the
    format; None where the reference step must do it (overflow, subnormal range in
    "sr" or without subnormals).

    The grid: ``v = s + err`` lies in the binade [2**e, 2**(e+1)) of ``s``, one lower
    when ``s`` is a power of two and ``err`` points below it; the format's values
    in that closed binade are the multiples of q = 2**(e - m) (below 2**emin: of
    2**(emin - m)), so rounding ``v`` is rounding it to the q-grid."""
    mant, ex = math.frexp(s)
    e = ex - 1
    if (mant == 0.5 or mant == -0.5) and err != 0 and (err < 0) != (s < 0):
        e -= 1                                     # v just below |s| = 2**e
    if not rd.emin <= e <= rd.emax:
        if e > rd.emax or not rd.subnormals or rd.mode == "sr":
            return None
        e = rd.emin
    q = rd.quanta[e]
    mode = rd.mode
    if mode == "sr":
        return _round_sr(rd, s, err, e, q, word)
    big = q * (1.5 * _TWO52)
    # |s| < 2**(m+1) q, so s + big stays in big's binade, whose float64 ulp is q:
    # fl(s + big) - big is s rounded to the q-grid, ties to even (even k of k*q).
    r = (s + big) - big
    d = s - r                                      # exact: |d| <= q/2, one grid
    # v - r == d + err; |err| <= ulp64(s)/2 < |d| unless d == 0: the sign is exact.
    sigma = (d > 0) - (d < 0) if d != 0 else (err > 0) - (err < 0)
    if sigma != 0:
        other = r + sigma * q
        if mode == "rne" or mode == "rna":
            if d == 0.5 * q or d == -0.5 * q:
                if err == 0:                       # an exact tie
                    if mode == "rna" and abs(other) > abs(r):
                        r = other
                elif (err > 0) == (d > 0):         # past the midpoint
                    r = other
        elif mode == "ru":
            r = max(r, other)
        elif mode == "rd":
            r = min(r, other)
        elif mode == "rz":
            r = r if abs(r) < abs(other) else other
        elif (r / q) % 2.0 == 0.0:                 # ro: the odd neighbour
            r = other
    if abs(r) > rd.max:
        return None
    if r == 0:
        r = math.copysign(0.0, s) if rd.neg_zero else 0.0   # rounding keeps the sign
    return r


def _round_sr(rd, s, err, e, q, word):
    """"sr" as the reference's encoding path: the float64 round-to-odd of ``s + err``,
    plus the top bits of ``word`` at its low 52 - m bits, truncated to the grid."""
    xo = s
    if err != 0 and (s / math.ulp(s)) % 2.0 == 0.0:
        xo = math.nextafter(s, math.inf if err > 0 else -math.inf)
    a = abs(xo)
    if a < rd.tiny:
        return None
    down = math.floor(a / q) * q                   # exact: a/q < 2**(m+1)
    frac = int((a - down) * math.ldexp(1.0, rd.shift - e + rd.m))   # low bits, exact
    bits = (int(word) >> rd.sr_drop) << rd.sr_up
    r = down + q if frac + bits >= rd.carry else down
    if r > rd.max:
        return None
    return r if xo > 0 else -r


def _add_zero(rd, a, b):
    """The exact zero sum a + b == 0 (IEEE 754 §6.3): +0 unless both are -0, and -0
    under rd unless both are +0; fnuz formats have only +0."""
    if not rd.neg_zero:
        return 0.0
    if rd.mode == "rd":
        return -0.0 if (math.copysign(1.0, a) < 0 or math.copysign(1.0, b) < 0) else 0.0
    return -0.0 if (math.copysign(1.0, a) < 0 and math.copysign(1.0, b) < 0) else 0.0


def _add(rd, a, b, word=0):
    """round(a + b) on Python floats (a, b finite), or None for the reference step."""
    s = a + b
    if not -1e300 < s < 1e300 or not -1e300 < a < 1e300 or not -1e300 < b < 1e300:
        return None
    bb = s - a
    err = (a - (s - bb)) + (b - bb)                # TwoSum: s + err == a + b exactly
    if s == 0:                                     # s == 0: the sum is exact
        # "sr" draws a second number below 2**emin: the reference step's stream.
        return None if rd.mode == "sr" else _add_zero(rd, a, b)
    return _round_pair(rd, s, err, word)


def _add3(rd, acc, hi, lo, word=0):
    """round(acc + hi + lo) on Python floats (hi + lo an exact product, |lo| <=
    ulp(hi)/2), or None for the reference step."""
    if not (-1e300 < acc < 1e300 and -1e300 < hi < 1e300):
        return None
    s1 = hi + acc
    bb = s1 - hi
    t1 = (hi - (s1 - bb)) + (acc - bb)             # TwoSum: hi + acc == s1 + t1
    s2 = t1 + lo
    bb = s2 - t1
    t2 = (t1 - (s2 - bb)) + (lo - bb)              # TwoSum: t1 + lo == s2 + t2
    s = s1 + s2
    bb = s - s1
    t3 = (s1 - (s - bb)) + (s2 - bb)               # exact == s + t3 + t2
    # As `three_sum_parts`: s is faithful, and fl(t3 + t2) has the sign of the rest.
    rest = t3 + t2
    if s == 0:
        return _add_zero(rd, hi, acc)              # hi != 0: the product is not zero
    return _round_pair(rd, s, rest, word)


def _round1(rd, x, word=0):
    """round(x) of one float64 term, or None for the reference step."""
    if x == 0:
        if rd.mode == "sr":
            return None                            # the reference step's two draws
        return x if rd.neg_zero else 0.0
    if not -1e300 < x < 1e300:
        return None
    return _round_pair(rd, x, 0.0, word)


class _Words:
    """The "sr" words of one column (``j`` of ``m``): the step that adds term ``i``
    (term 0: its own rounding) draws the word of position ``i*m + j``, as `stepwise`
    draws it (`engine.stream`); ``pos`` is the current step."""

    def __init__(self, plan, j=0, m=1):
        self.plan, self.j, self.m = plan, j, m
        self.stream = plan.stream if plan.mode == "sr" else None
        self.pos = 0
        self.arr = np.empty(0, np.uint64)
        self.first = 0
        self.buf: list[int] = []

    def _ensure(self, n):
        if not self.first <= self.pos or self.pos + n > self.first + len(self.buf):
            assert self.m == 1, "sr fast path: one column"
            self.first = self.pos
            self.arr = self.stream.words(self.pos, max(n, 1024))
            self.buf = self.arr.tolist()

    def array(self, n):
        """The words of the next ``n`` steps as an array (`consume` says how many were
        used)."""
        self._ensure(n)
        return self.arr[self.pos - self.first:self.pos - self.first + n]

    def word(self):
        if self.stream is None:
            return 0
        self._ensure(1)
        return self.buf[self.pos - self.first]

    def consume(self, k):
        self.pos += k

    def here(self):
        """The plan for the reference step of the current step: its words at the
        step's position."""
        if self.stream is None:
            return self.plan
        return self.plan.with_stream(self.stream.at(self.pos * self.m + self.j))


def _reference_add(plan, acc, x):
    out = apply(plan, add_kernel, [np.array([acc]), np.array([x])], 1)
    return float(out[0])


def _reference_round(plan, x):
    return float(apply(plan, copy_kernel, [np.array([x])], 1)[0])


def _reference_fma(plan, a, b, acc):
    return float(apply(plan, fma_kernel, [np.array([a]), np.array([b]), np.array([acc])], 1)[0])


def _reference_mul(plan, a, b):
    return float(apply(plan, mul_kernel, [np.array([a]), np.array([b])], 1)[0])


def _binade(rd, acc):
    """The `_Binade` of ``acc`` (one per binade and sign, kept on ``rd``)."""
    if acc == 0 or not -rd.max <= acc <= rd.max:
        return _NO_BINADE
    key = (math.frexp(acc)[1], acc > 0)
    b = rd.binades.get(key)
    if b is None:
        b = rd.binades[key] = _Binade(rd, acc)
    return b


class _Binade:
    """The run state: the open interval (lo, hi) the float64 sums stay in, its
    quantum q, and the direction of the directed modes in it."""

    __slots__ = ("lo", "hi", "q", "big", "up", "ok", "lo_in", "hi_in", "margin", "h2")

    def __init__(self, rd, acc):
        # Runs only in a normal binade: there no result is zero or subnormal.
        self.ok = False
        if rd is None or acc == 0 or not -rd.max <= acc <= rd.max:
            return
        e = math.frexp(acc)[1] - 1
        if e < rd.emin:
            return
        lo, hi = math.ldexp(1.0, e), min(math.ldexp(1.0, e + 1), rd.max)
        if hi <= lo:
            return
        self.q = math.ldexp(1.0, e - rd.m)
        self.big = self.q * (1.5 * _TWO52)
        self.lo, self.hi = (lo, hi) if acc > 0 else (-hi, -lo)
        # For terms hi + lo, fl(fl(acc + hi) + lo) is within 2**(e - 51) of the exact
        # sum when that is inside: a margin of 2**(e - 49) keeps the test sure.
        margin = math.ldexp(1.0, e - 49)
        self.lo_in, self.hi_in = self.lo + margin, self.hi - margin
        self.margin, self.h2 = margin, 0.5 * self.q - margin
        mode = rd.mode
        self.up = mode == "ru" or (mode == "rz" and acc < 0)
        self.ok = True


_NO_BINADE = _Binade(None, 0.0)


def _sr_window(rd, b, xw, acc, words):
    """`_window` for "sr" (single terms): step i adds the i-th word's top bits to the
    low 52 - m bits of the float64 round-to-odd of the exact sum, as the reference's
    encoding path does. Inside the binade acc is a multiple of q, so that
    round-to-odd is acc + ro(x) (on float64's ulp there, 2**-(52 - m) q), and its low
    bits are those of ro(x)/ulp, an integer below 2**52 (larger ones: cut)."""
    scale = 2.0 ** rd.shift
    sign = 1.0 if b.lo > 0 else -1.0
    big_t = xw * (sign * scale / b.q)              # |x| / ulp toward the binade's sign
    f = np.floor(big_t)
    inexact = big_t != f
    y = f + (inexact & (np.floor(f * 0.5) * 2 == f))   # round to odd: exact integers
    k = np.floor(y * (1.0 / scale))
    frac = y - k * scale                           # the low 52 - m bits, exact
    w = words.array(xw.size)
    rnd = ((w >> np.uint64(rd.sr_drop)) << np.uint64(rd.sr_up)).astype(np.float64)
    k += (frac + rnd) >= scale                     # the carry: up with P = frac/2**(52-m)
    bad = np.abs(big_t) >= 2.0 ** 52
    bad |= (big_t == 0) & (xw != 0)                # underflow: ro would be 1, not 0
    c = np.cumsum(k)
    c *= sign * b.q
    c += acc
    v = np.empty_like(xw)
    v[0] = acc
    v[1:] = c[:-1]
    v += xw
    ok = v > b.lo
    ok &= v < b.hi
    ok &= ~bad
    n = int(np.argmin(ok))
    return (len(xw) if ok[n] else n), c


def _window(rd, b, xw, acc, lw=None):
    """One vector run from ``acc`` over the terms ``xw`` (+ ``lw``, the low parts of
    exact products): (k, partial sums), the first k of them correct (k < len(xw):
    step k leaves the binade, is a tie, or its low part decides its rounding).

    Inside the binade's interval every partial sum is a multiple of q below
    2**(e+1) (m + 2 bits): ``acc + q*cumsum(d)`` is exact, and because ``acc`` is a
    multiple of q, round(acc + x) == acc + round_q(x) (the q-grid is invariant under
    the shift; rz, and rna's ties, are fixed by the binade's sign)."""
    mode = rd.mode
    t = xw * (1.0 / b.q)                           # exact unless it underflows (below)
    if mode == "rne" or mode == "rna":
        d = np.rint(t)
        # t - d is exact (|t - d| <= 1/2). A low part moves hi + lo off a midpoint of
        # the grid only where hi/q is one (|lo| <= ulp(hi)/2 cannot cross another).
        bad = np.abs(t - d) == 0.5
        if mode == "rna":
            tie = bad if lw is None else bad & (lw == 0)
            if tie.any():
                d[tie] = t[tie] + (0.5 if b.lo > 0 else -0.5)   # away: the sum's sign
            if lw is None:
                bad = None
            else:
                bad &= lw != 0
    elif mode == "ro":
        # k_i = k_{i-1} + floor(t_i) + c_i, c_i making k_i odd when t_i is inexact:
        # the parity of k_{i-1} is 1 after an inexact step, then changes with each
        # exact t_j; before any, it is acc's. (Single terms only.)
        f = np.floor(t)
        inexact = t != f
        g = np.where(inexact, 0.0, np.mod(f, 2.0))
        gsum = np.cumsum(g)
        idx = np.where(inexact, np.arange(t.size), -1)
        np.maximum.accumulate(idx, out=idx)
        last = np.empty_like(idx)
        last[0] = -1
        last[1:] = idx[:-1]                        # the last inexact step before i
        before = np.empty_like(gsum)
        before[0] = 0.0
        before[1:] = gsum[:-1]
        at_last = np.where(last >= 0, gsum[np.maximum(last, 0)], 0.0)
        base = np.where(last >= 0, 1.0, (acc / b.q) % 2.0)
        parity = np.mod(base + before - at_last, 2.0)
        d = f + np.where(inexact, np.mod(parity + f + 1.0, 2.0), 0.0)
        bad = (t == 0) & (xw != 0)                 # x*(1/q) underflowed: inexact unseen
    else:
        d = np.ceil(t) if b.up else np.floor(t)
        bad = (t == 0) & (xw != 0)                 # x*(1/q) underflowed: ceil/floor lost it
        if lw is not None:
            bad |= (t == d) & (lw != 0)            # on the grid: the low part decides
    c = np.cumsum(d)
    c *= b.q
    c += acc
    v = np.empty_like(xw)
    v[0] = acc
    v[1:] = c[:-1]
    v += xw                                        # fl(acc_{i-1} + x_i): inside iff v is
    if lw is None:
        ok = v > b.lo
        ok &= v < b.hi
    else:
        v += lw
        ok = v > b.lo_in
        ok &= v < b.hi_in
    if bad is not None:
        ok &= ~bad
    k = int(np.argmin(ok))
    return (len(xw) if ok[k] else k), c


def _nearest_steps(xs, i, stop, acc, b, res):
    """Scalar binade steps of rne/rna from term ``i`` while they stay in ``b`` and
    off the grid's midpoints (single terms); returns (i, acc) where they stopped.

    fl(s + big) - big is s on the q-grid, ties to even; d = s - r is exact, and
    with s = fl(acc + x) off a midpoint, the exact sum (within half an ulp of s,
    midpoints being a float64 number or more away) rounds to r as well."""
    lo, hi, big = b.lo, b.hi, b.big
    hq = 0.5 * b.q
    while i < stop:
        s = acc + xs[i]
        if not lo < s < hi:
            break
        r = (s + big) - big
        d = s - r
        if d == hq or d == -hq:
            break
        acc = r
        if res is not None:
            res[i] = r
        i += 1
    return i, acc


def _directed_steps(xs, i, stop, acc, b, res):
    """Scalar binade steps of rz/ru/rd (single terms), as `_nearest_steps`: the side
    of the exact sum is that of d = s - r, or of the TwoSum error where d is 0."""
    lo, hi, big, q, up = b.lo, b.hi, b.big, b.q, b.up
    while i < stop:
        x = xs[i]
        s = acc + x
        if not lo < s < hi:
            break
        r = (s + big) - big
        d = s - r
        if d == 0:
            bb = s - acc
            d = (acc - (s - bb)) + (x - bb)       # TwoSum: s + d == acc + x exactly
        if d > 0:
            if up:
                r += q
        elif d < 0 and not up:
            r -= q
        acc = r
        if res is not None:
            res[i] = r
        i += 1
    return i, acc


def _pair_steps(xs, ls, i, stop, acc, b, res, nearest):
    """Scalar binade steps of terms ``hi + lo`` (exact products): s = fl(fl(acc + hi)
    + lo) is within `_Binade`'s margin of the exact sum inside the binade, so off the
    grid's midpoints (nearest) or points (directed) by more it rounds as that does;
    a step with lo == 0 takes the single-term rule."""
    lo_in, hi_in, big, q, up = b.lo_in, b.hi_in, b.big, b.q, b.up
    margin, h2 = b.margin, b.h2
    while i < stop:
        x, lo = xs[i], ls[i]
        if lo == 0:
            j, acc = (_nearest_steps if nearest else _directed_steps)(xs, i, i + 1, acc, b, res)
            if j == i:
                break
            i = j
            continue
        s = (acc + x) + lo
        if not lo_in < s < hi_in:
            break
        r = (s + big) - big
        d = s - r
        if nearest:
            if not -h2 < d < h2:
                break
        elif -margin < d < margin:
            break
        elif d > 0:
            if up:
                r += q
        elif not up:
            r -= q
        acc = r
        if res is not None:
            res[i] = r
        i += 1
    return i, acc


def _column(plan, rd, n, block, words, out, factors=None):
    """The sequential sum of one column of ``n`` terms, ``block(a, b)`` giving terms
    a:b as (float64 hi, lo or None): ``hi + lo`` exact; with ``out`` (float64, n)
    every partial sum is written there. ``factors`` (a, b): the terms are the exact
    products a_i*b_i (hi NaN where the reference `fma` must take the step).

    Scalar binade steps run until a step leaves the binade; after ``need`` of them
    in one binade a vector window is tried, ``window`` terms long: doubled when it
    fills, halved when it is cut early, and ``need`` doubled too, so that a random
    walk, whose runs are short, stays scalar, and a long run is vector work."""
    mode = rd.mode
    scalar = mode in ("rne", "rna", "rz", "ru", "rd")     # binade steps in Python
    sr = mode == "sr"
    sr_windows = sr and factors is None
    vector = scalar or (mode in ("ro", "sr") and factors is None)    # binade windows
    nearest = mode in ("rne", "rna")
    acc = 0.0
    window, need = _MIN_WINDOW * 4, _MIN_RUN
    for start in range(0, n, BLOCK):
        xa, la = block(start, min(start + BLOCK, n))
        xs = xa.tolist()
        ls = None if la is None else la.tolist()
        nb = len(xs)
        res = None if out is None else [0.0] * nb
        i = 0
        if start == 0:
            if ls is None or ls[0] == 0:
                r = _round1(rd, xs[0], words.word())
            else:
                r = _round_pair(rd, xs[0], ls[0], words.word())
            if r is None:
                here = words.here()
                r = _reference_round(here, xs[0]) if factors is None else \
                    _reference_mul(here, float(factors[0][0]), float(factors[1][0]))
            words.consume(1)
            acc = r
            if res is not None:
                res[0] = acc
            i = 1
            if factors is None and not -math.inf < acc < math.inf:
                if out is not None:
                    out[0] = acc
                return _special_tail(plan, n, block, words, out, 1, acc)
        b = _binade(rd, acc) if vector else None
        run = 0
        while i < nb:
            if b is not None and b.ok and run >= need and nb - i >= _MIN_WINDOW:
                w = min(window, nb - i)
                if sr_windows:
                    k, c = _sr_window(rd, b, xa[i:i + w], acc, words)
                    words.consume(k)
                else:
                    k, c = _window(rd, b, xa[i:i + w], acc,
                                   None if la is None else la[i:i + w])
                if k:
                    acc = float(c[k - 1])
                    if res is not None:
                        res[i:i + k] = c[:k].tolist()
                i += k
                if k == w:
                    window, need = min(window * 2, _MAX_WINDOW), _MIN_RUN
                    continue                      # the run goes on: another window
                run = 0
                if k < w // 4:
                    window, need = max(window // 2, _MIN_WINDOW), min(need * 2, 1 << 12)
            if b is not None and b.ok and scalar:
                stop = nb if run >= need else min(nb, i + need - run)
                i0 = i
                if ls is not None:
                    i, acc = _pair_steps(xs, ls, i, stop, acc, b, res, nearest)
                elif nearest:
                    i, acc = _nearest_steps(xs, i, stop, acc, b, res)
                else:
                    i, acc = _directed_steps(xs, i, stop, acc, b, res)
                run += i - i0
                if i >= nb or i == stop:
                    continue
            # The step on its own: leaving the binade, a tie, zero, specials, or any
            # step of ro and sr.
            x = xs[i]
            lo = 0.0 if ls is None else ls[i]
            if scalar and -1e300 < x < 1e300:
                # Into the binade of fl(acc + x): the binade steps round s = fl(acc + x)
                # itself (acc need not be on that grid) when s is strictly inside.
                b2 = _binade(rd, acc + x if lo == 0 else (acc + x) + lo)
                if b2.ok:
                    if ls is not None:
                        j, r = _pair_steps(xs, ls, i, i + 1, acc, b2, res, nearest)
                    elif nearest:
                        j, r = _nearest_steps(xs, i, i + 1, acc, b2, res)
                    else:
                        j, r = _directed_steps(xs, i, i + 1, acc, b2, res)
                    if j > i:
                        acc, b, run, i = r, b2, 0, j
                        continue
            if (acc != acc and x == x and lo == 0) or \
                    ((acc == math.inf or acc == -math.inf) and -1e300 < x < 1e300):
                r = acc                               # NaN + a number, inf + a finite one
                words.word()
                words.consume(1)                      # the reference draws for it too
            else:
                word = words.word() if sr else 0
                r = None
                if -1e300 < x < 1e300:
                    r = _add(rd, acc, x, word) if lo == 0 else _add3(rd, acc, x, lo, word)
                if r is None:
                    here = words.here()
                    r = _reference_add(here, acc, x) if factors is None else \
                        _reference_fma(here, float(factors[0][start + i]),
                                       float(factors[1][start + i]), acc)
                words.consume(1)
            if factors is None and not -math.inf < r < math.inf:
                # NaN or inf: every later step is IEEE's rule on it (`_special_tail`).
                if out is not None:
                    out[start:start + i] = res[:i]
                    out[start + i] = r
                return _special_tail(plan, n, block, words, out, start + i + 1, r)
            if vector:
                new = _binade(rd, r)
                # ro and sr take every step here: count those that stay in the binade.
                run = run + 1 if new is b and not scalar else 0
                b = new
            acc = r
            if res is not None:
                res[i] = acc
            i += 1
        if out is not None:
            out[start:start + nb] = res
    return acc


def _changes(values, states):
    """The index of the first row where ``values`` (arrays) differ in their bits from
    the scalars ``states``, or the rows' count."""
    n = values[0].size
    changed = np.zeros(n, bool)
    for v, s in zip(values, states):
        changed |= v.view(np.uint64) != np.float64(s).view(np.uint64)
    k = int(np.argmax(changed))
    return k if changed[k] else n


class _Steps:
    """One operation of many steps at once, as `stepwise` computes each (its column
    ``j`` of ``m``): one `apply` over the steps, except where both operands are NaN.
    There the NaN that comes out (whose sign and payload IEEE 754 leaves open) is
    NumPy's, and depends on the element's place in its array (a SIMD lane or the
    scalar remainder): it is computed as `stepwise` computes it, in an array of
    ``m`` at place ``j``, once per pair of bit patterns. Every other result is
    determined by the operands' bits alone."""

    def __init__(self, plan, j, m):
        self.plan, self.j, self.m = plan, j, m
        self.known: dict = {}

    def __call__(self, kernel, a, b, here=None):
        r = apply(self.plan if here is None else here, kernel, [a, b], a.size)
        both = np.flatnonzero(np.isnan(a) & np.isnan(b))
        ua, ub = a[both].view(np.uint64), b[both].view(np.uint64)
        while both.size:
            # One pair of bit patterns at a time: NaNs come in a few patterns.
            ab, bb = int(ua[0]), int(ub[0])
            key = (kernel, ab, bb)
            if key not in self.known:
                ops = [np.full(self.m, v, np.uint64).view(np.float64) for v in (ab, bb)]
                self.known[key] = apply(self.plan, kernel, ops, self.m)[self.j]
            this = (ua == ua[0]) & (ub == ub[0])
            r[both[this]] = self.known[key]
            rest = ~this
            both, ua, ub = both[rest], ua[rest], ub[rest]
        return r


def _special_tail(plan, n, block, words, out, pos, acc):
    """The steps ``pos:n`` of a sum whose running value ``acc`` is NaN or inf: the
    reference step, one vector call per window; returns the sum (writes ``out``).

    Why a window is exact. Step i computes round(acc_{i-1} + x_i) from the bits of
    its two operands (and, in "sr", the word of position i): one `apply` of
    `add_kernel` to ``acc`` against every term of the window computes step i's true
    result wherever every earlier step of the window left ``acc`` unchanged, bit for
    bit. So the results up to the first that differs from ``acc`` are ``acc``, and
    that one is the next state, from which the next window starts. IEEE makes the
    changes rare: NaN + anything is NaN, inf + a finite number or the same infinity
    is inf, so a sum changes only at the opposite infinity (to NaN) or a NaN term;
    windows double while nothing changes, up to `BLOCK` terms."""
    steps = _Steps(plan, words.j, words.m)
    width = _TAIL_MIN
    while pos < n:
        stop = min(n, pos + width)
        xa = np.ascontiguousarray(block(pos, stop)[0], dtype=np.float64)
        here = plan if words.stream is None else \
            plan.with_stream(words.stream.at(pos * words.m + words.j))
        r = steps(add_kernel, np.full(stop - pos, acc), xa, here)
        k = _changes([r], [acc])
        if out is not None:
            out[pos:pos + k] = acc
        if k < stop - pos:
            acc = float(r[k])
            if out is not None:
                out[pos + k] = r[k]
            pos += k + 1
            width = _TAIL_MIN
        else:
            pos = stop
            width = min(2 * width, BLOCK)
    return acc


def sequential(plan, x, prefix=False):
    """Sequential sums of the columns of the 2-D array ``x`` (axis 0), as `stepwise`
    computes them, bit for bit; ``prefix``: every partial sum, shape (n, m).

    Examples
    --------
    >>> import numpy as np
    >>> from lowprec.engine.plan import plan
    >>> x = np.ones((1000, 2))
    >>> sequential(plan("bf16", "rne"), x), sequential(plan("bf16", "ru"), x)   # ru: 256 + 1 == 258
    (array([256., 256.]), array([14848., 14848.]))
    """
    if not fast_possible(plan, x):
        return stepwise(plan, x, "sequential", prefix)
    n, m = x.shape
    rd = _Rounding(plan)
    out = np.empty((n, m)) if prefix else np.empty(m)
    for j in range(m):
        col = x[:, j]
        col_out = np.empty(n) if prefix else None
        acc = _column(plan, rd, n,
                      lambda a, b, col=col: (np.asarray(col[a:b], np.float64), None),
                      _Words(plan, j, m), col_out)
        if prefix:
            out[:, j] = col_out
        else:
            out[j] = acc
    return out


def fused_dot(plan, a, b):
    """The FMA chains ``acc = fma(a_i, b_i, acc)`` down the columns of the 2-D arrays
    ``a`` and ``b``, as the per-step chain computes them, bit for bit; None where the
    fast path does not apply (`fast_possible`; and NaN results, which fma signs
    differently from add: the caller runs the chain).

    ``fma(a_i, b_i, acc)`` is round(acc + hi + lo) for Dekker's exact product
    hi + lo (lo == 0 for factors of at most 26 significant bits): a sequential sum
    of exact two-part terms.

    Examples
    --------
    >>> import numpy as np
    >>> from lowprec.engine.plan import plan
    >>> x = np.array([[-1.0], [1 + 2.0**-8]])
    >>> fused_dot(plan("fp16", "rne"), np.array([[1.0], [1 + 2.0**-8]]), x)
    array([0.00782776])
    """
    if not (fast_possible(plan, a) and fast_possible(plan, b)):
        return None
    n, m = a.shape
    rd = _Rounding(plan)
    out = np.empty(m)
    for j in range(m):
        fa, fb = a[:, j], b[:, j]

        def block(lo, hi, fa=fa, fb=fb):
            return _products(np.asarray(fa[lo:hi], np.float64), np.asarray(fb[lo:hi], np.float64))

        out[j] = _column(plan, rd, n, block, _Words(plan, j, m), None, (fa, fb))
    if np.isnan(out).any():
        return None
    return out


def kahan_sum(plan, x):
    """Kahan's compensated sums of the columns of ``x``, every one of its four
    operations per step rounded as `stepwise` rounds them, bit for bit ("sr":
    `stepwise` itself).

    Examples
    --------
    >>> import numpy as np
    >>> from lowprec.engine.plan import plan
    >>> kahan_sum(plan("bf16", "rne"), np.ones((1000, 1)))
    array([1000.])
    """
    if not fast_possible(plan, x) or plan.mode == "sr":
        return stepwise(plan, x, "kahan")
    n, m = x.shape
    rd = _Rounding(plan)
    out = np.empty(m)
    for j in range(m):
        col = x[:, j]
        x0 = float(col[0])
        r = _round1(rd, x0)
        acc, comp = (_reference_round(plan, x0) if r is None else r), 0.0
        pos = 1
        # Finite terms and a finite state take the scalar steps; from the first NaN
        # or inf, in a term or in (acc, comp), `_kahan_tail`.
        while pos < n and -math.inf < acc < math.inf and -math.inf < comp < math.inf:
            xa = np.asarray(col[pos:pos + BLOCK], dtype=np.float64)
            finite = np.isfinite(xa)
            k = xa.size if finite.all() else int(np.argmin(finite))
            acc, comp, done = _kahan_block(plan, rd, xa[:k].tolist(), acc, comp)
            pos += done
            if done < xa.size:
                break
        if pos < n:
            acc = _kahan_tail(plan, col, j, m, pos, acc, comp)
        out[j] = acc
    return out


def _kahan_tail(plan, col, j, m, pos, acc, comp):
    """Kahan's steps ``pos:n`` of the column ``col`` from the state (acc, comp), once
    a term or the state is NaN or inf: the reference's four operations, each one
    vector call per window, as `_special_tail` (the same argument, for the pair
    (acc, comp): the results up to the first step that changes either one's bits
    are the state itself). NaN and inf reach a fixed point within a few steps:
    inf - inf in the compensation is NaN, then the next ``x - c`` is NaN, then the
    sum; NaN + anything is NaN."""
    n = col.size
    steps = _Steps(plan, j, m)
    width = _TAIL_MIN
    while pos < n:
        stop = min(n, pos + width)
        w = stop - pos
        xa = np.ascontiguousarray(col[pos:stop], dtype=np.float64)
        a = np.full(w, acc)
        y = steps(sub_kernel, xa, np.full(w, comp))
        t = steps(add_kernel, a, y)
        c = steps(sub_kernel, steps(sub_kernel, t, a), y)
        k = _changes([t, c], [acc, comp])
        if k < w:
            acc, comp = float(t[k]), float(c[k])
            pos += k + 1
            width = _TAIL_MIN
        else:
            pos = stop
            width = min(2 * width, BLOCK)
    return acc


def _kahan_block(plan, rd, xs, acc, comp):
    """Kahan's steps over the finite Python floats ``xs``: y = x - c, t = acc + y,
    c = (t - acc) - y, acc = t, each rounded; returns (acc, c, the steps taken),
    stopping before a step that would leave acc or c NaN or inf (an overflow)."""
    nearest = rd.mode in ("rne", "rna")
    directed = rd.mode in ("rz", "ru", "rd")
    exact_error = nearest and rd.subnormals
    tiny = rd.tiny
    float_zero = rd.float_zero

    def add(a, b):
        if -1e300 < b < 1e300 and -1e300 < a < 1e300:
            r = _add(rd, a, b)
            if r is not None:
                return r
        return _reference_add(plan, a, b)

    quanta, top, big52 = rd.quanta, rd.max, 1.5 * _TWO52
    b = _binade(rd, acc)
    for i, term in enumerate(xs):
        # y = round(term - comp). Nearest modes: away from a power of two (where the
        # binade of the exact value could be the lower one) and from a midpoint of
        # the grid (where the TwoSum error decides), fl(term - comp) rounds as the
        # exact difference does: |exact - fl| <= ulp64/2, and the grid's midpoints
        # are 2**(52 - m - 1) float64 ulps apart.
        y = None
        if nearest:
            s = term - comp
            mant, ex = math.frexp(s)
            q = quanta.get(ex - 1)
            if q is not None and mant != 0.5 and mant != -0.5 and s != 0:
                big = q * big52
                r = (s + big) - big
                d = s - r
                if d != 0.5 * q and d != -0.5 * q and -top <= r <= top:
                    y = r
        if y is None:
            y = add(term, -comp)
        t = None
        s = acc + y
        if b.ok and b.lo < s < b.hi:
            # The binade step of `_column`: s on the q-grid, d = s - r exact.
            t = (s + b.big) - b.big
            d = s - t
            if nearest:
                if d == 0.5 * b.q or d == -0.5 * b.q:
                    t = None
            elif directed:
                if d == 0:
                    bb = s - acc
                    d = (acc - (s - bb)) + (y - bb)
                if d > 0 and b.up:
                    t += b.q
                elif d < 0 and not b.up:
                    t -= b.q
            else:
                t = None
        rounded = True                 # t = round(acc + y), finite: no reference step
        if t is None:
            t = _add(rd, acc, y) if -1e300 < y < 1e300 and -1e300 < acc < 1e300 else None
            if t is None:
                t, rounded = _reference_add(plan, acc, y), False
            b = _binade(rd, t)
        # Sterbenz: format values within a factor 2 of each other have an exact
        # difference in the format (with subnormals; without, when it is >= 2**emin).
        if rounded and (0.5 * acc <= t <= 2.0 * acc or 2.0 * acc <= t <= 0.5 * acc):
            diff = t - acc
            if diff == 0 and not float_zero:
                diff = _add_zero(rd, t, -acc)
            elif not rd.subnormals and -tiny < diff < tiny:
                diff = add(t, -acc)
            if diff == 0 or exact_error:
                # 0 - y is -y; and the error of a round-to-nearest sum is a value of
                # the format: (t - acc) - y == t - (acc + y) exactly, fl() is exact.
                c = diff - y
                comp = c if c != 0 or float_zero else _add_zero(rd, diff, -y)
                acc = t
                continue
        else:
            diff = add(t, -acc)
        c = add(diff, -y)
        if not (-math.inf < t < math.inf and -math.inf < c < math.inf):
            # An overflow (y or diff infinite makes t or c so): the step again, by
            # the reference's own four operations (`_kahan_tail`).
            return acc, comp, i
        comp = c
        acc = t
    return acc, comp, len(xs)
