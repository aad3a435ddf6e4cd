"""Block-scaled formats: quantize/dequantize against vectors computed by hand from the
OCP MX v1.0 rules and NVFP4's recipe, and block-scaled products against exact sums."""

import numpy as np
import pytest

import lowprec as lp
from peers import ml_dtypes


def block(first, rest=1.0, n=32):
    return [first] + [rest] * (n - 1)


def test_ocp_floor_rule_clamps_957_to_896():
    # floor(log2 957) = 9, emax(E4M3) = 8: X = 2, 957 / 2 = 478.5 > 448 -> 448 -> 896.
    q = lp.mx.quantize(block(957.0), "mxfp8_e4m3")
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
    q = lp.mx.quantize(x, scheme)
    amax = np.abs(x).max(axis=1)
    want = [2.0 ** (int(np.floor(np.log2(m))) - emax) for m in amax]
    assert q.scales[:, 0].tolist() == want


def test_fp4_floor_rule_clips_the_blocks_whose_maximum_passes_six():
    # amax / X lies in [4, 8) and E2M1 stops at 6: a block clips when amax's
    # significand exceeds 1.5, and its maximum then decodes as 6 X. (For N(0, 1) blocks
    # of 32 that is about 30% of them; the share depends on the data.)
    x = np.random.default_rng(4).standard_normal((20000, 32))
    q = lp.mx.quantize(x, "mxfp4")
    amax = np.abs(x).max(axis=1)
    X = q.scales[:, 0]
    sig = amax / 2.0 ** np.floor(np.log2(amax))
    clipped = amax / X > 6
    assert np.array_equal(clipped, sig > 1.5)
    assert np.array_equal(np.abs(q.dequantize()).max(axis=1)[clipped], 6 * X[clipped])
    assert 0.25 < clipped.mean() < 0.45


def test_mxint8_elements_are_sixty_fourths():
    q = lp.mx.quantize(block(1.99, 0.5), "mxint8")
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
    q = lp.mx.quantize(x, "mxfp8_e5m2", axis=0)
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
