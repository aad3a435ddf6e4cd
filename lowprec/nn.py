"""The smallest honest neural-network toolkit: layers and a loss on `Tensor`\\ s.

The toolkit has `Linear`, `relu`, `gelu`, `softmax_cross_entropy` and a
`Sequential` container. Each has a forward pass and a hand-written backward pass
made only of `Tensor` operations. So every multiply, add, exponential and matrix
product is rounded as the formats and the `lp.context` say.

* The compute format of a layer is the format of its parameters' working copies
  (``Parameter.value``).
* Matrix products use the context's matmul model and are rounded once into that
  format.
* Reductions (bias gradients, softmax denominators, the batch mean) accumulate in
  FP32 or wider, as GPU reductions of half-precision tensors do.

This module must never record a tape or differentiate anything automatically. It
must never compute in float64 behind a `Tensor`'s back: a value that leaves a layer
is a value of its format.
"""

from __future__ import annotations

from typing import Any, Union, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .engine.checks import as_generator, check_bool, check_int
from .formats import FP32, Format, FormatLike
from .formats import format as _format
from .tensors import Tensor, matmul, result_format, tensor
from .types import RNGLike

__all__ = ["Parameter", "Linear", "ReLU", "GELU", "Sequential", "mlp", "relu",
           "relu_backward", "gelu", "gelu_backward", "softmax_cross_entropy",
           "softmax_cross_entropy_backward"]


#: The order of every reduction: pairwise, as GPU reductions add in a tree (named here,
#: not left to a default, since it changes the rounded sums).
_ORDER = "pairwise"


def _acc(fmt):
    """The accumulation format of reductions over values of ``fmt``."""
    return result_format(fmt, FP32)


# -- activations -------------------------------------------------------------------------

def relu(x: Tensor) -> Tensor:
    """``max(x, 0)``, exact in every format.

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.nn.relu(lp.tensor([-1.5, 0.0, 2.5], "bf16"))
    Tensor([0.0, 0.0, 2.5], fmt=BF16)
    """
    return cast(Tensor, np.maximum(x, 0.0))   # a Tensor: NumPy dispatches to it


def relu_backward(x: Tensor, dy: Tensor) -> Tensor:
    """The gradient of `relu` at ``x`` times ``dy``: ``dy`` where ``x > 0``, else 0.

    Examples
    --------
    >>> import lowprec as lp
    >>> x = lp.tensor([-1.0, 2.0], "fp16")
    >>> lp.nn.relu_backward(x, lp.tensor([3.0, 3.0], "fp16"))
    Tensor([0.0, 3.0], fmt=FP16)
    """
    return cast(Tensor, np.where(np.asarray(x) > 0, dy, 0.0))   # dy's __array_function__


_GELU_C = float(np.sqrt(2.0 / np.pi))
_GELU_A = 0.044715


def gelu(x: Tensor) -> Tensor:
    """GELU, tanh form (``torch.nn.functional.gelu(x, approximate="tanh")``).

    It is ``0.5 x (1 + tanh(c (x + a x**3)))`` with ``c = sqrt(2/pi)`` and
    ``a = 0.044715``. Every operation is rounded to ``x.fmt``, the constants too.

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.nn.gelu(lp.tensor([-1.0, 0.0, 1.0], "fp32")).values
    array([-0.15880799,  0.        ,  0.84119201])
    """
    u = (x + _GELU_A * (x * x * x)) * _GELU_C
    return (x * 0.5) * (np.tanh(u) + 1.0)


def gelu_backward(x: Tensor, dy: Tensor) -> Tensor:
    """The gradient of `gelu` at ``x`` times ``dy``.

    The gradient is ``0.5 (1 + t) + 0.5 x (1 - t**2) c (1 + 3 a x**2)``, with
    ``t = tanh(c (x + a x**3))``.

    Examples
    --------
    >>> import lowprec as lp
    >>> x = lp.tensor([-1.0, 0.0, 1.0], "fp32")
    >>> lp.nn.gelu_backward(x, lp.tensor([1.0, 1.0, 1.0], "fp32")).values
    array([-0.08296409,  0.5       ,  1.08296406])
    """
    x2 = x * x
    t = np.tanh((x + _GELU_A * (x2 * x)) * _GELU_C)
    slope = ((t * t) * -1.0 + 1.0) * ((x2 * (3 * _GELU_A) + 1.0) * _GELU_C)
    return cast(Tensor, ((t + 1.0) * 0.5 + (x * 0.5) * slope) * dy)   # Tensor arithmetic


