"""`HANDLED_UFUNCS`: the NumPy ufuncs a Tensor emulates, each by how it is exact.

* Arithmetic calls the correctly rounded `arith` kernels.
* Sign changes, floor and friends are exact.
* maximum/minimum select exact operands.
* Comparisons and predicates answer in bools.
* Transcendental functions are evaluated in float64 and rounded once.

The table is `lowprec.tensors.core.HANDLED_UFUNCS`, filled here. ``matmul`` is
added by `lowprec.tensors.functions`, next to the Tensor matmul. A ufunc not in the
table is refused by the Tensor, never computed in float64.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import arith
from ..arith.elementwise import on_values
from ..rounding import round as _round
from .core import HANDLED_UFUNCS, Tensor, exact_operands, implements, is_real, operands, values_of
from .defaults import get_context, round_ctx

__all__ = ["HANDLED_UFUNCS", "select"]

_ROUNDED = "correctly rounded", "one rounding of the exact result (`lowprec.arith`, context mode)"
_EXACT = "exact", "values unchanged or exactly representable; the format kept"
_SELECT = "exact", "a selection; a selected plain operand is rounded into the format once"
_BOOL = "plain", "a bool array (comparisons are exact)"
_ONCE = "rounded once", "evaluated in float64, then one rounding into the format"


def _kernel(fn):
    def handler(*inputs):
        vals, fmt = operands(*inputs)     # values of fmt, every one
        ctx = get_context()
        r = on_values(fn, vals, fmt, ctx.mode, rng=ctx.rng, subnormals=ctx.subnormals,
                      saturate=ctx.saturate)
        return Tensor(r if type(r) is np.ndarray else np.asarray(r), fmt)
    return handler


def _exact_unary(fn):
    def handler(x):
        (v,), fmt = operands(x)
        r = fn(v)
        if not fmt.has_negative_zero:
            r = r + 0.0  # fnuz formats have no -0
        return Tensor(r, fmt)
    return handler


def _rounded_once(fn):
    """Evaluate in float64 and round once (transcendental functions)."""
    def handler(*inputs):
        vals, fmt = operands(*inputs)
        with np.errstate(all="ignore"):
            r = fn(*vals)
        return Tensor(np.asarray(round_ctx(r, fmt, None)), fmt)
    return handler


def _compare(fn):
    """Comparisons are exact: plain operands are compared as given. With an operand
    that is not real numbers (None, a str, a Fraction, ...) the answer is NumPy's for
    the float64 values, which hold the Tensor's exactly: ``np.less(t, None)`` raises
    `TypeError` as it does for a float array."""
    def handler(a, b):
        if not (is_real(a) and is_real(b)):
            return fn(values_of(a), values_of(b))
        (va, vb), _ = exact_operands(a, b)
        return fn(va, vb)
    return handler


def select(fn: Callable[..., Any]) -> Callable[..., Tensor]:
    """Selections (maximum, clip, ...) on exact operands.

    A plain value that gets selected is rounded into the format once. Tensor values
    are already in it."""
    def handler(*inputs):
        vals, fmt = exact_operands(*inputs)
        return Tensor(np.asarray(round_ctx(fn(*vals), fmt, None)), fmt)
    return handler


def _predicate(fn):
    def handler(x):
        return fn(values_of(x))
    return handler


@implements("power", "rounded once", "x**2, x**0.5, x**-1 and x**1 correctly rounded; other "
            "powers evaluated in float64, then one rounding")
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


@implements("square", *_ROUNDED)
def _square(x):
    return _kernel(arith.mul)(x, x)


def _no_negative_zero(r, fmt):
    """``r`` with -0 made +0 where ``fmt`` has no -0 (the fnuz formats)."""
    return r if fmt.has_negative_zero else r + 0.0


@implements("copysign", "exact", "|a| with b's sign (a plain a rounded in once)")
def _copysign(a, b):
    """``|a|`` with ``b``'s sign: exact (a plain ``a`` is rounded in once; ``b`` only
    gives its sign bit, read as given)."""
    (va, _), fmt = operands(a, b)
    sign = np.asarray(values_of(b), dtype=np.float64)
    return Tensor(_no_negative_zero(np.copysign(va, sign), fmt), fmt)


def _neighbour(v, toward, fmt):
    """The value of ``fmt`` next to each ``v`` (values of ``fmt``) toward ``toward``."""
    with np.errstate(all="ignore"):
        # The format's values are float64 values, so the least one above v is the
        # least one >= float64's nextafter(v, +inf): a round up of it (down alike).
        up = np.asarray(_round(np.nextafter(v, np.inf), fmt, "ru"))
        down = np.asarray(_round(np.nextafter(v, -np.inf), fmt, "rd"))
    r = np.where(toward > v, up, np.where(toward < v, down, toward))
    return np.where(np.isnan(v) | np.isnan(toward), np.nan, r)


@implements("nextafter", "exact", "the next value of the format toward b (the format's "
            "neighbours, not float64's); b where a == b")
def _nextafter(a, b):
    """The next value of the format after ``a`` toward ``b`` (the format's neighbours,
    not float64's); ``b`` is compared as given, and returned where it equals ``a``."""
    (va, _), fmt = operands(a, b)
    vb = np.asarray(values_of(b), dtype=np.float64)
    r = _neighbour(np.asarray(va, dtype=np.float64), vb, fmt)
    return Tensor(_no_negative_zero(np.asarray(r, dtype=np.float64), fmt), fmt)


@implements("spacing", "correctly rounded", "the next value of the format away from zero "
            "minus x (a power of two; inf past the max), one rounding")
def _spacing(x):
    """The distance from ``x`` to the next value of the format away from zero, one
    rounding. Past the largest finite value the distance is infinite: inf, or what
    rounding inf gives where the format has none (NaN, or its max for the formats
    without NaN)."""
    (v,), fmt = operands(x)
    away = np.where(v < 0, -np.inf, np.inf)     # NumPy: +0 and -0 both look up
    with np.errstate(all="ignore"):
        n = _neighbour(v, away, fmt)
        # A format without inf saturates the rounding up past its max: no neighbour.
        n = np.where(np.isfinite(v) & (n == v), away, n)
        d = n - v   # exact: neighbours of a format differ by a power of two
    return Tensor(np.asarray(round_ctx(d, fmt, None)), fmt)


@implements("fmod", "correctly rounded", "float64's fmod (exact), one rounding")
def _fmod(a, b):
    (va, vb), fmt = operands(a, b)
    with np.errstate(all="ignore"):
        r = np.fmod(va, vb)   # fmod is exact in float64 (|r| < |b|, a multiple of an ulp)
    return Tensor(np.asarray(round_ctx(r, fmt, None)), fmt)


@implements("remainder", "correctly rounded", "the exact fmod, plus b where the signs "
            "differ, one rounding")
def _remainder(a, b):
    """NumPy's ``a - floor(a/b)*b``: the exact ``fmod``, plus ``b`` where the signs
    differ (one correctly rounded addition), signed zeros as NumPy's."""
    (va, vb), fmt = operands(a, b)
    with np.errstate(all="ignore"):
        r = np.fmod(va, vb)   # exact in float64
        shift = (r != 0) & (np.signbit(r) != np.signbit(vb))
        ctx = get_context()
        moved = np.asarray(arith.add(r, vb, fmt, ctx.mode, **ctx.kwargs()))
        r = np.where(shift, moved, np.asarray(round_ctx(r, fmt, None)))
        r = np.where(r == 0, np.copysign(0.0, vb), r)
    return Tensor(_no_negative_zero(np.asarray(r, dtype=np.float64), fmt), fmt)


@implements("divmod", "rounded once", "(floor_divide, remainder), each as its own entry")
def _divmod(a, b):
    return HANDLED_UFUNCS["floor_divide"](a, b), _remainder(a, b)


@implements("frexp", "exact", "the significand (a Tensor) and the exponent (plain ints)")
def _frexp(x):
    """Exact: the significand in [0.5, 1) (a value of every format) and the exponent
    (plain int32, NumPy's)."""
    (v,), fmt = operands(x)
    m, e = np.frexp(v)
    return Tensor(_no_negative_zero(m, fmt), fmt), e


@implements("modf", "exact", "the fractional and integral parts, Tensors of the format")
def _modf(x):
    """Exact: the fractional and integral parts are values of the format."""
    (v,), fmt = operands(x)
    f, i = np.modf(v)
    f = np.asarray(round_ctx(f, fmt, None))   # exact, except a flushed tiny fraction
    return Tensor(_no_negative_zero(f, fmt), fmt), Tensor(_no_negative_zero(i, fmt), fmt)


@implements("ldexp", "rounded once", "float64's ldexp (exact inside float64's range), one "
            "rounding")
def _ldexp(x, n):
    (v,), fmt = operands(x)
    with np.errstate(all="ignore"):
        r = np.ldexp(v, values_of(n))
    return Tensor(np.asarray(round_ctx(r, fmt, None)), fmt)


@implements("heaviside", *_SELECT)
def _heaviside(x, h0):
    """Exact selection: 0 below zero, 1 above, ``h0`` (rounded in once) at zero."""
    return select(lambda v, h: np.heaviside(v, h))(x, h0)


def _logical(fn):
    def handler(*inputs):
        return fn(*(values_of(x) for x in inputs))
    return handler


@implements("reciprocal", *_ROUNDED)
def _reciprocal(x):
    return _kernel(arith.div)(1.0, x)   # one correct rounding


# The factory-made handlers: (ufunc names, factory or handler, (class, order)).
_TABLE: list[tuple[tuple[str, ...], Callable[..., Any], tuple[str, str]]] = [
    (("add",), _kernel(arith.add), _ROUNDED), (("subtract",), _kernel(arith.sub), _ROUNDED),
    (("multiply",), _kernel(arith.mul), _ROUNDED),
    (("divide", "true_divide"), _kernel(arith.div), _ROUNDED),
    (("sqrt",), _kernel(arith.sqrt), _ROUNDED),
    (("negative",), _exact_unary(np.negative), _EXACT),
    (("positive",), _exact_unary(np.positive), _EXACT),
    (("absolute", "fabs"), _exact_unary(np.absolute), _EXACT),
    (("sign",), _exact_unary(np.sign), _EXACT), (("floor",), _exact_unary(np.floor), _EXACT),
    (("ceil",), _exact_unary(np.ceil), _EXACT), (("trunc",), _exact_unary(np.trunc), _EXACT),
    (("rint",), _exact_unary(np.rint), _EXACT),
    (("conjugate",), _exact_unary(np.positive), _EXACT),
]
_TABLE += [((name,), select(getattr(np, name)), _SELECT)
           for name in ("maximum", "minimum", "fmax", "fmin")]
_TABLE += [((name,), _compare(getattr(np, name)), _BOOL)
           for name in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")]
_TABLE += [((name,), _predicate(getattr(np, name)), _BOOL)
           for name in ("isnan", "isinf", "isfinite", "signbit")]
_TABLE += [((name,), _logical(getattr(np, name)), _BOOL)
           for name in ("logical_and", "logical_or", "logical_xor", "logical_not")]
_TABLE += [((name,), _rounded_once(getattr(np, name)), _ONCE)
           for name in ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos",
                        "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh",
                        "arccosh", "arctanh", "cbrt", "arctan2", "hypot", "logaddexp",
                        "logaddexp2", "deg2rad", "rad2deg", "radians", "degrees",
                        "float_power", "floor_divide")]
for _names, _handler, _kind in _TABLE:
    for _name in _names:
        implements(_name, *_kind)(_handler)
