"""Exception flags: per-element counts of IEEE 754's exceptions, in a context.

``with lp.flags() as f:`` makes ``f`` the innermost active flag record (a
``contextvars.ContextVar``, so threads and asyncio tasks never see each other's);
kernels call :func:`recording` to learn whether anyone listens (outside a context
nothing is computed), count into a dict of `FLAG_NAMES` and add it once, with
:func:`record` (or the listener's ``add``); :func:`quiet` runs an internal rounding
with nobody listening (it is not the user's operation). This is the one channel.
On exit an inner record's counts are added to the enclosing one, so an outer
context sees everything that happened inside it. A context copied into other
threads (``asyncio.to_thread``, ``contextvars.copy_context().run``) hands them the
same record: every update takes the record's lock, so counts stay exact. This module
never inspects arrays itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from typing import Any, Literal, SupportsInt, TypeVar

from .display import card, mark

__all__ = ["Flags", "flags", "recording", "record", "quiet", "FLAG_NAMES"]

#: The counted conditions: IEEE 754's five exceptions plus two of lowprec's own.
FLAG_NAMES = ("inexact", "underflow", "overflow", "invalid", "divide_by_zero",
              "saturated", "flushed")

_active: ContextVar[Flags | None] = ContextVar("lowprec_flags", default=None)


class Flags:
    """Counts of elements that raised each exception.

    Attributes are ``inexact``, ``underflow`` (tiny and inexact, tininess detected
    after rounding), ``overflow``, ``invalid``, ``divide_by_zero``, ``saturated``
    (an overflow or infinity clamped to ±max) and ``flushed`` (a nonzero subnormal
    result replaced because ``subnormals=False``).

    Examples
    --------
    >>> import lowprec as lp
    >>> with lp.flags() as f:
    ...     _ = lp.round([1e-8, 0.1, 1.0, 1e6], "fp16")
    >>> f.inexact, f.underflow, f.overflow
    (3, 1, 1)
    >>> bool(f), f.as_dict()["invalid"]
    (True, 0)
    """

    __slots__ = (*FLAG_NAMES, "_token", "_lock")

    # The counters (set through FLAG_NAMES), declared for type checkers.
    inexact: int
    underflow: int
    overflow: int
    invalid: int
    divide_by_zero: int
    saturated: int
    flushed: int
    _token: Token[Flags | None] | None
    _lock: threading.Lock

    def __init__(self) -> None:
        for name in FLAG_NAMES:
            setattr(self, name, 0)
        self._token = None
        # Several threads may share this record (a copied context): an add is a
        # read-modify-write of several counters, so each one is done under the lock.
        self._lock = threading.Lock()

    def __enter__(self) -> Flags:
        if self._token is not None:
            raise RuntimeError("this flags() context is already active")
        self._token = _active.set(self)
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        _active.reset(self._token)  # type: ignore[arg-type]  # a Token: set by __enter__
        self._token = None
        outer = _active.get()
        if outer is not None:
            outer.add(self.as_dict())
        return False

    def add(self, counts: Mapping[str, SupportsInt]) -> None:
        """Add ``counts`` (a mapping of flag names to counts), atomically."""
        counts = {name: int(n) for name, n in counts.items()}
        with self._lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)

    def as_dict(self) -> dict[str, int]:
        """The counts as a dict, read together (no add half-way through)."""
        with self._lock:
            return {name: getattr(self, name) for name in FLAG_NAMES}

    def reset(self) -> None:
        """Set every count to zero."""
        with self._lock:
            for name in FLAG_NAMES:
                setattr(self, name, 0)

    def __bool__(self) -> bool:
        return any(getattr(self, name) for name in FLAG_NAMES)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v}" for k, v in self.as_dict().items())
        return f"Flags({inner})"

    def _repr_html_(self) -> str:
        """The counts as a themed HTML card, raised flags marked, for Jupyter.

        Examples
        --------
        >>> import lowprec as lp
        >>> with lp.flags() as f:
        ...     _ = lp.round([0.1, 1e6], "fp16")
        >>> html = f._repr_html_()
        >>> "overflow" in html, "raised: inexact, overflow" in html
        (True, True)
        """
        counts = self.as_dict()
        raised = [k for k, v in counts.items() if v]
        title = f"Flags, raised: {', '.join(raised)}" if raised else "Flags, none raised"
        return card(title, counts.items(),
                    raw={k: mark(str(v)) for k, v in counts.items() if v})


def flags() -> Flags:
    """A new, empty `Flags` record; use it as a context manager."""
    return Flags()


def recording() -> Flags | None:
    """The innermost active `Flags`, or None when no context listens."""
    return _active.get()


def record(**counts: SupportsInt) -> None:
    """Add counts to the innermost active context (no-op outside one)."""
    target = _active.get()
    if target is not None:
        target.add(counts)


_R = TypeVar("_R")


def quiet(fn: Callable[..., _R], *args: Any, **kwargs: Any) -> _R:
    """``fn(*args, **kwargs)`` with no `lp.flags()` listening: for the roundings a
    function makes internally, which are not the user's operations (every other
    context variable, such as the tensor defaults, stays as it is)."""
    token = _active.set(None)
    try:
        return fn(*args, **kwargs)
    finally:
        _active.reset(token)
