"""Training with scaled operands (lp.amp.DelayedScaling, MXFP8, NVFP4), and block-scaled
arrays as Tensors: each against a reference written here from the recipe's rules, on
NumPy's float32 arithmetic, ml_dtypes' FP8 casts and Fraction sums."""

import math
from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp
from lowprec.amp.scaling import fractions
from lowprec.testing import reference_round
from peers import ml_dtypes, requires_ml_dtypes

f32 = np.float32


# -- DelayedScaling: the scale from the history -------------------------------------------

def te_scale(history, previous, fp8_max=448.0, margin=0, algorithm="max"):
    """Transformer Engine's rule, in float32 arithmetic."""
    amax = max(history) if algorithm == "max" else history[-1]
    if not (amax > 0 and math.isfinite(amax)):
        return previous
    return float(f32(f32(fp8_max) / f32(amax)) / f32(2.0**margin))


@pytest.mark.parametrize("algorithm", ["max", "most_recent"])
@pytest.mark.parametrize("margin", [0, 1, 3])
def test_delayed_scale_matches_float32_rule(algorithm, margin):
    r = lp.amp.DelayedScaling(margin=margin, algorithm=algorithm)
    rng = np.random.default_rng(margin)
    for _ in range(200):
        h = list(np.abs(rng.standard_normal(4)) * 10.0 ** rng.integers(-6, 6))
        for kind, top in (("x", 448.0), ("dy", 57344.0)):
            assert r.scale(h, 7.0, kind) == te_scale(h, 7.0, top, margin, algorithm)
    assert r.scale([0.0, 0.0], 5.0) == 5.0 and r.scale([1.0, math.inf], 5.0) == 5.0
    if algorithm == "max":                     # NaNs ignored, as fmaxf ignores them
        assert r.scale([math.nan, 2.0, math.nan], 5.0) == te_scale([2.0], 5.0, 448.0, margin)


def test_delayed_scaling_uses_earlier_steps_only():
    """Step t quantizes with the scale from the amaxes of steps < t; the window drops
    old amaxes; a zero amax keeps the scale."""
    q = lp.amp.DelayedScaling(history=2).quantizer()
    w = lp.tensor(np.ones((4, 2)), "bf16")
    seen = []
    for amax in (2.0, 8.0, 0.5, 0.0, 0.25):
        x = lp.tensor(np.full((3, 4), amax), "bf16")
        q.forward(x, w, None)
        seen.append(q.scales["x"])
    # step 0: 1; step 1: 448/2; step 2: 448/max(2, 8); step 3: 448/max(8, .5);
    # step 4: 448/max(0.5, 0) (the window of two drops 8).
    assert seen == [1.0, te_scale([2.0], 1), te_scale([2.0, 8.0], 1), te_scale([8.0, 0.5], 1),
                    te_scale([0.5, 0.0], 1)]


def ref_fp8(v, scale, fmt):
    """``fp8(fl32(v * scale))`` with saturation, by NumPy float32 and ml_dtypes."""
    dtype = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}[fmt]
    top = float(ml_dtypes.finfo(dtype).max)
    s = (f32(v) * f32(scale)).astype(np.float64)
    return np.clip(s, -top, top).astype(np.float32).astype(dtype).astype(np.float64)


def exact_product(a, b):
    """Exact a @ b (plain float64 arrays of exact values) as Fractions."""
    return [[sum(Fraction(float(a[i, k])) * Fraction(float(b[k, j])) for k in range(a.shape[1]))
             for j in range(b.shape[1])] for i in range(a.shape[0])]


