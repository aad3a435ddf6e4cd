"""NumPy's exact functions on Tensors beyond those of `functions`.

They are splits, joins, insertions and deletions, padding, set operations, the
in-place writes, and the functions whose answers are not values (predicates,
indices, text). Each is registered by `core.implements`, beside its def or through
the one loop over `_TABLE`.

Nothing here rounds a value of a Tensor: values are moved, selected or compared. A
plain value that enters a Tensor (a pad constant, an inserted value, a write) is
rounded into the format once, in the context's mode, as ``t[i] = v`` does. The few
functions evaluated in float64 say so in their registration ("rounded once").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .core import HANDLED_FUNCTIONS, Tensor, exact_operands, implements, operands, values_of
from .defaults import round_ctx
from .functions import integers

__all__: list[str] = []

_MOVE = "exact", "values moved, not changed; the format kept"
_JOIN = ("exact", "operands promoted exactly to one format; plain operands rounded in "
                  "once")
_PLAIN = ("plain", "the result is not values of the format: NumPy's answer for the "
                   "float64 values (which hold the Tensor's exactly)")
_WRITE = ("exact", "in place: values written into a Tensor are rounded into its format "
                   "once (as `t[i] = v`); into a plain array, the Tensor's float64 values")
_ONCE = "rounded once", "evaluated in float64 from the values, then one rounding"


def _bad(func: str, name: str, why: str) -> TypeError:
    return TypeError(f"lowprec.Tensor does not support {name}= in numpy.{func}: {why}")


def _no_out(func: str, out: Any) -> None:
    if out is not None:
        raise _bad(func, "out", "results are new Tensors")


def _moved(fn):
    """One Tensor in, its values moved (or selected): the format kept."""
    def handler(a, *args, **kwargs):
        if not isinstance(a, Tensor):
            raise TypeError(f"numpy.{fn.__name__} on Tensors takes the Tensor first")
        return Tensor(np.asarray(fn(a._v, *args, **kwargs), dtype=np.float64), a.fmt)
    return handler


def _pieces(fn):
    """split and its kin (unstack too): Tensors of the format, in NumPy's container. A
    Tensor as ``indices_or_sections`` gives its values as integers (`integers`); a
    plain array split by one gets NumPy's plain pieces."""
    def handler(a, *args, **kwargs):
        if args:
            args = (integers(args[0], fn.__name__, "sections"),) + args[1:]
        if "indices_or_sections" in kwargs:
            kwargs["indices_or_sections"] = integers(kwargs["indices_or_sections"],
                                                     fn.__name__, "sections")
        r = fn(values_of(a), *args, **kwargs)
        if not isinstance(a, Tensor):
            return r
        return type(r)(Tensor(p, a.fmt) for p in r)
    return handler


def _each(fn):
    """Each argument on its own (atleast_3d, broadcast_arrays, meshgrid): a Tensor
    keeps its format, a plain array stays plain; NumPy's container."""
    def handler(*arys, **kwargs):
        fmts = [x.fmt if isinstance(x, Tensor) else None for x in arys]
        r = fn(*(values_of(x) for x in arys), **kwargs)

        def wrap(v, f):
            return v if f is None else Tensor(np.asarray(v, dtype=np.float64), f)

        if isinstance(r, np.ndarray):
            return wrap(r, fmts[0])
        return type(r)(wrap(v, f) for v, f in zip(r, fmts))
    return handler


def _joined(fn):
    """Joins of several operands: promoted exactly to one format, plain ones rounded
    in once."""
    def handler(tup, *args, **kwargs):
        vals, fmt = operands(*list(tup))
        return Tensor(np.asarray(fn(vals, *args, **kwargs), dtype=np.float64), fmt)
    return handler


@implements(np.block, *_JOIN)
def _block(arrays):
    """`numpy.block`: the leaves promoted to one format (plain ones rounded in), then
    NumPy's assembly of the values."""
    leaves: list[Any] = []

    def walk(x):
        if isinstance(x, list):
            for y in x:
                walk(y)
        else:
            leaves.append(x)

    walk(arrays)
    vals, fmt = operands(*leaves)
    it = iter(vals)

    def rebuild(x):
        return [rebuild(y) for y in x] if isinstance(x, list) else next(it)

    return Tensor(np.block(rebuild(arrays)), fmt)


@implements(np.append, *_JOIN)
def _append(arr, values, axis=None):
    (va, vv), fmt = operands(arr, values)
    return Tensor(np.append(va, vv, axis=axis), fmt)


