"""`Elementwise`: the array API's elementwise functions.

Most are written once by their rule and NumPy's ufunc:
``atan2 = _binary(_binary_float, np.arctan2)``. Some have rules of their own
(``floor_divide``, ``copysign``, ``nextafter``, ``clip``, ...).

A rule says what a function needs of its operands: ``_unary_float`` converts integers
and bools into the default float, ``_compare`` gives bools, and so on.

* Floating work is the Tensor ufunc, correctly rounded where the Tensor's is
  (docs/array-api.md).
* Comparisons, selections and sign operations are exact.
* Integer and boolean work is NumPy's, which wraps as the standard allows.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MethodType
from typing import Any, cast

import numpy as np

from ..formats import Format
from ..rounding import round as lp_round
from .array import Array
from .core import Core

__all__ = ["Elementwise"]

Operand = Array | bool | int | float


class _Function:
    """An elementwise function of the standard, named after the attribute it is
    assigned to (``atan2 = ...`` is ``xp.atan2``)."""

    def __init__(self, fn: Callable[..., Array], ufunc: np.ufunc) -> None:
        self.func, self.ufunc = fn, ufunc

    def __set_name__(self, owner: type, name: str) -> None:
        self.func.__name__ = name
        self.func.__qualname__ = f"{owner.__qualname__}.{name}"
        self.func.__doc__ = f"The array API's ``{name}`` (NumPy's ``{self.ufunc.__name__}``)."

    def __get__(self, ns: Any, owner: type | None = None) -> Callable[..., Array]:
        return self.func if ns is None else MethodType(self.func, ns)


def _unary(rule: Callable[..., Array], ufunc: np.ufunc) -> _Function:
    def fn(self: Elementwise, x: Array, /) -> Array:
        return rule(self, ufunc, x)
    return _Function(fn, ufunc)


def _binary(rule: Callable[..., Array], ufunc: np.ufunc) -> _Function:
    def fn(self: Elementwise, x1: Operand, x2: Operand, /) -> Array:
        return rule(self, ufunc, x1, x2)
    return _Function(fn, ufunc)


class Elementwise(Core):
    """The standard's elementwise functions."""

    # -- the rules ------------------------------------------------------------------------
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
        a, b, _ = self._pair(x1, x2)
        return self._wrap(ufunc(a._a, b._a), self.bool)   # comparisons are exact

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

    # -- the functions made of a rule and a ufunc -----------------------------------------
    acos = _unary(_unary_float, np.arccos)
    acosh = _unary(_unary_float, np.arccosh)
    asin = _unary(_unary_float, np.arcsin)
    asinh = _unary(_unary_float, np.arcsinh)
    atan = _unary(_unary_float, np.arctan)
    atanh = _unary(_unary_float, np.arctanh)
    cos = _unary(_unary_float, np.cos)
    cosh = _unary(_unary_float, np.cosh)
    exp = _unary(_unary_float, np.exp)
    expm1 = _unary(_unary_float, np.expm1)
    log = _unary(_unary_float, np.log)
    log1p = _unary(_unary_float, np.log1p)
    log2 = _unary(_unary_float, np.log2)
    log10 = _unary(_unary_float, np.log10)
    sin = _unary(_unary_float, np.sin)
    sinh = _unary(_unary_float, np.sinh)
    tan = _unary(_unary_float, np.tan)
    tanh = _unary(_unary_float, np.tanh)
    sqrt = _unary(_unary_float, np.sqrt)

    atan2 = _binary(_binary_float, np.arctan2)
    hypot = _binary(_binary_float, np.hypot)
    logaddexp = _binary(_binary_float, np.logaddexp)
    divide = _binary(_binary_float, np.divide)

    abs = _unary(_unary_numeric, np.absolute)
    negative = _unary(_unary_numeric, np.negative)
    positive = _unary(_unary_numeric, np.positive)
    square = _unary(_unary_numeric, np.square)
    sign = _unary(_unary_numeric, np.sign)

    add = _binary(_binary_numeric, np.add)
    subtract = _binary(_binary_numeric, np.subtract)
    multiply = _binary(_binary_numeric, np.multiply)
    pow = _binary(_binary_numeric, np.power)
    maximum = _binary(_binary_numeric, np.maximum)
    minimum = _binary(_binary_numeric, np.minimum)

    ceil = _unary(_rounding, np.ceil)
    floor = _unary(_rounding, np.floor)
    trunc = _unary(_rounding, np.trunc)
    round = _unary(_rounding, np.rint)

    equal = _binary(_compare, np.equal)
    not_equal = _binary(_compare, np.not_equal)
    less = _binary(_compare, np.less)
    less_equal = _binary(_compare, np.less_equal)
    greater = _binary(_compare, np.greater)
    greater_equal = _binary(_compare, np.greater_equal)

    logical_and = _binary(_logical, np.logical_and)
    logical_or = _binary(_logical, np.logical_or)
    logical_xor = _binary(_logical, np.logical_xor)

    bitwise_and = _binary(_bitwise, np.bitwise_and)
    bitwise_or = _binary(_bitwise, np.bitwise_or)
    bitwise_xor = _binary(_bitwise, np.bitwise_xor)
    bitwise_left_shift = _binary(_bitwise, np.left_shift)
    bitwise_right_shift = _binary(_bitwise, np.right_shift)

    # Evaluated in float64 (NumPy's result for the values), then rounded once.
    remainder = _binary(_once_binary, np.remainder)

    # -- the functions with rules of their own --------------------------------------------
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
        r = x._a
        # maximum(minimum(x, max), min), as NumPy and the draft standard: a NaN bound
        # gives NaN, and min wins where min > max; x's own values (signed zeros) kept.
        for bound, past in ((max, np.greater), (min, np.less)):
            if bound is None:
                continue
            v = self.astype(self._array(bound) if isinstance(bound, Array) else
                            self.asarray(bound, dtype=x._dtype), x._dtype)._a
            nan = np.isnan(v) if x._dtype.kind == "floating" else np.zeros(v.shape, bool)
            r = np.where(past(r, v) | nan, v, r)                # a selection
        return self._wrap(r if r is not x._a else x._a.copy(), x._dtype)

    def real(self, x: Array, /) -> Array:
        x = self._array(x)
        return self._wrap(x._a.copy(), x._dtype)

    def conj(self, x: Array, /) -> Array:
        return self.real(x)

    def imag(self, x: Array, /) -> Array:
        x = self._array(x)
        return self._filled(x.shape, 0, x._dtype)