@requires_ml_dtypes
@pytest.mark.oracle
def test_delayed_scaling_products_match_reference():
    """forward, wgrad and dgrad of a Linear under FP8 delayed scaling, with the exact
    accumulation model: the scales from the amaxes this test feeds (Transformer Engine's
    rule in float32, E5M2's max for the gradients), the quantized operands by
    ml_dtypes, the exact sum rounded once to FP32 (Fraction), times
    fl32(scale_inv_a * scale_inv_b) in float32, the bias added in float32 (FP32
    compute, so that every bit of the FP32 result shows). Each gradient holds a value
    2**-26 times its largest: E5M2 keeps it as a normal only with E5M2's own max in the
    scale."""
    rng = np.random.default_rng(1)
    layer = lp.nn.Linear(5, 3, rng=2)
    layer.weight.value = lp.tensor(rng.standard_normal((5, 3)), "fp32")
    layer.bias.value = lp.tensor(rng.standard_normal(3), "fp32")
    layer.quantizer = lp.amp.DelayedScaling().quantizer()
    w = layer.weight.value.values
    seen = {"x": [0.0], "w": [0.0], "dy": [0.0]}          # the histories start as zeros
    for step in range(4):
        x = lp.tensor(rng.standard_normal((4, 5)) * 100.0 ** (step - 1), "fp32")
        d = rng.standard_normal((4, 3)) * 10.0 ** (-step)
        d[0, 0] = 2.0**-26 * np.abs(d).max()
        dy = lp.tensor(d, "fp32")
        sx, sw = te_scale(seen["x"], 1.0), te_scale(seen["w"], 1.0)
        sd = te_scale(seen["dy"], 1.0, fp8_max=57344.0)
        with lp.context(matmul="exact"):
            y = layer.forward(x)
            dx = layer.backward(dy)
        for k, v in (("x", x.values), ("w", w), ("dy", dy.values)):
            seen[k].append(float(np.abs(v).max()))
        qx, qw, qd = ref_fp8(x.values, sx, "e4m3"), ref_fp8(w, sw, "e4m3"), ref_fp8(
            dy.values, sd, "e5m2")
        inv = {k: f32(1) / f32(s) for k, s in (("x", sx), ("w", sw), ("dy", sd))}

        def scaled(a, b, ka, kb, c=None, inv=inv):
            acc = np.array([[float(reference_round(v, "fp32")) for v in row]
                            for row in exact_product(a, b)], dtype=np.float32)
            out = acc * (inv[ka] * inv[kb])
            return out if c is None else out + c.astype(np.float32)

        assert np.array_equal(y.values, scaled(qx, qw, "x", "w", layer.bias.value.values))
        assert np.array_equal(layer.weight.grad.values, scaled(qx.T, qd, "x", "dy"))
        assert np.array_equal(dx.values, scaled(qd, qw.T, "dy", "w"))


def test_delayed_scaling_counts_a_clipped_tensor():
    q = lp.amp.DelayedScaling().quantizer()
    w = lp.tensor(np.eye(2), "fp32")
    q.forward(lp.tensor([[1.0, 0.5]], "fp32"), w, None)       # scale 1: nothing clipped
    q.forward(lp.tensor([[1000.0, 1e-9]], "fp32"), w, None)   # scale 448: 1000 * 448 clipped
    f = fractions(q.counts.take())
    assert f["x"] == {"blocks_clipped": 0.5, "clipped": 0.25, "flushed": 0.25}  # 1e-9*448 -> 0
    assert math.isnan(f["dy"]["flushed"])
    assert math.isnan(fractions(q.counts.take())["x"]["clipped"])   # counts start again


def per_tensor_counts_by_elementwise_rule(x, s, fmt):
    """The six counts of one per-tensor FP8 quantization with scale ``s``, value by
    value: clipped where |fl32(x * s)| exceeds the format's max, flushed where a
    nonzero x quantizes to zero (ml_dtypes' casts, saturated, as the oracle)."""
    scaled = (x * s).astype(np.float32).astype(np.float64)
    e4m3 = fmt == lp.FP8_E4M3
    dtype = ml_dtypes.float8_e4m3fn if e4m3 else ml_dtypes.float8_e5m2
    top = 448.0 if e4m3 else 57344.0
    q = np.clip(scaled, -top, top).astype(dtype).astype(np.float64)
    clipped = np.abs(scaled) > top
    nonzero = x != 0
    return [1, int(clipped.any()), x.size, clipped.sum(), nonzero.sum(),
            (nonzero & (q == 0)).sum()]


