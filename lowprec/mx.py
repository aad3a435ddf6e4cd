"""Block-scaled formats (OCP Microscaling, NVFP4) and per-tensor scaled FP8: `quantize`,
`BlockScaled`, `matmul`.

A block-scaled array stores element codes of a small format and one scale per block of
consecutive elements along an axis: the MX formats (OCP Microscaling Formats v1.0,
§5-6: MXFP8 E4M3/E5M2, MXFP6 E3M2/E2M3, MXFP4 E2M1, MXINT8; E8M0 scales per 32) and
NVIDIA's NVFP4 (E2M1 elements, UE4M3 scales per 16, an FP32 per-tensor scale). Per-tensor
scaled FP8 (`PER_TENSOR`) has one FP32 scale from the tensor's amax, as Transformer
Engine's delayed scaling computes it for one step. `quantize` computes the scales by a
named rule and rounds the elements with the rounding kernel; `BlockScaled.dequantize`
gives the values back; `matmul` multiplies two block-scaled arrays with a block-scaled
instruction model of `lp.MODELS`, and two per-tensor scaled ones with any model that
takes their FP8 formats. It never computes in a format it does not name.
"""

from __future__ import annotations

import math
import numbers
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .arith import mul as _mul
from .bits import decode, encode
from .display import block_scaled_card
from .engine.checks import check_choice, check_int
from .engine.inputs import float64_operand
from .formats import (
    E8M0,
    FP4_E2M1,
    FP6_E2M3,
    FP6_E3M2,
    FP8_E4M3,
    FP8_E5M2,
    FP16,
    FP32,
    UE4M3,
    Format,
)
from .rounding import round as _round
from .status import quiet
from .types import Mode, RNGLike

__all__ = ["quantize", "BlockScaled", "matmul", "SCHEMES", "SCALE_RULES", "PER_TENSOR",
           "amax_scale"]

#: name -> (element format, or "int8"; scale format; block size). OCP MX v1.0 Table 1;
#: NVFP4: NVIDIA, "Introducing NVFP4" and arXiv 2509.25149.
SCHEMES: dict[str, tuple[Format | str, Format, int]] = {
    "mxfp8_e4m3": (FP8_E4M3, E8M0, 32), "mxfp8_e5m2": (FP8_E5M2, E8M0, 32),
    "mxfp6_e3m2": (FP6_E3M2, E8M0, 32), "mxfp6_e2m3": (FP6_E2M3, E8M0, 32),
    "mxfp4": (FP4_E2M1, E8M0, 32), "mxint8": ("int8", E8M0, 32),
    "nvfp4": (FP4_E2M1, UE4M3, 16),
}

#: Per-tensor scaled FP8: name -> element format. One FP32 scale for the whole tensor,
#: from its amax (`amax_scale`); Transformer Engine's recipes, "FP8 Delayed Scaling"
#: (with a history of one: its current scaling). "e4m3" and "e5m2" are also accepted.
PER_TENSOR: dict[str, Format] = {"fp8_e4m3": FP8_E4M3, "fp8_e5m2": FP8_E5M2}
_PER_TENSOR_ALIASES = {"e4m3": "fp8_e4m3", "e5m2": "fp8_e5m2"}

#: How a block's scale is chosen from its largest magnitude amax (E8M0 scales).
SCALE_RULES = {
    "floor": "2**(floor(log2 amax) - emax_elem): OCP MX v1.0 §6.3; the block's largest "
             "values can exceed the element's max and are clamped (957 in MXFP8 E4M3 "
             "decodes as 896)",
    "ceil": "2**ceil(log2(amax / max_elem)), exactly: the least power of two that keeps "
            "every element within range (no clamping)",
    "rceil": "2**ceil(log2(fl32(amax / max_elem))): the quotient first rounded to FP32, "
             "as cuBLAS and torchao's RCEIL compute it",
    "even": "the power of two nearest amax / max_elem (E8M0's own rounding): clamping "
            "possible, by up to a factor sqrt(2) (not torchao's EVEN, which rounds amax "
            "to the element's precision and then takes the floor rule)",
}

_FP32_MAX = float(np.finfo(np.float32).max)
_INT8_STEP = 2.0**-6   # MXINT8: two's-complement int8 with an implicit 2**-6 (OCP §5.3.3)


