"""The one rounding kernel: exact real values -> values of a `Format`, in any mode.

Every rounding in lowprec goes through `round_into`, which rounds one chunk of float64
values. Two drivers call it:

- `run` rounds a whole input, chunk by chunk, on the span machinery of `parallel`.
- `finish` rounds an exact ``hi + lo`` pair.

Each mode uses one of two exact methods:

- The scaling path multiplies each element by a power of two so that the format's
  quantum becomes 1. It rounds to an integer with a NumPy ufunc (``rint``, ``trunc``,
  ``floor``, ``ceil``) and scales back.
- The encoding path works on the float64 bit pattern with integer adds and masks. It
  serves rz, rna, ro and sr for elements in the normal range. For rne it adds and
  subtracts a magic constant instead.

Formats of at most 3 mantissa bits (FP8, FP6, FP4) round by table in every
deterministic mode. The table maps the top 16 bits of each encoding to the result
those methods compute. Each element is rounded once. The kernel never reads a global
default that could change a result, and never modifies its input.
"""

from __future__ import annotations

import sys

import numpy as np

from ..status import FLAG_NAMES, recording
from . import parallel
from .cache import Latest
from .eft import odd
from .float64 import ABS, EXP, QUIET, operand
from .inputs import Reader
from .parallel import in_spans
from .plan import cached_plan
from .scratch import SMALL
from .stream import restrict, uniform_from_words

__all__ = ["round_into", "round_small", "run", "finish", "round_fp64", "draw", "at",
           "subset_plan", "steps_toward_lo"]


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
        np.less_equal(rand, frac, out=frac)   # rand = w (`_uniform_w`): P = floor(f*2**r)/2**r
        np.copysign(frac, t, out=frac)
        np.add(buf, frac, out=t)

def draw(plan, idx):
    """prev(w) for the elements ``idx`` (a mask or sorted indices) of what ``plan``
    rounds.

    w is uniform on {1, 2, ..., 2**r} / 2**r, with r = sr_bits (default 53). So
    ``draw < f`` exactly when ``w <= f``, with probability floor(f * 2**r) / 2**r.
    That is the rule of the encoding path."""
    return np.nextafter(_uniform_at(plan, idx), -1.0)

def _uniform_w(plan, buf):
    """Fill ``buf`` with w of `draw` for every element of the chunk (the kernel's own
    paths test ``w <= f``, which holds exactly when prev(w) < f, and save the step to
    prev(w)). The plan's stream starts at the chunk's first element (`at`)."""
    return uniform_from_words(plan.stream.words(0, buf.size), plan.sr_bits, buf)

def _uniform_at(plan, idx):
    """w of `draw` for the elements ``idx`` of the chunk: each element's own word."""
    sub = restrict(plan.stream, idx)
    return uniform_from_words(sub.words(0, sub.idx.size), plan.sr_bits, np.empty(sub.idx.size))

def at(plan, start):
    """``plan`` for the chunk whose first element is element ``start`` of the call:
    "sr" draws from that position on (other modes: ``plan`` itself)."""
    return plan if plan.stream is None else plan.with_stream(plan.stream.at(start))

def subset_plan(plan, sel):
    """``plan`` for the elements ``sel`` (a mask or sorted indices) of what it rounds.

    Under "sr" they draw their own words (`engine.stream.restrict`). Other modes
    get ``plan`` itself."""
    return plan if plan.stream is None else plan.with_stream(restrict(plan.stream, sel))

_EXP = operand(int(EXP))
_max, _min = np.maximum.reduce, np.minimum.reduce   # ndarray.max without its Python layer

