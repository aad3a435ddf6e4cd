"""The ``lowprec`` command: format tables, rounding, explanations and the demo.

Subcommands ``formats``, ``explain``, ``round`` and ``demo``, each with ``--help``;
bad input prints one line to stderr and exits with status 2, never a traceback.
The command only formats what the library computes (`lowprec.explain` holds the
teaching logic); it must not compute anything the library does not offer, and it
imports matplotlib only for ``demo --plot``.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import importlib.util
import io
import os
import re
import sys
import time

import numpy as np

from .explain import error_table, error_vs_k, explain, explain_text, plot_error_vs_k
from .formats import NAMED_FORMATS
from .formats import format as _format
from .rounding import MODES
from .rounding import round as _round

__all__ = ["main", "format_table"]

_COLUMNS = ("format", "dtype", "bits", "exp", "mant", "bias", "eps",
            "unit roundoff", "max", "smallest normal", "smallest subnormal",
            "digits", "inf", "NaN")


def _row(fmt):
    nan = {"ieee": "exp all ones", "fn": "S.1111.111 only", "fnuz": "0x80 only",
           "finite": "none"}[fmt.kind]
    # The NumPy or ml_dtypes dtype name, "-" where there is none (TF32).
    return (str(fmt), fmt._known_dtype_name or "-", fmt.bits, fmt.exponent_bits, fmt.mantissa_bits,
            fmt.bias, f"{fmt.eps:.6g}", f"{fmt.unit_roundoff:.6g}", f"{fmt.max:.6g}",
            f"{fmt.smallest_normal:.6g}", f"{fmt.smallest_subnormal:.6g}",
            fmt.precision, "yes" if fmt.has_inf else "no", nan)


def format_table(style="table", formats=None):
    """The comparison table of formats as text (``table``, ``markdown`` or ``csv``).

    Examples
    --------
    >>> from lowprec.cli import format_table
    >>> print(format_table("csv", ["fp16", "bf16"]))
    format,dtype,bits,exp,mant,bias,eps,unit roundoff,max,smallest normal,smallest subnormal,digits,inf,NaN
    FP16,float16,16,5,10,15,0.000976562,0.000488281,65504,6.10352e-05,5.96046e-08,3,yes,exp all ones
    BF16,bfloat16,16,8,7,127,0.0078125,0.00390625,3.38953e+38,1.17549e-38,9.18355e-41,2,yes,exp all ones
    """
    fmts = [_format(f) for f in (formats or NAMED_FORMATS.values())]
    rows = [tuple(str(c) for c in _row(f)) for f in fmts]
    if style == "csv":
        # The csv module quotes cells with commas (an unnamed format's str()).
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows([_COLUMNS, *rows])
        return out.getvalue().rstrip("\n")
    widths = [max(len(r[i]) for r in [_COLUMNS, *rows]) for i in range(len(_COLUMNS))]
    line = lambda r: " | ".join(c.ljust(w) for c, w in zip(r, widths))  # noqa: E731
    if style == "markdown":
        sep = "|-" + "-|-".join("-" * w for w in widths) + "-|"
        return "\n".join([f"| {line(_COLUMNS)} |", sep, *(f"| {line(r)} |" for r in rows)])
    if style != "table":
        raise ValueError(f"unknown table style {style!r}; valid: table, markdown, csv")
    sep = "-+-".join("-" * w for w in widths)
    return "\n".join([line(_COLUMNS), sep, *map(line, rows)])


_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$|^-(inf|infinity|nan)$", re.I)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Let "-1e-8" and "-inf" be values, not options (argparse knows only "-1.5").
        self._negative_number_matcher = _NUMBER

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


def _parse_k(text):
    try:
        k = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 16 <= k <= 16384:
        raise argparse.ArgumentTypeError(f"--max-k must be in [16, 16384], got {k}")
    return k


def build_parser():
    """The argparse parser of the ``lowprec`` command.

    Examples
    --------
    >>> from lowprec.cli import build_parser
    >>> args = build_parser().parse_args(["explain", "-1e-8", "--fmt", "fp16", "bf16"])
    >>> args.value, [f.name for f in args.fmt], args.mode
    (-1e-08, ['FP16', 'BF16'], 'rne')
    """
    parser = _Parser(prog="lowprec", description="Emulate low-precision floating point: "
                     "format tables, rounding, bit-level explanations and a demo.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser,
                                metavar="{formats,explain,round,demo}")
    p = sub.add_parser("formats", help="the comparison table of all named formats",
                       description="The comparison table of all named formats; with "
                       "NAMEs, the parameter table of each (Format.table()).")
    p.add_argument("names", nargs="*", type=_parse_format, metavar="NAME",
                   help="formats to show one by one (any name lp.format takes); with "
                   "--format markdown or csv, the comparison table of just these")
    p.add_argument("--format", dest="style", choices=("table", "markdown", "csv"),
                   default="table", help="output style (default: table)")
    p = sub.add_parser(
        "explain", help="what rounding one value to each format gives, bit by bit",
        description="Round VALUE to each format and show the bit fields (sign | exponent "
        "| mantissa), the exact decimal value, the neighbours and the ulp, the rounding "
        "error and the flags. VALUE is read as a float64.")
    p.add_argument("value", type=_parse_number, metavar="VALUE")
    p.add_argument("--fmt", type=_parse_format, nargs="+", action="extend",
                   metavar="F", help="target formats (default: fp32 tf32 fp16 bf16 e4m3 e5m2)")
    p.add_argument("--mode", choices=MODES, default="rne", help="rounding mode (default: rne)")
    p.add_argument("--seed", type=int, default=0, help="random seed for --mode sr (default: 0)")
    p = sub.add_parser("round", help="round numbers to a format",
                       description="Round each VALUE (read as a float64) to a format.")
    p.add_argument("values", nargs="+", type=_parse_number, metavar="VALUE")
    p.add_argument("--fmt", type=_parse_format, required=True, help="target format")
    p.add_argument("--mode", choices=MODES, default="rne", help="rounding mode (default: rne)")
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
    line = lambda r: " | ".join(c.ljust(w) for c, w in zip(r, widths))  # noqa: E731
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
          "sum;\n '-': the model does not take these inputs, Tensor Cores take no FP32)\n")
    print(error_table(result, "dot"))
    print("\n== Matrix products: normwise relative error of 16xK times Kx16 ==")
    print("(entries standard normal, rounded to the input format; reference: exact)\n")
    print(error_table(result, "matmul"))
    print("\nRead: FP16 accumulation stalls as K grows: once a running sum passes 1024, "
          "where FP16's spacing is 1,\nadding a product below 1/2 changes nothing. "
          "Tensor Cores truncate (round toward zero) to FP32:\nwith terms of one sign "
          "their errors all have one sign and add up, while fp32's round-to-nearest\n"
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


def _run(args):
    if args.command == "formats":
        if args.names and args.style == "table":
            print("\n\n".join(fmt.table() for fmt in args.names))
        else:
            print(format_table(args.style, args.names or None))
    elif args.command == "explain":
        fmts = args.fmt or [_format(f) for f in ("fp32", "tf32", "fp16", "bf16", "e4m3",
                                                 "e5m2")]
        print(explain_text(args.value, fmts, args.mode, rng=args.seed))
    elif args.command == "round":
        out = _round(np.array(args.values), args.fmt, args.mode, rng=0)
        for v, r in zip(args.values, out):
            print(f"{v!r} -> {float(r)!r}")
    elif args.command == "demo":
        _demo(args)


def main(argv=None):
    """Entry point of the ``lowprec`` console script; returns the exit status.

    Examples
    --------
    >>> from lowprec.cli import main
    >>> main(["round", "0.1", "-1e-8", "--fmt", "bf16"])
    0.1 -> 0.10009765625
    -1e-08 -> -1.0011717677116394e-08
    0
    >>> main(["round", "0.1", "--fmt", "bf17"])   # the one-line message goes to stderr
    2
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:       # --help, and bad arguments (already reported)
        return exc.code
    try:
        _run(args)
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
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
