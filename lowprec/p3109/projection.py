"""IEEE P3109's projection ωProject (Interim Report v4.0, §4.7.3-§4.7.6) on float64.

`project` rounds to precision, saturates and encodes, exactly as the report's three
functions compose, and returns code points. The reference path computes the report's
formulas on float64 arrays, where every step is exact. A table path, bit for bit the
reference, serves the deterministic roundings of formats with P <= 4. This module
never keeps state beyond a cache of tables.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..bits import uint_dtype
from ..engine.cache import Latest
from ..engine.checks import check_choice, check_int
from ..engine.inputs import float64_operand
from ..formats import Format, FormatLike
from ..formats import format as _format
from .formats import parameters

__all__ = ["project", "ROUNDINGS", "SATURATIONS", "STOCHASTIC", "special_codes"]

#: The report's rounding modes (§4.2), deterministic first.
ROUNDINGS = ("NearestTiesToEven", "NearestTiesToAway", "TowardPositive", "TowardNegative",
             "TowardZero", "ToOdd", "StochasticA", "StochasticB", "StochasticC")
#: The rounding modes that take ``random_bits`` and ``n_bits``.
STOCHASTIC = ("StochasticA", "StochasticB", "StochasticC")
#: The report's saturation modes (§4.2).
SATURATIONS = ("SatFinite", "SatPropagate", "SatNone")

_CHUNK = 1 << 16            # elements per step: work buffers stay below a few MiB
_TABLES = Latest(32)        # (format, rounding, saturation) -> (on-grid, off-grid) codes
_TOP16 = 3 if np.little_endian else 0    # the uint16 holding float64's sign and exponent
_LOW48 = np.uint64((1 << 48) - 1)


def special_codes(fmt: Format) -> dict[str, int]:
    """The code points of NaN, ±inf and the extreme finite values of a P3109 format.

    Examples
    --------
    >>> import lowprec as lp
    >>> c = lp.p3109.special_codes(lp.format("binary8p3se"))
    >>> hex(c["nan"]), hex(c["inf"]), hex(c["-inf"]), hex(c["max"]), hex(c["min"])
    ('0x80', '0x7f', '0xff', '0x7e', '0xfe')
    """
    k, _, signed, domain = parameters(fmt)
    extended = domain == "extended"
    if signed:
        top = 2 ** (k - 1) - (2 if extended else 1)
        return {"nan": 2 ** (k - 1), "inf": 2 ** (k - 1) - 1 if extended else -1,
                "-inf": 2 ** k - 1 if extended else -1, "max": top,
                "min": top + 2 ** (k - 1), "sign": 2 ** (k - 1)}
    top = 2 ** k - (3 if extended else 2)
    return {"nan": 2 ** k - 1, "inf": 2 ** k - 2 if extended else -1, "-inf": -1,
            "max": top, "min": 0, "sign": 0}


def _saturated(fmt: Format, rounding: str, saturation: str) -> tuple[int, int, int, int]:
    """ωSaturate's codes (§4.7.5) for +inf, -inf, a finite R > M_hi and R < M_lo."""
    _, _, signed, domain = parameters(fmt)
    extended = domain == "extended"
    c = special_codes(fmt)
    if saturation == "SatFinite":
        return c["max"], c["min"], c["max"], c["min"]
    pinf = c["inf"] if extended else c["max"]
    if signed and extended:
        ninf = c["-inf"]
    elif saturation == "SatNone" and not signed:
        ninf = c["nan"]
    else:
        ninf = c["min"]
    if saturation == "SatPropagate":
        return pinf, ninf, c["max"], c["min"]
    # SatNone: the rounding direction decides between the extreme finite value and inf.
    if ((rounding == "ToOdd" and not signed and extended)
            or rounding in ("TowardZero", "TowardNegative") or not extended):
        above = c["max"]
    else:
        above = c["inf"]
    if rounding in ("TowardZero", "TowardPositive"):
        below = c["min"]
    elif signed and extended:
        below = c["-inf"]
    elif not signed:
        below = c["nan"]
    else:
        below = c["min"]
    return pinf, ninf, above, below