# -- loss ------------------------------------------------------------------------------

def _log_softmax_parts(logits, labels):
    """Shifted logits ``s = z - max z``, ``exp(s)``, and their row sums."""
    s = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(s)
    total = e.sum(axis=1, keepdims=True, acc=_acc(logits.fmt), order=_ORDER)
    return s, e, total


def _as_tensor(x, fmt):
    fmt = None if fmt is None else _format(fmt)
    if isinstance(x, Tensor):
        return x if fmt is None or x.fmt == fmt else x.astype(fmt)
    if fmt is None:
        raise TypeError("plain logits need a format: pass fmt=")
    return tensor(x, fmt)


def real_tensor(x: Any, name: str) -> Tensor:
    """``x`` as a `Tensor`.

    A Tensor is returned as it is. Plain real numbers (an ndarray of any float or
    int dtype, a list) are rounded once to FP32. Anything else (bools, complex,
    strings, None) raises `TypeError` naming ``name``."""
    if isinstance(x, Tensor):
        return x
    arr = np.asarray(x)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be an lp.Tensor or an array of real numbers, got "
                        f"{type(x).__name__} of dtype {arr.dtype}")
    return tensor(arr, FP32, "rne")


def check_labels(labels: ArrayLike, n: int, classes: int | None = None,
                 what: str = "one per row of the logits") -> NDArray[Any]:
    """``labels`` as an int array of shape (n,) with values in [0, classes).

    When ``classes`` is None the values are in [0, inf). Labels that are not
    integers raise `TypeError`. A wrong shape or a label out of range raises
    `ValueError`, since NumPy indexing would broadcast a single label and wrap a
    negative one."""
    labels = np.asarray(labels)
    if labels.size == 0 and labels.dtype.kind == "f":
        labels = labels.astype(np.intp)          # np.asarray([]) is float64
    if labels.dtype.kind not in "iu":
        raise TypeError(f"labels must be integers (class indices), got dtype {labels.dtype}")
    if labels.shape != (n,):
        raise ValueError(f"labels must have shape ({n},), {what}, got shape {labels.shape}")
    bad = (labels < 0) if classes is None else (labels < 0) | (labels >= classes)
    if np.any(bad):
        where = f"[0, {classes}) for {classes} classes" if classes is not None else ">= 0"
        raise ValueError(f"labels must be in {where}, got {int(labels[bad][0])} at index "
                         f"{int(np.flatnonzero(bad)[0])}")
    return labels


def _logits_and_labels(logits: Any, labels: Any, fmt: Any) -> tuple[Tensor, NDArray[Any]]:
    """The logits as a 2-D Tensor in ``fmt`` and the checked labels (`check_labels`)."""
    z = _as_tensor(logits, fmt)
    if z.ndim != 2:
        raise ValueError(f"logits must have shape (N, C), got shape {z.shape}")
    return z, check_labels(labels, *z.shape)


def softmax_cross_entropy(logits: Tensor, labels: ArrayLike, *,
                          fmt: FormatLike | None = None) -> Tensor:
    """Mean cross-entropy of softmax(logits) against integer ``labels``.

    ``log(sum(exp(z - max z))) - (z - max z)[label]`` per row, then the mean
    over the batch. It is computed in ``fmt``, by default the logits' format. The
    mixed policies use FP32, as ``torch.autocast`` runs softmax and cross-entropy in
    float32. Sums accumulate in FP32 or wider.

    Parameters
    ----------
    logits : Tensor, shape (N, C)
    labels : array_like of int, shape (N,)
    fmt : Format or str, optional

    Returns
    -------
    Tensor
        A 0-d Tensor in ``fmt``.

    Raises
    ------
    TypeError
        Labels that are not integers.
    ValueError
        Logits that are not 2-D, labels not of shape (N,), or a label outside
        [0, C).

    Examples
    --------
    >>> import lowprec as lp
    >>> z = lp.tensor([[2.0, 0.0], [0.0, 2.0]], "bf16")
    >>> lp.nn.softmax_cross_entropy(z, [0, 0])
    Tensor(1.125, fmt=BF16)
    >>> lp.nn.softmax_cross_entropy(z, [0, 0], fmt="fp32")
    Tensor(1.1269280910491943, fmt=FP32)
    """
    z, labels = _logits_and_labels(logits, labels, fmt)
    s, _, total = _log_softmax_parts(z, labels)
    picked = np.take_along_axis(s, labels[:, None], axis=1)
    return (np.log(total) - picked).mean(acc=_acc(z.fmt), order=_ORDER)