@implements(np.insert, *_JOIN)
def _insert(arr, obj, values, axis=None):
    """The Tensor's values with ``values`` (promoted, or rounded in once) inserted."""
    (va, vv), fmt = operands(arr, values)
    return Tensor(np.insert(va, values_of(obj), vv, axis=axis), fmt)


@implements(np.delete, *_MOVE)
def _delete(arr, obj, axis=None):
    if not isinstance(arr, Tensor):   # a Tensor only as ``obj``: NumPy's plain answer
        return np.delete(arr, values_of(obj), axis=axis)
    return Tensor(np.delete(arr._v, values_of(obj), axis=axis), arr.fmt)


@implements(np.choose, "exact", "a selection among choices promoted exactly to one format; "
            "plain choices rounded in once")
def _choose(a, choices, out=None, mode="raise"):
    _no_out("choose", out)
    vals, fmt = operands(*list(choices))
    return Tensor(np.choose(values_of(a), vals, mode=mode), fmt)


@implements(np.select, "exact", "a selection; choices promoted exactly, plain ones and "
            "`default` rounded in once")
def _select(condlist, choicelist, default=0):
    """The first true condition's choice (choices promoted, plain ones and
    ``default`` rounded in once)."""
    vals, fmt = operands(*list(choicelist), default)
    return Tensor(np.asarray(np.select([values_of(c) for c in condlist], vals[:-1],
                                       vals[-1]), dtype=np.float64), fmt)


@implements(np.compress, *_MOVE)
def _compress(condition, a, axis=None, out=None):
    _no_out("compress", out)
    if not isinstance(a, Tensor):     # a Tensor only as the condition: NumPy's plain answer
        return np.compress(values_of(condition), a, axis=axis)
    return Tensor(np.compress(values_of(condition), a._v, axis=axis), a.fmt)


@implements(np.extract, *_MOVE)
def _extract(condition, arr):
    if not isinstance(arr, Tensor):   # a Tensor only as the condition: NumPy's plain answer
        return np.extract(values_of(condition), arr)
    return Tensor(np.extract(values_of(condition), arr._v), arr.fmt)


@implements(np.partition, *_MOVE)
def _partition(a, kth, axis=-1, kind="introselect", order=None):
    return Tensor(np.partition(a._v, values_of(kth), axis=axis, kind=kind), a.fmt)


def _set_op(fn):
    """intersect1d and its kin: operands promoted exactly; index arrays plain."""
    def handler(ar1, ar2, *args, **kwargs):
        (v1, v2), fmt = exact_operands(ar1, ar2)
        # exact_operands leaves plain values as given: round them in, as a join does.
        v1, v2 = (x._v if isinstance(x, Tensor) else np.asarray(round_ctx(v, fmt, None))
                  for x, v in ((ar1, v1), (ar2, v2)))
        r = fn(v1, v2, *args, **kwargs)
        if isinstance(r, tuple):
            return (Tensor(r[0], fmt), *r[1:])
        return Tensor(r, fmt)
    return handler


def _unique_kind(fn):
    """unique_all/counts/inverse/values: the values a Tensor, the rest plain."""
    def handler(x):
        r = fn(x._v)
        if isinstance(r, tuple):
            return r._replace(values=Tensor(r.values, x.fmt))
        return Tensor(r, x.fmt)
    return handler


_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap", "maximum", "minimum",
              "empty")


@implements(np.pad, "exact", "edge, reflect, symmetric, wrap, maximum, minimum move or select "
            "values; `constant_values` rounded in once; `empty` pads zeros; mean, median, "
            "linear_ramp and functions refused")
def _pad(array, pad_width, mode="constant", **kwargs):
    """Padding that moves or selects values.

    The modes are ``constant`` (``constant_values`` rounded in once), ``edge``,
    ``reflect``, ``symmetric``, ``wrap``, ``maximum`` and ``minimum``. ``empty``
    pads with zeros, since uninitialised memory is no value of a format. The modes
    that compute (``mean``, ``median``, ``linear_ramp``, a function) are refused.
    So is ``reflect_type="odd"``, which computes ``2*edge - x``."""
    if not isinstance(mode, str) or mode not in _PAD_MODES:
        raise TypeError(f"lowprec.Tensor does not support numpy.pad with mode={mode!r}: "
                        f"it computes new values; the modes that move values are "
                        f"{', '.join(_PAD_MODES)}")
    if kwargs.get("reflect_type", "even") != "even":
        raise _bad("pad", "reflect_type", "'odd' computes 2*edge - x; use 'even'")
    if mode == "constant":
        c = kwargs.pop("constant_values", 0)
        kwargs["constant_values"] = round_ctx(np.asarray(values_of(c), dtype=np.float64),
                                              array.fmt, None)
    if mode == "empty":
        mode, kwargs = "constant", {"constant_values": 0.0}
    return Tensor(np.pad(array._v, values_of(pad_width), mode=mode, **kwargs), array.fmt)


