"""`plan`: the one validation of a rounding's options, and the constants it needs.

Every entry point that rounds calls `plan` with (format, mode, rng, subnormals,
saturate, sr_bits). These are `lp.round`, `lp.round_exact`, `lp.encode` and the
arithmetic. A wrong-typed option is a `TypeError` naming it, whatever the mode.

The constants of a rounding are computed once per set of options, and cached. A
`Plan` is read-only, so calls and threads share it. Only "sr" needs more: each call
attaches its stream of random words (`engine/stream.py`) to a copy of its own
(`Plan.with_stream`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..formats import Format, FormatLike
from ..formats import format as _format
from ..types import Mode
from .cache import Latest
from .checks import check_bool, check_int, check_mode, check_rng
from .float64 import ONE_BITS, operand
from .stream import as_stream

__all__ = ["Plan", "plan", "cached_plan"]


_ENCODING_MODES = ("rz", "rna", "ro", "sr")  # cheaper on the float64 encoding


class Plan:
    """Constants of one (format, mode, options) rounding: computed once per set of
    options (`cached_plan`) and read-only after, as calls and threads share them.
    ``stream`` is None but on the per-call copy that "sr" makes (`with_stream`)."""

    def __init__(self, fmt: Format, mode: Mode, subnormals: bool | None, saturate: bool,
                 sr_bits: int | None) -> None:
        self.fmt, self.mode, self.saturate = fmt, mode, bool(saturate)
        self.subnormals = fmt.subnormals if subnormals is None else bool(subnormals)
        m = fmt.mantissa_bits
        self.identity = fmt.p == 53
        self.m_bits = operand(m << 52)
        self.shift = np.uint64(52 - m)
        self.low_mask = operand((1 << (52 - m)) - 1)
        self.keep_mask = operand(~((1 << (52 - m)) - 1) & (2**64 - 1))
        self.half_low = operand((1 << (52 - m)) >> 1)
        # With m = 0 the sticky bit of ro would land in the exponent: scale instead.
        self.encoding = (mode in _ENCODING_MODES and self.subnormals and not self.identity
                         and not (mode == "ro" and m == 0))
        self.magic = mode == "rne" and self.subnormals and not self.identity
        # FP32 itself under RNE (any name): NumPy's float64 -> float32 cast is IEEE 754's
        # conversion, RNE with gradual underflow (the kernel's `_round_native`).
        self.native = (self.magic and fmt.kind == "ieee"
                       and (fmt.exponent_bits, m, fmt.bias) == (8, 23, 127))
        # RNE(fl64(a op b)) == RNE(a op b) for + - * / sqrt of values of the format when
        # 53 >= 2p + 2 (Figueroa 1995), provided fl64 neither overflows nor underflows:
        # |results| within [2**lo, 2**hi) of the format's least subnormal and max.
        hi, lo = fmt.emax + 1, fmt.emin - m
        self.innocuous = (self.magic and 2 * fmt.p + 2 <= 53
                          and max(2 * hi, hi - lo) <= 1022 and min(2 * lo, lo - hi) >= -1021)
        self.magic_bits = operand(((52 - m) << 52) + (1 << 51))
        self.magic_top = 2.0 ** min(971 + m, 1023)   # keeps C = 1.5 * 2**(e + 52 - m) finite
        self.zero_risk = 2.0 ** (fmt.emin - m)       # below it a result can be zero
        self.lo_f = 2.0 ** fmt.emin
        # Without a top clamp the scale 2**-q of inf/NaN stays normal when m >= 2;
        # finite values need none (rounding has an unbounded exponent range).
        self.clamp_top = m < 2
        self.hi_f = 2.0 ** min(fmt.emax + 1, 1023)
        self.two_one = operand(2 * ONE_BITS)
        # With every |x| below 2**emax no element can round beyond max.
        self.safe_top = 2.0 ** fmt.emax
        self.tiny_bits = np.uint64((fmt.emin + 1023) << 52)
        # `round_small`'s one range test: every exponent field e (2**floor(log2|x|) as
        # bits) in [2**emin, min(2**emax, magic_top)) is e - lo_bits (uint64, wrapping
        # below lo_bits: zeros, subnormals of the format) below small_span.
        lo_bits = int(np.float64(self.lo_f).view(np.uint64))
        top_bits = int(np.float64(min(self.safe_top, self.magic_top)).view(np.uint64))
        self.lo_bits = operand(lo_bits)
        self.small_span = operand(max(0, top_bits - lo_bits))
        self.lo_magic_bits = operand(lo_bits + int(self.magic_bits))
        self.max = fmt.max
        self.no_negative_zero = not fmt.has_negative_zero
        self.stream = None
        self.sr_bits = sr_bits
        # m <= 3: round by table lookup (built on first use) unless flags are counted.
        self.by_table = (mode != "sr" and not self.identity and m <= 3)
        # Where the mode sends an overflow under IEEE 754 (unbounded exponent first).
        self.inf_for = {"rne": "both", "rna": "both", "sr": "both", "rz": "none",
                        "ro": "none", "ru": "pos", "rd": "neg"}[mode]
        self.__dict__["_frozen"] = True

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__dict__.get("_frozen"):
            raise AttributeError(f"a Plan is shared by calls and threads: {name} is read-only")
        object.__setattr__(self, name, value)

    def with_stream(self, stream: Any) -> Plan:
        """A copy of this plan that draws the words of ``stream`` (one call's, or one
        chunk's or subset's: `engine.stream.Stream`, `At`)."""
        twin = object.__new__(Plan)
        twin.__dict__.update(self.__dict__)
        twin.__dict__["stream"] = stream
        return twin


# (format, its name, mode, subnormals, saturate, sr_bits) -> Plan; a sweep over
# custom formats keeps only the latest.
_PLANS = Latest(128)

# (format spec as given, its name, mode, subnormals, saturate) -> Plan, for options
# that passed `plan`'s checks with exactly these types (a str spec or a Format, bools).
_CHECKED = Latest(128)

def cached_plan(fmt: Format, mode: Mode, subnormals: bool | None, saturate: bool,
                sr_bits: int | None) -> Plan:
    """The `Plan` of checked options (``subnormals`` a bool or None, ``saturate`` a
    bool), built on first use.

    Its ``stream`` is None."""
    key = (fmt, fmt.name, mode, subnormals, saturate, sr_bits)
    found = _PLANS.get(key)
    if found is None:
        found = _PLANS.put(key, Plan(fmt, mode, subnormals, saturate, sr_bits))
    return found

def plan(fmt: FormatLike, mode: Mode, *, rng: object = None, subnormals: object = None,
         saturate: object = False, sr_bits: object = None, offset: object = 0) -> Plan:
    """Check the options of one rounding and plan it: the one check every entry point
    shares. A wrong-typed option is a `TypeError` naming it, whatever the mode
    (``subnormals="no"`` is truthy, ``rng=True`` would be seed 1). ``offset``: the
    position of the call's element 0 ("sr": element i draws the word of position
    offset + i, `engine.stream`)."""
    fast: tuple[object, ...] | None = None
    if (rng is None and sr_bits is None and offset == 0 and type(saturate) is bool
            and (subnormals is None or type(subnormals) is bool) and type(mode) is str):
        # Options that passed the checks before, with these very types: the same plan.
        if type(fmt) is str:
            fast = (fmt, None, mode, subnormals, saturate)
        elif type(fmt) is Format:
            fast = (fmt, fmt.name, mode, subnormals, saturate)
        if fast is not None:
            found = _CHECKED.get(fast)
            if found is not None:
                return found
    fmt = _format(fmt)
    if not fmt.signed:
        raise ValueError(f"{fmt.name or fmt.dtype_name} is an unsigned scale format: "
                         "lp.round, lp.encode and lp.decode take it, arithmetic in it is "
                         "not defined")
    check_mode(mode)
    check_rng(rng)
    subnormals = check_bool("subnormals", subnormals, optional=True)
    saturate = check_bool("saturate", saturate)
    if sr_bits is not None:
        sr_bits = check_int("sr_bits", sr_bits, minimum=1)
        if sr_bits > 53:
            raise ValueError(f"sr_bits must be an int in [1, 53], got {sr_bits!r}")
        if mode != "sr":
            raise ValueError("sr_bits applies only to mode='sr'")
    found = cached_plan(fmt, mode, subnormals, saturate, sr_bits)
    if mode == "sr":
        return found.with_stream(as_stream(rng, offset))
    check_int("offset", offset, minimum=0)
    if fast is not None:
        _CHECKED.put(fast, found)
    return found
