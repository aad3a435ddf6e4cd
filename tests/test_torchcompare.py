"""lowprec.torch.compare: a model's error per module on each emulated GPU.

The oracles: a tiny MLP run by hand, in float64 NumPy (the reference) and, for each
GPU, as the bridge's contract says (operands cast to BF16 by torch, `lp.matmul` with
the GPU's model to FP32, the bias added in IEEE float32, torch's cast to BF16); and
distances in ulps counted by searching the sorted list of every BF16 value.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

import lowprec as lp
from helpers import parse_html
from peers import optional, requires

torch = optional("torch")
pytestmark = requires("torch")
lpt = optional("lowprec.torch")
tc = optional("lowprec.torchcompare")

GPUS = ("v100", "a100", "h100", "b200")
#: The model each GPU's cuBLAS runs BF16 products on (V100 has no BF16 Tensor Cores).
BF16_MODELS = {"v100": "fp32", "a100": "a100", "h100": "h100", "b200": "b200"}


def _mlp(seed=0, k=96):
    """Linear, ReLU, Linear, whose first layer weighs features 0 and 1 alike."""
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(k, 48), torch.nn.ReLU(),
                              torch.nn.Linear(48, 10)).eval()
    with torch.no_grad():
        net[0].weight[:, 1] = net[0].weight[:, 0]
    return net


def _inputs(seed=1, n=16, k=96):
    """Normal inputs with two outlier features that cancel in the first layer: the
    GPUs' alignments of the products to the largest one differ."""
    x = torch.randn(n, k, generator=torch.Generator().manual_seed(seed))
    if k > 2:
        x[:, 0], x[:, 1] = 2.0**14, -(2.0**14)
    return x


def _params(net):
    return [p.detach().double().numpy() for p in net.parameters()]


def _reference(net, x):
    """The MLP in float64 NumPy: each module's output."""
    w1, b1, w2, b2 = _params(net)
    h = x.double().numpy() @ w1.T + b1
    a = np.maximum(h, 0)
    return [h, a, a @ w2.T + b2]


def _bf16(v):
    return torch.from_numpy(np.asarray(v, np.float32)).to(torch.bfloat16)


def _gpu(net, x, gpu):
    """The MLP as the bridge runs it under bf16 autocast on ``gpu``: BF16 tensors."""
    model = lp.MODELS[BF16_MODELS[gpu]]
    w1, b1, w2, b2 = (p.detach().to(torch.bfloat16) for p in net.parameters())

    def linear(a, w, b):
        d = lp.matmul(a.float().numpy(), w.float().numpy().T, model=model, in_fmt="bf16",
                      out_fmt="fp32")
        # beta == 1: C added by one FP32 addition (IEEE float32 in NumPy).
        return _bf16(np.asarray(d, np.float32) + b.float().numpy())

    h = linear(x.to(torch.bfloat16), w1, b1)
    a = torch.relu(h)
    return [h, a, linear(a, w2, b2)]


def _every_bf16():
    patterns = torch.arange(2**16, dtype=torch.int32).to(torch.int16)
    v = patterns.view(torch.bfloat16).double().numpy()
    return np.unique(v[np.isfinite(v)])      # +0 and -0 one value


BF16_VALUES = None


def _ulps(a, b):
    global BF16_VALUES
    if BF16_VALUES is None:
        BF16_VALUES = _every_bf16()
    ia = np.searchsorted(BF16_VALUES, a.double().numpy())
    ib = np.searchsorted(BF16_VALUES, b.double().numpy())
    return np.abs(ia - ib)


def _no_pandas(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)     # import pandas raises


