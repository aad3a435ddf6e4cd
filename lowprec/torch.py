# One module (~830 lines): the dispatch mode, its per-call state and the products,
# convolutions and scaled products it routes share private helpers; compare lives in
# torchcompare.py.
"""PyTorch's matrix products through lowprec's hardware models (`emulate`), and the
choice of model a GPU makes for a dtype (`model_for`).

Inside ``with emulate(gpu="h100"):`` every floating matrix product torch computes on
CPU tensors is computed by `lowprec.tensorcore.matmul` with the model that GPU's
cuBLAS reaches for the operands' dtypes. The mode is a `TorchDispatchMode`, so it sits
below autograd: the backward pass's products go through the same model. This module
must never be imported by ``import lowprec`` and never imports torch at import time
(the ``torch`` extra): `model_for` works without torch, and torch is imported when a
mode is built.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from .arith import add, mul
from .bits import decode
from .formats import BF16, FP8_E4M3, FP8_E5M2, FP16, FP32, TF32, Format
from .rounding import round as _round
from .tensorcore import MODELS, Model, matmul, resolve_model
from .tensorcore.driver import Known, bf16_values
from .tensorcore.models import Accumulating

__all__ = ["emulate", "Emulate", "model_for", "GPUS", "FAST_ACCUM_OFF_INTERVAL"]

#: The GPUs `model_for` knows, each with the name of its model in `lp.MODELS`.
GPUS: dict[str, str] = {"v100": "v100", "t4": "t4", "a100": "a100", "ada": "ada",
                        "l4": "ada", "l40": "ada", "h100": "h100", "h200": "h100",
                        "b200": "b200", "gb200": "b200"}

# torch's and ONNX's dtype names, and lowprec's, for the formats a product may take.
_FP8_NAMES = {FP8_E4M3: "float8_e4m3fn", FP8_E5M2: "float8_e5m2"}
_DTYPES: dict[str, Format] = {
    "float16": FP16, "half": FP16, "fp16": FP16,
    "bfloat16": BF16, "bf16": BF16,
    "float32": FP32, "float": FP32, "fp32": FP32,
    "float8_e4m3fn": FP8_E4M3, "e4m3": FP8_E4M3, "float8e4m3fn": FP8_E4M3,
    "float8_e5m2": FP8_E5M2, "e5m2": FP8_E5M2, "float8e5m2": FP8_E5M2,
}

# GPUs without the unit: no BF16 and no TF32 before Ampere, no FP8 before Ada.
_NO_BF16 = {"v100", "t4"}
_NO_FP8 = {"v100", "t4", "a100"}


def _dtype_format(name: Any) -> Format:
    key = str(name).removeprefix("torch.").lower()
    if key not in _DTYPES:
        raise ValueError(f"no GPU matrix-product model for dtype {name!r}; lowprec models "
                         f"float16, bfloat16, float32, float8_e4m3fn and float8_e5m2")
    return _DTYPES[key]


def model_for(gpu: str, dtype_name: Any, other: Any = None, *,
              tf32: bool = False) -> tuple[Model, Format]:
    """The model and input format of the product cuBLAS runs on ``gpu`` for operands of
    ``dtype_name`` (and ``other``, B's dtype when it differs).

    Returns ``(model, in_fmt)`` to hand to ``lp.matmul(a, b, model=model,
    in_fmt=in_fmt, out_fmt="fp32")``. The accumulator is FP32 in every case. The
    choice, per dtype:

    - ``float16``, ``bfloat16``: the GPU's Tensor Core model (`lp.MODELS`). V100 and T4
      have no BF16 Tensor Cores: their BF16 products are FP32 FMAs, modelled as
      ``"fp32"`` sequential accumulation (not measured).
    - ``float32``: the GPU's TF32 model (operands rounded to TF32 to nearest even, as
      the H200's recorded data show) when ``tf32`` is true and the GPU has TF32 (A100
      and later); plain FP32 accumulation (``"fp32"``) otherwise.
    - ``float8_e4m3fn``, ``float8_e5m2``: the GPU's FP8 path (Ada, Hopper, Blackwell).
      A mixed E5M2 x E4M3 pair runs as FP16 operands (which hold both exactly) through
      the same FP8 block FMA, which does not depend on the operands' format. E5M2 x
      E5M2 is refused, as cuBLAS refuses it.

    ``gpu`` is a name of `GPUS` (``"h200"`` is the ``"h100"`` model, its chip).
    Dtype names are torch's, ONNX's or lowprec's (``"float16"``, ``"torch.bfloat16"``,
    ``"fp32"``). Raises `ValueError` naming the GPU or dtype it has no model for.

    Examples
    --------
    >>> from lowprec.torch import model_for
    >>> model, fmt = model_for("h100", "bfloat16")
    >>> model.name, fmt.name
    ('h100', 'BF16')
    >>> model, fmt = model_for("a100", "float32", tf32=True)
    >>> model.name, fmt.name
    ('a100', 'TF32')
    >>> model_for("a100", "float32")[0].name
    'fp32'
    """
    key = str(gpu).lower()
    if key not in GPUS:
        raise ValueError(f"unknown gpu {gpu!r}; lowprec models {', '.join(GPUS)} "
                         f"(or pass matmul= any lp.MODELS entry)")
    name = GPUS[key]
    fa = _dtype_format(dtype_name)
    fb = fa if other is None else _dtype_format(other)
    tc = MODELS[name]
    if fa in (FP8_E4M3, FP8_E5M2) or fb in (FP8_E4M3, FP8_E5M2):
        if fa not in (FP8_E4M3, FP8_E5M2) or fb not in (FP8_E4M3, FP8_E5M2):
            raise ValueError(f"an FP8 product needs two FP8 operands, got {fa.name} x {fb.name}")
        if name in _NO_FP8:
            raise ValueError(f"{gpu} has no FP8 Tensor Cores (Ada, Hopper and Blackwell "
                             f"have); pass matmul= to choose a model")
        if fa == fb == FP8_E5M2:
            raise ValueError("cuBLAS has no E5M2 x E5M2 FP8 kernel (torch refuses it); "
                             "make one operand float8_e4m3fn")
        if fa == fb:
            return tc, fa
        fp8: Any = tc.for_format(FP8_E4M3)
        return dataclasses.replace(fp8, inputs=(FP16,), variants=()), FP16
    if fa != fb:
        raise ValueError(f"operands of two dtypes, {fa.name} x {fb.name}: cuBLAS takes one "
                         f"(cast one operand)")
    if fa == FP32:
        if tf32 and name not in _NO_BF16:
            return tc, TF32
        return MODELS["fp32"], FP32
    if fa == BF16 and name in _NO_BF16:
        return MODELS["fp32"], BF16
    return tc, fa


# -- the dispatch mode ------------------------------------------------------------------

#: K slice after which `_scaled_mm` without ``use_fast_accum`` promotes the Tensor Core's
#: partial sum into an FP32 accumulator (DeepSeek-V3's interval of 128 products;
#: unverified beyond K = 128, where the recorded H200 data give identical bits).
FAST_ACCUM_OFF_INTERVAL = 128

SplitK = "int | Callable[[int, int, int, str], int | None] | None"


class Emulate(contextlib.ContextDecorator):
    """The context manager and decorator `emulate` returns: entering it pushes a fresh
    dispatch mode on this thread's stack, leaving pops it."""

    def __init__(self, gpu: str | None = None, *, matmul: Any = None,
                 operands: Any = None, split_k: Any = None, rng: Any = 0):
        self.recipe = self.quantizer = None
        self.delayed: Any = None
        # DelayedScaling: the state of each product of a pass (its position since the
        # block was entered), one per-tensor quantizer per operand.
        self._sites: dict[int, tuple[Any, Any]] = {}
        if isinstance(operands, _delayed_class()):
            if (gpu is None) == (matmul is None):
                raise ValueError("operands=DelayedScaling() needs exactly one of gpu= "
                                 "(an FP8 GPU: ada, h100, b200) and matmul= (the model "
                                 "of its FP8 products)")
            if gpu is not None and GPUS.get(str(gpu).lower()) in _NO_FP8:
                raise ValueError(f"operands=DelayedScaling() needs FP8 Tensor Cores, "
                                 f"which {gpu} lacks: pass gpu='ada', 'h100' or 'b200'")
            self.delayed = operands
        elif operands is not None:
            from .amp.scaling import BlockScaling
            if not isinstance(operands, BlockScaling):
                raise TypeError(f"operands= takes an amp recipe (lp.amp.MXFP8, "
                                f"lp.amp.NVFP4, lp.amp.BlockScaling(...)), got {operands!r}")
            if matmul is not None:
                raise ValueError("operands= runs every product on the recipe's unit "
                                 f"({operands.model!r}): leave matmul= out")
            chip = operands.model.split("/")[0]
            if gpu is not None and GPUS.get(str(gpu).lower()) != chip:
                raise ValueError(f"operands={operands!r} runs on {operands.model!r}, not "
                                 f"on gpu={gpu!r}: pass gpu={chip!r} or leave gpu= out")
            self.recipe = operands
            self.quantizer = operands.quantizer(rng)
        elif (gpu is None) == (matmul is None):
            raise ValueError("emulate needs exactly one of gpu= (a name of "
                             "lowprec.torch.GPUS) and matmul= (an lp.MODELS entry or a "
                             "TensorCoreModel)")
        if gpu is not None and str(gpu).lower() not in GPUS:
            raise ValueError(f"unknown gpu {gpu!r}; lowprec models {', '.join(GPUS)}")
        if matmul is not None:
            matmul = resolve_model(matmul)
        if split_k is not None and not callable(split_k) and not _positive_int(split_k):
            raise ValueError(f"split_k must be a positive int, a callable (m, n, k, "
                             f"dtype) -> int or None, or None; got {split_k!r}")
        self.gpu = None if gpu is None else str(gpu).lower()
        self.model = matmul
        self.split_k = split_k
        self._local = threading.local()

    def __enter__(self) -> Emulate:
        mode = _mode_class()(self)
        self._local.position = 0          # DelayedScaling's products count from here
        stack = self._local.__dict__.setdefault("modes", [])
        mode.__enter__()
        stack.append(mode)
        return self

    def __exit__(self, *exc: object) -> None:
        self._local.modes.pop().__exit__(*exc)

    def __repr__(self) -> str:
        what = f"gpu={self.gpu!r}" if self.gpu else f"matmul={self.model!r}"
        return f"emulate({what}, split_k={self.split_k!r})"

    # -- the choice of model ---------------------------------------------------------

    def route(self, da: str, db: str) -> tuple[Model, Format]:
        """(model, in_fmt) for operands of torch dtype names ``da`` and ``db``."""
        if self.recipe is not None:     # the recipe quantizes whatever it is given
            return resolve_model(self.recipe.model), FP32
        tf32 = _tf32_on()
        if self.gpu is not None:
            return model_for(self.gpu, da, None if db == da else db, tf32=tf32)
        model = self.model
        fa, fb = _dtype_format(da), _dtype_format(db)
        if fa != fb:
            if {fa, fb} <= {FP8_E4M3, FP8_E5M2}:
                return model, FP16   # both held exactly by FP16 (as model_for's mixed pair)
            raise ValueError(f"operands of two dtypes, {da} x {db}: cast one operand")
        if fa == FP32:
            # A Tensor Core takes FP32 operands only as TF32.
            try:
                model.for_format(FP32)
            except ValueError:
                return model, TF32
        return model, fa


