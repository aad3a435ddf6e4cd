"""`lp.round` and `lp.round_exact`: the public face of the one rounding kernel.

Both check their options with `engine.plan.plan` and round through
`engine.kernel` (docs/design/DESIGN.md, "Layout"). `lp.threads` sets how many
threads the chunked kernels may use. The extra memory of a call beyond its result is
at most `WORK_BYTES` per thread (16 MiB: `WORK_BUFFERS` buffers of `CHUNK` float64
values), whatever the input's size and dtype.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .engine.checks import MODES
from .engine.inputs import float64_operand, read_input
from .engine.kernel import finish, round_small, run
from .engine.lazy import lazy_entry
from .engine.parallel import CHUNK, WORK_BUFFERS, WORK_BYTES, threads
from .engine.plan import plan
from .engine.unsigned import settle, twin
from .formats import Format, FormatLike
from .formats import format as _format
from .status import recording
from .types import Mode, RNGLike

__all__ = ["round", "round_exact", "threads", "MODES", "CHUNK", "WORK_BUFFERS", "WORK_BYTES"]

_FLOAT64 = np.dtype(np.float64)      # native float64's dtype (a singleton)


@lazy_entry("round", 1)
def round(x: ArrayLike, fmt: FormatLike, mode: Mode = "rne", *,  # noqa: A001
          rng: RNGLike = None, sr_bits: int | None = None,
          subnormals: bool | None = None, saturate: bool = False,
          offset: int = 0) -> NDArray[np.float64] | np.float64:
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
        Randomness for ``"sr"``.

        * An int is a seed: same seed, same result.
        * A Generator gives one draw, ``integers(0, 2**63)``, used as the seed. So it
          advances by one draw per call.
        * None gives a fresh seed.

        Element ``i`` (C order) draws the word of position ``offset + i`` of the
        seed's counter-based stream. The stream is NumPy's Philox keyed by the seed
        (docs/design/DESIGN.md, "Rounding"). So the result is the same for any chunk
        size, thread count or split of the array.
    sr_bits : int, optional
        For ``"sr"``: draw only this many random bits. An element then rounds away
        from zero with probability ``floor(f * 2**sr_bits) / 2**sr_bits``. Here ``f``
        is its distance from the neighbour nearer zero in units of the gap. This is
        hardware-style stochastic rounding, the same for ``x`` and ``-x``. By
        default the probability ``f`` is exact to 53 bits.
    subnormals : bool, optional
        Override the format's subnormal support. With ``False`` a value below the
        smallest normal rounds to 0 or ±smallest_normal by the mode's rule.
    saturate : bool
        Send every finite overflow, and ±inf for formats without inf, to ±max.
    offset : int
        For ``"sr"``: the position of ``x``'s first element in a larger array, so
        that ``round(x[a:b], ..., offset=a)`` is ``round(x, ...)[a:b]`` (1-D, or C
        order). Unused by the other modes.

    Returns
    -------
    numpy.ndarray or numpy.float64
        float64 values, each a value of ``fmt`` (or NaN/±inf), with the shape of
        ``np.asarray(x)``.

    Notes
    -----
    The input is converted to float64 chunk by chunk, `CHUNK` elements at a time.
    64-bit integers and long doubles become exact ``hi + lo`` pairs. So the extra
    memory of a call, beyond its float64 result, stays below `WORK_BYTES` (16 MiB)
    per thread whatever the input's size and dtype. Only non-contiguous input is
    first copied whole, in its own dtype.

    Signalling NaNs are found on the input's own bits, since NumPy's float32 ->
    float64 cast may already have quieted them. They come back as quiet NaNs of the
    same sign and count ``invalid`` (IEEE 754 §6.2).

    Raises
    ------
    TypeError
        For non-real ``x`` (complex, strings, objects). Also for an option of the
        wrong type, whatever the mode:

        * ``subnormals`` not a bool or None.
        * ``saturate`` not a bool.
        * ``rng`` not a Generator, int seed or None (``rng=True`` included).
        * ``sr_bits`` or ``mode`` not an int or a str.
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
    spec = _format(fmt) if not isinstance(fmt, Format) else fmt
    if not spec.signed:
        return _round_unsigned(x, spec, mode, rng=rng, sr_bits=sr_bits,
                               subnormals=subnormals, saturate=saturate, offset=offset)
    p = plan(fmt, mode, rng=rng, subnormals=subnormals, saturate=saturate, sr_bits=sr_bits,
             offset=offset)
    if (type(x) is np.ndarray and x.dtype is _FLOAT64 and x.flags.c_contiguous
            and recording() is None):
        out = round_small(p, x)             # a small call: no spans, no error state
        if out is not None:
            return out[()] if out.ndim == 0 else out
    out = run(p, read_input(x, "x"))
    return out[()] if out.ndim == 0 else out


def _round_unsigned(x, fmt, mode, **options):
    """`round` into an unsigned format: through its signed twin, then its own rules
    (`engine.unsigned`); the flags are the twin's rounding's."""
    r = round(x, twin(fmt), mode, **options)
    with np.errstate(all="ignore"):
        zero_in = np.asarray(x, dtype=np.float64) == 0        # read: x was read above
    # The modes that send an overflow to inf under IEEE 754 (rz, rd and ro keep max).
    out = settle(r, zero_in, fmt, bool(options["saturate"]), mode in ("rne", "rna", "ru", "sr"))
    return out[()] if out.ndim == 0 else out


def round_exact(hi: ArrayLike, lo: ArrayLike, fmt: FormatLike, mode: Mode = "rne", *,
                rng: RNGLike = None, sr_bits: int | None = None,
                subnormals: bool | None = None, saturate: bool = False,
                offset: int = 0) -> NDArray[np.float64] | np.float64:
    """Round the exact sum ``hi + lo`` of two float64 arrays, where ``hi == fl(hi + lo)``.

    This is the entry point for error-free transformations (TwoSum, Dekker's
    product). The kernel sees the exact result's direction. So directed and nearest
    modes are correct without double rounding, for formats of up to 51 bits of
    precision and for FP64 itself.

    ``hi`` and ``lo`` follow the input rules of `round`: real numbers only. A
    string, None or complex value is a `TypeError` naming the argument. They must
    be float64 values: a wide integer float64 cannot hold is a `ValueError`. The
    options are checked as `round` checks them.

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.round_exact(1.0, 2.0**-60, "bf16", mode="ru")
    np.float64(1.0078125)
    >>> lp.round_exact(1.0, -2.0**-60, "bf16", mode="rz")
    np.float64(0.99609375)
    """
    p = plan(fmt, mode, rng=rng, subnormals=subnormals, saturate=saturate, sr_bits=sr_bits,
             offset=offset)
    hi, lo = float64_operand(hi, "hi"), float64_operand(lo, "lo")
    if lo.shape != hi.shape:
        lo = np.broadcast_to(lo, hi.shape)
    lo = np.where(np.isfinite(hi), lo, 0.0)   # inf and NaN carry no tail
    return finish(p, hi, lo)
