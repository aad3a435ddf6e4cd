"""The one rounding kernel: exact real values -> values of a `Format`, any mode.

Every other module rounds through :func:`round` (one float64 value per element)
or :func:`round_exact` (an unevaluated sum ``hi + lo`` of two float64 values, for
results of error-free transformations). Two exact methods, chosen per mode: the
scaling path multiplies each element by a power of two so that the format's
quantum becomes 1, rounds to an integer with a NumPy ufunc (``rint``, ``trunc``,
``floor``, ``ceil``) and scales back; the encoding path (rz, rna, ro, sr, for
elements in the normal range) works on the float64 bit pattern with integer
adds and masks (rne adds and subtracts a magic constant instead). Formats of at
most 3 mantissa bits (FP8, FP6, FP4) then round, in every deterministic mode, by
looking up the top 16 bits of each encoding in a table those methods computed.
Either way each element is rounded once, in cache-sized chunks, each converted
from the input's own dtype as it is reached, so that extra memory stays within
`WORK_BYTES` per thread whatever the input. This module never reads a global default
that could change a result (modes and rngs are explicit arguments; the one
setting, `threads`, changes only the speed) and never modifies its input.
"""

from __future__ import annotations

import concurrent.futures
import copy
import numbers
import os
import sys
import threading
import warnings

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._cache import Latest
from ._checks import MODES, check_bool, check_int, check_mode, check_rng
from .flags import FLAG_NAMES, recording
from .formats import FormatLike
from .formats import format as _format

__all__ = ["round", "round_exact", "threads", "MODES", "as_array", "as_real_array",
           "read_input", "signalling_nans"]

_ENCODING_MODES = ("rz", "rna", "ro", "sr")  # cheaper on the float64 encoding

CHUNK = 1 << 17  # elements per chunk: the working buffers stay in cache
#: Bound on the extra memory of one `round` or `encode` call beyond its result, per
#: thread: at most `WORK_BUFFERS` work buffers of `CHUNK` float64 values (16 MiB),
#: whatever the input's size and dtype, for contiguous input (other input is first
#: copied in its own dtype). Checked by tests/test_memory.py and
#: ``python benchmarks/run.py memory``.
WORK_BUFFERS = 16
WORK_BYTES = WORK_BUFFERS * 8 * CHUNK

_EXP = np.uint64(0x7FF0_0000_0000_0000)
_ABS = np.uint64(0x7FFF_FFFF_FFFF_FFFF)
_SIGN = np.uint64(0x8000_0000_0000_0000)
_QUIET = np.uint64(1 << 51)
_ONE_BITS = 1023 << 52


def _rng(rng):
    check_rng(rng)
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def as_array(x):
    """``np.asarray(x)``, except for a list or tuple that NumPy would make float64 while
    it holds integers float64 cannot hold exactly (``[2**53 + 1, 0.5]``,
    ``[2**63 + 1, -1]``): that becomes an object array of Python ints and floats, so
    that the integers too are rounded once (see `_python_numbers`)."""
    a = np.asarray(x)
    if (isinstance(x, (list, tuple)) and a.dtype == np.float64 and a.size
            and np.any(np.abs(a) >= 2.0**53)):   # below 2**53 ints are exact; NaN hides none
        values = np.asarray(x, dtype=object).reshape(-1)
        if any(isinstance(v, numbers.Integral) and not isinstance(v, bool)
               and float(v) != int(v) for v in values):      # Python's exact comparison
            exact = np.empty(a.size, dtype=object)
            exact[:] = [int(v) if isinstance(v, numbers.Integral) else float(v)
                        for v in values]
            return exact.reshape(a.shape)
    return a


def as_real_array(x):
    """``x`` as a float64 array ``hi`` plus a correction ``lo`` (or None).

    Integer and long double inputs that float64 cannot hold exactly come back as an
    unevaluated sum ``hi + lo``, so that they too are rounded only once: ``lo`` is
    exact for 64-bit integers and long doubles, and rounded to odd for wider Python
    ints (enough for one correct rounding, see `_python_numbers`).
    Complex, object, string and other non-real input raises `TypeError`.
    """
    a = as_array(x)
    kind = a.dtype.kind
    if kind == "f":
        if a.dtype.itemsize <= 8:
            with np.errstate(invalid="ignore"):  # signalling NaNs stay NaN
                return a.astype(np.float64, copy=False), None
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            hi = a.astype(np.float64)
            # hi = RN(a): a - hi is exact in long double and, inside float64's range,
            # short enough for float64; outside it the split is not exact.
            lo = (a - hi).astype(np.float64)
            fin = np.isfinite(a)
            exact = np.where(fin, hi.astype(a.dtype) + lo.astype(a.dtype) == a, True)
        if not np.all(exact):
            raise ValueError("long double input outside float64's range (or below its "
                             "subnormals) cannot be rounded exactly; scale it first")
        lo = np.where(fin, lo, 0.0)
        return hi, (lo if np.any(lo) else None)
    if kind == "b":
        return a.astype(np.float64), None
    if kind in "iu":
        if a.dtype.itemsize <= 4:
            return a.astype(np.float64), None  # 32-bit integers are exact in float64
        low = (a & 2047).astype(np.float64)
        # Clearing the low 11 bits leaves at most 53 significant bits: exact in float64.
        high = (a - (a & 2047)).astype(np.float64)
        if not np.any(low):
            return high, None
        return _two_sum(high, low)   # integers: s is finite
    if kind == "V" and getattr(a.dtype.type, "__module__", "").startswith("ml_dtypes"):
        return a.astype(np.float64), None  # every ml_dtypes value is a float64 value
    if kind == "c":
        raise TypeError("complex input cannot be rounded to a real format; "
                        "round the real and imaginary parts separately")
    if (kind == "O" and not isinstance(x, np.ndarray)
            and all(isinstance(v, (numbers.Integral, float)) for v in a.flat)):
        # Python ints beyond 64 bits (scalars or in lists; NumPy makes them objects).
        # An object array itself stays refused, as any object input.
        return _python_numbers(a)
    raise TypeError(f"expected real numbers, got an array of dtype {a.dtype} "
                    f"({'object' if kind == 'O' else 'non-numeric'} input)")


