"""Teaching views: bit layouts and what rounding did to one value.

`explain` returns an `Explanation`, the data a student writes down when rounding one
number by hand (the rounded value, its sign | exponent | mantissa fields, its exact
decimal value, its neighbours and ulp, the rounding error and the exception flags);
``str()`` of it is the text the ``lowprec explain`` command prints. `layout` draws
a format's bit layout (the error-against-K experiment is in `experiments`).
Every value shown comes from the library's kernels (`round`, `encode`, `decode`,
`fields`, `flags`) or from exact `Fraction` / `Decimal` arithmetic on their results:
this module must never round a value on its own.
"""

from __future__ import annotations

import html
import math
import numbers
import reprlib
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike

from ..bits import decode, encode, fields
from ..display import bit_boxes, card, mark
from ..engine.inputs import as_real_array
from ..formats import Format, FormatLike
from ..formats import format as _format
from ..rounding import round as _round
from ..status import flags, quiet
from ..types import Mode, RNGLike

__all__ = ["Explanation", "explain", "explain_text", "layout", "MODE_NAMES"]

#: What each rounding mode does, in words.
MODE_NAMES = {
    "rne": "round to nearest, ties to even",
    "rna": "round to nearest, ties away from zero",
    "rz": "round toward zero",
    "ru": "round toward +inf",
    "rd": "round toward -inf",
    "ro": "round to odd",
    "sr": "stochastic rounding",
}


def format_name(fmt: Format) -> str:
    """A format's name for teaching text."""
    # An unnamed format: its NumPy / ml_dtypes name if it has one (float8_e4m3), else
    # str(fmt), which says every parameter (no made-up dtype name such as float19_e8m10).
    return fmt.name or fmt.numpy_dtype_name or str(fmt)


def layout(fmt: FormatLike) -> str:
    """A format's bit layout as one line: field widths, bias and precision.

    Examples
    --------
    >>> from lowprec.teaching import layout
    >>> print(layout("bf16"))
    BF16: S EEEEEEEE MMMMMMM = 1 sign | 8 exponent (bias 127) | 7 mantissa bits, p = 8
    >>> print(layout("e4m3"))
    FP8_E4M3: S EEEE MMM = 1 sign | 4 exponent (bias 7) | 3 mantissa bits, p = 4
    >>> print(layout("e8m0"))
    E8M0: EEEEEEEE = no sign bit | 8 exponent (bias 127) | 0 mantissa bits, p = 1
    """
    fmt = _format(fmt)
    sign = "S " if fmt.signed else ""
    drawing = f"{sign}{'E' * fmt.exponent_bits} {'M' * fmt.mantissa_bits}".rstrip()
    return (f"{format_name(fmt)}: {drawing} = {'1 sign' if fmt.signed else 'no sign bit'} "
            f"| {fmt.exponent_bits} exponent (bias {fmt.bias}) | {fmt.mantissa_bits} "
            f"mantissa bits, p = {fmt.p}")



def kind_of(value: float, fmt: Format) -> str:
    """The class of ``value``, a value of ``fmt``: ``"nan"``, ``"inf"``, ``"zero"``,
    ``"subnormal"`` or ``"normal"``.

    Examples
    --------
    >>> import lowprec as lp
    >>> from lowprec.teaching.explanation import kind_of
    >>> kind_of(2.0**-15, lp.FP16), kind_of(0.5, lp.FP16)
    ('subnormal', 'normal')
    """
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf"
    if value == 0:
        return "zero"
    return "subnormal" if abs(value) < fmt.smallest_normal else "normal"


def _exact_decimal(x):
    """The exact decimal expansion of a float64, an int or a Fraction whose denominator
    is a power of two (every binary float has one)."""
    if isinstance(x, Fraction):
        n, k = x.numerator, x.denominator.bit_length() - 1
        # n / 2**k == n * 5**k / 10**k: these digits with the point k places left (a
        # Decimal built from a tuple is exact; arithmetic would round to 28 digits).
        d = Decimal((int(n < 0), tuple(int(c) for c in str(abs(n) * 5**k)), -k))
    else:
        if math.isnan(x) or math.isinf(x):
            return repr(x)
        if x == 0:
            return "-0" if math.copysign(1.0, x) < 0 else "0"
        d = Decimal(x)
    text = format(d, "f")
    # Plain notation while it stays short; scientific notation is just as exact.
    return text if len(text) <= 80 else str(d)


