"""Where every NumPy function stands on a Tensor.

The module holds the refusals with their reasons (`REFUSED`) and the functions NumPy
never dispatches (`undispatched`). It finds what no table places yet
(`unclassified`). `support_table` writes the text of docs/numpy-support.md.

Every public callable of ``numpy``, ``numpy.linalg`` and ``numpy.fft`` is in exactly
one class:

* Handled, with its kind in `KINDS`: exact, correctly rounded, rounded once,
  composed, matmul model or plain.
* Refused, with its reason in `REFUSED`.
* Not dispatched: creation functions and utilities that never see a Tensor. Given
  one, they read ``np.asarray(t)``, the float64 values.

This module only reads and describes the tables. It computes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .core import HANDLED_FUNCTIONS, HANDLED_UFUNCS, KINDS, REFUSED

__all__ = ["REFUSED", "support_table", "public_name", "numpy_callables", "undispatched",
           "unclassified", "CLASSES"]

_INTEGER = ("an operation on integers or their bits: a Tensor holds real values "
            "(`lp.encode(t)` gives its bit patterns)")
_DATES = "dates and times: a Tensor holds real values"
_INDEX = "index arithmetic on integers: a Tensor holds real values"
_SAVE = ("it writes the float64 values without their format: save `np.asarray(t)` or "
         "`lp.encode(t)` with `t.fmt`'s name")
_COMPLEX = "complex numbers: lowprec has no complex formats"
_NOT_STEPWISE = "not emulated step by step"

# "numpy.X" -> why a Tensor refuses it (the error message and the page say it).
REFUSED.update({
    **dict.fromkeys(("numpy.bitwise_and", "numpy.bitwise_or", "numpy.bitwise_xor",
                     "numpy.bitwise_count", "numpy.invert", "numpy.left_shift",
                     "numpy.right_shift", "numpy.gcd", "numpy.lcm", "numpy.packbits",
                     "numpy.unpackbits"), _INTEGER),
    **dict.fromkeys(("numpy.isnat", "numpy.busday_count", "numpy.busday_offset",
                     "numpy.is_busday", "numpy.datetime_as_string"), _DATES),
    **dict.fromkeys(("numpy.ix_", "numpy.ravel_multi_index", "numpy.unravel_index"), _INDEX),
    **dict.fromkeys(("numpy.save", "numpy.savez", "numpy.savez_compressed",
                     "numpy.savetxt"), _SAVE),
    "numpy.sort_complex": _COMPLEX,
    "numpy.piecewise": ("it assembles the pieces in float64; use np.where on Tensors"),
    "numpy.unwrap": _NOT_STEPWISE,
    "numpy.poly": _NOT_STEPWISE + " (a product of roots)",
    "numpy.polydiv": _NOT_STEPWISE + " (polynomial long division)",
    "numpy.polyfit": _NOT_STEPWISE + " (least squares through an SVD)",
    "numpy.roots": _NOT_STEPWISE + " (eigenvalues of the companion matrix)",
    **dict.fromkeys(("numpy.fft.fft2", "numpy.fft.fftn", "numpy.fft.ifft2", "numpy.fft.ifftn",
                     "numpy.fft.rfft2", "numpy.fft.rfftn", "numpy.fft.irfft2",
                     "numpy.fft.irfftn", "numpy.fft.hfft", "numpy.fft.ihfft"),
                    "multi-dimensional and Hermitian transforms are not emulated; "
                    "lowprec.fft has fft, ifft, rfft and irfft along one axis"),
})


#: The classes of handled functions (docs/numpy-support.md explains each).
CLASSES = {
    "exact": "values are the inputs' (selected, moved or compared); no rounding",
    "correctly rounded": "one rounding of the exact result",
    "rounded once": "evaluated in float64 (not always correctly rounded), then rounded "
                    "once into the format",
    "composed": "a sequence of emulated operations, each rounded in the format, in the "
                "order given",
    "matmul model": "`lp.matmul`: the context's matrix-product model",
    "plain": "the result is not values of a format: a plain NumPy array",
}

_MODULES = (("numpy", np), ("numpy.linalg", np.linalg), ("numpy.fft", np.fft))


def public_name(func: Callable[..., Any]) -> str:
    """The public name a user calls: ``numpy.sort``, ``numpy.linalg.solve``, ..."""
    for label, mod in _MODULES:
        if getattr(mod, func.__name__, None) is func:
            return f"{label}.{func.__name__}"
    return f"{func.__module__}.{func.__name__}"


def numpy_callables() -> Iterator[tuple[str, Any]]:
    """(public name, object) of every public function and ufunc of ``numpy``,
    ``numpy.linalg`` and ``numpy.fft``.

    Classes and modules are left out. An alias counts once, under the name NumPy
    gives the object."""
    seen: set[int] = set()
    for label, mod in _MODULES:
        for attr in sorted(dir(mod)):
            obj = getattr(mod, attr)
            if attr.startswith("_") or isinstance(obj, type) or not callable(obj) \
                    or id(obj) in seen:
                continue
            seen.add(id(obj))
            name = obj.__name__ if isinstance(obj, np.ufunc) else getattr(obj, "__name__",
                                                                           attr)
            yield f"{label}.{name}", obj


def _dispatched(obj: Any) -> bool:
    """Whether NumPy hands a Tensor argument of ``obj`` to the Tensor (a ufunc, or a
    function of the array-function protocol)."""
    return isinstance(obj, np.ufunc) or hasattr(obj, "_implementation")


def undispatched() -> list[str]:
    """The public functions NumPy calls without asking the Tensor (``np.zeros``,
    ``np.asarray``, ...).

    They never see a Tensor's format. Given one, they read its float64 values
    through ``np.asarray(t)``.

    Examples
    --------
    >>> from lowprec.tensors.coverage import undispatched
    >>> "numpy.asarray" in undispatched() and "numpy.sort" not in undispatched()
    True
    """
    return sorted(n for n, obj in numpy_callables() if not _dispatched(obj))


def _handled_names() -> set[str]:
    return {public_name(f) for f in HANDLED_FUNCTIONS} | {f"numpy.{n}" for n in HANDLED_UFUNCS}


def unclassified() -> list[str]:
    """The dispatched public functions of this NumPy that no table places (handled or
    refused): empty when every function has its class.

    Examples
    --------
    >>> from lowprec.tensors.coverage import unclassified
    >>> unclassified()
    []
    """
    known = _handled_names() | set(REFUSED)
    return sorted(n for n, obj in numpy_callables() if _dispatched(obj) and n not in known)


def support_table() -> str:
    """The text of docs/numpy-support.md, from the tables.

    It lists every NumPy function and ufunc a Tensor handles, with its class and
    order of operations. Then come the refused ones with their reasons, and the
    functions NumPy does not dispatch.

    Examples
    --------
    >>> from lowprec.tensors.coverage import support_table
    >>> "| `numpy.sort` | exact |" in support_table()
    True
    """
    version = ".".join(np.__version__.split(".")[:2])
    lines = [
        "# NumPy functions on Tensors",
        "",
        "Generated from `lowprec.tensors.HANDLED_FUNCTIONS`, `HANDLED_UFUNCS` and",
        "`lowprec.tensors.coverage.REFUSED` by `lowprec.tensors.coverage.support_table()`",
        f"with NumPy {version} (`tests/tensors/test_functions.py` holds this page equal to it).",
        "Every public function of `numpy`, `numpy.linalg` and `numpy.fft` is in exactly",
        "one class below: handled, refused (`TypeError`: `numpy.X is not implemented for",
        "lowprec.Tensor (why); see docs/numpy-support.md`), or not dispatched. In every",
        "refusal `np.asarray(t)` gives the float64 values, the explicit way out of the",
        "emulation. Rounding uses the context's mode and options (`lp.context`).",
        "",
        "Classes of the handled functions:",
        "",
    ]
    lines += [f"- **{name}**: {what}." for name, what in CLASSES.items()]
    lines += ["", "## Functions", "", "| function | class | order |", "| --- | --- | --- |"]
    rows = sorted((public_name(f), *KINDS[f]) for f in HANDLED_FUNCTIONS)
    lines += [f"| `{n}` | {c} | {o} |" for n, c, o in rows]
    lines += ["", "## Ufuncs", "", "| ufunc | class | order |", "| --- | --- | --- |"]
    rows = sorted((f"numpy.{n}", *KINDS[n]) for n in HANDLED_UFUNCS)
    lines += [f"| `{n}` | {c} | {o} |" for n, c, o in rows]
    lines += ["", "## Refused", "",
              "A Tensor raises `TypeError` with the reason; `np.asarray(t)` computes in "
              "float64.", "", "| function | why |", "| --- | --- |"]
    lines += [f"| `{n}` | {why} |" for n, why in sorted(REFUSED.items())]
    lines += ["", "## Not dispatched", "",
              "NumPy calls these without asking the Tensor: creation functions and "
              "utilities that take no array, or that convert their input with "
              "`np.asarray` (on a Tensor: its float64 values, no format). Build Tensors "
              "with `lp.tensor(np.X(...), fmt)`.", ""]
    lines += [", ".join(f"`{n}`" for n in undispatched())]
    return "\n".join(lines) + "\n"

