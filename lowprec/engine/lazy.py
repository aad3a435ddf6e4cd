"""`LAZY` and `lazy_entry`: where public entry points hand Dask arrays to `daskarrays`.

The entry points are `lp.round`, `lp.add`, `lp.sum`, `lp.tensor`, `lp.matmul` and the
like. `lowprec.daskarrays` fills `LAZY` when it is imported, and ``import lowprec``
imports it. Nothing here imports Dask or computes. With no Dask operand, the entry
point runs as it is.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

__all__ = ["LAZY", "lazy_entry", "is_lazy"]

#: entry point name -> its Dask version (`lowprec.daskarrays`).
LAZY: dict[str, Callable[..., Any]] = {}

F = TypeVar("F", bound=Callable[..., Any])

#: Operand types that are never Dask collections: no look at their module (small calls).
_EAGER = frozenset({np.ndarray, float, int, bool, list, tuple, np.float64, np.float32})


def is_lazy(x: object) -> bool:
    """Whether ``x`` is a Dask collection (by its type's module: Dask is not imported).

    Examples
    --------
    >>> import numpy as np
    >>> is_lazy(np.ones(2)), is_lazy(1.0)
    (False, False)
    """
    return type(x).__module__.startswith("dask.")


def lazy_entry(name: str, operands: int = 1) -> Callable[[F], F]:
    """Decorate the entry point ``name`` to hand Dask arrays to ``LAZY[name]``.

    When one of its first ``operands`` positional arguments is a Dask array, the
    entry point calls ``LAZY[name]`` with the same arguments and returns a Dask
    array. ``offset`` is dropped: a Dask array's blocks take their own."""
    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def entry(*args: Any, **kwargs: Any) -> Any:
            if LAZY and any(type(a) not in _EAGER and is_lazy(a) for a in args[:operands]):
                if kwargs.pop("offset", 0):
                    raise ValueError(f"{name}: offset= has no meaning for a Dask array "
                                     "(its blocks take their own positions)")
                return LAZY[name](*args, **kwargs)
            return fn(*args, **kwargs)
        return entry  # type: ignore[return-value]
    return decorate
