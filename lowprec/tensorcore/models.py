"""The models of `matmul`: what a model is, and the one check of its parameters.

`TensorCoreModel` describes a Tensor Core block-FMA model (TENSORCORE.md §2) by its
parameters, checked once when it is made; `Accumulating` describes the models that
sum exact products one by one (exactly, or rounding to FP32 or FP16 after every
addition). A model only says which formats it takes and which it gives: the kernels
that compute with it are in `blockfma`, `sequential` and `exact`. Models compare by
value and never hold state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from ..display import dataclass_card
from ..engine.checks import check_bool, check_int
from ..formats import BF16, FP8_E4M3, FP8_E5M2, FP16, FP32, TF32, Format, FormatLike
from ..formats import format as _format

if TYPE_CHECKING:
    from .instructions import MatrixUnit

__all__ = ["TensorCoreModel", "Accumulating", "MultiPass", "Model", "ModelLike"]


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

    def _repr_html_(self) -> str:
        return dataclass_card(self)


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
class Accumulating:
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

@dataclass(frozen=True)
class MultiPass:
    """An FP32 product from several low-precision passes (XLA's dot algorithms
    ``BF16_BF16_F32_X3``, ``_X6``, ``TF32_TF32_F32_X3``).

    Each FP32 operand is split into ``pieces`` values of ``split``: hi = RN(x), then
    each next piece RN of what is left (the FP32 subtraction is exact). The partial
    products ``terms`` (pairs (i, j): A's piece i times B's piece j) run in the listed
    order through the ``base`` model, each accumulating onto the previous result (FP32
    output); a NaN left by the small terms (the residual of an infinite operand) is
    replaced by 0 before the last term, hi x hi; then c is added in FP32 (RNE).
    """

    name: str
    split: Format
    pieces: int
    terms: tuple
    base: str = "fp32"
    doc: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.doc:
            object.__setattr__(self, "__doc__", self.doc)
        if not self.terms or self.terms[-1] != (0, 0):
            raise ValueError("terms must end with (0, 0), the hi x hi product")
        if any(not 0 <= i < self.pieces or not 0 <= j < self.pieces for i, j in self.terms):
            raise ValueError(f"terms must index pieces 0..{self.pieces - 1}")

    def for_format(self, fmt: FormatLike) -> MultiPass:
        if _format(fmt) != FP32:
            raise ValueError(f"model {self.name!r} takes FP32 inputs (it splits them), "
                             f"not {_format(fmt).name}")
        return self

    def out_formats(self, fmt: FormatLike) -> tuple[Format, ...]:
        return (FP32,)

    def default_out_format(self) -> Format:
        return FP32


#: A model object: a `TensorCoreModel` or one of the accumulation models of `MODELS`.
Model: TypeAlias = "TensorCoreModel | Accumulating | MatrixUnit | MultiPass"

#: What a ``model=`` (or ``matmul=``) option takes: a name of `MODELS`, or a `Model`.
ModelLike: TypeAlias = "str | Model"
