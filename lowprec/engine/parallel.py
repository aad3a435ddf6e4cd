"""The span machinery every chunked kernel runs on: chunk size, threads, worker pool.

Work is cut into chunks of `CHUNK` elements, so that the working buffers stay in
cache. A large input is also cut into spans of whole chunks, one per thread
(`threads`). Results and flags never depend on the number of threads. Tests patch
`CHUNK` and `PARALLEL_MIN` here, the one place every kernel reads them from.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ..status import FLAG_NAMES

__all__ = ["CHUNK", "WORK_BUFFERS", "WORK_BYTES", "PARALLEL_MIN", "threads", "in_spans"]


CHUNK = 1 << 17  # elements per chunk: the working buffers stay in cache

#: Bound on the extra memory of one `round` or `encode` call beyond its result, per
#: thread: at most `WORK_BUFFERS` work buffers of `CHUNK` float64 values (16 MiB),
#: whatever the input's size and dtype, for contiguous input (other input is first
#: copied in its own dtype). Checked by tests/test_rounding.py and
#: ``python benchmarks/run.py memory``.
WORK_BUFFERS = 16

WORK_BYTES = WORK_BUFFERS * 8 * CHUNK

#: Elements per thread below which `round` uses fewer threads.
PARALLEL_MIN = 1 << 20

_POOL: concurrent.futures.ThreadPoolExecutor | None = None

_POOL_LOCK = threading.Lock()

def _default_threads() -> int:
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
    contiguous spans rounded on separate threads. NumPy releases the GIL inside its
    loops. Results and flags are identical for any number of threads. The default is
    the number of usable cores, at most 4, or the environment variable
    ``LOWPREC_NUM_THREADS``. Every mode runs in threads, "sr" included, since its
    draws go by position.

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

def _forget_pool() -> None:
    # A forked child inherits the pool object but not its threads, and a lock that a
    # thread of the parent may have held.
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)

def _pool(n: int) -> concurrent.futures.ThreadPoolExecutor:
    """A shared pool of at least ``n`` worker threads.

    A pool too small for ``n`` is replaced, never shut down: another call may still
    be submitting to it (a shut-down pool refuses new work). The old pool's threads
    end once its last user drops it (the executor is garbage-collected)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL._max_workers < n:
            _POOL = concurrent.futures.ThreadPoolExecutor(n, thread_name_prefix="lowprec")
        return _POOL

def in_spans(plan: Any, n: int, counting: bool,
             task: Callable[[Any, tuple[int, int], dict[str, int] | None], object],
             ) -> dict[str, int] | None:
    """Run ``task(plan, (start, stop), counts)`` over ``range(n)`` cut into spans of
    whole chunks, one per thread (`threads`).

    Returns the summed flag counts. Unless ``counting``, it returns None and each
    task's ``counts`` is None. The plan is read-only, so every span shares it. Each
    span has its own counts. The caller's thread does the first span, in the
    caller's `np.errstate`. The pool's threads each open their own, since it is
    thread-local. One span (inputs below ``2 * PARALLEL_MIN``, or one thread) is one
    direct call, with no pool. "sr" draws by element position, so it runs in spans
    like the other modes."""
    n_spans = max(1, min(_THREADS, n // PARALLEL_MIN))
    if n_spans == 1:
        tally = dict.fromkeys(FLAG_NAMES, 0) if counting else None
        task(plan, (0, n), tally)
        return tally
    chunks = -(-n // CHUNK)                               # ceil(n / CHUNK)
    step = max(1, -(-chunks // n_spans)) * CHUNK          # whole chunks per span
    spans = [(start, min(start + step, n)) for start in range(0, n, step)]
    tallies = [dict.fromkeys(FLAG_NAMES, 0) if counting else None for _ in spans]
    futures = []
    if len(spans) > 1:
        pool = _pool(len(spans) - 1)
        futures = [pool.submit(_in_errstate, task, plan, span, tally)
                   for span, tally in zip(spans[1:], tallies[1:])]
    task(plan, spans[0], tallies[0])
    for future in futures:
        future.result()
    if not counting or len(tallies) == 1:
        return tallies[0]
    counted = [t for t in tallies if t is not None]      # every span's, when counting
    return {k: sum(t[k] for t in counted) for k in FLAG_NAMES}

def _in_errstate(task: Callable[[Any, tuple[int, int], dict[str, int] | None], object],
                 plan: Any, span: tuple[int, int], tally: dict[str, int] | None) -> None:
    """``task`` on a worker thread, where the caller's `np.errstate` does not reach."""
    with np.errstate(all="ignore"):   # inf - inf inside the kernels is expected
        task(plan, span, tally)
