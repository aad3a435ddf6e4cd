"""Fraction loops of the sequential models of `lowprec.tensorcore` (`exact`, `fp32`,
`fp16`): exact products, each addition exact then rounded by the loop's own
`round_fraction` (checked against NumPy's casts in tests/test_tensorcore.py), zeros
signed by IEEE 754 §6.3 written out here. Nothing here imports lowprec.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

__all__ = ["floor_log2", "round_fraction", "FP32_GRID", "FP16_GRID", "signed", "product",
           "exact_add", "round_signed", "sequential_loop", "exact_loop", "fma_loop"]


# -- Fraction rounding ------------------------------------------------------------------

def floor_log2(q):
    """floor(log2(q)) of a positive Fraction."""
    e = q.numerator.bit_length() - q.denominator.bit_length()
    return e if Fraction(2) ** e <= q else e - 1


def round_fraction(q, p, emin, emax, mode="rne"):
    """Round the exact rational q to a binary format with p significant bits,
    smallest normal 2**emin (subnormals below it), largest exponent emax; "rne" or
    "rz". Overflow gives ±inf under "rne" and ±max under "rz" (IEEE 754)."""
    q = Fraction(q)
    if q == 0:
        return 0.0
    sign, q = (-1 if q < 0 else 1), abs(q)
    quantum = Fraction(2) ** (max(floor_log2(q), emin) - (p - 1))
    n, r = divmod(q, quantum)
    if mode == "rne" and (2 * r > quantum or (2 * r == quantum and n % 2 == 1)):
        n += 1
    value = n * quantum
    top = (2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax
    if value > top:
        return sign * (math.inf if mode == "rne" else float(top))
    return sign * float(value)


#: The grids of FP32 and FP16, as keywords of `round_fraction`.
FP32_GRID = dict(p=24, emin=-126, emax=127)
FP16_GRID = dict(p=11, emin=-14, emax=15)


# -- signed exact values ---------------------------------------------------------------

# (Fraction, sign bit). The sign bit matters only for zeros; the
# rules are IEEE 754 §6.3, written out here.

def signed(x):
    return Fraction(x), math.copysign(1.0, x) < 0


def product(x, y):
    """The exact product; a zero product's sign is the exclusive or of the factors'."""
    return Fraction(x) * Fraction(y), (math.copysign(1.0, x) < 0) != (math.copysign(1.0, y) < 0)


def exact_add(s, t):
    """s + t in exact arithmetic, signed as IEEE 754 §6.3 signs a sum: a nonzero sum
    has its own sign; two zeros of one sign keep it (-0 + -0 = -0); any other exact
    zero is +0 under rounding to nearest (x + (-x) = +0, +0 + -0 = +0)."""
    (q, q_neg), (r, r_neg) = s, t
    v = q + r
    if v != 0:
        return v, v < 0
    if q == 0 and r == 0 and q_neg == r_neg:
        return v, q_neg
    return v, False


def round_signed(s, grid):
    """RN of a signed exact value; a zero result is signed like the exact value
    (§6.3: 'the zero is signed like the exact result')."""
    q, neg = s
    return math.copysign(round_fraction(q, **grid), -1.0 if neg else 1.0)


def sequential_loop(a, b, c, grid, final=None):
    """acc = RN(acc + p_k) from acc = c (c = None: +0, a loop from 0.0), zeros
    signed step by step; ``final``: one more rounding of the result."""
    m, n = a.shape[0], b.shape[1]
    out = np.empty((m, n))
    for i in range(m):
        for j in range(n):
            acc = 0.0 if c is None else round_signed(signed(c[i, j]), grid)
            for k in range(a.shape[1]):
                acc = round_signed(exact_add(signed(acc), product(a[i, k], b[k, j])),
                                    grid)
                if math.isinf(acc):
                    break   # past the range: finite products leave it infinite
            out[i, j] = acc if final is None else round_signed(signed(acc), final)
    return out


def exact_loop(a, b, c, grid):
    """The same additions in exact arithmetic (signed zeros by the same rules), then
    one rounding."""
    m, n = a.shape[0], b.shape[1]
    out = np.empty((m, n))
    for i in range(m):
        for j in range(n):
            acc = signed(0.0 if c is None else round_signed(signed(c[i, j]), grid))
            for k in range(a.shape[1]):
                acc = exact_add(acc, product(a[i, k], b[k, j]))
            out[i, j] = round_signed(acc, grid)
    return out


def fma_loop(a, b, c, p, emin, emax):
    """acc = RN(acc + a[i, k] * b[k, j]) from acc = c, in exact arithmetic, zeros
    signed as IEEE 754 §6.3 says; finite operands."""
    out = np.empty((a.shape[0], b.shape[1]))
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            acc = float(c[i, j])
            for k in range(a.shape[1]):
                x, y = float(a[i, k]), float(b[k, j])
                if math.isinf(acc):
                    continue                    # finite products leave it infinite
                q = Fraction(acc) + Fraction(x) * Fraction(y)
                if q != 0:
                    r = round_fraction(q, p, emin, emax)
                    acc = r if r != 0 else math.copysign(0.0, float(q))
                else:
                    zero_p = math.copysign(1.0, x) * math.copysign(1.0, y)
                    both_negative = math.copysign(1.0, acc) < 0 and zero_p < 0
                    acc = -0.0 if both_negative else 0.0
            out[i, j] = acc
    return out
