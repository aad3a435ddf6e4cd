"""lowprec.p3109 against two other implementations: gfloat (v3 report) and vectors
from awf/p3109-cpp (tests/data/p3109/, MIT).

Tested with gfloat 0.5.2 and p3109-cpp at commit 9042910. Each comparison is
restricted to the inputs on which the peer follows v4.0, and a comment says what
differs; the Fraction oracle (tests/oracles/p3109.py) decides those inputs instead.

Differences found, not asserted:

* gfloat 0.5 follows the v3 report, with one boolean ``sat``. For signed extended
  formats ``sat=False`` is v4.0's SatNone and ``sat=True`` its SatFinite, on every
  input. For signed finite formats ``sat=False`` gives NaN past the range, where
  v4.0's SatNone gives the extreme finite value. Unsigned formats get negative
  values back from ``round_float`` (``-1e301`` stays ``-1e301``); only values in
  [0, max] are compared there.
* p3109-cpp reads a finite format's top codes (0x7F/0xFF signed, 0xFE unsigned) as
  ±inf in its operations (its ``isinf`` ignores the domain), so operands there give
  other results; and its SatFinite keeps an infinite result infinite, where §4.7.5
  sends it to the extreme finite value. Such rows are checked against the oracle.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp
from helpers import DATA, assert_bits, assert_values
from lowprec import p3109
from oracles import p3109 as oracle
from peers import optional, requires_gfloat

gfloat = optional("gfloat")


def build(k, p, s, e):
    return p3109.format(k, p, signed=s, domain="extended" if e else "finite")


def formats_of(k):
    return [(k, p, s, e) for s in (True, False) for p in range(1, k + (0 if s else 1))
            for e in (True, False)]


def probes(params):
    """Every datum, the quarter points between neighbours and past the top, ±inf."""
    finite = sorted({v for v in oracle.value_table(*params) if isinstance(v, Fraction)
                     and v >= 0})
    gap = finite[-1] - finite[-2]
    finite += [finite[-1] + gap, finite[-1] + 2 * gap]
    out = set(finite)
    for lo, hi in zip(finite, finite[1:]):
        out.update(lo + (hi - lo) * Fraction(i, 4) for i in (1, 2, 3))
    out |= {-v for v in out}
    return [float(v) for v in sorted(out)] + [math.inf, -math.inf]


@requires_gfloat
@pytest.mark.oracle
@pytest.mark.parametrize("params", formats_of(8) + formats_of(5))
def test_values_agree_with_gfloat(params):
    # Decoding did not change from v3 to v4.0: every code of every format agrees.
    from gfloat.formats import format_info_p3109
    from gfloat.types import Domain, Signedness
    k, p, s, e = params
    fi = format_info_p3109(k, p, Signedness.Signed if s else Signedness.Unsigned,
                           Domain.Extended if e else Domain.Finite)
    want = np.array([gfloat.decode_float(fi, c).fval for c in range(2 ** k)])
    assert_values(lp.decode(np.arange(2 ** k), build(*params)), want + 0.0, params)


@requires_gfloat
@pytest.mark.oracle
@pytest.mark.parametrize("params", formats_of(8))
def test_rounding_agrees_with_gfloat_where_v3_and_v4_agree(params):
    from gfloat.formats import format_info_p3109
    from gfloat.types import Domain, Signedness
    k, p, s, e = params
    fi = format_info_p3109(k, p, Signedness.Signed if s else Signedness.Unsigned,
                           Domain.Extended if e else Domain.Finite)
    fmt = build(*params)
    values = probes(params)
    if not s:                                   # see the module docstring
        values = [v for v in values if 0 <= v <= fmt.max]
    sats = [("SatFinite", True)] + ([("SatNone", False)] if s and e else [])
    modes = {"NearestTiesToEven": gfloat.RoundMode.TiesToEven,
             "NearestTiesToAway": gfloat.RoundMode.TiesToAway,
             "TowardZero": gfloat.RoundMode.TowardZero,
             "TowardPositive": gfloat.RoundMode.TowardPositive,
             "TowardNegative": gfloat.RoundMode.TowardNegative}
    for name, mode in modes.items():
        for sat, flag in sats:
            want = np.array([gfloat.round_float(fi, v, mode, sat=flag) for v in values])
            got = lp.decode(p3109.project(values, fmt, name, sat), fmt)
            assert_values(got, want + 0.0, params, name, sat)


def _codes(text):
    return None if text == "-" else np.array([int(text[i:i + 2], 16)
                                              for i in range(0, len(text), 2)])


VECTORS = [line.split() for line in
           (DATA / "p3109" / "vectors.txt").read_text().splitlines() if line]
OPS = {"Add": (p3109.add, oracle.omega_add), "Multiply": (p3109.multiply,
                                                          oracle.omega_multiply),
       "Divide": (p3109.divide, oracle.omega_divide), "FMA": (p3109.fma, oracle.omega_fma),
       "Sqrt": (p3109.sqrt, oracle.omega_sqrt)}


@pytest.mark.oracle
@pytest.mark.parametrize("row", VECTORS, ids=lambda r: "-".join(r[:4]))
def test_operations_agree_with_p3109_cpp(row):
    op, name, rounding, sat = row[:4]
    sat = {"OvfInf": "SatNone"}.get(sat, sat)    # p3109-cpp's name for SatNone
    args = [c for c in map(_codes, row[4:7]) if c is not None]
    want = _codes(row[7])
    fmt = lp.format(name)
    params = (fmt.bits, fmt.p, fmt.signed, fmt.kind == "extended")
    fn, omega = OPS[op]
    got = fn(*args, *[fmt] * (len(args) + 1), rounding, sat)
    c = p3109.special_codes(fmt)
    peer_infs = ({2 ** (fmt.bits - 1) - 1, 2 ** fmt.bits - 1} if fmt.signed
                 else {2 ** fmt.bits - 2})
    differs = np.zeros(want.shape, bool)
    if not params[3]:                           # the peer's infinities in finite formats
        for a in args:
            differs |= np.isin(a, list(peer_infs))
    elif sat == "SatFinite":                    # the peer keeps inf under SatFinite
        differs |= np.isin(want, [c["inf"], c["-inf"]])
    assert_bits(got[~differs], want[~differs], row[:4])
    assert differs.mean() < 0.2, row[:4]
    table = oracle.value_table(*params)
    for i in np.flatnonzero(differs):
        exact = omega(*[table[int(a[i])] for a in args])
        assert int(got[i]) == oracle.project(*params, exact, rounding, sat), (row[:4], i)