def _reference(x: NDArray[np.float64], fmt: Format, rounding: str, saturation: str,
               r: NDArray[np.int64] | None, n: int, out: NDArray[Any]) -> None:
    """ωProject of the float64 chunk ``x`` into ``out``, the report's formulas."""
    _, p, signed, _ = parameters(fmt)
    b = int(fmt.bias)  # type: ignore[arg-type]
    neg = np.signbit(x) & (x != 0)
    nan = np.isnan(x)
    finite = np.isfinite(x)
    a = np.where(finite, np.abs(x), 0.0)
    e = np.frexp(a)[1].astype(np.int64) - 1          # floor(log2 a) for a > 0
    q = np.maximum(e, 1 - b) - (p - 1)               # §4.7.4's Q
    s_real = np.ldexp(a, -q)                         # exact: a power-of-two scaling to < 2**P
    fl = np.floor(s_real)
    nu = s_real - fl                                 # exact: the fraction bits of s_real
    if rounding in ("NearestTiesToEven", "ToOdd"):
        if p > 1:
            even = np.fmod(fl, 2.0) == 0
        else:
            even = (fl == 0) | ((q + b) % 2 == 0)   # P = 1: the code's parity
    if rounding == "TowardZero":
        away = np.zeros(x.shape, bool)
    elif rounding == "TowardPositive":
        away = (nu > 0) & ~neg
    elif rounding == "TowardNegative":
        away = (nu > 0) & neg
    elif rounding == "NearestTiesToAway":
        away = nu >= 0.5
    elif rounding == "NearestTiesToEven":
        away = (nu > 0.5) | ((nu == 0.5) & ~even)
    elif rounding == "ToOdd":
        away = (nu > 0) & even
    else:
        assert r is not None
        # Exact: nu * 2**(N + 1) is a power-of-two scaling, integers below 2**53.
        if rounding == "StochasticA":
            away = np.floor(np.ldexp(nu, n)) + r >= 2.0 ** n
        elif rounding == "StochasticB":
            away = np.floor(np.ldexp(nu, n + 1)) + (2 * r + 1) >= 2.0 ** (n + 1)
        else:
            away = np.rint(np.ldexp(nu, n)) + r >= 2.0 ** n   # rint: RNITE
    s = fl.astype(np.int64) + away
    # The code of S * 2**Q: (Q + P + B - 2) * 2**(P - 1) + S covers subnormals (the
    # first term is 0) and the carry S = 2**P into the next binade alike.
    mag = (q + (p + b - 2)) * 2 ** (p - 1) + s
    mag[s == 0] = 0                                  # zero: its Q is not the subnormals'
    c = special_codes(fmt)
    code = np.where(neg & (mag != 0), mag + c["sign"], mag)
    over = finite & (mag > c["max"])
    under = finite & neg & (mag != 0) & (over | (not signed))
    over &= ~neg
    pinf, ninf, above, below = _saturated(fmt, rounding, saturation)
    if not finite.all():
        inf = ~finite & ~nan
        code[inf & ~neg] = pinf
        code[inf & neg] = ninf
        code[nan] = c["nan"]
    if over.any() or under.any():
        code[over] = above
        code[under] = below
    out[...] = code


def _table(fmt: Format, rounding: str, saturation: str) -> tuple[NDArray[Any], NDArray[Any]]:
    """Codes of every float64 by its top 16 bits: on the 16-bit grid and off it.

    With P <= 4, every tie and every value of the format needs at most 5 significant
    bits, so the 16-bit grid (sign, exponent, 4 fraction bits) holds every rounding
    boundary. Inputs strictly between two grid points then share one code."""
    key = (fmt, rounding, saturation)
    found = _TABLES.get(key)
    if found is None:
        top = np.arange(1 << 16, dtype=np.uint64) << np.uint64(48)
        on = np.empty(1 << 16, uint_dtype(fmt))
        off = np.empty(1 << 16, uint_dtype(fmt))
        with np.errstate(all="ignore"):
            _reference(top.view(np.float64), fmt, rounding, saturation, None, 0, on)
            _reference((top | np.uint64(1 << 47)).view(np.float64), fmt, rounding,
                       saturation, None, 0, off)
        on.flags.writeable = off.flags.writeable = False
        found = (on, off)
        _TABLES.put(key, found)
    return found