@requires_ml_dtypes
@pytest.mark.parametrize("fp8_format", ["hybrid", "e4m3"])
def test_per_tensor_counts_equal_the_elementwise_rule(fp8_format):
    """DelayedScaling's counts (clipped tensors and values, flushed values) equal the
    value-by-value rule over steps whose scales come from earlier amaxes, on random
    and adversarial operands: values clipped or not by a hair, flushed, zeros, NaN
    and inf."""
    rng = np.random.default_rng(5)
    r = lp.amp.DelayedScaling(fp8_format=fp8_format, history=2).quantizer()
    w = lp.tensor(np.ones((3, 1)), "fp32")
    fmts = lp.amp.DelayedScaling(fp8_format=fp8_format).formats
    steps = [rng.standard_normal((4, 3)), rng.standard_normal((4, 3)) * 3,
             np.array([[448.0, 449.0, 1e-12], [0.0, -0.0, 2.0], [-3.0, 1e-30, 5.0],
                       [7.0, 1.0, -2.0]]),
             np.array([[np.nan, 1.0, 0.0], [1.0, 1.0, 1.0], [np.inf, 2.0, 0.0],
                       [1.0, 2.0, 3.0]]),
             rng.standard_normal((4, 3)) * 1e3, np.array([[0.0, 0.0, 0.0]] * 4)]
    for x in steps:
        x = np.asarray(lp.round(x, "fp32"))
        r.forward(lp.tensor(x, "fp32"), w, None)
        r.backward(lp.tensor(x[:, :1] * 1e-3, "fp32"), True)
        got = r.counts.take()
        want_x = per_tensor_counts_by_elementwise_rule(x, r.scales["x"], fmts["x"])
        assert got["x"].tolist() == want_x
        dy = np.asarray(lp.round(x[:, :1] * 1e-3, "fp32"))
        want_dy = per_tensor_counts_by_elementwise_rule(dy, r.scales["dy"],
                                                        fmts["dy"])
        assert got["dy"].tolist() == want_dy


# -- block scaling ------------------------------------------------------------------------

def ref_mxfp8(v, axis):
    """MXFP8 E4M3 with the rceil rule along ``axis`` (blocks of 32): the scale
    2**ceil(log2(fl32(amax / 448))), elements cast by ml_dtypes."""
    v = np.moveaxis(np.asarray(v, np.float64), axis, -1)
    out = np.empty_like(v)
    for idx in np.ndindex(v.shape[:-1]):
        row = v[idx]
        for s in range(0, row.size, 32):
            b = row[s:s + 32]
            amax = np.abs(b).max()
            e = -127 if amax == 0 else math.ceil(math.log2(float(f32(amax) / f32(448.0))))
            scale = 2.0**e
            q = np.clip(b / scale, -448, 448).astype(ml_dtypes.float8_e4m3fn)
            out[idx][s:s + 32] = q.astype(np.float64) * scale
    return np.moveaxis(out, -1, axis)


@requires_ml_dtypes
@pytest.mark.oracle
def test_mxfp8_products_quantize_along_each_contraction_axis():
    """Values whose quantized products sum exactly in FP32 (a narrow exponent range),
    so the product's reference is the exact sum of the reference-quantized operands."""
    rng = np.random.default_rng(3)
    n, d_in, d_out = 32, 40, 33
    x = rng.integers(1, 33, (n, d_in)) / 8.0 * rng.choice([-1, 1], (n, d_in))
    w = rng.integers(1, 33, (d_in, d_out)) / 8.0 * rng.choice([-1, 1], (d_in, d_out))
    dy = rng.integers(1, 33, (n, d_out)) / 8.0 * rng.choice([-1, 1], (n, d_out))
    layer = lp.nn.Linear(d_in, d_out, rng=0)
    layer.weight.value = lp.tensor(w, "fp32")
    layer.bias.value = lp.tensor(rng.standard_normal(d_out), "fp32")
    layer.quantizer = lp.amp.MXFP8.quantizer()
    y = layer.forward(lp.tensor(x, "fp32"))
    dx = layer.backward(lp.tensor(dy, "fp32"))
    bias = layer.bias.value.values
    exact = lambda a, b: np.array(exact_product(a, b), dtype=np.float64)  # noqa: E731
    # The exact sums are FP32 values here; the bias is added to them in FP32.
    ref_y = exact(ref_mxfp8(x, 1), ref_mxfp8(w, 0)).astype(np.float32) + bias.astype(f32)
    ref_dw = exact(ref_mxfp8(x.T, 1), ref_mxfp8(dy, 0))
    ref_dx = exact(ref_mxfp8(dy, 1), ref_mxfp8(w.T, 0))
    for got, ref in ((y, ref_y), (layer.weight.grad, ref_dw), (dx, ref_dx)):
        assert np.array_equal(got.values, ref.astype(np.float32).astype(np.float64))
    f = fractions(layer.quantizer.counts.take())
    assert all(f[k]["blocks_clipped"] == 0.0 for k in ("x", "w", "dy"))   # rceil clamps none


