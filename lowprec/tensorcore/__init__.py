"""Matrix products as low-precision hardware computes them, bit for bit.

`matmul` computes ``D = A @ B (+ C)`` under a *model* of how the products are summed:
``"exact"`` (one rounding of the exact dot product), ``"fp32"`` and ``"fp16"``
(left-to-right accumulation, every addition rounded) and the NVIDIA Tensor Core
block-FMA models of ``docs/design/TENSORCORE.md`` (`TensorCoreModel`: unnormalised exact
products, terms truncated to ``F`` fraction bits below the block's largest exponent,
one rounding per block). Every model is vectorised over the outputs (Python loops
run only over K-blocks and over chunks of outputs) and works on float64, float32 and
integer arrays whose exactness is argued where it is used. This module is a kernel: it takes
ndarrays and `Format`\\ s, returns float64 ndarrays, and must never import `Tensor`,
read a context default or keep state between calls.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from typing import TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..engine.checks import broadcast_shape, check_bool, check_int
from ..engine.eft import two_sum
from ..formats import BF16, FP8_E4M3, FP8_E5M2, FP16, FP32, TF32, Format, FormatLike
from ..formats import format as _format
from ..rounding import round as _round
from ..rounding import round_exact as _round_exact
from ..status import quiet, record, recording

__all__ = ["matmul", "TensorCoreModel", "MODELS", "MEMORY_BOUND", "Model", "resolve_model"]

#: Bytes of work buffers one `matmul` call allocates at most, whatever the shapes
#: and dtypes. On top come only 8 bytes per entry of a, b and c (their float64
#: values in the input and output formats) and of the result, 2 bytes per row of a
#: and column of b, and `lowprec.round`'s own few buffers (docs/rounding.md).
MEMORY_BOUND = 256 * 2**20

_ZERO_EXP = -16000          # exponent of a zero operand: no sum of two reaches any real one
_FLOOR_EXP = -600           # below every exponent a product or an addend can have



# -- models ----------------------------------------------------------------------

@dataclass(frozen=True)
class TensorCoreModel:
    """A parameterised Tensor Core block-FMA model (TENSORCORE.md §2).

    Each output is computed by ``ceil(K / block)`` block FMAs in increasing K order;
    the result of each, rounded to the output format, is the addend of the next. In
    one block FMA the products are exact and unnormalised (exponent ``e_a + e_b``),
    the reference exponent ``E`` is the largest exponent of the nonzero products and
    of the addend (at least ``elim``), every term's magnitude is truncated to
    ``fraction_bits`` bits below ``2**E``, the truncated terms are summed exactly and
    the sum is rounded once. Results beyond the output range are ±inf, even when
    rounding toward zero. NaN inputs, ``inf * 0`` and ``inf - inf`` give NaN.

    Parameters
    ----------
    block : int
        Products per block FMA (k).
    fraction_bits : int
        F, the bits kept below the reference exponent.
    out_rounding : {"rz", "rne"}
        Rounding of each block's FP32 result.
    out_bits : int
        Fraction bits kept in an FP32 result (13 for the "e8m13" FP8 paths).
    elim, elim_fp16 : int or None
        Floor on the reference exponent for FP32 and for FP16 output (None: none).
    fp16_output : bool
        Whether FP16 output is available (then rounded to nearest even).
    mma_split : bool
        FP8 through ``mma.sync`` on Hopper and Blackwell (§4): every 32 products split
        by ``k mod 4`` into two block FMAs of 16, then one correctly rounded addition
        of the addend.
    inputs : tuple of Format or str, or one Format or str
        Input formats the model takes; a single name or `Format` (``inputs="fp16"``)
        is a one-element tuple. Each must have at most 12 bits of precision and
        FP32's exponent range.
    variants : tuple of (format, TensorCoreModel) pairs, or a dict
        Other parameters for some input formats (a GPU runs TF32 or FP8 with other
        block sizes than FP16). Each model must take its format and have no
        variants of its own; no format may appear twice.
    name : str, optional
        The model's name in `MODELS`.
    doc : str
        Where the parameters come from; becomes the instance's ``__doc__``.

    Raises
    ------
    TypeError
        For a field of the wrong type (``fp16_output="no"``, ``block=2.0``), naming it.
    ValueError
        For a value of the right type that is not allowed, naming the field.

    Examples
    --------
    >>> import lowprec as lp
    >>> m = lp.TensorCoreModel(block=4, fraction_bits=23, inputs=("fp16",))
    >>> a = [[1.0, 1.0, 1.0, 1.0]]
    >>> b = [[2.0**-24]] * 4
    >>> m.for_format("fp16").block
    4
    >>> float(lp.matmul(a, b, model=m, c=[[1 - 2**-24]], in_fmt="fp16")[0, 0]) == 1 + 2**-23
    True
    """

    block: int = 8
    fraction_bits: int = 24
    out_rounding: str = "rz"
    out_bits: int = 23
    elim: int | None = None
    elim_fp16: int | None = None
    fp16_output: bool = True
    mma_split: bool = False
    inputs: tuple = (FP16, BF16, TF32, FP8_E4M3, FP8_E5M2)
    variants: tuple = ()
    name: str | None = field(default=None, compare=False)
    doc: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        def set_(attr, value):                  # the dataclass is frozen
            object.__setattr__(self, attr, value)

        for attr in ("block", "fraction_bits", "out_bits"):
            set_(attr, check_int(attr, getattr(self, attr), minimum=1))
        # Truncated terms are below 2**(F + 2); block + 1 of them must sum exactly
        # in float64 (53 bits).
        if self.fraction_bits + 2 + math.ceil(math.log2(self.block + 1)) > 53:
            raise ValueError(f"fraction_bits={self.fraction_bits} with block={self.block} "
                             "does not fit the exact 53-bit sum")
        if self.out_bits > 23:
            raise ValueError(f"out_bits must be at most 23 (FP32), got {self.out_bits}")
        if not isinstance(self.out_rounding, str):
            raise TypeError("out_rounding must be a str, 'rz' or 'rne'; got "
                            f"{type(self.out_rounding).__name__} {self.out_rounding!r}")
        if self.out_rounding not in ("rz", "rne"):
            raise ValueError(f"out_rounding must be 'rz' or 'rne', got {self.out_rounding!r}")
        for attr in ("elim", "elim_fp16"):
            value = getattr(self, attr)
            if value is not None:
                try:
                    value = check_int(attr, value)
                except TypeError:
                    raise TypeError(f"{attr} must be None or an int, got "
                                    f"{type(value).__name__} {value!r}") from None
                if not -300 <= value <= 300:
                    raise ValueError(f"{attr} must be None or an int in [-300, 300], "
                                     f"got {value!r}")
                set_(attr, value)
        for attr in ("fp16_output", "mma_split"):
            set_(attr, check_bool(attr, getattr(self, attr)))
        for attr in ("name", "doc"):
            value = getattr(self, attr)
            if not isinstance(value, str) and not (attr == "name" and value is None):
                allowed = "a str or None" if attr == "name" else "a str"
                raise TypeError(f"{attr} must be {allowed}, got {type(value).__name__} "
                                f"{value!r}")
        inputs = _formats("inputs", self.inputs)
        for f in inputs:
            # Exact float64 products; int16 exponent sums (1/16 units) with room for
            # the zero sentinel; every exponent far above the -600 floor.
            if f.p > 12 or f.emax > 127 or f.emin - f.mantissa_bits < -149:
                raise ValueError("block-FMA inputs need at most 12 bits of precision and "
                                 f"FP32's exponent range, got {f!r}")
        set_("inputs", inputs)
        set_("variants", _variants(self.variants))
        if not inputs and not self.variants:
            raise ValueError("inputs must name at least one format (or variants give some)")
        if self.doc:
            set_("__doc__", self.doc)

    def for_format(self, fmt: FormatLike) -> TensorCoreModel:
        """The parameters this model uses for input format ``fmt``.

        Raises `ValueError` when the model does not take ``fmt``.
        """
        fmt = _format(fmt)
        for f, model in self.variants:
            if f == fmt:
                return model
        if fmt in self.inputs:
            return self
        takes = sorted({f.name or repr(f) for f in
                        (*self.inputs, *(f for f, _ in self.variants))})
        raise ValueError(f"model {self.name or 'TensorCoreModel'!r} does not take "
                         f"{fmt.name or repr(fmt)} inputs; it takes {', '.join(takes)}")

    def out_formats(self, fmt: FormatLike) -> tuple[Format, ...]:
        """The output formats this model gives for input format ``fmt``."""
        p = self.for_format(fmt)
        return (FP32, FP16) if p.fp16_output else (FP32,)

    def default_out_format(self) -> Format:
        """The output format when ``out_fmt`` is not given: FP32."""
        return FP32


def _formats(name, value):
    """A model's ``inputs`` as a tuple of `Format`: one format spec (a name, a
    `Format`, a dtype) is a one-element tuple, as a user writing ``inputs="fp16"``
    means; anything else must be an iterable of specs."""
    if isinstance(value, (str, Format, np.dtype)) or (
            isinstance(value, type) and issubclass(value, np.generic)):
        value = (value,)
    try:
        items = tuple(value)
    except TypeError:
        raise TypeError(f"{name} must be a format name, a Format or a tuple of them, got "
                        f"{type(value).__name__} {value!r}") from None
    out = []
    for f in items:
        try:
            out.append(_format(f))
        except (TypeError, ValueError) as e:
            raise type(e)(f"{name}: {e}") from None
    return tuple(out)


def _variants(value):
    """A model's ``variants`` as a tuple of (Format, TensorCoreModel) pairs, checked:
    each model takes its format and has no variants of its own, no format twice."""
    if isinstance(value, dict):
        value = tuple(value.items())
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError("variants must be a tuple of (format, TensorCoreModel) pairs, got "
                        f"{type(value).__name__} {value!r}")
    pairs = []
    for pair in value:
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2
                and isinstance(pair[1], TensorCoreModel)):
            raise TypeError("variants must be a tuple of (format, TensorCoreModel) pairs, "
                            f"got an entry {pair!r}")
        (f,), model = _formats("variants", (pair[0],)), pair[1]
        if f not in model.inputs:
            takes = ", ".join(g.name or repr(g) for g in model.inputs)
            raise ValueError(f"variants: the model for {f.name or f!r} does not take it "
                             f"(its inputs: {takes})")
        if model.variants:
            raise ValueError(f"variants: the model for {f.name or f!r} has variants of "
                             "its own; give them to the outer model")
        if any(f == g for g, _ in pairs):
            raise ValueError(f"variants: {f.name or f!r} is given twice")
        pairs.append((f, model))
    return tuple(pairs)


@dataclass(frozen=True)
class _Accumulating:
    """Exact products summed left to right in ``accumulator`` (None: exactly)."""

    accumulator: Format | None
    name: str
    doc: str = field(default="", compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "__doc__", self.doc)

    def for_format(self, fmt):
        fmt = _format(fmt)
        # Products of two significands of at most 26 bits are exact in float64.
        if fmt.p > 26:
            raise ValueError(f"model {self.name!r} takes formats of at most 26 bits of "
                             f"precision (exact float64 products), got {fmt.name or fmt!r}")
        # ... and with exponents such that no product overflows or underflows float64.
        if 2 * (fmt.emax + 1) > 1023 or 2 * (fmt.emin - fmt.mantissa_bits) < -1074:
            raise ValueError(f"model {self.name!r} needs products that float64 holds "
                             f"exactly; the exponent range [{fmt.emin}, {fmt.emax}] of "
                             f"{fmt.name or fmt!r} is too wide")
        return self

    def out_formats(self, fmt):
        return None   # any format

    def default_out_format(self):
        # By value, not identity: a copied or unpickled "fp16" model is still FP16.
        return FP16 if self.accumulator == FP16 else FP32


_FASI = ("Fasi, Higham, Mikaitis, Pranesh, 'Numerical behavior of NVIDIA tensor cores', "
         "PeerJ CS 7:e330 (2021)")
_KM = ("Khattak & Mikaitis, 'Accurate models of NVIDIA tensor cores', arXiv 2512.07004, "
       "and their measurements in north-numerical-computing/MATLAB-tensor-core")
_MMASIM = "microsoft/MMA-Sim, arXiv 2511.10909"
_DSV3 = "DeepSeek-V3 technical report §3.5.2 (FP8 GEMM accumulation keeps about 14 bits)"
_PTX = "PTX ISA, mma / wgmma / tcgen05 instruction shapes"


def _tc(name, doc, **params):
    return TensorCoreModel(name=name, doc=doc, **params)


V100 = _tc(
    "v100", f"""Volta (V100) Tensor Cores, FP16 inputs.

    block 4 (a 16x16x16 product is 4 chained blocks of 4: {_FASI});
    F = 23, FP32 result rounded toward zero, no exponent floor for FP32 output,
    FP16 output rounded to nearest even with Elim = -19 ({_KM}).
    Reproduces v100_fp16 of the published data, and V100's non-monotonic sum.
    """, block=4, fraction_bits=23, elim=None, elim_fp16=-19, inputs=(FP16,))

T4 = _tc(
    "t4", f"""Turing (T4) Tensor Cores, FP16 inputs (unverified: no published data).

    block 8, F = 24, RZ to FP32, RNE to FP16, Elim -132 / -20, the parameters of
    {_KM}; T4's tensor cores were first measured by {_FASI}.
    """, block=8, fraction_bits=24, elim=-132, elim_fp16=-20, inputs=(FP16,))

_AMPERE_TF32 = TensorCoreModel(block=4, fraction_bits=24, elim=-132, fp16_output=False,
                               inputs=(TF32,), name="a100/tf32")
A100 = _tc(
    "a100", f"""Ampere (A100, A30, A2) Tensor Cores.

    FP16 and BF16: block 8 (m16n8k16 = blocks [0:8] then [8:16], {_PTX}), F = 24,
    RZ to FP32, RNE to FP16, Elim -132 (FP32 out) / -20 (FP16 out) ({_KM};
    first measurements of A100's tensor cores: {_FASI}).
    TF32: block 4, F = 24, FP32 output only, Elim -132 ({_KM}).
    Reproduces a100_fp16, a100_bf16, a100_tf32 of the published data. The Elim floor
    follows K&M; {_MMASIM} instead always aligns against c (a zero c counting as
    exponent -126); the two differ only when every term is below about 2**-126.
    """, block=8, fraction_bits=24, elim=-132, elim_fp16=-20, inputs=(FP16, BF16),
    variants=((TF32, _AMPERE_TF32),))

_ADA_FP8 = TensorCoreModel(block=16, fraction_bits=13, out_bits=13, elim=-132,
                           elim_fp16=None, inputs=(FP8_E4M3, FP8_E5M2), name="ada/fp8")
ADA = _tc(
    "ada", f"""Ada Lovelace (L40S, RTX 40) Tensor Cores.

    FP16, BF16: as A100 (block 8, F = 24, RZ / RNE, Elim -132 / -20); TF32: block 4.
    FP8 (E4M3, E5M2): an mma k32 is 2 blocks of 16 with F = 13; FP32 results keep
    13 fraction bits, rounded toward zero ("e8m13", the ~14 bits of {_DSV3});
    FP16 output is rounded to nearest even after each block, with no floor.
    Parameters and data: {_KM}. Reproduces every ada_* file of the published data.
    """, block=8, fraction_bits=24, elim=-132, elim_fp16=-20, inputs=(FP16, BF16),
    variants=((TF32, replace(_AMPERE_TF32, name="ada/tf32")),
              (FP8_E4M3, _ADA_FP8), (FP8_E5M2, _ADA_FP8)))

_HOPPER_TF32 = TensorCoreModel(block=8, fraction_bits=25, elim=-133, fp16_output=False,
                               inputs=(TF32,), name="h100/tf32")
_HOPPER_FP8 = TensorCoreModel(block=32, fraction_bits=13, out_bits=13, elim=-133,
                              elim_fp16=-133, inputs=(FP8_E4M3, FP8_E5M2), name="h100/fp8")
H100 = _tc(
    "h100", f"""Hopper (H100, H200) Tensor Cores, as cuBLAS drives them (wgmma).

    FP16, BF16: block 16, F = 25, RZ to FP32, RNE to FP16, Elim -133 / -21.
    TF32: block 8, F = 25, FP32 output only, Elim -133.
    FP8 (E4M3, E5M2) through wgmma: block 32, F = 13, FP32 results keep 13 fraction
    bits rounded toward zero ("e8m13", {_DSV3}), Elim -133; FP16 output of this
    path is rounded to nearest even (unverified).
    Parameters and data: {_KM}. Reproduces h100_fp16, h100_bf16, h100_tf32 and the
    FP32 (c = 0) results of h100_e4m3 / h100_e5m2.
    """, block=16, fraction_bits=25, elim=-133, elim_fp16=-21, inputs=(FP16, BF16),
    variants=((TF32, _HOPPER_TF32), (FP8_E4M3, _HOPPER_FP8), (FP8_E5M2, _HOPPER_FP8)))

_MMA_SPLIT = dict(block=16, fraction_bits=25, elim=-133, elim_fp16=-21, mma_split=True,
                  inputs=(FP8_E4M3, FP8_E5M2))
H100_MMA = _tc(
    "h100-mma", f"""Hopper FP8 (E4M3, E5M2) through mma.sync.

    Every 32 products are split by k mod 4 into {{0, 1}} and {{2, 3}}; the first
    half is a block FMA with c = 0, the second a block FMA with the first's result
    as c (each 16 products, F = 25, rounded to the output format: RZ for FP32, RNE
    for FP16, Elim -133 / -21), and the addend is added last with one correctly
    rounded addition. Grouping: {_MMASIM}; F and Elim: {_KM}. Reproduces the FP16
    results of h100_e4m3 / h100_e5m2 (sequential halves match only about 70%).
    """, **_MMA_SPLIT)

B200 = _tc(
    "b200", f"""Blackwell (B200) Tensor Cores, as cuBLAS drives them (tcgen05).

    FP16, BF16: block 16, F = 25, RZ to FP32, RNE to FP16, Elim -133 / -21.
    TF32: block 8, F = 25, FP32 output only. FP8 (E4M3, E5M2): block 32, F = 25,
    RZ / RNE, Elim -133 / -21 (unverified: no published data).
    Parameters and data: {_KM}. Reproduces b200_fp16, b200_bf16, b200_tf32.
    """, block=16, fraction_bits=25, elim=-133, elim_fp16=-21, inputs=(FP16, BF16),
    variants=((TF32, replace(_HOPPER_TF32, name="b200/tf32")),
              (FP8_E4M3, TensorCoreModel(block=32, fraction_bits=25, elim=-133,
                                         elim_fp16=-21, inputs=(FP8_E4M3, FP8_E5M2),
                                         name="b200/fp8")),
              (FP8_E5M2, TensorCoreModel(block=32, fraction_bits=25, elim=-133,
                                         elim_fp16=-21, inputs=(FP8_E4M3, FP8_E5M2),
                                         name="b200/fp8"))))

B200_MMA = _tc(
    "b200-mma", f"""Blackwell FP8 (E4M3, E5M2) through mma.sync.

    The same k mod 4 split as ``h100-mma`` ({_MMASIM}), F = 25, Elim -133 / -21
    ({_KM}). Reproduces every row of b200_e4m3 and b200_e5m2 (FP32 and FP16 output).
    """, **_MMA_SPLIT)

EXACT = _Accumulating(None, "exact", """Each output is the exact dot product plus c,
    rounded once (to nearest even) to out_fmt.

    Zeros are signed as IEEE 754 §6.3 signs the sum c + p_1 + ... + p_K taken one
    addition at a time in exact arithmetic (whatever the order): a nonzero sum that
    rounds to zero gives the zero of its own sign; a sum that is exactly zero is -0
    when every term is -0 (c, and each product, a zero product taking the exclusive
    or of its factors' signs: -0 + -0 = -0), and +0 otherwise (x + (-x) = +0 to
    nearest). Without c, c is +0, as in NumPy's matmul and BLAS: only an explicit
    c = -0 lets a sum of -0 products be -0. With K = 0 the result is c (+0 without
    it, NumPy's empty sum). An output format without -0 (fnuz) gives +0.
    """)
SEQ_FP32 = _Accumulating(FP32, "fp32", "Exact products added left to right to c, every "
                         "addition rounded to nearest even in FP32 (a CPU's float32 loop). "
                         "Zeros are signed by IEEE 754's rule for each addition; without c "
                         "the loop starts from +0 (0.0f); with K = 0 the result is c.")
SEQ_FP16 = _Accumulating(FP16, "fp16", "Exact products added left to right to c, every "
                         "addition rounded to nearest even in FP16. Zeros are signed by "
                         "IEEE 754's rule for each addition; without c the loop starts "
                         "from +0; with K = 0 the result is c.")

#: A model object: a `TensorCoreModel` or one of the accumulation models of `MODELS`.
Model: TypeAlias = "TensorCoreModel | _Accumulating"

#: Every named model, by the name `matmul` accepts.
MODELS: dict[str, Model] = {m.name: m for m in (
    EXACT, SEQ_FP32, SEQ_FP16, V100, T4, A100, ADA, H100, H100_MMA, B200, B200_MMA)}


# -- operands and shapes -----------------------------------------------------------

def _operand(x, name):
    """(values, format or None) of a duck-typed Tensor or of a plain array."""
    if hasattr(x, "fmt") and hasattr(x, "values"):
        return np.asarray(x.values, dtype=np.float64), _format(x.fmt)
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiub" and not (arr.dtype.kind == "V" and getattr(
            arr.dtype.type, "__module__", "").startswith("ml_dtypes")):
        raise TypeError(f"matmul: {name} must be real numbers, got dtype {arr.dtype}")
    return arr, None


def resolve_model(model: str | Model) -> Model:
    """The model object for ``model`` (a name in `MODELS` or a model object)."""
    if isinstance(model, (TensorCoreModel, _Accumulating)):
        return model
    names = ", ".join(MODELS)
    if not isinstance(model, str):
        raise TypeError(f"model must be a model name ({names}) or a lp.TensorCoreModel, "
                        f"got {type(model).__name__} {model!r}")
    spec = MODELS.get(model.lower())
    if spec is None:
        raise ValueError(f"unknown matmul model {model!r}; valid models: {names} "
                         "or a lp.TensorCoreModel")
    return spec


def _dtype_format(arr):
    """The format an array's dtype names (float16, float32, ml_dtypes' float types),
    or None: float64, integers, bools and lists say nothing about their format."""
    if arr.dtype.kind == "f" and arr.dtype.itemsize >= 8:
        return None
    if arr.dtype.kind not in "fV":
        return None
    try:
        return _format(arr.dtype)
    except (TypeError, ValueError):     # ml_dtypes' integer types (int4, ...)
        return None


def _input_format(av, af, bv, bf):
    """The input format without in_fmt: the operands' one format, from Tensors'
    ``fmt`` or from dtypes that name a format."""
    def told(fmt, arr):
        if fmt is not None:
            return fmt, f"a Tensor of {fmt.name or fmt!r}"
        return _dtype_format(arr), f"dtype {arr.dtype}"
    (fa, how_a), (fb, how_b) = told(af, av), told(bf, bv)
    if fa is not None and fa == fb:
        return fa
    if fa is not None and fb is not None:
        raise ValueError(f"matmul: operands have different formats ({how_a}, {how_b}); "
                         "convert one, or give in_fmt")
    raise ValueError(f"matmul needs in_fmt unless both operands say their format (Tensors "
                     f"of one format, or arrays of a float16, float32 or ml_dtypes dtype); "
                     f"got {how_a} and {how_b}: say which format the operands are in, "
                     "e.g. in_fmt='fp16'")


def _values_in(arr, fmt_of_arr, fmt):
    """float64 values of ``arr`` in ``fmt``: rounded (RNE) unless they already are.

    One float64 array of ``arr``'s shape; rounded a block at a time, so that
    rounding's own buffers stay within a sixteenth of `MEMORY_BOUND`."""
    if fmt_of_arr is None and _dtype_format(arr) == fmt:
        fmt_of_arr = fmt
    if fmt_of_arr == fmt:
        # Every value of a format narrower than float64 is a float64: exact.
        return arr if arr.dtype == np.float64 else arr.astype(np.float64)
    out = np.empty(arr.shape, dtype=np.float64)
    for idx in _blocks(arr.shape, max(1, MEMORY_BOUND // 16 // 24)):
        out[idx] = _round(arr[idx], fmt)
    return out


def _blocks(shape, limit):
    """Index tuples that cover an array of ``shape`` in C order, each selecting at most
    ``limit`` elements (at least one)."""
    if len(shape) == 0:
        yield ()
        return
    inner = math.prod(shape[1:])
    if inner <= limit:
        step = max(1, limit // max(1, inner))
        for i in range(0, shape[0], step):
            yield (slice(i, i + step),)
        return
    for i in range(shape[0]):
        for rest in _blocks(shape[1:], limit):
            yield (i,) + rest


def _format_arg(name, value):
    """`lowprec.format` of an argument, its errors naming the argument."""
    try:
        return _format(value)
    except (TypeError, ValueError) as e:
        raise type(e)(f"matmul: {name}: {e}") from None


def _numpy_shape_error(a_shape, b_shape):
    """Raise NumPy's own error for operands np.matmul would refuse."""
    dummy = np.zeros((), dtype=bool)
    np.matmul(np.broadcast_to(dummy, a_shape), np.broadcast_to(dummy, b_shape))


def _broadcast_batch(x, y):
    """`broadcast_shape` of two shapes, or None when they do not broadcast."""
    try:
        return broadcast_shape(tuple(x), tuple(y))
    except ValueError:
        return None


def _result_shape(a_shape, b_shape):
    if len(a_shape) == 0 or len(b_shape) == 0:
        _numpy_shape_error(a_shape, b_shape)
    a2 = a_shape if len(a_shape) > 1 else (1,) + a_shape
    b2 = b_shape if len(b_shape) > 1 else b_shape + (1,)
    if a2[-1] != b2[-2]:
        _numpy_shape_error(a_shape, b_shape)
    batch = _broadcast_batch(a2[:-2], b2[:-2])
    if batch is None:
        _numpy_shape_error(a_shape, b_shape)
    shape = batch + (a2[-2], b2[-1])
    squeeze = [i for i, keep in ((-2, len(a_shape) > 1), (-1, len(b_shape) > 1)) if not keep]
    return a2, b2, batch, shape, squeeze


# -- the driver ------------------------------------------------------------------

def matmul(a: ArrayLike, b: ArrayLike, *, model: str | Model = "fp32",
           c: ArrayLike | None = None, in_fmt: FormatLike | None = None,
           out_fmt: FormatLike | None = None) -> NDArray[np.float64] | np.float64:
    """Matrix product ``a @ b (+ c)`` as the model computes it, bit for bit.

    Parameters
    ----------
    a, b : array_like or Tensor-like
        Operands with NumPy ``matmul`` shapes: 2-D matrices, stacks of them
        (broadcast batch dimensions) or 1-D vectors. Objects with ``.fmt`` and
        ``.values`` (a `Tensor`) supply their format.
    model : str or TensorCoreModel
        ``"exact"``, ``"fp32"``, ``"fp16"``, a Tensor Core model (``"v100"``,
        ``"t4"``, ``"a100"``, ``"ada"``, ``"h100"``, ``"h100-mma"``, ``"b200"``,
        ``"b200-mma"``; see `MODELS`) or a custom `TensorCoreModel`.
    c : array_like, optional
        Addend, broadcast to the result's shape and rounded (RNE) to ``out_fmt``;
        +0 when absent. ``"exact"``, ``"fp32"`` and ``"fp16"`` sign zero results as
        IEEE 754 additions do (see their docs); in Tensor Core models a zero block
        sum is +0 (TENSORCORE.md §2).
    in_fmt : Format or str, optional
        The operands' format; plain arrays are rounded into it (RNE, recorded in
        `lp.flags()`). Without it, the operands must say their format, and say the
        same one: Tensors' ``fmt``, or the dtype of arrays of NumPy ``float16`` or
        ``float32`` or of an ml_dtypes float type (``bfloat16``, ``float8_e4m3fn``,
        ...). float64 arrays, integers and lists of Python floats say nothing (a
        float64 array is not taken as FP64 input): `ValueError`, as for operands of
        two formats (``float16 @ bfloat16``; `lowprec.tensors.matmul` on Tensors
        promotes instead).
    out_fmt : Format or str, optional
        Result format. Default FP32 (FP16 for the ``"fp16"`` model). Tensor Core
        models give FP32 or, where the hardware has it, FP16; ``"exact"``,
        ``"fp32"`` and ``"fp16"`` round their result to any format of at most 51
        bits of precision (a final RNE conversion after FP32/FP16 accumulation).

    Returns
    -------
    numpy.ndarray
        float64 values of ``out_fmt`` with NumPy's ``matmul`` result shape.

    Notes
    -----
    Every model is vectorised over the outputs and works on chunks of outputs and
    spans of K, so that the work buffers of one call stay below ``MEMORY_BOUND``
    (256 MiB) whatever the shapes (large K included) and the operands' dtypes. Peak
    memory is at most that plus 8 bytes per entry of ``a``, ``b``, ``c`` and the
    result (the operands' float64 values rounded into ``in_fmt``, or widened when
    their dtype is the format; ``c`` rounded to ``out_fmt``; the result), 2 bytes
    per row of ``a`` and column of ``b``, and the few buffers of `lowprec.round`
    (docs/rounding.md). Inf and NaN operands, and outputs that need the exact sum,
    are handled within the same bound.

    Exception flags: ``overflow`` counts outputs that are infinite from
    finite inputs, ``invalid`` outputs that are NaN from NaN-free inputs (inf * 0,
    inf - inf). The Tensor Core models floor the reference exponent at Elim as
    Khattak & Mikaitis do (MMA-Sim aligns against c instead; they differ only when
    every term is below about 2**-126, or 2**-19 for FP16 output).

    Examples
    --------
    >>> import lowprec as lp
    >>> a = [[1.0, 1.0, 1.0, 1.0]]
    >>> b = [[2.0**-24]] * 4
    >>> for model in ("exact", "fp32", "v100", "a100"):
    ...     print(model, lp.matmul(a, b, model=model, c=[[1.0]], in_fmt="fp16")[0, 0] - 1)
    exact 2.384185791015625e-07
    fp32 0.0
    v100 0.0
    a100 2.384185791015625e-07
    >>> lp.matmul([[1.0, 2.0]], [[3.0], [4.0]], model="h100", in_fmt="bf16", out_fmt="fp16")
    array([[11.]])
    >>> import numpy as np        # a float16 array says its format
    >>> lp.matmul(np.array([[1.0, 2.0**-11]], np.float16), np.ones((2, 1), np.float16))
    array([[1.00048828]])
    >>> lp.matmul([[1.0, 2.0]], [[3.0, 4.0]], in_fmt="fp16")
    Traceback (most recent call last):
    ...
    ValueError: matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc
    signature (n?,k),(k,m?)->(n?,m?) (size 1 is different from 2)
    """
    spec = resolve_model(model)
    (av, af), (bv, bf) = _operand(a, "operand 0 (a)"), _operand(b, "operand 1 (b)")
    a2, b2, batch, shape, squeeze = _result_shape(av.shape, bv.shape)
    if in_fmt is not None:
        fmt = _format_arg("in_fmt", in_fmt)
    else:
        fmt = _input_format(av, af, bv, bf)
    params = spec.for_format(fmt)
    if out_fmt is None:
        out = spec.default_out_format()
    else:
        out = _format_arg("out_fmt", out_fmt)
    allowed = spec.out_formats(fmt)
    if allowed is not None and out not in allowed:
        raise ValueError(f"model {spec.name or 'TensorCoreModel'!r} with "
                         f"{fmt.name or fmt!r} inputs gives "
                         f"{' or '.join(str(f.name) for f in allowed)} output, not "
                         f"{out.name or out!r}")
    if allowed is None and out.p > 51:
        raise ValueError(f"out_fmt must have at most 51 bits of precision, got {out!r}")

    av, bv = _values_in(av, af, fmt), _values_in(bv, bf, fmt)
    av, bv = av.reshape(a2), bv.reshape(b2)
    if c is None:
        cv = np.zeros((), dtype=np.float64)
    else:
        cv = _values_in(_operand(c, "c")[0], None, out)
        target = tuple(s for i, s in enumerate(shape) if i - len(shape) not in squeeze)
        if _broadcast_batch(cv.shape, target) != target:
            raise ValueError(f"matmul: c of shape {cv.shape} does not broadcast to the "
                             f"result shape {_squeezed(shape, squeeze)}")
        if squeeze:
            cv = np.expand_dims(cv, tuple(squeeze)) if cv.ndim else cv
    cv = np.broadcast_to(cv, shape)

    kernel: _BlockFMA | _Exact | _Sequential
    if isinstance(params, TensorCoreModel):
        kernel = _BlockFMA(params, fmt, out)
    elif params.accumulator is None:
        kernel = _Exact(fmt, out)
    else:
        kernel = _Sequential(fmt, params.accumulator, out)
    result = _run_chunks(kernel, av, bv, cv, batch, shape)
    if recording() is not None:
        _record_flags(result, av, bv, cv)
    result = result.reshape(_squeezed(shape, squeeze))
    return result[()] if result.ndim == 0 else result


def _squeezed(shape, squeeze):
    return tuple(s for i, s in enumerate(shape) if i - len(shape) not in squeeze)


def _run_chunks(kernel, a, b, c, batch, shape):
    """Apply ``kernel`` to chunks of outputs; each chunk's work stays under the bound.

    The bound is shared out: half to the chunk's per-output arrays
    (``kernel.bytes_per_output``), a quarter to copies of the operands' entries in
    one span of K (``kernel.entry_bytes`` each, spans of at least ``kernel.k_unit``),
    and a quarter to gathered copies of several small matrices of a stack (or, in
    the exact model, of the rows and columns of outputs summed exactly).
    """
    M, K = a.shape[-2:]
    N = b.shape[-1]
    out = np.empty(shape, dtype=np.float64)
    nb = math.prod(batch)
    if out.size == 0:
        return out
    if K == 0:
        with np.errstate(all="ignore"):
            out[...] = kernel.empty(c)
        return out
    per_output = kernel.bytes_per_output(K) + 8          # + a gathered c
    outputs = max(1, min(kernel.target_outputs(K), MEMORY_BOUND // 2 // per_output))
    # Rows plus columns of one chunk whose entries of a span of k_unit fit a quarter.
    width = max(2, MEMORY_BOUND // 4 // (kernel.k_unit * kernel.entry_bytes))
    if M * N > outputs or M + N > width:
        nc = max(1, min(N, outputs, width - 1))
        mc = max(1, min(M, outputs // nc, width - nc))
        bc = 1
    else:
        mc, nc = M, N
        # Gathered operand copies of several matrices: a quarter of the bound.
        bc = max(1, min(nb, outputs // (M * N), width // (M + N),
                        MEMORY_BOUND // 4 // (8 * (M + N) * K)))
    a_full = np.broadcast_to(a, batch + (M, K))
    b_full = np.broadcast_to(b, batch + (K, N))
    c_full = np.broadcast_to(c, batch + (M, N))
    out_flat = out.reshape((nb, M, N))
    with np.errstate(all="ignore"):
        for b0 in range(0, nb, bc):
            b1 = min(nb, b0 + bc)
            if bc == 1:
                idx = np.unravel_index(b0, batch) if batch else ()
                ab, bb, cb = a_full[idx][None], b_full[idx][None], c_full[idx][None]
            else:   # gathered copies of at most bc matrices
                idx = np.unravel_index(np.arange(b0, b1), batch)
                ab, bb, cb = a_full[idx], b_full[idx], c_full[idx]
            for m0 in range(0, M, mc):
                for n0 in range(0, N, nc):
                    rows, cols = slice(m0, m0 + mc), slice(n0, n0 + nc)
                    out_flat[b0:b1, rows, cols] = kernel(
                        ab[:, rows, :], bb[:, :, cols], cb[:, rows, cols])
            del ab, bb, cb
    return out


def _record_flags(result, a, b, c):
    """overflow: infinite outputs of finite inputs; invalid: NaN outputs of NaN-free ones.

    Masks of one byte per row of ``a`` and column of ``b``; the per-output tests run a
    block of outputs at a time."""
    row_fin, row_nan = _finite_and_nan(a, -1)
    col_fin, col_nan = _finite_and_nan(b, -2)
    shape = result.shape
    row_fin, row_nan = (np.broadcast_to(x[..., :, None], shape) for x in (row_fin, row_nan))
    col_fin, col_nan = (np.broadcast_to(x[..., None, :], shape) for x in (col_fin, col_nan))
    c = np.broadcast_to(c, shape)
    overflow = invalid = 0
    for idx in _blocks(shape, max(1, MEMORY_BOUND // 64)):
        finite_in = row_fin[idx] & col_fin[idx] & np.isfinite(c[idx])
        overflow += int(np.count_nonzero(np.isinf(result[idx]) & finite_in))
        del finite_in
        nan_in = row_nan[idx] | col_nan[idx] | np.isnan(c[idx])
        invalid += int(np.count_nonzero(np.isnan(result[idx]) & ~nan_in))
    record(overflow=overflow, invalid=invalid)


def _finite_and_nan(x, axis):
    """Whether every entry along ``axis`` is finite, and whether one is NaN, a span of
    ``axis`` at a time."""
    x = np.moveaxis(x, axis, -1)
    K = x.shape[-1]
    fin = np.ones(x.shape[:-1], dtype=bool)
    nan = np.zeros(x.shape[:-1], dtype=bool)
    step = max(1, MEMORY_BOUND // 64 // max(1, fin.size))
    for j in range(0, K, step):
        span = x[..., j:j + step]
        fin &= np.isfinite(span).all(axis=-1)
        nan |= np.isnan(span).any(axis=-1)
    return fin, nan


def _k_spans(K, k, width, bytes_per_entry):
    """Slices of range(K), each a multiple of ``k`` long, so that copies of the
    operands' entries in one slice (``width`` rows and columns of them, at
    ``bytes_per_entry`` each) stay under a quarter of ``MEMORY_BOUND``."""
    span = max(k, (MEMORY_BOUND // 4 // max(1, width * bytes_per_entry)) // k * k)
    return [slice(j, min(K, j + span)) for j in range(0, K, span)]


# -- exponents and output rounding -------------------------------------------------

_EXP_MASK = np.uint64(0x7FF0_0000_0000_0000)


def _exponents(x, emin, bias=0, unit=1):
    """int16 ``(max(floor(log2|x|), emin) + bias) * unit`` of float64 values;
    `_ZERO_EXP` for zeros, ``bias * unit`` for inf and NaN (their terms are inf or NaN
    whatever the alignment)."""
    # Values of formats of at most 12 bits are normal float64s: the exponent field is exact.
    bits = np.bitwise_and(x.view(np.uint64), _EXP_MASK)
    bits >>= np.uint64(52)
    e = bits.astype(np.int16)
    del bits
    e -= 1023
    np.maximum(e, emin, out=e)
    e[e > 1000] = 0
    e += bias
    e *= unit
    e[x == 0] = _ZERO_EXP
    return e


def _pow2(e):
    """2.0**e for an integer array with -1022 <= e <= 1023, built from its bits."""
    return ((e.astype(np.int64) + 1023).astype(np.uint64) << np.uint64(52)).view(np.float64)


def _round_fp16(s):
    """RNE of float64 values to FP16 (IEEE overflow, signed zeros, inf and NaN kept):
    five fast passes where NumPy's float64 -> float16 cast is done in software."""
    c = (s.view(np.uint64) & _EXP_MASK).view(np.float64)   # 2**floor(log2|s|)
    np.maximum(c, 2.0**-14, out=c)                          # subnormals: quantum 2**-24
    # c = 1.5 * 2**(e + 42) has float64 ulp 2**(e - 10), FP16's quantum at s, and
    # s + c stays in c's binade: fl(s + c) - c is s rounded to nearest even, exactly.
    c *= 1.5 * 2.0**42
    out = s + c
    out -= c
    np.copysign(out, s, out=out)                            # a zero keeps s's sign
    top = np.max(np.abs(out), initial=0.0)
    if not top <= 65504.0:                                  # overflow, inf or NaN
        beyond = ~(np.abs(out) <= 65504.0)
        sb = s[beyond]
        out[beyond] = np.where(np.isnan(sb), sb, np.copysign(np.inf, sb))  # NaN keeps its sign
    return out


def _to_output(d, fmt, mode, bits, extremes):
    """Round exact float64 values ``d`` to ``fmt`` (FP32 keeping ``bits`` fraction bits,
    or FP16) by ``mode``; results beyond the range are ±inf, even under RZ (§2.8).

    FP32 with RZ works in place; ``extremes`` says whether some result may lie below
    2**-126 and whether some may reach 2**128. Returns the result and whether some
    nonzero result lies below 2**-126.
    """
    if fmt == FP32 and mode == "rz":
        may_be_tiny, may_be_big = extremes
        tiny = False
        if may_be_tiny:
            mag = np.abs(d)
            small = (mag < 2.0**-126) & (mag != 0)
            if small.any():
                tiny = True
                q = 126 + bits      # the subnormal quantum is 2**-(126 + bits)
                d[small] = np.trunc(d[small] * 2.0**q) * 2.0**-q
        if may_be_big:
            big = (np.abs(d) >= 2.0**128) & np.isfinite(d)
            d[big] = np.copysign(np.inf, d[big])
        # Clearing low bits of a float64 truncates toward zero (normal FP32 range;
        # subnormal results are already multiples of their quantum, inf stays inf).
        d.view(np.uint64)[...] &= np.uint64(~((1 << (52 - bits)) - 1) & 0xFFFF_FFFF_FFFF_FFFF)
        return d, tiny
    if fmt == FP32 and bits == 23:
        out = d.astype(np.float32).astype(np.float64)   # one IEEE rounding of a float64
    elif fmt == FP16:
        out = _round_fp16(d)
    else:   # FP32 keeping fewer bits, to nearest: past the top is 2**128, so inf
        out = quiet(_round, d, Format(8, bits), mode)
    small = (out != 0) & (np.abs(out) < 2.0**-126)
    return out, bool(small.any())


# -- Tensor Core block FMAs --------------------------------------------------------

# The int16 lane of a uint64 that holds its top 16 bits.
_TOP_LANE = 3 if np.little_endian else 0


class _BlockFMA:
    """Chained block FMAs of one `TensorCoreModel` for one input and output format.

    Work layout: block index first, ``(k + 1, batch, rows, cols)``, so that per-output
    arrays (the scale, the addend) broadcast over the leading axis and every inner
    loop runs over contiguous columns; row ``k`` holds the addend's term. Exponents
    are int16 in units of 1/16, so that the largest one, written into the top 16
    bits of a zeroed uint64, is directly the bit pattern of ``2.0**E``.
    """

    def __init__(self, params, fmt, out):
        self.p, self.fmt, self.out = params, fmt, out
        self.fp16 = out == FP16
        elim = params.elim_fp16 if self.fp16 else params.elim
        self.floor16 = 16 * (1023 + (_FLOOR_EXP if elim is None else elim))   # biased
        self.mode = "rne" if self.fp16 else params.out_rounding
        self.bits = 10 if self.fp16 else params.out_bits
        self.k = 32 if params.mma_split else params.block
        F = self.F = params.fraction_bits
        self.scale_bits = np.uint64((2046 + F) << 52)   # minus bits of 2**E: 2**(F - E)
        self.f_bits = np.uint64(F << 52)                # bits of 2**E minus this: 2**(E - F)
        # |sum| < 2**(E + 3 + log2(k + 1)) and a nonzero sum is at least 2**(E - F).
        self.headroom = 3 + math.ceil(math.log2(self.k + 2))

        self.k_unit = self.k
        # Bytes per operand entry of a span: float64, float32 and int16 exponent
        # copies (28), a temporary of `_exponents` and a finiteness mask; with the
        # mma split, the two halves' gathered copies of one block besides.
        self.entry_bytes = 40 + (28 if params.mma_split else 0)

    def target_outputs(self, K):
        return max(1, (1 << 18) // min(self.k, K))   # a 2 MiB float64 work array

    def bytes_per_output(self, K):
        # Per block: float64, int16, float32 and int32 terms; per output: about 9
        # work arrays and at most 10 temporaries of 8 bytes (rounding the result).
        return 18 * (min(self.k, K) + 1) + 160

    def empty(self, c):
        return c + 0.0

    def __call__(self, a, b, c):
        K = a.shape[-1]
        d = np.array(c, dtype=np.float64)
        shape = d.shape
        k = min(self.k, K)
        # Whether an inf or NaN has been seen (in c, or in an operand of this span or
        # an earlier one): the int32 path cannot carry them.
        self.special = not np.isfinite(d).all()
        self.e = np.empty((k + 2,) + shape, dtype=np.int16)
        self.e[-1] = self.floor16
        self.lanes = np.zeros(shape, dtype=np.uint64)
        self.lane16 = self.lanes.view(np.int16).reshape(shape + (4,))[..., _TOP_LANE]
        self.e16 = np.empty(shape, dtype=np.int16)
        self.ebits = np.empty(shape, dtype=np.uint64)
        self.cbits = np.empty(shape, dtype=np.uint64)
        self.s = np.empty(shape)
        self.t = None                     # float64 terms: made on first use
        self.t_shape = (k + 1,) + shape
        # Products exactly float32 and sums of truncated terms inside int32: the
        # products can be formed in float32 and summed as int32 (half the traffic).
        self.narrow = (_products_fit_float32(self.fmt)
                       and (k + 1) * 2 ** (self.F + 2) <= 2**31)
        self.c_in_int32 = k * 2 ** (self.F + 2) + 2 ** (self.F + 1) <= 2**31
        if self.narrow:
            self.t32 = np.empty((k,) + shape, dtype=np.float32)
            self.ti = np.empty((k + 1,) + shape, dtype=np.int32)
            self.tc = np.empty(shape)
            self.si = np.empty(shape, dtype=np.int32)
            self.scale32 = np.empty(shape, dtype=np.float32)
        tiny = bool(np.any((d != 0) & (np.abs(d) < 2.0**-126)))
        width = a.shape[0] * (a.shape[1] + b.shape[2])
        for span in _k_spans(K, self.k, width, self.entry_bytes):
            at = np.ascontiguousarray(np.moveaxis(a[..., span], -1, 0))[..., None]
            bt = np.ascontiguousarray(np.moveaxis(b[:, span, :], 1, 0))[:, :, None, :]
            if not self.special:
                self.special = not (np.isfinite(at).all() and np.isfinite(bt).all())
            # at: (K, bc, mc, 1), bt: (K, bc, 1, nc). Exponents in 1/16 units:
            # (1023 + 2 * 127) * 16 and 2 * _ZERO_EXP fit in int16.
            ea = _exponents(at, self.fmt.emin, bias=1023, unit=16)
            eb = _exponents(bt, self.fmt.emin, unit=16)
            at32 = at.astype(np.float32) if self.narrow else None
            bt32 = bt.astype(np.float32) if self.narrow else None
            for j0 in range(0, at.shape[0], self.k):
                blk = slice(j0, j0 + self.k)
                ops = (at[blk], bt[blk], at32[blk] if self.narrow else None,
                       bt32[blk] if self.narrow else None, ea[blk], eb[blk])
                if self.p.mma_split:
                    d, tiny = self._mma_split(ops, d, tiny)
                else:
                    d, tiny = self._block(ops, d, tiny)
        return d.copy() if d is self.s else d

    def _mma_split(self, ops, c, tiny):
        """§4: halves {k mod 4 in (0, 1)} and {2, 3}, then one rounded addition of c."""
        k = np.arange(ops[0].shape[0])
        g1, g2 = k[k % 4 < 2], k[k % 4 >= 2]
        c = np.array(c)                                  # the work buffers are reused
        d1, tiny1 = self._block([None if x is None else x[g1] for x in ops],
                                np.zeros_like(c), False)
        d2, _ = self._block([None if x is None else x[g2] for x in ops], d1, tiny1)
        # Both are FP32 (FP16) values: float64 then FP32 (FP16) is one rounding
        # (53 >= 2 * 24 + 2, Figueroa's double-rounding theorem).
        return _to_output(d2 + c, self.out, "rne", 10 if self.fp16 else 23, None)

    def _block(self, ops, c, c_tiny):
        """One block FMA d = c + sum(a_i * b_i) for every output of the chunk (§2)."""
        a, b, a32, b32, ea, eb = ops
        kk = a.shape[0]
        e, ebits, cbits = self.e[:kk + 2], self.ebits, self.cbits
        # E = max of e_a + e_b over nonzero products, of e_c (row kk) and of Elim
        # (row kk + 1), biased, in 1/16 units.
        np.add(ea, eb, out=e[:kk])
        # The top 16 bits of a float64 are sign, exponent, 4 fraction bits: masked,
        # 16 * its biased exponent (0 for c = 0, below every floor).
        top = np.ascontiguousarray(c).view(np.uint16).reshape(c.shape + (4,))
        np.bitwise_and(top[..., _TOP_LANE], np.uint16(0x7FF0), out=e.view(np.uint16)[kk])
        if c_tiny:                                       # e_c = max(floor(log2|c|), -126)
            ec = e[kk]
            ec[(ec > 0) & (ec < 16 * (1023 - 126))] = 16 * (1023 - 126)
        if kk < self.k:
            e[kk + 1] = self.floor16                     # (row k + 1 holds it already)
        np.maximum.reduce(e, axis=0, out=self.e16)
        np.copyto(self.lane16, self.e16)                 # self.lanes: bits of 2**E
        lowest = int(self.e16.min()) // 16 - 1023
        highest = int(self.e16.max()) // 16 - 1023
        # An inf or NaN c (E = 1024) leaves both scales normal: its own term decides.
        scale = np.subtract(self.scale_bits, self.lanes, out=cbits).view(np.float64)
        inverse = np.subtract(self.lanes, self.f_bits, out=ebits).view(np.float64)
        # Terms: exact products (at most 2 * 12 significant bits) and c, scaled by a
        # power of two, then truncated toward zero: sign * floor(|term| * 2**(F - E)).
        if self.narrow and not self.special:
            s = self._narrow_sum(a32, b32, c, scale, inverse, lowest)
        else:
            if self.t is None:
                self.t = np.empty(self.t_shape)
            t = self.t[:kk + 1]
            np.multiply(a, b, out=t[:kk])
            np.multiply(t[:kk], scale, out=t[:kk])
            np.multiply(c, scale, out=t[kk])
            np.trunc(t, out=t)
            # The terms are integers below 2**(F + 2): their float64 sum is exact.
            s = np.add.reduce(t, axis=0, initial=0.0, out=self.s)   # 0 sums to +0
            s *= inverse                                 # exact: a power of two
        big = highest + self.headroom >= 128
        d, tiny = _to_output(s, self.out, self.mode, self.bits,
                             (lowest - self.F < -126, big))
        if (big or self.fp16) and not self.special:
            # An overflow (FP16 output: past 65504) makes the next block's c infinite,
            # which the int32 path cannot carry.
            self.special = not np.isfinite(d).all()
        return d, tiny

    def _narrow_sum(self, a32, b32, c, scale, inverse, lowest):
        """The scaled sum of the truncated terms, with float32 products and int32 sums."""
        kk = a32.shape[0]
        t32, ti = self.t32[:kk], self.ti[:kk + 1]
        if lowest < self.F - 126:
            # Nonzero products have exponents far above 2**-100, so a scale clamped
            # at 2**127 (float32's largest power of two) only ever multiplies zeros.
            np.copyto(self.scale32, np.minimum(scale, 2.0**127), casting="unsafe")
        else:
            np.copyto(self.scale32, scale, casting="unsafe")   # exact: a power of two
        np.multiply(a32, b32, out=t32)           # exact: products fit float32
        np.multiply(t32, self.scale32, out=t32)  # exact, or below 1 (truncated to 0)
        np.copyto(ti[:kk], t32, casting="unsafe")   # float -> int conversion truncates
        tc = np.multiply(c, scale, out=self.tc)  # before self.s, which may be c, is written
        if self.c_in_int32:
            np.copyto(ti[kk], tc, casting="unsafe")
            # kk + 1 terms, the products' below 2**(F + 2), c's below 2**(F + 1): the
            # int32 sum is exact (checked in __call__); int to float64 is exact.
            np.add.reduce(ti, axis=0, out=self.si, dtype=np.int32)
            return np.multiply(self.si, inverse, out=self.s)   # 0 gives +0
        np.add.reduce(ti[:kk], axis=0, out=self.si, dtype=np.int32)
        np.trunc(tc, out=tc)
        s = np.add(self.si, tc, out=self.s)      # exact: integers below 2**53; 0 is +0
        s *= inverse                             # exact: a power of two
        return s


# -- sequential accumulation -------------------------------------------------------

def _products_fit_float32(fmt):
    """Whether every product of two ``fmt`` values is exactly a normal float32 (or 0)."""
    return (2 * fmt.p <= 24 and 2 * (fmt.emax + 1) <= 127
            and 2 * (fmt.emin - fmt.mantissa_bits) >= -126)


class _Sequential:
    """Exact products added left to right, every addition rounded (RNE) to ``acc``."""

    def __init__(self, fmt, acc, out):
        self.fmt, self.acc, self.out = fmt, acc, out
        self.float32 = acc == FP32 and _products_fit_float32(fmt)
        # When float64 then acc is one rounding of acc + p:
        # FP32: both have at most 24 bits (53 >= 2 * 24 + 2, Figueroa's theorem).
        # FP16, products of at most 22 bits: acc + p is exact in float64 unless
        # |p| < 2**-30 |acc| (both roundings give acc) or |p| >= 2**17 (both overflow).
        self.innocuous = 2 * fmt.p <= (24 if acc == FP32 else 22)

    #: Smallest span of K, and bytes per operand entry of a span (float32 copies).
    k_unit, entry_bytes = 1, 8

    def target_outputs(self, K):
        return 1 << 15

    def bytes_per_output(self, K):
        # The accumulator, a product, a sum and TwoSum's error with their
        # temporaries, the final rounding: at most 12 float64 arrays.
        return 96

    def empty(self, c):
        return self._finish(self._cast(np.array(c, dtype=np.float64)))   # no additions: c

    def _cast(self, s):
        if self.acc == FP32:
            return s.astype(np.float32).astype(np.float64)   # one IEEE rounding
        return _round_fp16(s)

    def _finish(self, d):
        return d if self.out == self.acc else quiet(_round, d, self.out)

    def __call__(self, a, b, c):
        K = a.shape[-1]
        spans = _k_spans(K, 1, a.shape[0] * (a.shape[1] + b.shape[2]), self.entry_bytes)
        if self.float32:
            # Products are exact float32s and float32 addition is correctly rounded.
            acc = c.astype(np.float32)
            p = np.empty_like(acc)
            for span in spans:
                a32, b32 = a[..., span].astype(np.float32), b[:, span].astype(np.float32)
                for k in range(a32.shape[-1]):
                    np.multiply(a32[..., :, k, None], b32[..., None, k, :], out=p)
                    acc += p
            return self._finish(acc.astype(np.float64))
        acc = self._cast(np.array(c, dtype=np.float64))
        p = np.empty_like(acc)
        for k in range(K):
            # Products of two significands of at most 26 bits are exact in float64.
            np.multiply(a[..., :, k, None], b[..., None, k, :], out=p)
            if self.innocuous:
                acc = self._cast(acc + p)
                continue
            s, t = two_sum(acc, p)
            acc = self._cast(s)
            fix = (t != 0) & np.isfinite(s)
            if fix.any():
                acc[fix] = quiet(_round_exact, s[fix], t[fix], self.acc)
        return self._finish(acc)


# -- exact dot products --------------------------------------------------------------

def _ro_add(x, y):
    """Round-to-odd at 53 bits of the exact sum x + y."""
    s, t = two_sum(x, y)
    move = (t != 0) & ((s.view(np.uint64) & np.uint64(1)) == 0)
    if move.any():
        s[move] = np.nextafter(s[move], np.copysign(np.inf, t[move]))
    return s


def _exact_round(blocks, m, out):
    """RN_out of the exact sum of each row of the terms (finite float64 values) that
    ``blocks()`` yields as (n, w) blocks of columns, m terms per row in all.

    The sum is split into levels of F bits below each row's largest exponent: level
    l holds the integers trunc(r / q_l) of what previous levels left, summed exactly
    (over every block: the quanta q_l depend only on the row's top and on l).
    The level sums are carry-normalised to nonnegative digits (sign taken out),
    added from the bottom with round-to-odd at 53 bits, and rounded once to ``out``
    (round-to-odd with 2 spare bits makes the second rounding innocuous). The
    blocks are made twice (for the tops, then for the levels), so that only one
    block of terms is held at a time; a lone block may be handed out twice, as the
    first pass only reads it.
    """
    F = 52 - math.ceil(math.log2(m + 1))   # m integers below 2**F sum exactly in float64
    mag = None
    for terms in blocks():
        top_of_block = np.abs(terms).max(axis=1, initial=0.0)
        mag = top_of_block if mag is None else np.maximum(mag, top_of_block)
    n = mag.size
    top = np.where(mag > 0, np.frexp(mag)[1], 0)      # |terms| < 2**top
    levels, q_exps = [], []
    for r in blocks():                     # each block is a fresh array: r is ours
        q_exp = top - F
        for lvl in itertools.count():
            if lvl == len(levels):
                levels.append(np.zeros(n))
                q_exps.append(q_exp)
            inv, q = _pow2(-q_exp)[:, None], _pow2(q_exp)
            t = np.trunc(r * inv)
            levels[lvl] += t.sum(axis=1)     # exact: at most m integers below 2**F
            r -= t * q[:, None]              # exact: the bits of r below q
            del t
            if not r.any():
                break
            # Rows with bits left have them above 2**-1000 (operands and c are far
            # from it).
            q_exp = np.maximum(q_exp - F, -1000)
    quanta = [_pow2(e) for e in q_exps]
    sign = np.ones(n)
    for _ in range(2):   # the second pass sees |X|: the top is then nonnegative
        digits, carry = [], np.zeros(n)
        for lvl in reversed(levels[1:]):
            v = sign * lvl + carry
            carry = np.floor(v * 2.0**-F)
            digits.append(v - carry * 2.0**F)   # in [0, 2**F)
        head = sign * levels[0] + carry
        sign = np.where(head < 0, -sign, sign)
        if not (head < 0).any():
            break
    x = np.zeros(n)
    for dgt, q in zip(digits, reversed(quanta[1:])):
        x = _ro_add(dgt * q, x)
    x = _ro_add(head * quanta[0], x)
    # x is |X| rounded to odd, zero only when X is. A zero X is +0 (x + (-x) to
    # nearest; rows of zeros only are summed exactly and never come here); a nonzero
    # X that rounds to zero keeps its sign.
    d = np.copysign(quiet(_round, x, out), sign)
    d[x == 0] = 0.0
    return d


def _blas(a, b, out):
    """float64 matmul of (n, M, K) and (n, K, N) stacks into ``out``; 2-D when n == 1
    (BLAS's fast path)."""
    if a.shape[0] == 1:
        np.matmul(a[0], b[0], out=out[0])
    else:
        np.matmul(a, b, out=out)
    return out


class _Exact:
    """One rounding of the exact dot product plus c.

    A float64 product (BLAS) and a rigorous error bound settle almost every output;
    where the bound straddles a rounding boundary the exact sum is computed by
    `_exact_round` on the gathered rows and columns.
    """

    def __init__(self, fmt, out):
        self.fmt, self.out = fmt, out

    #: Smallest span of K, and bytes per operand entry of a span: a finiteness mask,
    #: a copy without inf and NaN, the quanta, the magnitudes (see __call__).
    k_unit, entry_bytes = 1, 32

    def target_outputs(self, K):
        return 1 << 22          # BLAS wants large blocks; operands are views, not copies

    def bytes_per_output(self, K):
        # y, bound, the BLAS product, c's quanta and q, y -+ bound, lo, d and
        # lp.round's result, a copy of c without inf and NaN: about 11 float64 arrays,
        # and a few masks.
        return 96

    def empty(self, c):
        return quiet(_round, np.array(c, dtype=np.float64), self.out)   # no products: c

    def __call__(self, a, b, c):
        K = a.shape[-1]
        row_q = np.full(a.shape[:-1], np.inf)      # each row's smallest quantum
        col_q = np.full(b.shape[:-2] + b.shape[-1:], np.inf)
        row_fin = np.ones(a.shape[:-1], dtype=bool)
        col_fin = np.ones(col_q.shape, dtype=bool)
        c0 = c
        c_fin = np.isfinite(c)
        c_all_finite = bool(c_fin.all())
        if not c_all_finite:
            c = np.where(c_fin, c, 0.0)
        y, bound, tmp = np.array(c), np.zeros(c.shape), np.empty(c.shape)
        for span in _k_spans(K, 1, a.shape[0] * (a.shape[1] + b.shape[2]), self.entry_bytes):
            aj = self._finite(a[..., span], row_fin, -1)
            bj = self._finite(b[:, span], col_fin, -2)
            np.minimum(row_q, _quanta(aj, self.fmt).min(axis=-1), out=row_q)
            np.minimum(col_q, _quanta(bj, self.fmt).min(axis=-2), out=col_q)
            y += _blas(aj, bj, tmp)
            bound += _blas(np.abs(aj), np.abs(bj), tmp)
            del aj, bj
        special = None
        if not (row_fin.all() and col_fin.all() and c_all_finite):
            special = ~(row_fin[..., :, None] & col_fin[..., None, :] & c_fin)
        del c_fin
        # Any order of summing the K + 1 terms (BLAS blocks, then the spans, c first)
        # errs by at most (K + 1) u (|c| + sum|p|) / (1 - (K + 1) u); the bound and
        # y +- bound are rounded too: four times the rigorous bound covers all of it.
        bound += np.abs(c)
        zeros_only = bound == 0          # sums of nonnegative values: every term is zero
        # Every product is a multiple of q = (row's smallest quantum) * (column's), c of
        # its own quantum: while sum|p| + |c| < 2**53 q every partial sum is exact.
        q = np.multiply(row_q[..., :, None], col_q[..., None, :], out=tmp)
        np.minimum(q, _quanta(c, self.out), out=q)
        q *= 2.0**53
        exact = bound * (1 + (K + 2) * 2.0**-50) < q
        del q
        bound *= (K + 3) * 2.0**-51
        bound += np.abs(y) * 2.0**-50
        bound[exact] = 0.0
        lo = quiet(_round, np.subtract(y, bound, out=tmp), self.out)
        d = quiet(_round, np.add(y, bound, out=tmp), self.out)
        del bound
        # -0 and +0 compare equal: bounds on both sides of zero that both round to
        # zero leave the sign unsure. Exactly computed outputs are sure.
        unsure = (lo != d) | (np.signbit(lo) != np.signbit(d))
        del lo
        unsure &= ~exact
        if special is not None:
            unsure &= ~special
            exact &= ~special
        # Outputs that are not special have finite rows and columns: a and b as they are.
        if unsure.any():
            d[unsure] = _gathered(self._exact_sum, np.nonzero(unsure), a, b, c)
        del unsure
        # An exactly computed y of 0 is an exact zero sum; its sign is the model's
        # rule, not BLAS's order of additions: +0, or -0 where every term is -0.
        zero = exact & (y == 0)
        if zero.any():
            d[zero] = 0.0
            d[_negative_zero_sums(a, b, zero & zeros_only & np.signbit(c))] = -0.0
        if special is not None and special.any():
            d[special] = _gathered(_ieee_sum, np.nonzero(special), a, b, c0)
        if not self.out.has_negative_zero:
            d += 0.0            # fnuz: a zero result is +0
        return d

    @staticmethod
    def _finite(x, fin, axis):
        """``x`` with inf and NaN replaced by 0 (a copy only where there are some);
        clears ``fin`` for the rows (axis -1) or columns (axis -2) that hold them."""
        ok = np.isfinite(x)
        if ok.all():
            return x
        fin &= ok.all(axis=axis)
        return np.where(ok, x, 0.0)

    def _exact_sum(self, products, c, K):
        return _exact_round(lambda: itertools.chain(products(), [c[:, None].copy()]), K + 1,
                            self.out)


def _negative_zero_sums(a, b, where):
    """The outputs among ``where`` (outputs whose products are all zero) whose every
    product a_k * b_k is -0. Works on the rows and columns that hold such outputs."""
    if not where.any():
        return where
    rows = np.flatnonzero(where.any(axis=(0, 2)))
    cols = np.flatnonzero(where.any(axis=(0, 1)))
    K = a.shape[-1]

    def unit(x):                  # +1 where the sign bit is clear, -1 where it is set
        u = np.signbit(x).astype(np.float64)
        u *= -2.0
        u += 1.0
        return u

    # A zero product is -0 when exactly one factor's sign bit is set: with signs as
    # ±1, the K products are all -0 when their sum is -K (integers below 2**53: exact).
    total = np.zeros((where.shape[0], rows.size, cols.size))
    tmp = np.empty_like(total)
    # A span's copies: the rows and columns gathered, their sign masks and units.
    for span in _k_spans(K, 1, where.shape[0] * (rows.size + cols.size), 32):
        total += _blas(unit(a[:, rows, span]), unit(b[:, span][..., cols]), tmp)
    out = np.zeros(where.shape, dtype=bool)
    out[:, rows[:, None], cols] = total == -K
    return out & where


def _quanta(x, fmt):
    """The quantum of each value of ``fmt`` (2**(max(floor(log2|x|), emin) - m));
    inf for zeros, which add nothing."""
    q = (x.view(np.uint64) & _EXP_MASK).view(np.float64)   # 2**floor(log2|x|)
    np.maximum(q, 2.0**fmt.emin, out=q)
    q *= 2.0**-fmt.mantissa_bits
    q[x == 0] = np.inf
    return q


def _ieee_sum(products, c, K):
    """The float64 sum where an operand is inf or NaN: inf or NaN exactly as IEEE
    products would give, since finite products of these formats never overflow
    (whatever the order of the additions, then)."""
    total = None
    for p in products():
        part = p.sum(axis=-1)
        total = part if total is None else total + part
    return total + c


def _gathered(fn, where, a, b, c):
    """``fn(products, c, K)`` for the outputs at ``where`` (batch, row, column
    indices), a bounded number at a time: ``products()`` yields the exact products
    a_k * b_k of their rows and columns in (outputs, span) blocks."""
    ib, im, jn = where
    K = a.shape[-1]
    out = np.empty(ib.size)
    # A quarter of the bound: gathered rows and columns of a span, and in
    # `_exact_round` at most six (step, span) float64 arrays at once.
    span = max(1, min(K, MEMORY_BOUND // 4 // 64 - 1))
    step = max(1, MEMORY_BOUND // 4 // (64 * (span + 1)))
    for i in range(0, ib.size, step):
        x, y, z = ib[i:i + step], im[i:i + step], jn[i:i + step]

        # One block (nearly every K) is made once: `_exact_round`'s first pass only
        # reads it and its second, the last, may consume it in place.
        one = a[x, y, :] * b[x, :, z] if K <= span else None   # exact, as below

        def products(x=x, y=y, z=z, one=one):
            if one is not None:
                yield one
                return
            for j in range(0, K, span):
                # Products of two significands of at most 26 bits are exact in float64.
                yield a[x, y, j:j + span] * b[x, j:j + span, z]
        out[i:i + step] = fn(products, c[x, y, z], K)
    return out
