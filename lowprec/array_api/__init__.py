"""`lowprec.array_api`: a namespace of the Python array API standard (2024.12) whose
floating arrays are lowprec Tensors, and `array_namespace`, the same namespace with a
precision policy.

``import lowprec.array_api as xp`` gives the standard namespace:

* ``xp.float32`` and ``xp.float64`` are FP32 and FP64.
* Every floating operation is a Tensor operation, correctly rounded where the
  Tensor's is. docs/array-api.md lists each class.
* Matrix products use the ``"exact"`` model: exact dot products rounded once.

``lp.array_namespace("bf16")`` stores and computes every floating array in BF16,
whatever dtype the code asks for. That is how a scikit-learn estimator or a SciPy
function runs emulated. This package only adapts the standard's names to Tensors and
`lowprec.linalg`. It never rounds on its own.

The functions live in files named for the standard's chapters, as array-api-strict's
do. They are `core` (the policy, data types, ``asarray``, ``astype``,
``result_type``), `creation`, `elementwise`, `statistical`, `utility`, `searching`,
`sorting`, `sets`, `manipulation`, `products` and `linalg_extension`
(``xp.linalg``). `namespace` joins them into `Namespace`. To find ``xp.argsort``,
open ``sorting.py``.

Examples
--------
>>> import lowprec as lp, lowprec.array_api as xp
>>> x = xp.asarray([1.0, 2.0, 3.0], dtype=xp.float32)
>>> xp.sum(x / 3).tensor
Tensor(2.0, fmt=FP32)
>>> bf = lp.array_namespace("bf16")
>>> y = bf.asarray([1.0, 2.0, 3.0], dtype=bf.float64)
>>> (y / 3).tensor, bf.finfo(bf.float64).eps
(Tensor([0.333984375, 0.66796875, 1.0], fmt=BF16), 0.0078125)
"""

from __future__ import annotations

import sys
from typing import Any

from ..engine.checks import check_mode
from ..formats import Format, FormatLike
from ..formats import format as _format
from ..tensorcore import ModelLike, resolve_model
from ..tensors import core as _core
from ..types import Mode
from .array import CPU, Array
from .dtypes import DType
from .namespace import API_VERSION, Namespace

__array_api_version__ = API_VERSION

_NS = Namespace(label=__name__)


def _public_names() -> list[str]:
    return [n for n in dir(_NS) if not n.startswith("_") and n not in (
        "public", "fmt", "mode", "model", "standard_dtypes", "dtype_of_format",
        "is_operand", "index_key", "storage", "check_version", "check_device")]


def array_namespace(fmt: FormatLike, mode: Mode = "rne",
                    matmul: ModelLike | None = None) -> Namespace:
    """The array-API namespace with a policy: every floating array in ``fmt``.

    Arrays are stored and computed in ``fmt`` whatever floating dtype the code asks
    for. ``xp.float64`` names ``fmt`` too, and ``finfo`` describes ``fmt``. Every
    operation is rounded with ``mode``. Matrix products run under ``matmul``, a
    model of `lowprec.MODELS`. The default ``"exact"`` rounds the exact dot products
    once into ``fmt``.

    A Tensor Core or matrix-unit model (``"h100"``, ``"b200/tcgen05"``, ...) takes
    the arrays' values as its inputs and gives its own output (FP32). That output is
    then rounded once into ``fmt`` with ``mode``, as a framework does. So the product
    is ``lp.round(lp.matmul(a, b, model=matmul, in_fmt=fmt), fmt, mode)``. This
    holds for every input format the model takes: BF16, FP16, and FP8 on models with
    FP8 paths.
    Calls with the same arguments return the same namespace, so their arrays work
    together.

    Examples
    --------
    >>> import lowprec as lp
    >>> xp = lp.array_namespace("bf16", matmul="h100")
    >>> a = xp.ones((2, 3), dtype=xp.float64)
    >>> (a @ xp.asarray([[1e-4], [1.0], [1.0]])).tensor    # FP32 2.0001, then BF16
    Tensor([[2.0],
            [2.0]], fmt=BF16)
    >>> xp is lp.array_namespace("bf16", matmul="h100")
    True
    """
    f = _format(fmt)
    if not isinstance(mode, str):
        raise TypeError(f"mode must be a str, got {type(mode).__name__}")
    if matmul is not None:
        resolve_model(matmul, "matmul")
    key = (f, f.name, mode, matmul if isinstance(matmul, str) or matmul is None else id(matmul))
    ns = _POLICIES.get(key)
    if ns is None:
        check_mode(mode)
        if not f.signed:
            raise ValueError(f"{f} has no sign: arrays cannot be stored in it")
        label = f"lowprec.array_namespace({str(f)!r}, mode={mode!r}, matmul={matmul!r})"
        ns = _POLICIES.setdefault(key, Namespace(f, mode, matmul, label=label))
    return ns


_POLICIES: dict[Any, Namespace] = {}

globals().update({name: getattr(_NS, name) for name in _public_names()})
__array_namespace_info__ = _NS.__array_namespace_info__
_NS.public = sys.modules[__name__]


def _namespace_of(fmt: Format) -> Any:
    """A Tensor's namespace: this module for FP32 and FP64, the format's policy otherwise."""
    if fmt in (_NS.float32.fmt, _NS.float64.fmt):
        return _NS.public
    return array_namespace(fmt)


_core.NAMESPACE[:] = [_namespace_of]      # Tensor.__array_namespace__ calls it

__all__ = ["array_namespace", "Array", "DType", "Namespace", "CPU", "__array_api_version__",
           *_public_names()]
