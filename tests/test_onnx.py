"""lowprec.onnx: ONNX models on onnx.reference with their products through lowprec.

The contract of the products is `lowprec.tensorcore.matmul` with the same model on the
same values (FP32 accumulator, rounded once into the graph's type), so that is the
expected value of MatMul, Gemm and Conv; Gemm's epilogue and QuantizeLinear /
DequantizeLinear are checked against Fraction arithmetic written from the ONNX spec.
"""

from __future__ import annotations

import io
import math
from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp
from helpers import assert_bits, assert_same
from lowprec.tensorcore import matmul
from oracles.decode import decode_by_definition
from oracles.loops import round_fraction
from peers import ml_dtypes, optional, requires

onnx = optional("onnx")
pytestmark = requires("onnx")
requires_sklearn = requires("sklearn", "skl2onnx")
requires_torch = requires("torch")


def _model(nodes, inputs, outputs, opset=None):
    from onnx import helper
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info(n, t, None) for n, t in inputs],
                          [helper.make_tensor_value_info(n, t, None) for n, t in outputs])
    kw = {} if opset is None else {"opset_imports": [helper.make_opsetid("", opset)]}
    return helper.make_model(g, **kw)


def _tp(dtype):
    from onnx.helper import np_dtype_to_tensor_dtype
    return np_dtype_to_tensor_dtype(np.dtype(dtype))


def _expected(a, b, model, fmt, dtype):
    """The contract: lp's matmul with the same model, FP32 out, rounded once to dtype."""
    with np.errstate(all="ignore"):
        d = matmul(a, b, model=model, in_fmt=fmt, out_fmt="fp32")
        return np.asarray(d if dtype == np.float32 else lp.round(d, _FMT[np.dtype(dtype).name]))


_FMT = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64"}


def _adversarial(rng, shape, dtype):
    """Random values with ties, subnormals, ±0 and a few inf and NaN."""
    x = rng.standard_normal(shape)
    flat = x.reshape(-1)
    specials = [0.0, -0.0, 2.0**-24, -(2.0**-133), 1 + 2.0**-11, np.inf, -np.inf, np.nan]
    for i, v in zip(rng.choice(flat.size, min(len(specials), flat.size), replace=False),
                    specials):
        flat[i] = v
    return x.astype(dtype)


# -- MatMul ---------------------------------------------------------------------------

CASES = [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (1, 5, 4, 6)), ((4,), (4, 3)),
         ((3, 4), (4,)), ((0, 4), (4, 2)), ((2, 3, 0), (0, 2)), ((5, 40), (40, 3))]


@pytest.mark.parametrize("sa, sb", CASES)
@pytest.mark.parametrize("dtype, options, model, fmt", [
    ("float16", dict(gpu="h100"), "h100", "fp16"),
    ("bfloat16", dict(gpu="a100"), "a100", "bf16"),
    ("float32", dict(gpu="b200"), "fp32", "fp32"),
    ("float32", dict(gpu="h200", tf32=True), "h100", "tf32"),
    ("float32", dict(gpu="v100", in_fmt="fp16"), "v100", "fp16"),
    ("float16", dict(matmul="h100/wgmma"), "h100/wgmma", "fp16"),
    ("float32", dict(matmul="b200-mma", in_fmt="e5m2"), "b200-mma", "e5m2"),
    ("float32", dict(matmul="exact", in_fmt="e4m3"), "exact", "e4m3"),
])
def test_matmul_is_lp_matmul_rounded_once(sa, sb, dtype, options, model, fmt):
    import lowprec.onnx as lo
    dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    a, b = _adversarial(rng, sa, dtype), _adversarial(rng, sb, dtype)
    a0, b0 = a.copy(), b.copy()
    m = _model([onnx.helper.make_node("MatMul", ["a", "b"], ["y"])],
               [("a", _tp(dtype)), ("b", _tp(dtype))], [("y", _tp(dtype))])
    (y,) = lo.run(m, {"a": a, "b": b}, **options)
    assert y.dtype == np.dtype(dtype)
    assert_same(y.astype(np.float64), _expected(a, b, model, fmt, dtype))
    assert_same(a, a0)
    assert_same(b, b0)                       # inputs never modified


def test_every_product_path_refuses_what_it_cannot_model():
    import lowprec.onnx as lo
    m = _model([onnx.helper.make_node("MatMul", ["a", "b"], ["y"])],
               [("a", _tp(np.int64)), ("b", _tp(np.int64))], [("y", _tp(np.int64))])
    ints = [np.ones((2, 2), np.int64)] * 2
    with pytest.raises(ValueError, match="floating-point products only"):
        lo.run(m, ints, gpu="h100")
    m64 = _model([onnx.helper.make_node("MatMul", ["a", "b"], ["y"])],
                 [("a", _tp(np.float64)), ("b", _tp(np.float64))], [("y", _tp(np.float64))])
    with pytest.raises(ValueError, match="in_fmt"):
        lo.run(m64, [np.ones((2, 2))] * 2, gpu="h100")
    bf = [np.ones((2, 2), ml_dtypes.bfloat16)] * 2
    mbf = _model([onnx.helper.make_node("MatMul", ["a", "b"], ["y"])],
                 [("a", _tp(ml_dtypes.bfloat16))] * 1 + [("b", _tp(ml_dtypes.bfloat16))],
                 [("y", _tp(ml_dtypes.bfloat16))])
    (y,) = lo.run(mbf, bf, gpu="v100")        # no BF16 Tensor Cores: FP32 FMAs
    assert_same(y.astype(np.float64), _expected(bf[0], bf[1], "fp32", "bf16", bf[0].dtype))
    with pytest.raises(ValueError, match="e4m3fnuz"):
        lo.run(m64, [np.ones((2, 2))] * 2, gpu="h100", in_fmt="e4m3fnuz")
    with pytest.raises(ValueError, match="exactly one of gpu= .* and matmul="):
        lo.evaluator(m, gpu="h100", matmul="exact")
    with pytest.raises(ValueError, match="exactly one"):
        lo.evaluator(m)
    with pytest.raises(ValueError, match="unknown gpu 'x100'"):
        lo.evaluator(m, gpu="x100")
    with pytest.raises(TypeError, match="tf32 must be a bool"):
        lo.evaluator(m, gpu="h100", tf32="yes")
    with pytest.raises(ValueError, match="takes 2 inputs"):
        lo.run(m, ints[:1], gpu="h100")
    with pytest.raises(ValueError, match="pass a list of arrays"):
        lo.run(m, ints[0], gpu="h100")


