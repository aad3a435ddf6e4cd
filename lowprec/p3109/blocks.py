"""IEEE P3109's block operations (Interim Report v4.0, §5) on code points.

A block is a scale factor and B elements. Here a block is a pair ``(s, x)``: ``s``
holds one scale code per block (shape ``(...)``) and ``x`` the element codes (shape
``(..., B)``, the block along the last axis). Operand formats may be any lowprec
format, so OCP MX blocks (E8M0 scales) decode as they are; result formats are P3109
formats. Each operation computes the report's exact result, carried as a float64
rounded to odd, and projects it once. The module keeps no state.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..arith import add as _add
from ..arith import div as _div
from ..arith import fma as _fma
from ..arith import mul as _mul
from ..arith import sqrt as _sqrt
from ..bits import check_patterns, decode, uint_dtype
from ..engine.eft import odd, three_sum, two_prod_err_alloc, two_sum
from ..formats import E8M0, FP64, FormatLike
from ..formats import format as _format
from .arithmetic import copysign_values, recip_odd, rsqrt_odd
from .formats import parameters
from .projection import STOCHASTIC, project
from .transcendental import STAND_INS, boundary_bits, evaluate

__all__ = ["convert_from_block", "convert_to_block", "convert_to_block_max_abs_finite",
           "block_reduce_add", "block_reduce_multiply", "block_dot_product",
           "block_convert", "block_negate", "block_abs", "block_copysign", "block_sqrt",
           "block_recip",
           "block_rsqrt", "block_add",
           "block_subtract", "block_multiply", "block_divide", "block_fma", "block_faa",
           "block_minimum", "block_maximum", "block_minimum_number",
           "block_maximum_number", "block_minimum_magnitude", "block_maximum_magnitude",
           "block_minimum_magnitude_number", "block_maximum_magnitude_number",
           "block_minimum_finite", "block_maximum_finite", "block_clamp",
           "block_exp", "block_exp2", "block_expm1", "block_log", "block_log2",
           "block_log1p", "block_softplus", "block_sin", "block_cos", "block_tan",
           "block_arcsin", "block_arccos", "block_arctan", "block_sinh", "block_cosh",
           "block_tanh", "block_arcsinh", "block_arccosh", "block_arctanh", "block_sinpi",
           "block_cospi", "block_tanpi", "block_arcsinpi", "block_arccospi",
           "block_arctanpi", "block_hypot", "block_arctan2", "block_arctan2pi", "scaled_add",
           "scaled_subtract", "scaled_multiply", "from_e8m0", "to_e8m0"]

F64 = NDArray[np.float64]
Codes = NDArray[np.unsignedinteger[Any]] | Any
Block = tuple[ArrayLike, ArrayLike]
FormatPair = tuple[FormatLike, FormatLike]

# Every P3109 format float64 holds has values in [2**-563, 2**512]. A value below
# 2**-700 has nu < 2**-53 at every such format's quantum, so every rounding (N <= 52)
# treats it as any other tiny value of its sign; a finite value above 2**600
# overflows every such format. So these stand in for results float64 cannot hold.
_LOW, _HIGH = 2.0**-700, 2.0**600
_TINY, _HUGE = 2.0**-1074, float(np.finfo(np.float64).max)
# Dekker's product and the level sums below are exact for terms in this range.
_EXACT_LO, _EXACT_HI = 2.0**-960, 2.0**900


def _decoded(codes: ArrayLike, fmt: FormatLike) -> F64:
    return np.asarray(decode(np.asarray(codes), _format(fmt)), dtype=np.float64)


def _block(block: Block, fmts: FormatPair, name: str) -> tuple[F64, F64]:
    """(S, x): the decoded scale, shaped (..., 1), and the decoded elements (..., B)."""
    if not (isinstance(block, tuple) and len(block) == 2):
        raise TypeError(f"{name} must be a block (s, x): scale codes and element codes")
    if not (isinstance(fmts, tuple) and len(fmts) == 2):
        raise TypeError(f"the formats of {name} must be a pair (fs, fx)")
    s, x = _decoded(block[0], fmts[0]), _decoded(block[1], fmts[1])
    if x.ndim == 0:
        raise ValueError(f"{name}: the elements need a block axis (the last one)")
    try:
        s = np.broadcast_to(s[..., None], x.shape[:-1] + (1,))
    except ValueError:
        raise ValueError(f"{name}: one scale per block: scale shape {s.shape} does not "
                         f"match the elements' shape {x.shape} without its last axis"
                         ) from None
    return s, x


def _exact(v: F64, what: str) -> F64:
    """``v``, after checking its finite nonzero values lie where float64 is exact."""
    a = np.abs(v[np.isfinite(v) & (v != 0)])
    if a.size and (a.min() < _EXACT_LO or a.max() > _EXACT_HI):
        raise ValueError(f"{what} leave float64's exact range [2**-960, 2**900]: the "
                         "block operations support formats of narrower range")
    return v


def _scaled(s: F64, x: F64, name: str) -> F64:
    """ωBlockDecode (§5.1.1): ωMultiply(S, X_i), whose rules IEEE's product follows."""
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        return _exact(s * x, f"the scaled elements of {name}")


