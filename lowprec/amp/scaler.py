"""Dynamic loss scaling: `GradScaler`, PyTorch's rules for the loss scale, rule for rule.

The scale is an FP32 value; it multiplies the loss before the backward pass and its
FP32 inverse divides the gradients before the optimizer's step, which is skipped when
they hold an inf or a NaN. This module must never keep the scale outside FP32 nor
unscale a gradient in a format other than the one PyTorch uses (FP32, then the
gradient's own format).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike

from ..engine.checks import check_bool, check_int
from ..formats import FP16, FP32
from ..rounding import round as _round
from ..tensors import Tensor, tensor
from .checks import as_grads, check_real
from .optim import SGD, Adam

_Loss = TypeVar("_Loss", Tensor, float)

__all__ = ["GradScaler"]


def _fp32(x):
    """``x`` rounded to FP32 (PyTorch keeps the scale in a float32 tensor)."""
    return float(_round(x, FP32))


def _check_scale(name, value, *, zero=False):
    """A loss scale: a positive (or, with ``zero``, non-negative) finite real that
    stays so once rounded to FP32; returns the FP32 value."""
    value = check_real(name, value, low=0.0, low_open=not zero)
    scale = _fp32(value)
    if not math.isfinite(scale) or (scale == 0 and not zero):
        raise ValueError(f"{name} must be a positive value of FP32, got {value!r} "
                         f"(it rounds to {scale!r} in FP32)")
    return scale


def _finite(v: np.ndarray) -> bool:
    """Whether every value is finite: two reductions, no mask (NaN propagates)."""
    return v.size == 0 or bool(np.isfinite(np.maximum.reduce(v, axis=None))
                                and np.isfinite(np.minimum.reduce(v, axis=None)))


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
        self._growth_factor = check_real("growth_factor", growth_factor, low=1.0,
                                         low_open=True, high=math.inf, high_open=True)
        self._backoff_factor = check_real("backoff_factor", backoff_factor, low=0.0,
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
        grads = as_grads(grads)
        if any(g.fmt == FP16 for g in grads):
            raise ValueError("Attempting to unscale FP16 gradients. (PyTorch's refusal: "
                             "loss scaling unscales FP32 master gradients; keep the weights "
                             "in FP32, as the policy 'fp16-mixed' does.)")
        # PyTorch's reciprocal in float64, then FP32: 1/0 is inf there (Python raises).
        inv = tensor(_fp32(1.0 / self._scale) if self._scale else math.inf, FP32)
        found_inf = any(not _finite(g.values) for g in grads)
        with np.errstate(invalid="ignore"):       # 0 * inf is NaN: reported as found_inf
            out = [g * inv if g.fmt == FP32 else (g.astype(FP32) * inv).astype(g.fmt, "rne")
                   for g in grads]
        found_inf = found_inf or any(not _finite(g.values) for g in out)
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
        growth = check_real("state_dict['growth_factor']", state_dict["growth_factor"],
                            low=1.0, low_open=True, high=math.inf, high_open=True)
        backoff = check_real("state_dict['backoff_factor']", state_dict["backoff_factor"],
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

