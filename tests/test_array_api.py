"""lowprec.array_api against oracles it did not produce: NumPy's float32 and float16
arithmetic (IEEE 754, correctly rounded), ml_dtypes' bfloat16 arithmetic (float32
then one rounding: innocuous for + - * / sqrt, since 24 >= 2*8 + 2), `Fraction`
sums and dot products rounded by `lowprec.testing.reference_round`, `np.nextafter`,
and, for the scikit-learn and SciPy examples, float64 NumPy with the formats' unit
roundoffs. The conformance suite of the standard runs in
`benchmarks/array_api_conformance.py` (docs/array-api.md), not here."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp
import lowprec.array_api as xp
from helpers import assert_same
from lowprec.testing import reference_round
from peers import ml_dtypes, requires_ml_dtypes

F = Fraction


def _f32(rng, n, special=True):
    v = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))).astype(np.float32)
    if special:
        v[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -3.4e38, 65504.0]
    return v


# -- the standard namespace: FP32 is IEEE binary32 ---------------------------------------

@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide"])
def test_float32_arithmetic_equals_numpy_float32(op):
    rng = np.random.default_rng(1)
    a, b = _f32(rng, 4000), _f32(rng, 4000)[::-1].copy()
    with np.errstate(all="ignore"):
        want = getattr(np, op)(a, b)
    x, y = xp.asarray(a, dtype=xp.float32), xp.asarray(b, dtype=xp.float32)
    got = getattr(xp, op)(x, y)
    assert got.dtype == xp.float32
    assert_same(got, want)
    assert_same({"add": x + y, "subtract": x - y, "multiply": x * y, "divide": x / y}[op], want)


def test_float32_sqrt_and_float64_arithmetic_equal_numpy():
    rng = np.random.default_rng(2)
    a = np.abs(_f32(rng, 3000))
    with np.errstate(all="ignore"):
        assert_same(xp.sqrt(xp.asarray(a, dtype=xp.float32)), np.sqrt(a))
        b = rng.standard_normal(3000) * 1e30
        c = rng.standard_normal(3000)
        got = xp.asarray(b, dtype=xp.float64) / xp.asarray(c, dtype=xp.float64)
        assert got.dtype == xp.float64
        assert_same(got, b / c)


def test_python_scalars_take_the_arrays_dtype():
    x = xp.asarray([1.0, 3.0], dtype=xp.float32)
    r = x / 3
    assert r.dtype == xp.float32
    assert_same(r, np.float32([1.0, 3.0]) / np.float32(3))
    i = xp.asarray([1, 2], dtype=xp.int16)
    assert (i + 1).dtype == xp.int16
    assert xp.result_type(xp.int8, xp.uint8) == xp.int16      # the standard's table
    assert xp.result_type(xp.float32, xp.float64) == xp.float64


def test_sum_is_the_documented_pairwise_order():
    # level by level: x0 + x1, x2 + x3, ..., an odd last term moves up unchanged
    rng = np.random.default_rng(3)
    for n in range(1, 8):
        for _ in range(20):
            v = rng.standard_normal(n).astype(np.float32) * np.float32(2.0 ** rng.integers(-8, 8))
            level = [F(float(t)) for t in v]
            while len(level) > 1:
                nxt = [F(reference_round(level[i] + level[i + 1], "fp32"))
                       for i in range(0, len(level) - 1, 2)]
                level = nxt + ([level[-1]] if len(level) % 2 else [])
            got = xp.sum(xp.asarray(v, dtype=xp.float32))
            assert float(np.asarray(got)) == float(level[0])


def test_matmul_is_the_exact_dot_product_rounded_once():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((5, 9)).astype(np.float32)
    b = (rng.standard_normal((9, 4)) * 1e3).astype(np.float32)
    got = np.asarray(xp.asarray(a, dtype=xp.float32) @ xp.asarray(b, dtype=xp.float32))
    want = [[reference_round(sum(F(float(a[i, k])) * F(float(b[k, j])) for k in range(9)),
                             "fp32") for j in range(4)] for i in range(5)]
    assert_same(got, want)


def test_nextafter_equals_numpy_in_float32_and_in_an_fp16_policy():
    rng = np.random.default_rng(5)
    a, b = _f32(rng, 500), _f32(rng, 500)[::-1].copy()
    assert_same(xp.nextafter(xp.asarray(a, dtype=xp.float32), xp.asarray(b, dtype=xp.float32)),
                np.nextafter(a, b))
    h = lp.array_namespace("fp16")
    with np.errstate(over="ignore"):
        a16, b16 = a.astype(np.float16), b.astype(np.float16)
    assert_same(h.nextafter(h.asarray(a16), h.asarray(b16)), np.nextafter(a16, b16))


# -- policies: every floating array in the policy's format ---------------------------------

def test_fp16_policy_is_numpy_float16_arithmetic_whatever_dtype_is_asked():
    h = lp.array_namespace("fp16")
    rng = np.random.default_rng(6)
    a = (rng.standard_normal(3000) * 100).astype(np.float16)
    b = (rng.standard_normal(3000) * 10).astype(np.float16)
    x, y = h.asarray(a, dtype=h.float64), h.asarray(b, dtype=h.float32)
    assert x.tensor.fmt == lp.FP16 and y.tensor.fmt == lp.FP16
    with np.errstate(all="ignore"):
        for got, want in [(x + y, a + b), (x - y, a - b), (x * y, a * b), (x / y, a / b),
                          (h.sqrt(h.abs(x)), np.sqrt(np.abs(a)))]:
            assert_same(got, want)
    assert h.finfo(h.float64).eps == float(np.finfo(np.float16).eps)
    assert h.finfo(h.float32).max == float(np.finfo(np.float16).max)
    # values asked for in float64 are rounded into FP16 once
    v = rng.standard_normal(1000)
    assert_same(h.asarray(v, dtype=h.float64), v.astype(np.float16))


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide"])
def test_bf16_policy_equals_ml_dtypes_bfloat16(op):
    bf = lp.array_namespace("bf16")
    rng = np.random.default_rng(7)
    bf16 = ml_dtypes.bfloat16
    a = (rng.standard_normal(3000) * 1e3).astype(bf16)
    b = (rng.standard_normal(3000)).astype(bf16)
    with np.errstate(all="ignore"):
        want = getattr(np, op)(a, b)
    got = getattr(bf, op)(bf.asarray(a.astype(np.float64)), bf.asarray(b.astype(np.float64)))
    assert_same(got, want.astype(np.float64))


def test_policy_mode_rounds_toward_zero():
    rz = lp.array_namespace("bf16", mode="rz")
    x = rz.asarray([1.0, -1.0]) / 3
    want = [reference_round(F(1, 3), "bf16", "rz"), reference_round(F(-1, 3), "bf16", "rz")]
    assert_same(x, want)


def test_copysign_in_a_format_without_negative_zero():
    n = lp.array_namespace("e4m3fnuz")
    got = n.copysign(n.asarray([2.0, 0.0, 3.0]), n.asarray([-1.0, -1.0, 1.0]))
    assert_same(got, [-2.0, 0.0, 3.0])      # FNUZ formats have no -0: the zero stays +0


def test_linalg_solve_in_fp16_is_lowprec_linalg():
    h = lp.array_namespace("fp16")
    rng = np.random.default_rng(8)
    a = rng.standard_normal((6, 6)) + 6 * np.eye(6)
    b = rng.standard_normal(6)
    got = h.linalg.solve(h.asarray(a), h.asarray(b)[:, None])
    want = lp.linalg.solve(lp.tensor(a, "fp16"), lp.tensor(b[:, None], "fp16"))
    assert_same(got, np.asarray(want))
    x = np.linalg.solve(a, b)
    assert np.max(np.abs(np.asarray(got)[:, 0] - x)) < 50 * 2.0 ** -11 * np.max(np.abs(x))


# -- the protocols -----------------------------------------------------------------------

def test_namespaces_and_info():
    x = xp.asarray([1.0], dtype=xp.float32)
    assert x.__array_namespace__() is xp
    assert lp.tensor([1.0], "fp32").__array_namespace__() is xp
    t16 = lp.tensor([1.0, 2.0], "bf16")
    assert t16.__array_namespace__() is lp.array_namespace("bf16")
    with pytest.raises(ValueError, match="api_version"):
        t16.__array_namespace__(api_version="1999.01")
    assert xp.__array_api_version__ == "2024.12"
    info = xp.__array_namespace_info__()
    assert info.default_dtypes()["real floating"] == xp.float64
    assert "complex floating" not in info.default_dtypes() or \
        info.default_dtypes()["complex floating"] is None
    assert set(info.dtypes(kind="real floating")) == {"float32", "float64"}
    assert x.device == xp.CPU and info.devices() == [xp.CPU]


def test_array_api_compat_finds_the_namespaces():
    compat = pytest.importorskip("sklearn.externals.array_api_compat",
                                 reason="scikit-learn's vendored array_api_compat")
    x = xp.asarray([1.0, 2.0])
    assert compat.array_namespace(x) is xp
    bf = lp.array_namespace("bf16")
    assert compat.array_namespace(bf.asarray([1.0])) is bf


def test_errors():
    bf = lp.array_namespace("bf16")
    with pytest.raises(TypeError, match="complex"):
        xp.asarray([1.0], dtype=np.complex128)
    with pytest.raises(ValueError, match="CPU"):
        xp.asarray([1.0], device="gpu")
    with pytest.raises(TypeError):
        xp.add(bf.asarray([1.0]), xp.asarray([1.0]))          # two namespaces
    with pytest.raises(TypeError, match="namespace"):
        np.mean(xp.asarray([1.0]))                             # NumPy's functions refuse
    with pytest.raises(ValueError, match="sign"):
        lp.array_namespace("e8m0")
    assert lp.array_namespace("bf16") is bf                    # one per policy


def test_inputs_are_never_modified():
    a = np.array([1.0, 2.0, 3.0])
    x = xp.asarray(a, dtype=xp.float32, copy=True)
    x += 1
    assert list(a) == [1.0, 2.0, 3.0]
    t = lp.tensor([1.0, 2.0], "fp16")
    h = lp.array_namespace("fp16")
    y = h.asarray(t, copy=True)
    y *= 3
    assert list(np.asarray(t)) == [1.0, 2.0]


# -- scikit-learn and SciPy through a policy -----------------------------------------------

_EXAMPLES = textwrap.dedent("""
    import os
    os.environ["SCIPY_ARRAY_API"] = "1"     # before SciPy (and scikit-learn) import
    import json
    import numpy as np
    import scipy.special, scipy.stats
    import sklearn
    from sklearn.linear_model import Ridge
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    import lowprec as lp

    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 5))
    y = X @ rng.standard_normal(5) + 0.1 * rng.standard_normal(200)
    labels = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)
    z = rng.standard_normal(1000)
    ridge = Ridge(alpha=1.0, solver="svd").fit(X, y).coef_
    lda = LinearDiscriminantAnalysis(solver="svd").fit(X, labels)
    lse, zs = scipy.special.logsumexp(z), scipy.stats.zscore(z)
    out = {}
    for fmt in ["fp32", "bf16", "fp16"]:
        xp = lp.array_namespace(fmt)
        with sklearn.config_context(array_api_dispatch=True):
            r = Ridge(alpha=1.0, solver="svd").fit(xp.asarray(X), xp.asarray(y))
            m = LinearDiscriminantAnalysis(solver="svd").fit(xp.asarray(X),
                                                            xp.asarray(labels))
            pred = m.predict(xp.asarray(X))
        rel = lambda got, want: float(np.max(np.abs(np.asarray(got) - want))
                                      / np.max(np.abs(want)))
        out[fmt] = {
            "types": [type(v).__name__ for v in (r.coef_, m.coef_)],
            "fmt": str(r.coef_.tensor.fmt),
            "ridge": rel(r.coef_, ridge), "lda": rel(m.coef_, lda.coef_),
            "agree": float(np.mean(np.asarray(pred) == lda.predict(X))),
            "logsumexp": rel(scipy.special.logsumexp(xp.asarray(z)), lse),
            "zscore": rel(scipy.stats.zscore(xp.asarray(z)), zs),
        }
    print(json.dumps(out))
