"""lowprec.fft against oracles it did not produce: a textbook recursive Cooley-Tukey
and a direct sum (tests/oracles/dft.py), every real operation exact in `Fraction` and then
rounded once by `lowprec.testing.reference_round` (the order documented in
lowprec/fft.py), NumPy's own FFT for infinities and for FP64, the exact twiddles of
unit impulses, and the roundoff bound of a forward-inverse round trip."""

from __future__ import annotations

import math

import numpy as np
import pytest

import lowprec as lp
from helpers import assert_values
from lowprec.tensors.core import KINDS
from oracles.dft import Ref

FORMATS = [lp.FP16, lp.BF16, lp.FP8_E4M3, lp.FP32]
SIZES = [1, 2, 4, 8, 16, 3, 6, 12]
MODES = ["rne", "rz"]
ids = lambda f: f.name   # noqa: E731


def draw(fmt, n, seed, scale=4.0):
    rng = np.random.default_rng(seed)
    v = rng.normal(0.0, scale, size=n)
    v[rng.random(n) < 0.2] = 1.0
    return np.asarray(lp.round(v, fmt), dtype=np.float64)


def parts(z):
    return [(float(a), float(b)) for a, b in zip(np.real(z), np.imag(z))]


def cx(pairs):
    """The complex array of a list of (real, imaginary) pairs, exactly (no arithmetic)."""
    return np.array(pairs, np.float64).reshape(-1, 2).view(np.complex128)[:, 0]


# -- against the reference -------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fmt", FORMATS, ids=ids)
@pytest.mark.parametrize("n", SIZES)
def test_fft_and_ifft_equal_the_stepwise_reference(n, fmt, mode):
    ref = Ref(fmt, mode)
    for seed in range(3):
        v = draw(fmt, n, seed + 10 * n)
        w = draw(fmt, n, seed + 10 * n + 5)
        with lp.context(mode=mode):
            got = lp.fft.fft(lp.tensor(v, fmt))
            back = lp.fft.ifft((lp.tensor(v, fmt), lp.tensor(w, fmt)))
        assert got.dtype == np.complex128
        assert_values(got, cx(ref.dft([(a, 0.0) for a in v])), (n, seed))
        assert_values(back, cx(ref.scale(ref.dft(list(zip(v, w)), inverse=True), n)), (n, seed))