def softmax_cross_entropy_backward(logits: Tensor, labels: ArrayLike, dloss: float | Tensor = 1.0,
                                   *, fmt: FormatLike | None = None) -> Tensor:
    """The gradient of `softmax_cross_entropy` with respect to the logits, times
    ``dloss``.

    It is ``(softmax(z) - onehot(labels)) * (dloss / N)``, computed in ``fmt`` as the
    forward is. It is returned in the logits' format.

    ``dloss`` is rounded into ``fmt`` first: a loss scale of 2**16 is infinite in
    FP16, as it is when PyTorch back-propagates a scaled FP16 loss.

    Examples
    --------
    >>> import lowprec as lp
    >>> z = lp.tensor([[2.0, 0.0], [0.0, 2.0]], "fp32")
    >>> lp.nn.softmax_cross_entropy_backward(z, [0, 0]).values
    array([[-0.05960149,  0.05960146],
           [-0.44039854,  0.44039851]])
    """
    z, labels = _logits_and_labels(logits, labels, fmt)
    _, e, total = _log_softmax_parts(z, labels)
    onehot = np.zeros(z.shape)
    onehot[np.arange(len(labels)), labels] = 1.0
    g = _as_tensor(dloss, z.fmt) / float(len(labels))
    d = (e / total - onehot) * g
    return d if not isinstance(logits, Tensor) else d.astype(logits.fmt)


# -- layers -----------------------------------------------------------------------------

class Parameter:
    """A trainable array, with its gradient and the gradient's format.

    * ``value`` is the working copy the layer computes with. It is a `Tensor`, whose
      format is the layer's compute format.
    * ``grad`` is set by the last backward pass (not accumulated).
    * ``grad_fmt`` is the format gradients are delivered in (None: the compute
      format).

    Plain real arrays given as ``value`` or ``grad`` are FP32 (rounded to FP32
    once). A ``grad`` must have the shape of ``value``: `ValueError` otherwise
    (a broadcast gradient would reshape the weight in the optimizer's step).

    Examples
    --------
    >>> import lowprec as lp
    >>> p = lp.nn.Parameter(lp.tensor([1.0, 2.0], "fp32"))
    >>> p
    Parameter(shape=(2,), fmt=FP32, grad=None)
    >>> p.grad = [0.5, 0.25]
    >>> p.grad
    Tensor([0.5, 0.25], fmt=FP32)
    """

    __slots__ = ("_value", "_grad", "_grad_fmt")

    def __init__(self, value: Tensor | ArrayLike, grad_fmt: FormatLike | None = None) -> None:
        self._grad: Tensor | None = None
        self.value = value
        self.grad_fmt = grad_fmt

    @property
    def value(self) -> Tensor:
        return self._value

    @value.setter
    def value(self, value: Tensor | ArrayLike) -> None:
        self._value = real_tensor(value, "value")

    @property
    def grad(self) -> Tensor | None:
        return self._grad

    @grad.setter
    def grad(self, grad: Tensor | ArrayLike | None) -> None:
        if grad is not None:
            grad = real_tensor(grad, "grad")
            if grad.shape != self._value.shape:
                raise ValueError(f"grad must have the parameter's shape {self._value.shape}, "
                                 f"got shape {grad.shape}")
        self._grad = grad

    @property
    def grad_fmt(self) -> Format | None:
        return self._grad_fmt

    @grad_fmt.setter
    def grad_fmt(self, fmt: FormatLike | None) -> None:
        self._grad_fmt = None if fmt is None else _format(fmt)

    def _as_grad(self, g):
        fmt = self.grad_fmt or self.value.fmt
        return g if g.fmt == fmt else g.astype(fmt)

    def __repr__(self) -> str:
        grad = None if self.grad is None else self.grad.fmt.name
        return f"Parameter(shape={self.value.shape}, fmt={self.value.fmt.name}, grad={grad})"