def emulate(gpu: str | None = None, *, matmul: Any = None, operands: Any = None,
            split_k: Any = None, rng: Any = 0) -> Emulate:
    """Run torch's floating matrix products on CPU tensors through a hardware model.

    Inside the block, ``aten.mm``, ``addmm``, ``bmm``, ``baddbmm``, ``mv``, ``addmv``,
    ``dot`` and ``_scaled_mm`` (what ``@``, ``torch.matmul``, ``F.linear`` and
    ``torch.einsum`` reach, forward and backward) are computed by
    `lowprec.tensorcore.matmul` with the chosen model, then cuBLAS's epilogue (and
    ``convolution`` and ``convolution_backward`` as implicit GEMMs, K in (input
    channel, kernel offsets) order, transposed convolutions as the adjoint GEMMs of
    the convolution with their weight: docs/your-model.md):

    - the product is accumulated as the model says, to FP32;
    - ``alpha`` multiplies it in FP32, then ``beta * C`` is added by one FP32 FMA;
    - the FP32 result is converted once, to nearest even, to the output dtype (the
      operands' dtype, or ``out_dtype``).

    float64 products are left to torch (they are the reference, not a GPU product).
    Complex, integer, sparse and non-CPU operands raise `TypeError` naming the op.

    Parameters
    ----------
    gpu : str, optional
        A name of `GPUS`: each product takes the model `model_for` gives for the
        operands' dtypes. float32 operands are TF32 where
        ``torch.backends.cuda.matmul.allow_tf32`` is on or
        ``torch.get_float32_matmul_precision()`` is not ``"highest"``.
    matmul : str or model, optional
        Any `lp.MODELS` entry or `TensorCoreModel`, for every product instead.
    operands : BlockScaling or DelayedScaling, optional
        An amp recipe (`lp.amp.MXFP8`, `lp.amp.NVFP4`, any `lp.amp.BlockScaling`):
        each product's operands are quantized along K by the recipe's own quantizer
        (gradients with its ``grad_scheme`` and ``grad_mode``) and multiplied by
        `lowprec.mx.matmul` on its unit (``b200/tcgen05``), one 2-D matrix of a batch
        at a time; ``gpu=`` may name that chip, ``matmul=`` must be left out.
        ``lp.amp.DelayedScaling()``: each operand is quantized to FP8 with one FP32
        scale per tensor, from an amax history per product and operand, and the
        product runs on ``gpu=``'s FP8 model (or ``matmul=``), its result times
        ``fl32(scale_inv_a * scale_inv_b)``. A product's history is found by its
        position among the products since the block was entered: enter the same
        `emulate` object once per training step (``with em:``), so that the n-th
        product of every step (forward and backward) shares one history.
    rng : int or Generator
        Seeds the recipe's stochastic rounding of gradients (NVFP4), once per
        `emulate` object.
    split_k : int or callable, optional
        cuBLAS's split-K: the product's K is cut into slices of this length, each
        slice is a product through the model, and the slices' FP32 results are added
        one after another in FP32. A callable ``(m, n, k, dtype_name)`` returns the
        slice or None. Default: no split (the kernels of large products).

    Examples
    --------
    >>> import torch, lowprec.torch as lpt
    >>> a = torch.full((1, 32), 1.0, dtype=torch.bfloat16)
    >>> b = torch.full((32, 1), 2.0**-9, dtype=torch.bfloat16)
    >>> with lpt.emulate(gpu="h100"):
    ...     (a @ b).item()
    0.0625
    """
    return Emulate(gpu, matmul=matmul, operands=operands, split_k=split_k, rng=rng)