def test_floor_rule_clips_and_is_counted():
    """The OCP floor rule on blocks of 32 values of which one is 957 (hand vector: it
    decodes as 896): one block of each such row is clipped."""
    r = lp.amp.BlockScaling("mxfp8_e4m3", scale_rule="floor").quantizer()
    x = np.ones((2, 64))
    x[:, 0] = 957.0
    r.forward(lp.tensor(x, "fp32"), lp.tensor(np.ones((64, 1)), "fp32"), None)
    f = fractions(r.counts.take())
    assert f["x"]["blocks_clipped"] == 0.5 and f["x"]["clipped"] == 2 / 128
    assert f["w"]["blocks_clipped"] == 0.0


def counts_by_elementwise_rule(v, q):
    """The six counts of one quantization from `BlockScaled.limits` and `dequantize`
    (values of the array's shape): the definition the blocked counts must equal."""
    clipped = np.abs(v) > q.limits
    blocks = q.blocked(clipped).any(axis=-1)
    nonzero = v != 0
    return [blocks.size, blocks.sum(), clipped.size, clipped.sum(), nonzero.sum(),
            (nonzero & (q.dequantize() == 0)).sum()]


def adversarial_operand(rng, shape):
    """Normal values, a block's worth of zeros, values far below their block's max
    (flushed), values that clip under the floor rule, NaN and inf, tiny and huge
    blocks."""
    v = rng.standard_normal(shape) * np.exp2(rng.integers(-20, 20, shape))
    flat = v.reshape(-1)
    flat[:32] = 0.0
    flat[40:44] = [957.0, 1e-30, -1e-30, 3.0]
    flat[100], flat[140] = np.nan, -np.inf
    flat[200:216] *= 1e-40
    flat[300:316] *= 1e36
    return v


@pytest.mark.parametrize("scheme,rule", [("mxfp8_e4m3", "floor"), ("mxfp8_e4m3", "rceil"),
                                         ("mxfp4", "even"), ("nvfp4", "floor")])
@pytest.mark.parametrize("shape", [(8, 100), (37, 64)])
def test_block_counts_equal_the_elementwise_rule(scheme, rule, shape):
    """The counts a block-scaled quantizer records for x (along axis 1) and w (along
    axis 0) equal those of the elementwise rule, on random and adversarial operands
    (padded blocks, zeros, flushes, clipping, NaN and inf, extreme scales)."""
    rng = np.random.default_rng(11)
    for v in (rng.standard_normal(shape), adversarial_operand(rng, shape)):
        x, w = v, v.T.copy()
        r = lp.amp.BlockScaling(scheme, scale_rule=rule).quantizer()
        r.forward(lp.tensor(x, "fp32"), lp.tensor(w, "fp32"), None)
        got = r.counts.take()
        for kind, value, axis in (("x", x, 1), ("w", w, 0)):
            value = np.asarray(lp.round(value, "fp32"))
            q = lp.mx.quantize(value, scheme, axis=axis, scale_rule=rule)
            assert got[kind].tolist() == counts_by_elementwise_rule(value, q), kind


