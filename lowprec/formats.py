"""Binary floating-point formats: parameters, derived constants and lookup.

A :class:`Format` stores only the parameters that define a format (exponent and
mantissa widths, bias, subnormal support and how the top codes are used); every
constant (``max``, ``eps``, ``smallest_subnormal``, ...) is derived from them with
``numpy.finfo``'s names and meanings. This module knows nothing about rounding or
arrays beyond dtype lookup, and it must never hold mutable state.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any, TypeAlias, cast

import numpy as np

from .engine.checks import is_int

__all__ = [
    "Format", "format", "finfo", "KINDS", "NAMED_FORMATS",
    "FP64", "FP32", "TF32", "FP16", "BF16", "FP8_E4M3", "FP8_E5M2",
    "FP8_E4M3FNUZ", "FP8_E5M2FNUZ", "FP6_E2M3", "FP6_E3M2", "FP4_E2M1", "E8M0", "UE4M3",
]

#: How a format uses its top exponent code, and whether it has inf, NaN and -0.
KINDS = {
    "ieee": "top exponent code is inf (mantissa 0) or NaN",
    "fn": "no inf; only S.1..1.1..1 is NaN (OCP FP8 E4M3)",
    "fnuz": "no inf, no -0; the pattern 1000...0 is the one NaN",
    "finite": "no inf, no NaN; every pattern is a finite number (OCP FP6/FP4)",
    "extended": ("no -0; 1000...0 is the one NaN (unsigned: 1...1), and each sign's top "
                 "pattern is its inf (unsigned: 1...10 is +inf); IEEE P3109's extended "
                 "domain"),
}

#: What `format` accepts: a `Format`, a name or alias, a NumPy or ml_dtypes dtype
#: (or scalar type).
FormatLike: TypeAlias = "Format | str | np.dtype[Any] | type[Any]"


def _show(value: int) -> str:
    """An int for a message: itself, or its size when printing it would be slow."""
    if abs(value) < 10**30:
        return repr(value)
    return f"{'a negative' if value < 0 else 'an'} int of {value.bit_length()} bits"


def _as_int(attr: str, value: object) -> int:
    if not is_int(value):
        raise TypeError(f"{attr} must be an int, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class Format:
    """A binary floating-point format, described by its parameters only.

    Parameters
    ----------
    exponent_bits, mantissa_bits : int
        Widths of the exponent field and of the stored fraction (hidden bit excluded).
        NumPy integers are stored as Python ints; bools and floats raise TypeError.
        Every value of a format must be a float64 value: ``exponent_bits`` in [1, 11],
        ``mantissa_bits`` in [0, 52] (at most 50 unless the format is FP64 itself),
        ``emin = 1 - bias`` in [-1022, 0] and ``emax <= 1023``; and, for the rounding
        kernel's scalings (FP64 itself excepted), ``emin - mantissa_bits >= -1020`` and
        ``emax + 1 - mantissa_bits <= 1022``. Other parameters raise ValueError naming
        the one at fault.
    bias : int, optional
        Exponent bias; ``2**(exponent_bits - 1) - 1`` when omitted.
    subnormals : bool
        Whether the format has subnormal numbers (exponent code 0); TypeError if not
        a bool.
    kind : {"ieee", "fn", "fnuz", "finite", "extended"}
        How the top exponent code is used; see ``KINDS``.
    name : str, optional
        Display name (``str(fmt)``); TypeError unless a str or None. It does not
        take part in equality or hashing: two formats with the same parameters
        are the same format.
    signed : bool
        Whether the pattern has a sign bit (True). Unsigned formats (the MX and
        NVFP4 scales, `E8M0` and `UE4M3`) hold no negative value: rounding a negative
        value that does not round to zero into one gives NaN.
    zero : bool
        Whether exponent code 0 holds zero (and the subnormals). False (`E8M0`):
        code 0 is the normal number ``2**-bias``, there is no zero and no
        subnormal, so ``emin = -bias``; needs ``subnormals=False``.

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.FP16.max, lp.FP16.eps, lp.FP16.smallest_subnormal
    (65504.0, 0.0009765625, 5.960464477539063e-08)
    >>> lp.Format.custom(precision=11, emax=15) == lp.FP16
    True
    >>> lp.FP8_E4M3.max, lp.FP8_E4M3.has_inf
    (448.0, False)
    """

    exponent_bits: int
    mantissa_bits: int
    bias: int | None = None
    subnormals: bool = True
    kind: str = "ieee"
    name: str | None = field(default=None, compare=False)
    signed: bool = True
    zero: bool = True

    def __post_init__(self) -> None:
        # NumPy integers become Python ints, so derived constants (math.ldexp) and
        # comparisons behave exactly as for ints (no uint8 wrap-around, no TypeError).
        for attr in ("exponent_bits", "mantissa_bits"):
            object.__setattr__(self, attr, _as_int(attr, getattr(self, attr)))
        if self.name is not None and not isinstance(self.name, str):
            raise TypeError(f"name must be a str or None, got {type(self.name).__name__} "
                            f"{self.name!r}")
        if self.name is not None and not self.name.strip():
            raise ValueError(f"name must not be empty, got {self.name!r}")
        # Every value, the largest and the smallest subnormal included, is a float64
        # value: float64 has 11 exponent bits and 52 fraction bits, so no format with
        # more fits. These bounds come first, so that 2**(exponent_bits - 1) below is
        # never a huge integer.
        if not 1 <= self.exponent_bits <= 11:
            raise ValueError("exponent_bits must be in [1, 11] (float64 has 11), got "
                             f"{_show(self.exponent_bits)}")
        if not 0 <= self.mantissa_bits <= 52:
            raise ValueError("mantissa_bits must be in [0, 52] (float64 has 52), got "
                             f"{_show(self.mantissa_bits)}")
        if self.bias is None:
            object.__setattr__(self, "bias", 2 ** (self.exponent_bits - 1) - 1)
        bias = _as_int("bias", self.bias)
        object.__setattr__(self, "bias", bias)
        if not isinstance(self.subnormals, (bool, np.bool_)):
            raise TypeError(f"subnormals must be a bool, got {self.subnormals!r}")
        object.__setattr__(self, "subnormals", bool(self.subnormals))
        for attr in ("signed", "zero"):
            if not isinstance(getattr(self, attr), (bool, np.bool_)):
                raise TypeError(f"{attr} must be a bool, got {getattr(self, attr)!r}")
            object.__setattr__(self, attr, bool(getattr(self, attr)))
        if not self.zero and self.subnormals:
            raise ValueError("a format without zero (zero=False) has no subnormals either: "
                             "give subnormals=False")
        if not isinstance(self.kind, str):
            raise TypeError(f"kind must be a str, one of {sorted(KINDS)}, "
                            f"got {type(self.kind).__name__} {self.kind!r}")
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {sorted(KINDS)}, got {self.kind!r}")
        if self.kind == "ieee" and self.exponent_bits < 2:
            raise ValueError("an 'ieee' format needs exponent_bits >= 2 "
                             "(one code for subnormals, one for inf/NaN)")
        if self.kind == "fn" and self.mantissa_bits < 1 and self.zero and self.signed:
            raise ValueError("an 'fn' format needs mantissa_bits >= 1 "
                             "(its NaN takes the top mantissa code), unless it is unsigned "
                             "(as P3109's binary8p1uf) or has no zero (zero=False, as "
                             "E8M0): then the top exponent code is NaN")
        if self.kind == "extended" and self.exponent_bits + self.mantissa_bits < 2:
            raise ValueError("an 'extended' format needs exponent_bits + mantissa_bits "
                             ">= 2 (its NaN and inf take codes of their own)")
        if not self.zero and (self.kind != "fn" or self.signed):
            raise ValueError("a format without zero must be unsigned (signed=False) and of "
                             "kind 'fn', as E8M0 is")
        # emin = 1 - bias must lie in [-1022, 0]: float64's smallest normal is 2**-1022,
        # and emin <= 0 keeps the rounding kernel's scalings from underflowing.
        if bias < 1:
            raise ValueError(f"bias {_show(bias)} puts the smallest normal number "
                             f"above 1; lowprec needs emin = 1 - bias <= 0")
        if bias > 1023:
            raise ValueError(f"bias {_show(bias)} puts the smallest normal number "
                             "below float64's 2**-1022; lowprec needs bias <= 1023")
        # Integer arithmetic only: max < 2**(emax + 1) is a float64 only if emax <= 1023
        # (the smallest subnormal, 2**(emin - m) >= 2**-1074, is one by the bounds above).
        if self.emax > 1023:
            raise ValueError(f"bias {self.bias} with {self.exponent_bits} exponent bits and "
                             f"kind {self.kind!r} gives emax = {self.emax}: the largest "
                             "value is past float64's (emax <= 1023)")
        if self.p > 51 and not self._is_fp64:
            raise ValueError(f"mantissa_bits {self.mantissa_bits} (precision {self.p}) "
                             "exceeds the 51 bits lowprec emulates exactly in float64 "
                             "(FP64 itself, Format(11, 52) of kind 'ieee', excepted)")
        # 2**(e - m) must be a normal float64, with two binades to spare, for every
        # exponent the rounding kernel scales by (FP64 itself excepted).
        if not self._is_fp64 and (self.emin - self.mantissa_bits < -1020
                                  or self.emax + 1 - self.mantissa_bits > 1022):
            raise ValueError(f"exponent range [{self.emin}, {self.emax}] with "
                             f"{self.mantissa_bits} mantissa bits does not fit in float64 with "
                             "the rounding kernel's headroom (emin - m >= -1020 and "
                             "emax + 1 - m <= 1022)")

    @classmethod
    def custom(cls, precision: int, emax: int, *, subnormals: bool = True,
               name: str | None = None) -> Format:
        """An IEEE-layout format from its precision ``p`` and ``emax`` (chop-style).

        ``emin = 1 - emax``, so ``emax`` must be ``2**k - 1`` for some ``k >= 1``.

        Examples
        --------
        >>> import lowprec as lp
        >>> lp.Format.custom(precision=8, emax=127) == lp.BF16
        True
        >>> lp.Format.custom(precision=4, emax=10)
        Traceback (most recent call last):
        ...
        ValueError: emax must be 2**k - 1 for an IEEE layout, got 10
        """
        if not is_int(precision) or precision < 1:
            shown = _show(int(precision)) if is_int(precision) else repr(precision)
            raise ValueError(f"precision must be an int >= 1, got {shown}")
        if not is_int(emax) or emax < 1 or (int(emax) + 1) & int(emax):
            shown = _show(int(emax)) if is_int(emax) else repr(emax)
            raise ValueError(f"emax must be 2**k - 1 for an IEEE layout, got {shown}")
        return cls((int(emax) + 1).bit_length(), int(precision) - 1, int(emax),
                   subnormals=subnormals, kind="ieee", name=name)

    # -- parameters in IEEE 754's terms --------------------------------------
    @property
    def _is_fp64(self) -> bool:
        return (self.exponent_bits, self.mantissa_bits, self.bias, self.kind) == (
            11, 52, 1023, "ieee")

    @property
    def p(self) -> int:
        """Significand precision in bits, hidden bit included."""
        return self.mantissa_bits + 1

    @property
    def _lost(self) -> int:
        """How many of the top positive patterns of an 'fn' or 'extended' format are
        not finite (NaN, inf)."""
        if self.kind == "extended":
            return 1 if self.signed else 2
        return 1 if self.kind == "fn" else 0

    @property
    def emax(self) -> int:
        top, bias = 2 ** self.exponent_bits - 1, cast(int, self.bias)  # int after __post_init__
        if self.kind == "extended":
            # The largest finite pattern's exponent field: the lost codes may empty
            # the top exponent code (m = 0, or unsigned with m = 1) and, unsigned with
            # m = 0, the one below it.
            last = 2 ** (self.exponent_bits + self.mantissa_bits) - 1 - self._lost
            return (last >> self.mantissa_bits) - bias
        # An 'fn' format without mantissa bits (E8M0) has only NaN in its top code.
        full_top_lost = self.kind == "ieee" or (self.kind == "fn" and self.mantissa_bits == 0)
        return top - 1 - bias if full_top_lost else top - bias

    @property
    def emin(self) -> int:
        # Code 0 is the exponent 1 - bias's subnormal range, or (no zero) 2**-bias itself.
        return (1 if self.zero else 0) - cast(int, self.bias)   # an int after __post_init__

    @property
    def bits(self) -> int:
        return int(self.signed) + self.exponent_bits + self.mantissa_bits

    @property
    def has_inf(self) -> bool:
        return self.kind in ("ieee", "extended")

    @property
    def has_nan(self) -> bool:
        # An 'ieee' format with no mantissa bits has inf in its top code but no NaN.
        return self.kind != "finite" and not (self.kind == "ieee"
                                              and self.mantissa_bits == 0)

    @property
    def has_negative_zero(self) -> bool:
        return self.kind not in ("fnuz", "extended") and self.signed and self.zero

    @property
    def unit_roundoff(self) -> float:
        return 2.0 ** -self.p

    # -- numpy.finfo names ---------------------------------------------------
    @property
    def nmant(self) -> int:
        return self.mantissa_bits

    @property
    def nexp(self) -> int:
        return self.exponent_bits

    @property
    def iexp(self) -> int:
        return self.exponent_bits

    @property
    def machep(self) -> int:
        return -self.mantissa_bits

    @property
    def negep(self) -> int:
        if self.emin == 0 and not self.subnormals:
            return 0  # nothing between 0 and 1, so 1 - (largest value below 1) = 1
        return max(-1, self.emin) - self.mantissa_bits

    @property
    def eps(self) -> float:
        return 2.0 ** -self.mantissa_bits

    @property
    def epsneg(self) -> float:
        """1 minus the largest value below 1 (a subnormal gap, or 1, when emin = 0)."""
        return 2.0 ** self.negep

    @cached_property
    def max(self) -> float:
        if self.kind == "extended":
            last = 2 ** (self.exponent_bits + self.mantissa_bits) - 1 - self._lost
            frac = last & (2 ** self.mantissa_bits - 1)
            return math.ldexp(2 ** self.mantissa_bits + frac, self.emax - self.mantissa_bits)
        # fn formats lose their top mantissa code to NaN.
        lost = 2 if self.kind == "fn" and self.mantissa_bits else 1
        return math.ldexp(2 ** self.p - lost, self.emax - self.mantissa_bits)

    @property
    def min(self) -> float:
        """The least value: ``-max``; for an unsigned format 0, or (no zero) its least
        positive value, as ml_dtypes' finfo reports for ``float8_e8m0fnu``."""
        if self.signed:
            return -self.max
        return 0.0 if self.zero else self.smallest_normal

    @property
    def smallest_normal(self) -> float:
        return math.ldexp(1.0, self.emin)

    tiny = smallest_normal

    @property
    def smallest_subnormal(self) -> float:
        """Smallest positive value (``smallest_normal`` when subnormals are off)."""
        if not self.subnormals or not self.zero:
            return self.smallest_normal
        return math.ldexp(1.0, self.emin - self.mantissa_bits)

    @property
    def maxexp(self) -> int:
        return self.emax + 1

    @property
    def minexp(self) -> int:
        return self.emin

    @property
    def precision(self) -> int:
        return int(-math.log10(self.eps))

    @property
    def resolution(self) -> float:
        return 10.0 ** -self.precision

    @property
    def dtype_name(self) -> str:
        """The ml_dtypes-style spelling of the format (``float8_e4m3fn``...).

        A spelling, not always a dtype: TF32's ``float19_e8m10`` is neither a NumPy nor
        an ml_dtypes type (tables show ``-`` where no dtype exists)."""
        known = _NUMPY_NAMES.get(self)
        if known:
            return known
        suffix = {"ieee": "", "fn": "fn", "fnuz": "fnuz", "finite": "fn",
                  "extended": "uz"}[self.kind]
        suffix += "" if self.signed else "u"     # ml_dtypes: float8_e8m0fnu
        # ml_dtypes spells a bias other than its usual one: float8_e4m3b11fnuz.
        usual = 2 ** (self.exponent_bits - 1) - (0 if self.kind in ("fnuz", "extended") else 1)
        b = "" if self.bias == usual else f"b{self.bias}"
        return f"float{self.bits}_e{self.exponent_bits}m{self.mantissa_bits}{b}{suffix}"

    @property
    def numpy_dtype_name(self) -> str | None:
        """The name of the NumPy or ml_dtypes dtype of this format, or None where none
        exists (TF32, custom formats).

        Examples
        --------
        >>> import lowprec as lp
        >>> lp.FP16.numpy_dtype_name, lp.FP8_E4M3.numpy_dtype_name, lp.TF32.numpy_dtype_name
        ('float16', 'float8_e4m3fn', None)
        """
        name = self.dtype_name
        # Every real dtype name is a lookup name of its format, and no made-up one is.
        return name if _BY_NAME.get(name) == self else None

    def table(self) -> str:
        """The format's parameters and derived constants, one per line, as a str.

        Examples
        --------
        >>> import lowprec as lp
        >>> print(lp.FP8_E4M3.table())
        name                FP8_E4M3
        dtype               float8_e4m3fn
        bits                8
        exponent bits       4
        mantissa bits       3
        precision p         4
        bias                7
        kind                fn
        subnormals          True
        emin, emax          -6, 8
        eps                 0.125
        unit roundoff       0.0625
        max                 448.0
        smallest normal     0.015625
        smallest subnormal  0.001953125
        decimal digits      0
        inf / NaN           no / yes
        """
        rows = self._table_rows()
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)

    def _table_rows(self) -> list[tuple[str, object]]:
        """The (label, value) rows of `table` and of the HTML view."""
        return [
            ("name", str(self)), ("dtype", self.numpy_dtype_name or "-"),
            ("bits", self.bits), ("exponent bits", self.exponent_bits),
            ("mantissa bits", self.mantissa_bits), ("precision p", self.p),
            ("bias", self.bias), ("kind", self.kind), ("subnormals", self.subnormals),
            ("emin, emax", f"{self.emin}, {self.emax}"),
            ("eps", repr(self.eps)), ("unit roundoff", repr(self.unit_roundoff)),
            ("max", repr(self.max)), ("smallest normal", repr(self.smallest_normal)),
            ("smallest subnormal", repr(self.smallest_subnormal)),
            ("decimal digits", self.precision),
            ("inf / NaN", f"{'yes' if self.has_inf else 'no'} / "
                          f"{'yes' if self.has_nan else 'no'}"),
        ]

    def _repr_html_(self) -> str:
        """`table` as a themed HTML card, for Jupyter; the plain repr stays the text
        fallback.

        Examples
        --------
        >>> import lowprec as lp
        >>> html = lp.BF16._repr_html_()
        >>> html.startswith("<div"), "<td" in html, "3.3895313892515355e+38" in html
        (True, True, True)
        """
        from .display import card
        return card(repr(self), self._table_rows())

    def __str__(self) -> str:
        """The name, or for an unnamed format its parameters in one short line.

        Examples
        --------
        >>> import lowprec as lp
        >>> print(lp.BF16, lp.Format(5, 2, name="mine"), lp.Format(4, 3, bias=11, kind="fnuz"))
        BF16 mine Format(e=4, m=3, bias=11, kind='fnuz')
        """
        if self.name is not None:
            return self.name
        extra = "" if self.subnormals else ", subnormals=False"
        extra += "" if self.kind == "ieee" else f", kind={self.kind!r}"
        extra += "" if self.signed else ", signed=False"
        extra += "" if self.zero else ", zero=False"
        return f"Format(e={self.exponent_bits}, m={self.mantissa_bits}, bias={self.bias}{extra})"

    def __repr__(self) -> str:
        """``lp.NAME`` for the module's named formats, else the constructor call:
        ``eval(repr(fmt))`` gives the format back, name included, with ``lp`` imported.

        Examples
        --------
        >>> import lowprec as lp
        >>> lp.FP16, lp.Format(5, 2, name="mine")
        (lp.FP16, lp.Format(exponent_bits=5, mantissa_bits=2, bias=15, subnormals=True,
                            kind='ieee', name='mine'))
        """
        if self.name is not None and NAMED_FORMATS.get(self.name) == self:
            return f"lp.{self.name}"
        name = "" if self.name is None else f", name={self.name!r}"
        name += "" if self.signed else ", signed=False"
        name += "" if self.zero else ", zero=False"
        return (f"lp.Format(exponent_bits={self.exponent_bits}, mantissa_bits="
                f"{self.mantissa_bits}, bias={self.bias}, subnormals={self.subnormals}, "
                f"kind={self.kind!r}{name})")


