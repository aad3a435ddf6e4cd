"""Values <-> bit patterns: `encode`, `decode` and `fields` for any `Format`.

Patterns live in the smallest unsigned dtype that holds ``fmt.bits`` (uint8,
uint16, uint32, uint64), sign at bit ``bits - 1``, then the exponent field, then the
mantissa. `encode` rounds through the rounding kernel first: it never rounds on its
own. `decode` of formats of 16 bits or fewer reads a table built once per format.
The latest 32 formats' tables are kept.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .engine.cache import Latest
from .engine.checks import is_int
from .engine.float64 import ABS, EXP
from .engine.inputs import read_input
from .engine.kernel import run
from .engine.lazy import lazy_entry
from .engine.plan import plan as _plan
from .formats import Format, FormatLike
from .formats import format as _format
from .types import Mode, RNGLike

__all__ = ["encode", "decode", "fields", "uint_dtype"]


def uint_dtype(fmt: FormatLike) -> np.dtype[np.unsignedinteger[Any]]:
    """The smallest unsigned integer dtype that holds a pattern of ``fmt``."""
    fmt = _format(fmt)
    for dt in (np.uint8, np.uint16, np.uint32, np.uint64):
        if fmt.bits <= 8 * np.dtype(dt).itemsize:
            return np.dtype(dt)
    raise ValueError(f"{fmt.bits}-bit formats do not fit in uint64")


def _canonical_nan(fmt, negative):
    m, E, sign = fmt.mantissa_bits, fmt.exponent_bits, 1 << (fmt.bits - 1)
    if not fmt.signed:
        sign, negative = 0, False        # unsigned: the one NaN pattern is all ones
        if fmt.kind == "extended":
            return (1 << fmt.bits) - 1
    if fmt.kind in ("fnuz", "extended"):
        return sign                      # 1000...0 is the one NaN, whatever the sign
    if fmt.kind == "fn":
        code = (1 << (E + m)) - 1        # S.1..1.1..1
    else:
        code = ((1 << E) - 1) << m | (1 << (m - 1) if m else 0)  # quiet NaN
    return code | (sign if negative else 0)


@lazy_entry("encode", 1)
def encode(x: ArrayLike, fmt: FormatLike, mode: Mode = "rne", *,
           rng: RNGLike = None, sr_bits: int | None = None,
           offset: int = 0,
           subnormals: bool | None = None, saturate: bool = False,
           ) -> NDArray[np.unsignedinteger[Any]] | np.unsignedinteger[Any]:
    """Round ``x`` to ``fmt`` and return the bit patterns.

    ``mode`` and the keyword arguments (``rng``, ``sr_bits``, ``subnormals``,
    ``saturate``) mean what they mean in `lowprec.round`. They are checked the same
    way, and the flags are recorded as `lowprec.round` records them. NaN, signalling
    NaNs included, becomes the format's canonical quiet NaN with the input's sign.
    For ``fnuz`` formats that is the one NaN. A NaN for a format without NaN raises
    `ValueError`. The input is rounded and encoded chunk by chunk straight into the
    result, so extra memory stays a few chunk buffers per thread whatever its dtype.

    Examples
    --------
    >>> import lowprec as lp
    >>> hex(lp.encode(1.0, "fp16")), hex(lp.encode(-2.0, "bf16"))
    ('0x3c00', '0xc000')
    >>> lp.encode([448.0, float("nan")], "e4m3")
    array([126, 127], dtype=uint8)
    """
    fmt = _format(fmt)
    if not fmt.signed:       # the scales: `lp.round`'s rules for unsigned formats
        from .rounding import round as _round
        r = np.asarray(_round(x, fmt, mode, rng=rng, sr_bits=sr_bits, subnormals=subnormals,
                               offset=offset,
                              saturate=saturate), dtype=np.float64)
        flat = np.empty(r.size, uint_dtype(fmt))
        _encode_chunk(fmt, np.ascontiguousarray(r).reshape(-1), flat)
        flat = flat.reshape(r.shape)
        return flat[()] if flat.ndim == 0 else flat
    plan = _plan(fmt, mode, rng=rng, subnormals=subnormals, saturate=saturate, sr_bits=sr_bits,
                 offset=offset)
    reader = read_input(x, "x")
    out = np.empty(reader.size, uint_dtype(fmt))
    run(plan, reader, lambda a, b, values: _encode_chunk(fmt, values, out[a:b]))
    out = out.reshape(reader.shape)
    return out[()] if out.ndim == 0 else out


def _encode_chunk(fmt, r, out):
    """Write the patterns of ``r`` (float64 values of ``fmt``, or ±inf/NaN) into ``out``."""
    m = fmt.mantissa_bits
    rb = r.view(np.uint64)
    code = np.bitwise_and(rb, ABS)            # bits of |r|
    top = code.max(initial=0)
    if not (fmt.exponent_bits == 11 and m == 52):   # FP64's patterns are |r|'s bits
        small = code < np.uint64((fmt.emin + 1023) << 52)
        # Normal: |r| = (1 + f / 2**m) * 2**(e - bias) with f in the top m bits of
        # float64's fraction (r is a value of fmt), so its pattern is float64's shifted
        # right by 52 - m, the exponent rebiased from 1023 to fmt.bias.
        np.right_shift(code, np.uint64(52 - m), out=code)
        np.subtract(code, np.uint64((1023 - fmt.bias) << m), out=code)   # wraps where small
        if small.any():
            # Subnormal or zero: exact multiples of 2**(emin - m) below 2**emin, so
            # |r| * 2**(m - emin) is an integer below 2**m (m - emin <= 1020: finite).
            where = np.flatnonzero(small)
            code[where] = (np.abs(r[where]) * 2.0 ** (m - fmt.emin)).astype(np.uint64)
        if fmt.has_inf and top >= EXP:          # ±inf: exponent all ones, mantissa 0
            infs = np.flatnonzero(np.isinf(r))
            # 'extended' (P3109): the top magnitude pattern, 1...10 when unsigned.
            inf = (((1 << fmt.exponent_bits) - 1) << m if fmt.kind == "ieee"
                   else (1 << (fmt.exponent_bits + m)) - (1 if fmt.signed else 2))
            code[infs] = np.uint64(inf)
    if fmt.signed:
        sign = np.right_shift(rb, np.uint64(63))
        np.left_shift(sign, np.uint64(fmt.bits - 1), out=sign)
        code |= sign
    if top > EXP:                              # NaN: the canonical quiet NaN of its sign
        nan = np.flatnonzero(np.isnan(r))
        if nan.size and not fmt.has_nan:
            raise ValueError(f"{fmt.name or fmt.dtype_name} has no NaN to encode")
        neg = np.signbit(r[nan])
        code[nan] = np.where(neg, np.uint64(_canonical_nan(fmt, True)),
                             np.uint64(_canonical_nan(fmt, False)))
    np.copyto(out, code, casting="unsafe")     # patterns fit in fmt.bits <= out's width


def check_patterns(bits: ArrayLike, fmt: Format) -> NDArray[np.uint64]:
    """``bits`` as uint64 patterns of ``fmt``: `TypeError` for non-integers, `ValueError`
    for a pattern outside [0, 2**fmt.bits)."""
    b = np.asarray(bits)
    if b.dtype.kind == "O" or (b.dtype.kind == "f" and not isinstance(bits, np.ndarray)
                               and not isinstance(bits, np.generic)):
        # Python ints past int64 give an object array (or, mixed with small ones, a
        # float64 one): check them as Python ints, which never wrap.
        b = np.asarray(bits, dtype=object)
        for v in b.flat:
            if not is_int(v):
                raise TypeError(f"bit patterns must be integers, got {type(v).__name__} {v!r}")
    elif b.dtype.kind not in "ui":
        raise TypeError(f"bit patterns must be integers, got dtype {b.dtype}")
    if b.size:
        lo, hi = int(b.min()), int(b.max())
        if lo < 0 or hi >> fmt.bits:
            raise ValueError(f"bit pattern {lo if lo < 0 else hi} is not in "
                             f"[0, 2**{fmt.bits}) for {fmt.name or fmt.dtype_name}")
    return b.astype(np.uint64)


def fields(bits: ArrayLike, fmt: FormatLike) -> tuple[Any, Any, Any]:
    """Split patterns into integer (sign, exponent, mantissa) arrays.

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.fields(0x3DCD, "bf16")
    (np.uint64(0), np.uint64(123), np.uint64(77))
    """
    fmt = _format(fmt)
    b = check_patterns(bits, fmt)
    m = np.uint64(fmt.mantissa_bits)
    sign = b >> np.uint64(fmt.bits - 1) if fmt.signed else b & np.uint64(0)
    exponent = (b >> m) & np.uint64((1 << fmt.exponent_bits) - 1)
    mantissa = b & np.uint64((1 << fmt.mantissa_bits) - 1)
    if b.ndim == 0:
        return sign[()], exponent[()], mantissa[()]
    return sign, exponent, mantissa


def _decode_formula(b, fmt):
    m = fmt.mantissa_bits
    sign = (b >> np.uint64(fmt.bits - 1)).astype(bool) & fmt.signed
    top = (1 << fmt.exponent_bits) - 1
    exponent = ((b >> np.uint64(m)) & np.uint64(top)).astype(np.int64)
    mantissa = (b & np.uint64((1 << m) - 1)).astype(np.float64)
    subnormal = (exponent == 0) & fmt.zero     # without zero, code 0 is 2**-bias
    # Exact: an integer of at most m + 1 <= 53 bits times a power of two.
    significand = np.where(subnormal, mantissa, mantissa + 2.0 ** m)
    scale = np.where(subnormal, fmt.emin, exponent - fmt.bias) - m
    with np.errstate(over="ignore"):   # the top exponent code overflows; replaced below
        value = np.ldexp(significand, scale)
    if not fmt.subnormals:
        # Exponent code 0 with a nonzero mantissa is no value of the format: read as
        # zero of the pattern's sign, as denormals-are-zero hardware does.
        value = np.where(subnormal, 0.0, value)
    if fmt.kind == "ieee":
        value = np.where(exponent == top, np.where(mantissa == 0, np.inf, np.nan), value)
    elif fmt.kind == "fn":
        value = np.where((exponent == top) & (mantissa == 2 ** m - 1), np.nan, value)
    elif fmt.kind == "fnuz":
        value = np.where(b == np.uint64(1 << (fmt.bits - 1)), np.nan, value)
        sign = sign & (b != np.uint64(1 << (fmt.bits - 1))) & (value != 0)   # no -0
    elif fmt.kind == "extended":
        # IEEE P3109 v4.0, §4.7.2: one NaN, inf at each sign's top pattern, no -0.
        mag = b & np.uint64((1 << (fmt.exponent_bits + m)) - 1)
        top_code = (1 << (fmt.exponent_bits + m)) - (1 if fmt.signed else 2)
        nan = b == np.uint64((1 << (fmt.bits - 1)) if fmt.signed else (1 << fmt.bits) - 1)
        value = np.where(mag == np.uint64(top_code), np.inf, value)
        value = np.where(nan, np.nan, value)
        sign = sign & ~nan & (value != 0)
    return np.where(sign, -value, value)


# fmt -> read-only table of every pattern's value; at most 512 KiB each: a sweep over
# custom formats keeps the latest.
_TABLES = Latest(32)


def _table(fmt):
    table = _TABLES.get(fmt)
    if table is None:
        table = _decode_formula(np.arange(2 ** fmt.bits, dtype=np.uint64), fmt)
        table.flags.writeable = False
        _TABLES.put(fmt, table)
    return table


@lazy_entry("decode", 1)
def decode(bits: ArrayLike, fmt: FormatLike) -> NDArray[np.float64] | np.float64:
    """Map bit patterns to their float64 values (every NaN pattern to NaN).

    ``bits`` are integers in ``[0, 2**fmt.bits)``, of any shape. Anything else
    raises `ValueError` (negative or too wide, Python ints of any size included) or
    `TypeError` (not integers: floats, bools, strings).

    In a format with ``subnormals=False`` a pattern with exponent field 0 and a
    nonzero mantissa is no value of the format. It decodes to zero of its sign (+0
    in ``fnuz`` formats), as denormals-are-zero hardware reads it. So ``encode``
    gives back the zero pattern. ``encode(decode(b)) == b`` holds for every other non-NaN
    pattern of every format of 16 bits or fewer: every pattern that is a value.

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.decode([0x3C00, 0x0001, 0x7C00], "fp16")
    array([1.00000000e+00, 5.96046448e-08,            inf])
    >>> lp.decode(0x7E, "e4m3"), lp.decode(0x80, "e4m3fnuz")
    (np.float64(448.0), np.float64(nan))
    >>> lp.decode([0x0001, 0x8001], lp.Format(5, 10, subnormals=False))
    array([ 0., -0.])
    """
    fmt = _format(fmt)
    b = check_patterns(bits, fmt)
    out = _table(fmt)[b] if fmt.bits <= 16 else _decode_formula(b, fmt)
    return out[()] if out.ndim == 0 else out
