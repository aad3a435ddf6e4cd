"""lowprec.teaching against oracles it did not produce: NumPy's float16, ml_dtypes'
bit patterns and value tables, and exact Fraction / Decimal arithmetic."""

import html
import math
import re
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp
from helpers import ROOT, equal_or_both_nan, parse_html
from lowprec.formats import format as lp_format
from lowprec.teaching import error_table, error_vs_k, explain, explain_text, layout
from lowprec.testing import reference_round
from peers import ml_dtypes, requires_ml_dtypes

# Values that reach every branch: normal, subnormal, zero, ties, overflow, specials.
VALUES = [0.1, -0.1, 1.0, 1 / 3, 2.0**-15, 1e-7, -3e-8, 1e-9, 0.0, -0.0, 1 + 2**-11,
          1 + 3 * 2**-11, 65504.0, 65519.0, 65520.0, 1e6, -1e6, 0.3, 240.0, 250.0,
          300.0, 450.0, 1e-3, math.inf, -math.inf, math.nan]

ML_DTYPES = {
    "bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn,
    "e5m2": ml_dtypes.float8_e5m2, "e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "e5m2fnuz": ml_dtypes.float8_e5m2fnuz, "fp6": ml_dtypes.float6_e2m3fn,
    "e3m2": ml_dtypes.float6_e3m2fn, "fp4": ml_dtypes.float4_e2m1fn,
}


def bit_fields(pattern, exponent_bits, mantissa_bits):
    """Sign, exponent and mantissa of a pattern as strings of bits, by hand."""
    text = format(int(pattern), f"0{1 + exponent_bits + mantissa_bits}b")
    return text[0], text[1:1 + exponent_bits], text[1 + exponent_bits:]


@requires_ml_dtypes
@pytest.mark.oracle
def test_bf16_fields_of_one_tenth_match_ml_dtypes():
    pattern = np.array(0.1).astype(ml_dtypes.bfloat16).view(np.uint16)
    e = explain(0.1, "bf16")
    assert (e.sign_field, e.exponent_field, e.mantissa_field) == bit_fields(pattern, 8, 7)
    assert (e.sign_field, e.exponent_field, e.mantissa_field) == ("0", "01111011", "1001101")
    assert e.bits == int(pattern) == 0x3DCD
    assert e.exact_decimal == "0.10009765625"
    assert "0 | 01111011 | 1001101" in str(e) and "0.10009765625" in str(e)


NUMPY = {"fp16": (np.float16, np.uint16, 5, 10), "fp32": (np.float32, np.uint32, 8, 23),
         "fp64": (np.float64, np.uint64, 11, 52)}
CANONICAL_NAN = {"fp16": 0x7E00, "fp32": 0x7FC00000, "fp64": 0x7FF8000000000000}


@pytest.mark.parametrize("spec", sorted(NUMPY))
@pytest.mark.parametrize("x", VALUES + [1e-45, 3e38, 1e39, 5e-324, 1.7976931348623157e308])
def test_ieee_formats_against_numpy(spec, x):
    dtype, uint, exponent_bits, mantissa_bits = NUMPY[spec]
    info = np.finfo(dtype)
    e = explain(x, spec)
    with np.errstate(over="ignore"):
        ref = dtype(x)                          # NumPy's cast of a float64 rounds once, RNE
    if math.isnan(x):
        assert e.kind == "nan" and e.bits == CANONICAL_NAN[spec]
        return
    assert e.rounded == float(ref) and math.copysign(1, e.rounded) == math.copysign(1, ref)
    pattern = ref.view(uint)
    assert e.bits == int(pattern)
    assert (e.sign_field, e.exponent_field, e.mantissa_field) == bit_fields(
        pattern, exponent_bits, mantissa_bits)
    if np.isfinite(ref):
        # NumPy's spacing is the gap to the next value away from zero: the ulp
        # (at max, where that is inf, the ulp is the gap below).
        if abs(ref) < info.max:
            assert e.ulp == abs(float(np.spacing(ref)))
        else:
            assert e.ulp == abs(float(ref - np.nextafter(ref, dtype(0))))
        assert e.below == float(np.nextafter(ref, dtype(-np.inf)))
        with np.errstate(over="ignore"):             # above max: inf
            assert e.above == float(np.nextafter(ref, dtype(np.inf)))
        assert Fraction(Decimal(e.exact_decimal)) == Fraction(float(ref))
        assert e.abs_error == abs(Fraction(float(ref)) - Fraction(x))
        if x != 0:
            assert e.rel_error == e.abs_error / abs(Fraction(x))
    # Flags by their definitions, from NumPy's result (no input here lies just below
    # the smallest normal, where tininess after rounding would need more care).
    finite_in = math.isfinite(x)
    assert e.flags["inexact"] == int(finite_in and float(ref) != x)
    assert e.flags["overflow"] == int(finite_in and bool(np.isinf(ref)))
    tiny = finite_in and 0 < abs(x) and abs(float(ref)) < info.smallest_normal
    assert e.flags["underflow"] == int(tiny and float(ref) != x)


