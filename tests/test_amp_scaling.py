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
from peers import ml_dtypes

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


def test_delayed_scaling_products_match_reference():
    """forward, wgrad and dgrad of a Linear under FP8 delayed scaling, with the exact
    accumulation model: the quantized operands by ml_dtypes, the exact sum rounded once
    to FP32 (Fraction), times fl32(scale_inv_a * scale_inv_b) in float32, the bias added
    in float32, then rounded into BF16."""
    rng = np.random.default_rng(1)
    layer = lp.nn.Linear(5, 3, rng=2)
    layer.weight.value = lp.tensor(rng.standard_normal((5, 3)), "bf16")
    layer.bias.value = lp.tensor(rng.standard_normal(3), "bf16")
    layer.quantizer = lp.amp.DelayedScaling().quantizer()
    for step in range(3):                   # scales 1, then from the history
        x = lp.tensor(rng.standard_normal((4, 5)) * 100.0 ** (step - 1), "bf16")
        dy = lp.tensor(rng.standard_normal((4, 3)) * 1e-3, "bf16")
        with lp.context(matmul="exact"):
            y = layer.forward(x)
            sx, sw = layer.quantizer.scales["x"], layer.quantizer.scales["w"]
            dx = layer.backward(dy)
            sd = layer.quantizer.scales["dy"]
        qx, qw = ref_fp8(x.values, sx, "e4m3"), ref_fp8(layer.weight.value.values, sw, "e4m3")
        qd = ref_fp8(dy.values, sd, "e5m2")
        inv = {k: f32(1) / f32(s) for k, s in (("x", sx), ("w", sw), ("dy", sd))}

        def scaled(a, b, ka, kb, c=None, inv=inv):
            acc = np.array([[float(reference_round(v, "fp32")) for v in row]
                            for row in exact_product(a, b)], dtype=np.float32)
            out = acc * (inv[ka] * inv[kb])
            return out if c is None else out + c.astype(np.float32)

        ref_y = scaled(qx, qw, "x", "w", layer.bias.value.values)
        assert np.array_equal(y.values, ref_y.astype(ml_dtypes.bfloat16).astype(np.float64))
        ref_dw = scaled(qx.T, qd, "x", "dy")
        assert np.array_equal(layer.weight.grad.values,
                              ref_dw.astype(ml_dtypes.bfloat16).astype(np.float64))
        ref_dx = scaled(qd, qw.T, "dy", "w")
        assert np.array_equal(dx.values, ref_dx.astype(ml_dtypes.bfloat16).astype(np.float64))


def test_delayed_scaling_counts_a_clipped_tensor():
    q = lp.amp.DelayedScaling().quantizer()
    w = lp.tensor(np.eye(2), "fp32")
    q.forward(lp.tensor([[1.0, 0.5]], "fp32"), w, None)       # scale 1: nothing clipped
    q.forward(lp.tensor([[1000.0, 1e-9]], "fp32"), w, None)   # scale 448: 1000 * 448 clipped
    f = fractions(q.counts.take())
    assert f["x"] == {"blocks_clipped": 0.5, "clipped": 0.25, "flushed": 0.25}  # 1e-9*448 -> 0
    assert math.isnan(f["dy"]["flushed"])
    assert math.isnan(fractions(q.counts.take())["x"]["clipped"])   # counts start again


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
    layer.quantizer = lp.amp.MXFP8.quantizer()
    y = layer.forward(lp.tensor(x, "fp32"))
    dx = layer.backward(lp.tensor(dy, "fp32"))
    bias = layer.bias.value.values
    exact = lambda a, b: np.array(exact_product(a, b), dtype=np.float64)  # noqa: E731
    ref_y = exact(ref_mxfp8(x, 1), ref_mxfp8(w, 0)) + bias
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


def nvfp4_layer(mode):
    layer = lp.nn.Linear(1, 16, rng=0)
    layer.weight.value = lp.tensor(np.ones((1, 16)), "fp32")
    layer.quantizer = lp.amp.BlockScaling("nvfp4", grad_mode=mode).quantizer(7)
    return layer


def test_nvfp4_gradients_stochastically_rounded_are_unbiased():
    """dW = x.T @ dy with x = 1: the column sums of the quantized dy. A block of 16
    gradients, one at the block max and fifteen at 2.5/6 of it: FP4 holds 2 and 3
    there. Nearest-even rounds 2.5 down every time; SR to 2 or 3 at random, on
    average right (within four standard errors)."""
    c = 2688.0 * 2.0**-20
    dy = np.full((16, 16), c * 2.5 / 6)
    dy[0, :] = c
    exact = dy.sum(axis=0)
    x = lp.tensor(np.ones((16, 1)), "fp32")
    rne = nvfp4_layer("rne")
    rne.forward(x)
    rne.backward(lp.tensor(dy, "fp32"), input_grad=False)
    assert np.all(rne.weight.grad.values < exact * 0.9)
    sr = nvfp4_layer("sr")
    draws = []
    for _ in range(60):
        sr.forward(x)
        sr.backward(lp.tensor(dy, "fp32"), input_grad=False)
        draws.append(sr.weight.grad.values)
    draws = np.array(draws)
    stderr = draws.std(axis=0, ddof=1) / np.sqrt(len(draws))
    assert np.all(np.abs(draws.mean(axis=0) - exact) < 4 * stderr + 1e-6 * exact)
    assert len(np.unique(draws[:, 0])) > 1


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

def test_block_scaled_as_array_and_tensor():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 40))
    q = lp.mx.quantize(x, "nvfp4")
    assert np.array_equal(np.asarray(q), q.dequantize())
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
    q = lp.mx.quantize(x, "mxfp8_e4m3")                    # OCP floor: 957 -> 896
    assert q.limits.tolist() == [896.0] * 32
    assert (np.abs(x) > q.limits).tolist() == [True] + [False] * 31