def nvfp4_layer(mode, n_in=1):
    layer = lp.nn.Linear(n_in, 16, rng=0)
    layer.weight.value = lp.tensor(np.ones((n_in, 16)), "fp32")
    layer.quantizer = lp.amp.BlockScaling("nvfp4", grad_mode=mode).quantizer(7)
    return layer


C = 2688.0 * 2.0**-20          # the tensor scale C / (6 * 448) = 2**-20 is a power of two


def sr_gradient():
    """A block of 16 gradients per column: one at the block max C, fifteen at 2.5/6 of
    it, where FP4 (times the block's scale C/6) holds 2 and 3."""
    dy = np.full((16, 16), C * 2.5 / 6)
    dy[0, :] = C
    return dy


def test_nvfp4_gradients_stochastically_rounded_are_unbiased():
    """dW = x.T @ dy with x = 1: the column sums of the quantized dy. Nearest-even
    rounds 2.5 down every time; SR sends each of the fifteen to 2 or 3 with probability
    1/2 (variance 1/4 each, in units of C/6), right on average: the mean of 40 draws of
    640 column sums is within 6 standard deviations, the nearest-even sums some 100
    below."""
    dy = sr_gradient()
    exact = dy.sum(axis=0)
    unit = C / 6
    x = lp.tensor(np.ones((16, 1)), "fp32")
    rne = nvfp4_layer("rne")
    rne.forward(x)
    rne.backward(lp.tensor(dy, "fp32"), input_grad=False)
    assert np.allclose(rne.weight.grad.values, exact - 15 * 0.5 * unit, rtol=1e-6)
    sr = nvfp4_layer("sr")
    draws = []
    for _ in range(40):
        sr.forward(x)
        sr.backward(lp.tensor(dy, "fp32"), input_grad=False)
        draws.append(sr.weight.grad.values)
    draws = np.array(draws)                          # (40, 1, 16) column sums
    sigma = np.sqrt(15 * 0.25) * unit / np.sqrt(draws.size)
    assert abs(draws.mean() - exact.mean()) < 6 * sigma + 1e-6 * exact.mean()
    assert len(np.unique(draws)) > 1


def test_nvfp4_rounds_only_the_gradients_stochastically():
    """x and W are rounded to nearest under NVFP4's recipe, dy stochastically in both
    of its products: the forward is the same on every call; the data gradient varies."""
    dy = sr_gradient()
    x = lp.tensor(np.full((16, 16), C * 2.5 / 6), "fp32")
    layer = nvfp4_layer("sr", n_in=16)
    layer.weight.value = lp.tensor(sr_gradient()[:, :16], "fp32")
    ys, dxs = [], []
    for _ in range(5):
        ys.append(layer.forward(x).values)
        dxs.append(layer.backward(lp.tensor(dy, "fp32")).values)
    assert all(np.array_equal(ys[0], y) for y in ys)
    assert not all(np.array_equal(dxs[0], d) for d in dxs)


# -- training under the policies ----------------------------------------------------------

@pytest.mark.parametrize("name", ["fp8-delayed", "mxfp8", "nvfp4"])
def test_train_with_scaled_operands(name):
    data = lp.amp.blobs(48, 8, 3, seed=0)
    model = lp.nn.mlp([8, 16, 3], rng=0)
    h = lp.amp.train(model, data, name, 8, lr=0.3)
    assert h.loss[-1] < h.loss[0] and len(h.quant) == 8
    assert all(layer.quantizer is None for layer in model.layers
               if isinstance(layer, lp.nn.Linear))
    s = h.summary()
    for k in ("x", "w", "dy"):
        assert 0.0 <= s[f"{k}_blocks_clipped"] <= 1.0 and 0.0 <= s[f"{k}_flushed"] <= 1.0
    again = lp.amp.train(lp.nn.mlp([8, 16, 3], rng=0), data, name, 8, lr=0.3)
    assert again.loss == h.loss and again.quant == h.quant        # seeded


