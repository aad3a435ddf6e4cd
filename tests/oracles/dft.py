"""The Fourier transforms of `lowprec.fft` on Fractions, in the order lowprec/fft.py
documents: a textbook recursive Cooley-Tukey for powers of two, a direct sum with
pairwise additions otherwise, every real operation exact and then rounded once by
`lowprec.testing.reference_round`.
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction

from lowprec.testing import reference_round

__all__ = ["Ref"]


class Ref:
    """Real operations on float values of ``fmt``: exact (Fraction) where the operands
    are finite, IEEE's float answer otherwise (inf - inf, 0 * inf), rounded once."""

    def __init__(self, fmt, mode):
        self.fmt, self.mode = fmt, mode

    def _op(self, f, a, b):
        if math.isfinite(a) and math.isfinite(b):
            return reference_round(f(Fraction(a), Fraction(b)), self.fmt, self.mode)
        return reference_round(float(f(a, b)), self.fmt, self.mode)

    def add(self, a, b):
        return self._op(operator.add, a, b)

    def sub(self, a, b):
        return self._op(operator.sub, a, b)

    def mul(self, a, b):
        return self._op(operator.mul, a, b)

    def div(self, a, b):
        return self._op(operator.truediv, a, b)

    def cadd(self, x, y):
        return self.add(x[0], y[0]), self.add(x[1], y[1])

    def csub(self, x, y):
        return self.sub(x[0], y[0]), self.sub(x[1], y[1])

    def twiddle(self, k, n, inverse):
        """exp(-2 pi i k / n) (conjugated for the inverse) as documented: the quarter
        turns of 4k = q n + r exact, cos and sin of the rest (float64) rounded by RNE."""
        q, r = divmod(4 * (k % n), n)
        phi = 0.5 * math.pi * r / n
        c = reference_round(Fraction(math.cos(phi)), self.fmt)
        s = reference_round(Fraction(math.sin(phi)), self.fmt)
        # cos(q pi/2 + phi) and -sin(q pi/2 + phi), by the angle-sum identities.
        w = [(c, -s), (-s, -c), (-c, s), (s, c)][q]
        return (w[0], -w[1]) if inverse else w, r == 0

    def times(self, w, exact, x):
        """w * x: exact for a quarter turn, else four rounded products, one rounded
        subtraction, one rounded addition."""
        (wr, wi), (xr, xi) = w, x
        if exact:
            return {(1, 0): (xr, xi), (0, -1): (xi, -xr), (-1, 0): (-xr, -xi),
                    (0, 1): (-xi, xr)}[(int(wr), int(wi))]
        return (self.sub(self.mul(wr, xr), self.mul(wi, xi)),
                self.add(self.mul(wr, xi), self.mul(wi, xr)))

    def pairwise(self, terms):
        while len(terms) > 1:
            pairs = [self.add(terms[i], terms[i + 1]) for i in range(0, len(terms) - 1, 2)]
            terms = pairs + (terms[-1:] if len(terms) % 2 else [])
        return terms[0]

    def dft(self, x, inverse=False):
        """x: a list of (re, im) float pairs."""
        n = len(x)
        if n & (n - 1) == 0:
            return self._cooley_tukey(x, inverse)
        out = []
        for k in range(n):
            prods = [self.times(*self.twiddle(j * k, n, inverse), x[j]) for j in range(n)]
            out.append((self.pairwise([p[0] for p in prods]),
                        self.pairwise([p[1] for p in prods])))
        return out

    def _cooley_tukey(self, x, inverse):
        n = len(x)
        if n == 1:
            return list(x)
        even = self._cooley_tukey(x[0::2], inverse)
        odd = self._cooley_tukey(x[1::2], inverse)
        out = [None] * n
        for k in range(n // 2):
            t = self.times(*self.twiddle(k, n, inverse), odd[k])
            out[k], out[k + n // 2] = self.cadd(even[k], t), self.csub(even[k], t)
        return out

    def scale(self, x, d):
        return [(self.div(a, d), self.div(b, d)) for a, b in x]
