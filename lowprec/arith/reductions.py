"""The reductions `sum` (pairwise, sequential, Kahan), `cumsum` and `dot`, every
operation rounded.

Pairwise is a loop over levels whose rows the chunk driver vectorises; sequential
and Kahan sums, prefix sums and FMA chains are `lowprec.arith.sequential`'s; `sum`'s
deprecated positional call is read here. They never modify their inputs and never
read a global default.
"""

from __future__ import annotations

import inspect
import numbers
import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..engine import parallel
from ..engine.checks import broadcast_shape, check_bool, check_int, check_mode
from ..engine.lazy import lazy_entry
from ..formats import FormatLike
from ..types import Mode, RNGLike
from .driver import Buffers, apply, operation_plan, raw_array
from .kernels import add_kernel, copy_kernel, fma_kernel, mul_kernel
from .sequential import fused_dot, kahan_sum, sequential

# "sr": the streams (`Stream.derived`) of the roundings that are not a sequential step:
# an unfused dot's products, and pairwise level L's additions (L = 1, 2, ...).
_PRODUCTS, _LEVEL = 4, 16

__all__ = ["sum", "cumsum", "dot", "ORDERS"]


#: Summation orders of `sum` and `dot`.
ORDERS = ("sequential", "pairwise", "kahan")


def _reduce(plan, x, order):
    """Reduce axis 0 of the 2-D float64 array ``x`` with every addition rounded."""
    n, m = x.shape
    if n == 0:
        return np.zeros(m)
    if order == "sequential":
        return sequential(plan, x)
    if order == "kahan":
        return kahan_sum(plan, x)
    buffers = Buffers(max(1, min(parallel.CHUNK, m)))   # pairwise: its levels share them
    depth = [0]

    def step(kernel, *operands, rounded=False, at=0):
        # ``rounded``: every operand is a value of the format (a sum this reduction
        # rounded), so that float64's own sum may stand in (`apply`'s ``plain``).
        # "sr": level L's sum of pair p (output j) draws position p*m + j of its stream.
        here = plan
        if plan.mode == "sr":
            s = plan.stream if depth[0] == 0 else plan.stream.derived(_LEVEL + depth[0])
            here = plan.with_stream(s.at(at))
        return apply(here, kernel, [np.ascontiguousarray(v).reshape(-1) for v in operands],
                     operands[0].size, buffers, plain=np.add if rounded else None)

    # ``carry`` is the odd last term moving up unchanged: a row of x itself (in its
    # own dtype, so never rounded through float64) or a sum of an earlier level.
    level, carry, carry_rounded = x, None, False
    while level.shape[0] + (carry is not None) > 1:
        depth[0] += 1
        k = level.shape[0] // 2
        sums = level is not x          # a level of sums, not the input
        pairs = step(add_kernel, level[0:2 * k:2], level[1:2 * k:2],
                     rounded=sums).reshape(k, m)
        if level.shape[0] % 2 and carry is None:
            carry, carry_rounded = level[-1], sums
        elif level.shape[0] % 2:
            last = step(add_kernel, level[-1], carry,
                        rounded=sums and carry_rounded, at=k * m).reshape(1, m)
            pairs, carry = np.concatenate([pairs, last]), None
        level = pairs
    depth[0] = 0
    return step(copy_kernel, level[0]) if n == 1 else level[0]


def _check_order(order):
    if not isinstance(order, str):
        raise TypeError(f"order must be a str, one of {', '.join(ORDERS)}; "
                        f"got {type(order).__name__} {order!r}")
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; valid orders: {', '.join(ORDERS)}")


_UNSET: Any = object()   # Any: the sentinel stands in for each default of sum
_LEGACY_SUM = ("lp.sum(x, fmt, axis, mode, order): pass axis=, mode=, order= as keywords; "
               "the positional order is now (x, fmt, mode)")


