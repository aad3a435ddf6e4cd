"""The Tensor Core block-FMA kernel (docs/design/TENSORCORE.md), and the helpers the
other kernels share with it.

`BlockFMA` computes the chained block FMAs of one `TensorCoreModel`, vectorised over
the outputs of a chunk: unnormalised exact products, terms truncated to F bits below
the block's reference exponent, an exact sum, one rounding per block (`_to_output`).
The fast roundings here (`round_fp16`, the RZ mask and the float32 cast of
`_to_output`) each implement the one kernel's rule (`lowprec.round`) on the inputs
they receive, and tests/test_tensorcore.py holds them equal to it. Shared with the other
kernels: `k_spans` (spans of K under the call's memory bound), `pow2`, `round_fp16`,
`least_nonzero` and `products_fit_float32`. A kernel: ndarrays and `Format`\\ s in,
float64 ndarrays out; it never imports `Tensor` or reads a context default.
"""

from __future__ import annotations

import math

import numpy as np

from ..engine.float64 import EXP, SIGN
from ..formats import FP16, FP32, Format
from ..rounding import round as _round
from ..status import quiet

__all__ = ["BlockFMA", "k_spans", "least_nonzero", "pow2", "round_fp16", "products_fit_float32",
           "products_into"]

_ZERO_EXP = -16000          # exponent of a zero operand: no sum of two reaches any real one
_FLOOR_EXP = -600           # below every exponent a product or an addend can have
_FP16_FLOOR = np.float64(2.0**-14).view(np.uint64)          # FP16's smallest normal
_FP16_SHIFT = np.uint64((42 << 52) | (1 << 51))             # 2**e -> 1.5 * 2**(e + 42)
_FP16_BIG = np.float64(2.0**15).view(np.uint64) + _FP16_SHIFT   # c of |s| >= 2**15
_FP16_TINY = np.float64(2.0**-24).view(np.uint64)           # FP16's smallest subnormal


