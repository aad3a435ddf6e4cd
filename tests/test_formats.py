"""Formats: identities, and constants against numpy.finfo and ml_dtypes.finfo."""

import dataclasses
from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp
from helpers import parse_html
from oracles.decode import decode_layout
from peers import ml_dtypes, np_dtype, requires_ml_dtypes

ORACLE_DTYPES = {
    "FP64": np.float64, "FP32": np.float32, "FP16": np.float16,
    "BF16": ml_dtypes.bfloat16, "FP8_E4M3": ml_dtypes.float8_e4m3fn,
    "FP8_E5M2": ml_dtypes.float8_e5m2, "FP8_E4M3FNUZ": ml_dtypes.float8_e4m3fnuz,
    "FP8_E5M2FNUZ": ml_dtypes.float8_e5m2fnuz, "FP6_E2M3": ml_dtypes.float6_e2m3fn,
    "FP6_E3M2": ml_dtypes.float6_e3m2fn, "FP4_E2M1": ml_dtypes.float4_e2m1fn,
    "E8M0": ml_dtypes.float8_e8m0fnu,
}
ALL = list(lp.NAMED_FORMATS.values())


@requires_ml_dtypes
@pytest.mark.oracle
def test_fourteen_named_formats():
    assert len(lp.NAMED_FORMATS) == 14
    assert set(ORACLE_DTYPES) | {"TF32", "UE4M3"} == set(lp.NAMED_FORMATS)


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(ORACLE_DTYPES))
def test_constants_match_finfo_of_oracle(name):
    assert_finfo_matches(lp.NAMED_FORMATS[name], ORACLE_DTYPES[name])


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(lp.NAMED_FORMATS))
def test_numpy_dtype_name_is_the_oracle_dtypes_name(name):
    # The dtype NumPy or ml_dtypes has for the format, by its own name; TF32 has none.
    want = np.dtype(ORACLE_DTYPES[name]).name if name in ORACLE_DTYPES else None
    assert lp.NAMED_FORMATS[name].numpy_dtype_name == want
    assert lp.Format.custom(precision=5, emax=31).numpy_dtype_name is None


def assert_finfo_matches(fmt, dt):
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
    assert fmt.nmant + fmt.nexp + fmt.signed == fmt.bits
    assert fmt.eps == 2.0 ** fmt.machep == 2.0 ** (1 - fmt.p)
    assert fmt.unit_roundoff == fmt.eps / 2
    if fmt.zero:
        assert fmt.smallest_subnormal * 2.0 ** fmt.mantissa_bits == fmt.smallest_normal
        assert fmt.emin == 1 - fmt.bias
    else:   # E8M0: code 0 is 2**-bias, no zero, no subnormal
        assert fmt.smallest_subnormal == fmt.smallest_normal == fmt.min == 2.0 ** -fmt.bias
    assert fmt.minexp == fmt.emin
    assert 2 ** fmt.emax <= int(fmt.max) < 2 ** fmt.maxexp
    assert fmt.has_inf == (fmt.kind == "ieee")
    assert fmt.has_nan == (fmt.kind != "finite")
    assert fmt.has_negative_zero == (fmt.kind != "fnuz" and fmt.signed)
    assert (fmt.min == -fmt.max) == fmt.signed


