"""The public elementwise operations ``add sub mul div sqrt fma``, rounded once.

Each checks its options, broadcasts its operands and hands its kernel to the chunk
driver; the part of their docstrings that they share is written once, here. They
never modify their inputs and never read a global default.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..engine.lazy import lazy_entry
from ..engine.scratch import SMALL
from ..formats import FormatLike
from ..status import recording
from ..types import Mode, RNGLike
from .driver import apply, broadcast_operands, operation_plan, small_call
from .kernels import add_kernel, div_kernel, fma_kernel, mul_kernel, sqrt_kernel, sub_kernel

__all__ = ["add", "sub", "mul", "div", "sqrt", "fma", "on_values"]


def _elementwise(kernel, operands, fmt, mode, rng, subnormals, saturate, plain=None,
                 offset=0):
    plan = operation_plan(fmt, mode, rng, subnormals, saturate, offset)
    x = operands[0]
    if (type(x) is np.ndarray and x.ndim == 1 and x.dtype == np.float64
            and x.flags.c_contiguous
            and all(type(y) is np.ndarray and y.shape == x.shape and y.dtype == np.float64
                    and y.flags.c_contiguous for y in operands[1:])):
        # Contiguous float64 vectors of one shape (a Tensor's values): nothing to broadcast.
        return apply(plan, kernel, list(operands), x.size, plain=plain)
    flat, shape, scalar = broadcast_operands(*operands)
    out = apply(plan, kernel, flat, math.prod(shape), plain=plain)
    if scalar:
        return out[0]                   # a NumPy scalar, as out.reshape(())[()]
    return out if out.shape == shape else out.reshape(shape)


# -- public operations ------------------------------------------------------------

_COMMON_DOC = """
    Parameters
    ----------
    {operands} : array_like
        Real operands, broadcast together as NumPy does (up to 64 dimensions): any
        values, not only values of ``fmt``: float16/32/64, long doubles, integers
        (64-bit, and Python ints below 2**1024 - 2**970), as `lowprec.round` takes
        them. The exact value of each is used, so the result is rounded once. They
        are never modified.
    fmt : Format or str
        Result format (anything `lowprec.format` accepts): formats of at most 51
        bits of precision, and FP64.
    mode : {{"rne", "rna", "rz", "ru", "rd", "ro", "sr"}}
        Rounding mode, as in `lowprec.round`. The deterministic modes are exact;
        ``"sr"`` draws against a 53-bit round-to-odd stand-in for the exact result,
        so its probabilities are exact to within ``2**(p - 53)`` of the gap (FP64:
        to within about ``2**-52`` of it).
    rng : numpy.random.Generator or int, optional
        Randomness for ``"sr"``.
    subnormals : bool, optional
        Override the format's subnormal support.
    saturate : bool
        Send overflows to ±max, as in `lowprec.round`.

    Returns
    -------
    numpy.ndarray or numpy.float64
        float64 values of ``fmt``, with the broadcast shape (a NumPy scalar when
        every operand is a scalar).

    Notes
    -----
    Operands are converted to float64 and computed chunk by chunk (2**17
    elements), so the memory beyond the result is at most ``MEMORY_CHUNKS`` (48)
    chunks of float64, 48 MiB, per thread (`lowprec.threads`), whatever the size
    of the input and its dtype (float16/32/64, integers, long double), FP64 results
    included. Operands that are not contiguous, and non-scalars that broadcast, are
    first copied as NumPy would copy them, in their own dtype.