def _table(dtype, bits):
    """Every finite value of an ml_dtypes format, sorted, with -0 collapsed into +0."""
    pats = np.arange(2**bits, dtype=np.uint16 if bits == 16 else np.uint8)
    with np.errstate(invalid="ignore"):
        vals = pats.view(dtype).astype(np.float64)
    return np.unique(vals[np.isfinite(vals)])


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("spec", sorted(ML_DTYPES))
@pytest.mark.parametrize("x", [0.1, -0.1, 0.3, 1.0, 1 / 3, 2.5, -5.5, 100.0, 1e-3, 3e-5])
def test_neighbours_and_bits_against_ml_dtypes(spec, x):
    dtype = ML_DTYPES[spec]
    e = explain(x, spec)
    ref = np.array(x).astype(dtype)
    if np.isnan(ref.astype(np.float64)):
        pytest.skip("ml_dtypes overflow to NaN: no neighbours to compare")
    assert e.rounded == float(ref.astype(np.float64))
    assert e.bits == int(ref.view(np.uint16 if e.fmt.bits == 16 else np.uint8))
    table = _table(dtype, e.fmt.bits)
    i = int(np.searchsorted(table, e.rounded))
    below = table[i - 1] if i > 0 else None
    above = table[i + 1] if i + 1 < len(table) else None
    if e.rounded == 0:
        below, above = -table[table > 0][0], table[table > 0][0]
    assert e.below == below
    if above is None:
        assert e.above in (None, math.inf)
    else:
        assert e.above == above


def test_candidates_and_sr_probability():
    e = explain(0.3, "fp4", "sr", rng=1)
    # FP4 E2M1 values near 0.3: 0 and 0.5 (its smallest subnormal).
    assert (e.down, e.up) == (0.0, 0.5)
    assert e.p_up == Fraction(0.3) / Fraction(1, 2)
    assert e.rounded in (0.0, 0.5)
    assert explain(0.5, "fp4").p_up is None


def test_specials():
    nan4 = explain(math.nan, "fp4")
    assert nan4.bits is None and nan4.kind == "nan" and "no NaN" in str(nan4)
    assert explain(math.nan, "e4m3fnuz").bits == 0x80
    over = explain(500.0, "e4m3")             # fn formats overflow to NaN
    assert over.kind == "nan" and over.flags["overflow"] == 1 and over.bits == 0x7F
    inf = explain(-math.inf, "fp16")
    assert inf.kind == "inf" and inf.above == -65504.0 and inf.ulp is None
    assert explain(-0.0, "e4m3fnuz").sign == 0     # fnuz has no -0
    sub = explain(1e-7, "fp16")
    assert sub.kind == "subnormal" and sub.power == -14
    assert sub.significand == Fraction(2, 1024)


def test_layout_and_text():
    assert layout("fp16").startswith("FP16: S EEEEE MMMMMMMMMM = 1 sign | 5 exponent (bias 15)")
    text = explain_text(1.0, ["fp16", "bf16", "e5m2"])
    assert text.count("\n\n") == 2 and "flags       none (exact)" in text


def test_error_vs_k_exact_model_is_one_rounding():
    r = error_vs_k(ks=(16, 256), formats=("fp16", "bf16"), models=("exact", "fp16", "a100"),
                   trials=8, size=4)
    # One rounding to FP32: every relative error is at most 2**-24.
    assert all(e <= 2.0**-24 for e in r["dot"][("FP16", "exact")] + r["matmul"][("BF16", "exact")])
    # FP16 accumulation of positive terms is far worse, and worse for longer sums.
    fp16 = r["dot"][("FP16", "fp16")]
    assert fp16[0] > 2.0**-24 and fp16[1] > fp16[0]
    table = error_table(r, "matmul")
    assert table.splitlines()[0].split("|")[-1].strip() == "K=256"
    assert len(table.splitlines()) == 2 + 2 * 3


