"""`Namespace`: the functions of the Python array API standard (2024.12) on `Array`s,
every floating operation computed as a lowprec Tensor operation.

One class holds the whole standard, so the standard namespace (`lowprec.array_api`)
and a policy namespace (`lowprec.array_namespace(fmt, mode, matmul)`) are instances
with the same functions. Floating work goes through Tensors (the handlers of
`lowprec.tensors`, the kernels behind them) and `lowprec.linalg`, inside the policy's
`lp.context`; boolean and integer work is NumPy's, which is exact or wraps as the
standard allows. Nothing floating is computed in float64 and handed back unrounded:
where the standard has a function lowprec does not emulate step by step (``eigh``,
``svd``, ``pinv``, ...), it is evaluated in float64 and rounded once into the format,
and the docs say so (docs/array-api.md).
"""

from __future__ import annotations

import contextlib
import math
from collections import namedtuple
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.exceptions import AxisError

from .. import linalg as _la
from ..formats import FP32, FP64, Format
from ..formats import format as _format
from ..tensorcore import Model, resolve_model
from ..tensors import Tensor, result_format
from ..tensors import context as _context
from ..tensors import matmul as _lp_matmul
from ..tensors.defaults import round_ctx
from .array import CPU, Array
from .dtypes import INTEGER_NAMES, KINDS, DType, FInfo, IInfo, promote_names

__all__ = ["Namespace", "API_VERSION", "VERSIONS", "NAMES"]

API_VERSION = "2024.12"
VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")

UniqueAll = namedtuple("UniqueAll", ["values", "indices", "inverse_indices", "counts"])
UniqueCounts = namedtuple("UniqueCounts", ["values", "counts"])
UniqueInverse = namedtuple("UniqueInverse", ["values", "inverse_indices"])
EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
QRResult = namedtuple("QRResult", ["Q", "R"])
SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])

# Elementwise functions by what they need of their operands (NumPy ufunc names).
_FLOAT_UNARY = {"acos": "arccos", "acosh": "arccosh", "asin": "arcsin", "asinh": "arcsinh",
                "atan": "arctan", "atanh": "arctanh", "cos": "cos", "cosh": "cosh",
                "exp": "exp", "expm1": "expm1", "log": "log", "log1p": "log1p",
                "log2": "log2", "log10": "log10", "sin": "sin", "sinh": "sinh", "tan": "tan",
                "tanh": "tanh", "sqrt": "sqrt"}
_FLOAT_BINARY = {"atan2": "arctan2", "hypot": "hypot", "logaddexp": "logaddexp",
                 "divide": "divide"}
_NUMERIC_UNARY = {"abs": "absolute", "negative": "negative", "positive": "positive",
                  "square": "square", "sign": "sign"}
_NUMERIC_BINARY = {"add": "add", "subtract": "subtract", "multiply": "multiply",
                   "pow": "power", "maximum": "maximum", "minimum": "minimum"}
_ROUNDING = {"ceil": "ceil", "floor": "floor", "trunc": "trunc", "round": "rint"}
_COMPARE = {"equal": "equal", "not_equal": "not_equal", "less": "less",
            "less_equal": "less_equal", "greater": "greater", "greater_equal": "greater_equal"}
_LOGICAL = {"logical_and": "logical_and", "logical_or": "logical_or",
            "logical_xor": "logical_xor"}
_BITWISE = {"bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or",
            "bitwise_xor": "bitwise_xor", "bitwise_left_shift": "left_shift",
            "bitwise_right_shift": "right_shift"}
# Evaluated in float64 (NumPy's result for the values), then rounded once.
_ONCE_BINARY = {"remainder": "remainder"}

#: The standard's names every namespace has (the ``linalg`` extension apart).
NAMES = (tuple(_FLOAT_UNARY) + tuple(_FLOAT_BINARY) + tuple(_NUMERIC_UNARY)
         + tuple(_NUMERIC_BINARY) + tuple(_ROUNDING) + tuple(_COMPARE) + tuple(_LOGICAL)
         + tuple(_BITWISE) + tuple(_ONCE_BINARY) + ("floor_divide",))


def _axes(axis, ndim, name="axis"):
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


class Linalg:
    """The ``linalg`` extension of a namespace (``xp.linalg``)."""

    def __init__(self, ns: Namespace) -> None:
        self._ns = ns

    def __getattr__(self, name: str) -> Any:
        fn = getattr(type(self._ns), f"linalg_{name}", None)
        if fn is None:
            raise AttributeError(f"the linalg extension has no {name!r}")
        bound = fn.__get__(self._ns)
        setattr(self, name, bound)
        return bound

    def __dir__(self) -> list[str]:
        return [n[len("linalg_"):] for n in dir(type(self._ns)) if n.startswith("linalg_")]


