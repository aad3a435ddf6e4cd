"""Notebook widgets: touch the bits of a format, a rounding, a block, a Tensor Core.

``import lowprec.widgets`` (not done by ``import lowprec``) gives five functions. Each
returns an anywidget widget (the ``widgets`` extra) whose every number is computed in
Python by lowprec; the browser only draws. Each widget also carries its view as HTML
(``static()``, and ``text/html`` in its display), which nbconvert and the docs site
show. The views without a widget library are in `lowprec.widgets.static`, drawn from
the data of `lowprec.widgets.state`.
"""

from __future__ import annotations

from typing import Any

from numpy.typing import ArrayLike

from ..formats import FormatLike
from ..types import Mode
from . import state, static

__all__ = ["bits", "rounding", "block", "tensor_core", "summation", "state", "static"]


def _live() -> Any:
    try:
        from . import live
    except ImportError as exc:
        raise ImportError('lowprec.widgets needs anywidget: pip install "lowprec[widgets]" '
                          "(lowprec.widgets.static draws the same views as HTML without "
                          "it)") from exc
    return live


def bits(fmt: FormatLike, pattern: int | None = None) -> Any:
    """A bit editor for ``fmt``: click a bit, or type a value to see it encoded.

    It shows the sign, exponent and mantissa fields, the exact value, its class and its
    neighbours. ``pattern`` starts it (default: the pattern of 1.0).

    Examples
    --------
    >>> import lowprec.widgets as w
    >>> _ = __import__("pytest").importorskip("anywidget")
    >>> b = w.bits("bf16", 0x3dcd)
    >>> b.pattern ^= 0x8000                        # what a click on the sign bit does
    >>> 'data-role="value">-0.10009765625<' in b.html
    True
    """
    return _live().Bits(fmt, pattern)


def rounding(x: float, fmt: FormatLike, mode: Mode = "rne") -> Any:
    """``x`` between its neighbours in ``fmt``: each mode's choice, and SR's draws.

    Examples
    --------
    >>> import lowprec.widgets as w
    >>> _ = __import__("pytest").importorskip("anywidget")
    >>> r = w.rounding(0.1, "e4m3")
    >>> r.mode = "rz"
    >>> 'data-role="chosen">0.09375<' in r.html
    True
    """
    return _live().Rounding(x, fmt, mode)


def block(values: ArrayLike, scheme: str = "mxfp8_e4m3") -> Any:
    """One block of ``values`` in an MX or NVFP4 ``scheme``, under each scale rule.

    Examples
    --------
    >>> import lowprec.widgets as w
    >>> _ = __import__("pytest").importorskip("anywidget")
    >>> b = w.block([1.0, 2.0, 957.0])
    >>> b.rule = "ceil"
    >>> 'data-role="clamped">0<' in b.html
    True
    """
    return _live().Block(values, scheme)


def tensor_core(a: ArrayLike, b: ArrayLike, model: str = "a100", *,
                fmt: FormatLike = "fp16") -> Any:
    """The dot product ``a . b`` on a Tensor Core ``model``, step by step.

    Examples
    --------
    >>> import lowprec.widgets as w
    >>> _ = __import__("pytest").importorskip("anywidget")
    >>> t = w.tensor_core([1.0, 1.0], [1.0, 2.0**-24], "v100")
    >>> 'data-role="result">1.0<' in t.html
    True
    """
    return _live().TensorCore(a, b, model, fmt=fmt)


def summation(x: ArrayLike, fmt: FormatLike, n: int | None = None) -> Any:
    """Recursive, pairwise and Kahan sums of the first ``n`` values of ``x`` in ``fmt``.

    Examples
    --------
    >>> import lowprec.widgets as w
    >>> _ = __import__("pytest").importorskip("anywidget")
    >>> s = w.summation([0.1] * 100, "fp16")
    >>> s.n = 10
    >>> 'data-role="n">10<' in s.html
    True
    """
    return _live().Summation(x, fmt, n)