def _round_nearest_even(plan, x, out, ubuf):
    """RNE by the classic magic constant: fl(x + C) - C with C = 1.5 * 2**(e + 52 - m),
    e = max(floor(log2|x|), emin). Returns None (use the scaling path) for chunks
    with inf, NaN or values so large that C would overflow."""
    e = ubuf
    np.bitwise_and(x.view(np.uint64), _EXP, out=e)
    ef = e.view(np.float64)                       # 2**floor(log2|x|), never NaN
    top = _max(ef)
    if not top < plan.magic_top:
        return None
    bottom = _min(ef)
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

_NATIVE_MIN = 1024                            # elements: below, the check costs more
_TINY32 = np.array([2.0 ** -149])              # FP32's least subnormal

def _round_native(x, out):
    """RNE to FP32 by NumPy's cast to float32 and back: IEEE 754's conversion (RNE,
    gradual underflow), one rounding. Returns 0.0 (no element beyond max: the
    overflow rules have nothing to do), or None (use the other paths) when a result
    is inf or NaN, whose rules and NaN payloads are the kernel's, or when this thread
    flushes subnormals to zero (a library built with fast-math can set that)."""
    if not _TINY32.astype(np.float32)[0]:
        return None
    r = x.astype(np.float32)
    if not np.isfinite(r).all():
        return None
    np.copyto(out, r)                          # exact: every float32 is a float64
    return 0.0

def _round_on_encoding(plan, x, out, ubuf):
    """Modes rz, rna, ro and sr on the float64 encoding itself.

    For |x| >= 2**emin the format's last bit is float64's mantissa bit 52 - m, and
    the encoding is sign-magnitude. So rounding the magnitude is integer work on
    the low 52 - m bits:

    - rz clears them.
    - rna adds half of them first. A carry moves into the exponent exactly as the
      value's next binade.
    - ro ORs in a sticky bit.
    - sr adds that many random bits. The carry happens with probability equal to
      the dropped fraction.

    Smaller |x| go through the scaling path."""
    xb, e, ob = x.view(np.uint64), ubuf, out.view(np.uint64)
    np.bitwise_and(xb, _EXP, out=e)
    ef = e.view(np.float64)                     # 2**floor(log2|x|), or inf
    top = _max(ef)
    small = None
    if _min(ef) < plan.lo_f:
        small = np.flatnonzero(ef < plan.lo_f)
    mode, keep = plan.mode, plan.keep_mask
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
        bits = plan.stream.words(0, x.size)
        if small is not None:
            small_words = bits[small]    # the subnormal range's elements reuse their words
        r = int(plan.shift) if plan.sr_bits is None else min(plan.sr_bits, int(plan.shift))
        np.right_shift(bits, np.uint64(64 - r), out=bits)
        if r < plan.shift:
            np.left_shift(bits, plan.shift - np.uint64(r), out=bits)
        np.add(xb, bits, out=ob)
        np.bitwise_and(ob, keep, out=ob)
    if small is not None:
        out[small] = _round_subnormal_range(plan, x[small], small,
                                            small_words if mode == "sr" else None)
    return top

def _round_subnormal_range(plan, xs, idx, words=None):
    """Round values with |x| < 2**emin (a fresh array ``xs``: the elements ``idx`` of
    the chunk) in place, where the quantum is 2**(emin - m): scale it to
    1, round to an integer, scale back."""
    q = plan.fmt.emin - plan.fmt.mantissa_bits
    xs *= 2.0 ** -q                 # exact: |xs| < 2**m after, and q >= -1020
    rand = None
    if plan.mode == "sr":    # each element's own word (``words``: drawn already)
        rand = (_uniform_at(plan, idx) if words is None
                else uniform_from_words(words, plan.sr_bits, np.empty(xs.size)))
    _to_integer(xs, plan.mode, np.empty_like(xs), rand)
    xs *= 2.0 ** q                  # exact: an integer of at most m bits times 2**q
    return xs

# (fmt, mode, subnormals, saturate) -> tables; 1 MiB each: a sweep over custom
# formats keeps only the latest.
_TABLES = Latest(32)