def _pow2(e):
    return f"2**{e}"


@dataclass(frozen=True)
class Explanation:
    """What rounding one float64 value to a format gives, as data.

    Attributes
    ----------
    value : float, int or Fraction
        The input, exactly: a float when the input is a float64 value (any float,
        NumPy or ml_dtypes scalar that float64 holds), else the Python int (Python and
        64-bit integers, which float64 may or may not hold) or `Fraction` (long doubles
        float64 cannot hold). Its
        exact value is ``Fraction(value)``, and that is what is rounded, once.
    fmt : Format
    mode : str
    rounded : float
        ``lp.round(value, fmt, mode)``.
    bits : int or None
        ``lp.encode`` of the result (None for NaN in a format without NaN).
    sign, exponent, mantissa : int or None
        ``lp.fields`` of ``bits``: the stored integer fields.
    below, above : float or None
        The format's neighbours of ``rounded`` on the real line (the next value
        down and up; ±inf where the format has it, None past the ends or for NaN).
    down, up : float
        The candidates: ``value`` rounded toward -inf and toward +inf.
    flags : dict
        `lp.flags()` counts of the rounding (``inexact``, ``underflow``, ...). It takes
        part in ``==`` but not in the hash, so that an `Explanation` is hashable.

    Examples
    --------
    >>> import lowprec as lp
    >>> e = lp.explain(1e-7, "fp16")             # below 2**-14: a subnormal
    >>> e.kind, e.exponent_field, e.mantissa, e.significand, e.power
    ('subnormal', '00000', 2, Fraction(1, 512), -14)
    >>> e.ulp == lp.FP16.smallest_subnormal, e.flags["underflow"]
    (True, 1)
    >>> e.abs_error == abs(e.error), float(e.rel_error) > lp.FP16.unit_roundoff
    (True, True)
    """

    value: float | int | Fraction
    fmt: Format
    mode: Mode
    rounded: float
    bits: int | None
    sign: int | None
    exponent: int | None
    mantissa: int | None
    below: float | None
    above: float | None
    down: float
    up: float
    flags: dict = field(hash=False)

    # -- classification and fields ----------------------------------------------
    @property
    def kind(self) -> str:
        """``"nan"``, ``"inf"``, ``"zero"``, ``"subnormal"`` or ``"normal"``."""
        return kind_of(self.rounded, self.fmt)

    def _field(self, value, width):
        return None if value is None else format(value, f"0{width}b") if width else ""

    @property
    def sign_field(self) -> str | None:
        """The sign bit as a string, ``"0"`` or ``"1"``."""
        return self._field(self.sign, 1)

    @property
    def exponent_field(self) -> str | None:
        """The exponent field as a string of bits, e.g. ``"01111011"``."""
        return self._field(self.exponent, self.fmt.exponent_bits)

    @property
    def mantissa_field(self) -> str | None:
        """The mantissa (stored fraction) field as a string of bits."""
        return self._field(self.mantissa, self.fmt.mantissa_bits)

    @property
    def power(self) -> int | None:
        """The unbiased exponent e of a finite nonzero result (``emin`` when subnormal)."""
        if self.kind not in ("normal", "subnormal"):
            return None
        # exponent and bias are ints here: bits of a finite result, a format's bias.
        return (self.exponent - self.fmt.bias  # type: ignore[operator]
                if self.kind == "normal" else self.fmt.emin)

    @property
    def significand(self) -> Fraction | None:
        """The significand as an exact `Fraction`: 1 + M/2**m (normal), M/2**m (subnormal)."""
        if self.kind not in ("normal", "subnormal"):
            return None
        hidden = 1 if self.kind == "normal" else 0
        # mantissa is an int here: the field of a finite result.
        return hidden + Fraction(self.mantissa, 2 ** self.fmt.mantissa_bits)  # type: ignore[arg-type]

    @property
    def exact_decimal(self) -> str:
        """The exact decimal value of the result (binary floats have finite expansions)."""
        return _exact_decimal(self.rounded)

    # -- spacing and errors --------------------------------------------------------
    @property
    def ulp(self) -> float | None:
        """The spacing of the format at the result: 2**(max(e, emin) - m), as ``np.spacing``.

        ``None`` for inf and NaN."""
        r = self.rounded
        if math.isnan(r) or math.isinf(r):
            return None
        e = math.frexp(abs(r))[1] - 1 if r else self.fmt.emin
        return math.ldexp(1.0, max(e, self.fmt.emin) - self.fmt.mantissa_bits)

    @property
    def error(self) -> Fraction | None:
        """``rounded - value`` as an exact `Fraction` (None when either is not finite)."""
        if not (math.isfinite(self.value) and math.isfinite(self.rounded)):
            return None
        return Fraction(self.rounded) - Fraction(self.value)

    @property
    def abs_error(self) -> Fraction | None:
        """``|rounded - value|`` as an exact `Fraction` (None when not finite)."""
        err = self.error
        return None if err is None else abs(err)

    @property
    def rel_error(self) -> Fraction | None:
        """``|rounded - value| / |value|`` as an exact `Fraction` (None for 0 or non-finite)."""
        err = self.error
        return None if err is None or self.value == 0 else abs(err) / abs(Fraction(self.value))

    @property
    def p_up(self) -> Fraction | None:
        """For ``"sr"``: the probability of rounding to ``up``, ``(value - down) / (up - down)``.

        None unless both candidates are finite and differ."""
        if not all(math.isfinite(v) for v in (self.value, self.down, self.up)) \
                or self.down == self.up:
            return None
        return (Fraction(self.value) - Fraction(self.down)) / (Fraction(self.up)
                                                               - Fraction(self.down))

    # -- text --------------------------------------------------------------------------
    def __str__(self) -> str:
        return "\n".join(self._lines())

    def _lines(self):
        title, rows = self._rows()
        return [title, *(f"  {key:<10}  {text}" for key, text in rows)]

    def _rows(self):
        """The title and the (label, text) rows of the text view; `_lines` and
        `_repr_html_` both draw these, so the two views say the same."""
        fmt, r = self.fmt, self.rounded
        m = fmt.mantissa_bits
        title = (f"{_shown(self.value)} in {format_name(fmt)}, {self.mode} "
                 f"({MODE_NAMES[self.mode]})")
        rows = [["layout", layout(fmt).split(": ", 1)[1]]]
        if self.bits is None:
            rows.append(["bits", f"none: {format_name(fmt)} has no NaN (lp.round gives "
                                 "nan, lp.encode raises)"])
        else:
            width = max(4, fmt.exponent_bits)
            hex_digits = (fmt.bits + 3) // 4
            sign_name, sign_bit = ("sign | ", f"   {self.sign_field} | ") if fmt.signed \
                else ("", "")
            rows += [
                ["fields", f"{sign_name}{'exponent'.ljust(width)} | mantissa"],
                ["bits", f"{sign_bit}{self.exponent_field.ljust(width)}"
                         f" | {self.mantissa_field or '(none)'}   = 0x{self.bits:0{hex_digits}x}"],
            ]
        kind = self.kind
        if self.sign is not None and kind != "nan" and fmt.signed:
            rows.append(["sign", f"{self.sign} ({'-' if self.sign else '+'})"])
        if kind == "normal":
            rows += [
                ["exponent", f"{self.exponent_field} = {self.exponent}, "
                             f"{self.exponent} - {fmt.bias} = {self.power}"],
                ["mantissa", f"{self.mantissa_field or '(none)'} = {self.mantissa}, "
                             f"significand 1 + {self.mantissa}/{2**m} = "
                             f"{float(self.significand)!r}"],
                ["value", f"{'-' if self.sign else '+'}{float(self.significand)!r} * "
                          f"{_pow2(self.power)} = {self.exact_decimal} (exact)"],
            ]
        elif kind == "subnormal":
            rows += [
                ["exponent", f"{self.exponent_field} = 0: subnormal, exponent emin = "
                             f"{fmt.emin}"],
                ["mantissa", f"{self.mantissa_field} = {self.mantissa}, significand "
                             f"0 + {self.mantissa}/{2**m} = {float(self.significand)!r}"],
                ["value", f"{'-' if self.sign else '+'}{float(self.significand)!r} * "
                          f"{_pow2(self.power)} = {self.exact_decimal} (exact)"],
            ]
        elif kind == "zero":
            rows.append(["value", f"{self.exact_decimal} (exponent and mantissa all 0)"])
        elif kind == "inf":
            rows.append(["value", f"{r!r} (exponent all ones, mantissa 0)"])
        else:
            rows.append(["value", f"nan ({_NAN_RULE[fmt.kind]})"])
        if self.below is not None or self.above is not None:
            def show(v):
                return "none" if v is None else repr(v)

            rows.append(["neighbours", f"{show(self.below)} < {r!r} < {show(self.above)}"])
        if self.ulp is not None:
            e = math.frexp(self.ulp)[1] - 1
            rows.append(["ulp", f"{_pow2(e)} = {self.ulp!r}"])
        if math.isfinite(self.value):
            exact, shown = _exact_decimal(self.value), _shown(self.value)
            if isinstance(self.value, float):
                note = "" if exact == shown else f" (float64, exactly {exact})"
            elif _float64_holds(self.value):
                note = ""                     # an int such as 3 or 500: a float64 value
            else:
                lo, hi = _float64_neighbours(self.value)
                what = "an int" if isinstance(self.value, int) else "a long double"
                note = (f" ({what} no float64 holds: between the float64 values {lo!r} "
                        f"and {hi!r}; it is rounded once, not through float64)")
            rows.append(["input", f"{shown}{note}"])
            if abs(self.value) > fmt.max and (fmt.signed or self.value > 0):
                rows.append(["overflow", self._overflow_text()])
            elif self.down != self.up:
                rows.append(["candidates", f"{self.down!r} <= {shown} <= {self.up!r}"
                                           f": {self.mode} gives {r!r}"])
                if self.mode == "sr" and self.p_up is not None:
                    rows[-1][1] += f" (P(up) = {float(self.p_up):.6g})"
        if self.abs_error is not None:
            err = f"abs {float(self.abs_error):.6g}"
            if self.ulp:
                err += f" = {float(self.abs_error / Fraction(self.ulp)):.4g} ulp"
            if self.rel_error is not None:
                err += (f", rel {float(self.rel_error):.6g} = "
                        f"{float(self.rel_error / Fraction(fmt.unit_roundoff)):.4g} u "
                        f"(u = {_pow2(-fmt.p)})")
            rows.append(["error", err])
        raised = [k for k, v in self.flags.items() if v]
        rows.append(["flags", ", ".join(raised) if raised else "none (exact)"])
        return title, [(key, text) for key, text in rows]

    def _overflow_text(self) -> str:
        """What each mode, and saturation, gives for a finite value past ``±max``."""
        fmt, v = self.fmt, self.value
        x = _as_input(v)
        side = "above the largest" if v > 0 else "below the most negative"
        top = fmt.max if v > 0 else -fmt.max
        gives: dict[str, list[str]] = {}
        for mode in MODES_SHOWN + ((self.mode,) if self.mode not in MODES_SHOWN else ()):
            got = self.rounded if mode == self.mode else float(quiet(_round, x, fmt, mode))
            gives.setdefault(repr(got), []).append(mode)
        sat = float(quiet(_round, x, fmt, saturate=True))
        gives.setdefault(repr(sat), []).append("saturation")
        said = "; ".join(f"{_and(names)} {'gives' if len(names) == 1 else 'give'} {r}"
                         for r, names in gives.items())
        return (f"{_shown(v)} lies {side} finite value {top!r}: {said}"
                + (" (sr: at random between them)" if self.mode == "sr" else ""))

    # -- rich display (Jupyter) ------------------------------------------------------
    def _repr_html_(self) -> str:
        """The text view as HTML for Jupyter: the bits in boxes coloured by field, then
        the same rows as ``str()`` (inline CSS only, no script; every text escaped).

        Examples
        --------
        >>> import lowprec as lp
        >>> html = lp.explain(0.1, "bf16")._repr_html_()
        >>> html.startswith("<div"), "0.10009765625" in html, "<script" in html
        (True, True, False)
        """
        title, rows = self._rows()
        shown = [(key, text) for key, text in rows
                 if not (key in ("fields", "bits") and self.bits is not None)]
        raw = {"candidates": self._candidates_html()} if any(
            key == "candidates" for key, _ in shown) else {}
        return card(title, shown, raw=raw,
                    before=self._bits_html() if self.bits is not None else "")

    def _bits_html(self):
        fmt = self.fmt
        # An unsigned format (E8M0, UE4M3) stores no sign bit: no box for it.
        fields_ = [("sign", self.sign_field if fmt.signed else "", "sign"),
                   ("exponent", self.exponent_field or "", f"exponent (bias {fmt.bias})"),
                   ("mantissa", self.mantissa_field or "", "mantissa")]
        hex_digits = (fmt.bits + 3) // 4
        return bit_boxes(fields_, f"= 0x{self.bits:0{hex_digits}x}")

    def _candidates_html(self):
        down, up, r = repr(self.down), repr(self.up), repr(self.rounded)
        # rounded is one of the candidates (or NaN / inf past them): mark the one taken.
        d = mark(_esc(down)) if self.rounded == self.down else _esc(down)
        u = mark(_esc(up)) if self.rounded == self.up else _esc(up)
        text = f"{d} &lt;= {_esc(_shown(self.value))} &lt;= {u}: {_esc(self.mode)} gives {_esc(r)}"
        if self.mode == "sr" and self.p_up is not None:
            text += f" (P(up) = {float(self.p_up):.6g})"
        return text


