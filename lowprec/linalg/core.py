"""The checks and helpers the files of `lowprec.linalg` share: operands as Tensors, square
matrices, stacks, and the one product (`product`) every blocked update goes through."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike

from ..formats import FP32, Format
from ..tensorcore import ModelLike, resolve_model
from ..tensors import Tensor, get_context, matmul, result_format, tensor

LinAlgError = np.linalg.LinAlgError


# -- checks and helpers -------------------------------------------------------------

def as_tensor(x: Any, name: str) -> Tensor:
    if isinstance(x, Tensor):
        return x
    raise TypeError(f"{name} must be a lowprec.Tensor (its format says where every "
                    f"operation rounds), got {type(x).__name__}: wrap it with "
                    f"lp.tensor({name}, fmt)")


def square(a: Any, name: str = "a", stack: bool = False) -> Tensor:
    """``a`` as a square matrix (or, with ``stack``, a stack of them).

    Anything else raises `LinAlgError`, as NumPy does (it is a `ValueError`)."""
    a = as_tensor(a, name)
    if (a.ndim < 2 if stack else a.ndim != 2) or a.shape[-1] != a.shape[-2]:
        what = "a square matrix or a stack of them" if stack else "a square matrix"
        raise LinAlgError(f"{name} must be {what}, got shape {a.shape}")
    return a


def stacked(parts: list[Tensor], batch: tuple[int, ...], core: tuple[int, ...],
             fmt: Format) -> Tensor:
    """The results of each matrix of a stack, stacked (copied values: exact)."""
    if not parts:
        return exact(np.zeros(batch + core), fmt)
    return exact(np.stack([p.values for p in parts]).reshape(batch + parts[0].shape),
                  parts[0].fmt)


def product(a: Tensor, b: Tensor, model: ModelLike | None,
             c: Tensor | None = None) -> Tensor:
    """``a @ b (+ c)`` by `lowprec.matmul` under ``model`` (default: the context's),
    rounded into ``a``'s format once.

    Where the model has an output in that format, its output conversion rounds.
    Else its FP32 output is rounded once in the context's mode, as a GEMM epilogue
    converts. BF16 or FP8 inputs on ``"h100"`` are such a case: their outputs are
    FP32 and FP16. A model without FP32 output rounds from its default output instead."""
    fmt = a.fmt
    model = get_context().matmul if model is None else model
    allowed = resolve_model(model).out_formats(fmt)
    if allowed is None or fmt in allowed:
        return matmul(a, b, model=model, c=c, out_fmt=fmt)
    out = FP32 if FP32 in allowed else resolve_model(model).default_out_format()
    return matmul(a, b, model=model, c=c, out_fmt=out).astype(fmt)


#: The column products (`apply`, `lstsq`'s ``q^T b``) form at most
#: ``max(PRODUCTS, m * n)`` products at a time: the columns of ``x`` (``b``) in chunks.
PRODUCTS = 1 << 16


def by_columns(f: Any, x: Tensor, per_column: int) -> Tensor:
    """``f(x)`` for a 2-D ``x`` whose columns ``f`` treats independently, by chunks
    of columns.

    Each output column has its own products and sums. A chunk forms at most
    ``max(PRODUCTS, per_column)`` products. The chunks' results are put side by side
    (copies: exact). Where all columns fit, it is one call."""
    step = max(1, PRODUCTS // max(per_column, 1))
    k = x.shape[1]
    if step >= k:
        return cast(Tensor, f(x))
    parts = [f(x[:, c:c + step]) for c in range(0, k, step)]
    return exact(np.concatenate([p.values for p in parts], axis=1), parts[0].fmt)


def apply(a: Tensor, x: Tensor) -> Tensor:
    """``a @ x`` with each product rounded and the products of a row summed pairwise,
    in the format.

    ``x`` has shape (n,) or (n, k). Its columns go in chunks (`by_columns`)."""
    if x.ndim == 1:
        return (a * x.reshape(1, -1)).sum(axis=1)
    return by_columns(lambda c: (a.reshape(*a.shape, 1) * c.reshape(1, *c.shape)).sum(axis=1),
                       x, a.size)


def exact(values: ArrayLike, fmt: Format) -> Tensor:
    """A Tensor of values already in ``fmt`` (0, 1, permuted or copied values): RNE
    leaves them unchanged and draws nothing from the context's generator."""
    return tensor(values, fmt, mode="rne")


def rhs(a: Tensor, b: Any, name: str = "b") -> tuple[Tensor, Tensor]:
    """``a`` and ``b`` in their common format, ``b`` of shape (n,) or (n, k)."""
    b = as_tensor(b, name)
    if b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise ValueError(f"{name} must have shape ({a.shape[0]},) or ({a.shape[0]}, k) "
                         f"for a of shape {a.shape}, got {b.shape}")
    if a.fmt != b.fmt:
        fmt = result_format(a.fmt, b.fmt)   # promotion is exact
        a, b = a.astype(fmt), b.astype(fmt)
    return a, b