def _delayed_class() -> type:
    from .amp.scaling import DelayedScaling
    return DelayedScaling


def _positive_int(x: Any) -> bool:
    """Whether ``x`` is a split of K: an int (not a bool) of at least 1."""
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool) and bool(x >= 1)


def _tf32_on() -> bool:
    import torch
    try:
        return bool(torch.backends.cuda.matmul.allow_tf32
                    or torch.get_float32_matmul_precision() != "highest")
    except RuntimeError:
        # torch refuses the legacy flags once the newer ones (torch >= 2.9) are set:
        # read those, the matmul's own ("none": the backends' default) first.
        precision = torch.backends.cuda.matmul.fp32_precision
        if precision == "none":
            precision = getattr(torch.backends, "fp32_precision", "ieee")
        return precision == "tf32"


@functools.cache
def _fp8_table(fmt: Format) -> np.ndarray:
    """The float32 value of each of the 256 bit patterns of an FP8 format."""
    return np.asarray(decode(np.arange(256, dtype=np.uint8), fmt), np.float32)


def _dtype_name(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


def _values(t: Any) -> np.ndarray:
    """A NumPy array of a CPU tensor's values: a zero-copy view for float16 and float32
    (strides kept), an exact float32 copy for bfloat16 (the bits shifted into FP32's
    top half) and FP8 (a table of the 256 values)."""
    import torch
    t = t.detach()
    if t.dtype in (torch.float16, torch.float32, torch.float64):
        return t.numpy()
    if t.dtype == torch.bfloat16:
        bits = t.view(torch.int16).numpy().view(np.uint16)
        # A BF16 value is the FP32 value whose top 16 bits are its pattern: exact.
        return (bits.astype(np.uint32) << 16).view(np.float32)
    return _fp8_table(_dtype_format(_dtype_name(t)))[t.view(torch.uint8).numpy()]


def _tensor(d: np.ndarray, dtype: Any) -> Any:
    """A tensor of ``dtype`` from FP32 values ``d`` (float64 array): rounded once, to
    nearest even, to the dtype's format, then converted exactly."""
    import torch
    name = str(dtype).removeprefix("torch.")
    if dtype == torch.float32:
        out = np.asarray(d, np.float32)
    elif dtype == torch.float16:
        out = np.asarray(_round(d, FP16), np.float16)
    elif dtype == torch.bfloat16:
        with np.errstate(over="ignore"):
            r = np.asarray(_round(d, BF16), np.float32)
        # Values already in BF16: the conversion of each is exact.
        return torch.from_numpy(np.ascontiguousarray(r)).to(torch.bfloat16)
    else:
        raise TypeError(f"lowprec.torch gives no {name} output (float32, float16 or "
                        f"bfloat16)")
    return torch.from_numpy(np.ascontiguousarray(out))


_FLOATS = ("float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2")


def _check(op: str, *tensors: Any) -> None:
    import torch
    for t in tensors:
        if t is None or not isinstance(t, torch.Tensor):
            continue
        if t.device.type != "cpu":
            raise TypeError(f"lowprec.torch.emulate cannot emulate {op} on {t.device} "
                            f"tensors: it emulates CPU tensors (move them with .cpu())")
        if t.layout != torch.strided:
            raise TypeError(f"lowprec.torch.emulate cannot emulate {op} on {t.layout} "
                            f"tensors (make them dense with .to_dense())")
        if _dtype_name(t) not in _FLOATS:
            raise TypeError(f"lowprec.torch.emulate cannot emulate {op} on {t.dtype} "
                            f"operands: it emulates floating products of "
                            f"{', '.join(_FLOATS)}")


def _meta(func: Any, args: tuple, kwargs: dict) -> Any:
    """The op run on meta tensors: torch's own shape and dtype checks, and the
    result's shape and dtype."""
    import torch
    conv = lambda x: (torch.empty_strided(x.shape, x.stride(), dtype=x.dtype,  # noqa: E731
                                          device="meta")
                      if isinstance(x, torch.Tensor) else x)
    # With modes off: an outer `emulate` (nested blocks) must not see the meta run.
    from torch.utils._python_dispatch import _disable_current_modes
    with _disable_current_modes():
        return func(*[conv(a) for a in args], **{k: conv(v) for k, v in kwargs.items()})


def _recipe_product(em: Emulate, a: np.ndarray, b: np.ndarray,
                    kinds: tuple[str, str]) -> np.ndarray:
    """FP32 values of a @ b under the amp recipe: per 2-D matrix of the batch, a
    quantized along its rows and b along its columns (K) by the recipe's quantizer as
    operands of ``kinds`` ("x", "w" or "dy"), multiplied by `lowprec.mx.matmul` on
    the recipe's unit."""
    from . import mx
    q: Any = em.quantizer
    a2 = a if a.ndim > 1 else a[None, :]
    b2 = b if b.ndim > 1 else b[:, None]
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    a2 = np.broadcast_to(a2, batch + a2.shape[-2:])
    b2 = np.broadcast_to(b2, batch + b2.shape[-2:])
    out = np.empty(batch + (a2.shape[-2], b2.shape[-1]))
    with np.errstate(all="ignore"):
        for idx in np.ndindex(*batch):
            if a2.shape[-1] == 0 or 0 in out[idx].shape:
                out[idx] = 0.0
                continue
            qa = q._quantize(np.asarray(a2[idx], np.float64), kinds[0], 1)
            qb = q._quantize(np.asarray(b2[idx], np.float64), kinds[1], 0)
            out[idx] = mx.matmul(qa, qb, model=em.recipe.model)  # type: ignore[union-attr]
    if a.ndim == 1:
        out = out[..., 0, :]
    if b.ndim == 1:
        out = out[..., 0]
    return out


def _kinds(a: Any, b: Any) -> tuple[str, str]:
    """The amp recipe's kinds of a product's operands: ("x", "w") in the forward
    pass; in autograd's backward, an operand that shares memory with a tensor the
    node saved is "x" or "w" (the saved input or weight), any other is the gradient,
    "dy"."""
    import torch
    node = torch._C._current_autograd_node()
    if node is None:
        return "x", "w"
    saved = set()
    for name in dir(node):
        if name.startswith("_saved_") and not name.endswith("_raw"):
            try:
                v = getattr(node, name)
            except RuntimeError:
                continue
            for t in v if isinstance(v, (tuple, list)) else (v,):
                if isinstance(t, torch.Tensor):
                    saved.add(t.untyped_storage().data_ptr())
    ka = "x" if a.untyped_storage().data_ptr() in saved else "dy"
    kb = "w" if b.untyped_storage().data_ptr() in saved else "dy"
    return ka, kb


def _product(em: Emulate, a: np.ndarray, b: np.ndarray, model: Model, fmt: Format,
             dtype: str, split: int | None, kinds: tuple[str, str] = ("x", "w")) -> Any:
    """FP32 values of a @ b through ``model``, K cut into slices of ``split`` (each
    slice's FP32 result added to the previous ones in FP32, left to right); under an
    amp recipe, its quantized product (`_recipe_product`, `_delayed_product`)."""
    if em.recipe is not None:
        return _recipe_product(em, a, b, kinds)
    if em.delayed is not None:
        return _delayed_product(em, a, b, dtype, split, kinds)
    return _plain_product(em, a, b, model, fmt, dtype, split)


def _delayed_product(em: Emulate, a: np.ndarray, b: np.ndarray, dtype: str,
                     split: int | None, kinds: tuple[str, str]) -> Any:
    """FP32 values of a @ b under `DelayedScaling`: each operand quantized to FP8 with
    its per-tensor scale (from the amax history of the product at this position in
    the pass, and of this operand), the product through the GPU's FP8 model, its FP32
    result multiplied once in FP32 by ``fl32(scale_inv_a * scale_inv_b)``."""
    from .tensors import Tensor
    pos = getattr(em._local, "position", 0)
    em._local.position = pos + 1
    site = em._sites.get(pos)
    if site is None:
        site = em._sites[pos] = (em.delayed.quantizer(), em.delayed.quantizer())
    if kinds == ("dy", "dy") and em.delayed.formats["dy"] == FP8_E5M2:
        # Two gradients (attention's backward): cuBLAS has no E5M2 x E5M2 kernel, so
        # the second takes the forward format, E4M3.
        kinds = ("dy", "x")
    quantized, inverse = [], np.float64(1.0)
    for q, x, kind in zip(site, (a, b), kinds):
        q._settle((kind,))               # the amax of this operand's last pass
        with np.errstate(all="ignore"):
            qx, inv = q._quantize(Tensor(np.asarray(x, np.float64), FP32), kind)
        quantized.append(qx)
        inverse = inverse * inv           # exact in float64: two FP32 values
    fa, fb = (_FP8_NAMES[x.fmt] for x in quantized)
    model, fmt = em.route(fa, fb)
    d = _plain_product(em, quantized[0].values, quantized[1].values, model, fmt, dtype,
                       split)
    with np.errstate(all="ignore"):
        return mul(d, np.float64(np.float32(inverse)), FP32)   # fl32 of the exact product


def _plain_product(em: Emulate, a: np.ndarray, b: np.ndarray, model: Model, fmt: Format,
                   dtype: str, split: int | None) -> Any:
    """FP32 values of a @ b through ``model``, K cut into slices of ``split``."""
    k = a.shape[-1]
    known = fmt == FP32 and isinstance(model, Accumulating) and bf16_values(a, b)
    if known:
        # An accumulation model's result depends on the operands' values only; FP32
        # operands that are all BF16 values (bfloat16 upcast, as torch's attention
        # math path does) take its float32 einsum path for <= 12-bit inputs, as the
        # BF16 values they are (checked: not checked or rounded again).
        fmt = BF16

    def operand(x: np.ndarray) -> Any:
        return Known(x, BF16) if known else x
    if split is None:
        split = em.split_k(a.shape[-2] if a.ndim > 1 else 1, b.shape[-1] if b.ndim > 1
                           else 1, k, dtype) if callable(em.split_k) else em.split_k
        if split is not None and not _positive_int(split):
            raise ValueError(f"split_k's callable returned {split!r} for a product of "
                             f"K = {k}; it must return a positive int (or None: no split)")
    with np.errstate(all="ignore"):
        if not split or split >= k:
            return matmul(operand(a), operand(b), model=model, in_fmt=fmt, out_fmt=FP32,
                          progress=False)
        acc = None
        for i in range(0, k, split):
            part = matmul(operand(a[..., i:i + split]),
                          operand(b[..., i:i + split, :] if b.ndim > 1 else b[i:i + split]),
                          model=model, in_fmt=fmt, out_fmt=FP32, progress=False)
            acc = part if acc is None else add(acc, part, FP32)
        return acc


def _epilogue(d: Any, c: Any, beta: Any, alpha: Any) -> np.ndarray:
    """cuBLAS's epilogue in FP32: ``alpha * acc`` rounded to FP32, then ``beta * C``
    added by one FMA rounded to FP32 (``beta == 0`` ignores C, NaN included)."""
    from .arith import fma
    with np.errstate(all="ignore"):
        if alpha != 1:
            d = mul(np.float32(alpha), d, FP32)
        if c is not None and beta != 0:
            cv = _values(c)
            d = add(d, cv, FP32) if beta == 1 else fma(np.float32(beta), cv, d, FP32)
    return np.asarray(d, np.float64)


def _run_product(em: Emulate, op: str, a: Any, b: Any, *, c: Any = None, beta: Any = 1,
                 alpha: Any = 1, out_dtype: Any = None, meta: Any = None) -> Any:
    _check(op, a, b, c)
    da, db = _dtype_name(a), _dtype_name(b)
    model, fmt = em.route(da, db)
    kinds = _kinds(a, b) if em.recipe or em.delayed else ("x", "w")
    d = _product(em, _values(a), _values(b), model, fmt, da, None, kinds)
    d = _epilogue(d, c, beta, alpha)
    dtype = out_dtype if out_dtype is not None else a.dtype
    out = _tensor(np.broadcast_to(d, meta.shape) if meta is not None else d, dtype)
    return out.reshape(meta.shape) if meta is not None else out


def _scaled_mm(em: Emulate, a: Any, b: Any, scale_a: Any, scale_b: Any, bias: Any = None,
               scale_result: Any = None, out_dtype: Any = None,
               use_fast_accum: bool = False) -> Any:
    import torch
    op = "aten._scaled_mm"
    _check(op, a, b, scale_a, scale_b, bias)
    dtype = out_dtype if out_dtype is not None else a.dtype
    if dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"{op}: lowprec.torch models FP32, FP16 and BF16 outputs, not "
                        f"{dtype} (pass out_dtype=torch.float32, float16 or bfloat16)")
    if scale_result is not None:
        raise TypeError(f"{op}: scale_result applies to FP8 outputs only, which "
                        f"lowprec.torch does not model")
    model, fmt = em.route(_dtype_name(a), _dtype_name(b))
    split = None if use_fast_accum else FAST_ACCUM_OFF_INTERVAL
    # FP8 operands already: no recipe quantizes them again under DelayedScaling.
    run = _plain_product if em.delayed is not None else _product
    d: Any = run(em, _values(a), _values(b), model, fmt, _dtype_name(a), split)
    sa = np.asarray(scale_a.detach().to(torch.float32).numpy(), np.float64)
    sb = np.asarray(scale_b.detach().to(torch.float32).numpy(), np.float64)
    m, n = d.shape
    with np.errstate(all="ignore"):
        if sa.size == 1 and sb.size == 1:
            # Per-tensor scales: alpha = scale_a * scale_b in FP32, then alpha * acc.
            alpha = mul(sa.reshape(()), sb.reshape(()), FP32)
            if alpha != 1:
                d = mul(alpha, d, FP32)
        elif sa.size == m and sb.size == n:
            # Row-wise scales: acc * scale_a[m] then * scale_b[n], each in FP32.
            d = mul(mul(d, sa.reshape(m, 1), FP32), sb.reshape(1, n), FP32)
        else:
            raise TypeError(f"{op}: lowprec.torch models per-tensor and row-wise scales "
                            f"(shapes (1,) and ({m}, 1) x (1, {n})), not "
                            f"{tuple(scale_a.shape)} x {tuple(scale_b.shape)}")
        if bias is not None:
            d = add(d, _values(bias), FP32)
    return _tensor(np.asarray(d, np.float64), dtype)


