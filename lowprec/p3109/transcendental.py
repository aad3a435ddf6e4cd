"""IEEE P3109's transcendental operations (Interim Report v4.0, §4.10.9-§4.10.16).

Each operation decodes its operands, applies the report's special cases, and projects
a float64 that every rounding of the projection reads as it would the true value. A
fast path evaluates the function with NumPy and keeps the result where an error bound
proves it lies strictly between two neighbours of precision P + N + 1 (P the target's
precision, N the random bits). Elsewhere a slow path returns the result rounded to odd
at 53 bits. It detects exact results, and otherwise evaluates in `decimal` at growing
precision until an error bound decides that rounding (Ziv's strategy). The module
keeps no state and depends on NumPy only.

Its size (about 1,050 lines) has a reason: half of it is the 28 public functions, one
per operation of the report, each written out with its special cases in its docstring
so that grep finds every name the standard gives; the evaluation itself is shared.
"""

from __future__ import annotations

import decimal
import functools
import math
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..bits import decode
from ..formats import FormatLike
from ..formats import format as _format
from .arithmetic import sqrt_odd
from .formats import parameters
from .projection import STOCHASTIC, project

__all__ = ["exp", "exp2", "expm1", "log", "log2", "log1p", "softplus",
           "sin", "cos", "tan", "arcsin", "arccos", "arctan",
           "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh",
           "sinpi", "cospi", "tanpi", "arcsinpi", "arccospi", "arctanpi",
           "hypot", "arctan2", "arctan2pi"]

Codes = NDArray[np.unsignedinteger[Any]] | Any
F64 = NDArray[np.float64]

# NumPy's float64 libm calls are within a few ulp (about 2**-52 relative) on the
# formats' whole range; the fast path assumes 2**-48, 16 times that, for each function
# (the π-functions and Softplus compose two or three such steps and stay below 2**-49).
_ERR = 2.0 ** -48
_MARGIN = 2.0 ** -47        # _ERR, and the rounding of y * _MARGIN itself
_GUARD = 200                # decimal digits the slow path spends on cancellation
_TINY = Fraction(1, 2 ** 700)
_HUGE = Fraction(2 ** 600)
_TINY_STANDIN = 2.0 ** -1000
_HUGE_STANDIN = float(np.finfo(np.float64).max)
#: What `evaluate` gives for true values below 2**-700, and above 2**600 (see _odd53).
STAND_INS = (_TINY_STANDIN, _HUGE_STANDIN)


def _operand(x: ArrayLike, fmt: FormatLike) -> F64:
    """ωDecode of code points ``x`` of the P3109 format ``fmt``."""
    parameters(fmt)
    return np.asarray(decode(x, fmt), dtype=np.float64)


def boundary_bits(fr: FormatLike, rounding: str, n_bits: int | None) -> int:
    """P + N + 1: the precision of every boundary a projection into ``fr`` reads."""
    n = int(n_bits) if rounding in STOCHASTIC and n_bits is not None else 0
    if _format(fr).p + n + 2 > 53:
        raise ValueError(f"n_bits={n_bits} with precision {_format(fr).p}: an operation's "
                         f"exact result keeps P + N + 2 <= 53 bits, so n_bits <= "
                         f"{51 - _format(fr).p}")
    return _format(fr).p + n + 1


def _decided(y: F64, q: int) -> NDArray[np.bool_]:
    """Where every value within _ERR of ``y`` lies strictly inside one cell of the
    numbers of ``q`` significant bits: there ``y`` projects as the true value does."""
    a = np.abs(y)
    ok = np.isfinite(a) & (a > 2.0 ** -1000) & (a < 2.0 ** 1000)
    a = np.where(ok, a, 1.0)
    lo, hi = a - a * _MARGIN, a + a * _MARGIN
    e = np.frexp(lo)[1]
    slo, shi = np.ldexp(lo, q - e), np.ldexp(hi, q - e)   # exact: power-of-two scalings
    return ok & (np.floor(slo) == np.floor(shi)) & (slo != np.floor(slo))


def _odd53(v: Fraction, eps: Fraction) -> float | None:
    """The true value rounded to odd at 53 bits, given ``v`` within relative ``eps`` of
    it, or None where that interval holds a 53-bit number."""
    if v == 0:
        return None
    s = -1.0 if v < 0 else 1.0
    v = abs(v)
    # Every P3109 format (K <= 15, K - P <= 10) lies within 2**-530 .. 2**520: all of
    # (0, 2**-600) rounds alike, and so does all of (2**600, inf), in every mode.
    if v < _TINY:
        return s * _TINY_STANDIN
    if v > _HUGE:
        return s * _HUGE_STANDIN
    lo, hi = v * (1 - eps), v * (1 + eps)
    e = lo.numerator.bit_length() - lo.denominator.bit_length()
    if Fraction(2) ** e > lo:
        e -= 1
    slo, shi = lo * Fraction(2) ** (52 - e), hi * Fraction(2) ** (52 - e)
    t = math.floor(slo)
    if t != math.floor(shi) or t == slo:
        return None
    return s * math.ldexp(float(t | 1), e - 52)       # sticky bit: the result is inexact


