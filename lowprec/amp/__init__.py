"""Mixed-precision training, emulated: precision policies, loss scaling, master weights.

A `Policy` says in which format a network computes, accumulates its matrix
products, keeps its weights, delivers its gradients, loss and updates, and how the
weight update is rounded; `GradScaler` is PyTorch's dynamic loss scaling, rule for
rule; `SGD` and `Adam` keep the weights in the policy's weight format (FP32 master
weights for the mixed policies) and write low-precision working copies back into
the model; `train` runs a `lowprec.nn` model under a policy and measures what the
precision did (gradient underflows, skipped steps, the loss scale, weight updates
lost to rounding). This module must never compute a training quantity in float64
behind the policy's back: every value it produces is a value of the format the
policy names, and every rounding is one a real mixed-precision run would make.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .. import nn
from ..engine.checks import check_bool, check_int, check_mode, check_rng
from ..formats import BF16, FP16, FP32, Format
from ..formats import format as _format
from ..rounding import round as _round
from ..status import flags
from ..tensorcore import Model, resolve_model
from ..tensors import Tensor, context, tensor

_Loss = TypeVar("_Loss", Tensor, float)

__all__ = ["Policy", "POLICIES", "GradScaler", "SGD", "Adam", "History", "train",
           "evaluate", "blobs", "demo"]


# -- policies ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Policy:
    """Where each quantity of a training step lives, and how updates are rounded.

    Parameters
    ----------
    compute : Format or str
        Activations, their gradients and the working copies of the weights: every
        elementwise operation, and the rounding of every matrix product's result.
    matmul : str or TensorCoreModel
        The matmul model (``lp.matmul``): how products are accumulated before that
        rounding. ``"fp32"``, FP32 accumulation, in every named policy.
    weights : Format or str, optional
        The weights the optimizer updates, and the optimizer's state. When it differs
        from ``compute`` these are master weights, and the model computes with a copy
        rounded (to nearest) into ``compute``. Default: ``compute``.
    grads : Format or str, optional
        The format weight gradients are delivered in (rounded once from the matmul's
        accumulator). Default: ``compute``.
    update : str
        The rounding mode of the weight update ``w - step`` in ``weights``: ``"rne"``,
        or ``"sr"`` (stochastic rounding, seeded by the optimizer) or any `lp.round` mode.
    loss : Format or str, optional
        Softmax and cross-entropy, forward and backward. Default: ``compute``.

    Notes
    -----
    The named policies (`Policy.named`, `POLICIES`):

    ==============  =======  =======  =======  =======  ======
    name            compute  weights  grads    loss     matmul
    ==============  =======  =======  =======  =======  ======
    ``fp32``        FP32     FP32     FP32     FP32     fp32
    ``fp16``        FP16     FP16     FP16     FP16     fp32
    ``bf16``        BF16     BF16     BF16     BF16     fp32
    ``fp16-mixed``  FP16     FP32     FP16     FP32     fp32
    ``bf16-mixed``  BF16     FP32     BF16     FP32     fp32
    ==============  =======  =======  =======  =======  ======

    The pure policies are ``model.half()`` / ``model.bfloat16()``: the matrix
    products still accumulate in FP32, as Tensor Cores and BLAS libraries do for
    half-precision inputs (``matmul="fp16"`` gives FP16 accumulation). The mixed
    policies are ``torch.autocast`` with FP32 parameters: low-precision matrix
    products and activations, softmax and loss in FP32, FP32 weights and optimizer.

    Examples
    --------
    >>> import dataclasses, lowprec as lp
    >>> p = lp.amp.Policy.named("bf16-mixed")
    >>> p.compute, p.weights, p.master_weights
    (lp.BF16, lp.FP32, True)
    >>> sr = dataclasses.replace(lp.amp.Policy.named("bf16"), update="sr")
    >>> sr.name, sr.update, sr.master_weights
    (None, 'sr', False)
    >>> lp.amp.Policy("fp16", weights="fp32", loss="fp32").name
    'fp16-mixed'
    """

    compute: Format
    matmul: str | Model = "fp32"
    weights: Format | None = None
    grads: Format | None = None
    update: str = "rne"
    loss: Format | None = None

    def __post_init__(self) -> None:
        compute = _format(self.compute)
        object.__setattr__(self, "compute", compute)
        for name in ("weights", "grads", "loss"):
            value = getattr(self, name)
            object.__setattr__(self, name, compute if value is None else _format(value))
        check_mode(self.update, "update")
        try:        # matmul's own check: a name, a MODELS value (or copy), a TensorCoreModel
            resolve_model(self.matmul)
        except TypeError as exc:
            raise TypeError(str(exc).replace("model must", "matmul must", 1)) from None

    @classmethod
    def named(cls, name: Policy | str) -> Policy:
        """The named policy ``name`` (see the table above)."""
        if isinstance(name, Policy):
            return name
        if not isinstance(name, str):
            raise TypeError(f"policy must be a Policy or a name, one of {', '.join(POLICIES)};"
                            f" got {type(name).__name__} {name!r}")
        try:
            return POLICIES[name.lower()]
        except (KeyError, AttributeError):
            raise ValueError(f"unknown policy {name!r}; valid policies: "
                             f"{', '.join(POLICIES)}") from None

    @property
    def name(self) -> str | None:
        """The name of the named policy equal to this one, or None."""
        return next((n for n, p in POLICIES.items() if p == self), None)

    @property
    def master_weights(self) -> bool:
        """Whether the optimizer keeps weights in a format other than ``compute``."""
        return self.weights != self.compute


#: The named policies.
POLICIES = {
    "fp32": Policy(FP32),
    "fp16": Policy(FP16),
    "bf16": Policy(BF16),
    "fp16-mixed": Policy(FP16, weights=FP32, loss=FP32),
    "bf16-mixed": Policy(BF16, weights=FP32, loss=FP32),
}


# -- loss scaling --------------------------------------------------------------------------

def _fp32(x):
    """``x`` rounded to FP32 (PyTorch keeps the scale in a float32 tensor)."""
    return float(_round(x, FP32))


def _check_real(name, value, *, low=None, high=None, low_open=False, high_open=False):
    """``value`` as a Python float: `TypeError` naming ``name`` unless it is a real
    number (bools excluded), `ValueError` for NaN or a value outside the interval
    (``low``/``high`` included unless ``low_open``/``high_open``; None: unbounded)."""
    if (not isinstance(value, (numbers.Real, np.floating, np.integer))
            or isinstance(value, (bool, np.bool_))):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    below = low is not None and (value <= low if low_open else value < low)
    above = high is not None and (value >= high if high_open else value > high)
    if math.isnan(value) or below or above:
        lo = "(-inf" if low is None else ("(" if low_open else "[") + f"{low:g}"
        hi = "inf)" if high is None else f"{high:g}" + (")" if high_open else "]")
        raise ValueError(f"{name} must be in {lo}, {hi}, got {value!r}")
    return value


def _check_scale(name, value, *, zero=False):
    """A loss scale: a positive (or, with ``zero``, non-negative) finite real that
    stays so once rounded to FP32; returns the FP32 value."""
    value = _check_real(name, value, low=0.0, low_open=not zero)
    scale = _fp32(value)
    if not math.isfinite(scale) or (scale == 0 and not zero):
        raise ValueError(f"{name} must be a positive value of FP32, got {value!r} "
                         f"(it rounds to {scale!r} in FP32)")
    return scale


def _as_grad(g, name="grads"):
    """A gradient as a `Tensor`: a Tensor as it is, plain real numbers (an ndarray
    of any float or int dtype, a list) rounded once to FP32, the format PyTorch's
    gradients of FP32 parameters have; `TypeError` for anything else."""
    return nn._real_tensor(g, name)


def _as_grads(grads: Iterable[Any], name: str = "grads") -> list[Tensor]:
    """An iterable of gradients as a list of Tensors (see `_as_grad`). A bare Tensor
    or ndarray is refused: it is one gradient, and iterating it would split it."""
    if (isinstance(grads, (Tensor, np.ndarray, str, bytes, dict))
            or not isinstance(grads, Iterable)):
        raise TypeError(f"{name} must be a list, tuple or other iterable of gradients "
                        f"(pass [g] for one), got {type(grads).__name__}")
    return [_as_grad(g, f"{name}[{i}]") for i, g in enumerate(grads)]


class GradScaler:
    """Dynamic loss scaling with ``torch.amp.GradScaler``'s documented rules.

    Multiply the loss by the scale before the backward pass (`scale`), divide the
    gradients by it before the step (`unscale`, which also checks them for inf and
    NaN), then `update`: after an inf/NaN the step is skipped and the scale is
    multiplied by ``backoff_factor``; after ``growth_interval`` consecutive clean
    steps it is multiplied by ``growth_factor``. The scale is an FP32 value; a growth
    that would overflow FP32 is not applied (as PyTorch's ``_amp_update_scale_``).
    A disabled scaler does nothing: ``scale`` returns the loss, ``unscale`` the
    gradients with ``found_inf=False``, ``get_scale`` 1.0.

    Parameters
    ----------
    init_scale : float
        Positive, and positive and finite once rounded to FP32.
    growth_factor : float
        Finite, greater than 1 (PyTorch's rule).
    backoff_factor : float
        In (0, 1) (PyTorch asks for < 1; 0 or less would zero or negate the scale).
    growth_interval : int
        At least 1.
    enabled : bool

    Notes
    -----
    Backing off is not clamped, as in PyTorch: after 166 consecutive backoffs from
    2**16 the FP32 scale underflows to 0 (2**-150 ties to 0), and it then stays 0,
    since growth needs clean steps. Whenever the FP32 inverse of the scale is not
    finite (a scale below about 2**-128, 0 included) every gradient is inf or NaN
    once unscaled: `unscale` reports ``found_inf`` and the step is skipped. In
    general ``found_inf`` is true when a gradient holds an inf or a NaN before *or
    after* unscaling; PyTorch checks only before (the scaled gradients), and would
    step with the infinite unscaled ones. A scale that has collapsed to 0 says the
    gradients are inf or NaN whatever the scale: look for a NaN in the model.

    Examples
    --------
    >>> import lowprec as lp
    >>> s = lp.amp.GradScaler(init_scale=2.0**4, growth_interval=2)
    >>> for grads in ([1.0], [float("inf")], [1.0], [1.0]):
    ...     _, found_inf = s.unscale([lp.tensor(grads, "fp32")])
    ...     s.update()
    ...     print(found_inf, s.get_scale())
    False 16.0
    True 8.0
    False 8.0
    False 16.0
    >>> s.state_dict()
    {'scale': 16.0, 'growth_factor': 2.0, 'backoff_factor': 0.5, 'growth_interval': 2,
     '_growth_tracker': 0}
    """

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True) -> None:
        self._enabled = check_bool("enabled", enabled)
        self._scale = _check_scale("init_scale", init_scale)
        self._growth_factor = _check_real("growth_factor", growth_factor, low=1.0,
                                          low_open=True, high=math.inf, high_open=True)
        self._backoff_factor = _check_real("backoff_factor", backoff_factor, low=0.0,
                                           low_open=True, high=1.0, high_open=True)
        self._growth_interval = check_int("growth_interval", growth_interval, minimum=1)
        self._growth_tracker = 0
        self._found_inf: bool | None = None

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        """The current scale (a Python float), 1.0 when disabled."""
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def scale(self, loss: _Loss) -> _Loss:
        """``loss * scale``; a Tensor loss meets an FP32 scale, so an FP16 or BF16
        loss gives an FP32 product, as in PyTorch.

        Examples
        --------
        >>> import lowprec as lp
        >>> lp.amp.GradScaler().scale(lp.tensor(1.5, "fp16"))
        Tensor(98304.0, fmt=FP32)
        """
        if not self._enabled:
            return loss
        if isinstance(loss, Tensor):
            return loss * tensor(self._scale, FP32)
        return loss * self._scale

    def unscale(self, grads: Iterable[Tensor | ArrayLike]) -> tuple[list[Any], bool]:
        """Divide gradients by the scale; returns ``(grads, found_inf)``.

        Each gradient is multiplied by ``1/scale`` rounded to FP32 (computed in
        float64, as PyTorch does), in FP32, and rounded back to its own format
        (PyTorch's in-place ``mul_``). ``grads`` is a list of Tensors; plain arrays
        of real numbers are FP32 gradients (rounded to FP32 once). ``found_inf``
        says whether any gradient holds an inf or a NaN, before or after unscaling
        (see the class notes); `update` acts on it. FP16 gradients raise
        `ValueError`, as in PyTorch: their unscaled values would underflow again;
        keep FP32 master weights (``"fp16-mixed"``).

        Examples
        --------
        >>> import numpy as np, lowprec as lp
        >>> lp.amp.GradScaler(init_scale=4.0).unscale([np.array([1.0, 0.1])])
        ([Tensor([0.25, 0.02500000037252903], fmt=FP32)], False)
        """
        if not self._enabled:
            return list(grads), False
        if self._found_inf is not None:
            raise RuntimeError("unscale() has already been called since the last update().")
        grads = _as_grads(grads)
        if any(g.fmt == FP16 for g in grads):
            raise ValueError("Attempting to unscale FP16 gradients.")
        # PyTorch's reciprocal in float64, then FP32: 1/0 is inf there (Python raises).
        inv = tensor(_fp32(1.0 / self._scale) if self._scale else math.inf, FP32)
        found_inf = any(not np.all(np.isfinite(g.values)) for g in grads)
        with np.errstate(invalid="ignore"):       # 0 * inf is NaN: reported as found_inf
            out = [g * inv if g.fmt == FP32 else (g.astype(FP32) * inv).astype(g.fmt, "rne")
                   for g in grads]
        found_inf = found_inf or any(not np.all(np.isfinite(g.values)) for g in out)
        self._found_inf = bool(found_inf)
        return out, self._found_inf

    def step(self, optimizer: SGD | Adam,
             grads: Iterable[Tensor | ArrayLike] | None = None) -> bool:
        """Unscale ``grads`` (default: the optimizer's) unless `unscale` was called
        this iteration, then step the optimizer unless they hold inf or NaN.
        Returns whether the step was taken."""
        if not self._enabled:
            optimizer.step(grads)
            return True
        if grads is None or self._found_inf is None:
            grads, _ = self.unscale(optimizer.gradients() if grads is None else grads)
        if self._found_inf:
            return False
        optimizer.step(grads)
        return True

    def update(self, new_scale: float | None = None) -> None:
        """Back off after an inf/NaN, grow after ``growth_interval`` clean steps;
        ``new_scale`` sets the scale instead."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = _check_scale("new_scale", new_scale)
        elif self._found_inf is None:
            raise RuntimeError("No inf checks were recorded prior to update.")
        elif self._found_inf:
            self._scale = _fp32(self._scale * self._backoff_factor)
            self._growth_tracker = 0
        else:
            successful = self._growth_tracker + 1
            if successful == self._growth_interval:
                grown = _fp32(self._scale * self._growth_factor)
                if np.isfinite(grown):
                    self._scale = grown
                self._growth_tracker = 0
            else:
                self._growth_tracker = successful
        self._found_inf = None

    def state_dict(self) -> dict[str, Any]:
        """PyTorch's keys: scale, growth_factor, backoff_factor, growth_interval,
        _growth_tracker; empty when disabled."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Load a `state_dict` (PyTorch's keys, all five required). Every entry is
        checked before any is loaded: `TypeError` or `ValueError` naming the key.
        A saved scale of 0 (a collapsed scaler, see the class notes) loads as it is."""
        if not self._enabled:
            return
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"state_dict must be a dict, got {type(state_dict).__name__}")
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was "
                               "saved from a disabled instance of GradScaler.")
        keys = ("scale", "growth_factor", "backoff_factor", "growth_interval",
                "_growth_tracker")
        missing = [k for k in keys if k not in state_dict]
        unknown = [k for k in state_dict if k not in keys]
        if missing or unknown:
            raise ValueError(f"state_dict must have the keys {', '.join(keys)}; "
                             + (f"missing {', '.join(map(repr, missing))}" if missing
                                else f"unknown {', '.join(map(repr, unknown))}"))
        scale = _check_scale("state_dict['scale']", state_dict["scale"], zero=True)
        growth = _check_real("state_dict['growth_factor']", state_dict["growth_factor"],
                             low=1.0, low_open=True, high=math.inf, high_open=True)
        backoff = _check_real("state_dict['backoff_factor']", state_dict["backoff_factor"],
                              low=0.0, low_open=True, high=1.0, high_open=True)
        interval = check_int("state_dict['growth_interval']", state_dict["growth_interval"],
                             minimum=1)
        tracker = check_int("state_dict['_growth_tracker']", state_dict["_growth_tracker"],
                            minimum=0)
        if tracker >= interval:
            raise ValueError(f"state_dict['_growth_tracker'] must be below growth_interval "
                             f"{interval}, got {tracker}")
        self._scale, self._growth_factor, self._backoff_factor = scale, growth, backoff
        self._growth_interval, self._growth_tracker = interval, tracker

    def __repr__(self) -> str:
        if not self._enabled:
            return "GradScaler(enabled=False)"
        return (f"GradScaler(scale={self._scale!r}, growth_factor={self._growth_factor!r}, "
                f"backoff_factor={self._backoff_factor!r}, "
                f"growth_interval={self._growth_interval!r})")


# -- optimizers -----------------------------------------------------------------------------

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
        self.lr = _check_real("lr", lr, low=0.0, low_open=True, high=math.inf,
                              high_open=True)
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
        grads = [_as_grad(p.grad, f"params[{i}].grad") for i, p in enumerate(self.params)]
        return [g if g.fmt == fmt else g.astype(fmt, "rne") for g in grads]

    def step(self, grads: Iterable[Tensor | ArrayLike] | None = None) -> None:
        """One update of every weight from ``grads`` (default: `gradients`), a list
        of Tensors, one per parameter (plain arrays of real numbers are FP32
        gradients, rounded to FP32 once); the working copies are written back into
        the parameters."""
        grads = self.gradients() if grads is None else _as_grads(grads)
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
                step = self._step(i, g.astype(pol.weights, "rne"))
            with context(mode=pol.update, rng=self.rng):
                new = w - step
            nonzero = np.asarray(g) != 0
            moved += int(np.count_nonzero(nonzero))
            unchanged += int(np.count_nonzero(nonzero & (np.asarray(new) == np.asarray(w))))
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
        self.momentum = _check_real("momentum", momentum, low=0.0, high=1.0, high_open=True)
        super().__init__(params, lr, policy, seed)
        self._buf = [None] * len(self.params)

    def _step(self, i, g):
        if self.momentum:
            g = g if self._buf[i] is None else self._buf[i] * self.momentum + g
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
        self.betas = tuple(_check_real(f"betas[{i}]", b, low=0.0, high=1.0, high_open=True)
                           for i, b in enumerate(betas))
        self.eps = _check_real("eps", eps, low=0.0, low_open=True, high=math.inf,
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


# -- training --------------------------------------------------------------------------------

@dataclass
class History:
    """What `train` measured, one entry per step.

    Attributes
    ----------
    policy : Policy
    loss : list of float
        The cross-entropy of the batch, as the policy computed it (unscaled,
        unweighted).
    scale : list of float
        The loss scale used in the step (1.0 without a scaler).
    skipped : list of bool
        Steps skipped because the gradients held inf or NaN.
    grad_underflow : list of int
        Underflow exceptions (``lp.flags()``) raised by the backward pass.
    grad_zero : list of float
        Fraction of the weight-gradient elements that are zero.
    unchanged : list of float
        Of the weights with a nonzero gradient, the fraction the step left
        unchanged (NaN for skipped steps).
    final_loss, final_accuracy : float
        The trained weights (masters, where kept) evaluated in FP32 on all data.
    """

    policy: Policy
    loss: list = field(default_factory=list)
    scale: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    grad_underflow: list = field(default_factory=list)
    grad_zero: list = field(default_factory=list)
    unchanged: list = field(default_factory=list)
    final_loss: float = float("nan")
    final_accuracy: float = float("nan")

    def summary(self) -> dict[str, float]:
        """The number of steps, the means over the run and the final figures, as a
        dict of floats (``steps`` and ``skipped`` are ints). A mean over no steps
        (a run of 0 steps; ``unchanged`` when every step was skipped) is NaN, and so
        is the final scale of a run of 0 steps.

        Examples
        --------
        >>> import lowprec as lp
        >>> s = lp.amp.History(lp.amp.Policy.named("fp32")).summary()
        >>> s["steps"], s["skipped"], s["grad_zero"], s["final_scale"]
        (0, 0, nan, nan)
        """
        def mean(xs):
            xs = [x for x in xs if not np.isnan(x)]
            return float(np.mean(xs)) if xs else float("nan")
        return {"steps": len(self.loss), "final_loss": self.final_loss,
                "final_accuracy": self.final_accuracy, "grad_zero": mean(self.grad_zero),
                "grad_underflow": mean(self.grad_underflow),
                "unchanged": mean(self.unchanged), "skipped": int(np.sum(self.skipped)),
                "final_scale": self.scale[-1] if self.scale else float("nan")}


def train(model: nn.Sequential, data: tuple[ArrayLike, ArrayLike], policy: Policy | str,
          steps: int, *, optimizer: str = "sgd", lr: float = 0.1, momentum: float = 0.0,
          scaler: GradScaler | None = None, loss_weight: float = 1.0,
          batch_size: int | None = None, seed: int = 0) -> History:
    """Train ``model`` (a `lowprec.nn` model) on ``data`` under ``policy``.

    Each step: the forward pass in ``policy.compute`` under ``policy.matmul``; the
    loss (softmax cross-entropy in ``policy.loss``) times ``loss_weight``; the
    backward pass from the seed ``d(scaled loss)/d(loss) = scale * loss_weight``,
    rounded into the loss format, under ``lp.flags()``; the gradients in the
    weight format, unscaled by ``scaler``; the optimizer step, skipped when the
    scaler found inf or NaN; ``scaler.update()``.

    Parameters
    ----------
    model : lowprec.nn.Sequential
        Its parameters are taken over by the optimizer (rounded to the policy's
        weight format, working copies in the compute format).
    data : (x, labels)
        Float features of shape (N, d) and integer labels of shape (N,).
    policy : Policy or str
    steps : int
    optimizer : {"sgd", "adam"}
    lr, momentum : float
        Learning rate; SGD momentum.
    scaler : GradScaler, optional
        Dynamic loss scaling; None for none.
    loss_weight : float
        A constant factor on the loss (a weighted term of a larger loss, or a mean
        over many more elements), which makes the gradients that much smaller.
    batch_size : int, optional
        Minibatches drawn with replacement (seeded by ``seed``); None: full batch.
    seed : int
        Seeds the minibatches and stochastic rounding of updates.

    Returns
    -------
    History

    Raises
    ------
    TypeError, ValueError
        For a bad argument, naming it: a model that is not a `lowprec.nn` model,
        features that are not real numbers (NumPy would parse strings) or not of
        shape (N, d), labels that are not integers in [0, classes) of shape (N,),
        ``steps < 0``, ``lr``, ``loss_weight`` not positive and finite, ``momentum``
        outside [0, 1), an unknown policy or optimizer. All are checked before the
        optimizer takes the model's parameters over, so a refused call leaves the
        model as it was (for a model other than a `Sequential` of `lowprec.nn`
        layers, labels past the output width are found on the first step).

    Examples
    --------
    >>> import lowprec as lp
    >>> data = lp.amp.blobs(64, 4, 3, seed=0)
    >>> h = lp.amp.train(lp.nn.mlp([4, 8, 3], rng=0), data, "bf16-mixed", 5, lr=0.5)
    >>> len(h.loss), h.loss[-1] < h.loss[0], h.skipped
    (5, True, [False, False, False, False, False])
    """
    # Everything is checked before the optimizer takes the model's parameters over.
    _check_model(model)
    x, labels = _check_data(data)
    policy = Policy.named(policy)
    steps = check_int("steps", steps, minimum=0)
    if optimizer not in ("sgd", "adam"):
        raise ValueError(f"unknown optimizer {optimizer!r}; valid: sgd, adam")
    if scaler is not None and not isinstance(scaler, GradScaler):
        raise TypeError(f"scaler must be a GradScaler or None, got {type(scaler).__name__}")
    loss_weight = _check_real("loss_weight", loss_weight, low=0.0, low_open=True,
                              high=math.inf, high_open=True)
    if batch_size is not None:
        batch_size = check_int("batch_size", batch_size, minimum=1)
    check_rng(seed, "seed")
    first = model.layers[0] if isinstance(model, nn.Sequential) and model.layers else model
    if isinstance(first, nn.Linear) and x.shape[1] != first.weight.value.shape[0]:
        raise ValueError(f"data's features x must have shape (N, {first.weight.value.shape[0]})"
                         f" for the model's input, got shape {x.shape}")
    classes = _classes(model)
    if classes is not None:
        nn._check_labels(labels, len(labels), classes, what="one per row of x")
    params = model.parameters()
    opt: SGD | Adam
    if optimizer == "sgd":
        opt = SGD(params, lr, policy, momentum=momentum, seed=seed)
    else:
        opt = Adam(params, lr, policy, seed=seed)
    batches = np.random.default_rng(seed)
    x_all = tensor(x, policy.compute, "rne")
    history = History(policy)
    with context(mode="rne", matmul=policy.matmul):
        for _ in range(steps):
            if batch_size is None:
                xb, yb = x_all, labels
            else:
                idx = batches.integers(0, len(labels), batch_size)
                xb, yb = x_all[idx], labels[idx]
            # policy.loss is a Format once Policy.__post_init__ has run.
            logits = model.forward(xb).astype(policy.loss)  # type: ignore[arg-type]
            if classes is None:        # every label, not only a minibatch's
                classes = logits.shape[1]
                nn._check_labels(labels, len(labels), classes, what="one per row of x")
            loss = nn.softmax_cross_entropy(logits, yb)
            scale = scaler.get_scale() if scaler is not None else 1.0
            with flags() as f:
                seed_grad = tensor(scale, policy.loss) * loss_weight
                dz = nn.softmax_cross_entropy_backward(logits, yb, seed_grad)
                model.backward(dz.astype(policy.compute))
            grads = opt.gradients()
            found_inf = False
            if scaler is not None:
                grads, found_inf = scaler.unscale(grads)
            if not found_inf:
                opt.step(grads)
            if scaler is not None:
                scaler.update()
            zeros = sum(int(np.count_nonzero(np.asarray(p.grad) == 0)) for p in params)
            history.loss.append(float(loss))
            history.scale.append(scale)
            history.skipped.append(bool(found_inf))
            history.grad_underflow.append(f.underflow)
            # Every p.grad is set: opt.gradients() refused a missing one.
            history.grad_zero.append(zeros / sum(p.grad.size for p in params))  # type: ignore[union-attr,misc]
            history.unchanged.append(float("nan") if found_inf else opt.unchanged_fraction)
    history.final_loss, history.final_accuracy = evaluate(model, data, opt.weights)
    return history


def _check_model(model):
    """`TypeError` naming ``model`` unless it is a `lowprec.nn` model."""
    if not all(callable(getattr(model, m, None)) for m in ("forward", "backward", "parameters")):
        raise TypeError(f"model must be a lowprec.nn model (with forward, backward and "
                        f"parameters), e.g. lp.nn.mlp([8, 16, 4]); got {type(model).__name__}")


def _classes(model):
    """The model's output width where its layers say it (a `lowprec.nn.Linear`, or a
    `Sequential` ending in one, then activations), else None."""
    layers = model.layers if isinstance(model, nn.Sequential) else [model]
    for layer in reversed(layers):
        if isinstance(layer, nn.Linear):
            return layer.weight.value.shape[1]
        if not isinstance(layer, (nn.ReLU, nn.GELU)):
            return None
    return None


def _check_data(data):
    """``data`` as ``(x, labels)``: float64 features of shape (N, d) (from real
    numbers only: NumPy would parse strings) and int labels of shape (N,), >= 0."""
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise TypeError(f"data must be a pair (x, labels), got {type(data).__name__}")
    x, labels = data
    x = np.asarray(x)
    if x.dtype.kind not in "biuf":
        raise TypeError(f"data's features x must be real numbers, got dtype {x.dtype}")
    if x.ndim != 2:
        raise ValueError(f"data's features x must have shape (N, d), got shape {x.shape}")
    labels = nn._check_labels(labels, x.shape[0], what="one per row of x")
    return x.astype(np.float64), labels


def evaluate(model: nn.Sequential, data: tuple[ArrayLike, ArrayLike],
             weights: list[Tensor] | None = None) -> tuple[float, float]:
    """Loss and accuracy of ``model`` on ``data`` in FP32 (FP32 accumulation), with
    ``weights`` (a list of Tensors, one per parameter) in place of the parameters'
    values when given. Returns ``(loss, accuracy)`` as floats.

    Examples
    --------
    >>> import lowprec as lp
    >>> data = lp.amp.blobs(32, 2, 2, seed=1)
    >>> loss, acc = lp.amp.evaluate(lp.nn.mlp([2, 4, 2], rng=0), data)
    >>> 0.0 <= acc <= 1.0, loss > 0
    (True, True)
    """
    _check_model(model)
    x, labels = _check_data(data)
    params = model.parameters()
    saved = [p.value for p in params]
    if weights is None:
        weights = saved
    else:
        weights = _as_grads(weights, "weights")
        if len(weights) != len(params):
            raise ValueError(f"weights must hold one Tensor per parameter ({len(params)}), "
                             f"got {len(weights)}")
        for i, (w, p) in enumerate(zip(weights, params)):
            if w.shape != p.value.shape:
                raise ValueError(f"weights[{i}] must have its parameter's shape "
                                 f"{p.value.shape}, got shape {w.shape}")
    try:
        for p, w in zip(params, weights):
            p.value = w.astype(FP32, "rne")
        with context(mode="rne", matmul="fp32"):
            logits = model.forward(tensor(x, FP32, "rne"))
            loss = nn.softmax_cross_entropy(logits, labels)
    finally:
        for p, v in zip(params, saved):
            p.value = v
    accuracy = float(np.mean(np.argmax(np.asarray(logits), axis=1) == np.asarray(labels)))
    return float(loss), accuracy


def blobs(n: int, dim: int, classes: int, *, spread: float = 1.0,
          seed: int = 0) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """A synthetic classification task: ``classes`` Gaussian clusters in ``dim``
    dimensions, centres drawn from N(0, 1), points from N(centre, spread**2).
    Returns ``(x, labels)``: float64 (n, dim) and int (n,), from a seeded NumPy
    generator (nothing is downloaded).

    Examples
    --------
    >>> import lowprec as lp
    >>> x, y = lp.amp.blobs(6, 2, 3, seed=0)
    >>> x.shape, y.tolist()
    ((6, 2), [0, 1, 2, 0, 1, 2])
    """
    n = check_int("n", n, minimum=1)
    dim = check_int("dim", dim, minimum=1)
    classes = check_int("classes", classes, minimum=1)
    spread = _check_real("spread", spread, low=0.0, high=math.inf, high_open=True)
    check_rng(seed, "seed")
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((classes, dim))
    labels = np.arange(n) % classes
    x = centres[labels] + spread * rng.standard_normal((n, dim))
    return x, labels


@functools.cache
def demo(n: int = 64, steps: int = 40, lr: float = 0.02, loss_weight: float = 2.0**-18) -> str:
    """The mixed-precision comparison ``lowprec demo`` prints: one small task trained
    under each policy, as a text table (computed on the call, a few seconds; cached).

    The task: `blobs` ``(n, 8, 4, seed=0)``, ``lp.nn.mlp([8, 16, 4], rng=0)``,
    ``steps`` full-batch SGD steps at ``lr``. The FP16 rows weight the loss by
    ``loss_weight`` and multiply the learning rate by its inverse: the gradients
    are that much smaller, and FP32 would take the same steps bit for bit.

    Examples
    --------
    >>> import lowprec as lp
    >>> text = lp.amp.demo(n=16, steps=2)
    >>> print(text.splitlines()[0])
    Task: 4 Gaussian blobs in 8-D (16 points), MLP 8-16-4 (ReLU), 2 full-batch SGD steps, lr 0.02.
    >>> for line in text.splitlines()[7:13]:
    ...     print(line.split(" | ")[0])
    fp32
    fp16-mixed, no loss scaling
    fp16-mixed + GradScaler
    bf16 (BF16 weights)
    bf16-mixed (FP32 masters)
    bf16 + stochastic rounding
    """
    n = check_int("n", n, minimum=1)
    steps = check_int("steps", steps, minimum=0)
    lr = _check_real("lr", lr, low=0.0, low_open=True, high=math.inf, high_open=True)
    loss_weight = _check_real("loss_weight", loss_weight, low=0.0, low_open=True,
                              high=math.inf, high_open=True)
    data = blobs(n, 8, 4, seed=0)
    bf16_sr = replace(POLICIES["bf16"], update="sr")
    runs: list[tuple[str, Policy | str, float, GradScaler | None]] = [
        ("fp32", "fp32", 1.0, None),
        ("fp16-mixed, no loss scaling", "fp16-mixed", loss_weight, None),
        ("fp16-mixed + GradScaler", "fp16-mixed", loss_weight, GradScaler()),
        ("bf16 (BF16 weights)", "bf16", 1.0, None),
        ("bf16-mixed (FP32 masters)", "bf16-mixed", 1.0, None),
        ("bf16 + stochastic rounding", bf16_sr, 1.0, None)]
    header = ("run", "final loss", "grads zero", "updates lost", "skipped")
    rows = []
    for label, policy, weight, scaler in runs:
        h = train(nn.mlp([8, 16, 4], rng=0), data, policy, steps, lr=lr / weight,
                  loss_weight=weight, scaler=scaler)
        s = h.summary()
        rows.append((label, f"{s['final_loss']:.4f}", f"{s['grad_zero']:.1%}",
                     f"{s['unchanged']:.1%}", str(s["skipped"])))
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    line = lambda r: " | ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    if math.frexp(loss_weight)[0] == 0.5:          # a power of two
        exponent = math.frexp(loss_weight)[1] - 1
        weighting = f"by 2**{exponent} (learning rate times 2**{-exponent})"
    else:
        weighting = f"by {loss_weight:g} (learning rate divided by it)"
    return "\n".join([
        f"Task: 4 Gaussian blobs in 8-D ({n} points), MLP 8-16-4 (ReLU), {steps} "
        f"full-batch SGD steps, lr {lr}.",
        f"The fp16 rows weight the loss {weighting}: tiny gradients.",
        "grads zero: weight-gradient elements that are 0; updates lost: weights with a "
        "nonzero gradient\nthat the step left unchanged (final loss: the trained "
        "weights evaluated in FP32).", "",
        line(header), "-+-".join("-" * w for w in widths), *map(line, rows), "",
        "Read: without loss scaling FP16 gradients underflow to zero; the GradScaler "
        "brings them back.\nBF16 weights round small updates away; FP32 master weights "
        "keep them, and stochastic\nrounding keeps them on average (it still leaves "
        "many weights unchanged in any one step)."])