def test_frozen_and_hashable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        lp.FP16.mantissa_bits = 3
    table = {lp.FP16: "half", lp.BF16: "brain"}
    assert table[lp.Format(5, 10)] == "half"
    assert lp.Format(5, 10) == lp.FP16 and hash(lp.Format(5, 10)) == hash(lp.FP16)
    assert lp.FP8_E4M3 != lp.FP8_E4M3FNUZ


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("spec, expected", [
    ("fp16", "FP16"), ("half", "FP16"), ("float16", "FP16"), ("binary16", "FP16"),
    ("bf16", "BF16"), ("bfloat16", "BF16"), ("fp32", "FP32"), ("float32", "FP32"),
    ("single", "FP32"), ("tf32", "TF32"), ("e4m3", "FP8_E4M3"),
    ("float8_e4m3fn", "FP8_E4M3"), ("e5m2", "FP8_E5M2"), ("float8_e5m2", "FP8_E5M2"),
    ("float8_e4m3fnuz", "FP8_E4M3FNUZ"), ("float8_e5m2fnuz", "FP8_E5M2FNUZ"),
    ("float6_e2m3fn", "FP6_E2M3"), ("float6_e3m2fn", "FP6_E3M2"),
    ("float4_e2m1fn", "FP4_E2M1"), ("FP16", "FP16"), ("fp8_e4m3", "FP8_E4M3"),
    (np.float16, "FP16"), (np.dtype("float32"), "FP32"), (np.float64, "FP64"),
    (ml_dtypes.bfloat16, "BF16"), (np_dtype(ml_dtypes.float8_e4m3fn), "FP8_E4M3"),
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
    (dict(exponent_bits=0, mantissa_bits=3), r"exponent_bits must be in \[1, 11\]"),
    (dict(exponent_bits=4, mantissa_bits=-1), r"mantissa_bits must be in \[0, 52\]"),
    (dict(exponent_bits=1, mantissa_bits=3), "needs exponent_bits >= 2"),
    (dict(exponent_bits=4, mantissa_bits=0, kind="fn"), "needs mantissa_bits >= 1"),
    (dict(exponent_bits=4, mantissa_bits=3, kind="ibm"), "kind must be one of"),
    (dict(exponent_bits=5, mantissa_bits=60), "mantissa_bits must be in"),
    (dict(exponent_bits=5, mantissa_bits=51), "mantissa_bits 51 .* exceeds the 51 bits"),
    (dict(exponent_bits=12, mantissa_bits=10), "exponent_bits must be in"),
    (dict(exponent_bits=4, mantissa_bits=3, bias=-1020), "emin = 1 - bias <= 0"),
    (dict(exponent_bits=10, mantissa_bits=5, bias=1018), "does not fit in float64"),
    (dict(exponent_bits=2, mantissa_bits=1, bias=0, kind="finite"), "emin = 1 - bias <= 0"),
])
def test_impossible_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        lp.Format(**kwargs)


def exact_range(e, m, bias, subnormals, kind):
    """(largest value, smallest positive value) as Fractions, from DESIGN.md's table."""
    emax = 2**e - (2 if kind == "ieee" or (kind == "extended" and m == 0) else 1) - bias
    top = 2 - Fraction(2 if kind == "fn" or (kind == "extended" and m) else 1, 2**m)
    return top * Fraction(2) ** emax, Fraction(2) ** (1 - bias - (m if subnormals else 0))


F64_MAX = Fraction(float(np.finfo(np.float64).max))
F64_TINIEST = Fraction(float(np.finfo(np.float64).smallest_subnormal))


@pytest.mark.parametrize("kind", sorted(lp.formats.KINDS))
@pytest.mark.parametrize("subnormals", [True, False])
def test_every_accepted_format_fits_float64_and_the_rest_raise(kind, subnormals):
    # Oracle: exact Fraction ranges against numpy.finfo(float64). A format whose largest
    # value or smallest subnormal is not a float64 must be refused up front (FP64's
    # parameters with kind "fn" used to be accepted and then overflow in every use).
    accepted = 0
    for e in range(1, 14):
        for m in (0, 1, 2, 3, 7, 10, 23, 50, 51, 52, 53):
            for bias in sorted({1, 2**(e - 1) - 1, 2**(e - 1), 2**e - 2, 1022, 1023, 1024}):
                params = dict(exponent_bits=e, mantissa_bits=m, bias=bias,
                              subnormals=subnormals, kind=kind)
                big, small = exact_range(e, m, bias, subnormals, kind)
                try:
                    fmt = lp.Format(**params)
                except ValueError:
                    continue
                accepted += 1
                assert big <= F64_MAX and small >= F64_TINIEST, params
                assert Fraction(fmt.max) == big and Fraction(fmt.smallest_subnormal) == small
    assert accepted > 100
    if kind != "ieee":
        with pytest.raises(ValueError, match="emax = 1024"):
            lp.Format(11, 52, kind=kind, subnormals=subnormals)


@pytest.mark.parametrize("kwargs, match", [
    (dict(exponent_bits=10**6, mantissa_bits=3), "exponent_bits must be in"),
    (dict(exponent_bits=3 * 10**8, mantissa_bits=3), "exponent_bits must be in"),
    (dict(exponent_bits=5, mantissa_bits=10**9), "mantissa_bits must be in"),
    (dict(exponent_bits=5, mantissa_bits=3, bias=10**6000), "bias .*bias <= 1023"),
    (dict(exponent_bits=5, mantissa_bits=3, bias=-10**6000), "bias .*<= 0"),
    (dict(exponent_bits=8, mantissa_bits=3, bias=1024), "bias <= 1023"),
])
def test_huge_parameters_are_refused_fast_by_name(kwargs, match):
    # Used to fail after 1.4 s, with "Exceeds the limit (4300 digits)".
    import time
    start = time.perf_counter()
    with pytest.raises(ValueError, match=match):
        lp.Format(**kwargs)
    assert time.perf_counter() - start < 0.05


