"""Sequential accumulation: exact products added left to right, every addition
rounded (RNE) to FP32 or FP16 (or the accumulator of a hand-built model), as a CPU's
loop over K does.

`Sequential` is the kernel of the ``"fp32"`` and ``"fp16"`` models, vectorised over
the outputs of a chunk (the one Python loop runs over K). Each addition is rounded
once, from its exact value; the accumulator's roundings go through the fast paths
whose rule `lowprec.round` states (`_cast`, `round_fp16`). Where the whole operands
allow it, one float32 ``np.einsum`` computes every step (`Sequential.prepare`,
`Sequential.whole`); otherwise each step takes the cheapest of four equal ways to
compute it (float32 arithmetic, float64 then one cast, float64 then one cast with a
check for the one case a double rounding can miss, and TwoSum with the kernel), chosen
from the operands' exponents. `Sequential.reference` is the plain loop, kept for the
tests. A kernel: ndarrays and `Format`\\ s in,
float64 ndarrays out; it never imports `Tensor` or reads a context default.
"""

from __future__ import annotations

import functools

import numpy as np

from ..engine.eft import two_sum
from ..formats import FP16, FP32
from ..rounding import round as _round
from ..rounding import round_exact as _round_exact
from ..status import quiet
from .blockfma import k_spans, least_nonzero, products_fit_float32, products_into, round_fp16

__all__ = ["Sequential"]

_max, _min = np.maximum.reduce, np.minimum.reduce