def test_one_array_is_the_one_input_and_float64_graphs_run_with_in_fmt():
    # run(model, x) feeds x whole (not its rows); a float64 graph's products take
    # in_fmt's operands and give FP32 values, which float64 holds exactly.
    import lowprec.onnx as lo
    m = _model([onnx.helper.make_node("MatMul", ["x", "x"], ["y"])],
               [("x", _tp(np.float64))], [("y", _tp(np.float64))])
    x = np.array([[1.0, 1 / 3], [2.0**-30, 3.0]])
    (y,) = lo.run(m, x, gpu="h100", in_fmt="bf16")
    assert y.dtype == np.float64 and y.shape == (2, 2)
    assert_same(y, _expected(x, x, "h100", "bf16", np.dtype(np.float64)))


def test_import_lowprec_never_imports_onnx():
    import subprocess
    import sys
    code = "import sys, lowprec; print('onnx' in sys.modules, 'lowprec.onnx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False"]


# -- Gemm: every attribute, against the epilogue in Fractions --------------------------

def _fp32(q):
    return round_fraction(q, p=24, emin=-126, emax=127)


def _gemm_oracle(p, alpha, c, beta):
    """cuBLAS's epilogue as lowprec.torch documents it, one output at a time in
    Fractions: t = fl(alpha*p), then beta*c + t rounded once to FP32; beta = 0 or no
    c: t."""
    t = _fp32(Fraction(float(np.float32(alpha))) * Fraction(p))
    if c is None or beta == 0:
        return t
    return _fp32(Fraction(float(np.float32(beta))) * Fraction(float(c)) + Fraction(t))


@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("alpha", [1.0, 0.5, -3.0, 0.1])
@pytest.mark.parametrize("beta", [0.0, 1.0, 0.25, 0.3])
@pytest.mark.parametrize("c_shape", [None, (), (1,), (5,), (3, 1), (3, 5)])
def test_gemm_every_attribute(trans_a, trans_b, alpha, beta, c_shape):
    import lowprec.onnx as lo
    rng = np.random.default_rng(7)
    m, k, n = 3, 20, 5
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float16)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float16)
    inputs, names = [a, b], ["a", "b"]
    c = None
    if c_shape is not None:
        c = rng.standard_normal(c_shape).astype(np.float16)
        inputs.append(c)
        names.append("c")
    node = onnx.helper.make_node("Gemm", names, ["y"], transA=trans_a, transB=trans_b,
                                 alpha=alpha, beta=beta)
    model = _model([node], [(x, _tp(np.float16)) for x in names], [("y", _tp(np.float16))])
    (y,) = lo.run(model, inputs, gpu="h100")
    p = matmul(a.T if trans_a else a, b.T if trans_b else b, model="h100", in_fmt="fp16",
               out_fmt="fp32")
    cb = None if c is None else np.broadcast_to(c, p.shape)
    want = np.array([[_gemm_oracle(p[i, j], alpha, None if cb is None else cb[i, j], beta)
                      for j in range(n)] for i in range(m)])
    assert_same(y.astype(np.float64), lp.round(want, "fp16"))


def test_gemm_beta_zero_never_reads_c():
    # cuBLAS does not read c when beta = 0: a NaN in c does not reach the result.
    import lowprec.onnx as lo
    a, b = np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)
    node = onnx.helper.make_node("Gemm", ["a", "b", "c"], ["y"], beta=0.0)
    model = _model([node], [(x, _tp(np.float32)) for x in "abc"], [("y", _tp(np.float32))])
    (y,) = lo.run(model, [a, b, np.full((2, 2), np.nan, np.float32)], gpu="h100")
    assert_same(y, np.full((2, 2), 3.0))


# -- Conv: an implicit GEMM, against a loop over the patches ---------------------------

def _conv_loop(x, w, b, model, fmt, strides, pads, dilations, group):
    """Each output channel group: one lp matmul of the patch rows, each patch built
    element by element in the order (channel, kernel row, kernel column); bias added
    to the FP32 accumulator (round once), then rounded into x's dtype."""
    n, _, h, wd = x.shape
    m, cg, kh, kw = w.shape
    sh, sw = strides
    dh, dw = dilations
    pt, pl, pb, pr = pads
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    mg = m // group
    out = np.zeros((n, m, oh, ow))
    for i in range(n):
        for g in range(group):
            rows = []
            for r in range(oh):
                for s in range(ow):
                    patch = []
                    for ch in range(g * cg, (g + 1) * cg):
                        for u in range(kh):
                            for v in range(kw):
                                y, z = r * sh - pt + u * dh, s * sw - pl + v * dw
                                inside = 0 <= y < h and 0 <= z < wd
                                patch.append(x[i, ch, y, z] if inside else x.dtype.type(0))
                    rows.append(patch)
            wg = w[g * mg:(g + 1) * mg].reshape(mg, -1)
            p = matmul(np.array(rows, x.dtype), wg.T, model=model, in_fmt=fmt,
                       out_fmt="fp32")
            if b is not None:
                p = lp.add(p, b[g * mg:(g + 1) * mg].astype(np.float64), "fp32")
            out[i, g * mg:(g + 1) * mg] = p.T.reshape(mg, oh, ow)
    return out if x.dtype == np.float32 else lp.round(out, _FMT[x.dtype.name])


