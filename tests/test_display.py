"""The rich (HTML) displays of `Explanation`, `Format` and `Tensor`, against oracles
they did not produce: Python's own ``format(int, "0Nb")`` of the bit patterns, NumPy's
and ml_dtypes' finfo and casts, `numpy.array2string`'s summarization, and a real
Jupyter kernel (nbclient) for what a notebook shows."""

from __future__ import annotations

import html
import math
import pathlib
import re
from html.parser import HTMLParser

import numpy as np
import pytest

import lowprec as lp
from peers import ml_dtypes

ROOT = pathlib.Path(__file__).resolve().parents[1]


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


def parse(markup: str) -> _Tree:
    tree = _Tree()
    tree.feed(markup)
    tree.close()
    assert not tree.errors, tree.errors
    assert not tree.stack, f"unclosed tags: {tree.stack}"
    assert "<script" not in markup.lower() and "<style" not in markup.lower()
    assert not any(name.startswith("on") for _, attrs in tree.tags for name in attrs), \
        "no event handlers (no JavaScript)"
    return tree


# (value, format name, the format's field widths by hand: sign, exponent, mantissa)
CASES = [
    (0.1, "bf16", (1, 8, 7)), (-0.1, "fp16", (1, 5, 10)), (1e-7, "fp16", (1, 5, 10)),
    (1 / 3, "fp32", (1, 8, 23)), (0.3, "e4m3", (1, 4, 3)), (300.0, "e5m2", (1, 5, 2)),
    (5.0, "e2m1", (1, 2, 1)), (0.0, "fp16", (1, 5, 10)), (-0.0, "bf16", (1, 8, 7)),
    (1e6, "fp16", (1, 5, 10)), (math.inf, "e5m2", (1, 5, 2)), (math.nan, "fp16", (1, 5, 10)),
    (2.0**-130, "fp32", (1, 8, 23)), (0.1, "fp64", (1, 11, 52)), (8.0, "e8m0", (0, 8, 0)),
    (3.0, "ue4m3", (0, 4, 3)),
]


@pytest.mark.parametrize("x, spec, widths", CASES)
def test_explanation_html_shows_every_bit_of_encode_by_field(x, spec, widths):
    e = lp.explain(x, spec)
    tree = parse(e._repr_html_())
    n = sum(widths)
    expected = format(int(lp.encode(x, spec)), f"0{n}b")   # Python's own binary digits
    assert "".join(b for _, b in tree.bits) == expected
    names = ["sign"] * widths[0] + ["exponent"] * widths[1] + ["mantissa"] * widths[2]
    assert [name for name, _ in tree.bits] == names
    # Each field has its own colour: the style of every box of a field is the same.
    styles = {}
    for tag, attrs in tree.tags:
        if tag == "td" and (attrs.get("title") or "").endswith(" bit"):
            styles.setdefault(attrs["title"], set()).add(attrs["style"])
    assert all(len(s) == 1 for s in styles.values())
    assert len({next(iter(s)) for s in styles.values()}) == len(styles)
    text = html.unescape("".join(tree.text))
    assert repr(e.rounded) in text
    hex_digits = (n + 3) // 4
    assert f"0x{int(lp.encode(x, spec)):0{hex_digits}x}" in text


@pytest.mark.parametrize("x, spec, dtype", [
    (0.1, "bf16", ml_dtypes.bfloat16), (0.3, "e4m3", ml_dtypes.float8_e4m3fn),
    (-1e-5, "e5m2", ml_dtypes.float8_e5m2), (2.6, "e2m1", ml_dtypes.float4_e2m1fn),
    (1 / 3, "fp16", np.float16)])
def test_explanation_html_value_neighbours_and_decision_match_ml_dtypes(x, spec, dtype):
    # Every finite value of the dtype, from its own bit patterns.
    bits = 8 * np.dtype(dtype).itemsize
    if np.dtype(dtype).itemsize == 1 and spec == "e2m1":
        bits = 4
    patterns = np.arange(2**bits, dtype=np.uint8 if bits <= 8 else np.uint16)
    with np.errstate(invalid="ignore"):          # the NaN patterns
        every = patterns.view(dtype).astype(np.float64)
    every = np.unique(every[np.isfinite(every)])
    rounded = float(np.array(x).astype(dtype).astype(np.float64))   # the cast: RNE
    i = int(np.searchsorted(every, rounded))
    below, above = float(every[i - 1]), float(every[i + 1])
    down = float(every[np.searchsorted(every, x, side="right") - 1])
    up = float(every[np.searchsorted(every, x, side="left")])
    tree = parse(lp.explain(x, spec)._repr_html_())
    rows = dict(tree.headed)
    # -0.0 is the neighbour above a negative value next to zero: compare as numbers.
    assert [float(v) for v in rows["neighbours"].split(" < ")] == [below, rounded, above]
    lo, rest = rows["candidates"].split(" <= ", 1)
    shown, rest = rest.split(" <= ", 1)
    hi, gives = rest.split(": rne gives ")
    assert (float(lo), float(shown), float(hi), float(gives)) == (down, x, up, rounded)


def test_explanation_html_marks_the_candidate_taken():
    e = lp.explain(0.1, "bf16")          # 0.099609375 <= 0.1 <= 0.10009765625, up taken
    markup = e._repr_html_()
    marked = re.findall(r"<span style=\"[^\"]*\">([^<]*)</span>", markup)
    assert marked == [repr(0.10009765625)]
    e = lp.explain(0.1, "bf16", "rd")
    assert re.findall(r"<span style=\"[^\"]*\">([^<]*)</span>", e._repr_html_()) == [
        repr(0.099609375)]


