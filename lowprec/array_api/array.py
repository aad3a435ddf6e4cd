"""`Array`: the array object of the array-API namespaces.

An `Array` is an ndarray, its namespace's `DType` and the namespace. A floating
array's ndarray holds float64 values of the dtype's format. It is the ``_v`` of a
Tensor, and ``x.tensor`` wraps it without a copy. A boolean or integer array's
ndarray holds NumPy's own dtype. Operators call the namespace's functions, so an
operator and its function are one computation. The class never rounds and never
computes on its own.
Mutation is NumPy's: ``x[i] = v`` writes into the buffer, which views (and a Tensor
made by ``x.tensor``) share.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..tensors import Tensor
from .dtypes import DType

__all__ = ["Array", "CPU"]


class _Device:
    """The one device: the CPU."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "CPU"


#: The device of every array.
CPU = _Device()


def _binary(name, reflected=False):
    def method(self, other):
        ns = self._ns
        if not ns.is_operand(other):
            return NotImplemented
        fn = getattr(ns, name)
        return fn(other, self) if reflected else fn(self, other)
    method.__name__ = f"__{'r' if reflected else ''}{name}__"
    return method


def _inplace(name):
    def method(self, other):
        ns = self._ns
        if not ns.is_operand(other):
            return NotImplemented
        r = getattr(ns, name)(self, other)
        if r._dtype is not self._dtype or r._a.shape != self._a.shape:
            raise TypeError(f"in-place {name} would change {self._dtype.name}{self.shape} "
                            f"into {r._dtype.name}{r.shape}")
        if not self._a.flags.writeable:
            raise ValueError(f"in-place {name} on a read-only array (a broadcast view)")
        self._a[...] = r._a
        return self
    return method