"""


@lazy_entry("add", 2)
def add(a: ArrayLike, b: ArrayLike, fmt: FormatLike, mode: Mode = "rne", *,
        rng: RNGLike = None, subnormals: bool | None = None,
        saturate: bool = False, offset: int = 0) -> NDArray[np.float64] | np.float64:
    """``a + b`` rounded once to ``fmt``: correctly rounded in every mode.

    IEEE 754's special cases hold: ``inf - inf`` is NaN and counts as invalid;
    an exact zero sum of opposite-signed terms is +0, or -0 under ``"rd"``;
    ``-0 + -0`` is -0.
    {doc}
    Examples
    --------
    >>> import lowprec as lp
    >>> lp.add(1.0, 2.0**-9, "bf16"), lp.add(1.0, 2.0**-9, "bf16", mode="ru")
    (np.float64(1.0), np.float64(1.0078125))
    >>> lp.add(256.0, [1.0, 1.5], "bf16")    # 256 + 1 is a tie: it rounds to even
    array([256., 258.])
    >>> lp.add(1.0, -1.0, "fp16", mode="rd")
    np.float64(-0.0)
    """
    return _elementwise(add_kernel, (a, b), fmt, mode, rng, subnormals, saturate,
                        offset=offset)


@lazy_entry("sub", 2)
def sub(a: ArrayLike, b: ArrayLike, fmt: FormatLike, mode: Mode = "rne", *,
        rng: RNGLike = None, subnormals: bool | None = None,
        saturate: bool = False, offset: int = 0) -> NDArray[np.float64] | np.float64:
    """``a - b`` rounded once to ``fmt``; see `add`.
    {doc}
    Examples
    --------
    >>> import lowprec as lp
    >>> lp.sub(1.0, 2.0**-30, "fp16"), lp.sub(1.0, 2.0**-30, "fp16", mode="rz")
    (np.float64(1.0), np.float64(0.99951171875))
    """
    return _elementwise(sub_kernel, (a, b), fmt, mode, rng, subnormals, saturate,
                        offset=offset)


@lazy_entry("mul", 2)
def mul(a: ArrayLike, b: ArrayLike, fmt: FormatLike, mode: Mode = "rne", *,
        rng: RNGLike = None, subnormals: bool | None = None,
        saturate: bool = False, offset: int = 0) -> NDArray[np.float64] | np.float64:
    """``a * b`` rounded once to ``fmt``: correctly rounded in every mode.

    ``0 * inf`` is NaN and counts as invalid.
    {doc}
    Examples
    --------
    >>> import lowprec as lp
    >>> x = 1 + 2.0**-7                       # a BF16 value
    >>> lp.mul(x, x, "bf16"), lp.mul(x, x, "bf16", mode="ru")
    (np.float64(1.015625), np.float64(1.0234375))
    >>> lp.mul(448.0, 2.0, "e4m3"), lp.mul(448.0, 2.0, "e4m3", saturate=True)
    (np.float64(nan), np.float64(448.0))
    """
    return _elementwise(mul_kernel, (a, b), fmt, mode, rng, subnormals, saturate,
                        offset=offset)


@lazy_entry("div", 2)
def div(a: ArrayLike, b: ArrayLike, fmt: FormatLike, mode: Mode = "rne", *,
        rng: RNGLike = None, subnormals: bool | None = None,
        saturate: bool = False, offset: int = 0) -> NDArray[np.float64] | np.float64:
    """``a / b`` rounded once to ``fmt``: correctly rounded in every mode.

    ``x / 0`` for finite nonzero ``x`` is ±inf (NaN or ±max in formats without
    inf) and counts as divide_by_zero; ``0 / 0`` and ``inf / inf`` are NaN and
    count as invalid.
    {doc}
    Examples
    --------
    >>> import lowprec as lp
    >>> lp.div(1.0, 3.0, "fp16"), lp.div(1.0, 3.0, "fp16", mode="ru")
    (np.float64(0.333251953125), np.float64(0.33349609375))
    >>> with lp.flags() as f:
    ...     q = lp.div([1.0, -1.0, 0.0], 0.0, "fp16")
    >>> q, f.divide_by_zero, f.invalid
    (array([ inf, -inf,  nan]), 2, 1)
    """
    return _elementwise(div_kernel, (a, b), fmt, mode, rng, subnormals, saturate,
                        offset=offset)


@lazy_entry("sqrt", 1)
def sqrt(a: ArrayLike, fmt: FormatLike, mode: Mode = "rne", *,
         rng: RNGLike = None, subnormals: bool | None = None,
         saturate: bool = False, offset: int = 0) -> NDArray[np.float64] | np.float64:
    """The square root of ``a`` rounded once to ``fmt``: correctly rounded in every mode.

    ``sqrt(-0)`` is -0; the square root of a negative number is NaN and counts
    as invalid.
    {doc}
    Examples
    --------
    >>> import lowprec as lp
    >>> lp.sqrt(2.0, "bf16"), lp.sqrt(2.0, "bf16", mode="ru")
    (np.float64(1.4140625), np.float64(1.421875))
    >>> lp.sqrt([-0.0, 4.0, -1.0], "fp16")
    array([-0.,  2., nan])
    """
    return _elementwise(sqrt_kernel, (a,), fmt, mode, rng, subnormals, saturate,
                        offset=offset)


@lazy_entry("fma", 3)
def fma(a: ArrayLike, b: ArrayLike, c: ArrayLike, fmt: FormatLike, mode: Mode = "rne", *,
        rng: RNGLike = None, subnormals: bool | None = None,
        saturate: bool = False, offset: int = 0) -> NDArray[np.float64] | np.float64:
    """``a * b + c`` rounded once to ``fmt``.

    Correctly rounded in every mode whenever ``a * b`` is exact in float64 (always
    for operands of formats of 26 bits of precision or fewer), and for formats of
    at most 51 bits also otherwise, as the product's error term is carried along.
    IEEE 754's special cases hold (``0 * inf + c`` and ``inf - inf`` are invalid).
    {doc}
    Examples
    --------
    >>> import lowprec as lp
    >>> x = 1 + 2.0**-8                       # an FP16 value
    >>> lp.fma(x, x, -1.0, "fp16")            # 2**-7 + 2**-16, exact in FP16
    np.float64(0.0078277587890625)
    >>> lp.sub(lp.mul(x, x, "fp16"), 1.0, "fp16")
    np.float64(0.0078125)
    """
    return _elementwise(fma_kernel, (a, b, c), fmt, mode, rng, subnormals, saturate,
                        offset=offset)


for _f, _ops in ((add, "a, b"), (sub, "a, b"), (mul, "a, b"), (div, "a, b"),
                 (sqrt, "a"), (fma, "a, b, c")):
    if _f.__doc__ is not None:    # None under python -OO
        _f.__doc__ = _f.__doc__.replace("{doc}", _COMMON_DOC.format(operands=_ops))
del _f, _ops


def _negate_add(a, b, out=None):
    """``a + (-b)``, as `sub_kernel` computes it (a NaN ``b`` keeps its flipped sign)."""
    out = np.negative(b, out=out)
    return np.add(a, out, out=out)


# The kernel of each operation, and float64's own operation where double rounding
# is innocuous (`on_values`).
_KERNELS = {add: (add_kernel, np.add), sub: (sub_kernel, _negate_add),
            mul: (mul_kernel, np.multiply), div: (div_kernel, np.divide),
            sqrt: (sqrt_kernel, np.sqrt), fma: (fma_kernel, None)}


def on_values(op: Callable[..., Any], operands: Sequence[ArrayLike], fmt: FormatLike,
              mode: Mode = "rne", *, rng: RNGLike = None,
              subnormals: bool | None = None, saturate: bool = False) -> Any:
    """``op(*operands, fmt, mode, ...)`` (`add`, `sub`, `mul`, `div`, `sqrt`, `fma`) for
    operands the caller knows to be values of ``fmt`` (a Tensor's, say): the same
    result, which RNE in a format of at most 25 bits of precision gets from
    float64's own operation (`lowprec.engine.plan.Plan.innocuous`).

    Examples
    --------
    >>> import lowprec as lp
    >>> on_values(lp.add, (1.0, 2.0**-8), "bf16") == lp.add(1.0, 2.0**-8, "bf16")
    np.True_
    """
    kernel, plain = _KERNELS[op]
    if mode == "rne" and plain is not None and len(operands) == 2:
        a, b = operands
        if (type(a) is np.ndarray and type(b) is np.ndarray and a.shape == b.shape
                and a.ndim and 0 < a.size <= SMALL and a.dtype == b.dtype == np.float64):
            # Two small arrays of one shape (a Tensor operator's): `apply`'s small call
            # without the broadcasting and the span machinery before it.
            plan = operation_plan(fmt, mode, rng, subnormals, saturate)
            if plan.innocuous and recording() is None:
                out = small_call(plan, kernel, [a, b], a.size, plain)
                if out is not None:
                    return out
    return _elementwise(kernel, operands, fmt, mode, rng, subnormals, saturate, plain)
