"""`lp.mx.quantize` against peer block-scaled quantizers: gfloat and torchao.

Each test takes its expected values (dequantized values, scales) from the peer and asks
lowprec for the same bits. Where a peer follows a different rule, or departs from the
OCP MX v1.0 spec or the NVFP4 recipe (arXiv 2509.25149), the comparison is restricted
to the inputs on which the rules coincide, and a comment says what differs and why.

Tested with gfloat 0.5.2, and with torch 2.13.0 (CPU) + torchao 0.18.0, numpy 2.4.6.
Peers that are not installed skip their tests.

Differences found, not asserted:

* gfloat's ``compute_scale_amax`` takes ``floor(np.log2(amax))`` in float64, and
  ``np.log2`` rounds up to an integer just below a power of two: for amax =
  nextafter(1024, 0) it gives X = 4 where OCP §6.3's floor(log2 amax) - 8 = 1 gives X = 2
  (gfloat decodes 1024.0, the spec's clamp 896.0). The data here are FP32 values, whose
  log2 never rounds so, so the rules coincide.
* gfloat's MXINT8 element holds the code 0x80 = -2.0; lowprec clamps MXINT8 to
  +-127 * 2**-6 (symmetric). Elements gfloat rounds to -2 * X are left out.
* gfloat cannot convert a NaN into FP6/FP4 blocks (ValueError: the element has no NaN);
  an inf gives it X = 2**127 with saturated elements, lowprec a NaN scale. OCP's
  Algorithm 1 does not define either case, so neither is compared.
* torchao's CEIL is 2**(ceil(log2 amax) - emax), lowprec's "ceil" the least power of two
  that holds amax / max_elem; they pick the same scale when amax's significand is 1 or
  exceeds max_elem's. torchao's EVEN rounds amax to the element's mantissa width before
  the floor rule, lowprec's "even" is amax / max_elem rounded to E8M0; they coincide for
  significands in (0.75 * max_elem's, 2 - 2**-(mbits + 1)). Two rules of their own (OCP
  defines only floor); compared on those blocks only.
* torchao (eager, CPU) computes RCEIL's ceil(log2(q)) with an FP32 log2, which rounds to
  the integer k for q = 2**k * (1 + 2**-23) once |k| >= 4: its scale is then half of
  cvt.rp.ue8m0's (cuBLAS's definition, and lowprec's "rceil"), and the block clamps. E.g.
  amax = nextafter(448 * 16) in MXFP8 E4M3: torchao code 131, lowprec 132. Left out.
* torchao's scale code 0 (2**-127): FLOOR divides by 2**-126 (its F32_MIN_NORMAL clamp)
  and RCEIL multiplies by 1, so a nonzero block that gets code 0 (amax below
  2**(emax - 126) for FLOOR, max_elem * 2**-127 for RCEIL) decodes as half its value
  (FLOOR: 1e-37 in MXFP8 E4M3 gives 9 * 2**-127, OCP's X = 2**-127 gives 18 * 2**-127) or
  as zero (RCEIL). The data here stay far above that.
* torchao gives an inf block a finite scale (FLOOR 2**(128 - emax), RCEIL 2**127); lowprec
  a NaN one. NaN blocks agree (scale 0xFF or UE4M3 0x7F, every value NaN).
* NVFP4: torchao clamps the UE4M3 block scale to at least 2**-6 (E4M3's smallest normal),
  lowprec uses UE4M3's subnormals (and 0 for a zero block); blocks whose scale would be
  below 2**-6 are left out (a zero block is compared by value only). torchao's element
  multiplier is fl32(fl32(1 / ts) / s), lowprec's fl32(1 / (s * ts)); they differ by an
  ulp for some FP32 tensor scales ts, which moves elements within an ulp of an E2M1
  midpoint (ts = 0x1.9d28eep-1, s = 352, x = 1420.2372: torchao 4, lowprec 6, and
  x / (s * ts) = 5.0000003). With a power-of-two ts both are exact, so only those are
  compared.
"""

from __future__ import annotations

import importlib.metadata
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from packaging.version import Version

import lowprec as lp
from helpers import assert_same

pytestmark = pytest.mark.oracle

FP_SCHEMES = ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4")