class Array:
    """An array of a `lowprec.array_api` namespace.

    Floating arrays are Tensors' values (``x.tensor``), computed and rounded as
    Tensors are.

    Examples
    --------
    >>> import lowprec.array_api as xp
    >>> x = xp.asarray([0.1, 0.2], dtype=xp.float32)
    >>> x
    Array([0.10000000149011612, 0.20000000298023224], dtype=float32)
    >>> (x + x).tensor.fmt, x.shape, x.device
    (lp.FP32, (2,), CPU)
    """

    __slots__ = ("_a", "_dtype", "_ns")
    __array_priority__ = 200   # above Tensor's: an Array meeting a Tensor takes the call

    def __init__(self, a: np.ndarray, dtype: DType, ns: Any) -> None:
        # Internal: ``a`` must already be of ``dtype`` (make arrays with xp.asarray).
        self._a = a
        self._dtype = dtype
        self._ns = ns

    # -- attributes ---------------------------------------------------------------
    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def device(self) -> _Device:
        return CPU

    @property
    def shape(self) -> tuple[int, ...]:
        return self._a.shape

    @property
    def ndim(self) -> int:
        return self._a.ndim

    @property
    def size(self) -> int:
        return self._a.size

    @property
    def T(self) -> Array:
        if self.ndim != 2:
            raise ValueError(f"x.T needs a 2-D array, got {self.ndim}-D; use x.mT")
        return self._ns.permute_dims(self, (1, 0))

    @property
    def mT(self) -> Array:
        return self._ns.matrix_transpose(self)

    @property
    def tensor(self) -> Tensor:
        """The floating array as a `lowprec.Tensor`: its values, read only, no copy."""
        if self._dtype.fmt is None:
            raise TypeError(f"a {self._dtype.name} array is not a Tensor (Tensors hold "
                            "floating values)")
        return Tensor(self._a, self._dtype.fmt)

    def to_device(self, device: Any, /, *, stream: Any = None) -> Array:
        if device is not CPU:
            raise ValueError(f"lowprec arrays live on the CPU, not {device!r}")
        return self

    def __array_namespace__(self, /, *, api_version: str | None = None) -> Any:
        self._ns.check_version(api_version)
        return self._ns.public

    # NumPy's functions and ufuncs are refused (the namespace's are the emulated ones);
    # np.asarray(x) is the way out, to the float64 values.
    __array_ufunc__ = None

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        name = getattr(func, "__name__", repr(func))
        raise TypeError(f"numpy.{name} does not take a lowprec.array_api Array: call the "
                        f"namespace's function (x.__array_namespace__().{name}), or "
                        "np.asarray(x) for the float64 values")

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        # NumPy's view of the values: float64 for floating arrays (exactly the values).
        if copy is False:
            raise ValueError("a lowprec Array gives NumPy a copy of its values")
        a = self._a if dtype is None else self._a.astype(dtype)
        return a.copy() if a is self._a else a

    def __repr__(self) -> str:
        body = np.array2string(self._a, separator=", ", prefix="Array(",
                               floatmode="unique", threshold=40)
        shape = f", shape={self.shape}" if self.size == 0 and self.ndim != 1 else ""
        return f"Array({body}{shape}, dtype={self._dtype.name})"

    def __dlpack__(self, /, *, stream: Any = None, max_version: Any = None,
                   dl_device: Any = None, copy: bool | None = None) -> Any:
        return self._ns.storage(self).__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)   # kDLCPU

    # -- Python scalars -------------------------------------------------------------
    def _scalar(self, kinds, name):
        if self.ndim != 0:
            raise TypeError(f"only 0-d arrays convert to Python {name}, got shape {self.shape}")
        if self._dtype.kind not in kinds:
            raise TypeError(f"a {self._dtype.name} array does not convert to {name}")
        return self._a[()]

    def __bool__(self) -> bool:
        return bool(self._scalar(("bool", "signed", "unsigned", "floating"), "bool"))

    def __int__(self) -> int:
        return int(self._scalar(("bool", "signed", "unsigned", "floating"), "int"))

    def __float__(self) -> float:
        return float(self._scalar(("bool", "signed", "unsigned", "floating"), "float"))

    def __complex__(self) -> complex:
        return complex(self._scalar(("bool", "signed", "unsigned", "floating"), "complex"))

    def __index__(self) -> int:
        return operator.index(self._scalar(("signed", "unsigned"), "index"))

    __hash__ = None  # type: ignore[assignment]  # unhashable, as an ndarray

    # -- indexing -----------------------------------------------------------------------
    def __getitem__(self, key: Any) -> Array:
        r = self._a[self._ns.index_key(key)]
        return Array(r if isinstance(r, np.ndarray) else np.asarray(r), self._dtype, self._ns)

    def __setitem__(self, key: Any, value: Any) -> None:
        v = self._ns.asarray(value, dtype=self._dtype)._a
        self._a[self._ns.index_key(key)] = v

    def __len__(self) -> int:
        return len(self._a)

    def __iter__(self) -> Any:
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    # -- operators: the namespace's functions ---------------------------------------
    def __neg__(self) -> Array:
        return self._ns.negative(self)

    def __pos__(self) -> Array:
        return self._ns.positive(self)

    def __abs__(self) -> Array:
        return self._ns.abs(self)

    def __invert__(self) -> Array:
        return self._ns.bitwise_invert(self)


for _op, _fn in (("add", "add"), ("sub", "subtract"), ("mul", "multiply"),
                 ("truediv", "divide"), ("floordiv", "floor_divide"), ("mod", "remainder"),
                 ("pow", "pow"), ("matmul", "matmul"), ("and", "bitwise_and"),
                 ("or", "bitwise_or"), ("xor", "bitwise_xor"),
                 ("lshift", "bitwise_left_shift"), ("rshift", "bitwise_right_shift")):
    setattr(Array, f"__{_op}__", _binary(_fn))
    setattr(Array, f"__r{_op}__", _binary(_fn, reflected=True))
    setattr(Array, f"__i{_op}__", _inplace(_fn))
for _op, _fn in (("eq", "equal"), ("ne", "not_equal"), ("lt", "less"), ("le", "less_equal"),
                 ("gt", "greater"), ("ge", "greater_equal")):
    setattr(Array, f"__{_op}__", _binary(_fn))