def test_custom_with_huge_emax_names_emax():
    with pytest.raises(ValueError, match="emax must be 2.*an int of"):
        lp.Format.custom(precision=4, emax=10**5000)
    with pytest.raises(ValueError, match="exponent_bits must be in"):
        lp.Format.custom(precision=4, emax=2**5000 - 1)


@pytest.mark.parametrize("name", [5, b"FP16", ["x"], 1.5])
def test_name_must_be_a_str(name):
    with pytest.raises(TypeError, match="name must be a str or None"):
        lp.Format(5, 10, name=name)
    with pytest.raises(TypeError, match="name must be a str or None"):
        lp.Format.custom(precision=11, emax=15, name=name)


def test_name_must_not_be_empty():
    with pytest.raises(ValueError, match="name must not be empty"):
        lp.Format(5, 10, name=" ")


def test_fp64_itself_is_a_format():
    assert lp.Format(11, 52) == lp.FP64
    assert lp.Format(11, 52, subnormals=False).smallest_subnormal == float(
        np.finfo(np.float64).smallest_normal)


def test_non_integer_parameters():
    with pytest.raises(TypeError, match="exponent_bits must be an int"):
        lp.Format(4.0, 3)


@pytest.mark.parametrize("fmt", ALL, ids=lambda f: f.name)
def test_str_is_the_name(fmt):
    # str() used to be a 16-line table, so print("result", fmt) and f-strings broke.
    assert str(fmt) == f"{fmt}" == fmt.name
    assert f"result in {fmt}." == f"result in {fmt.name}."


def test_str_of_custom_formats_is_one_short_line():
    assert str(lp.Format(5, 2, name="mine")) == "mine"
    unnamed = [lp.Format(e, m, bias=b, subnormals=s, kind=k)
               for e, m, b, s, k in [(5, 2, 15, True, "ieee"), (5, 2, 16, True, "ieee"),
                                     (5, 2, 15, False, "ieee"), (5, 2, 15, True, "fnuz"),
                                     (4, 3, 11, True, "fnuz"), (2, 1, 1, True, "finite"),
                                     (2, 1, 1, True, "fn"), (8, 10, 127, True, "ieee")]]
    texts = [str(f) for f in unnamed]
    assert len(set(texts)) == len(texts)          # the parameters tell them apart
    for fmt, text in zip(unnamed, texts):
        assert "\n" not in text and len(text) <= 60
        assert f"e={fmt.exponent_bits}, m={fmt.mantissa_bits}, bias={fmt.bias}" in text
        assert ("subnormals=False" in text) == (not fmt.subnormals)
        assert (f"kind={fmt.kind!r}" in text) == (fmt.kind != "ieee")


def table_rows(fmt):
    return dict(line.split("  ", 1) for line in fmt.table().splitlines())


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(ORACLE_DTYPES))
def test_table_shows_the_constants_of_the_oracle(name):
    fmt, dt = lp.NAMED_FORMATS[name], ORACLE_DTYPES[name]
    fi = np.finfo(dt) if dt in (np.float16, np.float32, np.float64) else ml_dtypes.finfo(dt)
    rows = {k.strip(): v.strip() for k, v in table_rows(fmt).items()}
    assert rows["name"] == name
    assert int(rows["bits"]) == fi.bits
    assert (int(rows["exponent bits"]), int(rows["mantissa bits"])) == (fi.nexp, fi.nmant)
    assert float(rows["max"]) == float(fi.max) and float(rows["eps"]) == float(fi.eps)
    assert float(rows["smallest normal"]) == float(fi.smallest_normal)
    assert float(rows["smallest subnormal"]) == float(fi.smallest_subnormal)
    assert rows["emin, emax"] == f"{fi.minexp}, {fi.maxexp - 1}"
    assert len(fmt.table().splitlines()) >= 16


def test_table_of_an_unnamed_format_names_its_parameters():
    rows = table_rows(lp.Format(3, 4))
    assert rows["name"].strip() == "Format(e=3, m=4, bias=3)"
    assert repr(lp.BF16) == "lp.BF16"
    assert repr(lp.Format(3, 4)).startswith("lp.Format(exponent_bits=3")


