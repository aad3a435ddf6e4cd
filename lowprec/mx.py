"""Block-scaled formats (OCP Microscaling, NVFP4): `quantize`, `BlockScaled`, `matmul`.

A block-scaled array stores element codes of a small format and one scale per block of
consecutive elements along an axis: the MX formats (OCP Microscaling Formats v1.0,
§5-6: MXFP8 E4M3/E5M2, MXFP6 E3M2/E2M3, MXFP4 E2M1, MXINT8; E8M0 scales per 32) and
NVIDIA's NVFP4 (E2M1 elements, UE4M3 scales per 16, an FP32 per-tensor scale).
`quantize` computes the scales by a named rule and rounds the elements with the
rounding kernel; `BlockScaled.dequantize` gives the values back; `matmul` multiplies
two block-scaled arrays with a block-scaled instruction model of `lp.MODELS`. It
never computes in a format it does not name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .bits import decode, encode
from .formats import E8M0, FP4_E2M1, FP6_E2M3, FP6_E3M2, FP8_E4M3, FP8_E5M2, FP32, UE4M3, Format
from .rounding import round as _round
from .status import quiet

__all__ = ["quantize", "BlockScaled", "matmul", "SCHEMES", "SCALE_RULES"]

#: name -> (element format, or "int8"; scale format; block size). OCP MX v1.0 Table 1;
#: NVFP4: NVIDIA, "Introducing NVFP4" and arXiv 2509.25149.
SCHEMES: dict[str, tuple[Format | str, Format, int]] = {
    "mxfp8_e4m3": (FP8_E4M3, E8M0, 32), "mxfp8_e5m2": (FP8_E5M2, E8M0, 32),
    "mxfp6_e3m2": (FP6_E3M2, E8M0, 32), "mxfp6_e2m3": (FP6_E2M3, E8M0, 32),
    "mxfp4": (FP4_E2M1, E8M0, 32), "mxint8": ("int8", E8M0, 32),
    "nvfp4": (FP4_E2M1, UE4M3, 16),
}

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

    @property
    def elements(self) -> NDArray[np.float64]:
        """Element values (blocked axis last, padded), before scaling."""
        if self.elem == "int8":
            return self.codes.astype(np.float64) * _INT8_STEP
        assert isinstance(self.elem, Format)
        return np.asarray(decode(self.codes, self.elem), dtype=np.float64)

    @property
    def scales(self) -> NDArray[np.float64]:
        """Scale values, one per block (NaN for a NaN scale)."""
        return np.asarray(decode(self.scale_codes, self.scale_fmt), dtype=np.float64)

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


def _blocks(x, axis, block):
    x = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    n = x.shape[-1]
    pad = (-n) % block
    if pad:
        x = np.concatenate([x, np.zeros(x.shape[:-1] + (pad,))], axis=-1)
    return x.reshape(x.shape[:-1] + (x.shape[-1] // block, block))


def _e8m0_exponent(amax, emax_elem, max_elem, rule):
    """The scale exponents of blocks with largest magnitude amax > 0 (finite)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        if rule == "floor":
            return np.frexp(amax)[1] - 1 - emax_elem
        if rule == "ceil":
            # The least j with max_elem * 2**j >= amax, decided by exact comparisons
            # (max_elem * 2**j is a float64) around floor(log2) of the rounded quotient.
            k = np.frexp(amax / max_elem)[1] - 1
            j = k + 1
            j = np.where(amax <= max_elem * np.ldexp(1.0, k), k, j)
            return np.where(amax <= max_elem * np.ldexp(1.0, k - 1), k - 1, j)
        if rule == "rceil":
            q = np.asarray(quiet(_round, amax / max_elem, FP32))  # fl32 of the quotient
            m, e = np.frexp(q)
            return np.where(m == 0.5, e - 1, e)
        r = np.asarray(quiet(_round, amax / max_elem, E8M0))
        return np.frexp(r)[1] - 1


