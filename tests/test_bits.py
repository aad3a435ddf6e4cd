"""Bit codec: every pattern of every format of 16 bits or fewer, against NumPy's
float16, ml_dtypes and the format's definition."""

import math
import zlib
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowprec as lp
from lowprec import testing as lpt
from peers import ml_dtypes, requires_ml_dtypes

ORACLES = {lp.FP16: np.float16, lp.BF16: ml_dtypes.bfloat16,
           lp.FP8_E4M3: ml_dtypes.float8_e4m3fn, lp.FP8_E5M2: ml_dtypes.float8_e5m2,
           lp.FP8_E4M3FNUZ: ml_dtypes.float8_e4m3fnuz, lp.FP8_E5M2FNUZ: ml_dtypes.float8_e5m2fnuz,
           lp.FP6_E2M3: ml_dtypes.float6_e2m3fn, lp.FP6_E3M2: ml_dtypes.float6_e3m2fn,
           lp.FP4_E2M1: ml_dtypes.float4_e2m1fn, lp.E8M0: ml_dtypes.float8_e8m0fnu}
SMALL = [f for f in lp.NAMED_FORMATS.values() if f.bits <= 16]


def oracle_values(fmt):
    """Every pattern's value as the oracle dtype reads it (sub-byte ml_dtypes types
    store one value per byte, in the low bits)."""
    dt = np.dtype(ORACLES[fmt])
    patterns = np.arange(2 ** fmt.bits, dtype=np.uint16 if dt.itemsize == 2 else np.uint8)
    with np.errstate(invalid="ignore"):   # signalling NaN patterns
        return patterns.view(dt).astype(np.float64)


@requires_ml_dtypes
@pytest.mark.oracle
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
                                               "fn": 1 + fmt.signed, "fnuz": 1,
                                               "finite": 0}[fmt.kind]
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


@pytest.mark.parametrize("bits, fmt", [
    (2**70, "fp16"), (2**64, "fp64"), (-2**70, "fp16"), (-1, "fp16"), (2**16, "fp16"),
    ([2**64, 1], "fp64"), ([1, -2**63 - 1], "fp64"), (np.array([3, 2**80], dtype=object), "fp32")])
def test_patterns_out_of_range_raise_value_error(bits, fmt):
    with pytest.raises(ValueError, match=r"bit pattern -?\d+ is not in \[0, 2\*\*\d+\)"):
        lp.decode(bits, fmt)
    with pytest.raises(ValueError, match=r"is not in \[0, 2\*\*\d+\)"):
        lp.fields(bits, fmt)


@pytest.mark.parametrize("bits", [1.0, [1, 2.5], [2**64, 1.5], None, True, [1, None], "1"])
def test_patterns_that_are_not_integers_raise_type_error(bits):
    with pytest.raises(TypeError, match="bit patterns must be integers"):
        lp.decode(bits, "fp64")


def test_python_ints_past_int64_decode():
    # NumPy makes [2**64 - 1, 1] a float64 array; the patterns are still integers.
    got = lp.decode([2**64 - 1, 1, 2**63], "fp64")
    expected = np.array([2**64 - 1, 1, 2**63], dtype=np.uint64).view(np.float64)
    assert np.isnan(got[0]) and got[1:].tolist() == expected[1:].tolist()
    assert np.signbit(got[2]) and lp.fields(2**63 + 5, "fp64") == (1, 0, 5)


def _float16_scaled(bias):
    """Every pattern's value in the IEEE format with FP16's fields and bias ``bias``:
    NumPy's float16 value times 2**(15 - bias), exactly."""
    with np.errstate(invalid="ignore"):   # signalling NaN patterns
        v = np.arange(2**16, dtype=np.uint64).astype(np.uint16).view(np.float16).astype(np.float64)
        return np.ldexp(v, 15 - bias)


def test_decode_tables_stay_bounded_and_right_across_threads():
    # 96 custom formats of 2**16 patterns (512 KiB of table each), decoded from 4
    # threads at once: memory must stay near the 32 kept tables, and every table
    # (including ones rebuilt after being dropped) must match NumPy's float16.
    import tracemalloc
    from concurrent.futures import ThreadPoolExecutor

    biases = list(range(16, 16 + 96))
    expected = {bias: _float16_scaled(bias) for bias in biases[::16]}
    b = np.arange(2**16, dtype=np.uint64)

    def sweep(offset):
        for bias in biases[offset:] + biases[:offset]:
            got = lp.decode(b, lp.Format(5, 10, bias=bias))
            if bias in expected:
                assert np.array_equal(got, expected[bias], equal_nan=True)

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(sweep, [0, 24, 48, 72]))
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 24 * 2**20, f"{grown / 2**20:.0f} MiB kept after 96 formats"


