"""The h100 model against torch.matmul measured on an NVIDIA H200 (tests/data/torch-h200).

The GPU's results are the oracle: FP32-output products with FP16, BF16 and TF32
operands and K up to 128, and the same products converted by cuBLAS to FP16/BF16.
The H200 is the H100's chip (TENSORCORE.md lists it under the ``h100`` model)."""

import dataclasses
import json

import numpy as np
import pytest

import lowprec as lp
from helpers import DATA, fp32_bits, from_fp32_bits
from lowprec.tensorcore import matmul

HERE = DATA
DATA = HERE / "torch-h200" / "torch_matmul.npz"


def _cases():
    with np.load(DATA) as data:
        keys = sorted({k.rsplit("_", 1)[0] for k in data.files
                       if not k.startswith("pub") and not k.endswith("_alone")})
    return keys


@pytest.fixture(scope="module")
def data():
    with np.load(DATA) as d:
        return dict(d)


def test_every_case_is_there(data):
    assert len(_cases()) == 3 * 5 * 3
    assert sum(data[k + "_d32"].size for k in _cases()) == 45 * 64 * 64


@pytest.mark.parametrize("key", _cases())
def test_h100_model_equals_the_h200(data, key):
    fmt = key.split("_")[0]
    a, b = from_fp32_bits(data[key + "_a"]), from_fp32_bits(data[key + "_b"])
    with np.errstate(all="ignore"):
        d = matmul(a, b, model="h100", in_fmt=fmt, out_fmt="fp32")
    assert np.array_equal(fp32_bits(d), data[key + "_d32"])
    if fmt != "tf32":
        # cuBLAS's epilogue converts the FP32 accumulator once, to nearest even.
        with np.errstate(all="ignore"):
            dn = lp.round(d, fmt)
        assert np.array_equal(fp32_bits(dn), data[key + "_dn"])


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "tf32"])
def test_h100_model_equals_the_h200_on_the_published_rows(data, fmt):
    with np.load(HERE / "tensorcore" / f"h100_{fmt}.npz") as pub:
        a, b = from_fp32_bits(pub["a"]), from_fp32_bits(pub["b"])
    key = f"published_{fmt}"
    i, j = data[key + "_i"], data[key + "_j"]
    d = matmul(a[i][:, None, :], b[j][:, :, None], model="h100", in_fmt=fmt,
               out_fmt="fp32")[:, 0, 0]
    assert np.array_equal(fp32_bits(d), data[key + "_d32"])
    # The data discriminates: exact accumulation with one final rounding differs.
    exact = matmul(a[i][:, None, :], b[j][:, :, None], model="exact", in_fmt=fmt,
                   out_fmt="fp32")[:, 0, 0]
    assert np.count_nonzero(fp32_bits(exact) != data[key + "_d32"]) > 1000
    if fmt != "tf32":
        assert np.array_equal(fp32_bits(lp.round(d, fmt)), data[key + "_dn"])


@pytest.mark.parametrize("k, split", [(8, 4), (16, 4), (64, 32), (128, 32)])
@pytest.mark.parametrize("dist", ["normal", "wide", "small"])
def test_split_k_is_h100_slices_summed_in_fp32(data, k, split, dist):
    # For a 64 x 64 TF32 product alone cuBLAS chose a split-K kernel (an sm80 CUTLASS
    # kernel plus a reduction kernel): the h100 model on K slices of `split`, the
    # partial sums then added in FP32 one after another, each rounded to nearest.
    key = f"tf32_K{k}_{dist}"
    a, b = from_fp32_bits(data[key + "_a"]), from_fp32_bits(data[key + "_b"])
    parts = [matmul(a[:, i:i + split], b[i:i + split], model="h100", in_fmt="tf32")
             for i in range(0, k, split)]
    acc = parts[0]
    for part in parts[1:]:
        acc = lp.add(acc, part, "fp32")
    assert np.array_equal(fp32_bits(acc), data[key + "_alone"])
    # ... and the data tell it apart from one unsplit product.
    assert not np.array_equal(fp32_bits(matmul(a, b, model="h100", in_fmt="tf32")),
                              data[key + "_alone"])


# -- FP8: torch._scaled_mm (cuBLAS, wgmma kernels nvjet_sm90_qq*) ----------------------

FP8 = HERE / "torch-h200" / "torch_fp8.npz"


@pytest.fixture(scope="module")
def fp8():
    with np.load(FP8) as d:
        return dict(d)


def _fp8_model(fmt):
    """(model, in_fmt): E5M2 x E4M3 operands go in as FP16 (which holds both exactly)
    through the h100 FP8 block FMA, which does not depend on the operands' format."""
    if fmt == "e4m3":
        return "h100", "e4m3"
    m = lp.MODELS["h100"].for_format(lp.format("e4m3"))
    return dataclasses.replace(m, inputs=(lp.format("fp16"),), variants=()), "fp16"


