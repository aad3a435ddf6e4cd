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
from lowprec.testing import reference_round
from peers import ml_dtypes

F = Fraction


def _f32(rng, n, special=True):
    v = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))).astype(np.float32)
    if special:
        v[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -3.4e38, 65504.0]
    return v


def _same(got, want):
    """Equal as float64 values, NaNs equal (IEEE 754 leaves a NaN's sign open), signed
    zeros told apart."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    num = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[num]), np.signbit(want[num]))
    np.testing.assert_array_equal(got, want)


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
    _same(got, want)
    _same({"add": x + y, "subtract": x - y, "multiply": x * y, "divide": x / y}[op], want)


def test_float32_sqrt_and_float64_arithmetic_equal_numpy():
    rng = np.random.default_rng(2)
    a = np.abs(_f32(rng, 3000))
    with np.errstate(all="ignore"):
        _same(xp.sqrt(xp.asarray(a, dtype=xp.float32)), np.sqrt(a))
        b = rng.standard_normal(3000) * 1e30
        c = rng.standard_normal(3000)
        got = xp.asarray(b, dtype=xp.float64) / xp.asarray(c, dtype=xp.float64)
        assert got.dtype == xp.float64
        _same(got, b / c)


def test_python_scalars_take_the_arrays_dtype():
    x = xp.asarray([1.0, 3.0], dtype=xp.float32)
    r = x / 3
    assert r.dtype == xp.float32
    _same(r, np.float32([1.0, 3.0]) / np.float32(3))
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
    _same(got, want)


def test_nextafter_equals_numpy_in_float32_and_in_an_fp16_policy():
    rng = np.random.default_rng(5)
    a, b = _f32(rng, 500), _f32(rng, 500)[::-1].copy()
    _same(xp.nextafter(xp.asarray(a, dtype=xp.float32), xp.asarray(b, dtype=xp.float32)),
          np.nextafter(a, b))
    h = lp.array_namespace("fp16")
    with np.errstate(over="ignore"):
        a16, b16 = a.astype(np.float16), b.astype(np.float16)
    _same(h.nextafter(h.asarray(a16), h.asarray(b16)), np.nextafter(a16, b16))


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
            _same(got, want)
    assert h.finfo(h.float64).eps == float(np.finfo(np.float16).eps)
    assert h.finfo(h.float32).max == float(np.finfo(np.float16).max)
    # values asked for in float64 are rounded into FP16 once
    v = rng.standard_normal(1000)
    _same(h.asarray(v, dtype=h.float64), v.astype(np.float16))


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
    _same(got, want.astype(np.float64))


def test_policy_mode_rounds_toward_zero():
    rz = lp.array_namespace("bf16", mode="rz")
    x = rz.asarray([1.0, -1.0]) / 3
    want = [reference_round(F(1, 3), "bf16", "rz"), reference_round(F(-1, 3), "bf16", "rz")]
    _same(x, want)


def test_copysign_in_a_format_without_negative_zero():
    n = lp.array_namespace("e4m3fnuz")
    got = n.copysign(n.asarray([2.0, 0.0, 3.0]), n.asarray([-1.0, -1.0, 1.0]))
    _same(got, [-2.0, 0.0, 3.0])      # FNUZ formats have no -0: the zero stays +0


def test_linalg_solve_in_fp16_is_lowprec_linalg():
    h = lp.array_namespace("fp16")
    rng = np.random.default_rng(8)
    a = rng.standard_normal((6, 6)) + 6 * np.eye(6)
    b = rng.standard_normal(6)
    got = h.linalg.solve(h.asarray(a), h.asarray(b)[:, None])
    want = lp.linalg.solve(lp.tensor(a, "fp16"), lp.tensor(b[:, None], "fp16"))
    _same(got, np.asarray(want))
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
        _same(got, want)