def _sum_arguments(args, axis, mode, order):
    """(axis, mode, order) of a `sum` call, old positional order included (deprecated)."""
    if len(args) > 3:
        raise TypeError(f"sum takes at most 3 positional arguments after x and fmt "
                        f"(the deprecated axis, mode, order), got {len(args)}")
    if not args or isinstance(args[0], str):
        if len(args) > 1:
            raise TypeError("sum(x, fmt, mode) takes mode as its only further positional "
                            "argument; pass axis= and order= as keywords")
        if args:
            if mode is not _UNSET:
                raise TypeError("sum got multiple values for argument 'mode'")
            mode = args[0]
        return axis, mode, order
    old = args[0]
    is_int = (isinstance(old, (numbers.Integral, np.integer))
              and not isinstance(old, (bool, np.bool_)))
    if old is not None and not isinstance(old, tuple) and not is_int:
        check_mode(old)          # neither a mode nor an old axis: TypeError naming mode
    warnings.warn(_LEGACY_SUM, DeprecationWarning, stacklevel=3)
    for name, _value, given in zip(("axis", "mode", "order"), args, (axis, mode, order)):
        if given is not _UNSET:
            raise TypeError(f"sum got multiple values for argument {name!r}")
    axis = old
    if len(args) > 1:
        mode = args[1]
    if len(args) > 2:
        order = args[2]
    return axis, mode, order


def _sum_axes(axis, ndim):
    """``axis`` (None, an int or a tuple of ints) as a sorted tuple of axes of ``ndim``."""
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, tuple) else (axis,)
    out = []
    for ax in axes:
        ax = check_int("axis", ax)
        if not -ndim <= ax < ndim:
            raise ValueError(f"axis {ax} is out of bounds for an array of dimension {ndim}")
        out.append(ax % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"axis {axis!r} repeats an axis")
    return tuple(sorted(out))


@lazy_entry("sum", 1)
def sum(x: ArrayLike, fmt: FormatLike, *args: Any,  # noqa: A001
        axis: int | tuple[int, ...] | None = _UNSET, mode: Mode = _UNSET, order: str = _UNSET,
        rng: RNGLike = None, subnormals: bool | None = None,
        saturate: bool = False, offset: int = 0) -> NDArray[np.float64] | np.float64:
    """Sum of ``x`` along ``axis`` with every addition rounded to ``fmt``.

    Signature: ``sum(x, fmt, mode="rne", *, axis=None, order="pairwise", rng=None,
    subnormals=None, saturate=False)``, the mode third as in every other operation.

    The first term of each sum is rounded to ``fmt``, then each further term is
    added by `add` (terms are used as given: round them first to model stored
    ``fmt`` values). Orders:

    ``"pairwise"`` (the default)
        level by level: ``x0 + x1``, ``x2 + x3``, ... then the sums of those pairs,
        and so on; an odd last term moves up a level unchanged. The kind of order
        NumPy's own `numpy.sum` uses, and the fast one at scale.
    ``"sequential"``
        left to right, ``((x0 + x1) + x2) + ...``: the textbook recursive
        summation, whose error grows with ``n`` (and stagnates).
    ``"kahan"``
        compensated summation (Kahan), every operation rounded to ``fmt``.

    Pairwise is a loop over ``log2(n)`` levels, vectorised across each. Sequential
    and Kahan sums run by binade runs (`lowprec.arith.sequential`): while the partial
    sums stay in one binade of the accumulator, many steps are one cumulative sum;
    a few microseconds go to each change of binade. Bit for bit the step-by-step
    result (one `add` per step; under ``"sr"`` the same random draws). Inside a
    ``lp.flags()`` block, and for more than 64 sums at once, they are done step by
    step, vectorised across the sums, so that the flag counts are those of one
    `add` per step.

    The default order changed from ``"sequential"`` to ``"pairwise"`` (one default
    everywhere, as ``Tensor.sum``); pass ``order="sequential"`` for the old results.
    The old positional order ``sum(x, fmt, axis, mode, order)`` still works, with a
    `DeprecationWarning`, when the third argument is not a str (an int, a tuple or
    None: an axis); its order, when not given, is the new default.

    Parameters
    ----------
    x : array_like
        Real values.
    fmt : Format or str
        Format of every partial sum.
    mode, rng, subnormals, saturate
        As in `add`.
    axis : int or tuple of ints, optional
        Axes to reduce; by default all (the flattened array). Several axes are
        summed as one, in the C order of the elements they index.
    order : {"pairwise", "sequential", "kahan"}
        Summation order.

    Returns
    -------
    numpy.ndarray or numpy.float64
        The sums (0.0 for an empty axis), values of ``fmt``.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> ones = np.ones(1000)
    >>> lp.sum(ones, "bf16"), lp.sum(ones, "bf16", order="sequential")   # 256 + 1 == 256
    (np.float64(1000.0), np.float64(256.0))
    >>> lp.sum(ones, "bf16", order="kahan")
    np.float64(1000.0)
    >>> lp.sum([[1.0, 2.0], [3.0, 4.0]], "fp16", "rz", axis=0)
    array([4., 6.])
    """
    axis, mode, order = _sum_arguments(args, axis, mode, order)
    axis = None if axis is _UNSET else axis
    mode = "rne" if mode is _UNSET else mode
    order = "pairwise" if order is _UNSET else order
    _check_order(order)
    plan = operation_plan(fmt, mode, rng, subnormals, saturate, offset)
    a = raw_array(x)
    axes = _sum_axes(axis, a.ndim)
    keep = [i for i in range(a.ndim) if i not in axes]
    shape = tuple(a.shape[i] for i in keep)
    n = int(np.prod([a.shape[i] for i in axes], dtype=np.int64))
    # The reduced axes first (in C order), the kept ones flattened behind them.
    a = np.transpose(a, list(axes) + keep).reshape(n, int(np.prod(shape, dtype=np.int64)))
    with np.errstate(all="ignore"):
        out = _reduce(plan, a, order).reshape(shape)
    return out[()] if out.ndim == 0 else out


