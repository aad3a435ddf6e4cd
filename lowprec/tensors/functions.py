"""`HANDLED_FUNCTIONS`: the NumPy functions a Tensor emulates, and `matmul` on Tensors.

* Functions that move values keep the format (sort, diag, triu, roll, unique, ...).
* Joins promote their operands exactly.
* Sums and means round through `arith.sum` in an accumulation format. Prefix sums
  round through `arith.cumsum` in the Tensor's format.
* var, std, prod, cumprod, diff, trace, nansum, nanmean and average are composed of
  rounded operations in a stated order.
* Contractions (dot, inner, tensordot) go through `matmul`.
* Selections, medians of odd counts and max/min are exact.
* Functions whose results are not values (indices, shapes, bools, histogram
  counts) answer in plain NumPy.

Each handler is registered beside its def by `core.implements`, with its class and
order. These are `core.KINDS`, printed by `coverage.support_table` as
docs/numpy-support.md. The factory-made handlers are registered by the one loop over
`_TABLE` at the end. Options that would store values outside the format (``out=``,
``dtype=``, ``initial=``, ``where=``) are refused by name.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable
from typing import cast, overload

import numpy as np
from numpy.lib.array_utils import normalize_axis_index
from numpy.typing import ArrayLike, NDArray

from .. import arith
from ..engine.lazy import lazy_entry
from ..formats import Format, FormatLike
from ..formats import format as _format
from ..mx import BlockScaled
from ..mx import matmul as _mx_matmul
from ..rounding import round as _round
from ..tensorcore import ModelLike, resolve_model
from ..tensorcore import matmul as _matmul_kernel
from ..tensorcore.instructions import MatrixUnit
from .core import HANDLED_UFUNCS, Tensor, format_of_dtype, implements, operands, values_of
from .defaults import get_context, round_ctx
from .promotion import holds, result_format
from .ufuncs import select

__all__ = ["matmul", "REASONS", "refuse", "given", "rounded", "integers"]

_MOVE = "exact", "values moved, not changed; the format kept"
_PLAIN = "plain", "the result is not values of the format (indices, shapes, bools, counts)"
_ACC = ("composed", "pairwise in the Tensor's format, every addition rounded (the method "
                    "`t.sum` takes `acc=`, an accumulation format, then one rounding into "
                    "the format, and `order=` sequential or kahan)")
_MATMUL = ("matmul model", "reshaped to one 2-D product through `lp.matmul` with the "
                           "context's model (FP32 result by default)")
_JOIN = "exact", "operands promoted exactly to one format; plain operands rounded in once"
_SELECTION = ("exact", "a selection; a selected plain operand (or `initial=`) is rounded "
                       "into the format once")
_NAN_SELECTION = "exact", "a selection, NaNs skipped"
_FILL = "rounded once", "the fill value rounded once into the format (`dtype=` names it)"
_ROUND = ("rounded once", "the correctly rounded decimal rounding (ties to even) nearest in "
                          "float64, then one rounding into the format; `decimals=0` is "
                          "`rint`, exact")


@overload
def matmul(a: Tensor, b: ArrayLike | Tensor, *, model: ModelLike | None = None,
           c: ArrayLike | Tensor | None = None, in_fmt: FormatLike | None = None,
           out_fmt: FormatLike | None = None, progress: bool | None = None) -> Tensor: ...
@overload
def matmul(a: ArrayLike, b: Tensor, *, model: ModelLike | None = None,
           c: ArrayLike | Tensor | None = None, in_fmt: FormatLike | None = None,
           out_fmt: FormatLike | None = None, progress: bool | None = None) -> Tensor: ...
@overload
def matmul(a: ArrayLike, b: ArrayLike, *, model: ModelLike | None = None,
           c: ArrayLike | None = None, in_fmt: FormatLike | None = None,
           out_fmt: FormatLike | None = None,
           progress: bool | None = None) -> NDArray[np.float64] | np.float64: ...


@lazy_entry("matmul", 2)
def matmul(a: ArrayLike | Tensor, b: ArrayLike | Tensor, *, model: ModelLike | None = None,
           c: ArrayLike | Tensor | None = None, in_fmt: FormatLike | None = None,
           out_fmt: FormatLike | None = None, progress: bool | None = None,
           ) -> Tensor | NDArray[np.float64] | np.float64:
    """`lowprec.tensorcore.matmul` for Tensors, the model defaulting to the context's.

    When an operand is a Tensor, the result is a `Tensor` of ``out_fmt`` (FP32 by
    default). Plain arrays in give a plain float64 array, as the kernel does.

    The input format is the first of these:

    1. ``in_fmt``.
    2. The Tensor operands' format (promoted). Plain operands are rounded into it
       (RNE).
    3. The format both plain operands' dtypes name (float16, float32, ml_dtypes:
       see `tensor`), as the kernel infers it.
    4. Else `ValueError` asks for ``in_fmt``. float64 and lists name no format.

    Some instruction models take two formats as a pair (`MatrixUnit.mixed`), such
    as FP8 E4M3 x E5M2 on ``"h100/wgmma"``. Two Tensors of such formats go in as
    they are, through that instruction, not promoted. ``progress`` is the kernel's
    (a bar for long products).

    Examples
    --------
    >>> import lowprec as lp
    >>> a = lp.tensor([[1.0, 2.0**-11]], "fp16")
    >>> b = lp.tensor([[1.0], [1.0]], "fp16")
    >>> a @ b
    Tensor([[1.00048828125]], fmt=FP32)
    >>> with lp.context(matmul="fp16"):
    ...     (a @ b).fmt
    lp.FP16
    >>> import numpy as np
    >>> lp.matmul(np.array([[1.0, 2.0**-11]], np.float16), np.ones((2, 1), np.float16))
    array([[1.00048828]])
    """
    if isinstance(a, BlockScaled) or isinstance(b, BlockScaled):
        return _block_scaled(a, b, model, c, in_fmt, out_fmt)
    model = get_context().matmul if model is None else model
    spec = resolve_model(model)   # the one model check; its errors name ``model``
    tensors = [x for x in (a, b) if isinstance(x, Tensor)]
    if not tensors and in_fmt is None:
        fa, fb = format_of_dtype(a), format_of_dtype(b)
        if fa is not None and fa == fb:
            in_fmt = fa   # otherwise the kernel's ValueError says what is missing
    fa, fb = (x.fmt if isinstance(x, Tensor) else None for x in (a, b))
    if in_fmt is None and fa and fb and isinstance(spec, MatrixUnit) and spec.mixed(fa, fb):
        pass      # the unit has an instruction for the two formats: no promotion
    elif tensors and in_fmt is None:
        fmt = result_format(fa, fb) if fa and fb else cast(Format, fa or fb)  # one is set
        # Promotion is exact; plain operands enter with RNE, as lp.matmul rounds them.
        a = a.astype(fmt) if isinstance(a, Tensor) else _round(a, fmt)
        b = b.astype(fmt) if isinstance(b, Tensor) else _round(b, fmt)
        in_fmt = fmt
    # Tensors go in as themselves: the kernel takes their values as values of their
    # format (`fmt`), where rounding them again to check would cost a pass each.
    r = _matmul_kernel(a, b, model=model, c=c, in_fmt=in_fmt, out_fmt=out_fmt,
                       progress=progress)
    if not tensors:
        return r
    if out_fmt is None:
        out_fmt = spec.default_out_format()   # by value: a copied "fp16" model is FP16
    return Tensor(np.asarray(r), _format(out_fmt))


def _block_scaled(a, b, model, c, in_fmt, out_fmt):
    """`matmul` of two `lowprec.mx.BlockScaled` arrays: `lowprec.mx.matmul` through a
    block-scaled instruction model (the context's when it is a matrix unit with
    block-scaled instructions, else ``"b200/tcgen05"``), an FP32 Tensor (rounded
    once into ``out_fmt`` if given)."""
    if not (isinstance(a, BlockScaled) and isinstance(b, BlockScaled)):
        raise TypeError("lp.matmul multiplies a block-scaled array only by another one "
                        "(quantize both with lp.mx.quantize, or dequantize with "
                        "lp.tensor(q, fmt) to multiply Tensors)")
    if in_fmt is not None:
        raise TypeError("in_fmt= has no meaning for block-scaled operands: their element "
                        "formats are their schemes'")
    if model is None:
        model = get_context().matmul
        unit = resolve_model(model)
        if not (isinstance(unit, MatrixUnit) and any(i.scales for i in unit.instructions)):
            model = "b200/tcgen05"
    cv = c.values if isinstance(c, Tensor) else c
    r = Tensor(np.asarray(_mx_matmul(a, b, model=model, c=cv)), _format("fp32"))
    return r if out_fmt is None else r.astype(_format(out_fmt))


def given(value: object) -> bool:
    """Whether an optional NumPy argument was given (NumPy's defaults are None or
    ``np._NoValue``)."""
    return value is not None and value is not np._NoValue


#: Why a Tensor refuses an option, by name (`refuse`; a caller may add its own).
REASONS = {"out": "results are new Tensors",
           "dtype": "the result's format is the Tensor's (convert with .astype(); sums "
                    "take acc=, the accumulation format)",
           "initial": "a start value has no place in the rounding order; add it explicitly",
           "where": "mask the Tensor explicitly (np.where) first"}


def refuse(func: str, why: dict[str, str] | None = None, **kwargs: object) -> None:
    """`TypeError` naming the first of ``kwargs`` that was given.

    Such options would store values the format does not have, or write into arrays
    outside the Tensor. The reason comes from ``why``, else from `REASONS`."""
    for name, value in kwargs.items():
        if given(value):
            reason = (why or {}).get(name) or REASONS.get(name, "it cannot be emulated")
            raise TypeError(f"lowprec.Tensor does not support {name}= in numpy.{func}: "
                            f"{reason}")


def rounded(fn: Callable[..., object], *vals: object, fmt: Format) -> NDArray[np.float64]:
    """One `arith` operation on float64 operands, rounded once into ``fmt`` with the
    context's mode and options."""
    ctx = get_context()
    return np.asarray(fn(*vals, fmt, ctx.mode, **ctx.kwargs()))