Slow = Callable[..., "Decimal | float"]


def _slow(fn: Slow, *xs: float) -> float:
    """``fn(context, *xs)`` rounded to odd at 53 bits: exact where ``fn`` says so,
    else by `decimal` at 40, 80, ... digits until the bound decides."""
    digits = 40
    while digits <= 2560:
        ctx = decimal.Context(prec=digits + _GUARD, Emax=decimal.MAX_EMAX,
                              Emin=decimal.MIN_EMIN, traps=[])
        with decimal.localcontext(ctx):
            v = fn(*xs)
        if isinstance(v, float):
            return v
        # fn's result is within 10**-digits relative: _GUARD digits cover its
        # cancellations and the reduction of arguments up to 2**520.
        r = _odd53(Fraction(v), Fraction(1, 10 ** digits))
        if r is not None:
            return r
        digits *= 2
    raise ArithmeticError(f"no rounding decided for {fn.__name__}{xs}")


# Elementary functions in `decimal`, at the context's precision.

@functools.cache
def _pi(prec: int) -> Decimal:
    """π to ``prec`` digits (Machin: π = 16 arctan(1/5) - 4 arctan(1/239))."""
    with decimal.localcontext(decimal.Context(prec=prec + 10, traps=[])):
        p = 16 * _atan_series(Decimal(1) / 5) - 4 * _atan_series(Decimal(1) / 239)
    return +p


def _pi_here() -> Decimal:
    return _pi(decimal.getcontext().prec)


def _atan_series(x: Decimal) -> Decimal:
    """arctan(x) for |x| <= 1/4 by its Taylor series."""
    x2, term, total, k = x * x, x, x, 1
    eps = Decimal(10) ** (-decimal.getcontext().prec - 2)
    while abs(term) > eps * abs(total):
        term = -term * x2
        k += 2
        total += term / k
    return total


def _d_atan(x: Decimal) -> Decimal:
    if x < 0:
        return -_d_atan(-x)
    if x > 1:
        return _pi_here() / 2 - _d_atan(1 / x)
    for _ in range(2):                               # arctan x = 2 arctan(x / (1 + sqrt(1 + x²)))
        x = x / (1 + (1 + x * x).sqrt())
    return 4 * _atan_series(x)


def _sincos_series(r: Decimal) -> tuple[Decimal, Decimal]:
    """(sin r, cos r) for |r| <= π/4 by their Taylor series."""
    eps = Decimal(10) ** (-decimal.getcontext().prec - 2)
    r2 = r * r
    s, term, k = r, r, 1
    while abs(term) > eps:
        term = -term * r2 / ((k + 1) * (k + 2))
        k += 2
        s += term
    c, term, k = Decimal(1), Decimal(1), 0
    while abs(term) > eps:
        term = -term * r2 / ((k + 1) * (k + 2))
        k += 2
        c += term
    return s, c


def _d_sincos(x: Decimal) -> tuple[Decimal, Decimal]:
    half_pi = _pi_here() / 2
    k = (x / half_pi).to_integral_value(rounding=decimal.ROUND_HALF_EVEN)
    s, c = _sincos_series(x - k * half_pi)
    return [(s, c), (c, -s), (-s, -c), (-c, s)][int(k) % 4]


def _d_asin(x: Decimal) -> Decimal:
    if abs(x) == 1:
        return x * _pi_here() / 2
    return _d_atan(x / (1 - x * x).sqrt())


# The operations: special cases, the fast path and the slow path of each.

class _Op(NamedTuple):
    fast: Callable[..., F64]
    special: Callable[..., tuple[NDArray[np.bool_], F64]]
    slow: Slow


def _none(*a: F64) -> tuple[NDArray[np.bool_], F64]:
    return np.isnan(a[0]), np.full(a[0].shape, np.nan)


def _cases(x: F64, *rules: tuple[Any, float]) -> tuple[NDArray[np.bool_], F64]:
    """The first rule (mask, value) that holds, NaN in for NaN out."""
    done = np.isnan(x)
    out = np.full(x.shape, np.nan)
    for mask, value in rules:
        m = np.asarray(mask) & ~done
        out[m] = np.broadcast_to(value, x.shape)[m]
        done |= m
    return done, out


def _pinf(x: F64) -> Any:
    return x == np.inf


def _ninf(x: F64) -> Any:
    return x == -np.inf


