"""The rounding kernel against independent oracles.

Oracles: `lowprec.testing.reference_round` (Fraction arithmetic, itself checked
against MPFR here), NumPy's float16 cast, ml_dtypes' casts, and exact probability
arguments for stochastic rounding.
"""

import math
import os
import signal
import sys
import threading
import tracemalloc
import zlib
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowprec as lp
import lowprec.engine.parallel as parallel
from helpers import assert_same
from lowprec import testing as lpt
from peers import gmpy2, ml_dtypes, requires_gmpy2, requires_ml_dtypes

DET_MODES = ("rne", "rna", "rz", "ru", "rd", "ro")
CUSTOM = [lp.Format.custom(precision=5, emax=7, name="custom_p5_e7"),
          lp.Format(3, 4, kind="fn", name="custom_e3m4fn"),
          lp.Format(6, 9, bias=20, kind="finite", name="custom_e6m9_finite"),
          lp.Format(5, 2, subnormals=False, name="e5m2_nosub")]
# The unsigned scales round by their own rules (tests/test_scale_formats.py).
FORMATS = [f for f in lp.NAMED_FORMATS.values() if f.signed] + CUSTOM
SMALL = [f for f in FORMATS if f.bits <= 8]
IEEE = [lp.FP32, lp.TF32, lp.FP16, lp.BF16, lp.FP8_E5M2, CUSTOM[0]]
OPTIONS = [dict(), dict(saturate=True), dict(subnormals=False),
           dict(saturate=True, subnormals=False)]
MPFR_MODE = {"rne": gmpy2.RoundToNearest, "rz": gmpy2.RoundToZero,
             "ru": gmpy2.RoundUp, "rd": gmpy2.RoundDown}


def reference(xs, fmt, mode, **opts):
    return np.array([lpt.reference_round(float(x), fmt, mode, **opts) for x in xs])


def targeted(fmt):
    """Every representable value's neighbourhood: exact values, exact ties, ties
    plus and minus one float64 ulp, the subnormal boundary, half the smallest
    subnormal, the overflow thresholds, signed zeros, infinities and NaN."""
    vals = np.array(lpt.representable_values(fmt))
    ulp_top = math.ldexp(1.0, fmt.emax - fmt.mantissa_bits)
    extra = [fmt.max + ulp_top / 2, fmt.max + ulp_top, 2 * fmt.max,
             math.ldexp(1.0, fmt.emax + 1), math.ldexp(1.0, fmt.emin - fmt.mantissa_bits - 1),
             fmt.smallest_normal / 2, 1e300, 5e-324]
    mids = (vals[1:] + vals[:-1]) / 2
    pts = np.concatenate([vals, mids, extra])
    pts = np.concatenate([pts, np.nextafter(pts, np.inf), np.nextafter(pts, -np.inf)])
    pts = np.concatenate([pts, -pts, [np.inf, -np.inf, np.nan]])
    return pts


# -- the reference itself, against MPFR ------------------------------------------------

def mpfr_round(x, fmt, mode):
    ctx = gmpy2.context(precision=fmt.p, emin=fmt.emin - fmt.mantissa_bits + 1,
                        emax=fmt.emax + 1, subnormalize=True, round=MPFR_MODE[mode])
    with gmpy2.context(ctx):
        return float(gmpy2.mpfr(x))


@requires_gmpy2
@pytest.mark.oracle
@pytest.mark.parametrize("fmt", IEEE, ids=lambda f: f.name)
@pytest.mark.parametrize("mode", sorted(MPFR_MODE))
@settings(max_examples=120)
@given(data=st.data())
def test_reference_round_matches_mpfr(fmt, mode, data):
    x = data.draw(lpt.values(fmt, allow_nan=False, allow_infinity=False))
    assert_same(lpt.reference_round(x, fmt, mode), mpfr_round(x, fmt, mode))


@requires_gmpy2
@pytest.mark.oracle
@pytest.mark.parametrize("fmt", [lp.FP8_E5M2, CUSTOM[0]], ids=lambda f: f.name)
@pytest.mark.parametrize("mode", sorted(MPFR_MODE))
def test_reference_round_matches_mpfr_on_targeted_values(fmt, mode):
    for x in targeted(fmt):
        if np.isfinite(x):
            assert_same(lpt.reference_round(float(x), fmt, mode),
                        mpfr_round(float(x), fmt, mode), x)


# -- the kernel against the reference ------------------------------------------------

@pytest.mark.parametrize("fmt", SMALL, ids=lambda f: f.name)
@pytest.mark.parametrize("mode", DET_MODES)
@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: "-".join(o) or "default")
def test_small_formats_on_every_neighbourhood(fmt, mode, opts):
    xs = targeted(fmt)
    assert_same(lp.round(xs, fmt, mode, **opts), reference(xs, fmt, mode, **opts), xs)


@pytest.mark.parametrize("fmt", [lp.FP16, lp.BF16, lp.TF32, lp.FP32], ids=lambda f: f.name)
@pytest.mark.parametrize("mode", DET_MODES)
def test_wide_formats_on_targeted_values(fmt, mode):
    # Binade structure of the wide format, sampled: all exponents, few mantissas.
    rng = np.random.default_rng(1)
    e = rng.integers(fmt.emin - fmt.mantissa_bits - 2, fmt.emax + 2, 400)
    k = rng.integers(0, 2 ** fmt.mantissa_bits, 400)
    grid = np.ldexp(2.0 ** fmt.mantissa_bits + k, e - fmt.mantissa_bits)
    sub = np.ldexp(k.astype(float), fmt.emin - fmt.mantissa_bits)
    gaps = np.ldexp(1.0, np.maximum(e, fmt.emin) - fmt.mantissa_bits)
    pts = np.concatenate([grid, sub, grid + gaps / 2,
                          sub + math.ldexp(0.5, fmt.emin - fmt.mantissa_bits),
                          rng.choice(targeted(lp.Format(fmt.exponent_bits, 2, fmt.bias)), 1000)])
    pts = np.concatenate([pts, np.nextafter(pts, np.inf), np.nextafter(pts, -np.inf)])
    pts = np.concatenate([pts, -pts])
    for opts in OPTIONS[:2]:
        assert_same(lp.round(pts, fmt, mode, **opts), reference(pts, fmt, mode, **opts), pts)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("mode", DET_MODES)
@settings(max_examples=25)
@given(data=st.data())
def test_kernel_matches_reference_on_hypothesis_values(fmt, mode, data):
    xs = np.array(data.draw(st.lists(lpt.values(fmt), min_size=1, max_size=40)))
    opts = data.draw(st.sampled_from(OPTIONS))
    assert_same(lp.round(xs, fmt, mode, **opts), reference(xs, fmt, mode, **opts), xs)