def _stand_in(u: F64, z: F64) -> F64:
    """``u`` (``z`` rescaled), its values float64 cannot hold replaced by stand-ins."""
    fin = np.isfinite(z) & (z != 0)
    tiny = fin & (np.abs(u) < _LOW)
    huge = fin & (np.abs(u) > _HIGH)
    if tiny.any() or huge.any():
        u = np.where(tiny, np.copysign(_TINY, z), np.where(huge, np.copysign(_HUGE, z), u))
    return u


def _project(r: F64, fr: FormatLike, rounding: str, saturation: str,
             random_bits: ArrayLike | None, n_bits: int | None) -> Codes:
    f = _format(fr)
    parameters(f)
    if rounding in STOCHASTIC and n_bits is not None and f.p + int(n_bits) + 2 > 53:
        raise ValueError(f"n_bits={n_bits} with precision {f.p}: a block operation's "
                         f"exact result keeps P + N + 2 <= 53 bits, so n_bits <= {51 - f.p}")
    return project(r, f, rounding, saturation, random_bits=random_bits, n_bits=n_bits)


def _block_project(s: F64, z: F64, exact: bool, name: str) -> F64:
    """ωBlockProject's Z_i (§5.1.2) before ωProject: Z_i / S as a float64 to odd.

    ``z`` is the exact result (``exact``) or it rounded to odd. Dividing by a power of
    two keeps either. Other scales need an exact ``z``: one rounding of the quotient."""
    with np.errstate(all="ignore"):
        m, e = np.frexp(np.abs(s))
        general = np.isfinite(s) & (s != 0)
        power = general & (m == 0.5)
        if not np.array_equal(np.broadcast_to(power, z.shape),
                              np.broadcast_to(general, z.shape)):
            if not exact:
                raise ValueError(f"{name} rounds its result once, so its result scale "
                                 "must be a power of two (a precision-1 scale format "
                                 "such as binary8p1uf)")
            u = np.asarray(_div(z, np.where(general, s, 1.0), FP64, "ro"), dtype=np.float64)
        else:
            u = np.ldexp(z, np.where(power, 1 - e, 0))   # exact: a power-of-two scaling
        u = _stand_in(u, z)
        u = np.where(np.isinf(s), np.sign(z) * np.sign(s), u)   # ±1 (0 for a zero X)
        u = np.where(s == 0, 0.0, u)
        return np.where(np.isnan(s) | np.isnan(z), np.nan, u)


def _fr(fr: FormatLike) -> FormatLike:
    parameters(fr)
    return fr


def convert_from_block(block: Block, formats: FormatPair, fr: FormatLike,
                       rounding: str = "NearestTiesToEven", saturation: str = "SatNone",
                       *, random_bits: ArrayLike | None = None,
                       n_bits: int | None = None) -> Codes:
    """ConvertFromBlock (§5.2.1): each element times the scale, projected into ``fr``.

    Examples
    --------
    >>> import lowprec as lp
    >>> s = lp.encode(4.0, "binary8p1uf")
    >>> x = lp.encode([1.0, -0.5], "binary8p3se")
    >>> r = lp.p3109.convert_from_block((s, x), ("binary8p1uf", "binary8p3se"), "binary8p3se")
    >>> lp.decode(r, "binary8p3se")
    array([ 4., -2.])
    """
    s, x = _block(block, formats, "block")
    return _project(_scaled(s, x, "block"), _fr(fr), rounding, saturation, random_bits,
                    n_bits)