def _blocks(x, nbytes):
    """Views of ``x`` (..., rows, cols) of at most ``nbytes`` as float64 (one row at
    least), covering it; a broadcast axis (stride 0) is read once."""
    x = x[tuple(slice(0, 1) if st == 0 else slice(None) for st in x.strides)]
    rows = max(1, nbytes // 8 // max(1, x.shape[-1]))
    for idx in np.ndindex(x.shape[:-2]):
        for r in range(0, x.shape[-2], rows):
            yield x[idx][r:r + rows]


_LOW29 = np.uint64((1 << 29) - 1)        # the float64 fraction bits below FP32's last
_MID29 = np.uint64(1 << 28)              # ... of a value halfway between two FP32s

# How a step is computed (`Sequential._plan`): each gives RNE(acc + p) in the
# accumulator, bit for bit as the others.
_FLOAT32, _CAST, _CHECKED, _EXACT = 0, 1, 2, 3


#: Outputs from which einsum's outer products are faster than NumPy's broadcast multiply.
_EINSUM_MIN = 4096


@functools.cache
def einsum_adds_in_order() -> bool:
    """Whether NumPy's float32 ``einsum("ik,kj->ij")`` (C-contiguous operands, at least
    two columns) adds each output's products in the order of k, every addition rounded.

    NumPy's iterator puts the column index innermost (its strides are the smallest of
    both operands that have it), k next and the row outermost, so each inner loop is
    ``out[i, :] += a[i, k] * b[k, :]``; this probe checks it once per process. The
    terms 2**24, 1 (62 times), -2**24 sum to 0 in that order (each 1 is a tie that
    rounds to even, back to 2**24); a sum that adds two of the 1s together first
    (pairwise, partial sums over lanes, backwards) keeps them and ends nonzero.

    Examples
    --------
    >>> einsum_adds_in_order()     # NumPy 2.0 to 2.4 do
    True
    """
    for K in (4, 64):
        a, b = np.ones((3, K), np.float32), np.ones((K, 5), np.float32)
        a[:, 0], a[:, -1], b[0], b[-1] = 4096.0, -4096.0, 4096.0, 4096.0
        if np.einsum("ik,kj->ij", a, b, optimize=False).any():
            return False
    return True


def _in_order(a32, b32):
    """``a32 @ b32`` (float32, C-contiguous, float32 result), each output's products
    added in the order of k by einsum (`einsum_adds_in_order`)."""
    if b32.shape[1] >= 2:
        return np.einsum("ik,kj->ij", a32, b32, optimize=False)
    if a32.shape[0] >= 2:     # one column: (a b)^T = b^T a^T, and x * y == y * x exactly
        return np.einsum("ik,kj->ij", np.ascontiguousarray(b32.T),
                         np.ascontiguousarray(a32.T), optimize=False).T
    # One output: einsum would sum it as a dot; a zero second column keeps the layout.
    two = np.zeros((b32.shape[0], 2), dtype=np.float32)
    two[:, :1] = b32
    return np.einsum("ik,kj->ij", a32, two, optimize=False)[:, :1]


class Sequential:
    """Exact products added left to right, every addition rounded (RNE) to ``acc``."""

    def __init__(self, fmt, acc, out, memory_bound):
        self.fmt, self.acc, self.out, self.memory_bound = fmt, acc, out, memory_bound
        self.to_fp32, self.to_fp16 = acc == FP32, acc == FP16
        self.float32 = acc == FP32 and products_fit_float32(fmt)
        # When float64 then acc is one rounding of acc + p:
        # FP32: both have at most 24 bits (53 >= 2 * 24 + 2, Figueroa's theorem).
        # FP16, products of at most 22 bits: acc + p is exact in float64 unless
        # |p| < 2**-30 |acc| (both roundings give acc) or |p| >= 2**17 (both overflow).
        # Another accumulator (a hand-built model): TwoSum and the kernel, every step.
        self.innocuous = acc in (FP32, FP16) and 2 * fmt.p <= (24 if acc == FP32 else 22)
        # FP32 from products of at most 24 bits: float32 arithmetic where the data's
        # exponents make every product an exact normal float32 (`_plan`).
        self.narrow = acc == FP32 and 2 * fmt.p <= 24
        # A value of fmt of magnitude at least this (and below 2**128) is a float32:
        # its last bit, 2**(e - m) with e >= log2 of it, is at least 2**-149.
        self.least32 = 2.0 ** (fmt.mantissa_bits - 149)

    def _float32_values(self, most, least):
        """Whether factors of largest magnitude ``most`` and least nonzero ``least``
        (arrays or numbers) are all float32 values."""
        return (np.asarray(most) < 2.0**128) & (np.asarray(least) >= self.least32)

    #: Smallest span of K, and bytes per operand entry of a span: float64 and float32
    #: copies, and the temporaries of `_plan` (magnitudes, a mask, their minimum).
    k_unit, entry_bytes = 1, 32
    #: Whether `whole` computes the call by float32 einsum, and how c enters it (`prepare`).
    einsum, c_term = False, None

    def target_outputs(self, K):
        return 1 << 15

    def bytes_per_output(self, K):
        # Work buffers: accumulator, product, sum, mask bits (float64), accumulator
        # (float32), a bool mask; the kernel's TwoSum with its temporaries and the
        # final rounding in the rare steps that need them: at most 16 float64 arrays.
        return 128

    def empty(self, c):
        return self._finish(self._cast(np.array(c, dtype=np.float64)))   # no additions: c

    def _cast(self, s, out=None, work=None):
        if self.to_fp32:
            if out is None:
                return s.astype(np.float32).astype(np.float64)   # one IEEE rounding
            np.copyto(work, s, casting="unsafe")                 # one IEEE rounding
            np.copyto(out, work)
            return out
        if self.to_fp16:
            return round_fp16(s, out, work)                      # lp.round(s, FP16), every float64
        return quiet(_round, s, self.acc)                        # any other format: the kernel

    def _finish(self, d):
        return d if self.out == self.acc else quiet(_round, d, self.out)

    def _exact(self, acc, p):
        """RNE(acc + p) from TwoSum and the kernel: the reference's step."""
        s, t = two_sum(acc, p)
        r = self._cast(s)
        fix = (t != 0) & np.isfinite(s)
        if fix.any():
            r[fix] = quiet(_round_exact, s[fix], t[fix], self.acc)
        return r

    def reference(self, a, b, c):
        """The plain loop, one step at a time, without the fast paths (for the tests)."""
        acc = self._cast(np.array(c, dtype=np.float64))
        for k in range(a.shape[-1]):
            # Products of two significands of at most 26 bits are exact in float64.
            p = a[..., :, k, None] * b[..., None, k, :]
            acc = self._cast(acc + p) if self.innocuous else self._exact(acc, p)
        return self._finish(acc)

    def _plan(self, at, bt):
        """How to compute each step of a span, from its operands' exponents.

        ``at`` (K, ..., rows, 1) and ``bt`` (K, ..., 1, cols): per k, the smallest
        nonzero and the largest magnitude of its products' factors bound every product.
        """
        K = at.shape[0]
        if self.float32:
            return np.full(K, _FLOAT32)
        if self.innocuous and not self.narrow:
            return np.full(K, _CAST)                  # FP16 accumulator
        if not self.to_fp32:
            return np.full(K, _EXACT)
        lo, hi, lsb, none = np.ones(K), np.ones(K), np.zeros(K), np.zeros(K, dtype=bool)
        factors32 = np.ones(K, dtype=bool)            # every factor a float32 value
        for x in (at, bt):
            mag = np.abs(x.reshape(K, -1))
            most = mag.max(axis=1, initial=0.0)       # NaN propagates and fails below
            hi = hi * most
            mag[~(mag > 0) | (mag == np.inf)] = np.inf
            least = mag.min(axis=1, initial=np.inf)   # the least finite nonzero factor
            del mag
            factors32 &= self._float32_values(most, least)
            lo = lo * least
            none |= least == np.inf
            # A value of `fmt` of exponent e is a multiple of 2**(max(e, emin) - m).
            e = np.frexp(np.where(least == np.inf, 1.0, least))[1] - 1
            lsb = lsb + np.maximum(e, self.fmt.emin) - self.fmt.mantissa_bits
        # Products of factors of at most 26 bits (the extremes' included) are exact.
        if self.narrow:
            # Every product is 0 or of at most 24 bits in [2**-126, 2**128): an exact
            # normal float32, which float32 multiplication gives exactly.
            fits = (lo >= 2.0**-126) & (hi < 2.0**128) & factors32
            return np.where(fits, _FLOAT32, _CAST)
        # Finite products are multiples of 2**lsb; with lsb >= -149 every finite sum
        # acc + p is a multiple of FP32's smallest subnormal, exact below 2**-126.
        return np.where(none | (lsb >= -149), _CHECKED, _EXACT)

    def prepare(self, a, b, c):
        """Look at the whole operands once, before the chunks: set ``einsum`` where
        float32 ``np.einsum`` gives the plain loop's result bit for bit (then `whole`
        computes the call, one pass per product).

        ``a`` (batch..., M, K), ``b`` (batch..., K, N) and ``c`` (batch..., M, N) are
        the driver's operands. einsum's float32 multiply-add, fused or not, is
        RNE(acc + p) step by step when every product is an exact normal float32 or 0;
        finite operands, so no NaN payloads to keep; it adds in the order of k
        (`einsum_adds_in_order`; `_in_order` gives every block two output columns at
        least). A single output overall keeps the steps. Its sums start at +0: c
        enters as first products (`whole`), so it must be finite and without -0
        (+0 + -0 is +0).
        """
        M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
        self.einsum, self.c_term = False, None
        # A row and a column of float32 copies over the whole K fit a sixteenth.
        if (not self.narrow or (M < 2 and N < 2) or 16 * 4 * 2 * (K + 1) > self.memory_bound
                or not einsum_adds_in_order()):
            return
        blocks = list(_blocks(c, self.memory_bound // 8))    # c's own entries
        if any(x.any() or np.signbit(x).any() for x in blocks):
            for x in blocks:
                x32 = x.astype(np.float32)                   # = `_cast`: RN32(c)
                if not np.isfinite(x32).all() or np.signbit(x32[x32 == 0]).any():
                    return
            self.c_term = ("row" if c.strides[-2] == 0 or M == 1 else
                           "column" if c.strides[-1] == 0 or N == 1 else "matrix")
        lo, hi, factors32 = 1.0, 1.0, True
        for x in (a, b):
            top, least = 0.0, np.inf
            for block in _blocks(x, self.memory_bound // 4):
                if block.size == 0:
                    continue
                big, small = _max(block, axis=None), _min(block, axis=None)
                if not -np.inf < small <= big < np.inf:   # inf or NaN (NaN propagates)
                    return
                top = max(top, big, -small)
                if not self.float32:                      # the least nonzero magnitude
                    mag = np.abs(block)
                    m = _min(mag, axis=None)
                    least = min(least, m if m > 0 else least_nonzero(mag))
            hi, lo = hi * top, lo * least
            # The float32 copies must hold every factor (formats wider than float32).
            factors32 = factors32 and bool(self._float32_values(top, least))
        self.einsum = self.float32 or (lo >= 2.0**-126 and hi < 2.0**128 and factors32)

    def whole(self, a, b, c, out):
        """Every output by float32 einsum, after `prepare` chose it: ``a``
        (batch..., M, K), ``b`` (batch..., K, N), ``c`` (batch..., M, N) into ``out``
        (batch, M, N). Blocks of b's columns are copied to float32 once each (an
        eighth of the memory bound), and each block of rows against them (another
        eighth, at most 2**15 outputs a block, which stay in cache).

        c enters as first products: a row repeated (a bias) as 1 * c[j], a column as
        c[i] * 1, any other c as the block's own rows of it against an identity:
        1 * c[i, j] and 0 * c[t, j] (t != i), finite, so the zeros add nothing to a
        sum that starts at +0 and c has no -0."""
        M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
        head = {None: 0, "row": 1, "column": 1}.get(self.c_term)    # "matrix": the rows
        row_bytes = 4 * (1 + K)
        nc = max(1, min(N, self.memory_bound // 8 // row_bytes))
        mc = max(1, min(M, self.memory_bound // 8 // row_bytes, (1 << 15) // nc))
        if head is None:
            mc = min(mc, max(8, K // 4))      # an identity of mc terms: at most K/4 more
        top = mc if head is None else head    # rows of b32 above b's own
        for n, idx in enumerate(np.ndindex(a.shape[:-2])):
            an, bn, cn = a[idx], b[idx], c[idx]
            for n0 in range(0, N, nc):
                cols = slice(n0, n0 + nc)
                b32 = np.empty((top + K, min(N, n0 + nc) - n0), dtype=np.float32)
                b32[top:] = bn[:, cols]                          # exact: values of fmt
                if head:
                    b32[0] = cn[0, cols] if self.c_term == "row" else 1.0  # RN32(c): `_cast`
                for m0 in range(0, M, mc):
                    rows = slice(m0, m0 + mc)
                    h = min(M, m0 + mc) - m0 if head is None else head
                    shape = (min(M, m0 + mc) - m0, h + K)
                    a32 = np.empty(shape, np.float32) if head else np.zeros(shape, np.float32)
                    a32[:, h:] = an[rows]
                    if head is None:                             # [I | a] against [c; b]
                        np.fill_diagonal(a32, 1.0)
                        b32[top - h:top] = cn[rows, cols]        # RN32(c), as `_cast`
                    elif head:
                        a32[:, 0] = 1.0 if self.c_term == "row" else cn[rows, 0]
                    r = _in_order(a32, b32[top - h:])
                    # FP32 sums convert exactly; another output format rounds them once.
                    out[n, rows, cols] = r if self.out == self.acc else self._finish(
                        r.astype(np.float64))

    def __call__(self, a, b, c):
        K = a.shape[-1]
        spans = k_spans(K, 1, a.shape[0] * (a.shape[1] + b.shape[2]), self.entry_bytes,
                        self.memory_bound)
        acc = self._cast(np.array(c, dtype=np.float64))
        p, s = np.empty_like(acc), np.empty_like(acc)
        acc32 = np.empty(acc.shape, dtype=np.float32) if self.to_fp32 else None
        work = np.empty_like(acc) if self.to_fp16 else None
        # The low bits of s get their own buffer: p keeps the products for the fixes.
        bits, low = s.view(np.uint64), np.empty(acc.shape, dtype=np.uint64)
        mid = np.empty(acc.shape, dtype=bool)
        for span in spans:
            at = np.ascontiguousarray(np.moveaxis(a[..., span], -1, 0))[..., None]
            bt = np.ascontiguousarray(np.moveaxis(b[:, span, :], 1, 0))[:, :, None, :]
            how = self._plan(at, bt)
            # Steps whose factors are all nonzero have no zero products, whose signs
            # `products_into` may lose.
            K1 = at.shape[0]
            nonzero = ~((at == 0).reshape(K1, -1).any(axis=1)
                        | (bt == 0).reshape(K1, -1).any(axis=1))
            mul = [products_into if x and acc.size >= _EINSUM_MIN else np.multiply
                   for x in nonzero]
            # Runs of steps computed the same way.
            edges = np.flatnonzero(np.diff(how)) + 1
            for k0, k1 in zip([0, *edges], [*edges, len(how)]):
                way = how[k0]
                if way == _FLOAT32:
                    # Products are exact float32s and float32 addition is correctly
                    # rounded (RNE, gradual underflow, overflow to inf): the FP32
                    # accumulation's own rounding, step by step.
                    np.copyto(acc32, acc, casting="unsafe")        # exact: FP32 values
                    p32 = np.empty_like(acc32)
                    a32, b32 = at[k0:k1].astype(np.float32), bt[k0:k1].astype(np.float32)
                    for k in range(k1 - k0):
                        mul[k0 + k](a32[k], b32[k], out=p32)
                        acc32 += p32
                    del a32, b32, p32
                    np.copyto(acc, acc32)
                    continue
                for k in range(k0, k1):
                    # Products of two significands of at most 26 bits are exact in float64.
                    mul[k](at[k], bt[k], out=p)
                    if way == _EXACT:
                        acc = self._exact(acc, p)
                        continue
                    np.add(acc, p, out=s)
                    if way == _CHECKED:
                        # s = RN64(acc + p) rounds to FP32 as acc + p does unless s is
                        # halfway between two FP32s (FP32's midpoints, the overflow
                        # threshold 2**128 - 2**103 among them, are float64s, and RN64
                        # is monotone); below 2**-126 s is exact (`_plan`).
                        np.bitwise_and(bits, _LOW29, low)
                        np.equal(low, _MID29, mid)
                        if mid.any():
                            # Flat indices (the buffers are C-contiguous): a tenth of
                            # np.nonzero's time on a 3-d mask. p still holds the
                            # exact products (a zero one's sign too: see `mul`).
                            where = np.flatnonzero(mid)
                            fixed = self._exact(acc.reshape(-1)[where], p.reshape(-1)[where])
                            acc = self._cast(s, acc, acc32)
                            acc.reshape(-1)[where] = fixed
                            continue
                        np.copyto(acc32, s, casting="unsafe")    # `_cast`: one IEEE rounding
                        np.copyto(acc, acc32)
                        continue
                    acc = self._cast(s, acc, acc32 if self.to_fp32 else work)
        return self._finish(acc)
