"""The exact model: each output is the exact dot product plus c, rounded once.

`Exact` settles almost every output with a float64 product (BLAS) and a rigorous
error bound; the outputs whose bound straddles a rounding boundary are summed
exactly (`_exact_round`, levels of F bits, round-to-odd, one final rounding), and
the signs of zero sums follow the model's rule, never BLAS's order of additions. A
kernel: ndarrays and `Format`\\ s in, float64 ndarrays out; it never imports `Tensor`
or reads a context default.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..engine.eft import odd, two_sum
from ..engine.float64 import EXP
from ..formats import FP64
from ..rounding import round as _round
from ..status import quiet
from .blockfma import k_spans, pow2

__all__ = ["Exact"]


def _scale(x, e):
    """x * 2**e for integer e in [-1074, 1074], exact wherever the result is a float64
    whose bits x holds: two factors, as 2**e alone may not be a normal float64."""
    e1 = np.clip(e, -1000, 1000)
    return x * pow2(e1) * pow2(e - e1)


def _exact_round(blocks, m, out):
    """RN_out of the exact sum of each row of the terms (finite float64 values) that
    ``blocks()`` yields as (n, w) blocks of columns, m terms per row in all.

    The sum is split into levels of F bits below each row's largest exponent: level
    l holds the integers trunc(r / q_l) of what previous levels left, summed exactly
    (over every block: the quanta q_l depend only on the row's top and on l).
    The level sums are carry-normalised to nonnegative digits (sign taken out),
    added from the bottom with round-to-odd at 53 bits, and rounded once to ``out``
    (round-to-odd with 2 spare bits makes the second rounding innocuous). The
    blocks are made twice (for the tops, then for the levels), so that only one
    block of terms is held at a time; a lone block may be handed out twice, as the
    first pass only reads it.
    """
    F = 52 - math.ceil(math.log2(m + 1))   # m integers below 2**F sum exactly in float64
    mag = None
    for terms in blocks():
        top_of_block = np.abs(terms).max(axis=1, initial=0.0)
        mag = top_of_block if mag is None else np.maximum(mag, top_of_block)
    n = mag.size
    top = np.where(mag > 0, np.frexp(mag)[1], 0)      # |terms| < 2**top
    levels, q_exps = [], []
    for r in blocks():                     # each block is a fresh array: r is ours
        q_exp = top - F
        for lvl in itertools.count():
            if lvl == len(levels):
                levels.append(np.zeros(n))
                q_exps.append(q_exp)
            t = np.trunc(_scale(r, -q_exp[:, None]))
            levels[lvl] += t.sum(axis=1)     # exact: at most m integers below 2**F
            r -= _scale(t, q_exp[:, None])   # exact: the bits of r below q
            del t
            if not r.any():
                break
            # Every bit of a float64 is a multiple of 2**-1074: the last level's.
            q_exp = np.maximum(q_exp - F, -1074)
    quanta = [_scale(np.ones(n), e) for e in q_exps]
    # Level l's quantum is 2**gap[l] of level l's below it: F bits, fewer where the
    # last level stops at 2**-1074 (0 for rows already there: a zero level).
    ratio = [pow2(hi - lo) for hi, lo in zip(q_exps, q_exps[1:])]
    sign = np.ones(n)
    for _ in range(2):   # the second pass sees |X|: the top is then nonnegative
        digits, carry = [], np.zeros(n)
        for lvl, up in zip(reversed(levels[1:]), reversed(ratio)):
            v = sign * lvl + carry
            carry = np.floor(v / up)            # exact: a power of two
            digits.append(v - carry * up)       # in [0, up)
        head = sign * levels[0] + carry
        sign = np.where(head < 0, -sign, sign)
        if not (head < 0).any():
            break
    x = np.zeros(n)
    for dgt, q in zip(digits, reversed(quanta[1:])):
        # TwoSum: s == fl(dgt * q + x) (a faithful neighbour) and s + t is the exact
        # sum, so `odd` is its round-to-odd at 53 bits, the kernel's rule (finite s).
        s, t = two_sum(dgt * q, x)
        x = odd(s, t, t)
    s, t = two_sum(head * quanta[0], x)
    # Only the top level reaches |X| >= 2**1024 (TwoSum then fails): inf, as |X| rounds.
    t[np.isinf(s)] = 0.0
    x = odd(s, t, t)
    # x is |X| rounded to odd, zero only when X is. A zero X is +0 (x + (-x) to
    # nearest; rows of zeros only are summed exactly and never come here); a nonzero
    # X that rounds to zero keeps its sign.
    d = np.copysign(quiet(_round, x, out), sign)
    d[x == 0] = 0.0
    return d


def _blas(a, b, out):
    """float64 matmul of (n, M, K) and (n, K, N) stacks into ``out``; 2-D when n == 1
    (BLAS's fast path)."""
    if a.shape[0] == 1:
        np.matmul(a[0], b[0], out=out[0])
    else:
        np.matmul(a, b, out=out)
    return out


class Exact:
    """One rounding of the exact dot product plus c.

    A float64 product (BLAS) and a rigorous error bound settle almost every output;
    where the bound straddles a rounding boundary the exact sum is computed by
    `_exact_round` on the gathered rows and columns.
    """

    def __init__(self, fmt, out, memory_bound):
        self.fmt, self.out, self.memory_bound = fmt, out, memory_bound

    #: Smallest span of K, and bytes per operand entry of a span: a finiteness mask,
    #: a copy without inf and NaN, the quanta, the magnitudes (see __call__).
    k_unit, entry_bytes = 1, 32

    def target_outputs(self, K):
        return 1 << 22          # BLAS wants large blocks; operands are views, not copies

    def bytes_per_output(self, K):
        # y, bound, the BLAS product, c's quanta and q, y -+ bound, lo, d and
        # lp.round's result, a copy of c without inf and NaN: about 11 float64 arrays,
        # and a few masks.
        return 96

    def empty(self, c):
        return quiet(_round, np.array(c, dtype=np.float64), self.out)   # no products: c

    def __call__(self, a, b, c):
        K = a.shape[-1]
        row_q = np.full(a.shape[:-1], np.inf)      # each row's smallest quantum
        col_q = np.full(b.shape[:-2] + b.shape[-1:], np.inf)
        row_fin = np.ones(a.shape[:-1], dtype=bool)
        col_fin = np.ones(col_q.shape, dtype=bool)
        c0 = c
        c_fin = np.isfinite(c)
        c_all_finite = bool(c_fin.all())
        if not c_all_finite:
            c = np.where(c_fin, c, 0.0)
        y, bound, tmp = np.array(c), np.zeros(c.shape), np.empty(c.shape)
        width = a.shape[0] * (a.shape[1] + b.shape[2])
        for span in k_spans(K, 1, width, self.entry_bytes, self.memory_bound):
            aj = self._finite(a[..., span], row_fin, -1)
            bj = self._finite(b[:, span], col_fin, -2)
            np.minimum(row_q, _quanta(aj, self.fmt).min(axis=-1), out=row_q)
            np.minimum(col_q, _quanta(bj, self.fmt).min(axis=-2), out=col_q)
            y += _blas(aj, bj, tmp)
            bound += _blas(np.abs(aj), np.abs(bj), tmp)
            del aj, bj
        special = None
        if not (row_fin.all() and col_fin.all() and c_all_finite):
            special = ~(row_fin[..., :, None] & col_fin[..., None, :] & c_fin)
        del c_fin
        # Any order of summing the K + 1 terms (BLAS blocks, then the spans, c first)
        # errs by at most (K + 1) u (|c| + sum|p|) / (1 - (K + 1) u); the bound and
        # y +- bound are rounded too: four times the rigorous bound covers all of it.
        bound += np.abs(c)
        zeros_only = bound == 0          # sums of nonnegative values: every term is zero
        # Every product is a multiple of q = (row's smallest quantum) * (column's), c of
        # its own quantum: while sum|p| + |c| < 2**53 q every partial sum is exact.
        q = np.multiply(row_q[..., :, None], col_q[..., None, :], out=tmp)
        np.minimum(q, _quanta(c, self.out), out=q)
        q *= 2.0**53
        exact = bound * (1 + (K + 2) * 2.0**-50) < q
        del q
        bound *= (K + 3) * 2.0**-51
        bound += np.abs(y) * 2.0**-50
        bound[exact] = 0.0
        lo = quiet(_round, np.subtract(y, bound, out=tmp), self.out)
        d = quiet(_round, np.add(y, bound, out=tmp), self.out)
        del bound
        # -0 and +0 compare equal: bounds on both sides of zero that both round to
        # zero leave the sign unsure. Exactly computed outputs are sure.
        unsure = (lo != d) | (np.signbit(lo) != np.signbit(d))
        del lo
        unsure &= ~exact
        if special is not None:
            unsure &= ~special
            exact &= ~special
        # Outputs that are not special have finite rows and columns: a and b as they are.
        if unsure.any():
            d[unsure] = _gathered(self._exact_sum, np.nonzero(unsure), a, b, c, self.memory_bound)
        del unsure
        # An exactly computed y of 0 is an exact zero sum; its sign is the model's
        # rule, not BLAS's order of additions: +0, or -0 where every term is -0.
        zero = exact & (y == 0)
        if zero.any():
            d[zero] = 0.0
            where = zero & zeros_only & np.signbit(c)
            d[_negative_zero_sums(a, b, where, self.memory_bound)] = -0.0
        if special is not None and special.any():
            d[special] = _gathered(_ieee_sum, np.nonzero(special), a, b, c0, self.memory_bound)
        if not self.out.has_negative_zero:
            d += 0.0            # fnuz: a zero result is +0
        return d

    @staticmethod
    def _finite(x, fin, axis):
        """``x`` with inf and NaN replaced by 0 (a copy only where there are some);
        clears ``fin`` for the rows (axis -1) or columns (axis -2) that hold them."""
        ok = np.isfinite(x)
        if ok.all():
            return x
        fin &= ok.all(axis=axis)
        return np.where(ok, x, 0.0)

    def _exact_sum(self, products, c, K):
        if self.out.p <= 51:
            return _exact_round(lambda: itertools.chain(products(), [c[:, None].copy()]),
                                K + 1, self.out)

        def fresh():                # `_exact_round` may consume a block: two sums read them
            return (p.copy() for p in products())
        d = _exact_round(lambda: itertools.chain(fresh(), [c[:, None].copy()]), K + 1,
                         self.out)
        return _nearest_from_odd(d, fresh, c, K)


def _nearest_from_odd(d, products, c, K):
    """RN to float64 of the exact sums X whose round-to-odd at 53 bits is ``d``.

    Round-to-odd at float64's own precision is no step towards RN to it. So the
    residual D = X - d is summed exactly once more, and rounded to odd. Where X is
    inexact, d has an odd last bit and both neighbours lie one ulp away. X then
    rounds to the neighbour on D's side when 2|D| > ulp, or 2|D| == ulp (a tie goes
    to the even neighbour). Round-to-odd keeps every comparison with ulp / 2 (a
    power of two), and 2|D| is exact. Sums past float64's range are inf already.
    """
    fin = np.isfinite(d)
    neg = np.where(fin, -d, 0.0)[:, None]
    r = _exact_round(lambda: itertools.chain(products(), [c[:, None].copy(), neg.copy()]),
                     K + 2, FP64)
    mag = np.abs(np.where(fin, d, 0.0))
    ulp = mag - np.nextafter(mag, 0.0)           # the gap below: d's gap on both sides
    step = fin & (r != 0) & (2 * np.abs(r) >= ulp)
    return np.where(step, np.nextafter(d, np.copysign(np.inf, r)), d)


def _negative_zero_sums(a, b, where, memory_bound):
    """The outputs among ``where`` (outputs whose products are all zero) whose every
    product a_k * b_k is -0. Works on the rows and columns that hold such outputs."""
    if not where.any():
        return where
    rows = np.flatnonzero(where.any(axis=(0, 2)))
    cols = np.flatnonzero(where.any(axis=(0, 1)))
    K = a.shape[-1]

    def unit(x):                  # +1 where the sign bit is clear, -1 where it is set
        u = np.signbit(x).astype(np.float64)
        u *= -2.0
        u += 1.0
        return u

    # A zero product is -0 when exactly one factor's sign bit is set: with signs as
    # ±1, the K products are all -0 when their sum is -K (integers below 2**53: exact).
    total = np.zeros((where.shape[0], rows.size, cols.size))
    tmp = np.empty_like(total)
    # A span's copies: the rows and columns gathered, their sign masks and units.
    for span in k_spans(K, 1, where.shape[0] * (rows.size + cols.size), 32, memory_bound):
        total += _blas(unit(a[:, rows, span]), unit(b[:, span][..., cols]), tmp)
    out = np.zeros(where.shape, dtype=bool)
    out[:, rows[:, None], cols] = total == -K
    return out & where


def _quanta(x, fmt):
    """The quantum of each value of ``fmt`` (2**(max(floor(log2|x|), emin) - m));
    inf for zeros, which add nothing."""
    q = (x.view(np.uint64) & EXP).view(np.float64)   # 2**floor(log2|x|)
    np.maximum(q, 2.0**fmt.emin, out=q)
    q *= 2.0**-fmt.mantissa_bits
    q[x == 0] = np.inf
    return q


def _ieee_sum(products, c, K):
    """The float64 sum where an operand is inf or NaN: inf or NaN exactly as IEEE
    products would give, since finite products of these formats never overflow
    (whatever the order of the additions, then)."""
    total = None
    for p in products():
        part = p.sum(axis=-1)
        total = part if total is None else total + part
    return total + c


def _gathered(fn, where, a, b, c, memory_bound):
    """``fn(products, c, K)`` for the outputs at ``where`` (batch, row, column
    indices), a bounded number at a time: ``products()`` yields the exact products
    a_k * b_k of their rows and columns in (outputs, span) blocks."""
    ib, im, jn = where
    K = a.shape[-1]
    out = np.empty(ib.size)
    # A quarter of the bound: gathered rows and columns of a span, and in
    # `_exact_round` at most six (step, span) float64 arrays at once.
    span = max(1, min(K, memory_bound // 4 // 64 - 1))
    step = max(1, memory_bound // 4 // (64 * (span + 1)))
    for i in range(0, ib.size, step):
        x, y, z = ib[i:i + step], im[i:i + step], jn[i:i + step]

        # One block (nearly every K) is made once: `_exact_round`'s first pass only
        # reads it and its second, the last, may consume it in place.
        one = a[x, y, :] * b[x, :, z] if K <= span else None   # exact, as below

        def products(x=x, y=y, z=z, one=one):
            if one is not None:
                yield one
                return
            for j in range(0, K, span):
                # Products of two significands of at most 26 bits are exact in float64.
                yield a[x, y, j:j + span] * b[x, j:j + span, z]
        out[i:i + step] = fn(products, c[x, y, z], K)
    return out
