"""`Utility`: the array API's utility functions (``all``, ``any``, ``diff``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .array import Array
from .core import Core, axis_tuple

__all__ = ["Utility"]


class Utility(Core):
    """The standard's utility functions."""

    def all(self, x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Array:
        x = self._array(x)
        return self._wrap(np.all(x._a, axis=axis_tuple(axis, x.ndim), keepdims=keepdims),
                          self.bool)

    def any(self, x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Array:
        x = self._array(x)
        return self._wrap(np.any(x._a, axis=axis_tuple(axis, x.ndim), keepdims=keepdims),
                          self.bool)

    def diff(self, x: Array, /, *, axis: int = -1, n: int = 1, prepend: Any = None,
             append: Any = None) -> Array:
        x = self._array(x)
        parts = [p for p in (prepend, x, append) if p is not None]
        if len(parts) > 1:
            xs = [self._array(p) for p in parts]
            d = self.result_type(*xs)
            x = self._wrap(np.concatenate([self.astype(p, d, copy=False)._a for p in xs],
                                          axis=axis), d)      # concat's
        (ax,) = axis_tuple(axis, x.ndim)
        if x._dtype.kind == "floating":
            return self._out(self._float_call(lambda t: np.diff(t, n=n, axis=ax), x), x._dtype)
        if x._dtype.kind == "bool":
            raise TypeError("diff needs a numeric array, got bool")
        return self._wrap(np.diff(x._a, n=n, axis=ax), x._dtype)
