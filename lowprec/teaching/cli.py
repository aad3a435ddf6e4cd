"""The ``lowprec`` command: format tables, rounding, explanations and the demo.

The subcommands are ``formats``, ``explain``, ``round``, ``decode``, ``encode``,
``values``, ``demo`` and ``replay``, each with ``--help``. Bad input prints one line
to stderr and exits with status 2, never a traceback. The command only formats what
the library computes: `lowprec.teaching` holds the teaching logic. It must not
compute anything the library does not offer. It imports matplotlib only for
``demo --plot``.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import importlib.util
import io
import math
import os
import re
import sys
import time
from collections.abc import Iterable, Sequence
from decimal import Decimal
from fractions import Fraction

import numpy as np

from ..bits import decode as _decode
from ..bits import encode as _encode
from ..bits import fields as _fields
from ..engine.checks import MODES
from ..formats import NAMED_FORMATS, FormatLike
from ..formats import format as _format
from ..rounding import round as _round
from .experiments import error_table, error_vs_k, plot_error_vs_k
from .explanation import explain, explain_text, kind_of

__all__ = ["main", "format_table"]

_COLUMNS = ("format", "dtype", "bits", "exp", "mant", "bias", "eps",
            "unit roundoff", "max", "smallest normal", "smallest subnormal",
            "digits", "inf", "NaN")
# The default table fits 100 columns: eps (= 2**-mant), the unit roundoff (eps / 2),
# the decimal digits and the inf / NaN columns (the kind says them) are left to --wide,
# and the smallest normal and subnormal are shown exactly, as powers of two.
_NARROW = ("format", "dtype", "bits", "exp", "mant", "bias", "kind", "max",
           "min normal", "min subnormal")


def _dtype(fmt):
    # The NumPy or ml_dtypes dtype name, "-" where there is none (TF32).
    return fmt.numpy_dtype_name or "-"


def _row(fmt):
    nan = {"ieee": "exp all ones", "fn": "S.1111.111 only", "fnuz": "0x80 only",
           "finite": "none", "extended": "0x80 only" if fmt.signed else "0xFF only"}[fmt.kind]
    if fmt.kind == "ieee" and not fmt.has_nan:
        nan = "none"
    return (str(fmt), _dtype(fmt), fmt.bits, fmt.exponent_bits, fmt.mantissa_bits,
            fmt.bias, f"{fmt.eps:.6g}", f"{fmt.unit_roundoff:.6g}", f"{fmt.max:.6g}",
            f"{fmt.smallest_normal:.6g}", f"{fmt.smallest_subnormal:.6g}",
            fmt.precision, "yes" if fmt.has_inf else "no", nan)


def _narrow_row(fmt):
    # Past 10**6 (FP32-range maxima, integers) four digits, cut toward zero so as never to
    # show more than the largest value: 3.402e+38 for 3.4028234...e+38.
    digits = str(int(fmt.max))
    big = f"{fmt.max:.6g}" if fmt.max < 1e6 else f"{digits[0]}.{digits[1:4]}e+{len(digits) - 1}"
    low = fmt.emin - (fmt.mantissa_bits if fmt.subnormals else 0)
    return (str(fmt), _dtype(fmt), fmt.bits, fmt.exponent_bits, fmt.mantissa_bits,
            fmt.bias, fmt.kind, big, f"2**{fmt.emin}", f"2**{low}")


def format_table(style: str = "table", formats: Iterable[FormatLike] | None = None, *,
                 wide: bool = False) -> str:
    """The comparison table of formats as text (``table``, ``markdown`` or ``csv``).

    ``table`` and ``markdown`` show the main columns, and the ``table`` fits 100
    columns. ``wide=True`` shows all of them, as ``csv`` always does.

    Examples
    --------
    >>> from lowprec.teaching.cli import format_table
    >>> print(format_table(formats=["fp16", "bf16", "e4m3"]))
    format    dtype          bits  exp  mant  bias  kind  max        min normal  min subnormal
    --------  -------------  ----  ---  ----  ----  ----  ---------  ----------  -------------
    FP16      float16        16    5    10    15    ieee  65504      2**-14      2**-24
    BF16      bfloat16       16    8    7     127   ieee  3.389e+38  2**-126     2**-133
    FP8_E4M3  float8_e4m3fn  8     4    3     7     fn    448        2**-6       2**-9
    >>> print(format_table("csv", ["fp16", "bf16"]))
    format,dtype,bits,exp,mant,bias,eps,unit roundoff,max,smallest normal,smallest subnormal,digits,inf,NaN
    FP16,float16,16,5,10,15,0.000976562,0.000488281,65504,6.10352e-05,5.96046e-08,3,yes,exp all ones
    BF16,bfloat16,16,8,7,127,0.0078125,0.00390625,3.38953e+38,1.17549e-38,9.18355e-41,2,yes,exp all ones
    """  # noqa: E501 - the csv rows print whole
    if style not in ("table", "markdown", "csv"):
        raise ValueError(f"unknown table style {style!r}; valid: table, markdown, csv")
    fmts = [_format(f) for f in (formats or NAMED_FORMATS.values())]
    full = wide or style == "csv"
    columns = _COLUMNS if full else _NARROW
    rows = [tuple(str(c) for c in (_row(f) if full else _narrow_row(f))) for f in fmts]
    if style == "csv":
        # The csv module quotes cells with commas (an unnamed format's str()).
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows([columns, *rows])
        return out.getvalue().rstrip("\n")
    widths = [max(len(r[i]) for r in [columns, *rows]) for i in range(len(columns))]
    if style == "markdown":
        def cells(r):
            return " | ".join(c.ljust(w) for c, w in zip(r, widths))

        sep = "|-" + "-|-".join("-" * w for w in widths) + "-|"
        return "\n".join([f"| {cells(columns)} |", sep, *(f"| {cells(r)} |" for r in rows)])

    # Two spaces between columns, no rules: the narrow table then fits 100 columns.
    def line(r):
        return "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()

    return "\n".join([line(columns), line(["-" * w for w in widths]), *map(line, rows)])


# A token that is a negative number ("-1e-8", "-.5", "-inf", "-NaN", and "-1e", which is
# no number and should say so): a value, never an option. argparse reads every token
# that starts with "-" and does not match its own pattern (which varies between Python
# versions) as an option; one that starts with a space it always reads as a value, and
# float(), int() and lp.format ignore the space.
_NEGATIVE = re.compile(r"^-(\.?\d|inf|nan)", re.I)


_NUMBER_LIKE = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d*)?$")


def _protect_negatives(argv):
    return [" " + a if isinstance(a, str) and _NEGATIVE.match(a) else a for a in argv]


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, f"lowprec: error: {message}\n")

    def parse_args(self, args=None, namespace=None):
        # Only the top-level parser is called here (subparsers parse_known_args).
        args = sys.argv[1:] if args is None else list(args)
        parsed = super().parse_args(_protect_negatives(args), namespace)
        if getattr(parsed, "command", None) == "explain":
            _resolve_explain(self, parsed)
        return parsed


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


def _resolve_explain(parser, args):
    """VALUE and the formats of ``explain``, wherever VALUE stands.

    ``--fmt`` takes one or more formats, so in ``explain --fmt bf16 0.1`` argparse hands
    it 0.1 too; no format name is a number, so a number among them is the VALUE."""
    tokens = args.fmt or []
    # A number, or what is written like one ("-1e": then VALUE's error names it).
    numbers = [t for t in tokens if _is_number(t) or _NUMBER_LIKE.match(t.strip())]
    values = ([] if args.value is None else [args.value]) + numbers
    if not values:
        parser.error("the following arguments are required: VALUE")
    if len(values) > 1:
        parser.error("explain takes one VALUE, got " + ", ".join(v.strip() for v in values))
    try:
        args.value = _parse_number(values[0])
    except argparse.ArgumentTypeError as exc:
        parser.error(f"argument VALUE: {exc}")
    fmts = []
    for t in tokens:
        if t not in numbers:
            try:
                fmts.append(_parse_format(t))
            except argparse.ArgumentTypeError as exc:
                parser.error(f"argument --fmt: {exc}")
    args.fmt = fmts or None


def _parse_number(text):
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text.strip()!r}") from None


def _parse_format(text):
    try:
        return _format(text)
    except (ValueError, TypeError) as exc:
        raise argparse.ArgumentTypeError(str(exc).replace(repr(text), repr(text.strip()))
                                         ) from None


def _parse_mode(text):
    # Format and model names are case-insensitive; so are mode names here.
    return text.strip().lower()


def _parse_seed(text):
    try:
        seed = int(text)
    except ValueError:
        seed = -1
    if seed < 0:
        raise argparse.ArgumentTypeError(
            f"--seed must be a non-negative integer, got {text.strip()!r}")
    return seed


def _parse_bits(text):
    # int(text, 0) reads 0x.., 0b.., 0o.. and decimal (underscores too: 0b0_01111_0000000000);
    # base 10 then takes the decimal numbers with leading zeros that base 0 refuses (0100).
    t = text.strip()
    for base in (0, 10):
        try:
            return t, int(t, base)
        except ValueError:
            pass
    raise argparse.ArgumentTypeError(
        f"not a bit pattern: {t!r} (give hex 0x3dcd, binary 0b0011... or a decimal integer)")


def _parse_k(text):
    try:
        k = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 16 <= k <= 16384:
        raise argparse.ArgumentTypeError(f"--max-k must be in [16, 16384], got {k}")
    return k


def _parse_show(text):
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(
            f"--show must be a non-negative integer, got {text.strip()!r}")
    return n


def _mode_and_seed(p):
    p.add_argument("--mode", type=_parse_mode, choices=MODES, default="rne",
                   help="rounding mode, any case (default: rne)")
    p.add_argument("--seed", type=_parse_seed, default=0,
                   help="random seed for --mode sr, a non-negative integer (default: 0)")


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the ``lowprec`` command.

    Examples
    --------
    >>> from lowprec.teaching.cli import build_parser
    >>> args = build_parser().parse_args(["explain", "-1e-8", "--fmt", "fp16", "bf16"])
    >>> args.value, [f.name for f in args.fmt], args.mode
    (-1e-08, ['FP16', 'BF16'], 'rne')
    >>> args = build_parser().parse_args(["explain", "--fmt", "bf16", "-inf", "--mode", "RZ"])
    >>> args.value, [f.name for f in args.fmt], args.mode
    (-inf, ['BF16'], 'rz')
    """
    from .. import __version__
    parser = _Parser(prog="lowprec", description="Emulate low-precision floating point: "
                     "format tables, rounding, bit-level explanations and a demo.")
    parser.add_argument("--version", action="version", version=f"lowprec {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser,
                                metavar="{formats,explain,round,decode,encode,values,demo,"
                                "replay}")
    p = sub.add_parser("formats", help="the comparison table of all named formats",
                       description="The comparison table of all named formats; with "
                       "NAMEs, the parameter table of each (Format.table()).")
    p.add_argument("names", nargs="*", type=_parse_format, metavar="NAME",
                   help="formats to show one by one (any name lp.format takes); with "
                   "--format markdown or csv, the comparison table of just these")
    p.add_argument("--format", dest="style", choices=("table", "markdown", "csv"),
                   default="table", help="output style (default: table)")
    p.add_argument("--wide", action="store_true",
                   help="every column: eps, unit roundoff, digits, inf, NaN too (the default "
                   "table fits 100 columns; csv always has every column)")
    p = sub.add_parser(
        "explain", help="what rounding one value to each format gives, bit by bit",
        description="Round VALUE to each format and show the bit fields (sign | exponent "
        "| mantissa), the exact decimal value, the neighbours and the ulp, the rounding "
        "error and the flags. VALUE is read as a float64, and may come before or after "
        "--fmt.")
    # Both raw: _resolve_explain finds VALUE among --fmt's tokens (explain --fmt bf16 0.1).
    p.add_argument("value", nargs="?", metavar="VALUE")
    p.add_argument("--fmt", nargs="+", action="extend",
                   metavar="F", help="target formats (default: fp32 tf32 fp16 bf16 e4m3 e5m2)")
    _mode_and_seed(p)
    p = sub.add_parser("round", help="round numbers to a format",
                       description="Round each VALUE (read as a float64) to a format.")
    p.add_argument("values", nargs="+", type=_parse_number, metavar="VALUE")
    p.add_argument("--fmt", type=_parse_format, required=True, help="target format")
    _mode_and_seed(p)
    p = sub.add_parser(
        "decode", help="the value, fields and class of bit patterns",
        description="Decode each bit pattern BITS of a format: its value (the shortest "
        "repr that round-trips in float64; the exact value too where that repr is not "
        "exact), its sign, exponent and mantissa fields (lp.fields) and its class "
        "(normal, subnormal, zero, inf, NaN). One line per pattern.")
    p.add_argument("patterns", nargs="+", type=_parse_bits, metavar="BITS",
                   help="a pattern: hex (0x3dcd), binary (0b0011110111001101, underscores "
                   "allowed) or a decimal integer, in [0, 2**bits)")
    p.add_argument("--fmt", type=_parse_format, required=True, help="the format")
    p = sub.add_parser(
        "encode", help="a value's bit pattern, and which way it rounded",
        description="Round each VALUE (read as a float64) to a format and show its bit "
        "pattern (hex and binary, fields split by _), the value the pattern decodes to, "
        "and whether VALUE was exact or rounded up or down (lp.encode).")
    p.add_argument("values", nargs="+", type=_parse_number, metavar="VALUE")
    p.add_argument("--fmt", type=_parse_format, required=True, help="target format")
    _mode_and_seed(p)
    p.add_argument("--saturate", action="store_true",
                   help="clamp overflows (and inf, in formats without it) to +-max")
    p = sub.add_parser(
        "values", help="every pattern and value of a format of <= 8 bits",
        description="Every bit pattern of a format of at most 8 bits (256 patterns), in "
        "code order: the columns of `lowprec decode`, NaN and inf patterns included.")
    p.add_argument("fmt", type=_parse_format, metavar="FMT", help="the format")
    p = sub.add_parser(
        "demo", help="formats, rounding and the error of dot and matrix products against K",
        description="The formats table, 0.1 in every format, and the error of K-long dot "
        "products and of matrix products against the exact result, for FP32, FP16 and BF16 "
        "inputs under the exact, fp32, fp16 and Tensor Core (v100, a100, h100) models.")
    p.add_argument("--plot", metavar="DIR",
                   help="also write PNG figures to DIR (needs matplotlib: the 'plot' extra)")
    p.add_argument("--max-k", type=_parse_k, default=4096, metavar="K",
                   help="largest K measured: K = 16, 64, 256, ... up to it "
                   "(default: 4096; 16384 at most)")
    p = sub.add_parser(
        "replay", help="check a matmul model against recorded results, row by row",
        description="Replay every row of recorded matrix-unit results (the mma-data layout "
        "of tests/data/mma, or the Tensor Core measurements of tests/data/tensorcore) "
        "through a model: the one the file's metadata names, or --model. Prints the "
        "matched rows and the first mismatches; exit status 1 if a row does not match.")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--model", default=None, help="a name of lp.MODELS (default: from the file)")
    p.add_argument("--show", type=_parse_show, default=5, metavar="N",
                   help="mismatching rows to print per file (default: 5)")
    return parser


