"""Run every benchmark section: ``python benchmarks/run.py [--quick] [section ...]``.

Each ``benchmarks/bench_<section>.py`` defines ``main(quick=False)`` and prints its
own table of ratios, all measured side by side in this one run on this machine.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pathlib
import platform
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))


def _load():
    """The machine's load, printed with each section: the ratios are only as good as
    the machine was quiet."""
    try:
        one, five, _ = os.getloadavg()
    except OSError:   # pragma: no cover - not on Unix
        return "load average unavailable"
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def main(argv=None):
    sections = sorted(p.stem[len("bench_"):] for p in HERE.glob("bench_*.py"))
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sections", nargs="*", metavar="SECTION",
                        help=f"sections to run (default: all of {', '.join(sections)})")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args(argv)
    unknown = set(args.sections) - set(sections)
    if unknown:
        parser.error(f"unknown section(s) {sorted(unknown)}; valid: {', '.join(sections)}")
    import numpy as np
    print(f"lowprec benchmarks: Python {platform.python_version()}, NumPy {np.__version__}, "
          f"{platform.machine()}, {platform.processor() or 'unknown cpu'}")
    for name in args.sections or sections:
        print(f"\n== {name} ==  ({_load()})")
        importlib.import_module(f"bench_{name}").main(quick=args.quick)


if __name__ == "__main__":
    main()