def k_spans(K, k, width, bytes_per_entry, memory_bound):
    """Slices of range(K), each a multiple of ``k`` long, so that copies of the
    operands' entries in one slice (``width`` rows and columns of them, at
    ``bytes_per_entry`` each) stay under a quarter of ``memory_bound`` (the call's
    `MEMORY_BOUND`, which the driver hands every kernel)."""
    span = max(k, (memory_bound // 4 // max(1, width * bytes_per_entry)) // k * k)
    return [slice(j, min(K, j + span)) for j in range(0, K, span)]


# -- exponents and output rounding -------------------------------------------------

def _exponents(x, emin, bias=0, unit=1):
    """int16 ``(max(floor(log2|x|), emin) + bias) * unit`` of float64 values;
    `_ZERO_EXP` for zeros, ``bias * unit`` for inf and NaN (their terms are inf or NaN
    whatever the alignment)."""
    # Values of formats of at most 12 bits are normal float64s: the exponent field is exact.
    bits = np.bitwise_and(x.view(np.uint64), EXP)
    bits >>= np.uint64(52)
    e = bits.astype(np.int16)
    del bits
    e -= 1023
    np.maximum(e, emin, out=e)
    e[e > 1000] = 0
    e += bias
    e *= unit
    e[x == 0] = _ZERO_EXP
    return e


def pow2(e):
    """2.0**e for an integer array with -1022 <= e <= 1023, built from its bits."""
    return ((e.astype(np.int64) + 1023).astype(np.uint64) << np.uint64(52)).view(np.float64)


def least_nonzero(mag: np.ndarray) -> float:
    """The least nonzero entry of finite magnitudes ``mag`` (inf where all are 0).

    The bit patterns of non-negative floats order as their values; less one, 0 wraps
    to the top of the unsigned range: a plain minimum, where NumPy's masked one
    (``where=mag > 0``) takes fourteen times as long."""
    u = np.dtype(f"u{mag.dtype.itemsize}")
    least = (mag.view(u) - u.type(1)).min(keepdims=True).ravel() + u.type(1)  # 0: all zero
    return float(least.view(mag.dtype)[0]) if least[0] else np.inf


def products_into(x, y, out):
    """The outer products x * y of (..., rows, 1) and (..., 1, cols) into ``out``:
    einsum's sum over the one index m is 0 + x * y, which is x * y bit for bit (inf
    and NaN included) except that a zero product is +0."""
    return np.einsum("...im,...mj->...ij", x, y, out=out, optimize=False)


def round_fp16(s, out=None, work=None):
    """RNE of float64 values to FP16 (IEEE overflow, signed zeros, inf and NaN kept):
    four passes and two reductions where NumPy's float64 -> float16 cast is done in
    software.

    ``out`` and ``work``, float64 arrays of ``s``'s shape that do not overlap ``s``
    (made when absent), receive the result and the rounding constants."""
    # The kernel's rule: = lp.round(s, FP16) ("rne") bit for bit for every float64 array.
    if out is None:
        out = np.empty_like(s)
    c = np.empty_like(s) if work is None else work
    cb = c.view(np.uint64)
    np.bitwise_and(s.view(np.uint64), EXP, out=cb)          # 2**floor(log2|s|)
    least = cb.min(initial=_FP16_FLOOR)
    if least < _FP16_FLOOR:                                 # subnormals: quantum 2**-24
        np.maximum(c, 2.0**-14, out=c)                      # (inf and NaN give inf)
    # c = 1.5 * 2**(e + 42) (exponent field + 42, fraction .1) has float64 ulp
    # 2**(e - 10), FP16's quantum at s, and s + c stays in c's binade: fl(s + c) - c
    # is s rounded to nearest even, exactly.
    cb += _FP16_SHIFT
    # Past 2**15 c may be wrong (its exponent field wraps from |s| >= 2**982): every
    # |s| >= 65520 (= 65504 + ulp/2, a tie to the even 2**16) overflows, NaN stays.
    big = cb.max(initial=0) >= _FP16_BIG        # c's bits grow with |s| (or wrap past 2**63)
    np.add(s, c, out=out)
    out -= c
    if least < _FP16_TINY:
        # A nonzero result has s's sign already; a zero one (+0 from x - x, where
        # |s| <= 2**-25) takes it.
        np.bitwise_and(s.view(np.uint64), SIGN, out=cb)
        np.bitwise_or(out.view(np.uint64), cb, out=out.view(np.uint64))
    if not big:
        return out
    beyond = ~(np.abs(s) < 65520.0)
    if beyond.any():
        sb = s[beyond]
        out[beyond] = np.where(np.isnan(sb), sb, np.copysign(np.inf, sb))  # NaN keeps its sign
    return out


def _to_output(d, fmt, mode, bits, extremes):
    """Round exact float64 values ``d`` to ``fmt`` (FP32 keeping ``bits`` fraction bits,
    or FP16) by ``mode``; results beyond the range are ±inf, even under RZ (§2.8).

    FP32 with RZ works in place; ``extremes`` says whether some result may lie below
    2**-126 and whether some may reach 2**128. Returns the result and whether some
    nonzero result lies below 2**-126.
    """
    # RZ: = lp.round(d, Format(8, bits), "rz") where |d| < 2**128 and ±inf from there on
    # (§2.8), for NaNs quiet (made by arithmetic) and ``extremes`` true where d has such.
    if fmt == FP32 and mode == "rz":
        may_be_tiny, may_be_big = extremes
        tiny = False
        if may_be_tiny:
            mag = np.abs(d)
            small = (mag < 2.0**-126) & (mag != 0)
            if small.any():
                tiny = True
                q = 126 + bits      # the subnormal quantum is 2**-(126 + bits)
                d[small] = np.trunc(d[small] * 2.0**q) * 2.0**-q
        if may_be_big:
            big = (np.abs(d) >= 2.0**128) & np.isfinite(d)
            d[big] = np.copysign(np.inf, d[big])
        # Clearing low bits of a float64 truncates toward zero (normal FP32 range;
        # subnormal results are already multiples of their quantum, inf stays inf).
        d.view(np.uint64)[...] &= np.uint64(~((1 << (52 - bits)) - 1) & 0xFFFF_FFFF_FFFF_FFFF)
        return d, tiny
    if fmt == FP32 and bits == 23:   # mode is "rne": = lp.round(d, FP32) for every float64
        out = d.astype(np.float32).astype(np.float64)   # one IEEE rounding of a float64
    elif fmt == FP16:                # mode is "rne": = lp.round(d, FP16) for every float64
        out = round_fp16(d)
    else:   # FP32 keeping fewer bits, to nearest: past the top is 2**128, so inf
        out = quiet(_round, d, Format(8, bits), mode)
    small = (out != 0) & (np.abs(out) < 2.0**-126)
    return out, bool(small.any())


def products_fit_float32(fmt):
    """Whether every product of two ``fmt`` values is exactly a normal float32 (or 0)."""
    return (2 * fmt.p <= 24 and 2 * (fmt.emax + 1) <= 127
            and 2 * (fmt.emin - fmt.mantissa_bits) >= -126)


# -- Tensor Core block FMAs --------------------------------------------------------

def _side(x, emin, bias, always):
    """One operand's entries of a span, K first: a contiguous float64 copy, its
    exponents (`_exponents`, 1/16 units), whether all are finite, and the least
    nonzero and the largest magnitude (None where the format settles `_fit_float32`)."""
    x = np.ascontiguousarray(x)
    finite = bool(np.isfinite(x).all())
    ext = None
    if not always and finite:
        mag = np.abs(x)
        ext = (least_nonzero(mag), float(mag.max(initial=0.0)))
        del mag
    return x, _exponents(x, emin, bias=bias, unit=16), finite, ext


def _fit_float32(ext_a, ext_b, F):
    """Whether every product of finite a and b (of at most 24 bits; ``ext_*`` their
    least nonzero and largest magnitudes) is 0 or an exact normal float32 whose
    exponent e_a + e_b is at least F - 126, so that the scale 2**(F - E) of an output
    with a nonzero product is a float32."""
    (lo_a, hi_a), (lo_b, hi_b) = ext_a, ext_b
    if math.inf in (lo_a, lo_b):
        return True                                      # every product is 0
    # e_a + e_b >= floor(log2 lo_a) + floor(log2 lo_b), and |a * b| < 2**(e + 2).
    e = math.frexp(lo_a)[1] + math.frexp(lo_b)[1] - 2
    return e >= F - 126 and hi_a * hi_b < 2.0**128       # products of <= 12 bits: exact


# The int16 lane of a uint64 that holds its top 16 bits.
_TOP_LANE = 3 if np.little_endian else 0


class BlockFMA:
    """Chained block FMAs of one `TensorCoreModel` for one input and output format.

    Work layout: block index first, ``(k + 1, batch, rows, cols)``, so that per-output
    arrays (the scale, the addend) broadcast over the leading axis and every inner
    loop runs over contiguous columns; row ``k`` holds the addend's term. Exponents
    are int16 in units of 1/16, so that the largest one, written into the top 16
    bits of a zeroed uint64, is directly the bit pattern of ``2.0**E``.
    """

    #: Whether spans whose data allow it form float32 products and int32 sums (the
    #: tests turn it off to compare them with the float64 terms, which compute the same).
    float32_terms = True
    #: The driver's name for the operand b of the next call (None: a fresh one), under
    #: which the copies of its spans are kept for the calls that follow (a chunk of
    #: rows after another against the same columns).
    b_key = None

    def __init__(self, params, fmt, out, memory_bound):
        self.p, self.fmt, self.out, self.memory_bound = params, fmt, out, memory_bound
        self.fp16 = out == FP16
        elim = params.elim_fp16 if self.fp16 else params.elim
        self.floor16 = 16 * (1023 + (_FLOOR_EXP if elim is None else elim))   # biased
        self.mode = "rne" if self.fp16 else params.out_rounding
        self.bits = 10 if self.fp16 else params.out_bits
        self.k = 32 if params.mma_split else params.block
        F = self.F = params.fraction_bits
        self.scale_bits = np.uint64((2046 + F) << 52)   # minus bits of 2**E: 2**(F - E)
        self.f_bits = np.uint64(F << 52)                # bits of 2**E minus this: 2**(E - F)
        # |sum| < 2**(E + 3 + log2(k + 1)) and a nonzero sum is at least 2**(E - F).
        self.headroom = 3 + math.ceil(math.log2(self.k + 2))

        self.k_unit = self.k
        # Bytes per operand entry of a span: float64, float32 and int16 exponent
        # copies (28), a temporary of `_exponents` and a finiteness mask; with the
        # mma split, the two halves' gathered copies of one block besides.
        self.entry_bytes = 40 + (28 if params.mma_split else 0)
        self._b_sides, self._b_bytes = {}, 0

    def target_outputs(self, K):
        return max(1, (1 << 18) // min(self.k, K))   # a 2 MiB float64 work array

    def bytes_per_output(self, K):
        # Per block: float64, int16, float32 and int32 terms; per output: about 9
        # work arrays and at most 10 temporaries of 8 bytes (rounding the result).
        return 18 * (min(self.k, K) + 1) + 160

    def empty(self, c):
        return c + 0.0

    def __call__(self, a, b, c):
        K = a.shape[-1]
        d = np.array(c, dtype=np.float64)
        shape = d.shape
        k = min(self.k, K)
        # Whether an inf or NaN has been seen (in c, or in an operand of this span or
        # an earlier one): the int32 path cannot carry them.
        self.special = not np.isfinite(d).all()
        self.e = np.empty((k + 2,) + shape, dtype=np.int16)
        self.e[-1] = self.floor16
        self.lanes = np.zeros(shape, dtype=np.uint64)
        self.lane16 = self.lanes.view(np.int16).reshape(shape + (4,))[..., _TOP_LANE]
        self.e16 = np.empty(shape, dtype=np.int16)
        self.ebits = np.empty(shape, dtype=np.uint64)
        self.cbits = np.empty(shape, dtype=np.uint64)
        self.s = np.empty(shape)
        self.t = None                     # float64 terms: made on first use
        self.t_shape = (k + 1,) + shape
        # Products exactly float32 and sums of the products' truncated terms inside
        # int32 (each below 2**(F + 2)): the products can be formed in float32 and
        # summed as int32 (half the traffic). Which spans can is up to their data
        # (`_fit_float32`) unless the format settles it.
        terms = min(self.p.block, K) if self.p.mma_split else k   # products per `_block`
        narrow = (self.float32_terms and 2 * self.fmt.p <= 24
                  and terms * 2 ** (self.F + 2) <= 2**31)
        always = narrow and products_fit_float32(self.fmt)
        self.c_in_int32 = terms * 2 ** (self.F + 2) + 2 ** (self.F + 1) <= 2**31
        if narrow:
            self.t32 = np.empty((k,) + shape, dtype=np.float32)
            self.ti = np.empty((k + 1,) + shape, dtype=np.int32)
            self.tc = np.empty(shape)
            self.si = np.empty(shape, dtype=np.int32)
            self.scale32 = np.empty(shape, dtype=np.float32)
        tiny = bool(np.any((d != 0) & (np.abs(d) < 2.0**-126)))
        width = a.shape[0] * (a.shape[1] + b.shape[2])
        for span in k_spans(K, self.k, width, self.entry_bytes, self.memory_bound):
            # at: (K, bc, mc, 1), bt: (K, bc, 1, nc). Exponents in 1/16 units:
            # (1023 + 2 * 127) * 16 and 2 * _ZERO_EXP fit in int16.
            at, ea, fin_a, ext_a = _side(np.moveaxis(a[..., span], -1, 0)[..., None],
                                         self.fmt.emin, 1023, always)
            key = None if self.b_key is None else (self.b_key, span.start, span.stop)
            side = self._b_sides.get(key) if key is not None else None
            if side is None:
                side = _side(np.moveaxis(b[:, span, :], 1, 0)[:, :, None, :],
                             self.fmt.emin, 0, always) + (None,)
                if key is not None and self._b_bytes + side[0].nbytes * 2 <= \
                        self.memory_bound // 4:
                    self._b_sides[key] = side = list(side)
                    self._b_bytes += side[0].nbytes * 2
            bt, eb, fin_b, ext_b, bt32 = side
            if not self.special:
                self.special = not (fin_a and fin_b)
            # (Once an inf or NaN is seen, the float64 terms carry it to the end.)
            self.narrow = narrow and not self.special and (
                always or _fit_float32(ext_a, ext_b, self.F))
            at32 = at.astype(np.float32) if self.narrow else None
            if self.narrow and bt32 is None:
                bt32 = bt.astype(np.float32)
                if isinstance(side, list):
                    side[4] = bt32                   # a float32 copy: half the float64's
            for j0 in range(0, at.shape[0], self.k):
                blk = slice(j0, j0 + self.k)
                ops = (at[blk], bt[blk], at32[blk] if self.narrow else None,
                       bt32[blk] if self.narrow else None, ea[blk], eb[blk])
                if self.p.mma_split:
                    d, tiny = self._mma_split(ops, d, tiny)
                else:
                    d, tiny = self._block(ops, d, tiny)
        return d.copy() if d is self.s else d

    def _mma_split(self, ops, c, tiny):
        """§4: halves {k mod 4 in (0, 1)} and {2, 3}, then one rounded addition of c."""
        k = np.arange(ops[0].shape[0])
        g1, g2 = k[k % 4 < 2], k[k % 4 >= 2]
        c = np.array(c)                                  # the work buffers are reused
        d1, tiny1 = self._block([None if x is None else x[g1] for x in ops],
                                np.zeros_like(c), False)
        d2, _ = self._block([None if x is None else x[g2] for x in ops], d1, tiny1)
        # Both are FP32 (FP16) values: float64 then FP32 (FP16) is one rounding
        # (53 >= 2 * 24 + 2, Figueroa's double-rounding theorem).
        return _to_output(d2 + c, self.out, "rne", 10 if self.fp16 else 23, None)

    def _block(self, ops, c, c_tiny):
        """One block FMA d = c + sum(a_i * b_i) for every output of the chunk (§2)."""
        a, b, a32, b32, ea, eb = ops
        kk = a.shape[0]
        e, ebits, cbits = self.e[:kk + 2], self.ebits, self.cbits
        # E = max of e_a + e_b over nonzero products, of e_c (row kk) and of Elim
        # (row kk + 1), biased, in 1/16 units.
        np.add(ea, eb, out=e[:kk])
        # The top 16 bits of a float64 are sign, exponent, 4 fraction bits: masked,
        # 16 * its biased exponent (0 for c = 0, below every floor).
        top = np.ascontiguousarray(c).view(np.uint16).reshape(c.shape + (4,))
        np.bitwise_and(top[..., _TOP_LANE], np.uint16(0x7FF0), out=e.view(np.uint16)[kk])
        if c_tiny:                                       # e_c = max(floor(log2|c|), -126)
            ec = e[kk]
            ec[(ec > 0) & (ec < 16 * (1023 - 126))] = 16 * (1023 - 126)
        if kk < self.k:
            e[kk + 1] = self.floor16                     # (row k + 1 holds it already)
        np.maximum.reduce(e, axis=0, out=self.e16)
        np.copyto(self.lane16, self.e16)                 # self.lanes: bits of 2**E
        lowest = int(self.e16.min()) // 16 - 1023
        highest = int(self.e16.max()) // 16 - 1023
        # An inf or NaN c (E = 1024) leaves both scales normal: its own term decides.
        scale = np.subtract(self.scale_bits, self.lanes, out=cbits).view(np.float64)
        inverse = np.subtract(self.lanes, self.f_bits, out=ebits).view(np.float64)
        # Terms: exact products (at most 2 * 12 significant bits) and c, scaled by a
        # power of two, then truncated toward zero: sign * floor(|term| * 2**(F - E)).
        if a32 is not None and not self.special:
            s = self._narrow_sum(a32, b32, c, scale, inverse, lowest)
        else:
            if self.t is None:
                self.t = np.empty(self.t_shape)
            t = self.t[:kk + 1]
            np.multiply(a, b, out=t[:kk])
            np.multiply(t[:kk], scale, out=t[:kk])
            np.multiply(c, scale, out=t[kk])
            np.trunc(t, out=t)
            # The terms are integers below 2**(F + 2): their float64 sum is exact.
            s = np.add.reduce(t, axis=0, initial=0.0, out=self.s)   # 0 sums to +0
            s *= inverse                                 # exact: a power of two
        big = highest + self.headroom >= 128
        d, tiny = _to_output(s, self.out, self.mode, self.bits,
                             (lowest - self.F < -126, big))
        if (big or self.fp16) and not self.special:
            # An overflow (FP16 output: past 65504) makes the next block's c infinite,
            # which the int32 path cannot carry.
            self.special = not np.isfinite(d).all()
        return d, tiny

    def _narrow_sum(self, a32, b32, c, scale, inverse, lowest):
        """The scaled sum of the truncated terms, with float32 products and int32 sums."""
        kk = a32.shape[0]
        t32, ti = self.t32[:kk], self.ti[:kk + 1]
        if lowest < self.F - 126:
            # Nonzero products have exponents of at least F - 126 (FP16 and FP8
            # products: -48 and up; other formats: `_fit_float32`), so a scale clamped
            # at 2**127 (float32's largest power of two) only ever multiplies zeros.
            np.copyto(self.scale32, np.minimum(scale, 2.0**127), casting="unsafe")
        else:
            np.copyto(self.scale32, scale, casting="unsafe")   # exact: a power of two
        # Exact products (they fit float32), twice as fast as NumPy's broadcast
        # multiply here; the sign of a zero is lost, which the int32 terms lose anyway.
        products_into(a32, b32, t32)
        np.multiply(t32, self.scale32, out=t32)  # exact, or below 1 (truncated to 0)
        np.copyto(ti[:kk], t32, casting="unsafe")   # float -> int conversion truncates
        tc = np.multiply(c, scale, out=self.tc)  # before self.s, which may be c, is written
        if self.c_in_int32:
            np.copyto(ti[kk], tc, casting="unsafe")
            # kk + 1 terms, the products' below 2**(F + 2), c's below 2**(F + 1): the
            # int32 sum is exact (checked in __call__); int to float64 is exact.
            np.add.reduce(ti, axis=0, out=self.si, dtype=np.int32)
            return np.multiply(self.si, inverse, out=self.s)   # 0 gives +0
        np.add.reduce(ti[:kk], axis=0, out=self.si, dtype=np.int32)
        np.trunc(tc, out=tc)
        s = np.add(self.si, tc, out=self.s)      # exact: integers below 2**53; 0 is +0
        s *= inverse                             # exact: a power of two
        return s