@settings(max_examples=200)
@given(st.floats(allow_nan=False), st.sampled_from(FORMATS), st.sampled_from(DET_MODES))
def test_scalar_input_gives_numpy_scalar(x, fmt, mode):
    r = lp.round(x, fmt, mode)
    assert isinstance(r, np.float64)
    assert_same(r, lpt.reference_round(x, fmt, mode))


def test_chunk_boundaries_do_not_matter():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(100_003) * 2.0 ** rng.integers(-30, 30, 100_003)
    x[::997] = np.inf
    x[::1009] = np.nan
    whole = lp.round(x, "e4m3", "rna")
    parts = np.concatenate([lp.round(x[i:i + 777], "e4m3", "rna") for i in range(0, x.size, 777)])
    assert_same(whole, parts, x)
    sample = rng.choice(x.size, 500, replace=False)
    assert_same(whole[sample], reference(x[sample], lp.FP8_E4M3, "rna"), x[sample])


@pytest.mark.parametrize("fmt", [lp.FP8_E4M3, lp.BF16, lp.FP6_E2M3], ids=lambda f: f.name)
@pytest.mark.parametrize("mode", ["rne", "rna", "rz", "ru", "rd", "ro"])
def test_threads_split_the_input_without_changing_the_result(monkeypatch, fmt, mode):
    # Small spans and chunks, so that a short input is cut across several threads.
    import lowprec.engine.parallel as kernel
    monkeypatch.setattr(kernel, "CHUNK", 256)
    monkeypatch.setattr(kernel, "PARALLEL_MIN", 512)
    before = lp.threads(3)
    try:
        rng = np.random.default_rng(1)
        x = targeted(fmt)
        x = np.concatenate([x if x.size < 8000 else rng.choice(x, 8000), rng.standard_normal(4000)])
        with lp.flags() as threaded:
            got = lp.round(x, fmt, mode)
    finally:
        lp.threads(before)
    assert_same(got, reference(x, fmt, mode), x)
    monkeypatch.setattr(kernel, "PARALLEL_MIN", x.size + 1)   # one thread
    with lp.flags() as single:
        lp.round(x, fmt, mode)
    assert threaded.as_dict() == single.as_dict() and threaded.inexact > 0


def test_concurrent_calls_that_need_different_pool_sizes_never_fail(monkeypatch):
    # Once wrong: a call needing a bigger pool shut down the one another call was still
    # submitting to ("cannot schedule new futures after shutdown"). Tiny chunks and
    # spans, a fresh pool each round, a switch interval of a microsecond and eight
    # threads whose inputs need 1 to 8 workers make the race happen in most rounds.
    import lowprec.engine.parallel as kernel
    monkeypatch.setattr(kernel, "CHUNK", 64)
    monkeypatch.setattr(kernel, "PARALLEL_MIN", 64)
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal(64 * k) * 2.0 ** rng.integers(-20, 20, 64 * k) for k in range(2, 10)]
    before, interval = lp.threads(1), sys.getswitchinterval()
    single = [lp.round(x, "bf16", "ro") for x in xs]
    errors, results = [], []
    lp.threads(8)
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(25):
            monkeypatch.setattr(kernel, "_POOL", None)
            barrier, got = threading.Barrier(len(xs)), [None] * len(xs)

            def work(i, barrier=barrier, got=got):
                barrier.wait()
                try:
                    got[i] = lp.round(xs[i], "bf16", "ro")
                except Exception as exc:       # noqa: BLE001 (collected, asserted below)
                    errors.append(exc)

            workers = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
            for t in workers:
                t.start()
            for t in workers:
                t.join()
            results.append(got)
    finally:
        sys.setswitchinterval(interval)
        lp.threads(before)
    assert not errors, f"{len(errors)} calls failed, first: {errors[0]!r}"
    for got in results:
        for g, s in zip(got, single):
            assert np.array_equal(g.view(np.uint64), s.view(np.uint64))   # bit-identical
    assert_same(single[-1], reference(xs[-1], lp.BF16, "ro"), xs[-1])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_threads_work_in_a_forked_child(monkeypatch):
    # The child inherits the pool object but not its threads; it must not hang.
    import lowprec.engine.parallel as kernel
    monkeypatch.setattr(kernel, "PARALLEL_MIN", 1 << 12)
    before = lp.threads(2)
    try:
        x = np.random.default_rng(2).standard_normal(1 << 14)
        parent = lp.round(x, "e4m3")          # creates the pool
        pid = os.fork()
        if pid == 0:                           # pragma: no cover (child)
            signal.alarm(20)                   # a hang ends the child, not the suite
            child = lp.round(x, "e4m3")
            os._exit(0 if np.array_equal(child, parent) else 3)
        _, status = os.waitpid(pid, 0)
    finally:
        lp.threads(before)
    assert os.waitstatus_to_exitcode(status) == 0
    assert_same(parent[:500], reference(x[:500], lp.FP8_E4M3, "rne"), x[:500])


@pytest.mark.parametrize("fmt", [lp.FP8_E4M3, lp.FP8_E5M2FNUZ, lp.FP4_E2M1], ids=lambda f: f.name)
@pytest.mark.parametrize("mode", ["rne", "rna", "rz", "ru", "rd", "ro"])
def test_formats_of_three_mantissa_bits_or_fewer_across_the_16_bit_grid(fmt, mode):
    # FP8/FP6/FP4 round by a table on the top 16 bits of the float64 encoding: values
    # with equal top bits and different low bits, and the grid points themselves.
    rng = np.random.default_rng(3)
    top = rng.integers(0x3C00, 0x4200, 1500, dtype=np.uint64) ^ rng.choice(
        [0, 0x8000], 1500).astype(np.uint64)                 # |x| near 2**-15 ... 2**10
    low = np.where(rng.random(1500) < 0.3, 0, rng.integers(1, 1 << 48, 1500, dtype=np.uint64))
    x = ((top << np.uint64(48)) | low.astype(np.uint64)).view(np.float64)
    x = np.concatenate([x, np.nextafter(x, 0), [5e-324, -5e-324, 0.0, -0.0, np.nan]])
    assert_same(lp.round(x, fmt, mode), reference(x, fmt, mode), x)


def test_a_sweep_over_small_custom_formats_keeps_few_tables():
    # Each (format, mode, options) gets a 1 MiB table; a sweep must not keep them all,
    # and a format whose table was dropped still rounds right when it comes back.
    import lowprec.engine.kernel as kernel
    x = np.random.default_rng(5).standard_normal(300) * 8
    sweep = [(lp.Format.custom(precision=p, emax=2**k - 1), mode)
             for p in (2, 3, 4) for k in range(1, 8) for mode in ("rne", "rd")]
    assert len(sweep) > kernel._TABLES.size
    for fmt, mode in sweep + sweep[:3]:
        assert_same(lp.round(x, fmt, mode), reference(x, fmt, mode), x)
        assert len(kernel._TABLES) <= kernel._TABLES.size


