"""Tensor: every handled operation against exact oracles, promotion, context, refusal."""

import asyncio
import copy
import html
import pickle
import re
import threading
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowprec as lp
from helpers import assert_same, parse_html
from lowprec import testing as lpt
from peers import ml_dtypes, requires_ml_dtypes

FORMATS = [lp.FP16, lp.BF16, lp.FP8_E4M3, lp.FP8_E5M2, lp.FP32, lp.FP6_E3M2]
DET_MODES = ("rne", "rna", "rz", "ru", "rd", "ro")


def fmt_values(fmt, n):
    """n finite values of fmt, drawn by Hypothesis."""
    return st.lists(lpt.values(fmt, allow_nan=False, allow_infinity=False), min_size=n,
                    max_size=n).map(lambda xs: lpt_round(xs, fmt))


def lpt_round(xs, fmt):
    r = np.array([lpt.reference_round(x, fmt) for x in xs])
    return np.where(np.isfinite(r), r, 1.0)   # finite values of fmt only


def exact(op, a, b=None):
    a = Fraction(float(a))
    if op == "add":
        return a + Fraction(float(b))
    if op == "sub":
        return a - Fraction(float(b))
    if op == "mul":
        return a * Fraction(float(b))
    if op == "div":
        return a / Fraction(float(b))


def ref(value, fmt, mode):
    return lpt.reference_round(value, fmt, mode)


def ieee_zero(op, a, b, mode):
    """The sign of an exact zero result, by IEEE 754 (Fraction has no -0)."""
    sa, sb = np.signbit(a), np.signbit(b)
    if op in ("mul", "div"):
        negative = sa != sb
    else:
        sb = sb if op == "add" else not sb
        negative = (sa and sb) if (a == 0 and b == 0 and sa == sb) else (mode == "rd")
    return -0.0 if negative and fmt_has_neg_zero else 0.0


fmt_has_neg_zero = True


def expected_op(op, a, b, fmt, mode):
    global fmt_has_neg_zero
    fmt_has_neg_zero = fmt.has_negative_zero
    out = []
    for x, y in zip(a, b):
        v = exact(op, x, y)
        out.append(ref(v, fmt, mode) if v != 0 else ieee_zero(op, x, y, mode))
    return out


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("mode", DET_MODES)
@settings(max_examples=15)
@given(data=st.data())
def test_arithmetic_operators_are_correctly_rounded(fmt, mode, data):
    a = data.draw(fmt_values(fmt, 8))
    b = data.draw(fmt_values(fmt, 8))
    b[b == 0] = 1.0
    ta, tb = lp.tensor(a, fmt), lp.tensor(b, fmt)
    with lp.context(mode=mode):
        results = {"add": ta + tb, "sub": ta - tb, "mul": ta * tb, "div": ta / tb}
        square = ta ** 2
        root = np.sqrt(abs(ta))
    for op, t in results.items():
        assert t.fmt == fmt
        assert_same(t.values, expected_op(op, a, b, fmt, mode), op)
        kernel = getattr(lp, op)(a, b, fmt, mode)
        assert_same(t.values, kernel)
    assert_same(square.values, expected_op("mul", a, a, fmt, mode))
    assert_same(root.values, lp.sqrt(np.abs(a), fmt, mode))


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@settings(max_examples=15)
@given(data=st.data())
def test_exact_and_rounded_once_ufuncs(fmt, data):
    a = data.draw(fmt_values(fmt, 8))
    b = data.draw(fmt_values(fmt, 8))
    ta, tb = lp.tensor(a, fmt), lp.tensor(b, fmt)
    assert_same((-ta).values, -a)
    assert_same(abs(ta).values, np.abs(a))
    assert_same(np.maximum(ta, tb).values, np.maximum(a, b))
    assert_same(np.minimum(ta, tb).values, np.minimum(a, b))
    for ufunc in (np.less, np.less_equal, np.equal, np.not_equal, np.greater, np.greater_equal):
        r = ufunc(ta, tb)
        assert isinstance(r, np.ndarray) and r.dtype == bool
        assert np.array_equal(r, ufunc(a, b))
    for ufunc in (np.exp, np.tanh, np.sin, np.log1p):
        with np.errstate(all="ignore"):
            expected = [ref(float(v), fmt, "rne") for v in ufunc(np.abs(a))]
        assert_same(ufunc(abs(ta)).values, expected, ufunc.__name__)


def test_operations_never_modify_inputs_and_values_are_read_only():
    a = np.array([0.1, 0.2, 0.3])
    t = lp.tensor(a, "bf16")
    before = t.values.copy()
    for f in (lambda: t + t, lambda: t * 3, lambda: np.exp(t), lambda: t.sum(),
              lambda: np.concatenate([t, t]), lambda: t @ t, lambda: t.astype("e4m3")):
        f()
    assert_same(t.values, before)
    assert a.tolist() == [0.1, 0.2, 0.3]
    with pytest.raises(ValueError, match="read-only"):
        t.values[0] = 1.0


def float32_loop(a, b):
    """A float32 accumulator adding exact products one at a time (each addition
    correctly rounded: Fraction sum, then one rounding to FP32)."""
    out = np.empty((a.shape[0], b.shape[1]))
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            acc = 0.0
            for k in range(a.shape[1]):
                if not np.isfinite(acc):
                    continue   # inf + finite stays inf
                acc = lpt.reference_round(Fraction(acc) + Fraction(a[i, k]) * Fraction(b[k, j]),
                                          lp.FP32)
            out[i, j] = acc
    return out


@pytest.mark.parametrize("fmt", [lp.FP16, lp.BF16], ids=lambda f: f.name)
@settings(max_examples=10)
@given(data=st.data())
def test_matmul_accumulates_in_fp32(fmt, data):
    a = data.draw(fmt_values(fmt, 4 * 9)).reshape(4, 9)
    b = data.draw(fmt_values(fmt, 9 * 3)).reshape(9, 3)
    ta, tb = lp.tensor(a, fmt), lp.tensor(b, fmt)
    for r in (ta @ tb, np.matmul(ta, tb), np.dot(ta, tb)):
        assert r.fmt == lp.FP32
        assert_same(r.values, float32_loop(a, b))


