"""Reading real input: any real array-like as float64 ``(hi, lo)`` pairs, chunk by chunk.

`Reader` converts one chunk at a time from the input's own dtype. So no full float64
copy of a float16/float32/integer/long double input is made. `as_real_array`
converts whole arrays by the same rules. Complex, object and string input is a
`TypeError` naming the argument.
"""

from __future__ import annotations

import numbers

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .eft import two_sum, two_sum_into

__all__ = ["as_array", "as_real_array", "Reader", "read_input", "float64_operand",
           "signalling_nans"]

_FLOAT64 = np.dtype(np.float64)


def as_array(x):
    """``np.asarray(x)``, except for lists of integers float64 cannot hold.

    NumPy would make such a list or tuple float64 (``[2**53 + 1, 0.5]``,
    ``[2**63 + 1, -1]``). Here it becomes an object array of Python ints and floats.
    So the integers too are rounded once (see `_python_numbers`)."""
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
    unevaluated sum ``hi + lo``, so that they too are rounded only once. ``lo`` is
    exact for 64-bit integers and long doubles. For wider Python ints it is rounded
    to odd, which is enough for one correct rounding (see `_python_numbers`).
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
        return two_sum(high, low)   # integers: s is finite
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

class Reader:
    """A real input read chunk by chunk as float64 ``(hi, lo)`` pairs.

    ``lo`` is None where ``hi`` alone is exact. The reader converts one chunk at a
    time, so no full float64 copy of a float16/float32/integer/bool/long double
    input is ever made.

    Only what NumPy cannot view as 1-D without copying (non-contiguous input,
    non-native byte order) is first copied whole, in its own dtype. Object arrays of
    Python numbers are converted whole (`as_real_array`), as they hold Python objects
    anyway. ``signalling(a, b)`` counts the signalling NaNs among elements ``a:b``.
    It reads the input's own bits, since NumPy's float32 -> float64 cast quiets
    them on x86."""

    #: IEEE-layout float dtypes with NaNs: (unsigned view, exponent mask, quiet bit).
    _NAN_BITS = {np.dtype(np.float16): (np.uint16, 0x7C00, 1 << 9),
                 np.dtype(np.float32): (np.uint32, 0x7F80_0000, 1 << 22),
                 np.dtype(np.float64): (np.uint64, 0x7FF0_0000_0000_0000, 1 << 51)}

    def __init__(self, x, lo=None):
        if (type(x) is np.ndarray and x.dtype == _FLOAT64 and x.flags.c_contiguous
                and x.dtype.isnative and lo is None):
            # The common case, read in place.
            self.shape, self.size, self.flat = x.shape, x.size, x.reshape(-1)
            self.nan_bits = self._NAN_BITS[_FLOAT64]
            self._read, self.in_place = Reader._read_float64, True
            return
        self.in_place = False      # whether chunks are views of float64 input, with no lo
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
            self._read, self.in_place = Reader._read_float64, True
        elif kind in "iu" and dt.itemsize == 8:
            self._read = Reader._read_int64
        elif long_double:
            self._read = Reader._read_long_double
        else:
            self._read = Reader._read_cast           # every value is a float64 value: exact
            # (and strided float64 chunks are gathered: the kernels view them as ints)

    def _setup_pair(self, hi, lo):
        self.shape, self.size = hi.shape, hi.size
        self.flat = np.ascontiguousarray(hi).reshape(-1)
        self.lo = None if lo is None else np.ascontiguousarray(
            np.broadcast_to(lo, hi.shape)).reshape(-1)
        self.nan_bits = self._nan_bits(self.flat.dtype)
        self._read = Reader._read_pair

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
        return two_sum_into(hi, lo, bufs)                # integers: s is finite

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

def _signalling(a, nan_bits):
    """Where the 1-D array ``a`` holds signalling NaNs (exponent all ones, nonzero
    fraction, quiet bit clear), read on its own bits with ``nan_bits`` = (unsigned
    view, exponent mask, quiet bit)."""
    udt, exp, quiet = nan_bits
    mag = a.view(udt) & (np.iinfo(udt).max >> udt(1))   # without the sign
    return (mag > udt(exp)) & (mag < udt(exp | quiet))

def signalling_nans(*arrays):
    """How many positions of the equal-length 1-D ``arrays`` hold a signalling NaN in
    at least one of them.

    Each array is read on its own bits. IEEE 754 §7.2 signals invalid once for an
    operation with a signalling NaN operand."""
    found = None
    for a in arrays:
        nan_bits = Reader._nan_bits(a.dtype)
        if nan_bits is not None:
            m = _signalling(a, nan_bits)
            found = m if found is None else found | m
    return 0 if found is None else int(np.count_nonzero(found))

def read_input(x, name):
    """A chunk reader of the real input ``x``, or `TypeError` naming ``name``."""
    try:
        return Reader(x)
    except TypeError as exc:
        raise TypeError(f"{name}: {exc}") from None

def float64_operand(v: ArrayLike, name: str) -> NDArray[np.float64]:
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