def _value_table(value, fmts):
    """One line per format: what ``value`` becomes, its bits and its relative error."""
    header = ("format", "rounded", "bits", "rel. error", "flags")
    rows = []
    for fmt in fmts:
        e = explain(value, fmt)
        bits = "-" if e.bits is None else f"0x{e.bits:0{(fmt.bits + 3) // 4}x}"
        rel = "-" if e.rel_error is None else f"{float(e.rel_error):.2e}"
        raised = ", ".join(k for k, v in e.flags.items() if v) or "-"
        rows.append((fmt.name, repr(e.rounded), bits, rel, raised))
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]

    def line(r):
        return " | ".join(c.ljust(w) for c, w in zip(r, widths))

    return "\n".join([line(header), "-+-".join("-" * w for w in widths), *map(line, rows)])


# lowprec is not on a package index: the extra installs from a checkout.
_PLOT_HINT = 'pip install -e ".[plot]" in the lowprec checkout (or pip install matplotlib)'


def _demo(args):
    if args.plot is not None:
        try:
            import matplotlib
        except ImportError:
            raise _Error(f"--plot needs matplotlib: {_PLOT_HINT}") from None
        matplotlib.use("Agg")
        os.makedirs(args.plot, exist_ok=True)
    started = time.perf_counter()
    print("== The formats ==\n")
    print(format_table())
    print("\n== 0.1 in every format (round to nearest even) ==\n")
    print(_value_table(0.1, list(NAMED_FORMATS.values())))
    print("\n(`lowprec explain 0.1 --fmt bf16` shows the bits of one of them.)")
    ks = [k for k in (16, 64, 256, 1024, 4096, 16384) if k <= args.max_k]
    print(f"measuring dot and matrix products for K = {', '.join(map(str, ks))} ...",
          file=sys.stderr, flush=True)

    def progress(label, seconds):
        if seconds is None:
            print(f"  {label} ...", end="", file=sys.stderr, flush=True)
        else:
            print(f" {seconds:.1f} s", file=sys.stderr, flush=True)

    result = error_vs_k(ks, progress=progress)
    print("\n== Dot products: mean relative error of 32 K-long dot products ==")
    print("(entries uniform in [0, 1), rounded to the input format; reference: the exact "
          "sum, which the\n exact model rounds once to FP32, so its row is not 0; '-': the "
          "model does not take\n these inputs, Tensor Cores take no FP32)\n")
    print(error_table(result, "dot"))
    print("\n== Matrix products: normwise relative error of 16xK times Kx16 ==")
    print("(entries standard normal, rounded to the input format; reference: exact; the "
          "exact model's\n result is rounded once to FP32)\n")
    print(error_table(result, "matmul"))
    print("\nRead: FP16 accumulation stalls as K grows: once a running sum passes 1024, "
          "where FP16's\nspacing is 1, adding a product below 1/2 changes nothing. "
          "Tensor Cores truncate (round toward\nzero) to FP32: with terms of one sign "
          "their errors all have one sign and add up, while fp32's\nround-to-nearest "
          "errors partly cancel.")
    # The training comparison belongs to lowprec.amp: its demo() returns the text.
    if importlib.util.find_spec("lowprec.amp") is not None:
        amp_demo = getattr(importlib.import_module("lowprec.amp"), "demo", None)
        if callable(amp_demo):
            print("training small networks under each precision policy ...",
                  file=sys.stderr, flush=True)
            start = time.perf_counter()
            text = amp_demo()
            print(f"  {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
            print("\n== Mixed-precision training ==\n")
            print(text)
    if args.plot is not None:
        import matplotlib.pyplot as plt

        for which, name in (("dot", "dot_error_vs_k.png"), ("matmul", "matmul_error_vs_k.png")):
            fig = plot_error_vs_k(result, which)
            path = os.path.join(args.plot, name)
            fig.savefig(path, dpi=120)
            plt.close(fig)
            print(f"wrote {path}")
    print(f"demo took {time.perf_counter() - started:.1f} s", file=sys.stderr)


class _Error(Exception):
    """A user error: printed as one line, exit status 2."""


def _aligned(header, rows):
    """Columns two spaces apart under a header and a rule, as `format_table` prints."""
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]

    def line(r):
        return "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def _exactly(v):
    """The exact value of a float64 where its repr is not exact, else ""."""
    # Every binary float has a finite decimal expansion; past 40 characters the exact
    # value is shown as an odd integer times a power of two instead.
    if not math.isfinite(v) or Fraction(repr(v)) == Fraction(v):
        return ""
    text = format(Decimal(v), "f")
    if len(text) <= 40:
        return text
    n, d = v.as_integer_ratio()       # d is a power of two; n is odd unless d == 1
    k = (n & -n).bit_length() - 1 if d == 1 else 1 - d.bit_length()
    n = n >> k if d == 1 else n
    return f"{'-' if n < 0 else ''}2**{k}" if abs(n) == 1 else f"{n} * 2**{k}"