@pytest.mark.parametrize("strides, pads, dilations, group, bias", [
    ((1, 1), (0, 0, 0, 0), (1, 1), 1, False),
    ((2, 1), (1, 1, 1, 1), (1, 1), 1, True),
    ((1, 2), (0, 1, 2, 0), (2, 1), 2, True),
    ((2, 2), (1, 0, 0, 1), (1, 2), 4, False),
])
@pytest.mark.parametrize("dtype, options, model, fmt", [
    ("float16", dict(gpu="h100"), "h100", "fp16"),
    ("float32", dict(gpu="a100", in_fmt="bf16"), "a100", "bf16"),
    ("float32", dict(matmul="fp32"), "fp32", "fp32"),
])
def test_conv_is_a_loop_of_lp_matmul_over_the_patches(strides, pads, dilations, group, bias,
                                                      dtype, options, model, fmt):
    import lowprec.onnx as lo
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 6, 7)).astype(dtype)
    w = rng.standard_normal((4, 4 // group, 3, 2)).astype(dtype)
    b = rng.standard_normal(4).astype(dtype) if bias else None
    names = ["x", "w"] + (["b"] if bias else [])
    node = onnx.helper.make_node("Conv", names, ["y"], strides=strides, pads=pads,
                                 dilations=dilations, group=group)
    model_ = _model([node], [(n, _tp(dtype)) for n in names], [("y", _tp(dtype))])
    (y,) = lo.run(model_, [x, w] + ([b] if bias else []), **options)
    assert_same(y.astype(np.float64), _conv_loop(x, w, b, model, fmt, strides, pads,
                                                 dilations, group))


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_conv_auto_pad_agrees_with_onnx_shapes(auto_pad):
    from onnx.reference import ReferenceEvaluator

    import lowprec.onnx as lo
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 5, 6)).astype(np.float32)
    w = rng.standard_normal((3, 2, 2, 3)).astype(np.float32)
    node = onnx.helper.make_node("Conv", ["x", "w"], ["y"], auto_pad=auto_pad, strides=[2, 1])
    model = _model([node], [("x", _tp(np.float32)), ("w", _tp(np.float32))],
                   [("y", _tp(np.float32))])
    (y,) = lo.run(model, [x, w], matmul="exact")
    (ref,) = ReferenceEvaluator(model).run(None, {"x": x, "w": w})
    assert y.shape == ref.shape
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


# -- QuantizeLinear / DequantizeLinear against the spec, in Fractions -------------------

_ONNX_NAMES = {"e4m3": "FLOAT8E4M3FN", "e4m3fnuz": "FLOAT8E4M3FNUZ", "e5m2": "FLOAT8E5M2",
               "e5m2fnuz": "FLOAT8E5M2FNUZ", "fp4": "FLOAT4E2M1"}


def _spec_cast(q, fmt, saturate):
    """The spec's Cast tables (float8) and its float4 table, on an exact value q (a
    Fraction, or a float inf/NaN): [q] rounds to the target's mantissa width with an
    unbounded exponent (subnormals below its smallest normal)."""
    f = lp.format(fmt)
    values = decode_by_definition(f)
    top = values[-1]
    fnuz, fp4 = f.kind == "fnuz", fmt == "fp4"
    if isinstance(q, float) and math.isnan(q):
        return 6.0 if fp4 else math.nan
    if isinstance(q, float):                       # ±inf
        if saturate or fp4:
            return math.copysign(float(top), q)
        return q if fmt == "e5m2" else math.copysign(math.nan, q)
    if q == 0:
        return 0.0
    emin = 1 - f.bias
    # An unbounded exponent in effect: every point lies below 2**27, far under 2**64.
    r = round_fraction(q, p=f.mantissa_bits + 1, emin=emin, emax=64)
    if abs(Fraction(r)) > top:
        if saturate or fp4:
            return math.copysign(float(top), r)
        return math.copysign(math.inf if fmt == "e5m2" else math.nan, r)
    if r == 0 and (fnuz or q > 0):
        return 0.0
    return r if r != 0 else -0.0


def _points(fmt):
    """Ties between neighbours, the largest values and past them, the subnormals and
    below, ±0, inf and NaN: as Fractions (finite) or floats."""
    vals = decode_by_definition(lp.format(fmt))
    mids = [(x + y) / 2 for x, y in zip(vals, vals[1:])]
    top, step = vals[-1], vals[-1] - vals[-2]
    near = [top + step / 2, top + step / 2 + step / 64, top + step / 4, 2 * top, top * 1000]
    tiny = [vals[1] / 2, vals[1] / 2 + vals[1] / 64, vals[1] * 3 / 4, vals[1] / 1024]
    pts = [Fraction(v) for v in list(vals) + mids + near + tiny]
    return pts + [-p for p in pts] + [math.inf, -math.inf, math.nan]


def _q_model(fmt, dtype, saturate, **attrs):
    from onnx import TensorProto
    ttype = getattr(TensorProto, _ONNX_NAMES[fmt])
    node = onnx.helper.make_node("QuantizeLinear", ["x", "s"], ["y"], saturate=saturate,
                                 output_dtype=ttype, **attrs)
    return _model([node], [("x", _tp(dtype)), ("s", _tp(np.float32))], [("y", ttype)])


