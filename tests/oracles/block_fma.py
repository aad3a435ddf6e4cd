"""A scalar reference of the block FMA of TENSORCORE.md §2 and §4, written on Python
integers and Fractions from the spec, sharing no code with `lowprec.tensorcore`.

`reference_dot` gives one output of a block-FMA model from the parameters of §3
(``block``, ``F``, ``elim``, ``elim_fp16``, ``out_bits``, ``split``, ``mode``).
"""

from __future__ import annotations

import math
from fractions import Fraction

from oracles.loops import FP16_GRID, FP32_GRID, floor_log2, round_fraction

__all__ = ["IN_BITS", "decompose", "round_out", "block", "reference_dot"]

#: Fraction bits f and emin of each input format.
IN_BITS = {"fp16": (10, -14), "bf16": (7, -126), "tf32": (10, -126),
           "e4m3": (3, -6), "e5m2": (2, -14)}     # fraction bits f, emin


def decompose(x, fmt):
    """|x| = S * 2**(e - f) with e = max(floor(log2|x|), emin): (S, e)."""
    f, emin = IN_BITS[fmt]
    e = max(floor_log2(Fraction(abs(x))), emin)
    S = Fraction(abs(x)) / Fraction(2) ** (e - f)
    assert S.denominator == 1
    return int(S), e


def round_out(value, out, out_rz_bits, mode="rz"):
    """§2.7/§2.8 on an exact Fraction: FP32 by ``mode`` keeping out_rz_bits fraction
    bits (FP32 subnormals), or FP16 RNE; beyond the range is ±inf."""
    if value == 0:
        return 0.0
    if out == "fp16":
        return round_fraction(value, **FP16_GRID)
    if abs(value) >= 2**128:
        return math.copysign(math.inf, value)
    d = round_fraction(value, out_rz_bits + 1, -126, 127, mode=mode)
    return math.copysign(math.inf, d) if abs(d) > 2**127 * (2 - 2.0**-out_rz_bits) else d


def block(pairs, c, fmt, F, elim, out, out_rz_bits, mode="rz"):
    """One block FMA d = c + sum a_i b_i by the letter of §2, on one output."""
    specials = [x for ab in pairs for x in ab] + [c]
    if any(math.isnan(x) for x in specials):
        return math.nan
    infs = []
    for x, y in pairs:
        if math.isinf(x) or math.isinf(y):
            if x == 0 or y == 0:
                return math.nan
            infs.append(math.copysign(1, x) * math.copysign(1, y))
    if math.isinf(c):
        infs.append(math.copysign(1, c))
    if infs:
        return math.nan if len(set(infs)) > 1 else infs[0] * math.inf
    f = IN_BITS[fmt][0]
    terms = []   # (sign, exact magnitude, exponent)
    for x, y in pairs:
        if x == 0 or y == 0:
            continue
        (sa, ea), (sb, eb) = decompose(x, fmt), decompose(y, fmt)
        mag = Fraction(sa * sb) * Fraction(2) ** (ea + eb - 2 * f)
        sign = 1 if (x > 0) == (y > 0) else -1
        terms.append((sign, mag, ea + eb))
    if c != 0:
        terms.append((1 if c > 0 else -1, abs(Fraction(c)),
                      max(floor_log2(abs(Fraction(c))), -126)))
    if not terms:
        return 0.0
    E = max(e for _, _, e in terms)
    if elim is not None:
        E = max(E, elim)
    total = sum(s * math.floor(m * Fraction(2) ** (F - E)) for s, m, _ in terms)
    return round_out(Fraction(total) * Fraction(2) ** (E - F), out, out_rz_bits, mode)


def reference_dot(a_row, b_col, c, fmt, params, out):
    """One output of a block-FMA model: chained blocks, or the §4 split."""
    elim = params["elim_fp16"] if out == "fp16" else params["elim"]
    rz_bits = params.get("out_bits", 23)
    F, k, K = params["F"], params["block"], len(a_row)
    d = c
    if params.get("split"):
        for j0 in range(0, K, 32):
            idx = range(j0, min(j0 + 32, K))
            g1 = [(a_row[i], b_col[i]) for i in idx if i % 4 < 2]
            g2 = [(a_row[i], b_col[i]) for i in idx if i % 4 >= 2]
            d1 = block(g1, 0.0, fmt, F, elim, out, rz_bits)
            d2 = block(g2, d1, fmt, F, elim, out, rz_bits)
            if math.isnan(d2) or math.isnan(d) or (math.isinf(d2) and math.isinf(d)
                                                    and d2 != d):
                d = math.nan
            elif math.isinf(d2) or math.isinf(d):
                d = d2 if math.isinf(d2) else d
            else:   # one correctly rounded (RNE) addition
                d = round_fraction(Fraction(d2) + Fraction(d),
                                   **(FP16_GRID if out == "fp16" else FP32_GRID))
        return d
    for j0 in range(0, K, k):
        pairs = [(a_row[i], b_col[i]) for i in range(j0, min(j0 + k, K))]
        d = block(pairs, d, fmt, F, elim, out, rz_bits, params.get("mode", "rz"))
    return d