def _esc(text):
    return html.escape(str(text), quote=True)


_NAN_RULE = {
    "ieee": "exponent all ones, mantissa not 0; lowprec's NaN is quiet",
    "fn": "S.1..1.1..1 is the only NaN pattern",
    "fnuz": "1000...0, the pattern of -0, is the only NaN",
    "finite": "no NaN pattern: lp.round passes NaN through, lp.encode refuses it",
    "extended": "1000...0 (unsigned: 1...1) is the only NaN; the top patterns are ±inf",
}


def _neighbours(r, fmt):
    """The format's values next to ``r`` on the real line, from adjacent bit patterns."""
    if math.isnan(r):
        return None, None
    top = 2 ** (fmt.bits - 1 if fmt.signed else fmt.bits)   # magnitude patterns: [0, top)
    mag = int(encode(abs(r), fmt))

    def value(pattern):
        if not 0 <= pattern < top:
            return None
        with np.errstate(over="ignore"):   # decode of FP64's inf pattern warns
            v = float(decode(pattern, fmt))
        return None if math.isnan(v) else v

    if math.isinf(r):
        away, toward = None, value(mag - 1)
    else:
        away = value(mag + 1)
        if mag > 0:
            toward = value(mag - 1)
        else:                               # zero (or E8M0's least value): below it, -value(1)
            toward = -value(1) if fmt.signed and fmt.zero else None
    neg = math.copysign(1.0, r) < 0
    if neg:
        return (None if away is None else -away), (None if toward is None else -toward)
    return toward, away