FP64 = Format(11, 52, name="FP64")
FP32 = Format(8, 23, name="FP32")
TF32 = Format(8, 10, name="TF32")
FP16 = Format(5, 10, name="FP16")
BF16 = Format(8, 7, name="BF16")
FP8_E4M3 = Format(4, 3, kind="fn", name="FP8_E4M3")
FP8_E5M2 = Format(5, 2, name="FP8_E5M2")
FP8_E4M3FNUZ = Format(4, 3, bias=8, kind="fnuz", name="FP8_E4M3FNUZ")
FP8_E5M2FNUZ = Format(5, 2, bias=16, kind="fnuz", name="FP8_E5M2FNUZ")
FP6_E2M3 = Format(2, 3, kind="finite", name="FP6_E2M3")
FP6_E3M2 = Format(3, 2, kind="finite", name="FP6_E3M2")
FP4_E2M1 = Format(2, 1, kind="finite", name="FP4_E2M1")
# The scales of block-scaled formats. E8M0: OCP Microscaling Formats (MX) v1.0 §5.4.1,
# ml_dtypes' float8_e8m0fnu (2**(code - 127), 0xFF NaN, no zero, no sign). UE4M3: the
# NVFP4 block scale, E4M3 without its sign bit (0x7F NaN; NVIDIA PTX ISA, block scaling).
E8M0 = Format(8, 0, bias=127, subnormals=False, kind="fn", signed=False, zero=False,
              name="E8M0")
