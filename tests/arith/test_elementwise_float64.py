"""Tensor arithmetic by float64's own operation, held to the kernel and to Fractions.

``+ - * /`` and sqrt under RNE in formats of at most 25 bits round the chunk's float64
result (`lowprec.arith.elementwise.on_values`, Figueroa's theorem), unless a `flags()`
listens. Each test checks that the shortcut was taken, so that an equality cannot hold
only because the general path ran twice.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp
import lowprec.arith.driver as driver
import lowprec.arith.elementwise as elementwise
import lowprec.engine.kernel as kernel
from helpers import assert_bits, assert_same, spy_on
from lowprec import testing as lpt

OPS = [("add", lp.add, np.add), ("sub", lp.sub, np.subtract), ("mul", lp.mul, np.multiply),
       ("div", lp.div, np.divide)]


@pytest.fixture
def plain_calls(monkeypatch):
    """How many chunks `on_values` computed with float64's own operation."""
    taken = []
    kernels = dict(elementwise._KERNELS)
    for op, (k, plain) in list(kernels.items()):
        if plain is not None:
            def spy(*args, out=None, plain=plain):
                taken.append(1)
                return plain(*args, out=out)
            kernels[op] = (k, spy)
    monkeypatch.setattr(elementwise, "_KERNELS", kernels)
    return taken


def _specials(fmt):
    f = lp.format(fmt)
    v = [0.0, -0.0, f.max, -f.max, f.smallest_normal, f.smallest_subnormal,
         -f.smallest_subnormal, 1.0, -1.0, np.nan]
    if f.has_inf:
        v += [np.inf, -np.inf]
    return np.array(v)


def _every_pair(fmt):
    vals = np.array([v for v in lpt.representable_values(fmt)])
    vals = np.concatenate([vals, [np.nan]])
    return np.repeat(vals, vals.size), np.tile(vals, vals.size)


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "fp6_e3m2", "fp4_e2m1"])
def test_every_pair_of_an_8_bit_or_smaller_format(fmt, plain_calls):
    a, b = _every_pair(fmt)
    ta, tb = lp.tensor(a, fmt), lp.tensor(b, fmt)
    for name, fn, ufunc in OPS:
        before = len(plain_calls)
        got = ufunc(ta, tb)
        assert len(plain_calls) > before, name
        assert_bits(got.values, fn(a, b, fmt), a, b)
    assert_bits(np.sqrt(ta).values, lp.sqrt(a, fmt), a)


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp32", "tf32"])
def test_random_and_adversarial_pairs(fmt, plain_calls):
    rng = np.random.default_rng(4)
    f = lp.format(fmt)
    n = 20_000
    a = lp.round(rng.standard_normal(n) * 2.0 ** rng.integers(-20, 20, n), fmt)
    # b close to a (cancellation), to a's ulp (ties of a + b), and tiny (subnormal sums).
    b = np.concatenate([lp.round(-a[: n // 4] * (1 + rng.standard_normal(n // 4) * 2.0**-8), fmt),
                        lp.round(a[n // 4: n // 2] * 2.0 ** -f.mantissa_bits, fmt),
                        lp.round(rng.standard_normal(n // 4) * f.smallest_normal, fmt),
                        lp.round(rng.standard_normal(n - 3 * (n // 4)) * 2.0 ** 10, fmt)])
    s = _specials(fmt)
    a = np.concatenate([a, np.repeat(s, s.size)])
    b = np.concatenate([b, np.tile(s, s.size)])
    ta, tb = lp.tensor(a, fmt), lp.tensor(b, fmt)
    for name, fn, ufunc in OPS:
        got = ufunc(ta, tb).values
        assert_bits(got, fn(a, b, fmt), a, b)
        # A Fraction has no signed zero: zero operands are held by the kernel above.
        finite = np.isfinite(got) & np.isfinite(a) & np.isfinite(b) & (a != 0)
        idx = np.flatnonzero(finite & (b != 0))[::97]
        exact = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y,
                 "mul": lambda x, y: x * y, "div": lambda x, y: x / y}[name]
        oracle = [lpt.reference_round(exact(Fraction(a[i]), Fraction(b[i])), fmt) for i in idx]
        assert_same(got[idx], np.array(oracle), a[idx], b[idx])
    assert plain_calls
    assert_bits(np.sqrt(ta).values, lp.sqrt(a, fmt), a)


@pytest.mark.parametrize("fmt", ["bf16", "fp16", "e4m3", "e3m2"])
def test_small_operations_take_the_small_route(fmt, plain_calls, monkeypatch):
    # At most scratch.SMALL elements: float64's result rounded by `round_small` alone
    # (or by the chunk driver where that does not settle it: inf, NaN, near max).
    a, b = _every_pair(fmt) if lp.format(fmt).p <= 4 else (None, None)
    if a is None:
        rng = np.random.default_rng(5)
        s = _specials(fmt)
        a = np.concatenate([lp.round(rng.standard_normal(3000), fmt), np.repeat(s, s.size)])
        b = np.concatenate([lp.round(rng.standard_normal(3000) * 2.0**-6, fmt), np.tile(s, s.size)])
    small = spy_on(monkeypatch, driver, "round_small", kernel.round_small)
    for size in (1, 10, 1000):
        for i in range(0, min(a.size, 40 * size), size):
            x, y = a[i:i + size], b[i:i + size]
            tx, ty = lp.tensor(x, fmt), lp.tensor(y, fmt)
            for _, fn, ufunc in OPS:
                assert_bits(ufunc(tx, ty).values, fn(x, y, fmt), x, y)
    assert any(small)
    # Tables settle every input; the magic path leaves inf, NaN and near-max to the driver.
    assert all(small) == (lp.format(fmt).mantissa_bits <= 3)


def test_a_scalar_operand_is_rounded_into_the_format_first(plain_calls):
    t = lp.tensor(np.linspace(1, 2, 3000), "bf16")
    assert_same((t * 0.1).values, lp.mul(t.values, lp.round(0.1, "bf16"), "bf16"))
    assert plain_calls


def test_listening_flags_and_other_modes_take_the_kernel(plain_calls):
    t = lp.tensor([np.inf, 1.0, 3.0], "fp16")
    with lp.flags() as f:
        r = t - t
    assert f.invalid == 1 and np.isnan(r.values[0])
    with lp.context(mode="rz"):
        assert (lp.tensor([1.0], "fp16") + 2.0**-12).values[0] == 1.0
    assert (lp.tensor([1.0], "fp64") + 2.0**-60).values[0] == 1.0
    assert plain_calls == []
