"""Optimizers over the policy's weights: `SGD` and `Adam`, with master weights.

An optimizer takes a model's parameters over: it keeps the weights in the policy's
weight format (FP32 master weights for the mixed policies), rounds each update in
that format by the policy's update mode, writes working copies in the compute format
back into the parameters, and counts the updates rounding lost. It must never hold a
weight, a gradient or its own state in a format other than the policy's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .. import nn
from ..engine.checks import check_rng
from ..tensors import Tensor, context
from .checks import as_grad, as_grads, check_real
from .policy import Policy

__all__ = ["SGD", "Adam"]


class _Optimizer:
    """The weights (masters when the policy says so), working copies, lost updates."""

    _step: Callable[[int, Tensor], Any]   # each optimizer's update rule

    def __init__(self, params, lr, policy, seed):
        self.policy = Policy.named(policy)
        if isinstance(params, nn.Parameter):
            raise TypeError("params must be a list of lp.nn.Parameter, got one Parameter: "
                            "pass [p]")
        self.params = list(params)
        if not self.params:
            raise ValueError("params is empty: the optimizer has nothing to update")
        for i, p in enumerate(self.params):
            if not isinstance(p, nn.Parameter):
                raise TypeError(f"params[{i}] must be an lp.nn.Parameter, got "
                                f"{type(p).__name__}")
        # lr = 0 is allowed, as in PyTorch (w - 0 * g leaves every finite weight as it is).
        self.lr = check_real("lr", lr, low=0.0, high=math.inf, high_open=True)
        check_rng(seed, "seed")
        self.rng = np.random.default_rng(seed)
        pol = self.policy
        self.weights = [p.value.astype(pol.weights, "rne") for p in self.params]
        for p, w in zip(self.params, self.weights):
            p.value = w if w.fmt == pol.compute else w.astype(pol.compute, "rne")
            p.grad_fmt = pol.grads
        #: (weight elements with a nonzero gradient, of those left unchanged) by the last step
        self.last_step = (0, 0)

    def gradients(self) -> list[Tensor]:
        """The parameters' gradients in the weight format (exact when it holds
        the gradient format)."""
        if any(p.grad is None for p in self.params):
            raise RuntimeError("a parameter has no gradient: run the backward pass first")
        fmt = self.policy.weights
        grads = [as_grad(p.grad, f"params[{i}].grad") for i, p in enumerate(self.params)]
        return [g if g.fmt == fmt else g.astype(fmt, "rne") for g in grads]

    def step(self, grads: Iterable[Tensor | ArrayLike] | None = None) -> None:
        """One update of every weight from ``grads`` (default: `gradients`), a list
        of Tensors, one per parameter (plain arrays of real numbers are FP32
        gradients, rounded to FP32 once); the working copies are written back into
        the parameters."""
        grads = self.gradients() if grads is None else as_grads(grads)
        if len(grads) != len(self.params):
            raise ValueError(f"grads must hold one gradient per parameter ({len(self.params)}),"
                             f" got {len(grads)}")
        for i, (g, w) in enumerate(zip(grads, self.weights)):
            if g.shape != w.shape:      # checked first: a broadcast would reshape the weight
                raise ValueError(f"grads[{i}] must have its weight's shape {w.shape}, "
                                 f"got shape {g.shape}")
        pol = self.policy
        moved = unchanged = 0
        for i, (p, w, g) in enumerate(zip(self.params, self.weights, grads)):
            with context(mode="rne"):
                # Already in the weight format: the Tensor itself (nothing writes into it).
                step = self._step(i, g if g.fmt == pol.weights else g.astype(pol.weights, "rne"))
            with context(mode=pol.update, rng=self.rng):
                new = w - step
            nonzero = g.values != 0        # read-only views: no copies
            moved += int(np.count_nonzero(nonzero))
            unchanged += int(np.count_nonzero(nonzero & (new.values == w.values)))
            self.weights[i] = new
            p.value = new if new.fmt == pol.compute else new.astype(pol.compute, "rne")
        self.last_step = (moved, unchanged)

    @property
    def unchanged_fraction(self) -> float:
        """Of the weights with a nonzero gradient, the fraction the last step left
        unchanged (the update rounded away: below half an ulp under ``"rne"``)."""
        moved, unchanged = self.last_step
        return unchanged / moved if moved else 0.0


class SGD(_Optimizer):
    """Stochastic gradient descent, PyTorch's form: ``buf = momentum * buf + g``,
    ``w = w - lr * buf`` (``buf = g`` without momentum), every operation rounded in
    the policy's weight format, the last one by its ``update`` mode.

    Creating it rounds the parameters into the policy's weight format (FP32 master
    weights for the mixed policies) and writes working copies in the compute format
    back into them.

    Examples
    --------
    >>> import lowprec as lp
    >>> p = lp.nn.Parameter(lp.tensor([1.0, 1.0], "fp32"))
    >>> opt = lp.amp.SGD([p], lr=2.0**-10, policy="bf16")
    >>> p.grad = lp.tensor([1.0, 4.0], "bf16")
    >>> opt.step()
    >>> p.value, opt.unchanged_fraction
    (Tensor([1.0, 0.99609375], fmt=BF16), 0.5)
    """

    def __init__(self, params: list[nn.Parameter], lr: float, policy: Policy | str = "fp32", *,
                 momentum: float = 0.0, seed: int = 0) -> None:
        # Checked first: the base class takes the parameters over.
        self.momentum = check_real("momentum", momentum, low=0.0, high=1.0, high_open=True)
        super().__init__(params, lr, policy, seed)
        self._buf = [None] * len(self.params)

    def _step(self, i, g):
        if self.momentum:
            # The first buffer is a copy: g may be the parameter's own gradient.
            g = g.copy() if self._buf[i] is None else self._buf[i] * self.momentum + g
            self._buf[i] = g
        return g * self.lr


class Adam(_Optimizer):
    """Adam (Kingma & Ba), PyTorch's form: ``m = b1 m + (1 - b1) g``,
    ``v = b2 v + (1 - b2) g**2``, ``w = w - (lr / c1) m / (sqrt(v) / sqrt(c2) + eps)``
    with bias corrections ``c1 = 1 - b1**t``, ``c2 = 1 - b2**t`` computed as Python
    floats (as PyTorch does) and every Tensor operation rounded in the policy's
    weight format, hyperparameters included: in BF16, ``b2 = 0.999`` is 1.0, and in
    FP16 ``eps = 1e-8`` is 0 (a zero gradient then gives 0/0: pass a larger ``eps``,
    or keep FP32 master weights).

    Examples
    --------
    >>> import lowprec as lp
    >>> p = lp.nn.Parameter(lp.tensor([1.0, -1.0], "fp32"))
    >>> opt = lp.amp.Adam([p], lr=0.5)
    >>> p.grad = lp.tensor([0.25, -3.0], "fp32")
    >>> opt.step()
    >>> p.value
    Tensor([0.5, -0.5], fmt=FP32)
    """

    def __init__(self, params: list[nn.Parameter], lr: float = 1e-3,
                 policy: Policy | str = "fp32", *, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, seed: int = 0) -> None:
        # Checked first: the base class takes the parameters over.
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise TypeError(f"betas must be a pair (beta1, beta2), got {betas!r}")
        self.betas = tuple(check_real(f"betas[{i}]", b, low=0.0, high=1.0, high_open=True)
                           for i, b in enumerate(betas))
        self.eps = check_real("eps", eps, low=0.0, low_open=True, high=math.inf,
                              high_open=True)
        super().__init__(params, lr, policy, seed)
        self.t = 0
        self._m = [np.zeros_like(w) for w in self.weights]
        self._v = [np.zeros_like(w) for w in self.weights]

    def step(self, grads: Iterable[Tensor | ArrayLike] | None = None) -> None:
        self.t += 1
        super().step(grads)

    def _step(self, i, g):
        b1, b2 = self.betas
        self._m[i] = m = self._m[i] * b1 + g * (1.0 - b1)
        self._v[i] = v = self._v[i] * b2 + (g * g) * (1.0 - b2)
        c1, c2 = 1.0 - b1 ** self.t, 1.0 - b2 ** self.t
        denom = np.sqrt(v) / float(np.sqrt(c2)) + self.eps
        return (m / denom) * (self.lr / c1)

