"""Block-scaled formats: quantize/dequantize against vectors computed by hand from the
OCP MX v1.0 rules and NVFP4's recipe, and block-scaled products against exact sums."""

import math
from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp
from lowprec.testing import reference_round
from peers import ml_dtypes, requires_ml_dtypes


def block(first, rest=1.0, n=32):
    return [first] + [rest] * (n - 1)


def test_ocp_floor_rule_clamps_957_to_896():
    # floor(log2 957) = 9, emax(E4M3) = 8: X = 2, 957 / 2 = 478.5 > 448 -> 448 -> 896.
    q = lp.mx.quantize(block(957.0), "mxfp8_e4m3", scale_rule="floor")
    assert q.scale_codes.tolist() == [128] and q.scales.tolist() == [2.0]
    assert q.dequantize()[0] == 896.0 and q.dequantize()[1] == 1.0


def test_ceil_keeps_the_maximum():
    # ceil(log2(957 / 448)) = 2: X = 4, 957 / 4 = 239.25 -> E4M3 240 -> 960.
    q = lp.mx.quantize(block(957.0), "mxfp8_e4m3", scale_rule="ceil")
    assert q.scales.tolist() == [4.0] and q.dequantize()[0] == 960.0


def test_rceil_rounds_the_quotient_to_fp32_first():
    amax = 448.0 * (1 + 2.0**-30)          # amax / 448 = 1 + 2**-30: FP32 rounds it to 1
    assert lp.mx.quantize(block(amax), "mxfp8_e4m3", scale_rule="ceil").scales[0] == 2.0
    assert lp.mx.quantize(block(amax), "mxfp8_e4m3", scale_rule="rceil").scales[0] == 1.0
    exact = 448.0 * 4
    for rule in ("ceil", "rceil"):          # a power of two times max: no rounding up
        assert lp.mx.quantize(block(exact), "mxfp8_e4m3", scale_rule=rule).scales[0] == 4.0


def test_even_takes_the_nearest_power_of_two():
    assert lp.mx.quantize(block(6 * 1.4), "mxfp4", scale_rule="even").scales[0] == 1.0
    assert lp.mx.quantize(block(6 * 1.6), "mxfp4", scale_rule="even").scales[0] == 2.0


@pytest.mark.parametrize("scheme, emax", [("mxfp8_e4m3", 8), ("mxfp8_e5m2", 15),
                                          ("mxfp6_e3m2", 4), ("mxfp6_e2m3", 2),
                                          ("mxfp4", 2), ("mxint8", 0)])
def test_floor_scale_is_the_exponent_of_amax_minus_emax(scheme, emax):
    rng = np.random.default_rng(emax)
    x = rng.standard_normal((8, 32)) * 2.0 ** rng.integers(-20, 20, (8, 1))
    q = lp.mx.quantize(x, scheme, scale_rule="floor")
    amax = np.abs(x).max(axis=1)
    want = [2.0 ** (int(np.floor(np.log2(m))) - emax) for m in amax]
    assert q.scales[:, 0].tolist() == want


def test_fp4_floor_rule_clips_the_blocks_whose_maximum_passes_six():
    # amax / X lies in [4, 8) and E2M1 stops at 6: a block clips when amax's
    # significand exceeds 1.5, and its maximum then decodes as 6 X. (For N(0, 1) blocks
    # of 32 that is about 30% of them; the share depends on the data.)
    x = np.random.default_rng(4).standard_normal((20000, 32))
    q = lp.mx.quantize(x, "mxfp4", scale_rule="floor")
    amax = np.abs(x).max(axis=1)
    X = q.scales[:, 0]
    sig = amax / 2.0 ** np.floor(np.log2(amax))
    clipped = amax / X > 6
    assert np.array_equal(clipped, sig > 1.5)
    assert np.array_equal(np.abs(q.dequantize()).max(axis=1)[clipped], 6 * X[clipped])
    assert 0.25 < clipped.mean() < 0.45


def test_mxint8_elements_are_sixty_fourths():
    q = lp.mx.quantize(block(1.99, 0.5), "mxint8", scale_rule="floor")
    assert q.scales[0] == 1.0
    assert q.codes[0] == 127 and q.codes[1] == 32
    assert q.dequantize()[0] == 127 / 64


def test_zero_and_special_blocks():
    x = np.zeros(96)
    x[32] = np.nan
    x[64] = 1.0
    x[65] = np.inf
    q = lp.mx.quantize(x, "mxfp8_e4m3")
    assert q.scale_codes.tolist() == [0, 255, 255]      # zeros: 2**-127; NaN/inf: NaN
    d = q.dequantize()
    assert np.all(d[:32] == 0) and np.isnan(d[32:]).all()