def test_errors_and_disagreements_match_the_mlp_run_by_hand(monkeypatch):
    _no_pandas(monkeypatch)
    net, x = _mlp(), _inputs()
    table = lpt.compare(net, x, GPUS)
    assert isinstance(table, tc.CompareTable)
    assert [r["module"] for r in table] == ["0", "1", "2", "(model)"]
    assert [r["type"] for r in table] == ["Linear", "ReLU", "Linear", "Sequential"]
    assert table["module"] == ["0", "1", "2", "(model)"]     # a column, as a DataFrame's
    with pytest.raises(KeyError, match="no column 'modul'"):
        table["modul"]
    ref = _reference(net, x)
    ref.append(ref[-1])
    outs = {g: _gpu(net, x, g) for g in GPUS}
    for o in outs.values():
        o.append(o[-1])
    first = None
    for i, row in enumerate(table):
        assert row["dtype"] == "bfloat16" and row["shape"] == ref[i].shape
        for g in GPUS:
            y = outs[g][i].double().numpy()
            want = math.sqrt(((y - ref[i]) ** 2).sum()) / math.sqrt((ref[i] ** 2).sum())
            # The two float64 references sum in different orders: within 1e-9.
            assert row[f"err_{g}"] == pytest.approx(want, rel=1e-9, abs=0)
        ulps = max(int(_ulps(outs[a][i], outs[b][i]).max()) for a in GPUS for b in GPUS)
        assert row["ulps"] == ulps
        assert row["bits"] == (0 if ulps == 0 else math.floor(math.log2(ulps)) + 1)
        if ulps and first is None:
            first = i
        assert row["first"] == (i == first)
        together = [[g for g in GPUS if torch.equal(outs[g][i], outs[h][i])] for h in GPUS]
        groups = sorted({" = ".join(s).replace(" ", "") for s in together})
        assert sorted(row["groups"].split(" | ")) == groups
    assert first is not None, "the GPUs should disagree on this MLP (the test's premise)"


def test_plain_fp32_products_agree_on_every_gpu(monkeypatch):
    # Without autocast and with TF32 off, every GPU runs the sequential FP32 model.
    _no_pandas(monkeypatch)
    net, x = _mlp(), _inputs()
    assert not torch.backends.cuda.matmul.allow_tf32
    table = lpt.compare(net, x, GPUS, dtype=None)
    assert all(r["ulps"] == 0 and r["bits"] == 0 and not r["first"] for r in table)
    assert all(r["groups"] == "=".join(GPUS) and r["dtype"] == "float32" for r in table)
    ref = _reference(net, x)
    assert 0 < table[0]["err_h100"] < 2**-20     # FP32 products against float64
    assert len(ref) + 1 == len(table)


def test_the_callers_model_inputs_and_rng_are_left_as_they_were(monkeypatch):
    _no_pandas(monkeypatch)
    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8),
                              torch.nn.Dropout(0.5))
    x = _inputs(k=8)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    x0, rng = x.clone(), torch.get_rng_state()
    table = lpt.compare(net, x, ("h100", "b200"))
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    assert torch.equal(x, x0) and torch.equal(torch.get_rng_state(), rng)
    # Dropout draws the same mask on every run (the same seed): the GPUs' outputs
    # after it (kept values doubled, exactly) differ no more than before it.
    assert [r["type"] for r in table] == ["Linear", "BatchNorm1d", "Dropout", "Sequential"]
    assert table[2]["ulps"] <= table[1]["ulps"]


def test_ulp_distance_counts_the_values_between():
    rng = np.random.default_rng(5)
    v = rng.standard_normal(4000) * 2.0 ** rng.integers(-140, 120, 4000)
    a, b = _bf16(v), _bf16(v * (1 + rng.standard_normal(4000) * 0.05))
    special = _bf16([0.0, -0.0, 2**-133, -(2**-133), 3e38, np.inf, -np.inf])
    a = torch.cat([a, special, special.flip(0)])
    b = torch.cat([b, special.flip(0), special])
    fine = torch.isfinite(a) & torch.isfinite(b)
    got = tc.ulp_distance(a, b)
    np.testing.assert_array_equal(got[fine.numpy()], _ulps(a[fine], b[fine]))
    nan = torch.tensor([float("nan")] * 2, dtype=torch.bfloat16)
    assert tc.ulp_distance(nan, nan).tolist() == [0, 0]
    one = torch.tensor([1.0, 1.0], dtype=torch.float32)
    assert tc.ulp_distance(one, torch.nextafter(one, one * 2)).tolist() == [1, 1]
    with pytest.raises(ValueError, match="one dtype and shape"):
        tc.ulp_distance(one, one.double())