def test_error_vs_k_marks_models_without_the_format():
    r = error_vs_k(ks=(16,), formats=("fp32",), models=("fp32", "v100"), trials=2, size=2)
    assert math.isnan(r["dot"][("FP32", "v100")][0])
    assert "-" in error_table(r).splitlines()[-1]


def test_reference_is_exact():
    from lowprec.teaching.experiments import _reference
    rng = np.random.default_rng(5)
    a = np.round(rng.standard_normal((3, 40)) * 2**10) * 2.0**-10
    b = np.round(rng.standard_normal((40, 2)) * 2**10) * 2.0**-10
    ref = _reference(a, b)
    for i in range(3):
        for j in range(2):
            exact = sum(Fraction(a[i, k]) * Fraction(b[k, j]) for k in range(40))
            assert ref[i, j] == float(exact)


def test_plot_has_labels_and_titles():
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    from lowprec.teaching import plot_error_vs_k
    r = error_vs_k(ks=(16, 64), formats=("fp16",), models=("fp32", "a100"), trials=2, size=2)
    fig = plot_error_vs_k(r, "matmul")
    ax = fig.axes[0]
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title() == "FP16 inputs"
    assert fig._suptitle.get_text().startswith("Matrix products")
    assert len(ax.get_lines()) == 2


@pytest.mark.parametrize("spec", ["fp16", "bf16", "e4m3", "e5m2fnuz", "fp6", "fp4"])
@pytest.mark.parametrize("mode", ["rne", "rna", "rz", "ru", "rd", "ro"])
def test_every_mode_against_the_fraction_reference(spec, mode):
    from lowprec.testing import reference_round
    for x in [0.1, -0.3, 1 / 3, 2.5, -5.5, 7.0, 1e-3, -2e-5, 300.0, 1e5]:
        e = explain(x, spec, mode)
        assert equal_or_both_nan(e.rounded, reference_round(Fraction(x), spec, mode)), x
        assert equal_or_both_nan(e.down, reference_round(Fraction(x), spec, "rd")), x
        assert equal_or_both_nan(e.up, reference_round(Fraction(x), spec, "ru")), x
        assert e.flags["inexact"] == int(e.rounded != x)


# -- hashing and input rules ---------------------------------------------------------

def test_explanation_is_hashable():
    # It held its flags in a dict, so hash() raised TypeError.
    a, b, c = explain(0.1, "bf16"), explain(0.1, "bf16"), explain(0.1, "fp16")
    assert a == b and hash(a) == hash(b) and a != c
    assert len({a, b, c}) == 2 and {a: "bf16"}[b] == "bf16"
    nan = explain(math.nan, "fp16")       # NaN fields compare as floats do: by identity
    assert nan in {nan} and hash(nan) == hash(nan)


@pytest.mark.parametrize("value, type_name", [
    ("0.1", "str"), (b"0.1", "bytes"), (Fraction(1, 3), "Fraction"),
    (Decimal("0.1"), "Decimal"), (1 + 2j, "complex"), (0.1 + 0j, "complex"),
    (np.complex128(1), "complex128"), (True, "bool"), (np.bool_(False), "bool"),
    (None, "NoneType"), (object(), "object"), (np.array("0.1"), "str"),
])
def test_non_reals_raise_type_error_naming_the_type(value, type_name):
    # str, bytes, Fraction, Decimal and complex (imaginary part dropped) were accepted.
    with pytest.raises(TypeError, match=f"explain takes one real number .*got {type_name}"):
        explain(value, "fp16")


@pytest.mark.parametrize("value", [[0.1], (0.1, 0.2), np.array([1.0, 2.0]), np.zeros((2, 2))])
def test_more_than_one_value_is_a_value_error(value):
    with pytest.raises(ValueError, match="explain takes one value"):
        explain(value, "fp16")


@pytest.mark.parametrize("value", [2**1024, -2**1024, 2**1024 - 2**970, 10**400])
def test_ints_beyond_float64_raise_value_error(value):
    # float(value) used to raise OverflowError.
    with pytest.raises(ValueError, match="beyond float64's range"):
        explain(value, "fp16")


WIDE_INTS = [2**53 + 1, -(2**53 + 1), 2**64 + 1, 3 * 2**70 + 7, 2**1024 - 2**970 - 1,
             2**24 + 1, 2**65 - 1]


@pytest.mark.parametrize("value", WIDE_INTS)
@pytest.mark.parametrize("spec, mode", [("fp64", "ru"), ("fp64", "rd"), ("fp64", "rne"),
                                        ("fp32", "rz"), ("fp32", "ru"), ("bf16", "ro")])
