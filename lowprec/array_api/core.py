"""`Core`: what every chapter of the array API builds on: the precision policy, the
data types and their promotion, and the conversions into arrays (``asarray``,
``astype``, ``result_type``).

The chapters (`creation`, `elementwise`, `statistical`, ...) are classes derived from
`Core`, and `Namespace` joins them. Floating values are converted here, always by one
rounding inside the policy's `lp.context`. This module never computes on its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, cast

import numpy as np
from numpy.exceptions import AxisError

from ..formats import FP32, FP64, Format
from ..formats import format as _format
from ..tensorcore import ModelLike
from ..tensors import Tensor, result_format
from ..tensors import context as _context
from ..tensors.core import values_of
from ..tensors.defaults import round_ctx
from ..types import Mode
from .array import CPU, Array
from .dtypes import KINDS, DType, FInfo, IInfo, promote_names

__all__ = ["Core", "API_VERSION", "VERSIONS", "axis_tuple"]

API_VERSION = "2024.12"
VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")


def axis_tuple(axis: Any, ndim: int, name: str = "axis") -> tuple[int, ...]:
    """A normalised tuple of axes (None: all)."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer, tuple)):
        raise TypeError(f"{name} must be an int, a tuple of ints or None, got "
                        f"{type(axis).__name__}")
    axes = (axis,) if not isinstance(axis, tuple) else axis
    out = []
    for a in axes:
        if not isinstance(a, (int, np.integer)) or isinstance(a, bool):
            raise TypeError(f"{name} must hold ints, got {type(a).__name__}")
        if not -ndim <= a < max(ndim, 1):
            # NumPy's AxisError: both a ValueError and an IndexError
            raise AxisError(f"{name} {a} is out of range for {ndim} dimensions")
        out.append(int(a) % max(ndim, 1))
    if len(set(out)) != len(out):
        raise ValueError(f"repeated {name} in {axis}")
    return tuple(out)


