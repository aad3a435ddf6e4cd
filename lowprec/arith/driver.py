"""The chunk driver every operation runs through: operands, work buffers, the plan.

`apply` runs an operation chunk by chunk, across threads:

- it converts the operands to float64, one chunk at a time;
- it runs a kernel on each chunk;
- it rounds the kernel's ``(hi, lo)`` pairs once into the result, with the flag counts.

The memory beyond the result stays at most `MEMORY_CHUNKS` chunks per thread. The
driver must never hold a whole float64 copy of an operand. It must never round a
result twice, and never modify its inputs.
"""

from __future__ import annotations

import math

import numpy as np

from ..engine import parallel
from ..engine.checks import broadcast_shape
from ..engine.eft import odd
from ..engine.fpstate import ignore, restore
from ..engine.inputs import as_array, as_real_array, signalling_nans
from ..engine.kernel import at, round_fp64, round_into, round_small
from ..engine.parallel import in_spans
from ..engine.plan import plan as _rounding_plan
from ..engine.scratch import SMALL, give, take
from ..status import FLAG_NAMES, recording
from .exact import with_exact
from .kernels import Work, div_kernel

__all__ = ["MEMORY_CHUNKS", "raw_array", "broadcast_operands", "operation_plan", "Buffers",
           "apply", "small_call"]


_U = np.uint64
_REAL_KINDS = ("f", "b", "i", "u")
_SMALL_BROADCAST = 4096     # elements: below, a broadcast scalar is copied
#: Bound on the extra memory of one operation, in float64 chunks of ``CHUNK`` elements
#: per thread (48 MiB at 2**17), whatever the input's size and dtype.
MEMORY_CHUNKS = 48


def raw_array(x):
    """``x`` as an ndarray in its own dtype, checked as `as_real_array` checks it but
    not converted (each chunk is converted on its own: `_parts`). Python numbers that
    NumPy keeps as objects (ints beyond 64 bits) stay an object array."""
    a = as_array(x)
    kind = a.dtype.kind
    if kind in _REAL_KINDS:
        return a              # floats, bools, integers: as_real_array takes every one
    if kind == "O":
        as_real_array(x)      # Python ints and floats only; an object ndarray raises
    else:
        as_real_array(np.empty(0, a.dtype))   # TypeError for complex, strings (no copy of a)
    return a


def broadcast_operands(*xs):
    """Real operands in their own dtypes, broadcast; returns (flat list, shape, scalar)."""
    arrays = [raw_array(x) for x in xs]
    shape = arrays[0].shape
    for x in arrays:
        if x.shape != shape:
            shape = broadcast_shape(*(x.shape for x in arrays))
            break
    scalar = not shape      # the broadcast shape is () only when every operand is 0-d
    flat = []
    for x in arrays:
        if x.shape == shape:
            flat.append(x if x.ndim == 1 and x.flags.c_contiguous
                        else np.ascontiguousarray(x).reshape(-1))
        elif x.size == 1:
            n = math.prod(shape)
            # A scalar against a small operand: copied (cheaper than a view); else stride 0.
            flat.append(x.reshape(-1).repeat(n) if n <= _SMALL_BROADCAST
                        else np.broadcast_to(x.reshape(-1), (n,)))
        else:
            flat.append(np.ascontiguousarray(np.broadcast_to(x, shape)).reshape(-1))
    return flat, shape, scalar


def _parts(xc):
    """(hi, lo) float64 of one chunk of operand values, as `as_real_array` splits them
    (lo None when every value is a float64)."""
    if xc.dtype == np.float64:
        return xc, None
    if xc.dtype.kind == "O":
        return as_real_array(xc.tolist())
    return as_real_array(xc)


def operation_plan(fmt, mode, rng, subnormals, saturate, offset=0):
    # rounding's checks: wrong-typed options raise (subnormals="no" is truthy, rng="abc"
    # unused outside sr); Format itself refuses 51 < p < 53.
    return _rounding_plan(fmt, mode, rng=rng, subnormals=subnormals, saturate=saturate,
                          offset=offset)


class Buffers:
    """Everything one chunk needs: the kernels' scratch and the rounding's."""

    def __init__(self, size):
        self.size = size
        self.work = Work(size)
        self.u, self.f, self.x = np.empty(size, _U), np.empty(size), np.empty(size)
        self.spare = np.empty(size)


