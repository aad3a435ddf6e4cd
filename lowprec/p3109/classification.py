"""IEEE P3109's comparisons, predicates and neighbours (Interim Report v4.0, §4.12,
§4.13, §4.16) on code points.

Comparisons and predicates read the decoded values: float64 comparisons are the
report's, since NaN compares false and ±inf order as its rules say. The neighbours
are integer steps on code points, as §4.16 defines them. Nothing here rounds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..bits import decode, uint_dtype
from ..formats import FormatLike
from ..formats import format as _format
from .formats import parameters
from .projection import special_codes

__all__ = ["compare_less", "compare_less_equal", "compare_equal", "compare_greater",
           "compare_greater_equal", "total_order", "is_zero", "is_one", "is_nan",
           "is_infinite", "is_finite", "is_sign_minus", "is_normal", "is_subnormal",
           "classify", "next_greater_than", "next_less_than", "CLASSES"]

#: §4.13.1's classes, in the order of Table 2.
CLASSES = ("ClsNaN", "ClsNegativeInfinity", "ClsNegativeNormal", "ClsNegativeSubnormal",
           "ClsZero", "ClsPositiveSubnormal", "ClsPositiveNormal", "ClsPositiveInfinity")

Bools = NDArray[np.bool_] | Any


def _values(x: ArrayLike, fmt: FormatLike) -> NDArray[np.float64]:
    parameters(fmt)
    return np.asarray(decode(x, fmt), dtype=np.float64)


def compare_less(x: ArrayLike, y: ArrayLike, fx: FormatLike, fy: FormatLike) -> Bools:
    """CompareLess<fx, fy>(x, y) (§4.12): False where either is NaN.

    Examples
    --------
    >>> import lowprec as lp
    >>> bool(lp.p3109.compare_less(0xff, 0x00, "binary8p3se", "binary8p3se"))  # -inf < 0
    True
    """
    return _values(x, fx) < _values(y, fy)


def compare_less_equal(x: ArrayLike, y: ArrayLike, fx: FormatLike, fy: FormatLike) -> Bools:
    """CompareLessEqual<fx, fy>(x, y) (§4.12)."""
    return _values(x, fx) <= _values(y, fy)


def compare_equal(x: ArrayLike, y: ArrayLike, fx: FormatLike, fy: FormatLike) -> Bools:
    """CompareEqual<fx, fy>(x, y) (§4.12): NaN equals nothing, itself included."""
    return _values(x, fx) == _values(y, fy)


def compare_greater(x: ArrayLike, y: ArrayLike, fx: FormatLike, fy: FormatLike) -> Bools:
    """CompareGreater<fx, fy>(x, y) (§4.12)."""
    return _values(x, fx) > _values(y, fy)


def compare_greater_equal(x: ArrayLike, y: ArrayLike, fx: FormatLike,
                          fy: FormatLike) -> Bools:
    """CompareGreaterEqual<fx, fy>(x, y) (§4.12)."""
    return _values(x, fx) >= _values(y, fy)


def total_order(x: ArrayLike, y: ArrayLike, fx: FormatLike, fy: FormatLike) -> Bools:
    """TotalOrder<fx, fy>(x, y) (§4.12.1): the one NaN orders below everything.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> bool(lp.p3109.total_order(0x80, 0xff, f, f)), bool(lp.p3109.total_order(0xff, 0x80, f, f))
    (True, False)
    """
    a, b = _values(x, fx), _values(y, fy)
    return np.isnan(a) | (~np.isnan(b) & (a <= b))


def is_zero(x: ArrayLike, f: FormatLike) -> Bools:
    """IsZero (§4.13)."""
    return _values(x, f) == 0


def is_one(x: ArrayLike, f: FormatLike) -> Bools:
    """IsOne (§4.13)."""
    return _values(x, f) == 1


def is_nan(x: ArrayLike, f: FormatLike) -> Bools:
    """IsNaN (§4.13)."""
    return np.isnan(_values(x, f))


def is_infinite(x: ArrayLike, f: FormatLike) -> Bools:
    """IsInfinite (§4.13)."""
    return np.isinf(_values(x, f))


def is_finite(x: ArrayLike, f: FormatLike) -> Bools:
    """IsFinite (§4.13)."""
    return np.isfinite(_values(x, f))


def is_sign_minus(x: ArrayLike, f: FormatLike) -> Bools:
    """IsSignMinus (§4.13): False for NaN and zero, which have no sign."""
    return _values(x, f) < 0


def is_normal(x: ArrayLike, f: FormatLike) -> Bools:
    """IsNormal (§4.13): finite, nonzero and at least MinNormalOf(f) in magnitude."""
    v = np.abs(_values(x, f))
    return np.isfinite(v) & (v >= _format(f).smallest_normal)


def is_subnormal(x: ArrayLike, f: FormatLike) -> Bools:
    """IsSubnormal (§4.13): finite, nonzero and below MinNormalOf(f) in magnitude."""
    v = np.abs(_values(x, f))
    return (v > 0) & (v < _format(f).smallest_normal)


def classify(x: ArrayLike, f: FormatLike) -> NDArray[np.str_] | Any:
    """Class (§4.13.1): each code's class name, one of `CLASSES`.

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.p3109.classify([0x80, 0xff, 0x01, 0x41], "binary8p3se").tolist()
    ['ClsNaN', 'ClsNegativeInfinity', 'ClsPositiveSubnormal', 'ClsPositiveNormal']
    """
    v = _values(x, f)
    neg = v < 0
    kind = np.select([np.isnan(v), np.isinf(v), v == 0, is_subnormal(x, f)],
                     [0, 1, 4, 3], 2)
    # Table 2's order is symmetric about ClsZero: positive class = 8 - negative one.
    index = np.where(~neg & np.isin(kind, (1, 2, 3)), 8 - kind, kind)
    out = np.asarray(CLASSES)[index]
    return out[()] if out.ndim == 0 else out


def _neighbour(x: ArrayLike, f: FormatLike, up: bool) -> NDArray[Any] | Any:
    fmt = _format(f)
    _, _, signed, domain = parameters(fmt)
    c = special_codes(fmt)
    b = np.asarray(x)
    decode(b, fmt)                                  # checks the codes
    b = b.astype(np.int64)
    extended = domain == "extended"
    neg = signed & (b > c["sign"]) if signed else np.zeros(b.shape, bool)
    nan = np.full(b.shape, c["nan"])
    smallest_negative = c["sign"] + 1 if signed else -1
    if up:
        r = np.where(neg, b - 1, b + 1)
        r = np.where(b == smallest_negative, 0, r)
        if extended:
            r = np.where(b == c["max"], c["inf"], r)
            r = np.where(b == c["inf"], nan, r)
            if signed:
                r = np.where(b == c["-inf"], c["min"], r)
        else:
            r = np.where(b == c["max"], nan, r)
    else:
        r = np.where(neg, b + 1, b - 1)
        if signed:
            r = np.where(b == 0, smallest_negative, r)
        else:
            r = np.where(b == 0, nan, r)
        if extended:
            r = np.where(b == c["inf"], c["max"], r)
            if signed:
                r = np.where(b == c["min"], c["-inf"], r)
                r = np.where(b == c["-inf"], nan, r)
        else:
            r = np.where(b == c["min"], nan, r)
    r = np.where(b == c["nan"], nan, r)
    out = r.astype(uint_dtype(fmt))
    return out[()] if out.ndim == 0 else out


def next_greater_than(x: ArrayLike, f: FormatLike) -> NDArray[Any] | Any:
    """NextGreaterThan (§4.16): the next code up, or NaN past the top.

    Examples
    --------
    >>> import lowprec as lp
    >>> [hex(c) for c in lp.p3109.next_greater_than([0x81, 0x7e, 0x7f, 0xff], "binary8p3se")]
    ['0x0', '0x7f', '0x80', '0xfe']
    """
    return _neighbour(x, f, True)


def next_less_than(x: ArrayLike, f: FormatLike) -> NDArray[Any] | Any:
    """NextLessThan (§4.16): the next code down, or NaN past the bottom.

    Examples
    --------
    >>> import lowprec as lp
    >>> [hex(c) for c in lp.p3109.next_less_than([0x00, 0x7f, 0xfe, 0xff], "binary8p3se")]
    ['0x81', '0x7e', '0xff', '0x80']
    """
    return _neighbour(x, f, False)