def integers(x: object, func: str, name: str) -> object:
    """A Tensor given where NumPy takes integers (``sections``, ``reps``), as integers.

    The result is the Tensor's values as an integer array of its shape, as NumPy
    takes an integer-valued array. A Tensor holding any other value is refused
    (`TypeError`). Anything else is returned as it is, and NumPy checks it. Passing
    the Tensor on would dispatch back here without end."""
    if not isinstance(x, Tensor):
        return x
    v = x._v
    # |v| < 2**62 and v == trunc(v): the cast to int64 is exact.
    if not (np.all(np.abs(v) < 2.0**62) and np.all(v == np.trunc(v))):
        raise TypeError(f"numpy.{func} takes integer {name}; this Tensor holds values that "
                        f"are not integers: pass integers (e.g. np.asarray(t).astype(int))")
    return v.astype(np.int64)


@implements(np.tile, *_MOVE)
def _tile(A, reps):
    r = np.tile(values_of(A), integers(reps, "tile", "reps"))
    return Tensor(np.asarray(r), A.fmt) if isinstance(A, Tensor) else r


def _same_format(fn):
    """Functions that only move values around: the result keeps the format."""
    def handler(a, *args, **kwargs):
        return Tensor(np.asarray(fn(values_of(a), *args, **kwargs)), a.fmt)
    return handler


