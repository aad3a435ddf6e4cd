"""lowprec.torch: torch's products on CPU through lowprec's models.

The oracles: the H200's recorded torch.matmul and torch._scaled_mm results
(tests/data/torch-h200), bit for bit through ``emulate(gpu="h100")``; and, for each
intercepted op on random and adversarial data, `lp.matmul` with the same model on the
same values (the contract of the bridge), forward and backward."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import lowprec as lp
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


# -- each op against lp.matmul with the same model on the same values --------------------

FMT = {"bfloat16": "bf16", "float16": "fp16", "float32": "tf32"}


def _data(shape, dtype, adversarial, rng):
    """Random values of ``dtype``; with ``adversarial``, a third of them replaced by
    ±0, subnormals, the largest finite value, halfway cases, inf and NaN."""
    x = rng.standard_normal(shape)
    if adversarial and x.size:
        fi = torch.finfo(dtype)
        pool = np.array([0.0, -0.0, fi.smallest_normal / 4, -fi.smallest_normal * 3 / 8,
                         float(fi.max), -float(fi.max), 1.0, fi.eps / 2, 1 + fi.eps,
                         -(1 + fi.eps / 2), np.inf, -np.inf, np.nan, 2.0**-3])
        pick = rng.random(shape) < 1 / 3
        x[pick] = rng.choice(pool, size=int(pick.sum()))
    return torch.from_numpy(x).to(dtype)


def _np(t):
    return t.detach().double().numpy()


def _want(a, b, c=None, beta=1, alpha=1, *, dtype, tf32=True):
    """The product as lp.matmul's h100 model computes it, then cuBLAS's epilogue."""
    name = str(dtype).removeprefix("torch.")
    model, fmt = ("h100", FMT[name]) if name != "float32" or tf32 else ("fp32", "fp32")
    with np.errstate(all="ignore"):
        d = lp.matmul(_np(a), _np(b), model=model, in_fmt=fmt, out_fmt="fp32")
        if alpha != 1:
            d = lp.mul(alpha, d, "fp32")
        if c is not None and beta != 0:
            d = lp.add(d, _np(c), "fp32") if beta == 1 else lp.fma(beta, _np(c), d, "fp32")
        return lp.round(d, {"bfloat16": "bf16", "float16": "fp16"}.get(name, "fp32"))


def assert_same_values(got, want):
    from helpers import assert_same
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    assert_same(_np(got), want)


DT = ["bfloat16", "float16", "float32"]


@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("adversarial", [False, True])
@pytest.mark.parametrize("shape", [(5, 33, 7), (0, 4, 3), (3, 0, 2), (1, 1, 1), (4, 70, 0)])
def test_mm_equals_lp_matmul(dtype, adversarial, shape, tf32_on):
    rng = np.random.default_rng(sum(shape) + 7 * adversarial)
    dt = getattr(torch, dtype)
    m, k, n = shape
    a, b = _data((m, k), dt, adversarial, rng), _data((k, n), dt, adversarial, rng)
    with lpt.emulate(gpu="h100"):
        got = torch.mm(a, b)
    assert got.dtype == dt
    assert_same_values(got, _want(a, b, dtype=dt))


@pytest.mark.parametrize("dtype", DT)
def test_fp32_without_tf32_is_plain_fp32_accumulation(dtype, tf32_off):
    rng = np.random.default_rng(3)
    dt = getattr(torch, dtype)
    a, b = _data((6, 40), dt, True, rng), _data((40, 5), dt, True, rng)
    with lpt.emulate(gpu="a100"):
        got = a @ b
    model = "fp32" if dtype == "float32" else "a100"
    fmt = "fp32" if dtype == "float32" else FMT[dtype]
    with np.errstate(all="ignore"):
        want = lp.round(lp.matmul(_np(a), _np(b), model=model, in_fmt=fmt, out_fmt="fp32"),
                        {"bfloat16": "bf16", "float16": "fp16"}.get(dtype, "fp32"))
    assert_same_values(got, want)


@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("adversarial", [False, True])
@pytest.mark.parametrize("beta, alpha", [(1, 1), (0.5, 1), (1, -2.0), (0, 3.0)])
def test_addmm_and_baddbmm_follow_the_cublas_epilogue(dtype, adversarial, beta, alpha, tf32_on):
    rng = np.random.default_rng(11)
    dt = getattr(torch, dtype)
    a, b = _data((4, 24), dt, adversarial, rng), _data((24, 6), dt, adversarial, rng)
    bias = _data((6,), dt, adversarial, rng)
    with lpt.emulate(gpu="h100"):
        got = torch.addmm(bias, a, b, beta=beta, alpha=alpha)
    assert_same_values(got, _want(a, b, bias, beta, alpha, dtype=dt))
    A, B = _data((3, 4, 24), dt, adversarial, rng), _data((3, 24, 6), dt, adversarial, rng)
    C = _data((3, 1, 6), dt, adversarial, rng)
    with lpt.emulate(gpu="h100"):
        got = torch.baddbmm(C, A, B, beta=beta, alpha=alpha)
    assert_same_values(got, _want(A, B, C, beta, alpha, dtype=dt))


@pytest.mark.parametrize("dtype", DT)
def test_strides_batches_vectors_and_broadcasting(dtype, tf32_on):
    rng = np.random.default_rng(5)
    dt = getattr(torch, dtype)
    a = _data((9, 40), dt, True, rng)[:, ::2]            # non-contiguous rows
    b = _data((6, 20), dt, True, rng).t()                # transposed
    x = _data((2, 1, 3, 20), dt, False, rng)
    y = _data((4, 20, 5), dt, False, rng)
    v = _data((20,), dt, True, rng)
    with lpt.emulate(gpu="h100"):
        got = {"mm": a @ b, "bcast": x @ y, "mv": a @ v, "dot": v @ v,
               "einsum": torch.einsum("bik,bkj->bij", y.transpose(1, 2), y),
               "linear": torch.nn.functional.linear(x, b.t()),
               "addmv": torch.addmv(v[:9], a, v)}
    assert_same_values(got["mm"], _want(a, b, dtype=dt))
    assert_same_values(got["bcast"], _want(x, y, dtype=dt))
    assert_same_values(got["mv"], _want(a, v, dtype=dt))
    assert_same_values(got["dot"], _want(v, v, dtype=dt))
    assert_same_values(got["einsum"], _want(y.transpose(1, 2), y, dtype=dt))
    assert_same_values(got["linear"], _want(x, b, dtype=dt))
    assert_same_values(got["addmv"], _want(a, v, v[:9], dtype=dt))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_backward_products_equal_lp_matmul(dtype):
    rng = np.random.default_rng(9)
    dt = getattr(torch, dtype)
    a = _data((5, 30), dt, True, rng).requires_grad_()
    b = _data((30, 4), dt, True, rng).requires_grad_()
    g = _data((5, 4), dt, True, rng)
    with lpt.emulate(gpu="h100"):
        (a @ b).backward(g)
    assert_same_values(a.grad, _want(g, b.detach().t(), dtype=dt))
    assert_same_values(b.grad, _want(a.detach().t(), g, dtype=dt))


def test_mlp_gradients_equal_a_hand_written_lp_matmul_backward():
    rng = np.random.default_rng(1)
    bf = torch.bfloat16
    lin1, lin2 = torch.nn.Linear(12, 16).to(bf), torch.nn.Linear(16, 3).to(bf)
    x = _data((8, 12), bf, False, rng)
    r = torch.from_numpy(rng.standard_normal((8, 3)))
    with lpt.emulate(gpu="h100"):
        out = lin2(torch.relu(lin1(x)))
        (out.float() * r.float()).sum().backward()
    W1, b1, W2, b2 = (p.detach() for p in (lin1.weight, lin1.bias, lin2.weight, lin2.bias))
    h = torch.from_numpy(np.asarray(_want(x, W1.t(), b1, dtype=bf), np.float32)).to(bf)
    hr = torch.relu(h)
    o = _want(hr, W2.t(), b2, dtype=bf)
    assert_same_values(out, o)
    g = r.float().to(bf)                                 # the grad of out.float()
    assert_same_values(lin2.weight.grad, _want(g.t(), hr, dtype=bf))
    dh = torch.from_numpy(np.asarray(_want(g, W2, dtype=bf), np.float32)).to(bf)
    dh = dh * (h > 0)
    assert_same_values(lin1.weight.grad, _want(dh.t(), x, dtype=bf))


def _train(ctx, seed=0, steps=6):
    import contextlib
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                              torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x, y = torch.randn(128, 64), torch.randint(0, 10, (128,))
    losses = []
    with ctx or contextlib.nullcontext():
        for _ in range(steps):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return losses, [p.detach().clone() for p in net.parameters()]


def test_training_is_deterministic_and_differs_from_plain_torch():
    losses, params = _train(lpt.emulate(gpu="h100"))
    again, params_again = _train(lpt.emulate(gpu="h100"))
    assert losses == again
    assert all(torch.equal(p, q) for p, q in zip(params, params_again))
    # The H100's products differ from the CPU's in a few BF16 outputs a step: the
    # weights part at once, the losses later; FP16 accumulation parts at once.
    _, plain = _train(None)
    assert not all(torch.equal(p, q) for p, q in zip(params, plain))
    assert losses != _train(lpt.emulate(matmul="fp16"))[0]


def test_outside_the_block_nothing_changes(tf32_on):
    rng = np.random.default_rng(2)
    a, b = _data((16, 64), torch.float32, False, rng), _data((64, 16), torch.float32, False, rng)
    before = (a @ b).clone()
    with lpt.emulate(gpu="h100"):
        inside = a @ b                # TF32 operands
    after = a @ b
    assert torch.equal(before.view(torch.int32), after.view(torch.int32))
    assert not torch.equal(before, inside)


def test_the_mode_is_thread_local(tf32_on):
    rng = np.random.default_rng(4)
    a, b = _data((16, 64), torch.float32, False, rng), _data((64, 16), torch.float32, False, rng)
    plain = a @ b
    entered, done, got = threading.Event(), threading.Event(), {}

    def emulated():
        with lpt.emulate(gpu="h100"):
            got["inside"] = a @ b
            entered.set()
            done.wait(10)

    t = threading.Thread(target=emulated)
    t.start()
    entered.wait(10)
    got["other"] = a @ b              # this thread, while the other is in its block
    done.set()
    t.join()
    assert torch.equal(got["other"], plain)
    assert not torch.equal(got["inside"], plain)


def test_the_decorator_form():
    @lpt.emulate(matmul="fp16")
    def f(a, b):
        return a @ b
    a = torch.full((1, 4096), 1.0, dtype=torch.float16)
    b = torch.full((4096, 1), 1.0, dtype=torch.float16)
    assert f(a, b).item() == 2048.0       # FP16 accumulation stalls at 2048
    assert (a @ b).item() == 4096.0


def test_float64_products_are_torch_own():
    a, b = torch.randn(4, 5, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64)
    with lpt.emulate(gpu="h100"):
        got = a @ b
    assert torch.equal(got, a @ b)


@pytest.mark.parametrize("make, match", [
    (lambda: (torch.ones(2, 2, dtype=torch.complex64),) * 2, "complex64"),
    (lambda: (torch.ones(2, 2, dtype=torch.int64),) * 2, "int64"),
    (lambda: (torch.eye(2).to_sparse(), torch.ones(2, 2)), "sparse"),
    (lambda: (torch.ones(2, 2, device="meta"),) * 2, "meta"),
])
def test_what_cannot_be_emulated_says_so(make, match):
    a, b = make()
    with lpt.emulate(gpu="h100"), pytest.raises(TypeError, match=f"aten.mm.*{match}|{match}"):
        torch.mm(a, b)


def test_a_nested_block_computes_its_own_products():
    # The inner block's model: 1 + 2**-24 + 2**-24 is 1 added in order in FP32 (each
    # 2**-24 a tie to the even 1), 1 + 2**-23 exactly rounded once (Fraction).
    from fractions import Fraction
    a = torch.tensor([[1.0, 2.0**-24, 2.0**-24]])
    b = torch.ones(3, 1)
    exact = float(Fraction(1) + 2 * Fraction(2.0**-24))
    with lpt.emulate(matmul="fp32"):
        with lpt.emulate(matmul="exact"):
            inner = torch.mm(a, b).item()
        outer = torch.mm(a, b).item()
    assert (inner, outer) == (exact, 1.0)


@pytest.mark.parametrize("run, match", [
    (lambda: torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()(
        *(torch.randn(2, 5, 8),) * 3), "set_fastpath_enabled"),
    (lambda: torch.nn.LSTM(4, 4)(torch.randn(3, 1, 4)), "mkldnn.flags"),
    (lambda: torch.nn.Bilinear(3, 3, 2)(torch.randn(2, 3), torch.randn(2, 3)), "einsum"),
    (lambda: torch.cdist(torch.randn(30, 3), torch.randn(30, 3)), "donot_use_mm"),
    (lambda: torch.sparse.mm(torch.eye(2).to_sparse(), torch.ones(2, 2)), "to_dense"),
])
def test_fused_cpu_kernels_with_products_inside_say_so(run, match):
    with torch.no_grad(), lpt.emulate(gpu="h100"), pytest.raises(TypeError, match=match):
        run()


def test_a_split_k_callable_must_return_a_positive_int():
    a, b = torch.ones(2, 4), torch.ones(4, 2)
    for bad in (-2, 0, 1.5, "2"):
        with lpt.emulate(gpu="h100", split_k=lambda m, n, k, d, bad=bad: bad), \
                pytest.raises(ValueError, match="positive int"):
            torch.mm(a, b)


def test_tf32_set_through_torchs_newer_flags():
    # torch >= 2.9 refuses to read the legacy flags once fp32_precision is set.
    if not hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        pytest.skip("torch before 2.9 has no fp32_precision flags")
    third = torch.full((1, 1), 1 / 3)
    # 1/3 to TF32's 11 bits, nearest: 1365.33 / 4096 -> 1365 / 4096 (0b10101010101);
    # its square is exact in float64, rounded once to FP32.
    want = np.float32((1365 / 4096) ** 2)
    try:
        torch.backends.cuda.matmul.fp32_precision = "tf32"
        with lpt.emulate(gpu="h100"):
            assert torch.mm(third, third).item() == want
        torch.backends.cuda.matmul.fp32_precision = "ieee"
        with lpt.emulate(gpu="h100"):
            assert torch.mm(third, third).item() == np.float32(np.float32(1 / 3) ** 2)
    finally:
        torch.backends.cuda.matmul.fp32_precision = "none"


def test_fused_kernels_it_cannot_see_into_say_so():
    q = torch.randn(1, 2, 8, 16)
    with lpt.emulate(gpu="h100"), pytest.raises(TypeError, match="sdpa_kernel"):
        torch.nn.functional.scaled_dot_product_attention(q, q, q)


def test_attention_math_path_products_reach_the_mode():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    rng = np.random.default_rng(12)
    q, k, v = (_data((1, 2, 64, 16), torch.float16, False, rng).requires_grad_()
               for _ in range(3))
    f = torch.nn.functional.scaled_dot_product_attention
    with sdpa_kernel(SDPBackend.MATH):
        plain = f(q, k, v)
        with lpt.emulate(matmul="fp16"):
            out = f(q, k, v)
            out.float().sum().backward()
            again = f(q, k, v)
    assert torch.equal(out, again)
    assert not torch.equal(out, plain)          # FP16 accumulation
    assert q.grad is not None and torch.isfinite(q.grad).all()


@pytest.mark.parametrize("dtype, tf32", [("float32", False), ("float32", True),
                                         ("bfloat16", False), ("float16", False)])
@pytest.mark.parametrize("head, scale", [(16, None), (8, 2.0**-4)])
def test_attention_math_path_equals_its_decomposition_into_lp_matmul(dtype, tf32, head,
                                                                      scale):
    # torch's documented math: attn = softmax(q @ k^T * scale) @ v, scale defaulting to
    # 1/sqrt(head). Its CPU math path computes half types in float32 (upcast first, the
    # result cast back) and scales q and k by sqrt(scale) each: with scale a power of
    # four both are powers of two, exact on normal values, so the bits agree.
    from torch.nn.attention import SDPBackend, sdpa_kernel
    was, prec = torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision()
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    try:
        rng = np.random.default_rng(head + tf32)
        dt = getattr(torch, dtype)
        q, k, v = (_data((2, 3, 24, head), dt, False, rng) for _ in range(3))
        with sdpa_kernel(SDPBackend.MATH), lpt.emulate(gpu="h100"):
            got = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scale)
        model, fmt = ("h100", "tf32") if tf32 else ("fp32", "fp32")
        s = 1 / np.sqrt(head) if scale is None else scale
        with np.errstate(all="ignore"):
            attn = lp.matmul(_np(q), np.swapaxes(_np(k), -1, -2), model=model,
                             in_fmt=fmt, out_fmt="fp32") * s       # exact: a power of two
            p = torch.softmax(torch.from_numpy(np.asarray(attn, np.float32)), dim=-1)
            want = lp.matmul(_np(p), _np(v), model=model, in_fmt=fmt, out_fmt="fp32")
        assert got.dtype == dt
        assert_same_values(got, _rounded(want, dt))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = was
        torch.set_float32_matmul_precision(prec)


def test_bad_options_say_so():
    with pytest.raises(ValueError, match="exactly one of gpu= .* and matmul="):
        lpt.emulate()
    with pytest.raises(ValueError, match="unknown gpu"):
        lpt.emulate(gpu="k80")
    with pytest.raises(ValueError, match="split_k"):
        lpt.emulate(gpu="h100", split_k=0)


# -- _scaled_mm: scales, bias and fast accumulation ----------------------------------------

def _fp8(shape, dtype, rng):
    return torch.from_numpy(rng.standard_normal(shape) * 4).to(dtype)


@pytest.mark.parametrize("rowwise", [False, True])
@pytest.mark.parametrize("out", ["float32", "bfloat16"])
def test_scaled_mm_scales_and_bias(rowwise, out):
    rng = np.random.default_rng(6)
    e4 = torch.float8_e4m3fn
    a, b = _fp8((32, 64), e4, rng), _fp8((48, 64), e4, rng).t()
    if rowwise:
        sa = torch.from_numpy(rng.random((32, 1)) + 0.5).float()
        sb = torch.from_numpy(rng.random((1, 48)) + 0.5).float()
    else:
        sa, sb = torch.tensor(0.3), torch.tensor(1.7)
    bias = torch.from_numpy(rng.standard_normal(48)).to(getattr(torch, out))
    with lpt.emulate(gpu="h100"):
        got = torch._scaled_mm(a, b, sa, sb, bias=bias, out_dtype=getattr(torch, out))
    d = lp.matmul(_np(a), _np(b), model="h100", in_fmt="e4m3", out_fmt="fp32")
    if rowwise:
        d = lp.mul(lp.mul(d, _np(sa), "fp32"), _np(sb), "fp32")
    else:
        d = lp.mul(lp.mul(_np(sa), _np(sb), "fp32"), d, "fp32")
    d = lp.add(d, _np(bias), "fp32")
    assert_same_values(got, lp.round(d, {"float32": "fp32", "bfloat16": "bf16"}[out]))


def test_scaled_mm_without_fast_accum_promotes_every_128_products():
    rng = np.random.default_rng(8)
    e4, one = torch.float8_e4m3fn, torch.tensor(1.0)
    a, b = _fp8((16, 384), e4, rng), _fp8((16, 384), e4, rng).t()
    with lpt.emulate(gpu="h100"):
        slow = torch._scaled_mm(a, b, one, one, out_dtype=torch.float32)
        fast = torch._scaled_mm(a, b, one, one, out_dtype=torch.float32, use_fast_accum=True)
    A, B = _np(a), _np(b)
    parts = [lp.matmul(A[:, i:i + 128], B[i:i + 128], model="h100", in_fmt="e4m3")
             for i in range(0, 384, 128)]
    assert_same_values(slow, lp.add(lp.add(parts[0], parts[1], "fp32"), parts[2], "fp32"))
    assert_same_values(fast, lp.matmul(A, B, model="h100", in_fmt="e4m3"))
    assert not torch.equal(slow, fast)


def test_scaled_mm_refuses_fp8_output():
    e4, one = torch.float8_e4m3fn, torch.tensor(1.0)
    a = torch.ones(16, 16).to(e4)
    with lpt.emulate(gpu="h100"), pytest.raises(TypeError, match="out_dtype"):
        torch._scaled_mm(a, a.t(), one, one)


# -- convolutions: implicit GEMMs against a direct loop of lp.matmul -------------------------

def _model(dtype):
    name = str(dtype).removeprefix("torch.")
    return "h100", FMT[name]


def _at(x, n, c, pos):
    """x[n, c, *pos], +0 outside x (the padding)."""
    if any(not 0 <= q < s for q, s in zip(pos, x.shape[2:])):
        return 0.0
    return x[(n, c) + tuple(pos)]


def _out_size(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _positions(shape):
    import itertools
    return list(itertools.product(*[range(s) for s in shape]))


def _conv_oracle(x, w, s, p, d, groups, dtype):
    """The convolution as a loop: per image and group, the patch matrix (positions,
    K) built entry by entry, K in (input channel, kernel position) order, then one
    lp.matmul against the group's weight rows."""
    model, fmt = _model(dtype)
    n, nd = x.shape[0], x.ndim - 2
    o, cg, ks = w.shape[0], w.shape[1], w.shape[2:]
    og = o // groups
    outs = [_out_size(x.shape[2 + i], ks[i], s, p, d) for i in range(nd)]
    taps = _positions(ks)
    y = np.zeros((n, o) + tuple(outs))
    for b in range(n):
        for g in range(groups):
            cols = np.array([[_at(x, b, g * cg + c, [q * s + j * d - p for q, j in zip(pos, t)])
                              for c in range(cg) for t in taps] for pos in _positions(outs)])
            wg = w[g * og:(g + 1) * og].reshape(og, -1)
            with np.errstate(all="ignore"):
                r = lp.matmul(cols, wg.T, model=model, in_fmt=fmt, out_fmt="fp32")
            y[b, g * og:(g + 1) * og] = r.T.reshape((og,) + tuple(outs))
    return y