# The signature help() and inspect show: the new call, without the deprecated *args.
sum.__signature__ = inspect.Signature([  # type: ignore[attr-defined]
    inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD),
    inspect.Parameter("fmt", inspect.Parameter.POSITIONAL_OR_KEYWORD),
    inspect.Parameter("mode", inspect.Parameter.POSITIONAL_OR_KEYWORD, default="rne"),
    *(inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=v) for k, v in
      (("axis", None), ("order", "pairwise"), ("rng", None), ("subnormals", None),
       ("saturate", False), ("offset", 0))),
])


@lazy_entry("cumsum", 1)
def cumsum(x: ArrayLike, fmt: FormatLike, mode: Mode = "rne", *, axis: int | None = -1,
           rng: RNGLike = None, subnormals: bool | None = None,
           saturate: bool = False, offset: int = 0) -> NDArray[np.float64]:
    """Sequential prefix sums of ``x`` along ``axis``, every addition rounded to ``fmt``.

    ``out[0] = round(x[0])`` and ``out[i] = round(out[i-1] + x[i])``: the partial sums
    of ``sum(x, fmt, mode, order="sequential")``, whose last one it is, bit for bit.
    The cost is a few cumulative sums of the whole axis plus a few microseconds per
    change of the accumulator's binade (see `sum`); inside a ``lp.flags()`` block
    the sums are done step by step, so that the flag counts are those of one `add`
    per step.

    Parameters
    ----------
    x : array_like
        Real values.
    fmt : Format or str
        Format of every partial sum.
    mode, rng, subnormals, saturate
        As in `add`; under ``"sr"`` the i-th rounding of a 1-D sum uses the
        generator's i-th draw, as `add` called once per step would.
    axis : int or None
        The axis to accumulate along (default the last); None flattens ``x`` first,
        as `numpy.cumsum` does.

    Returns
    -------
    numpy.ndarray
        Values of ``fmt``, the shape of ``x`` (1-D when ``axis`` is None).

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.cumsum([256.0, 1.0, 1.0, 2.0], "bf16")        # 256 + 1 == 256 in BF16
    array([256., 256., 256., 258.])
    >>> lp.cumsum([[1.0, 2.0], [3.0, 4.0]], "fp16", axis=0)
    array([[1., 2.],
           [4., 6.]])
    """
    plan = operation_plan(fmt, mode, rng, subnormals, saturate, offset)
    a = raw_array(x)
    if axis is None:
        a = a.reshape(-1)
        ax = 0
    else:
        ax = check_int("axis", axis)
        if not -a.ndim <= ax < a.ndim:
            raise ValueError(f"axis {ax} is out of bounds for an array of dimension {a.ndim}")
        ax %= a.ndim
    moved = np.moveaxis(a, ax, 0)
    n, rest = moved.shape[0], moved.shape[1:]
    with np.errstate(all="ignore"):
        out = sequential(plan, moved.reshape(n, int(np.prod(rest, dtype=np.int64))),
                         prefix=True)
    return np.moveaxis(out.reshape(moved.shape), 0, ax)