def test_wide_ints_are_rounded_once(value, spec, mode):
    # Oracle: the Fraction reference on the exact int (float(value) rounded twice).
    e = explain(value, spec, mode)
    assert e.rounded == reference_round(value, lp_format(spec), mode)
    assert e.value == value and isinstance(e.value, int)
    assert e.down == reference_round(value, lp_format(spec), "rd")
    assert e.up == reference_round(value, lp_format(spec), "ru")
    if math.isfinite(e.rounded):
        assert e.error == Fraction(e.rounded) - value
    assert str(value) in str(e)


@requires_ml_dtypes
@pytest.mark.oracle
def test_numpy_and_ml_dtypes_scalars_are_taken_exactly():
    for value in (np.float16(0.1), np.float32(1 / 3), np.int64(2**62 + 1), np.uint64(2**64 - 1),
                  np.int8(-7), ml_dtypes.bfloat16(0.1), ml_dtypes.float8_e4m3fn(3.5),
                  np.array(0.3), np.longdouble(1) + np.longdouble(2) ** -60):
        exact = Fraction(*np.longdouble(value).as_integer_ratio()) if isinstance(
            value, np.longdouble) else Fraction(int(value)) if isinstance(
            value, np.integer) else Fraction(float(value))
        for spec, mode in (("fp64", "ru"), ("bf16", "rne"), ("e4m3", "rz")):
            e = explain(value, spec, mode)
            assert Fraction(e.value) == exact
            assert e.rounded == reference_round(exact, lp_format(spec), mode)


