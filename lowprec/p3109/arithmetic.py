"""IEEE P3109's arithmetic operations (Interim Report v4.0, §4.10) on code points.

Each operation decodes its operands, computes the exact result on the closed extended
reals, and projects it once (`project`). The exact result is carried as the float64
rounded to odd of the true value. With 53 >= P + N + 2 bits (P the target's precision,
N the random bits) that rounding keeps every fact a projection reads: the integer
part of the scaled significand, whether nu is 0, 1/2 or neither, and nu's first N bits
(round-to-odd, Boldo and Melquiond 2008). The module keeps no state.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..arith import add as _add
from ..arith import div as _div
from ..arith import fma as _fma
from ..arith import mul as _mul
from ..arith import sqrt as _sqrt
from ..bits import decode
from ..engine.eft import odd, three_sum, two_sum
from ..formats import FP64, FormatLike
from ..formats import format as _format
from .formats import parameters
from .projection import STOCHASTIC, project

__all__ = ["negate", "absolute", "copysign", "add", "subtract", "multiply", "divide", "fma", "faa",
           "sqrt", "recip", "rsqrt"]

Codes = NDArray[np.unsignedinteger[Any]] | Any


def _operand(x: ArrayLike, fmt: FormatLike, name: str) -> NDArray[np.float64]:
    """ωDecode of code points ``x`` of the P3109 format ``fmt``."""
    parameters(fmt)
    return np.asarray(decode(x, fmt), dtype=np.float64)


def _project(r: NDArray[np.float64], fr: FormatLike, rounding: str, saturation: str,
             random_bits: ArrayLike | None, n_bits: int | None) -> Codes:
    f = _format(fr)
    if rounding in STOCHASTIC and n_bits is not None and f.p + int(n_bits) + 2 > 53:
        raise ValueError(f"n_bits={n_bits} with precision {f.p}: an operation's exact "
                         f"result keeps P + N + 2 <= 53 bits, so n_bits <= {51 - f.p}")
    return project(r, f, rounding, saturation, random_bits=random_bits, n_bits=n_bits)


def negate(x: ArrayLike, fx: FormatLike, fr: FormatLike,
           rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
           random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """Negate<fx, fr, rho>(x): -x projected into ``fr`` (§4.10.1).

    Examples
    --------
    >>> import lowprec as lp
    >>> hex(lp.p3109.negate(0x41, "binary8p3se", "binary8p3se"))
    '0xc1'
    """
    r = -_operand(x, fx, "x")                        # exact
    return _project(r, fr, rounding, saturation, random_bits, n_bits)


def absolute(x: ArrayLike, fx: FormatLike, fr: FormatLike,
             rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
             random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """Abs<fx, fr, rho>(x): |x| projected into ``fr`` (§4.10.1).

    Examples
    --------
    >>> import lowprec as lp
    >>> hex(lp.p3109.absolute(0xff, "binary8p3se", "binary8p3se"))
    '0x7f'
    """
    r = np.abs(_operand(x, fx, "x"))                 # exact
    return _project(r, fr, rounding, saturation, random_bits, n_bits)


def add(x: ArrayLike, y: ArrayLike, fx: FormatLike, fy: FormatLike, fr: FormatLike,
        rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
        random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """Add<fx, fy, fr, rho>(x, y): x + y rounded once into ``fr`` (§4.10.3).

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> int(lp.p3109.add(lp.encode(1.0, f), lp.encode(0.25, f), f, f, f))  # 1.25
    65
    """
    a, b = _operand(x, fx, "x"), _operand(y, fy, "y")
    r = _add(a, b, FP64, "ro")                      # IEEE's specials are §4.10.3's
    return _project(np.asarray(r), fr, rounding, saturation, random_bits, n_bits)


def copysign_values(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    """ωCopySign on float64 values (§4.10.2): NaN where either is NaN, else |a| with
    the sign of b (b >= 0, a zero of either sign included, gives |a|)."""
    r = np.where(b < 0, -np.abs(a), np.abs(a))
    return np.where(np.isnan(a) | np.isnan(b), np.nan, r)


def copysign(x: ArrayLike, y: ArrayLike, fx: FormatLike, fy: FormatLike, fr: FormatLike,
             rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
             random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """CopySign<fx, fy, fr, rho>(x, y): |x| with the sign of y, projected into ``fr``
    (§4.10.2). NaN in either operand gives NaN; y >= 0 gives |x|.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> hex(lp.p3109.copysign(0x41, 0xc8, f, f, f))
    '0xc1'
    """
    a, b = np.broadcast_arrays(_operand(x, fx, "x"), _operand(y, fy, "y"))
    return _project(copysign_values(a, b), fr, rounding, saturation, random_bits, n_bits)


def subtract(x: ArrayLike, y: ArrayLike, fx: FormatLike, fy: FormatLike, fr: FormatLike,
             rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
             random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """Subtract<fx, fy, fr, rho>(x, y): x - y rounded once into ``fr`` (§4.10.3).

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> int(lp.p3109.subtract(0x7f, 0x7f, f, f, f))   # inf - inf is NaN
    128
    """
    a, b = _operand(x, fx, "x"), _operand(y, fy, "y")
    r = _add(a, -b, FP64, "ro")
    return _project(np.asarray(r), fr, rounding, saturation, random_bits, n_bits)


def multiply(x: ArrayLike, y: ArrayLike, fx: FormatLike, fy: FormatLike, fr: FormatLike,
             rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
             random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """Multiply<fx, fy, fr, rho>(x, y): x * y rounded once into ``fr`` (§4.10.4).

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.multiply(lp.encode(1.5, f), lp.encode(1.5, f), f, f, f), f))
    2.0
    """
    a, b = _operand(x, fx, "x"), _operand(y, fy, "y")
    r = _mul(a, b, FP64, "ro")
    return _project(np.asarray(r), fr, rounding, saturation, random_bits, n_bits)


def divide(x: ArrayLike, y: ArrayLike, fx: FormatLike, fy: FormatLike, fr: FormatLike,
           rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
           random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """Divide<fx, fy, fr, rho>(x, y): x / y rounded once into ``fr`` (§4.10.5).

    Division by zero gives NaN, as §4.10.5 says (IEEE 754 gives ±inf).

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> int(lp.p3109.divide(lp.encode(1.0, f), 0, f, f, f))
    128
    """
    a, b = _operand(x, fx, "x"), _operand(y, fy, "y")
    r = np.array(_div(a, b, FP64, "ro"), dtype=np.float64)
    r[np.broadcast_to(b == 0, r.shape)] = np.nan    # ωDivide(*, 0) -> NaN
    return _project(r, fr, rounding, saturation, random_bits, n_bits)


def fma(x: ArrayLike, y: ArrayLike, z: ArrayLike, fx: FormatLike, fy: FormatLike,
        fz: FormatLike, fr: FormatLike, rounding: str = "NearestTiesToEven",
        saturation: str = "SatNone", *, random_bits: ArrayLike | None = None,
        n_bits: int | None = None) -> Codes:
    """FMA<fx, fy, fz, fr, rho>(x, y, z): x * y + z rounded once into ``fr`` (§4.10.6).

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> one = lp.encode(1.0, f)
    >>> float(lp.decode(lp.p3109.fma(one, one, lp.encode(0.25, f), f, f, f, f), f))
    1.25
    """
    a, b = _operand(x, fx, "x"), _operand(y, fy, "y")
    c = _operand(z, fz, "z")
    r = _fma(a, b, c, FP64, "ro")                   # IEEE's specials are §4.10.6's
    return _project(np.asarray(r), fr, rounding, saturation, random_bits, n_bits)


def faa(x: ArrayLike, y: ArrayLike, z: ArrayLike, fx: FormatLike, fy: FormatLike,
        fz: FormatLike, fr: FormatLike, rounding: str = "NearestTiesToEven",
        saturation: str = "SatNone", *, random_bits: ArrayLike | None = None,
        n_bits: int | None = None) -> Codes:
    """FAA<fx, fy, fz, fr, rho>(x, y, z): x + y + z rounded once into ``fr`` (§4.10.7).

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> big, tiny = lp.encode([49152.0, 2.0**-17], f)
    >>> int(lp.p3109.faa(big, lp.encode(-49152.0, f), tiny, f, f, f, f))   # exact: tiny
    1
    """
    a, b = _operand(x, fx, "x"), _operand(y, fy, "y")
    c = _operand(z, fz, "z")
    shape = np.broadcast_shapes(a.shape, b.shape, c.shape)
    a, b, c = (np.ascontiguousarray(np.broadcast_to(v, shape)).reshape(-1) for v in (a, b, c))
    with np.errstate(all="ignore"):
        s, t = two_sum(a, b)                         # TwoSum: s + t == a + b, |t| <= ulp(s)/2
        hi, lo = three_sum(s, t, c)                  # hi faithful, lo the sign of the rest
        r = odd(hi, lo, np.empty_like(hi))           # the exact sum rounded to odd
        special = ~(np.isfinite(a) & np.isfinite(b) & np.isfinite(c))
        r = np.where(special, (a + b) + c, r)        # §4.10.7's ±inf and NaN rules
    return _project(r.reshape(shape), fr, rounding, saturation, random_bits, n_bits)


def sqrt(x: ArrayLike, fx: FormatLike, fr: FormatLike,
         rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
         random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """Sqrt<fx, fr, rho>(x): the square root rounded once into ``fr``.

    Negative operands give NaN.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.sqrt(lp.encode(4.0, f), f, f), f))
    2.0
    """
    r = _sqrt(_operand(x, fx, "x"), FP64, "ro")
    return _project(np.asarray(r), fr, rounding, saturation, random_bits, n_bits)


def recip(x: ArrayLike, fx: FormatLike, fr: FormatLike,
          rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
          random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """Recip<fx, fr, rho>(x): 1/x rounded once into ``fr`` (§4.10.8).

    Zero gives NaN, as §4.10.8 says (IEEE 754 gives ±inf). ±inf gives 0.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.recip(lp.encode(4.0, f), f, f), f))
    0.25
    >>> int(lp.p3109.recip(0, f, f))
    128
    """
    return _project(recip_odd(_operand(x, fx, "x")), fr, rounding, saturation,
                    random_bits, n_bits)


def recip_odd(a: NDArray[np.float64]) -> NDArray[np.float64]:
    """ωRecip on float64 values: 1/a rounded to odd at 53 bits; NaN for a zero."""
    r = np.array(_div(np.ones_like(a), a, FP64, "ro"), dtype=np.float64)
    return np.where(a == 0, np.nan, r)               # ωRecip(0) -> NaN


def rsqrt_odd(a: NDArray[np.float64]) -> NDArray[np.float64]:
    """ωRSqrt on float64 values: 1/sqrt(a) rounded to odd at 53 bits, once per distinct
    value; NaN for zero, negative and NaN values, 0 for +inf."""
    a = np.asarray(a, dtype=np.float64)
    u, inv = np.unique(a.reshape(-1), return_inverse=True)
    v = np.full(u.shape, np.nan)
    v[u == np.inf] = 0.0                             # ωRSqrt(+inf) -> 0
    for i in np.flatnonzero(np.isfinite(u) & (u > 0)):
        v[i] = _rsqrt_odd(float(u[i]))
    return v[inv].reshape(a.shape)


def sqrt_odd(q: Fraction) -> float:
    """sqrt(q) rounded to odd at 53 bits, for a Fraction q > 0, in integers."""
    k = 52 - (q.numerator.bit_length() - q.denominator.bit_length()) // 2
    while True:
        scaled = q * 4 ** k if k >= 0 else q / 4 ** -k   # q * 2**(2k), exact
        m = scaled.numerator // scaled.denominator
        r = math.isqrt(m)                                # r = floor(sqrt(q) * 2**k)
        if r.bit_length() > 53:
            k -= 1
        elif r.bit_length() < 53:
            k += 1
        else:
            break
    exact = scaled.denominator == 1 and r * r == m
    return math.ldexp(float(r if exact else r | 1), -k)


def _rsqrt_odd(a: float) -> float:
    """1/sqrt(a) rounded to odd at 53 bits, for a finite a > 0, in integers."""
    return sqrt_odd(1 / Fraction(a))


def rsqrt(x: ArrayLike, fx: FormatLike, fr: FormatLike,
          rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
          random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """RSqrt<fx, fr, rho>(x): 1/sqrt(x) rounded once into ``fr`` (§4.10.8).

    Zero and negative operands give NaN, and +inf gives 0. The root is rounded to
    odd at 53 bits in integer arithmetic, once per distinct operand.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> float(lp.decode(lp.p3109.rsqrt(lp.encode(4.0, f), f, f), f))
    0.5
    >>> int(lp.p3109.rsqrt(0, f, f))
    128
    """
    return _project(rsqrt_odd(_operand(x, fx, "x")), fr, rounding, saturation,
                    random_bits, n_bits)
