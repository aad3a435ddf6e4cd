"""ONNX models run on `onnx.reference` with their matrix products through lowprec's
models (``import lowprec.onnx``; the ``onnx`` extra).

`evaluator` builds an ``onnx.reference.ReferenceEvaluator`` whose ``MatMul``, ``Gemm``
and ``Conv`` compute each product by `lowprec.tensorcore.matmul` under a GPU's model
(``gpu="h100"``) or a named one (``matmul="b200"``), and whose ``QuantizeLinear`` and
``DequantizeLinear`` follow the ONNX spec's rules for the float8, float4 and e8m0 types
on lowprec's correctly rounded arithmetic. A two-operand ``Einsum`` that contracts
indices runs as a batched matrix product too, and ``ConvTranspose`` as the convolution
it equals. Ops whose products lowprec does not model (`UNMODELLED`: ``LSTM``,
``Attention``, ...) raise, naming the op. `run` runs a model once. Every other op is
onnx's own. onnx is imported only inside these functions, so that ``import lowprec``
never imports it. Nothing here computes a product in float32 or float64 on its own: a
product lowprec cannot model (integer or float64 operands without ``in_fmt``) raises.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .arith import add, div, fma, mul
from .engine.checks import check_bool
from .formats import FP32, Format, FormatLike
from .formats import format as _format
from .rounding import round as _round
from .tensorcore import Model, ModelLike, matmul, resolve_model
from .torch import GPUS, model_for

__all__ = ["run", "evaluator", "ops", "Policy", "GPUS", "UNMODELLED"]

#: NumPy / ml_dtypes dtype names -> the format they hold.
_DTYPE_FORMATS = {"float16": "fp16", "float32": "fp32", "bfloat16": "bf16",
                  "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2",
                  "float8_e4m3fnuz": "e4m3fnuz", "float8_e5m2fnuz": "e5m2fnuz",
                  "float4_e2m1fn": "fp4"}

#: The quantized types this module converts to and from (dtype name -> format); the
#: others (integers, float6) are left to onnx's own QuantizeLinear/DequantizeLinear.
_QUANTIZED = {"float8_e4m3fn": "e4m3", "float8_e4m3fnuz": "e4m3fnuz",
              "float8_e5m2": "e5m2", "float8_e5m2fnuz": "e5m2fnuz",
              "float4_e2m1fn": "fp4"}


def _gpu_model(gpu: str, fmt: Format, tf32: bool) -> tuple[Model, Format]:
    """`lowprec.torch.model_for` (torch-free) on a format: the model cuBLAS reaches on
    ``gpu`` for operands of ``fmt``, and the operand format it takes. TF32 operands
    (``in_fmt="tf32"``) are float32 products with TF32 allowed."""
    key = (fmt.name or "").lower().replace("fp8_", "")
    if key == "tf32":
        key, tf32 = "fp32", True
    return model_for(gpu, key, tf32=tf32)


@dataclass(frozen=True)
class Policy:
    """How the products of a model are computed: a GPU (`GPUS`) or a model, the
    operands' format (``in_fmt``; else their dtype's) and whether FP32 products run as
    TF32 on the GPU (``tf32``)."""

    gpu: str | None = None
    matmul: Model | None = None
    in_fmt: Format | None = None
    tf32: bool = False

    @classmethod
    def make(cls, gpu: str | None, matmul_model: ModelLike | None,
             in_fmt: FormatLike | None, tf32: bool) -> Policy:
        """The checked policy of the public functions' options."""
        check_bool("tf32", tf32)
        if (gpu is None) == (matmul_model is None):
            raise ValueError("give exactly one of gpu= (a GPU name: "
                             f"{', '.join(GPUS)}) and matmul= (a lp.MODELS name or model)")
        if gpu is not None:
            if not isinstance(gpu, str) or gpu.lower() not in GPUS:
                raise ValueError(f"unknown gpu {gpu!r}; valid: {', '.join(GPUS)}, or "
                                 "matmul= any lp.MODELS entry")
            gpu = gpu.lower()
        model = None if matmul_model is None else resolve_model(matmul_model, "matmul")
        fmt = None if in_fmt is None else _format(in_fmt)
        return cls(gpu, model, fmt, tf32)

    def product(self, a: np.ndarray, b: np.ndarray, op: str) -> np.ndarray:
        """``a @ b`` (NumPy's matmul shapes) as the policy's model computes it: the FP32
        accumulator, as float64 values."""
        fmt = self.in_fmt
        for x in (a, b):
            if x.dtype.kind != "f" and x.dtype.name not in _DTYPE_FORMATS:
                # ValueError, not TypeError: onnx's OpRun replaces a TypeError's message.
                raise ValueError(f"{op} on {x.dtype} operands: lowprec models "
                                 "floating-point products only")
        if fmt is None:
            names = {_DTYPE_FORMATS.get(x.dtype.name) for x in (a, b)}
            if len(names) != 1 or None in names:
                raise ValueError(f"{op} on {a.dtype} x {b.dtype} operands names no format "
                                 "of a GPU product; pass in_fmt= (for example 'fp32', "
                                 "'bf16') to round the operands into one")
            fmt = _format(str(names.pop()))
        model: Model | str
        if self.gpu is not None:
            model, fmt = _gpu_model(self.gpu, fmt, self.tf32)
        else:
            assert self.matmul is not None       # Policy.make gives one of the two
            model = self.matmul
        return np.asarray(matmul(a, b, model=model, in_fmt=fmt, out_fmt=FP32))