@implements(np.take, *_MOVE)
def _take(a, indices, axis=None, out=None, mode="raise"):
    refuse("take", out=out)
    return Tensor(np.asarray(np.take(a._v, values_of(indices), axis=axis, mode=mode)), a.fmt)


def _each(fn):
    """atleast_1d/2d: each argument on its own; a Tensor keeps its format."""
    def handler(*arys):
        r = [Tensor(fn(x._v), x.fmt) if isinstance(x, Tensor) else fn(x) for x in arys]
        return r[0] if len(r) == 1 else tuple(r)
    return handler


def _joined(fn):
    """concatenate/stack/vstack/hstack: operands promoted to one format (exactly),
    plain ones rounded in; ``out=`` and ``dtype=`` refused (they would store values
    outside the format, or outside the Tensor)."""
    name = fn.__name__
    if name in ("concatenate", "stack"):
        def handler(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
            refuse(name, out=out, dtype=dtype)
            vals, fmt = operands(*list(arrays))
            return Tensor(fn(vals, axis=axis, casting=casting), fmt)
    else:  # NumPy's other signature: (tup, *, dtype, casting)
        def handler(tup, *, dtype=None, casting="same_kind"):  # type: ignore[misc]
            refuse(name, dtype=dtype)
            vals, fmt = operands(*list(tup))
            return Tensor(fn(vals, casting=casting), fmt)
    return handler


@implements(np.where, *_SELECTION)
def _where(cond, *xy):
    if not xy:
        return np.where(values_of(cond))      # the indices of nonzero elements
    if len(xy) != 2:
        raise TypeError("numpy.where takes a condition, or a condition, x and y")
    x, y = xy
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        return np.where(values_of(cond), x, y)   # no format among the values
    return select(lambda c, a, b: np.where(c != 0, a, b))(
        np.asarray(values_of(cond)), x, y)


@implements(np.clip, *_SELECTION)
def _clip(a, a_min=np._NoValue, a_max=np._NoValue, out=None, *,
          min=np._NoValue, max=np._NoValue, **kwargs):  # noqa: A002
    refuse("clip", out=out, **kwargs)
    lo = a_min if given(a_min) else min
    hi = a_max if given(a_max) else max
    lo = -np.inf if not given(lo) else lo
    hi = np.inf if not given(hi) else hi
    return select(np.clip)(a, lo, hi)


def _acc_sum(a, axis, keepdims, acc, order):
    """The sum in the accumulation format, as float64 values of ``acc``."""
    acc = a.fmt if acc is None else _format(acc)
    ctx = get_context()
    v = a._v if holds(acc, a.fmt) else round_ctx(a._v, acc, None)
    red = axis
    if isinstance(axis, tuple):
        # Several axes: move them to the end and sum their flattened product.
        axes = tuple(np.lib.array_utils.normalize_axis_tuple(axis, v.ndim))
        keep = [i for i in range(v.ndim) if i not in axes]
        v = np.transpose(v, keep + list(axes)).reshape([v.shape[i] for i in keep] + [-1])
        red = -1
    s = np.asarray(arith.sum(v, acc, axis=red, mode=ctx.mode, order=order, **ctx.kwargs()))
    if keepdims:
        s = np.expand_dims(s, tuple(range(a.ndim)) if axis is None else axis)
    return s


@implements(np.sum, *_ACC)
def _sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue,
         where=np._NoValue, *, acc=None, order="pairwise"):
    refuse("sum", out=out, dtype=dtype, initial=initial, where=where)
    s = _acc_sum(a, axis, given(keepdims) and bool(keepdims), acc, order)
    return Tensor(np.asarray(round_ctx(s, a.fmt, None)), a.fmt)


