"""Fast paths of the instruction kernels: one fused group of a matrix product at a
time, over the whole M x N output, bit for bit what `fused` computes row by row.

A group's products are exact in float64 (FP8, FP6 and FP4 significands, scales that
are powers of two or of at most 4 bits), and where no product is truncated by the
unit's alignment their sum is exact in float64 in any order, so it is one BLAS
product of the group's K-slice; only the step into the accumulator (c's alignment,
the rounding into the output format) runs elementwise over the outputs. Whether a
product is truncated is decided per output from exact exponents: the largest
product exponent and the least last-bit exponent of a group are (max, +) and
(min, +) products, computed exactly as float64 products of powers of 2**8 (`_maxplus`).
Outputs the argument does not clear (and those with inf or NaN inputs) are computed
by the reference kernel of `fused`, a batch at a time within the memory bound. A
kernel module: ndarrays and `Format`\\ s in, float64 ndarrays out; it never imports
`Tensor`, reads a context default, or changes a bit of what `fused` gives.
"""

from __future__ import annotations

import numpy as np

from ..formats import FP32, Format
from . import fused

__all__ = ["covers", "nv_fused", "nv_block_fp4", "amd_fp8", "nv_chain", "fp4_chain"]

_BASE_BITS = 8        # the (max, +) weights are powers of 2**8: groups of up to 255 products
_FRACTION_MASK = (1 << 52) - 1


def covers(algorithm: str, block: int, fa: Format, fb: Format, *,
           scale_block: int | None = None) -> bool:
    """Whether `nv_fused` / `nv_block_fp4` / `amd_fp8` compute this instruction's
    groups: products of at most 26 bits (exact in float64), a zero product's
    exponent (`fused.ZERO_EXP` plus the other factor's) never above a nonzero
    product's, exponent spans whose weights stay normal float64 numbers, and, for
    E8M0-scaled FP8, one scale per group."""
    if block >= 1 << _BASE_BITS:
        return False
    if algorithm == "nv-fp4":
        return True
    if algorithm not in ("nv-fused", "nv-mx", "amd-fp8"):
        return False
    if algorithm == "nv-mx" and scale_block != block:
        return False
    if fa.p + fb.p > 26:
        return False
    if fused.ZERO_EXP + max(fa.emax, fb.emax) > fa.emin + fb.emin:
        return False
    # Widest last-bit span of one side times the weight's bits, both sides: normal.
    span = max(f.emax - f.emin + f.mantissa_bits for f in (fa, fb))
    return 2 * _BASE_BITS * span <= 1000


# -- exact exponents, from the bits of float64 values ----------------------------

def _floor_log2(x: np.ndarray) -> np.ndarray:
    """floor(log2 x) of positive normal float64 values (their exponent field)."""
    return (np.ascontiguousarray(x).view(np.int64) >> 52) - 1023


def _pow2(n: np.ndarray) -> np.ndarray:
    """2.0**n for int64 n in [-1022, 1023], built from its bits."""
    return ((n + 1023) << 52).view(np.float64)


def _exponents(x: np.ndarray, fmt: Format) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(nonzero, e, lsb) of finite values x of ``fmt``: e = max(floor(log2|x|), emin)
    as `fused.decompose` gives it, lsb the exponent of x's lowest set bit (the last
    bit of a product of two is the sum of theirs: odd times odd is odd). Zeros get
    e = lsb = 0 (the callers mask them)."""
    nz = x != 0
    bits = np.ascontiguousarray(np.where(nz, np.abs(x), 1.0)).view(np.int64)
    top = (bits >> 52) - 1023        # every value of these formats is a normal float64
    mant = (bits & _FRACTION_MASK) | (1 << 52)
    low = _floor_log2((mant & -mant).astype(np.float64))
    return nz, np.where(nz, np.maximum(top, fmt.emin), 0), np.where(nz, top - 52 + low, 0)


def _maxplus(xa: np.ndarray, xb: np.ndarray, nza: np.ndarray, nzb: np.ndarray,
             upper: bool) -> tuple[np.ndarray, np.ndarray]:
    """(m, any): m[i, j] = max over t with nza[i, t] and nzb[t, j] of xa[i, t] + xb[t, j]
    (``upper``; else the min), exactly; ``any`` where such a t exists.

    Each side is shifted by its row's (column's) extreme, and the weights 2**(8 * x)
    multiplied by BLAS: a sum of k <= 255 powers of 2**8 whose largest is 2**(8 m) lies
    in [2**(8 m), 255 * 2**(8 m) * (1 + 2**-45)] in any order and rounding (a float
    sum of positive terms is at least its largest term and rounds monotonically), so
    floor(log2(sum)) // 8 is m."""
    sign = 1 if upper else -1
    big = np.iinfo(np.int64).max // 4
    ra = (sign * np.where(nza, xa, -sign * big)).max(axis=1)
    rb = (sign * np.where(nzb, xb, -sign * big)).max(axis=0)
    ra, rb = np.where(ra == -big, 0, ra), np.where(rb == -big, 0, rb)
    wa = np.where(nza, _pow2(_BASE_BITS * (sign * xa - ra[:, None])), 0.0)
    wb = np.where(nzb, _pow2(_BASE_BITS * (sign * xb - rb[None, :])), 0.0)
    s = wa @ wb
    # (field - 1023) >> 3 == ((field + 1) >> 3) - 128: one shift of the exponent field.
    m = ((s.view(np.int64) >> 52) + 1) >> 3
    m += (ra - 128)[:, None] + rb[None, :]
    if sign < 0:
        np.negative(m, out=m)
    return m, s > 0


