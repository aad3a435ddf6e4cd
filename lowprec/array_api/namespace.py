"""`Namespace`: the functions of the Python array API standard (2024.12) on `Array`s,
every floating operation computed as a lowprec Tensor operation.

`Namespace` joins the standard's chapters, one file each, as array-api-strict's
modules do. They are `core` (the policy, data types, ``asarray``, ``astype``,
``result_type``), `creation`, `elementwise`, `statistical`, `utility`, `searching`,
`sorting`, `sets`, `manipulation` (with the indexing functions), `products`, and the
``linalg`` extension (`linalg_extension`). The standard namespace
(`lowprec.array_api`) and a policy namespace
(`lowprec.array_namespace(fmt, mode, matmul)`) are instances with the same functions.

Floating work goes through Tensors (the handlers of `lowprec.tensors`, the kernels
behind them) and `lowprec.linalg`, inside the policy's `lp.context`. Boolean and
integer work is NumPy's, which is exact or wraps as the standard allows. Nothing
floating is computed in float64 and handed back unrounded. Some functions of the
standard lowprec does not emulate step by step (``eigh``, ``svd``, ``pinv``, ...).
They are evaluated in float64 and rounded once into the format, and
docs/array-api.md says so.
"""

from __future__ import annotations

import math
from typing import Any

from ..formats import Format
from ..tensorcore import ModelLike
from ..types import Mode
from .array import CPU
from .core import API_VERSION, VERSIONS
from .creation import Creation
from .dtypes import DType
from .elementwise import Elementwise
from .linalg_extension import Linalg
from .manipulation import Manipulation
from .products import Products
from .searching import Searching
from .sets import Sets
from .sorting import Sorting
from .statistical import Statistical
from .utility import Utility

__all__ = ["Namespace", "Info", "API_VERSION", "VERSIONS"]


class Info:
    """``__array_namespace_info__()``: the namespace's devices, dtypes, capabilities."""

    def __init__(self, ns: Namespace) -> None:
        self._ns = ns

    def capabilities(self) -> dict[str, Any]:
        return {"boolean indexing": True, "data-dependent shapes": True,
                "max dimensions": 64}

    def default_device(self) -> Any:
        return CPU

    def devices(self) -> list[Any]:
        return [CPU]

    def default_dtypes(self, *, device: Any = None) -> dict[str, Any]:
        self._ns.check_device(device)
        ns = self._ns
        return {"real floating": ns.float64, "complex floating": None,
                "integral": ns.int64, "indexing": ns.int64}

    def dtypes(self, *, device: Any = None, kind: Any = None) -> dict[str, DType]:
        self._ns.check_device(device)
        all_ = {d.name: d for d in self._ns.standard_dtypes}
        if kind is None:
            return all_
        return {n: d for n, d in all_.items() if self._ns.isdtype(d, kind)}


class Namespace(Creation, Elementwise, Statistical, Utility, Searching, Sorting, Sets,
                Manipulation, Products):
    """An array-API namespace whose floating arrays are lowprec Tensors.

    The standard namespace is `lowprec.array_api`. `lowprec.array_namespace` makes
    one with a policy. See docs/array-api.md.
    """

    __array_api_version__ = API_VERSION
    e = math.e
    pi = math.pi
    inf = math.inf
    nan = math.nan
    newaxis = None

    def __init__(self, fmt: Format | None = None, mode: Mode | None = None,
                 matmul: ModelLike | None = None, *, label: str = "lowprec.array_api",
                 public: Any = None) -> None:
        super().__init__(fmt, mode, matmul, label=label, public=public)
        self.linalg = Linalg(self)
        self._info = Info(self)

    def __array_namespace_info__(self) -> Info:
        return self._info