CUSTOM = [
    lp.Format(3, 4), lp.Format(5, 2, name="mine"), lp.Format(5, 10, name="BF16"),
    lp.Format(4, 3, bias=11, kind="fnuz", name="e4m3b11"), lp.Format(5, 10, subnormals=False),
    lp.Format(5, 10, subnormals=False, name="FP16"), lp.Format(2, 1, kind="finite"),
    lp.Format(5, 10, name="it's \"quoted\""), lp.Format.custom(precision=4, emax=7, name="c"),
    lp.format("float8_e4m3b11fnuz"), lp.Format(5, 10), lp.Format(11, 52, name="FP64"),
]


@pytest.mark.parametrize("fmt", ALL + CUSTOM, ids=repr)
def test_repr_evaluates_back_name_included(fmt):
    # A named custom format used to repr as "lp.mine", which does not evaluate.
    back = eval(repr(fmt), {"lp": lp})
    assert back == fmt and back.name == fmt.name
    assert (back.exponent_bits, back.mantissa_bits, back.bias, back.subnormals,
            back.kind) == (fmt.exponent_bits, fmt.mantissa_bits, fmt.bias,
                           fmt.subnormals, fmt.kind)
    if fmt.name in lp.NAMED_FORMATS and lp.NAMED_FORMATS[fmt.name] == fmt:
        assert repr(fmt) == f"lp.{fmt.name}"


@pytest.mark.parametrize("params", [
    (2, 1, 1, "finite"), (2, 3, 1, "finite"), (3, 2, 3, "finite"), (4, 3, 7, "fn"),
    (4, 3, 8, "fnuz"), (5, 10, 15, "ieee"), (3, 0, 3, "ieee"), (3, 0, 1, "ieee"),
    (2, 0, 1, "finite"), (3, 4, 3, "ieee"),
], ids=str)
@pytest.mark.parametrize("subnormals", [True, False])
def test_epsneg_is_one_minus_largest_value_below_one(params, subnormals):
    # numpy's meaning; without subnormals and with emin = 0 nothing lies in (0, 1).
    e, m, bias, kind = params
    fmt = lp.Format(e, m, bias=bias, subnormals=subnormals, kind=kind)
    # Oracle: the values below 1 decoded from the layout alone (Fractions).
    expected = 1 - max(v for v in decode_layout(e, m, bias, subnormals, kind) if v < 1)
    assert fmt.epsneg == expected == Fraction(2) ** fmt.negep


def test_fp4_without_subnormals_has_epsneg_one():
    # FP4 E2M1 flushed: values 0, 1, 1.5, 2, 3, 4, 6, so 1 - (largest below 1) = 1.
    assert lp.Format(2, 1, bias=1, subnormals=False, kind="finite").epsneg == 1.0


@pytest.mark.parametrize("e", [2, 3, 4])
@pytest.mark.parametrize("m", [0, 1, 2])
def test_ieee_has_nan_only_when_top_code_has_a_nonzero_mantissa(e, m):
    # Contract: the top exponent code is inf with mantissa 0, NaN otherwise, so an
    # 'ieee' format with m = 0 (p = 1, as Format.custom(precision=1) builds) has no NaN.
    fmt = lp.Format(e, m)
    nan_patterns = 2 * (2**m - 1)
    assert fmt.has_inf and fmt.has_nan == (nan_patterns > 0)
    if nan_patterns == 0:
        with pytest.raises(ValueError, match="no NaN"):
            lp.encode(np.nan, fmt)
        assert not np.isnan(lp.decode(np.arange(2**fmt.bits), fmt)).any()


