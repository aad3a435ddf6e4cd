"""nn: forward and backward passes against float64 NumPy, float32 loops and ml_dtypes.

Oracles: a float64 NumPy MLP with its own hand-derived backward pass (itself checked
by central differences), NumPy float32 loops for the FP32-accumulated matrix
products (FP16 products are exact in float32, and NumPy's float32 additions and
float32 -> float16 casts are correctly rounded), and ml_dtypes casts to say whether
a value belongs to a format.
"""

import numpy as np
import pytest

import lowprec as lp
from lowprec import nn
from peers import ml_dtypes, requires_ml_dtypes

GELU_C, GELU_A = np.sqrt(2 / np.pi), 0.044715


def in_format(values, dtype):
    """Whether every value is exactly representable in ``dtype`` (an ml_dtypes or NumPy
    float type): the cast round-trips."""
    v = np.asarray(values, dtype=np.float64)
    return bool(np.all(v.astype(dtype).astype(np.float64) == v))


def gelu64(x):
    return 0.5 * x * (1 + np.tanh(GELU_C * (x + GELU_A * x**3)))


def ce64(z, labels):
    s = z - z.max(axis=1, keepdims=True)
    lse = np.log(np.exp(s).sum(axis=1))
    return np.mean(lse - s[np.arange(len(labels)), labels])


def ce64_grad(z, labels):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    p[np.arange(len(labels)), labels] -= 1
    return p / len(labels)


class Reference:
    """A float64 MLP (Linear, act, Linear) with a hand-derived backward pass."""

    def __init__(self, W1, b1, W2, b2, act):
        self.p = [W1, b1, W2, b2]
        self.act = act

    def loss(self, x, labels):
        W1, b1, W2, b2 = self.p
        h = x @ W1 + b1
        a = np.maximum(h, 0) if self.act == "relu" else gelu64(h)
        return ce64(a @ W2 + b2, labels)

    def grads(self, x, labels):
        W1, b1, W2, b2 = self.p
        h = x @ W1 + b1
        a = np.maximum(h, 0) if self.act == "relu" else gelu64(h)
        dz = ce64_grad(a @ W2 + b2, labels)
        da = dz @ W2.T
        if self.act == "relu":
            dh = da * (h > 0)
        else:
            t = np.tanh(GELU_C * (h + GELU_A * h**3))
            dh = da * (0.5 * (1 + t) + 0.5 * h * (1 - t**2) * GELU_C * (1 + 3 * GELU_A * h**2))
        return [x.T @ dh, dh.sum(axis=0), a.T @ dz, dz.sum(axis=0)]


def problem(act, seed=0):
    rng = np.random.default_rng(seed)
    model = nn.mlp([5, 7, 3], activation=act, rng=seed)
    for p in model.parameters():
        p.value = lp.tensor(rng.standard_normal(p.value.shape) * 0.5, "fp32")
    x = rng.standard_normal((6, 5))
    labels = rng.integers(0, 3, 6)
    ref = Reference(*[np.asarray(p.value) for p in model.parameters()], act)
    return model, ref, x, labels


@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_reference_backward_matches_central_differences(act):
    _, ref, x, labels = problem(act)
    grads = ref.grads(x, labels)
    h = 1e-6
    for i, p in enumerate(ref.p):
        for idx in [(0,) * p.ndim, tuple(s - 1 for s in p.shape)]:
            old = p[idx]
            p[idx] = old + h
            up = ref.loss(x, labels)
            p[idx] = old - h
            down = ref.loss(x, labels)
            p[idx] = old
            assert (up - down) / (2 * h) == pytest.approx(grads[i][idx], rel=1e-5, abs=1e-8)


@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_fp32_mlp_loss_and_gradients_match_float64(act):
    model, ref, x, labels = problem(act)
    with lp.context(matmul="fp32"):
        logits = model(lp.tensor(x, "fp32"))
        loss = nn.softmax_cross_entropy(logits, labels)
        model.backward(nn.softmax_cross_entropy_backward(logits, labels))
    assert float(loss) == pytest.approx(ref.loss(x, labels), rel=1e-6)
    for p, g in zip(model.parameters(), ref.grads(x, labels)):
        assert p.grad.fmt == lp.FP32
        np.testing.assert_allclose(np.asarray(p.grad), g, rtol=1e-5, atol=1e-7)