def _exact_int(x: float) -> bool:
    return float(x).is_integer()


def _s_exp(x: float) -> Decimal | float:
    if x == 0:
        return 1.0                                   # the only rational exp of a rational
    if abs(x) > 2000:
        return _HUGE_STANDIN if x > 0 else _TINY_STANDIN
    return Decimal(x).exp()


def _s_exp2(x: float) -> Decimal | float:
    if abs(x) > 1000:
        return _HUGE_STANDIN if x > 0 else _TINY_STANDIN
    if _exact_int(x):
        return math.ldexp(1.0, int(x))
    return (Decimal(x) * Decimal(2).ln()).exp()


def _s_expm1(x: float) -> Decimal | float:
    if x == 0:
        return 0.0
    if x > 2000:
        return _HUGE_STANDIN
    if x < -40:
        return -(1 - 2.0 ** -53)                     # -1 + e**x with 0 < e**x < 2**-57
    return Decimal(x).exp() - 1


def _s_log(x: float) -> Decimal | float:
    return 0.0 if x == 1 else Decimal(x).ln()


def _s_log2(x: float) -> Decimal | float:
    m, e = math.frexp(x)
    if m == 0.5:
        return float(e - 1)                          # log2 of a power of two
    return Decimal(x).ln() / Decimal(2).ln()


def _s_log1p(x: float) -> Decimal | float:
    return 0.0 if x == 0 else (1 + Decimal(x)).ln()


def _s_softplus(x: float) -> Decimal | float:
    if x > 40:
        return float(np.nextafter(x, np.inf))        # x + δ, 0 < δ < 2**-57 x: odd above x
    if x < -2000:
        return _TINY_STANDIN
    return (1 + Decimal(x).exp()).ln()


def _s_sin(x: float) -> Decimal | float:
    return 0.0 if x == 0 else _d_sincos(Decimal(x))[0]


def _s_cos(x: float) -> Decimal | float:
    return 1.0 if x == 0 else _d_sincos(Decimal(x))[1]


def _s_tan(x: float) -> Decimal | float:
    if x == 0:
        return 0.0
    s, c = _d_sincos(Decimal(x))
    return s / c


def _s_arcsin(x: float) -> Decimal | float:
    return 0.0 if x == 0 else _d_asin(Decimal(x))


def _s_arccos(x: float) -> Decimal | float:
    return 0.0 if x == 1 else _pi_here() / 2 - _d_asin(Decimal(x))


def _s_arctan(x: float) -> Decimal | float:
    return 0.0 if x == 0 else _d_atan(Decimal(x))


def _s_sinh(x: float) -> Decimal | float:
    if x == 0:
        return 0.0
    if abs(x) > 2000:
        return math.copysign(_HUGE_STANDIN, x)
    e = Decimal(x).exp()
    return (e - 1 / e) / 2


def _s_cosh(x: float) -> Decimal | float:
    if x == 0:
        return 1.0
    if abs(x) > 2000:
        return _HUGE_STANDIN
    e = Decimal(x).exp()
    return (e + 1 / e) / 2


def _s_tanh(x: float) -> Decimal | float:
    if x == 0:
        return 0.0
    if abs(x) > 20:
        return math.copysign(1 - 2.0 ** -53, x)      # ±(1 - δ), 0 < δ < 2e**-40 < 2**-55
    e = (2 * Decimal(x)).exp()
    return (e - 1) / (e + 1)


def _s_arcsinh(x: float) -> Decimal | float:
    if x == 0:
        return 0.0
    a = abs(Decimal(x))
    r = (a + (a * a + 1).sqrt()).ln()
    return r if x > 0 else -r


def _s_arccosh(x: float) -> Decimal | float:
    if x == 1:
        return 0.0
    a = Decimal(x)
    return (a + (a * a - 1).sqrt()).ln()


def _s_arctanh(x: float) -> Decimal | float:
    if x == 0:
        return 0.0
    a = Decimal(x)
    return ((1 + a) / (1 - a)).ln() / 2


def _mod2(x: float) -> float:
    """x - 2n in (-1, 1]: exact, since fmod of floats is exact."""
    r = math.fmod(x, 2.0)
    return r - 2 if r > 1 else (r + 2 if r <= -1 else r)


def _s_sinpi(x: float) -> Decimal | float:
    r = _mod2(x)
    if (2 * r).is_integer():
        return [0.0, 1.0, 0.0, -1.0][int(2 * r) % 4]    # sin of a multiple of π/2
    return _d_sincos(Decimal(r) * _pi_here())[0]


def _s_cospi(x: float) -> Decimal | float:
    r = _mod2(x)
    if (2 * r).is_integer():
        return [1.0, 0.0, -1.0, 0.0][int(2 * r) % 4]
    return _d_sincos(Decimal(r) * _pi_here())[1]