@pytest.mark.parametrize("fmt", list(_ONNX_NAMES))
@pytest.mark.parametrize("saturate", [1, 0])
def test_quantize_linear_follows_the_spec_tables(fmt, saturate):
    import lowprec.onnx as lo
    pts = _points(fmt)
    # x / scale with scale 2**-3 is exact in float64; x itself is the point * 2**-3.
    scale = np.float32(0.125)
    x = np.array([float(p) / 8 if isinstance(p, Fraction) else p for p in pts], np.float64)
    assert all(Fraction(float(v)) * 8 == p for v, p in zip(x, pts) if isinstance(p, Fraction))
    want = np.array([_spec_cast(p, fmt, saturate) for p in pts])
    (y,) = lo.run(_q_model(fmt, np.float64, saturate), {"x": x, "s": scale}, gpu="h100")
    got = y.astype(np.float64)
    assert_same(got, want)
    # NaN's sign, where the format has one (the non-saturating table's -NaN rows)
    if fmt in ("e4m3", "e5m2"):
        bits = y.view(np.uint8)
        nan = np.isnan(want)
        assert np.array_equal(bits[nan] >= 0x80, np.signbit(want[nan]))


def test_quantize_linear_divides_in_the_scales_precision():
    # x / scale rounds to FP32 first (the spec: the scale's type is the division's
    # precision), then to E4M3: a double rounding the Fraction reference repeats.
    import lowprec.onnx as lo
    rng = np.random.default_rng(5)
    x = rng.standard_normal(600).astype(np.float32) * 100
    s = np.float32(0.37)
    (y,) = lo.run(_q_model("e4m3", np.float32, 1), {"x": x, "s": s}, gpu="h100")
    want = [_spec_cast(Fraction(_fp32(Fraction(float(v)) / Fraction(float(s)))), "e4m3", 1)
            for v in x]
    assert_same(y.astype(np.float64), want)


def test_quantize_and_dequantize_per_axis_and_in_blocks():
    from onnx import TensorProto

    import lowprec.onnx as lo
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((3, 10)) * 20).astype(np.float32)
    # per axis (axis 0), then blocks of 4 along axis 1 (the last block of 2)
    for scale, attrs in [(np.array([0.5, 2.0, 0.3], np.float32), dict(axis=0)),
                         (np.abs(rng.standard_normal((3, 3))).astype(np.float32) + 0.1,
                          dict(axis=1, block_size=4))]:
        (y,) = lo.run(_q_model("e5m2", np.float32, 1, **attrs), {"x": x, "s": scale},
                      gpu="h100")
        full = (scale[:, None] if scale.ndim == 1 else np.repeat(scale, 4, axis=1)[:, :10])
        full = np.broadcast_to(full, x.shape)
        want = [[_spec_cast(Fraction(_fp32(Fraction(float(v)) / Fraction(float(s)))), "e5m2", 1)
                 for v, s in zip(rx, rs)] for rx, rs in zip(x, full)]
        assert_same(y.astype(np.float64), want)
    # DequantizeLinear: E4M3 values times E8M0 block scales, rounded once into FP16.
    q = np.array(lp.round(rng.standard_normal((2, 6)) * 50, "e4m3")).astype(
        ml_dtypes.float8_e4m3fn)
    k = np.array([[-20, 3, 127], [0, -127, 5]])
    s8 = (2.0 ** k).astype(ml_dtypes.float8_e8m0fnu)
    node = onnx.helper.make_node("DequantizeLinear", ["q", "s"], ["y"], axis=1, block_size=2,
                                 output_dtype=TensorProto.FLOAT16)
    model = _model([node], [("q", TensorProto.FLOAT8E4M3FN), ("s", TensorProto.FLOAT8E8M0)],
                   [("y", TensorProto.FLOAT16)])
    (y,) = lo.run(model, {"q": q, "s": s8}, gpu="h100")
    assert y.dtype == np.float16
    full = np.repeat(k, 2, axis=1)
    want = [[round_fraction(Fraction(float(v)) * Fraction(2) ** int(e), p=11, emin=-14, emax=15)
             for v, e in zip(rv, re)] for rv, re in zip(q.astype(np.float64), full)]
    assert_same(y.astype(np.float64), want)
    node = onnx.helper.make_node("DequantizeLinear", ["q", "s"], ["y"], axis=1, block_size=2)
    bad = _model([node], [("q", TensorProto.FLOAT8E4M3FN), ("s", TensorProto.FLOAT8E8M0)],
                 [("y", TensorProto.FLOAT)])
    with pytest.raises(ValueError, match="needs output_dtype"):
        lo.run(bad, {"q": q, "s": s8}, gpu="h100")


def test_a_bad_block_size_and_a_nonzero_float8_zero_point_are_refused():
    import lowprec.onnx as lo
    x = np.ones((2, 10), np.float32)
    with pytest.raises(Exception, match=r"block_size 2 is outside \[4, 4\]"):
        lo.run(_q_model("e4m3", np.float32, 1, axis=1, block_size=2),
               {"x": x, "s": np.ones((2, 3), np.float32)}, gpu="h100")
    node = onnx.helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])
    model = _model([node], [("x", _tp(np.float32)), ("s", _tp(np.float32)),
                            ("z", onnx.TensorProto.FLOAT8E4M3FN)],
                   [("y", onnx.TensorProto.FLOAT8E4M3FN)])
    z = np.array(1.0).astype(ml_dtypes.float8_e4m3fn)
    with pytest.raises(Exception, match="nonzero zero point"):
        lo.run(model, {"x": x, "s": np.float32(1), "z": z}, gpu="h100")