def convert_to_block(x: ArrayLike, s: ArrayLike, fx: FormatLike, fs: FormatLike,
                     fr: FormatLike, rounding: str = "NearestTiesToEven",
                     saturation: str = "SatNone", *, random_bits: ArrayLike | None = None,
                     n_bits: int | None = None) -> tuple[Any, Codes]:
    """ConvertToBlock (§5.2.2): the block ``(s, r)`` with each r_i = x_i / s, projected.

    A zero scale gives zero elements, an infinite one ±1 (NaN stays NaN).

    Examples
    --------
    >>> import lowprec as lp
    >>> x = lp.encode([3.0, -1.0, 0.25], "binary8p4se")
    >>> s, r = lp.p3109.convert_to_block(x, lp.encode(2.0, "binary8p1uf"), "binary8p4se",
    ...                                  "binary8p1uf", "binary8p3se")
    >>> lp.decode(r, "binary8p3se")
    array([ 1.5  , -0.5  ,  0.125])
    """
    xv = _decoded(x, fx)
    if xv.ndim == 0:
        raise ValueError("x: the elements need a block axis (the last one)")
    sv = _decoded(s, fs)
    parameters(fs)
    try:
        sb = np.broadcast_to(sv[..., None], xv.shape[:-1] + (1,))
    except ValueError:
        raise ValueError(f"one scale per block: scale shape {sv.shape} does not match "
                         f"the elements' shape {xv.shape} without its last axis") from None
    z = _block_project(sb, xv, True, "ConvertToBlock")
    return s, _project(z, _fr(fr), rounding, saturation, random_bits, n_bits)


def convert_to_block_max_abs_finite(
        x: ArrayLike, fx: FormatLike, fs: FormatLike, fr: FormatLike,
        scale_rounding: str = "NearestTiesToEven", scale_saturation: str = "SatNone",
        rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
        scale_random_bits: ArrayLike | None = None, scale_n_bits: int | None = None,
        random_bits: ArrayLike | None = None,
        n_bits: int | None = None) -> tuple[Codes, Codes]:
    """ConvertToBlockMaxAbsFinite (§5.2.3): the scale is the largest finite magnitude.

    The scale S is projected into ``fs`` with its own projection specification
    (``scale_rounding``, ``scale_saturation``). The elements are then x_i / s, as in
    `convert_to_block`. Infinite elements do not count towards S. A block of NaNs only
    gets a NaN scale.

    Examples
    --------
    >>> import lowprec as lp
    >>> x = lp.encode([[3.0, -1.0, 0.5], [0.0, 0.0, 0.0]], "binary8p4se")
    >>> s, r = lp.p3109.convert_to_block_max_abs_finite(
    ...     x, "binary8p4se", "binary8p1uf", "binary8p3se", "TowardPositive")
    >>> lp.decode(s, "binary8p1uf"), lp.decode(r, "binary8p3se")
    (array([4., 0.]), array([[ 0.75 , -0.25 ,  0.125],
           [ 0.   ,  0.   ,  0.   ]]))
    """
    xv = _decoded(x, fx)
    if xv.ndim == 0:
        raise ValueError("x: the elements need a block axis (the last one)")
    parameters(fs)
    a = np.abs(xv)
    finite = np.isfinite(a)
    top = np.where(finite, a, -1.0).max(axis=-1, initial=-1.0)
    # reduce(ωMaximumFinite, [NaN, M_1, ...]): the finite maximum, else inf, else NaN.
    top = np.where(top >= 0, top, np.where(np.isinf(a).any(axis=-1), np.inf, np.nan))
    s = project(top, fs, scale_rounding, scale_saturation, random_bits=scale_random_bits,
                n_bits=scale_n_bits)
    sv = _decoded(s, fs)[..., None]
    z = _block_project(sv, xv, True, "ConvertToBlockMaxAbsFinite")
    return s, _project(z, _fr(fr), rounding, saturation, random_bits, n_bits)


