"""lowprec.p3109.format and the P3109 encoding in lp.encode / lp.decode, against the
report's definition written out in tests/oracles/p3109.py."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp
from helpers import assert_bits, assert_values
from lowprec import p3109
from lowprec.teaching.cli import format_table
from oracles import p3109 as oracle


def formats_up_to(k_max):
    """(K, P, signed, extended) of every P3109 format with K <= k_max."""
    return [(k, p, s, e) for k in range(3, k_max + 1) for s in (True, False)
            for p in range(1, k + (0 if s else 1)) for e in (True, False)]


def as_float(v):
    if v == oracle.NAN:
        return math.nan
    assert v in (math.inf, -math.inf) or Fraction(float(v)) == v   # a float64 value
    return float(v)


def build(k, p, s, e):
    return p3109.format(k, p, signed=s, domain="extended" if e else "finite")


@pytest.mark.parametrize("k", range(3, 11))
def test_every_code_decodes_as_the_report_defines(k):
    for params in formats_up_to(k)[len(formats_up_to(k - 1)):]:
        fmt = build(*params)
        want = np.array([as_float(v) for v in oracle.value_table(*params)])
        codes = np.arange(2 ** k)
        assert_values(lp.decode(codes, fmt), want, params)
        finite = ~np.isnan(want)
        assert_bits(lp.encode(want[finite], fmt), codes[finite], params)
        assert int(lp.encode(math.nan, fmt)) == oracle.encode(k, params[1], params[2],
                                                                oracle.NAN)
        # Every datum rounds to itself (no -0: a negative zero input gives +0).
        assert_values(lp.round(want, fmt), np.where(want == 0, 0.0, want), params)


@pytest.mark.parametrize("params", formats_up_to(10))
def test_name_and_constants(params):
    k, p, s, e = params
    fmt = build(*params)
    name = f"binary{k}p{p}{'s' if s else 'u'}{'e' if e else 'f'}"
    assert fmt.name == name and lp.format(name) == fmt and lp.format(name.title()) == fmt
    assert p3109.parameters(fmt) == (k, p, s, "extended" if e else "finite")
    m_lo, m_hi = oracle.finite_range(*params)
    assert Fraction(fmt.max) == m_hi and Fraction(fmt.min) == m_lo
    positive = [v for v in oracle.value_table(*params) if isinstance(v, Fraction) and v > 0]
    assert Fraction(fmt.smallest_subnormal) == min(positive)
    assert fmt.has_inf == e and fmt.has_nan and not fmt.has_negative_zero
    assert fmt.bias == oracle.bias(k, p, s) and fmt.bits == k


def test_known_formats_and_report_examples():
    # §3.1 NOTE 2: 2.0 in Binary8p4se is 0x48, its Inf 0x7F.
    assert int(lp.encode(2.0, "binary8p4se")) == 0x48
    assert int(lp.encode(math.inf, "binary8p4se")) == 0x7F
    assert lp.format("binary8p4sf") == lp.FP8_E4M3FNUZ      # same parameters, bias 8
    assert lp.format("binary8p3sf") == lp.FP8_E5M2FNUZ
    assert p3109.is_p3109(lp.FP8_E4M3FNUZ) and not p3109.is_p3109(lp.FP8_E4M3)
    assert not p3109.is_p3109(lp.E8M0)                     # bias 127, no zero


def test_tensor_explain_and_finfo_work():
    fmt = lp.format("binary8p3se")
    t = lp.tensor([1.3, -70000.0, 1e-9], fmt)
    assert_values(np.asarray(t), [1.25, -math.inf, 0.0])
    assert "0x41" in str(lp.explain(1.3, fmt))
    assert lp.finfo("binary8p3se").max == 49152.0
    assert "0x80 only" in format_table("table", [fmt], wide=True)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(k=2, p=1), ValueError, "at least 3"),
    (dict(k=8, p=8), ValueError, "0 < P < K"),
    (dict(k=8, p=9, signed=False), ValueError, "0 < P <= K"),
    (dict(k=8, p=0), ValueError, "at least 1"),
    (dict(k=8.0, p=3), TypeError, "k must be an int"),
    (dict(k=8, p=3, signed=1), TypeError, "signed must be a bool"),
    (dict(k=8, p=3, domain="Extended"), ValueError, "domain must be one of"),
    (dict(k=16, p=1), ValueError, "float64 cannot hold"),
    (dict(k=11, p=1, signed=False), ValueError, "float64 cannot hold"),
])
def test_bad_parameters(kwargs, error, match):
    with pytest.raises(error, match=match):
        p3109.format(**kwargs)


def test_name_lookup_refuses_impossible_parameters():
    with pytest.raises(ValueError, match="0 < P < K"):
        lp.format("binary8p8se")