def test_context_matmul_model_is_used():
    rng = np.random.default_rng(0)
    a = lp.tensor(rng.standard_normal((8, 32)), "fp16")
    b = lp.tensor(rng.standard_normal((32, 5)), "fp16")
    with lp.context(matmul="a100"):
        r = a @ b
    expected = lp.matmul(a.values, b.values, model="a100", in_fmt="fp16")
    assert isinstance(expected, np.ndarray)
    assert_same(r.values, expected)
    # The context changed something: the default fp32 model differs on this data.
    assert not np.array_equal(r.values, (a @ b).values, equal_nan=True)


def test_promotion_table():
    assert lp.result_format("fp16", "bf16") is lp.FP32
    assert lp.result_format("bf16", "fp16") is lp.FP32
    assert lp.result_format("e4m3", "bf16") is lp.BF16
    assert lp.result_format("fp32", "fp16") is lp.FP32
    assert lp.result_format("tf32", "fp16") is lp.FP32
    assert lp.result_format("fp4", "fp6") is lp.FP6_E2M3
    r = lp.tensor([1.0], "fp16") + lp.tensor([1.0], "bf16")
    assert r.fmt is lp.FP32


@pytest.mark.parametrize("a", [f for f in lp.NAMED_FORMATS.values() if f.bits <= 16 and f.signed],
                         ids=lambda f: f.name)
@pytest.mark.parametrize("b", [f for f in lp.NAMED_FORMATS.values() if f.bits <= 16 and f.signed],
                         ids=lambda f: f.name)
def test_promotion_holds_both_value_sets(a, b):
    r = lp.result_format(a, b)
    both = np.concatenate([lp.decode(np.arange(2 ** f.bits, dtype=np.uint64), f) for f in (a, b)])
    finite = both[np.isfinite(both)]
    assert np.array_equal(lp.round(finite, r), finite)   # every value survives exactly
    if np.isinf(both).any():
        assert r.has_inf


def test_scalars_and_plain_arrays_take_the_tensor_format():
    t = lp.tensor([1.0, 2.0], "bf16")
    r = t + 0.1
    assert r.fmt is lp.BF16
    # 0.1 enters as BF16(0.1), then one rounding of the sum.
    expected = [lpt.reference_round(Fraction(v) + Fraction(lpt.reference_round(0.1, lp.BF16)),
                                    lp.BF16) for v in (1.0, 2.0)]
    assert_same(r.values, expected)
    assert (np.array([1.0, 1.0]) * t).fmt is lp.BF16
    assert (2 ** -10 - t).fmt is lp.BF16


def test_indexing_views_setitem_iteration():
    t = lp.tensor(np.arange(12.0).reshape(3, 4) / 10, "bf16")
    row = t[1]
    assert row.fmt is lp.BF16 and row.shape == (4,)
    assert_same(t[:, ::2].values, t.values[:, ::2])
    t[0, 0] = 0.1
    assert t[0, 0].values == lpt.reference_round(0.1, lp.BF16)
    with lp.context(mode="ru"):
        t[0, 1] = 1 + 2**-20
    assert float(t[0, 1]) == 1 + 2**-7
    v = t[2]
    v[0] = 5.0
    assert float(t[2, 0]) == 5.0          # a view writes through, as in NumPy
    assert len(t) == 3 and [r.shape for r in t] == [(4,)] * 3
    assert (t + lp.tensor([1.0, 2.0, 3.0, 4.0], "bf16")).shape == (3, 4)
    assert t.T.shape == (4, 3) and t.reshape(2, 6).fmt is lp.BF16


def test_handled_functions_keep_the_format():
    t = lp.tensor([[1.0, 2.0], [3.0, 4.0]], "fp16")
    for r in (np.reshape(t, (4,)), np.transpose(t), np.concatenate([t, t]), np.stack([t, t]),
              np.where(t.values > 2, t, 0.0), np.take(t, [0]), np.clip(t, 1.5, 3.5)):
        assert isinstance(r, lp.Tensor) and r.fmt is lp.FP16
    assert float(np.sum(t)) == 10.0 and float(np.mean(t)) == 2.5
    assert float(t.sum(acc="fp32")) == 10.0
    assert np.argmax(t) == 3 and float(np.max(t)) == 4.0
    assert np.concatenate([t, lp.tensor([[1.0, 1.0]], "bf16")]).fmt is lp.FP32


def test_sum_rounds_every_addition():
    ones = lp.tensor(np.ones(1000), "bf16")
    assert float(ones.sum(order="sequential")) == 256.0   # BF16 stagnation
    assert float(ones.sum(order="pairwise")) == 1000.0
    assert float(ones.sum(acc="fp32", order="sequential")) == 1000.0
    m = lp.tensor(np.full(1000, 3.0), "e4m3").mean(acc="fp32")
    assert float(m) == 3.0


def test_unsupported_calls_raise_type_error_naming_them():
    t = lp.tensor([1.0, 2.0], "fp16")
    with pytest.raises(TypeError, match="numpy.bitwise_and"):
        np.bitwise_and(t, t)
    with pytest.raises(TypeError, match="numpy.fft.fft2 is not implemented"):
        np.fft.fft2(t)    # (np.fft.fft and np.linalg.eig are emulated now)
    with pytest.raises(TypeError, match="numpy.roots is not implemented"):
        np.roots(t)
    with pytest.raises(TypeError, match="add.reduce"):
        np.add.reduce(t)
    with pytest.raises(TypeError, match="out="):
        np.add(t, t, out=np.empty(2))
    with pytest.raises(TypeError, match="needs a format.*pass fmt"):
        lp.tensor([1.0])


@requires_ml_dtypes
@pytest.mark.oracle
def test_conversions():
    t = lp.tensor([0.1, 1e-5, 300.0], "bf16")
    assert t.astype("e4m3").fmt is lp.FP8_E4M3
    assert_same(t.to_numpy(np.float32), t.values.astype(np.float32))
    h = t.to_numpy(np.float16)   # BF16 -> FP16 is one rounding of the exact value
    assert_same(h.astype(np.float64), [lpt.reference_round(v, lp.FP16) for v in t.values])
    b = lp.tensor([0.1, 2.0], "e4m3").to_numpy(ml_dtypes.bfloat16)
    assert b.dtype == ml_dtypes.bfloat16 and b.astype(float).tolist() == [0.1015625, 2.0]
    assert np.asarray(t).dtype == np.float64
    assert_same(np.asarray(t), t.values)
    assert "fmt=BF16" in repr(t) and t.dtype is lp.BF16 and t.bits.dtype == np.uint16


