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

__all__ = ["covers", "nv_fused", "nv_block_fp4", "amd_fp8"]

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
