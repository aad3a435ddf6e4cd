"""Sums step by step on Fractions: the oracle of `lp.sum` and `lp.dot`.

Each addition is exact (`exact_result`), then rounded once by `reference_round`, in
the order the function under test documents.
"""

from __future__ import annotations

from fractions import Fraction

from lowprec.testing import reference_round
from oracles.ieee_fraction import exact_result

__all__ = ["rounded_add", "sequential_sum", "pairwise_sum", "kahan_sum", "SUMS",
           "pairwise_levels"]


def rounded_add(x, y, name, mode):
    """``x + y`` rounded once into ``name`` by ``mode`` (IEEE 754's signed zeros)."""
    e = exact_result("add", x, y, mode)
    return reference_round(e, name, mode)


def sequential_sum(xs, name, mode):
    """Left to right, each sum rounded."""
    acc = reference_round(xs[0], name, mode)
    for x in xs[1:]:
        acc = rounded_add(acc, x, name, mode)
    return acc


def pairwise_sum(xs, name, mode):
    """Adjacent pairs, level by level, each sum rounded; an odd last term moves up a
    level unchanged."""
    level = list(xs)
    if len(level) == 1:
        return reference_round(level[0], name, mode)
    while len(level) > 1:
        nxt = [rounded_add(level[i], level[i + 1], name, mode) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def kahan_sum(xs, name, mode):
    """Kahan's compensated sum, each operation rounded."""
    def op(o, x, y):
        return reference_round(exact_result(o, x, y, mode), name, mode)
    s, c = reference_round(xs[0], name, mode), 0.0
    for x in xs[1:]:
        y = op("sub", x, c)
        t = op("add", s, y)
        c = op("sub", op("sub", t, s), y)
        s = t
    return s


#: The orders of `lp.sum`, by name.
SUMS = {"sequential": sequential_sum, "pairwise": pairwise_sum, "kahan": kahan_sum}


def pairwise_levels(x, fmt):
    """The pairwise order of `lp.sum` on Fractions (two terms or more), each sum
    rounded by the oracle."""
    level, carry = [Fraction(v) for v in x], None
    while len(level) + (carry is not None) > 1:
        k = len(level) // 2
        pairs = [Fraction(reference_round(level[2 * i] + level[2 * i + 1], fmt))
                 for i in range(k)]
        if len(level) % 2 and carry is None:
            carry = level[-1]
        elif len(level) % 2:
            pairs.append(Fraction(reference_round(level[-1] + carry, fmt)))
            carry = None
        level = pairs
    return float(level[0])
