"""Formats: identities, and constants against numpy.finfo and ml_dtypes.finfo."""

import dataclasses

import ml_dtypes
import numpy as np
import pytest

import lowprec as lp

ORACLE_DTYPES = {
    "FP64": np.float64, "FP32": np.float32, "FP16": np.float16,
    "BF16": ml_dtypes.bfloat16, "FP8_E4M3": ml_dtypes.float8_e4m3fn,
    "FP8_E5M2": ml_dtypes.float8_e5m2, "FP8_E4M3FNUZ": ml_dtypes.float8_e4m3fnuz,
    "FP8_E5M2FNUZ": ml_dtypes.float8_e5m2fnuz, "FP6_E2M3": ml_dtypes.float6_e2m3fn,
    "FP6_E3M2": ml_dtypes.float6_e3m2fn, "FP4_E2M1": ml_dtypes.float4_e2m1fn,
}
ALL = list(lp.NAMED_FORMATS.values())


def test_twelve_named_formats():
    assert len(lp.NAMED_FORMATS) == 12
    assert set(ORACLE_DTYPES) | {"TF32"} == set(lp.NAMED_FORMATS)


@pytest.mark.parametrize("name", sorted(ORACLE_DTYPES))
def test_constants_match_finfo_of_oracle(name):
    fmt = lp.NAMED_FORMATS[name]
    dt = ORACLE_DTYPES[name]
    numpy_own = dt in (np.float16, np.float32, np.float64)
    fi = np.finfo(dt) if numpy_own else ml_dtypes.finfo(dt)
    assert fmt.bits == fi.bits
    assert fmt.nmant == fi.nmant and fmt.nexp == fi.nexp
    assert fmt.eps == float(fi.eps) and fmt.epsneg == float(fi.epsneg)
    assert fmt.max == float(fi.max) and fmt.min == float(fi.min)
    assert fmt.tiny == float(fi.tiny) == fmt.smallest_normal
    assert fmt.smallest_subnormal == float(fi.smallest_subnormal)
    assert fmt.maxexp == fi.maxexp and fmt.minexp == fi.minexp
    assert fmt.machep == fi.machep and fmt.negep == fi.negep
    if numpy_own:  # numpy's own meaning of precision/resolution (10**-precision)
        assert fmt.precision == fi.precision
        assert fmt.resolution == pytest.approx(float(fi.resolution), rel=fmt.eps)


def test_tf32_from_its_definition():
    # TF32: FP32's 8-bit exponent, FP16's 10-bit mantissa (NVIDIA A100 whitepaper).
    assert (lp.TF32.exponent_bits, lp.TF32.mantissa_bits, lp.TF32.bits) == (8, 10, 19)
    assert lp.TF32.max == float(np.float32(2**128 - 2**117))
    assert lp.TF32.smallest_subnormal == 2.0 ** -136


@pytest.mark.parametrize("fmt", ALL, ids=lambda f: f.name)
def test_identities(fmt):
    assert fmt.nmant + fmt.nexp + 1 == fmt.bits
    assert fmt.eps == 2.0 ** fmt.machep == 2.0 ** (1 - fmt.p)
    assert fmt.unit_roundoff == fmt.eps / 2
    assert fmt.smallest_subnormal * 2.0 ** fmt.mantissa_bits == fmt.smallest_normal
    assert fmt.emin == 1 - fmt.bias and fmt.minexp == fmt.emin
    assert 2 ** fmt.emax <= int(fmt.max) < 2 ** fmt.maxexp
    assert fmt.has_inf == (fmt.kind == "ieee")
    assert fmt.has_nan == (fmt.kind != "finite")
    assert fmt.has_negative_zero == (fmt.kind != "fnuz")


def test_frozen_and_hashable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        lp.FP16.mantissa_bits = 3
    table = {lp.FP16: "half", lp.BF16: "brain"}
    assert table[lp.Format(5, 10)] == "half"
    assert lp.Format(5, 10) == lp.FP16 and hash(lp.Format(5, 10)) == hash(lp.FP16)
    assert lp.FP8_E4M3 != lp.FP8_E4M3FNUZ