# -- convolutions as implicit GEMMs -----------------------------------------------------

def _patches(x: np.ndarray, ksize: tuple, stride: tuple, dilation: tuple,
             lo: tuple, hi: tuple) -> np.ndarray:
    """The patches of ``x`` (N, C, *spatial) that a convolution multiplies: a view
    (N, *out, C, *ksize) of ``x`` padded with +0 (``lo``/``hi`` per spatial axis; a
    negative pad crops). Entry ``[n, *p, c, *j]`` is ``x[n, c, *(p * stride + j *
    dilation)]`` of the padded input."""
    nd = len(ksize)
    if any(v > 0 for v in lo + hi):
        x = np.pad(x, [(0, 0), (0, 0)] + [(max(a, 0), max(b, 0)) for a, b in zip(lo, hi)])
    if any(v < 0 for v in lo + hi):
        x = x[(slice(None), slice(None)) + tuple(
            slice(max(-a, 0), x.shape[2 + i] - max(-b, 0)) for i, (a, b) in
            enumerate(zip(lo, hi)))]
    win = tuple(d * (k - 1) + 1 for k, d in zip(ksize, dilation))
    v = np.lib.stride_tricks.sliding_window_view(x, win, axis=tuple(range(2, 2 + nd)))
    v = v[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride)
          + tuple(slice(None, None, d) for d in dilation)]
    return np.moveaxis(v, 1, 1 + nd)


