"""The data types of the array-API namespaces: `DType`, the standard's promotion
rules, `finfo`/`iinfo` objects and `isdtype`'s kinds.

A namespace owns one `DType` object per name: ``xp.float32 is xp.float32``. Two
namespaces' float32 are different objects, so arrays of two namespaces never mix
by accident. Boolean and integer dtypes are NumPy's storage dtypes. A floating
dtype names a lowprec `Format`, and its arrays hold float64 values of that format.
The format is FP32 or FP64 in the standard namespace. In
`lowprec.array_namespace(fmt)` every floating dtype names the policy's format. This
module never rounds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..formats import Format

__all__ = ["DType", "promote_names", "FInfo", "IInfo", "KINDS"]

#: ``isdtype`` kinds, and which dtype kinds each holds.
KINDS = {"bool": ("bool",), "signed integer": ("signed",), "unsigned integer": ("unsigned",),
         "integral": ("signed", "unsigned"), "real floating": ("floating",),
         "complex floating": (), "numeric": ("signed", "unsigned", "floating")}


class DType:
    """One data type of one namespace.

    It holds its name and its kind (``"bool"``, ``"signed"``, ``"unsigned"`` or
    ``"floating"``). It holds the NumPy dtype its arrays store. A floating dtype also
    holds the `Format` its values are in.

    Examples
    --------
    >>> import lowprec.array_api as xp
    >>> xp.float32, xp.float32.fmt, xp.int16.kind
    (lowprec.array_api.float32, lp.FP32, 'signed')
    >>> xp.float32 == xp.float64
    False
    """

    __slots__ = ("name", "kind", "storage", "fmt", "rank", "_label")

    def __init__(self, name: str, kind: str, storage: np.dtype[Any], fmt: Format | None,
                 rank: int, label: str) -> None:
        self.name = name
        self.kind = kind
        self.storage = storage
        self.fmt: Any = fmt        # a Format for a floating dtype, else None
        self.rank = rank           # the standard's promotion lattice: wider is larger
        self._label = label

    def __repr__(self) -> str:
        return f"{self._label}.{self.name}"

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)

    def __reduce__(self) -> str:
        raise TypeError("a namespace's dtype is not pickled: send its name")


def _int_bits(d: DType) -> int:
    return d.storage.itemsize * 8


def promote_names(a: DType, b: DType) -> str | None:
    """The standard's promotion of two dtypes of one namespace, by name: None where the
    standard defines no result (integers with floats are handled by the namespace)."""
    if a is b:
        return a.name
    if a.kind == "bool" or b.kind == "bool":
        return None
    if a.kind == "floating" and b.kind == "floating":
        return a.name if a.rank >= b.rank else b.name
    if a.kind == "floating" or b.kind == "floating":
        return None
    if a.kind == b.kind:
        return a.name if _int_bits(a) >= _int_bits(b) else b.name
    signed, unsigned = (a, b) if a.kind == "signed" else (b, a)
    if _int_bits(signed) > _int_bits(unsigned):
        return signed.name
    bits = 2 * _int_bits(unsigned)
    return f"int{bits}" if bits <= 64 else None   # uint64 with a signed integer: none


class FInfo:
    """``finfo`` of a floating dtype: the standard's fields, from its `Format`
    (``bits``, ``eps``, ``max``, ``min``, ``smallest_normal``, ``dtype``)."""

    __slots__ = ("bits", "eps", "max", "min", "smallest_normal", "dtype")

    def __init__(self, dtype: DType) -> None:
        fmt = dtype.fmt
        assert fmt is not None
        self.bits = fmt.bits
        self.eps = float(fmt.eps)
        self.max = float(fmt.max)
        self.min = -float(fmt.max)
        self.smallest_normal = float(fmt.smallest_normal)
        self.dtype = dtype

    def __repr__(self) -> str:
        return (f"finfo(bits={self.bits}, eps={self.eps!r}, max={self.max!r}, "
                f"smallest_normal={self.smallest_normal!r}, dtype={self.dtype!r})")


class IInfo:
    """``iinfo`` of an integer dtype (``bits``, ``max``, ``min``, ``dtype``)."""

    __slots__ = ("bits", "max", "min", "dtype")

    def __init__(self, dtype: DType) -> None:
        info = np.iinfo(dtype.storage)
        self.bits = info.bits
        self.max = int(info.max)
        self.min = int(info.min)
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"iinfo(bits={self.bits}, max={self.max}, min={self.min}, dtype={self.dtype!r})"