def _fp8_check(fmt, a, b, got):
    model, in_fmt = _fp8_model(fmt)
    d = matmul(a, b, model=model, in_fmt=in_fmt, out_fmt="fp32")
    for fa in (0, 1):   # use_fast_accum off and on give the same bits for K <= 128
        assert np.array_equal(fp32_bits(d), got(f"d32_fa{fa}"))
        # FP16/BF16 output: cuBLAS converts the FP32 result once, to nearest even.
        assert np.array_equal(fp32_bits(lp.round(d, "fp16")), got(f"d16_fa{fa}"))
        if got(f"dbf16_fa{fa}") is not None:
            assert np.array_equal(fp32_bits(lp.round(d, "bf16")), got(f"dbf16_fa{fa}"))
    return d


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2xe4m3"])
@pytest.mark.parametrize("k", [16, 32, 64, 128])
@pytest.mark.parametrize("dist", ["normal", "wide"])
def test_h100_fp8_model_equals_the_h200(fp8, fmt, k, dist):
    key = f"{fmt}_K{k}_{dist}"
    a, b = from_fp32_bits(fp8[key + "_a"]), from_fp32_bits(fp8[key + "_b"])
    d = _fp8_check(fmt, a, b, lambda s: fp8.get(f"{key}_{s}"))
    # The data discriminate: mma.sync (§4) or exact accumulation differ from wgmma.
    model, in_fmt = ("h100-mma", "e4m3") if fmt == "e4m3" else ("exact", "fp16")
    other = matmul(a, b, model=model, in_fmt=in_fmt, out_fmt="fp32")
    assert np.count_nonzero(fp32_bits(other) != fp32_bits(d)) > 200


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2xe4m3"])
def test_h100_fp8_model_equals_the_h200_on_the_published_rows(fp8, fmt):
    src = "e4m3" if fmt == "e4m3" else "e5m2"
    with np.load(HERE / "tensorcore" / f"h100_{src}.npz") as pub:
        a, b = from_fp32_bits(pub["a"]), from_fp32_bits(pub["b"])
    key = f"published_{fmt}"
    i, j = fp8[key + "_i"], fp8[key + "_j"]
    assert i.size > 20_000
    got = lambda s: (None if f"{key}_{s}" not in fp8  # noqa: E731
                     else fp8[f"{key}_{s}"][:, None, None])
    _fp8_check(fmt, a[i][:, None, :], b[j][:, :, None], got)


def test_cublas_has_no_e5m2_by_e5m2_kernel():
    # Recorded by the measurement: torch refuses E5M2 x E5M2, so there are no such rows.
    notes = json.loads((HERE / "torch-h200" / "torch_fp8.json").read_text())["notes"]
    assert any("Float8_e5m2 matrices is not supported" in n for n in notes)


# -- TF32 from FP32 operands that are not TF32 values ----------------------------------

@pytest.mark.parametrize("k, split", [(16, 4), (64, 32)])
def test_fp32_operands_are_rounded_to_tf32_to_nearest_even(k, split):
    # torch.matmul on FP32 with allow_tf32: cuBLAS converts each operand to TF32 by
    # RNE, as lp.matmul does with plain operands; truncation would match nothing.
    with np.load(HERE / "torch-h200" / "torch_tf32_inputs.npz") as d:
        a, b = from_fp32_bits(d[f"K{k}_a"]), from_fp32_bits(d[f"K{k}_b"])
        big, alone = d[f"K{k}_big"], d[f"K{k}_alone"]
    assert not np.array_equal(lp.round(a, "tf32"), a)        # the operands are not TF32
    assert np.array_equal(fp32_bits(matmul(a, b, model="h100", in_fmt="tf32")), big)
    rz = matmul(lp.round(a, "tf32", "rz"), lp.round(b, "tf32", "rz"), model="h100",
                in_fmt="tf32")
    assert np.count_nonzero(fp32_bits(rz) == big) == 0
    # The 64 x K x 64 product alone went through the split-K kernel (as above).
    ra, rb = lp.round(a, "tf32"), lp.round(b, "tf32")
    parts = [matmul(ra[:, i:i + split], rb[i:i + split], model="h100", in_fmt="tf32")
             for i in range(0, k, split)]
    acc = parts[0]
    for part in parts[1:]:
        acc = lp.add(acc, part, "fp32")
    assert np.array_equal(fp32_bits(acc), alone)
    if k == 64:   # ties away from zero would differ here
        rna = matmul(lp.round(a, "tf32", "rna"), lp.round(b, "tf32", "rna"), model="h100",
                     in_fmt="tf32")
        assert np.count_nonzero(fp32_bits(rna) != big) > 0