@implements(np.mean, "composed", "the sum as `numpy.sum`, then one correctly rounded division "
            "by the count")
def _mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=np._NoValue,
          acc=None, order="pairwise"):
    refuse("mean", out=out, dtype=dtype, where=where)
    s = _acc_sum(a, axis, given(keepdims) and bool(keepdims), acc, order)
    n = a.size if axis is None else int(np.prod([a.shape[i] for i in np.atleast_1d(axis)]))
    ctx = get_context()
    # The sum and n are exact float64 values: one correctly rounded division.
    return Tensor(np.asarray(arith.div(s, float(n), a.fmt, ctx.mode, **ctx.kwargs())), a.fmt)


@implements(np.cumsum, "composed", "sequential prefix sums, every addition rounded in the "
            "format (`lp.cumsum`)")
def _cumsum(a, axis=None, dtype=None, out=None):
    """Sequential prefix sums in the Tensor's format (context mode and options);
    ``axis=None`` flattens, as NumPy."""
    refuse("cumsum", out=out, dtype=dtype)
    ctx = get_context()
    return Tensor(arith.cumsum(a._v, a.fmt, ctx.mode, axis=axis, **ctx.kwargs()), a.fmt)


@implements(np.dot, *_MATMUL)
def _dot(a, b, out=None):
    refuse("dot", out=out)
    if np.ndim(values_of(a)) == 0 or np.ndim(values_of(b)) == 0:
        return np.multiply(a, b)
    if np.ndim(values_of(a)) > 2 or np.ndim(values_of(b)) > 2:
        raise TypeError("lowprec.Tensor supports numpy.dot of 1-D and 2-D operands; "
                        "use @ / np.matmul for stacks")
    return matmul(a, b)


def _like_dtype_format(dtype, func):
    try:
        return _format(dtype)
    except (TypeError, ValueError):
        raise TypeError(f"numpy.{func} of a Tensor: dtype= must name a format lowprec "
                        f"knows (a float dtype, an ml_dtypes dtype or a format name), "
                        f"got {dtype!r}") from None


def _filled(a, fill, dtype, order, shape, device, func):
    """zeros_like/ones_like/full_like: a Tensor of ``dtype``'s format (default: the
    Tensor's), the fill value rounded into it once."""
    fmt = a.fmt if dtype is None else _like_dtype_format(dtype, func)
    fill = np.asarray(round_ctx(values_of(fill), fmt, None))
    # ``fill`` is already float64 values of fmt: the broadcast copy is exact.
    kw = {} if device is None else {"device": device}
    return Tensor(np.full_like(a._v, fill, dtype=np.float64, order=order, shape=shape, **kw),
                  fmt)