@pytest.mark.parametrize("fmt", FORMATS, ids=ids)
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("n", [6, 8, 4, 5])
def test_norms_divide_last_one_rounding_each(n, fmt, norm):
    ref = Ref(fmt, "rne")
    v = draw(fmt, n, n)
    x = [(a, 0.0) for a in v]
    d = {"ortho": math.sqrt(n), "forward": float(n), "backward": float(n)}[norm]
    want = ref.dft(x)
    if norm != "backward":
        want = ref.scale(want, d)
    assert_values(lp.fft.fft(lp.tensor(v, fmt), norm=norm), cx(want))
    want = ref.dft(x, inverse=True)
    if norm != "forward":
        want = ref.scale(want, d)
    assert_values(lp.fft.ifft(lp.tensor(v, fmt), norm=norm), cx(want))
    assert_values(lp.fft.rfft(lp.tensor(v, fmt), norm=norm),
                  cx(ref.scale(ref.dft(x), d)[: n // 2 + 1] if norm != "backward"
                     else ref.dft(x)[: n // 2 + 1]))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fmt", FORMATS, ids=ids)
@pytest.mark.parametrize("n", [1, 2, 5, 8, 12])
def test_rfft_and_irfft_equal_the_reference(n, fmt, mode):
    ref = Ref(fmt, mode)
    v = draw(fmt, n, 3 * n)
    with lp.context(mode=mode):
        got = lp.fft.rfft(lp.tensor(v, fmt))
    assert_values(got, cx(ref.dft([(a, 0.0) for a in v])[: n // 2 + 1]))
    # irfft: the half spectrum (m points) extended by conjugate symmetry to length n.
    m = n // 2 + 1
    re, im = draw(fmt, m, n + 1), draw(fmt, m, n + 2)
    full = [(re[k], 0.0 if k == 0 or 2 * k == n else im[k]) if k < m
            else (re[n - k], -im[n - k]) for k in range(n)]
    want = [a for a, _ in ref.scale(ref.dft(full, inverse=True), n)]
    with lp.context(mode=mode):
        out = lp.fft.irfft((lp.tensor(re, fmt), lp.tensor(im, fmt)), n=n)
    assert isinstance(out, lp.Tensor) and out.fmt == fmt
    assert np.array_equal(out.values, want, equal_nan=True)


def test_n_pads_or_truncates_and_axis_moves():
    fmt = lp.BF16
    ref = Ref(fmt, "rne")
    v = np.stack([draw(fmt, 3, s) for s in range(5)], axis=1)     # shape (3, 5)
    t = lp.tensor(v, fmt)
    for n in (8, 6, 2, 3):
        got = lp.fft.fft(t, n=n, axis=0)
        assert got.shape == (n, 5)
        for col in range(5):
            x = [(float(a), 0.0) for a in v[:n, col]] + [(0.0, 0.0)] * max(0, n - 3)
            assert_values(got[:, col], cx(ref.dft(x)), (n, col))
    got = lp.fft.fft(t, n=4)                                           # axis=-1: rows
    for row in range(3):
        x = [(float(a), 0.0) for a in v[row, :4]]
        assert_values(got[row], cx(ref.dft(x)))
    t3 = lp.tensor(draw(fmt, 24, 7).reshape(2, 3, 4), fmt)
    assert_values(lp.fft.fft(t3, axis=1)[1, :, 2],
                  cx(ref.dft([(float(a), 0.0) for a in t3.values[1, :, 2]])))
    assert_values(lp.fft.rfft(t3, axis=-3)[:, 0, 1],
                  cx(ref.dft([(float(a), 0.0) for a in t3.values[:, 0, 1]])[:2]))


# -- independent checks ----------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS, ids=ids)
def test_impulse_gives_the_twiddles_rounded_to_nearest(fmt):
    """fft of e_1 is the twiddle table (products by 1 and sums with 0 are exact):
    within half an ulp of exp(-2 pi i k / n) (RNE of a float64 cos, whatever the mode),
    and exactly 1, -i, -1, i at the quarter turns."""
    n = 16
    e1 = np.zeros(n)
    e1[1] = 1.0
    for mode in MODES:
        with lp.context(mode=mode):
            got = lp.fft.fft(lp.tensor(e1, fmt))
            inv = lp.fft.ifft(lp.tensor(e1, fmt), norm="forward")
        exact = np.exp(-2j * np.pi * np.arange(n) / n)
        for z, w in ((got, exact), (inv, np.conj(exact))):
            for part, want in ((z.real, w.real), (z.imag, w.imag)):
                ulp = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(want), 2.0**-30)))
                              - (fmt.p - 1))
                assert np.all(np.abs(part - want) <= ulp / 2 + 1e-15)
            assert z[0] == 1 and z[n // 4] == np.conj(z[3 * n // 4]) and z[n // 2] == -1
        assert got[n // 4] == -1j and inv[n // 4] == 1j


@pytest.mark.parametrize("fmt", [lp.FP16, lp.BF16, lp.FP32], ids=ids)
@pytest.mark.parametrize("n", [8, 16, 64, 12, 20])
def test_round_trip_of_small_integers_is_within_the_roundoff_bound(fmt, n):
    """ifft(fft(x)) for small integers (exact in the format) is x up to a few unit
    roundoffs per level: |error| <= 8 (log2(n) + 1) u max|x|."""
    rng = np.random.default_rng(n)
    v = rng.integers(-8, 9, size=(3, n)).astype(np.float64)
    x = lp.tensor(v, fmt)
    X = lp.fft.fft(x)
    back = lp.fft.ifft((lp.tensor(X.real, fmt), lp.tensor(X.imag, fmt)))
    u = 2.0 ** -fmt.p
    tol = 8 * (math.log2(n) + 1) * u * np.abs(v).max()
    assert np.abs(back.real - v).max() <= tol and np.abs(back.imag).max() <= tol
    r = lp.fft.irfft((lp.tensor(X.real[:, : n // 2 + 1], fmt),
                      lp.tensor(X.imag[:, : n // 2 + 1], fmt)), n=n)
    assert np.abs(r.values - v).max() <= tol


def test_fp64_tensors_agree_with_numpy():
    v = np.random.default_rng(0).standard_normal((2, 24))
    t = lp.tensor(v, lp.FP64)
    for n in (24, 32, 7):
        assert np.allclose(lp.fft.fft(t, n=n), np.fft.fft(v, n=n), rtol=0, atol=1e-13)
        assert np.allclose(lp.fft.ifft(t, n=n, norm="ortho"), np.fft.ifft(v, n=n, norm="ortho"),
                           rtol=0, atol=1e-13)
        assert np.allclose(lp.fft.rfft(t, n=n), np.fft.rfft(v, n=n), rtol=0, atol=1e-13)
        assert np.allclose(lp.fft.irfft(t, n=n).values, np.fft.irfft(v, n=n), rtol=0,
                           atol=1e-13)


@pytest.mark.parametrize("fmt", [lp.FP16, lp.BF16, lp.FP32], ids=ids)
def test_infinities_and_nans_propagate(fmt):
    ref = Ref(fmt, "rne")
    for n, where in ((4, 1), (8, 3), (6, 2), (4, 0)):
        v = np.zeros(n)
        v[where] = np.inf
        got = lp.fft.fft(lp.tensor(v, fmt))
        assert_values(got, cx(ref.dft([(a, 0.0) for a in v])))
        if n & (n - 1) == 0:
            # Quarter turns exact, as NumPy's pocketfft: no 0 * inf NaNs.
            assert np.array_equal(got, np.fft.fft(v), equal_nan=True)
        v = draw(fmt, n, n)
        v[where] = np.nan
        got = lp.fft.fft(lp.tensor(v, fmt))
        assert_values(got, cx(ref.dft([(a, 0.0) for a in v])))
        assert np.isnan(got.real).any()
    with np.errstate(invalid="ignore"):
        v = np.array([np.inf, -np.inf, 1.0, 2.0])
        got = lp.fft.fft(lp.tensor(v, fmt))
        assert_values(got, cx(ref.dft([(a, 0.0) for a in v])))


# -- dispatch, registration, errors ----------------------------------------------------

def test_numpy_dispatches_to_lowprec_fft():
    fmt = lp.FP8_E4M3
    t = lp.tensor(draw(fmt, (2, 6), 1), fmt)
    assert np.array_equal(np.fft.fft(t), lp.fft.fft(t))
    assert np.array_equal(np.fft.ifft(t, n=4, axis=0, norm="ortho"),
                          lp.fft.ifft(t, n=4, axis=0, norm="ortho"))
    assert np.array_equal(np.fft.rfft(t, 5), lp.fft.rfft(t, 5))
    r = np.fft.irfft(t)
    assert r.fmt == fmt and np.array_equal(r.values, lp.fft.irfft(t).values)
    for shift in (np.fft.fftshift, np.fft.ifftshift):
        for axes in (None, 0, (1,)):
            s = shift(t, axes=axes)
            assert isinstance(s, lp.Tensor) and s.fmt == fmt
            assert np.array_equal(s.values, shift(t.values, axes=axes))
    for fn in (np.fft.fft, np.fft.ifft, np.fft.rfft, np.fft.irfft):
        assert KINDS[fn][0] == "composed"
    assert KINDS[np.fft.fftshift][0] == KINDS[np.fft.ifftshift][0] == "exact"
    assert set(lp.fft.__all__) == {"fft", "ifft", "rfft", "irfft"}


def test_bad_input_is_refused_by_name():
    t = lp.tensor([1.0, 2.0, 3.0], "fp16")
    before = t.values.copy()
    with pytest.raises(TypeError, match=r"lp\.tensor\(x, fmt\)"):
        lp.fft.fft(np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match=r"lp\.tensor\(x, fmt\)"):
        lp.fft.rfft([1.0, 2.0])
    with pytest.raises(TypeError, match=r"pass its parts"):
        lp.fft.ifft(np.array([1.0 + 1j]))
    with pytest.raises(TypeError, match="one format"):
        lp.fft.fft((t, lp.tensor([1.0, 2.0, 3.0], "bf16")))
    with pytest.raises(ValueError, match="one shape"):
        lp.fft.fft((t, lp.tensor([1.0, 2.0], "fp16")))
    with pytest.raises(TypeError, match="use fft"):
        lp.fft.rfft((t, t))
    with pytest.raises(ValueError, match="Invalid number of FFT data points"):
        lp.fft.fft(t, n=0)
    with pytest.raises(ValueError, match="Invalid number of data points"):
        lp.fft.irfft(lp.tensor([1.0], "fp16"))
    with pytest.raises(TypeError):
        lp.fft.fft(t, n=2.5)
    with pytest.raises(ValueError, match="Invalid norm value"):
        lp.fft.fft(t, norm="unitary")
    with pytest.raises(np.exceptions.AxisError):
        lp.fft.fft(t, axis=1)
    with pytest.raises(np.exceptions.AxisError):
        lp.fft.fft(lp.tensor(1.0, "fp16"))
    with pytest.raises(TypeError, match="out="):
        np.fft.fft(t, out=np.empty(3, dtype=complex))
    assert np.array_equal(t.values, before)


# -- memory: the direct sum in blocks -------------------------------------------------

@pytest.mark.parametrize("products", [7, 40, 300])
def test_direct_sum_in_blocks_equals_the_unblocked_sum_and_the_reference(
        monkeypatch, products):
    # blocks of rows (300: 2 rows of 12 * 12 products, the last block 1 row),
    # of outputs of one row (40: 3 outputs of 12; 2 of 15, the last block 1), and of one
    # output (7) against one call on the whole (5, 12) batch and against the reference.
    fmt = lp.FP8_E4M3
    re = np.stack([draw(fmt, 12, s) for s in range(5)])
    im = np.stack([draw(fmt, 12, s + 50) for s in range(5)])
    x = (lp.tensor(re, fmt), lp.tensor(im, fmt))
    assert 5 * 12 * 12 <= lp.fft._PRODUCTS          # the default: one block
    with lp.context(mode="rz"):
        whole, inverse = lp.fft.fft(x), lp.fft.ifft(x, n=15)
    monkeypatch.setattr(lp.fft, "_PRODUCTS", products)
    with lp.context(mode="rz"):
        got, got_inverse = lp.fft.fft(x), lp.fft.ifft(x, n=15)
    same_bits = lambda a, b: np.array_equal(a.view(np.float64), b.view(np.float64))  # noqa: E731
    assert same_bits(got, whole) and same_bits(got_inverse, inverse)
    ref = Ref(fmt, "rz")
    for row in range(5):
        assert_values(got[row], cx(ref.dft(list(zip(re[row], im[row])))), row)
        padded = list(zip(re[row], im[row])) + [(0.0, 0.0)] * 3
        assert_values(got_inverse[row], cx(ref.scale(ref.dft(padded, inverse=True), 15)), row)


def test_direct_sum_memory_is_bounded_by_its_block():
    # (32, 255) held all 32 * 255 * 255 products at once (a peak of 148 MiB);
    # in blocks of at most `_PRODUCTS` products (about 16 MiB of work) it stays below
    # a quarter of that.
    import tracemalloc
    x = lp.tensor(np.random.default_rng(3).standard_normal((32, 255)), "bf16")
    tracemalloc.start()
    try:
        lp.fft.fft(x)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 * 2**20
