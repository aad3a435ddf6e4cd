"""`Creation`: the array API's creation functions (``empty`` ... ``triu``,
``meshgrid``, ``from_dlpack``).

``asarray`` is `Core`'s. Floating values (``arange``, ``linspace``, ``full``) are
NumPy's float64 values rounded once into the dtype's format. Zeros and ones are
exact in every format.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from .array import Array
from .core import Core
from .dtypes import DType

__all__ = ["Creation"]


class Creation(Core):
    """The standard's creation functions."""

    def _fill_dtype(self, value: Any, dtype: Any) -> DType:
        if dtype is not None:
            return self._dtype(dtype)
        if isinstance(value, (bool, np.bool_)):
            return self.bool
        if isinstance(value, (int, np.integer)):
            return self.int64
        if isinstance(value, complex):
            raise TypeError("lowprec has no complex dtypes")
        return self.float64

    @staticmethod
    def _fill_value(value: Any) -> Any:
        """A fill value: a Python (or NumPy) bool, int or float, or a 0-d array's."""
        if isinstance(value, Array):
            if value.ndim:
                raise TypeError(f"fill_value must be a scalar or a 0-d array, got an array "
                                f"of shape {value.shape}")
            return value._a[()]
        if isinstance(value, (complex, np.complexfloating)):
            raise TypeError("lowprec has no complex dtypes")
        if not isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
            raise TypeError(f"fill_value must be a bool, int or float (or a 0-d array), got "
                            f"{type(value).__name__} {value!r:.40}")
        return value

    def empty(self, shape: Any, *, dtype: Any = None, device: Any = None) -> Array:
        self.check_device(device)
        return self._filled(shape, 0, self._fill_dtype(0.0, dtype))

    def zeros(self, shape: Any, *, dtype: Any = None, device: Any = None) -> Array:
        self.check_device(device)
        return self._filled(shape, 0, self._fill_dtype(0.0, dtype))

    def ones(self, shape: Any, *, dtype: Any = None, device: Any = None) -> Array:
        self.check_device(device)
        return self._filled(shape, 1, self._fill_dtype(1.0, dtype))

    def full(self, shape: Any, fill_value: Any, *, dtype: Any = None,
             device: Any = None) -> Array:
        self.check_device(device)
        fill_value = self._fill_value(fill_value)
        return self._filled(shape, fill_value, self._fill_dtype(fill_value, dtype))

    def _like(self, x, dtype):
        x = self._array(x)
        return x.shape, (x._dtype if dtype is None else self._dtype(dtype))

    def empty_like(self, x: Array, /, *, dtype: Any = None, device: Any = None) -> Array:
        self.check_device(device)
        shape, d = self._like(x, dtype)
        return self._filled(shape, 0, d)

    def zeros_like(self, x: Array, /, *, dtype: Any = None, device: Any = None) -> Array:
        self.check_device(device)
        shape, d = self._like(x, dtype)
        return self._filled(shape, 0, d)

    def ones_like(self, x: Array, /, *, dtype: Any = None, device: Any = None) -> Array:
        self.check_device(device)
        shape, d = self._like(x, dtype)
        return self._filled(shape, 1, d)

    def full_like(self, x: Array, /, fill_value: Any, *, dtype: Any = None,
                  device: Any = None) -> Array:
        self.check_device(device)
        fill_value = self._fill_value(fill_value)
        shape, d = self._like(x, dtype)
        return self._filled(shape, fill_value, d)

    def eye(self, n_rows: int, n_cols: int | None = None, /, *, k: int = 0,
            dtype: Any = None, device: Any = None) -> Array:
        self.check_device(device)
        d = self._fill_dtype(1.0, dtype)
        e = np.eye(n_rows, n_cols, k=k)           # zeros and ones: in every format
        return self._wrap(e if d.kind == "floating" else e.astype(d.storage), d)

    def arange(self, start: Any, /, stop: Any = None, step: Any = 1, *, dtype: Any = None,
               device: Any = None) -> Array:
        self.check_device(device)
        if stop is None:
            start, stop = 0, start
        if step == 0:
            raise ValueError("arange: step must not be zero")
        floats = any(isinstance(v, float) for v in (start, stop, step))
        d = self._dtype(dtype) if dtype is not None else (self.float64 if floats
                                                          else self.int64)
        if d.kind == "floating":
            # NumPy's float64 start + i * step, each rounded once into the format.
            return self._wrap(self._round(np.arange(start, stop, step, dtype=np.float64),
                                          d.fmt), d)
        return self._wrap(np.arange(start, stop, step, dtype=d.storage), d)

    def linspace(self, start: Any, stop: Any, /, num: int, *, dtype: Any = None,
                 device: Any = None, endpoint: bool = True) -> Array:
        self.check_device(device)
        d = self._dtype(dtype) if dtype is not None else self.float64
        if d.kind != "floating":
            return self._wrap(np.linspace(start, stop, num, endpoint=endpoint,
                                          dtype=d.storage), d)
        # NumPy's float64 points, each rounded once into the format.
        return self._wrap(self._round(np.linspace(float(start), float(stop), num,
                                                  endpoint=endpoint), d.fmt), d)

    def from_dlpack(self, x: Any, /, *, device: Any = None, copy: bool | None = None) -> Array:
        self.check_device(device)
        if isinstance(x, Array) and x._ns is self:
            return self.asarray(x, copy=copy)
        return self.asarray(np.from_dlpack(x), copy=copy)

    def meshgrid(self, *arrays: Array, indexing: str = "xy") -> list[Array]:
        xs = [self._array(a) for a in arrays]
        if len({x._dtype for x in xs}) > 1:
            raise ValueError("meshgrid needs arrays of one dtype")
        if indexing not in ("xy", "ij"):
            raise ValueError(f"indexing must be 'xy' or 'ij', got {indexing!r}")
        return [self._wrap(g.copy(), xs[0]._dtype)
                for g in np.meshgrid(*[x._a for x in xs], indexing=cast(Any, indexing))]

    def tril(self, x: Array, /, *, k: int = 0) -> Array:
        x = self._array(x)
        return self._wrap(np.tril(x._a, k), x._dtype)   # values kept, zeros set: exact

    def triu(self, x: Array, /, *, k: int = 0) -> Array:
        x = self._array(x)
        return self._wrap(np.triu(x._a, k), x._dtype)