def _special_sum(terms: F64) -> F64:
    """The sum of the non-finite terms: ±inf or NaN by ωAdd's rules, 0 if none."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(terms), 0.0, terms).sum(axis=-1)


def _sum_to_odd(terms: F64) -> F64:
    """The exact sum of each row of finite ``terms``, rounded to odd at 53 bits.

    Each level takes F bits of every term below the row's top (``trunc`` at the
    level's quantum) and sums them exactly. The level sums are carried into digits in
    [0, 2**F) of one sign, and added from the bottom, rounding to odd each time. Each
    partial sum is below the next digit's quantum, so rounding it to odd keeps the
    facts that rounding the whole to odd reads."""
    n, m = terms.shape
    F = 52 - int(np.ceil(np.log2(m + 1)))          # m integers below 2**F sum exactly
    mag = np.abs(terms).max(axis=1, initial=0.0)
    top = np.frexp(mag)[1].astype(np.int64)        # |terms| < 2**top
    r = terms.copy()
    levels, exps = [], []
    q = top - F
    while r.any():
        t = np.trunc(np.ldexp(r, -q[:, None]))     # exact: a power-of-two scaling
        levels.append(t.sum(axis=1))               # exact: m integers below 2**F
        exps.append(q)
        r -= np.ldexp(t, q[:, None])               # exact: the bits of r below 2**q
        q = q - F
    x = np.zeros(n)
    if not levels:
        return x
    sign = np.ones(n)
    for _ in range(2):                             # the second pass sees the magnitude
        carry, digits = np.zeros(n), []
        for lvl in reversed(levels[1:]):
            v = sign * lvl + carry                 # exact: below 2**53 in magnitude
            carry = np.floor(np.ldexp(v, -F))
            digits.append(v - np.ldexp(carry, F))  # in [0, 2**F)
        head = sign * levels[0] + carry
        if not (head < 0).any():
            break
        sign = np.where(head < 0, -sign, sign)
    for d, q in zip(digits, reversed(exps[1:])):
        s, t = two_sum(np.ldexp(d, q), x)          # TwoSum: s + t is the exact sum
        x = odd(s, t, np.empty(n))
    s, t = two_sum(np.ldexp(head, exps[0]), x)
    return sign * odd(s, t, np.empty(n))


def _reduce_sum(terms: F64) -> F64:
    special = _special_sum(terms)
    flat = np.where(np.isfinite(terms), terms, 0.0).reshape(-1, terms.shape[-1])
    total = _sum_to_odd(flat).reshape(special.shape)
    return np.where(np.isfinite(special), total, special)


def block_reduce_add(block: Block, formats: FormatPair, fr: FormatLike,
                     rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
                     random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
    """BlockReduceAdd (§5.3.1): the exact sum of a block's values, projected once.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> x = lp.encode([49152.0, 2.0**-17, -49152.0], f)     # exact: only the tiny one
    >>> int(lp.p3109.block_reduce_add((lp.encode(1.0, "binary8p1uf"), x),
    ...                               ("binary8p1uf", f), f))
    1
    """
    s, x = _block(block, formats, "block")
    total = _reduce_sum(_scaled(s, x, "block"))
    return _project(total, _fr(fr), rounding, saturation, random_bits, n_bits)


def _odd_of_int(n: int, e: int) -> float:
    """n * 2**e rounded to odd at 53 bits (``n`` a Python int), with the stand-ins."""
    if n == 0:
        return 0.0
    a, shift = abs(n), max(abs(n).bit_length() - 53, 0)
    top = (a >> shift) | (1 if a & ((1 << shift) - 1) else 0)   # the sticky bit: odd
    e += shift
    if top.bit_length() + e > 601:
        v = _HUGE
    elif top.bit_length() + e < -700:
        v = _TINY
    else:
        v = float(np.ldexp(float(top), e))          # exact: 53 bits, in range
    return v if n > 0 else -v


def block_reduce_multiply(block: Block, formats: FormatPair, fr: FormatLike,
                          rounding: str = "NearestTiesToEven", saturation: str = "SatNone",
                          *, random_bits: ArrayLike | None = None,
                          n_bits: int | None = None) -> Codes:
    """BlockReduceMultiply (§5.3.1): the exact product of a block's values, projected once.

    The product is formed exactly in Python integers, one block at a time.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = "binary8p3se"
    >>> x = lp.encode([1.25, 1.25, 1.25], f)                # 1.953125 -> 2.0
    >>> r = lp.p3109.block_reduce_multiply((lp.encode(1.0, "binary8p1uf"), x),
    ...                                    ("binary8p1uf", f), f)
    >>> float(lp.decode(r, f))
    2.0
    """
    s, x = _block(block, formats, "block")
    v = _scaled(s, x, "block")
    with np.errstate(invalid="ignore"):
        special = np.prod(np.where(np.isfinite(v), np.sign(v), v), axis=-1)
    m, e = np.frexp(np.where(np.isfinite(v), v, 0.0))
    mant = np.ldexp(m, 53).astype(np.int64).reshape(-1, v.shape[-1])
    exps = (e.astype(np.int64) - 53).sum(axis=-1).reshape(-1)
    prods = mant.astype(object).prod(axis=1)       # exact: Python integers
    total = np.array([_odd_of_int(int(p), int(k)) for p, k in zip(prods, exps)],
                     dtype=np.float64).reshape(special.shape)
    total = np.where(np.isfinite(special), total, special)
    return _project(total, _fr(fr), rounding, saturation, random_bits, n_bits)


def block_dot_product(bx: Block, by: Block, fx: FormatPair, fy: FormatPair, fr: FormatLike,
                      rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
                      random_bits: ArrayLike | None = None,
                      n_bits: int | None = None) -> Codes:
    """BlockDotProduct (§5.3.2): the exact dot product of two blocks, projected once.

    Every product is exact and the sum is exact. Only the projection into ``fr``
    rounds.

    Examples
    --------
    >>> import lowprec as lp
    >>> f, fs = "binary8p4se", "binary8p1uf"
    >>> x = lp.encode([1.0, 2.0, 3.0, 4.0], f)
    >>> y = lp.encode([1.0, 1.0, 1.0, -1.0], f)
    >>> one = lp.encode(1.0, fs)
    >>> float(lp.decode(lp.p3109.block_dot_product((one, x), (one, y), (fs, f), (fs, f), f), f))
    2.0
    """
    sx, x = _block(bx, fx, "bx")
    sy, y = _block(by, fy, "by")
    if x.shape[-1] != y.shape[-1]:
        raise ValueError(f"the blocks differ in size: {x.shape[-1]} and {y.shape[-1]}")
    a, b = np.broadcast_arrays(_scaled(sx, x, "bx"), _scaled(sy, y, "by"))
    with np.errstate(all="ignore"):
        p = a * b                                  # ωMultiply's rules are IEEE's
        special = _special_sum(p)
        fin = np.isfinite(p)
        p = _exact(np.where(fin, p, 0.0), "the products of BlockDotProduct")
        e = two_prod_err_alloc(np.where(fin, a, 0.0), np.where(fin, b, 0.0), p)
    # Dekker: p + e == a*b exactly, as |p| lies in [2**-960, 2**900] or is 0.
    terms = np.concatenate([p, e], axis=-1).reshape(-1, 2 * p.shape[-1])
    total = _sum_to_odd(terms).reshape(special.shape)
    total = np.where(np.isfinite(special), total, special)
    return _project(total, _fr(fr), rounding, saturation, random_bits, n_bits)


# The elementwise operations (§5.4): each ωOp on float64 values, giving the exact
# result (exact=True) or the exact result rounded to odd at 53 bits.

def _faa(a: F64, b: F64, c: F64) -> F64:
    a, b, c = np.broadcast_arrays(a, b, c)
    shape = a.shape
    a, b, c = (np.ascontiguousarray(v).reshape(-1) for v in (a, b, c))
    s, t = two_sum(a, b)                           # TwoSum: s + t == a + b
    hi, lo = three_sum(s, t, c)                    # hi faithful, lo the sign of the rest
    r = odd(hi, lo, np.empty_like(hi))
    special = ~(np.isfinite(a) & np.isfinite(b) & np.isfinite(c))
    return np.where(special, (a + b) + c, r).reshape(shape)   # §4.10.7's ±inf, NaN


def _divide(a: F64, b: F64) -> F64:
    r = np.array(_div(a, b, FP64, "ro"), dtype=np.float64)
    return np.where(b == 0, np.nan, r)             # ωDivide(X, 0) is NaN


def _magnitude(smaller: bool) -> Callable[[F64, F64], F64]:
    def pick(a: F64, b: F64) -> F64:
        first = np.abs(a) < np.abs(b) if smaller else np.abs(a) > np.abs(b)
        second = np.abs(a) > np.abs(b) if smaller else np.abs(a) < np.abs(b)
        tie = np.minimum(a, b) if smaller else np.maximum(a, b)
        return np.where(first, a, np.where(second, b, tie))
    return pick


def _number(rule: Callable[[F64, F64], F64]) -> Callable[[F64, F64], F64]:
    return lambda a, b: np.where(np.isnan(a), b, np.where(np.isnan(b), a, rule(a, b)))


def _finite(rule: Callable[[F64, F64], F64]) -> Callable[[F64, F64], F64]:
    def pick(a: F64, b: F64) -> F64:
        fa, fb = np.isfinite(a), np.isfinite(b)
        both = _number(rule)(a, b)
        return np.where(fa & ~fb, a, np.where(fb & ~fa, b, both))
    return pick


def _clamp(a: F64, lo: F64, hi: F64) -> F64:
    bad = np.isnan(a) | np.isnan(lo) | np.isnan(hi) | (lo > hi)
    return np.where(bad, np.nan, np.minimum(np.maximum(a, lo), hi))


_OPS: dict[str, tuple[int, bool, Callable[..., Any]]] = {
    "convert": (1, True, lambda a: a),
    "negate": (1, True, np.negative),
    "abs": (1, True, np.abs),
    "copysign": (2, True, copysign_values),
    "sqrt": (1, False, lambda a: _sqrt(a, FP64, "ro")),
    "recip": (1, False, recip_odd),
    "rsqrt": (1, False, rsqrt_odd),
    "add": (2, False, lambda a, b: _add(a, b, FP64, "ro")),
    "subtract": (2, False, lambda a, b: _add(a, -b, FP64, "ro")),
    "multiply": (2, False, lambda a, b: _mul(a, b, FP64, "ro")),
    "divide": (2, False, _divide),
    "fma": (3, False, lambda a, b, c: _fma(a, b, c, FP64, "ro")),
    "faa": (3, False, _faa),
    "minimum": (2, True, np.minimum),
    "maximum": (2, True, np.maximum),
    "minimum_number": (2, True, np.fmin),
    "maximum_number": (2, True, np.fmax),
    "minimum_magnitude": (2, True, _magnitude(True)),
    "maximum_magnitude": (2, True, _magnitude(False)),
    "minimum_magnitude_number": (2, True, _number(_magnitude(True))),
    "maximum_magnitude_number": (2, True, _number(_magnitude(False))),
    "minimum_finite": (2, True, _finite(np.minimum)),
    "maximum_finite": (2, True, _finite(np.maximum)),
    "clamp": (3, True, _clamp),
}
# The transcendental operations (§4.10.9-§4.10.16) by their names in transcendental.py.
_TRANSCENDENTAL = {
    "exp": "Exp", "exp2": "Exp2", "expm1": "ExpMinusOne", "log": "Log", "log2": "Log2",
    "log1p": "LogOnePlus", "softplus": "Softplus", "sin": "Sin", "cos": "Cos",
    "tan": "Tan", "arcsin": "ArcSin", "arccos": "ArcCos", "arctan": "ArcTan",
    "sinh": "Sinh", "cosh": "Cosh", "tanh": "Tanh", "arcsinh": "ArcSinh",
    "arccosh": "ArcCosh", "arctanh": "ArcTanh", "sinpi": "SinPi", "cospi": "CosPi",
    "tanpi": "TanPi", "arcsinpi": "ArcSinPi", "arccospi": "ArcCosPi",
    "arctanpi": "ArcTanPi", "hypot": "Hypot", "arctan2": "ArcTan2",
    "arctan2pi": "ArcTan2Pi"}
for _op in _TRANSCENDENTAL:
    _OPS[_op] = (2 if _op in ("hypot", "arctan2", "arctan2pi") else 1, False,
                 functools.partial(evaluate, _op))


def _report_name(op: str) -> str:
    special = {"fma": "FMA", "faa": "FAA", "rsqrt": "RSqrt", "copysign": "CopySign",
               **_TRANSCENDENTAL}
    return special.get(op, "".join(w.title() for w in op.split("_")))


def _check_stand_ins(z: F64, srv: F64, title: str) -> None:
    """Raise where a stand-in of `evaluate` divided by sr might no longer stand in.

    A true value below 2**-700 stays below it for sr >= 1, one above 2**600 for
    sr <= 1. Other scales could bring it into a format's range."""
    a = np.abs(z)
    bad = ((a == STAND_INS[0]) & (srv < 1)) | ((a == STAND_INS[1]) & (srv > 1))
    if (bad & np.isfinite(srv) & (srv != 0)).any():
        raise ValueError(f"{title}: a result beyond float64's range [2**-700, 2**600] "
                         "with a result scale that could bring it back is not supported")