UE4M3 = Format(4, 3, kind="fn", signed=False, name="UE4M3")

_NUMPY_NAMES = {FP64: "float64", FP32: "float32", FP16: "float16", BF16: "bfloat16"}

# The formats below all have a name: mypy reads ``f.name`` as ``str | None``.
NAMED_FORMATS: dict[str, Format] = {f.name: f for f in (  # type: ignore[misc]
    FP64, FP32, TF32, FP16, BF16, FP8_E4M3, FP8_E5M2, FP8_E4M3FNUZ, FP8_E5M2FNUZ,
    FP6_E2M3, FP6_E3M2, FP4_E2M1, E8M0, UE4M3)}

_ALIASES = {
    FP64: ("fp64", "float64", "double", "binary64"),
    FP32: ("fp32", "float32", "single", "binary32"),
    TF32: ("tf32", "tensorfloat32"),
    FP16: ("fp16", "half", "float16", "binary16"),
    BF16: ("bf16", "bfloat16"),
    FP8_E4M3: ("e4m3", "fp8", "float8_e4m3fn", "fp8_e4m3fn", "e4m3fn"),
    FP8_E5M2: ("e5m2", "float8_e5m2"),
    FP8_E4M3FNUZ: ("e4m3fnuz", "float8_e4m3fnuz"),
    FP8_E5M2FNUZ: ("e5m2fnuz", "float8_e5m2fnuz"),
    FP6_E2M3: ("e2m3", "fp6", "float6_e2m3fn"),
    FP6_E3M2: ("e3m2", "float6_e3m2fn"),
    FP4_E2M1: ("e2m1", "fp4", "float4_e2m1fn"),
    E8M0: ("e8m0", "ue8m0", "float8_e8m0fnu", "e8m0fnu"),
    UE4M3: ("ue4m3",),
}
# ml_dtypes types with no module constant: each decodes, all 256 patterns, exactly as
# the format it maps to (tests/test_formats.py checks this against ml_dtypes).
_ML_DTYPES_ONLY = {
    "float8_e4m3": Format(4, 3),                            # IEEE-like, with inf
    "float8_e3m4": Format(3, 4),
    "float8_e4m3b11fnuz": Format(4, 3, bias=11, kind="fnuz"),
    "float8_e5m3fnu": Format(5, 3, kind="fn", signed=False),  # unsigned: 0xFF NaN, max 114688
}
_BY_NAME = dict(_ML_DTYPES_ONLY)
for _fmt, _names in _ALIASES.items():
    for _n in (_fmt.name, *_names):
        _BY_NAME[_n.lower()] = _fmt   # type: ignore[union-attr]  # named, as above