def _conv_gemm(em: Emulate, x: np.ndarray, w: np.ndarray, model: Model, fmt: Format,
               dtype: str, stride: tuple, dilation: tuple, lo: tuple, hi: tuple,
               groups: int, kinds: tuple[str, str] = ("x", "w")) -> np.ndarray:
    """FP32 values of the convolution of ``x`` (N, C, *S) with ``w`` (O, C/groups, *k):
    per group one product ``patches (N, L, K) @ w_g.T (K, O/groups)``, K in the order
    (input channel, *kernel position), row-major, as cuDNN's implicit GEMM of an NCHW
    tensor lays it out. Returns (N, O, *out)."""
    n, nd = x.shape[0], x.ndim - 2
    ksize = w.shape[2:]
    cols = _patches(x, ksize, stride, dilation, lo, hi)      # (N, *out, C, *k)
    out_sp = cols.shape[1:1 + nd]
    cg, og = w.shape[1], w.shape[0] // groups
    kk = cg * math.prod(ksize)
    parts = []
    for g in range(groups):
        a = cols[(slice(None),) * (1 + nd) + (slice(g * cg, (g + 1) * cg),)]
        a = a.reshape(n, math.prod(out_sp), kk)
        b = w[g * og:(g + 1) * og].reshape(og, kk).T
        parts.append(np.asarray(_product(em, a, b, model, fmt, dtype, None, kinds)))
    d = np.concatenate(parts, axis=-1) if groups > 1 else parts[0]   # (N, L, O)
    return np.moveaxis(d.reshape((n,) + tuple(out_sp) + (d.shape[-1],)), -1, 1)


