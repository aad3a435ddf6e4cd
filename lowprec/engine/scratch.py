"""Work buffers that small calls reuse: one free list per thread, by kind and size.

A call of at most `SMALL` elements takes its scratch (the rounding kernel's, the
arithmetic's) with `take`. It hands it back with `give` when it is done. So a loop
of small calls does not allocate a dozen arrays per call. The free lists are
thread-local (`threading.local`): a buffer is never shared between threads. A call
made while another holds its buffers (a nested call) gets new ones. Scratch is never
a result: callers write results into arrays of their own. Larger calls allocate per
call, as before. What the lists keep is bounded (`KEPT` sizes per thread).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["SMALL", "KEPT", "take", "give"]

#: Calls of at most this many elements reuse their scratch across calls.
SMALL = 1 << 12

#: Sizes (per kind of scratch) each thread keeps; the oldest is dropped first. At most
#: about ``KEPT * SMALL * 8`` bytes per buffer of a kind: 256 KiB.
KEPT = 8

_T = TypeVar("_T")


class _Free(threading.local):
    """This thread's free lists: (kind, size) -> scratch objects given back."""

    def __init__(self) -> None:
        self.lists: dict[tuple[str, int], list[Any]] = {}


_FREE = _Free()


def take(kind: str, n: int, make: Callable[[int], _T]) -> _T:
    """Scratch of ``kind`` for ``n`` elements: one this thread gave back, else ``make(n)``.

    Examples
    --------
    >>> import numpy as np
    >>> a = take("doc", 10, np.empty)
    >>> give("doc", 10, a)
    >>> take("doc", 10, np.empty) is a, take("doc", 10, np.empty) is a
    (True, False)
    """
    if n <= SMALL:
        free = _FREE.lists.get((kind, n))
        if free:
            return free.pop()
    return make(n)


def give(kind: str, n: int, scratch: Any) -> None:
    """Hand back scratch of ``kind`` for ``n`` elements that the caller no longer uses
    (nothing is kept for sizes above `SMALL`)."""
    if n > SMALL:
        return
    lists = _FREE.lists
    free = lists.get((kind, n))
    if free is None:
        same = [key for key in lists if key[0] == kind]
        if len(same) >= KEPT:
            del lists[same[0]]          # the oldest size of this kind
        lists[(kind, n)] = [scratch]
    elif len(free) < 2:
        free.append(scratch)
