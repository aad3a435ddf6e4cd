"""`Products`: the array API's linear-algebra functions (``matmul``, ``tensordot``,
``vecdot``), every product through the namespace's matmul model.

Under ``"exact"``, and the other models that round their sum into any format, a
product is rounded once into the dtype's format. Under a Tensor Core model it is the
model's output (FP32), rounded once into the format with the policy's mode. That is
what a framework does (`lowprec.array_namespace`).
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

from ..formats import Format
from ..tensorcore import resolve_model
from ..tensors import Tensor
from ..tensors import matmul as _lp_matmul
from ..tensors.core import values_of
from .array import Array
from .core import Core, axis_tuple

__all__ = ["Products"]


class Products(Core):
    """The standard's linear-algebra functions."""

    def _product_format(self, fmt: Format) -> Format:
        """The format the matmul model gives for ``fmt`` inputs: ``fmt`` itself for the
        models that round their sum into any format (``"exact"``, ``"fp32"``,
        ``"fp16"``: one rounding), else the model's natural output (FP32 for the
        Tensor Core models), which `matmul` then rounds into ``fmt``."""
        spec = resolve_model(self.model, "matmul")
        allowed = spec.out_formats(fmt)       # ValueError when the model refuses fmt
        if allowed is None:
            return fmt
        natural = spec.default_out_format()
        return natural if natural in allowed else allowed[0]

    def matmul(self, x1: Array, x2: Array, /) -> Array:
        a, b, d = self._pair(x1, x2)
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError("matmul needs arrays of at least one dimension")
        if d.kind != "floating":
            return self._wrap(np.matmul(a._a, b._a), d)
        va = a._a.reshape(1, -1) if a.ndim == 1 else a._a
        vb = b._a.reshape(-1, 1) if b.ndim == 1 else b._a
        if va.shape[-1] != vb.shape[-2]:
            raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not align")
        fmt = cast(Format, d.fmt)
        if va.shape[-1] == 0:
            r = np.zeros(np.broadcast_shapes(va.shape[:-2], vb.shape[:-2])
                         + (va.shape[-2], vb.shape[-1]))
        elif fmt.p > 26 and self.model == "exact":
            # FP64 (and formats past 26 bits): no exact float64 products, so NumPy's
            # float64 product (BLAS), rounded into the format; docs/array-api.md.
            r = self._round(np.matmul(va, vb), fmt)
        else:
            out = self._product_format(fmt)
            with self._ctx():
                r = values_of(_lp_matmul(Tensor(va, fmt), Tensor(vb, fmt),
                                         model=self.model, out_fmt=out))
            if out != fmt:
                # A Tensor Core model's output (FP32) rounded once into the format with
                # the policy's mode, as a framework does.
                r = self._round(r, fmt)
        if a.ndim == 1:
            r = r[..., 0, :]
        if b.ndim == 1:
            r = r[..., 0]
        return self._wrap(np.asarray(r), d)

    def tensordot(self, x1: Array, x2: Array, /, *, axes: Any = 2) -> Array:
        a, b, _d = self._pair(x1, x2)
        if isinstance(axes, (int, np.integer)):
            if axes < 0:
                raise ValueError("axes must be non-negative")
            if axes > min(a.ndim, b.ndim):
                raise ValueError(f"tensordot: axes={axes} contracts more dimensions than x1 "
                                 f"({a.ndim}) or x2 ({b.ndim}) has")
            ax_a = tuple(range(a.ndim - axes, a.ndim))
            ax_b = tuple(range(axes))
        else:
            ax_a, ax_b = (tuple(axis_tuple(tuple(s) if isinstance(s, (list, tuple)) else s, n))
                          for s, n in zip(axes, (a.ndim, b.ndim)))
        if [a.shape[i] for i in ax_a] != [b.shape[i] for i in ax_b]:
            raise ValueError(f"tensordot: contracted shapes of {a.shape} and {b.shape} differ")
        free_a = [i for i in range(a.ndim) if i not in ax_a]
        free_b = [i for i in range(b.ndim) if i not in ax_b]
        k = int(np.prod([a.shape[i] for i in ax_a], dtype=np.int64))
        ma = np.transpose(a._a, tuple(free_a) + ax_a).reshape(
            math.prod(a.shape[i] for i in free_a), k)
        mb = np.transpose(b._a, ax_b + tuple(free_b)).reshape(
            k, math.prod(b.shape[i] for i in free_b))
        r = self.matmul(Array(ma, a._dtype, self), Array(mb, b._dtype, self))  # one product
        return Array(r._a.reshape(tuple(a.shape[i] for i in free_a)
                                  + tuple(b.shape[i] for i in free_b)), r._dtype, self)

    def vecdot(self, x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
        a, b, d = self._pair(x1, x2)
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError("vecdot needs arrays of at least one dimension")
        if not -min(a.ndim, b.ndim) <= axis < 0 and not 0 <= axis < min(a.ndim, b.ndim):
            raise ValueError(f"axis {axis} out of range")
        va, vb = np.moveaxis(a._a, axis, -1), np.moveaxis(b._a, axis, -1)
        if va.shape[-1] != vb.shape[-1]:
            raise ValueError(f"vecdot: shapes {a.shape} and {b.shape} differ along axis")
        va, vb = np.broadcast_arrays(va, vb)
        ra = self._wrap(va[..., None, :].copy(), d)
        rb = self._wrap(vb[..., :, None].copy(), d)
        r = self.matmul(ra, rb)    # each dot product through the model
        return self._wrap(r._a[..., 0, 0], d)