def _geometry(x: Any, stride: Any, padding: Any,
              dilation: Any) -> tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(spatial dimensions, stride, padding, dilation) of a convolution, one entry per
    spatial dimension."""
    nd = x.dim() - 2
    st, pd, dl = (tuple(v) * (nd if len(v) == 1 else 1) for v in (stride, padding, dilation))
    return nd, st, pd, dl


def _adjoint_gemm(em: Emulate, dy: Any, w: Any, st: tuple, pd: tuple, dl: tuple,
                  groups: int, sizes: tuple, kinds: tuple[str, str]) -> np.ndarray:
    """FP32 values of the adjoint of the convolution with ``w`` (O, C/groups, *k)
    applied to ``dy`` (N, O, *out), of spatial ``sizes``: a convolution's grad_input,
    and a transposed convolution's output. It is the convolution of dy dilated by
    the stride (zeros between its entries), padded with d * (k - 1) - p, with the
    weight's channels swapped per group and its kernel flipped (`_conv_gemm`)."""
    model, fmt = em.route(_dtype_name(dy), _dtype_name(w))
    dyv, ksize = _values(dy), tuple(w.shape[2:])
    n, o = dyv.shape[:2]
    og, cg, nd = o // groups, w.shape[1], len(ksize)
    sp = dyv.shape[2:]
    dil = np.zeros((n, o) + tuple((s - 1) * t + 1 for s, t in zip(sp, st)), np.float32)
    dil[(slice(None), slice(None)) + tuple(slice(None, None, t) for t in st)] = dyv
    wv = _values(w).reshape((groups, og, cg) + ksize).swapaxes(1, 2)
    wv = wv.reshape((groups * cg, og) + ksize)[(slice(None), slice(None))
                                               + (slice(None, None, -1),) * nd]
    lo = tuple(d * (k - 1) - p for d, k, p in zip(dl, ksize, pd))
    # hi makes the result ``sizes``: the last rows no output reached get sums of zeros
    # (+0), as the rows beyond the last whole window do in torch.
    dsizes: tuple[int, ...] = dil.shape[2:]
    hi = tuple(h + d * (k - 1) - size - a for a, h, size, d, k in
               zip(lo, sizes, dsizes, dl, ksize))
    return _conv_gemm(em, dil, wv, model, fmt, _dtype_name(dy), (1,) * nd, dl, lo, hi,
                      groups, kinds)


