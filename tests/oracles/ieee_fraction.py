"""Exact IEEE 754 operations on Fractions: the oracle of `lowprec.arith`.

One pair at a time, `exact_result` gives the exact value of ``a op b`` (a Fraction), or
the IEEE result where that is a special or a signed zero; `reference_round` then rounds
it. For large samples of FP16, BF16 and FP32, `oracle` classifies the exact results on
Python integers and rounds them in every mode at once (checked against
`reference_round` in tests/arith/test_elementwise.py). Nothing here calls lowprec's
arithmetic: only `lowprec.testing.reference_round`, the Fraction rounding.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

import lowprec as lp
from lowprec.testing import reference_round

__all__ = ["MODES", "exact_result", "fma_rounded", "oracle", "exact_operand",
           "rounded_result"]

#: The deterministic rounding modes.
MODES = ("rne", "rna", "rz", "ru", "rd", "ro")


# -- one operation at a time ----------------------------------------------------------

def exact_result(op, a, b, mode):
    """The exact result of ``a op b``: a Fraction, or a float for specials and zeros."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if op == "sub":
        op, b = "add", -b
    if op == "add":
        if math.isinf(a) or math.isinf(b):
            if math.isinf(a) and math.isinf(b) and a != b:
                return math.nan
            return a if math.isinf(a) else b
        s = Fraction(a) + Fraction(b)
        if s == 0:
            if a == 0 and b == 0 and math.copysign(1, a) == math.copysign(1, b):
                return a
            return -0.0 if mode == "rd" else 0.0
        return s
    neg = (math.copysign(1, a) < 0) != (math.copysign(1, b) < 0)
    sign = -1.0 if neg else 1.0
    if op == "mul":
        if (math.isinf(a) and b == 0) or (math.isinf(b) and a == 0):
            return math.nan
        if math.isinf(a) or math.isinf(b):
            return sign * math.inf
        p = Fraction(a) * Fraction(b)
        return p if p != 0 else sign * 0.0
    # div
    if (a == 0 and b == 0) or (math.isinf(a) and math.isinf(b)):
        return math.nan
    if math.isinf(a) or b == 0:
        return sign * math.inf
    if math.isinf(b):
        return sign * 0.0
    q = Fraction(a) / Fraction(b)
    return q if q != 0 else sign * 0.0


def fma_rounded(a, b, c, name, mode):
    """``a * b + c`` (arrays) exact on Fractions, then `reference_round`; an exact zero
    is signed by IEEE 754 §6.3 (float64's own sum of the zero terms, -0 under rd)."""
    out = []
    for x, y, z in zip(a.tolist(), b.tolist(), c.tolist()):
        e = Fraction(x) * Fraction(y) + Fraction(z)
        if e == 0:
            p0 = x * y
            e = -((-p0) + (-z)) if mode == "rd" else p0 + z
        out.append(reference_round(e, name, mode))
    return np.array(out)


def exact_operand(v):
    """The exact value of one operand, converted without lowprec: a Fraction."""
    if isinstance(v, (int, np.integer)):
        return Fraction(int(v))
    if isinstance(v, np.longdouble):
        return Fraction(*v.as_integer_ratio())
    return Fraction(float(v))


def rounded_result(op, xs, name, mode):
    """reference_round of the exact result of ``op`` ("add", "sub", "mul", "div" or
    "fma") on operands of any width (IEEE special cases and zero signs)."""
    fl = [float(x) for x in xs]
    if any(math.isnan(f) for f in fl) or any(math.isinf(f) for f in fl):
        if op != "fma":
            return reference_round(exact_result(op, fl[0], fl[1], mode), name, mode)
        a, b, c = fl                    # a wide value as a float keeps its sign and zero
        if math.isnan(a) or math.isnan(b) or math.isnan(c):
            return math.nan
        if math.isinf(a) or math.isinf(b):
            if a == 0 or b == 0:
                return math.nan
            p = math.copysign(math.inf, a) * math.copysign(1.0, b)
            return math.nan if math.isinf(c) and c != p else reference_round(p, name, mode)
        return reference_round(c, name, mode)
    a = [exact_operand(x) for x in xs]
    if op in ("add", "sub"):
        v = a[0] + a[1] if op == "add" else a[0] - a[1]
        if v == 0:
            return -0.0 if mode == "rd" else 0.0
    elif op == "mul":
        v = a[0] * a[1]
        if v == 0:
            return math.copysign(0.0, fl[0]) * math.copysign(1.0, fl[1])
    elif op == "div":
        if a[1] == 0:
            return reference_round(exact_result("div", fl[0], fl[1], mode), name, mode)
        v = a[0] / a[1]
        if v == 0:
            return math.copysign(0.0, fl[0]) * math.copysign(1.0, fl[1])
    else:
        v = a[0] * a[1] + a[2]
        if v == 0:
            return -0.0 if mode == "rd" else 0.0
    return reference_round(v, name, mode)


# -- a vectorised exact oracle for big samples ------------------------------------