def _python_numbers(a):
    """(hi, lo) of an object array of Python ints and floats: ``hi = RN(v)`` (Python's
    int-to-float conversion rounds correctly) and ``lo`` the remainder ``v - hi`` rounded
    to odd: exact, or of the remainder's sign and never a power of two, so that it is
    never mistaken for an exact tie (the remainder is an integer: never below 1)."""
    values = [v if isinstance(v, float) else int(v) for v in a.flat]
    try:
        hi = [float(v) for v in values]
    except OverflowError:
        raise ValueError("integer input beyond float64's range (|x| >= 2**1024 - 2**970) "
                         "cannot be rounded exactly; scale it first") from None
    rem = [0 if isinstance(v, float) else v - int(h) for v, h in zip(values, hi)]
    lo = np.array([float(r) for r in rem])          # |r| <= ulp(hi)/2 < 2**970: finite
    inexact = np.array([int(f) != r for f, r in zip(lo.tolist(), rem)], dtype=bool)
    even = (lo.view(np.uint64) & np.uint64(1)) == 0
    step = np.flatnonzero(inexact & even)           # to the odd neighbour on r's side
    if step.size:
        up = np.array([rem[i] > int(lo[i]) for i in step.tolist()])
        lo[step] = np.nextafter(lo[step], np.where(up, np.inf, -np.inf))
    hi = np.array(hi, dtype=np.float64).reshape(a.shape)
    return hi, (lo.reshape(a.shape) if lo.any() else None)


def _two_sum(a, b):
    """TwoSum (Knuth): s + t == a + b exactly and s == fl(a + b), for finite s."""
    s = a + b
    bb = s - a
    t = (a - (s - bb)) + (b - bb)
    return s, t


class _Plan:
    """Constants of one (format, mode, options) rounding, computed once per call."""

    def __init__(self, fmt, mode, subnormals, saturate, sr_bits, rng):
        self.fmt, self.mode, self.saturate = fmt, mode, bool(saturate)
        self.subnormals = fmt.subnormals if subnormals is None else bool(subnormals)
        m = fmt.mantissa_bits
        self.identity = fmt.p == 53
        self.m_bits = np.uint64(m << 52)
        self.shift = np.uint64(52 - m)
        self.low_mask = np.uint64((1 << (52 - m)) - 1)
        self.half_low = np.uint64((1 << (52 - m)) >> 1)
        # With m = 0 the sticky bit of ro would land in the exponent: scale instead.
        self.encoding = (mode in _ENCODING_MODES and self.subnormals and not self.identity
                         and not (mode == "ro" and m == 0))
        self.magic = mode == "rne" and self.subnormals and not self.identity
        self.magic_bits = np.uint64(((52 - m) << 52) + (1 << 51))
        self.magic_top = 2.0 ** min(971 + m, 1023)   # keeps C = 1.5 * 2**(e + 52 - m) finite
        self.zero_risk = 2.0 ** (fmt.emin - m)       # below it a result can be zero
        self.lo_f = 2.0 ** fmt.emin
        # Without a top clamp the scale 2**-q of inf/NaN stays normal when m >= 2;
        # finite values need none (rounding has an unbounded exponent range).
        self.clamp_top = m < 2
        self.hi_f = 2.0 ** min(fmt.emax + 1, 1023)
        self.two_one = np.uint64(2 * _ONE_BITS)
        # With every |x| below 2**emax no element can round beyond max.
        self.safe_top = 2.0 ** fmt.emax
        self.tiny_bits = np.uint64((fmt.emin + 1023) << 52)
        self.max = fmt.max
        self.rng = _rng(rng) if mode == "sr" else None
        if sr_bits is not None:
            sr_bits = check_int("sr_bits", sr_bits, minimum=1)
            if sr_bits > 53:
                raise ValueError(f"sr_bits must be an int in [1, 53], got {sr_bits!r}")
            if mode != "sr":
                raise ValueError("sr_bits applies only to mode='sr'")
        self.sr_bits = sr_bits
        self.spare = None  # a work buffer, sized by the first chunk
        # m <= 3: round by table lookup (built on first use) unless flags are counted.
        self.by_table = (mode != "sr" and not self.identity and m <= 3)
        # Where the mode sends an overflow under IEEE 754 (unbounded exponent first).
        self.inf_for = {"rne": "both", "rna": "both", "sr": "both", "rz": "none",
                        "ro": "none", "ru": "pos", "rd": "neg"}[mode]


def _to_integer(t, mode, buf, rand):
    """Round the scaled values ``t`` to integers in place, by ``mode``.

    Every formula keeps the sign of a zero (rna and ro subtract from ``buf``; sr
    adds a copysign)."""
    if mode == "rne":
        np.rint(t, out=t)
    elif mode == "rz":
        np.trunc(t, out=t)
    elif mode == "ru":
        np.ceil(t, out=t)
    elif mode == "rd":
        np.floor(t, out=t)
    elif mode == "rna":
        np.trunc(t, out=buf)
        np.subtract(buf, t, out=t)       # -f, exact
        np.add(t, t, out=t)
        np.trunc(t, out=t)               # -(±1) exactly when |f| >= 1/2, else ±0
        np.subtract(buf, t, out=t)
    elif mode == "ro":
        np.multiply(t, 0.5, out=buf)
        np.trunc(buf, out=buf)
        np.add(buf, buf, out=buf)        # e = the even integer 2*trunc(t/2)
        np.subtract(buf, t, out=t)       # e - t in (-2, 2), exact
        np.sign(t, out=t)                # the odd neighbour of t is e ± 1, or t itself
        np.subtract(buf, t, out=t)
    else:  # "sr": away from zero with probability |t - trunc(t)|, as on the encoding
        np.trunc(t, out=buf)
        frac = np.subtract(t, buf)
        np.abs(frac, out=frac)           # distance from the neighbour nearer zero, exact
        np.less(rand, frac, out=frac)    # rand = prev(w): P = P(w <= f) = floor(f*2**r)/2**r
        np.copysign(frac, t, out=frac)
        np.add(buf, frac, out=t)


def _draw(plan, buf):
    """Fill ``buf`` with prev(w), w uniform on {1, 2, ..., 2**r} / 2**r (r = sr_bits,
    default 53), so that ``buf < f`` exactly when ``w <= f``: probability
    floor(f * 2**r) / 2**r, the rule of the encoding path."""
    plan.rng.random(buf.size, out=buf)     # multiples of 2**-53 in [0, 1)
    r = 53 if plan.sr_bits is None else plan.sr_bits
    if r < 53:
        buf *= 2.0 ** r
        np.floor(buf, out=buf)
        buf *= 2.0 ** -r
    buf += 2.0 ** -r                       # w, exact
    np.nextafter(buf, -1.0, out=buf)
    return buf


_RAW64 = (np.random.PCG64, np.random.PCG64DXSM, np.random.SFC64, np.random.Philox)


