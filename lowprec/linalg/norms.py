"""`norm` of Tensors: vector and matrix norms, each sum pairwise and rounded."""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

from ..formats import FP32, Format
from ..tensors import Tensor, result_format, tensor
from .core import as_tensor, exact

# -- norms --------------------------------------------------------------------------

def wide(fmt: Format) -> Format:
    """FP32, or ``fmt`` where FP32 does not hold it (FP64)."""
    return FP32 if result_format(fmt, FP32) == FP32 else fmt


def _two_norm(x: Tensor, axis: int | tuple[int, ...] | None) -> Tensor:
    w = x.astype(wide(x.fmt))
    s = (w * w).sum(axis=axis)
    return cast(Tensor, np.sqrt(s)).astype(x.fmt)


def _axes(axis: Any, ndim: int) -> tuple[int, ...] | None:
    if axis is None:
        return None
    items = axis if isinstance(axis, tuple) else (axis,)
    if any(isinstance(i, bool) or not isinstance(i, (int, np.integer)) for i in items):
        raise TypeError(f"axis must be an int, a tuple of ints or None, got {axis!r}")
    axes = tuple(np.lib.array_utils.normalize_axis_tuple(items, ndim))
    if len(axes) > 2:
        raise ValueError("improper number of dimensions to norm: axis names more than two")
    return axes


def norm(x: Tensor, ord: float | str | None = None,  # noqa: A002 - NumPy's name
         axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Tensor:
    """Vector and matrix norms, as `numpy.linalg.norm`, in ``x``'s format.

    ``axis`` is one of:

    * None: a vector or a matrix, or every element with ``ord=None``.
    * An int: vectors along it.
    * A pair: matrices over those two axes.

    ``keepdims`` is as in NumPy. The orders are computed as follows.

    * 2-norms of vectors (``ord=None`` or 2) and the Frobenius norm (``ord=None`` or
      ``"fro"``). ``x`` is converted to FP32, or kept in its format where that is
      wider (FP64). It is squared and summed pairwise in that format, and its square
      root is taken there. The result is rounded into ``x``'s format, so it is
      twice rounded. FP32's range bounds the squares: BF16 values past ``2**64``
      give inf.
    * 1-norms and the matrix 1/inf norms (largest column/row sum) sum ``|x|``
      pairwise in ``x``'s format.
    * inf/-inf norms of vectors are the exact largest/smallest ``|x|``.
    * ``ord=0`` is the count of nonzeros, rounded once.
    * The matrix ``ord=2``, ``-2`` and ``"nuc"`` (largest, smallest singular value,
      their sum) need an SVD. They take a float64 SVD of the values
      (`numpy.linalg.svd`) and round the result once into the format. This is not
      an emulated algorithm. NaNs make NumPy's SVD raise `LinAlgError`.

    Other orders raise `ValueError`.

    Examples
    --------
    >>> import lowprec as lp, lowprec.linalg as la
    >>> v = lp.tensor([3.0, 4.0], "e4m3")
    >>> la.norm(v), la.norm(v, 1), la.norm(v, float("inf"))
    (Tensor(5.0, fmt=FP8_E4M3), Tensor(7.0, fmt=FP8_E4M3), Tensor(4.0, fmt=FP8_E4M3))
    >>> la.norm(lp.tensor([[3.0, 0.0], [0.0, -4.0]], "fp16"), 2)
    Tensor(4.0, fmt=FP16)
    """
    x = as_tensor(x, "x")
    if not isinstance(keepdims, (bool, np.bool_)):
        raise TypeError(f"keepdims must be a bool, got {type(keepdims).__name__}")
    axes = _axes(axis, x.ndim)
    if axes is None:
        if ord is None:
            r = _two_norm(x.ravel(), None)
            return r.reshape((1,) * x.ndim) if keepdims else r
        if x.ndim not in (1, 2):
            raise ValueError(f"ord={ord!r} needs a vector or a matrix (or axis=), got "
                             f"ndim {x.ndim}")
        axes = tuple(range(x.ndim))
    r = _vector_norm(x, ord, axes[0]) if len(axes) == 1 else _matrix_norm(x, ord, axes)
    if keepdims:
        r = r.reshape(tuple(1 if i in axes else s for i, s in enumerate(x.shape)))
    return r


def _vector_norm(x: Tensor, ord: Any, ax: int) -> Tensor:  # noqa: A002
    if isinstance(ord, str):
        raise ValueError(f"invalid norm order {ord!r} for vectors")
    if ord is None or ord == 2:
        return _two_norm(x, ax)
    if ord == 1:
        return abs(x).sum(axis=ax)
    if ord == math.inf:
        return _largest(abs(x), ax)
    if ord == -math.inf:
        return abs(x).min(axis=ax)
    if ord == 0:
        # Counts below 2**53: exact in float64, one rounding into the format.
        return tensor(np.count_nonzero(x.values, axis=ax).astype(np.float64), x.fmt)
    raise ValueError(f"vector norm ord={ord!r} is not supported (None, 0, 1, 2, inf, -inf:"
                     " |x|**p is not emulated)")


def _matrix_norm(x: Tensor, ord: Any, axes: tuple[int, ...]) -> Tensor:  # noqa: A002
    r, c = axes
    if r == c:
        raise ValueError("duplicate axes given to norm")
    if ord is None or ord == "fro":
        return _two_norm(x, axes)
    if ord in (2, -2, "nuc"):
        s = np.linalg.svd(np.moveaxis(x.values, axes, (-2, -1)), compute_uv=False)
        # s descends: its largest is s[..., 0], +0 for an empty matrix (NumPy's answer);
        # the smallest of none raises NumPy's ValueError, as NumPy.
        v = (s.sum(axis=-1) if ord == "nuc" else s.max(axis=-1, initial=0.0) if ord == 2
             else s.min(axis=-1))
        return tensor(v, x.fmt)      # float64, rounded once
    if ord in (1, -1):
        sums, other = abs(x).sum(axis=r), c - (c > r)
    elif ord in (math.inf, -math.inf):
        sums, other = abs(x).sum(axis=c), r - (r > c)
    else:
        raise ValueError(f"matrix norm ord={ord!r} is not supported (None, 'fro', 'nuc', "
                         "1, -1, 2, -2, inf, -inf)")
    return _largest(sums, other) if ord > 0 else sums.min(axis=other)


def _largest(t: Tensor, axis: int) -> Tensor:
    """``t.max(axis=axis)`` of values ``>= 0``; +0 along an empty axis (the least norm,
    NumPy's answer), where the smallest stays refused as NumPy refuses it."""
    if t.shape[axis] == 0:
        return exact(np.zeros(t.shape[:axis] + t.shape[axis + 1:]), t.fmt)
    return t.max(axis=axis)