def _like(value):
    def handler(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
        return _filled(a, value, dtype, order, shape, device,
                       "zeros_like" if value == 0 else "ones_like")
    return handler


@implements(np.full_like, *_FILL)
def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _filled(a, fill_value, dtype, order, shape, device, "full_like")


def _reduce_exact(fn):
    """max/min: exact selections. ``initial`` enters the format as an operand does:
    a plain value is rounded into it once (context mode), a Tensor promotes. Rounding
    is monotone, so this is the same as selecting first and rounding the selection
    (``np.maximum(t, x)``) in every deterministic mode."""
    name = fn.__name__

    def handler(a, axis=None, out=None, keepdims=False, initial=np._NoValue,
                where=np._NoValue):
        refuse(name, out=out)
        kw = {} if where is np._NoValue else {"where": values_of(where)}
        if given(initial):
            (v, kw["initial"]), fmt = operands(a, initial)
        else:
            v, fmt = a._v, a.fmt
        keepdims = given(keepdims) and bool(keepdims)
        return Tensor(np.asarray(fn(v, axis=axis, keepdims=keepdims, **kw)), fmt)
    return handler


def _plain(fn):
    """Functions whose result is not a value of the format (indices, shapes, bools).
    An ``out=`` array outside the Tensors is theirs; a Tensor as ``out=`` is refused."""
    params = list(inspect.signature(fn).parameters)
    out_at = params.index("out") if "out" in params else None

    def handler(*args, **kwargs):
        out = kwargs.get("out", args[out_at] if out_at is not None and len(args) > out_at
                         else None)
        if isinstance(out, Tensor):
            raise TypeError(f"lowprec.Tensor cannot be the out= of numpy.{fn.__name__}: "
                            "its values would leave the format")
        return fn(*(values_of(x) for x in args),
                  **{k: values_of(v) for k, v in kwargs.items()})
    return handler


@implements(np.take_along_axis, *_MOVE)
def _take_along_axis(arr, indices, axis=-1):
    return Tensor(np.take_along_axis(arr._v, values_of(indices), axis), arr.fmt)


@implements(np.matmul, *_MATMUL)
def _matmul_function(a, b, /, out=None, **kwargs):
    refuse("matmul", out=out, **kwargs)
    return matmul(a, b)


# -- selection and reordering: exact ---------------------------------------------------

@implements(np.unique, *_MOVE)
def _unique(ar, *args, **kwargs):
    """The distinct values (a Tensor of the format); indices and counts plain."""
    r = np.unique(ar._v, *args, **kwargs)
    if isinstance(r, tuple):
        return (Tensor(r[0], ar.fmt), *r[1:])
    return Tensor(r, ar.fmt)


@implements(np.median, "correctly rounded", "the middle value of an odd count; of an even "
            "count the two middle values' mean, rounded once (`0.5*a + 0.5*b`, one correctly "
            "rounded addition)")
def _median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The middle value of an odd count (exact); of an even count, the two middle
    values' mean rounded once: ``0.5*lo + 0.5*hi`` (both halvings exact in float64 for
    values of every format narrower than FP64) through `arith.add`, correctly rounded."""
    refuse("median", out=out)
    v = np.moveaxis(_along(a._v, axis), 0, -1)
    v = np.sort(v, axis=-1)
    n = v.shape[-1]
    if n == 0:
        raise ValueError("numpy.median of an empty Tensor has no value")
    if n % 2:
        r = v[..., n // 2]
    else:
        r = rounded(arith.add, 0.5 * v[..., n // 2 - 1], 0.5 * v[..., n // 2], fmt=a.fmt)
    r = np.where(np.isnan(v).any(axis=-1), np.nan, r)   # NaN sorts last; NumPy gives NaN
    if keepdims:
        r = np.expand_dims(r, tuple(range(a.ndim)) if axis is None else axis)
    return Tensor(np.asarray(r), a.fmt)


def _nan_reduce_exact(fn):
    def handler(a, axis=None, out=None, keepdims=False, **kwargs):
        refuse(fn.__name__, out=out, **kwargs)
        return Tensor(np.asarray(fn(a._v, axis=axis, keepdims=given(keepdims)
                                    and bool(keepdims))), a.fmt)
    return handler


# -- composed of rounded operations --------------------------------------------------

def _along(v, axis):
    """``v`` with ``axis`` first (``axis=None`` flattens; several axes are moved first
    and joined in C order), for a sequential loop."""
    if axis is None:
        return v.ravel()
    if isinstance(axis, tuple):
        axes = np.lib.array_utils.normalize_axis_tuple(axis, v.ndim)
        rest = [i for i in range(v.ndim) if i not in axes]
        moved = np.transpose(v, list(axes) + rest)
        return moved.reshape((-1,) + tuple(v.shape[i] for i in rest))
    return np.moveaxis(v, axis, 0)


@implements(np.prod, "composed", "sequential, left to right, every multiplication rounded in "
            "the format; the empty product is 1")
def _prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue,
          where=np._NoValue):
    """Left to right, each multiplication rounded in the Tensor's format (context
    mode); the empty product is 1."""
    refuse("prod", out=out, dtype=dtype, initial=initial, where=where)
    v = _along(a._v, axis)
    r = np.ones(v.shape[1:])
    for i in range(v.shape[0]):
        r = v[0].copy() if i == 0 else rounded(arith.mul, r, v[i], fmt=a.fmt)
    if given(keepdims) and keepdims:
        r = np.expand_dims(r, tuple(range(a.ndim)) if axis is None else axis)
    return Tensor(np.asarray(r), a.fmt)


@implements(np.cumprod, "composed", "sequential partial products, every multiplication rounded")
def _cumprod(a, axis=None, dtype=None, out=None):
    """Sequential partial products, each multiplication rounded; ``axis=None``
    flattens, as NumPy."""
    refuse("cumprod", out=out, dtype=dtype)
    v = _along(a._v, axis)
    r = np.empty_like(v)
    for i in range(v.shape[0]):
        r[i] = v[0] if i == 0 else rounded(arith.mul, r[i - 1], v[i], fmt=a.fmt)
    return Tensor(r if axis is None else np.moveaxis(r, 0, axis), a.fmt)


@implements(np.diff, "composed", "every subtraction rounded, `n` rounds; `prepend=`/`append=` "
            "rounded into the format once")
def _diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    """``n`` rounds of neighbour differences, each subtraction rounded (context mode);
    ``prepend``/``append`` enter the format as plain operands do (rounded once)."""
    if np.ndim(values_of(a)) == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    n = operator.index(n)                # NumPy's rules: an integer order, not below 0
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n}")
    axis = normalize_axis_index(axis, np.ndim(values_of(a)))
    if n == 0:
        return a                         # NumPy returns its input, prepend/append unused
    parts = [x for x in (prepend, a, append) if x is not np._NoValue]
    vals, fmt = operands(*parts)
    vals = [np.broadcast_to(np.asarray(x), a.shape[:axis % a.ndim] + (1,) +
                            a.shape[axis % a.ndim + 1:]) if np.ndim(x) == 0 else x
            for x in vals]
    v = np.concatenate(vals, axis=axis) if len(vals) > 1 else vals[0]
    for _ in range(n):
        v = np.moveaxis(v, axis, -1)
        v = np.moveaxis(rounded(arith.sub, v[..., 1:], v[..., :-1], fmt=fmt), -1, axis)
    return Tensor(np.asarray(v), fmt)


def _var_parts(a, axis, ddof, acc, order, keepdims):
    """(the Tensor of squared deviations' mean, ...): mean (`_mean`), deviations
    ``a - mean`` rounded, squares rounded, their sum in ``acc`` (``order``) divided
    by ``n - ddof`` with one rounding into the Tensor's format."""
    m = _mean(a, axis=axis, keepdims=True, acc=acc, order=order)
    d = HANDLED_UFUNCS["subtract"](a, m)
    sq = HANDLED_UFUNCS["multiply"](d, d)
    s = _acc_sum(sq, axis, keepdims, acc, order)
    n = a.size if axis is None else int(np.prod([a.shape[i] for i in np.atleast_1d(axis)]))
    ctx = get_context()
    with np.errstate(divide="ignore", invalid="ignore"):
        return Tensor(np.asarray(arith.div(s, float(max(n - ddof, 0)), a.fmt, ctx.mode,
                                           **ctx.kwargs())), a.fmt)


@implements(np.var, "composed", "mean as `numpy.mean` (keepdims); deviations `a - mean`, each "
            "rounded; squares, each rounded; their sum as `numpy.sum` (`t.var` takes `acc=`, "
            "`order=`); one correctly rounded division by `n - ddof`")
def _var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=np._NoValue,
         mean=np._NoValue, correction=np._NoValue, acc=None, order="pairwise"):
    refuse("var", out=out, dtype=dtype, where=where, mean=mean)
    ddof = correction if given(correction) else ddof
    return _var_parts(a, axis, ddof, acc, order, given(keepdims) and bool(keepdims))