def test_tensor_ops_record_flags():
    t = lp.tensor([60000.0, 3 * 2.0**-24], "fp16")
    with lp.flags() as f:
        t * 2.0      # 120000 overflows
        t * 0.5      # 1.5 * 2**-24 is tiny and inexact
    assert f.overflow == 1 and f.underflow == 1


def test_nested_contexts_restore_the_outer_one():
    assert lp.get_context().mode == "rne"
    with lp.context(mode="rz", matmul="h100"):
        with lp.context(mode="ru"):
            assert (lp.get_context().mode, lp.get_context().matmul) == ("ru", "h100")
        assert lp.get_context().mode == "rz"
    assert (lp.get_context().mode, lp.get_context().matmul) == ("rne", "fp32")
    with pytest.raises(ValueError, match="valid modes"), lp.context(mode="up"):
        pass
    with pytest.raises(ValueError, match="unknown matmul model"), lp.context(matmul="tpu"):
        pass


def test_contexts_do_not_leak_between_threads():
    barrier = threading.Barrier(2)
    seen = {}

    def worker(mode):
        with lp.context(mode=mode):
            barrier.wait()
            seen[mode] = float((lp.tensor([1.0], "bf16") + 2**-9)[0])
            barrier.wait()

    threads = [threading.Thread(target=worker, args=(m,)) for m in ("ru", "rd")]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert seen == {"ru": 1.0078125, "rd": 1.0}
    assert lp.get_context().mode == "rne"


def test_contexts_do_not_leak_between_asyncio_tasks():
    async def task(mode, gate_in, gate_out):
        with lp.context(mode=mode):
            gate_out.set()
            await gate_in.wait()
            return float((lp.tensor([1.0], "bf16") + 2**-9)[0])

    async def main():
        e1, e2 = asyncio.Event(), asyncio.Event()
        t1 = asyncio.create_task(task("ru", e2, e1))
        t2 = asyncio.create_task(task("rd", e1, e2))
        return await asyncio.gather(t1, t2)

    assert asyncio.run(main()) == [1.0078125, 1.0]


def test_stochastic_context_is_seeded():
    x = np.linspace(1, 2, 1001)
    with lp.context(mode="sr", rng=5):
        a = lp.tensor(x, "bf16")
    with lp.context(mode="sr", rng=5):
        b = lp.tensor(x, "bf16")
    assert_same(a.values, b.values)


# -- plain operands in comparisons and selections --------------------------------------

def test_comparisons_and_selections_use_plain_operands_exactly():
    t = lp.tensor([1.0, -2.0], "e4m3")
    assert_same(np.clip(t, 0, None).values, [1.0, 0.0])
    assert_same(np.clip(t, 0).values, [1.0, 0.0])
    assert_same(np.maximum(t, -np.inf).values, [1.0, -2.0])
    assert (t < np.inf).all() and (lp.tensor([6.0], "fp4") < 7.0).all()
    assert (lp.tensor([1.0], "bf16") < 1.001).all()
    # A selected plain value is rounded into the format once (1000 overflows E4M3).
    assert np.isnan(np.maximum(t, 1000.0).values).all()


def test_sum_and_mean_over_several_axes():
    x = np.arange(24.0).reshape(2, 3, 4)
    t = lp.tensor(x, "fp16")
    assert_same(t.sum(axis=(0, 2)).values, x.sum(axis=(0, 2)))
    assert_same(np.mean(t, axis=(0, 2)).values, x.mean(axis=(0, 2)))


def test_where_with_plain_branches_and_dot_limits():
    t = lp.tensor([1.0, 5.0], "fp16")
    r = np.where(t > 3, 1.0, 0.0)
    assert isinstance(r, np.ndarray) and r.tolist() == [0.0, 1.0]
    with pytest.raises(TypeError, match="1-D and 2-D"):
        np.dot(lp.tensor(np.ones((2, 3, 4)), "fp16"), lp.tensor(np.ones((2, 4, 5)), "fp16"))


def test_reciprocal_is_one_correct_rounding_and_results_are_copies():
    x = lp.tensor([3.0, 7.0], "fp16")
    with lp.context(mode="ru"):
        assert_same(np.reciprocal(x).values,
                    [lpt.reference_round(Fraction(1, 3), lp.FP16, "ru"),
                     lpt.reference_round(Fraction(1, 7), lp.FP16, "ru")])
    u = lp.tensor([1.0, 2.0], "bf16")
    v = +u
    v[0] = 7.0
    w = u ** 1
    w[1] = 9.0
    assert u.tolist() == [1.0, 2.0]
    assert (2 ** u).tolist() == [2.0, 4.0]


def test_matmul_rounds_plain_operands_with_rne_whatever_the_mode():
    t = lp.tensor([[1.0, 1.0]], "bf16")
    p = [[1.001], [1.001]]
    with lp.context(mode="ru"):
        r = t @ p
    assert_same(r.values, lp.matmul(t.values, p, in_fmt="bf16"))


def test_tensor_from_tensor_honours_rng():
    a = lp.tensor(np.full(1000, 1 + 2**-9), "fp32")
    assert_same(lp.tensor(a, "bf16", "sr", rng=0).values, lp.tensor(a, "bf16", "sr", rng=0).values)


# -- option types and arguments --------------------------------------------------------