def _without_subnormals(fmt):
    return lp.Format(fmt.exponent_bits, fmt.mantissa_bits, bias=fmt.bias, kind=fmt.kind,
                     subnormals=False)


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("fmt", [f for f in ORACLES if f.subnormals], ids=lambda f: f.name)
def test_round_trip_without_subnormals_every_pattern(fmt):
    # Oracle: the subnormals=True format's value from NumPy / ml_dtypes; patterns with
    # exponent field 0 and a nonzero mantissa are no value of the subnormals=False
    # format and read as zero of their sign (+0 in fnuz formats, which have no -0).
    nosub = _without_subnormals(fmt)
    b = np.arange(2 ** fmt.bits, dtype=np.uint64)
    m = fmt.mantissa_bits
    exponent = (b >> np.uint64(m)) & np.uint64(2 ** fmt.exponent_bits - 1)
    mantissa = b & np.uint64(2 ** m - 1)
    negative = (b >> np.uint64(fmt.bits - 1)) == 1
    flushed = (exponent == 0) & (mantissa != 0)
    expected = oracle_values(fmt)
    zero = -0.0 if fmt.kind != "fnuz" else 0.0
    expected[flushed] = np.where(negative[flushed], zero, 0.0)

    got = lp.decode(b, nosub)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan], expected[~nan])
    assert np.array_equal(np.signbit(got[~nan]), np.signbit(expected[~nan]))

    keep = ~nan & ~flushed
    assert np.array_equal(lp.encode(got[keep], nosub).astype(np.uint64), b[keep])
    sign_bit = np.uint64(1 << (fmt.bits - 1)) if fmt.kind != "fnuz" else np.uint64(0)
    assert np.array_equal(lp.encode(got[flushed], nosub).astype(np.uint64),
                          np.where(negative[flushed], sign_bit, np.uint64(0)))


# -- encode chunk by chunk, every input dtype; signalling NaNs; many dimensions ----------

INPUT_DTYPES = ["float16", "float32", "float64", "int32", "int64", "uint64", "bool",
                "longdouble", "bfloat16"]
# Formats whose every value NumPy or ml_dtypes holds exactly: the cast of a value of the
# format is exact in any version, so its bits are the pattern's oracle.
PATTERN_ORACLES = {lp.FP16: (np.float16, np.uint16), lp.BF16: (ml_dtypes.bfloat16, np.uint16),
                   lp.FP8_E4M3: (ml_dtypes.float8_e4m3fn, np.uint8),
                   lp.FP32: (np.float32, np.uint32), lp.FP64: (np.float64, np.uint64)}


def _sample(dtype, n, rng):
    if dtype == "bool":
        return rng.random(n) < 0.5
    if dtype in ("int32", "int64", "uint64"):
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        x[: n // 2] >>= rng.integers(0, 63, n // 2).astype(dtype)
        return x
    v = rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n)
    v[::31] = np.nan
    v[::37] = -np.inf
    with np.errstate(over="ignore"):
        x = v.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    if dtype == "longdouble":
        x = x * (1 + np.longdouble(2) ** -60)       # between float64 neighbours
    return x