@implements(np.std, "composed", "`numpy.var`, then a correctly rounded square root")
def _std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=np._NoValue,
         mean=np._NoValue, correction=np._NoValue, acc=None, order="pairwise"):
    refuse("std", out=out, dtype=dtype, where=where, mean=mean)
    ddof = correction if given(correction) else ddof
    var = _var_parts(a, axis, ddof, acc, order, given(keepdims) and bool(keepdims))
    return HANDLED_UFUNCS["sqrt"](var)


@implements(np.trace, "composed", "the diagonal summed as `numpy.sum` (pairwise in the format)")
def _trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """The diagonal summed as `Tensor.sum` (pairwise in the Tensor's format)."""
    refuse("trace", out=out, dtype=dtype)
    return _sum(Tensor(np.diagonal(a._v, offset, axis1, axis2), a.fmt), axis=-1)


def _nan_to_zero(a):
    return Tensor(np.where(np.isnan(a._v), 0.0, a._v), a.fmt)


@implements(np.nansum, "composed", "NaNs as zeros, then as `numpy.sum`")
def _nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue,
            where=np._NoValue, *, acc=None, order="pairwise"):
    """`_sum` with NaNs as zeros."""
    refuse("nansum", out=out, dtype=dtype, initial=initial, where=where)
    return _sum(_nan_to_zero(a), axis=axis, keepdims=keepdims, acc=acc, order=order)


@implements(np.nanmean, "composed", "NaNs as zeros, summed as `numpy.sum`, then one correctly "
            "rounded division by the count of the others")
