"""Scaled low-precision matrix products in training: FP8 delayed scaling, MXFP8, NVFP4.

A *recipe* (`DelayedScaling`, `BlockScaling`) says how the operands of a linear
layer's three matrix products (forward ``x @ W``, the data gradient ``dy @ W.T``, the
weight gradient ``x.T @ dy``) are quantized before they are multiplied, as
Transformer Engine's recipes do; `Policy.operands` holds one. A recipe's
`~DelayedScaling.quantizer` makes the per-layer state that `lowprec.nn.Linear`
calls (``forward``, ``backward``) and that counts what the quantization did (blocks
whose largest value was clamped, nonzero values flushed to zero). This module never
rounds a value outside the formats it names: the quantized operands are values of
FP8 or of a block-scaled scheme, their products run through `lp.matmul` or
`lowprec.mx.matmul`, and every scale is an FP32 number.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from .. import mx
from ..bits import encode
from ..engine.checks import as_generator, check_choice, check_int
from ..formats import E8M0, FP8_E4M3, FP8_E5M2, FP32, Format
from ..rounding import round as _round
from ..status import quiet
from ..tensorcore import Model, resolve_model
from ..tensorcore.instructions import MatrixUnit
from ..tensorcore.models import Accumulating
from ..tensors import Tensor, matmul, tensor
from ..types import Mode

__all__ = ["DelayedScaling", "BlockScaling", "MXFP8", "NVFP4", "KINDS", "fractions"]

#: The operands a linear layer quantizes: its input (activations), its weight, and the
#: gradient of its output.
KINDS = ("x", "w", "dy")

_FP32_MAX = float(np.finfo(np.float32).max)

_FP8_FORMATS = {"e4m3": (FP8_E4M3, FP8_E4M3), "hybrid": (FP8_E4M3, FP8_E5M2)}

#: The largest ``DelayedScaling.margin``: beyond it fl32(fp8_max / amax) / 2**margin,
#: at most FP32's max (below 2**128), is below 2**-150 and rounds to 0 in FP32 for
#: every amax, so the scale could never change.
MAX_MARGIN = 277

#: The longest ``DelayedScaling.history`` (Transformer Engine's default is 1024): each
#: quantizer keeps one history per operand kind and takes its maximum every step.
MAX_HISTORY = 2**16

#: The `lowprec.mx` schemes a block-scaled instruction model multiplies.
_MODELLED = ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp4", "nvfp4")


def _fl32(v):
    """A float rounded to FP32 (nearest even), quietly: a scale's arithmetic."""
    return float(quiet(_round, v, FP32))


class _Counts:
    """What the quantizations of one layer did since the last `take`, per kind: blocks,
    blocks clipped, elements, elements clipped, nonzero elements, nonzero flushed."""

    def __init__(self):
        self.c = {k: np.zeros(6, dtype=np.int64) for k in KINDS}

    def add(self, kind, totals):
        """Count one quantization of ``kind`` by its six totals, in the order above."""
        self.c[kind] += totals

    def take(self):
        """The counts since the last call (and start again from zero)."""
        c, self.c = self.c, {k: np.zeros(6, dtype=np.int64) for k in KINDS}
        return c


