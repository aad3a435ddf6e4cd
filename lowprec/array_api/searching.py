"""`Searching`: the array API's searching functions (``argmax``, ``argmin``,
``count_nonzero``, ``nonzero``, ``searchsorted``, ``where``): indices and
selections, exact in every format.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from .array import Array
from .core import Core, axis_tuple

__all__ = ["Searching"]


class Searching(Core):
    """The standard's searching functions."""

    def argmax(self, x: Array, /, *, axis: int | None = None, keepdims: bool = False) -> Array:
        x = self._array(x)
        return self._wrap(np.argmax(x._a, axis=axis, keepdims=keepdims), self.int64)

    def argmin(self, x: Array, /, *, axis: int | None = None, keepdims: bool = False) -> Array:
        x = self._array(x)
        return self._wrap(np.argmin(x._a, axis=axis, keepdims=keepdims), self.int64)

    def count_nonzero(self, x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Array:
        x = self._array(x)
        return self._wrap(np.count_nonzero(x._a, axis=axis_tuple(axis, x.ndim),
                                           keepdims=keepdims), self.int64)

    def nonzero(self, x: Array, /) -> tuple[Array, ...]:
        x = self._array(x)
        if x.ndim == 0:
            raise ValueError("nonzero needs at least one dimension")
        return tuple(self._wrap(i, self.int64) for i in np.nonzero(x._a))

    def searchsorted(self, x1: Array, x2: Array, /, *, side: str = "left",
                     sorter: Array | None = None) -> Array:
        a, b, _ = self._pair(x1, x2)
        s = None if sorter is None else self._array(sorter, "sorter")._a
        return self._wrap(np.searchsorted(a._a, b._a, side=cast(Any, side), sorter=s),
                          self.int64)

    def where(self, condition: Array, x1: Any, x2: Any, /) -> Array:
        c = self._array(condition, "condition")
        a, b, d = self._pair(x1, x2)
        return self._wrap(np.where(c._a.astype(bool), a._a, b._a), d)   # a selection
