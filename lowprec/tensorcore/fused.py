"""The kernels of the instruction models: one matrix-unit instruction's dot products,
row by row, on exact integers.

Each row is one output element: ``a`` and ``b`` hold the K values of its A row and B
column (float64 values of the input formats), ``c`` its addend (a value of the output
format), ``sa`` and ``sb`` the values of the block scales. Every finite value is split
into an int64 significand and an exponent (`decompose`); aligned sums are sums of
int64 terms truncated or floored to a fixed number of fraction bits below a
reference exponent (`aligned_sum`), exact by the bounds argued at each use; results
are rounded once by the rounding kernel. The algorithms are the ones the mma-data
README (`tests/data/mma/README.md`) describes for MMA-Sim, and the ISA documents
for the units without data. The kernels are NVIDIA's fused and block-scaled FP4
dot-adds, CDNA1-3's FMA chains, pairwise trees and round-down fused groups. A kernel:
ndarrays and `Format`\\ s in, float64 ndarrays out; it never imports `Tensor` or reads a
context default.
"""

from __future__ import annotations

import numpy as np

from ..arith import add as _add
from ..arith import fma as _fma
from ..arith import mul as _mul
from ..formats import FP16, FP32, Format
from ..rounding import round as _round
from ..status import quiet

__all__ = ["amx_bf16", "decompose", "aligned_sum", "specials", "nv_fused", "nv_block_fp4",
           "amd_fused", "amd_fp8", "fma_chain", "pairwise", "to_output", "truncate_tf32",
           "ZERO_EXP", "E8M13"]

#: The exponent MMA-Sim gives a zero of any format (mma-data README §5.1, §8.1).
ZERO_EXP = -126

#: FP32's exponent range with 13 fraction bits: the FP32 result of the FP8 paths of
#: Ada ``mma`` and Hopper ``wgmma`` (DeepSeek-V3 §3.5.2's "about 14 bits").
E8M13 = Format(8, 13, name="E8M13")


def decompose(x: np.ndarray, fmt: Format) -> tuple[np.ndarray, np.ndarray]:
    """int64 (M, e) with x = M * 2**(e - m) for finite values x of ``fmt`` (m its
    fraction bits): e = max(floor(log2|x|), emin), |M| < 2**(m + 1); a zero has
    M = 0 and e = `ZERO_EXP`, whatever the format (MMA-Sim's rule)."""
    e = np.frexp(x)[1].astype(np.int64) - 1            # floor(log2|x|) for x != 0
    np.maximum(e, fmt.emin, out=e)
    # Exact: x is a multiple of 2**(e - m) below 2**(e + 1), so x * 2**(m - e) is an
    # integer of at most m + 1 bits.
    M = np.ldexp(x, (fmt.mantissa_bits - e).astype(np.int32)).astype(np.int64)
    e[x == 0] = ZERO_EXP
    return M, e


