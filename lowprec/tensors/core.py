"""`Tensor`: an n-dimensional array of values of one format, emulated or refused.

A `Tensor` holds a float64 ndarray whose every element is a value of its
`Format`. Operations unwrap, call a kernel (`rounding`, `arith`, `matmul`) and
rewrap; they never compute in float64 and hand back a plain array. NumPy calls
reach it through ``__array_ufunc__`` and ``__array_function__``, each with one
table of what is handled; everything else raises `TypeError` naming the call.
Defaults (rounding mode, rng, matmul model, subnormals, saturation) come from
`context`, a ``contextvars`` context: this is the only module that reads it.
"""

from __future__ import annotations

import contextlib
import inspect
import operator
from collections.abc import Callable, Collection, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, NoReturn, cast, overload

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

from .. import arith, bits
from ..engine.checks import check_bool, check_mode, check_rng
from ..formats import (
    BF16,
    FP4_E2M1,
    FP6_E2M3,
    FP6_E3M2,
    FP8_E4M3,
    FP8_E4M3FNUZ,
    FP8_E5M2,
    FP8_E5M2FNUZ,
    FP16,
    FP32,
    FP64,
    TF32,
    Format,
    FormatLike,
)
from ..formats import format as _format
from ..rounding import round as _round
from ..tensorcore import MODELS as _MODELS
from ..tensorcore import Model, resolve_model
from ..tensorcore import matmul as _matmul_kernel

__all__ = ["Tensor", "tensor", "context", "get_context", "result_format", "matmul",
           "HANDLED_UFUNCS", "HANDLED_FUNCTIONS"]


# -- context ------------------------------------------------------------------------

@dataclass(frozen=True)
class _Context:
    mode: str = "rne"
    rng: np.random.Generator | None = None
    matmul: str | Model = "fp32"
    subnormals: bool | None = None
    saturate: bool = False

    def kwargs(self):
        return dict(rng=self.rng, subnormals=self.subnormals, saturate=self.saturate)


_CONTEXT: ContextVar[_Context] = ContextVar("lowprec_context", default=_Context())


def _check_model(model, name="matmul"):
    """``model`` itself, once matmul's own check accepts it (a `MODELS` name in any case,
    a `MODELS` value or copy of one, a `TensorCoreModel`); the error names ``name``."""
    try:
        resolve_model(model)
    except TypeError as exc:
        raise TypeError(str(exc).replace("model must", f"{name} must", 1)) from None
    return model


def get_context() -> _Context:
    """The active defaults (mode, rng, matmul, subnormals, saturate)."""
    return _CONTEXT.get()


@contextlib.contextmanager
def context(*, mode: str | None = None, rng: np.random.Generator | int | None = None,
            matmul: str | Model | None = None, subnormals: bool | None = None,
            saturate: bool | None = None) -> Iterator[_Context]:
    """Set Tensor defaults for a block: ``with lp.context(mode="sr", rng=0):``.

    Unset fields keep the enclosing values; on exit the enclosing context is
    restored. Built on ``contextvars``, so threads and asyncio tasks each see
    their own. An int ``rng`` seeds one generator for the whole block.

    Parameters
    ----------
    mode : str, optional
        Rounding mode (one of `lowprec.MODES`).
    rng : numpy.random.Generator or int, optional
        Generator (or non-negative int seed) for ``mode="sr"``.
    matmul : str or TensorCoreModel, optional
        A model name of `lowprec.MODELS`, one of its values, or a `TensorCoreModel`.
    subnormals, saturate : bool, optional
        Passed to every rounding (see `lowprec.round`).

    A wrong-typed option raises `TypeError` naming it (``subnormals="no"`` is not
    False); a value of the right type that is not allowed raises `ValueError`.

    Examples
    --------
    >>> import lowprec as lp
    >>> x = lp.tensor([1.0, 2.0], "bf16")
    >>> with lp.context(mode="ru"):
    ...     print((x + 2**-9).values)
    [1.0078125 2.015625 ]
    >>> (x + 2**-9).values
    array([1., 2.])
    >>> with lp.context(saturate="no"):
    ...     pass
    Traceback (most recent call last):
    ...
    TypeError: saturate must be a bool, got str 'no'
    """
    current = _CONTEXT.get()
    changes: dict[str, Any] = {}
    # Every option is type-checked: "no" is truthy and 0 is falsy, so a loose check
    # would silently turn a wrong-typed option into a different setting.
    if mode is not None:
        changes["mode"] = check_mode(mode)
    if rng is not None:
        check_rng(rng)
        changes["rng"] = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    if matmul is not None:
        changes["matmul"] = _check_model(matmul)
    if subnormals is not None:
        changes["subnormals"] = check_bool("subnormals", subnormals)
    if saturate is not None:
        changes["saturate"] = check_bool("saturate", saturate)
    token = _CONTEXT.set(replace(current, **changes))
    try:
        yield _CONTEXT.get()
    finally:
        _CONTEXT.reset(token)


# -- promotion ------------------------------------------------------------------------

#: Storage formats results may be promoted to, smallest first (TF32 is a compute
#: mode, not a storage type: FP16 with BF16 gives FP32, as in PyTorch).
_LADDER = (FP4_E2M1, FP6_E2M3, FP6_E3M2, FP8_E4M3, FP8_E5M2, FP8_E4M3FNUZ, FP8_E5M2FNUZ,
           FP16, BF16, FP32, FP64)