def _random_bits(rng, n):
    """n uniform 64-bit words (MT19937's raw output has only 32 bits)."""
    if isinstance(rng.bit_generator, _RAW64):
        return rng.bit_generator.random_raw(n)
    return rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)


def _round_nearest_even(plan, x, out, ubuf):
    """RNE by the classic magic constant: fl(x + C) - C with C = 1.5 * 2**(e + 52 - m),
    e = max(floor(log2|x|), emin). Returns None (use the scaling path) for chunks
    with inf, NaN or values so large that C would overflow."""
    e = ubuf
    np.bitwise_and(x.view(np.uint64), _EXP, out=e)
    ef = e.view(np.float64)                       # 2**floor(log2|x|), never NaN
    top = ef.max()
    if not top < plan.magic_top:
        return None
    bottom = ef.min()
    small = None
    if bottom < plan.lo_f:
        # Below 2**emin the quantum stays 2**(emin - m): clamp e. A few such
        # elements (the usual case) are cheaper by index than by a full mask.
        small = np.flatnonzero(ef < plan.lo_f)
        if small.size > x.size >> 4:
            small = ef < plan.lo_f
            np.copyto(ef, plan.lo_f, where=small)
        else:
            ef[small] = plan.lo_f
    np.add(e, plan.magic_bits, out=e)             # C = 1.5 * 2**(e + 52 - m)
    # |x| < 2**(e+1) <= C/2**(51-m) / 1.5, so x + C stays in C's binade (m <= 50),
    # where the float64 ulp is 2**(e - m), the format's quantum: fl(x + C) is C plus x
    # rounded to nearest even (C has no bits down there); subtracting C is exact.
    np.add(x, ef, out=out)
    np.subtract(out, ef, out=out)
    if bottom < plan.zero_risk:
        # Only tiny or zero inputs can give a zero, which must keep x's sign (on the
        # other small elements the copy changes nothing: rounding keeps the sign).
        if small.dtype == bool:
            np.copysign(out, x, out=out, where=small)
        else:
            out[small] = np.copysign(out[small], x[small])
    return top


def _round_on_encoding(plan, x, out, ubuf):
    """Modes rz, rna, ro and sr on the float64 encoding itself.

    For |x| >= 2**emin the format's last bit is float64's mantissa bit 52 - m, and
    the encoding is sign-magnitude, so rounding the magnitude is integer work on
    the low 52 - m bits: clear them (rz); add half of them first (rna: a carry
    moves into the exponent exactly as the value's next binade); OR in a sticky
    bit (ro); add that many random bits (sr: the carry happens with probability
    equal to the dropped fraction). Smaller |x| go through the scaling path."""
    xb, e, ob = x.view(np.uint64), ubuf, out.view(np.uint64)
    np.bitwise_and(xb, _EXP, out=e)
    ef = e.view(np.float64)                     # 2**floor(log2|x|), or inf
    top = ef.max()
    small = None
    if ef.min() < plan.lo_f:
        small = np.flatnonzero(ef < plan.lo_f)
    mode, keep = plan.mode, ~plan.low_mask
    if mode == "rz":
        np.bitwise_and(xb, keep, out=ob)
    elif mode == "rna":
        np.add(xb, plan.half_low, out=ob)
        np.bitwise_and(ob, keep, out=ob)
    elif mode == "ro":
        np.bitwise_and(xb, plan.low_mask, out=e)
        np.add(e, plan.low_mask, out=e)    # reaches bit 52 - m exactly when sticky
        np.bitwise_or(xb, e, out=ob)
        np.bitwise_and(ob, keep, out=ob)
    else:
        bits = _random_bits(plan.rng, x.size)
        r = int(plan.shift) if plan.sr_bits is None else min(plan.sr_bits, int(plan.shift))
        np.right_shift(bits, np.uint64(64 - r), out=bits)
        if r < plan.shift:
            np.left_shift(bits, plan.shift - np.uint64(r), out=bits)
        np.add(xb, bits, out=ob)
        np.bitwise_and(ob, keep, out=ob)
    if small is not None:
        out[small] = _round_subnormal_range(plan, x[small])
    return top


def _round_subnormal_range(plan, xs):
    """Round values with |x| < 2**emin (a fresh array ``xs``) in place, where the
    quantum is 2**(emin - m): scale it to 1, round to an integer, scale back."""
    q = plan.fmt.emin - plan.fmt.mantissa_bits
    xs *= 2.0 ** -q                 # exact: |xs| < 2**m after, and q >= -1020
    rand = _draw(plan, np.empty_like(xs)) if plan.mode == "sr" else None
    _to_integer(xs, plan.mode, np.empty_like(xs), rand)
    xs *= 2.0 ** q                  # exact: an integer of at most m bits times 2**q
    return xs


# -- formats of at most 3 mantissa bits (FP8, FP6, FP4): a table lookup -------------
#
# With m <= 3 every point of the format and every midpoint between two of them is a
# multiple of 2**(e - 4) in the binade [2**e, 2**(e+1)), so it has zeros in all but
# the top 16 bits of its float64 encoding (sign, exponent, 4 mantissa bits). Hence
# the values x that share those top 16 bits, k, and are not k's own value (low 48
# bits nonzero) lie strictly between two such points and all round alike in every
# deterministic mode, overflow and options included; and x == k's value is a single
# value. Two tables of 2**16 results, made by this kernel itself, round everything.

# (fmt, mode, subnormals, saturate) -> tables; 1 MiB each: a sweep over custom
# formats keeps only the latest.
_TABLES = Latest(32)
_TOP16 = slice(3, None, 4) if sys.byteorder == "little" else slice(0, None, 4)
_LOW48 = np.uint64((1 << 48) - 1)


def _table_for(plan):
    """(results for nonzero low bits, results for zero low bits) of ``plan``."""
    key = (plan.fmt, plan.mode, plan.subnormals, plan.saturate)
    table = _TABLES.get(key)
    if table is None:
        keys = np.arange(1 << 16, dtype=np.uint64) << np.uint64(48)
        x = np.concatenate([keys | np.uint64(1), keys]).view(np.float64)
        table = np.empty_like(x)
        counts = dict.fromkeys(FLAG_NAMES, 0)   # counting: the arithmetic path, not this
        with np.errstate(all="ignore"):
            _round_into(plan, x, table, np.empty(x.size, np.uint64), np.empty_like(x), counts)
        table = _TABLES.put(key, (table[: 1 << 16], table[1 << 16:]))
    return table