_TOP16 = slice(3, None, 4) if sys.byteorder == "little" else slice(0, None, 4)

_LOW48 = operand((1 << 48) - 1)

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
            round_into(plan, x, table, np.empty(x.size, np.uint64), np.empty_like(x), counts)
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

def _round_chunk(plan, x, out, ubuf, fbuf, lo_e=None, spare=None):
    """Round the float64 chunk ``x`` into ``out`` with an unbounded top exponent
    (``fbuf`` and ``spare``: work buffers of at least its size, or None to allocate
    them where they are needed).

    Returns the largest 2**floor(log2|x|) seen (inf for inf/NaN) so the caller can
    skip the overflow rules when no element comes near ``max``. "sr": element i draws
    word i of the plan's stream (`at` starts it at the chunk's position)."""
    if plan.identity and lo_e is None:
        out[...] = x
        top = (x.view(np.uint64) & EXP).view(np.float64).max(initial=0.0)
        if not plan.subnormals:
            # FP64 without subnormals: only float64's own subnormals move.
            small = np.less(x.view(np.uint64) & ABS, plan.tiny_bits) & (x != 0)
            if small.any():
                t = x[small] * 2.0 ** 1022
                r = _uniform_at(plan, small) if plan.mode == "sr" else None
                _to_integer(t, plan.mode, np.empty_like(t), r)
                out[small] = t * 2.0 ** -1022
    elif (plan.native and lo_e is None and x.size >= _NATIVE_MIN
          and (top := _round_native(x, out)) is not None):
        pass
    elif plan.encoding and lo_e is None:
        top = _round_on_encoding(plan, x, out, ubuf)
    elif (plan.magic and lo_e is None
          and (top := _round_nearest_even(plan, x, out, ubuf)) is not None):
        pass
    else:
        e = ubuf
        np.bitwise_and(x.view(np.uint64), _EXP, out=e)  # bits of 2**floor(log2|x|)
        ef = e.view(np.float64)                          # never NaN: fmax is safe
        top = _max(ef)
        lo = plan.lo_f if lo_e is None else lo_e
        if ef.min() < lo:
            np.copyto(ef, lo, where=ef < lo)
        if plan.clamp_top:
            np.minimum(ef, plan.hi_f, out=ef)
        if not plan.subnormals and lo_e is None:
            # Without subnormals the quantum below 2**emin is 2**emin itself.
            small = np.less(x.view(np.uint64) & ABS, plan.tiny_bits)
            e += small.astype(np.uint64) * plan.m_bits
        np.subtract(e, plan.m_bits, out=e)             # bits of 2**q, q = e - m
        if fbuf is None:
            fbuf = np.empty(x.size)
        inv = fbuf.view(np.uint64)
        np.subtract(plan.two_one, e, out=inv)          # bits of 2**-q
        np.multiply(x, fbuf, out=out)                  # exact: scaling by a power of two
        rand = _uniform_w(plan, fbuf) if plan.mode == "sr" else None
        spare = np.empty(out.size, np.float64) if spare is None else spare[:out.size]
        _to_integer(out, plan.mode, spare, rand)
        np.multiply(out, ef, out=out)   # exact, or beyond max (the overflow rules follow)
    if plan.no_negative_zero:
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
        out[nans] = (x[nans].view(np.uint64) | QUIET).view(np.float64)
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
    ax = np.abs(x)
    # A finite x is inexact where out != x (a NaN out included: NaN != x).
    inexact = out != x
    if not _max(ax) < np.inf:                     # inf or NaN inputs count nothing here
        inexact &= np.isfinite(x)
    tiny = ax < fmt.smallest_normal               # finite: inf and NaN compare False
    tiny_in = tiny & inexact
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
        small = tiny & (x != 0)
        if small.any():
            xs = np.ascontiguousarray(x[small])
            r = np.empty_like(xs)
            sub_plan = cached_plan(fmt, plan.mode if plan.mode != "sr" else "rne", True,
                                   plan.saturate, None)
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