def apply(plan, kernel, operands, n, buffers=None, plain=None):
    """Run ``kernel`` chunk by chunk and round its (hi, lo) pairs into a new array.

    ``plain`` (a NumPy ufunc, or None): the caller's word that every operand is a
    value of ``plan.fmt``; where ``plan.innocuous`` holds, the chunk's float64
    result ``plain(*operands)`` is then rounded instead of the kernel's pair
    (Figueroa's theorem: the same result), unless a `flags()` listens (the kernel
    counts invalid operations).

    Each chunk of the operands is converted to float64 on its own (`_parts`), and
    its elements that float64 cannot hold exactly take the exact path
    (`with_exact`), so the memory beyond the output is a few chunks per thread.
    ``buffers`` (`Buffers`) serve the first span when they are large enough; other
    spans take their own (small ones reuse this thread's, `scratch`)."""
    listener = recording()
    float64s = all(x.dtype == np.float64 for x in operands)   # every chunk is its own hi
    if plain is not None and not (float64s and listener is None and plan.innocuous):
        plain = None
    if 0 < n <= SMALL and float64s and listener is None and plan.magic and not plan.identity:
        # A small call: one chunk, rounded by `round_small` where it settles it.
        small = small_call(plan, kernel, operands, n, plain)
        if small is not None:
            return small
    out = np.empty(n, np.float64)
    wide = plan.identity      # FP64: no spare bits for round-to-odd

    def span_task(plan, span, counts):
        start, stop = span
        size = min(parallel.CHUNK, stop - start)
        own = None
        if start == 0 and buffers is not None and buffers.size >= size:
            bufs = buffers
        else:
            bufs = own = take("arith", size, Buffers)
        listening = None if listener is None else counts
        overflow_before = counts["overflow"]
        for a in range(start, stop, parallel.CHUNK):
            b = min(a + parallel.CHUNK, stop)
            k = b - a
            if k == bufs.size:
                w, u, f, xb, spare = bufs.work, bufs.u, bufs.f, bufs.x, bufs.spare
            else:
                w, u, f, xb, spare = (bufs.work.take(k), bufs.u[:k], bufs.f[:k], bufs.x[:k],
                                      bufs.spare[:k])
            raw = operands if k == n else [x[a:b] for x in operands]
            overflow_in_chunk = counts["overflow"]
            cplan = at(plan, a)     # "sr": words from the chunk's position on
            if plain is not None:
                parts = None
                hi, lo = plain(*raw, out=w.h), None
            elif float64s:
                parts = None
                hi, lo = kernel(cplan, *raw, w, counts)
            else:
                parts = [_parts(xc) for xc in raw]
                if any(lo is not None for _, lo in parts):
                    hi, lo = with_exact(cplan, kernel, raw, parts, w, counts)
                else:
                    hi, lo = kernel(cplan, *(h for h, _ in parts), w, counts)
            if wide:
                x = hi if lo is None else round_fp64(cplan, hi, lo, hi, counts)
            else:
                x = hi if lo is None else odd(hi, lo, xb)
            top = round_into(cplan, x, out[a:b], u, f, listening, spare)
            # A signalling NaN operand makes a NaN result: only chunks holding inf or
            # NaN are read again for them, on the operands' own bits (invalid).
            if listening is not None and not top < np.inf:
                counts["invalid"] += signalling_nans(*raw)
            if wide and plan.saturate and counts["overflow"] != overflow_in_chunk:
                _fp64_clamp(plan, kernel, out[a:b], raw if parts is None else [h for h, _ in parts])
        if wide and plan.saturate:
            # Every FP64 overflow the kernels counted is saturated, as `round` counts
            # other formats' (the rounding kernel sees FP64 results as exact).
            counts["saturated"] += counts["overflow"] - overflow_before
        if own is not None:
            give("arith", size, own)

    # The kernels count into a dict whoever listens: FP64's saturation reads it.
    with np.errstate(all="ignore"):   # inf - inf inside the kernels is expected
        counts = in_spans(plan, n, True, span_task)
    if listener is not None:
        listener.add(counts)
    return out


def small_call(plan, kernel, operands, n, plain):
    """`apply` on one chunk of float64 operands with nobody listening, without spans:
    the kernel's (hi, lo) (or ``plain``'s float64 result) rounded by `round_small`;
    None where that does not settle the chunk (`apply` then starts over)."""
    token = ignore()
    try:
        if plain is not None:
            return round_small(plan, plain(*operands), in_place=True)   # a temporary
        bufs = take("arith", n, Buffers)
        try:
            w = bufs.work if bufs.size == n else bufs.work.take(n)
            counts = dict.fromkeys(FLAG_NAMES, 0)      # the kernels count; nobody reads it
            hi, lo = kernel(plan, *operands, w, counts)
            return round_small(plan, hi if lo is None else odd(hi, lo, bufs.x[:n]))
        finally:
            give("arith", n, bufs)
    finally:
        restore(token)


def _fp64_clamp(plan, kernel, out, operands):
    """FP64 with saturate: clamp to ±max the infinite results of finite operands (an
    overflow; those that reached the kernel as an infinity stay, as in `round`)."""
    over = np.isinf(out) & np.logical_and.reduce([np.isfinite(x) for x in operands])
    if kernel is div_kernel:
        over &= operands[1] != 0    # x / 0 divides by zero, not overflows: ±inf stays
    out[over] = np.copysign(plan.max, out[over])