#: The modes the overflow row of `Explanation` reports (``sr`` is random; the mode
#: explained is added when it is not one of these).
MODES_SHOWN = ("rne", "rna", "rz", "ru", "rd", "ro")


def _and(names):
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _float64_holds(value):
    """Whether an int or a Fraction is exactly a float64 value."""
    try:
        return Fraction(float(value)) == value
    except OverflowError:
        return False


def _float64_neighbours(value):
    """The float64 values just below and just above an int or Fraction no float64
    holds (float(value) is one of them: it rounds to nearest)."""
    f = float(value)
    if Fraction(f) < value:
        return f, math.nextafter(f, math.inf)
    return math.nextafter(f, -math.inf), f


def _as_input(value):
    """The exact value of ``Explanation.value`` as `round` takes it: a float or an int
    as it is; a Fraction (a long double) as that long double again (its numerator's
    odd part has at most 64 bits and its denominator is a power of two, so
    ``ldexp`` of a long double of that odd part is exact)."""
    if not isinstance(value, Fraction):
        return value
    n, d = value.numerator, value.denominator
    t = (n & -n).bit_length() - 1 if n else 0
    return np.ldexp(np.longdouble(n >> t), t - (d.bit_length() - 1))


def _shown(value):
    """The input as text: repr of a float, digits of an int, exact decimal of a Fraction."""
    return repr(value) if isinstance(value, float) else _exact_decimal(value)


