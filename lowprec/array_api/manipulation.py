"""`Manipulation`: the array API's manipulation functions (``broadcast_arrays`` ...
``unstack``) and its indexing functions (``take``, ``take_along_axis``): values
moved, never changed, so exact in every format.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.exceptions import AxisError

from .array import Array
from .core import Core, axis_tuple

__all__ = ["Manipulation"]


class Manipulation(Core):
    """The standard's manipulation and indexing functions."""

    def _view(self, x: Array, r: np.ndarray) -> Array:
        return Array(r, x._dtype, self)

    def broadcast_arrays(self, *arrays: Array) -> list[Array]:
        xs = [self._array(a) for a in arrays]
        return [self._view(x, r) for x, r in zip(xs, np.broadcast_arrays(*(x._a for x in xs)))]

    def broadcast_to(self, x: Array, /, shape: tuple[int, ...]) -> Array:
        x = self._array(x)
        return self._view(x, np.broadcast_to(x._a, shape))

    def concat(self, arrays: Sequence[Array], /, *, axis: int | None = 0) -> Array:
        xs = [self._array(a) for a in arrays]
        d = self.result_type(*xs)
        vals = [self.astype(x, d, copy=False)._a for x in xs]
        if axis is None:
            vals = [v.reshape(-1) for v in vals]
            axis = 0
        return self._wrap(np.concatenate(vals, axis=axis), d)

    def stack(self, arrays: Sequence[Array], /, *, axis: int = 0) -> Array:
        xs = [self._array(a) for a in arrays]
        d = self.result_type(*xs)
        return self._wrap(np.stack([self.astype(x, d, copy=False)._a for x in xs], axis=axis), d)

    def unstack(self, x: Array, /, *, axis: int = 0) -> tuple[Array, ...]:
        x = self._array(x)
        if x.ndim == 0:
            raise ValueError("unstack needs at least one dimension")
        (ax,) = axis_tuple(axis, x.ndim)
        return tuple(self._view(x, np.take(x._a, i, axis=ax)) for i in range(x.shape[ax]))

    def expand_dims(self, x: Array, /, axis: int = 0) -> Array:
        x = self._array(x)
        if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
            raise TypeError(f"expand_dims takes one axis (an int), got {type(axis).__name__} "
                            f"{axis!r:.40}; call it once per axis")
        if not -x.ndim - 1 <= axis <= x.ndim:
            raise AxisError(f"axis {axis} is out of range for {x.ndim + 1} dimensions")
        return self._view(x, np.expand_dims(x._a, axis))

    def flip(self, x: Array, /, *, axis: Any = None) -> Array:
        x = self._array(x)
        return self._view(x, np.flip(x._a, axis=None if axis is None else axis_tuple(axis, x.ndim)))

    def moveaxis(self, x: Array, source: Any, destination: Any, /) -> Array:
        x = self._array(x)
        return self._view(x, np.moveaxis(x._a, source, destination))

    def permute_dims(self, x: Array, /, axes: tuple[int, ...]) -> Array:
        x = self._array(x)
        return self._view(x, np.transpose(x._a, axes))

    def matrix_transpose(self, x: Array, /) -> Array:
        x = self._array(x)
        if x.ndim < 2:
            raise ValueError(f"matrix_transpose needs at least 2 dimensions, got {x.ndim}")
        return self._view(x, np.swapaxes(x._a, -1, -2))

    def repeat(self, x: Array, repeats: Any, /, *, axis: int | None = None) -> Array:
        x = self._array(x)
        r = repeats._a if isinstance(repeats, Array) else repeats
        return self._wrap(np.repeat(x._a, r, axis=axis), x._dtype)

    def reshape(self, x: Array, /, shape: tuple[int, ...], *, copy: bool | None = None) -> Array:
        x = self._array(x)
        if copy:
            return self._wrap(x._a.reshape(shape).copy(), x._dtype)
        r = x._a.reshape(shape)
        if copy is False and not np.shares_memory(r, x._a) and r.size:
            raise ValueError("reshape with copy=False needs a view")
        return self._view(x, r)

    def roll(self, x: Array, /, shift: Any, *, axis: Any = None) -> Array:
        x = self._array(x)
        return self._wrap(np.roll(x._a, shift, axis=axis), x._dtype)

    def squeeze(self, x: Array, /, axis: Any) -> Array:
        x = self._array(x)
        axes = axis_tuple(axis, x.ndim)
        if any(x.shape[a] != 1 for a in axes):
            raise ValueError(f"cannot squeeze axes {axis} of shape {x.shape}")
        return self._view(x, np.squeeze(x._a, axis=axes))

    def tile(self, x: Array, repetitions: tuple[int, ...], /) -> Array:
        x = self._array(x)
        return self._wrap(np.tile(x._a, repetitions), x._dtype)

    def take(self, x: Array, indices: Array, /, *, axis: int | None = None) -> Array:
        x = self._array(x)
        if axis is None:
            if x.ndim != 1:
                raise ValueError("axis is required for arrays of more than one dimension")
            axis = 0
        i = self._array(indices, "indices")
        return self._wrap(np.take(x._a, i._a, axis=axis), x._dtype)

    def take_along_axis(self, x: Array, indices: Array, /, *, axis: int = -1) -> Array:
        x = self._array(x)
        i = self._array(indices, "indices")
        return self._wrap(np.take_along_axis(x._a, i._a, axis=axis), x._dtype)