def _round_by_table(plan, x, out, ubuf):
    """Round the chunk ``x`` by table lookup on the top 16 bits of each encoding."""
    nonzero_low, zero_low = _table_for(plan)
    top16 = x.view(np.uint16)[_TOP16]
    np.take(nonzero_low, top16, out=out, mode="clip")   # indices < 2**16 always
    low = np.bitwise_and(x.view(np.uint64), _LOW48, out=ubuf)
    if low.min() == 0:                                  # values on the 16-bit grid
        on_grid = np.flatnonzero(low == 0)
        out[on_grid] = zero_low[top16[on_grid]]


def _round_chunk(plan, x, out, ubuf, fbuf, lo_e=None):
    """Round the float64 chunk ``x`` into ``out`` with an unbounded top exponent.

    Returns the largest 2**floor(log2|x|) seen (inf for inf/NaN) so the caller can
    skip the overflow rules when no element comes near ``max``."""
    if plan.identity and lo_e is None:
        out[...] = x
        top = (x.view(np.uint64) & _EXP).view(np.float64).max(initial=0.0)
        if not plan.subnormals:
            # FP64 without subnormals: only float64's own subnormals move.
            small = np.less(x.view(np.uint64) & _ABS, plan.tiny_bits) & (x != 0)
            if small.any():
                t = x[small] * 2.0 ** 1022
                r = _draw(plan, np.empty_like(t)) if plan.mode == "sr" else None
                _to_integer(t, plan.mode, np.empty_like(t), r)
                out[small] = t * 2.0 ** -1022
    elif plan.encoding and lo_e is None:
        top = _round_on_encoding(plan, x, out, ubuf)
    elif (plan.magic and lo_e is None
          and (top := _round_nearest_even(plan, x, out, ubuf)) is not None):
        pass
    else:
        e = ubuf
        np.bitwise_and(x.view(np.uint64), _EXP, out=e)   # bits of 2**floor(log2|x|)
        ef = e.view(np.float64)                          # never NaN: fmax is safe
        top = ef.max()
        lo = plan.lo_f if lo_e is None else lo_e
        if ef.min() < lo:
            np.copyto(ef, lo, where=ef < lo)
        if plan.clamp_top:
            np.minimum(ef, plan.hi_f, out=ef)
        if not plan.subnormals and lo_e is None:
            # Without subnormals the quantum below 2**emin is 2**emin itself.
            small = np.less(x.view(np.uint64) & _ABS, plan.tiny_bits)
            e += small.astype(np.uint64) * plan.m_bits
        np.subtract(e, plan.m_bits, out=e)             # bits of 2**q, q = e - m
        inv = fbuf.view(np.uint64)
        np.subtract(plan.two_one, e, out=inv)          # bits of 2**-q
        np.multiply(x, fbuf, out=out)                  # exact: scaling by a power of two
        rand = _draw(plan, fbuf) if plan.mode == "sr" else None
        spare = plan.spare
        if spare is None or spare.size < out.size:
            spare = plan.spare = np.empty(out.size, np.float64)
        _to_integer(out, plan.mode, spare[:out.size], rand)
        np.multiply(out, ef, out=out)   # exact, or beyond max (the overflow rules follow)
    if not plan.fmt.has_negative_zero:
        out += 0.0                                    # -0 + +0 is +0 under RNE
    return top


def _overflow(plan, x, out):
    """Apply the format's overflow rules; returns the masks the flags need.

    Returns None, cheaply, when no element of the chunk is beyond ±max."""
    fin = np.isfinite(x)
    big = np.abs(out) > plan.max
    big &= fin
    infs = ~fin & ~np.isnan(x)
    result = {"overflow": big, "inf_in": infs}
    if plan.fmt.has_inf and infs.any():
        out[infs] = x[infs]  # the integer step of some modes turns inf into NaN
    nans = np.isnan(x)
    if nans.any():
        # A carry into a NaN payload may have made it finite. The result is a quiet
        # NaN (IEEE 754 6.2): x's sign and payload with the quiet bit set, so that a
        # signalling NaN comes back quiet (a float16 one stays signalling in float64).
        out[nans] = (x[nans].view(np.uint64) | _QUIET).view(np.float64)
    if not big.any() and not (infs.any() and not plan.fmt.has_inf):
        return result
    fmt, neg = plan.fmt, np.signbit(out)
    if plan.inf_for == "both":
        to_inf = big
    elif plan.inf_for == "pos":
        to_inf = big & ~neg
    elif plan.inf_for == "neg":
        to_inf = big & neg
    else:
        to_inf = np.zeros_like(big)
    saturating = plan.saturate or fmt.kind == "finite"
    if saturating:
        to_inf = np.zeros_like(big)
    to_max = big & ~to_inf
    # fn/fnuz: NaN where IEEE gives inf, with the sign inf would have (fnuz drops it).
    special = np.inf if fmt.has_inf else np.nan
    out[to_inf] = np.where(neg[to_inf], -special, special)
    out[to_max] = np.where(neg[to_max], -plan.max, plan.max)
    result["to_max"] = to_max
    if not fmt.has_inf and infs.any():
        if saturating:
            out[infs] = np.where(np.signbit(x[infs]), -plan.max, plan.max)
        else:
            out[infs] = np.copysign(np.nan, x[infs])
    return result


def _classify(plan, x, out, masks, counts):
    """Count each element's exceptions (only when a flags() context listens)."""
    fmt = plan.fmt
    fin = np.isfinite(x)
    inexact = fin & (out != x)
    inexact |= fin & np.isnan(out)
    ax = np.abs(x)
    tiny_in = fin & (ax < fmt.smallest_normal) & inexact
    underflow = 0
    if plan.identity:
        underflow = int(np.count_nonzero(tiny_in))
    elif plan.mode == "sr":
        # No unbounded-exponent rounding without new random draws: use the result.
        underflow = int(np.count_nonzero(tiny_in & (np.abs(out) < fmt.smallest_normal)))
    elif tiny_in.any():
        # Tininess after rounding: round with an unbounded exponent range.
        xs = np.ascontiguousarray(x[tiny_in])
        r = np.empty_like(xs)
        lo = 2.0 ** (fmt.mantissa_bits + 1 - 1022)
        _round_chunk(plan, xs, r, np.empty(xs.size, np.uint64), np.empty_like(xs), lo_e=lo)
        underflow = int(np.count_nonzero(np.abs(r) < fmt.smallest_normal))
    flushed = 0
    if not plan.subnormals:
        small = fin & (ax < fmt.smallest_normal) & (x != 0)
        if small.any():
            xs = np.ascontiguousarray(x[small])
            r = np.empty_like(xs)
            sub_plan = _Plan(fmt, plan.mode if plan.mode != "sr" else "rne", True,
                             plan.saturate, None, None)
            _round_chunk(sub_plan, xs, r, np.empty(xs.size, np.uint64), np.empty_like(xs))
            flushed = int(np.count_nonzero((r != 0) & (np.abs(r) < fmt.smallest_normal)))
    counts["inexact"] += int(np.count_nonzero(inexact))
    counts["underflow"] += underflow
    counts["flushed"] += flushed
    if masks is None:
        return
    saturating = plan.saturate or fmt.kind == "finite"
    n_over = int(np.count_nonzero(masks["overflow"]))
    counts["overflow"] += n_over
    if saturating:
        counts["saturated"] += n_over
    if not fmt.has_inf:
        n_inf = int(np.count_nonzero(masks["inf_in"]))
        counts["saturated" if saturating else "invalid"] += n_inf


