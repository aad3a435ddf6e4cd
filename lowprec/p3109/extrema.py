"""IEEE P3109's minimum, maximum and clamp operations (Interim Report v4.0, §4.11) on
code points.

Each picks one decoded operand by §4.11's rules and projects it into the result
format; the choice is exact, so only a narrower result format rounds. NumPy's
``minimum``/``fmin`` are the report's Minimum/MinimumNumber on the closed extended
reals (one NaN, no -0). The module keeps no state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..bits import decode
from ..formats import FormatLike
from .formats import parameters
from .projection import project

__all__ = ["minimum", "maximum", "minimum_number", "maximum_number", "minimum_magnitude",
           "maximum_magnitude", "minimum_magnitude_number", "maximum_magnitude_number",
           "minimum_finite", "maximum_finite", "clamp"]

F64 = NDArray[np.float64]


def _pick(rule: Callable[[F64, F64], F64]) -> Callable[..., Any]:
    def operation(x: ArrayLike, y: ArrayLike, fx: FormatLike, fy: FormatLike,
                  fr: FormatLike, rounding: str = "NearestTiesToEven",
                  saturation: str = "SatNone") -> Any:
        parameters(fx)
        parameters(fy)
        a = np.asarray(decode(x, fx), dtype=np.float64)
        b = np.asarray(decode(y, fy), dtype=np.float64)
        with np.errstate(invalid="ignore"):
            r = rule(*np.broadcast_arrays(a, b))
        return project(r, fr, rounding, saturation)
    return operation


def _magnitude(a: F64, b: F64, smaller: bool) -> F64:
    # |X| < |Y| picks X (the larger for Maximum*); equal magnitudes take min / max.
    first = np.abs(a) < np.abs(b) if smaller else np.abs(a) > np.abs(b)
    second = np.abs(a) > np.abs(b) if smaller else np.abs(a) < np.abs(b)
    tie = np.minimum(a, b) if smaller else np.maximum(a, b)
    return np.where(first, a, np.where(second, b, tie))


def _number(rule: Callable[[F64, F64], F64]) -> Callable[[F64, F64], F64]:
    # The Number variants: a NaN operand gives the other one.
    return lambda a, b: np.where(np.isnan(a), b, np.where(np.isnan(b), a, rule(a, b)))


def _finite(rule: Callable[[F64, F64], F64]) -> Callable[[F64, F64], F64]:
    # The Finite variants (§4.11.3): NaN and ±inf give way to a finite operand.
    def pick(a: F64, b: F64) -> F64:
        fa, fb = np.isfinite(a), np.isfinite(b)
        both = np.where(np.isnan(a), b, np.where(np.isnan(b), a, rule(a, b)))
        return np.where(fa & ~fb, a, np.where(fb & ~fa, b, both))
    return pick


minimum = _pick(np.minimum)
minimum.__name__ = "minimum"
minimum.__doc__ = """Minimum<fx, fy, fr, rho>(x, y) (§4.11.1): NaN if either is NaN.

Examples
--------
>>> import lowprec as lp
>>> f = "binary8p3se"
>>> hex(lp.p3109.minimum(0x41, 0xff, f, f, f)), hex(lp.p3109.minimum(0x41, 0x80, f, f, f))
('0xff', '0x80')
"""
maximum = _pick(np.maximum)
maximum.__name__ = "maximum"
maximum.__doc__ = "Maximum<fx, fy, fr, rho>(x, y) (§4.11.1): NaN if either is NaN."
minimum_number = _pick(np.fmin)
minimum_number.__name__ = "minimum_number"
minimum_number.__doc__ = """MinimumNumber (§4.11.1): a NaN operand gives the other one.

Examples
--------
>>> import lowprec as lp
>>> f = "binary8p3se"
>>> hex(lp.p3109.minimum_number(0x41, 0x80, f, f, f))
'0x41'
"""
maximum_number = _pick(np.fmax)
maximum_number.__name__ = "maximum_number"
maximum_number.__doc__ = "MaximumNumber (§4.11.1): a NaN operand gives the other one."
minimum_magnitude = _pick(lambda a, b: _magnitude(a, b, True))
minimum_magnitude.__name__ = "minimum_magnitude"
minimum_magnitude.__doc__ = ("MinimumMagnitude (§4.11.2): the operand of least magnitude; "
                             "on a tie, the lesser.")
maximum_magnitude = _pick(lambda a, b: _magnitude(a, b, False))
maximum_magnitude.__name__ = "maximum_magnitude"
maximum_magnitude.__doc__ = ("MaximumMagnitude (§4.11.2): the operand of greatest "
                             "magnitude; on a tie, the greater.")
minimum_magnitude_number = _pick(_number(lambda a, b: _magnitude(a, b, True)))
minimum_magnitude_number.__name__ = "minimum_magnitude_number"
minimum_magnitude_number.__doc__ = "MinimumMagnitudeNumber (§4.11.2): NaN gives way."
maximum_magnitude_number = _pick(_number(lambda a, b: _magnitude(a, b, False)))
maximum_magnitude_number.__name__ = "maximum_magnitude_number"
maximum_magnitude_number.__doc__ = "MaximumMagnitudeNumber (§4.11.2): NaN gives way."
minimum_finite = _pick(_finite(np.minimum))
minimum_finite.__name__ = "minimum_finite"
minimum_finite.__doc__ = """MinimumFinite (§4.11.3): NaN and ±inf give way to a finite operand.

Examples
--------
>>> import lowprec as lp
>>> f = "binary8p3se"
>>> hex(lp.p3109.minimum_finite(0x41, 0xff, f, f, f))
'0x41'
"""
maximum_finite = _pick(_finite(np.maximum))
maximum_finite.__name__ = "maximum_finite"
maximum_finite.__doc__ = "MaximumFinite (§4.11.3): NaN and ±inf give way to a finite operand."


def clamp(x: ArrayLike, lo: ArrayLike, hi: ArrayLike, fx: FormatLike, flo: FormatLike,
          fhi: FormatLike, fr: FormatLike, rounding: str = "NearestTiesToEven",
          saturation: str = "SatNone") -> Any:
    """Clamp<fx, flo, fhi, fr, rho>(x, lo, hi) (§4.11.4): x held within [lo, hi].

    NaN where any operand is NaN or lo > hi. Otherwise the report's rules reduce to
    ``min(max(x, lo), hi)`` on the closed extended reals.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> one, two = lp.encode([1.0, 2.0], f)
    >>> hex(lp.p3109.clamp(0x7f, one, two, f, f, f, f))     # +inf held to 2.0
    '0x44'
    >>> hex(lp.p3109.clamp(one, two, one, f, f, f, f))      # lo > hi: NaN
    '0x80'
    """
    for f in (fx, flo, fhi):
        parameters(f)
    a = np.asarray(decode(x, fx), dtype=np.float64)
    low = np.asarray(decode(lo, flo), dtype=np.float64)
    high = np.asarray(decode(hi, fhi), dtype=np.float64)
    a, low, high = np.broadcast_arrays(a, low, high)
    with np.errstate(invalid="ignore"):
        bad = np.isnan(a) | np.isnan(low) | np.isnan(high) | (low > high)
        r = np.where(bad, np.nan, np.minimum(np.maximum(a, low), high))
    return project(r, fr, rounding, saturation)