def test_unnamed_formats_are_named_by_dtype_or_parameters():
    # The ml_dtypes-style spelling hid subnormals=False and made up dtypes (float19_e8m10).
    from lowprec import Format
    assert explain(0.1, "float8_e4m3").fmt.name is None
    assert str(explain(0.1, "float8_e4m3")).startswith("0.1 in float8_e4m3, rne")
    assert layout(Format(8, 10)).startswith("Format(e=8, m=10, bias=127): S EEEEEEEE")
    text = str(explain(1e-6, Format(5, 10, subnormals=False)))
    assert text.startswith("1e-06 in Format(e=5, m=10, bias=15, subnormals=False), rne")


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("name", ["e8m0", "ue4m3"])
def test_unsigned_formats_show_no_sign_and_their_neighbours(name):
    """E8M0 and UE4M3 store no sign bit; the neighbours of each value are the adjacent
    values of ml_dtypes' float8_e8m0fnu, and of float8_e4m3fn's non-negative ones."""
    fmt = lp.format(name)
    if name == "e8m0":
        vals = np.arange(255, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu)
    else:
        vals = np.arange(127, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    vals = np.sort(vals.astype(np.float64))
    for i in (0, 1, len(vals) // 2, len(vals) - 1):
        e = lp.explain(float(vals[i]), fmt)
        text = str(e)
        assert "sign" not in text.split("layout")[1].split("\n")[0].replace("no sign bit", "")
        assert e.below == (float(vals[i - 1]) if i > 0 else None)
        assert e.above == (float(vals[i + 1]) if i + 1 < len(vals) else None)


# -- the input and overflow rows say what is true --------------------------------------

def _row(e, key):
    lines = [line for line in str(e).splitlines() if line[2:12].strip() == key]
    return lines[0][14:] if lines else None


@pytest.mark.parametrize("value", [3, 500, -7, 2**53, np.int64(2**60)])
def test_ints_that_are_float64_values_are_not_said_to_be_unheld(value):
    # Oracle: Fraction(float(v)) == v says float64 holds v exactly.
    assert Fraction(float(value)) == int(value)
    for spec in ("fp16", "e4m3", "fp64"):
        e = explain(value, spec)
        for view in (str(e), e._repr_html_()):
            assert "no float64 holds" not in view
        assert _row(e, "input") in (str(int(value)),
                                    f"{float(value)!r} (float64, exactly {int(value)})")


def test_ints_no_float64_holds_are_said_to_be_between_two():
    value = 2**53 + 1            # float64 neighbours by hand: 2**53 and 2**53 + 2
    e = explain(value, "fp32")
    expected = ("an int no float64 holds: between the float64 values 9007199254740992.0 "
                "and 9007199254740994.0")
    assert expected in _row(e, "input") and expected in e._repr_html_()


@pytest.mark.parametrize("value, spec, top", [(500, "e4m3", 448.0), (500.0, "e4m3", 448.0),
                                              (-1e6, "fp16", -65504.0),
                                              (2**53 + 1, "e5m2", 57344.0)])
def test_overflow_is_worded_as_overflow(value, spec, top):
    # Expected per mode by hand: toward the value's side of zero past +-max is the
    # overflow result (FP16, E5M2: inf; E4M3: NaN, it has no inf), toward zero is +-max.
    fmt = lp_format(spec)
    big = math.copysign(math.inf if fmt.has_inf else math.nan, value)
    e = explain(value, spec)
    side = "above the largest" if value > 0 else "below the most negative"
    text = _row(e, "overflow")
    shown = _row(e, "input").split(" (")[0]
    assert text.startswith(f"{shown} lies {side} finite value {top!r}: ")
    away, toward = ("ru", "rd") if value > 0 else ("rd", "ru")
    assert f"rne, rna and {away} give {big!r}" in text
    assert f"rz, {toward}, ro and saturation give {top!r}" in text
    assert _row(e, "candidates") is None
    html_text = e._repr_html_()
    assert "&lt;= nan" not in html_text and "&lt;= inf" not in html_text
    assert f"lies {side} finite value {top!r}" in html_text
    assert "<= nan" not in str(e) and "<= inf" not in str(e)


# (value, format name, the format's field widths by hand: sign, exponent, mantissa)
HTML_CASES = [
    (0.1, "bf16", (1, 8, 7)), (-0.1, "fp16", (1, 5, 10)), (1e-7, "fp16", (1, 5, 10)),
    (1 / 3, "fp32", (1, 8, 23)), (0.3, "e4m3", (1, 4, 3)), (300.0, "e5m2", (1, 5, 2)),
    (5.0, "e2m1", (1, 2, 1)), (0.0, "fp16", (1, 5, 10)), (-0.0, "bf16", (1, 8, 7)),
    (1e6, "fp16", (1, 5, 10)), (math.inf, "e5m2", (1, 5, 2)), (math.nan, "fp16", (1, 5, 10)),
    (2.0**-130, "fp32", (1, 8, 23)), (0.1, "fp64", (1, 11, 52)), (8.0, "e8m0", (0, 8, 0)),
    (3.0, "ue4m3", (0, 4, 3)),
]


# -- the rich (HTML) display ---------------------------------------------------------------

@pytest.mark.parametrize("x, spec, widths", HTML_CASES)
def test_explanation_html_shows_every_bit_of_encode_by_field(x, spec, widths):
    e = lp.explain(x, spec)
    tree = parse_html(e._repr_html_())
    n = sum(widths)
    expected = format(int(lp.encode(x, spec)), f"0{n}b")   # Python's own binary digits
    assert "".join(b for _, b in tree.bits) == expected
    names = ["sign"] * widths[0] + ["exponent"] * widths[1] + ["mantissa"] * widths[2]
    assert [name for name, _ in tree.bits] == names
    # Each field has its own colour: the style of every box of a field is the same.
    styles = {}
    for tag, attrs in tree.tags:
        if tag == "td" and (attrs.get("title") or "").endswith(" bit"):
            styles.setdefault(attrs["title"], set()).add(attrs["style"])
    assert all(len(s) == 1 for s in styles.values())
    assert len({next(iter(s)) for s in styles.values()}) == len(styles)
    text = html.unescape("".join(tree.text))
    assert repr(e.rounded) in text
    hex_digits = (n + 3) // 4
    assert f"0x{int(lp.encode(x, spec)):0{hex_digits}x}" in text


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("x, spec, dtype", [
    (0.1, "bf16", ml_dtypes.bfloat16), (0.3, "e4m3", ml_dtypes.float8_e4m3fn),
    (-1e-5, "e5m2", ml_dtypes.float8_e5m2), (2.6, "e2m1", ml_dtypes.float4_e2m1fn),
    (1 / 3, "fp16", np.float16)])
def test_explanation_html_value_neighbours_and_decision_match_ml_dtypes(x, spec, dtype):
    # Every finite value of the dtype, from its own bit patterns.
    bits = 8 * np.dtype(dtype).itemsize
    if np.dtype(dtype).itemsize == 1 and spec == "e2m1":
        bits = 4
    patterns = np.arange(2**bits, dtype=np.uint8 if bits <= 8 else np.uint16)
    with np.errstate(invalid="ignore"):          # the NaN patterns
        every = patterns.view(dtype).astype(np.float64)
    every = np.unique(every[np.isfinite(every)])
    rounded = float(np.array(x).astype(dtype).astype(np.float64))   # the cast: RNE
    i = int(np.searchsorted(every, rounded))
    below, above = float(every[i - 1]), float(every[i + 1])
    down = float(every[np.searchsorted(every, x, side="right") - 1])
    up = float(every[np.searchsorted(every, x, side="left")])
    tree = parse_html(lp.explain(x, spec)._repr_html_())
    rows = dict(tree.headed)
    # -0.0 is the neighbour above a negative value next to zero: compare as numbers.
    assert [float(v) for v in rows["neighbours"].split(" < ")] == [below, rounded, above]
    lo, rest = rows["candidates"].split(" <= ", 1)
    shown, rest = rest.split(" <= ", 1)
    hi, gives = rest.split(": rne gives ")
    assert (float(lo), float(shown), float(hi), float(gives)) == (down, x, up, rounded)


def test_explanation_html_marks_the_candidate_taken():
    e = lp.explain(0.1, "bf16")          # 0.099609375 <= 0.1 <= 0.10009765625, up taken
    markup = e._repr_html_()
    marked = re.findall(r"<span style=\"[^\"]*\">([^<]*)</span>", markup)
    assert marked == [repr(0.10009765625)]
    e = lp.explain(0.1, "bf16", "rd")
    assert re.findall(r"<span style=\"[^\"]*\">([^<]*)</span>", e._repr_html_()) == [
        repr(0.099609375)]


@pytest.mark.parametrize("x, spec", [(c[0], c[1]) for c in HTML_CASES] + [(0.3, "sr")])
def test_explanation_html_says_what_the_text_says(x, spec):
    # Every row of the text view, bits aside (drawn as boxes), is a row of the table.
    e = lp.explain(x, "e4m3", "sr", rng=3) if spec == "sr" else lp.explain(x, spec)
    tree = parse_html(e._repr_html_())
    rows = [(k.strip(), v) for k, v in tree.headed]
    text_rows = [(line[2:12].strip(), line[14:]) for line in str(e).splitlines()[1:]]
    drawn = e.bits is not None
    assert rows == [r for r in text_rows if not (drawn and r[0] in ("fields", "bits"))]
    assert str(e).splitlines()[0] in html.unescape("".join(tree.text))


def test_html_escapes_names():
    fmt = lp.Format(5, 2, name="<b>mine & co</b>")
    for markup in (lp.explain(1.5, fmt)._repr_html_(), fmt._repr_html_(),
                   lp.tensor([1.5], fmt)._repr_html_()):
        parse_html(markup)
        assert "<b>mine" not in markup and "&lt;b&gt;mine &amp; co&lt;/b&gt;" in markup


def test_reprs_are_unchanged():
    assert repr(lp.BF16) == "lp.BF16"
    assert repr(lp.tensor([1.0, 2.0], "fp16")) == "Tensor([1.0, 2.0], fmt=FP16)"
    assert str(lp.explain(0.1, "bf16")).splitlines()[3] == (
        "  bits           0 | 01111011 | 1001101   = 0x3dcd")


@pytest.mark.slow
def test_a_notebook_shows_html_in_a_real_kernel():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    kernelspec = pytest.importorskip("jupyter_client.kernelspec")
    if "python3" not in kernelspec.find_kernel_specs():
        pytest.skip("no python3 Jupyter kernel installed (pip install ipykernel)")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in (
        "import lowprec as lp", 'lp.explain(0.1, "bf16")', "lp.BF16",
        'lp.tensor([1.0, 2.0], "fp16")')]
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(ROOT)}})
    client.execute()
    outputs = [cell.outputs for cell in nb.cells[1:]]
    data = []
    for out in outputs:
        results = [o for o in out if o.output_type == "execute_result"]
        assert len(results) == 1, out
        data.append(results[0].data)
    expected = [
        (["0x3dcd", "0.10009765625", "0.099609375", "rne gives", "mantissa bit"],
         "Explanation"),
        (["BF16", "bfloat16", "3.3895313892515355e+38", "<table"], "lp.BF16"),
        (["1.0, 2.0", "FP16", "shape (2,)"], "Tensor([1.0, 2.0], fmt=FP16)"),
    ]
    for shown, (pieces, plain) in zip(data, expected):
        assert "text/html" in shown and "text/plain" in shown
        parse_html(shown["text/html"])
        for piece in pieces:
            assert piece in shown["text/html"], (piece, shown["text/html"][:200])
        assert plain in shown["text/plain"]