def _elementwise(op: str) -> Callable[..., Any]:
    n, exact, rule = _OPS[op]
    title = "Block" + _report_name(op)

    def operation(*args: Any, random_bits: ArrayLike | None = None,
                  n_bits: int | None = None) -> tuple[Any, Codes]:
        if not 2 * n + 3 <= len(args) <= 2 * n + 5:
            raise TypeError(f"{title} takes {n} blocks, the result scale sr, {n} format "
                            f"pairs (fs, fx), fs, fr, and optionally rounding and "
                            f"saturation; got {len(args)} arguments")
        blocks, sr, pairs = args[:n], args[n], args[n + 1:2 * n + 1]
        fs, fr = args[2 * n + 1], args[2 * n + 2]
        rounding, saturation = (tuple(args[2 * n + 3:])
                                + ("NearestTiesToEven", "SatNone")[len(args) - 2 * n - 3:])
        values = []
        for i, (block, pair) in enumerate(zip(blocks, pairs)):
            s, x = _block(block, pair, f"block {i + 1}")
            values.append(_scaled(s, x, f"block {i + 1}"))
        parameters(fs)
        # Op(X)/sr for sr = 2**e: Op's float64 at X (exact: _scaled checks the range)
        # times 2**-e, exact while normal (_block_project gives stand-ins beyond).
        # Scaling moves no boundary relative to the value: fr's P + N + 1 bits decide.
        kw = ({"q": boundary_bits(_fr(fr), rounding, n_bits)}
              if op in _TRANSCENDENTAL else {})
        with np.errstate(all="ignore"):
            z = np.asarray(rule(*np.broadcast_arrays(*values), **kw), dtype=np.float64)
        srv = _decoded(sr, fs)
        try:
            srv = np.broadcast_to(srv[..., None], z.shape[:-1] + (1,))
        except ValueError:
            raise ValueError(f"sr: one scale per block; shape {np.shape(srv)} does not "
                             f"match the blocks' {z.shape[:-1]}") from None
        if kw:
            _check_stand_ins(z, srv, title)
        r = _project(_block_project(srv, z, exact, title), _fr(fr), rounding, saturation,
                     random_bits, n_bits)
        return sr, r

    operation.__name__ = operation.__qualname__ = f"block_{op}"
    names = ", ".join(f"(s{i}, x{i})" for i in range(1, n + 1))
    formats = ", ".join(f"(fs{i}, fx{i})" for i in range(1, n + 1))
    operation.__doc__ = (
        f"{title} (§5.4): ω{_report_name(op)} of the blocks' values, divided by sr.\n\n"
        f"Called as ``block_{op}({names}, sr, {formats}, fs, fr, rounding, "
        f"saturation)``. It returns the block ``(sr, r)``.")
    return operation