def test_threads_setting_and_its_errors(monkeypatch):
    import lowprec.engine.parallel as kernel
    before = lp.threads()
    assert lp.threads(2) == before and lp.threads() == 2
    lp.threads(before)
    for bad in (0, -1):
        with pytest.raises(ValueError, match="threads must be at least 1"):
            lp.threads(bad)
    for bad in (1.5, True, "2", None.__class__):
        with pytest.raises(TypeError, match="threads must be an int"):
            lp.threads(bad)
    assert lp.threads() == before          # nothing changed by the refused calls
    monkeypatch.setenv("LOWPREC_NUM_THREADS", "3")
    assert kernel._default_threads() == 3
    monkeypatch.setenv("LOWPREC_NUM_THREADS", "many")
    with pytest.raises(ValueError, match="LOWPREC_NUM_THREADS"):
        kernel._default_threads()
    monkeypatch.delenv("LOWPREC_NUM_THREADS")
    assert 1 <= kernel._default_threads() <= 4


# -- against NumPy and ml_dtypes casts -------------------------------------------------

ML_CASTS = {lp.FP16: np.float16, lp.BF16: ml_dtypes.bfloat16,
            lp.FP8_E4M3: ml_dtypes.float8_e4m3fn, lp.FP8_E5M2: ml_dtypes.float8_e5m2,
            lp.FP8_E4M3FNUZ: ml_dtypes.float8_e4m3fnuz,
            lp.FP8_E5M2FNUZ: ml_dtypes.float8_e5m2fnuz}


def float32_sweep(fmt):
    """Every value of the format and every tie between neighbours, in float32,
    each with its float32 neighbours: every rounding decision the cast makes."""
    vals = lp.decode(np.arange(2 ** fmt.bits, dtype=np.uint64), fmt)
    vals = np.unique(vals[np.isfinite(vals)])
    mids = (vals[1:] + vals[:-1]) / 2
    pts = np.concatenate([vals, mids]).astype(np.float32)
    pts = np.concatenate([pts, np.nextafter(pts, np.float32(np.inf)),
                          np.nextafter(pts, np.float32(-np.inf))])
    rng = np.random.default_rng(0)
    random_bits = rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([pts, random_bits.view(np.float32),
                           np.array([np.inf, -np.inf, np.nan, 0.0, -0.0], np.float32)])


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("fmt", list(ML_CASTS), ids=lambda f: f.name)
def test_rne_from_float32_equals_numpy_and_ml_dtypes_casts(fmt):
    x = float32_sweep(fmt)
    with np.errstate(over="ignore", invalid="ignore"):
        expected = x.astype(ML_CASTS[fmt]).astype(np.float64)
    assert_same(lp.round(x, fmt), expected, x)


_TOP_INT = 2**1024 - 2**970        # Python's float() of an int from here on overflows


def _wide_ints(rng, n):
    """Python ints beyond 64 bits: random ones, float64 ties (53-bit odd multiples of
    half an ulp) and their neighbours +-1, both signs."""
    out = []
    for _ in range(n):
        e = int(rng.integers(64, 1023))
        m = int(rng.integers(2**52, 2**53))
        tie = (2 * m + 1) << (e - 53)                # halfway between m and m + 1 ulps
        out += [tie, tie + 1, tie - 1, int(rng.integers(1, 2**62)) << (e - 62)]
    out += [2**64, 2**64 + 1, -(2**63) - 1, _TOP_INT - 1, 2**1023 + 2**970 - 1]
    return [v if rng.random() < 0.5 else -v for v in out]


@pytest.mark.parametrize("fmt", [lp.FP64, lp.FP32, lp.BF16, lp.FP8_E4M3,
                                 lp.Format.custom(precision=40, emax=511)],
                         ids=lambda f: f.name or "custom")
def test_python_ints_beyond_64_bits_round_once(fmt):
    xs = _wide_ints(np.random.default_rng(31), 150)
    for mode in DET_MODES:
        want = np.array([lpt.reference_round(Fraction(v), fmt, mode) for v in xs])
        with lp.flags() as f:
            got = lp.round(xs, fmt, mode)
        assert_same(got, want, [float(v) for v in xs])
        # Every input is finite: an inf or NaN result is inexact too.
        assert f.inexact == sum(not math.isfinite(w) or Fraction(w) != v
                                for w, v in zip(want.tolist(), xs))
    assert_same(lp.round(xs[1], fmt), lpt.reference_round(Fraction(xs[1]), fmt))
    with pytest.raises(ValueError, match="beyond float64's range"):
        lp.round([1.5, _TOP_INT], fmt)
    assert lp.round([_TOP_INT - 1, 2.5], "fp32").tolist() == [np.inf, 2.5]
    with pytest.raises(TypeError, match="object"):     # an object array stays refused
        lp.round(np.array(xs[:3], dtype=object), fmt)


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("fmt", list(ML_CASTS), ids=lambda f: f.name)
def test_encode_from_float32_equals_the_casts_bit_patterns(fmt):
    # Bit for bit, so the sign of a NaN from overflow counts too: E4M3 (fn) sends -1000
    # and -inf to 0xFF, the NaN with the sign inf would have had. (NaN inputs are left
    # out: lowprec gives the canonical NaN, the casts keep payloads.)
    x = float32_sweep(fmt)
    x = x[~np.isnan(x)]
    with np.errstate(over="ignore", invalid="ignore"):
        cast = x.astype(ML_CASTS[fmt])
    expected = cast.view(np.uint8 if fmt.bits == 8 else np.uint16)
    got = lp.encode(x, fmt)
    bad = np.flatnonzero(got != expected)
    assert bad.size == 0, (x[bad[:5]].tolist(), got[bad[:5]].tolist(), expected[bad[:5]].tolist())


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("fmt, dtype", [(lp.FP6_E2M3, ml_dtypes.float6_e2m3fn),
                                        (lp.FP6_E3M2, ml_dtypes.float6_e3m2fn),
                                        (lp.FP4_E2M1, ml_dtypes.float4_e2m1fn)])
def test_rne_from_float32_equals_ml_dtypes_for_finite_formats(fmt, dtype):
    x = float32_sweep(fmt)
    x = x[np.isfinite(x)]  # ml_dtypes sends NaN to -0 here; the contract keeps NaN
    assert_same(lp.round(x, fmt), x.astype(dtype).astype(np.float64), x)


@pytest.mark.parametrize("x, fmt", [(1 + 2**-8 + 2**-40, "bf16"), (1 + 2**-4 + 2**-40, "e4m3"),
                                    (-431.99999999999994, "e4m3")])
def test_single_rounding_from_float64_where_float32_would_make_a_tie(x, fmt):
    # Through float32 these inputs become exact ties (or round up to one): a cast that
    # rounds twice (ml_dtypes < 0.7, torch's CPU cast) gives the other neighbour.
    # The Fraction reference decides; no peer's answer is asserted.
    assert float(np.float32(x)) != x
    assert lp.round(x, fmt) == lpt.reference_round(x, fmt)
    assert lpt.reference_round(float(np.float32(x)), fmt) != lpt.reference_round(x, fmt)


