"""Bit codec: every pattern of every format of 16 bits or fewer, against NumPy's
float16, ml_dtypes and the format's definition."""

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowprec as lp
from lowprec import testing as lpt

ORACLES = {lp.FP16: np.float16, lp.BF16: ml_dtypes.bfloat16,
           lp.FP8_E4M3: ml_dtypes.float8_e4m3fn, lp.FP8_E5M2: ml_dtypes.float8_e5m2,
           lp.FP8_E4M3FNUZ: ml_dtypes.float8_e4m3fnuz, lp.FP8_E5M2FNUZ: ml_dtypes.float8_e5m2fnuz,
           lp.FP6_E2M3: ml_dtypes.float6_e2m3fn, lp.FP6_E3M2: ml_dtypes.float6_e3m2fn,
           lp.FP4_E2M1: ml_dtypes.float4_e2m1fn}
SMALL = [f for f in lp.NAMED_FORMATS.values() if f.bits <= 16]


def oracle_values(fmt):
    """Every pattern's value as the oracle dtype reads it (sub-byte ml_dtypes types
    store one value per byte, in the low bits)."""
    dt = np.dtype(ORACLES[fmt])
    patterns = np.arange(2 ** fmt.bits, dtype=np.uint16 if dt.itemsize == 2 else np.uint8)
    with np.errstate(invalid="ignore"):   # signalling NaN patterns
        return patterns.view(dt).astype(np.float64)


@pytest.mark.parametrize("fmt", list(ORACLES), ids=lambda f: f.name)
def test_decode_every_pattern_matches_oracle(fmt):
    got = lp.decode(np.arange(2 ** fmt.bits, dtype=np.uint64), fmt)
    expected = oracle_values(fmt)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan], expected[~nan])
    assert np.array_equal(np.signbit(got[~nan]), np.signbit(expected[~nan]))


@pytest.mark.parametrize("fmt", SMALL, ids=lambda f: f.name)
def test_decode_gives_exactly_the_defined_values(fmt):
    # Independent enumeration from the format's parameters (lowprec.testing).
    got = lp.decode(np.arange(2 ** fmt.bits, dtype=np.uint64), fmt)
    finite = got[np.isfinite(got)]
    assert sorted(set(np.abs(finite).tolist())) == lpt.representable_values(fmt)
    assert np.count_nonzero(np.isnan(got)) == {"ieee": 2 * (2 ** fmt.mantissa_bits - 1),
                                               "fn": 2, "fnuz": 1, "finite": 0}[fmt.kind]
    assert np.count_nonzero(np.isinf(got)) == (2 if fmt.has_inf else 0)


@pytest.mark.parametrize("fmt", SMALL, ids=lambda f: f.name)
def test_encode_decode_round_trip_every_pattern(fmt):
    b = np.arange(2 ** fmt.bits, dtype=np.uint64)
    v = lp.decode(b, fmt)
    keep = ~np.isnan(v)
    back = lp.encode(v[keep], fmt)
    assert back.dtype == lp.bits.uint_dtype(fmt)
    assert np.array_equal(back.astype(np.uint64), b[keep])


def test_fp32_and_tf32_decode_against_numpy_views():
    rng = np.random.default_rng(0)
    b = rng.integers(0, 2**32, 100_000, dtype=np.uint64).astype(np.uint32)
    b[:6] = [0, 0x80000000, 0x7F800000, 0xFF800000, 0x00000001, 0x7F7FFFFF]
    with np.errstate(invalid="ignore"):   # signalling NaN patterns
        expected = b.view(np.float32).astype(np.float64)
    got = lp.decode(b, "fp32")
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got), nan) and np.array_equal(got[~nan], expected[~nan])
    keep = ~nan
    assert np.array_equal(lp.encode(got[keep], "fp32"), b[keep])
    t = b >> 13   # TF32: the top 19 bits of an FP32 pattern
    with np.errstate(invalid="ignore"):
        expected = (t << 13).view(np.float32).astype(np.float64)
    got = lp.decode(t, "tf32")
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got), nan) and np.array_equal(got[~nan], expected[~nan])
    assert np.array_equal(lp.encode(got[~nan], "tf32"), t[~nan])


@settings(max_examples=300)
@given(st.floats(allow_nan=False))
def test_fp64_round_trip_against_numpy_view(x):
    b = lp.encode(x, "fp64")
    assert int(b) == int(np.float64(x).view(np.uint64))
    assert lp.decode(b, "fp64") == x


@pytest.mark.parametrize("fmt, pos, neg", [
    ("fp16", 0x7E00, 0xFE00), ("bf16", 0x7FC0, 0xFFC0), ("fp32", 0x7FC00000, 0xFFC00000),
    ("e4m3", 0x7F, 0xFF), ("e5m2", 0x7E, 0xFE), ("e4m3fnuz", 0x80, 0x80),
    ("e5m2fnuz", 0x80, 0x80), ("tf32", 0x3FE00, 0x7FE00)])
def test_canonical_nans(fmt, pos, neg):
    assert lp.encode([math.nan, -math.nan], fmt).tolist() == [pos, neg]


def test_nan_for_format_without_nan_raises():
    with pytest.raises(ValueError, match="has no NaN"):
        lp.encode(math.nan, "fp4")


def test_encode_rounds_first_and_records_flags():
    with lp.flags() as f:
        b = lp.encode([0.1, 1e6], "fp16", mode="rz")
    assert b.tolist() == [int(np.float16(0.0999755859375).view(np.uint16)), 0x7BFF]
    assert f.inexact == 2 and f.overflow == 1
    assert lp.encode(1000.0, "e4m3", saturate=True) == 0x7E


def test_fields_split_patterns():
    s, e, m = lp.fields(np.array([0x3DCD, 0xC000], np.uint16), "bf16")
    assert s.tolist() == [0, 1] and e.tolist() == [123, 128] and m.tolist() == [77, 0]
    assert lp.fields(0xB8, "e4m3") == (1, 7, 0)


def test_bad_patterns_raise():
    with pytest.raises(ValueError, match=r"\[0, 2\*\*8\)"):
        lp.decode(256, "e4m3")
    with pytest.raises(ValueError, match=r"\[0, 2\*\*16\)"):
        lp.decode([-1], "fp16")
    with pytest.raises(TypeError, match="must be integers"):
        lp.decode([1.5], "fp16")
    with pytest.raises(ValueError, match=r"2\*\*4"):
        lp.fields(16, "fp4")