def test_backward_without_the_input_gradient_sets_the_same_gradients():
    # The float64 reference gives the gradients; input_grad=False only skips dx.
    model, ref, x, labels = problem("relu")
    with lp.context(matmul="fp32"):
        logits = model(lp.tensor(x, "fp32"))
        assert model.backward(nn.softmax_cross_entropy_backward(logits, labels),
                              input_grad=False) is None
    for p, g in zip(model.parameters(), ref.grads(x, labels)):
        np.testing.assert_allclose(np.asarray(p.grad), g, rtol=1e-5, atol=1e-7)
    with pytest.raises(TypeError, match="input_grad"):
        model.backward(lp.tensor(np.ones(np.shape(logits)), "fp32"), input_grad="no")


def float32_matmul(a, b, c):
    """Left-to-right float32 accumulation starting from c; products of FP16 values
    (11-bit significands) have at most 22 bits, so they are exact in float32."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    acc = np.broadcast_to(np.asarray(c, np.float32), (a.shape[0], b.shape[1])).copy()
    for k in range(a.shape[1]):
        acc = acc + a[:, k:k + 1] * b[k:k + 1, :]
    return acc


def test_fp16_linear_is_fp32_accumulation_rounded_once_to_fp16():
    rng = np.random.default_rng(1)
    layer = nn.Linear(9, 4, rng=1)
    layer.weight.value = lp.tensor(rng.standard_normal((9, 4)), "fp16")
    layer.bias.value = lp.tensor(rng.standard_normal(4), "fp16")
    x = lp.tensor(rng.standard_normal((12, 9)), "fp16")
    dy = lp.tensor(rng.standard_normal((12, 4)), "fp16")
    W, b = np.asarray(layer.weight.value), np.asarray(layer.bias.value)
    with lp.context(matmul="fp32"):
        y = layer(x)
        dx = layer.backward(dy)
    # NumPy's float32 -> float16 cast rounds to nearest even, once.
    assert y.fmt == lp.FP16
    np.testing.assert_array_equal(np.asarray(y), float32_matmul(x, W, b).astype(np.float16))
    np.testing.assert_array_equal(np.asarray(dx),
                                  float32_matmul(dy, W.T, 0).astype(np.float16))
    np.testing.assert_array_equal(np.asarray(layer.weight.grad),
                                  float32_matmul(np.asarray(x).T, dy, 0).astype(np.float16))
    exact_db = np.asarray(dy).sum(axis=0)
    ulp = np.spacing(np.abs(exact_db).astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(np.asarray(layer.bias.grad) - exact_db) <= ulp)


def test_gradient_format_is_the_parameters_choice():
    layer = nn.Linear(3, 2, rng=0)
    layer.weight.value = layer.weight.value.astype("bf16")
    layer.bias.value = layer.bias.value.astype("bf16")
    layer.weight.grad_fmt = lp.FP32
    x = lp.tensor(np.full((2, 3), 1 + 2.0**-7), "bf16")
    layer(x)
    layer.backward(lp.tensor(np.full((2, 2), 1 + 2.0**-7), "bf16"))
    # Each entry of x.T @ dy is 2 (1 + 2**-7)**2 = 2 + 2**-5 + 2**-13: exact in FP32,
    # not in BF16 (8 bits).
    assert layer.weight.grad.fmt == lp.FP32 and layer.bias.grad.fmt == lp.BF16
    np.testing.assert_array_equal(np.asarray(layer.weight.grad), 2 + 2.0**-5 + 2.0**-13)
    # The bias gradient is summed in FP32 and rounded once: 1 + 2**-8 needs 9 bits.
    layer.bias.grad_fmt = lp.FP32
    layer.backward(lp.tensor([[1.0, 1.0], [2.0**-8, 2.0**-8]], "bf16"))
    assert np.asarray(layer.bias.grad).tolist() == [1 + 2.0**-8] * 2
    layer.bias.grad_fmt = None
    layer.backward(lp.tensor([[1.0, 1.0], [2.0**-8, 2.0**-8]], "bf16"))
    assert np.asarray(layer.bias.grad).tolist() == [1.0, 1.0]      # a tie, to even


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("fmt,dtype", [("bf16", ml_dtypes.bfloat16), ("fp16", np.float16)])
def test_every_result_is_a_value_of_the_format(fmt, dtype):
    rng = np.random.default_rng(2)
    model = nn.mlp([4, 6, 3], activation="gelu", rng=2)
    for p in model.parameters():
        p.value = p.value.astype(fmt)
    x = lp.tensor(rng.standard_normal((5, 4)), fmt)
    labels = rng.integers(0, 3, 5)
    logits = model(x)
    loss = nn.softmax_cross_entropy(logits, labels)
    dz = nn.softmax_cross_entropy_backward(logits, labels)
    dx = model.backward(dz)
    for t in [logits, loss, dz, dx, *(p.grad for p in model.parameters())]:
        assert t.fmt == lp.format(fmt)
        assert in_format(t.values, dtype)


def test_activations_against_float64():
    x = np.linspace(-4, 4, 41).astype(np.float32).astype(np.float64)
    xt = lp.tensor(x, "fp32")
    np.testing.assert_array_equal(np.asarray(nn.relu(xt)), np.maximum(x, 0))
    np.testing.assert_array_equal(np.asarray(nn.relu_backward(xt, lp.tensor(x, "fp32"))),
                                  np.where(x > 0, x, 0))
    np.testing.assert_allclose(np.asarray(nn.gelu(xt)), gelu64(x), rtol=1e-6, atol=1e-7)
    h = 1e-6
    fd = (gelu64(x + h) - gelu64(x - h)) / (2 * h)
    np.testing.assert_allclose(np.asarray(nn.gelu_backward(xt, lp.tensor(np.ones(41), "fp32"))),
                               fd, rtol=1e-5, atol=1e-6)


def test_cross_entropy_in_its_own_format():
    rng = np.random.default_rng(3)
    z = rng.standard_normal((8, 5)) * 3
    labels = rng.integers(0, 5, 8)
    zt = lp.tensor(z, "bf16")
    z16 = np.asarray(zt)
    assert float(nn.softmax_cross_entropy(zt, labels, fmt="fp32")) == pytest.approx(
        ce64(z16, labels), rel=1e-6)
    d = nn.softmax_cross_entropy_backward(zt, labels, 2.0, fmt="fp32")
    assert d.fmt == lp.BF16    # back in the logits' format
    np.testing.assert_allclose(np.asarray(d), 2 * ce64_grad(z16, labels), rtol=2.0**-8)
    bf = nn.softmax_cross_entropy(zt, labels)
    assert bf.fmt == lp.BF16
    assert float(bf) == pytest.approx(ce64(z16, labels), rel=2.0**-6)


def test_a_loss_scale_past_fp16_max_is_infinite_in_an_fp16_backward():
    z = lp.tensor([[1.0, 0.0]], "fp16")
    d = nn.softmax_cross_entropy_backward(z, [0], lp.tensor(2.0**16, "fp32"))
    assert not np.all(np.isfinite(np.asarray(d)))


def test_mlp_rejects_unknown_activation():
    with pytest.raises(ValueError, match="activation"):
        nn.mlp([2, 2, 2], activation="tanh")


# -- bad input: labels, shapes ------------------------------------------------------------

def small_logits():
    return lp.tensor([[2.0, 0.0, -1.0], [0.0, 2.0, 1.0]], "fp32")


@pytest.mark.parametrize("labels,error,match", [
    ([0], ValueError, r"labels must have shape \(2,\)"),          # would broadcast
    ([[0], [1]], ValueError, r"labels must have shape \(2,\)"),
    ([0, 1, 2], ValueError, r"labels must have shape \(2,\)"),
    ([-1, 0], ValueError, r"labels must be in \[0, 3\)"),          # would wrap to class 2
    ([0, 3], ValueError, r"labels must be in \[0, 3\)"),
    ([0.0, 1.0], TypeError, "labels must be integers"),
    ([True, False], TypeError, "labels must be integers"),
    (["0", "1"], TypeError, "labels must be integers"),
])
@pytest.mark.parametrize("backward", [False, True])
def test_labels_are_validated(labels, error, match, backward):
    fn = nn.softmax_cross_entropy_backward if backward else nn.softmax_cross_entropy
    with pytest.raises(error, match=match):
        fn(small_logits(), labels)


def test_valid_labels_of_any_integer_dtype_give_the_float64_loss():
    z = small_logits()
    expected = ce64(np.asarray(z), np.array([2, 1]))
    for labels in ([2, 1], np.array([2, 1], np.uint8), np.array([2, 1], np.int16)):
        assert float(nn.softmax_cross_entropy(z, labels)) == pytest.approx(expected, rel=1e-6)


def test_logits_must_be_two_dimensional():
    with pytest.raises(ValueError, match=r"logits must have shape \(N, C\)"):
        nn.softmax_cross_entropy(lp.tensor([1.0, 2.0], "fp32"), [0, 1])


def test_a_gradient_of_another_shape_is_refused_by_the_parameter():
    p = nn.Parameter(lp.tensor([1.0, 2.0, 3.0], "fp32"))
    for shape in [(2, 3), (1,), (3, 1)]:                    # each would broadcast
        with pytest.raises(ValueError, match=r"grad must have the parameter's shape \(3,\)"):
            p.grad = lp.tensor(np.ones(shape), "fp32")
    assert p.grad is None
    with pytest.raises(TypeError, match="grad"):
        p.grad = np.array(["1", "2", "3"])


def test_plain_arrays_as_parameter_values_and_gradients_are_fp32():
    p = nn.Parameter(np.array([0.1, 1.0]))
    p.grad = np.array([1e-3, 2.0])
    assert p.value.fmt == lp.FP32 and p.grad.fmt == lp.FP32
    assert np.asarray(p.value).tolist() == np.array([0.1, 1.0], np.float32).tolist()
    assert np.asarray(p.grad).tolist() == np.array([1e-3, 2.0], np.float32).tolist()


# -- bad input: layers -----------------------------------------------------------------------

@pytest.mark.parametrize("layer,dy_shape", [
    (nn.Linear(2, 3, rng=0), (1, 3)), (nn.ReLU(), (1, 3)), (nn.GELU(), (1, 3)),
    (nn.mlp([2, 4, 3], rng=0), (1, 3)),
])
def test_backward_before_forward_says_so(layer, dy_shape):
    with pytest.raises(RuntimeError, match="backward called before forward"):
        layer.backward(lp.tensor(np.ones(dy_shape), "fp32"))


def test_layer_shapes_are_checked():
    layer = nn.Linear(2, 3, rng=0)
    with pytest.raises(ValueError, match=r"x must have shape \(N, 2\)"):
        layer(lp.tensor(np.ones((4, 5)), "fp32"))
    layer(lp.tensor(np.ones((4, 2)), "fp32"))
    with pytest.raises(ValueError, match=r"dy must have the output's shape \(4, 3\)"):
        layer.backward(lp.tensor(np.ones((1, 3)), "fp32"))       # would broadcast into db
    relu = nn.ReLU()
    relu(lp.tensor(np.ones((4, 3)), "fp32"))
    with pytest.raises(ValueError, match=r"dy must have the output's shape \(4, 3\)"):
        relu.backward(lp.tensor(np.ones((1, 3)), "fp32"))


@pytest.mark.parametrize("call,error,match", [
    (lambda: nn.Linear(0, 3), ValueError, "n_in"),
    (lambda: nn.Linear(2, 2.5), TypeError, "n_out"),
    (lambda: nn.Linear(2, 3, rng="0"), TypeError, "rng"),
    (lambda: nn.mlp([8]), ValueError, "sizes"),
    (lambda: nn.mlp(8), TypeError, "sizes"),
    (lambda: nn.mlp([8, 0, 4]), ValueError, r"sizes\[1\]"),
    (lambda: nn.mlp([8, 4], rng=1.5), TypeError, "rng"),
    (lambda: nn.mlp([8, 4], activation=None), ValueError, "activation"),
    (lambda: nn.Sequential(nn.Linear(2, 2), None), TypeError, r"layers\[1\]"),
])
def test_layer_arguments_are_checked(call, error, match):
    with pytest.raises(error, match=match):
        call()