# -- stochastic rounding -------------------------------------------------------------

def test_sr_same_seed_same_result_and_fresh_generators_differ():
    x = np.linspace(0, 1, 10_001)
    a = lp.round(x, "bf16", "sr", rng=42)
    assert_same(a, lp.round(x, "bf16", "sr", rng=42), x)
    # a Generator gives one draw per call, used as the seed
    seed = int(np.random.default_rng(42).integers(0, 2**63))
    assert_same(lp.round(x, "bf16", "sr", rng=np.random.default_rng(42)),
                lp.round(x, "bf16", "sr", rng=seed), x)
    assert not np.array_equal(a, lp.round(x, "bf16", "sr", rng=43))


@pytest.mark.parametrize("fmt, x", [(lp.BF16, 1 + 0.3 * 2**-7), (lp.FP16, -(1 + 0.7 * 2**-10)),
                                    (lp.FP8_E4M3, 0.1), (lp.FP16, 1e-7), (lp.FP4_E2M1, 2.2)])
def test_sr_probability_is_the_distance_fraction(fmt, x):
    down = lpt.reference_round(x, fmt, "rd")
    up = lpt.reference_round(x, fmt, "ru")
    p = float((Fraction(x) - Fraction(down)) / (Fraction(up) - Fraction(down)))
    n = 100_000
    r = lp.round(np.full(n, x), fmt, "sr", rng=7)
    assert set(np.unique(r)) <= {down, up}
    frac_up = np.mean(r == up)
    assert abs(frac_up - p) <= 4 * math.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize("bits", [1, 2, 3, 5])
def test_sr_bits_quantises_the_probability(bits):
    # f = 0.7 of the gap: with r random bits P(up) = floor(0.7 * 2**r) / 2**r.
    x = 1 + 0.7 * 2**-7
    p = math.floor(0.7 * 2**bits) / 2**bits
    n = 100_000
    r = lp.round(np.full(n, x), "bf16", "sr", rng=3, sr_bits=bits)
    frac_up = np.mean(r == 1 + 2**-7)
    assert abs(frac_up - p) <= 4 * math.sqrt(p * (1 - p) / n) + 1e-12


def test_sr_one_bit_never_rounds_up_below_half():
    r = lp.round(np.full(10_000, 1 + 0.49 * 2**-7), "bf16", "sr", rng=1, sr_bits=1)
    assert np.all(r == 1.0)


@pytest.mark.parametrize("fmt", [lp.BF16, lp.FP8_E4M3, lp.FP4_E2M1], ids=lambda f: f.name)
def test_sr_leaves_representable_values_alone(fmt):
    vals = lp.decode(np.arange(2 ** min(fmt.bits, 16), dtype=np.uint64), fmt)
    vals = vals[np.isfinite(vals)]
    assert_same(lp.round(vals, fmt, "sr", rng=0), vals, vals)


# -- overflow rules, spelled out ------------------------------------------------------

@pytest.mark.parametrize("mode, pos, neg", [
    ("rne", np.inf, -np.inf), ("rna", np.inf, -np.inf), ("rz", 65504.0, -65504.0),
    ("ru", np.inf, -65504.0), ("rd", 65504.0, -np.inf), ("ro", 65504.0, -65504.0)])
def test_ieee_overflow_by_mode(mode, pos, neg):
    assert_same(lp.round([1e6, -1e6], "fp16", mode), [pos, neg], [1e6, -1e6])
    assert_same(lp.round([1e6, -1e6], "fp16", mode, saturate=True),
                [65504.0, -65504.0], [1e6, -1e6])


def test_fn_fnuz_finite_overflow():
    assert np.isnan(lp.round(1000.0, "e4m3")) and lp.round(1000.0, "e4m3", "rz") == 448
    assert np.isnan(lp.round(np.inf, "e4m3fnuz"))
    assert lp.round(-np.inf, "e4m3", saturate=True) == -448
    assert lp.round(100.0, "fp4") == 6 and lp.round(-np.inf, "fp6") == -7.5
    assert np.isnan(lp.round(np.nan, "fp4"))
    assert not np.signbit(lp.round(-1e-9, "e5m2fnuz"))  # no -0
    assert np.signbit(lp.round(-1e-9, "e5m2"))


def test_subnormals_false_goes_to_zero_or_tiny():
    tiny = lp.FP16.smallest_normal
    xs = np.array([tiny / 2, tiny / 2 * (1 + 2**-20), tiny / 4, -tiny * 0.75])
    assert_same(lp.round(xs, "fp16", subnormals=False), [0, tiny, 0, -tiny], xs)
    assert_same(lp.round(xs, "fp16", "rna", subnormals=False), [tiny, tiny, 0, -tiny], xs)
    assert_same(lp.round(xs, "fp16", "ru", subnormals=False), [tiny, tiny, tiny, -0.0], xs)


# -- inputs ---------------------------------------------------------------------------

@requires_ml_dtypes
@pytest.mark.oracle
def test_input_types_round_the_exact_value():
    big = np.array([2**62 + 2**40 + 1, -(2**61) - 1, 2**53 + 1], dtype=np.int64)
    expected = [lpt.reference_round(int(v), "fp32", "ru") for v in big]
    assert_same(lp.round(big, "fp32", "ru"), expected, big)
    u = np.array([2**64 - 1, 2**63 + 2**39 + 1], dtype=np.uint64)
    assert_same(lp.round(u, "bf16", "rz"),
                [lpt.reference_round(int(v), "bf16", "rz") for v in u], u)
    assert lp.round(np.float16(0.1), "bf16") == lpt.reference_round(float(np.float16(0.1)), "bf16")
    assert lp.round(np.array([1, 2, 3], np.int8), "fp4").tolist() == [1.0, 2.0, 3.0]
    assert lp.round([True, False], "fp8").tolist() == [1.0, 0.0]
    bf = np.array([0.1, 3.0], ml_dtypes.bfloat16)
    assert lp.round(bf, "fp32").tolist() == bf.astype(np.float64).tolist()
    ld = np.longdouble(1) + np.longdouble(2) ** -60
    assert lp.round(ld, "bf16", "ru") == 1.0078125
    assert lp.round(3, "fp16") == 3.0 and lp.round([[1.5]], "fp4").shape == (1, 1)



INPUT_DTYPES = ["float16", "float32", "float64", "int32", "int64", "uint64", "bool",
                "longdouble", "bfloat16"]