def _random_blocks(seed, nblocks, block, lo, hi):
    """Normal samples, one magnitude 2**k (k in [lo, hi)) per block, as FP32 values."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((nblocks, block)) * np.exp2(rng.integers(lo, hi, (nblocks, 1)))
    return x.astype(np.float32).astype(np.float64)


def _elem(scheme):
    return lp.mx.SCHEMES[scheme][0]


def _edge_blocks(scheme):
    """Blocks of 32 (FP32 values): zeros, amax at / just over / well over the element's
    max after scaling, OCP's 957, subnormal elements and their ties, signed zeros."""
    f = _elem(scheme)
    top = f.max * 8.0                       # scaled by X = 8 under floor: elements hit max
    sub = f.smallest_subnormal * 8.0
    rows = [
        [0.0] * 32,
        [top] + [1.0] * 31,
        [float(np.nextafter(np.float32(top), np.float32(np.inf)))] + [1.0] * 31,
        [top * 1.0625, -top * 1.03] + [0.5] * 30,
        [-(2.0 - 2.0**-10) * 2.0**f.emax * 8.0] + [3.0] * 31,     # clamped under floor
        [957.0] + [1.0] * 31,                                      # OCP's example
        [top] + [s * sub * m for s in (1, -1) for m in (1, 0.5, 1.5, 2.5, 0.25, 0.75,
                                                         3, 0.125)] + [0.0] * 15,
        [-top, -0.0, -sub * 0.25, sub * 0.25] + [0.0] * 28,
    ]
    return np.array(rows, dtype=np.float32).astype(np.float64)


# ----------------------------------------------------------------------------- gfloat

@pytest.fixture(scope="module")
def gf():
    gfloat = pytest.importorskip("gfloat", reason="gfloat not installed; comparison skipped")
    if Version(importlib.metadata.version("gfloat")) < Version("0.5"):
        pytest.skip("gfloat < 0.5: quantize_block / compute_scale_amax checked on 0.5.2")
    from gfloat import formats
    fis = {"mxfp8_e4m3": formats.format_info_mxfp8_e4m3,
           "mxfp8_e5m2": formats.format_info_mxfp8_e5m2,
           "mxfp6_e3m2": formats.format_info_mxfp6_e3m2,
           "mxfp6_e2m3": formats.format_info_mxfp6_e2m3,
           "mxfp4": formats.format_info_mxfp4_e2m1,
           "mxint8": formats.format_info_mxint8}
    return SimpleNamespace(gfloat=gfloat, fi=fis)


def _gfloat_quantize(gf, scheme, x):
    """gfloat's OCP floor rule, block by block: (dequantized values, scales)."""
    fi = gf.fi[scheme]
    vals = np.stack([gf.gfloat.quantize_block(fi, b, gf.gfloat.compute_scale_amax) for b in x])
    scales = np.array([gf.gfloat.compute_scale_amax(fi.etype.emax, b) for b in x])
    return vals, scales


def _compare_gfloat(gf, scheme, x):
    vals, scales = _gfloat_quantize(gf, scheme, x)
    q = lp.mx.quantize(x, scheme, scale_rule="floor")   # gfloat's OCP rule
    got, got_scales = q.dequantize(), q.scales.reshape(-1)
    assert_same(got_scales, scales)
    keep = np.ones(vals.shape, dtype=bool)
    if scheme == "mxint8":      # gfloat's -2.0 code; lowprec clamps symmetrically
        keep = vals != -2.0 * scales[:, None]
    assert_same(got[keep], vals[keep])
    return keep


@pytest.mark.parametrize("scheme", [*FP_SCHEMES, "mxint8"])
def test_gfloat_random_blocks(gf, scheme):
    x = _random_blocks(11, 96, 32, -40, 40)
    _compare_gfloat(gf, scheme, x)


@pytest.mark.parametrize("scheme", [*FP_SCHEMES, "mxint8"])
def test_gfloat_edge_blocks(gf, scheme):
    if scheme == "mxint8":
        x = np.array([[0.0] * 32, [-1.995] + [1.0] * 31, [1.995, -1.99] + [0.75] * 30,
                      [957.0] + [1.0] * 31, [1.0, 2.0**-7, 3 * 2.0**-8, -2.0**-8] + [0.0] * 28])
    else:
        x = _edge_blocks(scheme)
    # E8M0's ends (float64 inputs: gfloat works in float64): X clamps to 2**127, 2**-127.
    x = np.concatenate([x, [[2.0**200] + [1.0] * 31, [2.0**-200, -(2.0**-210)] + [0.0] * 30]])
    keep = _compare_gfloat(gf, scheme, x)
    if scheme == "mxint8":
        assert not keep.all()       # the -1.995 block reaches gfloat's -2.0 code


