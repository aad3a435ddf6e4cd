"""The C heap's top pad and mmap threshold: freed work arrays stay mapped (glibc only).

lowprec's kernels allocate and free arrays of a few MiB per call (a training step
makes hundreds). With glibc's defaults the heap's free top is given back to the
system once it passes a threshold, and every new array faults its pages in again:
3,500 page faults per FP8 training step of a 784-256-10 MLP, a quarter of its time.
`keep_freed` sets glibc's ``M_TOP_PAD`` so that the heap grows, and keeps at its top,
`TOP_PAD` bytes more than it needs, and ``M_MMAP_THRESHOLD`` so that arrays of up to
`MMAP_THRESHOLD` bytes come from that heap rather than from pages mapped afresh for
each. It is called once when lowprec is imported, unless the environment says
otherwise: ``LOWPREC_TOP_PAD=0`` leaves malloc as it is, ``LOWPREC_TOP_PAD=<bytes>``
picks the pad, and a ``MALLOC_TOP_PAD_`` or ``MALLOC_MMAP_THRESHOLD_`` of the user's
own is never overridden. No value changes: only where freed memory goes (the process
may keep up to `TOP_PAD` bytes it no longer uses).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

__all__ = ["TOP_PAD", "MMAP_THRESHOLD", "M_TOP_PAD", "M_MMAP_THRESHOLD", "keep_freed"]

#: The pad: 32 MiB keeps a training step's work arrays (measured: 3,500 page faults
#: per FP8 delayed-scaling step of a 784-256-10 MLP become 100, and 30% of its time
#: goes; 64 MiB gains no more).
TOP_PAD = 32 << 20

#: Arrays up to 8 MiB (a million float64 values) come from the heap.
MMAP_THRESHOLD = 8 << 20

#: mallopt's parameter numbers (glibc's malloc.h).
M_TOP_PAD, M_MMAP_THRESHOLD = -2, -3


def keep_freed(environ: dict[str, str] | None = None) -> int:
    """Set glibc's top pad as the environment asks (see the module's text); the pad set,
    or 0 where nothing was set (another platform or C library, or opted out).

    Examples
    --------
    >>> keep_freed({"LOWPREC_TOP_PAD": "0"})
    0
    """
    env = os.environ if environ is None else environ
    wanted = env.get("LOWPREC_TOP_PAD", "").strip()
    if "MALLOC_TOP_PAD_" in env or "MALLOC_MMAP_THRESHOLD_" in env or \
            not sys.platform.startswith("linux"):
        return 0
    try:
        pad = TOP_PAD if not wanted else int(wanted)
    except ValueError:
        raise ValueError(f"LOWPREC_TOP_PAD must be a number of bytes (0: leave malloc "
                         f"as it is), got {wanted!r}") from None
    if pad <= 0:
        return 0
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        if not hasattr(libc, "gnu_get_libc_version"):     # musl and others: no M_TOP_PAD
            return 0
        pad = min(pad, 2**31 - 1)
        ok = libc.mallopt(ctypes.c_int(M_TOP_PAD), ctypes.c_int(pad)) == 1 and \
            libc.mallopt(ctypes.c_int(M_MMAP_THRESHOLD), ctypes.c_int(MMAP_THRESHOLD)) == 1
    except OSError:
        return 0
    return pad if ok else 0