class _Exact:
    """Exact results as (sign, k, q, cat): |x| = (k + f) * 2**q with f in [0, 1)
    classified by ``cat`` (0: f = 0, 1: f < 1/2, 2: f = 1/2, 3: f > 1/2), where 2**q
    is the format's quantum at |x|. Python integers: no rounding anywhere."""

    def __init__(self, fmt):
        self.fmt = lp.format(fmt)

    def _q(self, e):
        return max(e, self.fmt.emin) - self.fmt.mantissa_bits

    @staticmethod
    def _log2(num, den):
        e = num.bit_length() - den.bit_length()
        if (num << -e if e < 0 else num) < (den << e if e > 0 else den):
            e -= 1
        return e

    def ratio(self, num, den):
        """Classify num/den > 0."""
        q = self._q(self._log2(num, den))
        n, d = (num, den << q) if q >= 0 else (num << -q, den)
        k, r = divmod(n, d)
        cat = 0 if r == 0 else 1 if 2 * r < d else 2 if 2 * r == d else 3
        return k, q, cat

    def root(self, num, den):
        """Classify sqrt(num/den) > 0."""
        q = self._q(self._log2(num, den) >> 1)
        n, d = (num, den << (2 * q)) if q >= 0 else (num << (-2 * q), den)
        k = math.isqrt(n // d)
        if k * k * d == n:
            cat = 0
        else:
            c = 4 * n - (2 * k + 1) ** 2 * d
            cat = 1 if c < 0 else 2 if c == 0 else 3
        return k, q, cat

    def pick(self, neg, k, q, cat, mode):
        """Round classified values (arrays) by ``mode``; DESIGN.md's overflow rules."""
        fmt = self.fmt
        neg, k, q, cat = map(np.asarray, (neg, k, q, cat))
        odd = (k % 2) == 1
        if mode == "rz":
            up = np.zeros(k.shape, bool)
        elif mode in ("ru", "rd"):
            up = (cat > 0) & (neg == (mode == "rd"))
        elif mode == "rne":
            up = (cat == 3) | ((cat == 2) & odd)
        elif mode == "rna":
            up = cat >= 2
        else:
            up = (cat > 0) & ~odd
        with np.errstate(over="ignore"):
            mag = np.ldexp((k + up).astype(np.float64), q.astype(np.int64))
        over = mag > fmt.max
        to_inf = {"rne": np.ones_like(neg), "rna": np.ones_like(neg), "rz": ~np.ones_like(neg),
                  "ro": ~np.ones_like(neg), "ru": ~neg, "rd": neg}[mode]
        if fmt.kind == "finite":
            to_inf = np.zeros_like(neg)
        special = np.inf if fmt.has_inf else np.nan
        mag = np.where(over, np.where(to_inf, special, fmt.max), mag)
        out = np.where(neg, -mag, mag)
        if not fmt.has_negative_zero:
            out = out + 0.0
        return out


def _ratio_parts(x):
    n, d = float(x).as_integer_ratio()
    return abs(n), d


def oracle(op, a, b, fmt, modes=MODES):
    """Exact rounding of ``a op b`` (arrays) in each mode: {mode: expected array}.

    Specials and exact zeros go through `exact_result` and `reference_round`."""
    ex = _Exact(fmt)
    n = len(a)
    neg = np.zeros(n, bool)
    k = np.zeros(n, np.int64)
    q = np.zeros(n, np.int64)
    cat = np.zeros(n, np.int64)
    special = {}
    for i, (x, y) in enumerate(zip(a.tolist(), b.tolist() if b is not None else [0.0] * n)):
        if op == "sqrt":
            if math.isnan(x) or math.isinf(x) or x <= 0:
                special[i] = (math.nan if x < 0 else x)
                continue
            nx, dx = _ratio_parts(x)
            k[i], q[i], cat[i] = ex.root(nx, dx)
            continue
        if not (math.isfinite(x) and math.isfinite(y)) or x == 0 or y == 0 or (
                op in ("add", "sub") and (x == -y if op == "add" else x == y)):
            special[i] = None
            continue
        nx, dx = _ratio_parts(x)
        ny, dy = _ratio_parts(y)
        if op in ("add", "sub"):
            sx = -1 if x < 0 else 1
            sy = (-1 if y < 0 else 1) * (-1 if op == "sub" else 1)
            num = sx * nx * dy + sy * ny * dx
            neg[i] = num < 0
            k[i], q[i], cat[i] = ex.ratio(abs(num), dx * dy)
        elif op == "mul":
            neg[i] = (x < 0) != (y < 0)
            k[i], q[i], cat[i] = ex.ratio(nx * ny, dx * dy)
        else:
            neg[i] = (x < 0) != (y < 0)
            k[i], q[i], cat[i] = ex.ratio(nx * dy, dx * ny)
    out = {}
    for mode in modes:
        r = ex.pick(neg, k, q, cat, mode)
        for i, v in special.items():
            if op == "sqrt":
                r[i] = reference_round(v, fmt, mode)
            else:
                e = exact_result(op, a[i], b[i], mode)
                r[i] = reference_round(e, fmt, mode)
        out[mode] = r
    return out