def _output_exponent(c: np.ndarray, fc: Format) -> np.ndarray:
    """`fused.decompose`'s exponent of finite values c of ``fc``."""
    e = np.maximum(_floor_log2(np.where(c != 0, np.abs(c), 1.0)), fc.emin)
    return np.where(c != 0, e, fused.ZERO_EXP)


def _truncate(c: np.ndarray, lsb: np.ndarray) -> np.ndarray:
    """c truncated toward zero to a multiple of 2**lsb: exact (scalings by powers of
    two that stay normal, |c| * 2**-lsb < 2**53, trunc exact)."""
    return np.trunc(c * _pow2(-lsb)) * _pow2(lsb)


def _finite_rows(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """x with non-finite entries zeroed, and which rows (axis=1) or columns hold one."""
    fin = np.isfinite(x)
    bad = ~fin.all(axis=axis)
    return (np.where(fin, x, 0.0) if bad.any() else x), bad


def _truncated_sums(v, which, A, B, low, run, bound, small=False):
    """v[i, j] = the sum over t of A[i, t] * B[t, j], each run of ``run`` consecutive
    products summed and the sum truncated toward zero to a multiple of 2**low[i, j],
    for the outputs ``which``: the unit's alignment, computed exactly (the callers'
    products and runs are exact in float64; scaling them by 2**-low and back is exact,
    the values staying normal; trunc is exact; and the truncated terms are integers
    whose sum stays below 2**53: k terms below 2**(F + 2) by `max_fraction_bits`, or
    NVFP4's four below 2**(F + 12)). Dense over blocks of rows where most outputs need
    it, gathered otherwise; a batch of ``bound`` bytes at a time."""
    count = np.count_nonzero(which)
    if not count:
        return
    M, k = A.shape
    Bt = np.ascontiguousarray(B.T)
    step = max(1, bound // (24 * k + 64))
    if count > which.size // 2:
        # Outputs outside ``which`` may have any E (their scales are not used).
        scale = _pow2(-np.where(which, low, 0))
        if small:
            # float32 is exact too: unscaled FP8/FP16 products (at most 22 bits, between
            # 2**-48 and 2**32), 2**-low within [2**-126, 2**41], and integer terms and
            # sums below 2**(F + 2) * k <= 2**24 (the caller's condition).
            A, Bt, scale = A.astype(np.float32), Bt.astype(np.float32), scale.astype(np.float32)
        rows = max(1, step // Bt.shape[0])
        for i0 in range(0, M, rows):
            sl = slice(i0, i0 + rows)
            p = A[sl, None, :] * Bt[None, :, :]
            if run > 1:
                p = p.reshape(p.shape[:2] + (k // run, run)).sum(axis=-1)
            p *= scale[sl, :, None]
            np.trunc(p, out=p)
            sums = p.sum(axis=-1, dtype=p.dtype).astype(np.float64)
            v[sl] = np.where(which[sl], sums * _pow2(low[sl]), v[sl])
        return
    ii, jj = np.nonzero(which)
    for s in range(0, ii.size, step):
        i, j = ii[s:s + step], jj[s:s + step]
        lo = low[i, j]
        p = A[i] * Bt[j]
        if run > 1:
            p = p.reshape(p.shape[0], k // run, run).sum(axis=-1)
        p *= _pow2(-lo)[:, None]
        np.trunc(p, out=p)
        v[i, j] = p.sum(axis=1) * _pow2(lo)


def _reference(kernel, need, A, B, c, d, bound, per_output, scales=None):
    """d[need] = the reference kernel's outputs, gathered a batch at a time:
    ``kernel(a_rows, b_rows, c, sa_rows, sb_rows)``."""
    ii, jj = np.nonzero(need)
    if not ii.size:
        return
    step = max(1, bound // per_output)
    for s in range(0, ii.size, step):
        i, j = ii[s:s + step], jj[s:s + step]
        sc = () if scales is None else (scales[0][i], scales[1].T[j])
        d[i, j] = kernel(A[i], B[:, j].T, c[i, j], *sc)


# -- NVIDIA's fused dot-add (nv-fused, nv-mx) ----------------------------------------

def _to_output(v: np.ndarray, out: str) -> np.ndarray:
    """`fused.to_output`, the truncations ("f32", "e8m13") by clearing float64 bits:
    for |v| in [2**-126, 2**128) clearing the 29 (39) fraction bits below FP32's 23
    (13) truncates the magnitude toward zero (sign and magnitude are apart); smaller
    and larger values, and FP16 output, take `fused.to_output`. A zero is +0."""
    if out == "f16":
        return fused.to_output(v, out)
    keep = 23 if out == "f32" else 13
    bits = v.view(np.int64)
    r = (bits & ~np.int64((1 << (52 - keep)) - 1)).view(np.float64)
    field = (bits >> 52) & 0x7FF
    odd = (field < 1023 - 126) | (field >= 1023 + 128)   # tiny (zero too), huge, inf, NaN
    if odd.any():
        r[odd] = fused.to_output(v[odd], out)
    return r


def nv_fused(A: np.ndarray, B: np.ndarray, c: np.ndarray, fa: Format, fb: Format,
             fc: Format, F: int, out: str, sa: np.ndarray | None = None,
             sb: np.ndarray | None = None, bound: int = 1 << 27) -> np.ndarray:
    """`fused.nv_fused` of one group over all outputs: A (M, k), B (k, N), c (M, N);
    ``sa`` (M,) and ``sb`` (N,): one E8M0 scale value per row and column for the
    group (nv-mx with scale_block == block), else None. ``bound``: bytes of work for
    the outputs that take the reference kernel."""
    k = A.shape[1]
    A0, bad_a = _finite_rows(A, 1)
    B0, bad_b = _finite_rows(B, 0)
    esa = esb = None
    if sa is not None and sb is not None:
        fin_a, fin_b = np.isfinite(sa), np.isfinite(sb)
        bad_a, bad_b = bad_a | ~fin_a, bad_b | ~fin_b
        sa0, sb0 = np.where(fin_a, sa, 1.0), np.where(fin_b, sb, 1.0)
        esa, esb = _floor_log2(sa0), _floor_log2(sb0)
        # Exact: multiplying by a power of two (results within 2**(±300): normal).
        A0, B0 = A0 * sa0[:, None], B0 * sb0[None, :]
    nza, ea, la = _exponents(A if A0 is A else np.where(np.isfinite(A), A, 0.0), fa)
    nzb, eb, lb = _exponents(B if B0 is B else np.where(np.isfinite(B), B, 0.0), fb)
    if esa is not None and esb is not None:     # the scales' exponents join (README §5.4)
        ea, la, eb, lb = ea + esa[:, None], la + esa[:, None], eb + esb[None, :], lb + esb
    cfin = np.isfinite(c).all()
    c0 = c if cfin else np.where(np.isfinite(c), c, 0.0)
    # Largest nonzero product exponent; none where the products are all zero.
    P, some = _maxplus(ea, eb, nza, nzb, True)
    # c's exponent as `fused.decompose` gives it (a zero: ZERO_EXP).
    raw = _floor_log2(np.abs(c0))                # -1023 for a zero
    ec = np.maximum(raw, fc.emin)
    if fc.emin != fused.ZERO_EXP:
        ec[c0 == 0] = fused.ZERO_EXP
    E = np.maximum(P, ec)
    need = np.zeros(c.shape, dtype=bool)
    none = ~some
    all_some = not none.any()
    if not all_some:
        # Zero products' exponents (ZERO_EXP + the other factor's) are below every
        # nonzero product's (`covers`), so they decide E only in a group of zero
        # products: there E = c's exponent where the rows' and columns' largest
        # exponents (a zero's ZERO_EXP, scales included) show it; else the reference.
        za = np.where(nza, ea, fused.ZERO_EXP + (0 if esa is None else esa[:, None])).max(axis=1)
        zb = np.where(nzb, eb, fused.ZERO_EXP + (0 if esb is None else esb[None, :])).max(axis=0)
        E[none] = ec[none]
        need |= none & (c0 != 0) & (za[:, None] + zb[None, :] > ec)
    # No product is truncated where every product's last bit is at or above E - F:
    # first the bound from the rows' and columns' least last bits, then the exact one
    # (worth its BLAS product unless few outputs are left).
    low = E - F
    la_min = np.where(nza, la, 10**6).min(axis=1)
    lb_min = np.where(nzb, lb, 10**6).min(axis=0)
    short = la_min[:, None] + lb_min[None, :] < low
    if not all_some:
        short &= some
    if np.count_nonzero(short) > short.size // 32:
        Q, _ = _maxplus(la, lb, nza, nzb, False)
        short &= Q < low
    # Exact: every product is a multiple of 2**(E - F), and so is every partial sum, of
    # magnitude below (k + 1) * 2**(E + 2) <= 2**(E - F + 53) (`max_fraction_bits`).
    v = A0 @ B0
    _truncated_sums(v, short, A0, B0, low, 1, bound,
                    small=esa is None and F + 2 + k.bit_length() <= 24)
    # c keeps its bits where its last possible bit (raw - its fraction bits, below its
    # true last bit for a subnormal c; a zero never cut) is on the grid.
    cut = np.nonzero(low > raw - fc.mantissa_bits)
    if cut[0].size:
        c0 = c0.copy()
        c0[cut] = _truncate(c0[cut], low[cut])
    v += c0
    d = _to_output(v, out)
    if not cfin:
        special = ~np.isfinite(c)
        d[special] = c[special]                      # finite products plus inf or NaN: c
    need |= bad_a[:, None] | bad_b[None, :]
    if need.any():
        def kernel(ra, rb, cc, *s):
            if s:
                s = tuple(np.repeat(x, k, axis=1) for x in s)
            return fused.nv_fused(ra, rb, cc, fa, fb, fc, F, out, *s)
        _reference(kernel, need, A, B, c, d, bound, 16 * k + 128 * (k + 1) + 64,
                   None if sa is None or sb is None else (sa[:, None], sb[None, :]))
    return d


def nv_block_fp4(A: np.ndarray, B: np.ndarray, c: np.ndarray, sa: np.ndarray,
                 sb: np.ndarray, fs: Format, F: int, bound: int = 1 << 27) -> np.ndarray:
    """`fused.nv_block_fp4` of one group of 64 over all outputs: A (M, 64), B (64, N)
    of FP4 values, c (M, N) FP32 values, ``sa`` (M, 4) and ``sb`` (4, N) the scale
    values of the four sums of 16."""
    u = sa.shape[1]
    nan = np.isnan(sa).any(axis=1)[:, None] | np.isnan(sb).any(axis=0)[None, :] | np.isnan(c)
    sa0 = np.where(np.isfinite(sa), np.abs(sa), 0.0)
    sb0 = np.where(np.isfinite(sb), np.abs(sb), 0.0)
    nza, ea, la = _exponents(sa0, fs)
    nzb, eb, lb = _exponents(sb0, fs)
    ea = np.where(nza, ea, fused.ZERO_EXP)
    eb = np.where(nzb, eb, fused.ZERO_EXP)
    c0 = np.where(np.isfinite(c), c, 0.0)
    E = _output_exponent(c0, FP32)
    last = np.full(c.shape, 10**6, dtype=np.int64)
    for g in range(u):   # four terms: their exponents are the scales' (a zero scale's too)
        np.maximum(E, ea[:, g, None] + eb[None, g, :], out=E)
        lsb = np.where(nza[:, g, None] & nzb[None, g, :], la[:, g, None] + lb[None, g, :], 10**6)
        np.minimum(last, lsb, out=last)
    # A term is g * sa * sb with 4 * g an integer: a multiple of 2**(lsb(sa) + lsb(sb) - 2).
    short = last - 2 < E - F
    # Exact: scaling FP4 values (at most 2 bits) by scales of at most 4 bits; every
    # product a multiple of 2**(E - F), their absolute sum below 64 * 36 * 2**(E + 2)
    # < 2**(E - F + 53) (F <= 35), so every partial sum is exact, in any order.
    Aw = A * np.repeat(sa0, 16, axis=1)
    Bw = B * np.repeat(sb0, 16, axis=0)
    v = Aw @ Bw
    _truncated_sums(v, short, Aw, Bw, E - F, 16, bound)
    v += _truncate(c0, E - F)
    d = _to_output(v, "f32")
    inf = np.isinf(c) & ~nan
    return np.where(nan, np.nan, np.where(inf, c, d))


def amd_fp8(A: np.ndarray, B: np.ndarray, c: np.ndarray, fa: Format,
            fb: Format, bound: int = 1 << 27) -> np.ndarray:
    """`fused.amd_fp8` of one group of 16 over all outputs: A (M, 16), B (16, N), c
    (M, N) FP32 values. Each half's sum (even, odd k) truncated to 24 bits below its
    largest product exponent, floored together, c floored or dropped, one RNE."""
    A0, bad_a = _finite_rows(A, 1)
    B0, bad_b = _finite_rows(B, 0)
    nza, ea, la = _exponents(A0, fa)
    nzb, eb, lb = _exponents(B0, fb)
    cfin = np.isfinite(c).all()
    c0 = c if cfin else np.where(np.isfinite(c), c, 0.0)
    halves = []
    for h in (slice(0, None, 2), slice(1, None, 2)):
        P, some = _maxplus(ea[:, h], eb[h], nza[:, h], nzb[h], True)
        low = P - 24
        short = np.where(nza[:, h], la[:, h], 10**6).min(axis=1)[:, None] + \
            np.where(nzb[h], lb[h], 10**6).min(axis=0)[None, :] < low
        short &= some
        if np.count_nonzero(short) > short.size // 32:
            Q, _ = _maxplus(la[:, h], lb[h], nza[:, h], nzb[h], False)
            short &= Q < low
        # Exact where no product is truncated (every product and partial sum a multiple
        # of 2**(P - 24) below 8 * 2**(P + 2)); the truncated sums where one is.
        v = A0[:, h] @ B0[h]
        _truncated_sums(v, short, A0[:, h], B0[h], low, 1, bound)
        halves.append((v, P, some))
    (v0, P0, s0), (v1, P1, s1) = halves
    Em = np.where(s0, np.where(s1, np.maximum(P0, P1), P0), P1)
    some_any = s0 | s1
    ec = np.maximum(_floor_log2(np.abs(c0)), -126)   # FP32's emin: a zero's ZERO_EXP too
    need = bad_a[:, None] | bad_b[None, :]
    if not some_any.all():
        # Zero products' exponents are below every nonzero product's (`covers`): they
        # set Em only where both halves are zero products, bounded by the rows' and
        # columns' largest exponents (a zero's ZERO_EXP); c = 0 gives +0 whatever Em.
        za = np.where(nza, ea, fused.ZERO_EXP).max(axis=1)
        zb = np.where(nzb, eb, fused.ZERO_EXP).max(axis=0)
        none = ~some_any
        Em = np.where(none, ec, Em)
        need |= none & (c0 != 0) & (za[:, None] + zb[None, :] > ec)
    E = np.maximum(Em, ec)
    # Exact: each half floored onto 2**(Em - 24) (scalings by powers of two and floor of
    # float64 values are exact), their sum an integer below 2**28, floored onto
    # 2**(E - 31) (a left shift, exact, while E <= Em + 7), c floored onto 2**(E - 24)
    # and dropped more than 25 binades below E; the total below 2**48 units.
    top = _pow2(24 - Em)
    S = np.floor(v0 * top) + np.floor(v1 * top)
    S = np.floor(S * _pow2(Em - E + 7))
    sc = np.floor(c0 * _pow2(24 - E))
    sc[ec < E - 25] = 0.0
    v = (S + sc * 128.0) * _pow2(E - 31)
    # RNE into FP32: the float32 conversion (IEEE: nearest even, gradual underflow,
    # overflow to inf), as `fused._rd_finish`'s rounding does.
    with np.errstate(over="ignore"):
        d = v.astype(np.float32).astype(np.float64)
    if not cfin:
        special = ~np.isfinite(c)
        d[special] = c[special]                      # finite products plus inf or NaN: c
    if need.any():
        _reference(lambda ra, rb, cc: fused.amd_fp8(ra, rb, cc, fa, fb), need, A, B, c, d,
                   bound, 16 * 16 + 128 * 17 + 64)
    return d


# -- whole chains of groups (the f32 output mode) --------------------------------------

#: Outputs of one step of `nv_chain` and `fp4_chain`: their arrays stay in the L2 cache.
CHAIN_OUTPUTS = 1 << 14

#: Uncleared outputs a group of `_chain` settles one by one at most (beyond, and beyond
#: a quarter of the block, the group kernel takes the block).
SETTLED = 1024

_FAR = 480                  # a stand-in exponent for "no nonzero term": 2**(2 * 504) is finite
_TINY = 2.0**-126           # FP32's least normal number
_KEEP_F32 = ~np.int64((1 << 29) - 1)


def _exponents_of(x, fmt):
    """`_exponents`, for formats of at most 12 fraction bits by a table of the
    trailing zeros of the fraction's top bits (a value of such a format, subnormals
    included, has no set bit below them in float64)."""
    m = fmt.mantissa_bits
    if m > 12:
        return _exponents(x, fmt)
    if m not in _TRAILING:
        t = np.arange(1 << m) | (1 << m)
        _TRAILING[m] = _floor_log2((t & -t).astype(np.float64))
    bits = np.ascontiguousarray(x).view(np.int64)
    field = (bits >> 52) & 0x7FF
    nz = field != 0                  # finite values of these formats are normal float64s
    top = field - 1023
    lsb = top - m + _TRAILING[m][(bits >> (52 - m)) & ((1 << m) - 1)]
    return nz, np.where(nz, np.maximum(top, fmt.emin), 0), np.where(nz, lsb, 0)


_TRAILING: dict = {}


def _summaries(X, fmt, k, es, rows_are_groups, bound):
    """Exponent summaries of the groups of ``k`` terms of each row of X (M, K), or of
    each column of X (K, N) when ``rows_are_groups``, computed within ``bound`` bytes
    of work at a time (about 48 per value; no array of X's size but the results):

    - ``top`` (M, G) or (G, N): the largest term exponent of the group (a zero's
      `fused.ZERO_EXP` included) plus its scale exponent ``es``;
    - ``least``: the least last bit of a nonzero term plus ``es``, at most _FAR;
    - ``x`` and ``y`` (G, M or N, k), int16: each term's exponent (a zero's ZERO_EXP)
      and last bit (a zero's _FAR), one group's rows contiguous for gathers."""
    if rows_are_groups:
        X = X.T
    M, K = X.shape
    G = K // k
    x = np.empty((G, M, k), dtype=np.int16)
    y = np.empty((G, M, k), dtype=np.int16)
    step = max(1, min(bound // 48, CHAIN_OUTPUTS) // K)    # cache-sized pieces
    for r0 in range(0, M, step):
        nz, e, lsb = _exponents_of(X[r0:r0 + step], fmt)
        m = nz.shape[0]
        x[:, r0:r0 + m] = np.where(nz, e, fused.ZERO_EXP).reshape(m, G, k).transpose(1, 0, 2)
        y[:, r0:r0 + m] = np.where(nz, lsb, _FAR).reshape(m, G, k).transpose(1, 0, 2)
    top = x.max(axis=2).astype(np.int64)
    least = y.min(axis=2).astype(np.int64)
    if not rows_are_groups:
        top, least = top.T, least.T
    return top + es, np.minimum(least + es, _FAR), x, y


def _chain(operands, M, N, c, F, summaries, exact, group, safe, bound):
    """The f32 chain of groups of ``k`` along K over all outputs, CHAIN_OUTPUTS at a time.

    ``summaries``: (ra, qa) of shape (M, G) and (rb, qb) of shape (G, N), bounds of
    each group's term exponents, P <= ra + rb, and last bits, Q >= qa + qb. Where, for
    the running result d (an FP32 value, c first),

    - d = 0 in the first group, or P - F <= e(d) - 23: d lies on the alignment grid
      2**(E - F), E = max(P, e(d)), so it is not truncated;
    - max(P, e(d), -126) <= Q + F: no term is truncated either;

    the group's result is its exact sum, ``operands``' product (exact: terms on the grid, their
    sum below 2**(E + 8), so within 53 bits of it for F <= 45) plus d, truncated to
    FP32 by clearing float64 bits. That is exact and equal to `fused.to_output` for
    magnitudes in [2**-126, 2**128); a smaller sum is a multiple of 2**-149 (the
    ``safe`` groups' terms, and FP32's d, lie on that grid), so clearing changes
    nothing, as FP32's truncation would not. The other outputs take ``exact`` (the
    reference semantics on gathered pairs), and the groups that are not ``safe``
    (a sum that may reach 2**128, a last bit below 2**-149) take ``group``."""
    (ra, qa), (rb, qb) = summaries
    c = np.broadcast_to(np.asarray(c, dtype=np.float64), (M, N))
    G = ra.shape[1]
    # Powers of two of the bounds, with F folded in: PB = 2**(P - F + 23), QB = 2**(Q + 24).
    pa, pb = _pow2(ra - F + 23), _pow2(rb)
    qa2, qb2 = _pow2(qa + 24), _pow2(qb)
    widen = 2.0**(23 - F)
    outputs = max(1, min(CHAIN_OUTPUTS, bound // 64))     # five float64 arrays of them
    nc = max(1, min(N, outputs))
    mc = max(1, outputs // nc)
    out = np.empty((M, N))
    for i0 in range(0, M, mc):
        for j0 in range(0, N, nc):
            rows, cols = slice(i0, i0 + mc), slice(j0, j0 + nc)
            d = c[rows, cols] + 0.0          # -0 becomes +0: the same value, as the sum's
            first_zero = not d.any()
            v, ad, PB = np.empty_like(d), np.empty_like(d), np.empty_like(d)
            for g in range(G):
                if not safe[g]:
                    d = group(g, rows, cols, d)
                    first_zero = False
                    continue
                np.matmul(*operands(g, rows, cols), out=v)
                np.abs(d, out=ad)
                np.maximum(ad, _TINY, out=ad)
                np.multiply(pa[rows, g, None], pb[None, g, cols], out=PB)
                ok = None if first_zero else ad >= PB
                ad *= widen
                np.maximum(ad, PB, out=ad)
                np.multiply(qa2[rows, g, None], qb2[None, g, cols], out=PB)
                okb = ad < PB
                ok = okb if ok is None else np.logical_and(ok, okb, out=ok)
                first_zero = False
                redo = None if ok.all() else _uncleared(np.flatnonzero(~ok), d, F, g, i0, j0,
                                                        summaries)
                if redo is not None and redo.size > max(v.size // 4, SETTLED):
                    # Most outputs uncleared (wide products, FP16's long significands):
                    # the group kernel's dense passes beat settling them one by one.
                    v[...] = group(g, rows, cols, d)
                    d, v = v, d
                    continue
                if redo is not None:
                    vr, dr = v.ravel()[redo], d.ravel()[redo]
                v += d
                bits = v.view(np.int64)
                bits &= _KEEP_F32
                if redo is not None:
                    ii, jj = np.divmod(redo, v.shape[1])
                    v.ravel()[redo] = exact(g, ii + i0, jj + j0, dr, vr)
                d, v = v, d
            out[rows, cols] = d
    return out


def _uncleared(redo, d, F, g, i0, j0, summaries):
    """Of the outputs ``redo`` (flat indices into the chunk at (i0, j0)) that the bounds
    on |d| did not clear in group g, those that d's own last bit does not clear either
    (None for none).

    With E = max(top, e(d)) <= max(P, e(d)), d lies on the alignment grid 2**(E - F)
    where its last set bit is at or above max(P, e(d)) - F (or d = 0): a sum that
    cancelled leaves d small but on the earlier groups' grid. With no term truncated
    either (max(P, e(d), -126) <= Q + F) the group's sum is exact, as `_chain` argues."""
    (ra, qa), (rb, qb) = summaries
    ii, jj = np.divmod(redo, d.shape[1])
    ii += i0
    jj += j0
    P = ra[ii, g] + rb[g, jj]
    dr = np.abs(d.ravel()[redo])
    bits = np.maximum(dr, _TINY).view(np.int64)
    ed = (bits >> 52) - 1023                      # e(d), at least -126 (FP32's emin)
    mant = (bits & _FRACTION_MASK) | (1 << 52)
    last = ed - 52 + _floor_log2((mant & -mant).astype(np.float64))
    E = np.maximum(P, ed)
    fine = ((dr == 0) | (last >= E - F)) & (E <= qa[ii, g] + qb[g, jj] + F)
    left = redo[~fine]
    return left if left.size else None


def _finite_all(*xs: np.ndarray | None) -> bool:
    return all(x is None or np.isfinite(x).all() for x in xs)


def _safe_groups(c, k, ra, rb, qa, qb, bits):
    """Which groups keep every running sum below 2**128 and every term's last bit at or
    above 2**-149. A term is below 2**(ra + rb + bits) (``bits``: its magnitude's bits
    above the summaries' exponents), so a running sum is below |c| plus k times that
    for each group so far."""
    top = ra.max(axis=0, initial=-_FAR) + rb.max(axis=1, initial=-_FAR) + bits
    reach = np.abs(c).max(initial=0.0) + np.cumsum(k * _pow2(np.minimum(top, 1000)))
    return (reach < 2.0**127) & (qa.min(axis=0, initial=_FAR) + qb.min(axis=1, initial=_FAR)
                                 >= -149)


def nv_chain(A: np.ndarray, B: np.ndarray, c: np.ndarray, fa: Format, fb: Format, F: int,
             k: int, sa: np.ndarray | None = None, sb: np.ndarray | None = None,
             bound: int = 1 << 27) -> np.ndarray | None:
    """`fused.nv_fused` of every group of ``k`` along K in order, each group's result the
    next one's c, into FP32 with truncation (the "f32" mode): A (M, K), B (K, N), c
    (M, N) FP32 values; ``sa`` (M, K / k) and ``sb`` (K / k, N): one E8M0 scale value
    per group, or None. None for inputs of more than 6 fraction bits together, or
    where a value is inf or NaN (the callers then take a group at a time)."""
    # FP16 and BF16 products are wide: their bounds clear few outputs (the groups win).
    if fa.mantissa_bits + fb.mantissa_bits > 6 or not _finite_all(A, B, c, sa, sb):
        return None
    M, K = A.shape
    N = B.shape[1]
    G = K // k
    esa = np.zeros((M, G), dtype=np.int64)
    esb = np.zeros((G, N), dtype=np.int64)
    if sa is not None and sb is not None:
        esa, esb = _floor_log2(sa), _floor_log2(sb)
    ra, qa, xa, ya = _summaries(A, fa, k, esa, False, bound)
    rb, qb, xb, yb = _summaries(B, fb, k, esb, True, bound)
    c = np.broadcast_to(np.asarray(c, dtype=np.float64), (M, N))
    safe = _safe_groups(c, k, ra, rb, qa, qb, 2)

    # Exact: multiplying by powers of two (results within 2**(+-300): normal).
    def operands(g, rows, cols):
        ks = slice(g * k, (g + 1) * k)
        a, b = A[rows, ks], B[ks, cols]
        if sa is not None and sb is not None:
            a, b = a * sa[rows, g, None], b * sb[g, None, cols]
        return a, b

    def terms(g, ii, jj):
        ks = slice(g * k, (g + 1) * k)
        t = A[ii, ks] * B[ks][:, jj].T
        return t if sa is None or sb is None else t * (sa[ii, g] * sb[g, jj])[:, None]

    def exact(g, ii, jj, d, v):
        es = esa[ii, g] + esb[g, jj]
        top = (xa[g, ii] + xb[g, jj]).max(axis=1) + es
        least = (ya[g, ii] + yb[g, jj]).min(axis=1) + es
        return _settle(top, d, v, least, F, lambda s: terms(g, ii[s], jj[s]))

    def group(g, rows, cols, d):
        ks = slice(g * k, (g + 1) * k)
        s = (None, None) if sa is None or sb is None else (sa[rows, g], sb[g, cols])
        return nv_fused(A[rows, ks], B[ks, cols], d, fa, fb, FP32, F, "f32", *s, bound=bound)

    return _chain(operands, M, N, c, F, ((ra, qa), (rb, qb)), exact, group, safe, bound)


def _settle(top, d, v, q, F, terms):
    """The reference semantics of one group on gathered outputs: ``top`` (n,) the
    largest term exponent (zeros' included), d (n,) FP32 values, v (n,) the float64
    sums of the terms, ``q`` (n,) their least last bit; every term and d
    truncated to F bits below E = max(top, e(d)), summed, truncated to FP32.

    Where q >= E - F no term is truncated and v is exact; elsewhere ``terms(where)``
    gives the terms (exact float64 values) to truncate one by one. Exact: scalings
    by powers of two that stay normal, trunc exact, and the integers' sum below
    (t + 1) * 2**(F + 2) <= 2**53 (NVFP4's four terms: below 2**(F + 14))."""
    nz = d != 0
    ed = np.where(nz, np.maximum(_floor_log2(np.where(nz, np.abs(d), 1.0)), -126),
                  fused.ZERO_EXP)
    low = np.maximum(top, ed) - F
    down, up = _pow2(-low), _pow2(low)
    cut = np.trunc(d * down)
    s = v * down + cut
    short = np.flatnonzero(q < low)
    if short.size:
        s[short] = np.trunc(terms(short) * down[short, None]).sum(axis=1) + cut[short]
    return _to_output(s * up, "f32")


def fp4_chain(A: np.ndarray, B: np.ndarray, c: np.ndarray, sa: np.ndarray, sb: np.ndarray,
              fs: Format, F: int, bound: int = 1 << 27) -> np.ndarray | None:
    """`fused.nv_block_fp4` of every group of 64 along K in order, each group's result
    the next one's c: A (M, K), B (K, N) FP4 values, c (M, N) FP32 values, ``sa``
    (M, K / 16) and ``sb`` (K / 16, N) the scale values of each sum of 16. None where
    a value is inf or NaN (the callers then take a group at a time)."""
    if not _finite_all(A, B, c, sa, sb):
        return None
    sa0, sb0 = np.abs(sa), np.abs(sb)
    # The four terms of a group: each scale pair's exponents, and its last bit: a term is
    # g * sa * sb with 4 * g an integer, so its last bit is at least la + lb - 2.
    ra, qa, xa, ya = _summaries(sa0, fs, 4, 0, False, bound)
    rb, qb, xb, yb = _summaries(sb0, fs, 4, 0, True, bound)
    qa, qb, ya, yb = qa - 1, qb - 1, ya - 1, yb - 1
    M, N = A.shape[0], B.shape[1]
    c = np.broadcast_to(np.asarray(c, dtype=np.float64), (M, N))
    # FP4 values are at most 6 < 2**3: a term of 16 is below 2**(ra + rb + 2 + 6 + 4).
    safe = _safe_groups(c, 4, ra, rb, qa, qb, 12)

    # Exact: FP4 values (at most 2 bits) times scales of at most 4 bits.
    def operands(g, rows, cols):
        ks, us = slice(64 * g, 64 * g + 64), slice(4 * g, 4 * g + 4)
        return (A[rows, ks] * np.repeat(sa0[rows, us], 16, axis=1),
                B[ks, cols] * np.repeat(sb0[us, cols], 16, axis=0))

    def terms(g, ii, jj):
        ks, us = slice(64 * g, 64 * g + 64), slice(4 * g, 4 * g + 4)
        a = A[ii, ks] * np.repeat(sa0[ii, us], 16, axis=1)
        b = B[ks][:, jj].T * np.repeat(sb0[us][:, jj].T, 16, axis=1)
        # Exact: each sum of 16 products is a multiple of 2**(la + lb - 2) below 2**(E + 12).
        return (a * b).reshape(-1, 4, 16).sum(axis=2)

    def exact(g, ii, jj, d, v):
        top = (xa[g, ii] + xb[g, jj]).max(axis=1)
        least = (ya[g, ii] + yb[g, jj]).min(axis=1)
        return _settle(top, d, v, least, F, lambda s: terms(g, ii[s], jj[s]))

    def group(g, rows, cols, d):
        ks, us = slice(64 * g, 64 * g + 64), slice(4 * g, 4 * g + 4)
        return nv_block_fp4(A[rows, ks], B[ks, cols], d, sa[rows, us], sb[us, cols], fs, F,
                            bound=bound)

    return _chain(operands, M, N, c, F, ((ra, qa), (rb, qb)), exact, group, safe, bound)