def test_axis_and_padding():
    x = np.arange(2 * 40, dtype=float).reshape(40, 2) / 8
    q = lp.mx.quantize(x, "mxfp8_e5m2", axis=0, scale_rule="floor")
    assert q.codes.shape == (2, 64) and q.scale_codes.shape == (2, 2)
    assert q.dequantize().shape == x.shape
    d = q.dequantize()
    for rows in (slice(0, 32), slice(32, 40)):
        X = 2.0 ** (np.floor(np.log2(np.abs(x[rows]).max(axis=0))) - 15)
        assert np.array_equal(d[rows], lp.round(x[rows] / X, "e5m2", saturate=True) * X)


def test_stochastic_rounding_of_elements():
    x = np.full(32, 1.25 * 2**-3)
    x[0] = 6.0 * 2**-3            # X = 2**-3: elements 6 and 1.25 (between 1 and 1.5)
    q1 = lp.mx.quantize(x, "mxfp4", mode="sr", rng=1)
    q2 = lp.mx.quantize(x, "mxfp4", mode="sr", rng=1)
    assert np.array_equal(q1.codes, q2.codes)
    assert set(q1.elements[1:].tolist()) <= {1.0, 1.5} and len(set(q1.elements[1:])) == 2


@requires_ml_dtypes
@pytest.mark.oracle
def test_nvfp4_recipe_step_by_step_in_float32():
    # The recipe in float32 arithmetic with ml_dtypes' casts as the oracle: tensor scale
    # amax / (6 * 448); block scale RN_e4m3(amax_b / 6 / ts); elements
    # RN_e2m1(fl32(x * fl32(1 / (scale * ts)))).
    rng = np.random.default_rng(16)
    x = (rng.standard_normal((3, 48)) * 3).astype(np.float32).astype(np.float64)
    q = lp.mx.quantize(x, "nvfp4")
    f32 = np.float32
    ts = f32(np.abs(x).max()) / f32(6 * 448)
    assert q.tensor_scale == float(ts)
    for i in range(3):
        for j in range(3):
            blk = x[i, 16 * j:16 * j + 16].astype(f32)
            amax = np.abs(blk).max()
            s = f32(np.float64(amax) / 6 / np.float64(ts)).astype(ml_dtypes.float8_e4m3fn)
            s = np.float64(s.astype(np.float32))
            enc = f32(1 / (s * np.float64(ts)))
            el = (blk * enc).astype(ml_dtypes.float4_e2m1fn).astype(np.float64)
            assert q.scales[i, j] == s
            assert np.array_equal(q.elements[i, 16 * j:16 * j + 16], el)


@pytest.mark.parametrize("scheme", ["mxfp8_e4m3", "mxfp4", "nvfp4"])
def test_block_scaled_matmul_of_exact_sums(scheme):
    # Elements and scales chosen so every partial sum is exact in FP32: the block-scaled
    # product must equal the float64 product of the dequantized operands.
    rng = np.random.default_rng(7)
    vals = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
    x = rng.choice(vals, (3, 96)) * rng.choice([-1.0, 1.0], (3, 96))
    y = rng.choice(vals, (96, 2))
    x[:, :32] *= 4.0
    ts = {"tensor_scale": 1.0} if scheme == "nvfp4" else {}     # powers of two: exact
    a, b = lp.mx.quantize(x, scheme, axis=1, **ts), lp.mx.quantize(y, scheme, axis=0, **ts)
    d = lp.mx.matmul(a, b)
    assert np.array_equal(d, a.dequantize() @ b.dequantize())


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown scheme"):
        lp.mx.quantize([1.0], "mxfp3")
    with pytest.raises(ValueError, match="unknown scale_rule"):
        lp.mx.quantize([1.0], "mxfp4", scale_rule="up")
    a = lp.mx.quantize(np.ones((2, 32)), "mxint8", axis=1)
    with pytest.raises(ValueError, match="MXINT8"):
        lp.mx.matmul(a, lp.mx.quantize(np.ones((32, 2)), "mxint8", axis=0))


# -- bad arguments (R3-05, R3-06, R3-08, O8) -------------------------------------------------

def test_axis_is_checked_not_taken_modulo_ndim():  # R3-05
    x = np.ones((2, 64))
    for axis in (2, 3, -3, -5):
        with pytest.raises(np.exceptions.AxisError, match="out of bounds"):
            lp.mx.quantize(x, "mxfp4", axis=axis)
    assert issubclass(np.exceptions.AxisError, ValueError)
    for axis in (True, None, 1.0, "1"):
        with pytest.raises(TypeError, match="axis must be an int"):
            lp.mx.quantize(x, "mxfp4", axis=axis)
    assert lp.mx.quantize(x, "mxfp4", axis=np.int64(-2)).axis == 0


def test_names_must_be_strings():  # O8
    with pytest.raises(TypeError, match="scheme must be a str"):
        lp.mx.quantize([1.0], [])
    with pytest.raises(TypeError, match="scale_rule must be a str"):
        lp.mx.quantize([1.0], "mxfp4", scale_rule=["ceil"])