def _holds(big, small):
    """Whether every value of ``small`` (inf and NaN included) is a value of ``big``."""
    reach = lambda f: f.emin - (f.mantissa_bits if f.subnormals else 0)  # noqa: E731
    return (big.p >= small.p and big.max >= small.max and reach(big) <= reach(small)
            and (big.has_inf or not small.has_inf) and (big.has_nan or not small.has_nan)
            and (big.has_negative_zero or not small.has_negative_zero))


def result_format(a: FormatLike, b: FormatLike) -> Format:
    """The format of a result from operands of formats ``a`` and ``b``.

    Same format: that format. Otherwise the smallest storage format (see the
    table in the docs) that holds every value of both exactly.

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.result_format("fp16", "bf16"), lp.result_format("e4m3", "fp16")
    (lp.FP32, lp.FP16)
    >>> lp.result_format("e4m3", "e5m2")
    lp.FP16
    """
    a, b = _format(a), _format(b)
    if a == b:
        return a
    found = PROMOTION.get((a, b))
    if found is not None:
        return found
    for fmt in _LADDER:
        if _holds(fmt, a) and _holds(fmt, b):
            return fmt
    raise TypeError(f"no format holds both {a!r} and {b!r} exactly; convert one "
                    "explicitly with .astype()")


#: The explicit promotion table for pairs of named formats (symmetric).
PROMOTION = {(a, b): next(f for f in _LADDER if _holds(f, a) and _holds(f, b))
             for a in (*_LADDER, TF32) for b in (*_LADDER, TF32) if a != b}


# -- the Tensor -------------------------------------------------------------------------

def _fmt_name(fmt):
    return str(fmt)   # the name, or one line of parameters for an unnamed format


def _values_of(x):
    return x._v if isinstance(x, Tensor) else x


def _is_real(x):
    """Whether ``x`` is a Tensor or plain real numbers (bool, int, float, ml_dtypes)."""
    if isinstance(x, (Tensor, bool, int, float, np.bool_, np.integer, np.floating)):
        return True
    try:
        dtype = np.asarray(x).dtype
    except Exception:   # noqa: BLE001 - whatever NumPy cannot make an array of
        return False
    return dtype.kind in "biuf" or (dtype.kind == "V" and getattr(
        dtype.type, "__module__", "").startswith("ml_dtypes"))


def _comparison_operator(op, ufunc):
    """``t == x``, ``t < x``, ...: a plain ``x`` that is not real numbers gets NumPy's
    answer for a float array and ``x`` (``==`` and ``!=`` give all-False/all-True for
    ``"abc"`` or None; ordering raises `TypeError`)."""
    def method(self, other):
        if not _is_real(other):
            return op(self.values, other)
        return ufunc(self, other)
    method.__name__ = f"__{op.__name__}__"
    return method