def test_integer_quantization_is_onnx_own():
    from onnx.reference import ReferenceEvaluator

    import lowprec.onnx as lo
    node = onnx.helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])
    model = _model([node], [("x", _tp(np.float32)), ("s", _tp(np.float32)),
                            ("z", _tp(np.uint8))], [("y", _tp(np.uint8))])
    feeds = {"x": np.linspace(-3, 300, 50, dtype=np.float32), "s": np.float32(1.5),
             "z": np.uint8(10)}
    (y,) = lo.run(model, feeds, gpu="h100")
    assert np.array_equal(y, ReferenceEvaluator(model).run(None, feeds)[0])


# -- models: skl2onnx's digits MLP and a torch-exported CNN ----------------------------

def _check_each_product(model, feeds, options, model_name, fmt):
    """Every MatMul/Gemm/Conv node's output, with intermediate results, equals lp's
    matmul (and the epilogue) on that node's own inputs."""
    from onnx import numpy_helper

    import lowprec.onnx as lo
    sess = lo.evaluator(model, **options)
    values = sess.run(None, feeds, intermediate=True)
    values.update({t.name: numpy_helper.to_array(t) for t in model.graph.initializer})
    attrs = {}
    checked = 0
    for node in model.graph.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        args = [values[n] for n in node.input if n]
        got = values[node.output[0]]
        if node.op_type == "MatMul":
            want = _expected(args[0], args[1], model_name, fmt, args[0].dtype)
        elif node.op_type == "Gemm":
            a = args[0].T if attrs.get("transA") else args[0]
            b = args[1].T if attrs.get("transB") else args[1]
            p = matmul(a, b, model=model_name, in_fmt=fmt, out_fmt="fp32")
            c = None if len(args) < 3 else np.broadcast_to(args[2], p.shape)
            alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
            want = np.array([[_gemm_oracle(p[i, j], alpha, None if c is None else c[i, j],
                                           beta) for j in range(p.shape[1])]
                             for i in range(p.shape[0])])
        elif node.op_type == "Conv":
            x, w = args[0], args[1]
            want = _conv_loop(x, w, args[2] if len(args) > 2 else None, model_name, fmt,
                              attrs.get("strides", (1, 1)), attrs.get("pads", (0,) * 4),
                              attrs.get("dilations", (1, 1)), attrs.get("group", 1))
        else:
            continue
        assert_same(got.astype(np.float64), want)
        checked += 1
    return values, checked


@requires_sklearn
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("options, model_name, fmt", [
    (dict(gpu="h100"), "fp32", "fp32"),                  # float32 weights: plain FP32
    (dict(gpu="h100", in_fmt="fp16"), "h100", "fp16"),   # FP16 operands: Tensor Cores
])
def test_sklearn_digits_mlp_through_skl2onnx(options, model_name, fmt):
    from skl2onnx import to_onnx
    from sklearn.datasets import load_digits
    from sklearn.neural_network import MLPClassifier
    X, y = load_digits(return_X_y=True)
    X = (X / 16).astype(np.float32)
    clf = MLPClassifier(hidden_layer_sizes=(32,), max_iter=60, random_state=0).fit(X, y)
    model = to_onnx(clf, X[:1], options={"zipmap": False})
    feeds = {model.graph.input[0].name: X[:64]}
    values, checked = _check_each_product(model, feeds, options, model_name, fmt)
    assert checked >= 2
    label = values[model.graph.output[0].name]
    assert np.mean(label == clf.predict(X[:64])) > 0.9


@requires_torch
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torch_exported_cnn_equals_its_product_chain_by_hand():
    import torch
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Flatten(), torch.nn.Linear(4 * 8 * 8, 10)).eval()
    buf = io.BytesIO()
    # TorchScript exporter (dynamo=False): the graph is Conv, Relu, Flatten, Gemm.
    torch.onnx.export(net, (torch.zeros(2, 1, 8, 8),), buf, dynamo=False)
    model = onnx.load_from_string(buf.getvalue())
    assert [n.op_type for n in model.graph.node] == ["Conv", "Relu", "Flatten", "Gemm"]
    x = np.random.default_rng(0).standard_normal((2, 1, 8, 8)).astype(np.float32)
    options = dict(gpu="h100", in_fmt="bf16")
    values, checked = _check_each_product(model, {model.graph.input[0].name: x}, options,
                                          "h100", "bf16")
    assert checked == 2
    conv, fc = net[0], net[3]
    h = _conv_loop(x, conv.weight.detach().numpy(), conv.bias.detach().numpy(), "h100",
                   "bf16", (1, 1), (1, 1, 1, 1), (1, 1), 1)
    h = np.maximum(h, 0).reshape(2, -1)
    p = matmul(h, fc.weight.detach().numpy().T.astype(np.float64), model="h100",
               in_fmt="bf16", out_fmt="fp32")
    want = lp.add(p, fc.bias.detach().numpy().astype(np.float64), "fp32")
    assert_same(values[model.graph.output[0].name], want)


# -- the same weights under lowprec.onnx and lowprec.torch.emulate ---------------------

def _torch_cnn():
    import torch
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=2), torch.nn.ReLU(),
        torch.nn.Flatten(), torch.nn.Linear(8 * 4 * 4, 10)).eval()