def _grad_input_oracle(dy, w, xshape, s, p, d, groups, dtype):
    """grad_input as the documented transposed GEMM: input position h of channel c
    sums over (output channel o, kernel tap j) the stride-dilated dy at
    h + j * d - (d * (k - 1) - p) times w[o, c, k - 1 - j]."""
    model, fmt = _model(dtype)
    n = dy.shape[0]
    o, cg, ks = w.shape[0], w.shape[1], w.shape[2:]
    og = o // groups

    def dilated(b, oc, t):
        if any(q % s or not 0 <= q // s < size for q, size in zip(t, dy.shape[2:])):
            return 0.0
        return dy[(b, oc) + tuple(q // s for q in t)]

    taps = _positions(ks)
    gi = np.zeros(xshape)
    for b in range(n):
        for g in range(groups):
            rows = np.array([[dilated(b, g * og + oc, [h + j * d - (d * (k - 1) - p)
                                                      for h, j, k in zip(pos, t, ks)])
                              for oc in range(og) for t in taps]
                             for pos in _positions(xshape[2:])])
            wk = np.array([[w[(g * og + oc, c) + tuple(k - 1 - j for j, k in zip(t, ks))]
                            for c in range(cg)] for oc in range(og) for t in taps])
            with np.errstate(all="ignore"):
                r = lp.matmul(rows, wk, model=model, in_fmt=fmt, out_fmt="fp32")
            gi[b, g * cg:(g + 1) * cg] = r.T.reshape((cg,) + tuple(xshape[2:]))
    return gi


def _grad_weight_oracle(dy, x, wshape, s, p, d, groups, dtype):
    """grad_weight: per group, dy (O/g, batch x positions) against the patches
    (batch x positions, K), the pairs in row-major order."""
    model, fmt = _model(dtype)
    n = dy.shape[0]
    o, cg, ks = wshape[0], wshape[1], wshape[2:]
    og = o // groups
    taps, pos = _positions(ks), _positions(dy.shape[2:])
    gw = np.zeros(wshape)
    for g in range(groups):
        a = np.array([[dy[(b, g * og + oc) + q] for b in range(n) for q in pos]
                      for oc in range(og)])
        cols = np.array([[_at(x, b, g * cg + c, [qq * s + j * d - p for qq, j in zip(q, t)])
                          for c in range(cg) for t in taps] for b in range(n) for q in pos])
        with np.errstate(all="ignore"):
            r = lp.matmul(a.reshape(og, -1), cols.reshape(-1, cg * len(taps)), model=model,
                          in_fmt=fmt, out_fmt="fp32")
        gw[g * og:(g + 1) * og] = r.reshape((og, cg) + tuple(ks))
    return gw


def _bias_oracle(dy):
    """Each channel's dy over (batch, position), added left to right in float32."""
    out = []
    for oc in range(dy.shape[1]):
        acc = np.float32(0.0)
        with np.errstate(all="ignore"):
            for v in np.moveaxis(dy[:, oc], 0, 0).reshape(-1):
                acc = np.float32(acc + np.float32(v))
        out.append(acc)
    return np.array(out, np.float64)


def _rounded(v, dtype):
    name = str(dtype).removeprefix("torch.")
    return lp.round(v, {"bfloat16": "bf16", "float16": "fp16"}.get(name, "fp32"))


CONVS = [  # (spatial shape, kernel, stride, padding, dilation, groups)
    ((9,), (3,), 1, 0, 1, 1), ((10,), (4,), 2, 1, 1, 2), ((11,), (3,), 3, 2, 2, 1),
    ((5, 6), (3, 3), 1, 1, 1, 1), ((7, 6), (3, 2), 2, 0, 2, 2), ((6, 7), (2, 3), 2, 3, 1, 1),
]


@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("adversarial", [False, True])
@pytest.mark.parametrize("spatial, kernel, s, p, d, groups", CONVS)
def test_convolution_forward_and_backward_equal_the_loop(dtype, adversarial, spatial, kernel,
                                                          s, p, d, groups, tf32_on):
    rng = np.random.default_rng(len(spatial) * 100 + s * 10 + p + d + groups)
    dt = getattr(torch, dtype)
    c, o = 2 * groups, 2 * groups
    x = _data((2, c) + spatial, dt, adversarial, rng).requires_grad_()
    w = _data((o, c // groups) + kernel, dt, adversarial, rng).requires_grad_()
    bias = _data((o,), dt, adversarial, rng).requires_grad_()
    conv = torch.nn.functional.conv1d if len(spatial) == 1 else torch.nn.functional.conv2d
    with lpt.emulate(gpu="h100"):
        y = conv(x, w, bias, s, p, d, groups)
        dy = _data(y.shape, dt, adversarial, rng)
        y.backward(dy)
    xv, wv, bv, dyv = _np(x), _np(w), _np(bias), _np(dy)
    with np.errstate(all="ignore"):
        want = lp.add(_conv_oracle(xv, wv, s, p, d, groups, dt),
                      bv.reshape((-1,) + (1,) * len(spatial)), "fp32")
    assert y.dtype == dt
    assert_same_values(y, _rounded(want, dt))
    gi = _grad_input_oracle(dyv, wv, xv.shape, s, p, d, groups, dt)
    assert_same_values(x.grad, _rounded(gi, dt))
    gw = _grad_weight_oracle(dyv, xv, wv.shape, s, p, d, groups, dt)
    assert_same_values(w.grad, _rounded(gw, dt))
    assert_same_values(bias.grad, _rounded(_bias_oracle(dyv), dt))


TRANSPOSED = [  # (spatial shape, kernel, stride, padding, output_padding, dilation, groups)
    ((5,), (3,), 1, 0, 0, 1, 1), ((4,), (4,), 2, 1, 1, 1, 2), ((4,), (3,), 3, 2, 1, 2, 1),
    ((3, 4), (3, 3), 2, 1, 1, 1, 1), ((4, 3), (3, 2), 2, 0, 0, 2, 2),
]


@pytest.mark.parametrize("dtype", DT)
@pytest.mark.parametrize("adversarial", [False, True])
@pytest.mark.parametrize("spatial, kernel, s, p, op, d, groups", TRANSPOSED)
def test_transposed_convolution_forward_and_backward_equal_the_loops(
        dtype, adversarial, spatial, kernel, s, p, op, d, groups, tf32_on):
    # A transposed convolution is the adjoint of the convolution with its weight: its
    # output is that convolution's grad_input (the loop `_grad_input_oracle`), its
    # grad_input the convolution itself, its grad_weight that of the convolution of
    # dy (the input) against x (the output gradient).
    rng = np.random.default_rng(len(spatial) * 100 + s * 10 + p + op + d + groups)
    dt = getattr(torch, dtype)
    c, o = 2 * groups, 2 * groups
    x = _data((2, c) + spatial, dt, adversarial, rng).requires_grad_()
    w = _data((c, o // groups) + kernel, dt, adversarial, rng).requires_grad_()
    bias = _data((o,), dt, adversarial, rng).requires_grad_()
    f = (torch.nn.functional.conv_transpose1d if len(spatial) == 1
         else torch.nn.functional.conv_transpose2d)
    with lpt.emulate(gpu="h100"):
        y = f(x, w, bias, s, p, op, groups, d)
        dy = _data(y.shape, dt, adversarial, rng)
        y.backward(dy)
    xv, wv, bv, dyv = _np(x), _np(w), _np(bias), _np(dy)
    with np.errstate(all="ignore"):
        want = lp.add(_grad_input_oracle(xv, wv, y.shape, s, p, d, groups, dt),
                      bv.reshape((-1,) + (1,) * len(spatial)), "fp32")
    assert y.dtype == dt
    assert_same_values(y, _rounded(want, dt))
    assert_same_values(x.grad, _rounded(_conv_oracle(dyv, wv, s, p, d, groups, dt), dt))
    gw = _grad_weight_oracle(xv, dyv, wv.shape, s, p, d, groups, dt)
    assert_same_values(w.grad, _rounded(gw, dt))
    assert_same_values(bias.grad, _rounded(_bias_oracle(dyv), dt))


def test_convolution_of_empty_batches_and_without_bias(tf32_on):
    bf = torch.bfloat16
    x, w = torch.zeros(0, 2, 5, 5, dtype=bf), torch.ones(3, 2, 3, 3, dtype=bf)
    with lpt.emulate(gpu="h100"):
        assert torch.nn.functional.conv2d(x, w).shape == (0, 3, 3, 3)
        y = torch.nn.functional.conv2d(torch.ones(1, 2, 5, 5, dtype=bf), w)
    assert (y == 18).all()


def test_cnn_gradients_equal_a_hand_written_lp_matmul_backward():
    rng = np.random.default_rng(3)
    bf = torch.bfloat16
    conv = torch.nn.Conv2d(1, 4, 3, padding=1).to(bf)
    lin = torch.nn.Linear(4 * 6 * 6, 3).to(bf)
    x = _data((2, 1, 6, 6), bf, False, rng)
    r = torch.from_numpy(rng.standard_normal((2, 3))).float()
    with lpt.emulate(gpu="h100"):
        out = lin(torch.relu(conv(x)).flatten(1))
        (out.float() * r).sum().backward()
    W, b = _np(conv.weight), _np(conv.bias)
    h = _rounded(lp.add(_conv_oracle(_np(x), W, 1, 1, 1, 1, bf), b.reshape(-1, 1, 1), "fp32"), bf)
    hr = np.maximum(h, 0).reshape(2, -1)
    hr_t = torch.from_numpy(hr).to(bf)
    assert_same_values(out, _want(hr_t, lin.weight.detach().t(), lin.bias.detach(), dtype=bf))
    g = r.to(bf)
    assert_same_values(lin.weight.grad, _want(g.t(), hr_t, dtype=bf))
    dh = _np(torch.from_numpy(np.asarray(_want(g, lin.weight.detach(), dtype=bf),
                                         np.float32)).to(bf)).reshape(h.shape) * (h > 0)
    gw = _grad_weight_oracle(dh, _np(x), W.shape, 1, 1, 1, 1, bf)
    assert_same_values(conv.weight.grad, _rounded(gw, bf))
    assert_same_values(conv.bias.grad, _rounded(_bias_oracle(dh), bf))


@pytest.mark.parametrize("adversarial", [False, True])
def test_fp32_operands_of_bf16_values_give_the_fp32_models_bits(adversarial):
    # The bridge multiplies FP32 operands that are all BF16 values as BF16 under an
    # accumulation model (its float32 einsum path): the same bits as FP32 operands.
    rng = np.random.default_rng(21)
    a = _data((3, 40, 70), torch.bfloat16, adversarial, rng).float()
    b = _data((3, 70, 30), torch.bfloat16, adversarial, rng).float()
    a[0, 0, :5] = 2.0**-133                        # FP32 subnormals that are BF16 values
    with lpt.emulate(matmul="fp32"):
        got = torch.bmm(a, b)
    with np.errstate(all="ignore"):
        want = lp.matmul(a.numpy(), b.numpy(), model="fp32", in_fmt="fp32", out_fmt="fp32")
    from helpers import assert_bits
    assert_bits(_np(got), np.asarray(want))


# -- operands=: the amp recipes -------------------------------------------------------------

def _amp_tensor(t):
    from lowprec.tensors import Tensor
    return Tensor(_np(t), lp.FP32)


@pytest.mark.parametrize("adversarial", [False, True])
def test_mxfp8_products_equal_the_amp_recipes_own(adversarial):
    rng = np.random.default_rng(31)
    x = _data((8, 70), torch.float32, adversarial, rng).requires_grad_()
    w = _data((70, 12), torch.float32, adversarial, rng).requires_grad_()
    dy = _data((8, 12), torch.float32, adversarial, rng)
    with lpt.emulate(operands=lp.amp.MXFP8):
        y = x @ w
        y.backward(dy)
    q = lp.amp.MXFP8.quantizer(0)
    with np.errstate(all="ignore"):
        want = q.forward(_amp_tensor(x), _amp_tensor(w), None)
        dw, dx = q.backward(_amp_tensor(dy), True)
    assert_same_values(y, want.values)
    assert_same_values(w.grad, dw.values)
    assert_same_values(x.grad, dx.values)


def test_nvfp4_forward_equals_the_amp_recipes_own_and_backward_is_deterministic():
    rng = np.random.default_rng(32)
    x = _data((6, 48), torch.float32, False, rng).requires_grad_()
    w = _data((48, 5), torch.float32, False, rng).requires_grad_()
    grads = []
    for _ in range(2):
        x.grad = w.grad = None
        with lpt.emulate(gpu="b200", operands=lp.amp.NVFP4, rng=7):
            y = x @ w
            y.sum().backward()
        grads.append((w.grad.clone(), x.grad.clone()))
    want = lp.amp.NVFP4.quantizer(0).forward(_amp_tensor(x), _amp_tensor(w), None)
    assert_same_values(y, want.values)
    assert all(torch.equal(a, b) for a, b in zip(*grads))


def test_recipe_products_of_batches_and_convolutions_run_per_matrix():
    rng = np.random.default_rng(33)
    a = _data((3, 4, 40), torch.bfloat16, False, rng)
    b = _data((3, 40, 5), torch.bfloat16, False, rng)
    with lpt.emulate(operands=lp.amp.MXFP8):
        got = torch.bmm(a, b)
        conv = torch.nn.functional.conv1d(_data((2, 4, 9), torch.float32, False, rng),
                                          _data((3, 4, 3), torch.float32, False, rng))
    assert conv.shape == (2, 3, 7)
    for i in range(3):
        qa = lp.mx.quantize(_np(a[i]), "mxfp8_e4m3", axis=1, scale_rule="rceil")
        qb = lp.mx.quantize(_np(b[i]), "mxfp8_e4m3", axis=0, scale_rule="rceil")
        assert_same_values(got[i], lp.round(lp.mx.matmul(qa, qb), "bf16"))


class _DelayedOracle:
    """DelayedScaling written out from its documented rule: per product and operand,
    scale = recipe.scale(the amaxes of the earlier steps), q = fp8(fl32(v * scale))
    saturated, the product through the FP8 model, times fl32(1/s_a * 1/s_b) in FP32."""

    def __init__(self, recipe):
        self.r, self.state = recipe, {}

    def operand(self, key, v, kind):
        hist, scale = self.state.get(key, ([0.0] * self.r.history, 1.0))
        fmt = self.r.formats[kind]
        with np.errstate(all="ignore"):
            q = lp.round(np.float32(v * scale).astype(np.float64), fmt, saturate=True)
        amax = float(np.float32(np.abs(v).max()))
        hist = (hist + [amax])[-self.r.history:]
        self.state[key] = (hist, self.r.scale(hist, scale, kind))
        return q, fmt, float(np.float32(1 / scale))

    def product(self, key, a, ka, b, kb):
        qa, fa, ia = self.operand((key, 0), a, ka)
        qb, fb, ib = self.operand((key, 1), b, kb)
        names = {lp.FP8_E4M3: "float8_e4m3fn", lp.FP8_E5M2: "float8_e5m2"}
        model, fmt = lpt.model_for("h100", names[fa], names[fb])
        with np.errstate(all="ignore"):
            d = lp.matmul(qa, qb, model=model, in_fmt=fmt, out_fmt="fp32")
            return lp.mul(d, float(np.float32(ia * ib)), "fp32")


def test_delayed_scaling_follows_each_products_amax_history():
    rng = np.random.default_rng(34)
    recipe = lp.amp.DelayedScaling(history=2)
    oracle = _DelayedOracle(recipe)
    w = _data((48, 6), torch.float32, False, rng).requires_grad_()
    em = lpt.emulate(gpu="h100", operands=recipe)
    for step in range(4):             # amaxes grow, then shrink: the history's max rules
        x = (_data((5, 48), torch.float32, False, rng) * [1, 40, 3, 0.01][step])
        x.requires_grad_()
        w.grad = None
        dy = _data((5, 6), torch.float32, False, rng)
        with em:
            y = x @ w
            y.backward(dy)
        xv, wv, dyv = _np(x), _np(w), _np(dy)
        assert_same_values(y, oracle.product("y", xv, "x", wv, "w"))
        assert_same_values(x.grad, oracle.product("dx", dyv, "dy", wv.T, "w"))
        assert_same_values(w.grad, oracle.product("dw", xv.T, "x", dyv, "dy"))
    assert not torch.equal(y, x.detach() @ w.detach())


def test_delayed_scaling_of_two_gradients_takes_e4m3_for_the_second(monkeypatch):
    # Attention's backward multiplies two gradients; cuBLAS has no E5M2 x E5M2 kernel.
    from torch.nn.attention import SDPBackend, sdpa_kernel
    seen = []
    real = lpt._delayed_product

    def spy(em, a, b, dtype, split, kinds):
        seen.append(kinds)
        return real(em, a, b, dtype, split, kinds)

    monkeypatch.setattr(lpt, "_delayed_product", spy)
    torch.manual_seed(35)
    net = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    with sdpa_kernel(SDPBackend.MATH), lpt.emulate(
            gpu="h100", operands=lp.amp.DelayedScaling()), \
            torch.autocast("cpu", dtype=torch.bfloat16):
        net(torch.randn(1, 6, 16)).float().pow(2).sum().backward()
    assert ("dy", "dy") in seen
    assert all(torch.isfinite(p.grad).all() for p in net.parameters())


def test_recipe_options_that_cannot_work_say_so():
    with pytest.raises(ValueError, match="exactly one of gpu="):
        lpt.emulate(operands=lp.amp.DelayedScaling())
    with pytest.raises(ValueError, match="FP8 Tensor Cores"):
        lpt.emulate(gpu="a100", operands=lp.amp.DelayedScaling())
    with pytest.raises(ValueError, match="b200/tcgen05"):
        lpt.emulate(gpu="h100", operands=lp.amp.MXFP8)
    with pytest.raises(ValueError, match="leave matmul= out"):
        lpt.emulate(matmul="fp32", operands=lp.amp.MXFP8)
    with pytest.raises(TypeError, match="amp recipe"):
        lpt.emulate(operands="mxfp8")