@pytest.mark.parametrize("kwargs, exc, name", [
    (dict(subnormals="no"), TypeError, "subnormals"),
    (dict(subnormals=0), TypeError, "subnormals"),
    (dict(saturate="no"), TypeError, "saturate"),
    (dict(saturate=1), TypeError, "saturate"),
    (dict(mode=0), TypeError, "mode"),
    (dict(mode=""), ValueError, "mode"),
    (dict(mode="up"), ValueError, "mode"),
    (dict(matmul=5), TypeError, "matmul"),
    (dict(matmul=lp.FP16), TypeError, "matmul"),
    (dict(matmul="tpu"), ValueError, "matmul model"),
    (dict(rng=True), TypeError, "rng"),
    (dict(rng=1.5), TypeError, "rng"),
    (dict(rng=-1), ValueError, "rng"),
])
def test_context_refuses_wrong_typed_options(kwargs, exc, name):
    with pytest.raises(exc, match=name), lp.context(**kwargs):
        pass
    assert lp.get_context() == type(lp.get_context())()   # nothing leaked


def test_context_accepts_every_model_form_and_bools():
    custom = lp.TensorCoreModel(block=4, fraction_bits=24)
    for model in ("A100", lp.MODELS["h100"], custom):
        with lp.context(matmul=model):
            assert lp.get_context().matmul is model
    with lp.context(subnormals=np.False_, saturate=True):
        assert lp.get_context().subnormals is False and lp.get_context().saturate is True
        # saturate=True is in effect: 1e6 goes to FP16's max, not inf.
        assert float(lp.tensor(1e6, "fp16")) == lp.FP16.max


@pytest.mark.parametrize("mode, exc", [("", ValueError), (0, TypeError), (False, TypeError),
                                       ("up", ValueError)])
def test_tensor_and_astype_refuse_bad_modes(mode, exc):
    # A falsy mode must not fall back to the context's mode.
    with pytest.raises(exc, match="mode"):
        lp.tensor([0.1], "fp16", mode=mode)
    with pytest.raises(exc, match="mode"):
        lp.tensor([0.1], "fp16").astype("bf16", mode=mode)


def test_tensor_refuses_bad_rng():
    with pytest.raises(TypeError, match="rng"):
        lp.tensor([0.1], "fp16", "sr", rng=True)
    with pytest.raises(TypeError, match="rng"):
        lp.tensor([0.1], "fp16", rng="seed")


def test_matmul_wrapper_refuses_bad_model_type():
    t = lp.tensor([[1.0]], "fp16")
    with pytest.raises(TypeError, match="model"):
        lp.matmul(t, t, model=5)


def in_format(t, fmt=None):
    """Assert that t is a Tensor (of fmt) whose float64 values are all values of its
    format, by the Fraction reference; True (for ``assert in_format(t) and ...``)."""
    assert isinstance(t, lp.Tensor)
    assert fmt is None or t.fmt == fmt
    v = np.asarray(t)
    assert t.values.dtype == np.float64
    assert_same([lpt.reference_round(x, t.fmt) for x in v.ravel()], v.ravel())
    return True


T16 = [65504.0, 1.0 + 2.0**-10, -3.0]   # FP16 values; 65504 is not a BF16 value


@pytest.mark.parametrize("call", [
    lambda t, o: np.add(t, t, out=o), lambda t, o: np.exp(t, out=(o,)),
    lambda t, o: np.sum(t, out=o[:1].reshape(())), lambda t, o: np.mean(t, out=o[0:1]),
    lambda t, o: np.max(t, out=o[0:1].reshape(())), lambda t, o: np.amin(t, None, o[0:1]),
    lambda t, o: np.clip(t, 0, 1, out=o), lambda t, o: np.clip(t, 0, 1, o),
    lambda t, o: np.take(t, [0, 1, 2], out=o), lambda t, o: np.take(t, [0, 1, 2], None, o),
    lambda t, o: np.concatenate([t[:1], t[1:]], out=o), lambda t, o: np.stack([t], 0, o[None]),
    lambda t, o: np.dot(t, t, out=o[0:1].reshape(())),
    lambda t, o: np.matmul(t, t, out=o[:1].reshape(())),
], ids=["add", "exp", "sum", "mean", "max", "amin-positional", "clip", "clip-positional", "take",
        "take-positional", "concatenate", "stack-positional", "dot", "matmul"])
def test_out_is_refused_and_the_out_array_untouched(call):
    t = lp.tensor(T16, "fp16")
    o = np.full(3, 0.1)
    with pytest.raises(TypeError, match="out="):
        call(t, o)
    assert o.tolist() == [0.1] * 3


@pytest.mark.parametrize("call", [
    lambda x, t: np.concatenate([x], out=t), lambda x, t: np.clip(x, 0, 1, out=t),
    lambda x, t: np.sum(x, out=t), lambda x, t: np.all(x > 0, out=t),
    lambda x, t: np.any(x > 0, None, t), lambda x, t: np.add(x, x, out=t),
], ids=["concatenate", "clip", "sum", "all", "any-positional", "add"])
def test_a_tensor_is_never_an_out_array(call):
    t = lp.tensor([0.5, 0.5, 0.5], "fp16")
    with pytest.raises(TypeError, match="out="):
        call(np.full(3, 0.1), t)
    assert t.tolist() == [0.5] * 3


@pytest.mark.parametrize("call, name", [
    (lambda t: np.concatenate([t, t], dtype=ml_dtypes.bfloat16), "dtype"),
    (lambda t: np.concatenate([t, t], dtype=np.int8, casting="unsafe"), "dtype"),
    (lambda t: np.stack([t, t], dtype=np.float32), "dtype"),
    (lambda t: np.vstack([t, t], dtype=ml_dtypes.bfloat16), "dtype"),
    (lambda t: np.hstack([t, t], dtype=ml_dtypes.bfloat16), "dtype"),
    (lambda t: np.sum(t, dtype=np.float32), "dtype"),
    (lambda t: np.mean(t, dtype=np.float32), "dtype"),
    (lambda t: np.clip(t, 0, 1, dtype=ml_dtypes.bfloat16), "dtype"),
    (lambda t: np.add(t, t, dtype=np.float32), "dtype"),
    (lambda t: np.add(t, t, casting="unsafe"), "casting"),
    (lambda t: np.clip(t, 0, 1, casting="unsafe"), "casting"),
    (lambda t: np.multiply(t, t, where=[True, False, True]), "where"),
    (lambda t: np.sum(t, where=[True, False, True]), "where"),
    (lambda t: np.mean(t, where=[True, False, True]), "where"),
    (lambda t: np.sum(t, initial=0.1), "initial"),
    (lambda t: np.sum(t, None, None, None, False, 0.1), "initial"),
    (lambda t: np.full_like(t, 0.1, dtype=int), "dtype"),
])
def test_dtype_where_initial_that_cannot_be_emulated_are_refused(call, name):
    with pytest.raises(TypeError, match=name):
        call(lp.tensor(T16, "fp16"))