def _one_real(value):
    """``value`` checked to be one real number, and its exact value (see `Explanation`)."""
    if isinstance(value, np.ndarray):
        if value.ndim:
            raise ValueError(f"explain takes one value, got an array of shape {value.shape} "
                             "(lp.round takes arrays)")
        value = value[()]
    if isinstance(value, (list, tuple)):
        raise ValueError(f"explain takes one value, got a {type(value).__name__} of "
                         f"{len(value)} (lp.round takes sequences)")
    # lp.round's input rules (as_real_array), bools aside: ints beyond float64's range
    # raise ValueError, other ints round once; non-reals raise TypeError.
    try:
        if isinstance(value, (bool, np.bool_)):
            raise TypeError
        hi, lo = as_real_array(value)
    except TypeError:
        raise TypeError("explain takes one real number (a float, an int, a NumPy or "
                        f"ml_dtypes scalar), got {type(value).__name__} {reprlib.repr(value)}"
                        ) from None
    if lo is None:
        return value, float(hi)
    if isinstance(value, numbers.Integral):
        return value, int(value)
    return value, Fraction(*value.as_integer_ratio())


def explain(value: ArrayLike, fmt: FormatLike, mode: Mode = "rne", *,
            rng: RNGLike = None) -> Explanation:
    """Round one value to ``fmt`` and return everything a student would write down.

    Parameters
    ----------
    value : float, int, NumPy or ml_dtypes scalar
        One real number, as `lowprec.round` takes it: its exact value is rounded once
        (Python ints of any width below ``2**1024 - 2**970`` included). Strings, bytes,
        `Fraction`, `Decimal`, complex numbers and bools raise `TypeError` (convert
        first: ``float(Fraction(1, 3))`` is a float64); more than one value (a list, an
        array) raises `ValueError`; an int beyond float64's range raises `ValueError`.
    fmt : Format or str
        Target format.
    mode : str
        Rounding mode (see `lowprec.round`).
    rng : numpy.random.Generator or int, optional
        For ``mode="sr"``.

    Returns
    -------
    Explanation
        Data; ``print()`` it for the text the ``lowprec explain`` command shows.

    Examples
    --------
    >>> from lowprec.teaching import explain
    >>> e = explain(0.1, "bf16")
    >>> e.rounded, e.sign_field, e.exponent_field, e.mantissa_field
    (0.10009765625, '0', '01111011', '1001101')
    >>> e.below, e.above, e.ulp
    (0.099609375, 0.1005859375, 0.00048828125)
    >>> print(e)
    0.1 in BF16, rne (round to nearest, ties to even)
      layout      S EEEEEEEE MMMMMMM = 1 sign | 8 exponent (bias 127) | 7 mantissa bits, p = 8
      fields      sign | exponent | mantissa
      bits           0 | 01111011 | 1001101   = 0x3dcd
      sign        0 (+)
      exponent    01111011 = 123, 123 - 127 = -4
      mantissa    1001101 = 77, significand 1 + 77/128 = 1.6015625
      value       +1.6015625 * 2**-4 = 0.10009765625 (exact)
      neighbours  0.099609375 < 0.10009765625 < 0.1005859375
      ulp         2**-11 = 0.00048828125
      input       0.1 (float64, exactly 0.1000000000000000055511151231257827021181583404541015625)
      candidates  0.099609375 <= 0.1 <= 0.10009765625: rne gives 0.10009765625
      error       abs 9.76562e-05 = 0.2 ulp, rel 0.000976562 = 0.25 u (u = 2**-8)
      flags       inexact
    """
    fmt = _format(fmt)
    x, exact = _one_real(value)
    with flags() as f:
        r = float(_round(x, fmt, mode, rng=rng))
    down = float(quiet(_round, x, fmt, "rd"))
    up = float(quiet(_round, x, fmt, "ru"))
    if math.isnan(r) and not fmt.has_nan:
        bits = sign = exponent = mantissa = None
    else:
        bits = int(encode(r, fmt))   # r is a value of fmt: encoding it is exact
        sign, exponent, mantissa = (int(v) for v in fields(bits, fmt))
    below, above = _neighbours(r, fmt)
    counts = {k: v for k, v in f.as_dict().items()}
    return Explanation(exact, fmt, mode, r, bits, sign, exponent, mantissa, below, above,
                       down, up, counts)


def explain_text(value: ArrayLike,
                 fmts: tuple[FormatLike, ...] | list[FormatLike] = (
                     "fp32", "tf32", "fp16", "bf16", "e4m3", "e5m2"),
                 mode: Mode = "rne", *, rng: RNGLike = None) -> str:
    """`explain` in each format, as one text (what ``lowprec explain`` prints).

    Examples
    --------
    >>> from lowprec.teaching import explain_text
    >>> text = explain_text(1e5, ["fp16", "bf16"])
    >>> [line for line in text.splitlines() if "flags" in line]
    ['  flags       inexact, overflow', '  flags       inexact']
    """
    return "\n\n".join(str(explain(value, f, mode, rng=rng)) for f in fmts)


# -- error against K ---------------------------------------------------------------