@pytest.mark.parametrize("bad", [np.full(16, 3 + 4j), [None] * 16, ["1.0"] * 16])
def test_values_must_be_real_numbers(bad):
    # As lp.round takes them: complex, None and strings are refused, not cast.
    with pytest.raises(TypeError, match="x: .*(complex|real numbers)"):
        lp.mx.quantize(bad, "nvfp4")


def test_tensor_scale_is_a_positive_fp32_number():  # R3-06
    x = np.arange(16.0)
    for bad in (0.0, -1.0, np.nan, np.inf, -np.inf):
        with pytest.raises(ValueError, match="positive finite"):
            lp.mx.quantize(x, "nvfp4", tensor_scale=bad)
    for bad in ("2", True, 1 + 2j, [1.0]):
        with pytest.raises(TypeError, match="tensor_scale must be a real number"):
            lp.mx.quantize(x, "nvfp4", tensor_scale=bad)
    for bad in (1e-50, 1e39):                     # rounds to 0 or inf in FP32
        with pytest.raises(ValueError, match="outside FP32's range"):
            lp.mx.quantize(x, "nvfp4", tensor_scale=bad)
    with pytest.raises(ValueError, match="scheme 'mxfp8_e4m3' has none"):
        lp.mx.quantize(np.ones(32), "mxfp8_e4m3", tensor_scale=5.0)
    # A float64 scale is rounded to FP32 (nearest even), the value then used.
    q = lp.mx.quantize(x, "nvfp4", tensor_scale=0.1)
    assert q.tensor_scale == float(np.float32(0.1)) != 0.1
    assert lp.mx.quantize(x, "nvfp4", tensor_scale=np.float32(0.1)).tensor_scale == q.tensor_scale
    assert np.array_equal(q.codes, lp.mx.quantize(x, "nvfp4", tensor_scale=q.tensor_scale).codes)


def test_matmul_needs_block_scaled_operands():  # R3-08
    b = lp.mx.quantize(np.ones((64, 2)), "mxfp4", axis=0)
    with pytest.raises(TypeError, match=r"BlockScaled \(quantize them with lp.mx.quantize\)"):
        lp.mx.matmul(np.ones((2, 64)), b)
    with pytest.raises(TypeError, match="got list for b"):
        lp.mx.matmul(b, [[1.0]])