_VALID = (f"valid names: {', '.join(sorted(NAMED_FORMATS))} (and aliases such as "
          "'fp16', 'bfloat16', 'e4m3', ml_dtypes names, P3109 names such as 'binary8p3se')")


_P3109_NAME = re.compile(r"binary(\d+)p(\d+)([su])([ef])")


@lru_cache(maxsize=256)
def p3109_format(k: int, p: int, signed: bool, extended: bool) -> Format:
    """IEEE P3109's format Binary{K, P, Σ, Δ}, named ``binary{K}p{P}{s|u}{e|f}``.

    The parameters follow the Interim Report v4.0, §3.1 and §4.7.2. The bias is
    ``2**(K - P - 1)`` (signed) or ``2**(K - P)`` (unsigned). Signed formats have
    ``K - P`` exponent bits, unsigned ones ``K - P + 1``. The encoding has no -0 and
    one NaN, so signed finite formats are 'fnuz', unsigned finite ones 'fn' and
    extended ones 'extended' (see `KINDS`).

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.format("binary8p4sf") == lp.FP8_E4M3FNUZ
    True
    """
    for name, value in (("K", k), ("P", p)):
        if not is_int(value):
            raise TypeError(f"{name} must be an int, got {value!r}")
    k, p = int(k), int(p)
    if k < 3:
        raise ValueError(f"P3109 needs a bitwidth K > 2, got {k}")
    if not (0 < p < k if signed else 0 < p <= k):
        raise ValueError(f"P3109 needs a precision 0 < P {'<' if signed else '<='} K "
                         f"for {'signed' if signed else 'unsigned'} formats, got K={k}, P={p}")
    e = k - p if signed else k - p + 1
    bias = 2 ** (e - 1)
    name = f"binary{k}p{p}{'s' if signed else 'u'}{'e' if extended else 'f'}"
    if bias > 1023 or p > 51:
        raise ValueError(f"{name} has values float64 cannot hold (bias {_show(bias)}, "
                         f"precision {p}); lowprec holds P3109 formats with K - P <= "
                         f"{10 if signed else 9} and P <= 51")
    kind = "extended" if extended else ("fnuz" if signed else "fn")
    return Format(e, p - 1, bias, kind=kind, name=name, signed=signed)


