"""`Tensor`: an n-dimensional array of values of one format, emulated or refused.

A `Tensor` holds a float64 ndarray whose every element is a value of its `Format`.
Operations unwrap, call a kernel (`rounding`, `arith`, `matmul`) and rewrap. They
never compute in float64 and hand back a plain array.

NumPy calls reach a Tensor through ``__array_ufunc__`` and ``__array_function__``.
Each has one table of what is handled, and everything else raises `TypeError` naming
the call. The tables are defined here, empty. `ufuncs` and `functions` fill them:
they import this module, and the Tensor never imports them. Defaults come from
`defaults`.
"""

from __future__ import annotations

import html
import operator
from collections.abc import Callable, Collection, Iterator
from typing import Any, NoReturn, cast

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

from .. import bits
from ..display import card
from ..engine.lazy import lazy_entry
from ..formats import Format, FormatLike
from ..formats import format as _format
from ..types import Mode, RNGLike
from .defaults import copy_rounds, round_ctx
from .promotion import holds, result_format

__all__ = ["Tensor", "tensor", "HANDLED_UFUNCS", "HANDLED_FUNCTIONS", "KINDS", "REFUSED",
           "implements", "values_of",
           "is_real",
           "format_of_dtype", "operands", "exact_operands"]

#: NumPy ufunc name -> handler, filled by `implements` (in `lowprec.tensors.ufuncs`, and
#: ``matmul`` in `lowprec.tensors.functions`); a ufunc not in it is refused.
HANDLED_UFUNCS: dict[str, Callable[..., Any]] = {}
#: NumPy function -> handler, filled by `implements` (in `lowprec.tensors.functions` and
#: its siblings, `lowprec.linalg`, `lowprec.fft`); a function not in it is refused.
#: `Tensor.sum`, `Tensor.mean` and ``@`` call their handlers here.
HANDLED_FUNCTIONS: dict[Callable[..., Any], Callable[..., Any]] = {}
#: NumPy function, or ufunc name (a `HANDLED_UFUNCS` key) -> (class, one line on its
#: order of operations), filled by `implements`: what docs/numpy-support.md prints.
KINDS: dict[object, tuple[str, str]] = {}
#: "numpy.X" -> why a Tensor refuses it, filled by `lowprec.tensors.coverage` (the
#: refusal message says it; a function in neither table is refused all the same).
REFUSED: dict[str, str] = {}
#: Format -> its array-API namespace, the one entry filled by `lowprec.array_api` when it
#: is imported (``import lowprec`` does): `Tensor.__array_namespace__` calls it.
NAMESPACE: list[Callable[[Format], Any]] = []