@pytest.mark.parametrize("scheme", ["mxfp8_e4m3", "mxfp8_e5m2"])
def test_gfloat_nan_block(gf, scheme):
    # Only elements with a NaN (E4M3, E5M2): gfloat raises for FP6/FP4/INT8 ones.
    x = np.array([[1.0, np.nan] + [2.0] * 30, [3.0] * 32])
    _compare_gfloat(gf, scheme, x)


# ---------------------------------------------------------------------------- torchao

@pytest.fixture(scope="module")
def tao():
    torch = pytest.importorskip("torch", reason="torch not installed; torchao comparison "
                                "skipped")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pytest.importorskip("torchao", reason="torchao not installed; comparison skipped")
        mx = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor",
                                 reason="torchao without prototype.mx_formats")
        from torchao.prototype.mx_formats import constants, kernels, nvfp4_tensor
        from torchao.prototype.mx_formats.config import ScaleCalculationMode
    version = Version(importlib.metadata.version("torchao"))
    if version < Version("0.18"):
        pytest.skip(f"torchao {version}: to_mx / nvfp4_quantize checked on 0.18.0")
    elems = {"mxfp8_e4m3": torch.float8_e4m3fn, "mxfp8_e5m2": torch.float8_e5m2,
             "mxfp6_e3m2": constants.DTYPE_FP6_E3M2, "mxfp6_e2m3": constants.DTYPE_FP6_E2M3,
             "mxfp4": torch.float4_e2m1fn_x2}
    return SimpleNamespace(torch=torch, mx=mx, nvfp4=nvfp4_tensor, kernels=kernels,
                           mode=ScaleCalculationMode, elems=elems, version=version)


def _torchao_mx(tao, scheme, x, rule):
    """torchao's MXTensor.to_mx (emulated, eager): (dequantized values, scale codes)."""
    mode = getattr(tao.mode, rule.upper())
    t = tao.mx.MXTensor.to_mx(tao.torch.from_numpy(x.astype(np.float32)), tao.elems[scheme],
                              32, scaling_mode=mode)
    vals = t.dequantize(tao.torch.float32).numpy().astype(np.float64)
    return vals, t.scale.view(tao.torch.uint8).numpy().reshape(-1)


def _compare_torchao_mx(tao, scheme, x, rule, blocks=None):
    vals, codes = _torchao_mx(tao, scheme, x, rule)
    q = lp.mx.quantize(x, scheme, scale_rule=rule)
    got, got_codes = q.dequantize(), q.scale_codes.reshape(-1)
    blocks = np.ones(len(x), dtype=bool) if blocks is None else blocks
    np.testing.assert_array_equal(got_codes[blocks], codes[blocks])
    assert_same(got[blocks], vals[blocks])


@pytest.mark.parametrize("rule", ["floor", "rceil"])
@pytest.mark.parametrize("scheme", FP_SCHEMES)
def test_torchao_mx_random_blocks(tao, scheme, rule):
    x = _random_blocks(21, 512, 32, -30, 30)
    _compare_torchao_mx(tao, scheme, x, rule)


@pytest.mark.parametrize("rule", ["floor", "rceil"])
@pytest.mark.parametrize("scheme", FP_SCHEMES)
def test_torchao_mx_edge_blocks(tao, scheme, rule):
    # The RCEIL just-over case sits at X = 8 (|k| = 3), where torchao's FP32 log2 still
    # resolves 2**k * (1 + 2**-23); see the module's notes for |k| >= 4.
    x = np.concatenate([_edge_blocks(scheme), [[1.0, np.nan] + [2.0] * 30]])
    _compare_torchao_mx(tao, scheme, x, rule)


def _significand(x):
    """amax of each block as m * 2**e, m in [1, 2) (0 for a zero block)."""
    return 2.0 * np.frexp(np.abs(x).max(axis=1))[0]


