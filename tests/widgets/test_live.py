"""The anywidget classes: a changed trait (what a click or a control sends) redraws the
view from lowprec's numbers, and the display carries the same view as text/html."""

from __future__ import annotations

import re

import pytest

import lowprec as lp

pytest.importorskip("anywidget")
import lowprec.widgets as w


def role(markup: str, name: str) -> str:
    m = re.search(rf'data-role="{re.escape(name)}">([^<]*)<', markup)
    assert m, f"no data-role {name!r}"
    return m.group(1)


def test_bits_click_and_typed_value():
    b = w.bits("bf16", 0x3dcd)
    b.pattern ^= 1 << 15                        # the sign bit, as a click sends it
    assert float(role(b.html, "value")) == float(lp.decode(0xbdcd, "bf16"))
    b.value = "0.1"
    assert b.pattern == int(lp.encode(lp.round(0.1, "bf16"), "bf16"))


def test_rounding_mode_and_x():
    r = w.rounding(0.1, "e4m3")
    for mode in ("rne", "rz", "ru", "rd", "rna", "ro"):
        r.mode = mode
        assert float(role(r.html, "chosen")) == float(lp.round(0.1, "e4m3", mode))
    r.x = 300.0
    assert float(role(r.html, "chosen")) == float(lp.round(300.0, "e4m3", "ro"))


def test_block_rule_tensor_core_model_and_summation_n():
    values = [0.5, 3.0, 957.0]
    b = w.block(values)
    for rule in ("floor", "ceil"):
        b.rule = rule
        q = lp.mx.quantize(values, "mxfp8_e4m3", scale_rule=rule)
        assert float(role(b.html, "scale")) == float(q.scales[0])
    t = w.tensor_core([1.0, 1.0, 1.0, 1.0], [1.0, 2.0**-24, 2.0**-24, 2.0**-24], "v100")
    for model in ("v100", "a100", "h100"):
        t.model = model
        want = lp.matmul([[1.0] * 4], [[1.0], [2.0**-24], [2.0**-24], [2.0**-24]],
                         model=model, in_fmt="fp16")[0, 0]
        assert float(role(t.html, "result")) == float(want)
    s = w.summation([0.1] * 64, "fp16")
    s.n = 7
    assert float(role(s.html, "sum-pairwise")) == float(
        lp.sum(lp.round([0.1] * 7, "fp16"), "fp16", order="pairwise"))


def test_display_carries_the_static_view():
    b = w.bits("e4m3", 0x1c)
    data, _ = b._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["text/html"] == b.static() == b.html