def quantize(x: ArrayLike, scheme: str, *, axis: int = -1, scale_rule: str = "floor",
             mode: str = "rne", rng: np.random.Generator | int | None = None,
             saturate: bool = True, tensor_scale: float | None = None) -> BlockScaled:
    """Quantize ``x`` to a block-scaled format along ``axis``.

    Parameters
    ----------
    x : array_like
        Real values (float64 after conversion); not modified.
    scheme : str
        A key of `SCHEMES`: ``"mxfp8_e4m3"``, ``"mxfp8_e5m2"``, ``"mxfp6_e3m2"``,
        ``"mxfp6_e2m3"``, ``"mxfp4"``, ``"mxint8"``, ``"nvfp4"``.
    axis : int
        The axis cut into blocks (32 elements, 16 for NVFP4; the last block is
        zero-padded).
    scale_rule : str
        For the E8M0 scales (`SCALE_RULES`): ``"floor"`` (OCP's), ``"ceil"``,
        ``"rceil"``, ``"even"``. NVFP4's UE4M3 scale is always amax / 6 divided by
        the tensor scale, rounded to nearest even (its recipe, arXiv 2509.25149).
    mode, rng : str, Generator or int
        Rounding of the elements (`lp.round`'s modes; ``"sr"`` draws from ``rng``).
    saturate : bool
        Clamp elements beyond the element format's max to it (OCP §6.3: normals are
        clamped); False sends them to NaN or inf as `lp.round` does.
    tensor_scale : float, optional
        NVFP4 only: the FP32 per-tensor scale; by default amax(x) / (6 * 448), so that
        the block scales use UE4M3's range.

    Returns
    -------
    BlockScaled

    Notes
    -----
    A block holding NaN or inf gets a NaN scale (OCP §6.3: the block then decodes as
    NaN); a block of zeros gets the least scale. The elements are ``x / scale``
    rounded into the element format: exact division by a power of two for the E8M0
    schemes; NVFP4 multiplies by the FP32 reciprocal of ``scale * tensor_scale`` and
    rounds that product to FP32 first, as its reference code does (arXiv
    2509.25149, App. B).

    Examples
    --------
    >>> import lowprec as lp
    >>> q = lp.mx.quantize([957.0] + [1.0] * 31, "mxfp8_e4m3")
    >>> float(q.dequantize()[0]), float(q.scales[0])      # the OCP floor rule clamps
    (896.0, 2.0)
    >>> float(lp.mx.quantize([957.0] + [1.0] * 31, "mxfp8_e4m3", scale_rule="ceil").dequantize()[0])
    960.0
    """
    if scheme not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}; valid: {', '.join(SCHEMES)}")
    if scale_rule not in SCALE_RULES:
        raise ValueError(f"unknown scale_rule {scale_rule!r}; valid: {', '.join(SCALE_RULES)}")
    elem, sfmt, block = SCHEMES[scheme]
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 0:
        raise ValueError("quantize needs an array of at least one dimension")
    axis = axis % arr.ndim
    v = _blocks(arr, axis, block)
    amax = np.abs(v).max(axis=-1)
    special = ~np.isfinite(v).all(axis=-1)
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
        e = np.clip(e, -127, 127)
        scale = np.ldexp(1.0, e.astype(np.int32))
        with np.errstate(all="ignore"):
            y = v / scale[..., None]     # exact: a power of two, results stay normal
    else:
        if tensor_scale is None:
            top = float(amax.max(initial=0.0))
            tensor_scale = float(_round(top / (6.0 * 448.0), FP32)) if top > 0 else 1.0
        ts = float(tensor_scale)
        scale = np.asarray(quiet(_round, amax / 6.0 / ts, UE4M3, saturate=True))
        with np.errstate(divide="ignore"):        # a zero scale: its block is all zero
            enc = np.asarray(quiet(_round, 1.0 / (scale * ts), FP32))   # the FP32 reciprocal
        enc = np.where(scale > 0, enc, 0.0)
        y = np.asarray(quiet(_round, v * enc[..., None], FP32))
    if elem == "int8":
        # y / 2**-6 / 2**7 is below 1 in magnitude for in-range values: rounding it into
        # a format whose grid there is 2**-7 rounds y / 2**-6 to an integer.
        t = np.asarray(_round(np.nan_to_num(y) / _INT8_STEP / 128.0, _INT8_GRID, mode,
                              rng=rng, saturate=True)) * 128.0
        codes = np.clip(t, -127, 127).astype(np.int8)     # int8 has no inf: always clamped
    else:
        assert isinstance(elem, Format)
        codes = np.asarray(encode(np.nan_to_num(y, nan=0.0, posinf=0.0, neginf=0.0), elem,
                                  mode, rng=rng, saturate=saturate))
    scale = np.where(special, np.nan, scale)
    scodes = np.asarray(encode(np.nan_to_num(scale, nan=np.nan), sfmt))
    return BlockScaled(scheme, codes.reshape(v.shape[:-2] + (-1,)), scodes, elem, sfmt,
                       block, axis, arr.shape, ts)


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
    """
    from .tensorcore.catalogue import resolve_model
    from .tensorcore.instructions import MatrixUnit
    unit = resolve_model(model, "model")
    if not isinstance(unit, MatrixUnit):
        raise ValueError(f"model {model!r} is not an instruction model with block scales")
    if len(a.shape) != 2 or len(b.shape) != 2 or a.axis != 1 or b.axis != 0:
        raise ValueError("mx.matmul takes a (M, K) array blocked along K (axis 1) and a "
                         "(K, N) array blocked along K (axis 0)")
    if a.shape[1] != b.shape[0] or a.block != b.block or a.scale_fmt != b.scale_fmt:
        raise ValueError("mx.matmul: the operands' K, block sizes and scale formats must agree")
    if "int8" in (a.elem, b.elem) or a.elem in (FP6_E2M3, FP6_E3M2) or \
            b.elem in (FP6_E2M3, FP6_E3M2):
        raise ValueError("no block-scaled instruction model takes MXINT8 or FP6 elements "
                         "(the simulator's vectors cover FP8 and FP4 only)")
    assert isinstance(a.elem, Format) and isinstance(b.elem, Format)
    ins = unit.instruction(a.elem, b.elem, scale=a.scale_fmt, scale_block=a.block)
    M, N = a.shape[0], b.shape[1]
    ea, eb = a.elements, b.elements                  # (M, Kp), (N, Kp)
    k = ins.block
    pad = (-ea.shape[-1]) % k
    sa, sb = a.scales, b.scales
    if pad:      # zero elements, unit scales: nothing added
        ea, eb = (np.concatenate([e, np.zeros((e.shape[0], pad))], axis=1) for e in (ea, eb))
        sa, sb = (np.concatenate([s, np.ones((s.shape[0], pad // a.block))], axis=1)
                  for s in (sa, sb))
    rows_a = np.repeat(ea, N, axis=0)
    rows_b = np.tile(eb, (M, 1))
    srow_a, srow_b = np.repeat(sa, N, axis=0), np.tile(sb, (M, 1))
    alpha = float(quiet(_round, a.tensor_scale * b.tensor_scale, FP32))
    c0 = np.zeros(M * N) if (c is None or alpha != 1.0) else np.broadcast_to(
        np.asarray(quiet(_round, np.asarray(c, dtype=np.float64), FP32)), (M, N)).reshape(-1)
    d = ins.dot(rows_a, rows_b, np.array(c0), a.elem, b.elem, FP32, srow_a, srow_b)
    if alpha != 1.0:
        d = np.asarray(quiet(_round, alpha * d, FP32))
        if c is not None:
            from .arith import add
            cc = np.broadcast_to(np.asarray(c, dtype=np.float64), (M, N)).reshape(-1)
            d = np.asarray(quiet(add, d, quiet(_round, cc, FP32), FP32))
    return d.reshape(M, N)