@requires_torch
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("dtype, precision, autocast", [
    ("float32", "highest", False),      # plain FP32 products on both sides
    ("float32", "high", False),         # TF32: allow_tf32 in torch, tf32=True in ONNX
    ("bfloat16", "highest", False),
    ("float16", "highest", False),
    ("float32", "highest", True),       # exported under bf16 autocast: Cast, BF16 nodes
])
def test_torch_exported_cnn_equals_the_torch_bridge(dtype, precision, autocast):
    # Both sides take K in the order (input channel, kernel offsets in C order) and add
    # the bias to the FP32 accumulator once: their outputs agree bit for bit.
    import contextlib

    import torch

    import lowprec.onnx as lo
    import lowprec.torch as lpt
    tdtype = getattr(torch, dtype)
    net = _torch_cnn().to(tdtype)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 1, 8, 8)).astype(np.float32)
    # Ties of BF16 and FP16, subnormals of both and signed zeros in the first two
    # images; inf and NaN in the last (a NaN reaches every output of its image).
    finite = [1 + 2.0**-8, -(1 + 3 * 2.0**-8), 1 + 2.0**-11, 2.0**-24, -(2.0**-133),
              2.0**-130, 0.0, -0.0]
    for i in range(2):
        x[i].reshape(-1)[rng.choice(64, len(finite), replace=False)] = finite
    x[2, 0, 3, :3] = [np.inf, -np.inf, np.nan]
    xt = torch.from_numpy(x).to(tdtype)
    cast = (torch.autocast("cpu", dtype=torch.bfloat16) if autocast
            else contextlib.nullcontext())
    buf = io.BytesIO()
    with cast:
        torch.onnx.export(net, (xt,), buf, dynamo=False)
    model = onnx.load_from_string(buf.getvalue())
    ops = [n.op_type for n in model.graph.node]
    assert ops == ["Cast"] * autocast + ["Conv", "Relu", "Conv", "Relu", "Flatten", "Gemm"]
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        with lpt.emulate(gpu="h100"), torch.no_grad(), cast:
            want = net(xt)
    finally:
        torch.set_float32_matmul_precision(before)
    xo = xt.float().numpy().astype(ml_dtypes.bfloat16) if dtype == "bfloat16" \
        else xt.numpy()
    (got,) = lo.run(model, [xo], gpu="h100", tf32=precision == "high")
    assert got.dtype.name == str(want.dtype).removeprefix("torch.")
    assert np.isfinite(got[:2]).all()
    # Zeros' signs must agree; NaN payloads are not specified (IEEE 754, section 6.2.3).
    assert_same(got.astype(np.float64), want.double().numpy())


@requires_sklearn
@requires_torch
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("tf32", [False, True])
def test_sklearn_digits_mlp_equals_the_torch_bridge(tf32):
    # skl2onnx writes each layer as MatMul then Add in float32: the product, already an
    # FP32 value, plus the bias rounded once is addmm's epilogue. The logits agree bit
    # for bit; Softmax is NumPy's exp against torch's, so only the labels are compared.
    import torch
    from skl2onnx import to_onnx
    from sklearn.datasets import load_digits
    from sklearn.neural_network import MLPClassifier

    import lowprec.onnx as lo
    import lowprec.torch as lpt
    X, y = load_digits(return_X_y=True)
    X = (X / 16).astype(np.float32)
    clf = MLPClassifier(hidden_layer_sizes=(32,), max_iter=60, random_state=0).fit(X, y)
    model = to_onnx(clf, X[:1], options={"zipmap": False})
    net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(),
                              torch.nn.Linear(32, 10))
    with torch.no_grad():
        for layer, w, b in zip(net[::2], clf.coefs_, clf.intercepts_):
            layer.weight.copy_(torch.from_numpy(w.T.astype(np.float32)))
            layer.bias.copy_(torch.from_numpy(b.astype(np.float32)))
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    try:
        with lpt.emulate(gpu="h100"), torch.no_grad():
            logits = net(torch.from_numpy(X[:200])).numpy()
    finally:
        torch.set_float32_matmul_precision(before)
    sess = lo.evaluator(model, gpu="h100", tf32=tf32)
    values = sess.run(None, {model.graph.input[0].name: X[:200]}, intermediate=True)
    last_add = [n for n in model.graph.node if n.op_type == "Add"][-1].output[0]
    assert_bits(values[last_add].astype(np.float64), logits.astype(np.float64))
    assert np.array_equal(values["label"], logits.argmax(1))


# -- Einsum: a batched product; the ops lowprec does not model -------------------------

def _einsum_loop(eq, a, b, model, fmt):
    """Each output entry as one lp matmul of a (1, K) row and a (K, 1) column, gathered
    entry by entry, K over the contracted indices in A's order (row-major)."""
    import itertools
    lhs, out = eq.split("->")
    ta, tb = lhs.split(",")
    size = {c: n for t, x in ((ta, a), (tb, b)) for c, n in zip(t, x.shape) if n != 1}
    size.update({c: 1 for c in ta + tb if c not in size})
    contr = [c for c in ta if c in tb and c not in out]
    y = np.zeros([size[c] for c in out])
    for idx in itertools.product(*[range(size[c]) for c in out]):
        at = dict(zip(out, idx))
        row, col = [], []
        for kidx in itertools.product(*[range(size[c]) for c in contr]):
            at.update(zip(contr, kidx))
            row.append(a[tuple(at[c] if a.shape[i] > 1 else 0 for i, c in enumerate(ta))])
            col.append(b[tuple(at[c] if b.shape[i] > 1 else 0 for i, c in enumerate(tb))])
        y[idx] = matmul(np.array([row], a.dtype), np.array(col, b.dtype).reshape(-1, 1),
                        model=model, in_fmt=fmt, out_fmt="fp32")[0, 0]
    return y