@pytest.mark.parametrize("scheme", list(lp.mx.SCHEMES))
def test_empty_leading_axis(scheme):  # R3-07
    block = lp.mx.SCHEMES[scheme][2]
    for shape, axis in (((0, 40), 1), ((0, 40), 0), ((3, 0), 1), ((2, 0, 5), 2)):
        q = lp.mx.quantize(np.zeros(shape), scheme, axis=axis)
        n = shape[axis]
        assert q.dequantize().shape == shape and q.dequantize().size == 0
        assert q.codes.shape[-1] == -(-n // block) * block
        assert q.scale_codes.shape[-1] == -(-n // block)


# -- E8M0 scales beyond E8M0's range (R3-09) -------------------------------------------------

def _floor_log2(f):
    e = f.numerator.bit_length() - f.denominator.bit_length()
    return e - 1 if Fraction(2) ** e > f else e


def _ceil_log2(f):
    e = _floor_log2(f)
    return e if Fraction(2) ** e == f else e + 1


def e8m0_scale_oracle(amax, rule, top=448.0, emax=8):
    """The rule's exponent from exact (Fraction) arithmetic, clipped to E8M0's
    [-127, 127] (OCP MX: the scale saturates)."""
    q = Fraction(amax) / Fraction(top)
    if rule == "floor":
        j = _floor_log2(Fraction(amax)) - emax
    elif rule == "ceil":
        j = _ceil_log2(q)
    elif rule == "rceil":
        r = reference_round(q, "fp32")
        j = -1000 if r == 0 else 1000 if r == math.inf else _ceil_log2(Fraction(r))
    else:               # the nearest power of two (ties to the even E8M0 code)
        f = _floor_log2(q)
        lo = Fraction(2) ** f
        j = f + 1 if q > lo * 3 / 2 or (q == lo * 3 / 2 and (f + 127) % 2) else f
    return 2.0 ** min(max(j, -127), 127)


@pytest.mark.parametrize("rule", list(lp.mx.SCALE_RULES))
def test_scales_saturate_at_e8m0s_range(rule):
    lo, hi = 448 * 2.0**-127, 448 * 2.0**127
    amaxes = [5e-324, 1e-310, 1e-300, lo / 2, lo, lo * (1 + 2**-52), lo * 1.7, 1.0, 957.0,
              hi / 1.7, hi, hi * (1 + 2**-52), 1e42, 1e300, 1.7e308]
    for amax in amaxes:
        q = lp.mx.quantize([amax] + [0.0] * 31, "mxfp8_e4m3", scale_rule=rule)
        assert q.scales[0] == e8m0_scale_oracle(amax, rule), amax
    big = lp.mx.quantize([1e42] + [0.0] * 31, "mxfp8_e4m3", scale_rule=rule)
    assert big.dequantize()[0] == 448 * 2.0**127           # saturated, as floor does


# -- NVFP4's rounding and range (R3-10, R3-11) -----------------------------------------------

def nvfp4_oracle(x, ts, saturate=True):
    """NVFP4 elements of one block of 16 by exact arithmetic: the UE4M3 scale of
    amax / 6 / ts, the encode scale fl32(1 / (scale * ts)) clamped to FP32's max, then
    one rounding of x * enc to FP32 and one to E2M1."""
    amax = max(abs(Fraction(v)) for v in x)
    s = reference_round(amax / 6 / Fraction(ts), "ue4m3", saturate=True)
    if s == 0:
        return s, [0.0] * len(x)
    enc = min(reference_round(1 / (Fraction(s) * Fraction(ts)), "fp32"), F32_MAX)
    y = [reference_round(Fraction(v) * Fraction(enc), "fp32") for v in x]
    return s, [reference_round(Fraction(v), "e2m1", saturate=saturate)
               if math.isfinite(v) else math.copysign(6.0, v) for v in y]


F32_MAX = float(np.finfo(np.float32).max)


def test_nvfp4_elements_are_rounded_once():  # R3-10
    ts = float(lp.round(1 / 5, "fp32"))               # enc = fl32(1 / (1 * ts)) = 5
    x = np.array([6 * ts, 1.0000000476837159] + [0.0] * 14)
    q = lp.mx.quantize(x, "nvfp4", tensor_scale=ts)
    assert q.scales[0] == 1.0
    # x[1] * 5 = 5.0000002384185795 exactly lies above FP32's tie 5 + 2**-22, so FP32
    # rounds it up, and E2M1 (between 4 and 6) then up to 6.
    assert q.elements[1] == 6.0 == nvfp4_oracle(x, ts)[1][1]
    rng = np.random.default_rng(10)
    for _ in range(20):                               # float64 data with 53-bit values
        x = rng.standard_normal(16) * 2.0 ** rng.integers(-8, 8)
        ts = float(np.float32(rng.uniform(0.01, 1.0)))
        q = lp.mx.quantize(x, "nvfp4", tensor_scale=ts)
        s, el = nvfp4_oracle(x, ts)
        assert q.scales[0] == s and q.elements.tolist() == el


def test_nvfp4_tiny_and_huge_data():  # R3-11
    # Tiny: the tensor scale stops at 2**-128 and the encode scale at FP32's max, as
    # Transformer Engine clamps them; the block's largest values survive.
    x = np.linspace(1e-40, 1.6e-39, 16)
    q = lp.mx.quantize(x, "nvfp4")
    assert q.tensor_scale == 2.0**-128
    s, el = nvfp4_oracle(x, 2.0**-128)
    assert q.scales[0] == s and q.elements.tolist() == el
    assert np.all(np.isfinite(q.dequantize())) and q.dequantize().max() > 0
    # Huge: the tensor scale stops at FP32's max; the elements saturate.
    q = lp.mx.quantize(np.full(16, 1e300), "nvfp4")
    assert q.tensor_scale == F32_MAX
    assert np.all(q.dequantize() == 6 * 448 * F32_MAX)
    # A given tensor scale whose products overflow FP32: saturated, not zero.
    q = lp.mx.quantize(np.array([1e300, -1e300] + [1.0] * 14), "nvfp4", tensor_scale=1.0)
    assert q.dequantize()[:2].tolist() == [2688.0, -2688.0]


# -- chunked products (R3-12) ----------------------------------------------------------------

def unchunked_matmul(a, b, model="b200/tcgen05", c=None):
    """mx.matmul's semantics before chunking: every output as one row of the
    instruction model over all of (M * N) gathered rows at once."""
    from lowprec.formats import FP32
    from lowprec.tensorcore.catalogue import resolve_model
    ins = resolve_model(model, "model").instruction(a.elem, b.elem, scale=a.scale_fmt,
                                                     scale_block=a.block)
    M, N = a.shape[0], b.shape[1]
    ea, eb, sa, sb = a.elements, b.elements, a.scales, b.scales
    pad = (-ea.shape[1]) % ins.block
    ea, eb = (np.pad(e, ((0, 0), (0, pad))) for e in (ea, eb))
    sa, sb = (np.pad(s, ((0, 0), (0, pad // a.block)), constant_values=1.0) for s in (sa, sb))
    alpha = reference_round(Fraction(a.tensor_scale) * Fraction(b.tensor_scale), "fp32")
    c0 = np.zeros(M * N)
    if c is not None and alpha == 1.0:
        c0 = np.broadcast_to(lp.round(c, "fp32"), (M, N)).reshape(-1).copy()
    with np.errstate(all="ignore"):
        d = ins.dot(np.repeat(ea, N, axis=0), np.tile(eb, (M, 1)), c0, a.elem, b.elem, FP32,
                    np.repeat(sa, N, axis=0), np.tile(sb, (M, 1)))
        if alpha != 1.0:
            d = lp.round(alpha * d, "fp32")
            if c is not None:
                d = lp.add(d, lp.round(np.broadcast_to(c, (M, N)).reshape(-1), "fp32"), "fp32")
    return np.asarray(d).reshape(M, N)


def adversarial(rng, shape):
    """Magnitudes over 2**±40, zeros, and NaN, inf and huge values in some blocks."""
    x = rng.standard_normal(shape) * 2.0 ** rng.integers(-40, 40, shape)
    x[rng.random(shape) < 0.2] = 0.0
    flat = x.reshape(-1)
    for v, i in zip((np.nan, np.inf, -np.inf, 1e30), rng.integers(0, flat.size, 4)):
        flat[i] = v
    return x


@pytest.mark.parametrize("scheme, model", [("mxfp8_e4m3", "b200/tcgen05"),
                                           ("mxfp8_e5m2", "rtx50/mma"),
                                           ("mxfp4", "b200/tcgen05"), ("nvfp4", "rtx50/mma")])
def test_chunked_matmul_is_bit_identical(scheme, model, monkeypatch):
    rng = np.random.default_rng(12)
    (M, K, N) = (5, 100, 7)
    cases = [(rng.standard_normal((M, K)), rng.standard_normal((K, N))),
             (adversarial(rng, (M, K)), adversarial(rng, (K, N)))]
    c = rng.standard_normal((M, N))
    for chunk in ((1, 1), (2, 3), (3, 7), (5, 7)):     # ragged chunks, and one of all
        monkeypatch.setattr(lp.mx, "_output_chunk", lambda *args, chunk=chunk: chunk)
        for x, y in cases:
            a, b = lp.mx.quantize(x, scheme, axis=1), lp.mx.quantize(y, scheme, axis=0)
            for cc in (None, c):
                want = unchunked_matmul(a, b, model, cc)
                got = lp.mx.matmul(a, b, model=model, c=cc)
                assert np.array_equal(got.view(np.int64), want.view(np.int64))


@pytest.mark.parametrize("scheme", ["mxfp8_e4m3", "nvfp4"])
def test_matmul_memory_stays_within_the_bound(scheme, monkeypatch):
    # With a bound of 256 KiB, the product of 32 x 256 by 256 x 24 (the unchunked one
    # gathered over 3 MiB) stays within it plus the operands' decoded values.
    import tracemalloc
    bound = 2**18
    monkeypatch.setattr(lp.tensorcore.driver, "MEMORY_BOUND", bound)
    rng = np.random.default_rng(3)
    M, K, N = 32, 256, 24
    a = lp.mx.quantize(rng.standard_normal((M, K)), scheme, axis=1)
    b = lp.mx.quantize(rng.standard_normal((K, N)), scheme, axis=0)
    tracemalloc.start()
    try:
        lp.mx.matmul(a, b)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    operands = 2 * 8 * (M + N) * K          # decoded elements and their temporaries
    assert peak <= bound + operands, peak


def nvfp4_codes_by_arith(x, q, mode="rne", rng=None):
    """NVFP4's element codes recomputed from the stored scales with `lp.mul` (the
    correctly rounded FP32 product of any float64 values) and `lp.encode`."""
    v = q.blocked(x)
    scale = q.scales
    with np.errstate(divide="ignore", over="ignore"):
        enc = np.minimum(lp.round(1.0 / (scale * q.tensor_scale), "fp32"), F32_MAX)
    enc = np.where(scale > 0, enc, 0.0)
    with np.errstate(all="ignore"):
        y = lp.mul(v, enc[..., None], "fp32")
    y = np.where(np.isnan(scale)[..., None], 0.0, y)
    return lp.encode(y, "e2m1", mode, rng=rng, saturate=True).reshape(q.codes.shape)


def few_bit_operands(rng, shape):
    """Data the FP32 product of NVFP4 quantization takes as float64 products: BF16,
    FP16 and FP32 values over a wide range, float64 subnormals of few bits, values
    on the FP32 rounding midpoints once scaled, ±0, and NaN and inf blocks."""
    x = np.asarray(lp.round(rng.standard_normal(shape) * 2.0 ** rng.integers(-60, 60, shape),
                            "fp32"))
    flat = x.reshape(-1)
    flat[:16] = np.asarray(lp.round(flat[:16], "bf16"))
    flat[16:32] = np.asarray(lp.round(flat[16:32] * 2.0**-40, "fp16"))
    flat[32:48] = 2.0**-1060 * rng.integers(-7, 8, 16)           # subnormal float64
    flat[48:64] = (1 + 2.0**-24 * (2 * rng.integers(0, 2**20, 16) + 1)) * 2.0**-3
    flat[64:80] = [0.0, -0.0] * 8
    flat[80], flat[100] = np.nan, -np.inf
    return x


@pytest.mark.parametrize("tensor_scale", [None, 2.0**-128, 1e-30, 1.0, 3e38])
def test_nvfp4_fp32_product_equals_the_correctly_rounded_one(tensor_scale):
    """The FP32 product v * encode_scale of NVFP4 quantization, taken as one float64
    product where v has few bits, equals `lp.mul`'s correctly rounded product on
    few-bit and full float64 data (the general path), with tensor scales that make
    products overflow FP32 or underflow, in both rounding modes of the recipe."""
    rng = np.random.default_rng(21)
    shape = (6, 80)
    for x in (few_bit_operands(rng, shape), rng.standard_normal(shape) * 1e3,
              np.asarray(lp.round(rng.standard_normal(shape), "bf16"))):
        for axis in (0, 1):
            for mode in ("rne", "sr"):
                with np.errstate(all="ignore"):
                    q = lp.mx.quantize(x, "nvfp4", axis=axis, tensor_scale=tensor_scale,
                                       mode=mode, rng=5)
                # The same draws for "sr": one per element, in the blocked order.
                want = nvfp4_codes_by_arith(x, q, mode, rng=5)
                assert np.array_equal(q.codes, want)


def test_fp32_product_helper_on_edges():
    """`_times_fp32` against `lp.mul` and Fraction on products at FP32's overflow
    threshold, its subnormal range and float64's, and exact midpoints."""
    big = float(np.finfo(np.float32).max)
    v = np.array([big, -big, 2.0**-149, 2.0**-150, 3 * 2.0**-151, 2.0**-1074 * 2**23,
                  1 + 2.0**-24, -(1 + 3 * 2.0**-24), 0.0, -0.0, 2.0**-1022, 6.0,
                  # Full float64 values whose float64 product with 1 - 2**-24 is an
                  # FP32 midpoint the exact product is not on: rounding twice errs.
                  float.fromhex("0x1.a30feca30fecap+0"), float.fromhex("0x1.82d9d882d9d88p+0"),
                  -float.fromhex("0x1.4ecdea4ecdea5p+0")])
    for e in (1.0, 1 - 2.0**-24, 1 + 2.0**-23, 0.5, 2.0**-126, 2.0**100,
              2.0**126 * (2 - 2.0**-23)):
        with np.errstate(all="ignore"):
            got = lp.mx._times_fp32(v, np.float64(e))
            want = lp.mul(v, e, "fp32")
        assert np.array_equal(got.view(np.int64), np.asarray(want).view(np.int64)), e
        for g, x in zip(got, v):
            assert g == reference_round(Fraction(x) * Fraction(e), "fp32")


@pytest.mark.parametrize("scheme", ["mxfp8_e4m3", "mxfp4", "mxint8", "nvfp4"])
@pytest.mark.parametrize("mode", ["rne", "rz", "sr"])
def test_quantize_does_not_depend_on_the_memory_layout(scheme, mode):
    """Blocks cut along any axis of transposed, reversed and strided views quantize
    as the C-ordered copy with that axis last does (the blocked layout), bit for bit:
    codes, scales, tensor scale, flags, and the stochastic draws (random and
    adversarial data, padded blocks)."""
    rng = np.random.default_rng(31)
    base = [rng.standard_normal((40, 3, 37)), adversarial(rng, (40, 3, 37))]
    for x in base:
        for v in (x, x.transpose(2, 0, 1), x[::-1, :, ::2], x.transpose(1, 2, 0)[:, ::-1]):
            for axis in range(v.ndim):
                last = np.ascontiguousarray(np.moveaxis(v, axis, -1))
                with lp.flags() as f1, np.errstate(all="ignore"):
                    q = lp.mx.quantize(v, scheme, axis=axis, mode=mode, rng=3)
                with lp.flags() as f2, np.errstate(all="ignore"):
                    want = lp.mx.quantize(last, scheme, axis=-1, mode=mode, rng=3)
                assert q.codes.tobytes() == want.codes.tobytes()
                assert q.codes.shape == want.codes.shape
                assert np.array_equal(q.scale_codes, want.scale_codes)
                assert q.tensor_scale == want.tensor_scale and q.shape == v.shape
                assert repr(f1) == repr(f2)
                back = np.moveaxis(want.dequantize(), -1, axis)
                assert np.array_equal(q.dequantize(), back, equal_nan=True)


def _edge_values(fmt):
    """Every value of ``fmt`` (its patterns decoded), the midpoints between
    neighbours and their float64 neighbours, and values beyond max, below the least
    subnormal, signed zeros, infinities and NaN."""
    v = lp.decode(np.arange(1 << fmt.bits), fmt)
    v = np.unique(v[np.isfinite(v)])
    mid = (v[1:] + v[:-1]) / 2
    edges = np.concatenate([v, mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf),
                            [fmt.max * 1.01, -fmt.max * 3, 2.0**-40, -2.0**-40, 1e300,
                             0.0, -0.0, np.inf, -np.inf]])
    return np.concatenate([edges, [np.nan, -np.nan]]) if fmt.has_nan else edges


@pytest.mark.parametrize("fmt", [lp.FP8_E4M3, lp.FP8_E5M2, lp.FP6_E3M2, lp.FP6_E2M3,
                                 lp.FP4_E2M1])
@pytest.mark.parametrize("mode", ["rne", "sr"])
@pytest.mark.parametrize("saturate", [True, False])
def test_element_patterns_equal_encodes(fmt, mode, saturate):
    # quantize's patterns by table against lp.encode, the reference: same patterns,
    # same draws (seeded; the generator advanced alike) and the same flags.
    from lowprec.mx import _encode
    rng = np.random.default_rng(5)
    x = np.concatenate([_edge_values(fmt), rng.standard_normal(3000) * fmt.max / 4,
                        rng.standard_normal(500) * fmt.smallest_normal])
    x = rng.permutation(x).reshape(-1, 7) if x.size % 7 == 0 else rng.permutation(x)
    g1, g2 = np.random.default_rng(9), np.random.default_rng(9)
    with lp.flags() as f1:
        want = lp.encode(x, fmt, mode, rng=g1 if mode == "sr" else None, saturate=saturate)
    with lp.flags() as f2:
        got = _encode(x, fmt, mode, g2 if mode == "sr" else None, saturate)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert f1.as_dict() == f2.as_dict()
    assert g1.integers(1 << 62) == g2.integers(1 << 62)


def test_one_scale_rule_by_default():
    """`quantize`, the training recipes and the block widget start from the same rule:
    rceil, whose scale keeps the block's largest value within the element's range."""
    import inspect

    from lowprec.widgets import state, static
    default = inspect.signature(lp.mx.quantize).parameters["scale_rule"].default
    assert default == "rceil"
    assert lp.amp.BlockScaling("mxfp8_e4m3").scale_rule == default == lp.amp.MXFP8.scale_rule
    assert inspect.signature(static.block_html).parameters["rule"].default == default
    # 957 = 448 * 2.136...: the least power of two keeping it in range is 4, so no clamp.
    q = lp.mx.quantize(block(957.0), "mxfp8_e4m3")
    assert q.scales[0] == 4.0 and not (np.abs(block(957.0)) > q.limits).any()
    assert state.block_state([957.0], "mxfp8_e4m3")["rules"][default]["clamped"] == [False]


# -- per-tensor scaled FP8 --------------------------------------------------------------

def _tensor_scale_f32(amax, fp8_max):
    """Transformer Engine's scale from one amax, in NumPy float32 arithmetic."""
    a = np.float32(amax)
    if not (a > 0 and np.isfinite(a)):
        return 1.0
    with np.errstate(over="ignore"):
        s = np.float32(fp8_max) / a
    return float(np.finfo(np.float32).max) if np.isinf(s) else float(s)


def _per_tensor_data():
    rng = np.random.default_rng(7)
    tiny = np.full((3, 4), 1e-40)                       # 448 / 1e-40 overflows FP32
    special = rng.standard_normal((3, 4))
    special[0, 0], special[1, 2] = np.inf, np.nan
    return [rng.standard_normal((5, 6)) * 10.0 ** rng.integers(-8, 8),
            rng.standard_normal((2, 9)).astype(np.float32).astype(np.float64) * 3e4,
            np.zeros((2, 3)), tiny, special, np.array([[2.0**-140, -(2.0**-149)]])]


@requires_ml_dtypes
@pytest.mark.parametrize("scheme", ["fp8_e4m3", "fp8_e5m2"])
def test_per_tensor_elements_are_fp8_of_x_times_the_amax_scale(scheme):
    dtype = {"fp8_e4m3": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2}[scheme]
    top = float(ml_dtypes.finfo(dtype).max)
    for x in _per_tensor_data():
        q = lp.mx.quantize(x, scheme)
        s = _tensor_scale_f32(np.max(np.abs(x)), top)
        # fl32(x * s) by Fraction (x is float64), saturated, then ml_dtypes' RNE to FP8.
        y = np.array([float(np.float32(float(Fraction(v) * Fraction(s)))) if np.isfinite(v)
                      else v * s for v in x.ravel()]).reshape(x.shape)
        # Finite values saturate; an inf becomes E4M3's max (it has no inf) and stays
        # inf in E5M2 (DelayedScaling's rule).
        inf_to = top if scheme == "fp8_e4m3" else np.inf
        with np.errstate(invalid="ignore"):
            y = np.where(np.isinf(y), np.sign(y) * inf_to, np.clip(y, -top, top))
            want = y.astype(dtype).astype(np.float64)
        np.testing.assert_array_equal(q.elements, want)
        assert q.tensor_scale == float(np.float32(1.0) / np.float32(s))
        np.testing.assert_array_equal(q.dequantize(), want * q.tensor_scale)


def _delayed(x, w, dy, bias, model, fp8_format):
    """forward, wgrad, dgrad of `DelayedScaling(history=1)` on its second step over the
    same data: the scales then come from exactly these tensors' amaxes."""
    q = lp.amp.DelayedScaling(fp8_format=fp8_format, history=1).quantizer()
    with lp.context(matmul=model):
        for _ in range(2):
            y = q.forward(x, w, bias)
            dw, dx = q.backward(dy, True)
    return y, dw, dx, q


@pytest.mark.parametrize("model", ["exact", "fp32", "h100", "h100/wgmma", "b200/tcgen05"])
@pytest.mark.parametrize("fp8_format", ["e4m3", "hybrid"])
def test_per_tensor_products_equal_delayed_scaling_with_a_history_of_one(model, fp8_format):
    rng = np.random.default_rng(len(model))
    x = lp.tensor(rng.standard_normal((6, 40)) * 1e-3, "fp32")
    w = lp.tensor(rng.standard_normal((40, 5)) * 30.0, "bf16")
    dy = lp.tensor(rng.standard_normal((6, 5)) * 2.0**-20, "fp32")
    bias = lp.tensor(rng.standard_normal(5), "fp32")
    y, dw, dx, q = _delayed(x, w, dy, bias, model, fp8_format)
    g = "fp8_e5m2" if fp8_format == "hybrid" else "fp8_e4m3"
    qx, qw, qd = (lp.mx.quantize(t, s) for t, s in ((x, "fp8_e4m3"), (w, "e4m3"), (dy, g)))
    assert [1 / qx.tensor_scale, 1 / qw.tensor_scale] != [1.0, 1.0]
    qxt = lp.mx.quantize(np.asarray(x.values).T, "fp8_e4m3")
    qwt = lp.mx.quantize(np.asarray(w.values).T, "fp8_e4m3")
    np.testing.assert_array_equal(lp.mx.matmul(qx, qw, model=model, c=bias.values), y.values)
    np.testing.assert_array_equal(lp.mx.matmul(qxt, qd, model=model), dw.values)
    np.testing.assert_array_equal(lp.mx.matmul(qd, qwt, model=model), dx.values)
    assert q.scales["x"] == lp.mx.amax_scale(np.abs(x.values).max(), lp.FP8_E4M3)


def test_per_tensor_and_block_refusals_name_the_way_out():
    a = lp.mx.quantize(np.ones((2, 32)), "fp8_e4m3")
    b = lp.mx.quantize(np.ones((32, 2)), "mxfp8_e4m3", axis=0)
    with pytest.raises(ValueError, match="quantize both per tensor"):
        lp.mx.matmul(a, b)
    with pytest.raises(ValueError, match="DelayedScaling"):
        lp.mx.quantize(np.ones(3), "fp8_e4m3", tensor_scale=2.0)
    c = lp.mx.quantize(np.ones((2, 32)), "mxfp8_e4m3", axis=1)
    with pytest.raises(ValueError, match="use model='b200/tcgen05' or 'rtx50/mma'"):
        lp.mx.matmul(c, b, model="h100/wgmma")
    with pytest.raises(ValueError, match="use model='b200/tcgen05'"):
        lp.mx.matmul(c, b, model="fp32")
    with pytest.raises(ValueError, match="quantize a with axis=1 and b with axis=0"):
        lp.mx.matmul(c, lp.mx.quantize(np.ones((32, 2)), "mxfp8_e4m3", axis=1))
    with pytest.raises(ValueError, match="model='exact'"):
        lp.mx.matmul(lp.mx.quantize(np.ones((2, 32)), "mxint8", axis=1),
                     lp.mx.quantize(np.ones((32, 2)), "mxint8", axis=0))


def test_unscaled_fp8_underflows_where_per_tensor_scaling_keeps_the_values():
    x = np.random.default_rng(3).standard_normal((16, 16)) * 1e-6
    with lp.flags() as unscaled:
        lp.round(x, "e4m3")
    with lp.flags() as scaled:
        q = lp.mx.quantize(x, "e4m3")
    assert unscaled.underflow > 0 and scaled.underflow == 0
    assert np.count_nonzero(q.elements) == x.size