class Core:
    """The policy, the dtypes and the conversions of an array-API namespace."""

    def __init__(self, fmt: Format | None = None, mode: Mode | None = None,
                 matmul: ModelLike | None = None, *, label: str = "lowprec.array_api",
                 public: Any = None) -> None:
        self.fmt = fmt
        self.mode = mode
        self.model: ModelLike = "exact" if matmul is None else matmul
        self.__name__ = label
        self.public = self if public is None else public

        def integer(name: str, kind: str) -> DType:
            return DType(name, kind, np.dtype(name), None, 0, label)

        def floating(name: str, fmt: Format, rank: int) -> DType:
            return DType(name, "floating", np.dtype(np.float64), fmt, rank, label)

        self.bool = DType("bool", "bool", np.dtype(np.bool_), None, 0, label)
        self.int8 = integer("int8", "signed")
        self.int16 = integer("int16", "signed")
        self.int32 = integer("int32", "signed")
        self.int64 = integer("int64", "signed")
        self.uint8 = integer("uint8", "unsigned")
        self.uint16 = integer("uint16", "unsigned")
        self.uint32 = integer("uint32", "unsigned")
        self.uint64 = integer("uint64", "unsigned")
        self.float32 = floating("float32", fmt or FP32, 32)
        self.float64 = floating("float64", fmt or FP64, 64)
        self.standard_dtypes = (self.bool, self.int8, self.int16, self.int32, self.int64,
                                self.uint8, self.uint16, self.uint32, self.uint64,
                                self.float32, self.float64)
        self._by_name = {d.name: d for d in self.standard_dtypes}
        self._by_fmt: dict[Format, DType] = {FP32: self.float32, FP64: self.float64}


    def __repr__(self) -> str:
        if self.fmt is None:
            return "<namespace lowprec.array_api>"
        return (f"lowprec.array_namespace({str(self.fmt)!r}, mode={self.mode!r}, "
                f"matmul={self.model!r})")

    # -- the policy -------------------------------------------------------------------------
    def _ctx(self):
        return contextlib.nullcontext() if self.mode is None else _context(mode=self.mode)

    def check_version(self, api_version: str | None) -> None:
        if api_version is not None and api_version not in VERSIONS:
            raise ValueError(f"api_version {api_version!r} is not one of {VERSIONS}")

    def check_device(self, device: Any) -> None:
        if device is not None and device is not CPU:
            raise ValueError(f"lowprec arrays live on the CPU, not {device!r}")

    # -- dtypes -----------------------------------------------------------------------------
    def dtype_of_format(self, fmt: Format) -> DType:
        """The floating dtype of a lowprec format (in a policy namespace: float64)."""
        if self.fmt is not None:
            return self.float32 if fmt == FP32 else self.float64
        d = self._by_fmt.get(fmt)
        if d is None:
            if not fmt.signed:
                raise TypeError(f"{fmt} has no sign: no array holds it")
            name = fmt.numpy_dtype_name or str(fmt).lower()
            d = DType(name, "floating", np.dtype(np.float64), fmt, fmt.bits, self.__name__)
            self._by_fmt[fmt] = d
        return d

    def _dtype(self, dtype: Any, name: str = "dtype") -> DType:
        """A dtype argument: one of ours, or a name / NumPy dtype / format naming one."""
        if isinstance(dtype, DType):
            if dtype._label != self.__name__ or (dtype.kind == "floating" and dtype not in
                                                 self._by_fmt.values() and dtype not in
                                                 (self.float32, self.float64)):
                raise ValueError(f"{name} {dtype!r} belongs to another namespace")
            return dtype
        if isinstance(dtype, str) and dtype in self._by_name:
            return self._by_name[dtype]
        try:
            np_dtype = np.dtype(dtype)
        except TypeError:
            np_dtype = None
        if np_dtype is not None and np_dtype.kind in "biu":
            return self._by_name["bool" if np_dtype.kind == "b" else np_dtype.name]
        if np_dtype is not None and np_dtype.kind == "c":
            raise TypeError(f"{name} {dtype!r}: lowprec has no complex formats")
        try:
            return self.dtype_of_format(_format(dtype))
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be a dtype of this namespace, got {dtype!r}") from None

    def _promote(self, a: DType, b: DType) -> DType:
        if a is b:
            return a
        if a.kind == "floating" and b.kind == "floating" and self.fmt is None:
            return self.dtype_of_format(result_format(a.fmt, b.fmt))
        name = promote_names(a, b)
        if name is not None:
            return self._by_name[name]
        # Outside the standard's table: a floating dtype wins over integers and bools
        # (their values rounded into it), an integer dtype over bool (as NumPy).
        for d in (a, b):
            if d.kind == "floating":
                return d
        for d in (a, b):
            if d.kind != "bool" and (a.kind == "bool" or b.kind == "bool"):
                return d
        raise TypeError(f"no promotion of {a.name} with {b.name}")

    def result_type(self, *arrays_and_dtypes: Any) -> DType:
        if not arrays_and_dtypes:
            raise ValueError("result_type needs at least one array or dtype")
        dtypes = [x._dtype if isinstance(x, Array) else x for x in arrays_and_dtypes
                  if not isinstance(x, (bool, int, float, complex))]
        scalars = [x for x in arrays_and_dtypes if isinstance(x, (bool, int, float, complex))]
        if not dtypes:
            raise ValueError("result_type needs at least one array or dtype")
        out = self._dtype(dtypes[0])
        for d in dtypes[1:]:
            out = self._promote(out, self._dtype(d))
        for s in scalars:
            out = self._scalar_dtype(s, out)
        return out

    def _scalar_dtype(self, s: Any, d: DType) -> DType:
        if isinstance(s, complex):
            raise TypeError("lowprec has no complex dtypes")
        if isinstance(s, bool) or (d.kind != "bool" and isinstance(s, int)):
            return d if d.kind != "bool" or isinstance(s, bool) else self.int64
        if isinstance(s, float):
            return d if d.kind == "floating" else self.float64
        return self.int64 if d.kind == "bool" else d

    def can_cast(self, from_: Any, to: Any, /) -> bool:
        a = from_._dtype if isinstance(from_, Array) else self._dtype(from_, "from_")
        b = self._dtype(to, "to")
        if a is b:
            return True
        if a.kind == "bool" or b.kind == "bool":
            return a.kind == "bool" and b.kind == "bool"
        if a.kind == "floating":
            if b.kind != "floating":
                return False
            return (self.fmt is not None and a.rank <= b.rank) or (
                self.fmt is None and result_format(a.fmt, b.fmt) == b.fmt)
        if b.kind == "floating":
            return False
        return promote_names(a, b) == b.name

    def finfo(self, type: Any, /) -> FInfo:  # noqa: A002 - the standard's name
        d = type._dtype if isinstance(type, Array) else self._dtype(type, "type")
        if d.kind != "floating":
            raise ValueError(f"finfo needs a floating dtype, got {d.name}")
        return FInfo(d)

    def iinfo(self, type: Any, /) -> IInfo:  # noqa: A002 - the standard's name
        d = type._dtype if isinstance(type, Array) else self._dtype(type, "type")
        if d.kind not in ("signed", "unsigned"):
            raise ValueError(f"iinfo needs an integer dtype, got {d.name}")
        return IInfo(d)

    def isdtype(self, dtype: Any, kind: Any) -> bool:
        d = self._dtype(dtype)
        kinds = kind if isinstance(kind, tuple) else (kind,)
        for k in kinds:
            if isinstance(k, str):
                if k not in KINDS:
                    raise ValueError(f"unknown dtype kind {k!r}; kinds: {sorted(KINDS)}")
                if d.kind in KINDS[k]:
                    return True
            elif self._dtype(k, "kind") is d:
                return True
        return False

    # -- making arrays ----------------------------------------------------------------------
    def is_operand(self, x: Any) -> bool:
        """Whether an operator takes ``x``: our arrays, Tensors, Python numbers, ndarrays."""
        if isinstance(x, Array):
            return x._ns is self
        return isinstance(x, (Tensor, bool, int, float, np.ndarray, np.generic))

    def _wrap(self, a: Any, dtype: DType) -> Array:
        a = a if type(a) is np.ndarray else np.asarray(a)
        if dtype.kind != "floating" and a.dtype != dtype.storage:
            a = a.astype(dtype.storage)
        return Array(a, dtype, self)

    def _round(self, values: Any, fmt: Format) -> np.ndarray:
        with self._ctx():
            return np.asarray(round_ctx(np.asarray(values), fmt, None), dtype=np.float64)

    def _convert(self, a: np.ndarray, src: DType | None, dtype: DType) -> np.ndarray:
        """Values of ``a`` (storage of ``src``, or any NumPy array) as ``dtype``'s storage."""
        if dtype.kind == "floating":
            if src is not None and src.fmt is not None and (
                    src.fmt == dtype.fmt or result_format(src.fmt, dtype.fmt) == dtype.fmt):
                return a.copy()      # the wider format holds every value: a copy
            if a.dtype.kind == "b":
                a = a.astype(np.float64)
            return self._round(a, dtype.fmt)
        if a.dtype.kind == "f" and dtype.kind != "bool":
            with np.errstate(invalid="ignore"):
                return np.trunc(a).astype(dtype.storage)
        return a.astype(dtype.storage)

    def asarray(self, obj: Any, /, *, dtype: Any = None, device: Any = None,
                copy: bool | None = None) -> Array:
        self.check_device(device)
        want = None if dtype is None else self._dtype(dtype)
        if isinstance(obj, Array) and obj._ns is self:
            if want is None or want is obj._dtype:
                if copy:
                    return Array(obj._a.copy(), obj._dtype, self)
                return Array(obj._a, obj._dtype, self)
            if copy is False:
                raise ValueError(f"copy=False, but {obj._dtype.name} -> {want.name} copies")
            return self._wrap(self._convert(obj._a, obj._dtype, want), want)
        if isinstance(obj, Tensor):
            src = self.dtype_of_format(obj.fmt)
            a = values_of(obj)
            if self.fmt is not None and obj.fmt != self.fmt:
                a = self._round(a, self.fmt)
            if want is None or want.fmt == obj.fmt:
                return self._wrap(a.copy() if copy else a, src if want is None else want)
            if copy is False:
                raise ValueError(f"copy=False, but {obj.fmt} -> {want.name} rounds")
            return self._wrap(self._convert(a, src, want), want)
        if isinstance(obj, Array):   # another namespace's array: its NumPy values
            obj = np.asarray(obj)
        if isinstance(obj, (complex, np.complexfloating)):
            raise TypeError("lowprec has no complex dtypes")
        if isinstance(obj, int) and not isinstance(obj, bool) and \
                (want is None or want.kind != "floating"):
            lo, hi = (0, 2**64) if want is self.uint64 else (-2**63, 2**63)
            if not lo <= obj < hi:
                name = "uint64" if want is self.uint64 else "int64"
                raise ValueError(f"asarray: the integer {obj} does not fit {name}; ask "
                                 f"for dtype=float64 to round it into a floating array")
        if isinstance(obj, int) and not isinstance(obj, bool) and want is not None and \
                want.kind == "floating":
            # lp.round takes Python ints of any width exactly: one rounding
            with self._ctx():
                v = round_ctx(obj, cast(Format, want.fmt), None)
            return self._wrap(np.asarray(v, dtype=np.float64), want)
        if isinstance(obj, (bool, np.bool_)) and want is None:
            want = self.bool
        elif isinstance(obj, (int, np.integer)) and not isinstance(obj, (bool, np.bool_)) \
                and want is None and not isinstance(obj, np.integer):
            want = self.int64
        if want is None or want.kind == "floating":
            a = np.asarray(obj)
        else:
            try:
                a = np.asarray(obj, dtype=want.storage)
            except (OverflowError, TypeError, ValueError):
                a = np.asarray(obj)
                if a.dtype.kind not in "biuf":
                    raise TypeError(f"asarray needs real numbers, got {a.dtype}") from None
                raise
        if a.dtype.kind == "O":
            raise TypeError("asarray needs real numbers (and integers that fit int64), got "
                            "objects NumPy holds as dtype object")
        if a.dtype.kind == "c":
            raise TypeError("lowprec has no complex dtypes")
        if a.dtype.kind == "f" or (a.dtype.kind == "V" and a.dtype.names is None):
            src_fmt = _format(a.dtype) if a.dtype.kind == "V" or a.dtype.itemsize != 8 \
                else FP64
            src = self.dtype_of_format(src_fmt)
            target = want if want is not None else src
            if target.kind == "floating":
                if copy is False and (a.dtype != np.float64 or target.fmt != src_fmt):
                    raise ValueError(f"copy=False, but {a.dtype} -> {target.name} converts")
                if a.dtype == np.float64 and target.fmt == FP64:
                    return self._wrap(a.copy() if copy else a, target)
                return self._wrap(self._round(a.astype(np.float64) if a.dtype.kind == "V"
                                              else a, target.fmt), target)
            return self._wrap(self._convert(a, None, target), target)
        if a.dtype.kind not in "biu":
            raise TypeError(f"asarray needs real numbers, got {a.dtype}")
        src = self.bool if a.dtype.kind == "b" else self._by_name[a.dtype.name]
        target = want if want is not None else src
        if target is src:
            if copy:
                return self._wrap(a.copy(), target)
            return self._wrap(a, target)
        if copy is False:
            raise ValueError(f"copy=False, but {src.name} -> {target.name} converts")
        return self._wrap(self._convert(a, src, target), target)

    def _array(self, x: Any, name: str = "x") -> Array:
        if isinstance(x, Array):
            if x._ns is not self:
                raise TypeError(f"{name} is an array of another namespace ({x._ns!r})")
            return x
        if isinstance(x, (Tensor, np.ndarray, np.generic, bool, int, float, list, tuple)):
            return self.asarray(x)
        raise TypeError(f"{name} must be an array, got {type(x).__name__}")

    def _pair(self, x1: Any, x2: Any) -> tuple[Array, Array, DType]:
        """Two operands in their result dtype (a Python number takes the array's)."""
        s1 = isinstance(x1, (bool, int, float, complex))
        s2 = isinstance(x2, (bool, int, float, complex))
        if s1 and s2:
            raise TypeError("at least one operand must be an array")
        if s1:
            b = self._array(x2, "x2")
            d = self._scalar_dtype(x1, b._dtype)
            return self.asarray(x1, dtype=d), self.astype(b, d, copy=False), d
        a = self._array(x1, "x1")
        if s2:
            d = self._scalar_dtype(x2, a._dtype)
            return self.astype(a, d, copy=False), self.asarray(x2, dtype=d), d
        b = self._array(x2, "x2")
        d = self._promote(a._dtype, b._dtype)
        return self.astype(a, d, copy=False), self.astype(b, d, copy=False), d

    def _t(self, x: Array) -> Tensor:
        return Tensor(x._a, cast(Format, x._dtype.fmt))

    def _floating(self, x: Array) -> Array:
        """A floating operand (integers and bools converted into the default float)."""
        return x if x._dtype.kind == "floating" else self.astype(x, self.float64)

    def storage(self, x: Array) -> np.ndarray:
        """The array in its own NumPy dtype (float32 for FP32, ...), for DLPack."""
        if x._dtype.kind != "floating":
            return x._a
        name = x._dtype.fmt.numpy_dtype_name
        if name in ("float16", "float32", "float64"):
            return x._a.astype(name)
        raise BufferError(f"{x._dtype.fmt} has no DLPack dtype")

    def index_key(self, key: Any) -> Any:
        """An indexing key with our arrays replaced by their NumPy indices."""
        if isinstance(key, tuple):
            return tuple(self.index_key(k) for k in key)
        if isinstance(key, Array):
            if key._dtype.kind == "floating":
                raise IndexError("arrays used as indices must be of integer or boolean type")
            return key._a if key.ndim else key._a[()]
        if isinstance(key, Tensor):
            raise IndexError("arrays used as indices must be of integer or boolean type")
        return key

    def astype(self, x: Array, dtype: Any, /, *, copy: bool = True,
               device: Any = None) -> Array:
        self.check_device(device)
        x = self._array(x)
        d = self._dtype(dtype)
        if d is x._dtype:
            return Array(x._a.copy(), d, self) if copy else x
        if d.kind == "floating" and x._dtype.kind == "floating" and d.fmt == x._dtype.fmt:
            return Array(x._a.copy(), d, self) if copy else Array(x._a, d, self)
        return self._wrap(self._convert(x._a, x._dtype, d), d)

    # -- filled arrays (creation, and the chapters' empty results) -------------------------
    @staticmethod
    def _shape(shape: Any) -> tuple[int, ...]:
        """A shape argument: an int or a tuple of non-negative ints."""
        dims = shape if isinstance(shape, (tuple, list)) else (shape,)
        for n in dims:
            if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
                raise TypeError(f"shape must be an int or a tuple of ints, got "
                                f"{type(shape).__name__} {shape!r:.40}")
            if n < 0:
                raise ValueError(f"shape {shape!r} has a negative dimension")
        return tuple(int(n) for n in dims)

    def _filled(self, shape: Any, value: Any, dtype: DType) -> Array:
        shape = self._shape(shape)
        if dtype.kind == "floating":
            v = self._round(np.float64(value), dtype.fmt)
            return self._wrap(np.full(shape, v, dtype=np.float64), dtype)
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            info = np.iinfo(dtype.storage)
            if not info.min <= value <= info.max:
                raise ValueError(f"fill value {value} does not fit {dtype}; ask for a "
                                 f"wider integer dtype or for float64")
        return self._wrap(np.full(shape, value, dtype=dtype.storage), dtype)

    # -- floating work as Tensor operations ------------------------------------------------
    def _float_call(self, fn: Callable[..., Any], *xs: Array) -> Any:
        with self._ctx():
            return fn(*(self._t(x) for x in xs))

    def _out(self, r: Any, dtype: DType) -> Array:
        return self._wrap(values_of(r), dtype)
