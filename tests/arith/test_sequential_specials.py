"""Sequential sums, prefix sums and Kahan sums of data holding NaN or inf.

From the first NaN or inf (in a term, or a running value that overflows) the fast
paths of `lowprec.arith.sequential` compute the remaining steps by windows
(`_special_tail`, `_kahan_tail`); they are held here, bit for bit (NaN signs
included), to the one-step-at-a-time reference `stepwise`, in every mode ("sr":
the same words drawn), on NaN at the start, middle and end, each infinity, both,
overflow in the middle of a finite run, alternating signs, signed zeros and 2-D
inputs reduced along an axis.
"""

from __future__ import annotations

import numpy as np
import pytest

import lowprec as lp
from helpers import assert_bits
from lowprec.arith import sequential as seqmod
from lowprec.engine.plan import plan as make_plan

FORMATS = ("FP16", "BF16", "FP32", "FP8_E4M3", "FP8_E5M2")
MODES = ("rne", "rna", "rz", "ru", "rd", "ro", "sr")
NAN = np.float64(np.nan)
NEG_NAN = -NAN


def special_sets(name, n=40, seed=0):
    """Terms of format ``name`` with NaN or inf placed where the tails start."""
    fmt = lp.format(name)
    rng = np.random.default_rng(seed)
    base = rng.standard_normal(n) * 2.0 ** rng.integers(-3, 4, n)
    big = float(lp.round(fmt.max / 4, fmt, "rz"))

    def put(**where):
        x = base.copy()
        for i, v in where.items():
            x[int(i[1:])] = v
        return x

    d = {
        "nan start": put(i0=NAN),
        "nan middle": put(i17=NAN),
        "nan end": put(**{f"i{n - 1}": NAN}),
        "-nan middle, +nan later": put(i9=NEG_NAN, i20=NAN),
        "+inf": put(i12=np.inf),
        "-inf": put(i12=-np.inf),
        "inf start": put(i0=np.inf),
        "+inf then -inf": put(i8=np.inf, i25=-np.inf),
        "-inf then +inf then nan": put(i5=-np.inf, i6=np.inf, i30=NEG_NAN),
        "+inf twice then nan": put(i3=np.inf, i11=np.inf, i33=NAN),
        # Overflow in the middle of a finite run (where the format has inf).
        "overflow": np.concatenate([np.full(n // 2, big), base[:n - n // 2]]),
        "overflow, then back": np.concatenate([np.full(6, big), np.full(6, -big),
                                               np.full(n - 12, big)]),
        "alternating": np.where(np.arange(n) % 2, -1.0, 1.0) * (1 + rng.random(n)),
        "zeros": rng.choice(np.array([0.0, -0.0, 1.0, -1.0]), n),
    }
    d["alternating"][[7, 19]] = [np.inf, NAN]
    d["zeros"][[4, 15, 16]] = [-np.inf, -0.0, NEG_NAN]
    return d


def plans(name, mode, seed=7):
    """Two equal plans (the second for the reference): "sr" with its own generator."""
    if mode == "sr":
        g1, g2 = np.random.default_rng(seed), np.random.default_rng(seed)
        return make_plan(name, mode, rng=g1), make_plan(name, mode, rng=g2), (g1, g2)
    return make_plan(name, mode), make_plan(name, mode), None


def same_stream(gens):
    g1, g2 = gens
    return np.array_equal(g1.integers(0, 2**63, 8), g2.integers(0, 2**63, 8))


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("mode", MODES)
def test_sequential_and_prefix_sums_equal_stepwise(name, mode):
    for label, xs in special_sets(name).items():
        x = xs.reshape(-1, 1)
        p1, p2, gens = plans(name, mode)
        got = seqmod.sequential(p1, x, prefix=True)
        assert_bits(got, seqmod.stepwise(p2, x, "sequential", prefix=True), mode, label)
        if gens is not None:
            assert same_stream(gens), label
        p1, p2, _ = plans(name, mode)
        assert_bits(seqmod.sequential(p1, x), seqmod.stepwise(p2, x, "sequential"), label)


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("mode", MODES[:-1])
def test_kahan_equals_stepwise(name, mode):
    # "sr" Kahan is `stepwise` itself (no fast path): nothing to compare.
    plan = make_plan(name, mode)
    for label, xs in special_sets(name, seed=1).items():
        x = xs.reshape(-1, 1)
        assert_bits(seqmod.kahan_sum(plan, x), seqmod.stepwise(plan, x, "kahan"), mode, label)


def test_kahan_inf_then_compensation():
    # The reference's own steps: after +inf, c = (inf - acc) - inf is NaN, so the
    # next y = x - c is NaN and the sum NaN; inf stays only as the last term.
    plan = make_plan("fp16", "rne")
    x = np.array([[1.0], [2.0], [np.inf]])
    assert seqmod.kahan_sum(plan, x)[0] == np.inf
    assert np.isnan(seqmod.kahan_sum(plan, np.vstack([x, [[1.0]]]))[0])
    # Overflow mid-run: 40000 + 40000 is inf in FP16 (rne), then NaN.
    y = np.array([[40000.0], [40000.0]])
    assert seqmod.kahan_sum(plan, y)[0] == np.inf
    assert np.isnan(seqmod.kahan_sum(plan, np.vstack([y, [[1.0]]]))[0])


@pytest.mark.parametrize("m", (3, 12))
@pytest.mark.parametrize("mode", ("rne", "rd", "ro"))
def test_axis_reductions_with_specials_in_some_columns(m, mode):
    # m = 12: NaN + NaN takes its sign from NumPy's SIMD lane or scalar remainder,
    # and the reference computes every column in one array: the tails follow it.
    rng = np.random.default_rng(m)
    x = rng.standard_normal((50, m))
    x[10, 1], x[3, 2], x[30, 2] = np.nan, np.inf, -np.inf
    if m > 3:
        x[5:, 8:] = np.where(rng.random((45, m - 8)) < 0.2, np.nan, x[5:, 8:])
        x[::7, 9] *= -1.0
        x[20, 10], x[21, 11] = -np.inf, -np.nan
    plan = make_plan("bf16", mode)
    for order in ("sequential", "kahan"):
        got = lp.sum(x, "bf16", mode, axis=0, order=order)
        assert_bits(got, seqmod.stepwise(plan, x, order), order)
        got = lp.sum(x.T, "bf16", mode, axis=1, order=order)
        assert_bits(got, seqmod.stepwise(plan, x, order), order, "axis 1")
    assert_bits(lp.cumsum(x, "bf16", mode, axis=0),
                seqmod.stepwise(plan, x, "sequential", prefix=True))


@pytest.mark.parametrize("mode", ("rne", "ru", "sr"))
def test_long_tails_windows_and_blocks(mode, monkeypatch):
    # Small blocks and windows: the tails' windows double, cross blocks and restart
    # at each change (inf, then the opposite inf, then NaNs of either sign).
    monkeypatch.setattr(seqmod, "BLOCK", 64)
    monkeypatch.setattr(seqmod, "_TAIL_MIN", 4)
    x = np.random.default_rng(3).standard_normal(600)
    x[[150, 400, 470, 520]] = [np.inf, -np.inf, NEG_NAN, NAN]
    for cut in (100, 200, 450, 600):
        p1, p2, gens = plans("fp16", mode)
        xs = x[:cut].reshape(-1, 1)
        got = seqmod.sequential(p1, xs, prefix=True)
        assert_bits(got, seqmod.stepwise(p2, xs, "sequential", prefix=True), cut)
        if gens is not None:
            assert same_stream(gens)
        if mode != "sr":
            plan = make_plan("fp16", mode)
            assert_bits(seqmod.kahan_sum(plan, xs), seqmod.stepwise(plan, xs, "kahan"), cut)