def _round_into(plan, x, out, ubuf, fbuf, counts=None):
    """The per-chunk step every caller shares: round ``x`` into ``out``, apply the
    overflow rules, and add the flag counts to ``counts`` (None: nobody listens).

    Returns the largest 2**floor(log2|x|) of the chunk (inf when it holds inf or
    NaN), or None from the table lookup, which never needs it."""
    if counts is None and plan.by_table:
        _round_by_table(plan, x, out, ubuf)
        return None
    top = _round_chunk(plan, x, out, ubuf, fbuf)
    masks = _overflow(plan, x, out) if top >= plan.safe_top else None
    if counts is not None:
        _classify(plan, x, out, masks, counts)
    return top


def _run(plan, reader, sink=None):
    """Round the input of ``reader`` chunk by chunk: into a new float64 array of its
    shape (returned), or, with ``sink``, into a work buffer handed to
    ``sink(start, stop, values)`` chunk by chunk (nothing is returned).

    Large inputs are cut into one contiguous span per thread (`threads`); each
    span is converted and rounded chunk by chunk with its own buffers, so extra
    memory is a few chunks per thread and the result does not depend on the number
    of threads. "sr" stays on one thread: its random numbers are drawn in element
    order from one generator."""
    n = reader.size
    out = np.empty(n, np.float64) if sink is None else None
    listener = recording()
    with np.errstate(all="ignore"):  # inf - inf inside the kernel is expected
        counts = in_spans(plan, n, listener is not None,
                          lambda p, span, tally: _run_span(p, reader, out, sink, span, tally))
    if listener is not None:
        listener.add(counts)
    return None if sink is not None else out.reshape(reader.shape)