def test_concatenate_keeps_casting_and_axis():
    t = lp.tensor(T16, "fp16")
    r = np.concatenate([t, t], axis=None, casting="no")
    assert in_format(r, lp.FP16)
    assert_same(r.values, T16 * 2)
    assert in_format(np.hstack([t, [0.1]]), lp.FP16)   # 0.1 enters as FP16(0.1)


@pytest.mark.parametrize("fn", [np.max, np.amax, np.min, np.amin])
@pytest.mark.parametrize("initial", [0.1, 3.3, -7.7, 1e6, -1e6])
def test_max_min_initial_is_rounded_into_the_format(fn, initial):
    t = lp.tensor([1.0, 2.0, 3.0], "fp16")
    r = fn(t, initial=initial)
    pick = max if fn in (np.max, np.amax) else min
    assert in_format(r, lp.FP16)
    assert_same(r.values, pick(lpt.reference_round(initial, lp.FP16), 3.0 if pick is max else 1.0))
    r = fn(t, None, None, False, initial)                # positional initial
    assert in_format(r, lp.FP16)
    r = fn(t, where=[False, False, False], initial=initial)   # nothing but initial
    assert_same(r.values, lpt.reference_round(initial, lp.FP16))
    with lp.context(mode="rz"):
        assert_same(fn(t, where=[False] * 3, initial=initial).values,
                    lpt.reference_round(initial, lp.FP16, "rz"))


def test_max_initial_tensor_promotes():
    t = lp.tensor([1.0, 2.0], "fp16")
    r = np.max(t, initial=lp.tensor(2.0**20, "bf16"))
    assert in_format(r, lp.FP32) and float(r) == 2.0**20


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("call", [
    lambda t: np.full_like(t, 0.1), lambda t: np.full_like(t, 0.1, dtype=np.float16),
    lambda t: np.full_like(t, 0.1, ml_dtypes.bfloat16), lambda t: np.full_like(t, 1e6, "e4m3"),
    lambda t: np.full_like(t, lp.tensor(0.1, "fp32")), lambda t: np.zeros_like(t, dtype="fp4"),
    lambda t: np.ones_like(t, np.float32, shape=(2, 2)),
])
def test_like_functions_store_values_of_the_format_named_by_dtype(call):
    t = lp.tensor(T16, "bf16")
    r = call(t)
    assert in_format(r)
    fill = float(r.values.ravel()[0])
    assert np.all(r.values == fill) or np.all(np.isnan(r.values))


@pytest.mark.parametrize("call, fmt, fill, shape", [
    (lambda t: np.full_like(t, 0.1), lp.BF16, 0.1, (3,)),
    (lambda t: np.full_like(t, 0.1, dtype=np.float16), lp.FP16, 0.1, (3,)),
    (lambda t: np.full_like(t, 1e6, "e4m3"), lp.FP8_E4M3, 1e6, (3,)),
    (lambda t: np.zeros_like(t, dtype="fp4"), lp.FP4_E2M1, 0.0, (3,)),
    (lambda t: np.ones_like(t, np.float32, shape=(2, 2)), lp.FP32, 1.0, (2, 2)),
])
def test_like_functions_take_format_fill_and_shape_as_told(call, fmt, fill, shape):
    # The format dtype= names, the fill rounded once into it (Fraction reference), the shape.
    r = call(lp.tensor(T16, "bf16"))
    assert r.fmt == fmt and r.shape == shape
    assert_same(r.values, np.full(shape, lpt.reference_round(fill, fmt)))


def test_like_dtype_names_the_result_format_with_one_rounding():
    t = lp.tensor(T16, "fp16")
    # 0.1 -> FP16 -> BF16 would be a double rounding; dtype= rounds the fill once.
    x = 0.1 + 2.0**-13
    assert_same(np.full_like(t, x, dtype="bf16").values, [lpt.reference_round(x, lp.BF16)] * 3)
    assert np.full_like(t, 0.1, dtype=np.float16).fmt is lp.FP16
    assert_same(np.full_like(t, 0.1, dtype=np.float16).values,
                np.full(3, np.float16(0.1)).astype(np.float64))


def test_plain_functions_keep_their_own_out_arrays():
    t = lp.tensor(T16, "fp16")
    o = np.empty((), dtype=np.intp)
    assert np.argmax(t, out=o) is o and int(o) == 0
    assert_same(np.take_along_axis(t, np.array([2, 0]), -1).values, [-3.0, 65504.0])
    a, b = np.atleast_1d(lp.tensor(1.0, "bf16"), np.float64(2.0))
    assert a.fmt is lp.BF16 and a.shape == (1,) and isinstance(b, np.ndarray)
    assert np.where(t > 0)[0].tolist() == [0, 1]


NON_NUMBERS = [None, "abc", object(), [1.0, None, "x"], {"a": 1}]
NON_NUMBER_IDS = ["None", "str", "object", "mixed-list", "dict"]
ORDERINGS = [np.less, np.less_equal, np.greater, np.greater_equal]


@pytest.mark.parametrize("other", NON_NUMBERS, ids=NON_NUMBER_IDS)
def test_equality_with_non_numbers_is_numpys_answer_for_a_float_array(other):
    v = np.array([1.0, 2.0, 3.0])
    t = lp.tensor(v, "bf16")
    for op in ("__eq__", "__ne__"):
        expected = getattr(v, op)(other)         # NumPy's answer for a float array
        got = getattr(t, op)(other)
        assert isinstance(got, type(expected)) and np.array_equal(got, expected)
    assert np.array_equal(other == t, other == v) and np.array_equal(other != t, other != v)