def round_into(plan, x, out, ubuf, fbuf, counts=None, spare=None):
    """The per-chunk step every caller shares: round ``x`` into ``out``, apply the
    overflow rules, and add the flag counts to ``counts`` (None: nobody listens).
    ``ubuf``, ``fbuf`` and ``spare`` are work buffers of ``x``'s size. ``fbuf`` and
    ``spare`` may be None, and are then made where a path needs them. Under "sr" the
    plan's stream starts at the chunk's first element (`at`).

    Returns the largest 2**floor(log2|x|) of the chunk (inf when it holds inf or
    NaN), or None from the table lookup, which never needs it."""
    if counts is None and plan.by_table:
        _round_by_table(plan, x, out, ubuf)
        return None
    top = _round_chunk(plan, x, out, ubuf, fbuf, spare=spare)
    masks = _overflow(plan, x, out) if top >= plan.safe_top else None
    if counts is not None:
        _classify(plan, x, out, masks, counts)
    return top

def round_small(plan, x, in_place=False):
    """RNE of a small contiguous float64 chunk ``x`` (at most `scratch.SMALL` elements)
    into a new array.

    With ``in_place`` it rounds into ``x`` itself, the caller's temporary. It takes
    the table lookup or the magic-constant path alone: no spans, buffers or flag
    counts. Returns None where that path does not settle the chunk, so that the
    caller takes `run`. Such chunks have other plans, or inf, NaN or values near max
    (the overflow rules). Its operations raise no floating-point error on the chunks
    it settles, so it needs no error state."""
    if not plan.magic or not 0 < x.size <= SMALL:
        return None
    flat = x if x.ndim == 1 else x.reshape(-1)
    if plan.by_table:
        e = np.empty(x.size, np.uint64)
    else:
        # Every |x| in [2**emin, min(2**emax, magic_top)) (one test, `Plan.small_span`):
        # `_round_nearest_even` without its clamp, sign fix or second reduction. No
        # result is zero or overflows there.
        e = np.bitwise_and(flat.view(np.uint64), _EXP)
        np.subtract(e, plan.lo_bits, out=e)           # wraps below 2**emin (zeros too)
        if _max(e) < plan.small_span:
            np.add(e, plan.lo_magic_bits, out=e)      # C = 1.5 * 2**(e + 52 - m)
            c = e.view(np.float64)
            out = np.add(flat, c, out=flat if in_place else None)
            np.subtract(out, c, out=out)              # the argument of _round_nearest_even
            return out if x.ndim == 1 else out.reshape(x.shape)
    out = np.empty(x.size)
    if plan.by_table:                                 # FP8 and narrower: every input
        _round_by_table(plan, flat, out, e)
        return out.reshape(x.shape)
    top = _round_nearest_even(plan, flat, out, e)
    if top is None or not top < plan.safe_top:
        return None
    if plan.no_negative_zero:
        out += 0.0                                    # -0 + +0 is +0 under RNE
    return out.reshape(x.shape)

def run(plan, reader, sink=None):
    """Round the input of ``reader`` chunk by chunk.

    The result goes into a new float64 array of its shape, which is returned. With
    ``sink`` it goes instead into a work buffer handed to
    ``sink(start, stop, values)`` chunk by chunk, and nothing is returned.

    Large inputs are cut into one contiguous span per thread (`threads`). Each span
    is converted and rounded chunk by chunk with its own buffers. So extra memory is
    a few chunks per thread. The result does not depend on the number of threads,
    "sr" included: element i draws the word of its position i."""
    n = reader.size
    out = np.empty(n, np.float64) if sink is None else None
    listener = recording()
    with np.errstate(all="ignore"):  # inf - inf inside the kernel is expected
        counts = in_spans(plan, n, listener is not None,
                          lambda p, span, tally: _run_span(p, reader, out, sink, span, tally))
    if listener is not None:
        listener.add(counts)
    if sink is not None:
        return None
    return out if reader.shape == out.shape else out.reshape(reader.shape)

