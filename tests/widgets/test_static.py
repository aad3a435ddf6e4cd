"""The widgets' HTML views: well formed, themed (colours only in var() fallbacks), and
holding the numbers of the state they draw, where a test or a click reads them."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from test_display import read

from lowprec.widgets import state, static


def role(markup: str, name: str) -> str:
    m = re.search(rf'data-role="{re.escape(name)}">([^<]*)<', markup)
    assert m, f"no data-role {name!r}"
    return m.group(1)


VIEWS = {
    "bits": lambda: static.bits_html(state.bits_state("bf16", 0x3dcd)),
    "bits-e2m1": lambda: static.bits_html(state.bits_state("e2m1", 0b0111)),
    "bits-e8m0": lambda: static.bits_html(state.bits_state("e8m0", 127)),
    "encodings": lambda: static.encodings_html(0.1, state.encode_state(0.1, "e4m3")),
    "rounding": lambda: static.rounding_html(state.rounding_state(0.1, "e4m3", "rz")),
    "rounding-sr": lambda: static.rounding_html(state.rounding_state(0.3, "e2m1", "sr")),
    "block": lambda: static.block_html(state.block_state([1.0, 957.0], "mxfp8_e4m3")),
    "block-nvfp4": lambda: static.block_html(state.block_state([0.1, 5.0, -30.0], "nvfp4"),
                                             "floor"),
    "tensor_core": lambda: static.tensor_core_html(
        state.tensor_core_state([1.0, 1.0], [1.0, 2.0**-24], "v100")),
    "tensor_core-exact": lambda: static.tensor_core_html(
        state.tensor_core_state([1.0, 1.0], [1.0, 2.0**-24], "exact")),
    "summation": lambda: static.summation_html(state.summation_state([0.1] * 50, "bf16")),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_every_view_parses_and_is_themed(name):
    read(VIEWS[name]())


def test_views_show_their_state():
    bits = static.bits_html(state.bits_state("bf16", 0x3dcd ^ 0x8000))
    assert role(bits, "value") == "-0.10009765625" and role(bits, "kind") == "normal"
    # One clickable box per bit, each with its place value.
    assert sorted(int(b) for b in re.findall(r'data-bit="(\d+)"', bits)) == list(range(16))
    r = static.rounding_html(state.rounding_state(0.1, "e4m3", "rz"))
    assert role(r, "chosen") == "0.09375"
    s = state.summation_state([0.1] * 50, "bf16", 20)
    view = static.summation_html(s)
    assert role(view, "n") == "20"
    assert role(view, "sum-kahan") == str(s["orders"]["kahan"]["sum"])


def test_widgets_are_not_imported_by_lowprec_and_need_anywidget():
    code = ("import sys; sys.modules['anywidget'] = None\n"
            "import lowprec\n"
            "assert 'lowprec.widgets' not in sys.modules\n"
            "import lowprec.widgets as w\n"
            "print(w.static.bits_html(w.state.bits_state('fp16', 0x3c00))[:4])\n"
            "try:\n"
            "    w.bits('fp16')\n"
            "except ImportError as exc:\n"
            "    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.startswith("<div") and 'pip install "lowprec[widgets]"' in out