@pytest.mark.parametrize("eq, sa, sb, explicit", [
    ("ij,jk->ik", (3, 5), (5, 4), None),
    ("ij,jk", (3, 5), (5, 4), "ij,jk->ik"),                        # implicit output
    ("bhqd,bhkd->bhqk", (2, 2, 3, 17), (2, 2, 4, 17), None),       # attention scores
    ("ijk,jkl->li", (3, 4, 5), (4, 5, 2), None),                   # K = (j, k)
    ("...ij,...jk->...ik", (2, 1, 3, 4), (5, 4, 2), "xyij,yjk->xyik"),
    ("bi,bj->bij", (2, 3), (2, 4), None),                          # K = 1: outer
    ("i,i->", (40,), (40,), None),
])
@pytest.mark.parametrize("model_name", ["h100", "fp16"])   # fp16: every K order shows
def test_einsum_is_a_loop_of_lp_matmul(eq, sa, sb, explicit, model_name):
    import lowprec.onnx as lo
    rng = np.random.default_rng(4)
    a = _adversarial(rng, sa, np.float16)
    b = rng.standard_normal(sb).astype(np.float16)
    node = onnx.helper.make_node("Einsum", ["a", "b"], ["y"], equation=eq)
    m = _model([node], [("a", _tp(np.float16)), ("b", _tp(np.float16))],
               [("y", _tp(np.float16))])
    options = dict(gpu="h100") if model_name == "h100" else dict(matmul=model_name)
    (y,) = lo.run(m, [a, b], **options)
    want = _einsum_loop(explicit or eq, a, b, model_name, "fp16")
    assert y.dtype == np.float16
    assert_same(y.astype(np.float64), lp.round(want, "fp16"))


@requires_torch
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torch_exported_einsum_equals_the_torch_bridge():
    import torch

    import lowprec.onnx as lo
    import lowprec.torch as lpt

    class Scores(torch.nn.Module):
        def forward(self, q, k):
            return torch.einsum("bhqd,bhkd->bhqk", q, k)

    rng = np.random.default_rng(8)
    q, k = (torch.from_numpy(rng.standard_normal((2, 2, 5, 16))).to(torch.bfloat16)
            for _ in range(2))
    buf = io.BytesIO()
    torch.onnx.export(Scores(), (q, k), buf, dynamo=False)
    model = onnx.load_from_string(buf.getvalue())
    assert [n.op_type for n in model.graph.node] == ["Einsum"]
    with lpt.emulate(gpu="h100"):
        want = Scores()(q, k)
    (got,) = lo.run(model, [x.float().numpy().astype(ml_dtypes.bfloat16) for x in (q, k)],
                    gpu="h100")
    assert_bits(got.astype(np.float64), want.double().numpy())


def test_einsum_refusals_and_onnx_own_permutations():
    import lowprec.onnx as lo
    f32 = _tp(np.float32)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    def one(eq, n=2):
        names = ["a", "b", "c"][:n]
        node = onnx.helper.make_node("Einsum", names, ["y"], equation=eq)
        return _model([node], [(v, f32) for v in names], [("y", f32)])

    (y,) = lo.run(one("ij->ji", 1), [x], gpu="h100")       # a permutation: exact
    assert_same(y, x.T)
    for eq, n, match in [("ij->i", 1, "two-operand"), ("ii,ij->ij", 2, "diagonal"),
                         ("ij,jk->i", 2, "index k is summed within one operand"),
                         ("ij,jk,kl->il", 3, "two-operand")]:
        args = [np.ones((3, 3), np.float32)] * n
        with pytest.raises(Exception, match=match):
            lo.run(one(eq, n), args, gpu="h100")
    with pytest.raises(Exception, match="index j has sizes 3 and 4"):
        lo.run(one("ij,jk->ik"), [np.ones((2, 3), np.float32),
                                  np.ones((4, 2), np.float32)], gpu="h100")


def _conv_transpose_loop(x, w, b, model, fmt, strides, pads, dilations, group, out_pad):
    """Each output entry as one lp matmul: the inputs that reach it (zero where the
    stride leaves a gap or the window leaves the input) against the weights, K over
    (input channel of the group, kernel row descending, kernel column descending);
    the bias added in FP32, then one rounding into x's dtype."""
    n, c, h, wd = x.shape
    cg, mg, kh, kw = c // group, w.shape[1], w.shape[2], w.shape[3]
    oh = (h - 1) * strides[0] + out_pad[0] + (kh - 1) * dilations[0] + 1 - pads[0] - pads[2]
    ow = (wd - 1) * strides[1] + out_pad[1] + (kw - 1) * dilations[1] + 1 - pads[1] - pads[3]
    out = np.zeros((n, group * mg, oh, ow))
    zero = x.dtype.type(0)
    for i in range(n):
        for g in range(group):
            for m in range(mg):
                for r in range(oh):
                    for q in range(ow):
                        row, col = [], []
                        for ch in range(g * cg, (g + 1) * cg):
                            for u in reversed(range(kh)):
                                for v in reversed(range(kw)):
                                    # output r = input y * stride + kernel u * dilation - pad
                                    ty, tz = r + pads[0] - u * dilations[0], \
                                        q + pads[1] - v * dilations[1]
                                    y, z = ty // strides[0], tz // strides[1]
                                    inside = (ty % strides[0] == 0 and tz % strides[1] == 0
                                              and 0 <= y < h and 0 <= z < wd)
                                    row.append(x[i, ch, y, z] if inside else zero)
                                    col.append(w[ch, m, u, v])
                        out[i, g * mg + m, r, q] = matmul(
                            np.array([row], x.dtype), np.array(col, w.dtype).reshape(-1, 1),
                            model=model, in_fmt=fmt, out_fmt="fp32")[0, 0]
    if b is not None:
        out = lp.add(out, b.astype(np.float64).reshape(1, -1, 1, 1), "fp32")
    return out if x.dtype == np.float32 else lp.round(out, _FMT[x.dtype.name])


