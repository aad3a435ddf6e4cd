"""The suite's shared helpers, defined once: comparisons of floating-point results, FP32
bit patterns, the data paths and a checker of HTML displays (the oracles are in
tests/oracles/).

The vocabulary of equality, each checking shapes first (no broadcasting: reshape the
expectation explicitly) and showing the first five mismatches, with the matching elements
of any further arguments (the inputs, say):

- `assert_bits`: float64 bit patterns, NaN payloads included;
- `assert_same`: NaN equals NaN, and signed zeros must agree;
- `assert_values`: ``==`` with NaN equal to NaN, the sign of zero ignored.

Complex values compare part by part.

``from helpers import assert_same`` (like ``from peers import ...``: tests/conftest.py puts
the tests directory on ``sys.path``). Nothing here calls lowprec's rounding or decoding,
so the oracles stay independent of the code they check; nothing here uses an optional
peer.
"""

from __future__ import annotations

import math
from html.parser import HTMLParser
from pathlib import Path

import numpy as np

__all__ = ["assert_bits", "assert_same", "assert_values", "equal_or_both_nan", "fp32_bits",
           "from_fp32_bits", "TESTS", "ROOT", "DATA", "parse_html"]

#: The tests directory, the repository root, and the recorded measurements.
TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DATA = TESTS / "data"


# -- comparisons -----------------------------------------------------------------------

def _shapes(got, want):
    """Both as float64 arrays of one shape; complex values as (real, imaginary) pairs."""
    got, want = np.asarray(got), np.asarray(want)
    kind = np.complex128 if np.iscomplexobj(got) or np.iscomplexobj(want) else np.float64
    got, want = got.astype(kind), want.astype(kind)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    if kind is np.complex128:
        return (np.stack([got.real, got.imag], -1), np.stack([want.real, want.imag], -1))
    return got, want


def _check(ok, got, want, context):
    """Raise unless ``ok`` everywhere; the message shows the first five mismatches, with
    the matching elements of each array in ``context`` (the inputs, say)."""
    if not ok.all():
        i = np.flatnonzero(~ok.reshape(-1))[:5]
        pieces = [repr(_at(c, i, got.shape)) for c in context]
        raise AssertionError(f"{(~ok).sum()} mismatches at {i}: got {got.reshape(-1)[i]!r}"
                             f" want {want.reshape(-1)[i]!r} for {pieces}")


def _at(c, i, shape):
    """The elements ``i`` of ``c`` where it has the compared shape, else all of ``c``."""
    try:
        if shape and np.shape(c) == shape:
            return np.asarray(c).reshape(-1)[i]
    except ValueError:          # a ragged tuple
        pass
    return c


def assert_bits(got, want, *context):
    """Assert equal shapes and equal float64 bit patterns: the signs of zeros and NaN
    payloads included."""
    got, want = _shapes(got, want)
    _check(got.view(np.uint64) == want.view(np.uint64), got, want, context)


def assert_same(got, want, *context):
    """Assert equal shapes and values, any NaN equal to any NaN, zeros of equal sign."""
    got, want = _shapes(got, want)
    _check((np.isnan(got) & np.isnan(want))
           | ((got == want) & (np.signbit(got) == np.signbit(want))), got, want, context)


def assert_values(got, want, *context):
    """Assert equal shapes and values, NaN equal to NaN and the sign of zero ignored (where
    NumPy itself leaves the sign unspecified)."""
    got, want = _shapes(got, want)
    _check((np.isnan(got) & np.isnan(want)) | (got == want), got, want, context)


def equal_or_both_nan(a, b):
    """Two scalars: ``a == b`` (so 0.0 equals -0.0), or both NaN."""
    return a == b or (math.isnan(a) and math.isnan(b))


# -- FP32 bit patterns (the form the GPU measurements are stored in) ---------------------

def fp32_bits(x):
    """FP32 bit patterns (uint32) of float64 values that are FP32 values."""
    return np.asarray(x).astype(np.float32).view(np.uint32)


def from_fp32_bits(bits):
    """The float64 values of FP32 bit patterns (uint32)."""
    return bits.view(np.float32).astype(np.float64)


# -- HTML displays ----------------------------------------------------------------------

class _Tree(HTMLParser):
    """Checks that tags nest and close, and collects the text, the bit boxes (cells
    whose title names a field) and the table rows (header, cell) of an HTML string."""

    VOID = {"br", "hr", "img", "meta", "col", "wbr", "input"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.text = [], [], []
        self.bits, self.rows, self.tags = [], [], []
        self.headed = []            # the rows that start with a header cell
        self._cell = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag not in self.VOID:
            self.stack.append(tag)
        if tag == "td" and (attrs.get("title") or "").endswith(" bit"):
            self.bits.append([attrs["title"][:-4], ""])
            self._cell = "bit"
        elif tag == "tr":
            self.rows.append([])
        elif tag in ("th", "td") and self.rows:
            self.rows[-1].append("")
            self.headed.append(self.rows[-1]) if tag == "th" else None
            self._cell = "row"

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()
        if tag in ("td", "th"):
            self._cell = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell == "bit":
            self.bits[-1][1] += data
        elif self._cell == "row":
            self.rows[-1][-1] += data


def parse_html(markup: str) -> _Tree:
    """The `_Tree` of an HTML string, asserted well formed and free of scripts."""
    tree = _Tree()
    tree.feed(markup)
    tree.close()
    assert not tree.errors, tree.errors
    assert not tree.stack, f"unclosed tags: {tree.stack}"
    assert "<script" not in markup.lower() and "<style" not in markup.lower()
    assert not any(name.startswith("on") for _, attrs in tree.tags for name in attrs), \
        "no event handlers (no JavaScript)"
    return tree


def spy_on(monkeypatch, where, name, original):
    """Replace ``where.name`` by ``original`` that also records, per call, whether it
    settled its input (returned something other than None); returns the record."""
    settled = []

    def spy(*args, **kwargs):
        result = original(*args, **kwargs)
        settled.append(result is not None)
        return result
    monkeypatch.setattr(where, name, spy)
    return settled