block_convert = _elementwise("convert")
block_negate = _elementwise("negate")
block_abs = _elementwise("abs")
block_copysign = _elementwise("copysign")
block_sqrt = _elementwise("sqrt")
block_recip = _elementwise("recip")
block_rsqrt = _elementwise("rsqrt")
block_add = _elementwise("add")
block_add.__doc__ = (block_add.__doc__ or "") + """

The result scale must be a power of two unless the operation is exact (Convert,
Negate, Abs and the minimum and maximum family).

Examples
--------
>>> import lowprec as lp
>>> f, fs = "binary8p3se", "binary8p1uf"
>>> a = (lp.encode(2.0, fs), lp.encode([1.0, 1.5], f))      # values 2, 3
>>> b = (lp.encode(4.0, fs), lp.encode([0.25, -1.0], f))    # values 1, -4
>>> sr, r = lp.p3109.block_add(a, b, lp.encode(2.0, fs), (fs, f), (fs, f), fs, f)
>>> lp.decode(r, f)                                         # (3, -1) / 2
array([ 1.5, -0.5])
"""
block_subtract = _elementwise("subtract")
block_multiply = _elementwise("multiply")
block_divide = _elementwise("divide")
block_fma = _elementwise("fma")
block_faa = _elementwise("faa")
block_minimum = _elementwise("minimum")
block_maximum = _elementwise("maximum")
block_minimum_number = _elementwise("minimum_number")
block_maximum_number = _elementwise("maximum_number")
block_minimum_magnitude = _elementwise("minimum_magnitude")
block_maximum_magnitude = _elementwise("maximum_magnitude")
block_minimum_magnitude_number = _elementwise("minimum_magnitude_number")
block_maximum_magnitude_number = _elementwise("maximum_magnitude_number")
block_minimum_finite = _elementwise("minimum_finite")
block_maximum_finite = _elementwise("maximum_finite")
block_clamp = _elementwise("clamp")
block_exp = _elementwise("exp")
block_exp.__doc__ = (block_exp.__doc__ or "") + """

The transcendental ones (Exp ... ArcTan2Pi) take the scalar operation's float64 of
each value and divide it by sr, which must be a power of two.

Examples
--------
>>> import lowprec as lp
>>> f, fs = "binary8p3se", "binary8p1uf"
>>> a = (lp.encode(2.0, fs), lp.encode([0.0, 0.5], f))      # values 0, 1
>>> sr, r = lp.p3109.block_exp(a, lp.encode(2.0, fs), (fs, f), fs, f)
>>> lp.decode(r, f)                                         # (1, e) / 2
array([0.5 , 1.25])
"""
block_exp2 = _elementwise("exp2")
block_expm1 = _elementwise("expm1")
block_log = _elementwise("log")
block_log2 = _elementwise("log2")
block_log1p = _elementwise("log1p")
block_softplus = _elementwise("softplus")
block_sin = _elementwise("sin")
block_cos = _elementwise("cos")
block_tan = _elementwise("tan")
block_arcsin = _elementwise("arcsin")
block_arccos = _elementwise("arccos")
block_arctan = _elementwise("arctan")
block_sinh = _elementwise("sinh")
block_cosh = _elementwise("cosh")
block_tanh = _elementwise("tanh")
block_arcsinh = _elementwise("arcsinh")
block_arccosh = _elementwise("arccosh")
block_arctanh = _elementwise("arctanh")
block_sinpi = _elementwise("sinpi")
block_cospi = _elementwise("cospi")
block_tanpi = _elementwise("tanpi")
block_arcsinpi = _elementwise("arcsinpi")
block_arccospi = _elementwise("arccospi")
block_arctanpi = _elementwise("arctanpi")
block_hypot = _elementwise("hypot")
block_arctan2 = _elementwise("arctan2")
block_arctan2pi = _elementwise("arctan2pi")