@pytest.mark.parametrize("strides, pads, dilations, group, out_pad, bias", [
    ((1, 1), (0, 0, 0, 0), (1, 1), 1, (0, 0), False),
    ((2, 1), (1, 0, 0, 1), (1, 1), 1, (1, 0), True),
    ((2, 3), (0, 1, 2, 0), (2, 1), 2, (0, 2), True),
    ((2, 2), (3, 2, 3, 2), (1, 2), 2, (0, 1), False),     # pads past the kernel: crops
])
@pytest.mark.parametrize("model_name", ["h100", "fp16"])   # fp16: every K order shows
def test_conv_transpose_is_a_loop_of_lp_matmul(strides, pads, dilations, group, out_pad,
                                               bias, model_name):
    from onnx.reference import ReferenceEvaluator

    import lowprec.onnx as lo
    rng = np.random.default_rng(6)
    x = _adversarial(rng, (2, 4, 4, 5), np.float16)
    x[0] = rng.standard_normal((4, 4, 5))
    w = rng.standard_normal((4, 3, 3, 2)).astype(np.float16)
    b = rng.standard_normal(3 * group).astype(np.float16) if bias else None
    names = ["x", "w"] + (["b"] if bias else [])
    node = onnx.helper.make_node("ConvTranspose", names, ["y"], strides=strides, pads=pads,
                                 dilations=dilations, group=group, output_padding=out_pad)
    model = _model([node], [(n, _tp(np.float16)) for n in names], [("y", _tp(np.float16))])
    feeds = [x, w] + ([b] if bias else [])
    options = dict(gpu="h100") if model_name == "h100" else dict(matmul=model_name)
    (y,) = lo.run(model, feeds, **options)
    assert_same(y.astype(np.float64), _conv_transpose_loop(
        x, w, b, model_name, "fp16", strides, pads, dilations, group, out_pad))
    if group > 1 or model_name != "h100":
        return      # onnx's reference ConvTranspose reshapes W for one group only
    # onnx's own float arithmetic gives the same shape and nearly the same values.
    x32 = [v.astype(np.float32) for v in feeds]
    m32 = _model([node], [(n, _tp(np.float32)) for n in names], [("y", _tp(np.float32))])
    (ref,) = ReferenceEvaluator(m32).run(None, dict(zip(names, x32)))
    (ours,) = lo.run(m32, x32, matmul="exact")
    assert ours.shape == ref.shape
    np.testing.assert_allclose(ours[0], ref[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("auto_pad, output_shape", [("SAME_UPPER", None),
                                                    ("SAME_LOWER", None),
                                                    ("NOTSET", (7, 9))])
def test_conv_transpose_output_shape_and_auto_pad(auto_pad, output_shape):
    from onnx.reference import ReferenceEvaluator

    import lowprec.onnx as lo
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    attrs = dict(strides=[2, 2], auto_pad=auto_pad)
    if output_shape:
        attrs["output_shape"] = output_shape
    node = onnx.helper.make_node("ConvTranspose", ["x", "w"], ["y"], **attrs)
    model = _model([node], [("x", _tp(np.float32)), ("w", _tp(np.float32))],
                   [("y", _tp(np.float32))])
    (y,) = lo.run(model, [x, w], matmul="exact")
    (ref,) = ReferenceEvaluator(model).run(None, {"x": x, "w": w})
    assert y.shape == ref.shape == (1, 3) + (output_shape or (6, 8))
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["DeformConv", "LSTM", "Attention"])
def test_ops_lowprec_does_not_model_are_refused_by_name(op):
    import lowprec.onnx as lo
    assert op in lo.UNMODELLED
    f32 = _tp(np.float32)
    node = onnx.helper.make_node(op, ["x", "w"], ["y"])
    model = _model([node], [("x", f32), ("w", f32)], [("y", f32)])
    with pytest.raises(Exception, match=f"{op}: lowprec.onnx does not model"):
        lo.run(model, [np.ones((1, 1, 3, 3), np.float32)] * 2, gpu="h100")


@requires_torch
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("kwargs", [dict(stride=2, padding=1, output_padding=1),
                                    dict(stride=(2, 1), padding=(0, 1), groups=2,
                                         dilation=(1, 2))])
def test_torch_exported_conv_transpose_equals_the_torch_bridge(dtype, kwargs):
    # Both run the transposed convolution as the same stride-1 GEMM: K over the input
    # channels, then the flipped kernel's offsets (float32 is FP32's sequential sum,
    # which shows any other order).
    import torch

    import lowprec.onnx as lo
    import lowprec.torch as lpt
    tdtype = getattr(torch, dtype)
    torch.manual_seed(0)
    net = torch.nn.ConvTranspose2d(4, 6, 3, **kwargs).eval().to(tdtype)
    x = torch.randn(2, 4, 5, 5).to(tdtype)
    buf = io.BytesIO()
    torch.onnx.export(net, (x,), buf, dynamo=False)
    model = onnx.load_from_string(buf.getvalue())
    assert [n.op_type for n in model.graph.node] == ["ConvTranspose"]
    with lpt.emulate(gpu="h100"), torch.no_grad():
        want = net(x)
    xo = x.float().numpy().astype(ml_dtypes.bfloat16) if dtype == "bfloat16" else x.numpy()
    (got,) = lo.run(model, [xo], gpu="h100")
    assert_same(got.astype(np.float64), want.double().numpy())


@requires_sklearn
def test_skl2onnx_linear_models_say_their_products_are_not_modelled():
    # skl2onnx writes a Ridge as ai.onnx.ml LinearRegressor, whose product onnx's own
    # op would compute in float32 whatever in_fmt says: refused, with the way out.
    from skl2onnx import to_onnx
    from sklearn.linear_model import Ridge

    import lowprec.onnx as lo
    X = np.random.default_rng(0).random((20, 4)).astype(np.float32)
    model = to_onnx(Ridge().fit(X, X @ np.arange(1.0, 5.0)), X[:1])
    with pytest.raises(ValueError, match="LinearRegressor.*array_namespace"):
        lo.run(model, [X], gpu="h100", in_fmt="fp16")
