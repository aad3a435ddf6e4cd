"""lowprec.arith.reductions against exact references it did not produce: sums and dots
in every order against the stepwise oracles (tests/oracles/sums.py), the levels of
pairwise sums on float64's own sum, and `lp.sum`'s signature."""

from __future__ import annotations

import inspect
import warnings
from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp
import lowprec.arith.reductions as reductions
import lowprec.engine.parallel
from helpers import assert_bits, assert_same
from lowprec.testing import reference_round
from oracles.sums import SUMS, pairwise_levels, pairwise_sum, rounded_add, sequential_sum

# -- reductions -------------------------------------------------------------------

@pytest.mark.parametrize("order", sorted(SUMS))
@pytest.mark.parametrize("mode", ("rne", "rd", "ro"))
def test_sum_against_stepwise_reference(order, mode):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((37, 5)) * np.ldexp(1.0, rng.integers(-8, 8, (37, 5)))
    for axis, name in ((0, "BF16"), (1, "FP16"), (None, "FP8_E4M3")):
        got = lp.sum(x, name, axis=axis, mode=mode, order=order)
        cols = ([x.ravel()] if axis is None
                else list(np.moveaxis(x, axis, -1).reshape(-1, x.shape[axis])))
        want = np.array([SUMS[order](c.tolist(), name, mode) for c in cols])
        assert_same(np.reshape(got, -1), want, [order, mode, axis])


def test_sum_stagnation_and_pairwise():
    ones = np.ones(1000)
    assert lp.sum(ones, "bf16", order="sequential") == 256.0
    assert lp.sum(ones, "bf16", order="pairwise") == 1000.0
    assert lp.sum(np.ones((1000, 3)), "bf16", axis=0, order="sequential").tolist() == [256.0] * 3
    assert lp.sum(np.ones((3, 0)), "bf16", axis=1).tolist() == [0.0] * 3
    assert lp.sum([5.0], "bf16") == 5.0


def test_kahan_at_least_as_accurate_as_sequential():
    rng = np.random.default_rng(9)
    for _ in range(5):
        x = lp.round(rng.random(2000), "bf16")
        exact = float(np.sum(x.astype(np.longdouble)))
        err = {o: abs(lp.sum(x, "bf16", order=o) - exact) for o in lp.arith.ORDERS}
        assert err["kahan"] <= err["sequential"]


@pytest.mark.parametrize("fused", (False, True))
@pytest.mark.parametrize("mode", ("rne", "ru"))
def test_dot_against_stepwise_reference(fused, mode):
    rng = np.random.default_rng(10)
    a = lp.round(rng.standard_normal((4, 25)), "fp16")
    b = lp.round(rng.standard_normal(25), "fp16")
    got = lp.dot(a, b, "fp16", mode, fused=fused)
    want = []
    for row in a:
        acc = reference_round(Fraction(row[0]) * Fraction(b[0]), "FP16", mode)
        for x, y in zip(row[1:].tolist(), b[1:].tolist()):
            if fused:
                acc = reference_round(Fraction(x) * Fraction(y) + Fraction(acc), "FP16", mode)
            else:
                p = reference_round(Fraction(x) * Fraction(y), "FP16", mode)
                acc = rounded_add(acc, p, "FP16", mode)
        want.append(acc)
    assert_same(got, want)
    assert lp.dot(a[0], b, "fp16", mode, fused=fused) == got[0]


@pytest.mark.parametrize("mode", ("rna", "ro"))
def test_threaded_sums_and_dots_keep_their_own_scratch(monkeypatch, mode):
    # Every step of a sum, and a dot's products then its sum, runs on one plan: each
    # thread's copy needs its own scratch, which rna and ro use on the scaling path
    # (here: subnormals=False). Small chunks and spans, so the steps run on 3 threads.
    import lowprec.engine.parallel as kernel
    monkeypatch.setattr(kernel, "CHUNK", 2048)
    monkeypatch.setattr(kernel, "PARALLEL_MIN", 4096)
    rng = np.random.default_rng(12)
    x = rng.standard_normal((3, 12_000))
    a, b = (lp.round(rng.standard_normal((12_000, 2)), "fp16") for _ in range(2))
    before = lp.threads(3)
    try:
        got_sum = lp.sum(x, "bf16", mode, axis=0, order="sequential", subnormals=False)
        got_dot = lp.dot(a, b, "fp16", mode, subnormals=False)
    finally:
        lp.threads(before)

    def rounded(v, name):
        return reference_round(v, name, mode, subnormals=False)

    want_sum = []
    for col in x.T.tolist():
        acc = rounded(Fraction(col[0]), "BF16")
        for v in col[1:]:
            acc = rounded(Fraction(acc) + Fraction(v), "BF16")
        want_sum.append(acc)
    assert_same(got_sum, want_sum, [mode])
    want_dot = []
    for (a0, a1), (b0, b1) in zip(a.tolist(), b.tolist()):
        p0, p1 = (rounded(Fraction(u) * Fraction(v), "FP16") for u, v in ((a0, b0), (a1, b1)))
        want_dot.append(rounded(Fraction(p0) + Fraction(p1), "FP16"))
    assert_same(got_dot, want_dot, [mode])


# -- pairwise sums: the levels of sums add values of the format ----------------------------