def _scaled_op(op: str) -> Callable[..., Any]:
    block_op = _elementwise(op)
    title = "Scaled" + _report_name(op)

    def operation(a: Block, b: Block, fa: FormatPair, fb: FormatPair, fr: FormatLike,
                  rounding: str = "NearestTiesToEven", saturation: str = "SatNone", *,
                  random_bits: ArrayLike | None = None, n_bits: int | None = None) -> Codes:
        blocks = []
        for name, pair in (("a", a), ("b", b)):
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise TypeError(f"{name} must be a pair (s, x) of a scale and a value")
            blocks.append((np.asarray(pair[0]), np.asarray(pair[1])[..., None]))
        one = np.uint8(_ONE)                       # sr = 1: Binary8p1uf's code of 1
        rb = None if random_bits is None else np.asarray(random_bits)[..., None]
        _, r = block_op(blocks[0], blocks[1], one, fa, fb, _SCALE, fr, rounding,
                        saturation, random_bits=rb, n_bits=n_bits)
        return r[..., 0]

    operation.__name__ = operation.__qualname__ = f"scaled_{op}"
    operation.__doc__ = (
        f"{title} (§5.5): ω{_report_name(op)}(s1 * x1, s2 * x2), projected into ``fr``.\n\n"
        "``a`` is the pair (s1, x1) of scale and value codes, ``fa`` their formats.")
    return operation


