"""`Linalg`: the array API's ``linalg`` extension (``xp.linalg``), with the
standard's names.

The factorisations and solvers are `lowprec.linalg`'s, run on each matrix of a stack.
``matrix_power``, ``cross`` and ``trace`` are the namespace's own products and sums.
Where lowprec has no step-by-step emulation (``eigh``, ``svd``, ``pinv``, the 2-norms
of a matrix, QR of a wide matrix), NumPy's float64 result is rounded once into the
format. docs/array-api.md lists each. The file is not ``linalg.py``: ``xp.linalg``
is the extension object, which would shadow such a module.
"""

from __future__ import annotations

import math
from collections import namedtuple
from typing import Any, cast

import numpy as np

from .. import linalg as _la
from ..formats import Format
from ..tensors import Tensor
from ..tensors.core import values_of
from .array import Array
from .core import axis_tuple
from .dtypes import DType

__all__ = ["Linalg", "EighResult", "QRResult", "SlogdetResult", "SVDResult"]

EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
QRResult = namedtuple("QRResult", ["Q", "R"])
SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])


class Linalg:
    """The ``linalg`` extension of a namespace ``ns`` (``ns.linalg``).

    ``ns`` is a `Namespace`, typed loosely: namespace.py, which defines it, sits below
    this file.
    """

    def __init__(self, ns: Any) -> None:
        self._ns = ns

    # -- stacks of matrices ---------------------------------------------------------------
    def _matrices(self, x, name="x", square=True):
        ns = self._ns
        x = ns._floating(ns._array(x, name))
        if x.ndim < 2:
            raise ValueError(f"{name} needs at least 2 dimensions, got shape {x.shape}")
        if square and x.shape[-1] != x.shape[-2]:
            raise ValueError(f"{name} must be (a stack of) square matrices, got {x.shape}")
        return x

    def _each(self, fn, x, *rest):
        """``fn`` on each matrix of a stack (each a Tensor), results stacked."""
        ns = self._ns
        fmt = cast(Format, x._dtype.fmt)
        lead = x.shape[:-2]
        outs = []
        with ns._ctx():
            for i in np.ndindex(*lead):
                outs.append(fn(Tensor(x._a[i], fmt), *(r[i] for r in rest)))
        return lead, outs

    def _stacked(self, lead, outs, d, tail=()):
        ns = self._ns
        if not outs:
            return ns._wrap(np.zeros(lead + tail), d)
        vals = [np.asarray(values_of(o)) for o in outs]
        return ns._wrap(np.stack(vals).reshape(lead + vals[0].shape), d)

    def _once(self, values: Any, d: DType) -> Array:
        """float64 results (NumPy's, of the values) rounded once into ``d``'s format."""
        ns = self._ns
        return ns._wrap(ns._round(values, cast(Format, d.fmt)), d)

    # -- the extension's functions ----------------------------------------------------------
    def cholesky(self, x: Array, /, *, upper: bool = False) -> Array:
        ns = self._ns
        x = self._matrices(x)
        lead, outs = self._each(_la.cholesky, x)
        r = self._stacked(lead, outs, x._dtype, x.shape[-2:])
        return ns.matrix_transpose(r) if upper else r

    def det(self, x: Array, /) -> Array:
        ns = self._ns
        x = self._matrices(x)
        if x.shape[-1] == 0:
            return ns._filled(x.shape[:-2], 1, x._dtype)
        lead, outs = self._each(_det_or_zero, x)
        return self._stacked(lead, outs, x._dtype)

    def inv(self, x: Array, /) -> Array:
        x = self._matrices(x)
        lead, outs = self._each(_la.inv, x)
        return self._stacked(lead, outs, x._dtype, x.shape[-2:])

    def solve(self, x1: Array, x2: Array, /) -> Array:
        ns = self._ns
        a, b, _d = ns._pair(x1, x2)
        a = self._matrices(a, "x1")
        b = ns._floating(b)
        vector = b.ndim == 1
        vb = b._a[:, None] if vector else b._a
        if vb.shape[-2] != a.shape[-1]:
            raise ValueError(f"solve: x2 of shape {b.shape} does not match x1 {a.shape}")
        lead = np.broadcast_shapes(a.shape[:-2], vb.shape[:-2])
        va = np.broadcast_to(a._a, lead + a.shape[-2:])
        vb = np.broadcast_to(vb, lead + vb.shape[-2:])
        fmt = cast(Format, a._dtype.fmt)
        outs = []
        with ns._ctx():
            for i in np.ndindex(*lead):
                outs.append(values_of(_la.solve(Tensor(np.ascontiguousarray(va[i]), fmt),
                                                Tensor(np.ascontiguousarray(vb[i]), fmt))))
        r = np.stack(outs).reshape(lead + vb.shape[-2:]) if outs else np.zeros(lead +
                                                                             vb.shape[-2:])
        return ns._wrap(r[..., 0] if vector else r, a._dtype)

    def qr(self, x: Array, /, *, mode: str = "reduced") -> Any:
        x = self._matrices(x, square=False)
        if mode not in ("reduced", "complete"):
            raise ValueError(f"mode must be 'reduced' or 'complete', got {mode!r}")
        m, n = x.shape[-2:]
        if (mode == "complete" and m > n) or m < n:
            # Householder QR of lowprec.linalg is reduced and needs m >= n: the rest is
            # NumPy's float64 QR, rounded once.
            q, r = np.linalg.qr(x._a, mode=cast(Any, mode))
            return QRResult(self._once(q, x._dtype), self._once(r, x._dtype))
        lead, outs = self._each(_la.qr, x)
        return QRResult(self._stacked(lead, [o[0] for o in outs], x._dtype, (m, n)),
                        self._stacked(lead, [o[1] for o in outs], x._dtype, (n, n)))

    def slogdet(self, x: Array, /) -> Any:
        ns = self._ns
        x = self._matrices(x)
        if x.shape[-1] == 0:
            return SlogdetResult(ns._filled(x.shape[:-2], 1, x._dtype),
                                 ns._filled(x.shape[:-2], 0, x._dtype))
        # lowprec.linalg.slogdet: the fsum of log|u_ii| rounded once (no overflow of det)
        lead, outs = self._each(_la.slogdet, x)
        return SlogdetResult(self._stacked(lead, [o[0] for o in outs], x._dtype),
                             self._stacked(lead, [o[1] for o in outs], x._dtype))

    def eigh(self, x: Array, /) -> Any:
        x = self._matrices(x)
        w, v = np.linalg.eigh(x._a)
        return EighResult(self._once(w, x._dtype), self._once(v, x._dtype))

    def eigvalsh(self, x: Array, /) -> Array:
        x = self._matrices(x)
        return self._once(np.linalg.eigvalsh(x._a), x._dtype)

    def svd(self, x: Array, /, *, full_matrices: bool = True) -> Any:
        x = self._matrices(x, square=False)
        u, s, vh = np.linalg.svd(x._a, full_matrices=full_matrices)
        return SVDResult(self._once(u, x._dtype), self._once(s, x._dtype),
                         self._once(vh, x._dtype))

    def svdvals(self, x: Array, /) -> Array:
        x = self._matrices(x, square=False)
        return self._once(np.linalg.svd(x._a, compute_uv=False), x._dtype)

    def pinv(self, x: Array, /, *, rtol: Any = None) -> Array:
        x = self._matrices(x, square=False)
        if rtol is None:
            rtol = max(x.shape[-2:]) * float(x._dtype.fmt.eps)
        rtol = rtol._a if isinstance(rtol, Array) else rtol
        return self._once(np.linalg.pinv(x._a, rtol=rtol), x._dtype)

    def matrix_rank(self, x: Array, /, *, rtol: Any = None) -> Array:
        ns = self._ns
        x = self._matrices(x, square=False)
        s = np.linalg.svd(x._a, compute_uv=False)
        if rtol is None:
            rtol = max(x.shape[-2:]) * float(x._dtype.fmt.eps)
        rtol = rtol._a if isinstance(rtol, Array) else np.asarray(rtol)
        tol = s.max(axis=-1, initial=0.0) * rtol
        return ns._wrap(np.count_nonzero(s > np.asarray(tol)[..., None], axis=-1),
                        ns.int64)

    def matrix_power(self, x: Array, n: int, /) -> Array:
        ns = self._ns
        x = self._matrices(x)
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            raise TypeError(f"n must be an int, got {type(n).__name__}")
        if n == 0:
            return ns._wrap(np.broadcast_to(np.eye(x.shape[-1]), x.shape).copy(), x._dtype)
        # lowprec.linalg.matrix_power's order (binary powering), each product `matmul`
        a, m = (self.inv(x), -int(n)) if n < 0 else (x, int(n))
        if m == 1:
            return ns._wrap(a._a.copy(), a._dtype)
        if m in (2, 3):
            sq = ns.matmul(a, a)
            return sq if m == 2 else ns.matmul(sq, a)
        z: Array | None = None
        result: Array | None = None
        while m > 0:
            z = a if z is None else ns.matmul(z, z)
            m, bit = divmod(m, 2)
            if bit:
                result = z if result is None else ns.matmul(result, z)
        return cast(Array, result)

    def matrix_norm(self, x: Array, /, *, keepdims: bool = False,
                           ord: Any = "fro") -> Array:  # noqa: A002
        ns = self._ns
        x = self._matrices(x, square=False)
        if ord in ("fro", 1, -1, math.inf, -math.inf):
            lead, outs = self._each(lambda t: _la.norm(t, ord), x)
            r = self._stacked(lead, outs, x._dtype)
        elif ord in ("nuc", 2, -2):
            s = np.linalg.svd(x._a, compute_uv=False)
            v = s.sum(axis=-1) if ord == "nuc" else (s.max(axis=-1) if ord == 2
                                                     else s.min(axis=-1))
            r = self._once(v, x._dtype)
        else:
            raise ValueError(f"ord {ord!r} is not a matrix norm")
        return ns.reshape(r, r.shape + (1, 1)) if keepdims else r

    def vector_norm(self, x: Array, /, *, axis: Any = None, keepdims: bool = False,
                           ord: Any = 2) -> Array:  # noqa: A002
        ns = self._ns
        x = ns._floating(ns._array(x))
        axes = axis_tuple(axis, x.ndim)
        rest = [i for i in range(x.ndim) if i not in axes]
        moved = np.transpose(x._a, rest + list(axes))
        flat: np.ndarray = moved.reshape(tuple(x.shape[i] for i in rest)
                                         + (math.prod(x.shape[i] for i in axes),))
        fmt = cast(Format, x._dtype.fmt)
        if ord in (2, 1, math.inf, -math.inf):
            t = Tensor(np.ascontiguousarray(flat), fmt)
            with ns._ctx():
                if flat.shape[-1]:
                    r = values_of(_la.norm(t, ord, axis=-1))
                else:                     # the empty norm: 0 (inf for ord=-inf, NumPy's min)
                    r = np.full(flat.shape[:-1], np.inf if ord == -math.inf else 0.0)
        elif ord == 0:
            r = ns._round(np.count_nonzero(flat, axis=-1).astype(np.float64), fmt)
        else:
            r = ns._round(np.linalg.norm(flat, ord=ord, axis=-1), fmt)   # rounded once
        r = np.asarray(r)
        if keepdims:
            shape = [1 if i in axes else s for i, s in enumerate(x.shape)]
            r = r.reshape(shape)
        return ns._wrap(r, x._dtype)

    def cross(self, x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
        ns = self._ns
        a, b, d = ns._pair(x1, x2)
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError("cross needs arrays of at least one dimension")
        axis_tuple(axis, a.ndim), axis_tuple(axis, b.ndim)      # AxisError naming a bad axis
        if a.shape[axis] != 3 or b.shape[axis] != 3:
            raise ValueError("cross needs vectors of 3 elements along axis")
        va, vb = np.moveaxis(a._a, axis, -1), np.moveaxis(b._a, axis, -1)

        def w(v):
            return ns._wrap(v, d)


        def c(i, j):   # a_i b_j - a_j b_i: two rounded products, one rounded difference
            return ns.subtract(ns.multiply(w(va[..., i]), w(vb[..., j])),
                               ns.multiply(w(va[..., j]), w(vb[..., i])))
        r = np.stack([c(1, 2)._a, c(2, 0)._a, c(0, 1)._a], axis=-1)
        return ns._wrap(np.moveaxis(r, -1, axis), d)

    def diagonal(self, x: Array, /, *, offset: int = 0) -> Array:
        ns = self._ns
        x = ns._array(x)
        return ns._wrap(np.diagonal(x._a, offset, -2, -1).copy(), x._dtype)

    def trace(self, x: Array, /, *, offset: int = 0, dtype: Any = None) -> Array:
        ns = self._ns
        return ns.sum(self.diagonal(x, offset=offset), axis=-1, dtype=dtype)

    def outer(self, x1: Array, x2: Array, /) -> Array:
        ns = self._ns
        a, b, _d = ns._pair(x1, x2)
        if a.ndim != 1 or b.ndim != 1:
            raise ValueError("outer needs two 1-D arrays")
        return ns.multiply(ns.reshape(a, (-1, 1)), ns.reshape(b, (1, -1)))

    def matmul(self, x1: Array, x2: Array, /) -> Array:
        ns = self._ns
        return ns.matmul(x1, x2)

    def matrix_transpose(self, x: Array, /) -> Array:
        ns = self._ns
        return ns.matrix_transpose(x)

    def tensordot(self, x1: Array, x2: Array, /, *, axes: Any = 2) -> Array:
        ns = self._ns
        return ns.tensordot(x1, x2, axes=axes)

    def vecdot(self, x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
        ns = self._ns
        return ns.vecdot(x1, x2, axis=axis)


def _det_or_zero(t: Tensor) -> Tensor:
    """det, with a matrix that is singular in the format giving 0 (as NumPy's det)."""
    try:
        return _la.det(t)
    except np.linalg.LinAlgError:
        return Tensor(np.asarray(0.0), t.fmt)