def _s_tanpi(x: float) -> Decimal | float:
    r = math.fmod(x, 1.0)
    if (4 * r).is_integer():                             # tan of a multiple of π/4
        return [0.0, 1.0, math.nan, -1.0][int(4 * r) % 4]
    s, c = _d_sincos(Decimal(r) * _pi_here())
    return s / c


def _s_arcsinpi(x: float) -> Decimal | float:
    if x in (0.0, 1.0, -1.0):
        return x / 2                                     # arcsin(±1)/π = ±1/2
    return _d_asin(Decimal(x)) / _pi_here()


def _s_arccospi(x: float) -> Decimal | float:
    if x in (0.0, 1.0, -1.0):
        return (1 - x) / 2
    return Decimal(1) / 2 - _d_asin(Decimal(x)) / _pi_here()


def _s_arctanpi(x: float) -> Decimal | float:
    if x in (0.0, 1.0, -1.0):
        return x / 4
    return _d_atan(Decimal(x)) / _pi_here()


def _s_hypot(x: float, y: float) -> Decimal | float:
    q = Fraction(x) ** 2 + Fraction(y) ** 2
    return sqrt_odd(q)


def _s_arctan2(y: float, x: float) -> Decimal | float:
    a = _d_atan(Decimal(y) / Decimal(x))
    if x > 0:
        return a
    return a + _pi_here() if y > 0 else a - _pi_here()


def _s_arctan2pi(y: float, x: float) -> Decimal | float:
    if abs(y) == abs(x):
        return math.copysign(0.25 if x > 0 else 0.75, y)
    a = _d_atan(Decimal(y) / Decimal(x)) / _pi_here()
    if x > 0:
        return a
    return a + 1 if y > 0 else a - 1


_PI = _slow(lambda: _pi_here())          # π, π/2 and π/4 rounded to odd at 53 bits
_HALF_PI = _slow(lambda: _pi_here() / 2)


def _reduce_pi(x: F64) -> tuple[F64, F64]:
    """(r, n) with x = n/2 + r, |r| <= 1/4, n an integer: exact for these operands."""
    n = np.where(np.isfinite(x), np.round(2 * np.where(np.isfinite(x), x, 0)), 0)
    return x - n / 2, np.mod(n, 4)


def _f_sinpi(x: F64) -> F64:
    r, n = _reduce_pi(x)
    s, c = np.sin(np.pi * r), np.cos(np.pi * r)
    return np.choose(n.astype(np.int64), [s, c, -s, -c])


def _f_cospi(x: F64) -> F64:
    r, n = _reduce_pi(x)
    s, c = np.sin(np.pi * r), np.cos(np.pi * r)
    return np.choose(n.astype(np.int64), [c, -s, -c, s])


def _f_tanpi(x: F64) -> F64:
    r, n = _reduce_pi(x)
    t = np.tan(np.pi * r)
    return np.where(n % 2 == 0, t, -1 / t)


def _f_softplus(x: F64) -> F64:
    return np.where(x > 0, x + np.log1p(np.exp(-x)), np.log1p(np.exp(x)))


def _f_arctan2(y: F64, x: F64) -> F64:
    return np.arctan2(y, x)