@implements(np.empty_like, "exact", "zeros of the format (uninitialised memory is no value of "
            "a format)")
def _empty_like(prototype, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """Zeros of the format (``dtype=`` names another): uninitialised memory is no
    value of a format."""
    return HANDLED_FUNCTIONS[np.zeros_like](prototype, dtype=dtype, order=order,
                                            shape=shape, device=device)


def _astype(x, dtype, /, *, copy=True, device=None):
    """``t.astype(fmt)``: exact into a wider format, rounded once into a narrower."""
    return x.astype(dtype)


@implements(np.nan_to_num, "exact", "NaN to `nan` (0), +-inf to `posinf`/`neginf` (default: "
            "+-the format's max); given values rounded in once; `copy=False` in place")
def _nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """NaN to ``nan``, +inf to ``posinf`` (default: the format's largest finite value,
    as NumPy uses its dtype's), -inf to ``neginf`` (default: minus that); given
    replacements rounded into the format once. ``copy=False`` writes into ``x`` and
    returns it, as NumPy does."""
    fmt = x.fmt
    big = float(fmt.max)
    rep = [round_ctx(np.float64(v), fmt, None) for v in
           (nan, big if posinf is None else posinf, -big if neginf is None else neginf)]
    v = x._v
    r = np.where(np.isnan(v), rep[0], np.where(v == np.inf, rep[1],
                                               np.where(v == -np.inf, rep[2], v)))
    if not copy:      # NumPy writes into ``x`` and returns it
        v[...] = r
        return x
    return Tensor(np.asarray(r, dtype=np.float64), fmt)


@implements(np.fix, "exact", "an integer of the format (values of a format are closed under "
            "truncation)")
def _fix(x, out=None):
    """Truncation toward zero: exact (values of a format are closed under it); -0
    made +0 where the format has none (the fnuz formats), as every exact unary does."""
    _no_out("fix", out)
    r = np.fix(x._v)
    return Tensor(r if x.fmt.has_negative_zero else r + 0.0, x.fmt)


@implements(np.real_if_close, "exact", "the values (a Tensor holds real numbers)")
def _real_if_close(a, tol=100):
    return Tensor(a._v.copy(), a.fmt)


@implements(np.imag, "exact", "zeros of the format (a Tensor holds real numbers)")
def _imag(val):
    """Zeros of the format: a Tensor holds real numbers."""
    return Tensor(np.zeros(val.shape), val.fmt)


@implements(np.angle, *_ONCE)
def _angle(z, deg=False):
    """0 or pi (180 with ``deg``), rounded once: NumPy's ``arctan2(0, x)``."""
    return Tensor(np.asarray(round_ctx(np.angle(z._v, deg=deg), z.fmt, None)), z.fmt)


def _once(fn):
    """Evaluated in float64 from the values, then rounded once into the format of the
    Tensor operands."""
    def handler(*args, **kwargs):
        fmt = exact_operands(*(a for a in args if isinstance(a, Tensor)))[1]
        with np.errstate(all="ignore"):
            r = fn(*(values_of(a) for a in args),
                   **{k: values_of(v) for k, v in kwargs.items()})
        if isinstance(r, tuple):   # linspace's (samples, step)
            return tuple(Tensor(np.asarray(round_ctx(np.asarray(p, dtype=np.float64), fmt,
                                                     None)), fmt) for p in r)
        return Tensor(np.asarray(round_ctx(np.asarray(r, dtype=np.float64), fmt, None)), fmt)
    return handler


def _deep(x):
    """The float64 values of Tensors, also inside lists and tuples (lexsort's keys)."""
    if isinstance(x, (list, tuple)):
        return type(x)(_deep(y) for y in x)
    return values_of(x)


def _plain(fn):
    """The result is not values of the format: NumPy's answer for the float64 values
    (which hold the Tensor's exactly)."""
    def handler(*args, **kwargs):
        return fn(*(_deep(a) for a in args), **{k: _deep(v) for k, v in kwargs.items()})
    return handler


def _inf_sign(fn):
    """isposinf/isneginf: bools (NumPy's on the values).

    A Tensor ``out=`` is refused: bools are no values of a format, and 0 is none of
    E8M0's."""
    def handler(x, out=None):
        if isinstance(out, Tensor):
            raise _bad(fn.__name__, "out", "the answer is bools, not values of a format")
        return fn(values_of(x), out=out)
    return handler


def _text(fn):
    """array_repr / array_str: the Tensor's own text (its format named);
    array2string: NumPy's text of the values."""
    def handler(a, *args, **kwargs):
        if fn is np.array_repr:
            return repr(a)
        if fn is np.array_str:
            return str(a)
        return fn(a._v, *args, **kwargs)
    return handler


def _write(fn):
    """The in-place writes (place, put, putmask, copyto, fill_diagonal,
    put_along_axis): into a Tensor, the values rounded into its format once (as
    ``t[i] = v``); into a plain array, the Tensor's float64 values as NumPy casts them."""
    def handler(target, *args, **kwargs):
        if isinstance(target, Tensor):
            buf = target._v
            args = tuple(_into(a, target) for a in args)
            kwargs = {k: _into(v, target) for k, v in kwargs.items()}
            fn(buf, *args, **kwargs)
            return None
        return fn(target, *(values_of(a) for a in args),
                  **{k: values_of(v) for k, v in kwargs.items()})
    return handler


def _into(value, target):
    """A value to write into ``target``: in its format (masks and indices as given)."""
    if isinstance(value, Tensor):
        return value.astype(target.fmt)._v
    v = np.asarray(value)
    if v.dtype.kind in "biu":
        return v            # indices and masks
    return np.asarray(round_ctx(v.astype(np.float64), target.fmt, None))


@implements(np.copyto, *_WRITE)
def _copyto(dst, src, casting="same_kind", where=True):
    if isinstance(dst, Tensor):
        dst._v[...] = np.where(values_of(where), _into(src, dst), dst._v)
        return None
    return np.copyto(dst, values_of(src), casting=casting, where=values_of(where))


@implements(np.put, *_WRITE)
def _put(a, ind, v, mode="raise"):
    if isinstance(a, Tensor):
        return np.put(a._v, values_of(ind), _into(v, a), mode=mode)
    return np.put(a, values_of(ind), values_of(v), mode=mode)


@implements(np.putmask, *_WRITE)
def _putmask(a, mask, values):
    if isinstance(a, Tensor):
        return np.putmask(a._v, values_of(mask), _into(values, a))
    return np.putmask(a, values_of(mask), values_of(values))


@implements(np.place, *_WRITE)
def _place(arr, mask, vals):
    if isinstance(arr, Tensor):
        return np.place(arr._v, values_of(mask), _into(vals, arr))
    return np.place(arr, values_of(mask), values_of(vals))


@implements(np.apply_along_axis, "composed", "the function on each 1-D slice as a Tensor (its "
            "own operations rounded as documented), the results joined exactly")
def _apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """``func1d`` called on each 1-D slice as a Tensor (its operations are Tensor
    operations, rounded as they document); the results stacked (joined exactly)."""
    a = arr if isinstance(arr, Tensor) else None
    if a is None:
        return np.apply_along_axis(func1d, axis, values_of(arr), *args, **kwargs)
    moved = np.moveaxis(a, axis, -1)
    outer = moved.shape[:-1]
    results = [func1d(moved[idx], *args, **kwargs) for idx in np.ndindex(*outer)]
    if not results:
        raise ValueError("numpy.apply_along_axis: cannot apply to an empty Tensor")
    if not any(isinstance(r, Tensor) for r in results):
        # Plain answers (indices, bools, Python floats): NumPy's assembly of them (it
        # visits the slices in the order computed above).
        given = iter(results)
        return np.apply_along_axis(lambda _: next(given), axis,
                                   np.empty(a.shape, dtype=np.bool_))
    vals, fmt = operands(*results)
    stacked = np.stack([np.asarray(v, dtype=np.float64) for v in vals])
    r = stacked.reshape(outer + stacked.shape[1:])
    # NumPy puts the function's output axes where ``axis`` was.
    ax = axis % a.ndim
    if r.ndim > len(outer):
        r = np.moveaxis(r, list(range(len(outer), r.ndim)),
                        list(range(ax, ax + r.ndim - len(outer))))
    return Tensor(r, fmt)


@implements(np.apply_over_axes, "composed", "the function on the Tensor for each axis in turn, "
            "dimensions kept")
def _apply_over_axes(func, a, axes):
    """``func(a, axis)`` for each axis in turn, keeping dimensions, as NumPy."""
    r = a
    for ax in np.atleast_1d(axes):
        v = func(r, int(ax))
        if np.ndim(v) != r.ndim:
            v = np.expand_dims(v, int(ax))
        r = v
    return r


# The factory-made handlers: (NumPy function, handler, (class, order)).
_TABLE: list[tuple[Any, Any, tuple[str, str]]] = [
    (np.atleast_3d, _each(np.atleast_3d), _MOVE),
    (np.broadcast_arrays, _each(np.broadcast_arrays), _MOVE),
    (np.meshgrid, _each(np.meshgrid), _MOVE),
    (np.rollaxis, _moved(np.rollaxis), _MOVE),
    (np.resize, _moved(np.resize), _MOVE),
    (np.trim_zeros, _moved(np.trim_zeros), _MOVE),
    (np.diagflat, _moved(np.diagflat), _MOVE),
    (np.real, _moved(np.real), ("exact", "the values (a Tensor holds real numbers)")),
    (np.argpartition, _plain(np.argpartition), _PLAIN),
    (np.column_stack, _joined(np.column_stack), _JOIN),
    (np.dstack, _joined(np.dstack), _JOIN),
    (np.split, _pieces(np.split), _MOVE),
    (np.array_split, _pieces(np.array_split), _MOVE),
    (np.hsplit, _pieces(np.hsplit), _MOVE),
    (np.vsplit, _pieces(np.vsplit), _MOVE),
    (np.dsplit, _pieces(np.dsplit), _MOVE),
    (np.intersect1d, _set_op(np.intersect1d), _JOIN),
    (np.union1d, _set_op(np.union1d), _JOIN),
    (np.setdiff1d, _set_op(np.setdiff1d), _JOIN),
    (np.setxor1d, _set_op(np.setxor1d), _JOIN),
    (np.sinc, _once(np.sinc), _ONCE),
    (np.i0, _once(np.i0), _ONCE),
    (np.linspace, _once(np.linspace), _ONCE),
    (np.logspace, _once(np.logspace), _ONCE),
    (np.geomspace, _once(np.geomspace), _ONCE),
    (np.fill_diagonal, _write(np.fill_diagonal), _WRITE),
    (np.put_along_axis, _write(np.put_along_axis), _WRITE),
    (np.isposinf, _inf_sign(np.isposinf), _PLAIN),
    (np.isneginf, _inf_sign(np.isneginf), _PLAIN),
    (np.array_repr, _text(np.array_repr), ("plain", "text: the Tensor's repr (its format "
                                                    "named)")),
    (np.array_str, _text(np.array_str), ("plain", "text: the Tensor's str")),
    (np.array2string, _text(np.array2string), ("plain", "text: NumPy's of the values")),
]
_TABLE += [(fn, _plain(fn), _PLAIN) for fn in (
    np.isin, np.lexsort, np.digitize, np.bincount, np.iscomplex, np.isreal,
    np.iscomplexobj, np.isrealobj, np.may_share_memory,
    np.shares_memory, np.array_equiv, np.result_type, np.can_cast, np.min_scalar_type,
    np.common_type, np.diag_indices_from, np.tril_indices_from, np.triu_indices_from)]
for _name in ("unique_all", "unique_counts", "unique_inverse", "unique_values"):
    if hasattr(np, _name):                      # NumPy 2.0
        _TABLE.append((getattr(np, _name), _unique_kind(getattr(np, _name)), _MOVE))
if hasattr(np, "unstack"):                      # NumPy 2.1
    _TABLE.append((np.unstack, _pieces(np.unstack), _MOVE))
if hasattr(np, "astype"):                       # NumPy 2.1
    _TABLE.append((np.astype, _astype, ("rounded once", "`t.astype(fmt)`: exact into a "
                                                        "wider format, one rounding into "
                                                        "a narrower")))
if hasattr(np, "matrix_transpose"):             # NumPy 2.2
    _TABLE.append((np.matrix_transpose, _moved(np.matrix_transpose), _MOVE))

for _fn, _handler, _kind in _TABLE:
    implements(_fn, *_kind)(_handler)