@pytest.mark.parametrize("spec, expected", [
    ("fp16", "FP16"), ("half", "FP16"), ("float16", "FP16"), ("binary16", "FP16"),
    ("bf16", "BF16"), ("bfloat16", "BF16"), ("fp32", "FP32"), ("float32", "FP32"),
    ("single", "FP32"), ("tf32", "TF32"), ("e4m3", "FP8_E4M3"),
    ("float8_e4m3fn", "FP8_E4M3"), ("e5m2", "FP8_E5M2"), ("float8_e5m2", "FP8_E5M2"),
    ("float8_e4m3fnuz", "FP8_E4M3FNUZ"), ("float8_e5m2fnuz", "FP8_E5M2FNUZ"),
    ("float6_e2m3fn", "FP6_E2M3"), ("float6_e3m2fn", "FP6_E3M2"),
    ("float4_e2m1fn", "FP4_E2M1"), ("FP16", "FP16"), ("fp8_e4m3", "FP8_E4M3"),
    (np.float16, "FP16"), (np.dtype("float32"), "FP32"), (np.float64, "FP64"),
    (ml_dtypes.bfloat16, "BF16"), (np.dtype(ml_dtypes.float8_e4m3fn), "FP8_E4M3"),
    (ml_dtypes.float8_e5m2fnuz, "FP8_E5M2FNUZ"), (ml_dtypes.float4_e2m1fn, "FP4_E2M1"),
])
def test_lookup(spec, expected):
    assert lp.format(spec) is lp.NAMED_FORMATS[expected]
    assert lp.finfo(spec) is lp.NAMED_FORMATS[expected]


def test_lookup_errors_name_valid_choices():
    with pytest.raises(ValueError, match="unknown format 'fp7'.*BF16.*FP16"):
        lp.format("fp7")
    with pytest.raises(ValueError, match="not a floating-point format"):
        lp.format(np.int32)
    with pytest.raises(TypeError, match="cannot interpret"):
        lp.format(3.5)


def test_custom_matches_named_ieee_formats():
    assert lp.Format.custom(precision=11, emax=15) == lp.FP16
    assert lp.Format.custom(precision=8, emax=127) == lp.BF16
    assert lp.Format.custom(precision=24, emax=127) == lp.FP32
    assert lp.Format.custom(precision=3, emax=15) == lp.FP8_E5M2
    with pytest.raises(ValueError, match="emax must be"):
        lp.Format.custom(precision=4, emax=12)
    with pytest.raises(ValueError, match="precision"):
        lp.Format.custom(precision=0, emax=15)


@pytest.mark.parametrize("kwargs, match", [
    (dict(exponent_bits=0, mantissa_bits=3), "exponent_bits must be >= 1"),
    (dict(exponent_bits=4, mantissa_bits=-1), "mantissa_bits >= 0"),
    (dict(exponent_bits=1, mantissa_bits=3), "needs exponent_bits >= 2"),
    (dict(exponent_bits=4, mantissa_bits=0, kind="fn"), "needs mantissa_bits >= 1"),
    (dict(exponent_bits=4, mantissa_bits=3, kind="ibm"), "kind must be one of"),
    (dict(exponent_bits=5, mantissa_bits=60), "exceeds the 51 bits"),
    (dict(exponent_bits=12, mantissa_bits=10), "does not fit in float64"),
    (dict(exponent_bits=4, mantissa_bits=3, bias=-1020), "emin <= 0"),
    (dict(exponent_bits=10, mantissa_bits=5, bias=1018), "does not fit in float64"),
    (dict(exponent_bits=2, mantissa_bits=1, bias=0, kind="finite"), "emin <= 0"),
])
def test_impossible_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        lp.Format(**kwargs)


def test_non_integer_parameters():
    with pytest.raises(TypeError, match="exponent_bits must be an int"):
        lp.Format(4.0, 3)


def test_str_prints_parameter_table():
    text = str(lp.FP8_E4M3)
    for needle in ("FP8_E4M3", "exponent bits", "bias", "7", "448.0", "0.001953125", "fn"):
        assert needle in text
    assert repr(lp.BF16) == "lp.BF16"
    assert "Format(exponent_bits=3" in repr(lp.Format(3, 4))