def _weight_gemm(em: Emulate, dy: Any, x: Any, ksize: tuple, st: tuple, pd: tuple,
                 dl: tuple, groups: int, kinds: tuple[str, str]) -> np.ndarray:
    """FP32 values of a convolution's grad_weight (O, C/groups, *k), for input ``x``
    (N, C, *S) and output gradient ``dy`` (N, O, *out): per group dy_g (O/g, N*L) @
    patches_g (N*L, K), the (batch, output position) pairs in row-major order."""
    model, fmt = em.route(_dtype_name(dy), _dtype_name(x))
    dyv = _values(dy)
    n, o = dyv.shape[:2]
    cg, og, nd = x.shape[1] // groups, o // groups, len(ksize)
    cols = _patches(_values(x), ksize, st, dl, pd, pd)      # (N, *out, C, *k)
    length = n * math.prod(cols.shape[1:1 + nd])
    kk = cg * math.prod(ksize)
    parts = []
    for g in range(groups):
        a = np.moveaxis(dyv[:, g * og:(g + 1) * og], 1, -1).reshape(length, og).T
        b = cols[(slice(None),) * (1 + nd) + (slice(g * cg, (g + 1) * cg),)]
        parts.append(np.asarray(_product(em, a, b.reshape(length, kk), model, fmt,
                                         _dtype_name(dy), None, kinds)))
    return np.concatenate(parts, axis=0).reshape((o, cg) + tuple(ksize))


def _bias_sum(dy: Any) -> np.ndarray:
    """Per channel, dy's entries over (batch, position) in row-major order, added one
    after another in FP32 (the "fp32" model against ones)."""
    dyv = _values(dy)
    flat = np.moveaxis(dyv, 1, -1).reshape(-1, dyv.shape[1]).T
    with np.errstate(all="ignore"):
        return matmul(flat, np.ones((flat.shape[1], 1), np.float32), model="fp32",
                      in_fmt=_dtype_format(_dtype_name(dy)), out_fmt=FP32,
                      progress=False).reshape(dyv.shape[1])


def _convolution(em: Emulate, x: Any, w: Any, bias: Any, stride: Any, padding: Any,
                 dilation: Any, transposed: bool, output_padding: Any, groups: int, *,
                 meta: Any) -> Any:
    op = "aten.convolution"
    _check(op, x, w, bias)
    nd, st, pd, dl = _geometry(x, stride, padding, dilation)
    d: Any
    if transposed:
        # A transposed convolution (w: C_in, C_out/groups, *k) is the adjoint of the
        # convolution with w, at the output's size (output_padding included).
        d = _adjoint_gemm(em, x, w, st, pd, dl, groups, tuple(meta.shape[2:]), ("x", "w"))
    else:
        model, fmt = em.route(_dtype_name(x), _dtype_name(w))
        d = _conv_gemm(em, _values(x), _values(w), model, fmt, _dtype_name(x), st, dl,
                       pd, pd, groups)
    if bias is not None:
        with np.errstate(all="ignore"):       # the bias epilogue: one FP32 addition
            d = add(d, _values(bias).reshape((-1,) + (1,) * nd), FP32)
    return _tensor(np.asarray(d, np.float64), meta.dtype).reshape(meta.shape)


def _convolution_backward(em: Emulate, dy: Any, x: Any, w: Any, bias_sizes: Any,
                          stride: Any, padding: Any, dilation: Any, transposed: bool,
                          output_padding: Any, groups: int, output_mask: Any, *,
                          meta: Any) -> Any:
    op = "aten.convolution_backward"
    _check(op, dy, x, w)
    _, st, pd, dl = _geometry(x, stride, padding, dilation)
    ksize = tuple(w.shape[2:])
    gi = gw = gb = None
    if output_mask[0]:
        if transposed:
            # The adjoint of the adjoint: the convolution of dy with w.
            model, fmt = em.route(_dtype_name(dy), _dtype_name(w))
            d = _conv_gemm(em, _values(dy), _values(w), model, fmt, _dtype_name(dy), st,
                           dl, pd, pd, groups, ("dy", "w"))
        else:
            d = _adjoint_gemm(em, dy, w, st, pd, dl, groups, tuple(x.shape[2:]),
                              ("dy", "w"))
        gi = _tensor(np.asarray(d, np.float64), meta[0].dtype).reshape(meta[0].shape)
    if output_mask[1]:
        # A transposed convolution's weight gradient is its adjoint's with the roles
        # of input and output gradient swapped: dy is the input, x the gradient.
        d = (_weight_gemm(em, x, dy, ksize, st, pd, dl, groups, ("x", "dy")) if transposed
             else _weight_gemm(em, dy, x, ksize, st, pd, dl, groups, ("dy", "x")))
        gw = _tensor(np.asarray(d, np.float64), meta[1].dtype).reshape(meta[1].shape)
    if output_mask[2]:
        gb = _tensor(np.asarray(_bias_sum(dy), np.float64),
                     meta[2].dtype).reshape(meta[2].shape)
    return gi, gw, gb