def sample_of(dtype, n, seed):
    """n values of ``dtype`` and their exact values as Fractions (the oracle's input)."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        x = rng.random(n) < 0.5
    elif dtype in ("int32", "int64", "uint64"):
        info = np.iinfo(dtype)          # the full range: 64-bit ints need the exact split
        x = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        x[: n // 4] >>= rng.integers(0, 60, n // 4).astype(dtype)   # small ones too
    else:
        v = rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n)
        v[::37] = np.inf
        v[::41] = -0.0
        with np.errstate(over="ignore"):
            x = v.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
        if dtype == "longdouble":       # values between float64 neighbours
            x = x * (1 + np.longdouble(2) ** -60) + np.longdouble(2) ** -70
    exact = [Fraction(int(v)) if dtype in ("int32", "int64", "uint64", "bool")
             else (float(v) if not np.isfinite(float(v)) or v == 0
                   else Fraction(*np.longdouble(v).as_integer_ratio())) for v in x]
    return x, exact


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("dtype", INPUT_DTYPES)
@pytest.mark.parametrize("fmt, mode", [(lp.BF16, "ru"), (lp.FP8_E4M3, "rne"), (lp.FP16, "ro"),
                                       (lp.FP64, "rz")], ids=lambda v: getattr(v, "name", v))
def test_every_input_dtype_is_converted_chunk_by_chunk_and_rounded_once(monkeypatch, dtype, fmt,
                                                                        mode):
    # Once wrong: the conversion to float64 (and the (hi, lo) split of 64-bit integers
    # and long doubles) now happens per chunk; tiny chunks and spans on 3 threads put
    # many chunk and span boundaries in a short input. The Fraction reference decides.
    import lowprec.engine.parallel as kernel
    monkeypatch.setattr(kernel, "CHUNK", 64)
    monkeypatch.setattr(kernel, "PARALLEL_MIN", 128)
    x, exact = sample_of(dtype, 1000, zlib.crc32(f"{dtype} {fmt.name} {mode}".encode()))
    want = [lpt.reference_round(v, fmt, mode) for v in exact]
    before = lp.threads(3)
    try:
        with lp.flags() as threaded:
            got = lp.round(x, fmt, mode)
    finally:
        lp.threads(before)
    assert_same(got, want, np.asarray(x, np.float64))
    monkeypatch.setattr(kernel, "PARALLEL_MIN", x.size + 1)   # one thread
    with lp.flags() as single:
        assert_same(lp.round(x, fmt, mode), want, np.asarray(x, np.float64))
    assert threaded.as_dict() == single.as_dict()
    assert_same(lp.round(x[::-3], fmt, mode), got[::-3], np.asarray(x, np.float64)[::-3])


SNAN_BITS = {  # (view dtype, signalling patterns of both signs, one quiet NaN): IEEE 754 6.2.1
    "float64": (np.uint64, [0x7FF0_0000_0000_0001, 0xFFF4_0000_0000_0000, 0x7FF7_FFFF_FFFF_FFFF],
                0x7FF8_0000_0000_0000),
    "float32": (np.uint32, [0x7F80_0001, 0xFFA0_0000, 0x7FBF_FFFF], 0x7FC0_0000),
    "float16": (np.uint16, [0x7C01, 0xFD00, 0x7DFF], 0x7E00),
    "bfloat16": (np.uint16, [0x7F81, 0xFFA0, 0x7FBF], 0x7FC0),
    "float8_e5m2": (np.uint8, [0x7D, 0xFD], 0x7E),
}
ML_TYPES = {"bfloat16": ml_dtypes.bfloat16, "float8_e5m2": ml_dtypes.float8_e5m2}


def signalling_sample(dtype):
    udt, snans, qnan = SNAN_BITS[dtype]
    dt = ML_TYPES.get(dtype, dtype)
    x = np.array([1.5, -0.25, 3.0, 0.125], dtype=dt)
    top = udt(1 << (8 * np.dtype(udt).itemsize - 1))              # the sign bit
    bits = np.concatenate([x.view(udt), np.array(snans + [qnan, qnan | top], dtype=udt)])
    return bits.view(dt), len(snans), (bits & top).astype(bool)


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("dtype", list(SNAN_BITS))
@pytest.mark.parametrize("fmt", [lp.FP64, lp.FP32, lp.BF16, lp.FP16, lp.FP8_E4M3, lp.FP8_E5M2,
                                 lp.FP8_E4M3FNUZ, lp.FP4_E2M1], ids=lambda f: f.name)
@pytest.mark.parametrize("mode", ["rne", "rz", "sr"])
def test_signalling_nans_come_back_quiet_and_signal_invalid(dtype, fmt, mode):
    # IEEE 754 6.2: an operation on a signalling NaN signals invalid and delivers a
    # quiet NaN. Before, round returned float64 sNaNs unquieted and counted nothing
    # (NumPy's float32 cast quiets them on x86: they are found on the input's bits).
    x, n_snan, negative = signalling_sample(dtype)
    for listening in (True, False):
        with lp.flags() as f:
            r = lp.round(x, fmt, mode, rng=0) if listening else None
        if not listening:
            r = lp.round(x, fmt, mode, rng=0)
        rb = r.view(np.uint64)
        nan = np.isnan(r)
        assert nan.tolist() == [False] * 4 + [True] * (n_snan + 2)
        assert np.all(rb[nan] & (1 << 51))                             # quiet bit set
        assert np.signbit(r[nan]).tolist() == negative[4:].tolist()    # sign kept
        want = [lpt.reference_round(float(v), fmt, mode, u=0.5) for v in x[:4]] if mode != "sr" \
            else None
        if want is not None:
            assert_same(r[:4], want, x[:4])
        if listening:
            assert f.invalid == n_snan


def test_signalling_nans_inside_a_large_input_are_counted_once_each(monkeypatch):
    import lowprec.engine.parallel as kernel
    monkeypatch.setattr(kernel, "CHUNK", 64)
    monkeypatch.setattr(kernel, "PARALLEL_MIN", 128)
    x = np.random.default_rng(9).standard_normal(5000)
    where = np.array([0, 63, 64, 1999, 4999])
    x.view(np.uint64)[where] = 0x7FF0_0000_0000_0BAD
    before = lp.threads(3)
    try:
        with lp.flags() as f:
            r = lp.round(x, "bf16")
    finally:
        lp.threads(before)
    assert f.invalid == where.size
    assert np.all(r.view(np.uint64)[where] == 0x7FF8_0000_0000_0BAD)   # payload kept, quiet


@pytest.mark.parametrize("entry", ["round", "round_exact"])
def test_forty_dimensional_arrays(monkeypatch, entry):
    # NumPy allows 64 dimensions, but np.broadcast_shapes and friends stop at 32.
    import lowprec.engine.parallel as kernel
    monkeypatch.setattr(kernel, "CHUNK", 64)
    monkeypatch.setattr(kernel, "PARALLEL_MIN", 128)
    shape = (1,) * 30 + (2,) * 10
    x = np.random.default_rng(11).standard_normal(shape)
    want = reference(x.reshape(-1), lp.BF16, "rd").reshape(shape)
    before = lp.threads(3)
    try:
        with lp.flags() as f:
            got = lp.round(x, "bf16", "rd") if entry == "round" else \
                lp.round_exact(x, np.zeros(shape[-1]), "bf16", "rd")
    finally:
        lp.threads(before)
    assert got.shape == shape and f.inexact == x.size
    assert_same(got, want, x)
    assert lp.round(x[..., ::2], "bf16", "rd").shape == shape[:-1] + (1,)

def test_input_is_never_modified():
    x = np.array([0.1, -3.7, 1e30, np.nan])
    y = x.copy()
    for mode in lp.MODES:
        lp.round(x, "e4m3", mode, rng=0, saturate=True)
    assert_same(x, y, y)
    x32 = np.array([0.1, 2.5], np.float32)
    lp.round(x32, "fp16")
    assert x32.tolist() == [np.float32(0.1), 2.5]


def test_non_contiguous_and_shaped_input():
    x = np.arange(24.0).reshape(4, 6)[:, ::2] * 0.1
    r = lp.round(x, "bf16")
    assert r.shape == (4, 3)
    assert_same(r, reference(x.ravel(), lp.BF16, "rne").reshape(4, 3), x)
    assert lp.round(np.zeros((0, 3)), "fp16").shape == (0, 3)


@pytest.mark.parametrize("bad, exc, match", [
    ([1 + 2j], TypeError, "complex"), (np.array(["1.0"]), TypeError, "non-numeric"),
    (np.array([1.0], dtype=object), TypeError, "object"), ("0.5", TypeError, "non-numeric"),
])
def test_bad_input_raises(bad, exc, match):
    with pytest.raises(exc, match=match):
        lp.round(bad, "fp16")


def test_bad_options_raise():
    with pytest.raises(ValueError, match="unknown rounding mode 'nearest'; "
                                         "valid modes: rne, rna, rz, ru, rd, ro, sr"):
        lp.round(1.0, "fp16", "nearest")
    with pytest.raises(ValueError, match="sr_bits applies only"):
        lp.round(1.0, "fp16", "rne", sr_bits=3)
    with pytest.raises(ValueError, match="sr_bits must be"):
        lp.round(1.0, "fp16", "sr", sr_bits=0)
    with pytest.raises(TypeError, match="rng must be"):
        lp.round(1.0, "fp16", "sr", rng="seed")
    with pytest.raises(TypeError, match="saturate must be a bool"):
        lp.round(1.0, "fp16", saturate="yes")
    with pytest.raises(ValueError, match="unknown format"):
        lp.round(1.0, "fp17")



@pytest.mark.parametrize("opts, exc, match", [
    (dict(subnormals="no"), TypeError, "subnormals must be a bool or None, got str"),
    (dict(subnormals=0), TypeError, "subnormals must be a bool or None, got int"),
    (dict(rng="abc"), TypeError, "rng must be a numpy.random.Generator"),
    (dict(rng=True), TypeError, "rng must be .* got bool True"),
    (dict(rng=-1), ValueError, "rng seed must be non-negative"),
    (dict(mode="sr", rng=True), TypeError, "rng must be .* got bool True"),
    (dict(mode="sr", sr_bits="3"), TypeError, "sr_bits must be an int, got str"),
    (dict(mode="sr", sr_bits=3.0), TypeError, "sr_bits must be an int, got float"),
    (dict(mode="sr", sr_bits=True), TypeError, "sr_bits must be an int, got bool"),
    (dict(sr_bits="3"), TypeError, "sr_bits must be an int, got str"),
    (dict(mode="sr", sr_bits=0), ValueError, "sr_bits must be at least 1"),
    (dict(mode="sr", sr_bits=54), ValueError, r"sr_bits must be an int in \[1, 53\]"),
    (dict(saturate=1), TypeError, "saturate must be a bool, got int"),
    (dict(mode=None), TypeError, "mode must be a str"),
])
@pytest.mark.parametrize("entry", ["round", "encode", "round_exact"])
def test_wrong_typed_options_raise_naming_the_argument(entry, opts, exc, match):
    # Once wrong: subnormals="no" was truthy (subnormals on), rng="abc" was ignored
    # outside "sr", rng=True was seed 1, sr_bits="3" a ValueError.
    opts = dict(opts)
    mode = opts.pop("mode", "rne")
    call = {"round": lambda: lp.round(1e-6, "fp16", mode, **opts),
            "encode": lambda: lp.encode(1e-6, "fp16", mode, **opts),
            "round_exact": lambda: lp.round_exact(1e-6, 0.0, "fp16", mode, **opts)}[entry]
    with pytest.raises(exc, match=match):
        call()


def test_valid_options_of_numpy_types_keep_working():
    # The reference decides: 1e-6 is subnormal in FP16; without subnormals it goes to 0.
    x = 1e-6
    for sub in (False, np.False_):
        assert_same(lp.round(x, "fp16", subnormals=sub),
                    lpt.reference_round(x, "fp16", "rne", subnormals=False))
    assert_same(lp.round(x, "fp16", subnormals=np.True_), lpt.reference_round(x, "fp16", "rne"))
    assert_same(lp.round(1e6, "fp16", saturate=np.True_), lp.FP16.max)
    draws = lp.round(np.full(64, 1 + 2**-12), "fp16", "sr", rng=np.int64(3), sr_bits=np.int8(4))
    assert np.array_equal(draws, lp.round(np.full(64, 1 + 2**-12), "fp16", "sr", rng=3, sr_bits=4))
    assert set(draws.tolist()) <= {1.0, 1 + 2**-10}


@pytest.mark.parametrize("hi, lo, name, match", [
    ("1", 0.0, "hi", "non-numeric"), (None, 0.0, "hi", "object"),
    ([1.0, None], 0.0, "hi", "object"),
    (1.0, None, "lo", "object"), (1.0, "0", "lo", "non-numeric"), ([1 + 2j], 0.0, "hi", "complex"),
])
def test_round_exact_takes_real_numbers_only(hi, lo, name, match):
    # Once wrong: np.asarray(x, dtype=float64) parsed "1" as 1.0 and None as NaN.
    with pytest.raises(TypeError, match=f"{name}: .*{match}"):
        lp.round_exact(hi, lo, "bf16")


@requires_ml_dtypes
@pytest.mark.oracle
def test_round_exact_takes_what_round_takes():
    # float32, ints, bools and ml_dtypes values are float64 values: the Fraction reference
    # of hi + lo decides. An int64 that float64 cannot hold is refused (hi must be fl(v)).
    cases = [(np.float32(1.5), 2.0**-40), (3, 0), (True, 0.0),
             (np.array([1, 2], dtype=ml_dtypes.bfloat16), -2.0**-60)]
    for hi, lo in cases:
        want = [lpt.reference_round(Fraction(float(h)) + Fraction(lo), lp.BF16, "ru")
                for h in np.asarray(hi, dtype=np.float64).reshape(-1)]
        got = np.asarray(lp.round_exact(hi, lo, "bf16", "ru")).reshape(-1)
        assert_same(got, want, np.asarray(hi, dtype=np.float64).reshape(-1))
    with pytest.raises(ValueError, match="hi must hold float64 values"):
        lp.round_exact(np.int64(2**60 + 1), 0.0, "bf16")

# -- two-term exact input --------------------------------------------------------------

@pytest.mark.parametrize("fmt", [lp.BF16, lp.FP16, lp.FP32, lp.FP8_E4M3, lp.FP64],
                         ids=lambda f: f.name)
@pytest.mark.parametrize("mode", DET_MODES)
@settings(max_examples=30)
@given(data=st.data())
def test_round_exact_rounds_the_unevaluated_sum(fmt, mode, data):
    pairs = data.draw(st.lists(st.tuples(lpt.values(fmt, allow_nan=False, allow_infinity=False),
                                         st.floats(-1, 1, allow_subnormal=False),
                                         st.integers(-80, -30)), min_size=1, max_size=20))
    hi = np.array([p[0] for p in pairs])
    lo = np.array([math.ldexp(p[1], p[2]) * abs(p[0]) for p in pairs])
    with np.errstate(over="ignore", invalid="ignore"):
        s = hi + lo
        lo = (hi - s) + lo   # Fast2Sum (|hi| >= |lo|): s + lo == hi + lo exactly
    hi = s
    ok = np.isfinite(hi) & np.isfinite(lo)
    hi, lo = hi[ok], lo[ok]
    expected = [lpt.reference_round(Fraction(h) + Fraction(lo_), fmt, mode) if (h + lo_) != 0
                else lpt.reference_round(h, fmt, mode) for h, lo_ in zip(hi, lo)]
    assert_same(lp.round_exact(hi, lo, fmt, mode), expected, hi)


# -- edge cases: generators, options, operands -----------------------------------------

def test_sr_with_a_32_bit_generator():
    rng = np.random.Generator(np.random.MT19937(0))
    r = lp.round(np.full(20_000, 1 + 2**-11), "fp16", "sr", rng=rng)
    assert abs(np.mean(r > 1) - 0.5) <= 4 * math.sqrt(0.25 / 20_000)


@pytest.mark.parametrize("x, opts", [(0.7 * 2**-24, {}), (1 + 0.3 * 2**-10, {}),
                                     (1 + 0.3 * 2**-10, dict(subnormals=False))])
@pytest.mark.parametrize("bits", [1, 2])
def test_sr_bits_is_symmetric_in_sign_on_every_path(x, opts, bits):
    # Away from zero with probability floor(f * 2**r) / 2**r, f measured from the
    # neighbour nearer zero, for x and -x alike (subnormal range: scaling path).
    n = 40_000
    down = lpt.reference_round(x, lp.FP16, "rz", **opts)
    up = lpt.reference_round(x, lp.FP16, "ru", **opts)
    f = float((Fraction(x) - Fraction(down)) / (Fraction(up) - Fraction(down)))
    p = math.floor(f * 2**bits) / 2**bits
    for sign in (1.0, -1.0):
        r = lp.round(np.full(n, sign * x), "fp16", "sr", rng=2, sr_bits=bits, **opts)
        away = np.mean(np.abs(r) == up)
        assert abs(away - p) <= 4 * math.sqrt(p * (1 - p) / n) + 1e-12


def test_round_to_odd_with_one_bit_of_precision():
    fmt = lp.Format.custom(precision=1, emax=3)
    xs = np.array([2.5, 3.0, 5.0, 0.3, -2.5])
    assert_same(lp.round(xs, fmt, "ro"), reference(xs, fmt, "ro"), xs)


def test_long_double_outside_float64_range_is_refused():
    with pytest.raises(ValueError, match="outside float64's range"):
        lp.round(np.longdouble(2) ** 1030, "fp16", "rz")


def test_round_exact_to_fp64_records_flags():
    with lp.flags() as f:
        r = lp.round_exact(1.0, 2.0**-60, "fp64", "ru")
    assert r == 1 + 2.0**-52 and f.inexact == 1


@requires_ml_dtypes
@pytest.mark.oracle
def test_reference_keeps_the_sign_of_nan_as_ml_dtypes_does():
    # E4M3 (fn) overflow and -inf give the NaN 0xFF (sign set) in ml_dtypes' cast; NaN
    # input keeps its sign. The reference's NaNs carry the same signs.
    x = np.array([-1000.0, -np.inf, 1000.0, np.inf, -np.nan, np.nan], np.float32)
    signs = (x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8) & 0x80) != 0
    got = [lpt.reference_round(float(v), "e4m3") for v in x]
    assert all(math.isnan(g) for g in got)
    assert [math.copysign(1.0, g) < 0 for g in got] == signs.tolist()


@pytest.mark.parametrize("bad", ["1", ["a", "b"], 1j, np.array([1 + 2j]), b"1"])
def test_non_real_input_names_x(bad):
    # The message names the argument, as round_exact's name hi and lo.
    with pytest.raises(TypeError, match="^x: "):
        lp.round(bad, "bf16")
    with pytest.raises(TypeError, match="^x: "):
        lp.encode(bad, "bf16")


_WIDE_PAST_MAX = [2**1024 - 2**971 + 1, 2**1024 - 2**971 + 2**969]   # above FP64's max


@pytest.mark.parametrize("saturate", [False, True])
@pytest.mark.parametrize("sign", [1, -1])
@pytest.mark.parametrize("mode", ["ru", "rd", "rz", "ro", "rne", "rna"])
def test_wide_inputs_past_fp64_max_overflow_and_saturate_as_the_reference(mode, sign, saturate):
    # Python ints and long doubles above FP64's max (below its overflow threshold): a
    # directed step to inf is an overflow, and saturate=True makes it ±max.
    xs = [sign * v for v in _WIDE_PAST_MAX]
    want = [lpt.reference_round(v, "fp64", mode, saturate=saturate) for v in xs]
    # Overflow: the rounding with an unbounded exponent (no saturation) goes beyond max.
    overflows = sum(math.isinf(lpt.reference_round(v, "fp64", mode)) for v in xs)
    with lp.flags() as f:
        got = lp.round(xs, "fp64", mode, saturate=saturate)
    assert got.tolist() == want
    assert f.overflow == overflows and f.inexact == len(xs)
    assert f.saturated == (overflows if saturate else 0)
    enc = lp.encode(xs, "fp64", mode, saturate=saturate)
    assert enc.view(np.float64).tolist() == want
    lo = lp.round_exact(np.float64(sign * lp.FP64.max), sign * 2.0**969, "fp64", mode,
                        saturate=saturate)
    assert lo == lpt.reference_round(Fraction(sign * lp.FP64.max) + sign * Fraction(2)**969,
                                     "fp64", mode, saturate=saturate)


@pytest.mark.parametrize("mode", ["rne", "ru", "rd", "rz"])
@pytest.mark.parametrize("values", [[2**53 + 1, 0.5], [2**63 + 1, -1], [2**63 + 1, 1.5],
                                    [[2**60 + 1, 2.0], [1.0, -(2**55 + 3)]],
                                    (2**70 + 1, 0.25, 3), [np.int64(2**62 + 1), 0.5]])
@pytest.mark.parametrize("fmt", ["fp64", "bf16", "fp32"])
def test_lists_mixing_wide_ints_and_floats_round_once(values, fmt, mode):
    # NumPy makes such a list float64, rounding the ints first; each must round once.
    flat = list(np.asarray(values, dtype=object).reshape(-1))
    want = [lpt.reference_round(Fraction(int(v) if isinstance(v, (int, np.integer)) else v),
                                fmt, mode) for v in flat]
    got = lp.round(values, fmt, mode)
    assert got.reshape(-1).tolist() == want
    assert lp.decode(lp.encode(values, fmt, mode), fmt).reshape(-1).tolist() == want


@pytest.mark.parametrize("mode", ["rne", "ru", "rd"])
def test_a_nan_in_a_list_hides_no_wide_int(mode):
    # The list's float64 maximum is NaN then: the wide int must still round once.
    v = 2**60 + 2**52 + 1
    got = lp.round([math.nan, v], "bf16", mode)
    assert math.isnan(got[0])
    assert got[1] == lpt.reference_round(Fraction(v), "bf16", mode)
    assert lp.decode(lp.encode([math.nan, v], "bf16", mode), "bf16")[1] == got[1]


MEMORY_DTYPES = ["float16", "float32", "float64", "int32", "int64", "uint64", "bool", "longdouble",
          "bfloat16"]


MEMORY_CALLS = {
    "round-bf16": lambda x: lp.round(x, "bf16"),
    "round-e4m3-rz": lambda x: lp.round(x, "e4m3", "rz"),        # the table lookup
    "round-fp64-ru": lambda x: lp.round(x, "fp64", "ru"),        # FP64's (hi, lo) step
    "round-fp16-sr": lambda x: lp.round(x, "fp16", "sr", rng=0),
    "encode-bf16": lambda x: lp.encode(x, "bf16"),
    "encode-e4m3-rd": lambda x: lp.encode(x, "e4m3", "rd"),
    "encode-fp64": lambda x: lp.encode(x, "fp64"),
}


SMALL_CHUNK = 1 << 14


N_MEMORY = 64 * SMALL_CHUNK


def memory_values(dtype, n):
    rng = np.random.default_rng(0)
    if dtype == "bool":
        return rng.random(n) < 0.5
    if dtype in ("int32", "int64", "uint64"):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    x = rng.standard_normal(n) * 1000
    return x.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)


def extra_bytes(call, x, listening):
    call(x)                  # warm up: lookup tables, the pool
    tracemalloc.start()
    try:
        if listening:
            with lp.flags():
                result = call(x)
        else:
            result = call(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - result.nbytes


# -- memory bound: a few chunk buffers per thread, whatever the input ----------------------

# The documented bound (lowprec.rounding.WORK_BYTES, docs/rounding.md "Speed"): beyond its
# result, `lp.round` or `lp.encode` holds at most ``WORK_BUFFERS`` buffers of ``CHUNK``
# float64 values per thread, for every input dtype. Measured with tracemalloc (NumPy
# reports its buffers to it) on one thread with small chunks, so that a full-size copy
# is 64 chunk buffers.

@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("listening", [False, True], ids=["plain", "flags"])
@pytest.mark.parametrize("call", list(MEMORY_CALLS))
@pytest.mark.parametrize("dtype", MEMORY_DTYPES)
def test_extra_memory_stays_a_few_chunk_buffers(monkeypatch, dtype, call, listening):
    monkeypatch.setattr(parallel, "CHUNK", SMALL_CHUNK)
    before = lp.threads(1)
    try:
        extra = extra_bytes(MEMORY_CALLS[call], memory_values(dtype, N_MEMORY), listening)
    finally:
        lp.threads(before)
    bound = parallel.WORK_BUFFERS * 8 * SMALL_CHUNK
    assert extra <= bound, (f"{extra / (8 * SMALL_CHUNK):.1f} chunk buffers of extra memory, "
                            f"bound {parallel.WORK_BUFFERS}")


@requires_ml_dtypes
@pytest.mark.oracle
def test_the_bound_holds_per_thread(monkeypatch):
    # Three spans, each with its own buffers: at most three times one thread's bound.
    monkeypatch.setattr(parallel, "CHUNK", SMALL_CHUNK)
    monkeypatch.setattr(parallel, "PARALLEL_MIN", N_MEMORY // 3)
    before = lp.threads(3)
    try:
        extra = extra_bytes(MEMORY_CALLS["encode-bf16"], memory_values("int64", N_MEMORY), True)
    finally:
        lp.threads(before)
    assert extra <= 3 * parallel.WORK_BUFFERS * 8 * SMALL_CHUNK


def test_default_bound_is_what_the_docs_say():
    # docs/rounding.md: chunks of 2**17 elements, "about 1 MiB of float64 per buffer".
    assert parallel.CHUNK == 1 << 17 and parallel.WORK_BYTES == 16 * 2**20


# -- stochastic rounding's rule at its boundary, on every path ----------------------------

SR_PATHS = {
    # (format, subnormals, x = down + f * gap for a gap of the format there)
    "fp4-encoding": ("fp4", None, lambda f: 2.0 + f * 1.0),           # normal range
    "fp4-subnormal": ("fp4", None, lambda f: 0.0 + f * 0.5),          # below 2**emin
    "e2m3-subnormal": ("e2m3", None, lambda f: 0.125 + f * 0.125),
    "bf16-encoding": ("bf16", None, lambda f: 1.0 + f * 2.0**-7),
    "bf16-scaling": ("bf16", False, lambda f: 1.0 + f * 2.0**-7),      # no encoding path
    "fp16-subnormal": ("fp16", None, lambda f: f * 2.0**-24),
}


@pytest.mark.parametrize("r", [1, 2, 3])
@pytest.mark.parametrize("path", list(SR_PATHS))
def test_sr_probability_is_floor_f_2r_over_2r_at_the_boundary(path, r):
    fmt, subnormals, point = SR_PATHS[path]
    n = 20_000
    for k in range(1, 2**r):
        f = k / 2**r
        below = point(f - 2.0**-20)   # P(up) = (k - 1) / 2**r
        at = point(f)                 # P(up) = k / 2**r: w <= f, not w < f
        down, up = (lpt.reference_round(at, fmt, m) for m in ("rd", "ru"))
        for x, p in ((below, (k - 1) / 2**r), (at, k / 2**r)):
            got = lp.round(np.full(n, x), fmt, "sr", rng=k, sr_bits=r, subnormals=subnormals)
            assert set(np.unique(got)) <= {down, up}
            share = np.mean(got == up)
            if p == 0:
                assert share == 0, (path, x)
            else:
                assert abs(share - p) <= 5 * math.sqrt(p * (1 - p) / n), (path, x, share, p)