@dataclass(frozen=True)
class BlockScaled:
    """A block-scaled array: element codes, scale codes, and how they pair.

    ``codes`` has the array's shape moved so that the blocked axis is last and padded
    to a multiple of ``block`` (uint8 bit patterns of ``elem``, or int8 for MXINT8);
    ``scale_codes`` holds one code of ``scale_fmt`` per block. ``tensor_scale`` is
    NVFP4's FP32 per-tensor scale (1.0 for the MX schemes).
    """

    scheme: str
    codes: np.ndarray
    scale_codes: np.ndarray
    elem: Format | str
    scale_fmt: Format
    block: int
    axis: int
    shape: tuple
    tensor_scale: float = 1.0
    _decoded: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def _cached(self, name, codes, compute):
        """``compute()``, kept where ``codes`` cannot change (`quantize` makes its code
        arrays read-only), so that each array is decoded once. A read-only copy."""
        if codes.flags.writeable:
            return compute()
        if name not in self._decoded:
            v = compute()
            v.flags.writeable = False
            self._decoded[name] = v
        return self._decoded[name]

    @property
    def elements(self) -> NDArray[np.float64]:
        """Element values (blocked axis last, padded), before scaling."""
        if self.elem == "int8":
            return self.codes.astype(np.float64) * _INT8_STEP
        elem = self.elem
        assert isinstance(elem, Format)
        return self._cached("elements", self.codes,
                            lambda: np.asarray(decode(self.codes, elem), dtype=np.float64))

    @property
    def scales(self) -> NDArray[np.float64]:
        """Scale values, one per block (NaN for a NaN scale)."""
        return self._cached("scales", self.scale_codes, lambda: np.asarray(
            decode(self.scale_codes, self.scale_fmt), dtype=np.float64))

    def dequantize(self) -> NDArray[np.float64]:
        """The values: element * scale * tensor_scale, exact in float64 (products of
        at most 4-bit, 4-bit and 24-bit significands), in the original shape."""
        return self._unblock(self.elements * self._element_scales())

    @property
    def limits(self) -> NDArray[np.float64]:
        """Per element, in the original shape: the largest magnitude its block holds
        (the element format's max times the block's scale and the tensor scale).
        ``abs(x) > q.limits`` marks the elements of ``x`` that were clamped."""
        top = 127 * _INT8_STEP if self.elem == "int8" else self.elem.max  # type: ignore[union-attr]
        return self._unblock(top * self._element_scales())

    def blocked(self, values: ArrayLike) -> NDArray[Any]:
        """``values`` of the array's shape laid out as its blocks: shape
        (..., blocks, block), the blocked axis last, zero-padded (False for a mask).

        Examples
        --------
        >>> import numpy as np, lowprec as lp
        >>> q = lp.mx.quantize(np.ones(40), "mxfp4")
        >>> q.blocked(np.arange(40) < 3).any(axis=-1)      # which blocks hold a True
        array([ True, False])
        """
        v = np.asarray(values)
        return _blocks(v, self.axis, self.block).astype(v.dtype)

    def _element_scales(self):
        return np.repeat(self.scales, self.block, axis=-1) * self.tensor_scale

    def _unblock(self, v):
        """Blocked layout (blocked axis last, padded) -> the original shape."""
        return np.moveaxis(v[..., :self.shape[self.axis]], -1, self.axis)

    def __array__(self, dtype=None, copy=None):
        """``np.asarray(q)``: the dequantized values (float64), so that
        ``lp.tensor(q, fmt)`` rounds them into a format of your choice."""
        if copy is False:
            raise ValueError("a block-scaled array has no float array to share: its values "
                             "are computed (copy=False cannot be honoured)")
        v = self.dequantize()
        return v if dtype is None else v.astype(dtype)

    def _repr_html_(self) -> str:
        return block_scaled_card(self)


