"""The h100 model against torch.matmul measured on an NVIDIA H200 (tests/data/torch-h200).

The GPU's results are the oracle: FP32-output products with FP16, BF16 and TF32
operands and K up to 128, and the same products converted by cuBLAS to FP16/BF16.
The H200 is the H100's chip (TENSORCORE.md lists it under the ``h100`` model)."""

import pathlib

import numpy as np
import pytest

import lowprec as lp
from lowprec.matmul import matmul

HERE = pathlib.Path(__file__).parent / "data"
DATA = HERE / "torch-h200" / "torch_matmul.npz"


def _bits(x):
    """FP32 bit patterns of float64 values that are FP32 values."""
    return x.astype(np.float32).view(np.uint32)


def _cases():
    with np.load(DATA) as data:
        keys = sorted({k.rsplit("_", 1)[0] for k in data.files
                       if not k.startswith("pub") and not k.endswith("_alone")})
    return keys


def _decode(bits):
    return bits.view(np.float32).astype(np.float64)


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
    a, b = _decode(data[key + "_a"]), _decode(data[key + "_b"])
    with np.errstate(all="ignore"):
        d = matmul(a, b, model="h100", in_fmt=fmt, out_fmt="fp32")
    assert np.array_equal(_bits(d), data[key + "_d32"])
    if fmt != "tf32":
        # cuBLAS's epilogue converts the FP32 accumulator once, to nearest even.
        with np.errstate(all="ignore"):
            dn = lp.round(d, fmt)
        assert np.array_equal(_bits(dn), data[key + "_dn"])


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "tf32"])
def test_h100_model_equals_the_h200_on_the_published_rows(data, fmt):
    with np.load(HERE / "tensorcore" / f"h100_{fmt}.npz") as pub:
        a, b = _decode(pub["a"]), _decode(pub["b"])
    key = f"published_{fmt}"
    i, j = data[key + "_i"], data[key + "_j"]
    d = matmul(a[i][:, None, :], b[j][:, :, None], model="h100", in_fmt=fmt,
               out_fmt="fp32")[:, 0, 0]
    assert np.array_equal(_bits(d), data[key + "_d32"])
    # The data discriminates: exact accumulation with one final rounding differs.
    exact = matmul(a[i][:, None, :], b[j][:, :, None], model="exact", in_fmt=fmt,
                   out_fmt="fp32")[:, 0, 0]
    assert np.count_nonzero(_bits(exact) != data[key + "_d32"]) > 1000
    if fmt != "tf32":
        assert np.array_equal(_bits(lp.round(d, fmt)), data[key + "_dn"])


@pytest.mark.parametrize("k, split", [(8, 4), (16, 4), (64, 32), (128, 32)])
@pytest.mark.parametrize("dist", ["normal", "wide", "small"])
def test_split_k_is_h100_slices_summed_in_fp32(data, k, split, dist):
    # For a 64 x 64 TF32 product alone cuBLAS chose a split-K kernel (an sm80 CUTLASS
    # kernel plus a reduction kernel): the h100 model on K slices of `split`, the
    # partial sums then added in FP32 one after another, each rounded to nearest.
    key = f"tf32_K{k}_{dist}"
    a, b = _decode(data[key + "_a"]), _decode(data[key + "_b"])
    parts = [matmul(a[:, i:i + split], b[i:i + split], model="h100", in_fmt="tf32")
             for i in range(0, k, split)]
    acc = parts[0]
    for part in parts[1:]:
        acc = lp.add(acc, part, "fp32")
    assert np.array_equal(_bits(acc), data[key + "_alone"])
    # ... and the data tell it apart from one unsplit product.
    assert not np.array_equal(_bits(matmul(a, b, model="h100", in_fmt="tf32")),
                              data[key + "_alone"])
