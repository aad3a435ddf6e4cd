"""lowprec.torch: torch's products on CPU through lowprec's models.

The oracles: the H200's recorded torch.matmul and torch._scaled_mm results
(tests/data/torch-h200), bit for bit through ``emulate(gpu="h100")``; and, for each
intercepted op on random and adversarial data, `lp.matmul` with the same model on the
same values (the contract of the bridge), forward and backward."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import DATA, fp32_bits, from_fp32_bits
from peers import optional, requires

torch = optional("torch")
pytestmark = requires("torch")
lpt = optional("lowprec.torch")

H200 = DATA / "torch-h200"


def _t(bits, dtype):
    """A torch tensor of ``dtype`` holding the FP32 values of recorded bit patterns."""
    return torch.from_numpy(from_fp32_bits(bits).astype(np.float32)).to(dtype)


def _bits(t):
    return fp32_bits(t.float().numpy())


def test_import_lowprec_does_not_import_torch():
    import subprocess
    import sys
    code = "import sys, lowprec; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# -- model_for -------------------------------------------------------------------------

@pytest.mark.parametrize("gpu, dtype, tf32, model, fmt", [
    ("h100", "float16", False, "h100", "FP16"), ("h200", "torch.bfloat16", False, "h100", "BF16"),
    ("a100", "float32", True, "a100", "TF32"), ("a100", "float32", False, "fp32", "FP32"),
    ("v100", "float32", True, "fp32", "FP32"), ("v100", "bfloat16", False, "fp32", "BF16"),
    ("b200", "float8_e4m3fn", False, "b200", "FP8_E4M3"), ("ada", "e4m3", False, "ada", "FP8_E4M3"),
])
def test_model_for_names_the_gpus_model(gpu, dtype, tf32, model, fmt):
    m, f = lpt.model_for(gpu, dtype, tf32=tf32)
    assert (m.name, f.name) == (model, fmt)


def test_model_for_refuses_what_the_gpu_lacks():
    with pytest.raises(ValueError, match="no FP8"):
        lpt.model_for("a100", "float8_e4m3fn")
    with pytest.raises(ValueError, match="E5M2 x E5M2"):
        lpt.model_for("h100", "float8_e5m2")
    with pytest.raises(ValueError, match="unknown gpu"):
        lpt.model_for("k80", "float16")
    with pytest.raises(ValueError, match="no GPU matrix-product model for dtype"):
        lpt.model_for("h100", "int8")


# -- the recorded H200 data through the bridge -----------------------------------------

@pytest.fixture(scope="module")
def recorded():
    with np.load(H200 / "torch_matmul.npz") as d:
        return dict(d)


def _matmul_cases():
    with np.load(H200 / "torch_matmul.npz") as d:
        return sorted({k.rsplit("_", 1)[0] for k in d.files
                       if not k.startswith("pub") and not k.endswith("_alone")})


DTYPES = {"fp16": "float16", "bf16": "bfloat16", "tf32": "float32"}


@pytest.fixture
def tf32_on():
    was = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    yield
    torch.backends.cuda.matmul.allow_tf32 = was


@pytest.fixture
def tf32_off():
    was, prec = torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    yield
    torch.backends.cuda.matmul.allow_tf32 = was
    torch.set_float32_matmul_precision(prec)


@pytest.mark.parametrize("key", _matmul_cases())
def test_every_recorded_product_through_the_bridge(recorded, key, tf32_on):
    fmt = key.split("_")[0]
    dtype = getattr(torch, DTYPES[fmt])
    a, b = _t(recorded[key + "_a"], dtype), _t(recorded[key + "_b"], dtype)
    with lpt.emulate(gpu="h100"):
        if fmt == "tf32":
            d32 = torch.matmul(a, b)
        else:
            d32 = torch.mm(a, b, out_dtype=torch.float32)
            dn = torch.matmul(a, b)
    assert d32.dtype == torch.float32
    assert np.array_equal(_bits(d32), recorded[key + "_d32"])
    if fmt != "tf32":
        assert dn.dtype == dtype
        assert np.array_equal(_bits(dn), recorded[key + "_dn"])


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "tf32"])
def test_every_recorded_published_row_through_the_bridge(recorded, fmt, tf32_on):
    with np.load(DATA / "tensorcore" / f"h100_{fmt}.npz") as pub:
        a, b = pub["a"], pub["b"]
    key = f"published_{fmt}"
    i, j = recorded[key + "_i"], recorded[key + "_j"]
    dtype = getattr(torch, DTYPES[fmt])
    # Entry k is row i[k] of a times row j[k] of b: a stack of 1 x K x 1 products.
    ta, tb = _t(a[i][:, None, :], dtype), _t(b[j][:, :, None], dtype)
    with lpt.emulate(gpu="h100"):
        if fmt == "tf32":
            d32 = torch.bmm(ta, tb)
        else:
            d32 = torch.bmm(ta, tb, out_dtype=torch.float32)
            dn = ta @ tb
    assert np.array_equal(_bits(d32)[:, 0, 0], recorded[key + "_d32"])
    if fmt != "tf32":
        assert np.array_equal(_bits(dn)[:, 0, 0], recorded[key + "_dn"])


def recorded_split_k(m, n, k, dtype):
    """The split cuBLAS chose for the recorded 64 x K x 64 TF32 products alone."""
    return 4 if k <= 16 else 32


@pytest.mark.parametrize("k", [8, 16, 64, 128])
@pytest.mark.parametrize("dist", ["normal", "wide", "small"])
def test_recorded_split_k_products_through_the_bridge(recorded, k, dist, tf32_on):
    key = f"tf32_K{k}_{dist}"
    a, b = _t(recorded[key + "_a"], torch.float32), _t(recorded[key + "_b"], torch.float32)
    with lpt.emulate(gpu="h100", split_k=recorded_split_k):
        alone = a @ b
    assert np.array_equal(_bits(alone), recorded[key + "_alone"])


@pytest.mark.parametrize("k", [16, 64])
def test_recorded_fp32_operands_as_tf32_through_the_bridge(k, tf32_on):
    with np.load(H200 / "torch_tf32_inputs.npz") as d:
        a, b = _t(d[f"K{k}_a"], torch.float32), _t(d[f"K{k}_b"], torch.float32)
        big, alone = d[f"K{k}_big"], d[f"K{k}_alone"]
    with lpt.emulate(gpu="h100"):
        assert np.array_equal(_bits(a @ b), big)
    with lpt.emulate(gpu="h100", split_k=recorded_split_k):
        assert np.array_equal(_bits(a @ b), alone)


@pytest.fixture(scope="module")
def fp8():
    with np.load(H200 / "torch_fp8.npz") as d:
        return dict(d)


FP8_DTYPES = {"e4m3": ("float8_e4m3fn", "float8_e4m3fn"),
              "e5m2xe4m3": ("float8_e5m2", "float8_e4m3fn")}
OUT = {"d32": "float32", "d16": "float16", "dbf16": "bfloat16"}


def _scaled(a, b, out, fa):
    one = torch.tensor(1.0)
    # _scaled_mm takes B column-major, as cuBLAS's TN kernels do.
    return torch._scaled_mm(a, b.t().contiguous().t(), scale_a=one, scale_b=one,
                            out_dtype=getattr(torch, out), use_fast_accum=bool(fa))


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2xe4m3"])
@pytest.mark.parametrize("k", [16, 32, 64, 128])
@pytest.mark.parametrize("dist", ["normal", "wide"])
def test_every_recorded_scaled_mm_through_the_bridge(fp8, fmt, k, dist):
    key = f"{fmt}_K{k}_{dist}"
    da, db = (getattr(torch, n) for n in FP8_DTYPES[fmt])
    a, b = _t(fp8[key + "_a"], da), _t(fp8[key + "_b"], db)
    n = 0
    with lpt.emulate(gpu="h100"):
        for out, dtype in OUT.items():
            for fa in (0, 1):
                want = fp8.get(f"{key}_{out}_fa{fa}")
                if want is not None:
                    assert np.array_equal(_bits(_scaled(a, b, dtype, fa)), want), (out, fa)
                    n += 1
    assert n >= 4


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2xe4m3"])
def test_every_recorded_scaled_mm_published_row_through_the_bridge(fp8, fmt):
    src = "e4m3" if fmt == "e4m3" else "e5m2"
    with np.load(DATA / "tensorcore" / f"h100_{src}.npz") as pub:
        a, b = pub["a"], pub["b"]
    key = f"published_{fmt}"
    i, j = fp8[key + "_i"], fp8[key + "_j"]
    da, db = (getattr(torch, n) for n in FP8_DTYPES[fmt])
    # 16 pairs at a time (cuBLAS's FP8 kernels take multiples of 16): the diagonal of
    # each 16 x 16 product; an output depends only on its row of A and column of B.
    pad = (-i.size) % 16
    ii, jj = np.concatenate([i, i[:pad]]), np.concatenate([j, j[:pad]])
    ta, tb = _t(a[ii], da), _t(b[jj], db)
    outs = [o for o in OUT if f"{key}_{o}_fa0" in fp8]
    got = {(o, fa): [] for o in outs for fa in (0, 1)}
    with lpt.emulate(gpu="h100"):
        for s in range(0, ii.size, 16):
            for o in outs:
                for fa in (0, 1):
                    d = _scaled(ta[s:s + 16], tb[s:s + 16].t(), OUT[o], fa)
                    got[o, fa].append(torch.diagonal(d))
    for (o, fa), parts in got.items():
        assert np.array_equal(_bits(torch.cat(parts))[:i.size], fp8[f"{key}_{o}_fa{fa}"])