@pytest.mark.parametrize("other", NON_NUMBERS, ids=NON_NUMBER_IDS)
def test_ordering_with_non_numbers_raises_type_error_as_numpy(other):
    t = lp.tensor([1.0, 2.0, 3.0], "bf16")
    for op in ("__lt__", "__le__", "__gt__", "__ge__"):
        with pytest.raises(TypeError):
            getattr(np.array([1.0, 2.0, 3.0]), op)(other)   # NumPy raises: so must we
        with pytest.raises(TypeError):
            getattr(t, op)(other)
    for ufunc in ORDERINGS:
        with pytest.raises(TypeError):
            ufunc(t, other)
    with pytest.raises(TypeError):
        None < t   # noqa: B015


def test_comparison_ufuncs_with_non_numbers_follow_numpy():
    v = np.array([1.0, 2.0])
    t = lp.tensor(v, "fp16")
    assert np.array_equal(np.equal(t, None), np.equal(v, None))
    with pytest.raises(TypeError):
        np.equal(v, "abc")                       # NumPy's ufunc refuses a str
    with pytest.raises(TypeError):
        np.equal(t, "abc")


def test_comparisons_with_fractions_are_exact():
    # The Fraction is compared exactly, not rounded to float64 first.
    t = lp.tensor([1.0 / 3.0, 0.5], "fp64")
    third = Fraction(1, 3)
    expected = [Fraction(float(x)) < third for x in t.values]
    assert (t < third).tolist() == expected == [True, False]
    assert (t == third).tolist() == [False, False]


def test_item_tolist_numpy_give_python_floats_and_copies():
    x = [[0.1, -2.5, 1e-5], [3.0, 7.0, -0.0]]
    t = lp.tensor(x, "bf16")
    expected = [[lpt.reference_round(v, lp.BF16) for v in row] for row in x]
    assert t.tolist() == expected and all(type(v) is float for row in t.tolist() for v in row)
    assert type(lp.tensor(0.1, "fp16").tolist()) is float
    s = lp.tensor(0.1, "fp16").item()
    assert type(s) is float and s == float(np.float16(0.1))   # NumPy's float16 oracle
    for args in [(4,), (1, 1), (-1,)]:
        got = t.item(*args)
        assert type(got) is float and got == np.array(expected).item(*args)
    assert np.signbit(t.item(1, 2))                # -0.0 survives
    with pytest.raises(ValueError):
        t.item()                                   # as ndarray.item: more than one element
    with pytest.raises(IndexError):
        t.item(6)
    a = t.numpy()
    assert a.dtype == np.float64 and a.flags.writeable and a.tolist() == expected
    a[0, 0] = 0.1                                  # a copy: the Tensor is untouched
    assert t.tolist() == expected and not np.shares_memory(a, t.values)


DTYPE_FORMATS = [(np.float16, lp.FP16), (np.float32, lp.FP32), (ml_dtypes.bfloat16, lp.BF16),
                 (ml_dtypes.float8_e4m3fn, lp.FP8_E4M3), (ml_dtypes.float8_e5m2, lp.FP8_E5M2),
                 (ml_dtypes.float8_e4m3fnuz, lp.FP8_E4M3FNUZ),
                 (ml_dtypes.float8_e5m2fnuz, lp.FP8_E5M2FNUZ),
                 (ml_dtypes.float6_e2m3fn, lp.FP6_E2M3), (ml_dtypes.float6_e3m2fn, lp.FP6_E3M2),
                 (ml_dtypes.float4_e2m1fn, lp.FP4_E2M1)]


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("dtype, fmt", DTYPE_FORMATS, ids=[f.name for _, f in DTYPE_FORMATS])
def test_tensor_takes_the_format_its_dtype_names(dtype, fmt):
    x = np.random.default_rng(0).standard_normal(64) * 4
    arr = x.astype(dtype)                      # NumPy / ml_dtypes do the rounding
    t = lp.tensor(arr)
    assert t.fmt == fmt
    assert_same(t.values, arr.astype(np.float64))
    s = lp.tensor(arr[3])                      # a NumPy scalar of that dtype
    assert s.fmt == fmt
    assert s.shape == ()
    assert_same(s.values, float(arr[3]))
    # An explicit fmt still wins: one rounding of the exact values.
    b = lp.tensor(arr, "e5m2")
    assert b.fmt is lp.FP8_E5M2
    assert_same(b.values, [lpt.reference_round(float(v), lp.FP8_E5M2) for v in arr])


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("data", [lambda: np.array([0.1, 2.0]), lambda: np.arange(3),
                                  lambda: [1.0, 2.0], lambda: 0.5, lambda: np.float64(0.5),
                                  lambda: np.array([True]),
                                  lambda: np.zeros(2, ml_dtypes.int4)],
                         ids=["float64", "int", "list", "float", "float64-scalar", "bool",
                              "int4"])
def test_tensor_without_a_format_for_data_whose_dtype_names_none(data):
    data = data()
    with pytest.raises(TypeError, match="pass fmt"):
        lp.tensor(data)


@requires_ml_dtypes
@pytest.mark.oracle
def test_tensor_of_scale_format_data_is_refused():
    # float8_e8m0fnu names E8M0, an unsigned scale format no Tensor holds.
    with pytest.raises(ValueError, match="unsigned scale format"):
        lp.tensor(np.ones(2, ml_dtypes.float8_e8m0fnu))


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("dtype, fmt", [(np.float16, lp.FP16), (ml_dtypes.bfloat16, lp.BF16)],
                         ids=["float16", "bfloat16"])
def test_matmul_of_plain_arrays_takes_the_format_their_dtype_names(dtype, fmt):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 7)).astype(dtype)
    b = rng.standard_normal((7, 2)).astype(dtype)
    expected = float32_loop(a.astype(np.float64), b.astype(np.float64))
    r = lp.matmul(a, b)
    assert isinstance(r, np.ndarray)
    assert_same(r, expected)
    # A float64 operand names no format (as in the kernel): in_fmt is needed.
    c = rng.standard_normal((7, 2))
    with pytest.raises(ValueError, match="in_fmt"):
        lp.matmul(a, c)
    rounded = np.array([[lpt.reference_round(v, fmt) for v in row] for row in c])
    assert_same(lp.matmul(a, c, in_fmt=fmt), float32_loop(a.astype(np.float64), rounded))