@pytest.mark.parametrize("x, spec", [(c[0], c[1]) for c in CASES] + [(0.3, "sr")])
def test_explanation_html_says_what_the_text_says(x, spec):
    # Every row of the text view, bits aside (drawn as boxes), is a row of the table.
    e = lp.explain(x, "e4m3", "sr", rng=3) if spec == "sr" else lp.explain(x, spec)
    tree = parse(e._repr_html_())
    rows = [(k.strip(), v) for k, v in tree.headed]
    text_rows = [(line[2:12].strip(), line[14:]) for line in str(e).splitlines()[1:]]
    drawn = e.bits is not None
    assert rows == [r for r in text_rows if not (drawn and r[0] in ("fields", "bits"))]
    assert str(e).splitlines()[0] in html.unescape("".join(tree.text))


def test_html_escapes_names():
    fmt = lp.Format(5, 2, name="<b>mine & co</b>")
    for markup in (lp.explain(1.5, fmt)._repr_html_(), fmt._repr_html_(),
                   lp.tensor([1.5], fmt)._repr_html_()):
        parse(markup)
        assert "<b>mine" not in markup and "&lt;b&gt;mine &amp; co&lt;/b&gt;" in markup


def test_reprs_are_unchanged():
    assert repr(lp.BF16) == "lp.BF16"
    assert repr(lp.tensor([1.0, 2.0], "fp16")) == "Tensor([1.0, 2.0], fmt=FP16)"
    assert str(lp.explain(0.1, "bf16")).splitlines()[3] == (
        "  bits           0 | 01111011 | 1001101   = 0x3dcd")


@pytest.mark.parametrize("spec, info", [
    ("fp16", np.finfo(np.float16)), ("fp32", np.finfo(np.float32)),
    ("bf16", ml_dtypes.finfo(ml_dtypes.bfloat16)),
    ("e4m3", ml_dtypes.finfo(ml_dtypes.float8_e4m3fn)),
    ("e5m2", ml_dtypes.finfo(ml_dtypes.float8_e5m2))])
def test_format_html_is_its_table_with_finfo_values(spec, info):
    fmt = lp.format(spec)
    tree = parse(fmt._repr_html_())
    rows = dict(tuple(r) for r in tree.headed)
    assert len(rows) == len(fmt.table().splitlines())
    assert rows["bits"] == str(info.bits)
    assert rows["mantissa bits"] == str(info.nmant)
    assert rows["exponent bits"] == str(info.nexp)
    assert rows["max"] == repr(float(info.max))
    assert rows["eps"] == repr(float(info.eps))
    assert rows["smallest normal"] == repr(float(info.smallest_normal))
    assert rows["smallest subnormal"] == repr(float(info.smallest_subnormal))
    assert repr(fmt) in "".join(tree.text)       # the caption: how to spell it


def _numbers(text):
    return re.findall(r"-?(?:inf|nan|\d+\.?\d*(?:e[-+]?\d+)?)", text)


@pytest.mark.parametrize("shape", [(5,), (2000,), (40, 60), (3, 400, 2), ()])
def test_tensor_html_truncates_as_numpy_does(shape):
    rng = np.random.default_rng(1)
    t = lp.tensor(rng.standard_normal(shape) * 100, "bf16")
    values = np.asarray(t)
    markup = t._repr_html_()
    tree = parse(markup)
    body = html.unescape("".join(tree.text))
    oracle = np.array2string(values, separator=", ")   # NumPy's default threshold
    assert ("..." in body) == ("..." in oracle)
    shown = html.unescape(re.search(r"<pre[^>]*>(.*?)</pre>", markup, re.S).group(1))
    assert len(_numbers(shown)) == len(_numbers(oracle))
    assert f"shape {shape}" in body and "BF16" in body
    # The values shown are the Tensor's, exactly: the first and the last element.
    flat = values.ravel()
    assert repr(float(flat[0])) in body and repr(float(flat[-1])) in body


def test_tensor_html_follows_numpy_printoptions_and_stays_small():
    t = lp.tensor(np.arange(10.0), "fp16")
    with np.printoptions(threshold=5, edgeitems=2):
        body = html.unescape("".join(parse(t._repr_html_()).text))
        assert "0.0, 1.0, ..., 8.0, 9.0" in body
    big = lp.tensor(np.zeros(10**6), "e4m3")
    assert len(big._repr_html_()) < 2000


@pytest.mark.slow
def test_a_notebook_shows_html_in_a_real_kernel():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    kernelspec = pytest.importorskip("jupyter_client.kernelspec")
    if "python3" not in kernelspec.find_kernel_specs():
        pytest.skip("no python3 Jupyter kernel installed (pip install ipykernel)")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in (
        "import lowprec as lp", 'lp.explain(0.1, "bf16")', "lp.BF16",
        'lp.tensor([1.0, 2.0], "fp16")')]
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(ROOT)}})
    client.execute()
    outputs = [cell.outputs for cell in nb.cells[1:]]
    data = []
    for out in outputs:
        results = [o for o in out if o.output_type == "execute_result"]
        assert len(results) == 1, out
        data.append(results[0].data)
    expected = [
        (["0x3dcd", "0.10009765625", "0.099609375", "rne gives", "mantissa bit"],
         "Explanation"),
        (["BF16", "bfloat16", "3.3895313892515355e+38", "<table"], "lp.BF16"),
        (["1.0, 2.0", "FP16", "shape (2,)"], "Tensor([1.0, 2.0], fmt=FP16)"),
    ]
    for shown, (pieces, plain) in zip(data, expected):
        assert "text/html" in shown and "text/plain" in shown
        parse(shown["text/html"])
        for piece in pieces:
            assert piece in shown["text/html"], (piece, shown["text/html"][:200])
        assert plain in shown["text/plain"]