def _exact(v):
    v = np.longdouble(v) if not isinstance(v, (np.integer, np.bool_)) else int(v)
    if isinstance(v, int):
        return v
    return float(v) if not np.isfinite(v) or v == 0 else Fraction(*v.as_integer_ratio())


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("dtype", INPUT_DTYPES)
@pytest.mark.parametrize("fmt", list(PATTERN_ORACLES), ids=lambda f: f.name)
def test_encode_every_input_dtype_chunk_by_chunk(monkeypatch, dtype, fmt):
    # Once wrong: encode now rounds and encodes chunk by chunk into the result (no float64
    # copy, no full-size temporaries). Tiny chunks and spans on 3 threads; the oracle is
    # the Fraction reference's value, cast exactly by NumPy/ml_dtypes and viewed as bits.
    import lowprec.engine.parallel as kernel
    monkeypatch.setattr(kernel, "CHUNK", 64)
    monkeypatch.setattr(kernel, "PARALLEL_MIN", 128)
    rng = np.random.default_rng(zlib.crc32(f"{dtype} {fmt.name}".encode()))
    x = _sample(dtype, 1000, rng)
    mode = "rd"
    values = np.array([lpt.reference_round(_exact(v), fmt, mode) for v in x.reshape(-1)])
    dt, udt = PATTERN_ORACLES[fmt]
    with np.errstate(over="ignore", invalid="ignore"):
        want = values.astype(dt).view(udt)
    nan = np.isnan(values)
    negative_nan = nan & np.signbit(values)
    # NaN: the canonical quiet NaN with the input's sign (DESIGN.md, Bits).
    canonical = {lp.FP16: (0x7E00, 0xFE00), lp.BF16: (0x7FC0, 0xFFC0), lp.FP8_E4M3: (0x7F, 0xFF),
                 lp.FP32: (0x7FC0_0000, 0xFFC0_0000),
                 lp.FP64: (0x7FF8_0000_0000_0000, 0xFFF8_0000_0000_0000)}[fmt]
    want = np.where(negative_nan, udt(canonical[1]), np.where(nan, udt(canonical[0]), want))
    before = lp.threads(3)
    try:
        got = lp.encode(x, fmt, mode)
    finally:
        lp.threads(before)
    assert got.dtype == udt
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, f"{x[bad[:3]]}: got {got[bad[:3]]}, want {want[bad[:3]]}"


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("dtype, udt, patterns", [
    ("float64", np.uint64, [0x7FF0_0000_0000_0001, 0xFFF4_0000_0000_0000]),
    ("float32", np.uint32, [0x7F80_0001, 0xFFA0_0000]),
    ("float16", np.uint16, [0x7C01, 0xFD00]),
    ("bfloat16", np.uint16, [0x7F81, 0xFFA0]),
])
@pytest.mark.parametrize("fmt, pos, neg", [
    (lp.FP16, 0x7E00, 0xFE00), (lp.BF16, 0x7FC0, 0xFFC0), (lp.FP32, 0x7FC00000, 0xFFC00000),
    (lp.FP64, 0x7FF8_0000_0000_0000, 0xFFF8_0000_0000_0000), (lp.FP8_E4M3, 0x7F, 0xFF),
    (lp.FP8_E4M3FNUZ, 0x80, 0x80)], ids=lambda v: getattr(v, "name", None))
def test_encode_of_a_signalling_nan_is_the_canonical_quiet_nan(dtype, udt, patterns, fmt, pos, neg):
    # IEEE 754 6.2: a signalling NaN signals invalid (once per element) and the
    # result is quiet; canonical NaNs from DESIGN.md. Before: invalid was never counted.
    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    x = np.array(patterns + patterns, dtype=udt).view(dt)
    with lp.flags() as f:
        got = lp.encode(x, fmt)
    assert got.tolist() == [pos, neg, pos, neg]
    assert f.invalid == 4


@requires_ml_dtypes
@pytest.mark.oracle
def test_encode_and_decode_of_forty_dimensional_arrays(monkeypatch):
    # NumPy allows 64 dimensions, but np.broadcast_shapes and friends stop at 32.
    import lowprec.engine.parallel as kernel
    monkeypatch.setattr(kernel, "CHUNK", 64)
    monkeypatch.setattr(kernel, "PARALLEL_MIN", 128)
    shape = (1,) * 30 + (2,) * 10
    x = np.random.default_rng(4).standard_normal(shape)
    before = lp.threads(3)
    try:
        for fmt, (dt, udt) in PATTERN_ORACLES.items():
            want = np.array([lpt.reference_round(float(v), fmt) for v in x.reshape(-1)])
            b = lp.encode(x, fmt)
            assert b.shape == shape
            assert np.array_equal(b.reshape(-1), want.astype(dt).view(udt))
            assert np.array_equal(lp.decode(b, fmt), want.reshape(shape))
            sign, exponent, mantissa = lp.fields(b, fmt)
            assert sign.shape == exponent.shape == mantissa.shape == shape
    finally:
        lp.threads(before)