def _class(v, fmt):
    kind = kind_of(v, fmt)
    return "NaN" if kind == "nan" else kind


_PATTERN_COLUMNS = ("hex", "binary", "sign", "exponent", "mantissa", "class", "value",
                    "exactly")


def _pattern_cells(codes, fmt):
    """Per pattern: hex, binary (fields split by _), the fields, class, value, exact value."""
    b = np.array(codes, dtype=np.uint64)
    with np.errstate(over="ignore"):       # decode of FP64's inf pattern warns
        values = np.atleast_1d(_decode(b, fmt))
    sign, exponent, mantissa = (np.atleast_1d(f) for f in _fields(b, fmt))
    rows = []
    for code, v, s, e, m in zip(codes, values.tolist(), sign.tolist(), exponent.tolist(),
                                mantissa.tolist()):
        parts = ([str(s)] if fmt.signed else []) + [format(e, f"0{fmt.exponent_bits}b")]
        if fmt.mantissa_bits:
            parts.append(format(m, f"0{fmt.mantissa_bits}b"))
        rows.append((f"0x{code:0{(fmt.bits + 3) // 4}x}", "0b" + "_".join(parts),
                     str(s) if fmt.signed else "-", str(e), str(m), _class(v, fmt), repr(v),
                     _exactly(v)))
    return rows