def test_named_scaled_policies():
    p = lp.amp.Policy.named("nvfp4")
    assert p.operands == lp.amp.NVFP4 and p.compute == lp.BF16 and p.weights == lp.FP32
    assert lp.amp.Policy("bf16", weights="fp32", loss="fp32",
                         operands=lp.amp.DelayedScaling()).name == "fp8-delayed"
    assert lp.amp.Policy("bf16", weights="fp32", loss="fp32",
                         operands=lp.amp.DelayedScaling(margin=1)).name is None
    assert lp.amp.Policy.named("fp8-delayed").operands.formats["dy"] == lp.FP8_E5M2


def test_scaling_errors():
    with pytest.raises(TypeError, match="operands must be"):
        lp.amp.Policy("bf16", operands="mxfp8")
    with pytest.raises(ValueError, match="fp8_format"):
        lp.amp.DelayedScaling(fp8_format="e5m2")
    with pytest.raises(ValueError, match="algorithm"):
        lp.amp.DelayedScaling(algorithm="mean")
    with pytest.raises(ValueError, match="history"):
        lp.amp.DelayedScaling(history=0)
    with pytest.raises(ValueError, match="scheme"):
        lp.amp.BlockScaling("mxint8")
    with pytest.raises(ValueError, match="scale format"):
        lp.amp.BlockScaling("mxfp8_e4m3", grad_scheme="nvfp4")
    with pytest.raises(ValueError, match="scale_rule"):
        lp.amp.BlockScaling(scale_rule="up")
    with pytest.raises(ValueError, match="grad_mode"):
        lp.amp.BlockScaling(grad_mode="rtz")
    with pytest.raises(RuntimeError, match="before forward"):
        lp.amp.MXFP8.quantizer().backward(lp.tensor(np.ones((2, 2)), "fp32"), True)


# -- block-scaled arrays as Tensors -------------------------------------------------------

@requires_ml_dtypes
@pytest.mark.oracle
def test_block_scaled_as_array_and_tensor():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 40))
    q = lp.mx.quantize(x, "nvfp4")
    # The values rebuilt from the codes by ml_dtypes: E2M1 elements, UE4M3 (= E4M3FN's
    # positive codes) scales per 16, the FP32 tensor scale.
    elems = q.codes.view(ml_dtypes.float4_e2m1fn).astype(np.float64)
    scales = q.scale_codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    rebuilt = (elems * np.repeat(scales, 16, axis=-1) * q.tensor_scale)[:, :40]
    assert np.array_equal(np.asarray(q), rebuilt)
    with pytest.raises(ValueError, match="copy=False"):
        np.asarray(q, copy=False)
    t = lp.tensor(q, "bf16")
    ref = q.dequantize().astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)
    assert t.fmt == lp.BF16 and np.array_equal(t.values, ref)   # exact in float32 first


def test_matmul_of_block_scaled_arrays():
    rng = np.random.default_rng(6)
    a = lp.mx.quantize(rng.standard_normal((4, 64)), "mxfp4", axis=1)
    b = lp.mx.quantize(rng.standard_normal((64, 5)), "mxfp4", axis=0)
    r = lp.matmul(a, b)
    assert r.fmt == lp.FP32
    assert np.array_equal(r.values, lp.mx.matmul(a, b, model="b200/tcgen05"))
    with lp.context(matmul="rtx50/mma"):
        assert np.array_equal(lp.matmul(a, b).values, lp.mx.matmul(a, b, model="rtx50/mma"))
    # FP4 products of a block sum exactly (arXiv 2509.25149: exact 16-element sub-sums)
    exact = np.array(exact_product(a.dequantize(), b.dequantize()), dtype=np.float64)
    assert np.allclose(r.values, exact, rtol=2.0**-22, atol=0)
    with pytest.raises(TypeError, match="block-scaled array only by another"):
        lp.matmul(a, np.ones((64, 5)))
    with pytest.raises(TypeError, match="in_fmt"):
        lp.matmul(a, b, in_fmt="fp16")
    assert lp.matmul(a, b, out_fmt="bf16").fmt == lp.BF16


def test_limits_mark_the_clamped_values():
    x = np.array([957.0] + [1.0] * 31)
    q = lp.mx.quantize(x, "mxfp8_e4m3", scale_rule="floor")  # 957 -> 896
    assert q.limits.tolist() == [896.0] * 32
    assert (np.abs(x) > q.limits).tolist() == [True] + [False] * 31