def _nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=np._NoValue,
             acc=None, order="pairwise"):
    """The sum with NaNs as zeros (`_acc_sum`) divided by the count of the others,
    one rounding (NaN where there are none)."""
    refuse("nanmean", out=out, dtype=dtype, where=where)
    keep = given(keepdims) and bool(keepdims)
    s = _acc_sum(_nan_to_zero(a), axis, keep, acc, order)
    count = np.sum(~np.isnan(a._v), axis=axis, keepdims=keep).astype(np.float64)
    ctx = get_context()
    with np.errstate(divide="ignore", invalid="ignore"):
        return Tensor(np.asarray(arith.div(s, count, a.fmt, ctx.mode, **ctx.kwargs())), a.fmt)


@implements(np.average, "composed", "unweighted: as `numpy.mean`; weighted: weights rounded "
            "into the format, each product `a*w` rounded, products and weights each summed as "
            "`numpy.sum`, one correctly rounded division")
def _average(a, axis=None, weights=None, returned=False, *, keepdims=np._NoValue):
    """Unweighted: `_mean`. Weighted: the weights enter the format as operands do
    (plain ones rounded in once, Tensors promote), each product ``a * w`` rounded, the
    products and the weights each summed as `_sum`, one correctly rounded division."""
    keep = given(keepdims) and bool(keepdims)
    if weights is None:
        r = _mean(a, axis=axis, keepdims=keep)
        n = a.size if axis is None else a.shape[axis]
        return (r, Tensor(np.full(r.shape, float(n)), a.fmt).astype(a.fmt)) if returned else r
    (va, vw), fmt = operands(a, weights)
    va, vw = np.asarray(va), np.asarray(vw)
    if vw.shape != va.shape:
        if axis is None or vw.ndim != 1:
            raise TypeError("numpy.average: weights of another shape than the Tensor's "
                            "need axis= and must be 1-D, as in NumPy")
        shape = [1] * va.ndim
        shape[axis] = vw.size
        vw = vw.reshape(shape)
    ta, tw = Tensor(va, fmt), Tensor(np.array(np.broadcast_to(vw, va.shape)), fmt)
    num = _sum(HANDLED_UFUNCS["multiply"](ta, tw), axis=axis, keepdims=keep)
    den = _sum(tw, axis=axis, keepdims=keep)
    r = HANDLED_UFUNCS["divide"](num, den)
    return (r, den) if returned else r


@implements(np.outer, "correctly rounded", "each product rounded once (promoted format)")
def _outer(a, b, out=None):
    """Each product ``a[i] * b[j]`` rounded once (correctly, `arith.mul`)."""
    refuse("outer", out=out)
    (va, vb), fmt = operands(a, b)
    return Tensor(rounded(arith.mul, np.ravel(va)[:, None], np.ravel(vb)[None, :], fmt=fmt),
                  fmt)


@implements(np.tensordot, *_MATMUL)
def _tensordot(a, b, axes=2):
    """The contraction as one 2-D product through `matmul` (the context's model):
    ``a``'s free axes by the contracted ones, times the contracted by ``b``'s free
    axes; the result is `matmul`'s (an FP32 Tensor for the default model)."""
    na, nb = np.ndim(values_of(a)), np.ndim(values_of(b))
    if isinstance(axes, (int, np.integer)):
        ax_a, ax_b = list(range(na - int(axes), na)), list(range(int(axes)))
    else:
        ax_a, ax_b = ([axes[0]] if np.ndim(axes[0]) == 0 else list(axes[0]),
                      [axes[1]] if np.ndim(axes[1]) == 0 else list(axes[1]))
    ax_a = [x % na for x in ax_a]
    ax_b = [x % nb for x in ax_b]
    sa, sb = np.shape(values_of(a)), np.shape(values_of(b))
    free_a = [i for i in range(na) if i not in ax_a]
    free_b = [i for i in range(nb) if i not in ax_b]
    k = int(np.prod([sa[i] for i in ax_a]))
    # The free sizes spelled out, not -1: with k == 0 a reshape cannot infer them.
    m, n = int(np.prod([sa[i] for i in free_a])), int(np.prod([sb[i] for i in free_b]))
    ta = np.transpose(a, free_a + ax_a).reshape(m, k)
    tb = np.transpose(b, ax_b + free_b).reshape(k, n)
    r = matmul(ta, tb)
    return r.reshape([sa[i] for i in free_a] + [sb[i] for i in free_b])


@implements(np.inner, "matmul model", "contraction of the last axes as `numpy.tensordot`; with "
            "a 0-d operand, correctly rounded products")
def _inner(a, b):
    """Contraction over the last axes, as `_tensordot` (`matmul`); 0-d: a product."""
    if np.ndim(values_of(a)) == 0 or np.ndim(values_of(b)) == 0:
        return np.multiply(a, b)
    return _tensordot(a, b, axes=([-1], [-1]))


