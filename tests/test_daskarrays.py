"""lowprec.daskarrays: Dask arrays in, Dask arrays out, bit for bit the NumPy call on
the gathered arrays (values and NaN bits), for every chunking; lazy until computed.

The oracle of every test is the NumPy-array call of lowprec (`lp.round`, `lp.sum`,
`lp.matmul`, ...), which its own tests hold to the Fraction reference; here the
question is only whether chunking changes anything. The "sr" tests rely on the
counter-based stochastic-rounding contract (``offset=``, one seed per call).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="the dask extra is not installed")

import lowprec as lp  # noqa: E402
import lowprec.daskarrays as lpd  # noqa: E402
from helpers import assert_bits  # noqa: E402

MODES = ("rne", "rz", "ro")


def get(x):
    return np.asarray(x.compute(scheduler="sync"))


def data(shape, seed=0, specials=True):
    """Values over a wide range, with ties of BF16 and FP16, NaN, ±inf, ±0 and
    subnormals of FP16."""
    g = np.random.default_rng(seed)
    x = g.standard_normal(shape) * 2.0 ** g.integers(-26, 18, shape)
    flat = x.reshape(-1)
    n = flat.size
    if specials and n >= 12:
        flat[g.choice(n, 8, replace=False)] = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0,
                                               1 + 2.0**-8, 2.0**-25]
    return x


CHUNKS_1D = [(37,), 5, 1, (10, 3, 24), (16, 16, 5)]
CHUNKS_2D = [((3, 4), (2, 7)), 1, ((7,), (4, 5)), ((1, 6), (9,))]


# -- elementwise -------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES + ("rna", "ru", "rd"))
@pytest.mark.parametrize("chunks", CHUNKS_2D)
def test_round_and_encode(mode, chunks):
    x = data((7, 9))
    for fmt in ("bf16", "fp16", "e4m3"):
        assert_bits(get(lpd.round(da.from_array(x, chunks=chunks), fmt, mode)),
                    lp.round(x, fmt, mode))
        y = np.where(np.isnan(x), 0.0, x) if fmt == "e4m3" else x
        got = get(lpd.encode(da.from_array(y, chunks=chunks), fmt, mode, saturate=True))
        want = lp.encode(y, fmt, mode, saturate=True)
        assert got.dtype == want.dtype
        assert_bits(got, want)


def test_round_options_and_decode():
    x = data((37,))
    assert_bits(get(lpd.round(da.from_array(x, chunks=5), "fp16", "rz", subnormals=False)),
                lp.round(x, "fp16", "rz", subnormals=False))
    bits = np.arange(2**16, dtype=np.uint16)
    for chunks in (4096, (1, 2**16 - 1), 30000):
        assert_bits(get(lpd.decode(da.from_array(bits, chunks=chunks), "fp16")),
                    lp.decode(bits, "fp16"))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("chunks", CHUNKS_2D)
def test_elementwise_broadcasting(mode, chunks):
    a, b, c = data((7, 9), 1), data((9,), 2), data((7, 1), 3)
    A = da.from_array(a, chunks=chunks)
    B = da.from_array(b, chunks=3)
    C = da.from_array(c, chunks=(chunks if isinstance(chunks, int) else (chunks[0], 1)))
    for name in ("add", "sub", "mul", "div"):
        f, g = getattr(lpd, name), getattr(lp, name)
        assert_bits(get(f(A, B, "bf16", mode)), g(a, b, "bf16", mode))
        assert_bits(get(f(0.1, A, "fp16", mode)), g(0.1, a, "fp16", mode))
        assert_bits(get(f(A, b, "fp16", mode)), g(a, b, "fp16", mode))    # a NumPy operand
    assert_bits(get(lpd.sqrt(A, "bf16", mode)), lp.sqrt(a, "bf16", mode))
    assert_bits(get(lpd.fma(A, B, C, "bf16", mode)), lp.fma(a, b, c, "bf16", mode))


# -- reductions --------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("order", ("pairwise", "sequential", "kahan"))
def test_sum_1d(order, mode):
    for n in (37, 2, 1, 64, 65):
        x = data((n,), n, specials=False)
        for chunks in (CHUNKS_1D if n == 37 else (1, 3, 16, 17)):
            assert_bits(get(lpd.sum(da.from_array(x, chunks=chunks), "bf16", mode, order=order)),
                        lp.sum(x, "bf16", mode, order=order))


def test_sum_1d_specials_and_dtypes():
    x = data((37,))
    for order in ("pairwise", "sequential", "kahan"):
        for chunks in CHUNKS_1D:
            assert_bits(get(lpd.sum(da.from_array(x, chunks=chunks), "fp16", order=order)),
                        lp.sum(x, "fp16", order=order))
    for dtype in (np.float16, np.float32, np.int64):
        y = (data((37,), 4, specials=False) * 2.0**-12).astype(dtype) if dtype != np.int64 \
            else (data((37,), 4, specials=False) * 2.0**40).astype(dtype)
        for order in ("pairwise", "sequential"):
            assert_bits(get(lpd.sum(da.from_array(y, chunks=(1, 12, 24)), "bf16", order=order)),
                        lp.sum(y, "bf16", order=order))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("order", ("pairwise", "sequential", "kahan"))
@pytest.mark.parametrize("axis", (None, 0, 1, (0, 1), -1))
def test_sum_nd(order, mode, axis):
    x = data((6, 21), 5, specials=False)
    for chunks in (((2, 4), (8, 8, 5)), 1, ((6,), (3, 3, 15))):
        assert_bits(get(lpd.sum(da.from_array(x, chunks=chunks), "bf16", mode, axis=axis,
                                order=order)), lp.sum(x, "bf16", mode, axis=axis, order=order))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("order, fused", [("sequential", False), ("sequential", True),
                                          ("pairwise", False), ("kahan", False)])
def test_dot(order, fused, mode):
    a, b = data((3, 37), 6), data((37,), 7, specials=False)
    for chunks in (((1, 2), (10, 3, 24)), 1, ((3,), (16, 16, 5))):
        assert_bits(get(lpd.dot(da.from_array(a, chunks=chunks), da.from_array(b, chunks=4), "bf16",
                                mode, order=order, fused=fused)),
                    lp.dot(a, b, "bf16", mode, order=order, fused=fused))
    assert_bits(get(lpd.dot(da.from_array(b, chunks=5), da.from_array(b, chunks=7), "fp16", mode,
                            order=order, fused=fused)),
                lp.dot(b, b, "fp16", mode, order=order, fused=fused))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("axis", (-1, 0, None))
def test_cumsum(axis, mode):
    x = data((5, 37), 8)
    for chunks in (((2, 3), (10, 3, 24)), 1, ((5,), (1, 36))):
        assert_bits(get(lpd.cumsum(da.from_array(x, chunks=chunks), "bf16", mode, axis=axis)),
                    lp.cumsum(x, "bf16", mode, axis=axis))
    y = data((37,), 9)
    for chunks in CHUNKS_1D:
        assert_bits(get(lpd.cumsum(da.from_array(y, chunks=chunks), "fp16", mode)),
                    lp.cumsum(y, "fp16", mode))


# -- matmul ------------------------------------------------------------------------

def _model_formats():
    """(model, in_fmt, out_fmt) for every model of lp.MODELS: its first input format
    and each of its output formats."""
    from lowprec.tensorcore.instructions import MatrixUnit
    from lowprec.tensorcore.models import Accumulating, MultiPass, TensorCoreModel
    out = []
    for name, m in lp.MODELS.items():
        if isinstance(m, Accumulating):
            out += [(name, "bf16", None), (name, "fp16", "bf16")]
        elif isinstance(m, MultiPass):
            out.append((name, "fp32", None))
        elif isinstance(m, TensorCoreModel):
            for fi in [m.inputs[0]] + [v[0] for v in m.variants or ()][-1:]:
                out += [(name, fi.name, fo.name) for fo in m.for_format(fi).out_formats(fi)]
        elif isinstance(m, MatrixUnit):
            ins = next(i for i in m.instructions if not i.scales)
            out += [(name, ins.inputs[0].name, fo.name) for fo in ins.outputs]
    return out


@pytest.mark.parametrize("model, in_fmt, out_fmt", _model_formats())
def test_matmul_every_model(model, in_fmt, out_fmt):
    g = np.random.default_rng(10)
    M, N = 3, 4
    mult = lpd.k_multiple(model, in_fmt)
    K = 3 * (mult or 8) + 5
    a = lp.round(g.standard_normal((M, K)) * 2.0 ** g.integers(-6, 6, (M, K)), in_fmt)
    b = lp.round(g.standard_normal((K, N)) * 2.0 ** g.integers(-6, 6, (K, N)), in_fmt)
    a[0, 3] = np.inf
    c = lp.round(g.standard_normal((M, N)), "fp32")
    if mult is None:
        kchunks = [(K,)]
    else:
        kchunks = [(mult, 2 * mult, K - 3 * mult), (mult,) * 3 + (5,), (K,)]
    for ci, kc in enumerate(kchunks):
        A = da.from_array(a, chunks=((1, 2), kc))
        B = da.from_array(b, chunks=(kc[::-1] if ci == 0 else kc, (1, 3)))   # rechunked to a's
        for cc in (None, c):
            want = lp.matmul(a, b, model=model, c=cc, in_fmt=in_fmt, out_fmt=out_fmt)
            got = lpd.matmul(A, B, model=model, c=cc, in_fmt=in_fmt, out_fmt=out_fmt)
            assert_bits(get(got), want)
    if mult is None:
        A = da.from_array(a, chunks=(M, 8))
        with pytest.raises(ValueError, match="cannot be chained"):
            lpd.matmul(A, da.from_array(b), model=model, in_fmt=in_fmt, out_fmt=out_fmt)
    elif mult > 1:
        A = da.from_array(a, chunks=(M, mult + 1))
        with pytest.raises(ValueError, match=f"multiple of {mult}"):
            lpd.matmul(A, da.from_array(b), model=model, in_fmt=in_fmt, out_fmt=out_fmt)


def test_matmul_dtypes_say_the_format():
    g = np.random.default_rng(11)
    a = g.standard_normal((4, 40)).astype(np.float16)
    b = g.standard_normal((40, 3)).astype(np.float16)
    for model in ("fp32", "fp16", "a100"):
        assert_bits(get(lpd.matmul(da.from_array(a, chunks=(2, 8)), da.from_array(b, chunks=8),
                                   model=model)), lp.matmul(a, b, model=model))
    with pytest.raises(ValueError, match="in_fmt"):
        lpd.matmul(da.from_array(a.astype(np.float64)), da.from_array(b.astype(np.float64)))


# -- errors and laziness -----------------------------------------------------------

def test_errors_are_raised_when_the_graph_is_built():
    x = da.ones(5, chunks=2)
    with pytest.raises(ValueError, match="mode"):
        lpd.round(x, "bf16", "nearest")
    with pytest.raises(TypeError, match="saturate"):
        lpd.add(x, x, "bf16", saturate="no")
    with pytest.raises(ValueError, match="order"):
        lpd.sum(x, "bf16", order="tree")
    with pytest.raises(ValueError):
        lpd.sum(x, "bf16", axis=1)
    with pytest.raises(ValueError, match="unknown"):
        lpd.round(x, "fp17")
    with pytest.raises(TypeError, match="Dask"):
        lpd.add(1.0, np.ones(3), "bf16")
    with pytest.raises(ValueError, match="2-D"):
        lpd.matmul(da.ones((2, 2, 2)), da.ones((2, 2)), in_fmt="bf16")


def test_lazy_until_computed():
    calls = []

    def source(block):
        calls.append(block.shape)
        return block

    x = da.map_blocks(source, da.from_array(data((6, 16), 12, specials=False), chunks=(3, 4)),
                      dtype=np.float64, meta=np.empty((0, 0)))
    graphs = [lpd.round(x, "bf16"), lpd.add(x, x, "fp16"), lpd.sum(x, "bf16"),
              lpd.sum(x, "bf16", axis=1, order="sequential"), lpd.cumsum(x, "bf16"),
              lpd.dot(x, x, "bf16"), lpd.matmul(x, x.T, model="fp32", in_fmt="bf16"),
              lpd.tensor(x, "bf16") * 3.0]
    assert calls == []
    for gr in graphs:
        gr.compute(scheduler="sync") if hasattr(gr, "compute") else None
    assert len(calls) > 0


def test_missing_dask_raises_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask.array", None)
    with pytest.raises(ImportError, match=r'pip install -e "\.\[dask\]"'):
        lpd.round(np.ones(3), "bf16")


# -- lazy tensors ------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_lazy_tensor(mode):
    x, y = data((6, 16), 13, specials=False), data((16,), 14, specials=False)
    X, Y = da.from_array(x, chunks=(2, 8)), da.from_array(y, chunks=3)
    with lp.context(mode=mode, matmul="a100"):
        tx, ty = lp.tensor(x, "bf16"), lp.tensor(y, "fp16")
        lx, ly = lpd.tensor(X, "bf16"), lpd.tensor(Y, "fp16")
        pairs = [(lx + ly, tx + ty), (lx - 0.1, tx - 0.1), (3.0 * lx, 3.0 * tx),
                 (lx / ly, tx / ty), (-lx, -tx), (abs(lx), abs(tx)),
                 (abs(lx).sqrt(), np.sqrt(abs(tx))), (lx.sum(), tx.sum()),
                 (lx.sum(axis=0), tx.sum(axis=0)), (2.0 - ly, 2.0 - ty),
                 (lx @ lpd.tensor(X.T, "bf16"), tx @ tx.T)]
    for lazy, eager in pairs:
        got = lazy.compute(scheduler="sync")
        assert got.fmt == eager.fmt
        assert_bits(got.values, eager.values)


# -- "sr": the counter-based contract ----------------------------------------------

def test_sr_round_and_arith_any_chunking():          # needs the sr contract (offset=)
    x = data((7, 9), 15)
    for chunks in CHUNKS_2D:
        X = da.from_array(x, chunks=chunks)
        assert_bits(get(lpd.round(X, "bf16", "sr", rng=5)), lp.round(x, "bf16", "sr", rng=5))
        got, want = get(lpd.encode(X, "fp16", "sr", rng=5)), lp.encode(x, "fp16", "sr", rng=5)
        assert got.dtype == want.dtype
        assert_bits(got, want)
        g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
        assert_bits(get(lpd.round(X, "bf16", "sr", rng=g1, sr_bits=4)),
                    lp.round(x, "bf16", "sr", rng=g2, sr_bits=4))
        assert g1.integers(1 << 30) == g2.integers(1 << 30)    # one draw each
        b = data((9,), 16)
        assert_bits(get(lpd.add(X, da.from_array(b, chunks=4), "bf16", "sr", rng=7)),
                    lp.add(x, b, "bf16", "sr", rng=7))
        assert_bits(get(lpd.fma(X, b, 1.0, "bf16", "sr", rng=7)),
                    lp.fma(x, b, 1.0, "bf16", "sr", rng=7))


def test_sr_reductions_any_chunking():               # needs the sr contract (offset=)
    x = data((37,), 17, specials=False)
    x2 = data((4, 37), 18, specials=False)
    for chunks in CHUNKS_1D:
        X = da.from_array(x, chunks=chunks)
        assert_bits(get(lpd.sum(X, "bf16", "sr", order="sequential", rng=9)),
                    lp.sum(x, "bf16", "sr", order="sequential", rng=9))
        assert_bits(get(lpd.cumsum(X, "bf16", "sr", rng=9)), lp.cumsum(x, "bf16", "sr", rng=9))
        for order in ("pairwise", "kahan"):
            assert_bits(get(lpd.sum(X, "bf16", "sr", order=order, rng=9)),
                        lp.sum(x, "bf16", "sr", order=order, rng=9))
        assert_bits(get(lpd.dot(X, X, "bf16", "sr", rng=9)), lp.dot(x, x, "bf16", "sr", rng=9))
        X2 = da.from_array(x2, chunks=(2, chunks if isinstance(chunks, int) else chunks[0]))
        assert_bits(get(lpd.sum(X2, "bf16", "sr", axis=1, order="sequential", rng=9)),
                    lp.sum(x2, "bf16", "sr", axis=1, order="sequential", rng=9))
        assert_bits(get(lpd.cumsum(X2, "bf16", "sr", axis=0, rng=9)),
                    lp.cumsum(x2, "bf16", "sr", axis=0, rng=9))


def test_sr_lazy_tensor_draws_like_eager_tensors():  # needs the sr contract
    x = data((6, 16), 19, specials=False)
    with lp.context(mode="sr", rng=21):
        eager = (lp.tensor(x, "bf16") * 0.1 + 1.0).sum()
    with lp.context(mode="sr", rng=21):
        lazy = (lpd.tensor(da.from_array(x, chunks=(4, 5)), "bf16") * 0.1 + 1.0).sum()
    assert_bits(lazy.compute(scheduler="sync").values, eager.values)


# -- a two-process cluster ---------------------------------------------------------

@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       dashboard_address=None, host="127.0.0.1")
    cl = distributed.Client(cluster)
    yield cl
    cl.close()
    cluster.close()


def test_on_a_local_cluster(client):
    x = data((8, 40), 20)
    X = da.from_array(x, chunks=(3, 16))
    run = lambda arr: np.asarray(client.compute(arr).result())   # noqa: E731
    for mode in ("rne", "rna", "rz", "ru", "rd", "ro"):
        assert_bits(run(lpd.round(X, "bf16", mode)), lp.round(x, "bf16", mode))
    assert_bits(run(lpd.add(X, x[0], "fp16", "rz")), lp.add(x, x[0], "fp16", "rz"))
    assert_bits(run(lpd.sum(X, "bf16", axis=1, order="sequential")),
                lp.sum(x, "bf16", axis=1, order="sequential"))
    assert_bits(run(lpd.cumsum(X, "bf16", "ro")), lp.cumsum(x, "bf16", "ro"))
    y = lp.round(np.where(np.isfinite(x), x, 1.0), "bf16")
    Y = da.from_array(y, chunks=(3, 16))
    for model in ("fp32", "h100", "a100/mma"):
        assert_bits(run(lpd.matmul(Y, Y.T, model=model, in_fmt="bf16")),
                    lp.matmul(y, y.T, model=model, in_fmt="bf16"))
    # "sr" in worker processes: counter-based, so every chunking gives the NumPy call's
    for chunks in ((3, 16), (8, 7), (1, 40)):
        Z = da.from_array(x, chunks=chunks)
        assert_bits(run(lpd.round(Z, "bf16", "sr", rng=8)), lp.round(x, "bf16", "sr", rng=8))
        assert_bits(run(lpd.mul(Z, 0.3, "e4m3", "sr", rng=8)), lp.mul(x, 0.3, "e4m3", "sr", rng=8))
    v = x[np.isfinite(x)].ravel()
    for chunks in (37, 100):
        V = da.from_array(v, chunks=chunks)
        assert_bits(run(lpd.sum(V, "bf16", "sr", order="sequential", rng=3)),
                    lp.sum(v, "bf16", "sr", order="sequential", rng=3))
        assert_bits(run(lpd.cumsum(V, "fp16", "sr", rng=3)), lp.cumsum(v, "fp16", "sr", rng=3))
    # the other functions, in worker processes
    W = da.from_array(v, chunks=41)
    w = np.abs(v) + 0.5
    Wp = da.from_array(w, chunks=53)
    assert_bits(run(lpd.decode(lpd.encode(W, "e5m2", "ro"), "e5m2")),
                lp.decode(lp.encode(v, "e5m2", "ro"), "e5m2"))
    for fn, args in ((lpd.sub, (W, Wp)), (lpd.div, (W, Wp)), (lpd.sqrt, (Wp,)),
                     (lpd.fma, (W, Wp, W))):
        want = getattr(lp, fn.__name__)(*(a.compute() for a in args), "bf16", "rz")
        assert_bits(run(fn(*args, "bf16", "rz")), want)
    assert_bits(run(lpd.dot(W, Wp, "fp16", fused=True)), lp.dot(v, w, "fp16", fused=True))
    for order in ("pairwise", "kahan"):
        assert_bits(run(lpd.sum(W, "bf16", order=order)), lp.sum(v, "bf16", order=order))
    t = lpd.tensor(W, "fp16")
    u = lp.tensor(v, "fp16")
    assert_bits(np.asarray(client.compute((t * t - t).values).result()), (u * u - u).values)


@pytest.mark.parametrize("model, in_fmt, out_fmt", _model_formats())
def test_every_model_on_a_local_cluster(client, model, in_fmt, out_fmt):
    """Every model of lp.MODELS in worker processes, over two K chunkings it takes."""
    g = np.random.default_rng(12)
    mult = lpd.k_multiple(model, in_fmt)
    K = 2 * (mult or 8) + 3
    a = lp.round(g.standard_normal((4, K)), in_fmt)
    b = lp.round(g.standard_normal((K, 3)), in_fmt)
    want = lp.matmul(a, b, model=model, in_fmt=in_fmt, out_fmt=out_fmt)
    for kc in ([(K,)] if mult is None else [(K,), (mult, mult, 3)]):
        A, B = da.from_array(a, chunks=((2, 2), kc)), da.from_array(b, chunks=(kc, (2, 1)))
        got = client.compute(lpd.matmul(A, B, model=model, in_fmt=in_fmt, out_fmt=out_fmt))
        assert_bits(np.asarray(got.result()), want)


def test_public_entry_points_take_dask_arrays():
    """lp.round, lp.add, lp.sum, lp.cumsum, lp.dot, lp.encode, lp.decode, lp.matmul and
    lp.tensor of a Dask array are lazy and equal the NumPy call (engine/lazy.py)."""
    rng = np.random.default_rng(31)
    x, y = rng.standard_normal(500), rng.standard_normal(500)
    X, Y = da.from_array(x, chunks=97), da.from_array(y, chunks=131)
    for got, want in (
            (lp.round(X, "bf16", "sr", rng=4), lp.round(x, "bf16", "sr", rng=4)),
            (lp.add(X, Y, "fp16", "rz"), lp.add(x, y, "fp16", "rz")),
            (lp.add(x, Y, "fp16"), lp.add(x, y, "fp16")),
            (lp.sum(X, "bf16", order="sequential"), lp.sum(x, "bf16", order="sequential")),
            (lp.cumsum(X, "bf16", "sr", rng=2), lp.cumsum(x, "bf16", "sr", rng=2)),
            (lp.dot(X, Y, "fp16"), lp.dot(x, y, "fp16")),
            (lp.decode(lp.encode(X, "e4m3"), "e4m3"), lp.decode(lp.encode(x, "e4m3"), "e4m3"))):
        assert isinstance(got, da.Array)
        assert np.array_equal(np.asarray(got.compute()).view(np.uint64),
                              np.asarray(want).view(np.uint64))
    A = da.from_array(rng.standard_normal((48, 64)), chunks=(16, 16))
    a = A.compute()
    assert np.array_equal(lp.matmul(A, A.T, model="h100", in_fmt="fp16").compute(),
                          lp.matmul(a, a.T, model="h100", in_fmt="fp16"))
    t = lp.tensor(X, "fp16")
    assert np.array_equal((t + t).compute().values,
                          (lp.tensor(x, "fp16") + lp.tensor(x, "fp16")).values)
    with pytest.raises(ValueError, match="offset"):
        lp.round(X, "bf16", "sr", rng=1, offset=3)


# an eager Tensor with a LazyTensor keeps its own format and promotes as eager
# Tensors do (FP16 with BF16 gives FP32), so the values are the eager ones.
@pytest.mark.parametrize("mode", ("rne", "rz", "sr"))
def test_lazy_tensor_with_an_eager_tensor_of_another_format_promotes_as_eager(mode):
    x = np.array([0.1, 1.0 + 2**-9, 3.0, 70000.0, -2.0**-20, 5.5])
    y = data((6,), 21, specials=False)
    lx, tx = lpd.tensor(da.from_array(x, chunks=2), "fp16"), lp.tensor(x, "fp16")
    ty, t0 = lp.tensor(y, "bf16"), lp.tensor(0.3, "bf16")
    cases = [(lambda a: a + ty), (lambda a: a * ty), (lambda a: a - t0), (lambda a: a / ty),
             (lambda a: ty + a), (lambda a: ty * a), (lambda a: t0 - a), (lambda a: ty / a)]
    for f in cases:
        with lp.context(mode=mode, rng=4):
            want = f(tx)
        with lp.context(mode=mode, rng=4):
            lazy = f(lx)
            assert isinstance(lazy, lpd.LazyTensor)     # the eager operand first, too
            got = lazy.compute(scheduler="sync")
        assert want.fmt == lp.FP32 and got.fmt == want.fmt
        assert_bits(got.values, want.values)


# operand errors come when the graph is built, as from the NumPy call.
@pytest.mark.parametrize("bad", [None, "abc", 1j, np.array(["a", "b"]), [None, None]])
def test_elementwise_operand_errors_come_when_the_graph_is_built(bad):
    dx = da.from_array(np.arange(4.0), chunks=2)
    with pytest.raises(TypeError) as eager:
        lp.add(np.arange(4.0), bad, "bf16")
    with pytest.raises(TypeError, match=str(eager.value).split(" (")[0].split(";")[0]):
        lpd.add(dx, bad, "bf16")
    with pytest.raises(TypeError):
        lpd.fma(dx, 2.0, bad, "bf16")
    with pytest.raises(TypeError, match="Tensor operand: pass its values"):
        lpd.mul(dx, lp.tensor([1.0, 2.0, 3.0, 4.0], "fp16"), "bf16")


def test_matmul_c_errors_come_when_the_graph_is_built():
    a = da.from_array(np.ones((2, 2)), chunks=1)
    with pytest.raises(TypeError, match="c must be real numbers"):
        lpd.matmul(a, a, c="abc", in_fmt="fp16")
    with pytest.raises(TypeError):
        lpd.matmul(a, a, c=1j, in_fmt="fp16")
    assert_bits(get(lpd.matmul(a, a, c=np.ones(2), in_fmt="fp16")),
                lp.matmul(np.ones((2, 2)), np.ones((2, 2)), c=np.ones(2), in_fmt="fp16"))


@pytest.mark.parametrize("fa,fb", [("bf16", "bf16"), ("fp16", "bf16")])
def test_lazy_and_eager_matrix_products_equal_the_eager_one(fa, fb):
    rng = np.random.default_rng(31)
    x, y = rng.standard_normal((6, 6)), rng.standard_normal((6, 6))
    lazy, a, b = lpd.tensor(da.from_array(x, chunks=3), fa), lp.tensor(x, fa), lp.tensor(y, fb)
    for got, want in ((lazy @ b, a @ b), (b @ lazy, b @ a)):
        assert isinstance(got, lpd.LazyTensor)
        out = got.compute(scheduler="sync")
        assert out.fmt == want.fmt
        assert_bits(out.values, want.values)