def test_every_tensor_sum_and_mean_defaults_to_pairwise():
    ones = lp.tensor(np.ones(1000), "bf16")
    # Sequentially BF16 stagnates at 256 (256 + 1 is a tie, to even: 256); pairwise
    # partial sums stay exact, so the pairwise sum is 1000.
    assert float(ones.sum(order="sequential")) == 256.0
    for s in (ones.sum(), np.sum(ones), ones.sum(order="pairwise")):
        assert float(s) == 1000.0
    for m in (ones.mean(), np.mean(ones)):
        assert float(m) == 1.0 and float(ones.mean(order="sequential")) != 1.0


def test_tensors_of_more_than_32_dimensions():
    # NumPy's ufuncs take up to 64 dimensions, np.broadcast_shapes only 32.
    shape = (1,) * 38 + (2, 3)
    x = np.array([0.1, -2.0, 3.5, 1e-5, 7.0, -0.0]).reshape(shape)
    t = lp.tensor(x, "fp16")
    v = x.astype(np.float16).astype(np.float64)          # NumPy's float16 oracle
    assert t.ndim == 40
    assert_same(t.values, v)
    assert_same((t + t).values, (v.astype(np.float16) + v.astype(np.float16)).astype(float))
    assert_same((t * 3).values, (v.astype(np.float16) * np.float16(3)).astype(float))
    assert_same((-t).values, -v)
    assert_same(abs(t).values, np.abs(v))
    for r, e in [(t < 1.0, v < 1.0), (t == t, v == v), (t >= t[..., :1], v >= v[..., :1])]:
        assert r.shape == shape and np.array_equal(r, e)
    assert_same(t.reshape(6).values, v.reshape(6))
    assert t.reshape(6).fmt is lp.FP16
    assert_same(np.transpose(t).values, v.T)
    assert np.squeeze(t).shape == (2, 3)
    y = lp.tensor(np.array([0.5, -2.0, 3.5, 0.25, 7.0, -0.0]).reshape(shape), "fp16")
    assert_same(y.sum(axis=-1).values.ravel(), [2.0, 7.25])
    assert_same(y.mean().values, lpt.reference_round(Fraction(37, 4) / 6, lp.FP16))
    assert t.sum(keepdims=True).shape == (1,) * 40
    assert t.sum(axis=(0, 39)).shape == (1,) * 37 + (2,)
    assert_same(np.maximum(t, 0.5).values, np.maximum(v, np.float16(0.5)))
    assert_same(np.where(t > 0, t, 0.0).values, np.where(v > 0, v, 0.0))
    assert np.concatenate([t, t], axis=-1).shape == (1,) * 38 + (2, 6)
    assert_same(t.astype("bf16").values.ravel(),
                [lpt.reference_round(a, lp.BF16) for a in v.ravel()])
    assert t.item(5) == 0.0 and len(t.tolist()) == 1


@pytest.mark.parametrize("clone", [copy.copy, copy.deepcopy,
                                   lambda m: pickle.loads(pickle.dumps(m))],
                         ids=["copy", "deepcopy", "pickle"])
def test_a_copied_fp16_model_gives_fp16_tensors_as_the_original(clone):
    # Models are compared by value: the FP16-accumulating model's result is FP16 whether
    # it is MODELS["fp16"] itself or a copy (an identity check made copies FP32).
    a = lp.tensor([[1.0, 2.0**-11], [3.0, 2.0**-12]], "fp16")
    model = clone(lp.MODELS["fp16"])
    want = lp.matmul(a, a, model="fp16")
    got = lp.matmul(a, a, model=model)
    with lp.context(matmul=model):
        via_context = a @ a
    assert want.fmt == got.fmt == via_context.fmt == lp.FP16
    assert np.array_equal(got.values, want.values)
    assert np.array_equal(via_context.values, want.values)


def _every_value(fmt):
    """Every value of an 8-bit format, or a spread of values of a wider one (its
    extremes, subnormals, zeros, inf, NaN), decoded from bit patterns."""
    if fmt.bits <= 8:
        codes = np.arange(1 << fmt.bits, dtype=np.uint64)
    else:
        codes = np.random.default_rng(5).integers(0, 1 << fmt.bits, 4000, dtype=np.uint64)
    return np.concatenate([lp.decode(codes, fmt), [0.0, -0.0, fmt.max, -fmt.max,
                                                   fmt.smallest_subnormal, np.nan]])


_SIGNED = [f for f in lp.NAMED_FORMATS.values() if f.signed]   # Tensors' formats
_PAIRS = [(small, big) for small in _SIGNED
          for big in _SIGNED
          if lp.tensors.promotion.holds(big, small) and small.bits <= 32]


@pytest.mark.parametrize("small, big", _PAIRS, ids=[f"{s.name}-{b.name}" for s, b in _PAIRS])
def test_astype_into_a_format_that_holds_the_values_is_their_rounding(small, big):
    # The shortcut copies; lp.round of the same values (the rounding path) is the oracle.
    v = lp.round(_every_value(small), small)
    t = lp.tensor(v, small)
    for mode in ("rne", "rz", "ru"):
        out = t.astype(big, mode)
        assert out.fmt == big
        assert_same(out.values, lp.round(v, big, mode))
        assert not np.shares_memory(out.values, t.values)


def test_astype_shortcut_keeps_streams_flags_and_checks():
    t = lp.tensor([1.0, 2.0**-24, -0.0], "fp16")
    with pytest.raises(ValueError, match="mode"):
        t.astype("fp32", "nearest")
    with pytest.raises(TypeError, match="rng"):
        t.astype("fp32", rng="seed")
    # sr draws its words as the rounding path does: the generator advances alike.
    g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
    t.astype("fp32", "sr", rng=g1)
    lp.round(t.values, "fp32", "sr", rng=g2)
    assert g1.bit_generator.state == g2.bit_generator.state
    # A context without subnormals takes the rounding path, with its option: BF16's
    # 2**-133 is an FP32 subnormal, flushed to 0 (a copy would keep it).
    tiny = lp.tensor([2.0**-133, -(2.0**-140)], "bf16")
    with lp.context(subnormals=False):
        flushed = tiny.astype("fp32").values
    assert_same(flushed, lp.round(tiny.values, "fp32", subnormals=False))
    assert not np.array_equal(flushed, tiny.values)
    # A listening lp.flags() sees what the rounding counts: a signalling NaN (kept by
    # the Tensor constructor) comes back quiet and counts invalid, as lp.round says.
    snan = lp.Tensor(np.array([0x7FF0_0000_0000_0001], np.uint64).view(np.float64), lp.FP32)
    with lp.flags() as f:
        out = snan.astype("fp64")
    with lp.flags() as want:
        expected = lp.round(snan.values, "fp64")
    assert f.as_dict() == want.as_dict() and want.invalid == 1
    assert_same(out.values, expected)