def _blocks(x, axis, block):
    x = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    n = x.shape[-1]
    pad = (-n) % block
    if pad:
        x = np.concatenate([x, np.zeros(x.shape[:-1] + (pad,))], axis=-1)
    return x.reshape(x.shape[:-1] + (x.shape[-1] // block, block))


def _e8m0_exponent(amax, emax_elem, max_elem, rule):
    """The scale exponents, in E8M0's [-127, 127], of blocks with largest magnitude
    amax > 0 (finite).

    Every rule gives -127 when amax / max_elem <= 2**-127 and 127 when it exceeds
    2**127 (its exact exponent lies beyond E8M0's range, and the clip is monotone), so
    those blocks are decided by comparisons that are exact in float64 (max_elem times a
    power of two); the rules then see quotients well inside float64's and FP32's range.
    """
    lo, hi = max_elem * 2.0**-127, max_elem * 2.0**127
    low, high = amax <= lo, amax > hi
    amax = np.where(low | high, max_elem, amax)
    with np.errstate(divide="ignore", invalid="ignore"):
        if rule == "floor":
            e = np.frexp(amax)[1] - 1 - emax_elem
        elif rule == "ceil":
            # The least j with max_elem * 2**j >= amax, decided by exact comparisons
            # (max_elem * 2**j is a float64) around floor(log2) of the rounded quotient.
            k = np.frexp(amax / max_elem)[1] - 1
            e = k + 1
            e = np.where(amax <= max_elem * np.ldexp(1.0, k), k, e)
            e = np.where(amax <= max_elem * np.ldexp(1.0, k - 1), k - 1, e)
        elif rule == "rceil":
            q = np.asarray(quiet(_round, amax / max_elem, FP32))  # fl32 of the quotient
            m, e = np.frexp(q)
            e = np.where(m == 0.5, e - 1, e)
        else:
            r = np.asarray(quiet(_round, amax / max_elem, E8M0))
            e = np.frexp(r)[1] - 1
    return np.clip(np.where(low, -127, np.where(high, 127, e)), -127, 127)


def amax_scale(amax: float, fmt: Format, *, margin: int = 0,
               previous: float = 1.0) -> float:
    """The FP32 scale that maps ``amax`` to ``fmt``'s max: fl32(fl32(max / fl32(amax)) /
    2**margin), FP32's max where that overflows, and ``previous`` when amax is 0, NaN or
    infinite or the scale would be 0 (Transformer Engine's delayed-scaling rule).

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.mx.amax_scale(3.5, lp.FP8_E4M3), lp.mx.amax_scale(0.0, lp.FP8_E4M3)
    (128.0, 1.0)
    """
    a = float(quiet(_round, amax, FP32))                 # an FP32 amax
    if not (a > 0 and math.isfinite(a)):
        return previous
    # fl32 of the float64 quotient is fl32 of the exact one: 53 >= 2 * 24 + 2; ldexp is
    # exact: the quotient times 2**-margin (margin <= 277) stays a float64 normal.
    q = float(quiet(_round, fmt.max / a, FP32))
    sc = float(quiet(_round, math.ldexp(q, -margin), FP32))
    if sc == math.inf:
        return _FP32_MAX
    return sc if sc > 0 else previous


def _per_tensor(arr, scheme, axis, mode, rng, saturate):
    """`quantize` for a `PER_TENSOR` scheme: fp8(fl32(x * s)), s = `amax_scale` of the
    tensor's amax; the decode scale fl32(1 / s) is the `BlockScaled`'s tensor scale, and
    the whole axis is one block of scale 1."""
    elem = PER_TENSOR[scheme]
    amax = float(np.max(np.abs(arr), initial=0.0))      # NaN when x holds one
    sc = amax_scale(amax, elem)
    v = np.moveaxis(arr, axis, -1)
    y = _times_fp32(v, np.asarray(sc))                  # one rounding of x * s to FP32
    codes = np.ascontiguousarray(_encode(y, elem, mode, rng, saturate))
    n = v.shape[-1]
    scodes = np.asarray(encode(np.ones(v.shape[:-1] + (1,)), E8M0))
    codes.flags.writeable = scodes.flags.writeable = False
    return BlockScaled(scheme, codes, scodes, elem, E8M0, max(n, 1), axis, arr.shape,
                       float(quiet(_round, 1.0 / sc, FP32)))   # s > 0 is an FP32 value


def _check_tensor_scale(ts):
    """NVFP4's per-tensor scale as an FP32 number: a positive finite real, rounded to
    FP32 (nearest even); `TypeError` for anything but a real number, `ValueError` for
    zero, negative, NaN, inf or a value that rounds to 0 or inf in FP32."""
    if isinstance(ts, (bool, np.bool_)) or not isinstance(ts, (numbers.Real, np.number)) \
            or isinstance(ts, np.complexfloating):
        raise TypeError(f"tensor_scale must be a real number, got {type(ts).__name__} {ts!r}")
    v = float(ts)
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"tensor_scale must be a positive finite number, got {ts!r}")
    r = float(quiet(_round, v, FP32))
    if not (0 < r < math.inf):
        raise ValueError(f"tensor_scale {ts!r} is outside FP32's range (it rounds to {r})")
    return r


def quantize(x: ArrayLike, scheme: str, *, axis: int = -1, scale_rule: str = "rceil",
             mode: Mode = "rne", rng: RNGLike = None,
             saturate: bool = True, tensor_scale: float | None = None) -> BlockScaled:
    """Quantize ``x`` to a block-scaled format along ``axis``.

    Parameters
    ----------
    x : array_like
        Real values (float64 after conversion); not modified.
    scheme : str
        A key of `SCHEMES`: ``"mxfp8_e4m3"``, ``"mxfp8_e5m2"``, ``"mxfp6_e3m2"``,
        ``"mxfp6_e2m3"``, ``"mxfp4"``, ``"mxint8"``, ``"nvfp4"``; or of `PER_TENSOR`:
        ``"fp8_e4m3"`` (also ``"e4m3"``), ``"fp8_e5m2"`` (``"e5m2"``), FP8 with one
        FP32 scale s = `amax_scale` of the whole tensor's amax, the elements
        fp8(fl32(x * s)) and ``tensor_scale`` fl32(1 / s): Transformer Engine's
        delayed scaling with a history of one, bit for bit (``axis`` and
        ``scale_rule`` change nothing there; the whole axis is one block of scale 1).
    axis : int
        The axis cut into blocks (32 elements, 16 for NVFP4; the last block is
        zero-padded), in ``[-x.ndim, x.ndim)``: `numpy.exceptions.AxisError` (a
        `ValueError`) outside, `TypeError` for a bool, None or a non-integer.
    scale_rule : str
        For the E8M0 scales (`SCALE_RULES`): ``"rceil"`` (the default: the scale
        that keeps the block's largest value in range, as cuBLAS and torchao's
        MXFP8 training compute it, and lowprec's training recipes use),
        ``"floor"`` (the OCP spec's example, which clamps the top of a block whose
        amax lies above the element's max times a power of two), ``"ceil"``,
        ``"even"``. NVFP4's UE4M3 scale is always amax / 6 divided
        by the tensor scale, rounded to nearest even (its recipe, arXiv 2509.25149).
    mode, rng : str, Generator or int
        Rounding of the elements (`lp.round`'s modes; ``"sr"`` draws from ``rng``).
    saturate : bool
        Clamp elements beyond the element format's max to it (OCP §6.3: normals are
        clamped); False sends them to NaN or inf as `lp.round` does.
    tensor_scale : float, optional
        NVFP4 only (`ValueError` for the MX schemes, which have none): the FP32
        per-tensor scale. A positive finite real number, rounded to FP32 (nearest
        even; the rounded value is the one used and stored); `ValueError` for zero,
        negative, NaN or infinite values and for values that round to 0 or inf in
        FP32, `TypeError` for anything but a real number (strings included). By
        default fl32(amax(x) / (6 * 448)), so that the block scales use UE4M3's
        range, kept within [2**-128, FP32's max] (see Notes).

    Returns
    -------
    BlockScaled

    Notes
    -----
    A block holding NaN or inf gets a NaN scale (OCP §6.3: the block then decodes as
    NaN); a block of zeros gets the least scale. E8M0 scales saturate: a rule whose
    exponent falls outside E8M0's [-127, 127] gets -127 or 127 (every rule, as OCP's
    floor rule does), so that a block beyond 448 * 2**127 in MXFP8 E4M3 clamps to it.
    The elements are ``x / scale`` rounded into the element format: exact division by
    a power of two for the E8M0 schemes. NVFP4 multiplies by the encode scale, the
    FP32 reciprocal of ``scale * tensor_scale``, and rounds the exact product to FP32
    once, then to E2M1, as its reference code does with FP32 data (arXiv 2509.25149,
    App. B). As Transformer Engine does, the encode scale is clamped to FP32's max
    (blocks whose amax is below about 6 / FP32's max, 1.8e-38, keep only their
    largest values) and the default tensor scale to [2**-128, FP32's max] (data
    beyond 2688 times FP32's max saturates; a product beyond FP32's range saturates
    or not as ``saturate`` says).

    Examples
    --------
    >>> import lowprec as lp
    >>> q = lp.mx.quantize([957.0] + [1.0] * 31, "mxfp8_e4m3")
    >>> float(q.dequantize()[0]), float(q.scales[0])      # rceil: 957 / 4 is in range
    (960.0, 4.0)
    >>> q = lp.mx.quantize([957.0] + [1.0] * 31, "mxfp8_e4m3", scale_rule="floor")
    >>> float(q.dequantize()[0])                          # OCP's floor rule clamps
    896.0
    >>> q = lp.mx.quantize([3e-6, -1e-6], "e4m3")         # one scale s: fl32(448 / 3e-6)
    >>> q.elements.tolist(), lp.mx.amax_scale(3e-6, lp.FP8_E4M3)
    ([448.0, -144.0], 149333328.0)
    """
    if isinstance(scheme, str):
        scheme = _PER_TENSOR_ALIASES.get(scheme, scheme)
    check_choice("scheme", scheme, {**SCHEMES, **PER_TENSOR})
    check_choice("scale_rule", scale_rule, SCALE_RULES)
    if tensor_scale is not None:
        if scheme in PER_TENSOR:
            raise ValueError(f"scheme {scheme!r} takes its scale from the tensor's amax; "
                             "for scales from earlier steps use lp.amp.DelayedScaling "
                             "(leave tensor_scale=None)")
        if SCHEMES[scheme][1] == E8M0:
            raise ValueError(f"tensor_scale is NVFP4's per-tensor scale: scheme {scheme!r} "
                             "has none (leave tensor_scale=None)")
        tensor_scale = _check_tensor_scale(tensor_scale)
    axis = check_int("axis", axis)
    arr = float64_operand(x, "x")       # real numbers only, as lp.round takes them
    if arr.ndim == 0:
        raise ValueError("quantize needs an array of at least one dimension")
    axis = int(np.lib.array_utils.normalize_axis_index(axis, arr.ndim))
    if scheme in PER_TENSOR:
        return _per_tensor(arr, scheme, axis, mode, rng, saturate)
    elem, sfmt, block = SCHEMES[scheme]
    # Rounding to nearest and the flags are elementwise: the blocks are cut where the
    # values lie in memory (`_Layout`), and only the codes move to the blocked layout.
    # Stochastic rounding draws one number per element in the blocked layout's order,
    # so there the values move before they are rounded.
    lay = _Layout(arr, axis, block)
    v = lay.values
    amax = np.abs(v).max(axis=lay.inner)
    special = ~np.isfinite(amax)        # max propagates NaN, and |inf| is the max
    any_special = bool(special.any())
    if any_special:
        amax = np.where(special, 0.0, amax)
    if elem == "int8":
        emax_elem, max_elem = 0, 127 * _INT8_STEP
    else:
        assert isinstance(elem, Format)
        emax_elem, max_elem = elem.emax, elem.max
    ts = 1.0
    if sfmt == E8M0:
        e = np.where(amax > 0, _e8m0_exponent(np.where(amax > 0, amax, 1.0), emax_elem,
                                              max_elem, scale_rule), -127)
        scale = np.ldexp(1.0, e.astype(np.int32))
        with np.errstate(all="ignore"):
            y = v / lay.per_value(scale)  # exact: a power of two, results stay normal
    else:
        if tensor_scale is None:
            # fl32(amax / 2688), kept within [2**-128, FP32's max]: Transformer Engine
            # clamps its encode scale 2688 / amax to FP32's max (2**-128 is fl32 of its
            # reciprocal); data beyond 2688 times FP32's max saturates.
            top = float(amax.max(initial=0.0))
            tensor_scale = min(max(float(quiet(_round, top / (6.0 * 448.0), FP32)), 2.0**-128),
                               _FP32_MAX) if top > 0 else 1.0
        ts = float(tensor_scale)
        scale = np.asarray(quiet(_round, amax / 6.0 / ts, UE4M3, saturate=True))
        with np.errstate(divide="ignore", over="ignore"):   # a zero scale: an all-zero block
            # The FP32 reciprocal (fl32 of the float64 quotient is fl32 of the exact one:
            # scale * ts has at most 28 bits), clamped to FP32's max as Transformer Engine
            # clamps it, for blocks whose amax is below about 6 / FP32's max.
            enc = np.minimum(np.asarray(quiet(_round, 1.0 / (scale * ts), FP32)), _FP32_MAX)
        enc = np.where(scale > 0, enc, 0.0)
        y = _times_fp32(v, lay.per_value(enc))                  # one rounding of v * enc
    if any_special:
        y = np.where(lay.per_value(special), 0.0, y)   # a NaN scale decides those blocks
    draws = mode == "sr"
    if draws:
        y = lay.blocked(y)
    if elem == "int8":
        # y / 2**-6 / 2**7 is below 1 in magnitude for in-range values: rounding it into
        # a format whose grid there is 2**-7 rounds y / 2**-6 to an integer.
        t = np.asarray(_round(y / _INT8_STEP / 128.0, _INT8_GRID, mode,
                              rng=rng, saturate=True)) * 128.0
        codes = np.clip(t, -127, 127).astype(np.int8)     # int8 has no inf: always clamped
    else:
        assert isinstance(elem, Format)
        # An infinite y (a finite v whose product with a given tensor scale overflows
        # FP32) saturates or not as a finite value beyond the format's max does.
        codes = _encode(y, elem, mode, rng, saturate)
    if not draws:
        codes = lay.blocked(codes)
    if any_special:
        scale = np.where(special, np.nan, scale)
    scodes = np.asarray(encode(lay.per_block(scale), sfmt))
    codes.flags.writeable = scodes.flags.writeable = False   # their decoded values are kept
    return BlockScaled(scheme, codes, scodes, elem, sfmt, block, axis, arr.shape, ts)


class _Layout:
    """Blocks cut along ``axis`` of ``x`` where its values lie in memory.

    The axes are taken in the order of their strides (largest first), so that a
    transposed view is read in memory order, and the blocked axis is split in place
    into (blocks, block), zero-padded. ``values`` is that float64 array;
    `per_value` broadcasts a per-block array over it; `blocked` and `per_block`
    give arrays of its layout in `BlockScaled`'s (the blocked axis last, C order).
    """

    def __init__(self, x, axis, block):
        self.perm = sorted(range(x.ndim), key=lambda i: -abs(x.strides[i]))  # stable
        self.axis = self.perm.index(axis)
        work = x.transpose(self.perm)
        n = work.shape[self.axis]
        pad = (-n) % block
        if pad:
            zeros = list(work.shape)
            zeros[self.axis] = pad
            work = np.concatenate([work, np.zeros(zeros)], axis=self.axis)
        self.padded = work.shape
        self.inner = self.axis + 1               # the axis within a block
        a = self.axis
        self.values = work.reshape(work.shape[:a] + (work.shape[a] // block, block)
                                   + work.shape[a + 1:])
        self.back = tuple(int(i) for i in np.argsort(self.perm))

    def per_value(self, s):
        return np.expand_dims(s, self.inner)

    def blocked(self, z):
        """z of the layout of ``values`` in `BlockScaled.codes`' layout (C order)."""
        z = z.reshape(self.padded).transpose(self.back)
        return np.ascontiguousarray(np.moveaxis(z, self.perm[self.axis], -1))

    def per_block(self, s):
        """s of one value per block in `BlockScaled.scale_codes`' layout (C order)."""
        s = s.transpose(self.back)
        return np.ascontiguousarray(np.moveaxis(s, self.perm[self.axis], -1))


_LOW23 = np.uint64((1 << 23) - 1)


def _times_fp32(v, enc):
    """fl32(v * enc) of float64 values ``v`` and FP32 values ``enc`` (broadcast), rounded
    to nearest even once, quietly: `lowprec.arith.mul`'s result.

    Where every ``v`` has the low 23 bits of its float64 fraction clear (FP32, BF16
    and FP16 data), its significand has at most 29 bits, so the float64 product with
    a 24-bit ``enc`` is exact (at most 53 bits) unless it leaves float64's normal
    range. An overflow is infinite in both. An exact product below 2**-1022 rounds to
    a zero of its sign in FP32, as the float64 product does, whatever it rounded to.
    So one rounding of the float64 product to FP32 is the correctly rounded result.
    Other data takes `lowprec.arith.mul`.
    """
    if np.bitwise_and(v.view(np.uint64), _LOW23).any():
        return np.asarray(quiet(_mul, v, enc, FP32))
    with np.errstate(over="ignore", invalid="ignore"):     # inf * 0: NaN, as mul gives
        p = v * enc
    return np.asarray(quiet(_round, p, FP32))


_BY_TOP16: dict = {}
_NONE = 1 << 8                      # no pattern: a value that is not of the format


def _patterns_by_top16(fmt):
    """A table from the top 16 bits of a float64 value of ``fmt`` (at most 8 bits, 4
    fraction bits: sign, float64's exponent and 4 fraction bits say which value it is)
    to its pattern, as `encode` writes it: ±0, ±inf, quiet NaNs to the canonical NaN
    of their sign (for formats with NaN), `_NONE` elsewhere."""
    table = _BY_TOP16.get(fmt)
    if table is None:
        table = np.full(1 << 16, _NONE, dtype=np.uint16)
        codes = np.arange(1 << fmt.bits, dtype=np.uint64)
        values = np.asarray(decode(codes, fmt), dtype=np.float64)
        finite = ~np.isnan(values)
        table[values[finite].view(np.uint16)[3::4]] = codes[finite]
        if fmt.has_nan:     # what `encode` writes for any NaN: the canonical one of its sign
            nans = np.asarray(encode([np.nan, -np.nan], fmt), dtype=np.uint16)
            table[0x7FF8:0x8000], table[0xFFF8:] = nans
        _BY_TOP16[fmt] = table
    return table


def _encode(y, elem, mode, rng, saturate):
    """``encode(y, elem, mode, rng=rng, saturate=saturate)``: `lowprec.round` (the same
    plan, draws and flags) and each value's pattern by its top 16 bits. Formats of at
    most 8 bits and 4 fraction bits; a value without a pattern (a NaN in a format
    without NaN) takes `encode` of the rounded values, which raises as it does."""
    if elem.bits > 8 or elem.mantissa_bits > 4 or sys.byteorder != "little":
        return np.asarray(encode(y, elem, mode, rng=rng, saturate=saturate))
    r = np.ascontiguousarray(_round(y, elem, mode, rng=rng, saturate=saturate),
                             dtype=np.float64)
    codes = _patterns_by_top16(elem)[r.view(np.uint16)[..., 3::4]]
    if codes.max(initial=0) >= _NONE:
        # Values of elem already: encoding them rounds nothing, so nothing is flagged.
        return np.asarray(quiet(encode, r, elem, saturate=saturate))
    return codes.astype(np.uint8)


# Multiples of 2**-7 below 2 (its subnormals and first binade): MXINT8's integers / 128.
_INT8_GRID = Format(2, 7, bias=1, name="int8 grid")


def matmul(a: BlockScaled, b: BlockScaled, *, model: str = "b200/tcgen05",
           c: ArrayLike | None = None) -> NDArray[np.float64]:
    """``a @ b (+ c)`` of two block-scaled matrices through a block-scaled instruction
    model (``kind::mxf8f6f4``, ``kind::mxf4``, ``kind::mxf4nvf4`` of ``"b200/tcgen05"``
    or ``"rtx50/mma"``): the scales enter the products as the hardware folds them.

    ``a`` is (M, K) blocked along axis 1 (K), ``b`` is (K, N) blocked along axis 0.
    FP32 result; NVFP4's tensor scales multiply it once in FP32 (cuBLAS's alpha), then
    c is added in FP32.

    Memory: the outputs are computed in chunks of rows and columns whose work buffers
    (each output's gathered row of ``a``, column of ``b`` and their scales, and the
    instruction's per-group terms) stay below ``lowprec.tensorcore.MEMORY_BOUND``
    (256 MiB), whatever M, N and K. On top come only 8 bytes per element of ``a`` and
    ``b`` and per scale (their decoded values, kept with arrays from `quantize`), 4
    bytes per element (the fast paths' exponents and last bits), and a few float64
    arrays of the result's size (``c`` rounded to FP32, the result, `lowprec.round`'s
    buffers).
    Every output is computed on its own, so the chunks change no bit.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> a = lp.mx.quantize(np.full((2, 32), 1.5), "mxfp8_e4m3", axis=1)
    >>> b = lp.mx.quantize(np.full((32, 3), 2.0), "mxfp8_e4m3", axis=0)
    >>> lp.mx.matmul(a, b, c=1.0)
    array([[97., 97., 97.],
           [97., 97., 97.]])
    """
    from .tensorcore import driver
    from .tensorcore.catalogue import block_scaled_units, resolve_model
    from .tensorcore.instructions import MatrixUnit
    for name, op in (("a", a), ("b", b)):
        if not isinstance(op, BlockScaled):
            raise TypeError(f"mx.matmul: a and b must be BlockScaled (quantize them with "
                            f"lp.mx.quantize), got {type(op).__name__} for {name}")
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise ValueError(f"mx.matmul multiplies matrices, got shapes {a.shape} and "
                         f"{b.shape}; quantize 2-D arrays")
    per_tensor = (a.scheme in PER_TENSOR, b.scheme in PER_TENSOR)
    if any(per_tensor):
        if not all(per_tensor):
            raise ValueError(f"mx.matmul: a ({a.scheme}) and b ({b.scheme}) are scaled "
                             "differently; quantize both per tensor (schemes "
                             f"{', '.join(PER_TENSOR)}) or both in blocks")
        return _per_tensor_matmul(a, b, model, c)
    units = " or ".join(map(repr, block_scaled_units()))
    unit = resolve_model(model, "model")
    if not isinstance(unit, MatrixUnit):
        raise ValueError(f"model {model!r} is not an instruction model with block scales; "
                         f"use model={units}")
    if a.axis != 1 or b.axis != 0:
        raise ValueError(f"mx.matmul takes a (M, K) array blocked along K and a (K, N) "
                         f"array blocked along K, got a blocked along axis {a.axis} and b "
                         f"along axis {b.axis}: quantize a with axis=1 and b with axis=0")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"mx.matmul: a has K = {a.shape[1]}, b has K = {b.shape[0]}")
    if a.block != b.block or a.scale_fmt != b.scale_fmt:
        raise ValueError(f"mx.matmul: a ({a.scheme}) and b ({b.scheme}) have different "
                         "block sizes or scale formats; quantize both with MX schemes "
                         "(E8M0 scales per 32) or both with 'nvfp4'")
    if "int8" in (a.elem, b.elem) or a.elem in (FP6_E2M3, FP6_E3M2) or \
            b.elem in (FP6_E2M3, FP6_E3M2):
        raise ValueError("no block-scaled instruction model takes MXINT8 or FP6 elements "
                         "(the simulator's vectors cover FP8 and FP4 only); multiply their "
                         "values, np.asarray(q), with lp.matmul's accumulation models "
                         "(model='exact' or 'fp32')")
    assert isinstance(a.elem, Format) and isinstance(b.elem, Format)
    try:
        ins = unit.instruction(a.elem, b.elem, scale=a.scale_fmt, scale_block=a.block)
    except ValueError as e:
        raise ValueError(f"{e}; use model={units}") from None
    M, N = a.shape[0], b.shape[1]
    ea, eb = a.elements, b.elements                  # (M, Kp), (N, Kp)
    k = ins.block
    pad = (-ea.shape[-1]) % k
    sa, sb = a.scales, b.scales
    if pad:      # zero elements, unit scales: nothing added
        ea, eb = (np.concatenate([e, np.zeros((e.shape[0], pad))], axis=1) for e in (ea, eb))
        sa, sb = (np.concatenate([s, np.ones((s.shape[0], pad // a.block))], axis=1)
                  for s in (sa, sb))
    alpha = float(quiet(_round, a.tensor_scale * b.tensor_scale, FP32))
    c0 = np.zeros((M, N)) if (c is None or alpha != 1.0) else np.broadcast_to(
        np.asarray(quiet(_round, np.asarray(c, dtype=np.float64), FP32)), (M, N))
    d = np.empty((M, N))
    fast = ins.fast(a.elem, b.elem)
    mc, nc = _output_chunk(M, N, ea.shape[1], sa.shape[1], k, driver.MEMORY_BOUND, fast)
    for m0 in range(0, M, mc):
        for n0 in range(0, N, nc):
            ra, rb = ea[m0:m0 + mc], eb[n0:n0 + nc]        # (mc, Kp), (nc, Kp)
            qa, qb = sa[m0:m0 + mc], sb[n0:n0 + nc]
            m, n = ra.shape[0], rb.shape[0]
            if fast:
                d[m0:m0 + m, n0:n0 + n] = ins.dot_matrix(
                    ra, rb.T, c0[m0:m0 + m, n0:n0 + n], a.elem, b.elem, FP32, qa, qb.T,
                    bound=driver.MEMORY_BOUND // 4)
                continue
            # Output (i, j) of the chunk is row i * n + j: a's row i with b's column j.
            rows = (np.repeat(ra, n, axis=0), np.tile(rb, (m, 1)))
            scales = (np.repeat(qa, n, axis=0), np.tile(qb, (m, 1)))
            cc = np.array(c0[m0:m0 + m, n0:n0 + n]).reshape(-1)
            d[m0:m0 + m, n0:n0 + n] = ins.dot(*rows, cc, a.elem, b.elem, FP32,
                                              *scales).reshape(m, n)
            del rows, scales
    return _scaled(d, alpha, c) if alpha != 1.0 else d


def _scaled(d, alpha, c):
    """cuBLAS's alpha and bias epilogue on the FP32 result d: fl32(alpha * d) (exact
    product of two FP32 values, one rounding), then ``c`` added in FP32."""
    from .arith import add
    with np.errstate(invalid="ignore"):                  # an infinite alpha times 0: NaN
        d = np.asarray(quiet(_round, alpha * d, FP32))
    if c is not None:
        cc = np.broadcast_to(np.asarray(c, dtype=np.float64), d.shape)
        d = np.asarray(quiet(add, d, quiet(_round, cc, FP32), FP32))
    return d


def _per_tensor_matmul(a, b, model, c):
    """``mx.matmul`` of two per-tensor scaled FP8 matrices: the FP8 product by
    `lp.matmul` under ``model`` (FP32 result), times fl32(scale_a * scale_b) once in
    FP32, then ``c`` added in FP32: cuBLASLt's FP8 GEMM with A and B scales and a bias
    epilogue, as `lp.amp.DelayedScaling` computes it."""
    from .tensorcore import driver
    from .tensorcore.catalogue import resolve_model
    from .tensorcore.instructions import MatrixUnit
    va, vb = (driver.Known(q._unblock(q.elements), q.elem) for q in (a, b))
    spec = resolve_model(model, "model")
    # E4M3 x E5M2 goes in as a pair where the unit has an instruction for it, else in
    # FP16, which holds both exactly (the Tensors' promotion, as DelayedScaling's).
    in_fmt = None if a.elem == b.elem or (isinstance(spec, MatrixUnit) and
                                          spec.mixed(a.elem, b.elem)) else FP16
    try:
        d = np.asarray(driver.matmul(va, vb, model=spec, in_fmt=in_fmt, out_fmt=FP32))
    except ValueError as e:
        raise ValueError(f"mx.matmul of per-tensor FP8: {e}") from None
    # The bias after the scales, always: an epilogue, as DelayedScaling adds it.
    return _scaled(d, float(quiet(_round, a.tensor_scale * b.tensor_scale, FP32)), c)


def _output_chunk(M, N, K, nscales, group, bound, fast=False):
    """(rows, columns) of the outputs one `matmul` step computes: the work of a chunk
    stays within half of ``bound``.

    Per output: its gathered row of a and column of b (2 * 8 * K bytes), their scales
    (2 * 8 * nscales), the instruction's int64 and float64 terms of one group (measured
    at 113 bytes per product and c in the E8M0 FP8 path: 128 * (group + 1)) and c, the
    result and their copies (64). The fast paths (``fast``,
    `lowprec.tensorcore.fastgroups`) gather nothing: about 320 bytes of arrays of the
    outputs (384 counted), their truncated sums and reference rows within a quarter of
    ``bound`` on top."""
    per_output = 384 if fast else 16 * K + 16 * nscales + 128 * (group + 1) + 64
    outputs = max(1, bound // 2 // per_output)
    nc = max(1, min(N, outputs))
    mc = max(1, min(M, outputs // nc))
    return mc, nc
