"""The widgets as anywidget classes: Python computes, the browser draws and clicks.

Each widget holds its inputs as synced traits (a bit pattern, ``x`` and a mode, a
scheme's scale rule, a model, ``n``). When one changes, Python recomputes the state
with `lowprec.widgets.state` and the HTML with `lowprec.widgets.static`, and sends the
HTML. The JavaScript below only puts that HTML on the page, draws the controls, and
sends a changed control or a clicked bit back. Outside a widget frontend (nbconvert,
the docs site) the same HTML is the ``text/html`` of the display. This module needs
anywidget (the ``widgets`` extra).
"""

from __future__ import annotations

from typing import Any, cast

import anywidget
import traitlets

from ..formats import format as _format
from ..tensorcore import MODELS
from ..types import Mode
from . import state, static

__all__ = ["Bits", "Rounding", "Block", "TensorCore", "Summation"]

_ESM = r"""
function render({ model, el }) {
  const root = document.createElement("div");
  const controls = document.createElement("div");
  controls.style.cssText = "margin:4px 0;display:flex;gap:12px;flex-wrap:wrap;" +
    "align-items:center;font-family:var(--jp-ui-font-family,sans-serif)";
  const view = document.createElement("div");
  root.append(controls, view);
  el.append(root);
  function draw() {
    view.innerHTML = model.get("html");
    view.querySelectorAll("[data-bit]").forEach((td) => {
      td.style.cursor = "pointer";
      td.addEventListener("click", () => {
        const bit = BigInt(td.dataset.bit);
        const p = BigInt(model.get("pattern")) ^ (1n << bit);
        model.set("pattern", Number(p));
        model.save_changes();
      });
    });
  }
  for (const c of model.get("controls")) {
    const label = document.createElement("label");
    label.textContent = c.label + " ";
    let input;
    if (c.kind === "select") {
      input = document.createElement("select");
      for (const o of c.options) {
        const opt = document.createElement("option");
        opt.value = o; opt.textContent = o;
        input.append(opt);
      }
    } else {
      input = document.createElement("input");
      input.type = c.kind;
      if (c.kind === "range") { input.min = c.min; input.max = c.max; input.step = c.step; }
      if (c.kind === "number") { input.step = "any"; }
    }
    input.dataset.control = c.name;
    input.value = String(model.get(c.name));
    input.addEventListener("change", () => {
      const v = c.kind === "select" || c.kind === "text" ? input.value : Number(input.value);
      model.set(c.name, v);
      model.save_changes();
    });
    model.on("change:" + c.name, () => { input.value = String(model.get(c.name)); });
    label.append(input);
    controls.append(label);
  }
  model.on("change:html", draw);
  draw();
}
export default { render };
"""


class _Widget(anywidget.AnyWidget):
    """A widget whose view is HTML computed in Python, with controls drawn around it."""

    _esm = _ESM
    html = traitlets.Unicode("").tag(sync=True)
    controls: traitlets.List[Any] = traitlets.List([]).tag(sync=True)

    def _redraw(self, *_: Any) -> None:
        self.html = self.static()

    def static(self) -> str:
        """The current view as HTML: the static fallback (no controls)."""
        raise NotImplementedError

    def _repr_html_(self) -> str:
        return self.static()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # The widget view, and the same picture as HTML where no widget frontend runs
        # (nbconvert drops a view whose state was not saved, and shows text/html).
        bundle = super()._repr_mimebundle_(**kwargs)
        data, meta = bundle if isinstance(bundle, tuple) else (bundle or {}, {})
        return {**data, "text/html": self.static()}, meta


class Bits(_Widget):
    """A bit editor for one format: click a bit, or type a value to encode it."""

    pattern = traitlets.Int(0).tag(sync=True)
    value = traitlets.Unicode("").tag(sync=True)

    def __init__(self, fmt: Any, pattern: int | None = None, **kwargs: Any) -> None:
        self.fmt = _format(fmt)
        super().__init__(**kwargs)
        self.controls = [{"name": "value", "label": "type a value", "kind": "text"}]
        self.observe(self._redraw, names="pattern")
        self.observe(self._typed, names="value")
        if pattern is None:
            pattern = int(state.encode_state(1.0, self.fmt)["rne"]["hex"], 16)
        self.pattern = pattern
        self._redraw()

    def _typed(self, change: dict) -> None:
        try:
            x = float(change["new"].strip())
        except ValueError:
            self._encoded = ""          # not a number: the view drops the table
            self._redraw()
            return
        encodings = state.encode_state(x, self.fmt)
        self._encoded = static.encodings_html(x, encodings)
        code = encodings["rne"]["hex"]
        if code is not None and int(code, 16) != self.pattern:
            self.pattern = int(code, 16)          # redraws through the observer
        else:
            self._redraw()

    def static(self) -> str:
        return static.bits_html(state.bits_state(self.fmt, self.pattern)) + \
            getattr(self, "_encoded", "")