class Linear:
    """``y = x @ W + b``, with ``W`` of shape (n_in, n_out).

    Forward: one matrix product under the context's matmul model with ``b`` as its
    addend (as a BLAS ``addmm`` epilogue), rounded once into the compute format.
    Backward: ``dx = dy @ W.T`` and ``dW = x.T @ dy`` the same way, ``dW`` into the
    gradient format. ``db`` is the column sums of ``dy``, accumulated in FP32 and
    rounded once into the gradient format.

    Parameters
    ----------
    n_in, n_out : int
    rng : numpy.random.Generator or int, optional
        Glorot-uniform initialisation of ``W`` (drawn in float64, rounded to FP32).
        ``b`` starts at zero.

    Attributes
    ----------
    quantizer : object or None
        When set, the three products go through it: ``quantizer.forward(x, W, b)``
        and ``quantizer.backward(dy, input_grad) -> (dW, dx or None)``. Each gives
        an FP32 Tensor of the quantized operands' product, rounded here as above.
        ``lp.amp.train`` sets it for a policy with scaled operands, from
        `lowprec.amp.DelayedScaling` or `lowprec.amp.BlockScaling`.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> layer = lp.nn.Linear(3, 2, rng=0)
    >>> y = layer.forward(lp.tensor(np.ones((4, 3)), "fp32"))
    >>> y.shape, y.fmt
    ((4, 2), lp.FP32)
    >>> dx = layer.backward(lp.tensor(np.ones((4, 2)), "fp32"))
    >>> dx.shape, layer.weight.grad.shape, layer.bias.grad.values
    ((4, 3), (3, 2), array([4., 4.]))
    """

    def __init__(self, n_in: int, n_out: int, *,
                 rng: RNGLike = None) -> None:
        n_in, n_out = check_int("n_in", n_in, minimum=1), check_int("n_out", n_out, minimum=1)
        rng = as_generator(rng)
        limit = np.sqrt(6.0 / (n_in + n_out))
        self.weight = Parameter(tensor(rng.uniform(-limit, limit, (n_in, n_out)), FP32, "rne"))
        self.bias = Parameter(tensor(np.zeros(n_out), FP32, "rne"))
        self._x: Tensor | None = None
        self.quantizer: Any = None

    def parameters(self) -> list[Parameter]:
        return [self.weight, self.bias]

    def forward(self, x: Tensor) -> Tensor:
        fmt = self.weight.value.fmt
        x = _as_tensor(x, fmt)
        n_in = self.weight.value.shape[0]
        if x.ndim != 2 or x.shape[1] != n_in:
            raise ValueError(f"x must have shape (N, {n_in}), got shape {x.shape}")
        self._x = x
        if self.quantizer is not None:
            return self.quantizer.forward(x, self.weight.value, self.bias.value).astype(fmt, "rne")
        return matmul(x, self.weight.value, c=self.bias.value).astype(fmt, "rne")

    def backward(self, dy: Tensor, *, input_grad: bool = True) -> Tensor | None:
        """Set the parameters' gradients from ``dy``, the gradient of the output of
        the last `forward`.

        Returns the gradient of its input, or None with ``input_grad=False``. That
        suits the first layer of a network, whose input is data. PyTorch likewise
        computes no gradient for inputs that do not require one. Before any forward
        it raises `RuntimeError`, as PyTorch's backward without a graph. A ``dy``
        not of the output's shape raises `ValueError`."""
        if self._x is None:
            raise RuntimeError("Linear.backward called before forward: the backward pass "
                               "needs the input of a forward pass; call forward first")
        fmt = self.weight.value.fmt
        dy = _as_tensor(dy, fmt)
        expected = (self._x.shape[0], self.weight.value.shape[1])
        if dy.shape != expected:
            raise ValueError(f"dy must have the output's shape {expected}, got shape {dy.shape}")
        input_grad = check_bool("input_grad", input_grad)
        self.bias.grad = self.bias._as_grad(dy.astype(_acc(fmt)).sum(axis=0, order=_ORDER))
        if self.quantizer is not None:
            dw, dx = self.quantizer.backward(dy, input_grad)
            self.weight.grad = self.weight._as_grad(dw)
            return None if dx is None else dx.astype(fmt, "rne")
        self.weight.grad = self.weight._as_grad(matmul(self._x.T, dy))
        if not input_grad:
            return None
        return matmul(dy, self.weight.value.T).astype(fmt, "rne")

    __call__ = forward

    def __repr__(self) -> str:
        n_in, n_out = self.weight.value.shape
        return f"Linear({n_in}, {n_out})"


def _check_backward(name, x, dy):
    if x is None:
        raise RuntimeError(f"{name}.backward called before forward: the backward pass "
                           f"needs the input of a forward pass; call forward first")
    if np.shape(dy) != np.shape(x):
        raise ValueError(f"dy must have the output's shape {np.shape(x)}, got shape "
                         f"{np.shape(dy)}")