class Info:
    """``__array_namespace_info__()``: the namespace's devices, dtypes, capabilities."""

    def __init__(self, ns: Namespace) -> None:
        self._ns = ns

    def capabilities(self) -> dict[str, Any]:
        return {"boolean indexing": True, "data-dependent shapes": True,
                "max dimensions": 64}

    def default_device(self) -> Any:
        return CPU

    def devices(self) -> list[Any]:
        return [CPU]

    def default_dtypes(self, *, device: Any = None) -> dict[str, Any]:
        self._ns.check_device(device)
        ns = self._ns
        return {"real floating": ns.float64, "complex floating": None,
                "integral": ns.int64, "indexing": ns.int64}

    def dtypes(self, *, device: Any = None, kind: Any = None) -> dict[str, DType]:
        self._ns.check_device(device)
        all_ = {d.name: d for d in self._ns.standard_dtypes}
        if kind is None:
            return all_
        return {n: d for n, d in all_.items() if self._ns.isdtype(d, kind)}


class Namespace:
    """An array-API namespace whose floating arrays are lowprec Tensors.

    The standard namespace is `lowprec.array_api`; `lowprec.array_namespace` makes
    one with a policy. See docs/array-api.md.
    """

    __array_api_version__ = API_VERSION
    e = math.e
    pi = math.pi
    inf = math.inf
    nan = math.nan
    newaxis = None

    if TYPE_CHECKING:   # the dtypes and the table-made elementwise functions
        def __getattr__(self, name: str) -> Any: ...

    def __init__(self, fmt: Format | None = None, mode: str | None = None,
                 matmul: str | Model | None = None, *, label: str = "lowprec.array_api",
                 public: Any = None) -> None:
        self.fmt = fmt
        self.mode = mode
        self.model: str | Model = "exact" if matmul is None else matmul
        self.__name__ = label
        self.public = self if public is None else public
        mk = lambda n, k, s, f, r: DType(n, k, np.dtype(s), f, r, label)  # noqa: E731
        self.bool = mk("bool", "bool", np.bool_, None, 0)
        for name in INTEGER_NAMES:
            setattr(self, name, mk(name, "signed" if name[0] == "i" else "unsigned",
                                   name, None, 0))
        self.float32 = mk("float32", "floating", np.float64, fmt or FP32, 32)
        self.float64 = mk("float64", "floating", np.float64, fmt or FP64, 64)
        self.standard_dtypes = (self.bool, *(getattr(self, n) for n in INTEGER_NAMES),
                                self.float32, self.float64)
        self._by_name = {d.name: d for d in self.standard_dtypes}
        self._by_fmt: dict[Format, DType] = {FP32: self.float32, FP64: self.float64}
        self.linalg = Linalg(self)
        self._info = Info(self)

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

    def __array_namespace_info__(self) -> Info:
        return self._info

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
            a = obj._v
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

    # -- creation ---------------------------------------------------------------------------
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

    # -- elementwise ------------------------------------------------------------------------
    def _float_call(self, fn: Callable[..., Any], *xs: Array) -> Any:
        with self._ctx():
            return fn(*(self._t(x) for x in xs))

    def _out(self, r: Any, dtype: DType) -> Array:
        if isinstance(r, Tensor):
            return self._wrap(r._v, dtype)
        return self._wrap(r, dtype)

    def _unary_float(self, ufunc, x):
        x = self._floating(self._array(x))
        return self._out(self._float_call(ufunc, x), x._dtype)

    def _binary_float(self, ufunc, x1, x2):
        a, b, d = self._pair(x1, x2)
        if d.kind != "floating":
            a, b, d = self._floating(a), self._floating(b), self.float64
        return self._out(self._float_call(ufunc, a, b), d)

    def _unary_numeric(self, ufunc, x):
        x = self._array(x)
        if x._dtype.kind == "floating":
            return self._out(self._float_call(ufunc, x), x._dtype)
        if x._dtype.kind == "bool" and ufunc is not np.positive:
            raise TypeError(f"{ufunc.__name__} needs a numeric array, got bool")
        return self._wrap(ufunc(x._a), x._dtype)

    def _binary_numeric(self, ufunc, x1, x2):
        a, b, d = self._pair(x1, x2)
        if d.kind == "floating":
            return self._out(self._float_call(ufunc, a, b), d)
        if d.kind == "bool" and ufunc not in (np.maximum, np.minimum):
            raise TypeError(f"{ufunc.__name__} needs numeric arrays, got bool")
        with np.errstate(all="ignore"):
            return self._wrap(ufunc(a._a, b._a), d)

    def _rounding(self, ufunc, x):
        x = self._array(x)
        if x._dtype.kind == "floating":
            return self._out(self._float_call(ufunc, x), x._dtype)
        return self._wrap(x._a.copy(), x._dtype)    # integers are their own rounding

    def _compare(self, ufunc, x1, x2):
        a, b, d = self._pair(x1, x2)
        if d.kind == "floating":
            return self._wrap(ufunc(a._a, b._a), self.bool)   # comparisons are exact
        return self._wrap(ufunc(a._a, b._a), self.bool)

    def _logical(self, ufunc, x1, x2):
        a, b, _ = self._pair(x1, x2)
        return self._wrap(ufunc(a._a.astype(bool), b._a.astype(bool)), self.bool)

    def _bitwise(self, ufunc, x1, x2):
        a, b, d = self._pair(x1, x2)
        if d.kind == "floating" or (d.kind == "bool" and ufunc in (np.left_shift,
                                                                 np.right_shift)):
            raise TypeError(f"{ufunc.__name__} needs integer (or bool) arrays, got {d.name}")
        if ufunc in (np.left_shift, np.right_shift) and np.any(b._a < 0):
            raise ValueError("shift counts must be non-negative")
        with np.errstate(all="ignore"):
            return self._wrap(ufunc(a._a, b._a), d)

    def _once_binary(self, ufunc, x1, x2):
        a, b, d = self._pair(x1, x2)
        if d.kind != "floating":
            if d.kind == "bool":
                raise TypeError(f"{ufunc.__name__} needs numeric arrays, got bool")
            with np.errstate(all="ignore"):
                return self._wrap(ufunc(a._a, b._a), d)
        with np.errstate(all="ignore"):
            r = ufunc(a._a, b._a)                      # float64 of the values...
        return self._wrap(self._round(r, d.fmt), d)    # ...rounded once

    def floor_divide(self, x1: Array, x2: Array, /) -> Array:
        r = self._once_binary(np.floor_divide, x1, x2)
        if r._dtype.kind == "floating":
            a, b, _ = self._pair(x1, x2)
            one_inf = np.isinf(a._a) != np.isinf(b._a)
            if one_inf.any():
                # The standard's special cases: floor of the IEEE quotient (inf // 2 is
                # inf, 1 // -inf is -0), where NumPy's floor_divide gives nan or -1.
                with np.errstate(all="ignore"):
                    q = np.floor(np.divide(a._a, b._a))
                r = self._wrap(np.where(one_inf, q, r._a), r._dtype)
        return r

    def reciprocal(self, x: Array, /) -> Array:
        x = self._floating(self._array(x))
        return self._out(self._float_call(np.reciprocal, x), x._dtype)

    def logical_not(self, x: Array, /) -> Array:
        x = self._array(x)
        return self._wrap(np.logical_not(x._a), self.bool)

    def bitwise_invert(self, x: Array, /) -> Array:
        x = self._array(x)
        if x._dtype.kind == "floating":
            raise TypeError("bitwise_invert needs an integer or bool array")
        return self._wrap(np.invert(x._a), x._dtype)

    def isnan(self, x: Array, /) -> Array:
        x = self._array(x)
        return self._wrap(np.isnan(x._a) if x._dtype.kind == "floating"
                          else np.zeros(x.shape, bool), self.bool)

    def isinf(self, x: Array, /) -> Array:
        x = self._array(x)
        return self._wrap(np.isinf(x._a) if x._dtype.kind == "floating"
                          else np.zeros(x.shape, bool), self.bool)

    def isfinite(self, x: Array, /) -> Array:
        x = self._array(x)
        return self._wrap(np.isfinite(x._a) if x._dtype.kind == "floating"
                          else np.ones(x.shape, bool), self.bool)

    def signbit(self, x: Array, /) -> Array:
        x = self._array(x)
        return self._wrap(np.signbit(x._a), self.bool)

    def copysign(self, x1: Array, x2: Array, /) -> Array:
        a, b, _d = self._pair(x1, x2)
        a, b = self._floating(a), self._floating(b)
        r = np.copysign(a._a, b._a)        # the magnitude kept: exact
        if not a._dtype.fmt.has_negative_zero:
            r = r + 0.0                    # fnuz formats have no -0
        return self._wrap(r, a._dtype)

    def nextafter(self, x1: Array, x2: Array, /) -> Array:
        a, b, _d = self._pair(x1, x2)
        a, b = self._floating(a), self._floating(b)
        fmt = cast(Format, a._dtype.fmt)
        from ..rounding import round as lp_round
        with np.errstate(all="ignore"):
            # The format's values are float64 values, so the least one above x is the
            # least one >= float64's nextafter(x, +inf): a round up of it (down alike).
            up = np.asarray(lp_round(np.nextafter(a._a, np.inf), fmt, "ru"))
            down = np.asarray(lp_round(np.nextafter(a._a, -np.inf), fmt, "rd"))
        r = np.where(b._a > a._a, up, np.where(b._a < a._a, down, b._a))
        r = np.where(np.isnan(a._a) | np.isnan(b._a), np.nan, r)
        return self._wrap(r, a._dtype)

    def clip(self, x: Array, /, min: Any = None, max: Any = None) -> Array:  # noqa: A002
        x = self._array(x)
        r = x
        # maximum(minimum(x, max), min), as NumPy and the draft standard: a NaN bound
        # gives NaN, and min wins where min > max; x's own values (signed zeros) kept.
        for bound, past in ((max, self.greater), (min, self.less)):
            if bound is None:
                continue
            v = self.astype(self._array(bound) if isinstance(bound, Array) else
                            self.asarray(bound, dtype=x._dtype), x._dtype)
            r = self.where(past(r, v) | self.isnan(v), v, r)
        return r if r is not x else self._wrap(x._a.copy(), x._dtype)

    def real(self, x: Array, /) -> Array:
        x = self._array(x)
        return self._wrap(x._a.copy(), x._dtype)

    def conj(self, x: Array, /) -> Array:
        return self.real(x)

    def imag(self, x: Array, /) -> Array:
        x = self._array(x)
        return self._filled(x.shape, 0, x._dtype)

    # -- statistics -------------------------------------------------------------------------
    def _reduce(self, fn, x, axis, keepdims, dtype=None, **kw):
        x = self._array(x)
        axes = _axes(axis, x.ndim)
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
                r = fn(t, axis=-1, **kw)._v
            if keepdims:
                r = np.asarray(r).reshape([1 if i in axes else n for i, n in
                                           enumerate(x.shape)])
            return self._wrap(r, d)
        return None

    def sum(self, x: Array, /, *, axis: Any = None, dtype: Any = None,
            keepdims: bool = False) -> Array:
        r = self._reduce(np.sum, x, axis, keepdims, dtype)
        if r is not None:
            return r
        x = self._array(x)
        d = self._int_acc(x._dtype) if dtype is None else self._dtype(dtype)
        return self._wrap(np.sum(x._a, axis=_axes(axis, x.ndim), keepdims=keepdims,
                                 dtype=d.storage), d)

    def _int_acc(self, d: DType) -> DType:
        return self.uint64 if d.kind == "unsigned" else self.int64

    def prod(self, x: Array, /, *, axis: Any = None, dtype: Any = None,
             keepdims: bool = False) -> Array:
        r = self._reduce(np.prod, x, axis, keepdims, dtype)
        if r is not None:
            return r
        x = self._array(x)
        d = self._int_acc(x._dtype) if dtype is None else self._dtype(dtype)
        return self._wrap(np.prod(x._a, axis=_axes(axis, x.ndim), keepdims=keepdims,
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
        axes = _axes(axis, x.ndim)
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
        (ax,) = _axes(axis, x.ndim)
        d = x._dtype
        if dtype is not None:
            d = self._dtype(dtype)
            x = self.astype(x, d, copy=False)
        elif d.kind != "floating":
            d = self._int_acc(d)
            x = self.astype(x, d, copy=False)
        if d.kind == "floating":
            r = self._float_call(lambda t: fn(t, axis=ax), x)._v if x.shape[ax] else x._a
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

    # -- utility, searching, sets, sorting --------------------------------------------------
    def all(self, x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Array:
        x = self._array(x)
        return self._wrap(np.all(x._a, axis=_axes(axis, x.ndim), keepdims=keepdims),
                          self.bool)

    def any(self, x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Array:
        x = self._array(x)
        return self._wrap(np.any(x._a, axis=_axes(axis, x.ndim), keepdims=keepdims),
                          self.bool)

    def diff(self, x: Array, /, *, axis: int = -1, n: int = 1, prepend: Any = None,
             append: Any = None) -> Array:
        x = self._array(x)
        parts = [p for p in (prepend, x, append) if p is not None]
        if len(parts) > 1:
            x = self.concat([self._array(p) for p in parts], axis=axis)
        (ax,) = _axes(axis, x.ndim)
        if x._dtype.kind == "floating":
            return self._out(self._float_call(lambda t: np.diff(t, n=n, axis=ax), x), x._dtype)
        if x._dtype.kind == "bool":
            raise TypeError("diff needs a numeric array, got bool")
        return self._wrap(np.diff(x._a, n=n, axis=ax), x._dtype)

    def argmax(self, x: Array, /, *, axis: int | None = None, keepdims: bool = False) -> Array:
        x = self._array(x)
        return self._wrap(np.argmax(x._a, axis=axis, keepdims=keepdims), self.int64)

    def argmin(self, x: Array, /, *, axis: int | None = None, keepdims: bool = False) -> Array:
        x = self._array(x)
        return self._wrap(np.argmin(x._a, axis=axis, keepdims=keepdims), self.int64)

    def count_nonzero(self, x: Array, /, *, axis: Any = None, keepdims: bool = False) -> Array:
        x = self._array(x)
        return self._wrap(np.count_nonzero(x._a, axis=_axes(axis, x.ndim),
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

    def argsort(self, x: Array, /, *, axis: int = -1, descending: bool = False,
                stable: bool = True) -> Array:
        x = self._array(x)
        (ax,) = _axes(axis, x.ndim)
        if not descending:
            return self._wrap(np.argsort(x._a, axis=ax, kind="stable"), self.int64)
        # Descending and stable: sort the reversed array, reverse, map the indices back.
        i = np.flip(np.argsort(np.flip(x._a, axis=ax), axis=ax, kind="stable"), axis=ax)
        return self._wrap(x.shape[ax] - 1 - i, self.int64)

    def sort(self, x: Array, /, *, axis: int = -1, descending: bool = False,
             stable: bool = True) -> Array:
        x = self._array(x)
        (ax,) = _axes(axis, x.ndim)
        r = np.sort(x._a, axis=ax, kind="stable")     # values moved: exact
        return self._wrap(np.flip(r, axis=ax).copy() if descending else r, x._dtype)

    # -- manipulation (values moved, never changed) -----------------------------------------
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
        (ax,) = _axes(axis, x.ndim)
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
        return self._view(x, np.flip(x._a, axis=None if axis is None else _axes(axis, x.ndim)))

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
        axes = _axes(axis, x.ndim)
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

    # -- products ---------------------------------------------------------------------------
    def _product_format(self, fmt: Format) -> Format:
        """The format the matmul model gives for ``fmt`` inputs: ``fmt`` itself for the
        models that round their sum into any format (``"exact"``, ``"fp32"``,
        ``"fp16"``: one rounding), else the model's natural output (FP32 for the
        Tensor Core models), which `matmul` then rounds into ``fmt``."""
        spec = resolve_model(self.model, "matmul")
        allowed = spec.out_formats(fmt)       # ValueError when the model refuses fmt
        if allowed is None:
            return fmt
        natural = spec.default_out_format()
        return natural if natural in allowed else allowed[0]

    def matmul(self, x1: Array, x2: Array, /) -> Array:
        a, b, d = self._pair(x1, x2)
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError("matmul needs arrays of at least one dimension")
        if d.kind != "floating":
            return self._wrap(np.matmul(a._a, b._a), d)
        va = a._a.reshape(1, -1) if a.ndim == 1 else a._a
        vb = b._a.reshape(-1, 1) if b.ndim == 1 else b._a
        if va.shape[-1] != vb.shape[-2]:
            raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not align")
        fmt = cast(Format, d.fmt)
        if va.shape[-1] == 0:
            r = np.zeros(np.broadcast_shapes(va.shape[:-2], vb.shape[:-2])
                         + (va.shape[-2], vb.shape[-1]))
        elif fmt.p > 26 and self.model == "exact":
            # FP64 (and formats past 26 bits): no exact float64 products, so NumPy's
            # float64 product (BLAS), rounded into the format; docs/array-api.md.
            r = self._round(np.matmul(va, vb), fmt)
        else:
            out = self._product_format(fmt)
            with self._ctx():
                r = _lp_matmul(Tensor(va, fmt), Tensor(vb, fmt), model=self.model,
                               out_fmt=out)._v
            if out != fmt:
                # A Tensor Core model's output (FP32) rounded once into the format with
                # the policy's mode, as a framework does.
                r = self._round(r, fmt)
        if a.ndim == 1:
            r = r[..., 0, :]
        if b.ndim == 1:
            r = r[..., 0]
        return self._wrap(np.asarray(r), d)

    def tensordot(self, x1: Array, x2: Array, /, *, axes: Any = 2) -> Array:
        a, b, _d = self._pair(x1, x2)
        if isinstance(axes, (int, np.integer)):
            if axes < 0:
                raise ValueError("axes must be non-negative")
            if axes > min(a.ndim, b.ndim):
                raise ValueError(f"tensordot: axes={axes} contracts more dimensions than x1 "
                                 f"({a.ndim}) or x2 ({b.ndim}) has")
            ax_a = tuple(range(a.ndim - axes, a.ndim))
            ax_b = tuple(range(axes))
        else:
            ax_a, ax_b = (tuple(_axes(tuple(s) if isinstance(s, (list, tuple)) else s, n))
                          for s, n in zip(axes, (a.ndim, b.ndim)))
        if [a.shape[i] for i in ax_a] != [b.shape[i] for i in ax_b]:
            raise ValueError(f"tensordot: contracted shapes of {a.shape} and {b.shape} differ")
        free_a = [i for i in range(a.ndim) if i not in ax_a]
        free_b = [i for i in range(b.ndim) if i not in ax_b]
        k = int(np.prod([a.shape[i] for i in ax_a], dtype=np.int64))
        ma = self.reshape(self.permute_dims(a, tuple(free_a) + ax_a),
                          (math.prod(a.shape[i] for i in free_a), k))
        mb = self.reshape(self.permute_dims(b, ax_b + tuple(free_b)),
                          (k, math.prod(b.shape[i] for i in free_b)))
        r = self.matmul(ma, mb)    # one product through the model
        return self.reshape(r, tuple(a.shape[i] for i in free_a)
                            + tuple(b.shape[i] for i in free_b))

    def vecdot(self, x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
        a, b, d = self._pair(x1, x2)
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError("vecdot needs arrays of at least one dimension")
        if not -min(a.ndim, b.ndim) <= axis < 0 and not 0 <= axis < min(a.ndim, b.ndim):
            raise ValueError(f"axis {axis} out of range")
        va, vb = np.moveaxis(a._a, axis, -1), np.moveaxis(b._a, axis, -1)
        if va.shape[-1] != vb.shape[-1]:
            raise ValueError(f"vecdot: shapes {a.shape} and {b.shape} differ along axis")
        va, vb = np.broadcast_arrays(va, vb)
        ra = self._wrap(va[..., None, :].copy(), d)
        rb = self._wrap(vb[..., :, None].copy(), d)
        r = self.matmul(ra, rb)    # each dot product through the model
        return self._wrap(r._a[..., 0, 0], d)

    # -- the linalg extension ---------------------------------------------------------------
    def _matrices(self, x, name="x", square=True):
        x = self._floating(self._array(x, name))
        if x.ndim < 2:
            raise ValueError(f"{name} needs at least 2 dimensions, got shape {x.shape}")
        if square and x.shape[-1] != x.shape[-2]:
            raise ValueError(f"{name} must be (a stack of) square matrices, got {x.shape}")
        return x

    def _each(self, fn, x, *rest):
        """``fn`` on each matrix of a stack (each a Tensor), results stacked."""
        fmt = cast(Format, x._dtype.fmt)
        lead = x.shape[:-2]
        outs = []
        with self._ctx():
            for i in np.ndindex(*lead):
                outs.append(fn(Tensor(x._a[i], fmt), *(r[i] for r in rest)))
        return lead, outs

    def _stacked(self, lead, outs, d, tail=()):
        if not outs:
            return self._wrap(np.zeros(lead + tail), d)
        vals = [np.asarray(o._v if isinstance(o, Tensor) else o) for o in outs]
        return self._wrap(np.stack(vals).reshape(lead + vals[0].shape), d)

    def _once(self, values: Any, d: DType) -> Array:
        """float64 results (NumPy's, of the values) rounded once into ``d``'s format."""
        return self._wrap(self._round(values, cast(Format, d.fmt)), d)

    def linalg_cholesky(self, x: Array, /, *, upper: bool = False) -> Array:
        x = self._matrices(x)
        lead, outs = self._each(_la.cholesky, x)
        r = self._stacked(lead, outs, x._dtype, x.shape[-2:])
        return self.matrix_transpose(r) if upper else r

    def linalg_det(self, x: Array, /) -> Array:
        x = self._matrices(x)
        if x.shape[-1] == 0:
            return self._filled(x.shape[:-2], 1, x._dtype)
        lead, outs = self._each(_det_or_zero, x)
        return self._stacked(lead, outs, x._dtype)

    def linalg_inv(self, x: Array, /) -> Array:
        x = self._matrices(x)
        lead, outs = self._each(_la.inv, x)
        return self._stacked(lead, outs, x._dtype, x.shape[-2:])

    def linalg_solve(self, x1: Array, x2: Array, /) -> Array:
        a, b, _d = self._pair(x1, x2)
        a = self._matrices(a, "x1")
        b = self._floating(b)
        vector = b.ndim == 1
        vb = b._a[:, None] if vector else b._a
        if vb.shape[-2] != a.shape[-1]:
            raise ValueError(f"solve: x2 of shape {b.shape} does not match x1 {a.shape}")
        lead = np.broadcast_shapes(a.shape[:-2], vb.shape[:-2])
        va = np.broadcast_to(a._a, lead + a.shape[-2:])
        vb = np.broadcast_to(vb, lead + vb.shape[-2:])
        fmt = cast(Format, a._dtype.fmt)
        outs = []
        with self._ctx():
            for i in np.ndindex(*lead):
                outs.append(_la.solve(Tensor(np.ascontiguousarray(va[i]), fmt),
                                      Tensor(np.ascontiguousarray(vb[i]), fmt))._v)
        r = np.stack(outs).reshape(lead + vb.shape[-2:]) if outs else np.zeros(lead +
                                                                             vb.shape[-2:])
        return self._wrap(r[..., 0] if vector else r, a._dtype)

    def linalg_qr(self, x: Array, /, *, mode: str = "reduced") -> Any:
        x = self._matrices(x, square=False)
        if mode not in ("reduced", "complete"):
            raise ValueError(f"mode must be 'reduced' or 'complete', got {mode!r}")
        m, n = x.shape[-2:]
        if (mode == "complete" and m > n) or m < n:
            # Householder QR of lowprec.linalg is reduced and needs m >= n: the rest is
            # NumPy's float64 QR, rounded once.
            q, r = np.linalg.qr(x._a, mode=cast(Any, mode))
            return QRResult(self._once(q, x._dtype), self._once(r, x._dtype))
        lead, outs = self._each(_la.qr, x)
        return QRResult(self._stacked(lead, [o[0] for o in outs], x._dtype, (m, n)),
                        self._stacked(lead, [o[1] for o in outs], x._dtype, (n, n)))

    def linalg_slogdet(self, x: Array, /) -> Any:
        x = self._matrices(x)
        if x.shape[-1] == 0:
            return SlogdetResult(self._filled(x.shape[:-2], 1, x._dtype),
                                 self._filled(x.shape[:-2], 0, x._dtype))
        # lowprec.linalg.slogdet: the fsum of log|u_ii| rounded once (no overflow of det)
        lead, outs = self._each(_la.slogdet, x)
        return SlogdetResult(self._stacked(lead, [o[0] for o in outs], x._dtype),
                             self._stacked(lead, [o[1] for o in outs], x._dtype))

    def linalg_eigh(self, x: Array, /) -> Any:
        x = self._matrices(x)
        w, v = np.linalg.eigh(x._a)
        return EighResult(self._once(w, x._dtype), self._once(v, x._dtype))

    def linalg_eigvalsh(self, x: Array, /) -> Array:
        x = self._matrices(x)
        return self._once(np.linalg.eigvalsh(x._a), x._dtype)

    def linalg_svd(self, x: Array, /, *, full_matrices: bool = True) -> Any:
        x = self._matrices(x, square=False)
        u, s, vh = np.linalg.svd(x._a, full_matrices=full_matrices)
        return SVDResult(self._once(u, x._dtype), self._once(s, x._dtype),
                         self._once(vh, x._dtype))

    def linalg_svdvals(self, x: Array, /) -> Array:
        x = self._matrices(x, square=False)
        return self._once(np.linalg.svd(x._a, compute_uv=False), x._dtype)

    def linalg_pinv(self, x: Array, /, *, rtol: Any = None) -> Array:
        x = self._matrices(x, square=False)
        if rtol is None:
            rtol = max(x.shape[-2:]) * float(x._dtype.fmt.eps)
        rtol = rtol._a if isinstance(rtol, Array) else rtol
        return self._once(np.linalg.pinv(x._a, rtol=rtol), x._dtype)

    def linalg_matrix_rank(self, x: Array, /, *, rtol: Any = None) -> Array:
        x = self._matrices(x, square=False)
        s = np.linalg.svd(x._a, compute_uv=False)
        if rtol is None:
            rtol = max(x.shape[-2:]) * float(x._dtype.fmt.eps)
        rtol = rtol._a if isinstance(rtol, Array) else np.asarray(rtol)
        tol = s.max(axis=-1, initial=0.0) * rtol
        return self._wrap(np.count_nonzero(s > np.asarray(tol)[..., None], axis=-1),
                          self.int64)

    def linalg_matrix_power(self, x: Array, n: int, /) -> Array:
        x = self._matrices(x)
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            raise TypeError(f"n must be an int, got {type(n).__name__}")
        if n == 0:
            return self._wrap(np.broadcast_to(np.eye(x.shape[-1]), x.shape).copy(), x._dtype)
        # lowprec.linalg.matrix_power's order (binary powering), each product `matmul`
        a, m = (self.linalg_inv(x), -int(n)) if n < 0 else (x, int(n))
        if m == 1:
            return self._wrap(a._a.copy(), a._dtype)
        if m in (2, 3):
            sq = self.matmul(a, a)
            return sq if m == 2 else self.matmul(sq, a)
        z: Array | None = None
        result: Array | None = None
        while m > 0:
            z = a if z is None else self.matmul(z, z)
            m, bit = divmod(m, 2)
            if bit:
                result = z if result is None else self.matmul(result, z)
        return cast(Array, result)

    def linalg_matrix_norm(self, x: Array, /, *, keepdims: bool = False,
                           ord: Any = "fro") -> Array:  # noqa: A002
        x = self._matrices(x, square=False)
        if ord in ("fro", 1, -1, math.inf, -math.inf):
            lead, outs = self._each(lambda t: _la.norm(t, ord), x)
            r = self._stacked(lead, outs, x._dtype)
        elif ord in ("nuc", 2, -2):
            s = np.linalg.svd(x._a, compute_uv=False)
            v = s.sum(axis=-1) if ord == "nuc" else (s.max(axis=-1) if ord == 2
                                                     else s.min(axis=-1))
            r = self._once(v, x._dtype)
        else:
            raise ValueError(f"ord {ord!r} is not a matrix norm")
        return self.reshape(r, r.shape + (1, 1)) if keepdims else r

    def linalg_vector_norm(self, x: Array, /, *, axis: Any = None, keepdims: bool = False,
                           ord: Any = 2) -> Array:  # noqa: A002
        x = self._floating(self._array(x))
        axes = _axes(axis, x.ndim)
        rest = [i for i in range(x.ndim) if i not in axes]
        moved = np.transpose(x._a, rest + list(axes))
        flat: np.ndarray = moved.reshape(tuple(x.shape[i] for i in rest)
                                         + (math.prod(x.shape[i] for i in axes),))
        fmt = cast(Format, x._dtype.fmt)
        if ord in (2, 1, math.inf, -math.inf):
            t = Tensor(np.ascontiguousarray(flat), fmt)
            with self._ctx():
                if flat.shape[-1]:
                    r = _la.norm(t, ord, axis=-1)._v
                else:                     # the empty norm: 0 (inf for ord=-inf, NumPy's min)
                    r = np.full(flat.shape[:-1], np.inf if ord == -math.inf else 0.0)
        elif ord == 0:
            r = self._round(np.count_nonzero(flat, axis=-1).astype(np.float64), fmt)
        else:
            r = self._round(np.linalg.norm(flat, ord=ord, axis=-1), fmt)   # rounded once
        r = np.asarray(r)
        if keepdims:
            shape = [1 if i in axes else s for i, s in enumerate(x.shape)]
            r = r.reshape(shape)
        return self._wrap(r, x._dtype)

    def linalg_cross(self, x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
        a, b, d = self._pair(x1, x2)
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError("cross needs arrays of at least one dimension")
        _axes(axis, a.ndim), _axes(axis, b.ndim)      # AxisError naming a bad axis
        if a.shape[axis] != 3 or b.shape[axis] != 3:
            raise ValueError("cross needs vectors of 3 elements along axis")
        va, vb = np.moveaxis(a._a, axis, -1), np.moveaxis(b._a, axis, -1)
        w = lambda v: self._wrap(v, d)  # noqa: E731

        def c(i, j):   # a_i b_j - a_j b_i: two rounded products, one rounded difference
            return self.subtract(self.multiply(w(va[..., i]), w(vb[..., j])),
                                 self.multiply(w(va[..., j]), w(vb[..., i])))
        r = np.stack([c(1, 2)._a, c(2, 0)._a, c(0, 1)._a], axis=-1)
        return self._wrap(np.moveaxis(r, -1, axis), d)

    def linalg_diagonal(self, x: Array, /, *, offset: int = 0) -> Array:
        x = self._array(x)
        return self._wrap(np.diagonal(x._a, offset, -2, -1).copy(), x._dtype)

    def linalg_trace(self, x: Array, /, *, offset: int = 0, dtype: Any = None) -> Array:
        return self.sum(self.linalg_diagonal(x, offset=offset), axis=-1, dtype=dtype)

    def linalg_outer(self, x1: Array, x2: Array, /) -> Array:
        a, b, _d = self._pair(x1, x2)
        if a.ndim != 1 or b.ndim != 1:
            raise ValueError("outer needs two 1-D arrays")
        return self.multiply(self.reshape(a, (-1, 1)), self.reshape(b, (1, -1)))

    def linalg_matmul(self, x1: Array, x2: Array, /) -> Array:
        return self.matmul(x1, x2)

    def linalg_matrix_transpose(self, x: Array, /) -> Array:
        return self.matrix_transpose(x)

    def linalg_tensordot(self, x1: Array, x2: Array, /, *, axes: Any = 2) -> Array:
        return self.tensordot(x1, x2, axes=axes)

    def linalg_vecdot(self, x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
        return self.vecdot(x1, x2, axis=axis)


def _det_or_zero(t: Tensor) -> Tensor:
    """det, with a matrix that is singular in the format giving 0 (as NumPy's det)."""
    try:
        return _la.det(t)
    except np.linalg.LinAlgError:
        return Tensor(np.asarray(0.0), t.fmt)


def _install() -> None:
    """The table-driven elementwise functions, as methods with the standard's names."""
    def unary(kind, ufunc):
        def fn(self: Namespace, x: Array, /) -> Array:
            return getattr(self, f"_{kind}")(ufunc, x)
        return fn

    def binary(kind, ufunc):
        def fn(self: Namespace, x1: Array | bool | int | float,
               x2: Array | bool | int | float, /) -> Array:
            return getattr(self, f"_{kind}")(ufunc, x1, x2)
        return fn

    def make(kind, name, ufunc):
        fn = (unary if kind in ("unary_float", "unary_numeric", "rounding") else
              binary)(kind, ufunc)
        fn.__name__ = fn.__qualname__ = name
        fn.__doc__ = f"The array API's ``{name}`` (NumPy's ``{ufunc.__name__}``)."
        setattr(Namespace, name, fn)

    for kind, table in (("unary_float", _FLOAT_UNARY), ("binary_float", _FLOAT_BINARY),
                        ("unary_numeric", _NUMERIC_UNARY),
                        ("binary_numeric", _NUMERIC_BINARY), ("rounding", _ROUNDING),
                        ("compare", _COMPARE), ("logical", _LOGICAL), ("bitwise", _BITWISE),
                        ("once_binary", _ONCE_BINARY)):
        for name, np_name in table.items():
            make(kind, name, getattr(np, np_name))


_install()