class Rounding(_Widget):
    """``x`` on the number line of a format: each mode's choice and SR's draws."""

    x = traitlets.Float(0.1).tag(sync=True)
    mode = traitlets.Unicode("rne").tag(sync=True)
    draws = traitlets.Int(1000).tag(sync=True)

    def __init__(self, x: float, fmt: Any, mode: str = "rne", **kwargs: Any) -> None:
        self.fmt = _format(fmt)
        super().__init__(**kwargs)
        self.controls = [
            {"name": "x", "label": "x", "kind": "number"},
            {"name": "mode", "label": "mode", "kind": "select",
             "options": [*state.DETERMINISTIC_MODES, "sr"]},
            {"name": "draws", "label": "sr draws", "kind": "range", "min": 10,
             "max": 10000, "step": 10}]
        self.x, self.mode = float(x), mode
        self.observe(self._redraw, names=["x", "mode", "draws"])
        self._redraw()

    def static(self) -> str:
        mode = cast(Mode, self.mode)        # a synced str; rounding_state checks it
        return static.rounding_html(state.rounding_state(self.x, self.fmt, mode,
                                                         draws=self.draws))


class Block(_Widget):
    """One block of values in an MX or NVFP4 scheme, under a chosen scale rule."""

    rule = traitlets.Unicode("rceil").tag(sync=True)

    def __init__(self, values: Any, scheme: str = "mxfp8_e4m3", **kwargs: Any) -> None:
        self._state = state.block_state(values, scheme)
        super().__init__(**kwargs)
        self.controls = [{"name": "rule", "label": "scale rule", "kind": "select",
                          "options": list(self._state["rules"])}]
        self.observe(self._redraw, names="rule")
        self._redraw()

    def static(self) -> str:
        return static.block_html(self._state, self.rule)


class TensorCore(_Widget):
    """One dot product on a chosen Tensor Core model, step by step."""

    model = traitlets.Unicode("a100").tag(sync=True)

    def __init__(self, a: Any, b: Any, model: str = "a100", *, fmt: Any = "fp16",
                 **kwargs: Any) -> None:
        self.a, self.b, self.fmt = list(a), list(b), _format(fmt)
        super().__init__(**kwargs)
        names = [n for n, m in MODELS.items() if _takes(m, self.fmt)]
        self.controls = [{"name": "model", "label": "model", "kind": "select",
                          "options": names}]
        self.model = model
        self.observe(self._redraw, names="model")
        self._redraw()

    def static(self) -> str:
        return static.tensor_core_html(state.tensor_core_state(self.a, self.b, self.model,
                                                               fmt=self.fmt))


class Summation(_Widget):
    """Recursive, pairwise and Kahan sums of the first n values, with a slider for n."""

    n = traitlets.Int(1).tag(sync=True)

    def __init__(self, x: Any, fmt: Any, n: int | None = None, **kwargs: Any) -> None:
        self.x, self.fmt = list(map(float, x)), _format(fmt)
        super().__init__(**kwargs)
        self.controls = [{"name": "n", "label": "n", "kind": "range", "min": 1,
                          "max": len(self.x), "step": 1}]
        self.n = len(self.x) if n is None else int(n)
        self.observe(self._redraw, names="n")
        self._redraw()

    def static(self) -> str:
        return static.summation_html(state.summation_state(self.x, self.fmt, self.n))


def _takes(model: Any, fmt: Any) -> bool:
    """Whether a catalogue model computes with inputs of ``fmt`` (a model without
    per-format units, such as ``exact`` or ``fp32``, takes every format)."""
    if not hasattr(model, "for_format"):
        return True
    try:
        model.for_format(fmt)
    except ValueError:
        return False
    return True