def _by_table(x: NDArray[np.float64], tables: tuple[NDArray[Any], NDArray[Any]],
              out: NDArray[Any], low: NDArray[np.uint64]) -> None:
    on, off = tables
    top16 = x.view(np.uint16)[_TOP16::4]
    np.take(off, top16, out=out)
    np.bitwise_and(x.view(np.uint64), _LOW48, out=low)
    if low.min() == 0:                               # some inputs on the 16-bit grid
        grid = np.flatnonzero(low == 0)
        out[grid] = on[top16[grid]]


def project(x: ArrayLike, fmt: FormatLike, rounding: str = "NearestTiesToEven",
            saturation: str = "SatNone", *, random_bits: ArrayLike | None = None,
            n_bits: int | None = None) -> NDArray[np.unsignedinteger[Any]] | Any:
    """Project real values into a P3109 format: the report's ωProject, as code points.

    Parameters
    ----------
    x : array_like
        Real input, read as float64 (NaN is the one NaN, -0.0 is 0).
    fmt : Format or str
        A P3109 format (`lowprec.p3109.format`, or a name such as ``"binary8p3se"``).
    rounding : str
        One of `ROUNDINGS`. Precision-1 ties go to the even code.
    saturation : {"SatFinite", "SatPropagate", "SatNone"}
        What happens past the finite range, as §4.7.5 tabulates.
    random_bits : array_like of int, optional
        For the Stochastic roundings: R in ``[0, 2**n_bits)``, broadcast against ``x``.
    n_bits : int, optional
        For the Stochastic roundings: N, the number of random bits, in [1, 52].

    Returns
    -------
    numpy.ndarray or numpy scalar
        Code points in the smallest unsigned dtype that holds them. `lowprec.decode`
        gives their values.

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.p3109.project([1.3, 1e6, -1e6], "binary8p3se")
    array([ 65, 127, 255], dtype=uint8)
    >>> lp.p3109.project([1e6, -1e6], "binary8p3se", "TowardZero")
    array([126, 254], dtype=uint8)
    >>> lp.p3109.project(1.125, "binary8p3se", "StochasticA", random_bits=[0, 1, 2, 3],
    ...                  n_bits=2)
    array([64, 64, 65, 65], dtype=uint8)
    """
    f = _format(fmt)
    parameters(f)                                    # ValueError for other formats
    rounding = check_choice("rounding", rounding, ROUNDINGS)
    saturation = check_choice("saturation", saturation, SATURATIONS)
    xs = float64_operand(x, "x")
    n = 0
    r = None
    if rounding in STOCHASTIC:
        if random_bits is None or n_bits is None:
            raise ValueError(f"{rounding} needs random_bits (integers in [0, 2**n_bits)) "
                             "and n_bits")
        n = check_int("n_bits", n_bits, minimum=1)
        if n > 52:
            raise ValueError(f"n_bits must be at most 52, got {n}")
        r = np.asarray(random_bits)
        if r.dtype.kind not in "iu":
            raise TypeError(f"random_bits must be integers, got dtype {r.dtype}")
        if r.size and (int(r.min()) < 0 or int(r.max()) >= 2 ** n):
            raise ValueError(f"random_bits must lie in [0, 2**{n}) for n_bits={n}")
        xs, r = np.broadcast_arrays(xs, r.astype(np.int64))
    elif random_bits is not None or n_bits is not None:
        raise ValueError(f"random_bits and n_bits are for the Stochastic roundings, "
                         f"not {rounding}")
    flat = np.ascontiguousarray(xs).reshape(-1)
    rflat = None if r is None else np.ascontiguousarray(r).reshape(-1)
    out = np.empty(flat.size, uint_dtype(f))
    tables = _table(f, rounding, saturation) if r is None and f.p <= 4 else None
    low = np.empty(min(flat.size, _CHUNK), np.uint64)
    with np.errstate(all="ignore"):
        for i in range(0, flat.size, _CHUNK):
            j = min(i + _CHUNK, flat.size)
            if tables is not None:
                _by_table(flat[i:j], tables, out[i:j], low[:j - i])
            else:
                _reference(flat[i:j], f, rounding, saturation,
                           None if rflat is None else rflat[i:j], n, out[i:j])
    out = out.reshape(xs.shape)
    return out[()] if out.ndim == 0 else out