def fractions(counts: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """Per kind: ``blocks_clipped`` (the fraction of blocks, or of tensors under
    per-tensor scaling, holding a value beyond the largest their scale represents,
    clamped to it), ``clipped`` (the fraction of values so clamped) and ``flushed``
    (the fraction of the nonzero values quantized to zero). NaN where a kind was not
    quantized."""
    def frac(a, b):
        return float(a / b) if b else float("nan")
    return {k: {"blocks_clipped": frac(c[1], c[0]), "clipped": frac(c[3], c[2]),
                "flushed": frac(c[5], c[4])} for k, c in counts.items()}


# -- FP8 with per-tensor delayed scaling ----------------------------------------------------

@dataclass(frozen=True)
class DelayedScaling:
    """FP8 with one FP32 scale per tensor, taken from a history of amaxes
    (Transformer Engine's ``DelayedScaling`` recipe, its defaults).

    Parameters
    ----------
    fp8_format : {"hybrid", "e4m3"}
        ``"hybrid"``: activations and weights in E4M3, gradients in E5M2; ``"e4m3"``:
        E4M3 throughout.
    margin : int
        The scale is ``fp8_max / amax / 2**margin``; from 0 to `MAX_MARGIN` (277: a
        larger margin would make every scale 0 in FP32).
    history : int
        The length of each tensor's amax history, from 1 to `MAX_HISTORY` (65536;
        each step takes the maximum of the whole history).
    algorithm : {"max", "most_recent"}
        The amax a scale is computed from: the largest of the history, or the last.

    Notes
    -----
    Per layer and per operand (``x``, ``w``, ``dy``): the scale of a step is computed
    from the amaxes of the *earlier* steps (the history starts as zeros, so the first
    step's scale is 1), in FP32: ``scale = fl32(fl32(fp8_max / amax) / 2**margin)``,
    FP32's largest finite value where that overflows (as Transformer Engine clamps a
    tiny amax's scale), kept unchanged when the amax is 0 or not finite (NaNs in the
    history are ignored, as ``fmaxf`` ignores them) or when the scale would be 0. An
    operand is quantized as ``fp8(fl32(v * scale))`` with saturation (finite values
    beyond FP8's max are clamped; an infinite value becomes 448 in E4M3, which has no
    inf, and stays inf in E5M2), and its amax ``max |v|`` enters the history after the
    step. A product of two quantized operands runs through `lp.matmul` under the
    context's model (E4M3 x E5M2 needs a model that takes the pair: the accumulation
    models ``"exact"``, ``"fp32"``, ``"fp16"``, or an instruction model with a mixed
    FP8 instruction such as ``"h100/wgmma"``; `check_model`), and its FP32 result is multiplied
    once in FP32 by ``fl32(scale_inv_a * scale_inv_b)`` (``scale_inv = fl32(1 /
    scale)``), then the bias is added in FP32: cuBLASLt's FP8 GEMM with its A and B
    scales and a bias epilogue (its internal order of the two scale multiplications
    is not documented; this takes their product first). The quantized input and
    weight of the forward pass are the ones the backward pass uses, as Transformer
    Engine saves them. Source: Transformer Engine's documentation, "FP8 Delayed
    Scaling", and ``transformer_engine.common.recipe.DelayedScaling`` (margin 0,
    HYBRID, amax_history_len 1024, amax_compute_algo "max").

    Examples
    --------
    >>> import lowprec as lp
    >>> r = lp.amp.DelayedScaling()
    >>> r.formats
    {'x': lp.FP8_E4M3, 'w': lp.FP8_E4M3, 'dy': lp.FP8_E5M2}
    >>> r.scale([0.0, 3.5, 2.0]), r.scale([0.0])       # 448 / 3.5; no amax yet: 1
    (128.0, 1.0)
    """

    fp8_format: str = "hybrid"
    margin: int = 0
    history: int = 1024
    algorithm: str = "max"

    def __post_init__(self) -> None:
        check_choice("fp8_format", self.fp8_format, tuple(_FP8_FORMATS))
        if check_int("margin", self.margin, minimum=0) > MAX_MARGIN:
            raise ValueError(f"margin must be at most {MAX_MARGIN} (fl32(fp8_max / amax) / "
                             f"2**margin is then 0 in FP32 for every amax), got {self.margin!r}")
        if check_int("history", self.history, minimum=1) > MAX_HISTORY:
            raise ValueError(f"history must be at most {MAX_HISTORY} (Transformer Engine's "
                             f"default is 1024), got {self.history!r}")
        check_choice("algorithm", self.algorithm, ("max", "most_recent"))

    @property
    def formats(self) -> dict[str, Format]:
        """The FP8 format of each operand kind."""
        fwd, bwd = _FP8_FORMATS[self.fp8_format]
        return {"x": fwd, "w": fwd, "dy": bwd}

    def scale(self, history: list[float], previous: float = 1.0, kind: str = "x") -> float:
        """The scale the recipe takes from an amax ``history`` (oldest first) for an
        operand of ``kind``, and ``previous`` when its amax is 0, NaN or infinite.

        Examples
        --------
        >>> import lowprec as lp
        >>> r = lp.amp.DelayedScaling(margin=1)
        >>> r.scale([2.0, float("nan")]), r.scale([2.0], kind="dy")   # 448/2/2, 57344/2/2
        (112.0, 14336.0)
        >>> r.scale([1e-40])                       # 448 / 1e-40 overflows: FP32's max
        3.4028234663852886e+38
        """
        fmt = self.formats[check_choice("kind", kind, KINDS)]
        values = np.asarray(history, dtype=np.float64).reshape(-1)
        if self.algorithm == "max":
            values = values[~np.isnan(values)]
            amax = float(values.max()) if values.size else float("nan")
        else:
            amax = float(values[-1]) if values.size else float("nan")
        return mx.amax_scale(amax, fmt, margin=self.margin, previous=previous)

    def check_model(self, model: str | Model) -> None:
        """`ValueError` unless the matmul ``model`` (a name or model of `lp.MODELS`)
        multiplies this recipe's operand formats as they are: E4M3, and with HYBRID
        E5M2 x E4M3, without promoting them to another format's instruction."""
        spec = resolve_model(model, "matmul")
        fwd, bwd = _FP8_FORMATS[self.fp8_format]
        try:
            spec.for_format(fwd)
            spec.for_format(bwd)
        except ValueError as e:
            raise ValueError(f"the matmul model cannot multiply the FP8 operands of "
                             f"{self!r}: {e}") from None
        if fwd != bwd and not isinstance(spec, Accumulating) and not (
                isinstance(spec, MatrixUnit) and spec.mixed(fwd, bwd) is not None):
            raise ValueError(f"matmul model {getattr(spec, 'name', spec)!r} has no "
                             f"instruction for E4M3 x E5M2: lp.matmul would promote "
                             f"them to FP16; use an instruction model (e.g. "
                             f"'h100/wgmma'), an accumulation model ('fp32') or "
                             f"fp8_format='e4m3'")

    def quantizer(self, rng: np.random.Generator | int | None = None) -> _PerTensor:
        """The state of one layer (``rng`` is unused: every rounding is to nearest)."""
        return _PerTensor(self)


class _PerTensor:
    """One layer's FP8 state under `DelayedScaling`: histories, scales, counts."""

    def __init__(self, recipe: DelayedScaling):
        self.recipe = recipe
        self.history = {k: deque([0.0] * recipe.history, maxlen=recipe.history)
                        for k in KINDS}
        self.scales = dict.fromkeys(KINDS, 1.0)
        self.pending: dict[str, float] = {}
        self.counts = _Counts()
        self.saved: tuple | None = None

    def _settle(self, kinds):
        """Record the amaxes of the last pass and recompute the scales of ``kinds``."""
        for k in kinds:
            if k in self.pending:
                self.history[k].append(self.pending.pop(k))
                self.scales[k] = self.recipe.scale(list(self.history[k]), self.scales[k], k)

    def _quantize(self, v: Tensor, kind: str) -> tuple[Tensor, float]:
        fmt = self.recipe.formats[kind]
        s = self.scales[kind]
        x = v.values
        amax = float(np.max(np.abs(x), initial=0.0))
        self.pending[kind] = _fl32(amax)
        # x * s is exact in float64 (24 + 24 bits), so this is fl32(v * scale).
        scaled = np.asarray(quiet(_round, x * s, FP32))
        # Values of fmt already (its underflows are flagged): wrapped, not rounded again.
        q = Tensor(np.asarray(_round(scaled, fmt, saturate=True)), fmt)
        # Rounding is monotone, so max |scaled| is fl32(amax * s): at most fmt.max, no
        # value is clipped (a NaN or inf amax takes the elementwise count).
        clipped = 0 if _fl32(amax * s) <= fmt.max else \
            np.count_nonzero(np.abs(scaled) > fmt.max)
        # A zero x quantizes to zero: the flushed values are the other zeros of q.
        zeros = x.size - np.count_nonzero(x)
        self.counts.add(kind, (1, int(clipped > 0), x.size, clipped, x.size - zeros,
                               q.values.size - np.count_nonzero(q.values) - zeros))
        return q, _fl32(1.0 / s)                               # s > 0 is an FP32 value

    @staticmethod
    def _product(a, sa, b, sb, c=None):
        y = matmul(a, b) * _fl32(sa * sb)     # sa * sb exact in float64: one FP32 multiply
        return y if c is None else y + c

    def forward(self, x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
        self._settle(("x", "w"))
        qx, sx = self._quantize(x, "x")
        qw, sw = self._quantize(w, "w")
        self.saved = (qx, sx, qw, sw)
        return self._product(qx, sx, qw, sw, None if b is None else b.astype(FP32))

    def backward(self, dy: Tensor, input_grad: bool) -> tuple[Tensor, Tensor | None]:
        if self.saved is None:
            raise RuntimeError("backward called before forward")
        self._settle(("dy",))
        qx, sx, qw, sw = self.saved
        qd, sd = self._quantize(dy, "dy")
        dw = self._product(qx.T, sx, qd, sd)
        return dw, (self._product(qd, sd, qw.T, sw) if input_grad else None)


# -- block scaling: MXFP8, NVFP4 ------------------------------------------------------------

@dataclass(frozen=True)
class BlockScaling:
    """Block-scaled operands (`lowprec.mx` schemes) multiplied by a block-scaled
    instruction model.

    Parameters
    ----------
    scheme : str
        The `lowprec.mx.SCHEMES` entry of activations and weights, one that an
        instruction model multiplies: ``"mxfp8_e4m3"``, ``"mxfp8_e5m2"``, ``"mxfp4"``,
        ``"nvfp4"`` (`TypeError` for a non-string, `ValueError` for another name; so
        for every option of this class that names something).
    grad_scheme : str, optional
        The gradients' scheme (default: ``scheme``).
    scale_rule : str
        The E8M0 scale rule (`lowprec.mx.SCALE_RULES`; NVFP4 ignores it).
    grad_mode : str
        The rounding of the gradients' elements: ``"rne"``, or ``"sr"`` (NVFP4's
        recipe), drawn from the quantizer's generator.
    model : str
        The block-scaled instruction model of the products (`lowprec.mx.matmul`):
        a matrix unit of `lp.MODELS` with block-scaled instructions for the schemes
        (``"b200/tcgen05"``, ``"rtx50/mma"``), checked at once.

    Notes
    -----
    Every operand is quantized along the contraction axis of its product, with
    blocks of the scheme's size: ``x`` along its features for ``x @ W`` and along the
    batch for ``x.T @ dy``, ``W`` along its rows for ``x @ W`` and along its columns
    for ``dy @ W.T``, ``dy`` along its columns for ``dy @ W.T`` and along the batch
    for ``x.T @ dy`` (Transformer Engine keeps such row- and column-wise copies of
    each MXFP8 tensor). The products are `lowprec.mx.matmul` under ``model``: the
    scales folded in as Blackwell's ``tcgen05.mma ... block_scale`` folds them, an
    FP32 result, then the bias added in FP32 (a bias epilogue; for NVFP4 after the
    tensor scales). The
    gradients' stochastic rounding draws one number per element from the quantizer's
    generator. Not modelled from NVIDIA's NVFP4 recipe (arXiv 2509.25149): the 16x16
    two-dimensional scaling of weights (here weights have 1x16 blocks along each
    product's contraction axis) and the random Hadamard transform of the
    weight-gradient operands.

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.amp.MXFP8.scheme, lp.amp.MXFP8.scale_rule, lp.amp.NVFP4.grad_mode
    ('mxfp8_e4m3', 'rceil', 'sr')
    """

    scheme: str = "mxfp8_e4m3"
    grad_scheme: str | None = None
    scale_rule: str = "rceil"
    grad_mode: Mode = "rne"
    model: str = "b200/tcgen05"

    def __post_init__(self) -> None:
        if self.grad_scheme is None:
            object.__setattr__(self, "grad_scheme", self.scheme)
        for name in ("scheme", "grad_scheme"):
            value = getattr(self, name)
            check_choice(name, value, _MODELLED)
        if mx.SCHEMES[self.scheme][1:] != mx.SCHEMES[self.grad_scheme][1:]:   # type: ignore[index]
            raise ValueError("scheme and grad_scheme must share the scale format and block")
        check_choice("scale_rule", self.scale_rule, tuple(mx.SCALE_RULES))
        check_choice("grad_mode", self.grad_mode, ("rne", "sr"))
        unit = resolve_model(self.model, "model")
        if not isinstance(unit, MatrixUnit):
            raise ValueError(f"model must be a matrix unit with block-scaled instructions "
                             f"('b200/tcgen05', 'rtx50/mma'), got {self.model!r}")
        (ea, sf, block), eg = mx.SCHEMES[self.scheme], mx.SCHEMES[self.grad_scheme][0]  # type: ignore[index]
        for a, b in ((ea, ea), (eg, ea), (ea, eg)):
            unit.instruction(a, b, scale=sf, scale_block=block)   # ValueError if none

    @property
    def formats(self) -> dict[str, str]:
        """The scheme of each operand kind."""
        return {"x": self.scheme, "w": self.scheme, "dy": self.grad_scheme}  # type: ignore[dict-item]

    def quantizer(self, rng: np.random.Generator | int | None = None) -> _Blocked:
        """The state of one layer; ``rng`` seeds the gradients' stochastic rounding."""
        return _Blocked(self, as_generator(rng))


def _block_totals(q: mx.BlockScaled, v: np.ndarray) -> tuple:
    """`_Counts.add`'s totals for ``v`` quantized to ``q``, in the blocked layout.

    Each value is compared with ``q.limits`` (the element's max times ``scale *
    tensor_scale``), formed per block instead of repeated to the array's shape. The
    padding holds zeros: it is neither clipped (a zero exceeds no limit, a NaN limit
    none) nor nonzero. Flushed values are counted on the element patterns (see
    `_flushed`); MXINT8 and blocks with a NaN scale take `_flushed_by_values`.
    """
    nonzero = np.count_nonzero(v)
    flushed = _flushed(q, nonzero)
    fast = _clipped_by_codes(q, v) if flushed is not None else None
    if fast is not None:
        return (q.scales.size, fast[0], v.size, fast[1], nonzero, flushed)
    vb = q.blocked(v)                                        # (..., blocks, block)
    scale = (q.scales * q.tensor_scale)[..., None]
    top = 127 * 2.0**-6 if q.elem == "int8" else q.elem.max  # type: ignore[union-attr]
    clip = np.abs(vb) > top * scale
    if flushed is None:
        flushed = _flushed_by_values(q, vb, scale)
    return (math.prod(clip.shape[:-1]), np.count_nonzero(clip.any(axis=-1)),
            v.size, np.count_nonzero(clip), nonzero, flushed)


@functools.cache
def _top_code(elem: Format) -> int:
    """The pattern of the format's largest finite value."""
    return int(np.asarray(quiet(encode, elem.max, elem)))


def _clipped_by_codes(q, v):
    """(blocks clipped, values clipped) for an E8M0 scheme without a NaN scale, or None.

    The elements are v / scale (exact: a power of two) rounded, so a value beyond its
    limit (the element's max times the scale) becomes an element of magnitude max, or
    inf or NaN without saturation: a code of magnitude at least max's. Only those
    elements are compared with their limits, at their places in v (the codes' layout
    is v's with the blocked axis last; the padding's codes are zeros)."""
    elem = q.elem
    if q.scheme not in mx.SCHEMES or q.scale_fmt != E8M0 or not isinstance(elem, Format):
        return None
    magnitude = np.uint8((1 << (elem.bits - 1)) - 1)
    top_code = _top_code(elem)
    where = np.nonzero((q.codes & magnitude) >= top_code)
    if not where[0].size:
        return 0, 0
    vals = np.moveaxis(v, q.axis, -1)[where]
    blocks = where[:-1] + (where[-1] // q.block,)
    clip = np.abs(vals) > elem.max * q.scales[blocks]
    hit = np.ravel_multi_index(tuple(b[clip] for b in blocks), q.scales.shape)
    return np.unique(hit).size, int(np.count_nonzero(clip))


def _flushed(q, nonzero):
    """The nonzero values that dequantize to zero, from the element patterns: None for
    MXINT8 or a NaN scale.

    With every scale a number, an element dequantizes to zero exactly when it is a
    zero: ``scale * tensor_scale`` is positive and finite or zero, and a product
    with a nonzero element of the formats stays far from float64's underflow. A zero
    value always gives a zero element (so does every value of a zero-scale block), so
    the zero elements are the zero values (``codes.size - nonzero``, padding
    included) plus the flushed ones."""
    elem = q.elem
    if not isinstance(elem, Format) or np.isnan(q.scales).any():
        return None
    magnitude = np.uint8((1 << (elem.bits - 1)) - 1)       # the pattern without its sign
    zeros = q.codes.size - np.count_nonzero(q.codes & magnitude)
    return zeros - (q.codes.size - nonzero)


def _flushed_by_values(q, vb, scale):
    """`_flushed` by the dequantized values, elementwise (any scheme, NaN scales too)."""
    deq = q.elements.reshape(vb.shape) * scale
    return np.count_nonzero((vb != 0) & (deq == 0))


class _Blocked:
    """One layer's state under `BlockScaling`: the saved operands and the counts."""

    def __init__(self, recipe: BlockScaling, rng: np.random.Generator):
        self.recipe = recipe
        self.rng = rng
        self.counts = _Counts()
        self.saved: tuple | None = None

    def _quantize(self, v: np.ndarray, kind: str, axis: int) -> mx.BlockScaled:
        scheme = self.recipe.formats[kind]
        sr = kind == "dy" and self.recipe.grad_mode == "sr"
        q = mx.quantize(v, scheme, axis=axis, scale_rule=self.recipe.scale_rule,
                        mode="sr" if sr else "rne", rng=self.rng if sr else None)
        self.counts.add(kind, _block_totals(q, v))
        return q

    def _product(self, a, b, c=None):
        y = tensor(mx.matmul(a, b, model=self.recipe.model), FP32)
        return y if c is None else y + c                       # the bias epilogue, in FP32

    def forward(self, x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
        xv, wv = x.values, w.values
        self.saved = (xv, wv)
        return self._product(self._quantize(xv, "x", 1), self._quantize(wv, "w", 0),
                             None if b is None else b.astype(FP32))

    def backward(self, dy: Tensor, input_grad: bool) -> tuple[Tensor, Tensor | None]:
        if self.saved is None:
            raise RuntimeError("backward called before forward")
        xv, wv = self.saved
        d = dy.values
        dw = self._product(self._quantize(xv.T, "x", 1), self._quantize(d, "dy", 0))
        if not input_grad:
            return dw, None
        return dw, self._product(self._quantize(d, "dy", 1), self._quantize(wv.T, "w", 0))


#: OCP MXFP8 with E4M3 everywhere (Transformer Engine's ``MXFP8BlockScaling``) and the
#: rounded-up scale of cuBLAS and torchao's RCEIL (arXiv 2506.08027 recommends rounding
#: the scale up, which clamps no block).
MXFP8 = BlockScaling("mxfp8_e4m3", scale_rule="rceil")

#: NVFP4 (E2M1, UE4M3 scales per 16, an FP32 tensor scale from the tensor's amax), the
#: gradients stochastically rounded (arXiv 2509.25149).
NVFP4 = BlockScaling("nvfp4", grad_mode="sr")
