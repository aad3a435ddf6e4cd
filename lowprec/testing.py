"""Exact references and Hypothesis strategies, for lowprec's tests and for yours.

`reference_round` rounds one value at a time on `fractions.Fraction`. It is written
for obviousness rather than speed, and shares no code with the vectorised kernel.
It is the oracle the kernel is tested against, and is itself checked against MPFR.
The strategies generate the inputs that break rounding code: exact ties, values
next to the subnormal boundary and to the overflow threshold. Hypothesis is imported only
when a strategy is asked for, so this module loads without it. `replay` (from
`lowprec.tensorcore.replay`) checks a matmul model against recorded hardware or
simulator results, row by row.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

from .formats import FormatLike
from .formats import format as _format
from .tensorcore.replay import ReplayResult, replay
from .types import Mode

if TYPE_CHECKING:   # for the annotations only: Hypothesis is imported on use
    from hypothesis.strategies import SearchStrategy

__all__ = ["reference_round", "representable_values", "values", "bit_patterns",
           "midpoints", "near_overflow", "subnormals", "replay", "ReplayResult"]

_NEAREST = {"rne", "rna"}


def _exponent(q):
    """floor(log2(q)) for a positive Fraction, exactly."""
    e = q.numerator.bit_length() - q.denominator.bit_length()
    return e if Fraction(2) ** e <= q else e - 1


def reference_round(x: float | int | Fraction, fmt: FormatLike, mode: Mode = "rne", *,
                    subnormals: bool | None = None, saturate: bool = False,
                    u: float | None = None) -> float:
    """Round one real number to ``fmt`` exactly, returning a float (or inf/NaN).

    ``x`` may be a float, int or `Fraction`. ``mode`` is any of lowprec's modes.
    For ``"sr"`` pass ``u``, the uniform draw in [0, 1). The result then rounds up
    (toward +inf) when ``u < (x - down) / (up - down)``.

    Examples
    --------
    >>> from fractions import Fraction
    >>> from lowprec.testing import reference_round
    >>> reference_round(Fraction(1, 10), "bf16")
    0.10009765625
    >>> reference_round(1 + 2**-8, "bf16"), reference_round(1 + 2**-8, "bf16", "rna")
    (1.0, 1.0078125)
    >>> reference_round(1000, "e4m3"), reference_round(1000, "e4m3", saturate=True)
    (nan, 448.0)
    """
    fmt = _format(fmt)
    subnormals = fmt.subnormals if subnormals is None else subnormals
    if isinstance(x, float):
        if math.isnan(x):
            return x                          # NaN, with its sign
        if math.isinf(x):
            if fmt.has_inf:
                return x
            if saturate or fmt.kind == "finite":
                return math.copysign(fmt.max, x)
            return math.copysign(math.nan, x)   # fn/fnuz: NaN where IEEE keeps inf
    negative = (x < 0) or (isinstance(x, float) and math.copysign(1.0, x) < 0)
    q = abs(Fraction(x))
    if q == 0:
        zero = -0.0 if negative and fmt.has_negative_zero else 0.0
        return zero
    # Magnitude rounding: toward-zero and away-from-zero candidates on the grid.
    mode_mag: str = mode
    if mode == "ru":
        mode_mag = "rz" if negative else "ra"
    elif mode == "rd":
        mode_mag = "ra" if negative else "rz"
    e = _exponent(q)
    if e >= fmt.emin:
        quantum = Fraction(2) ** (e - fmt.mantissa_bits)
    elif subnormals:
        quantum = Fraction(2) ** (fmt.emin - fmt.mantissa_bits)
    else:
        quantum = Fraction(2) ** fmt.emin
    k, rem = divmod(q, quantum)        # q = k * quantum + rem, 0 <= rem < quantum
    down, up = k * quantum, (k + 1) * quantum
    if rem == 0:
        mag = down
    elif mode_mag == "rz":
        mag = down
    elif mode_mag == "ra":
        mag = up
    elif mode_mag == "ro":
        mag = down if k % 2 == 1 else up
    elif mode_mag in _NEAREST:
        half = quantum / 2
        if rem < half:
            mag = down
        elif rem > half:
            mag = up
        elif mode_mag == "rna":
            mag = up
        else:
            mag = down if k % 2 == 0 else up
    elif mode_mag == "sr":
        if u is None:
            raise ValueError("reference_round with mode 'sr' needs the draw u")
        # P(toward +inf) = (x - lower) / (upper - lower), in signed terms.
        frac = rem / quantum
        go_up = Fraction(u) < (frac if not negative else 1 - frac)
        mag = (up if go_up else down) if not negative else (down if go_up else up)
    else:
        raise ValueError(f"unknown mode {mode!r}")
    if mag > Fraction(fmt.max):
        mag = _overflow(fmt, mode, negative, saturate)
    else:
        mag = float(mag)
    if mag == 0 and not fmt.has_negative_zero:
        return 0.0
    return -mag if negative else mag


def _overflow(fmt, mode, negative, saturate):
    """|result| beyond max: inf, NaN or max by the mode and the format's kind."""
    to_inf = (mode in ("rne", "rna", "sr") or (mode == "ru" and not negative)
              or (mode == "rd" and negative))
    if saturate or fmt.kind == "finite" or not to_inf:
        return fmt.max
    return math.inf if fmt.has_inf else math.nan


