"""The HTML views (lowprec/display.py and the ``_repr_html_`` built on it).

Each view is parsed with the standard library's ``html.parser``: its tags must nest,
it must hold no script, and every colour must sit in a ``var()`` fallback (text
colour is inherited, so light and dark themes both read). The numbers a view shows
are checked against oracles: NumPy's float16 classification for a Tensor's counts,
the counts ``lp.flags()`` reports, a format's attributes, a run's summary.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import numpy as np
import pytest

import lowprec as lp
from lowprec import display

VOID = {"br", "hr", "img", "input", "meta", "link", "wbr", "col"}
COLOUR_WORDS = ("black", "white", "red", "green", "blue", "gray", "grey", "yellow",
                "orange", "purple", "navy", "silver", "maroon", "teal", "olive",
                "lime", "aqua", "fuchsia", "pink", "brown", "gold")
COLOUR = re.compile(r"#[0-9a-fA-F]{3,8}\b|\b(?:rgba?|hsla?|hwb|lab|lch|color)\(|"
                    r"(?<![-\w])(?:" + "|".join(COLOUR_WORDS) + r")(?![-\w])")


class _Reader(HTMLParser):
    """Tags (checked to nest), the text, and every style attribute of a document."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.styles, self.text, self.tags = [], [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.styles += [v for k, v in attrs if k == "style" and v]
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def without_vars(style: str) -> str:
    """``style`` with every ``var(...)`` taken out, nested parentheses included."""
    out, i = [], 0
    while True:
        j = style.find("var(", i)
        if j < 0:
            return "".join(out) + style[i:]
        out.append(style[i:j])
        depth, k = 0, j + 3
        while True:
            depth += {"(": 1, ")": -1}.get(style[k], 0)
            k += 1
            if depth == 0:
                break
        i = k


def read(markup: str) -> _Reader:
    """Parse ``markup`` and check what every view must hold; the reader for more."""
    r = _Reader()
    r.feed(markup)
    r.close()
    assert r.stack == [], f"unclosed tags {r.stack}"
    assert "script" not in r.tags and "style" not in r.tags
    for style in r.styles:
        bare = without_vars(style)
        assert not COLOUR.search(bare), f"a colour outside var(): {style!r}"
        assert not re.search(r"(?:^|;)\s*color\s*:", bare), f"text colour set: {style!r}"
    return r


def text_of(markup: str) -> str:
    return " ".join(" ".join(read(markup).text).split())


def test_the_checker_finds_colours_outside_var():
    assert without_vars("a:var(--x,rgba(1,2,3,0.5));b:1") == "a:;b:1"
    for bad in ('<div style="color:#555">x</div>', '<div style="background:white">x</div>',
                '<span style="border:1px solid rgb(1,2,3)">x</span>'):
        with pytest.raises(AssertionError):
            read(bad)
    with pytest.raises(AssertionError):
        read("<div><span></div>")


@pytest.mark.parametrize("name", ["fp16", "bf16", "e4m3", "e2m1", "e8m0", "fp64"])
def test_format_card_shows_the_formats_attributes(name):
    fmt = lp.format(name)
    shown = text_of(fmt._repr_html_())
    for expected in (repr(fmt), repr(fmt.max), repr(fmt.smallest_normal), repr(fmt.eps),
                     f"precision p {fmt.p}", f"bias {fmt.bias}"):
        assert expected in shown


def numpy_counts(values: np.ndarray) -> dict[str, int]:
    """NaN, inf, subnormal and zero counts by NumPy's float16 (the oracle)."""
    with np.errstate(over="ignore"):
        h = values.astype(np.float16)
    tiny = np.finfo(np.float16).smallest_normal
    a = np.abs(h)
    return {"NaN": int(np.isnan(h).sum()), "inf": int(np.isinf(h).sum()),
            "subnormal": int(((a > 0) & (a < tiny)).sum()), "zero": int((a == 0).sum())}


def test_tensor_card_counts_specials_as_numpy_float16_does():
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.standard_normal(50) * 10.0 ** rng.integers(-9, 6, 50),
                        [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-7, 7e4]])
    t = lp.tensor(x, "fp16")
    shown = text_of(t._repr_html_())
    counts = numpy_counts(x)
    assert all(counts.values())
    for name, n in counts.items():
        assert f"{n} {name}{'' if n == 1 else 's'}" in shown
    assert "shape (57,)" in shown and "FP16" in shown


def test_tensor_card_of_a_large_tensor_stays_short():
    t = lp.tensor(np.zeros(3_000_000), "bf16")
    markup = t._repr_html_()
    assert len(markup) < 4000 and "3000000 zeros" in text_of(markup)


def test_flags_card_holds_the_counts_and_marks_the_raised():
    with lp.flags() as f:
        lp.round([1e-8, 0.1, 1.0, 1e6, np.nan], "fp16")
    shown = text_of(f._repr_html_())
    counts = f.as_dict()
    for name, n in counts.items():
        assert f"{name} {n}" in shown
    raised = [k for k, v in counts.items() if v]
    assert f"raised: {', '.join(raised)}" in shown
    assert "none raised" in text_of(lp.flags()._repr_html_())


@pytest.mark.parametrize("x, fmt, mode", [(0.1, "bf16", "rne"), (1e-7, "fp16", "rz"),
                                          (500.0, "e4m3", "rne"), (0.3, "e2m1", "sr"),
                                          (float("nan"), "e4m3", "rne"), (3.0, "e8m0", "ru")])
