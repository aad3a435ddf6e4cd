"""lowprec.p3109's minimum and maximum family against §4.11 written out
(tests/oracles/p3109.py), on every pair of codes."""

from __future__ import annotations

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


@pytest.mark.parametrize("params", formats_up_to(4) + [(6, 3, True, True),
                                                        (6, 2, False, True)])
def test_every_pair(params):
    fmt = build(params)
    table = oracle.value_table(*params)
    n = len(table)
    x, y = (a.reshape(-1) for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    for name, omega in oracle.EXTREMA.items():
        want = oracle.project_many(params, [omega(table[a], table[b]) for a, b in zip(x, y)],
                                   "NearestTiesToEven", ["SatNone"])["SatNone"]
        assert_bits(getattr(p3109, name)(x, y, fmt, fmt, fmt), want, params, name)


def test_into_a_narrower_format_the_pick_is_projected():
    # Maximum<Binary8p4se, Binary8p4se, Binary8p3se>: 1.125 rounds to 1.0 or 1.25.
    wide, narrow = build((8, 4, True, True)), build((8, 3, True, True))
    x = int(p3109.project(1.125, wide))
    y = int(p3109.project(-2.0, wide))
    got = [int(p3109.maximum(x, y, wide, wide, narrow, r)) for r in
           ("NearestTiesToEven", "TowardPositive")]
    assert got == [int(p3109.project(1.0, narrow)), int(p3109.project(1.25, narrow))]


@pytest.mark.parametrize("params", formats_up_to(4))
def test_clamp_of_every_triple(params):
    fmt = build(params)
    table = oracle.value_table(*params)
    n = len(table)
    x, lo, hi = (a.reshape(-1) for a in np.meshgrid(*[np.arange(n)] * 3, indexing="ij"))
    exact = [oracle.omega_clamp(table[a], table[b], table[c]) for a, b, c in zip(x, lo, hi)]
    want = oracle.project_many(params, exact, "NearestTiesToEven", ["SatNone"])["SatNone"]
    assert_bits(p3109.clamp(x, lo, hi, fmt, fmt, fmt, fmt), want, params)