def test_custom_with_one_bit_of_precision_has_no_nan():
    assert lp.Format.custom(precision=1, emax=3).has_nan is False


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("ints", [np.int64, np.int32, np.int16, np.int8, np.uint8])
def test_numpy_integer_parameters_behave_as_ints(ints):
    for fmt, dt in ((lp.Format(ints(5), ints(10)), np.float16),
                    (lp.Format(ints(4), ints(3), kind="fn"), ml_dtypes.float8_e4m3fn),
                    (lp.Format(ints(4), ints(3), bias=ints(8), kind="fnuz"),
                     ml_dtypes.float8_e4m3fnuz),
                    (lp.Format(ints(8), ints(7)), ml_dtypes.bfloat16)):
        assert all(type(getattr(fmt, a)) is int
                   for a in ("exponent_bits", "mantissa_bits", "bias"))
        assert_finfo_matches(fmt, dt)
        x = np.array([0.1, 3.3, -1e-3])
        assert np.array_equal(lp.round(x, fmt), x.astype(dt).astype(np.float64))


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(bias=14.5), TypeError, "bias must be an int"),
    (dict(bias=15.0), TypeError, "bias must be an int"),
    (dict(bias="15"), TypeError, "bias must be an int"),
    (dict(bias=True), TypeError, "bias must be an int"),
    (dict(subnormals="no"), TypeError, "subnormals must be a bool"),
    (dict(subnormals=0), TypeError, "subnormals must be a bool"),
    (dict(kind=["ieee"]), TypeError, "kind must be a str"),      # wrong type: TypeError
    (dict(kind=3), TypeError, "kind must be a str"),
    (dict(kind="IEEE754"), ValueError, "kind must be one of"),     # unknown name: ValueError
])
def test_bias_subnormals_kind_are_validated(kwargs, error, match):
    with pytest.raises(error, match=match):
        lp.Format(5, 10, **kwargs)


def test_bool_parameters_are_refused():
    with pytest.raises(TypeError, match="mantissa_bits must be an int"):
        lp.Format(5, True)
    with pytest.raises(ValueError, match="precision must be an int"):
        lp.Format.custom(precision=True, emax=15)
    fmt = lp.Format(5, 10, subnormals=np.bool_(False))
    assert fmt.subnormals is False
    assert fmt.smallest_subnormal == float(np.finfo(np.float16).tiny)


@pytest.mark.parametrize("spec", [None, 5, 1.5, b"fp16", object()])
def test_non_specs_raise_type_error_listing_valid_names(spec):
    # np.dtype(None) is float64: None must not silently mean FP64.
    with pytest.raises(TypeError, match=r"cannot interpret .* valid names: BF16, E8M0, FP16"):
        lp.format(spec)


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("name", ["float8_e4m3", "float8_e3m4", "float8_e4m3b11fnuz",
                                  "float8_e5m3fnu"])
def test_other_ml_dtypes_float8_types(name):
    if not hasattr(ml_dtypes, name):
        pytest.skip(f"ml_dtypes {ml_dtypes.__version__} has no {name} (0.7 has)")
    dt = getattr(ml_dtypes, name)
    fmt = lp.format(dt)
    assert lp.format(name) == fmt == lp.format(np.dtype(dt)) and fmt.dtype_name == name
    assert_finfo_matches(fmt, dt)
    codes = np.arange(256)
    ours = lp.decode(codes, fmt)
    theirs = codes.astype(np.uint8).view(dt).astype(np.float64)
    assert np.array_equal(ours, theirs, equal_nan=True)
    number = ~np.isnan(theirs)                    # a NaN's sign is no value's sign
    assert np.array_equal(np.signbit(ours[number]), np.signbit(theirs[number]))
    assert fmt.has_inf == bool(np.isinf(theirs).any())
    assert fmt.has_nan == bool(np.isnan(theirs).any())


# -- the rich (HTML) display ---------------------------------------------------------------

@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("spec, info", [
    ("fp16", np.finfo(np.float16)), ("fp32", np.finfo(np.float32)),
    ("bf16", ml_dtypes.finfo(ml_dtypes.bfloat16)),
    ("e4m3", ml_dtypes.finfo(ml_dtypes.float8_e4m3fn)),
    ("e5m2", ml_dtypes.finfo(ml_dtypes.float8_e5m2))])
def test_format_html_is_its_table_with_finfo_values(spec, info):
    fmt = lp.format(spec)
    tree = parse_html(fmt._repr_html_())
    rows = dict(tuple(r) for r in tree.headed)
    assert len(rows) == len(fmt.table().splitlines())
    assert rows["bits"] == str(info.bits)
    assert rows["mantissa bits"] == str(info.nmant)
    assert rows["exponent bits"] == str(info.nexp)
    assert rows["max"] == repr(float(info.max))
    assert rows["eps"] == repr(float(info.eps))
    assert rows["smallest normal"] == repr(float(info.smallest_normal))
    assert rows["smallest subnormal"] == repr(float(info.smallest_subnormal))
    assert repr(fmt) in "".join(tree.text)       # the caption: how to spell it
