"""`lp.context` / `lp.get_context`: the defaults every Tensor operation rounds with.

Defaults (rounding mode, rng, matmul model, subnormals, saturation) live in a
``contextvars`` context: this is the only module that reads it. The rest of
`lowprec.tensors` asks `get_context` for the active defaults, or rounds through
`round_ctx`; the kernels below never see the context. (Not ``context.py``: the
package exports the function `context`, which would shadow such a module.)
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike

from ..engine.cache import Latest
from ..engine.checks import as_generator, check_bool, check_mode, check_rng
from ..formats import Format
from ..rounding import round as _round
from ..status import recording
from ..tensorcore import ModelLike, resolve_model
from ..types import Mode, RNGLike

__all__ = ["Context", "context", "get_context", "round_ctx", "copy_rounds"]


@dataclass(frozen=True)
class Context:
    """The defaults that Tensor operations round with, as `get_context` returns them.

    A context is frozen. `context` sets new defaults for a block by making a new one.

    Attributes
    ----------
    mode : str
        The rounding mode (one of `lowprec.MODES`).
    rng : numpy.random.Generator or None
        The generator that ``mode="sr"`` draws from. An int seed given to `context`
        is already a generator here.
    matmul : str or Model
        The model of `lowprec.matmul` (a name of `lowprec.MODELS`, or a model).
    subnormals : bool or None
        Whether results keep subnormals. None follows the format.
    saturate : bool
        Whether overflow saturates to the format's largest finite value.

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.get_context()
    Context(mode='rne', rng=None, matmul='fp32', subnormals=None, saturate=False)
    >>> with lp.context(mode="rz"):
    ...     lp.get_context().mode
    'rz'
    """

    mode: Mode = "rne"
    rng: np.random.Generator | None = None
    matmul: ModelLike = "fp32"
    subnormals: bool | None = None
    saturate: bool = False

    def kwargs(self) -> dict[str, Any]:
        """The options every rounding takes from the context: rng, subnormals, saturate."""
        return dict(rng=self.rng, subnormals=self.subnormals, saturate=self.saturate)


_CONTEXT: ContextVar[Context] = ContextVar("lowprec_context", default=Context())


def get_context() -> Context:
    """The active defaults (mode, rng, matmul, subnormals, saturate), as a `Context`."""
    return _CONTEXT.get()


@contextlib.contextmanager
def context(*, mode: Mode | None = None, rng: RNGLike = None,
            matmul: ModelLike | None = None, subnormals: bool | None = None,
            saturate: bool | None = None) -> Iterator[Context]:
    """Set Tensor defaults for a block: ``with lp.context(mode="sr", rng=0):``.

    Unset fields keep the enclosing values; on exit the enclosing context is
    restored. Built on ``contextvars``, so threads and asyncio tasks each see
    their own. An int ``rng`` seeds one generator for the whole block.

    Parameters
    ----------
    mode : str, optional
        Rounding mode (one of `lowprec.MODES`).
    rng : numpy.random.Generator or int, optional
        Generator (or non-negative int seed) for ``mode="sr"``.
    matmul : str or TensorCoreModel, optional
        A model name of `lowprec.MODELS`, one of its values, or a `TensorCoreModel`.
    subnormals, saturate : bool, optional
        Passed to every rounding (see `lowprec.round`).

    Raises
    ------
    TypeError
        An option of the wrong type, named (``subnormals="no"`` is not False).
    ValueError
        An option of the right type whose value is not allowed.

    Examples
    --------
    >>> import lowprec as lp
    >>> x = lp.tensor([1.0, 2.0], "bf16")
    >>> with lp.context(mode="ru"):
    ...     print((x + 2**-9).values)
    [1.0078125 2.015625 ]
    >>> (x + 2**-9).values
    array([1., 2.])
    >>> with lp.context(saturate="no"):
    ...     pass
    Traceback (most recent call last):
    ...
    TypeError: saturate must be a bool, got str 'no'
    """
    current = _CONTEXT.get()
    changes: dict[str, Any] = {}
    # Every option is type-checked: "no" is truthy and 0 is falsy, so a loose check
    # would silently turn a wrong-typed option into a different setting.
    if mode is not None:
        changes["mode"] = check_mode(mode)
    if rng is not None:
        changes["rng"] = as_generator(rng)
    if matmul is not None:
        resolve_model(matmul, "matmul")   # a name, a MODELS value (or copy), a TensorCoreModel
        changes["matmul"] = matmul
    if subnormals is not None:
        changes["subnormals"] = check_bool("subnormals", subnormals)
    if saturate is not None:
        changes["saturate"] = check_bool("saturate", saturate)
    token = _CONTEXT.set(replace(current, **changes))
    try:
        yield _CONTEXT.get()
    finally:
        _CONTEXT.reset(token)


def copy_rounds(mode: Mode | None, rng: object = None) -> bool:
    """Whether copying values into a format that holds all of them is their rounding,
    under ``mode`` (None: the context's) and the context's options: a deterministic mode
    rounds an exact value to itself with no flag (underflow needs inexactness, IEEE
    754 §7.5), while "sr" would draw (the stream must not change), a context's
    subnormals option could flush, and a listening `lp.flags()` is left to count
    what the rounding counts (signalling NaNs). The options are checked as
    `round_ctx` checks them."""
    ctx = _CONTEXT.get()
    mode = ctx.mode if mode is None else check_mode(mode)
    check_rng(rng)
    return mode != "sr" and ctx.subnormals is None and recording() is None


def round_ctx(x: ArrayLike, fmt: Format, mode: Mode | None,
              rng: RNGLike = None) -> Any:
    """``round(x, fmt)`` with the context's mode and rng where ``mode``/``rng`` are None."""
    ctx = _CONTEXT.get()
    if mode is None and rng is None and type(x) in (float, int) and ctx.mode != "sr":
        # A Python number (``t * 0.5``): its rounding depends on these keys alone, and
        # with nobody counting flags a rounding done before gives the same value.
        v = cast(float, x)
        sign = math.copysign(1.0, v) < 0 if type(x) is float else v < 0   # -0.0 is not 0.0
        key = (type(x), v, sign, fmt, fmt.name, ctx.mode, ctx.subnormals, ctx.saturate)
        if recording() is not None:      # counted: the rounding itself, every time
            return _round(x, fmt, ctx.mode, subnormals=ctx.subnormals, saturate=ctx.saturate)
        found = _SCALARS.get(key)
        if found is None:
            found = _SCALARS.put(key, _round(x, fmt, ctx.mode, subnormals=ctx.subnormals,
                                             saturate=ctx.saturate))
        return found
    kw = ctx.kwargs()
    if rng is not None:
        kw["rng"] = rng
    # ``mode is None``, not ``not mode``: mode="" or 0 is an error (rounding's own
    # checks of mode and rng raise it), not the default.
    return _round(x, fmt, ctx.mode if mode is None else mode, **kw)


# (Python number, its sign, format, name, mode, subnormals, saturate) -> its rounding.
_SCALARS = Latest(256)
