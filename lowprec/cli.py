"""The ``lowprec`` command: format tables and rounding at the shell.

Every subcommand has ``--help``; bad input prints one line to stderr and exits
with status 2, never a traceback. The command only formats what the library
computes; it must not compute anything the library does not offer.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from .formats import NAMED_FORMATS
from .formats import format as _format
from .rounding import MODES
from .rounding import round as _round

__all__ = ["main", "format_table"]

_COLUMNS = ("format", "ml_dtypes name", "bits", "exp", "mant", "bias", "eps",
            "unit roundoff", "max", "smallest normal", "smallest subnormal",
            "digits", "inf", "NaN")


def _row(fmt):
    nan = {"ieee": "exp all ones", "fn": "S.1111.111 only", "fnuz": "0x80 only",
           "finite": "none"}[fmt.kind]
    return (fmt.name, fmt.dtype_name, fmt.bits, fmt.exponent_bits, fmt.mantissa_bits,
            fmt.bias, f"{fmt.eps:.6g}", f"{fmt.unit_roundoff:.6g}", f"{fmt.max:.6g}",
            f"{fmt.smallest_normal:.6g}", f"{fmt.smallest_subnormal:.6g}",
            fmt.precision, "yes" if fmt.has_inf else "no", nan)


def format_table(style="table", formats=None):
    """The comparison table of formats as text (``table``, ``markdown`` or ``csv``).

    Examples
    --------
    >>> from lowprec.cli import format_table
    >>> print(format_table("csv", ["fp16", "bf16"]))
    format,ml_dtypes name,bits,exp,mant,bias,eps,unit roundoff,max,smallest normal,smallest subnormal,digits,inf,NaN
    FP16,float16,16,5,10,15,0.000976562,0.000488281,65504,6.10352e-05,5.96046e-08,3,yes,exp all ones
    BF16,bfloat16,16,8,7,127,0.0078125,0.00390625,3.38953e+38,1.17549e-38,9.18355e-41,2,yes,exp all ones
    """
    fmts = [_format(f) for f in (formats or NAMED_FORMATS.values())]
    rows = [tuple(str(c) for c in _row(f)) for f in fmts]
    if style == "csv":
        return "\n".join(",".join(r) for r in [_COLUMNS, *rows])
    widths = [max(len(r[i]) for r in [_COLUMNS, *rows]) for i in range(len(_COLUMNS))]
    line = lambda r: " | ".join(c.ljust(w) for c, w in zip(r, widths))  # noqa: E731
    if style == "markdown":
        sep = "|-" + "-|-".join("-" * w for w in widths) + "-|"
        return "\n".join([f"| {line(_COLUMNS)} |", sep, *(f"| {line(r)} |" for r in rows)])
    if style != "table":
        raise ValueError(f"unknown table style {style!r}; valid: table, markdown, csv")
    sep = "-+-".join("-" * w for w in widths)
    return "\n".join([line(_COLUMNS), sep, *map(line, rows)])


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, f"lowprec: error: {message}\n")


def _parse_number(text):
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _parse_format(text):
    try:
        return _format(text)
    except (ValueError, TypeError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser():
    parser = _Parser(prog="lowprec", description="Emulate low-precision floating point.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("formats", help="the comparison table of all named formats")
    p.add_argument("--format", dest="style", choices=("table", "markdown", "csv"),
                   default="table", help="output style (default: table)")
    p = sub.add_parser("round", help="round numbers to a format")
    p.add_argument("values", nargs="+", type=_parse_number, metavar="VALUE")
    p.add_argument("--fmt", type=_parse_format, required=True, help="target format")
    p.add_argument("--mode", choices=MODES, default="rne", help="rounding mode")
    return parser


def main(argv=None):
    """Entry point of the ``lowprec`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "formats":
        print(format_table(args.style))
    elif args.command == "round":
        out = _round(np.array(args.values), args.fmt, args.mode, rng=0)
        for v, r in zip(args.values, out):
            print(f"{v!r} -> {float(r)!r}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
