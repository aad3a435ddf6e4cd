"""Sequential sums, prefix sums, Kahan and dot products at vector speed.

The fast paths of `lowprec.arith.sequential` are held, bit for bit, to the one-step-
at-a-time reference `stepwise` (one `apply` of the add kernel per step: the old
implementation, kept) and to a Fraction step-by-step oracle written here (each step
the exact sum of two floats, rounded by `lowprec.testing.reference_round`), on random
and adversarial data of every format and mode. "sr" reproduces the reference's
random stream: the same results and the generator left in the same state.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowprec as lp
from helpers import assert_bits, assert_same
from lowprec.arith import sequential as seqmod
from lowprec.engine.plan import plan as make_plan
from lowprec.status import FLAG_NAMES
from lowprec.testing import reference_round, values

FORMATS = ("FP32", "BF16", "FP16", "TF32", "FP8_E4M3", "FP8_E5M2", "FP8_E4M3FNUZ",
           "FP6_E2M3", "FP6_E3M2", "FP4_E2M1")
DETERMINISTIC = ("rne", "rna", "rz", "ru", "rd", "ro")


# -- the oracle -------------------------------------------------------------------

def oracle_add(acc, x, fmt, mode, subnormals=None, saturate=False):
    """round(acc + x), the exact sum of two floats rounded once by the Fraction reference."""
    fmt = lp.format(fmt)
    kw = dict(subnormals=subnormals, saturate=saturate)
    if math.isnan(acc) or math.isnan(x):
        return math.nan
    if math.isinf(acc) or math.isinf(x):
        if math.isinf(acc) and math.isinf(x) and acc != x:
            return math.nan
        return reference_round(acc if math.isinf(acc) else x, fmt, mode, **kw)
    s = Fraction(acc) + Fraction(x)
    if s == 0:      # IEEE 754 6.3: +0 unless both -0, -0 under rd unless both +0
        both = acc == 0 and x == 0 and math.copysign(1, acc) == math.copysign(1, x)
        z = acc if both else (-0.0 if mode == "rd" else 0.0)
        return z if fmt.has_negative_zero else 0.0
    return reference_round(s, fmt, mode, **kw)


def oracle_prefix(xs, fmt, mode, subnormals=None, saturate=False):
    acc = reference_round(float(xs[0]), fmt, mode, subnormals=subnormals, saturate=saturate)
    out = [acc]
    for x in xs[1:]:
        acc = oracle_add(acc, float(x), fmt, mode, subnormals, saturate)
        out.append(acc)
    return np.array(out)


def oracle_kahan(xs, fmt, mode):
    def add(a, b):
        return oracle_add(a, b, fmt, mode)
    s, c = reference_round(float(xs[0]), fmt, mode), 0.0
    for x in xs[1:]:
        y = add(float(x), -c)
        t = add(s, y)
        c = add(add(t, -s), -y)
        s = t
    return s


def stepwise_prefix(xs, fmt, mode, rng=None, **kw):
    plan = make_plan(fmt, mode, rng=rng, **kw)
    return seqmod.stepwise(plan, np.asarray(xs).reshape(-1, 1), "sequential", True).ravel()


def same_stream(g1, g2):
    """Whether two generators are at the same point of their streams (draws from both)."""
    return np.array_equal(g1.integers(0, 2**63, 8), g2.integers(0, 2**63, 8))


def bits(a):
    return np.ascontiguousarray(a, np.float64).view(np.uint64)


# -- data ---------------------------------------------------------------------------

def datasets(name, n=120, seed=0):
    """Adversarial and random terms for format ``name``: ties with the accumulator's
    parity alternating, sums landing on powers of two, sign changes every step,
    cancellation to exact zero, overflow, the subnormal range, specials."""
    fmt = lp.format(name)
    rng = np.random.default_rng(seed)
    m = fmt.mantissa_bits
    q1 = 2.0 ** -m                       # the quantum of [1, 2)
    e_hi = min(fmt.emax - 1, 12)
    big = float(lp.round(fmt.max / 2, fmt, "rz"))
    sub = fmt.smallest_subnormal

    def pick(choices):
        return rng.choice(np.array(choices, np.float64), n)

    d = {
        "uniform": rng.random(n),
        "normal": rng.standard_normal(n),
        "mixed": rng.standard_normal(n) * 2.0 ** rng.integers(-2 * m - 4, e_hi, n),
        "stored": np.asarray(lp.round(rng.standard_normal(n) * 2.0 ** rng.integers(0, 4, n),
                                      fmt)),
        "ties": np.concatenate([[1.5], pick([q1 / 2, -q1 / 2, q1, 3 * q1 / 2, q1 / 4])[1:]]),
        "stagnation": np.concatenate([[2.0 ** min(m + 2, e_hi)],
                                      pick([0.5, 1.0, -0.5, 0.25, 0.75, -1.0])[1:]]),
        "powers": np.concatenate([[2 - q1], pick([q1, -q1, q1 / 2, -q1 / 2, 2 * q1,
                                                   -2 * q1, 1.0, -1.0])[1:]]),
        "alternating": rng.random(n) * np.where(np.arange(n) % 2, -1.0, 1.0) * 2.0,
        "cancel": np.repeat(rng.standard_normal(n // 2), 2) * np.tile([1.0, -1.0], n // 2),
        "zeros": pick([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, q1]),
        "overflow": pick([big, -big, big / 2, fmt.max, -fmt.max, 1.0]),
        "subnormal": pick([sub, -sub, sub / 2, -sub / 2, 3 * sub / 2, fmt.smallest_normal,
                           -fmt.smallest_normal / 2, sub / 4]),
        "tiny_terms": np.concatenate([[big / 2], pick([5e-324, -5e-324, 1e-300, -1e-310])[1:]]),
        "specials": pick([np.inf, -np.inf, np.nan, 1.0, -2.0, 0.5]),
    }
    d["cancel"][::7] = -0.0
    return d


# -- sums and prefix sums -------------------------------------------------------------

@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("mode", DETERMINISTIC)
def test_cumsum_equals_stepwise_and_oracle(name, mode):
    for label, xs in datasets(name).items():
        got = lp.cumsum(xs, name, mode)
        assert_bits(got, stepwise_prefix(xs, name, mode), name, mode, label)
        assert_same(got, oracle_prefix(xs, name, mode), name, mode, label)
        assert_bits(lp.sum(xs, name, mode, order="sequential"), got[-1], label)


@pytest.mark.parametrize("name", ("BF16", "FP16", "FP8_E4M3", "FP8_E5M2", "FP4_E2M1"))
@pytest.mark.parametrize("options", ({"subnormals": False}, {"saturate": True},
                                     {"subnormals": False, "saturate": True}))
def test_options(name, options):
    for mode in DETERMINISTIC:
        for label, xs in datasets(name, n=60, seed=1).items():
            got = lp.cumsum(xs, name, mode, **options)
            assert_bits(got, stepwise_prefix(xs, name, mode, **options), mode, label)
            assert_same(got, oracle_prefix(xs, name, mode, **options), mode, label)


@pytest.mark.parametrize("name", FORMATS)
def test_sr_reproduces_the_stepwise_stream(name):
    for label, xs in datasets(name, n=80, seed=2).items():
        g1, g2 = np.random.default_rng(11), np.random.default_rng(11)
        got = lp.cumsum(xs, name, "sr", rng=g1)
        want = stepwise_prefix(xs, name, "sr", rng=g2)
        assert_bits(got, want, label)
        assert same_stream(g1, g2), label   # same words used
    # sr_bits: the limited-precision draws follow the reference too.
    long = np.random.default_rng(3).random(1500).reshape(-1, 1)     # windows too
    for xs in (datasets(name, n=80, seed=3)["mixed"], long):
        sr_bits = 2 if xs is long else 5
        p1 = make_plan(name, "sr", rng=4, sr_bits=sr_bits)
        p2 = make_plan(name, "sr", rng=4, sr_bits=sr_bits)
        got = seqmod.sequential(p1, xs.reshape(-1, 1), True)
        assert_bits(got, seqmod.stepwise(p2, xs.reshape(-1, 1), "sequential", True), sr_bits)


def test_sr_rounds_both_ways():
    # acc + 2**-10 in BF16 on [1, 2) (quantum 2**-7): up by 2**-7 with probability 1/8.
    got = lp.cumsum(np.array([1.0] + [2.0 ** -10] * 1200), "bf16", "sr", rng=0)
    inside = got[:-1] < 1.9
    steps = np.diff(got)[inside]
    assert set(steps.tolist()) <= {0.0, 2.0 ** -7}
    assert 0.09 < np.count_nonzero(steps) / steps.size < 0.16


def test_sr_other_generators_take_the_reference():
    xs = np.random.default_rng(5).standard_normal(50)
    for bg in (np.random.MT19937, np.random.Philox, np.random.SFC64):
        g1, g2 = np.random.Generator(bg(7)), np.random.Generator(bg(7))
        got = lp.cumsum(xs, "fp16", "sr", rng=g1)
        assert_bits(got, stepwise_prefix(xs, "fp16", "sr", rng=g2), bg)
        assert same_stream(g1, g2)


@pytest.mark.parametrize("mode", ("rne", "rd", "ru", "rna", "ro", "sr"))
def test_long_runs_vector_windows_and_blocks(mode, monkeypatch):
    # Small blocks and long runs: windows that fill, double, cross blocks and are cut.
    monkeypatch.setattr(seqmod, "BLOCK", 500)
    rng = np.random.default_rng(6)
    cases = {"BF16": rng.random(2000), "FP32": rng.random(2000),
             "FP16": np.concatenate([[2.0 ** 12], rng.standard_normal(1999) * 4]),
             "FP8_E5M2": np.concatenate([[64.0], rng.random(1999) * 17 - 8])}
    seen = []
    window, sr_window = seqmod._window, seqmod._sr_window

    def counted(real):
        def run(*args):
            k, c = real(*args)
            seen.append(k == len(args[2]))
            return k, c
        return run

    monkeypatch.setattr(seqmod, "_window", counted(window))
    monkeypatch.setattr(seqmod, "_sr_window", counted(sr_window))
    for name, xs in cases.items():
        g1, g2 = np.random.default_rng(1), np.random.default_rng(1)
        got = lp.cumsum(xs, name, mode, rng=g1)
        assert_bits(got, stepwise_prefix(xs, name, mode, rng=g2), name)
        assert same_stream(g1, g2)
    a, b = rng.random(2000), rng.random(2000)   # products of two parts: lo != 0
    for name in ("BF16", "FP16"):
        g1, g2 = np.random.default_rng(2), np.random.default_rng(2)
        got = lp.dot(a, b, name, mode, fused=True, rng=g1)
        with lp.flags():
            assert_bits(got, lp.dot(a, b, name, mode, fused=True, rng=g2), name)
        assert same_stream(g1, g2)
    assert any(seen) and not all(seen)          # windows that filled, and windows cut


@pytest.mark.parametrize("name", ("BF16", "FP16", "FP8_E5M2"))
def test_windows_on_grid_terms(name, monkeypatch):
    # A driftless walk inside [1, 2) of exact and inexact multiples of the quantum:
    # long windows whose ro parities, rne ties and directed points all matter.
    q = 2.0 ** -lp.format(name).mantissa_bits
    rng = np.random.default_rng(15)
    xs = np.concatenate([[1.5], rng.choice([q, -q, 2 * q, -2 * q, q / 2, -q / 2, q / 4,
                                            -3 * q / 4, 0.0], 1500)])
    calls = []
    window = seqmod._window
    monkeypatch.setattr(seqmod, "_window", lambda *a: calls.append(1) or window(*a))
    for mode in ("rne", "rna", "rz", "ru", "rd", "ro"):
        assert_bits(lp.cumsum(xs, name, mode), stepwise_prefix(xs, name, mode), mode)
    assert calls


@given(st.data())
@settings(max_examples=60, deadline=None)
def test_hypothesis_against_oracle(data):
    name = data.draw(st.sampled_from(FORMATS))
    mode = data.draw(st.sampled_from(DETERMINISTIC))
    xs = data.draw(st.lists(values(name), min_size=1, max_size=40))
    scale = data.draw(st.sampled_from([1.0, 0.5, 2.0 ** -3, 3.0]))
    with np.errstate(over="ignore"):
        xs = np.array(xs, np.float64) * scale
    assert_same(lp.cumsum(xs, name, mode), oracle_prefix(xs, name, mode), name, mode, xs)


# -- shapes, axes, dtypes -------------------------------------------------------------

def test_axes_and_shapes():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((30, 4, 3)) * 3
    for axis in (0, 1, 2, -1):
        got = lp.cumsum(x, "bf16", "rz", axis=axis)
        assert got.shape == x.shape
        moved = np.moveaxis(x, axis, 0).reshape(x.shape[axis], -1)
        want = np.stack([oracle_prefix(c, "bf16", "rz") for c in moved.T], axis=1)
        assert_same(np.moveaxis(got, axis, 0).reshape(moved.shape), want, axis)
        assert_same(lp.sum(x, "bf16", "rz", axis=axis, order="sequential"),
                    np.take(got, -1, axis=axis), axis)
    flat = lp.cumsum(x, "fp16", axis=None)
    assert flat.shape == (x.size,)
    assert_same(flat, oracle_prefix(x.ravel(), "fp16", "rne"))
    assert_same(lp.sum(x, "fp16", order="sequential"), flat[-1])
    # Wider than NARROW: the reference path, vectorised across columns.
    wide = rng.standard_normal((5, seqmod.NARROW + 6))
    want = np.stack([oracle_prefix(c, "fp16", "ru") for c in wide.T], axis=1)
    assert_same(lp.cumsum(wide, "fp16", "ru", axis=0), want)


def test_empty_and_length_one():
    assert lp.cumsum([], "fp16").shape == (0,)
    assert lp.cumsum(np.zeros((0, 3)), "fp16", axis=0).shape == (0, 3)
    assert lp.cumsum(np.zeros((3, 0)), "fp16").shape == (3, 0)
    assert lp.sum([], "fp16", order="sequential") == 0.0
    assert lp.sum([], "fp16", order="kahan") == 0.0
    assert lp.cumsum(5.0, "fp16", axis=None).tolist() == [5.0]
    for mode in DETERMINISTIC:
        assert_same(lp.cumsum([0.1], "bf16", mode), [reference_round(0.1, "bf16", mode)])
        assert_same(lp.sum([-0.0], "bf16", mode, order="sequential"), -0.0)
        assert_same(lp.sum([0.1], "bf16", mode, order="kahan"), reference_round(0.1, "bf16", mode))


def test_dtypes_and_inputs_unchanged():
    rng = np.random.default_rng(8)
    x32 = rng.standard_normal(200).astype(np.float32)
    keep = x32.copy()
    for x in (x32, x32.astype(np.float16), np.arange(-50, 150, dtype=np.int32),
              np.arange(-50, 150).astype(np.longdouble) / 3, (np.arange(200) % 3 == 0)):
        got = lp.cumsum(x, "bf16", "rd")
        want = stepwise_prefix(np.asarray(x), "bf16", "rd")
        assert_bits(got, want, x.dtype)
    assert np.array_equal(x32, keep)
    big = np.array([2**62 + 1, 3, -(2**62)], np.int64)     # beyond float64: the reference
    want = [reference_round(2**62 + 1, "fp32", "ru")]
    for v in big[1:]:
        want.append(reference_round(Fraction(want[-1]) + int(v), "fp32", "ru"))
    assert_same(lp.cumsum(big, "fp32", "ru"), want)


def test_bad_input():
    with pytest.raises(ValueError, match="axis"):
        lp.cumsum([1.0, 2.0], "fp16", axis=1)
    with pytest.raises(ValueError, match="axis"):
        lp.cumsum(3.0, "fp16")
    with pytest.raises(TypeError, match="axis"):
        lp.cumsum([1.0], "fp16", axis="0")
    with pytest.raises(TypeError):
        lp.cumsum([1j], "fp16")
    with pytest.raises(ValueError):
        lp.cumsum([1.0], "fp16", "up")
    with pytest.raises(TypeError, match="saturate"):
        lp.cumsum([1.0], "fp16", saturate="yes")


def test_flags_counts_are_those_of_one_add_per_step():
    rng = np.random.default_rng(9)
    xs = np.concatenate([rng.standard_normal(60) * 3e4, [np.inf, 1.0, 2.0 ** -20]])
    for name, mode in (("fp16", "rne"), ("e4m3", "ru"), ("bf16", "rd")):
        with lp.flags() as f:
            got = lp.cumsum(xs, name, mode)
        with lp.flags() as g:
            acc = lp.round(xs[0], name, mode)
            for x in xs[1:]:
                acc = lp.add(acc, x, name, mode)
        assert_same(got[-1], acc)
        assert [getattr(f, k) for k in FLAG_NAMES] == [getattr(g, k) for k in FLAG_NAMES]
        assert f.inexact > 0


# -- Kahan ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", FORMATS)
def test_kahan_equals_stepwise_and_oracle(name):
    for mode in DETERMINISTIC:
        for label, xs in datasets(name, n=40, seed=10).items():
            plan = make_plan(name, mode)
            want = seqmod.stepwise(plan, xs.reshape(-1, 1), "kahan")
            got = lp.sum(xs, name, mode, order="kahan")
            assert_bits(got, want[0], mode, label)
            if label in ("normal", "ties", "zeros", "specials"):
                assert_same(got, oracle_kahan(xs, name, mode), mode, label)
    x = np.random.default_rng(12).random((40, 3))
    got = lp.sum(x, name, "rz", axis=0, order="kahan")
    assert_same(got, [oracle_kahan(c, name, "rz") for c in x.T])
    # sr: Kahan's four operations per step, each by the public per-operation call with
    # its documented stream (DESIGN.md, "Rounding"): the sum's seed for the addition
    # (and term 0), the derived seeds 1-3 for the others, step i at offset i*m.
    def derived(seed, k):
        return int(np.random.SeedSequence((seed, k)).generate_state(1, np.uint64)[0] >> 1)

    got = lp.sum(x, name, "sr", axis=0, order="kahan", rng=5)
    acc, comp, m = lp.round(x[0], name, "sr", rng=5), np.zeros(3), 3
    for i, row in enumerate(x[1:], start=1):
        y = lp.sub(row, comp, name, "sr", rng=derived(5, 1), offset=i * m)
        t = lp.add(acc, y, name, "sr", rng=5, offset=i * m)
        comp = lp.sub(lp.sub(t, acc, name, "sr", rng=derived(5, 2), offset=i * m), y, name,
                      "sr", rng=derived(5, 3), offset=i * m)
        acc = t
    assert_bits(got, acc)


# -- dot products -----------------------------------------------------------------------

def oracle_dot(a, b, fmt, mode, fused):
    if fused:
        p0 = Fraction(float(a[0])) * Fraction(float(b[0]))
        acc = reference_round(p0, fmt, mode) if p0 != 0 else \
            (-0.0 if (a[0] < 0) != (b[0] < 0) else 0.0)
        for x, y in zip(a[1:], b[1:]):
            p = Fraction(float(x)) * Fraction(float(y))
            if not math.isfinite(acc):       # finite products: inf and NaN stay
                acc = reference_round(acc, fmt, mode)
                continue
            s = p + Fraction(acc)
            if s == 0:
                pz = math.copysign(1, x) * math.copysign(1, y)
                both = p == 0 and acc == 0 and pz == math.copysign(1, acc)
                acc = acc if both else (-0.0 if mode == "rd" else 0.0)
            else:
                acc = reference_round(s, fmt, mode)
        return acc
    prods = [oracle_mul(x, y, fmt, mode) for x, y in zip(a, b)]
    return oracle_prefix(prods, fmt, mode)[-1]


def oracle_mul(x, y, fmt, mode):
    p = Fraction(float(x)) * Fraction(float(y))
    if p == 0:
        return -0.0 if (math.copysign(1, x) < 0) != (math.copysign(1, y) < 0) else 0.0
    return reference_round(p, fmt, mode)


@pytest.mark.parametrize("name", ("FP32", "BF16", "FP16", "FP8_E4M3", "FP8_E5M2", "FP4_E2M1"))
@pytest.mark.parametrize("fused", (False, True))
def test_dot_against_reference_path_and_oracle(name, fused):
    rng = np.random.default_rng(13)
    fmt = lp.format(name)
    n = 80
    cases = {
        "normal": (rng.standard_normal(n), rng.standard_normal(n)),
        "stored": (np.asarray(lp.round(rng.standard_normal(n), fmt)),
                   np.asarray(lp.round(rng.standard_normal(n) * fmt.max / 64, fmt))),
        "bf16 operands": (np.asarray(lp.round(rng.standard_normal(n), "bf16")),
                          np.asarray(lp.round(rng.standard_normal(n), "bf16"))),
        "signed zeros": (rng.choice([0.0, -0.0, 1.0], n), rng.choice([0.0, -0.0, -1.0], n)),
    }
    for mode in DETERMINISTIC:
        for label, (a, b) in cases.items():
            got = lp.dot(a, b, name, mode, fused=fused)
            with lp.flags():                  # the documented per-step path
                want = lp.dot(a, b, name, mode, fused=fused)
            assert_bits(got, want, mode, label)
            assert_same(got, oracle_dot(a, b, name, mode, fused), mode, label)
    a2, b2 = rng.standard_normal((3, 40)), rng.standard_normal((3, 40))
    got = lp.dot(a2, b2, name, "rz", fused=fused)
    with lp.flags():
        assert_bits(got, lp.dot(a2, b2, name, "rz", fused=fused))
    g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
    a, b = cases["stored"]
    got = lp.dot(a, b, name, "sr", fused=fused, rng=g1)
    with lp.flags():
        assert_bits(got, lp.dot(a, b, name, "sr", fused=fused, rng=g2))
    assert same_stream(g1, g2)


@pytest.mark.parametrize("name", ("FP32", "BF16", "FP16", "TF32", "FP8_E4M3", "FP8_E5M2",
                                  "FP4_E2M1"))
def test_fused_products_of_two_parts(name):
    # Products hi + lo with hi on the grid or a midpoint and lo deciding, products
    # Dekker cannot split (underflow), huge ones, zeros, infinities and NaNs.
    fmt = lp.format(name)
    q = 2.0 ** -fmt.mantissa_bits
    rng = np.random.default_rng(14)
    ca = np.array([1 + 2**-27, 1 - 2**-27, 1 + 2**-26 + 2**-40, 3.0, 0.5, q / 2 + 2**-40,
                   -q, 1.0, 2.0**-600, -0.0, fmt.max / 2 + 2**-20])
    cb = np.array([1 + 2**-27, 1 - 2**-28, -1.0, q / 2, 1 + 2**-30, 2.0**-600, 1.5, 0.0, 1.0])
    for mode in (*DETERMINISTIC, "sr"):
        for trial in range(3):
            a = rng.choice(ca, 200) * (1.0 if trial == 0 else rng.standard_normal(200))
            b = rng.choice(cb, 200)
            if trial == 2:
                a[rng.integers(0, 200, 3)] = [np.inf, -np.inf, np.nan]
            g1, g2 = np.random.default_rng(9), np.random.default_rng(9)
            got = lp.dot(a, b, name, mode, fused=True, rng=g1)
            with lp.flags():                  # the per-step FMA chain
                want = lp.dot(a, b, name, mode, fused=True, rng=g2)
            assert_bits(got, want, mode, trial)
            assert same_stream(g1, g2)
            if mode != "sr" and trial < 2:
                assert_same(got, oracle_dot(a, b, name, mode, True), mode, trial)


# -- Tensors -------------------------------------------------------------------------

def test_tensor_cumsum():
    t = lp.tensor(np.arange(12.0).reshape(3, 4) * 37.3, "bf16")
    for axis in (None, 0, 1):
        for got in (np.cumsum(t, axis=axis), t.cumsum(axis)):
            assert isinstance(got, lp.Tensor) and got.fmt == lp.BF16
            assert_bits(got.values, lp.cumsum(t.values, "bf16", axis=axis), axis)
    with lp.context(mode="rz"):
        assert_bits(np.cumsum(t).values, lp.cumsum(t.values, "bf16", "rz", axis=None))
    with pytest.raises(TypeError, match="dtype"):
        np.cumsum(t, dtype=np.float32)
    with pytest.raises(TypeError, match="out"):
        np.cumsum(t, out=np.empty(12))
