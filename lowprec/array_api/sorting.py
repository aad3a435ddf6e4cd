"""`Sorting`: the array API's sorting functions (``argsort``, ``sort``).

Values are moved, never changed. Both sorts are stable.
"""

from __future__ import annotations

import numpy as np

from .array import Array
from .core import Core, axis_tuple

__all__ = ["Sorting"]


class Sorting(Core):
    """The standard's sorting functions."""

    def argsort(self, x: Array, /, *, axis: int = -1, descending: bool = False,
                stable: bool = True) -> Array:
        x = self._array(x)
        (ax,) = axis_tuple(axis, x.ndim)
        if not descending:
            return self._wrap(np.argsort(x._a, axis=ax, kind="stable"), self.int64)
        # Descending and stable: sort the reversed array, reverse, map the indices back.
        i = np.flip(np.argsort(np.flip(x._a, axis=ax), axis=ax, kind="stable"), axis=ax)
        return self._wrap(x.shape[ax] - 1 - i, self.int64)

    def sort(self, x: Array, /, *, axis: int = -1, descending: bool = False,
             stable: bool = True) -> Array:
        x = self._array(x)
        (ax,) = axis_tuple(axis, x.ndim)
        r = np.sort(x._a, axis=ax, kind="stable")     # values moved: exact
        return self._wrap(np.flip(r, axis=ax).copy() if descending else r, x._dtype)
