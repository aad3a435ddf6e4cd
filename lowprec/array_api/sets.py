"""`Sets`: the array API's set functions (``unique_values``, ``unique_counts``,
``unique_inverse``, ``unique_all``), NumPy's ``unique`` on the values: exact.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from .array import Array
from .core import Core

__all__ = ["Sets", "UniqueAll", "UniqueCounts", "UniqueInverse"]

UniqueAll = namedtuple("UniqueAll", ["values", "indices", "inverse_indices", "counts"])
UniqueCounts = namedtuple("UniqueCounts", ["values", "counts"])
UniqueInverse = namedtuple("UniqueInverse", ["values", "inverse_indices"])


class Sets(Core):
    """The standard's set functions."""

    def _unique(self, x, **kw):
        x = self._array(x)
        return x, np.unique(x._a.reshape(-1), equal_nan=False, **kw)

    def unique_values(self, x: Array, /) -> Array:
        x, v = self._unique(x)
        return self._wrap(v, x._dtype)

    def unique_counts(self, x: Array, /) -> Any:
        x, (v, c) = self._unique(x, return_counts=True)
        return UniqueCounts(self._wrap(v, x._dtype), self._wrap(c, self.int64))

    def unique_inverse(self, x: Array, /) -> Any:
        x, (v, i) = self._unique(x, return_inverse=True)
        return UniqueInverse(self._wrap(v, x._dtype), self._wrap(i.reshape(x.shape),
                                                                 self.int64))

    def unique_all(self, x: Array, /) -> Any:
        x, (v, idx, inv, c) = self._unique(x, return_index=True, return_inverse=True,
                                           return_counts=True)
        return UniqueAll(self._wrap(v, x._dtype), self._wrap(idx, self.int64),
                         self._wrap(inv.reshape(x.shape), self.int64),
                         self._wrap(c, self.int64))