def _run_span(plan, reader, out, sink, span, counts):
    """Convert and round elements ``start:stop`` of ``reader`` chunk by chunk, into
    ``out`` (or a buffer handed to ``sink``); add the flag counts to ``counts``.
    The caller holds `np.errstate` (each worker thread its own)."""
    start, stop = span
    n = min(parallel.CHUNK, stop - start)
    if 0 < n == stop - start and sink is None and reader.in_place:
        # One chunk of float64 input: rounded where it lies, the buffers made on demand.
        top = round_into(at(plan, start), reader.flat[start:stop], out[start:stop],
                         np.empty(n, np.uint64), None, counts)
        if counts is not None and top is not None and not top < np.inf:
            counts["invalid"] += reader.signalling(start, stop)
        return
    ubuf = np.empty(n, np.uint64)
    # One chunk: the paths that need more buffers make them; more: made once, reused.
    fbuf, spare = (None, None) if n == stop - start else (np.empty(n), np.empty(n))
    bufs = reader.buffers(n)
    rbuf = np.empty(n, np.float64) if sink is not None else None
    for a in range(start, stop, parallel.CHUNK):
        b = min(a + parallel.CHUNK, stop)
        k = b - a
        xs, lo = reader.read(a, b, bufs)
        os = out[a:b] if sink is None else rbuf[:k]
        cplan = at(plan, a)
        if lo is not None and plan.identity:
            xs, lo = round_fp64(cplan, xs, lo, bufs.moved[:k], counts), None
        elif lo is not None:    # Format refuses p > 51 but for FP64 itself
            xs = odd(xs, lo, bufs.odd[:k])
        if k < n:
            ubuf, fbuf, spare = ubuf[:k], fbuf[:k], spare[:k]
        top = round_into(cplan, xs, os, ubuf, fbuf, counts, spare)
        if counts is not None and top is not None and not top < np.inf:
            counts["invalid"] += reader.signalling(a, b)   # only chunks with inf/NaN
        if sink is not None:
            sink(a, b, os)

def round_fp64(plan, hi, lo, out, counts):
    """Round the chunk ``hi + lo`` to FP64 itself into ``out`` (returned).

    This is where round-to-odd has no spare bits. It counts what ``lo`` made
    inexact, since the kernel then sees the result alone. ``out`` may be ``hi``
    itself."""
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
    take = steps_toward_lo(plan.mode, h, l_)
    if plan.mode == "rna":
        take = (2 * np.abs(l_) == np.abs(n - h)) & (np.abs(n) > np.abs(h))
    elif plan.mode == "sr":
        take = draw(plan, nz) < np.abs(l_) / np.abs(n - h)
    hi[nz] = np.where(take, n, h)

def steps_toward_lo(mode, h, lo):
    """Where rz, ru, rd or ro round ``v`` to the neighbour of ``h`` on ``lo``'s side rather
    than to ``h``.

    ``h`` is a float64 nearest to v. ``lo`` has the sign of v - h, and is 0 iff
    v == h. Other modes give None."""
    if mode == "rz":
        return (lo != 0) & (np.signbit(lo) != np.signbit(h))
    if mode == "ru":
        return lo > 0
    if mode == "rd":
        return lo < 0
    if mode == "ro":
        return (lo != 0) & ((h.view(np.uint64) & np.uint64(1)) == 0)
    return None

def finish(plan, hi, lo):
    """Round float64 ``hi`` (+ ``lo``, where ``hi == fl(hi + lo)``) into a new array, a
    NumPy scalar for 0-d input."""
    out = run(plan, Reader(hi, lo) if lo is not None else Reader(np.asarray(hi, np.float64)))
    return out[()] if out.ndim == 0 else out