def test_the_table_prints_and_shows_as_html(monkeypatch):
    _no_pandas(monkeypatch)
    table = lpt.compare(_mlp(), _inputs(), ("a100", "h100"))
    text = str(table).splitlines()
    assert text[0].split() == ["module", "type", "dtype", "shape", "err_a100", "err_h100",
                               "ulps", "bits", "groups", "first"]
    assert [line.split()[0] for line in text[1:]] == ["0", "1", "2", "(model)"]
    tree = parse_html(table._repr_html_())
    assert "err_h100" in "".join(tree.text) and "(model)" in "".join(tree.text)


@requires("pandas")
def test_a_dataframe_where_pandas_is_installed():
    frame = lpt.compare(_mlp(), _inputs(), ("a100", "h100"))
    assert list(frame["module"]) == ["0", "1", "2", "(model)"]
    assert "err_h100" in frame.columns


def test_bad_arguments_say_so():
    net, x = _mlp(), _inputs()
    with pytest.raises(TypeError, match="torch.nn.Module"):
        lpt.compare(lambda t: t, x)
    with pytest.raises(TypeError, match="inputs must be"):
        lpt.compare(net, x.numpy())
    with pytest.raises(ValueError, match="gpus must name"):
        lpt.compare(net, x, ("k80",))
    with pytest.raises(ValueError, match="twice"):
        lpt.compare(net, x, ("h100", "h100"))
    with pytest.raises(ValueError, match="reference must be"):
        lpt.compare(net, x, reference="fp32")
    with pytest.raises(ValueError, match="autocast dtype"):
        lpt.compare(net, x, dtype=torch.float8_e4m3fn)


def test_inputs_come_back_unchanged_and_every_run_starts_from_them():
    # An in-place module: without copies, the caller's input would grow by 1 per run
    # and each GPU after the first would see a grown one (its error then nonzero).
    class AddOne(torch.nn.Module):
        def forward(self, x):
            return x.add_(1.0)

    x = torch.tensor([[-1.0, 2.0, -3.0, 4.0]])
    table = lpt.compare(torch.nn.Sequential(AddOne()), x, ("a100", "h100", "b200"),
                        dtype=None)
    assert torch.equal(x, torch.tensor([[-1.0, 2.0, -3.0, 4.0]]))
    rows = table.to_dict("records") if hasattr(table, "to_dict") else table
    assert all(r[f"err_{g}"] == 0 for r in rows for g in ("a100", "h100", "b200"))


def test_attention_under_no_grad_reaches_the_gpus():
    # compare runs under no_grad, where nn.MultiheadAttention would take its fused
    # fast path; compare turns it off, so the products are the GPUs' (they differ
    # from float64) and the caller's setting comes back.
    from torch.nn.attention import SDPBackend, sdpa_kernel
    torch.manual_seed(1)
    mha = torch.nn.MultiheadAttention(16, 2, batch_first=True).eval()

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = mha

        def forward(self, x):
            with sdpa_kernel(SDPBackend.MATH):
                return self.attn(x, x, x)[0]

    import lowprec.torch as module
    calls = []
    original = module.matmul

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    before = torch.backends.mha.get_fastpath_enabled()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(module, "matmul", counting)
        lpt.compare(Net(), torch.randn(2, 5, 16), ("h100",))
    # in-projection, q k^T, softmax v, out-projection: the fused path shows none
    assert len(calls) >= 4
    assert torch.backends.mha.get_fastpath_enabled() == before