def _decode_patterns(patterns, fmt):
    name = fmt.name or str(fmt)
    for text, code in patterns:
        if code < 0:
            raise _Error(f"bit pattern {text} is negative")
        if code >> fmt.bits:
            raise _Error(f"bit pattern {text} is wider than {name}'s {fmt.bits} bits "
                         f"(patterns are 0 to 0x{(1 << fmt.bits) - 1:x})")
    return _aligned(_PATTERN_COLUMNS, _pattern_cells([c for _, c in patterns], fmt))


def _rounding(x, r, fmt):
    """Whether float64 ``x`` was exact in ``fmt`` or which way it rounded to ``r``."""
    # x and r are float64 values: comparing them is exact.
    if math.isnan(x):
        return "NaN"
    if math.isnan(r):
        if not fmt.signed and x < 0:
            return f"NaN: {fmt.name or fmt} holds no negative value"
        return f"NaN: {fmt.name or fmt} has no inf"
    if r == x:
        return "exact"
    return (f"rounded {'up' if r > x else 'down'} "
            f"({'toward zero' if abs(r) < abs(x) else 'away from zero'})")


def _encode_values(values, fmt, mode, seed, saturate):
    # One call for all values: --mode sr draws as lp.encode(values, rng=seed) does.
    bits = np.atleast_1d(_encode(np.array(values, dtype=np.float64), fmt, mode, rng=seed,
                                 saturate=saturate))
    cells = _pattern_cells([int(c) for c in bits], fmt)
    rows = [(repr(x), c[0], c[1], c[6], _rounding(x, float(c[6]), fmt), c[7])
            for x, c in zip(values, cells)]
    return _aligned(("input", "hex", "binary", "value", "rounding", "exactly"), rows)


