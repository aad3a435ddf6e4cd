"""Shortcuts through NumPy's own float32 cast, and `round_small`, held to the
kernel's general paths and to Fractions.

- FP32 under RNE: chunks of at least ``_NATIVE_MIN`` elements are rounded by NumPy's
  cast to float32 and back (`lowprec.engine.kernel._round_native`), unless a result
  is inf or NaN or the thread flushes subnormals.

Each test checks that the shortcut was taken, so that an equality cannot hold only
because the general path ran twice.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp
import lowprec.engine.kernel as kernel
from helpers import assert_bits, assert_same, spy_on
from lowprec import testing as lpt
from lowprec.status import FLAG_NAMES

F32 = np.float32


def _counts(f):
    return {name: getattr(f, name) for name in FLAG_NAMES}


def _fp32_adversarial(rng):
    """Float64 values around FP32's rounding boundaries: midpoints and their float64
    neighbours, the subnormal range and its edges, the overflow threshold (below it:
    the threshold itself is a tie that overflows, so it falls back), signed zeros."""
    base = rng.standard_normal(600).astype(F32).astype(np.float64)
    nxt = np.nextafter(base.astype(F32), F32(np.inf)).astype(np.float64)
    mid = (base + nxt) / 2                                   # exact: FP32 midpoints
    tiny = np.array([2.0**-149, 2.0**-150, 3 * 2.0**-151, 2.0**-126, 2.0**-126 - 2.0**-150,
                     2.0**-127, 2.0**-160, 0.0, -0.0])
    tiny = np.concatenate([tiny, -tiny, np.nextafter(tiny, 1.0), np.nextafter(tiny, -1.0)])
    top = float(np.finfo(F32).max)
    big = np.array([top, np.nextafter(top + 2.0**103, 0.0), 2.0**127, 3.0e38])
    values = [base, mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf), tiny, big, -big,
              rng.standard_normal(400) * 2.0 ** rng.integers(-150, 120, 400)]
    return np.concatenate(values)


@pytest.fixture
def native_calls(monkeypatch):
    """Per chunk `_round_native` saw, whether it rounded it (returned a result)."""
    return spy_on(monkeypatch, kernel, "_round_native", kernel._round_native)


def _general(monkeypatch, fn):
    with monkeypatch.context() as m:
        m.setattr(kernel, "_NATIVE_MIN", 1 << 62)      # the magic-constant path instead
        return fn()


def test_fp32_by_native_cast_matches_the_kernel_and_fractions(monkeypatch, native_calls):
    x = _fp32_adversarial(np.random.default_rng(1))
    assert x.size >= kernel._NATIVE_MIN
    with lp.flags() as f:
        got = lp.round(x, "fp32")
    assert native_calls == [True]
    with lp.flags() as g:
        want = _general(monkeypatch, lambda: lp.round(x, "fp32"))
    assert_bits(got, want, x)
    assert _counts(f) == _counts(g) and f.inexact > 0 and f.underflow > 0
    oracle = np.array([lpt.reference_round(Fraction(v), "fp32") for v in x[::3]])
    assert_same(got[::3], oracle, x[::3])


def test_fp32_native_cast_leaves_inf_nan_and_overflow_to_the_kernel(monkeypatch, native_calls):
    x = np.random.default_rng(2).standard_normal(4096)
    payload = np.array([0x7FF0_0000_0000_0001, 0xFFF8_0000_DEAD_BEEF], np.uint64).view(np.float64)
    threshold = float(np.finfo(F32).max) + 2.0**103          # a tie: RNE overflows
    for special in (payload, np.array([np.inf, -np.inf]), np.array([threshold, -3.5e38])):
        y = x.copy()
        y[7:7 + special.size] = special
        got = lp.round(y, "fp32")
        assert native_calls[-1] is False
        assert_bits(got, _general(monkeypatch, lambda y=y: lp.round(y, "fp32")), y)
    assert np.isinf(got[7:9]).all() and np.signbit(got[8])


def test_fp32_native_cast_steps_aside_when_subnormals_are_flushed(monkeypatch, native_calls):
    # A thread that flushes float32 subnormals (a fast-math library can set it) casts
    # FP32's least subnormal to zero: simulated with a value whose cast is zero anyway.
    monkeypatch.setattr(kernel, "_TINY32", np.array([2.0**-200]))
    x = _fp32_adversarial(np.random.default_rng(3))
    got = lp.round(x, "fp32")
    assert native_calls == [False]
    oracle = np.array([lpt.reference_round(Fraction(v), "fp32") for v in x[::5]])
    assert_same(got[::5], oracle, x[::5])


def test_small_or_other_fp32_roundings_take_the_general_path(native_calls):
    lp.round(np.linspace(-1, 1, kernel._NATIVE_MIN - 1), "fp32")
    lp.round(np.linspace(-1, 1, 4096), "fp32", "rz")
    lp.round(np.linspace(-1, 1, 4096), "fp32", subnormals=False)
    lp.round(np.linspace(-1, 1, 4096), "tf32")
    assert native_calls == []


# -- the error state of small calls -----------------------------------------------------

def test_ignore_restores_the_callers_error_state_and_has_a_fallback(monkeypatch):
    from lowprec.engine import fpstate
    with np.errstate(divide="raise"):
        for var in (fpstate._extobj_contextvar, None):
            monkeypatch.setattr(fpstate, "_extobj_contextvar", var)
            outer = fpstate.ignore()
            inner = fpstate.ignore()
            assert np.geterr()["divide"] == "ignore"
            np.divide(1.0, np.zeros(1))               # ignored: no FloatingPointError
            fpstate.restore(inner)
            fpstate.restore(outer)
            assert np.geterr()["divide"] == "raise"
            with pytest.raises(FloatingPointError):
                np.divide(1.0, np.zeros(1))
    # A small Tensor operation leaves no error state behind, and warns about nothing.
    t = lp.tensor([np.inf, 0.0], "bf16")
    with np.errstate(all="raise"):
        r = (t - t).values, (t / lp.tensor([0.0, 0.0], "bf16")).values
    assert np.isnan(r[0][0]) and r[0][1] == 0 and np.isinf(r[1][0]) and np.isnan(r[1][1])



@pytest.mark.parametrize("fmt", ["bf16", "fp16", "tf32", "fp32", lp.Format(10, 40),
                                 lp.Format(4, 20, bias=3), lp.Format(10, 20, bias=22)])
def test_round_small_one_range_test_at_its_edges(fmt, monkeypatch):
    # `round_small`'s first branch takes a chunk only when every |x| lies in
    # [2**emin, min(2**emax, magic_top)); chunks with one element just outside
    # (zeros, the format's subnormals, the top binade, inf, NaN) take the general
    # steps or the driver. Each result is held to the Fraction reference.
    fmt = lp.format(fmt)
    plan = lp.engine.plan.plan(fmt, "rne")
    m, lo, top = fmt.mantissa_bits, 2.0**fmt.emin, 2.0**fmt.emax
    rng = np.random.default_rng(m)
    inside = [lo, lo * (1 + 2.0**-52), np.nextafter(top, 0), 1 + 2.0 ** -(m + 1),
              1 + 3 * 2.0 ** -(m + 1), np.nextafter(1 + 2.0 ** -(m + 1), 2)]
    outside = [np.nextafter(lo, 0), 0.0, -0.0, 2.0 ** (fmt.emin - m), top, fmt.max,
               np.nextafter(2 * top, 0), lo * (0.5 + 0.3 * 2.0**-m), 2 * plan.magic_top,
               np.inf, np.nan]
    body = (1 + rng.random(32)) * 2.0 ** rng.integers(max(fmt.emin, -1000),
                                                     min(fmt.emax, 980), 32)
    # Format(10, 20, bias=22): emax = 1001 lies above the magic constant's top 2**991.
    inside = [v for v in inside if v < plan.magic_top] + [
        np.nextafter(min(top, plan.magic_top), 0)]
    general = spy_on(monkeypatch, kernel, "_round_nearest_even", kernel._round_nearest_even)
    settled_inside = 0
    for extra, settles in [(v, True) for v in inside] + [(v, None) for v in outside]:
        for sign in (1.0, -1.0):
            for x in (np.array([sign * extra]), np.append(body * sign, sign * extra)):
                before = len(general)
                got = kernel.round_small(plan, x)
                if settles:
                    assert got is not None and len(general) == before, "not the first branch"
                    settled_inside += 1
                if got is None:
                    continue
                want = [lpt.reference_round(Fraction(v), fmt) if np.isfinite(v) and v
                        else v for v in x]                # ±0, inf, NaN: themselves
                assert_bits(got, np.array(want, dtype=float), x)
    assert settled_inside == 4 * len(inside)