_OPS: dict[str, _Op] = {
    "exp": _Op(np.exp, lambda x: _cases(x, (_pinf(x), np.inf), (_ninf(x), 0.0)), _s_exp),
    "exp2": _Op(np.exp2, lambda x: _cases(x, (_pinf(x), np.inf), (_ninf(x), 0.0)), _s_exp2),
    "expm1": _Op(np.expm1, lambda x: _cases(x, (_pinf(x), np.inf), (_ninf(x), -1.0)),
                 _s_expm1),
    "log": _Op(np.log, lambda x: _cases(x, (x < 0, np.nan), (_pinf(x), np.inf),
                                        (x == 0, -np.inf)), _s_log),
    "log2": _Op(np.log2, lambda x: _cases(x, (x < 0, np.nan), (_pinf(x), np.inf),
                                          (x == 0, -np.inf)), _s_log2),
    "log1p": _Op(np.log1p, lambda x: _cases(x, (x < -1, np.nan), (_pinf(x), np.inf),
                                            (x == -1, -np.inf)), _s_log1p),
    "softplus": _Op(_f_softplus, lambda x: _cases(x, (_pinf(x), np.inf), (_ninf(x), 0.0)),
                    _s_softplus),
    "sin": _Op(np.sin, lambda x: _cases(x, (np.isinf(x), np.nan)), _s_sin),
    "cos": _Op(np.cos, lambda x: _cases(x, (np.isinf(x), np.nan)), _s_cos),
    "tan": _Op(np.tan, lambda x: _cases(x, (np.isinf(x), np.nan)), _s_tan),
    "arcsin": _Op(np.arcsin, lambda x: _cases(x, (np.abs(x) > 1, np.nan)), _s_arcsin),
    "arccos": _Op(np.arccos, lambda x: _cases(x, (np.abs(x) > 1, np.nan)), _s_arccos),
    "arctan": _Op(np.arctan, lambda x: _cases(x, (_pinf(x), _HALF_PI),
                                              (_ninf(x), -_HALF_PI)), _s_arctan),
    "sinh": _Op(np.sinh, lambda x: _cases(x, (np.isinf(x), x)), _s_sinh),
    "cosh": _Op(np.cosh, lambda x: _cases(x, (np.isinf(x), np.inf)), _s_cosh),
    "tanh": _Op(np.tanh, lambda x: _cases(x, (_pinf(x), 1.0), (_ninf(x), -1.0)), _s_tanh),
    "arcsinh": _Op(np.arcsinh, lambda x: _cases(x, (np.isinf(x), x)), _s_arcsinh),
    "arccosh": _Op(np.arccosh, lambda x: _cases(x, (x < 1, np.nan), (_pinf(x), np.inf)),
                   _s_arccosh),
    "arctanh": _Op(np.arctanh, lambda x: _cases(x, (np.abs(x) > 1, np.nan), (x == 1, np.inf),
                                                (x == -1, -np.inf)), _s_arctanh),
    "sinpi": _Op(_f_sinpi, lambda x: _cases(x, (np.isinf(x), np.nan)), _s_sinpi),
    "cospi": _Op(_f_cospi, lambda x: _cases(x, (np.isinf(x), np.nan)), _s_cospi),
    "tanpi": _Op(_f_tanpi, lambda x: _cases(x, (np.isinf(x), np.nan)), _s_tanpi),
    "arcsinpi": _Op(lambda x: np.arcsin(x) / np.pi,
                    lambda x: _cases(x, (np.abs(x) > 1, np.nan)), _s_arcsinpi),
    "arccospi": _Op(lambda x: np.arccos(x) / np.pi,
                    lambda x: _cases(x, (np.abs(x) > 1, np.nan)), _s_arccospi),
    "arctanpi": _Op(lambda x: np.arctan(x) / np.pi,
                    lambda x: _cases(x, (_pinf(x), 0.5), (_ninf(x), -0.5)), _s_arctanpi),
}


def _binary_cases(y: F64, x: F64, pi: float, half_pi: float) -> tuple[NDArray[np.bool_], F64]:
    """§4.10.15's rules for ArcTan2(y, x) in the report's order, in units where π is
    ``pi``."""
    done = np.isnan(y) | np.isnan(x)
    out = np.full(np.broadcast_shapes(y.shape, x.shape), np.nan)
    done = np.broadcast_to(done, out.shape).copy()
    y, x = np.broadcast_to(y, out.shape), np.broadcast_to(x, out.shape)
    rules = [((y == 0) & (x == 0), np.nan), (np.isinf(y) & np.isinf(x), np.nan),
             (x == np.inf, 0.0), ((y == 0) & (x > 0), 0.0),
             (y == np.inf, half_pi), ((y > 0) & (x == 0), half_pi),
             (x == -np.inf, pi), ((y == 0) & (x < 0), pi),
             (y == -np.inf, -half_pi), ((y < 0) & (x == 0), -half_pi)]
    for mask, value in rules:
        m = mask & ~done
        out[m] = value
        done |= m
    return done, out


_BINARY: dict[str, _Op] = {
    "hypot": _Op(np.hypot, lambda x, y: _hypot_cases(x, y), _s_hypot),
    "arctan2": _Op(_f_arctan2, lambda y, x: _binary_cases(y, x, _PI, _HALF_PI), _s_arctan2),
    "arctan2pi": _Op(lambda y, x: np.arctan2(y, x) / np.pi,
                     lambda y, x: _binary_cases(y, x, 1.0, 0.5), _s_arctan2pi),
}


def _hypot_cases(x: F64, y: F64) -> tuple[NDArray[np.bool_], F64]:
    nan = np.isnan(x) | np.isnan(y)
    inf = ~nan & (np.isinf(x) | np.isinf(y))
    zero = ~nan & (x == 0) & (y == 0)
    return nan | inf | zero, np.where(inf, np.inf, np.where(zero, 0.0, np.nan))