# -- edge cases ---------------------------------------------------------------------------

def test_a_tiny_amax_gives_fp32_max_not_inf():
    """448 / 1e-37 overflows FP32: the scale is FP32's largest value (Transformer
    Engine's clamp), and the products stay finite."""
    q = lp.amp.DelayedScaling().quantizer()
    w = lp.tensor(np.ones((2, 1)), "fp32")
    for _ in range(2):
        y = q.forward(lp.tensor([[1e-37, 0.0]], "fp32"), w, None)
    assert q.scales["x"] == float(np.finfo(np.float32).max)
    assert np.all(np.isfinite(y.values))
    data = lp.amp.blobs(32, 8, 3, seed=0)
    h = lp.amp.train(lp.nn.mlp([8, 16, 3], rng=0), data, "fp8-delayed", 4, lr=0.3,
                     loss_weight=1e-34)
    assert np.isfinite(h.final_loss)
    assert lp.amp.DelayedScaling(margin=200).scale([1.0], 5.0) == 5.0   # 448/2**200 -> 0


def test_nested_models_and_layers_it_cannot_quantize():
    data = lp.amp.blobs(32, 4, 3, seed=0)
    nested = lp.nn.Sequential(lp.nn.Sequential(lp.nn.Linear(4, 8, rng=0), lp.nn.ReLU()),
                              lp.nn.Linear(8, 3, rng=1))
    h = lp.amp.train(nested, data, "mxfp8", 2, lr=0.3)
    # Both Linears' products counted: the batch of 32 gives dy blocks of both layers.
    flat = lp.amp.train(lp.nn.Sequential(lp.nn.Linear(4, 8, rng=0), lp.nn.ReLU(),
                                         lp.nn.Linear(8, 3, rng=1)), data, "mxfp8", 2, lr=0.3)
    assert h.loss == flat.loss and h.quant == flat.quant

    class Custom:
        def forward(self, x):
            return x

        def backward(self, dy, **kw):
            return dy

        def parameters(self):
            return []

    with pytest.raises(ValueError, match="Custom is neither"):
        lp.amp.train(lp.nn.Sequential(lp.nn.Linear(4, 3, rng=0), Custom()), data, "nvfp4", 1)
    with pytest.raises(ValueError, match="needs a model with lowprec.nn.Linear"):
        lp.amp.train(lp.nn.Sequential(lp.nn.ReLU()), data, "nvfp4", 1)


def test_models_are_checked_when_the_recipe_is_made():
    with pytest.raises(ValueError, match="matrix unit with block-scaled instructions"):
        lp.amp.BlockScaling(model="h100")
    with pytest.raises(ValueError, match="no instruction"):
        lp.amp.BlockScaling(model="h100/wgmma")
    with pytest.raises(ValueError, match="promote them to FP16"):
        lp.amp.Policy("bf16", matmul="h100", operands=lp.amp.DelayedScaling())
    with pytest.raises(ValueError, match="cannot multiply the FP8 operands"):
        lp.amp.Policy("bf16", matmul="v100", operands=lp.amp.DelayedScaling())
    p = lp.amp.Policy("bf16", weights="fp32", matmul="h100/wgmma",
                      operands=lp.amp.DelayedScaling())
    h = lp.amp.train(lp.nn.mlp([4, 8, 3], rng=0), lp.amp.blobs(16, 4, 3, seed=0), p, 2)
    assert len(h.quant) == 2
    assert lp.amp.Policy("bf16", matmul="h100", operands=lp.amp.DelayedScaling("e4m3"))


def test_fp8_underflows_are_flagged():
    """A gradient value below E5M2's least subnormal after scaling is flushed: counted
    by the recipe and raised as an underflow, as lp.round raises it."""
    q = lp.amp.DelayedScaling().quantizer()
    w = lp.tensor(np.ones((2, 2)), "fp32")
    q.forward(lp.tensor(np.ones((1, 2)), "fp32"), w, None)
    with lp.flags() as f:
        q.backward(lp.tensor([[1.0, 2.0**-40]], "fp32"), True)   # scale 1: 2**-40 -> 0
    assert f.underflow > 0
    assert fractions(q.counts.take())["dy"]["flushed"] == 0.5