def format(spec: FormatLike) -> Format:  # noqa: A001 - the contract's name
    """Look up a format by `Format`, name, alias, NumPy dtype or ml_dtypes dtype.

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> lp.format("half") is lp.FP16, lp.format(np.float32) is lp.FP32
    (True, True)
    >>> lp.format("bfloat16").max
    3.3895313892515355e+38
    >>> lp.format("fp12")
    Traceback (most recent call last):
    ...
    ValueError: unknown format 'fp12'; valid names: BF16, E8M0, FP16, FP32, FP4_E2M1,
    FP64, FP6_E2M3, FP6_E3M2, FP8_E4M3, FP8_E4M3FNUZ, FP8_E5M2, FP8_E5M2FNUZ, TF32, UE4M3
    (and aliases such as 'fp16', 'bfloat16', 'e4m3', ml_dtypes names, P3109 names such as
    'binary8p3se')
    >>> lp.format("binary8p3se").max
    49152.0
    """
    if isinstance(spec, Format):
        return spec
    if isinstance(spec, str):
        found = _BY_NAME.get(spec)                   # the usual spelling: one lookup
        if found is not None:
            return found
        key = spec.strip().lower().replace("-", "_")
        found = _BY_NAME.get(key)
        match = _P3109_NAME.fullmatch(key) if found is None else None
        if match:
            k, p, s, d = match.groups()
            return p3109_format(int(k), int(p), s == "s", d == "e")
        if found is None:
            raise ValueError(f"unknown format {spec!r}; {_VALID}")
        return found
    # np.dtype(None) is float64: None must not silently mean FP64.
    dtype = None
    if spec is not None:
        try:
            dtype = np.dtype(spec)
        except TypeError:
            pass
    if dtype is None:
        raise TypeError(f"cannot interpret {spec!r} as a format: give a Format, a float "
                        f"dtype or a name; {_VALID}")
    found = _BY_NAME.get(dtype.name.lower())
    if found is None:
        raise ValueError(f"dtype {dtype} is not a floating-point format lowprec knows; "
                         f"{_VALID}")
    return found


def finfo(spec: FormatLike) -> Format:
    """``numpy.finfo`` for any format: returns the `Format`, whose attributes
    carry finfo's names.

    Examples
    --------
    >>> import lowprec as lp
    >>> fi = lp.finfo("bf16")
    >>> fi.bits, fi.nmant, fi.nexp, fi.eps, fi.precision
    (16, 7, 8, 0.0078125, 2)
    """
    return format(spec)