def _evaluate(op: _Op, args: tuple[F64, ...], q: int) -> F64:
    """The float64 each element projects from: fast where decided, else slow."""
    with np.errstate(all="ignore"):
        y = np.array(op.fast(*args), dtype=np.float64)
        done, value = op.special(*args)
    y = np.where(done, value, y)
    flat = [np.broadcast_to(a, y.shape).reshape(-1) for a in args]
    out = y.reshape(-1).copy()
    for i in np.flatnonzero(~done.reshape(-1) & ~_decided(out, q)):
        out[i] = _slow(op.slow, *(float(a[i]) for a in flat))
    return out.reshape(y.shape)


def evaluate(name: str, *args: F64, q: int) -> F64:
    """The float64 that operation ``name`` at float64 ``args`` projects from.

    Every projection whose boundaries have ``q`` significant bits reads it as it
    would the true value. A result in `STAND_INS` says only that the true value lies
    below 2**-700 or above 2**600. The block operations call it too."""
    if len(args) == 2:
        return _evaluate(_BINARY[name], args, q)
    a = np.asarray(args[0], dtype=np.float64)
    u, inv = np.unique(a.reshape(-1), return_inverse=True)
    return _evaluate(_OPS[name], (u,), q)[inv].reshape(a.shape)


def _unary(name: str, x: ArrayLike, fx: FormatLike, fr: FormatLike, rounding: str,
           saturation: str, random_bits: ArrayLike | None, n_bits: int | None) -> Codes:
    a = _operand(x, fx)
    v = evaluate(name, a, q=boundary_bits(fr, rounding, n_bits))
    return project(v, _format(fr), rounding, saturation, random_bits=random_bits,
                   n_bits=n_bits)


def _binary(name: str, x: ArrayLike, y: ArrayLike, fx: FormatLike, fy: FormatLike,
            fr: FormatLike, rounding: str, saturation: str, random_bits: ArrayLike | None,
            n_bits: int | None) -> Codes:
    a, b = _operand(x, fx), _operand(y, fy)
    v = evaluate(name, a, b, q=boundary_bits(fr, rounding, n_bits))
    return project(v, _format(fr), rounding, saturation, random_bits=random_bits,
                   n_bits=n_bits)