# a result that NumPy makes a scalar (a full reduction, a ufunc of a 0-d array)
# is still a Tensor over a 0-d ndarray: .values, np.asarray and lp.round work on it.
_fp16 = np.float16
_SCALAR_RESULTS = {
    "max": (lambda: lp.tensor([1.0, 5.0], "bf16").max(), 5.0),
    "min": (lambda: lp.tensor([1.0, 5.0], "bf16").min(), 1.0),
    "neg": (lambda: -lp.tensor(-2.5, "fp16"), 2.5),
    "abs": (lambda: abs(lp.tensor(-2.5, "fp16")), 2.5),
    "floor": (lambda: np.floor(lp.tensor(-2.5, "fp16")), np.floor(-2.5)),
    "method round": (lambda: lp.tensor(-2.5, "fp16").round(), np.round(-2.5)),
    "np.round": (lambda: np.round(lp.tensor(2.5, "fp16")), np.round(2.5)),
    "np.fix": (lambda: np.fix(lp.tensor(-2.5, "fp16")), np.fix(-2.5)),
    "unstack": (lambda: np.unstack(lp.tensor([1.0, 3.0], "fp16"))[1], 3.0),
    "det": (lambda: lp.linalg.det(lp.tensor([[1.0, 2.0], [3.0, 4.0]], "fp16")),
            float(Fraction(1 * 4 - 2 * 3))),
    "norm inf": (lambda: lp.linalg.norm(lp.tensor([1.0, -5.0], "fp16"), np.inf), 5.0),
}


@pytest.mark.parametrize("name", list(_SCALAR_RESULTS))
def test_scalar_results_hold_a_0d_ndarray(name):
    make, want = _SCALAR_RESULTS[name]
    r = make()
    assert type(r.values) is np.ndarray and r.values.shape == ()
    assert not r.values.flags.writeable
    a = np.asarray(r)
    assert type(a) is np.ndarray and a.shape == () and a == want
    assert lp.round(r, "fp16") == _fp16(want)


def test_det_of_a_stack_with_an_odd_permutation():
    # _stacked gathers per-matrix results that were NumPy scalars.
    m = [[[1.0, 2.0], [3.0, 4.0]], [[0.0, 1.0], [1.0, 0.0]]]
    d = lp.linalg.det(lp.tensor(m, "fp16"))
    assert d.values.tolist() == [float(Fraction(1 * 4 - 2 * 3)), float(Fraction(0 - 1))]
    assert np.asarray(d).shape == (2,)


# -- the rich (HTML) display ---------------------------------------------------------------

def _numbers(text):
    return re.findall(r"-?(?:inf|nan|\d+\.?\d*(?:e[-+]?\d+)?)", text)


@pytest.mark.parametrize("shape", [(5,), (2000,), (40, 60), (3, 400, 2), ()])
def test_tensor_html_truncates_as_numpy_does(shape):
    rng = np.random.default_rng(1)
    t = lp.tensor(rng.standard_normal(shape) * 100, "bf16")
    values = np.asarray(t)
    markup = t._repr_html_()
    tree = parse_html(markup)
    body = html.unescape("".join(tree.text))
    oracle = np.array2string(values, separator=", ")   # NumPy's default threshold
    assert ("..." in body) == ("..." in oracle)
    shown = html.unescape(re.search(r"<pre[^>]*>(.*?)</pre>", markup, re.S).group(1))
    assert len(_numbers(shown)) == len(_numbers(oracle))
    assert f"shape {shape}" in body and "BF16" in body
    # The values shown are the Tensor's, exactly: the first and the last element.
    flat = values.ravel()
    assert repr(float(flat[0])) in body and repr(float(flat[-1])) in body


def test_tensor_html_follows_numpy_printoptions_and_stays_small():
    t = lp.tensor(np.arange(10.0), "fp16")
    with np.printoptions(threshold=5, edgeitems=2):
        body = html.unescape("".join(parse_html(t._repr_html_()).text))
        assert "0.0, 1.0, ..., 8.0, 9.0" in body
    big = lp.tensor(np.zeros(10**6), "e4m3")
    assert len(big._repr_html_()) < 2000


# -- Python numbers as Tensor operands ------------------------------------------------------

def test_a_python_number_operand_is_rounded_once_and_counted_each_time():
    t = lp.tensor([0.0, -0.0, 1.5, 3.0], "bf16")
    for _ in range(2):                         # the second time, the rounding is reused
        tenth = Fraction(lpt.reference_round(0.1, "bf16"))
        want = [0.0, -0.0, lpt.reference_round(Fraction(1.5) * tenth, "bf16"),
                lpt.reference_round(3 * tenth, "bf16")]
        assert_same((t * 0.1).values, want)
        assert_same((t + -0.0).values, [0.0, -0.0, 1.5, 3.0])
        assert_same((t + 0.0).values, [0.0, 0.0, 1.5, 3.0])
        assert_same((t + (2**60 + 1)).values, [2.0**60] * 4)   # one int, rounded once
    with lp.flags() as f:
        t * 0.1
    with lp.flags() as parts:
        lp.round(0.1, "bf16")
        lp.mul(t.values, lpt.reference_round(0.1, "bf16"), "bf16")
    assert f.as_dict() == parts.as_dict() and f.inexact >= 1
    with lp.context(mode="ru"):
        assert (t[2:3] * 0.1).item() == lpt.reference_round(
            Fraction(1.5) * Fraction(lpt.reference_round(0.1, "bf16", "ru")), "bf16", "ru")