def in_spans(plan, n, counting, task):
    """Run ``task(plan, (start, stop), counts)`` over ``range(n)`` cut into spans of
    whole chunks, one per thread (`threads`), and return the summed flag counts
    (None, and each task's ``counts`` None, unless ``counting``).

    Each span gets its own copy of ``plan`` (its scratch buffer) and its own
    counts; the caller's thread does the first span. "sr" runs as one span."""
    n_spans = 1 if plan.mode == "sr" else max(1, min(_THREADS, n // PARALLEL_MIN))
    chunks = -(-n // CHUNK)                               # ceil(n / CHUNK)
    step = max(1, -(-chunks // n_spans)) * CHUNK          # whole chunks per span
    spans = [(start, min(start + step, n)) for start in range(0, n, step)] or [(0, 0)]
    tallies = [dict.fromkeys(FLAG_NAMES, 0) if counting else None for _ in spans]
    futures = []
    if len(spans) > 1:
        pool = _pool(len(spans) - 1)
        futures = [pool.submit(task, _own_copy(plan), span, tally)
                   for span, tally in zip(spans[1:], tallies[1:])]
    task(plan, spans[0], tallies[0])
    for future in futures:
        future.result()
    if not counting or len(tallies) == 1:
        return tallies[0]
    return {k: sum(t[k] for t in tallies) for k in FLAG_NAMES}


def _own_copy(plan):
    """A copy of ``plan`` for another thread: shared settings, its own scratch buffer."""
    twin = copy.copy(plan)
    twin.spare = None
    return twin


def _run_span(plan, reader, out, sink, span, counts):
    """Convert and round elements ``start:stop`` of ``reader`` chunk by chunk, into
    ``out`` (or a buffer handed to ``sink``); add the flag counts to ``counts``."""
    start, stop = span
    n = min(CHUNK, stop - start)
    ubuf, fbuf = np.empty(n, np.uint64), np.empty(n, np.float64)
    plan.spare = np.empty(n, np.float64)
    bufs = reader.buffers(n)
    rbuf = np.empty(n, np.float64) if sink is not None else None
    with np.errstate(all="ignore"):   # per thread: inf - inf inside the kernel is expected
        for a in range(start, stop, CHUNK):
            b = min(a + CHUNK, stop)
            k = b - a
            xs, lo = reader.read(a, b, bufs)
            os = out[a:b] if sink is None else rbuf[:k]
            if lo is not None and plan.identity:
                xs, lo = _fp64_exact(plan, xs, lo, bufs.moved[:k], counts), None
            elif lo is not None:    # Format refuses p > 51 but for FP64 itself
                xs = _odd(xs, lo, bufs.odd[:k])
            top = _round_into(plan, xs, os, ubuf[:k], fbuf[:k], counts)
            if counts is not None and top is not None and not top < np.inf:
                counts["invalid"] += reader.signalling(a, b)   # only chunks with inf/NaN
            if sink is not None:
                sink(a, b, os)


class _Reader:
    """A real input read chunk by chunk as float64 ``(hi, lo)`` pairs (``lo`` None where
    ``hi`` alone is exact), converting one chunk at a time, so that no full float64
    copy of a float16/float32/integer/bool/long double input is ever made.

    Only what NumPy cannot view as 1-D without copying (non-contiguous input,
    non-native byte order) is first copied whole, in its own dtype; object arrays of
    Python numbers are converted whole (`as_real_array`), as they hold Python objects
    anyway. ``signalling(a, b)`` counts the signalling NaNs among elements ``a:b``,
    on the input's own bits: NumPy's float32 -> float64 cast quiets them on x86."""

    #: IEEE-layout float dtypes with NaNs: (unsigned view, exponent mask, quiet bit).
    _NAN_BITS = {np.dtype(np.float16): (np.uint16, 0x7C00, 1 << 9),
                 np.dtype(np.float32): (np.uint32, 0x7F80_0000, 1 << 22),
                 np.dtype(np.float64): (np.uint64, 0x7FF0_0000_0000_0000, 1 << 51)}

    def __init__(self, x, lo=None):
        if lo is not None:                       # a float64 (hi, lo) pair, as round_exact's
            self._setup_pair(np.asarray(x, np.float64), np.asarray(lo, np.float64))
            return
        a = as_array(x)
        self.shape, self.size = a.shape, a.size
        kind, dt = a.dtype.kind, a.dtype
        ml = kind == "V" and getattr(dt.type, "__module__", "").startswith("ml_dtypes")
        # A long double that is a double (MSVC, arm64 macOS) is cast like float32.
        long_double = kind == "f" and dt.itemsize > 8 and not _long_double_is_float64()
        if not (kind in "fbiu" or ml):           # objects, complex, strings: as_real_array's rules
            hi, lo = as_real_array(a if isinstance(x, np.ndarray) else x)
            self._setup_pair(hi, lo)
            return
        if not dt.isnative:
            a = a.astype(dt.newbyteorder("="))
        # A view of contiguous (and of 1-D strided) input; other input is copied.
        self.flat = a.reshape(-1)
        dt = self.flat.dtype
        self.nan_bits = self._nan_bits(dt)
        if dt == np.float64 and self.flat.flags.c_contiguous:
            self._read = _Reader._read_float64
        elif kind in "iu" and dt.itemsize == 8:
            self._read = _Reader._read_int64
        elif long_double:
            self._read = _Reader._read_long_double
        else:
            self._read = _Reader._read_cast           # every value is a float64 value: exact
            # (and strided float64 chunks are gathered: the kernels view them as ints)

    def _setup_pair(self, hi, lo):
        self.shape, self.size = hi.shape, hi.size
        self.flat = np.ascontiguousarray(hi).reshape(-1)
        self.lo = None if lo is None else np.ascontiguousarray(
            np.broadcast_to(lo, hi.shape)).reshape(-1)
        self.nan_bits = self._nan_bits(self.flat.dtype)
        self._read = _Reader._read_pair

    #: The ml_dtypes types with IEEE NaNs (the fn/fnuz ones have no signalling NaN).
    _ML_NAN_BITS = {"bfloat16": (np.uint16, 0x7F80, 1 << 6),
                    "float8_e5m2": (np.uint8, 0x7C, 1 << 1)}

    @classmethod
    def _nan_bits(cls, dt):
        if dt in cls._NAN_BITS:
            return cls._NAN_BITS[dt]
        if getattr(dt.type, "__module__", "").startswith("ml_dtypes"):
            return cls._ML_NAN_BITS.get(dt.name)
        return None

    def read(self, a, b, bufs):
        """Elements ``a:b`` as float64 ``(hi, lo)``, in ``bufs`` where a conversion is needed."""
        # The reader keeps a plain function, not a bound method: a bound method stored on
        # the instance is a reference cycle that keeps the input alive until the cyclic GC.
        return self._read(self, a, b, bufs)

    def buffers(self, n):
        """Per-span work buffers for chunks of at most ``n`` elements."""
        return _ReadBuffers(n, self.flat.dtype)

    def signalling(self, a, b):
        """How many of elements ``a:b`` are signalling NaNs (exponent all ones, nonzero
        fraction, quiet bit clear), read on the input's own bits."""
        if self.nan_bits is None:
            return 0
        return int(np.count_nonzero(_signalling(self.flat[a:b], self.nan_bits)))

    def _read_float64(self, a, b, bufs):
        return self.flat[a:b], None

    def _read_cast(self, a, b, bufs):
        hi = bufs.hi[:b - a]
        np.copyto(hi, self.flat[a:b], casting="unsafe")   # exact: a value of float64
        return hi, None

    def _read_pair(self, a, b, bufs):
        return self.flat[a:b], (None if self.lo is None else self.lo[a:b])

    def _read_int64(self, a, b, bufs):
        k = b - a
        chunk, low_i, hi, lo = self.flat[a:b], bufs.ints[:k], bufs.hi[:k], bufs.lo[:k]
        np.bitwise_and(chunk, 2047, out=low_i)
        np.copyto(lo, low_i, casting="unsafe")            # exact: below 2**11
        if not lo.any():
            np.copyto(hi, chunk, casting="unsafe")        # exact: at most 53 significant bits
            return hi, None
        np.subtract(chunk, low_i, out=low_i)
        # Clearing the low 11 bits leaves at most 53 significant bits: exact in float64.
        np.copyto(hi, low_i, casting="unsafe")
        return _two_sum_into(hi, lo, bufs)                # integers: s is finite

    def _read_long_double(self, a, b, bufs):
        chunk = self.flat[a:b]
        hi, lo = as_real_array(chunk)     # long doubles: (hi, lo) of one chunk, checked
        return hi, lo


class _ReadBuffers:
    """The conversion buffers of one span (allocated on first use)."""

    def __init__(self, n, dtype):
        self.n, self.dtype = n, dtype

    def __getattr__(self, name):
        if name == "ints":        # 64-bit integers: tmp2 is free until TwoSum
            buf = self.tmp2.view(self.dtype)
        elif name == "odd":       # free again once TwoSum returned
            buf = self.tmp2
        elif name in ("hi", "lo", "tmp", "tmp2", "moved"):
            buf = np.empty(self.n, np.float64)
        else:
            raise AttributeError(name)
        setattr(self, name, buf)
        return buf


def _long_double_is_float64():
    return np.finfo(np.longdouble).nmant <= 52


def _two_sum_into(a, b, bufs):
    """TwoSum (Knuth) in work buffers: (s, t) with s == fl(a + b) and s + t == a + b
    exactly, for finite s; overwrites ``a`` and ``b`` (t is returned in ``b``)."""
    s, bb = bufs.tmp[:a.size], bufs.tmp2[:a.size]
    np.add(a, b, out=s)
    np.subtract(s, a, out=bb)
    np.subtract(b, bb, out=b)                  # b - bb
    np.subtract(s, bb, out=bb)
    np.subtract(a, bb, out=a)                  # a - (s - bb)
    np.add(a, b, out=b)                        # TwoSum: s + t == a + b exactly
    return s, b


#: Elements per thread below which `round` uses fewer threads.
PARALLEL_MIN = 1 << 20
_POOL = None
_POOL_LOCK = threading.Lock()


def _default_threads():
    env = os.environ.get("LOWPREC_NUM_THREADS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise ValueError(f"LOWPREC_NUM_THREADS must be a positive integer, got {env!r}")
        return int(env)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:   # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 4))


try:
    _THREADS = _default_threads()
except ValueError as exc:
    warnings.warn(f"{exc}; using one thread", RuntimeWarning, stacklevel=2)
    _THREADS = 1


def threads(n: int | None = None) -> int:
    """Get, or set, how many threads `round` (and the elementwise arithmetic of
    `lowprec.arith`) may use on large inputs.

    Inputs of at least ``PARALLEL_MIN`` elements per thread (2**20) are split into
    contiguous spans rounded on separate threads (NumPy releases the GIL inside
    its loops); results and flags are identical for any number of threads. The default is
    the number of usable cores, at most 4, or the environment variable
    ``LOWPREC_NUM_THREADS``. Mode ``"sr"`` always uses one thread.

    Parameters
    ----------
    n : int, optional
        New number of threads (at least 1). Omit it to only read the setting.

    Returns
    -------
    int
        The setting before the call.

    Examples
    --------
    >>> import lowprec as lp
    >>> before = lp.threads(1)        # one thread from here on
    >>> lp.threads(before)
    1
    """
    global _THREADS
    previous = _THREADS
    if n is not None:
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            raise TypeError(f"threads must be an int, got {type(n).__name__} {n!r}")
        if n < 1:
            raise ValueError(f"threads must be at least 1, got {n!r}")
        _THREADS = int(n)
    return previous


def _forget_pool():
    # A forked child inherits the pool object but not its threads, and a lock that a
    # thread of the parent may have held.
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _pool(n):
    """A shared pool of at least ``n`` worker threads.

    A pool too small for ``n`` is replaced, never shut down: another call may still
    be submitting to it (a shut-down pool refuses new work). The old pool's threads
    end once its last user drops it (the executor is garbage-collected)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL._max_workers < n:
            _POOL = concurrent.futures.ThreadPoolExecutor(n, thread_name_prefix="lowprec")
        return _POOL


def _odd(hi, lo, out):
    """Round-to-odd of the exact value ``v`` at float64's precision.

    ``hi`` is either float64 neighbour of ``v`` (a faithful rounding; ±0 carries
    ``v``'s sign) and ``lo`` has the sign of ``v - hi`` (zero iff ``v == hi``).
    An inexact ``v`` becomes whichever neighbour has an odd last bit: it lies on the
    same side of every point of a format of at most 51 bits, and of its midpoints,
    as ``v`` does, so rounding it once in any mode rounds ``v`` correctly.
    """
    nz = lo != 0
    if not nz.any():
        return hi
    hb, ob = hi.view(np.uint64), out.view(np.uint64)
    np.bitwise_xor(hb, lo.view(np.uint64), out=ob)
    np.right_shift(ob, np.uint64(63), out=ob)     # 1 where lo points toward zero
    ob &= nz
    np.subtract(hb, ob, out=ob)                 # even hi, lo toward zero: the lower neighbour
    ob |= nz                                    # even hi, lo away from zero: the upper one
    return out


def _fp64_exact(plan, hi, lo, out, counts):
    """Round the chunk ``hi + lo`` to FP64 itself into ``out`` (returned), where
    round-to-odd has no spare bits, and count what ``lo`` made inexact (the kernel
    then sees the result alone); ``out`` may be ``hi`` itself."""
    if out is not hi:
        np.copyto(out, hi)
    nz = (lo != 0) & np.isfinite(out)
    past = None
    if nz.any() and plan.mode != "rne":   # hi is already RN(hi + lo)
        _fp64_move(plan, out, lo, nz)      # the neighbour of max is inf: that is right
        # A finite value stepped to inf overflowed (unbounded exponent: beyond max);
        # the kernel would take the inf for an input, so it is counted and saturated here.
        past = nz & np.isinf(out)
        if past.any() and plan.saturate:
            out[past] = np.copysign(plan.max, out[past])
    if counts is not None:
        counts["inexact"] += int(np.count_nonzero(nz))
        counts["underflow"] += int(np.count_nonzero(np.abs(out[nz]) < 2.0 ** -1022))
        if past is not None:
            n_past = int(np.count_nonzero(past))
            counts["overflow"] += n_past
            if plan.saturate:
                counts["saturated"] += n_past
    return out


def _fp64_move(plan, hi, lo, nz):
    """Directed, odd, away and stochastic rounding of ``hi + lo`` (lo != 0 where nz)."""
    h, l_ = hi[nz], lo[nz]
    n = np.nextafter(h, np.copysign(np.inf, l_))
    take = _steps_toward_lo(plan.mode, h, l_)
    if plan.mode == "rna":
        take = (2 * np.abs(l_) == np.abs(n - h)) & (np.abs(n) > np.abs(h))
    elif plan.mode == "sr":
        take = _draw(plan, np.empty(h.size)) < np.abs(l_) / np.abs(n - h)
    hi[nz] = np.where(take, n, h)


def _steps_toward_lo(mode, h, lo):
    """Where rz, ru, rd or ro round ``v`` to the neighbour of ``h`` on ``lo``'s side rather
    than to ``h`` (``h`` a float64 nearest to v, ``lo`` of the sign of v - h, 0 iff v == h);
    None for the other modes."""
    if mode == "rz":
        return (lo != 0) & (np.signbit(lo) != np.signbit(h))
    if mode == "ru":
        return lo > 0
    if mode == "rd":
        return lo < 0
    if mode == "ro":
        return (lo != 0) & ((h.view(np.uint64) & np.uint64(1)) == 0)
    return None


def round(x: ArrayLike, fmt: FormatLike, mode: str = "rne", *,  # noqa: A001
          rng: np.random.Generator | int | None = None, sr_bits: int | None = None,
          subnormals: bool | None = None,
          saturate: bool = False) -> NDArray[np.float64] | np.float64:
    """Round real values to a format: one rounding of each exact input value.

    Parameters
    ----------
    x : array_like
        Real input: float16/32/64 (and long double), integers (Python ints of any
        width below 2**1024 - 2**970 too), bools, ml_dtypes arrays, lists or
        scalars. It is never modified.
    fmt : Format or str
        Target format (anything `lowprec.format` accepts).
    mode : {"rne", "rna", "rz", "ru", "rd", "ro", "sr"}
        Nearest-even, nearest-away, toward zero, up, down, round-to-odd, stochastic.
    rng : numpy.random.Generator or int, optional
        Randomness for ``"sr"``; an int is a seed (same seed, same result).
    sr_bits : int, optional
        For ``"sr"``: draw only this many random bits, so an element rounds away
        from zero with probability ``floor(f * 2**sr_bits) / 2**sr_bits``, where ``f``
        is its distance from the neighbour nearer zero in units of the gap
        (hardware-style stochastic rounding, the same for ``x`` and ``-x``). By
        default the probability ``f`` is exact to 53 bits.
    subnormals : bool, optional
        Override the format's subnormal support. With ``False`` a value below the
        smallest normal rounds to 0 or ±smallest_normal by the mode's rule.
    saturate : bool
        Send every finite overflow, and ±inf for formats without inf, to ±max.

    Returns
    -------
    numpy.ndarray or numpy.float64
        float64 values, each a value of ``fmt`` (or NaN/±inf), with the shape of
        ``np.asarray(x)``.

    Notes
    -----
    The input is converted to float64 chunk by chunk (`CHUNK` elements, 64-bit
    integers and long doubles as exact ``hi + lo`` pairs), so that the extra memory
    of a call, beyond its float64 result, stays below `WORK_BYTES` (16 MiB) per
    thread whatever the input's size and dtype; only non-contiguous input is first
    copied whole, in its own dtype. Signalling NaNs (found on the input's own bits:
    NumPy's float32 -> float64 cast may already have quieted them) come back as
    quiet NaNs of the same sign and count ``invalid`` (IEEE 754 §6.2).

    Raises
    ------
    TypeError
        For non-real ``x`` (complex, strings, objects), and for an option of the
        wrong type, whatever the mode: ``subnormals`` not a bool or None,
        ``saturate`` not a bool, ``rng`` not a Generator, int seed or None
        (``rng=True`` included), ``sr_bits`` or ``mode`` not an int or a str.
    ValueError
        For an unknown mode or format, ``sr_bits`` outside [1, 53] or given with a
        mode other than ``"sr"``, and a negative seed.

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.round([0.1, 1 + 2**-11, 70000.0], "fp16")
    array([0.09997559, 1.        ,        inf])
    >>> lp.round(1 + 2**-11, "fp16", mode="ru")
    np.float64(1.0009765625)
    >>> lp.round(500.0, "e4m3"), lp.round(500.0, "e4m3", saturate=True)
    (np.float64(nan), np.float64(448.0))
    >>> lp.round(0.3, "fp4", mode="sr", rng=0) in (0.0, 0.5)
    True
    """
    plan = _plan(fmt, mode, subnormals, saturate, sr_bits, rng)
    out = _run(plan, read_input(x, "x"))
    return out[()] if out.ndim == 0 else out


def _signalling(a, nan_bits):
    """Where the 1-D array ``a`` holds signalling NaNs (exponent all ones, nonzero
    fraction, quiet bit clear), read on its own bits with ``nan_bits`` = (unsigned
    view, exponent mask, quiet bit)."""
    udt, exp, quiet = nan_bits
    mag = a.view(udt) & (np.iinfo(udt).max >> udt(1))   # without the sign
    return (mag > udt(exp)) & (mag < udt(exp | quiet))


def signalling_nans(*arrays):
    """How many positions of the equal-length 1-D ``arrays`` hold a signalling NaN in
    at least one of them (each read on its own bits): IEEE 754 §7.2 signals invalid
    once for an operation with a signalling NaN operand."""
    found = None
    for a in arrays:
        nan_bits = _Reader._nan_bits(a.dtype)
        if nan_bits is not None:
            m = _signalling(a, nan_bits)
            found = m if found is None else found | m
    return 0 if found is None else int(np.count_nonzero(found))


def read_input(x, name):
    """A chunk reader of the real input ``x``; `TypeError` naming ``name`` otherwise."""
    try:
        return _Reader(x)
    except TypeError as exc:
        raise TypeError(f"{name}: {exc}") from None


def round_exact(hi: ArrayLike, lo: ArrayLike, fmt: FormatLike, mode: str = "rne", *,
                rng: np.random.Generator | int | None = None, sr_bits: int | None = None,
                subnormals: bool | None = None,
                saturate: bool = False) -> NDArray[np.float64] | np.float64:
    """Round the exact sum ``hi + lo`` of two float64 arrays, where ``hi == fl(hi + lo)``.

    This is the entry point for error-free transformations (TwoSum, Dekker's
    product): the kernel sees the exact result's direction, so directed and
    nearest modes are correct without double rounding, for formats of up to 51
    bits of precision and for FP64 itself.

    ``hi`` and ``lo`` follow the input rules of `round` (real numbers only: a
    string, None or complex value is a `TypeError` naming the argument) and must be
    float64 values (a wide integer float64 cannot hold is a `ValueError`); the
    options are checked as `round` checks them.

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.round_exact(1.0, 2.0**-60, "bf16", mode="ru")
    np.float64(1.0078125)
    >>> lp.round_exact(1.0, -2.0**-60, "bf16", mode="rz")
    np.float64(0.99609375)
    """
    plan = _plan(fmt, mode, subnormals, saturate, sr_bits, rng)
    hi, lo = _float64_operand(hi, "hi"), _float64_operand(lo, "lo")
    if lo.shape != hi.shape:
        lo = np.broadcast_to(lo, hi.shape)
    lo = np.where(np.isfinite(hi), lo, 0.0)   # inf and NaN carry no tail
    return _finish(plan, hi, lo)


def _float64_operand(v: ArrayLike, name: str) -> NDArray[np.float64]:
    """``v`` as float64 by the input rules of `round` (`as_real_array`): `TypeError`
    naming ``name`` for non-real input, `ValueError` for values float64 cannot hold."""
    try:
        hi, lo = as_real_array(v)
    except TypeError as exc:
        raise TypeError(f"{name}: {exc}") from None
    if lo is not None and np.any(lo):
        raise ValueError(f"{name} must hold float64 values exactly; got values (wide "
                         f"integers or long doubles) that float64 cannot hold")
    return hi


def _plan(fmt, mode, subnormals, saturate, sr_bits, rng):
    """Check the options shared by `round`, `round_exact` and `encode` and plan the
    rounding. A wrong-typed option is a `TypeError` naming it, whatever the mode
    (``subnormals="no"`` is truthy, ``rng=True`` would be seed 1)."""
    fmt = _format(fmt)
    check_mode(mode)
    check_rng(rng)
    subnormals = check_bool("subnormals", subnormals, optional=True)
    saturate = check_bool("saturate", saturate)
    return _Plan(fmt, mode, subnormals, saturate, sr_bits, rng)


def _finish(plan, hi, lo):
    """Round float64 ``hi`` (+ ``lo``, where ``hi == fl(hi + lo)``) into a new array, a
    NumPy scalar for 0-d input."""
    out = _run(plan, _Reader(hi, lo) if lo is not None else _Reader(np.asarray(hi, np.float64)))
    return out[()] if out.ndim == 0 else out