def _out_format(dtype: np.dtype) -> Format:
    name = _DTYPE_FORMATS.get(dtype.name)
    if name is None:
        raise ValueError(f"no lowprec format holds {dtype} results")
    return _format(name)


def _as_dtype(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """FP32 values rounded once, to nearest even, into ``dtype`` (cuBLAS's epilogue
    conversion), as an array of that dtype."""
    # FP32 values are float64s (a float64 graph, whose operands in_fmt= rounded).
    if dtype not in (np.float32, np.float64):
        values = np.asarray(_round(values, _out_format(dtype)))
    return np.asarray(values).astype(dtype)   # exact: the values are dtype's


def _epilogue(p: Any, alpha: float, c: Any, beta: float) -> Any:
    """cuBLAS's epilogue in FP32, as `lowprec.torch` computes it: ``alpha * p`` rounded
    to FP32, then ``beta * c`` added by one FMA rounded once (one addition when
    ``beta == 1``). Without c, or with ``beta == 0`` (BLAS does not read c, NaN
    included), ``alpha * p`` alone."""
    t = p if alpha == 1 else mul(alpha, p, FP32)
    if c is None or beta == 0:
        return t
    c = np.asarray(c, np.float64)       # exact: c is a value of a float type
    if beta == 1:
        return add(t, c, FP32)
    return fma(beta, c, t, FP32)


# -- Conv as an implicit GEMM ---------------------------------------------------------

def _conv_pads(shape, kernel, strides, dilations, pads, auto_pad):
    """(begin, end) padding of each spatial axis, as ONNX's Conv defines it."""
    n = len(shape)
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = []
        for size, k, s, d in zip(shape, kernel, strides, dilations):
            o = -(-size // s)
            total = max(0, (o - 1) * s + (k - 1) * d + 1 - size)
            small = total // 2
            out.append((small, total - small) if auto_pad == "SAME_UPPER"
                       else (total - small, small))
        return out
    if auto_pad == "VALID":
        return [(0, 0)] * n
    if auto_pad not in ("NOTSET", "", None):
        raise ValueError(f"Conv: unknown auto_pad {auto_pad!r}")
    pads = list(pads) if pads is not None else [0] * (2 * n)
    return list(zip(pads[:n], pads[n:]))


def im2col(x: np.ndarray, kernel: Sequence[int], strides: Sequence[int],
           dilations: Sequence[int],
           pads: Sequence[tuple[int, int]]) -> tuple[np.ndarray, list[int]]:
    """The patches of ``x`` (N, C, *spatial) as (N, C, prod(kernel), prod(out)), and the
    output's spatial shape ``out``. K runs
    over the kernel's offsets in C order for each channel, the order of ``W``'s
    memory (M, C/group, *kernel). Padding is +0 in ``x``'s dtype."""
    n_sp = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [tuple(p) for p in pads])
    out = [(xp.shape[2 + i] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1
           for i in range(n_sp)]
    if min(out, default=1) < 1:
        raise ValueError(f"Conv: the kernel {tuple(kernel)} (dilations {tuple(dilations)}) "
                         f"is larger than the padded input {xp.shape[2:]}")
    cols = []
    for offset in np.ndindex(*kernel):
        index = tuple(slice(o * d, o * d + s * (n - 1) + 1, s)
                      for o, d, s, n in zip(offset, dilations, strides, out))
        cols.append(xp[(slice(None), slice(None)) + index])
    stacked = np.stack(cols, axis=2)
    return stacked.reshape(x.shape[0], x.shape[1], len(cols), int(np.prod(out))), out


def conv(policy: Policy, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None, *,
         auto_pad: Any = "NOTSET", dilations: Sequence[int] | None = None, group: int = 1,
         kernel_shape: Sequence[int] | None = None, pads: Sequence[int] | None = None,
         strides: Sequence[int] | None = None) -> np.ndarray:
    """ONNX's Conv as an implicit GEMM: per group, the patches (N, P, K) times
    ``W`` reshaped to (M/group, K) transposed, K in the order (channel, kernel offsets in
    C order); the bias added to the FP32 accumulator (`_epilogue`), then rounded once
    into ``x``'s dtype."""
    n_sp = x.ndim - 2
    kernel = list(kernel_shape) if kernel_shape is not None else list(w.shape[2:])
    if list(w.shape[2:]) != kernel:
        raise ValueError(f"Conv: kernel_shape {kernel} is not W's {w.shape[2:]}")
    strides = list(strides) if strides is not None else [1] * n_sp
    dilations = list(dilations) if dilations is not None else [1] * n_sp
    pad = _conv_pads(x.shape[2:], kernel, strides, dilations, pads, auto_pad)
    m, cg = w.shape[0], w.shape[1]
    if x.shape[1] != cg * group or m % group:
        raise ValueError(f"Conv: X has {x.shape[1]} channels, W {w.shape} and group {group}")
    cols, out = im2col(x, kernel, strides, dilations, pad)
    mg = m // group
    parts = []
    for g in range(group):
        a = cols[:, g * cg:(g + 1) * cg]                        # (N, Cg, k, P)
        a = a.reshape(x.shape[0], -1, a.shape[-1]).transpose(0, 2, 1)   # (N, P, K)
        wg = w[g * mg:(g + 1) * mg].reshape(mg, -1).T            # (K, Mg)
        parts.append(policy.product(a, wg, "Conv"))              # (N, P, Mg)
    y = np.concatenate(parts, axis=2)
    if bias is not None:
        y = _epilogue(y, 1.0, bias, 1.0)
    y = np.moveaxis(np.asarray(y), 2, 1).reshape(x.shape[0], m, *out)
    return _as_dtype(y, x.dtype)


def conv_transpose(policy: Policy, x: np.ndarray, w: np.ndarray,
                   bias: np.ndarray | None = None, *, auto_pad: Any = "NOTSET",
                   dilations: Sequence[int] | None = None, group: int = 1,
                   kernel_shape: Sequence[int] | None = None,
                   output_padding: Sequence[int] | None = None,
                   output_shape: Sequence[int] | None = None,
                   pads: Sequence[int] | None = None,
                   strides: Sequence[int] | None = None) -> np.ndarray:
    """ONNX's ConvTranspose as the convolution it equals, run by `conv`.

    ``x`` is dilated by the strides (zeros between its entries, which enter as
    products of 0), padded with ``d * (k - 1) - pad`` (``output_padding`` added at
    the end; cropped where negative) and convolved at stride 1 with ``W``'s two
    channel axes swapped per group and its kernel flipped. K runs over the input
    channel, then the flipped kernel's offsets in C order. ``output_shape``, where
    given, sets the padding as the spec says and ``pads`` is ignored.
    """
    n_sp = x.ndim - 2
    kernel = list(kernel_shape) if kernel_shape is not None else list(w.shape[2:])
    if list(w.shape[2:]) != kernel:
        raise ValueError(f"ConvTranspose: kernel_shape {kernel} is not W's {w.shape[2:]}")
    if x.shape[1] != w.shape[0] or x.shape[1] % group:
        raise ValueError(f"ConvTranspose: X has {x.shape[1]} channels, W {w.shape} and "
                         f"group {group}")
    st = list(strides) if strides is not None else [1] * n_sp
    dl = list(dilations) if dilations is not None else [1] * n_sp
    op = list(output_padding) if output_padding is not None else [0] * n_sp
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    full = [s * (n - 1) + o + (k - 1) * d + 1
            for s, n, o, k, d in zip(st, x.shape[2:], op, kernel, dl)]
    if output_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        want = (list(output_shape)[-n_sp:] if output_shape is not None
                else [n * s for n, s in zip(x.shape[2:], st)])
        total = [f - o for f, o in zip(full, want)]
        if min(total) < 0:
            raise ValueError(f"ConvTranspose: output_shape {want} is larger than {full}")
        small = [t // 2 for t in total]
        begin = small if auto_pad == "SAME_UPPER" else [t - h for t, h in zip(total, small)]
        pad = [(b, t - b) for b, t in zip(begin, total)]
    else:
        p = list(pads) if pads is not None else [0] * (2 * n_sp)
        pad = list(zip(p[:n_sp], p[n_sp:]))
    dil = np.zeros(x.shape[:2] + tuple(s * (n - 1) + 1 for s, n in zip(st, x.shape[2:])),
                   x.dtype)
    dil[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in st)] = x
    lo = [d * (k - 1) - b for d, k, (b, _) in zip(dl, kernel, pad)]
    hi = [d * (k - 1) - e + o for d, k, (_, e), o in zip(dl, kernel, pad, op)]
    dil = np.pad(dil, [(0, 0), (0, 0)] + [(max(a, 0), max(b, 0)) for a, b in zip(lo, hi)])
    dil = dil[(slice(None), slice(None)) + tuple(
        slice(max(-a, 0), dil.shape[2 + i] - max(-b, 0)) for i, (a, b) in
        enumerate(zip(lo, hi)))]
    cg, mg = x.shape[1] // group, w.shape[1]
    wt = w.reshape((group, cg, mg) + tuple(kernel)).swapaxes(1, 2)
    wt = wt.reshape((group * mg, cg) + tuple(kernel))[
        (slice(None), slice(None)) + (slice(None, None, -1),) * n_sp]
    return conv(policy, dil, wt, bias, dilations=dl, group=group)


# -- QuantizeLinear / DequantizeLinear -------------------------------------------------

def _scale_like(scale: np.ndarray, shape: tuple[int, ...], axis: int, block_size: int,
                op: str) -> np.ndarray:
    """A scale (or zero point) broadcast to ``shape`` as the spec's three granularities
    say: a scalar per tensor, a 1-D tensor along ``axis``, or blocks of ``block_size``
    along ``axis``."""
    scale = np.asarray(scale)
    if scale.size == 1 and not block_size:
        return scale.reshape(())
    r = len(shape)
    if not -r <= axis < r:
        raise ValueError(f"{op}: axis {axis} is outside [-{r}, {r - 1}]")
    axis %= r
    if not block_size:
        if scale.ndim != 1 or scale.size != shape[axis]:
            raise ValueError(f"{op}: a per-axis scale has {shape[axis]} elements (axis "
                             f"{axis} of {shape}), got shape {scale.shape}")
        dims = [1] * r
        dims[axis] = scale.size
        return scale.reshape(dims)
    if block_size < 0:
        raise ValueError(f"{op}: block_size must be positive, got {block_size}")
    want = list(shape)
    want[axis] = scale.shape[axis] if scale.ndim == r else -1
    if scale.ndim != r or list(scale.shape) != want:
        raise ValueError(f"{op}: a blocked scale has the input's shape {shape} but along "
                         f"axis {axis}; got {scale.shape}")
    d, s = shape[axis], scale.shape[axis]
    low, high = -(-d // s), (-(-d // (s - 1)) - 1 if s > 1 else math.inf)
    if not low <= block_size <= high:
        raise ValueError(f"{op}: block_size {block_size} is outside [{low}, {high}] for "
                         f"{d} elements in {s} blocks")
    return np.repeat(scale, block_size, axis=axis).take(range(d), axis=axis)


def _no_zero_point(zp: Any, op: str) -> None:
    if zp is not None and np.any(np.asarray(zp, np.float64) != 0):
        raise ValueError(f"{op}: a nonzero zero point of a float type is not supported "
                         "(the spec leaves the precision of its addition unstated)")


def _check_values(x: np.ndarray, op: str) -> np.ndarray:
    if x.dtype.kind != "f" and x.dtype.name not in _DTYPE_FORMATS:
        raise ValueError(f"{op}: {x.dtype} input is not floating point")
    return x.astype(np.float64)          # exact: every float type widens to float64


def saturate_cast(q: np.ndarray, fmt: FormatLike, saturate: bool) -> np.ndarray:
    """Values rounded into a float8 or float4 format by ONNX's Cast tables: to nearest
    even; with ``saturate``, ±inf and every result past ±max give ±max; without it they
    give inf (E5M2) or NaN; fnuz formats give +0 for -0; float4 has no inf or NaN, so
    every overflow and ±inf saturate and NaN gives 6 (the spec's float4 table)."""
    fmt = _format(fmt)
    if fmt.name == "FP4_E2M1":
        saturate = True
    r = np.asarray(_round(q, fmt, saturate=saturate))
    if saturate:
        # lp.round keeps ±inf in a format with inf (E5M2); the spec's table sends it to max.
        r = np.where(np.isinf(r), np.copysign(fmt.max, r), r)
    if fmt.name == "FP4_E2M1":
        r = np.where(np.isnan(r), fmt.max, r)
    return r


def quantize_linear(x: np.ndarray, y_scale: np.ndarray, y_zero_point: Any = None, *,
                    axis: int = 1, saturate: int = 1, block_size: int = 0,
                    target: str, precision_dtype: np.dtype | None = None) -> np.ndarray:
    """``saturate_cast(fl(x / y_scale))`` into the type named ``target`` (a dtype name
    of `_QUANTIZED`): the division correctly rounded in the precision's format (the
    scale's dtype, or ``precision_dtype``; x's own for float8e8m0 scales)."""
    op = "QuantizeLinear"
    xv = _check_values(np.asarray(x), op)
    y_scale = np.asarray(y_scale)
    _no_zero_point(y_zero_point, op)
    if precision_dtype is None:
        precision_dtype = y_scale.dtype if y_scale.dtype.name != "float8_e8m0fnu" \
            else np.asarray(x).dtype
    prec = _out_format(np.dtype(precision_dtype))
    scale = _scale_like(y_scale.astype(np.float64), xv.shape, axis, block_size, op)
    q = np.asarray(div(xv, np.broadcast_to(scale, xv.shape), prec))
    return saturate_cast(q, _QUANTIZED[target], bool(saturate))


def dequantize_linear(x: np.ndarray, x_scale: np.ndarray, x_zero_point: Any = None, *,
                      axis: int = 1, block_size: int = 0,
                      out_dtype: np.dtype) -> np.ndarray:
    """``x * x_scale`` correctly rounded into ``out_dtype`` (the spec: the output type
    is the multiplication's precision)."""
    op = "DequantizeLinear"
    xv = np.asarray(x).astype(np.float64)      # exact: float8/float4 widen exactly
    _no_zero_point(x_zero_point, op)
    scale = _scale_like(np.asarray(x_scale).astype(np.float64), xv.shape, axis, block_size,
                        op)
    y = mul(xv, np.broadcast_to(scale, xv.shape), _out_format(out_dtype))
    return np.asarray(y).astype(out_dtype)


# -- Einsum as a batched matrix product ------------------------------------------------

#: ONNX ops with floating products inside that lowprec does not model: each raises.
#: The ai.onnx.ml ones (skl2onnx writes linear models and SVMs as these) last.
_ML_OPS = ("LinearRegressor", "LinearClassifier", "SVMRegressor", "SVMClassifier")
UNMODELLED = ("DeformConv", "LSTM", "GRU", "RNN", "Attention",
              "LinearAttention", "CausalConvWithState") + _ML_OPS


def _einsum_terms(equation: str, ranks: Sequence[int]) -> tuple[list[str], str]:
    """The operands' subscripts and the output's, with ``...`` spelled as letters the
    equation does not use (right-aligned, as NumPy broadcasts), and the implicit
    output (each letter used once, in alphabetical order) made explicit."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"Einsum {equation!r} names {len(terms)} operands, got "
                         f"{len(ranks)}")
    spare = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
             if c not in eq]
    width = max((r - len(t.replace("...", "")) for t, r in zip(terms, ranks)
                 if "..." in t), default=0)
    fill = "".join(spare[:width])
    terms = [t.replace("...", fill[width - (r - len(t) + 3):]) if "..." in t else t
             for t, r in zip(terms, ranks)]
    for t, r in zip(terms, ranks):
        if len(t) != r or not t.isalpha():
            raise ValueError(f"Einsum {equation!r}: subscripts {t!r} do not fit an "
                             f"operand of rank {r}")
    if arrow:
        out = out.replace("...", fill)
    else:
        letters = "".join(terms)
        out = fill + "".join(sorted(c for c in set(letters) - set(fill)
                                    if letters.count(c) == 1))
    return terms, out


def einsum(policy: Policy, equation: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A two-operand einsum as one batched product ``(batch, M, K) @ (batch, K, N)``.

    Indices in both operands and the output are batch indices (broadcast as NumPy
    does), indices in both and not in the output are contracted, and the others are
    rows (A) or columns (B). K runs over the contracted indices in the order A's
    subscripts list them, row-major. An einsum that is not such a product raises:
    a repeated index in one operand (a diagonal) or an index summed within one
    operand (a reduction, not a product).
    """
    (ta, tb), out = _einsum_terms(equation, (a.ndim, b.ndim))
    for t in (ta, tb):
        if len(set(t)) != len(t):
            raise ValueError(f"Einsum {equation!r}: an index repeated in one operand "
                             "(a diagonal) is not a matrix product lowprec models")
    alone = (set(ta) ^ set(tb)) - set(out)
    if alone:
        raise ValueError(f"Einsum {equation!r}: index {''.join(sorted(alone))} is summed "
                         "within one operand, a reduction lowprec does not model")
    if len(set(out)) != len(out) or not set(out) <= set(ta) | set(tb):
        raise ValueError(f"Einsum {equation!r}: the output's subscripts {out!r} must be "
                         "distinct indices of the operands")
    batch = [c for c in out if c in ta and c in tb]
    contr = [c for c in ta if c in tb and c not in out]
    rows = [c for c in ta if c not in tb]
    cols = [c for c in tb if c not in ta]
    dims = {c: n for c, n in zip(ta, a.shape)}
    for c, n in zip(tb, b.shape):
        if c in dims and dims[c] != n and not (c in batch and 1 in (dims[c], n)):
            raise ValueError(f"Einsum {equation!r}: index {c} has sizes {dims[c]} and {n}")
        dims[c] = n if dims.get(c, 1) == 1 else dims[c]
    x = np.transpose(a, [ta.index(c) for c in batch + rows + contr])
    y = np.transpose(b, [tb.index(c) for c in batch + contr + cols])
    bshape = tuple(dims[c] for c in batch)     # size-1 batch indices broadcast
    x = np.broadcast_to(x, bshape + x.shape[len(batch):])
    y = np.broadcast_to(y, bshape + y.shape[len(batch):])
    m, k, n = (math.prod(dims[c] for c in g) for g in (rows, contr, cols))
    p = policy.product(x.reshape(bshape + (m, k)), y.reshape(bshape + (k, n)), "Einsum")
    p = p.reshape(bshape + tuple(dims[c] for c in rows + cols))
    return np.transpose(p, [(batch + rows + cols).index(c) for c in out])


def _refusal(name: str) -> type:
    """An op class of ``name`` that raises, naming the op: its products are not
    modelled, and onnx's own would compute them in float32 or float64."""
    from onnx.reference.op_run import OpRun

    ml = name in _ML_OPS
    way = ("run the fitted estimator on lp.array_namespace instead (docs/your-model.md)"
           if ml else "rewrite it as MatMul, Gemm or Conv")

    def _run(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise ValueError(f"{name}: lowprec.onnx does not model this op's matrix "
                         "products, and onnx's own would compute them in float32 or "
                         f"float64; {way}, or run the model without lowprec.onnx")

    return type(name, (OpRun,), {"op_domain": "ai.onnx.ml" if ml else "", "_run": _run})


# -- the ops and the evaluator ---------------------------------------------------------

def _dtype_of(tensor_type: int) -> np.dtype:
    from onnx.helper import tensor_dtype_to_np_dtype
    return np.dtype(tensor_dtype_to_np_dtype(tensor_type))


def ops(*, gpu: str | None = None, matmul: ModelLike | None = None,
        in_fmt: FormatLike | None = None, tf32: bool = False) -> list[type]:
    """The ``new_ops`` classes of ``onnx.reference.ReferenceEvaluator`` under one
    policy: ``MatMul``, ``Gemm``, ``Conv``, ``ConvTranspose``, ``Einsum``,
    ``QuantizeLinear``, ``DequantizeLinear``, and a class raising `ValueError` for each
    op of `UNMODELLED`.

    Examples
    --------
    >>> import lowprec.onnx
    >>> [c.__name__ for c in lowprec.onnx.ops(gpu="h100")][:5]
    ['MatMul', 'Gemm', 'Conv', 'ConvTranspose', 'Einsum']
    """
    from onnx.reference.op_run import OpRun
    from onnx.reference.ops.op_dequantize_linear import DequantizeLinear_25
    from onnx.reference.ops.op_einsum import Einsum as OnnxEinsum
    from onnx.reference.ops.op_quantize_linear import QuantizeLinear_25

    policy = Policy.make(gpu, matmul, in_fmt, tf32)

    class MatMul(OpRun):
        op_domain = ""

        def _run(self, a, b):
            a, b = np.asarray(a), np.asarray(b)
            return (_as_dtype(policy.product(a, b, "MatMul"), a.dtype),)

    class Gemm(OpRun):
        op_domain = ""

        def _run(self, a, b, c=None, alpha=1.0, beta=1.0, transA=0, transB=0):
            a, b = np.asarray(a), np.asarray(b)
            if a.ndim != 2 or b.ndim != 2:
                raise ValueError(f"Gemm takes 2-D A and B, got {a.shape} and {b.shape}")
            a, b = (a.T if transA else a), (b.T if transB else b)
            p = policy.product(a, b, "Gemm")
            if c is not None:
                c = np.broadcast_to(np.asarray(c), p.shape)   # unidirectional
            return (_as_dtype(np.asarray(_epilogue(p, alpha, c, beta)), a.dtype),)

    class Conv(OpRun):
        op_domain = ""

        def _run(self, x, w, b=None, auto_pad="NOTSET", dilations=None, group=1,
                 kernel_shape=None, pads=None, strides=None):
            return (conv(policy, np.asarray(x), np.asarray(w), b, auto_pad=auto_pad,
                         dilations=dilations, group=group, kernel_shape=kernel_shape,
                         pads=pads, strides=strides),)

    class QuantizeLinear(QuantizeLinear_25):
        op_domain = ""

        def _run(self, x, y_scale, y_zero_point=None, axis=1, saturate=1, block_size=0,
                 output_dtype=0, precision=0):
            target = (np.asarray(y_zero_point).dtype if y_zero_point is not None
                      else _dtype_of(output_dtype) if output_dtype else np.dtype(np.uint8))
            if target.name not in _QUANTIZED:
                return super()._run(x, y_scale, y_zero_point, axis=axis, saturate=saturate,
                                    block_size=block_size, output_dtype=output_dtype or None,
                                    precision=precision or None)
            q = quantize_linear(x, y_scale, y_zero_point, axis=axis, saturate=saturate,
                                block_size=block_size, target=target.name,
                                precision_dtype=_dtype_of(precision) if precision else None)
            return (q.astype(target),)

    class ConvTranspose(OpRun):
        op_domain = ""

        def _run(self, x, w, b=None, auto_pad="NOTSET", dilations=None, group=1,
                 kernel_shape=None, output_padding=None, output_shape=None, pads=None,
                 strides=None):
            return (conv_transpose(policy, np.asarray(x), np.asarray(w), b,
                                   auto_pad=auto_pad, dilations=dilations, group=group,
                                   kernel_shape=kernel_shape, output_padding=output_padding,
                                   output_shape=output_shape, pads=pads, strides=strides),)

    class Einsum(OnnxEinsum):
        op_domain = ""

        def _run(self, *inputs, equation=None):
            arrays = [np.asarray(x) for x in inputs]
            eq = equation.decode() if isinstance(equation, bytes) else str(equation)
            if len(arrays) == 1:
                (term,), out = _einsum_terms(eq, (arrays[0].ndim,))
                if sorted(term) == sorted(out):      # a permutation: exact, onnx's own
                    return super()._run(*inputs, equation=equation)
            if len(arrays) != 2:
                raise ValueError(f"Einsum {eq!r} on {len(arrays)} operands: lowprec models "
                                 "two-operand einsums (matrix products) only")
            return (_as_dtype(einsum(policy, eq, *arrays), arrays[0].dtype),)

    class DequantizeLinear(DequantizeLinear_25):
        op_domain = ""

        def _run(self, x, x_scale, x_zero_point=None, axis=1, block_size=0, output_dtype=0):
            x = np.asarray(x)
            if x.dtype.name not in _QUANTIZED:
                return super()._run(x, x_scale, x_zero_point, axis=axis,
                                    block_size=block_size, output_dtype=output_dtype or None)
            scale = np.asarray(x_scale)
            if output_dtype:
                out = _dtype_of(output_dtype)
            elif scale.dtype.name == "float8_e8m0fnu":
                raise ValueError("DequantizeLinear with float8e8m0 scales needs "
                                 "output_dtype (float, float16 or bfloat16)")
            else:
                out = scale.dtype
            return (dequantize_linear(x, scale, x_zero_point, axis=axis,
                                      block_size=block_size, out_dtype=out),)

    return [MatMul, Gemm, Conv, ConvTranspose, Einsum, QuantizeLinear, DequantizeLinear] + [
        _refusal(name) for name in UNMODELLED]


def evaluator(model: Any, *, gpu: str | None = None, matmul: ModelLike | None = None,
              in_fmt: FormatLike | None = None, tf32: bool = False, **kwargs: Any) -> Any:
    """An ``onnx.reference.ReferenceEvaluator`` of ``model`` (a ModelProto or a path)
    whose products run through lowprec.

    Parameters
    ----------
    model : onnx.ModelProto or str
        The model.
    gpu : str, optional
        A GPU of `GPUS`: each product takes the model torch/cuBLAS reaches on it for
        the operands' format. FP16 and BF16 (and FP8) go to its Tensor Cores; float32
        is plain FP32 (the ``"fp32"`` model) unless ``tf32``.
    matmul : str or model, optional
        Any `lowprec.MODELS` entry or model, for every product, instead of ``gpu``.
    in_fmt : Format or str, optional
        Round every product's operands into this format (to nearest even) first: a
        float32 model with ``in_fmt="bf16"`` runs its products as BF16 products. The
        result keeps the graph's type.
    tf32 : bool
        With ``gpu``, run float32 products as TF32 (torch's ``allow_tf32``).
    **kwargs
        Passed to ``ReferenceEvaluator`` (``verbose``, ``functions``, ...).

    Examples
    --------
    >>> import numpy as np
    >>> from onnx import TensorProto, helper
    >>> import lowprec.onnx
    >>> g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "g",
    ...     [helper.make_tensor_value_info(n, TensorProto.FLOAT16, None) for n in "ab"],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)])
    >>> sess = lowprec.onnx.evaluator(helper.make_model(g), gpu="h100")
    >>> a = np.array([[1.0, 2.0**-11]], np.float16)
    >>> sess.run(None, {"a": a, "b": np.ones((2, 1), np.float16)})[0].dtype
    dtype('float16')
    """
    from onnx.reference import ReferenceEvaluator
    return ReferenceEvaluator(model, new_ops=ops(gpu=gpu, matmul=matmul, in_fmt=in_fmt,
                                                 tf32=tf32), **kwargs)


def run(model: Any, inputs: Mapping[str, Any] | Sequence[Any] | np.ndarray, *,
        gpu: str | None = None,
        matmul: ModelLike | None = None, in_fmt: FormatLike | None = None,
        tf32: bool = False) -> list[np.ndarray]:
    """Run ``model`` once on ``inputs`` (a dict by input name, a sequence in the
    graph's input order, or one array for a graph of one input) under `evaluator`'s
    options: the list of outputs.

    Examples
    --------
    >>> import numpy as np
    >>> from onnx import TensorProto, helper
    >>> import lowprec.onnx
    >>> g = helper.make_graph([helper.make_node("Gemm", ["a", "b"], ["y"], alpha=0.5)],
    ...     "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in "ab"],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    >>> a = np.array([[1.0, 2.0]], np.float32)
    >>> lowprec.onnx.run(helper.make_model(g), [a, a.T], matmul="exact")
    [array([[2.5]], dtype=float32)]
    """
    sess = evaluator(model, gpu=gpu, matmul=matmul, in_fmt=in_fmt, tf32=tf32)
    if isinstance(inputs, Mapping):
        feeds = dict(inputs)
    elif isinstance(inputs, np.ndarray):
        # One array is the one input, whole (not its rows, as a sequence would be).
        if len(sess.input_names) != 1:
            raise ValueError(f"the model takes {len(sess.input_names)} inputs "
                             f"({', '.join(sess.input_names)}): pass a list of arrays "
                             "or a dict by name, not one array")
        feeds = {sess.input_names[0]: inputs}
    else:
        inputs = list(inputs)
        if len(inputs) != len(sess.input_names):
            raise ValueError(f"the model takes {len(sess.input_names)} inputs "
                             f"({', '.join(sess.input_names)}), got {len(inputs)}")
        feeds = dict(zip(sess.input_names, inputs))
    return list(sess.run(None, feeds))