_SCALE = "binary8p1uf"
_ONE = 128                                        # Binary8p1uf's code of 1 (bias 128)
scaled_add = _scaled_op("add")
scaled_add.__doc__ = (scaled_add.__doc__ or "") + """

Examples
--------
>>> import lowprec as lp
>>> f, fs = "binary8p3se", "binary8p1uf"
>>> r = lp.p3109.scaled_add((lp.encode(4.0, fs), lp.encode(1.0, f)),
...                         (lp.encode(0.5, fs), lp.encode(2.0, f)), (fs, f), (fs, f), f)
>>> float(lp.decode(r, f))                                  # 4 * 1 + 0.5 * 2
5.0
"""
scaled_subtract = _scaled_op("subtract")
scaled_multiply = _scaled_op("multiply")


def from_e8m0(codes: ArrayLike) -> Codes:
    """Binary8p1uf codes of OCP MX's E8M0 scale codes: the same powers of two.

    E8M0 has bias 127 and Binary8p1uf bias 128, so a code c becomes c + 1. E8M0's
    2**127 has no Binary8p1uf code (ValueError). NaN stays NaN (0xFF).

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.p3109.from_e8m0([0, 127, 253, 255])
    array([  1, 128, 254, 255], dtype=uint8)
    """
    c = check_patterns(codes, E8M0)
    if (c == 254).any():
        raise ValueError("E8M0's 2**127 (code 254) exceeds Binary8p1uf's largest scale "
                         "2**126")
    out = np.where(c == 255, 255, c + 1).astype(uint_dtype(E8M0))
    return out[()] if out.ndim == 0 else out


def to_e8m0(codes: ArrayLike) -> Codes:
    """OCP MX E8M0 codes of Binary8p1uf scale codes: c - 1 (NaN stays NaN).

    Binary8p1uf's zero (code 0) has no E8M0 code (ValueError).

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.p3109.to_e8m0([1, 128, 254, 255])
    array([  0, 127, 253, 255], dtype=uint8)
    """
    c = check_patterns(codes, E8M0)                      # Binary8p1uf: 8 bits too
    if (c == 0).any():
        raise ValueError("Binary8p1uf's zero scale (code 0) has no E8M0 code")
    out = np.where(c == 255, 255, c - 1).astype(uint_dtype(E8M0))
    return out[()] if out.ndim == 0 else out