def implements(np_func: Callable[..., Any] | str, kind: str,
               order: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function as the Tensor's handler of ``np_func``, with its
    class and order of operations (`KINDS`, docs/numpy-support.md).

    A NumPy function goes into `HANDLED_FUNCTIONS`. A ufunc is named by its name (a
    str) and goes into `HANDLED_UFUNCS`. Each is registered once: a second handler
    for the same name is a mistake, and raises. Factory-made handlers register by
    calling the decorator, ``implements(np.sort, *MOVE)(_same_format(np.sort))``.

    Examples
    --------
    >>> import numpy as np
    >>> from lowprec.tensors.core import HANDLED_FUNCTIONS, KINDS
    >>> HANDLED_FUNCTIONS[np.sort] is not None, KINDS[np.sort][0]
    (True, 'exact')
    """
    table: dict[Any, Callable[..., Any]] = (
        HANDLED_UFUNCS if isinstance(np_func, str) else HANDLED_FUNCTIONS)

    def register(handler: Callable[..., Any]) -> Callable[..., Any]:
        if np_func in KINDS:
            raise ValueError(f"{np_func!r} has a Tensor handler already")
        table[np_func] = handler
        KINDS[np_func] = (kind, order)
        return handler
    return register


#: The standard's versions `Tensor.__array_namespace__` accepts (the namespace is 2024.12).
_API_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")


def _fmt_name(fmt):
    return str(fmt)   # the name, or one line of parameters for an unnamed format


def _special_counts(v: np.ndarray, tiny: float) -> dict[str, int]:
    """How many of ``v`` are NaN, inf, subnormal (0 < |x| < ``tiny``) and zero,
    counted a chunk at a time so that the masks stay small."""
    counts = dict.fromkeys(("NaN", "inf", "subnormal", "zero"), 0)
    flat = v.reshape(-1)
    for i in range(0, flat.size, 1 << 20):
        a = np.abs(flat[i:i + (1 << 20)])
        counts["NaN"] += int(np.count_nonzero(np.isnan(a)))
        counts["inf"] += int(np.count_nonzero(np.isinf(a)))
        counts["subnormal"] += int(np.count_nonzero((a > 0) & (a < tiny)))
        counts["zero"] += int(np.count_nonzero(a == 0))
    return counts


def _not_implemented(name):
    """The refusal of a NumPy call the tables do not hold: not implemented (which
    says nothing about whether it could be emulated), where the list is, the way out."""
    why = f" ({REFUSED[name]})" if name in REFUSED else ""
    return (f"{name} is not implemented for lowprec.Tensor{why}; see "
            "docs/numpy-support.md; np.asarray(t) gives the float64 values")


def values_of(x: Any) -> Any:
    """The float64 values of a Tensor ``x``, or anything else as it is."""
    return x._v if isinstance(x, Tensor) else x


def is_real(x: Any) -> bool:
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
        if not is_real(other):
            return op(self.values, other)
        return ufunc(self, other)
    method.__name__ = f"__{op.__name__}__"
    return method


class Tensor:
    """An n-dimensional array of values of one `Format`.

    Every operation is emulated in that format, or refused.

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
    >>> np.gcd(x, x)
    Traceback (most recent call last):
    ...
    TypeError: numpy.gcd is not implemented for lowprec.Tensor (an operation on integers or
    their bits: a Tensor holds real values (`lp.encode(t)` gives its bit patterns)); see
    docs/numpy-support.md; np.asarray(t) gives the float64 values
    """

    __slots__ = ("_v", "_fmt")
    __array_priority__ = 100

    def __init__(self, values: NDArray[np.float64], fmt: Format) -> None:
        # Internal: ``values`` must already be values of ``fmt`` (use lp.tensor). Every
        # Tensor is made here, so this is the one place a NumPy scalar result (``np.max``
        # of all elements, a ufunc of a 0-d array) becomes the 0-d ndarray ``_v`` must be.
        self._v = values if isinstance(values, np.ndarray) else np.asarray(values)
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

    def astype(self, fmt: FormatLike, mode: Mode | None = None, *,
               rng: RNGLike = None) -> Tensor:
        """Convert to another format by one rounding (context mode and rng by default).

        The result is a copy where ``fmt`` holds every value of the Tensor's format
        and the rounding would change nothing (`copy_rounds`)."""
        fmt = _storage_format(fmt)
        if holds(fmt, self._fmt) and copy_rounds(mode, rng):
            return Tensor(self._v.copy(), fmt)
        return Tensor(np.asarray(round_ctx(self._v, fmt, mode, rng)), fmt)

    def to_numpy(self, dtype: np.dtype[Any] | type[Any] | str = np.float64) -> NDArray[Any]:
        """A NumPy array of ``dtype`` (float16/32/64, or an ml_dtypes type):
        exact when ``dtype`` holds the format, else one rounding (context mode)."""
        target = _format(dtype)
        v = self._v if holds(target, self._fmt) else round_ctx(self._v, target, None)
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

    def _repr_html_(self) -> str:
        """The values with format and shape, as a themed HTML card for Jupyter.

        The card counts the NaNs, infinities, subnormals and zeros. Each shown value is
        exact (its repr), summarized past NumPy's print threshold as
        `numpy.array2string` does, so a large Tensor never makes a large string. The
        plain repr stays the text fallback.

        Examples
        --------
        >>> import lowprec as lp
        >>> html = lp.tensor([0.1, 2.0, 1e-6, 0.0], "fp16")._repr_html_()
        >>> "0.0999755859375, 2.0" in html, "FP16" in html, "shape (4,)" in html
        (True, True, True)
        >>> ">1 subnormal, 1 zero<" in html
        True
        """
        # array2string formats only the elements it shows (edgeitems per axis).
        body = np.array2string(self._v, separator=", ",
                               formatter={"float_kind": lambda v: repr(float(v))})
        n = self._v.size
        head = f"Tensor, fmt {_fmt_name(self._fmt)}, shape {self._v.shape}, " \
               f"{n} value{'' if n == 1 else 's'}"
        counts = _special_counts(self._v, self._fmt.smallest_normal)
        said = ", ".join(f"{c} {name}{'' if c == 1 else 's'}"
                         for name, c in counts.items() if c) or "none"
        return card(head, [("special", said)],
                    after=f'<pre style="margin:4px 0 0 0">{html.escape(body)}</pre>')

    # -- container protocol -------------------------------------------------------
    def __len__(self) -> int:
        return len(self._v)

    def __iter__(self) -> Iterator[Tensor]:
        for v in self._v:
            yield Tensor(v if isinstance(v, np.ndarray) else np.asarray(v), self._fmt)

    def __getitem__(self, key: Any) -> Tensor:
        key = values_of(key) if isinstance(key, Tensor) else key
        v = self._v[key]
        return Tensor(v if isinstance(v, np.ndarray) else np.asarray(v), self._fmt)

    def __setitem__(self, key: Any, value: ArrayLike | Tensor) -> None:
        value = value.astype(self._fmt)._v if isinstance(value, Tensor) else \
            round_ctx(value, self._fmt, None)
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
        return HANDLED_FUNCTIONS[np.sum](self, axis=axis, acc=acc, order=order, keepdims=keepdims)

    def cumsum(self, axis: int | None = None) -> Tensor:
        """Sequential prefix sums in the Tensor's format (`lowprec.cumsum`, context
        mode).

        ``axis=None`` flattens, as `numpy.cumsum`.

        Examples
        --------
        >>> import lowprec as lp
        >>> lp.tensor([256.0, 1.0, 1.0, 2.0], "bf16").cumsum()
        Tensor([256.0, 256.0, 256.0, 258.0], fmt=BF16)
        """
        return HANDLED_FUNCTIONS[np.cumsum](self, axis=axis)

    def mean(self, axis: int | tuple[int, ...] | None = None, *, acc: FormatLike | None = None,
             order: str = "pairwise", keepdims: bool = False) -> Tensor:
        return HANDLED_FUNCTIONS[np.mean](self, axis=axis, acc=acc, order=order, keepdims=keepdims)

    def prod(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        """`numpy.prod` in the Tensor's format: sequential, each multiplication rounded."""
        return HANDLED_FUNCTIONS[np.prod](self, axis=axis, keepdims=keepdims)

    def cumprod(self, axis: int | None = None) -> Tensor:
        """`numpy.cumprod`: sequential partial products, each multiplication rounded."""
        return HANDLED_FUNCTIONS[np.cumprod](self, axis=axis)

    def var(self, axis: int | tuple[int, ...] | None = None, ddof: int = 0, *,
            acc: FormatLike | None = None, order: str = "pairwise",
            keepdims: bool = False) -> Tensor:
        """`numpy.var` composed of rounded operations (docs/numpy-support.md)."""
        return HANDLED_FUNCTIONS[np.var](self, axis=axis, ddof=ddof, acc=acc, order=order,
                                         keepdims=keepdims)

    def std(self, axis: int | tuple[int, ...] | None = None, ddof: int = 0, *,
            acc: FormatLike | None = None, order: str = "pairwise",
            keepdims: bool = False) -> Tensor:
        """`numpy.std`: the square root of `var`, rounded."""
        return HANDLED_FUNCTIONS[np.std](self, axis=axis, ddof=ddof, acc=acc, order=order,
                                         keepdims=keepdims)

    def sort(self, axis: int = -1) -> None:
        """Sort in place along ``axis``, as `numpy.ndarray.sort` (exact: values move).

        Examples
        --------
        >>> import lowprec as lp
        >>> t = lp.tensor([3.0, 0.1, 2.0], "bf16")
        >>> t.sort()
        >>> t
        Tensor([0.10009765625, 2.0, 3.0], fmt=BF16)
        """
        self._v.sort(axis=axis)

    # ndarray's methods of the handled functions: each calls its table entry, so it
    # has the function's class and order (docs/numpy-support.md).
    def all(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Any:
        return HANDLED_FUNCTIONS[np.all](self, axis=axis, keepdims=keepdims)

    def any(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Any:
        return HANDLED_FUNCTIONS[np.any](self, axis=axis, keepdims=keepdims)

    def argsort(self, axis: int | None = -1, kind: str | None = None) -> Any:
        return HANDLED_FUNCTIONS[np.argsort](self, axis=axis, kind=kind)

    def argpartition(self, kth: Any, axis: int | None = -1) -> Any:
        return HANDLED_FUNCTIONS[np.argpartition](self, kth, axis=axis)

    def partition(self, kth: Any, axis: int = -1) -> None:
        """Partition in place along ``axis``, as `numpy.ndarray.partition` (exact)."""
        self._v.partition(kth, axis=axis)

    def nonzero(self) -> tuple[NDArray[np.intp], ...]:
        return HANDLED_FUNCTIONS[np.nonzero](self)

    def searchsorted(self, v: Any, side: str = "left", sorter: Any = None) -> Any:
        return HANDLED_FUNCTIONS[np.searchsorted](self, v, side=side, sorter=sorter)

    def clip(self, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002 - NumPy's names
        return HANDLED_FUNCTIONS[np.clip](self, min, max)

    def compress(self, condition: Any, axis: int | None = None) -> Tensor:
        return HANDLED_FUNCTIONS[np.compress](condition, self, axis=axis)

    def choose(self, choices: Any, mode: str = "raise") -> Tensor:
        return HANDLED_FUNCTIONS[np.choose](self, choices, mode=mode)

    def take(self, indices: Any, axis: int | None = None, mode: str = "raise") -> Tensor:
        return HANDLED_FUNCTIONS[np.take](self, indices, axis=axis, mode=mode)

    def put(self, indices: Any, values: Any, mode: str = "raise") -> None:
        """Write ``values`` at flat ``indices``, rounded into the format once."""
        HANDLED_FUNCTIONS[np.put](self, indices, values, mode=mode)

    def fill(self, value: Any) -> None:
        """Every element set to ``value`` rounded into the format once."""
        self[...] = value

    def repeat(self, repeats: Any, axis: int | None = None) -> Tensor:
        return HANDLED_FUNCTIONS[np.repeat](self, repeats, axis=axis)

    def squeeze(self, axis: int | tuple[int, ...] | None = None) -> Tensor:
        return HANDLED_FUNCTIONS[np.squeeze](self, axis=axis)

    def swapaxes(self, axis1: int, axis2: int) -> Tensor:
        return HANDLED_FUNCTIONS[np.swapaxes](self, axis1, axis2)

    def dot(self, b: Any) -> Tensor:
        """`numpy.dot` through `lp.matmul` (the context's model)."""
        return HANDLED_FUNCTIONS[np.dot](self, b)

    def conj(self) -> Tensor:
        """The Tensor itself, copied: its values are real."""
        return Tensor(self._v.copy(), self._fmt)

    conjugate = conj

    @property
    def real(self) -> Tensor:
        return Tensor(self._v, self._fmt)

    @property
    def imag(self) -> Tensor:
        """Zeros of the format: a Tensor holds real numbers."""
        return Tensor(np.zeros(self._v.shape), self._fmt)

    @property
    def mT(self) -> Tensor:
        """The last two axes swapped (``ndarray.mT``)."""
        if self._v.ndim < 2:
            raise ValueError(f"mT needs at least 2 dimensions, got {self._v.ndim}")
        return Tensor(np.swapaxes(self._v, -1, -2), self._fmt)

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
        return HANDLED_FUNCTIONS[np.diagonal](self, offset, axis1, axis2)

    def trace(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
        """The sum of the diagonal, as `Tensor.sum` (pairwise in the Tensor's format)."""
        return HANDLED_FUNCTIONS[np.trace](self, offset, axis1, axis2)

    def round(self, decimals: int = 0) -> Tensor:
        """`numpy.round`: the correctly rounded decimal rounding, rounded once into the
        format."""
        return HANDLED_FUNCTIONS[np.round](self, decimals)

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
        if kwargs:
            if kwargs.get("out") is not None:
                raise TypeError(f"lowprec.Tensor does not support out= (numpy.{name}): "
                                "results are new Tensors")
            extra = set(kwargs) - {"out"}
            if extra:
                raise TypeError(f"lowprec.Tensor does not support numpy.{name} with "
                                f"{', '.join(sorted(extra))}=")
        handler = HANDLED_UFUNCS.get(name)
        if handler is None:
            raise TypeError(_not_implemented(f"numpy.{name}"))
        return handler(*inputs)

    def __array_namespace__(self, *, api_version: str | None = None) -> Any:
        """The array-API namespace of the Tensor's format (docs/array-api.md).

        It is `lowprec.array_api` itself for FP32 and FP64 (its ``float32`` and
        ``float64``), and ``lp.array_namespace(fmt)`` for any other format. Its
        functions take Tensors and return `lowprec.array_api.Array` objects
        (``.tensor`` is the Tensor).

        Examples
        --------
        >>> import lowprec as lp
        >>> xp = lp.tensor([1.0, 4.0], "bf16").__array_namespace__()
        >>> xp is lp.array_namespace("bf16")
        True
        """
        if api_version is not None and api_version not in _API_VERSIONS:
            raise ValueError(f"api_version must be one of {', '.join(_API_VERSIONS)} or "
                             f"None, got {api_version!r}")
        if not NAMESPACE:
            raise RuntimeError("lowprec.array_api is not imported: import lowprec")
        return NAMESPACE[0](self.fmt)

    def __array_function__(self, func: Callable[..., Any], types: Collection[type],
                           args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        handler = HANDLED_FUNCTIONS.get(func)
        if handler is None:
            mod = func.__module__.replace("numpy._core", "numpy").replace(".fromnumeric", "")
            raise TypeError(_not_implemented(f"{mod}.{func.__name__}"))
        return handler(*args, **kwargs)

    # -- operators ------------------------------------------------------------------
    # (NumPy hands a Tensor operand to __array_ufunc__, which returns a Tensor; NumPy's
    # stubs say ndarray, hence the casts.)
    def __add__(self, other: ArrayLike | Tensor) -> Tensor:
        return _operator("add", np.add, self, other)

    def __radd__(self, other: ArrayLike | Tensor) -> Tensor:
        return _operator("add", np.add, other, self)

    def __sub__(self, other: ArrayLike | Tensor) -> Tensor:
        return _operator("subtract", np.subtract, self, other)

    def __rsub__(self, other: ArrayLike | Tensor) -> Tensor:
        return _operator("subtract", np.subtract, other, self)

    def __mul__(self, other: ArrayLike | Tensor) -> Tensor:
        return _operator("multiply", np.multiply, self, other)

    def __rmul__(self, other: ArrayLike | Tensor) -> Tensor:
        return _operator("multiply", np.multiply, other, self)

    def __truediv__(self, other: ArrayLike | Tensor) -> Tensor:
        return _operator("divide", np.true_divide, self, other)

    def __rtruediv__(self, other: ArrayLike | Tensor) -> Tensor:
        return _operator("divide", np.true_divide, other, self)

    def __pow__(self, other: ArrayLike | Tensor) -> Tensor:
        return cast(Tensor, np.power(self, other))

    def __matmul__(self, other: ArrayLike | Tensor) -> Tensor:
        if getattr(other, "__lowprec_defer__", False):
            return NotImplemented
        return HANDLED_FUNCTIONS[np.matmul](self, other)

    def __rmatmul__(self, other: ArrayLike | Tensor) -> Tensor:
        if getattr(other, "__lowprec_defer__", False):
            return NotImplemented
        return HANDLED_FUNCTIONS[np.matmul](other, self)

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


#: Operand types for which ``np.add(a, b)`` is exactly the handler's ``add(a, b)``: NumPy
#: would hand them to `Tensor.__array_ufunc__` with no keyword (no other override).
_DIRECT = frozenset({Tensor, np.ndarray, float, int})


def _operator(name: str, ufunc: np.ufunc, a: Any, b: Any) -> Any:
    """``ufunc(a, b)`` for an operator of `Tensor`, calling its handler directly when
    NumPy's dispatch could only reach it (the cost of a small operation); NotImplemented
    for an operand whose type asks Tensors to defer (``__lowprec_defer__``: a
    `lowprec.daskarrays.LazyTensor` computes ``tensor + lazy`` itself)."""
    if getattr(a, "__lowprec_defer__", False) or getattr(b, "__lowprec_defer__", False):
        return NotImplemented
    if type(a) in _DIRECT and type(b) in _DIRECT:
        handler = HANDLED_UFUNCS.get(name)
        if handler is not None:
            return cast(Tensor, handler(a, b))
    return cast(Tensor, ufunc(a, b))


def format_of_dtype(x: Any) -> Format | None:
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


@lazy_entry("tensor")
def tensor(data: ArrayLike | Tensor, fmt: FormatLike | None = None, mode: Mode | None = None,
           *, rng: RNGLike = None) -> Tensor:
    """Make a `Tensor`: round ``data`` into ``fmt`` (once, by ``mode``).

    ``fmt`` defaults to the format of a Tensor ``data``. For a NumPy array or
    scalar it defaults to the format its dtype names: ``np.float16`` is FP16,
    ``np.float32`` FP32, ``ml_dtypes.bfloat16`` BF16, ``ml_dtypes.float8_e4m3fn``
    FP8_E4M3, and so on. float64, integer and list data name no format: pass
    ``fmt`` (`TypeError` otherwise).
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
            fmt = format_of_dtype(data)
            if fmt is None:
                what = (f"{data.dtype} data" if isinstance(data, (np.ndarray, np.generic))
                        else "plain data")
                raise TypeError(f"lp.tensor needs a format for {what}: pass fmt, e.g. "
                                "lp.tensor(x, 'bf16') (float16, float32 and ml_dtypes "
                                "arrays name their own)")
    fmt = _storage_format(fmt)
    if isinstance(data, Tensor):
        return data.astype(fmt, mode, rng=rng)
    return Tensor(np.asarray(round_ctx(data, fmt, mode, rng)), fmt)


def _storage_format(spec: FormatLike) -> Format:
    """The format of a Tensor: any format but the unsigned block scales, in which no
    arithmetic is defined (they live in `lowprec.mx`'s block-scaled arrays)."""
    fmt = _format(spec)
    if not fmt.signed:
        raise ValueError(f"{fmt.name or fmt.dtype_name} is an unsigned scale format: a "
                         "Tensor cannot hold it (no arithmetic is defined in it); round "
                         "with lp.round, or use lowprec.mx for block-scaled arrays")
    return fmt


# -- operands -----------------------------------------------------------------------

def _common_format(xs):
    """The result format of the Tensor operands among ``xs`` (promoted pairwise)."""
    fmt = None
    for x in xs:
        if not isinstance(x, Tensor):
            continue
        if fmt is None:
            fmt = x._fmt
        elif x._fmt is not fmt:       # same format, the usual case: nothing to look up
            fmt = result_format(fmt, x._fmt)
    return fmt


def operands(*xs: Any) -> tuple[list[Any], Format]:
    """Values of the operands in their common result format, and that format.

    Tensors fix the format, promoted pairwise. Python scalars and plain arrays take
    it, rounded in (context mode)."""
    fmt = _common_format(xs)
    # Promotion is exact: the result format holds every Tensor operand's values.
    return [x._v if isinstance(x, Tensor) else round_ctx(x, fmt, None) for x in xs], fmt


def exact_operands(*xs: Any) -> tuple[list[NDArray[np.float64]], Format]:
    """Values as they are (no rounding of plain operands) and the result format."""
    return [np.asarray(values_of(x), dtype=np.float64) for x in xs], _common_format(xs)
