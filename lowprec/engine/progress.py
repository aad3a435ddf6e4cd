"""Progress bars for long work: `Progress`, `check_progress`, `SECONDS`, `ENV`.

A `Progress` counts the units of a long call: chunks of a matrix product, steps of a
training run. It shows a tqdm bar when asked to (``progress=True``). By default it
shows one once the work done so far says the rest will take more than `SECONDS`.
The bar is ``tqdm.auto``'s: a widget in Jupyter, a line on stderr in a terminal.
tqdm is optional: the default shows nothing without it. The environment variable
`ENV` (``LOWPREC_PROGRESS``) set to ``0`` turns bars off everywhere, ``1`` on. This
module imports nothing from lowprec and must never change a result or print to stdout.
"""

from __future__ import annotations

import os
import time
from typing import Any

__all__ = ["Progress", "check_progress", "SECONDS", "ENV"]

#: The estimated remaining seconds above which the default shows a bar.
SECONDS = 2.0

#: The environment variable that turns bars off ("0") or on ("1") for every call.
ENV = "LOWPREC_PROGRESS"

_OFF, _ON = ("0", "off", "false", "no"), ("1", "on", "true", "yes")


def check_progress(progress: Any, name: str = "progress") -> bool | None:
    """``progress`` as True, False or None (the default: by the estimated time).

    Anything else raises `TypeError` naming ``name``."""
    if progress is None or isinstance(progress, bool):
        return progress
    raise TypeError(f"{name} must be True, False or None (show a bar when the work is "
                    f"long), got {type(progress).__name__} {progress!r}")


def _setting(progress: bool | None) -> bool | None:
    if progress is not None:
        return progress
    env = os.environ.get(ENV, "").strip().lower()
    return False if env in _OFF else True if env in _ON else None


class Progress:
    """A progress bar over ``total`` units, labelled ``desc``, shown as ``progress``
    says (True, False, or None: when the rest is estimated to take over `SECONDS`).

    Examples
    --------
    >>> with Progress(3, "work", progress=False) as p:
    ...     for _ in range(3):
    ...         p.update()
    >>> p.done, p.bar is None
    (3, True)
    """

    def __init__(self, total: int, desc: str, progress: bool | None = None) -> None:
        self.total, self.desc, self.done = int(total), desc, 0
        self.mode = _setting(check_progress(progress))
        self.bar: Any = None
        self.start = time.perf_counter()
        if self.mode:
            self._open()

    def _open(self) -> None:
        try:
            from tqdm.auto import tqdm  # type: ignore[import-untyped,import-not-found,unused-ignore]
        except ImportError:
            if self.mode:
                raise ImportError('progress=True needs tqdm: pip install "lowprec[progress]"'
                                  ) from None
            self.mode = False
            return
        self.bar = tqdm(total=self.total, initial=self.done, desc=self.desc, leave=False)

    def update(self, n: int = 1) -> None:
        """Count ``n`` more units done."""
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        elif self.mode is None and self.done < self.total:
            rate = (time.perf_counter() - self.start) / self.done
            if rate * (self.total - self.done) > SECONDS:
                self._open()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
