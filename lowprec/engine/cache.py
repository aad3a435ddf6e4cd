"""A small bounded cache for the kernels' lookup tables: thread-safe, fork-safe."""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Hashable
from typing import Any

_ALL: weakref.WeakSet[Latest] = weakref.WeakSet()


class Latest:
    """The latest ``size`` values by key, the oldest dropped first.

    Reads are one dict lookup (atomic under the GIL). Writes take a lock, which a
    forked child replaces (a thread of the parent may have held it). Two threads may
    build one key's value at once: the values are equal, the cache keeps one."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.items: dict[Hashable, Any] = {}
        self.lock = threading.Lock()
        _ALL.add(self)

    def __len__(self) -> int:
        return len(self.items)

    def get(self, key: Hashable) -> Any:
        return self.items.get(key)

    def put(self, key: Hashable, value: Any) -> Any:
        with self.lock:
            while len(self.items) >= self.size:
                del self.items[next(iter(self.items))]
            self.items[key] = value
        return value


def _new_locks() -> None:
    for cache in _ALL:
        cache.lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_locks)