@implements(np.round, *_ROUND)
@implements(np.around, *_ROUND)
def _round_decimals(a, decimals=0, out=None):
    """The exact decimal rounding (ties to even, as NumPy), nearest in float64
    (Python's `round` on a float is correctly rounded), rounded once into the format.
    ``decimals=0`` is `numpy.rint`: exact."""
    refuse("round", out=out)
    d = int(decimals)
    if d == 0:
        return HANDLED_UFUNCS["rint"](a)
    flat = [round(x, d) if np.isfinite(x) else x for x in a._v.ravel().tolist()]
    r = np.asarray(flat, dtype=np.float64).reshape(a.shape)
    return Tensor(np.asarray(round_ctx(r, a.fmt, None)), a.fmt)


@implements("matmul", "matmul model", "`lp.matmul` with the context's model (FP32 result by "
            "default)")
def _matmul_ufunc(a, b):
    """np.matmul is a ufunc too (``np.matmul(t, x)``): the Tensor matmul."""
    return matmul(a, b)


# The factory-made handlers: (NumPy function, handler, (class, order)).
_TABLE: list[tuple[Callable[..., object], Callable[..., object], tuple[str, str]]] = [
    (np.reshape, _same_format(np.reshape), _MOVE),
    (np.transpose, _same_format(np.transpose), _MOVE),
    (np.ravel, _same_format(np.ravel), _MOVE),
    (np.squeeze, _same_format(np.squeeze), _MOVE),
    (np.expand_dims, _same_format(np.expand_dims), _MOVE),
    (np.swapaxes, _same_format(np.swapaxes), _MOVE),
    (np.moveaxis, _same_format(np.moveaxis), _MOVE),
    (np.broadcast_to, _same_format(np.broadcast_to), _MOVE),
    (np.copy, _same_format(np.copy), _MOVE),
    (np.flip, _same_format(np.flip), _MOVE),
    (np.repeat, _same_format(np.repeat), _MOVE),
    (np.atleast_1d, _each(np.atleast_1d), _MOVE),
    (np.atleast_2d, _each(np.atleast_2d), _MOVE),
    (np.concatenate, _joined(np.concatenate), _JOIN),
    (np.stack, _joined(np.stack), _JOIN),
    (np.vstack, _joined(np.vstack), _JOIN),
    (np.hstack, _joined(np.hstack), _JOIN),
    (np.max, _reduce_exact(np.max), _SELECTION),
    (np.amax, _reduce_exact(np.max), _SELECTION),
    (np.min, _reduce_exact(np.min), _SELECTION),
    (np.amin, _reduce_exact(np.min), _SELECTION),
    (np.zeros_like, _like(0.0), _FILL),
    (np.ones_like, _like(1.0), _FILL),
    (np.argmax, _plain(np.argmax), _PLAIN),
    (np.argmin, _plain(np.argmin), _PLAIN),
    (np.argsort, _plain(np.argsort), _PLAIN),
    (np.shape, _plain(np.shape), _PLAIN),
    (np.ndim, _plain(np.ndim), _PLAIN),
    (np.size, _plain(np.size), _PLAIN),
    (np.array_equal, _plain(np.array_equal), _PLAIN),
    (np.allclose, _plain(np.allclose), _PLAIN),
    (np.isclose, _plain(np.isclose), _PLAIN),
    (np.count_nonzero, _plain(np.count_nonzero), _PLAIN),
    (np.nonzero, _plain(np.nonzero), _PLAIN),
    (np.all, _plain(np.all), _PLAIN),
    (np.any, _plain(np.any), _PLAIN),
    (np.sort, _same_format(np.sort), _MOVE),
    (np.diag, _same_format(np.diag), _MOVE),
    (np.diagonal, _same_format(np.diagonal), _MOVE),
    (np.triu, _same_format(np.triu), _MOVE),
    (np.tril, _same_format(np.tril), _MOVE),
    (np.fliplr, _same_format(np.fliplr), _MOVE),
    (np.flipud, _same_format(np.flipud), _MOVE),
    (np.roll, _same_format(np.roll), _MOVE),
    (np.rot90, _same_format(np.rot90), _MOVE),
    (np.searchsorted, _plain(np.searchsorted), _PLAIN),
    (np.argwhere, _plain(np.argwhere), _PLAIN),
    (np.flatnonzero, _plain(np.flatnonzero), _PLAIN),
    (np.nanmax, _nan_reduce_exact(np.nanmax), _NAN_SELECTION),
    (np.nanmin, _nan_reduce_exact(np.nanmin), _NAN_SELECTION),
]
for _fn, _handler, _kind in _TABLE:
    implements(_fn, *_kind)(_handler)