@pytest.mark.parametrize("scheme", FP_SCHEMES)
def test_torchao_mx_ceil_where_rules_coincide(tao, scheme):
    if tao.version.release[:2] != (0, 18):
        pytest.skip("torchao's CEIL formula read from 0.18.0")
    x = _random_blocks(31, 512, 32, -30, 30)
    x[:16, 0] = np.exp2(np.arange(-8, 8)) * 4.0       # amax a power of two
    f = _elem(scheme)
    m = _significand(x)
    same = (m == 1.0) | (m > f.max / 2.0**f.emax)
    assert same.sum() >= 40
    _compare_torchao_mx(tao, scheme, x, "ceil", blocks=same)


@pytest.mark.parametrize("scheme", FP_SCHEMES)
def test_torchao_mx_even_where_rules_coincide(tao, scheme):
    if tao.version.release[:2] != (0, 18):
        pytest.skip("torchao's EVEN formula read from 0.18.0")
    x = _random_blocks(41, 512, 32, -30, 30)
    f = _elem(scheme)
    m = _significand(x)
    same = (m > 0.75 * f.max / 2.0**f.emax) & (m < 2.0 - 2.0**-(f.mantissa_bits + 1))
    assert same.sum() >= 100
    _compare_torchao_mx(tao, scheme, x, "even", blocks=same)


def _torchao_nvfp4(tao, x, ts):
    """torchao's NVFP4Tensor.to_nvfp4 (ts None: one-level): values, UE4M3 codes, elements."""
    torch = tao.torch
    pts = None if ts is None else torch.tensor(ts, dtype=torch.float32)
    t = tao.nvfp4.NVFP4Tensor.to_nvfp4(torch.from_numpy(x.astype(np.float32)), 16,
                                       per_tensor_scale=pts)
    vals = t.dequantize(torch.float32).numpy().astype(np.float64)
    codes = t.scale.view(torch.uint8).numpy().reshape(-1)
    elems = tao.kernels.f4_unpacked_to_f32(tao.kernels.unpack_uint4(t.qdata.view(torch.uint8)))
    return vals, codes, elems.numpy().astype(np.float64).reshape(x.shape)


def _compare_torchao_nvfp4(tao, x, ts):
    vals, codes, elems = _torchao_nvfp4(tao, x, ts)
    q = lp.mx.quantize(x, "nvfp4", tensor_scale=1.0 if ts is None else ts)
    tsv = 1.0 if ts is None else ts
    amax = np.abs(x).max(axis=1)
    # torchao's 2**-6 floor on the block scale (finite blocks; NaN ones keep their NaN)
    scaled = ~(amax / 6.0 / tsv < 2.0**-6)
    nonzero = amax > 0
    np.testing.assert_array_equal(q.scale_codes.reshape(-1)[scaled], codes[scaled])
    finite = scaled & np.isfinite(amax)     # a NaN scale's element codes mean nothing
    assert_same(q.elements.reshape(x.shape)[finite], elems[finite])
    assert_same(q.dequantize()[scaled | ~nonzero], vals[scaled | ~nonzero])
    return scaled


@pytest.mark.parametrize("ts", [None, 2.0**-3, 2.0**5])
def test_torchao_nvfp4_random_blocks(tao, ts):
    tsv = 1.0 if ts is None else ts
    # block scales amax / 6 / ts from UE4M3's subnormals (left out) to past 448 (saturated)
    x = _random_blocks(51, 1024, 16, -8, 13) * tsv
    scaled = _compare_torchao_nvfp4(tao, x, ts)
    assert 0.75 < scaled.mean() < 1.0


@pytest.mark.parametrize("ts", [None, 2.0**-3])
def test_torchao_nvfp4_edge_blocks(tao, ts):
    tsv = 1.0 if ts is None else ts
    top = 6.0 * 448.0 * tsv                  # block scale exactly UE4M3's max
    mids = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -2.5, -5.0, 0.5, -0.0, 5.5, 1e-9]
    x = np.array([
        [0.0] * 16,
        [top] + [1.0] * 15,
        [top * 1.5, -top * 2.0] + [3.0 * tsv] * 14,           # saturated scale, clamped
        [6.0 * tsv, 0.0] + [m * tsv for m in mids],           # scale 1: E2M1 ties
        [6.0 * tsv * 3.0, 0.0] + [m * 3.0 * tsv for m in mids],    # scale 3
        [1.0, np.nan] + [2.0] * 14,
    ]).astype(np.float32).astype(np.float64)
    scaled = _compare_torchao_nvfp4(tao, x, ts)
    assert scaled[1:].all()