def exp(x: ArrayLike, fx: FormatLike, fr: FormatLike,
        rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
        random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """Exp<fx, fr, rho>(x): e**x rounded once into ``fr`` (§4.10.9).

    exp(0) is exactly 1.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.exp(0x00, f, f), f))
    1.0
    """
    return _unary("exp", x, fx, fr, rounding, saturation, random_bits, n_bits)


def exp2(x: ArrayLike, fx: FormatLike, fr: FormatLike,
         rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
         random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """Exp2<fx, fr, rho>(x): 2**x rounded once into ``fr`` (§4.10.9).

    Integers give exact powers of two.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.exp2(0x48, f, f), f))
    16.0
    """
    return _unary("exp2", x, fx, fr, rounding, saturation, random_bits, n_bits)


def expm1(x: ArrayLike, fx: FormatLike, fr: FormatLike,
          rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
          random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """ExpMinusOne<fx, fr, rho>(x): e**x - 1 rounded once into ``fr`` (§4.10.9).

    -inf gives -1.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.expm1(0xff, f, f), f))
    -1.0
    """
    return _unary("expm1", x, fx, fr, rounding, saturation, random_bits, n_bits)


def log(x: ArrayLike, fx: FormatLike, fr: FormatLike,
        rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
        random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """Log<fx, fr, rho>(x): the natural logarithm rounded once into ``fr`` (§4.10.9).

    0 gives -inf and negative operands NaN.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.log(0x00, f, f), f))
    -inf
    """
    return _unary("log", x, fx, fr, rounding, saturation, random_bits, n_bits)


def log2(x: ArrayLike, fx: FormatLike, fr: FormatLike,
         rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
         random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """Log2<fx, fr, rho>(x): the base-2 logarithm rounded once into ``fr`` (§4.10.9).

    Powers of two give exact integers.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.log2(0x4c, f, f), f))
    3.0
    """
    return _unary("log2", x, fx, fr, rounding, saturation, random_bits, n_bits)


def log1p(x: ArrayLike, fx: FormatLike, fr: FormatLike,
          rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
          random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """LogOnePlus<fx, fr, rho>(x): log(1 + x) rounded once into ``fr`` (§4.10.9).

    -1 gives -inf and operands below -1 NaN.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.log1p(0xc0, f, f), f))
    -inf
    """
    return _unary("log1p", x, fx, fr, rounding, saturation, random_bits, n_bits)


def softplus(x: ArrayLike, fx: FormatLike, fr: FormatLike,
             rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
             random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """Softplus<fx, fr, rho>(x): log(1 + e**x) rounded once into ``fr`` (§4.10.13).

    -inf gives 0.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.softplus(0xff, f, f), f))
    0.0
    """
    return _unary("softplus", x, fx, fr, rounding, saturation, random_bits, n_bits)


def sin(x: ArrayLike, fx: FormatLike, fr: FormatLike,
        rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
        random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """Sin<fx, fr, rho>(x): the sine rounded once into ``fr`` (§4.10.10).

    ±inf give NaN.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.sin(0x00, f, f), f))
    0.0
    """
    return _unary("sin", x, fx, fr, rounding, saturation, random_bits, n_bits)


def cos(x: ArrayLike, fx: FormatLike, fr: FormatLike,
        rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
        random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """Cos<fx, fr, rho>(x): the cosine rounded once into ``fr`` (§4.10.10).

    ±inf give NaN.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.cos(0x00, f, f), f))
    1.0
    """
    return _unary("cos", x, fx, fr, rounding, saturation, random_bits, n_bits)


def tan(x: ArrayLike, fx: FormatLike, fr: FormatLike,
        rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
        random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """Tan<fx, fr, rho>(x): the tangent rounded once into ``fr`` (§4.10.10).

    ±inf give NaN.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.tan(0x00, f, f), f))
    0.0
    """
    return _unary("tan", x, fx, fr, rounding, saturation, random_bits, n_bits)


def arcsin(x: ArrayLike, fx: FormatLike, fr: FormatLike,
           rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
           random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """ArcSin<fx, fr, rho>(x): the inverse sine rounded once into ``fr`` (§4.10.10).

    Operands outside [-1, 1] give NaN.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.arcsin(0x48, f, f), f))
    nan
    """
    return _unary("arcsin", x, fx, fr, rounding, saturation, random_bits, n_bits)


def arccos(x: ArrayLike, fx: FormatLike, fr: FormatLike,
           rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
           random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """ArcCos<fx, fr, rho>(x): the inverse cosine rounded once into ``fr`` (§4.10.10).

    Operands outside [-1, 1] give NaN.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.arccos(0x40, f, f), f))
    0.0
    """
    return _unary("arccos", x, fx, fr, rounding, saturation, random_bits, n_bits)


def arctan(x: ArrayLike, fx: FormatLike, fr: FormatLike,
           rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
           random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """ArcTan<fx, fr, rho>(x): the inverse tangent rounded once into ``fr`` (§4.10.10).

    ±inf give ±π/2 rounded.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.arctan(0x7f, f, f), f))
    1.5
    """
    return _unary("arctan", x, fx, fr, rounding, saturation, random_bits, n_bits)


def sinh(x: ArrayLike, fx: FormatLike, fr: FormatLike,
         rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
         random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """Sinh<fx, fr, rho>(x): the hyperbolic sine rounded once into ``fr`` (§4.10.11).

    ±inf give ±inf.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.sinh(0x00, f, f), f))
    0.0
    """
    return _unary("sinh", x, fx, fr, rounding, saturation, random_bits, n_bits)


def cosh(x: ArrayLike, fx: FormatLike, fr: FormatLike,
         rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
         random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """Cosh<fx, fr, rho>(x): the hyperbolic cosine rounded once into ``fr`` (§4.10.11).

    ±inf give +inf.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.cosh(0x00, f, f), f))
    1.0
    """
    return _unary("cosh", x, fx, fr, rounding, saturation, random_bits, n_bits)


def tanh(x: ArrayLike, fx: FormatLike, fr: FormatLike,
         rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
         random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """Tanh<fx, fr, rho>(x): the hyperbolic tangent rounded once into ``fr`` (§4.10.11).

    ±inf give ±1.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.tanh(0x7f, f, f), f))
    1.0
    """
    return _unary("tanh", x, fx, fr, rounding, saturation, random_bits, n_bits)


def arcsinh(x: ArrayLike, fx: FormatLike, fr: FormatLike,
            rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
            random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """ArcSinh<fx, fr, rho>(x): the inverse hyperbolic sine rounded once into ``fr`` (§4.10.11).

    ±inf give ±inf.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.arcsinh(0x00, f, f), f))
    0.0
    """
    return _unary("arcsinh", x, fx, fr, rounding, saturation, random_bits, n_bits)


def arccosh(x: ArrayLike, fx: FormatLike, fr: FormatLike,
            rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
            random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """ArcCosh<fx, fr, rho>(x): the inverse hyperbolic cosine rounded once into ``fr`` (§4.10.11).

    Operands below 1 give NaN.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.arccosh(0x40, f, f), f))
    0.0
    """
    return _unary("arccosh", x, fx, fr, rounding, saturation, random_bits, n_bits)


def arctanh(x: ArrayLike, fx: FormatLike, fr: FormatLike,
            rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
            random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """ArcTanh<fx, fr, rho>(x): the inverse hyperbolic tangent rounded once into ``fr`` (§4.10.11).

    ±1 give ±inf and operands outside [-1, 1] NaN.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.arctanh(0x40, f, f), f))
    inf
    """
    return _unary("arctanh", x, fx, fr, rounding, saturation, random_bits, n_bits)


def sinpi(x: ArrayLike, fx: FormatLike, fr: FormatLike,
          rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
          random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """SinPi<fx, fr, rho>(x): sin(πx) rounded once into ``fr`` (§4.10.12).

    Multiples of 1/2 give exact results. ±inf give NaN.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.sinpi(0x3c, f, f), f))
    1.0
    """
    return _unary("sinpi", x, fx, fr, rounding, saturation, random_bits, n_bits)


def cospi(x: ArrayLike, fx: FormatLike, fr: FormatLike,
          rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
          random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """CosPi<fx, fr, rho>(x): cos(πx) rounded once into ``fr`` (§4.10.12).

    Multiples of 1/2 give exact results. ±inf give NaN.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.cospi(0x40, f, f), f))
    -1.0
    """
    return _unary("cospi", x, fx, fr, rounding, saturation, random_bits, n_bits)


def tanpi(x: ArrayLike, fx: FormatLike, fr: FormatLike,
          rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
          random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """TanPi<fx, fr, rho>(x): tan(πx) rounded once into ``fr`` (§4.10.12).

    Odd multiples of 1/2 give NaN, odd multiples of 1/4 give ±1.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.tanpi(0x3c, f, f), f))
    nan
    """
    return _unary("tanpi", x, fx, fr, rounding, saturation, random_bits, n_bits)


def arcsinpi(x: ArrayLike, fx: FormatLike, fr: FormatLike,
             rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
             random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """ArcSinPi<fx, fr, rho>(x): arcsin(x)/π rounded once into ``fr`` (§4.10.12).

    Operands outside [-1, 1] give NaN.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.arcsinpi(0x40, f, f), f))
    0.5
    """
    return _unary("arcsinpi", x, fx, fr, rounding, saturation, random_bits, n_bits)


def arccospi(x: ArrayLike, fx: FormatLike, fr: FormatLike,
             rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
             random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """ArcCosPi<fx, fr, rho>(x): arccos(x)/π rounded once into ``fr`` (§4.10.12).

    Operands outside [-1, 1] give NaN.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.arccospi(0x00, f, f), f))
    0.5
    """
    return _unary("arccospi", x, fx, fr, rounding, saturation, random_bits, n_bits)


def arctanpi(x: ArrayLike, fx: FormatLike, fr: FormatLike,
             rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
             random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """ArcTanPi<fx, fr, rho>(x): arctan(x)/π rounded once into ``fr`` (§4.10.12).

    ±inf give ±1/2.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.arctanpi(0x40, f, f), f))
    0.25
    """
    return _unary("arctanpi", x, fx, fr, rounding, saturation, random_bits, n_bits)


def hypot(x: ArrayLike, y: ArrayLike, fx: FormatLike, fy: FormatLike, fr: FormatLike,
          rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
          random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """Hypot<fx, fy, fr, rho>(x, y): sqrt(x² + y²) rounded once into ``fr`` (§4.10.14).

    ±inf give +inf, NaN first. The root is exact where it is rational.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.hypot(lp.encode(3.0, f), lp.encode(4.0, f), f, f, f), f))
    5.0
    """
    return _binary("hypot", x, y, fx, fy, fr, rounding, saturation, random_bits, n_bits)


def arctan2(y: ArrayLike, x: ArrayLike, fy: FormatLike, fx: FormatLike, fr: FormatLike,
            rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
            random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """ArcTan2<fy, fx, fr, rho>(y, x): the angle of (x, y) rounded once into ``fr`` (§4.10.15).

    ArcTan2(0, 0) and ArcTan2(±inf, ±inf) give NaN.
    ArcTan2(y, -inf) is π for every finite y: the report's rules apply in order.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.arctan2(lp.encode(1.0, f), lp.encode(-1.0, f), f, f, f), f))
    2.5
    """
    return _binary("arctan2", y, x, fy, fx, fr, rounding, saturation, random_bits, n_bits)


def arctan2pi(y: ArrayLike, x: ArrayLike, fy: FormatLike, fx: FormatLike, fr: FormatLike,
              rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
              random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """ArcTan2Pi<fy, fx, fr, rho>(y, x): ArcTan2(y, x)/π rounded once into ``fr`` (§4.10.16).

    The rules are ArcTan2's, with π read as 1.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.arctan2pi(lp.encode(1.0, f), lp.encode(-1.0, f), f, f, f), f))
    0.75
    """
    return _binary("arctan2pi", y, x, fy, fx, fr, rounding, saturation, random_bits, n_bits)