@pytest.mark.parametrize("fmt", ["fp16", "bf16", "e4m3"])
@pytest.mark.parametrize("n", [2, 7, 10, 33, 5000])
def test_pairwise_sum_levels_of_sums_use_float64s_sum(fmt, n, monkeypatch):
    rng = np.random.default_rng(n)
    f = lp.format(fmt)
    # Terms not in the format (the first level keeps the kernel), and ties at every level.
    x = np.concatenate([rng.standard_normal(n // 2), np.full(n - n // 2, 1 + 2.0**-(f.p + 1))])
    rng.shuffle(x)
    calls = []
    original = reductions.apply

    def spy(*args, plain=None, **kwargs):
        calls.append(plain is not None)
        return original(*args, plain=plain, **kwargs)
    with monkeypatch.context() as m:
        m.setattr(reductions, "apply", spy)
        got = lp.sum(x, fmt)
        assert calls[0] is False and (n <= 2 or any(calls))
        m.setattr(reductions, "apply", lambda *a, plain=None, **k: original(*a, **k))
        want = lp.sum(x, fmt)
    assert_bits(got, want, x)
    if n <= 33:
        assert got == pairwise_levels(x, fmt)


# -- sum's signature: mode third, axis and order keywords, pairwise default ------------

def _sum_operand():
    rng = np.random.default_rng(55)
    return rng.standard_normal((5, 7, 3)) * np.ldexp(1.0, rng.integers(-6, 6, (5, 7, 3)))


def _columns(x, axes):
    """The terms of each sum, in C order of the reduced axes (NumPy's own transpose)."""
    keep = [i for i in range(x.ndim) if i not in axes]
    n = int(np.prod([x.shape[i] for i in axes]))
    return list(np.transpose(x, keep + list(axes)).reshape(-1, n))


@pytest.mark.parametrize("mode", ("rne", "rz", "ru"))
def test_sum_default_order_is_pairwise(mode):
    # Before: the default was "sequential" (and lp.sum(x, fmt, "rz") read "rz" as an axis).
    x = _sum_operand()
    want = np.array([pairwise_sum(c.tolist(), "BF16", mode) for c in _columns(x, (0, 1, 2))])
    assert_same(np.reshape(lp.sum(x, "bf16", mode), -1), want, [mode])
    assert_same(np.reshape(lp.sum(x, "bf16", mode=mode), -1), want, [mode])
    want = np.array([pairwise_sum(c.tolist(), "BF16", mode) for c in _columns(x, (1,))])
    assert_same(lp.sum(x, "bf16", mode, axis=1).reshape(-1), want, [mode, 1])
    # The sequential oracle differs here, so the default is not sequential by accident.
    seq = np.array([sequential_sum(c.tolist(), "BF16", mode) for c in _columns(x, (1,))])
    assert not np.array_equal(want, seq, equal_nan=True)


@pytest.mark.parametrize("axis", ((0, 2), (2, 0), (-1, 1), (0, 1, 2)))
def test_sum_over_several_axes(axis):
    x = _sum_operand()
    axes = tuple(sorted(a % x.ndim for a in axis))
    got = lp.sum(x, "fp16", "rd", axis=axis, order="sequential")
    want = np.array([sequential_sum(c.tolist(), "FP16", "rd") for c in _columns(x, axes)])
    assert np.shape(got) == np.sum(x, axis=axis).shape
    assert_same(np.reshape(got, -1), want, [axis])


@pytest.mark.parametrize("old, new", [
    ((0,), {"axis": 0}),
    ((None,), {}),
    ((np.int64(-1), "rz"), {"axis": -1, "mode": "rz"}),
    ((1, "ru", "kahan"), {"axis": 1, "mode": "ru", "order": "kahan"}),
    (((0, 2), "rd", "sequential"), {"axis": (0, 2), "mode": "rd", "order": "sequential"}),
])
def test_sum_old_positional_order_warns_and_agrees(old, new):
    x = _sum_operand()
    with pytest.warns(DeprecationWarning, match="positional order is now"):
        got = lp.sum(x, "bf16", *old)
    assert_same(got, lp.sum(x, "bf16", **new), [old])
    with pytest.warns(DeprecationWarning):      # old axis, mode as a keyword
        got = lp.sum(x, "bf16", old[0], mode="ro")
    assert_same(got, lp.sum(x, "bf16", "ro", axis=old[0]), [old])


def test_sum_argument_errors():
    x = _sum_operand()
    with pytest.raises(TypeError, match="positional"):
        lp.sum(x, "bf16", "rz", "pairwise")          # mode third, order is keyword-only
    with pytest.raises(TypeError, match="mode"):
        lp.sum(x, "bf16", 1.5)                      # neither a mode nor an old axis
    with pytest.raises(TypeError, match="mode"):
        lp.sum(x, "bf16", "rz", mode="rd")
    with pytest.raises(TypeError, match="axis"), pytest.warns(DeprecationWarning):
        lp.sum(x, "bf16", 0, axis=1)
    with pytest.raises(TypeError, match="axis"):
        lp.sum(x, "bf16", axis=1.0)
    with pytest.raises(ValueError, match="axis"):
        lp.sum(x, "bf16", axis=3)
    with pytest.raises(ValueError, match="axis"):
        lp.sum(x, "bf16", axis=(0, -3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # the new spellings never warn
        lp.sum(x, "bf16")
        lp.sum(x, "bf16", "rz", axis=0, order="kahan")


def test_sum_signature_reads_as_documented():
    sig = inspect.signature(lp.sum)
    assert list(sig.parameters)[:3] == ["x", "fmt", "mode"]
    assert sig.parameters["mode"].default == "rne"
    assert sig.parameters["order"].default == "pairwise"
    assert sig.parameters["axis"].kind is inspect.Parameter.KEYWORD_ONLY
