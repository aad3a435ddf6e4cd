"""Argument checks shared by the amp files: real hyperparameters and gradients.

`check_real` is the one check of a real option (a learning rate, a factor, a scale),
with the interval it must lie in; `as_grad` and `as_grads` take gradients (Tensors, or
plain real numbers, which are FP32 gradients) as `lowprec.nn` does. The other kinds of
option (bools, ints, modes, seeds) are checked by `lowprec.engine.checks`. This module
holds no state and rounds nothing but plain real gradients, once, into FP32.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np

from .. import nn
from ..tensors import Tensor

__all__ = ["check_real", "as_grad", "as_grads"]


def check_real(name: str, value: object, *, low: float | None = None,
               high: float | None = None, low_open: bool = False,
               high_open: bool = False) -> float:
    """``value`` as a Python float: `TypeError` naming ``name`` unless it is a real
    number (bools excluded), `ValueError` for NaN or a value outside the interval
    (``low``/``high`` included unless ``low_open``/``high_open``; None: unbounded).

    Examples
    --------
    >>> check_real("momentum", 0.5, low=0.0, high=1.0, high_open=True)
    0.5
    >>> check_real("lr", 0.0, low=0.0, low_open=True)
    Traceback (most recent call last):
    ...
    ValueError: lr must be in (0, inf), got 0.0
    """
    if (not isinstance(value, (numbers.Real, np.floating, np.integer))
            or isinstance(value, (bool, np.bool_))):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    try:
        value = float(value)
    except OverflowError:                # an int past float64's range: +-inf, refused below
        value = math.inf if value > 0 else -math.inf  # type: ignore[operator]
    below = low is not None and (value <= low if low_open else value < low)
    above = high is not None and (value >= high if high_open else value > high)
    if math.isnan(value) or below or above:
        lo = "(-inf" if low is None else ("(" if low_open else "[") + f"{low:g}"
        hi = "inf)" if high is None else f"{high:g}" + (")" if high_open else "]")
        raise ValueError(f"{name} must be in {lo}, {hi}, got {value!r}")
    return value


def as_grad(g: object, name: str = "grads") -> Tensor:
    """A gradient as a `Tensor`: a Tensor as it is, plain real numbers (an ndarray
    of any float or int dtype, a list) rounded once to FP32, the format PyTorch's
    gradients of FP32 parameters have; `TypeError` for anything else."""
    return nn.real_tensor(g, name)


def as_grads(grads: Iterable[Any], name: str = "grads") -> list[Tensor]:
    """An iterable of gradients as a list of Tensors (see `as_grad`). A bare Tensor
    or ndarray is refused: it is one gradient, and iterating it would split it."""
    if (isinstance(grads, (Tensor, np.ndarray, str, bytes, dict))
            or not isinstance(grads, Iterable)):
        raise TypeError(f"{name} must be a list, tuple or other iterable of gradients "
                        f"(pass [g] for one), got {type(grads).__name__}")
    return [as_grad(g, f"{name}[{i}]") for i, g in enumerate(grads)]