def test_explain_card_says_what_the_text_view_says(x, fmt, mode):
    e = lp.explain(x, fmt, mode)
    shown = "".join(text_of(e._repr_html_()).split())
    _, rows = e._rows()
    for key, text in rows:
        if key not in ("fields", "bits"):
            assert "".join(text.split()) in shown     # cells split words, not characters
    if e.bits is not None:
        reader = read(e._repr_html_())
        bits = "".join(t for t in reader.text if t in ("0", "1"))
        assert bits == format(e.bits, f"0{lp.format(fmt).bits}b")


def test_explain_card_shows_bf16_0x3dcd():
    shown = text_of(lp.explain(0.1, "bf16")._repr_html_())
    assert "= 0x3dcd" in shown and "0.10009765625" in shown


def test_dataclass_card_of_models_and_policies():
    for model in ("v100", "a100", "h100", "b200"):
        m = lp.MODELS[model]
        shown = text_of(m._repr_html_())          # what Jupyter shows
        assert f"block {m.block}" in shown and f"fraction_bits {m.fraction_bits}" in shown
    assert "variants TF32: h100/tf32, FP8_E4M3: h100/fp8" in text_of(
        display.dataclass_card(lp.MODELS["h100"]))
    p = lp.amp.Policy.named("bf16-mixed")
    shown = text_of(p._repr_html_())
    assert f"compute {p.compute}" in shown and f"weights {p.weights}" in shown
    with pytest.raises(TypeError, match="dataclass instance"):
        display.dataclass_card(lp.amp.Policy)


@pytest.mark.parametrize("scheme", ["mxfp8_e4m3", "mxfp4", "nvfp4", "mxint8"])
def test_block_scaled_card_shows_the_scales_and_values(scheme):
    x = np.linspace(-3.0, 700.0, 70)
    q = lp.mx.quantize(x, scheme)
    shown = text_of(display.block_scaled_card(q, preview=4))
    scales = q.scales
    assert f"blocks {scales.size}" in shown
    assert f"{float(scales.min())!r} .. {float(scales.max())!r}" in shown
    first = ", ".join(repr(float(v)) for v in q.dequantize()[:4])
    assert f"values {first}, ..." in shown
    assert "BlockScaled" in text_of(q._repr_html_())


def test_history_card_plot_and_pandas():
    hist = lp.amp.History(lp.amp.Policy.named("fp16"), loss=[2.0, 1.25, 1.0],
                          scale=[8.0, 4.0, 4.0], skipped=[False, True, False],
                          grad_underflow=[0, 3, 0], grad_zero=[0.5, 0.25, 0.0],
                          unchanged=[0.0, float("nan"), 0.5])
    shown = text_of(hist._repr_html_())
    # The summary's figures, computed here with Fractions of the lists above.
    assert "History of fp16" in shown and "steps 3" in shown and "skipped 1" in shown
    assert "grad zero 0.25" in shown and "grad underflow 1" in shown
    assert "unchanged 0.25" in shown and "final scale 4" in shown
    rows = hist.records()
    assert [r["loss"] for r in rows] == [2.0, 1.25, 1.0]
    assert [r["skipped"] for r in rows] == [False, True, False]
    pd = pytest.importorskip("pandas")
    frame = hist.to_pandas()
    assert isinstance(frame, pd.DataFrame) and list(frame.index) == [0, 1, 2]
    assert frame["grad_underflow"].tolist() == [0, 3, 0]
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ax = hist.plot()
    loss, skipped = ax.lines
    assert list(loss.get_ydata()) == [2.0, 1.25, 1.0]
    assert list(skipped.get_xdata()) == [1]
    plt.close("all")


def test_views_escape_text():
    markup = display.card("<b>", [("a&b", "<script>")])
    assert "<script>" not in markup and html.escape("<script>") in markup
    read(markup)


NBCONVERT_CELLS = {
    # cell source: a piece of text its HTML view holds (the view's own title or row)
    "lp.format('e4m3')": "FP8_E4M3",
    "lp.tensor([1.0, float('nan')], 'bf16')": "nan",
    "lp.explain(0.1, 'bf16')": "0x3dcd",
    "lp.MODELS['h100']": "fraction_bits",
    "lp.amp.Policy.named('bf16-mixed')": "compute",
    "lp.mx.quantize(np.arange(40.0), 'mxfp8_e4m3')": "BlockScaled",
    "w.bits('bf16', 0x3dcd)": "0.10009765625",           # BF16 0x3dcd
    "w.block([0.1, 1.0, 2.0, 957.0], 'mxfp8_e4m3')": "957",
}


@pytest.mark.slow
def test_every_view_renders_in_nbconvert_html(tmp_path):
    # A notebook of the views, executed by a kernel, exported as nbconvert exports it:
    # each cell's output must carry its view's HTML (the widgets' static fallback).
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nbconvert = pytest.importorskip("nbconvert")
    pytest.importorskip("anywidget")
    cells = [nbformat.v4.new_code_cell("import numpy as np\nimport lowprec as lp\n"
                                       "import lowprec.widgets as w")]
    cells += [nbformat.v4.new_code_cell(src) for src in NBCONVERT_CELLS]
    nb = nbformat.v4.new_notebook(cells=cells)
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    body, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    for cell, (src, text) in zip(nb.cells[1:], NBCONVERT_CELLS.items()):
        htmls = [o["data"]["text/html"] for o in cell.outputs
                 if o.get("output_type") == "execute_result" and "text/html" in o["data"]]
        assert htmls and text in htmls[0], src
        assert htmls[0] in body or text in body, src