def test_delayed_scaling_margin_history_and_kind_are_bounded():  # R3-27, O3
    with pytest.raises(ValueError, match="margin must be at most 277"):
        lp.amp.DelayedScaling(margin=2000)
    with pytest.raises(ValueError, match="history must be at most 65536"):
        lp.amp.DelayedScaling(history=10**9)
    lp.amp.DelayedScaling(history=2**16)
    # The largest margin still gives nonzero FP32 scales: fl32(fl32(448 / amax) /
    # 2**277) by exact arithmetic (FP32's max where the quotient overflows).
    def oracle(amax, margin, previous):
        q = reference_round(Fraction(448) / Fraction(reference_round(amax, "fp32")), "fp32")
        if q == math.inf:
            return float(np.finfo(f32).max)
        s = reference_round(Fraction(q) / Fraction(2) ** margin, "fp32")
        return s if s > 0 else previous
    r = lp.amp.DelayedScaling(margin=277)
    for amax in (2.0**-119, 448 * 2.0**-127, 2.0**-149, 1e-30, 1.0, 3.7e20):
        assert r.scale([amax], 3.0) == oracle(amax, 277, 3.0)
    assert r.scale([2.0**-119], 3.0) == 2.0**-149          # 1.75 * 2**-150 rounds up
    with pytest.raises(ValueError, match="kind must be one of x, w, dy, got 'z'"):
        lp.amp.DelayedScaling().scale([1.0], kind="z")
    with pytest.raises(TypeError, match="kind must be a str"):
        lp.amp.DelayedScaling().scale([1.0], kind=["x"])
    assert lp.amp.DelayedScaling(algorithm="most_recent").scale([], 3.0) == 3.0


def test_recipe_names_must_be_strings():  # O8
    with pytest.raises(TypeError, match="fp8_format must be a str"):
        lp.amp.DelayedScaling(fp8_format=[])
    with pytest.raises(TypeError, match="algorithm must be a str"):
        lp.amp.DelayedScaling(algorithm=["max"])
    with pytest.raises(TypeError, match="scheme must be a str"):
        lp.amp.BlockScaling(["mxfp4"])
    with pytest.raises(TypeError, match="grad_scheme must be a str"):
        lp.amp.BlockScaling("mxfp4", grad_scheme=("mxfp4",))
    with pytest.raises(TypeError, match="scale_rule must be a str"):
        lp.amp.BlockScaling(scale_rule={})
    with pytest.raises(TypeError, match="grad_mode must be a str"):
        lp.amp.BlockScaling(grad_mode=None)
    with pytest.raises(ValueError, match="scheme must be one of mxfp8_e4m3, mxfp8_e5m2, "
                                         "mxfp4, nvfp4, got 'mxint8'"):
        lp.amp.BlockScaling("mxint8")


@pytest.mark.parametrize("name", ["mxfp8", "nvfp4"])
def test_training_equals_the_reference_kernels(name, monkeypatch):
    """A few seeded steps under a block-scaled policy give the same losses, counts and
    weights bit for bit on the fast paths and on the reference kernels."""
    from lowprec.tensorcore.instructions import Instruction
    data = lp.amp.blobs(48, 40, 4, seed=2)

    def run():
        model = lp.nn.mlp([40, 16, 4], rng=1)
        h = lp.amp.train(model, data, name, 3, lr=0.05, batch_size=16, seed=3,
                         progress=False)
        return h.records(), [np.asarray(p.value) for p in model.parameters()]

    fast_records, fast_weights = run()
    monkeypatch.setattr(Instruction, "fast", lambda self, fa, fb: False)
    ref_records, ref_weights = run()
    assert repr(fast_records) == repr(ref_records)
    for f, r in zip(fast_weights, ref_weights):
        np.testing.assert_array_equal(f, r)