def _all_values(fmt):
    if fmt.bits > 8:
        raise _Error(f"values lists formats of at most 8 bits (256 patterns); "
                     f"{fmt.name or fmt} has {fmt.bits} bits (lowprec decode BITS --fmt F "
                     "shows single patterns)")
    return _aligned(_PATTERN_COLUMNS, _pattern_cells(list(range(2 ** fmt.bits)), fmt))


def _run(args):
    if args.command == "formats":
        if args.names and args.style == "table":
            print("\n\n".join(fmt.table() for fmt in args.names))
        else:
            print(format_table(args.style, args.names or None, wide=args.wide))
    elif args.command == "explain":
        fmts = args.fmt or [_format(f) for f in ("fp32", "tf32", "fp16", "bf16", "e4m3",
                                                 "e5m2")]
        print(explain_text(args.value, fmts, args.mode, rng=args.seed))
    elif args.command == "round":
        out = _round(np.array(args.values), args.fmt, args.mode, rng=args.seed)
        for v, r in zip(args.values, out):
            print(f"{v!r} -> {float(r)!r}")
    elif args.command == "decode":
        print(_decode_patterns(args.patterns, args.fmt))
    elif args.command == "encode":
        print(_encode_values(args.values, args.fmt, args.mode, args.seed, args.saturate))
    elif args.command == "values":
        print(_all_values(args.fmt))
    elif args.command == "demo":
        _demo(args)
    elif args.command == "replay":
        from ..tensorcore.replay import replay
        results = [replay(f, args.model, max_mismatches=args.show) for f in args.files]
        for r in results:
            print(r)
        return 0 if all(r.ok for r in results) else 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lowprec`` console script, returning the exit status.

    Examples
    --------
    >>> from lowprec.teaching.cli import main
    >>> main(["round", "0.1", "-1e-8", "--fmt", "bf16"])
    0.1 -> 0.10009765625
    -1e-08 -> -1.0011717677116394e-08
    0
    >>> main(["round", "0.1", "--fmt", "bf17"])   # the one-line message goes to stderr
    2
    >>> main(["decode", "0x3dcd", "--fmt", "bf16"])
    hex     binary                sign  exponent  mantissa  class   value          exactly
    ------  --------------------  ----  --------  --------  ------  -------------  -------
    0x3dcd  0b0_01111011_1001101  0     123       77        normal  0.10009765625
    0
    >>> main(["encode", "0.1", "--fmt", "bf16", "--mode", "rz"])
    input  hex     binary                value        rounding                    exactly
    -----  ------  --------------------  -----------  --------------------------  -------
    0.1    0x3dcc  0b0_01111011_1001100  0.099609375  rounded down (toward zero)
    0
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:       # --help, and bad arguments (already reported)
        return exc.code  # type: ignore[return-value]  # argparse exits with an int status
    try:
        status = _run(args)
    except BrokenPipeError:
        # The reader left (``lowprec formats | head``): say nothing more, and keep
        # Python's flush of stdout at exit from failing again (Python docs' recipe).
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1
    except KeyboardInterrupt:
        print("lowprec: interrupted", file=sys.stderr)
        return 130
    except (_Error, ValueError, TypeError, OSError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"lowprec: error: {message}", file=sys.stderr)
        return 2
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
