"""`Statistical`: the array API's statistical functions (``sum``, ``prod``, ``mean``,
``var``, ``std``, ``max``, ``min``, ``cumulative_sum``, ``cumulative_prod``).

Floating reductions are the Tensor reductions (`lowprec.tensors`), in their documented
order. ``max`` and ``min`` select, so they are exact. Integer work is NumPy's.
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

from ..formats import Format
from ..tensors import Tensor
from ..tensors.core import values_of
from .array import Array
from .core import Core, axis_tuple
from .dtypes import DType

__all__ = ["Statistical"]


class Statistical(Core):
    """The standard's statistical functions."""

    def _reduce(self, fn, x, axis, keepdims, dtype=None, **kw):
        x = self._array(x)
        axes = axis_tuple(axis, x.ndim)
        d = x._dtype
        if dtype is not None:
            d = self._dtype(dtype)
            x = self.astype(x, d, copy=False)
        if d.kind == "floating":
            if not axes and x.ndim:
                return self._wrap(x._a.copy(), d)
            # The reduced axes moved last and joined into one (C order): the Tensor
            # reduction runs along it, in its documented order.
            rest = [i for i in range(x.ndim) if i not in axes]
            v = np.transpose(x._a, rest + list(axes)).reshape(
                tuple(x.shape[i] for i in rest) + (math.prod(x.shape[i] for i in axes),))
            t = Tensor(np.ascontiguousarray(v), cast(Format, d.fmt))
            with self._ctx():
                r = values_of(fn(t, axis=-1, **kw))
            if keepdims:
                r = np.asarray(r).reshape([1 if i in axes else n for i, n in
                                           enumerate(x.shape)])
            return self._wrap(r, d)
        return None

    def sum(self, x: Array, /, *, axis: Any = None, dtype: Any = None,
            keepdims: bool = False) -> Array:
        return self._accumulate(np.sum, x, axis, keepdims, dtype)

    def prod(self, x: Array, /, *, axis: Any = None, dtype: Any = None,
             keepdims: bool = False) -> Array:
        return self._accumulate(np.prod, x, axis, keepdims, dtype)

    def _int_acc(self, d: DType) -> DType:
        return self.uint64 if d.kind == "unsigned" else self.int64

    def _accumulate(self, fn: Any, x: Array, axis: Any, keepdims: bool, dtype: Any) -> Array:
        """``sum``/``prod``: floating arrays in the format (`_reduce`).

        Integers and bools go to NumPy, accumulated in the standard's default integer
        dtype."""
        r = self._reduce(fn, x, axis, keepdims, dtype)
        if r is not None:
            return r
        x = self._array(x)
        d = self._int_acc(x._dtype) if dtype is None else self._dtype(dtype)
        return self._wrap(fn(x._a, axis=axis_tuple(axis, x.ndim), keepdims=keepdims,
                             dtype=d.storage), d)

    def mean(self, x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Array:
        x = self._floating(self._array(x))
        return cast(Array, self._reduce(np.mean, x, axis, keepdims))

    def var(self, x: Array, /, *, axis: Any = None, correction: float = 0.0,
            keepdims: bool = False) -> Array:
        x = self._floating(self._array(x))
        return cast(Array, self._reduce(np.var, x, axis, keepdims, ddof=correction))

    def std(self, x: Array, /, *, axis: Any = None, correction: float = 0.0,
            keepdims: bool = False) -> Array:
        x = self._floating(self._array(x))
        return cast(Array, self._reduce(np.std, x, axis, keepdims, ddof=correction))

    def _select(self, fn, x, axis, keepdims):
        x = self._array(x)
        axes = axis_tuple(axis, x.ndim)
        if math.prod(x.shape[a] for a in axes) == 0:
            # only a reduction over zero elements has no answer (NumPy refuses it too)
            raise ValueError(f"{fn.__name__} over axes {axes} of an array of shape {x.shape}: "
                             f"a reduction over zero elements has no value")
        return self._wrap(fn(x._a, axis=axes, keepdims=keepdims), x._dtype)

    def max(self, x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Array:
        return self._select(np.max, x, axis, keepdims)    # a selection: exact

    def min(self, x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Array:
        return self._select(np.min, x, axis, keepdims)

    def _cumulative(self, fn, int_fn, x, axis, dtype, include_initial, initial):
        x = self._array(x)
        if axis is None:
            if x.ndim > 1:
                raise ValueError("axis is required for arrays of more than one dimension")
            axis = 0
        if x.ndim == 0:
            raise ValueError("cumulative functions need at least one dimension")
        (ax,) = axis_tuple(axis, x.ndim)
        d = x._dtype
        if dtype is not None:
            d = self._dtype(dtype)
            x = self.astype(x, d, copy=False)
        elif d.kind != "floating":
            d = self._int_acc(d)
            x = self.astype(x, d, copy=False)
        if d.kind == "floating":
            r = values_of(self._float_call(lambda t: fn(t, axis=ax), x)) if x.shape[ax] else x._a
        else:
            with np.errstate(all="ignore"):
                r = int_fn(x._a, axis=ax, dtype=d.storage)
        if include_initial:
            shape = list(x.shape)
            shape[ax] = 1
            r = np.concatenate([np.full(shape, initial, dtype=r.dtype), r], axis=ax)
        return self._wrap(r, d)

    def cumulative_sum(self, x: Array, /, *, axis: int | None = None, dtype: Any = None,
                       include_initial: bool = False) -> Array:
        return self._cumulative(np.cumsum, np.cumsum, x, axis, dtype, include_initial, 0)

    def cumulative_prod(self, x: Array, /, *, axis: int | None = None, dtype: Any = None,
                        include_initial: bool = False) -> Array:
        return self._cumulative(np.cumprod, np.cumprod, x, axis, dtype, include_initial, 1)
