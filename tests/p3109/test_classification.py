"""lowprec.p3109's comparisons, predicates, classes and neighbours against §4.12, §4.13
and §4.16 written out (tests/oracles/p3109.py), on every code (pair)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from helpers import assert_bits
from lowprec import p3109
from oracles import p3109 as oracle


def formats_up_to(k_max):
    return [(k, p, s, e) for k in range(3, k_max + 1) for s in (True, False)
            for p in range(1, k + (0 if s else 1)) for e in (True, False)]


def build(params):
    k, p, s, e = params
    return p3109.format(k, p, signed=s, domain="extended" if e else "finite")


PAIRS = formats_up_to(5) + [(8, 3, True, True), (8, 1, False, False)]


@pytest.mark.parametrize("params", PAIRS)
def test_comparisons_and_total_order_of_every_pair(params):
    fmt = build(params)
    table = oracle.value_table(*params)
    n = len(table)
    x, y = (a.reshape(-1) for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    for name in oracle.COMPARE_RULES:
        want = np.array([oracle.compare(name, table[a], table[b]) for a, b in zip(x, y)])
        got = getattr(p3109, f"compare_{name}")(x, y, fmt, fmt)
        assert np.array_equal(got, want), (params, name)
    want = np.array([oracle.total_order(table[a], table[b]) for a, b in zip(x, y)])
    assert np.array_equal(p3109.total_order(x, y, fmt, fmt), want), params


@pytest.mark.parametrize("params", formats_up_to(8))
def test_predicates_classes_and_neighbours_of_every_code(params):
    fmt = build(params)
    table = oracle.value_table(*params)
    codes = np.arange(len(table))
    finite = [isinstance(v, Fraction) for v in table]
    min_normal = Fraction(fmt.smallest_normal)
    want = {
        "is_zero": [f and v == 0 for f, v in zip(finite, table)],
        "is_one": [f and v == 1 for f, v in zip(finite, table)],
        "is_nan": [isinstance(v, str) for v in table],
        "is_infinite": [isinstance(v, float) for v in table],
        "is_finite": finite,
        "is_sign_minus": [not isinstance(v, str) and v < 0 for v in table],
        "is_normal": [f and v != 0 and abs(v) >= min_normal for f, v in zip(finite, table)],
        "is_subnormal": [f and v != 0 and abs(v) < min_normal for f, v in zip(finite, table)],
    }
    for name, expected in want.items():
        assert np.array_equal(getattr(p3109, name)(codes, fmt), expected), (params, name)
    # Table 2, its conditions written out.
    classes = []
    for i in range(len(table)):
        minus = want["is_sign_minus"][i]
        if want["is_nan"][i]:
            classes.append("ClsNaN")
        elif want["is_zero"][i]:
            classes.append("ClsZero")
        else:
            kind = ("Infinity" if want["is_infinite"][i] else
                    "Normal" if want["is_normal"][i] else "Subnormal")
            classes.append(("ClsNegative" if minus else "ClsPositive") + kind)
    assert p3109.classify(codes, fmt).tolist() == classes
    for up, fn in ((True, p3109.next_greater_than), (False, p3109.next_less_than)):
        expected = [oracle.next_code(*params, int(c), up) for c in codes]
        assert_bits(fn(codes, fmt), expected, params, up)