def representable_values(fmt: FormatLike) -> list[float]:
    """All finite non-negative values of a format of 16 bits or fewer, ascending,
    enumerated from the definition (not from `decode`)."""
    fmt = _format(fmt)
    if fmt.bits > 16:
        raise ValueError("only formats of 16 bits or fewer are enumerated")
    out = {0.0} if fmt.zero else set()
    for k in range(1, 2 ** fmt.mantissa_bits):
        if fmt.subnormals:
            out.add(math.ldexp(k, fmt.emin - fmt.mantissa_bits))
    for e in range(fmt.emin, fmt.emax + 1):
        for k in range(2 ** fmt.mantissa_bits):
            v = math.ldexp(2 ** fmt.mantissa_bits + k, e - fmt.mantissa_bits)
            if v <= fmt.max:
                out.add(v)
    return sorted(out)


# -- Hypothesis strategies ----------------------------------------------------

def _st():
    from hypothesis import strategies as st
    return st


def values(fmt: FormatLike, *, allow_nan: bool = True,
           allow_infinity: bool = True) -> SearchStrategy[float]:
    """Any float64, with extra weight around the format's range: its binades, its
    ties (`midpoints`, for every format but FP64, whose ties are not float64 values),
    `near_overflow` and `subnormals`. NaN and infinities come only when allowed.

    Examples
    --------
    >>> import math
    >>> import lowprec as lp
    >>> from lowprec.testing import values
    >>> from hypothesis import find
    >>> huge = find(values(lp.FP64, allow_infinity=False, allow_nan=False),
    ...             lambda x: abs(x) > 1e308)
    >>> math.isfinite(huge)
    True
    """
    fmt = _format(fmt)
    st = _st()
    scaled = st.tuples(st.floats(1.0, 2.0, exclude_max=True),
                       st.integers(max(fmt.emin - fmt.mantissa_bits - 3, -1074),
                                   min(fmt.emax + 2, 1023)),
                       st.booleans()).map(
        lambda t: (-1) ** t[2] * math.ldexp(t[0], t[1]))
    parts = [scaled, st.floats(allow_nan=allow_nan, allow_infinity=allow_infinity)]
    if _ties_are_floats(fmt):
        parts.append(midpoints(fmt))
    return st.one_of(*parts, near_overflow(fmt), subnormals(fmt))


def bit_patterns(fmt: FormatLike) -> SearchStrategy[int]:
    """Integers in [0, 2**bits): every pattern of the format, NaN and inf codes
    included."""
    fmt = _format(fmt)
    return _st().integers(0, 2 ** fmt.bits - 1)


def _ties_are_floats(fmt):
    # A tie needs p + 1 significant bits (the format's p, then a 1); the smallest,
    # half the smallest subnormal, is >= 2**-1021 for every format but FP64
    # (Format requires emin - mantissa_bits >= -1020), so p <= 52 is the whole test.
    return fmt.p <= 52


def _lower_neighbour(fmt, st):
    """A finite value v >= 0 of the format with its gap g to the next value up, as
    (v, g): v + g is the next value of the format, or, for v = max, the first value
    past max on the format's grid with the exponent unbounded (v + g/2 is then the
    overflow threshold)."""
    m = fmt.mantissa_bits
    # fn formats give their top code S.1..1.1..1 to NaN: in the top binade the
    # largest mantissa field is max's, not 2**m - 1.
    top_k = int(fmt.max / math.ldexp(1.0, fmt.emax - m)) - 2 ** m

    def build(t):
        e, k = t
        if e < fmt.emin:
            if not fmt.subnormals:   # below the smallest normal only 0 is a value
                return 0.0, fmt.smallest_normal
            sub = math.ldexp(1.0, fmt.emin - m)
            return (k % 2 ** m) * sub, sub
        k %= (top_k if e == fmt.emax else 2 ** m - 1) + 1
        return math.ldexp(2 ** m + k, e - m), math.ldexp(1.0, e - m)
    return st.tuples(st.integers(fmt.emin - 1, fmt.emax),
                     st.integers(0, 2 ** max(m, 1))).map(build)