class Tensor:
    """An n-dimensional array of values of one `Format`; every operation is
    emulated in that format, or refused.

    Make one with `lowprec.tensor`. ``values`` is a read-only float64 view,
    ``bits`` the encoded patterns, ``fmt`` the format.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> x = lp.tensor([0.1, 0.2, 0.3], "bf16")
    >>> x
    Tensor([0.10009765625, 0.2001953125, 0.30078125], fmt=BF16)
    >>> (x + x).values, x.bits
    (array([0.20019531, 0.40039062, 0.6015625 ]), array([15821, 15949, 16026], dtype=uint16))
    >>> np.exp(x).fmt, (x > 0.15).tolist()
    (lp.BF16, [False, True, True])
    >>> np.fft.fft(x)
    Traceback (most recent call last):
    ...
    TypeError: lowprec.Tensor does not support numpy.fft.fft: it cannot be emulated in BF16
    (convert with np.asarray(t) to leave the emulation)
    """

    __slots__ = ("_v", "_fmt")
    __array_priority__ = 100

    def __init__(self, values: NDArray[np.float64], fmt: Format) -> None:
        # Internal: ``values`` must already be values of ``fmt`` (use lp.tensor).
        self._v = values
        self._fmt = fmt

    # -- attributes ---------------------------------------------------------------
    @property
    def fmt(self) -> Format:
        return self._fmt

    @property
    def dtype(self) -> Format:
        """The format (the Tensor's dtype, as ``torch.Tensor.dtype`` is)."""
        return self._fmt

    @property
    def shape(self) -> tuple[int, ...]:
        return self._v.shape

    @property
    def ndim(self) -> int:
        return self._v.ndim

    @property
    def size(self) -> int:
        return self._v.size

    @property
    def T(self) -> Tensor:
        return Tensor(self._v.T, self._fmt)

    @property
    def values(self) -> NDArray[np.float64]:
        """The values as a read-only float64 ndarray (a view)."""
        v = self._v.view()
        v.flags.writeable = False
        return v

    @property
    def bits(self) -> NDArray[np.unsignedinteger[Any]] | np.unsignedinteger[Any]:
        """The bit patterns (see `lowprec.encode`)."""
        return bits.encode(self._v, self._fmt)

    def astype(self, fmt: FormatLike, mode: str | None = None, *,
               rng: np.random.Generator | int | None = None) -> Tensor:
        """Convert to another format: one rounding (context mode and rng by default)."""
        fmt = _format(fmt)
        return Tensor(np.asarray(_round_ctx(self._v, fmt, mode, rng)), fmt)

    def to_numpy(self, dtype: np.dtype[Any] | type[Any] | str = np.float64) -> NDArray[Any]:
        """A NumPy array of ``dtype`` (float16/32/64, or an ml_dtypes type):
        exact when ``dtype`` holds the format, else one rounding (context mode)."""
        target = _format(dtype)
        v = self._v if _holds(target, self._fmt) else _round_ctx(self._v, target, None)
        with np.errstate(over="ignore", invalid="ignore"):
            return np.asarray(v).astype(dtype)

    def __array__(self, dtype: DTypeLike | None = None, copy: bool | None = None) -> NDArray[Any]:
        if copy is False:
            raise ValueError("a Tensor cannot be viewed as a plain array without a copy")
        v = self._v.copy()
        return v if dtype is None else v.astype(dtype)

    def __repr__(self) -> str:
        body = np.array2string(self._v, separator=", ", threshold=20, prefix="Tensor(",
                               formatter={"float_kind": lambda v: repr(float(v))})
        return f"Tensor({body}, fmt={_fmt_name(self._fmt)})"

    def __str__(self) -> str:
        return f"{np.array2string(self._v, threshold=20)} ({_fmt_name(self._fmt)})"

    # -- container protocol -------------------------------------------------------
    def __len__(self) -> int:
        return len(self._v)

    def __iter__(self) -> Iterator[Tensor]:
        for v in self._v:
            yield Tensor(v if isinstance(v, np.ndarray) else np.asarray(v), self._fmt)

    def __getitem__(self, key: Any) -> Tensor:
        key = _values_of(key) if isinstance(key, Tensor) else key
        v = self._v[key]
        return Tensor(v if isinstance(v, np.ndarray) else np.asarray(v), self._fmt)

    def __setitem__(self, key: Any, value: ArrayLike | Tensor) -> None:
        value = value.astype(self._fmt)._v if isinstance(value, Tensor) else \
            _round_ctx(value, self._fmt, None)
        self._v[key] = value

    def __float__(self) -> float:
        return float(self._v)

    def __int__(self) -> int:
        return int(self._v)

    def __bool__(self) -> bool:
        return bool(self._v)

    def __index__(self) -> NoReturn:
        raise TypeError("a Tensor of floats cannot be used as an index")

    __hash__ = None  # type: ignore[assignment]  # unhashable, as a NumPy array

    # -- methods that mirror NumPy's -----------------------------------------------
    def reshape(self, *shape: Any, **kwargs: Any) -> Tensor:
        return Tensor(self._v.reshape(*shape, **kwargs), self._fmt)

    def transpose(self, *axes: Any) -> Tensor:
        return Tensor(self._v.transpose(*axes), self._fmt)

    def ravel(self) -> Tensor:
        return Tensor(self._v.ravel(), self._fmt)

    def flatten(self) -> Tensor:
        return Tensor(self._v.flatten(), self._fmt)

    def copy(self) -> Tensor:
        return Tensor(self._v.copy(), self._fmt)

    def tolist(self) -> Any:
        """The values as nested lists of Python floats (a float for a 0-d Tensor),
        as ``ndarray.tolist``.

        Examples
        --------
        >>> import lowprec as lp
        >>> lp.tensor([[0.1, 2.0]], "bf16").tolist()
        [[0.10009765625, 2.0]]
        """
        return self._v.tolist()

    def item(self, *args: int) -> float:
        """One value as a Python float, as ``ndarray.item``: no argument for a Tensor
        of one element, else a flat index or one index per dimension.

        Examples
        --------
        >>> import lowprec as lp
        >>> lp.tensor(0.1, "fp16").item()
        0.0999755859375
        >>> lp.tensor([[1.0, 0.1]], "bf16").item(0, 1), lp.tensor([1.0, 0.1], "bf16").item(1)
        (0.10009765625, 0.10009765625)
        """
        return self._v.item(*args)

    def numpy(self) -> NDArray[np.float64]:
        """The values as a new, writable float64 ndarray (a copy: unlike
        ``torch.Tensor.numpy`` nothing is shared, so writing to it cannot put a value
        outside the format into the Tensor). Same as ``np.asarray(t)``.

        Examples
        --------
        >>> import lowprec as lp
        >>> t = lp.tensor([0.1, 3.0], "e4m3")
        >>> a = t.numpy()
        >>> a[0] = 0.1
        >>> a, t.values
        (array([0.1, 3. ]), array([0.1015625, 3.       ]))
        """
        return self._v.copy()

    def sum(self, axis: int | tuple[int, ...] | None = None, *, acc: FormatLike | None = None,
            order: str = "pairwise", keepdims: bool = False) -> Tensor:
        return _sum(self, axis=axis, acc=acc, order=order, keepdims=keepdims)

    def mean(self, axis: int | tuple[int, ...] | None = None, *, acc: FormatLike | None = None,
             order: str = "pairwise", keepdims: bool = False) -> Tensor:
        return _mean(self, axis=axis, acc=acc, order=order, keepdims=keepdims)

    def max(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Tensor:
        return Tensor(np.max(self._v, axis=axis, keepdims=keepdims), self._fmt)

    def min(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Tensor:
        return Tensor(np.min(self._v, axis=axis, keepdims=keepdims), self._fmt)

    def argmax(self, axis: int | None = None) -> NDArray[np.intp] | np.intp:
        return np.argmax(self._v, axis=axis)

    def argmin(self, axis: int | None = None) -> NDArray[np.intp] | np.intp:
        return np.argmin(self._v, axis=axis)

    # -- NumPy protocols --------------------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        name = ufunc.__name__
        if method != "__call__":
            raise TypeError(f"lowprec.Tensor does not support numpy.{name}.{method}: "
                            "use the Tensor's sum/max/min methods or lp.sum")
        if kwargs.get("out") is not None:
            raise TypeError(f"lowprec.Tensor does not support out= (numpy.{name}): "
                            "results are new Tensors")
        extra = set(kwargs) - {"out"}
        if extra:
            raise TypeError(f"lowprec.Tensor does not support numpy.{name} with "
                            f"{', '.join(sorted(extra))}=")
        handler = HANDLED_UFUNCS.get(name)
        if handler is None:
            raise TypeError(f"lowprec.Tensor does not support numpy.{name}: it cannot "
                            "be emulated (convert with np.asarray(t) to leave the emulation)")
        return handler(*inputs)

    def __array_function__(self, func: Callable[..., Any], types: Collection[type],
                           args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        handler = HANDLED_FUNCTIONS.get(func)
        if handler is None:
            mod = func.__module__.replace("numpy._core", "numpy").replace(".fromnumeric", "")
            raise TypeError(f"lowprec.Tensor does not support {mod}.{func.__name__}: it "
                            f"cannot be emulated in {_fmt_name(self._fmt)} "
                            "(convert with np.asarray(t) to leave the emulation)")
        return handler(*args, **kwargs)

    # -- operators ------------------------------------------------------------------
    # (NumPy hands a Tensor operand to __array_ufunc__, which returns a Tensor; NumPy's
    # stubs say ndarray, hence the casts.)
    def __add__(self, other: ArrayLike | Tensor) -> Tensor:
        return cast(Tensor, np.add(self, other))

    def __radd__(self, other: ArrayLike | Tensor) -> Tensor:
        return cast(Tensor, np.add(other, self))

    def __sub__(self, other: ArrayLike | Tensor) -> Tensor:
        return cast(Tensor, np.subtract(self, other))

    def __rsub__(self, other: ArrayLike | Tensor) -> Tensor:
        return cast(Tensor, np.subtract(other, self))

    def __mul__(self, other: ArrayLike | Tensor) -> Tensor:
        return cast(Tensor, np.multiply(self, other))

    def __rmul__(self, other: ArrayLike | Tensor) -> Tensor:
        return cast(Tensor, np.multiply(other, self))

    def __truediv__(self, other: ArrayLike | Tensor) -> Tensor:
        return cast(Tensor, np.true_divide(self, other))

    def __rtruediv__(self, other: ArrayLike | Tensor) -> Tensor:
        return cast(Tensor, np.true_divide(other, self))

    def __pow__(self, other: ArrayLike | Tensor) -> Tensor:
        return cast(Tensor, np.power(self, other))

    def __matmul__(self, other: ArrayLike | Tensor) -> Tensor:
        return matmul(self, other)

    def __rmatmul__(self, other: ArrayLike | Tensor) -> Tensor:
        return matmul(other, self)

    def __neg__(self) -> Tensor:
        return cast(Tensor, np.negative(self))

    def __pos__(self) -> Tensor:
        return cast(Tensor, np.positive(self))

    def __rpow__(self, other: ArrayLike | Tensor) -> Tensor:
        return cast(Tensor, np.power(other, self))

    def __abs__(self) -> Tensor:
        return cast(Tensor, np.absolute(self))

    __eq__ = _comparison_operator(operator.eq, np.equal)
    __ne__ = _comparison_operator(operator.ne, np.not_equal)
    __lt__ = _comparison_operator(operator.lt, np.less)
    __le__ = _comparison_operator(operator.le, np.less_equal)
    __gt__ = _comparison_operator(operator.gt, np.greater)
    __ge__ = _comparison_operator(operator.ge, np.greater_equal)


def _format_of_dtype(x):
    """The format a plain array's dtype names: float16, float32 and the ml_dtypes
    floats lowprec knows. None for float64 (NumPy's default for any data, so not a
    choice of FP64), ints, bools, unknown dtypes, lists and Python scalars."""
    if not isinstance(x, (np.ndarray, np.generic)) or x.dtype == np.float64:
        return None
    kind = x.dtype.kind
    if kind == "f" or (kind == "V" and getattr(x.dtype.type, "__module__", "")
                       .startswith("ml_dtypes")):
        try:
            return _format(x.dtype)
        except ValueError:
            return None   # float8_e8m0fnu, int4, longdouble, ...: no format of ours
    return None


def tensor(data: ArrayLike | Tensor, fmt: FormatLike | None = None, mode: str | None = None,
           *, rng: np.random.Generator | int | None = None) -> Tensor:
    """Make a `Tensor`: round ``data`` into ``fmt`` (once, by ``mode``).

    ``fmt`` defaults to the format of a Tensor ``data``, or to the one the dtype of
    a NumPy array or scalar names (``np.float16`` is FP16, ``np.float32`` FP32,
    ``ml_dtypes.bfloat16`` BF16, ``ml_dtypes.float8_e4m3fn`` FP8_E4M3, ...). float64,
    integer and list data name no format: pass ``fmt`` (`TypeError` otherwise).
    ``mode`` and ``rng`` default to the active `context`.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> lp.tensor([[1.0, 1e-8], [70000.0, 3.14159]], "fp16")
    Tensor([[1.0, 0.0],
            [inf, 3.140625]], fmt=FP16)
    >>> lp.tensor(0.1, "e4m3").values
    array(0.1015625)
    >>> lp.tensor(np.array([0.1, 2.0], dtype=np.float16))
    Tensor([0.0999755859375, 2.0], fmt=FP16)
    >>> lp.tensor(np.array([0.1, 2.0]))
    Traceback (most recent call last):
    ...
    TypeError: lp.tensor needs a format for float64 data: pass fmt, e.g. ...
    """
    if fmt is None:
        if isinstance(data, Tensor):
            fmt = data.fmt
        else:
            fmt = _format_of_dtype(data)
            if fmt is None:
                what = (f"{data.dtype} data" if isinstance(data, (np.ndarray, np.generic))
                        else "plain data")
                raise TypeError(f"lp.tensor needs a format for {what}: pass fmt, e.g. "
                                "lp.tensor(x, 'bf16') (float16, float32 and ml_dtypes "
                                "arrays name their own)")
    fmt = _format(fmt)
    if isinstance(data, Tensor):
        return data.astype(fmt, mode, rng=rng)
    return Tensor(np.asarray(_round_ctx(data, fmt, mode, rng)), fmt)


def _round_ctx(x, fmt, mode, rng=None):
    """``round(x, fmt)`` with the context's mode and rng where ``mode``/``rng`` are None."""
    ctx = _CONTEXT.get()
    kw = ctx.kwargs()
    if rng is not None:
        kw["rng"] = rng
    # ``mode is None``, not ``not mode``: mode="" or 0 is an error (rounding's own
    # checks of mode and rng raise it), not the default.
    return _round(x, fmt, ctx.mode if mode is None else mode, **kw)


# -- operands -----------------------------------------------------------------------

def _common_format(xs):
    """The result format of the Tensor operands among ``xs`` (promoted pairwise)."""
    fmts = [x._fmt for x in xs if isinstance(x, Tensor)]
    fmt = fmts[0]
    for f in fmts[1:]:
        fmt = result_format(fmt, f)
    return fmt


def _operands(*xs):
    """Values of the operands in their common result format, and that format.

    Tensors fix the format (promoted pairwise); Python scalars and plain arrays
    take it, rounded in (context mode)."""
    fmt = _common_format(xs)
    # Promotion is exact: the result format holds every Tensor operand's values.
    return [x._v if isinstance(x, Tensor) else _round_ctx(x, fmt, None) for x in xs], fmt


def _kernel(fn):
    def handler(*inputs):
        vals, fmt = _operands(*inputs)
        ctx = _CONTEXT.get()
        return Tensor(np.asarray(fn(*vals, fmt, ctx.mode, **ctx.kwargs())), fmt)
    return handler


def _exact_unary(fn):
    def handler(x):
        (v,), fmt = _operands(x)
        r = fn(v)
        if not fmt.has_negative_zero:
            r = r + 0.0  # fnuz formats have no -0
        return Tensor(r, fmt)
    return handler


def _rounded_once(fn):
    """Evaluate in float64 and round once (transcendental functions)."""
    def handler(*inputs):
        vals, fmt = _operands(*inputs)
        with np.errstate(all="ignore"):
            r = fn(*vals)
        return Tensor(np.asarray(_round_ctx(r, fmt, None)), fmt)
    return handler


def _exact_operands(*xs):
    """Values as they are (no rounding of plain operands) and the result format."""
    return [np.asarray(_values_of(x), dtype=np.float64) for x in xs], _common_format(xs)


def _compare(fn):
    """Comparisons are exact: plain operands are compared as given. With an operand
    that is not real numbers (None, a str, a Fraction, ...) the answer is NumPy's for
    the float64 values, which hold the Tensor's exactly: ``np.less(t, None)`` raises
    `TypeError` as it does for a float array."""
    def handler(a, b):
        if not (_is_real(a) and _is_real(b)):
            return fn(_values_of(a), _values_of(b))
        (va, vb), _ = _exact_operands(a, b)
        return fn(va, vb)
    return handler


def _select(fn):
    """Selections (maximum, clip, ...) on exact operands; a plain value that gets
    selected is rounded into the format once (Tensor values are already in it)."""
    def handler(*inputs):
        vals, fmt = _exact_operands(*inputs)
        return Tensor(np.asarray(_round_ctx(fn(*vals), fmt, None)), fmt)
    return handler


def _predicate(fn):
    def handler(x):
        return fn(_values_of(x))
    return handler


def _power(a, b):
    if isinstance(b, Tensor) or not np.isscalar(b):
        return _rounded_once(np.power)(a, b)
    if b == 2:
        return _kernel(arith.mul)(a, a)
    if b == 1:
        return _exact_unary(np.positive)(a)
    if b == 0.5:
        return _kernel(arith.sqrt)(a)
    if b == -1:
        return _kernel(arith.div)(1.0, a)
    return _rounded_once(np.power)(a, b)


def _square(x):
    return _kernel(arith.mul)(x, x)


HANDLED_UFUNCS = {
    "add": _kernel(arith.add), "subtract": _kernel(arith.sub),
    "multiply": _kernel(arith.mul), "divide": _kernel(arith.div),
    "sqrt": _kernel(arith.sqrt), "square": _square, "power": _power,
    "negative": _exact_unary(np.negative), "positive": _exact_unary(np.positive),
    "absolute": _exact_unary(np.absolute), "fabs": _exact_unary(np.absolute),
    "sign": _exact_unary(np.sign), "floor": _exact_unary(np.floor),
    "ceil": _exact_unary(np.ceil), "trunc": _exact_unary(np.trunc),
    "rint": _exact_unary(np.rint),
    "maximum": _select(np.maximum), "minimum": _select(np.minimum),
    "fmax": _select(np.fmax), "fmin": _select(np.fmin),
    "equal": _compare(np.equal), "not_equal": _compare(np.not_equal),
    "less": _compare(np.less), "less_equal": _compare(np.less_equal),
    "greater": _compare(np.greater), "greater_equal": _compare(np.greater_equal),
    "isnan": _predicate(np.isnan), "isinf": _predicate(np.isinf),
    "isfinite": _predicate(np.isfinite), "signbit": _predicate(np.signbit),
    "matmul": lambda a, b: matmul(a, b),
}
for _name in ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos",
              "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh",
              "arccosh", "arctanh", "cbrt", "arctan2", "hypot",
              "logaddexp", "logaddexp2"):
    HANDLED_UFUNCS[_name] = _rounded_once(getattr(np, _name))
HANDLED_UFUNCS["true_divide"] = HANDLED_UFUNCS["divide"]
HANDLED_UFUNCS["reciprocal"] = lambda x: _kernel(arith.div)(1.0, x)  # one correct rounding


# -- NumPy functions ------------------------------------------------------------------

@overload
def matmul(a: Tensor, b: ArrayLike | Tensor, *, model: str | Model | None = None,
           c: ArrayLike | Tensor | None = None, in_fmt: FormatLike | None = None,
           out_fmt: FormatLike | None = None) -> Tensor: ...
@overload
def matmul(a: ArrayLike, b: Tensor, *, model: str | Model | None = None,
           c: ArrayLike | Tensor | None = None, in_fmt: FormatLike | None = None,
           out_fmt: FormatLike | None = None) -> Tensor: ...
@overload
def matmul(a: ArrayLike, b: ArrayLike, *, model: str | Model | None = None,
           c: ArrayLike | None = None, in_fmt: FormatLike | None = None,
           out_fmt: FormatLike | None = None) -> NDArray[np.float64] | np.float64: ...


def matmul(a: ArrayLike | Tensor, b: ArrayLike | Tensor, *, model: str | Model | None = None,
           c: ArrayLike | Tensor | None = None, in_fmt: FormatLike | None = None,
           out_fmt: FormatLike | None = None,
           ) -> Tensor | NDArray[np.float64] | np.float64:
    """`lowprec.tensorcore.matmul` for Tensors: the model defaults to the context's,
    and the result is a `Tensor` of ``out_fmt`` (FP32 by default) when an operand
    is a Tensor; plain arrays in give a plain float64 array, as the kernel does.

    The input format is, in order: ``in_fmt``; the Tensor operands' (promoted),
    plain operands rounded into it (RNE); the format both plain operands' dtypes
    name (float16, float32, ml_dtypes: see `tensor`), as the kernel infers it;
    else `ValueError` asking for ``in_fmt`` (float64 and lists name no format).

    Examples
    --------
    >>> import lowprec as lp
    >>> a = lp.tensor([[1.0, 2.0**-11]], "fp16")
    >>> b = lp.tensor([[1.0], [1.0]], "fp16")
    >>> a @ b
    Tensor([[1.00048828125]], fmt=FP32)
    >>> with lp.context(matmul="fp16"):
    ...     (a @ b).fmt
    lp.FP16
    >>> import numpy as np
    >>> lp.matmul(np.array([[1.0, 2.0**-11]], np.float16), np.ones((2, 1), np.float16))
    array([[1.00048828]])
    """
    model = _CONTEXT.get().matmul if model is None else _check_model(model, "model")
    tensors = [x for x in (a, b) if isinstance(x, Tensor)]
    if not tensors and in_fmt is None:
        fa, fb = _format_of_dtype(a), _format_of_dtype(b)
        if fa is not None and fa == fb:
            in_fmt = fa   # otherwise the kernel's ValueError says what is missing
    if tensors and in_fmt is None:
        fa, fb = (x.fmt if isinstance(x, Tensor) else None for x in (a, b))
        fmt = result_format(fa, fb) if fa and fb else cast(Format, fa or fb)  # one is set
        # Promotion is exact; plain operands enter with RNE, as lp.matmul rounds them.
        a = a.astype(fmt) if isinstance(a, Tensor) else _round(a, fmt)
        b = b.astype(fmt) if isinstance(b, Tensor) else _round(b, fmt)
        in_fmt = fmt
    r = _matmul_kernel(_values_of(a), _values_of(b), model=model, c=_values_of(c),
                   in_fmt=in_fmt, out_fmt=out_fmt)
    if not tensors:
        return r
    if out_fmt is None:
        spec = _MODELS[model.lower()] if isinstance(model, str) else model
        out_fmt = spec.default_out_format()   # by value: a copied "fp16" model is FP16
    return Tensor(np.asarray(r), _format(out_fmt))


def _given(value):
    """Whether an optional NumPy argument was given (NumPy's defaults are None or
    ``np._NoValue``)."""
    return value is not None and value is not np._NoValue


def _refuse(func, **kwargs):
    """`TypeError` naming the first of ``kwargs`` that was given: options that would
    store values the format does not have, or write into arrays outside the Tensor."""
    for name, value in kwargs.items():
        if _given(value):
            why = {"out": "results are new Tensors",
                   "dtype": "the result's format is the Tensor's (convert with "
                            ".astype(); sums take acc=, the accumulation format)",
                   "initial": "a start value has no place in the rounding order; add it "
                              "explicitly",
                   "where": "mask the Tensor explicitly (np.where) first"}.get(
                       name, "it cannot be emulated")
            raise TypeError(f"lowprec.Tensor does not support {name}= in numpy.{func}: {why}")


def _same_format(fn):
    """Functions that only move values around: the result keeps the format."""
    def handler(a, *args, **kwargs):
        return Tensor(np.asarray(fn(_values_of(a), *args, **kwargs)), a.fmt)
    return handler


def _take(a, indices, axis=None, out=None, mode="raise"):
    _refuse("take", out=out)
    return Tensor(np.asarray(np.take(a._v, _values_of(indices), axis=axis, mode=mode)), a.fmt)


def _each(fn):
    """atleast_1d/2d: each argument on its own; a Tensor keeps its format."""
    def handler(*arys):
        r = [Tensor(fn(x._v), x.fmt) if isinstance(x, Tensor) else fn(x) for x in arys]
        return r[0] if len(r) == 1 else tuple(r)
    return handler


def _joined(fn):
    """concatenate/stack/vstack/hstack: operands promoted to one format (exactly),
    plain ones rounded in; ``out=`` and ``dtype=`` refused (they would store values
    outside the format, or outside the Tensor)."""
    name = fn.__name__
    if name in ("concatenate", "stack"):
        def handler(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
            _refuse(name, out=out, dtype=dtype)
            vals, fmt = _operands(*list(arrays))
            return Tensor(fn(vals, axis=axis, casting=casting), fmt)
    else:  # NumPy's other signature: (tup, *, dtype, casting)
        def handler(tup, *, dtype=None, casting="same_kind"):  # type: ignore[misc]
            _refuse(name, dtype=dtype)
            vals, fmt = _operands(*list(tup))
            return Tensor(fn(vals, casting=casting), fmt)
    return handler


def _where(cond, *xy):
    if not xy:
        return np.where(_values_of(cond))      # the indices of nonzero elements
    if len(xy) != 2:
        raise TypeError("numpy.where takes a condition, or a condition, x and y")
    x, y = xy
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        return np.where(_values_of(cond), x, y)   # no format among the values
    return _select(lambda c, a, b: np.where(c != 0, a, b))(
        np.asarray(_values_of(cond)), x, y)


def _clip(a, a_min=np._NoValue, a_max=np._NoValue, out=None, *,
          min=np._NoValue, max=np._NoValue, **kwargs):  # noqa: A002
    _refuse("clip", out=out, **kwargs)
    lo = a_min if _given(a_min) else min
    hi = a_max if _given(a_max) else max
    lo = -np.inf if not _given(lo) else lo
    hi = np.inf if not _given(hi) else hi
    return _select(np.clip)(a, lo, hi)


def _acc_sum(a, axis, keepdims, acc, order):
    """The sum in the accumulation format, as float64 values of ``acc``."""
    acc = a.fmt if acc is None else _format(acc)
    ctx = _CONTEXT.get()
    v = a._v if _holds(acc, a.fmt) else _round_ctx(a._v, acc, None)
    red = axis
    if isinstance(axis, tuple):
        # Several axes: move them to the end and sum their flattened product.
        axes = tuple(np.lib.array_utils.normalize_axis_tuple(axis, v.ndim))
        keep = [i for i in range(v.ndim) if i not in axes]
        v = np.transpose(v, keep + list(axes)).reshape([v.shape[i] for i in keep] + [-1])
        red = -1
    s = np.asarray(arith.sum(v, acc, axis=red, mode=ctx.mode, order=order, **ctx.kwargs()))
    if keepdims:
        s = np.expand_dims(s, tuple(range(a.ndim)) if axis is None else axis)
    return s


def _sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue,
         where=np._NoValue, *, acc=None, order="pairwise"):
    _refuse("sum", out=out, dtype=dtype, initial=initial, where=where)
    s = _acc_sum(a, axis, _given(keepdims) and bool(keepdims), acc, order)
    return Tensor(np.asarray(_round_ctx(s, a.fmt, None)), a.fmt)


def _mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=np._NoValue,
          acc=None, order="pairwise"):
    _refuse("mean", out=out, dtype=dtype, where=where)
    s = _acc_sum(a, axis, _given(keepdims) and bool(keepdims), acc, order)
    n = a.size if axis is None else int(np.prod([a.shape[i] for i in np.atleast_1d(axis)]))
    ctx = _CONTEXT.get()
    # The sum and n are exact float64 values: one correctly rounded division.
    return Tensor(np.asarray(arith.div(s, float(n), a.fmt, ctx.mode, **ctx.kwargs())), a.fmt)


def _dot(a, b, out=None):
    _refuse("dot", out=out)
    if np.ndim(_values_of(a)) == 0 or np.ndim(_values_of(b)) == 0:
        return np.multiply(a, b)
    if np.ndim(_values_of(a)) > 2 or np.ndim(_values_of(b)) > 2:
        raise TypeError("lowprec.Tensor supports numpy.dot of 1-D and 2-D operands; "
                        "use @ / np.matmul for stacks")
    return matmul(a, b)


def _like_dtype_format(dtype, func):
    try:
        return _format(dtype)
    except (TypeError, ValueError):
        raise TypeError(f"numpy.{func} of a Tensor: dtype= must name a format lowprec "
                        f"knows (a float dtype, an ml_dtypes dtype or a format name), "
                        f"got {dtype!r}") from None


def _filled(a, fill, dtype, order, shape, device, func):
    """zeros_like/ones_like/full_like: a Tensor of ``dtype``'s format (default: the
    Tensor's), the fill value rounded into it once."""
    fmt = a.fmt if dtype is None else _like_dtype_format(dtype, func)
    fill = np.asarray(_round_ctx(_values_of(fill), fmt, None))
    # ``fill`` is already float64 values of fmt: the broadcast copy is exact.
    kw = {} if device is None else {"device": device}
    return Tensor(np.full_like(a._v, fill, dtype=np.float64, order=order, shape=shape, **kw),
                  fmt)


def _like(value):
    def handler(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
        return _filled(a, value, dtype, order, shape, device,
                       "zeros_like" if value == 0 else "ones_like")
    return handler


def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _filled(a, fill_value, dtype, order, shape, device, "full_like")


def _reduce_exact(fn):
    """max/min: exact selections. ``initial`` enters the format as an operand does:
    a plain value is rounded into it once (context mode), a Tensor promotes. Rounding
    is monotone, so this is the same as selecting first and rounding the selection
    (``np.maximum(t, x)``) in every deterministic mode."""
    name = fn.__name__

    def handler(a, axis=None, out=None, keepdims=False, initial=np._NoValue,
                where=np._NoValue):
        _refuse(name, out=out)
        kw = {} if where is np._NoValue else {"where": _values_of(where)}
        if _given(initial):
            (v, kw["initial"]), fmt = _operands(a, initial)
        else:
            v, fmt = a._v, a.fmt
        keepdims = _given(keepdims) and bool(keepdims)
        return Tensor(np.asarray(fn(v, axis=axis, keepdims=keepdims, **kw)), fmt)
    return handler


def _plain(fn):
    """Functions whose result is not a value of the format (indices, shapes, bools).
    An ``out=`` array outside the Tensors is theirs; a Tensor as ``out=`` is refused."""
    params = list(inspect.signature(fn).parameters)
    out_at = params.index("out") if "out" in params else None

    def handler(*args, **kwargs):
        out = kwargs.get("out", args[out_at] if out_at is not None and len(args) > out_at
                         else None)
        if isinstance(out, Tensor):
            raise TypeError(f"lowprec.Tensor cannot be the out= of numpy.{fn.__name__}: "
                            "its values would leave the format")
        return fn(*(_values_of(x) for x in args),
                  **{k: _values_of(v) for k, v in kwargs.items()})
    return handler


def _take_along_axis(arr, indices, axis=-1):
    return Tensor(np.take_along_axis(arr._v, _values_of(indices), axis), arr.fmt)


def _matmul_function(a, b, /, out=None, **kwargs):
    _refuse("matmul", out=out, **kwargs)
    return matmul(a, b)


HANDLED_FUNCTIONS = {
    np.reshape: _same_format(np.reshape), np.transpose: _same_format(np.transpose),
    np.ravel: _same_format(np.ravel), np.squeeze: _same_format(np.squeeze),
    np.expand_dims: _same_format(np.expand_dims), np.swapaxes: _same_format(np.swapaxes),
    np.moveaxis: _same_format(np.moveaxis), np.broadcast_to: _same_format(np.broadcast_to),
    np.take: _take, np.take_along_axis: _take_along_axis,
    np.copy: _same_format(np.copy), np.flip: _same_format(np.flip),
    np.tile: _same_format(np.tile), np.repeat: _same_format(np.repeat),
    np.atleast_1d: _each(np.atleast_1d), np.atleast_2d: _each(np.atleast_2d),
    np.concatenate: _joined(np.concatenate), np.stack: _joined(np.stack),
    np.vstack: _joined(np.vstack), np.hstack: _joined(np.hstack),
    np.where: _where, np.clip: _clip,
    np.sum: _sum, np.mean: _mean, np.dot: _dot, np.matmul: _matmul_function,
    np.max: _reduce_exact(np.max), np.amax: _reduce_exact(np.max),
    np.min: _reduce_exact(np.min), np.amin: _reduce_exact(np.min),
    np.zeros_like: _like(0.0), np.ones_like: _like(1.0), np.full_like: _full_like,
    np.argmax: _plain(np.argmax), np.argmin: _plain(np.argmin),
    np.argsort: _plain(np.argsort), np.shape: _plain(np.shape), np.ndim: _plain(np.ndim),
    np.size: _plain(np.size), np.array_equal: _plain(np.array_equal),
    np.allclose: _plain(np.allclose), np.isclose: _plain(np.isclose),
    np.count_nonzero: _plain(np.count_nonzero), np.nonzero: _plain(np.nonzero),
    np.all: _plain(np.all), np.any: _plain(np.any),
}