""")


@pytest.mark.slow
def test_scikit_learn_and_scipy_run_in_bf16_with_errors_of_its_unit_roundoff():
    pytest.importorskip("sklearn", reason="scikit-learn (the test extra)")
    pytest.importorskip("scipy", reason="SciPy (the test extra)")
    import json
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    run = subprocess.run([sys.executable, "-c", _EXAMPLES], capture_output=True, text=True,
                         env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    units = {"fp32": 2.0 ** -24, "bf16": 2.0 ** -8, "fp16": 2.0 ** -11}
    for fmt, u in units.items():
        r = out[fmt]
        assert r["types"] == ["Array", "Array"] and r["fmt"] == fmt.upper()
        assert r["agree"] >= 0.99
        for key in ("ridge", "lda", "logsumexp", "zscore"):
            # computed in the format: errors of a few unit roundoffs, not float64's
            assert u / 100 < r[key] < 30 * u, (fmt, key, r[key])


def test_slogdet_does_not_overflow_where_det_does():
    h = lp.array_namespace("fp16")
    rng = np.random.default_rng(9)
    a = rng.standard_normal((40, 40)) * 4 + 8 * np.eye(40)
    sign, logabs = h.linalg.slogdet(h.asarray(a))
    want_sign, want_log = np.linalg.slogdet(np.asarray(h.asarray(a)))   # of the FP16 values
    assert float(np.asarray(h.linalg.det(h.asarray(a)))) in (np.inf, -np.inf)
    assert float(np.asarray(sign)) == want_sign
    # 40 pivots each with a relative error of a few u: the logarithms' sum is close
    assert abs(float(np.asarray(logabs)) - want_log) < 40 * 8 * 2.0 ** -11


def test_matrix_power_is_lowprec_linalgs_binary_powering():
    h = lp.array_namespace("fp16")
    a = np.random.default_rng(10).standard_normal((2, 4, 4)) / 2
    x = h.asarray(a)
    for n in (-2, 1, 2, 3, 5, 6):
        got = np.asarray(h.linalg.matrix_power(x, n))
        want = np.stack([np.asarray(lp.linalg.matrix_power(lp.tensor(np.asarray(x)[i], "fp16"),
                                                           n, model="exact"))
                         for i in range(2)])
        assert_same(got, want)


# -- bad input and edge cases --------------------------------------------------------------

@pytest.mark.parametrize("value", [None, "1.5", b"1", [1.0], object()])
def test_full_refuses_fill_values_that_are_not_numbers(value):
    # None, strings and bytes were turned into numbers by np.float64
    with pytest.raises(TypeError, match="fill_value must be a bool, int or float"):
        xp.full(3, value)
    with pytest.raises(TypeError, match="fill_value must be a bool, int or float"):
        xp.full_like(xp.zeros(2), value)


def test_full_takes_numbers_and_0d_arrays_and_says_what_a_shape_is():
    assert_same(xp.full(2, 0.1, dtype=xp.float32), np.full(2, np.float32(0.1)))
    assert_same(xp.full((1, 2), xp.asarray(2.5)), [[2.5, 2.5]])
    assert xp.full(2, True).dtype == xp.bool and xp.full(2, 7).dtype == xp.int64
    with pytest.raises(TypeError, match="0-d array"):
        xp.full(2, xp.asarray([1.0, 2.0]))
    with pytest.raises(TypeError, match="shape must be an int or a tuple of ints, got float"):
        xp.full(2.5, 1.0)
    with pytest.raises(ValueError, match="negative dimension"):
        xp.zeros((2, -1))
    # Integers past the integer dtype: a ValueError naming it, not NumPy's OverflowError.
    for value, dtype in ((2**70, None), (-(2**64), None), (300, xp.int8)):
        with pytest.raises(ValueError, match="does not fit"):
            xp.full(3, value, dtype=dtype)
    assert np.asarray(xp.full(1, 2**63 - 1))[0] == 2**63 - 1


@pytest.mark.parametrize("args", [(0, 10, 0), (0.0, 1.0, 0.0)])
def test_arange_refuses_step_zero(args):
    # was ZeroDivisionError
    with pytest.raises(ValueError, match="step must not be zero"):
        xp.arange(*args)


_X2 = xp.ones((2, 3))


@pytest.mark.parametrize("call", [
    lambda: xp.linalg.cross(_X2, _X2, axis=5),
    lambda: xp.sum(_X2, axis=5),
    lambda: xp.sort(_X2, axis=5),
    lambda: xp.argsort(_X2, axis=-3),
    lambda: xp.squeeze(_X2, axis=5),
    lambda: xp.expand_dims(_X2, axis=5),
    lambda: xp.max(_X2, axis=5),
    lambda: xp.tensordot(_X2, xp.ones((3, 2)), axes=([5], [0])),
])
def test_bad_axes_raise_numpys_axis_error(call):
    # AxisError is both a ValueError and an IndexError, as in NumPy
    with pytest.raises(np.exceptions.AxisError, match=r"axis -?[35] is out of range"):
        call()


def test_tensordot_and_expand_dims_refuse_what_they_cannot_take():
    with pytest.raises(ValueError, match=r"axes=3 contracts more dimensions"):
        xp.tensordot(xp.ones((2, 2)), xp.ones((2, 2)), axes=3)
    with pytest.raises(TypeError, match="expand_dims takes one axis"):
        xp.expand_dims(_X2, axis=(0, 1))


@pytest.mark.parametrize("fn", ["max", "min"])
def test_max_and_min_refuse_only_reductions_over_zero_elements(fn):
    # (0, 3) reduced along axis 1 is an empty result, not an empty reduction
    for shape, axis in [((0, 3), 1), ((0, 3), (1,)), ((4, 0, 2), 2), ((0, 3), ())]:
        want = getattr(np, fn)(np.zeros(shape), axis=axis)
        got = getattr(xp, fn)(xp.zeros(shape), axis=axis)
        assert got.shape == want.shape and got.dtype == xp.float64
        kept = getattr(xp, fn)(xp.zeros(shape), axis=axis, keepdims=True)
        assert kept.shape == getattr(np, fn)(np.zeros(shape), axis=axis, keepdims=True).shape
    for shape, axis in [((0, 3), 0), ((0, 3), None), ((3, 0), 1)]:
        with pytest.raises(ValueError, match="reduction over zero elements"):
            getattr(xp, fn)(xp.zeros(shape), axis=axis)


def test_clip_is_the_draft_standards_maximum_of_minimum():
    # a NaN bound gives NaN, as NumPy's clip and maximum(minimum(x, max), min)
    x = np.array([-3.0, -1.5, 0.5, 1.0, 2.5, np.nan, np.inf, -np.inf])
    lo = np.array([-2.0, np.nan, 0.0, -1.0, 1.0, 0.0, 0.0, np.nan])
    hi = np.array([2.0, 2.0, np.nan, 0.5, 3.0, 1.0, 1.0, 1.0])
    a = xp.asarray(x)
    for mn, mx in [(np.nan, None), (None, np.nan), (lo, None), (None, hi), (lo, hi),
                   (-1.0, 1.0), (1.0, -1.0)]:
        want = x
        if mx is not None:
            want = np.minimum(want, mx)
        if mn is not None:
            want = np.maximum(want, mn)
        as_arg = lambda v: xp.asarray(v) if isinstance(v, np.ndarray) else v  # noqa: E731
        assert_same(xp.clip(a, min=as_arg(mn), max=as_arg(mx)), want)
    assert_same(xp.clip(xp.asarray([-0.0]), min=-1.0, max=1.0), [-0.0])   # x's own zero kept


def test_asarray_of_integers_past_int64():
    # was "asarray needs real numbers, got object"
    with pytest.raises(ValueError, match="does not fit int64.*dtype=float64"):
        xp.asarray(2**70)
    with pytest.raises(ValueError, match="does not fit uint64"):
        xp.asarray(2**64, dtype=xp.uint64)
    assert int(np.asarray(xp.asarray(2**63, dtype=xp.uint64))) == 2**63
    # asked for a floating dtype: one rounding of the exact integer (through float64
    # it would be two: 2**70 + 2**46 + 1 is 2**70 + 2**46 there, a tie rounding down)
    v = 2**70 + 2**46 + 1
    assert_same(xp.asarray(v, dtype=xp.float32), [reference_round(F(v), "fp32")][0])
    assert float(np.asarray(xp.asarray(v, dtype=xp.float32))) == 2.0**70 + 2.0**47


# -- a policy's matrix products under a Tensor Core model -----------------------------------

# Every (input format, model) pair where the model takes the format: the BF16 and FP16
# block-FMA paths, and the FP8 ones (the block models and the matrix-unit instructions).
_TC_PAIRS = ([(f, m) for f in ("bf16", "fp16") for m in ("h100", "a100", "b200")]
             + [(f, m) for f in ("e4m3", "e5m2")
                for m in ("h100", "b200", "h100-mma", "h100/wgmma", "b200/tcgen05")])


@pytest.mark.parametrize("fmt,model", _TC_PAIRS)
def test_policy_matmul_is_the_models_product_rounded_once_into_the_format(fmt, model):
    # The contract: the model's product in its own output format
    # (FP32), then one rounding into the policy's format: lp.round(lp.matmul(...)).
    ns = lp.array_namespace(fmt, matmul=model)
    rng = np.random.default_rng(11)
    scale = np.exp2(rng.integers(-3, 4, (2, 4, 37)))
    a = ns.asarray(rng.standard_normal((2, 4, 37)) * scale)
    b = ns.asarray(rng.standard_normal((37, 3)))
    av, bv = np.asarray(a), np.asarray(b)
    want = lp.round(lp.matmul(av, bv, model=model, in_fmt=fmt), fmt)
    for got in (ns.matmul(a, b), a @ b, ns.linalg.matmul(a, b)):
        assert got.tensor.fmt == lp.format(fmt)
        assert_same(got, want)
    # tensordot: the same product of the matrices it reshapes to
    assert_same(ns.tensordot(a, b, axes=1), want)
    assert_same(ns.linalg.tensordot(a, b, axes=([2], [0])), want)
    # vecdot: each dot product through the model, rounded once
    u, v = a[0], ns.asarray(rng.standard_normal((4, 37)))
    want_dot = lp.round(lp.matmul(np.asarray(u)[:, None, :], np.asarray(v)[:, :, None],
                                  model=model, in_fmt=fmt), fmt)[:, 0, 0]
    assert_same(ns.vecdot(u, v), want_dot)
    assert_same(ns.linalg.vecdot(u, v), want_dot)
    # a vector operand: NumPy's matmul shapes
    assert_same(ns.matmul(a[0], b[:, 0]), want[0][:, 0])


def test_policy_matmul_rounds_the_models_output_in_the_policys_mode():
    ns = lp.array_namespace("bf16", mode="rz", matmul="h100")
    rng = np.random.default_rng(12)
    a, b = rng.standard_normal((6, 20)), rng.standard_normal((20, 5))
    a16, b16 = lp.round(a, "bf16", "rz"), lp.round(b, "bf16", "rz")
    fp32 = lp.matmul(a16, b16, model="h100", in_fmt="bf16")
    want = lp.round(fp32, "bf16", "rz")
    assert_same(ns.matmul(ns.asarray(a), ns.asarray(b)), want)
    assert not np.array_equal(want, lp.round(fp32, "bf16"))     # the mode mattered


def test_policy_matmul_on_integers_is_the_exact_sum_rounded_once():
    # Small integers: every product and block sum of the h100 model is exact (sums
    # below 2**12, far inside FP32's 24 bits), so the FP32 output is the exact dot
    # product and the result is its one rounding into BF16.
    ns = lp.array_namespace("bf16", matmul="h100")
    rng = np.random.default_rng(13)
    a = rng.integers(-16, 17, (5, 12)).astype(np.float64)
    b = rng.integers(-16, 17, (12, 6)).astype(np.float64)
    exact = [[sum(F(int(a[i, k])) * F(int(b[k, j])) for k in range(12)) for j in range(6)]
             for i in range(5)]
    want = [[reference_round(s, "bf16") for s in row] for row in exact]
    assert_same(ns.matmul(ns.asarray(a), ns.asarray(b)), want)
    assert any(F(w) != s for wr, sr in zip(want, exact) for w, s in zip(wr, sr))


_SKLEARN_H100 = textwrap.dedent("""
    import os
    os.environ["SCIPY_ARRAY_API"] = "1"     # before SciPy (and scikit-learn) import
    import json
    import numpy as np
    import sklearn
    from sklearn.decomposition import PCA
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.linear_model import Ridge
    import lowprec as lp

    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 4)) * [3.0, 2.0, 1.0, 0.5]
    y = X @ rng.standard_normal(4) + 0.1 * rng.standard_normal(80)
    labels = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)
    xp = lp.array_namespace("bf16", matmul="h100")
    with sklearn.config_context(array_api_dispatch=True):
        r = Ridge(alpha=1.0, solver="svd").fit(xp.asarray(X), xp.asarray(y))
        m = LinearDiscriminantAnalysis(solver="svd").fit(xp.asarray(X), xp.asarray(labels))
        p = PCA(n_components=2, svd_solver="full").fit(xp.asarray(X))
        t = p.transform(xp.asarray(X))
    rel = lambda got, want: float(np.max(np.abs(np.abs(np.asarray(got)) - np.abs(want)))
                                  / np.max(np.abs(want)))
    p64 = PCA(n_components=2, svd_solver="full").fit(X)
    print(json.dumps({
        "fmts": [str(v.tensor.fmt) for v in (r.coef_, m.coef_, p.components_, t)],
        "ridge": rel(r.coef_, Ridge(alpha=1.0, solver="svd").fit(X, y).coef_),
        "lda": rel(m.coef_, LinearDiscriminantAnalysis(solver="svd").fit(X, labels).coef_),
        "pca": rel(p.components_, p64.components_),
        "transform": rel(t, p64.transform(X)),
    }))
""")


@pytest.mark.slow
def test_scikit_learn_fits_under_a_bf16_policy_with_h100_products():
    # Ridge, LDA and PCA multiply matrices: under "h100" each product is the Tensor
    # Core's FP32 output rounded into BF16 (this raised ValueError on every product)
    pytest.importorskip("sklearn", reason="scikit-learn (the test extra)")
    pytest.importorskip("scipy", reason="SciPy (the test extra)")
    import json
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    run = subprocess.run([sys.executable, "-c", _SKLEARN_H100], capture_output=True,
                         text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["fmts"] == ["BF16"] * 4
    for key in ("ridge", "lda", "pca", "transform"):
        # computed in BF16: a few of its unit roundoffs (2**-8) off float64's answer
        assert 2.0 ** -8 / 100 < out[key] < 30 * 2.0 ** -8, (key, out[key])