def midpoints(fmt: FormatLike) -> SearchStrategy[float]:
    """Exact ties of the format, either sign, and ties nudged by one float64 ulp.

    A tie is the value halfway between two adjacent values of the format. The ties
    run from the one between 0 and the smallest subnormal (or the smallest normal
    without subnormals) up to the one below max. The overflow threshold
    ``max + ulp/2`` is a tie too: there round-to-nearest chooses between max and
    overflow. ``ulp`` is the gap in max's binade: 464 for E4M3, whose 480 is NaN.
    Raises ``ValueError`` for FP64, whose ties are not float64 values.

    Examples
    --------
    >>> import lowprec as lp
    >>> from lowprec.testing import midpoints
    >>> midpoints(lp.FP64)
    Traceback (most recent call last):
    ...
    ValueError: FP64 has no ties that are float64 values: a tie between adjacent values needs
    54 significant bits
    """
    fmt = _format(fmt)
    if not _ties_are_floats(fmt):
        raise ValueError(f"{fmt} has no ties that are float64 values: a tie "
                         f"between adjacent values needs {fmt.p + 1} significant bits")
    st = _st()

    def tie(t):
        (v, gap), sign, nudge = t
        mid = v + gap / 2   # exact: p + 1 <= 53 bits, and >= 2**-1021 (_ties_are_floats)
        if nudge:
            mid = math.nextafter(mid, math.inf if nudge > 0 else 0.0)
        return sign * mid
    return st.tuples(_lower_neighbour(fmt, st), st.sampled_from([1.0, -1.0]),
                     st.sampled_from([0, 1, -1])).map(tie)


def near_overflow(fmt: FormatLike) -> SearchStrategy[float]:
    """Finite float64 values near the overflow threshold, either sign.

    They are at and up to three float64 ulps either side of max, max + ulp/2,
    max + ulp and 2**(emax+1). ``ulp`` is the gap in max's binade. Those past the
    largest float64 are left out: for FP64, only max and the values just below it.

    Examples
    --------
    >>> import math
    >>> import lowprec as lp
    >>> from hypothesis import find
    >>> from lowprec.testing import near_overflow
    >>> find(near_overflow(lp.FP8_E4M3), lambda x: x > 460)
    464.0
    >>> find(near_overflow(lp.FP64), math.isinf)
    Traceback (most recent call last):
    ...
    hypothesis.errors.NoSuchExample: No examples found of condition isinf
    """
    fmt = _format(fmt)
    st = _st()
    ulp = math.ldexp(1.0, fmt.emax - fmt.mantissa_bits)
    anchors = [fmt.max, fmt.max + ulp / 2, fmt.max + ulp]
    if fmt.emax < 1023:
        anchors.append(math.ldexp(1.0, fmt.emax + 1))
    anchors = [a for a in anchors if math.isfinite(a)]

    def near(t):
        a, steps, sign = t
        v = a
        for _ in range(abs(steps)):
            step = math.nextafter(v, math.inf if steps > 0 else 0.0)
            if math.isinf(step):
                break
            v = step
        return sign * v
    return st.tuples(st.sampled_from(anchors), st.integers(-3, 3),
                     st.sampled_from([1.0, -1.0])).map(near)


def subnormals(fmt: FormatLike) -> SearchStrategy[float]:
    """Values of magnitude below the smallest normal, either sign, and values near
    the edges there.

    Those near the edges are at and one float64 ulp either side of them. The edges
    are the smallest normal, the smallest subnormal and half the smallest normal.
    They also include the ties: half the smallest subnormal, and half a subnormal
    below the smallest normal. Without subnormals, the smallest subnormal reads as
    the smallest normal (``numpy.finfo``'s convention), so the one tie is half of it.

    Examples
    --------
    >>> import lowprec as lp
    >>> from lowprec.testing import subnormals
    >>> from hypothesis import find
    >>> find(subnormals(lp.FP8_E4M3), lambda x: x > 2 ** -7) <= 2 ** -6
    True
    """
    fmt = _format(fmt)
    st = _st()
    tiny = fmt.smallest_normal
    sub = fmt.smallest_subnormal
    # FP64's sub / 2 underflows to 0.0; it is no edge.
    anchors = sorted({a for a in (tiny, sub, sub / 2, tiny - sub / 2, tiny / 2) if a > 0})
    inside = st.floats(0.0, tiny, allow_subnormal=True)
    edges = st.tuples(st.sampled_from(anchors), st.integers(-2, 2)).map(
        lambda t: math.nextafter(t[0], math.inf) if t[1] > 0 else (
            math.nextafter(t[0], 0.0) if t[1] < 0 else t[0]))
    return st.tuples(st.one_of(inside, edges), st.sampled_from([1.0, -1.0])).map(
        lambda t: t[0] * t[1])