class ReLU:
    """`relu` as a layer (keeps its input for the backward pass)."""

    def __init__(self) -> None:
        self._x: Tensor | None = None

    def parameters(self) -> list[Parameter]:
        return []

    def forward(self, x: Tensor) -> Tensor:
        self._x = x
        return relu(x)

    def backward(self, dy: Tensor) -> Tensor:
        _check_backward("ReLU", self._x, dy)
        return relu_backward(self._x, dy)  # type: ignore[arg-type]  # not None: checked above

    __call__ = forward

    def __repr__(self) -> str:
        return "ReLU()"


class GELU:
    """`gelu` (tanh form) as a layer (keeps its input for the backward pass)."""

    def __init__(self) -> None:
        self._x: Tensor | None = None

    def parameters(self) -> list[Parameter]:
        return []

    def forward(self, x: Tensor) -> Tensor:
        self._x = x
        return gelu(x)

    def backward(self, dy: Tensor) -> Tensor:
        _check_backward("GELU", self._x, dy)
        return gelu_backward(self._x, dy)  # type: ignore[arg-type]  # not None: checked above

    __call__ = forward

    def __repr__(self) -> str:
        return "GELU()"


class Sequential:
    """Layers applied in order.

    ``backward`` runs them in reverse and sets every parameter's ``grad``.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> model = lp.nn.Sequential(lp.nn.Linear(2, 4, rng=0), lp.nn.ReLU(), lp.nn.Linear(4, 3, rng=1))
    >>> model
    Sequential(Linear(2, 4), ReLU(), Linear(4, 3))
    >>> logits = model(lp.tensor(np.ones((5, 2)), "fp32"))
    >>> dz = lp.nn.softmax_cross_entropy_backward(logits, [0, 1, 2, 0, 1])
    >>> _ = model.backward(dz)
    >>> [p.grad.shape for p in model.parameters()]
    [(2, 4), (4,), (4, 3), (3,)]
    """

    def __init__(self, *layers: Layer) -> None:
        for i, layer in enumerate(layers):
            if not all(callable(getattr(layer, m, None))
                       for m in ("forward", "backward", "parameters")):
                raise TypeError(f"layers[{i}] must be a layer (with forward, backward and "
                                f"parameters), got {type(layer).__name__}")
        self.layers = list(layers)

    def parameters(self) -> list[Parameter]:
        return [p for layer in self.layers for p in layer.parameters()]

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer.forward(x)
        return x

    def backward(self, dy: Tensor, *, input_grad: bool = True) -> Tensor | None:
        """Run the layers' backward passes in reverse.

        Returns the gradient of the input, or None with ``input_grad=False``. Then a
        first layer that can skip it (a `Linear` or a `Sequential`) does not compute
        it."""
        input_grad = check_bool("input_grad", input_grad)
        for i in range(len(self.layers) - 1, -1, -1):
            layer = self.layers[i]
            if i == 0 and not input_grad and isinstance(layer, (Linear, Sequential)):
                return layer.backward(dy, input_grad=False)
            dy = cast(Tensor, layer.backward(dy))   # input_grad=True: a Tensor
        return dy if input_grad else None

    __call__ = forward

    def __repr__(self) -> str:
        return f"Sequential({', '.join(map(repr, self.layers))})"


#: A layer of a `Sequential`: what `mlp` builds.
Layer = Union["Linear", "ReLU", "GELU", "Sequential"]


def mlp(sizes: list[int] | tuple[int, ...], *, activation: str = "relu",
        rng: RNGLike = 0) -> Sequential:
    """A `Sequential` multilayer perceptron: `Linear` layers of the given sizes
    with ``activation`` (``"relu"`` or ``"gelu"``) between them.

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.nn.mlp([8, 16, 4], activation="gelu")
    Sequential(Linear(8, 16), GELU(), Linear(16, 4))
    """
    acts: dict[str, type[ReLU] | type[GELU]] = {"relu": ReLU, "gelu": GELU}
    if not isinstance(activation, str) or activation not in acts:
        raise ValueError(f"unknown activation {activation!r}; valid: relu, gelu")
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__len__"):
        raise TypeError(f"sizes must be a list of layer widths, got {type(sizes).__name__}")
    if len(sizes) < 2:
        raise ValueError(f"sizes must hold at least an input and an output width, got {sizes!r}")
    sizes = [check_int(f"sizes[{i}]", n, minimum=1) for i, n in enumerate(sizes)]
    rng = as_generator(rng)
    layers: list[Layer] = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        if i:
            layers.append(acts[activation]())
        layers.append(Linear(n_in, n_out, rng=rng))
    return Sequential(*layers)