@lazy_entry("dot", 2)
def dot(a: ArrayLike, b: ArrayLike, fmt: FormatLike, mode: Mode = "rne", *,
        order: str = "sequential", fused: bool = False,
        rng: RNGLike = None, subnormals: bool | None = None,
        saturate: bool = False, offset: int = 0) -> NDArray[np.float64] | np.float64:
    """Dot products over the last axis, every operation rounded to ``fmt``.

    ``a`` and ``b`` broadcast together and the last axis is contracted (as
    ``numpy.vecdot``; for 1-D arrays the ordinary dot product). Unfused, each
    product is rounded to ``fmt`` (`mul`) and the products are summed by `sum`
    in ``order``. With ``fused=True`` the sum is an FMA chain, ``acc = fma(a_i,
    b_i, acc)`` from left to right, one rounding per term (``order`` must then be
    ``"sequential"``).

    The default order is ``"sequential"``, unlike `sum`'s ``"pairwise"``: a dot
    product is the inner loop of a matrix product, which the accumulation models of
    `lp.matmul` (``"fp32"``, ``"fp16"``) and an FMA chain run left to right, so
    the unfused and fused dots and ``matmul`` agree in order by default.

    Sequential dots run at vector speed as `sum` does, the fused ones as a
    sequential sum of the exact products (Dekker's ``hi + lo``; a single float64
    for factors of at most 26 significant bits), bit for bit the FMA chain; inside
    ``lp.flags()``, for NaN results and for factors past Dekker's range the chain is
    run step by step.

    Parameters
    ----------
    a, b : array_like
        Real operands.
    fmt : Format or str
        Format of every product and partial sum.
    mode, rng, subnormals, saturate
        As in `add`.
    order : {"sequential", "pairwise", "kahan"}
        Summation order of the unfused products.
    fused : bool
        Accumulate with fused multiply-adds.

    Returns
    -------
    numpy.ndarray or numpy.float64
        Values of ``fmt`` with the broadcast shape less the last axis.

    Examples
    --------
    >>> import lowprec as lp
    >>> a = [1.0, 2.0**-11, 2.0**-11, 2.0**-11]
    >>> b = [1.0, 1.0, 1.0, 1.0]
    >>> lp.dot(a, b, "fp16"), lp.dot(a, b, "fp16", order="pairwise")
    (np.float64(1.0), np.float64(1.0009765625))
    >>> x = 1 + 2.0**-8
    >>> lp.dot([-1.0, x], [1.0, x], "fp16"), lp.dot([-1.0, x], [1.0, x], "fp16", fused=True)
    (np.float64(0.0078125), np.float64(0.0078277587890625))
    """
    _check_order(order)
    fused = check_bool("fused", fused)
    if fused and order != "sequential":
        raise ValueError("fused=True accumulates left to right: order must be 'sequential'")
    plan = operation_plan(fmt, mode, rng, subnormals, saturate, offset)
    xa, xb = raw_array(a), raw_array(b)
    if xa.ndim == 0 or xb.ndim == 0:
        raise ValueError("dot needs arrays with at least one axis")
    shape = broadcast_shape(xa.shape, xb.shape)
    xa, xb = np.broadcast_to(xa, shape), np.broadcast_to(xb, shape)
    shape = xa.shape[:-1]
    n = xa.shape[-1]
    m = int(np.prod(shape, dtype=np.int64))
    xa = np.moveaxis(xa, -1, 0).reshape(n, m)    # (n, -1) cannot be inferred when n = 0
    xb = np.moveaxis(xb, -1, 0).reshape(n, m)
    with np.errstate(all="ignore"):
        if n == 0:
            out: NDArray[np.float64] = np.zeros(m)   # the empty sum is +0
        elif not fused:
            # "sr": the product of term i (output j) draws position i*m + j of its own
            # stream, the sum its additions' (a sum of the rounded products).
            pplan = plan if plan.mode != "sr" else \
                plan.with_stream(plan.stream.derived(_PRODUCTS))
            prods = apply(pplan, mul_kernel, (np.ascontiguousarray(xa).ravel(),
                                                np.ascontiguousarray(xb).ravel()),
                           xa.size).reshape(xa.shape)
            out = _reduce(plan, prods, order)
        elif (fast := fused_dot(plan, xa, xb)) is not None:
            out = fast
        else:
            acc = apply(plan, mul_kernel, (np.ascontiguousarray(xa[0]),
                                             np.ascontiguousarray(xb[0])), m)
            for i in range(1, n):
                # "sr": step i (output j) draws position i*m + j, as `sequential`.
                here = plan if plan.mode != "sr" else plan.with_stream(plan.stream.at(i * m))
                acc = apply(here, fma_kernel, (np.ascontiguousarray(xa[i]),
                                                 np.ascontiguousarray(xb[i]), acc), m)
            out = acc
    out = out.reshape(shape)
    return out[()] if out.ndim == 0 else out