def aligned_sum(T: np.ndarray, q: np.ndarray, ex: np.ndarray, F: int, *,
                floor: bool = False, E: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """(S, E): the terms T * 2**q (int64 T, each with its exponent ``ex`` for the
    maximum) aligned to F fraction bits below 2**E, E = max(ex) per row unless given,
    each truncated toward zero (``floor``: toward minus infinity), summed exactly.
    The value is S * 2**(E - F). Callers keep |T| * 2**q < 2**(ex + 13) and at most
    2**9 terms a row, so that every aligned term is below 2**(F + 13) and the sum of
    a row below 2**(F + 22) <= 2**62 (F <= 40)."""
    if E is None:
        E = ex.max(axis=-1)
    shift = q - (E[..., None] - F)                       # left shift when >= 0
    left = np.clip(shift, 0, 62)
    right = np.clip(-shift, 0, 63)
    if floor:
        # Arithmetic right shifts of int64 are floor divisions by powers of two.
        t = np.where(shift >= 0, T << left, T >> right)
    else:
        mag = np.abs(T)
        t = np.where(shift >= 0, mag << left, mag >> right)
        t = np.where(T < 0, -t, t)
    return t.sum(axis=-1), E


def specials(products: np.ndarray, c: np.ndarray, *, big_is_inf: bool = False) -> np.ndarray:
    """The binary64 value of sum(products) + c: NaN or ±inf where the result is special
    (any NaN, inf * 0, inf - inf; else any inf), finite values elsewhere (not used).
    ``big_is_inf`` (the CDNA3 fused paths): where that sum is finite, a product of
    magnitude at least 2**128 makes the result ±inf, NaN when such products have both
    signs (an infinite c or operand still decides first)."""
    with np.errstate(all="ignore"):
        P = products.sum(axis=-1) + c
        if big_is_inf:
            big = np.abs(products) >= 2.0**128
            pos, neg = (big & (products > 0)).any(axis=-1), (big & (products < 0)).any(axis=-1)
            finite = np.isfinite(P)
            P = np.where(finite & pos & neg, np.nan,
                         np.where(finite & pos, np.inf, np.where(finite & neg, -np.inf, P)))
        return P


def to_output(v: np.ndarray, out: str) -> np.ndarray:
    """One NVIDIA rounding of exact float64 sums: "f32" truncates to FP32, "e8m13" to
    13 fraction bits (subnormals kept, truncated too), magnitudes of at least 2**128
    are ±inf; "f16" rounds to nearest even into FP16 (IEEE overflow). A zero result is
    +0 (mma-data README §5.2 step 5)."""
    if out == "f16":
        r = quiet(_round, v, FP16)
    else:
        r = np.array(quiet(_round, v, FP32 if out == "f32" else E8M13, "rz"))
        big = np.abs(v) >= 2.0**128
        r[big] = np.copysign(np.inf, v[big])
    r = np.asarray(r, dtype=np.float64)
    r[r == 0] = 0.0
    return r


def truncate_tf32(x: np.ndarray) -> np.ndarray:
    """FP32 values with their low 13 fraction bits cleared (TF32 inputs are truncated,
    not rounded; MMA-Sim's ``truncate_to_tf32``)."""
    bits = x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    return bits.view(np.float32).astype(np.float64)


def _finite(x):
    return np.where(np.isfinite(x), x, 0.0)


def _product_terms(a, b, fa, fb):
    """int64 significand products, their LSB exponents and term exponents."""
    Ma, ea = decompose(_finite(a), fa)
    Mb, eb = decompose(_finite(b), fb)
    # |Ma * Mb| < 2**(pa + pb) <= 2**26: int64 exact.
    return Ma * Mb, ea + eb - fa.mantissa_bits - fb.mantissa_bits, ea + eb


def nv_fused(a: np.ndarray, b: np.ndarray, c: np.ndarray, fa: Format, fb: Format,
             fc: Format, F: int, out: str, sa: np.ndarray | None = None,
             sb: np.ndarray | None = None) -> np.ndarray:
    """NVIDIA's fused dot-add of one block (README §5.2, §5.4): products exact and
    unnormalised, c and every product truncated to F bits below the largest exponent
    (c's and the zero products' included), an exact sum, one rounding (`to_output`).
    ``sa``, ``sb``: E8M0 scale values per element (their exponents join the
    products')."""
    T, q, ex = _product_terms(a, b, fa, fb)
    with np.errstate(invalid="ignore"):  # inf * 0: NaN, as the result must be
        prods = a * b                    # exact in float64: at most 24 bits
    if sa is not None and sb is not None:
        es = np.frexp(sa)[1].astype(np.int64) - 1 + np.frexp(sb)[1].astype(np.int64) - 1
        es = np.where(np.isfinite(sa) & np.isfinite(sb), es, 0)
        q, ex = q + es, ex + es
        with np.errstate(all="ignore"):
            prods = prods * sa * sb      # powers of two: exact, finite (< 2**600)
    Mc, ec = decompose(_finite(c), fc)
    T = np.concatenate([T, Mc[:, None]], axis=1)
    q = np.concatenate([q, (ec - fc.mantissa_bits)[:, None]], axis=1)
    ex = np.concatenate([ex, ec[:, None]], axis=1)
    S, E = aligned_sum(T, q, ex, F)
    # Exact: each of the block + 1 terms is below 2**(F + 2), so |S| < (block + 1) *
    # 2**(F + 2) <= 2**53 (Instruction.max_fraction_bits); E - F is in float64's range.
    d = to_output(np.ldexp(S.astype(np.float64), (E - F).astype(np.int32)), out)
    P = specials(prods, c)
    bad = ~np.isfinite(P)
    d[bad] = P[bad]
    return d


def nv_block_fp4(a: np.ndarray, b: np.ndarray, c: np.ndarray, sa: np.ndarray,
                 sb: np.ndarray, fs: Format, F: int = 35) -> np.ndarray:
    """NVIDIA's block-scaled FP4 dot product of 64 (README §5.5): exact sums of 16
    consecutive products, each group a term whose exponent is its two scales'
    exponents only (a zero group included), c's term, all truncated to F bits below
    the largest, summed exactly, truncated to FP32. ``sa``, ``sb``: the scale values
    per group of 16 (shape (n, K / 16)) in ``fs`` (E8M0 or UE4M3)."""
    n, K = a.shape
    # Exact: FP4 values are multiples of 1/2 of at most 6, so 4 * a * b is an integer
    # of at most 144 and a group's sum of 16 at most 2304 < 2**12.
    g = np.rint((a * b * 4.0).reshape(n, K // 16, 16).sum(axis=-1)).astype(np.int64)
    sa_f, sb_f = _finite(np.abs(sa)), _finite(np.abs(sb))
    Ma, ea = decompose(sa_f, fs)
    Mb, eb = decompose(sb_f, fs)
    ms = 2 * fs.mantissa_bits
    T = g * Ma * Mb                      # < 2**12 * 2**8: exact
    q = ea + eb - ms - 2
    ex = ea + eb
    Mc, ec = decompose(_finite(c), FP32)
    T = np.concatenate([T, Mc[:, None]], axis=1)
    q = np.concatenate([q, (ec - 23)[:, None]], axis=1)
    ex = np.concatenate([ex, ec[:, None]], axis=1)
    S, E = aligned_sum(T, q, ex, F)
    d = to_output(np.ldexp(S.astype(np.float64), (E - F).astype(np.int32)), "f32")
    nan = np.isnan(sa).any(axis=1) | np.isnan(sb).any(axis=1) | np.isnan(c)
    d[nan] = np.nan
    inf = np.isinf(c) & ~nan
    d[inf] = c[inf]
    return d


def _rd_products(a, b, fa, fb, F=24):
    """CDNA3's product sum of one group (README §6.3 step 2): (S, Ep) with value
    S * 2**(Ep - F), truncated toward zero below the products' own largest exponent."""
    T, q, ex = _product_terms(a, b, fa, fb)
    return aligned_sum(T, q, ex, F)


def _rd_finish(S31, E, c, drop_far_c=False):
    """(S31 * 2**(E - 31) + c floored to 24 bits below 2**E), rounded to nearest even
    into FP32 (README §6.3 steps 3-4); S31 is already on the 2**(E - 31) grid."""
    Mc, ec = decompose(_finite(c), FP32)
    # c = Mc * 2**(ec - 23) floored onto the grid 2**(E - 24), then counted in 2**(E - 31).
    sc, _ = aligned_sum(Mc[:, None], (ec - 23)[:, None], ec[:, None], 24, floor=True, E=E)
    if drop_far_c:
        sc = np.where(ec >= E - 25, sc, 0)
    total = S31 + (sc << 7)
    # Exact: |total| < 2**45 and E - 31 is far inside float64's range.
    v = np.ldexp(total.astype(np.float64), (E - 31).astype(np.int32))
    return np.asarray(quiet(_round, v, FP32), dtype=np.float64)


def amd_fused(a: np.ndarray, b: np.ndarray, c: np.ndarray, fa: Format,
              fb: Format) -> np.ndarray:
    """One group of CDNA3's fused dot-add with round-down alignment (README §6.3)."""
    Sp, Ep = _rd_products(a, b, fa, fb)
    _, ec = decompose(_finite(c), FP32)
    E = np.maximum(Ep, ec)
    # Sp on the 2**(Ep - 24) grid, floored onto 2**(E - 31): |Sp| < 2**31, so the left
    # shift (E == Ep: by 7) stays below 2**38.
    S31, _ = aligned_sum(Sp[:, None], (Ep - 24)[:, None], Ep[:, None], 31, floor=True, E=E)
    d = _rd_finish(S31, E, c)
    with np.errstate(invalid="ignore"):  # inf * 0: NaN, as the result must be
        P = specials(a * b, c, big_is_inf=True)
    bad = ~np.isfinite(P)
    d[bad] = P[bad]
    return d


def amd_fp8(a: np.ndarray, b: np.ndarray, c: np.ndarray, fa: Format,
            fb: Format) -> np.ndarray:
    """One group of 16 of CDNA3's FP8 fused dot-add (README §6.4): even and odd k
    fused apart, floored together, c dropped when more than 25 binades below."""
    S0, E0 = _rd_products(a[:, 0::2], b[:, 0::2], fa, fb)
    S1, E1 = _rd_products(a[:, 1::2], b[:, 1::2], fa, fb)
    Em = np.maximum(E0, E1)
    halves = np.stack([S0, S1], axis=1)
    lsb = np.stack([E0 - 24, E1 - 24], axis=1)
    S, _ = aligned_sum(halves, lsb, lsb + 24, 24, floor=True, E=Em)
    _, ec = decompose(_finite(c), FP32)
    E = np.maximum(Em, ec)
    S31, _ = aligned_sum(S[:, None], (Em - 24)[:, None], Em[:, None], 31, floor=True, E=E)
    d = _rd_finish(S31, E, c, drop_far_c=True)
    with np.errstate(invalid="ignore"):  # inf * 0: NaN, as the result must be
        P = specials(a * b, c, big_is_inf=True)
    bad = ~np.isfinite(P)
    d[bad] = P[bad]
    return d


def fma_chain(a: np.ndarray, b: np.ndarray, c: np.ndarray, fmt: Format) -> np.ndarray:
    """d <- fma(a_k, b_k, d) for k = 0, 1, ..., from c: IEEE fused multiply-adds in
    ``fmt`` (CDNA's FP32 and FP64 MFMA, README §6.1)."""
    d = np.asarray(c, dtype=np.float64)
    for k in range(a.shape[1]):
        d = np.asarray(quiet(_fma, a[:, k], b[:, k], d, fmt), dtype=np.float64)
    return d


def _flush(x, ftz):
    """FP32 values below 2**-126 in magnitude to zero of their sign (CDNA2's flush)."""
    if not ftz:
        return x
    return np.where(np.abs(x) < 2.0**-126, np.copysign(0.0, x), x)


def pairwise(a: np.ndarray, b: np.ndarray, c: np.ndarray, group: int, ftz: bool,
             fa: Format) -> np.ndarray:
    """CDNA1/CDNA2's FP16 and BF16 dot products (README §6.2): per group, each product
    rounded to FP32 as fmaf(a, b, +0) does, a balanced tree of FP32 additions, then
    acc + group; ``ftz`` (CDNA2) flushes subnormal inputs to +0 and every tree node and
    accumulator below 2**-126 to zero of its sign."""
    if ftz:
        a = np.where(np.abs(a) < fa.smallest_normal, 0.0, a)
        b = np.where(np.abs(b) < fa.smallest_normal, 0.0, b)
        c = np.where(np.abs(c) < 2.0**-126, 0.0, c)
    acc = np.asarray(c, dtype=np.float64)
    for g0 in range(0, a.shape[1], group):
        # fmaf(a, b, +0): the exact product plus +0, rounded once; an exact zero
        # product is +0 (x + +0 with x = -0 is +0).
        p = np.asarray(quiet(_mul, a[:, g0:g0 + group], b[:, g0:g0 + group], FP32))
        p = np.where(p == 0, np.where((a[:, g0:g0 + group] == 0) | (b[:, g0:g0 + group] == 0),
                                      0.0, p), p)
        nodes = [_flush(p[:, i], ftz) for i in range(p.shape[1])]
        acc = _flush(np.asarray(quiet(_add, acc, _tree(nodes, ftz), FP32)), ftz)
    return acc


def _tree(nodes, ftz):
    """Balanced FP32 sum: n -> n // 2 + rest, each addition rounded to nearest even."""
    if len(nodes) == 1:
        return nodes[0]
    half = len(nodes) // 2
    s = quiet(_add, _tree(nodes[:half], ftz), _tree(nodes[half:], ftz), FP32)
    return _flush(np.asarray(s, dtype=np.float64), ftz)


def amx_bf16(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Intel AMX ``TDPBF16PS`` on one row pair of BF16 elements (Intel SDM, the
    instruction's pseudo-code): the FP32 accumulator takes the products of each pair
    2t, 2t + 1 in order, each addition of an exact BF16 product rounded to nearest
    even in FP32; BF16 denormal inputs are read as zero and denormal FP32 results
    flushed to zero (sign kept), as the SDM states for this instruction."""
    a = np.where(np.abs(a) < 2.0**-126, np.copysign(0.0, a), a)
    b = np.where(np.abs(b) < 2.0**-126, np.copysign(0.0, b), b)
    d = _flush(np.asarray(c, dtype=np.float64), True)
    for k in range(a.shape[1]):
        # A BF16 product (16 bits) is exact in FP32's precision: fma rounds only the sum.
        d = _flush(np.asarray(quiet(_fma, a[:, k], b[:, k], d, FP32), dtype=np.float64), True)
    return d