@functools.cache
def _mode_class() -> type:
    """The TorchDispatchMode subclass (built on first use: torch is imported here)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten

    def mm(em, a, b, out_dtype=None, *, meta):
        return _run_product(em, "aten.mm", a, b, out_dtype=out_dtype, meta=meta)

    def bmm(em, a, b, out_dtype=None, *, meta):
        return _run_product(em, "aten.bmm", a, b, out_dtype=out_dtype, meta=meta)

    def addmm(em, c, a, b, beta=1, alpha=1, out_dtype=None, *, meta):
        return _run_product(em, "aten.addmm", a, b, c=c, beta=beta, alpha=alpha,
                            out_dtype=out_dtype, meta=meta)

    def baddbmm(em, c, a, b, beta=1, alpha=1, out_dtype=None, *, meta):
        return _run_product(em, "aten.baddbmm", a, b, c=c, beta=beta, alpha=alpha,
                            out_dtype=out_dtype, meta=meta)

    def mv(em, a, v, *, meta):
        return _run_product(em, "aten.mv", a, v, meta=meta)

    def addmv(em, c, a, v, beta=1, alpha=1, *, meta):
        return _run_product(em, "aten.addmv", a, v, c=c, beta=beta, alpha=alpha, meta=meta)

    def dot(em, a, b, *, meta):
        return _run_product(em, "aten.dot", a, b, meta=meta)

    handlers: dict[Any, Callable] = {
        aten.mm.default: mm, aten.mm.dtype: mm,
        aten.bmm.default: bmm, aten.bmm.dtype: bmm,
        aten.addmm.default: addmm, aten.addmm.dtype: addmm,
        aten.baddbmm.default: baddbmm, aten.baddbmm.dtype: baddbmm,
        aten.mv.default: mv, aten.addmv.default: addmv,
        aten.dot.default: dot, aten.vdot.default: dot,
    }
    refused = {aten._int_mm.default: "an integer product",
               aten.addbmm.default: "a sum of batched products",
               aten._addmm_activation.default: "a fused product and activation"}
    handlers[aten.convolution.default] = _convolution
    handlers[aten.convolution_backward.default] = _convolution_backward
    # Ops whose outputs torch itself computes and the bridge must not: products in
    # other forms. Each is refused by name rather than computed in float32.
    def overload(name: str) -> Any:
        packet, _, which = name.partition(".")
        return getattr(getattr(aten, packet), which)

    refused[aten._convolution.default] = ("a convolution below aten.convolution; call "
                                          "torch.nn.functional.conv1d/conv2d")
    # Fused CPU kernels with products inside, which the mode cannot see into.
    fast_path = "inference fast path; turn it off with " \
        "torch.backends.mha.set_fastpath_enabled(False)"
    sdpa = ("torch's fused attention kernel; wrap the call in torch.nn.attention."
            "sdpa_kernel(SDPBackend.MATH) so that its products reach the mode")
    fused = {
        "_scaled_dot_product_flash_attention_for_cpu.default": sdpa,
        "_scaled_dot_product_flash_attention_for_cpu_backward.default": sdpa,
        "_native_multi_head_attention.default": f"nn.MultiheadAttention's {fast_path}",
        "_transformer_encoder_layer_fwd.default":
            f"nn.TransformerEncoderLayer's {fast_path}",
        "mkldnn_rnn_layer.default": ("oneDNN's fused RNN layer; run the RNN under "
                                     "torch.backends.mkldnn.flags(enabled=False)"),
        "_trilinear.default": ("a bilinear form (nn.Bilinear, F.bilinear); write it "
                               "with torch.einsum, whose products reach the mode"),
        "_euclidean_dist.default": ("torch.cdist through products; pass "
                                    "compute_mode='donot_use_mm_for_euclid_dist'"),
        "_sparse_addmm.default": "a sparse product (make the operands dense with .to_dense())",
    }
    for name, why in fused.items():
        refused[overload(name)] = why
    for name in ("mm.out", "bmm.out", "addmm.out", "baddbmm.out", "mv.out", "dot.out",
                 "addmm_.default", "baddbmm_.default", "addmv_.default"):
        refused[overload(name)] = "a product written into a given tensor; call the out-of-place op"

    class _Mode(TorchDispatchMode):
        def __init__(self, em):
            super().__init__()
            self.em = em

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            handler = handlers.get(func)
            if handler is not None:
                if any(isinstance(x, torch.Tensor) and x.dtype == torch.float64
                       for x in args[:3]) and func is not aten.mm.dtype:
                    _check(str(func), *[x for x in args if isinstance(x, torch.Tensor)])
                    return func(*args, **kwargs)     # float64: torch's own, the reference
                tensors = [x for x in args if isinstance(x, torch.Tensor)]
                _check(str(func.overloadpacket), *tensors)
                meta = _meta(func, args, kwargs)
                return handler(self.em, *args, **kwargs, meta=meta)
            if func is aten._scaled_mm.default:
                _meta(func, args, kwargs)
                return _scaled_mm(self.em, *args, **kwargs)
            if func in refused:
                raise TypeError(f"lowprec.torch.emulate cannot emulate {func} "
                                f"({refused[func]})")
            return func(*args, **kwargs)

    return _Mode


def __getattr__(name: str) -> Any:
    # `compare` lives in lowprec/torchcompare.py, a layer below this module (it runs
    # `emulate`): loaded on first use of the name, never when this module is imported.
    if name == "compare":
        import importlib
        return importlib.import_module(".torchcompare", __package__).compare
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
