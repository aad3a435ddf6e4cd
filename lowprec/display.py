"""Short HTML views for Jupyter that read in light and dark themes alike.

Every view is built here from plain data (strings, numbers, dataclass fields), so that
`Format`, `Flags`, `Tensor`, `Explanation`, `History`, `TensorCoreModel`, `Policy` and
`BlockScaled` draw the same card. Text colour is never set: it is inherited from the
page, so it matches the theme. Borders, tints and marks are CSS variables (JupyterLab's
``--jp-*`` and lowprec's own ``--lowprec-*``), each with a translucent fallback that
reads on a light or a dark page. Styles are inline, because Jupyter, nbviewer and GitHub
strip ``<style>`` blocks; no view holds a script. This module imports nothing of
lowprec: it must never compute a value, only lay out what the library computed.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["esc", "card", "table", "bit_boxes", "mark", "FIELD_TINTS", "MONO",
           "dataclass_card", "block_scaled_card", "history_card"]

#: The font of every view: JupyterLab's code font, else the system's monospace.
MONO = ("font-family:var(--jp-code-font-family,ui-monospace,SFMono-Regular,Menlo,"
        "Consolas,monospace);font-size:var(--jp-code-font-size,13px);line-height:1.4")

#: Translucent tints of the bit fields: they read on a light and on a dark page.
FIELD_TINTS = {"sign": "var(--lowprec-sign-tint,rgba(229,57,53,0.30))",
               "exponent": "var(--lowprec-exponent-tint,rgba(30,136,229,0.30))",
               "mantissa": "var(--lowprec-mantissa-tint,rgba(67,160,71,0.30))",
               "scale": "var(--lowprec-scale-tint,rgba(142,36,170,0.30))"}
_BORDER = "var(--jp-border-color1,rgba(128,128,128,0.55))"
_RULE = "var(--jp-border-color2,rgba(128,128,128,0.30))"
_MARK = "var(--lowprec-mark,rgba(255,193,7,0.40))"
_BOX = (f"{MONO};border:1px solid {_BORDER};border-radius:4px;padding:6px 8px;"
        "display:inline-block;max-width:100%;overflow-x:auto")
# Secondary text is the inherited colour made fainter, so it follows the theme.
_KEY = "text-align:left;font-weight:normal;opacity:0.75;padding:1px 12px 1px 0;" \
       "vertical-align:top"
_CELL = "text-align:left;padding:1px 8px 1px 0;white-space:pre-wrap;vertical-align:top"
_BIT = (f"min-width:1.3em;text-align:center;border:1px solid {_BORDER};border-radius:2px;"
        "padding:1px 0;font-weight:bold")
_LABEL = "font-size:0.85em;text-align:center;padding:0 2px;opacity:0.8"


def esc(text: object) -> str:
    """``str(text)`` escaped for HTML, quotes included.

    Examples
    --------
    >>> esc("a < b & 'c'")
    'a &lt; b &amp; &#x27;c&#x27;'
    """
    return html.escape(str(text), quote=True)


def mark(inner_html: str) -> str:
    """``inner_html`` marked with a translucent highlight (the choice a mode made).

    Examples
    --------
    >>> mark("0.09375").startswith("<span")
    True
    """
    return (f'<span style="background:{_MARK};font-weight:bold;padding:0 3px;'
            f'border-radius:2px">{inner_html}</span>')


def table(rows: Iterable[Sequence[object]], header: Sequence[object] | None = None,
          *, raw: bool = False) -> str:
    """A plain table of ``rows`` under an optional ``header``, cells escaped.

    With ``raw=True`` the cells are HTML already (the caller escaped them).

    Examples
    --------
    >>> table([(1, "a")], header=("n", "name")).count("<td")
    2
    """
    def cell(v):
        return str(v) if raw else esc(v)
    parts = ['<table style="border-collapse:collapse">']
    if header is not None:
        parts.append("<tr>" + "".join(
            f'<th style="{_KEY};border-bottom:1px solid {_RULE}">{esc(h)}</th>'
            for h in header) + "</tr>")
    for row in rows:
        parts.append("<tr>" + "".join(f'<td style="{_CELL}">{cell(v)}</td>' for v in row)
                     + "</tr>")
    parts.append("</table>")
    return "".join(parts)


def card(title: str, rows: Iterable[tuple[object, object]] = (), *, raw: Mapping | None = None,
         before: str = "", after: str = "") -> str:
    """A bordered card: a bold title, then one (label, value) row per item.

    Values are escaped, except those whose label is in ``raw`` (label -> HTML).
    ``before`` and ``after`` are HTML put above and below the rows.

    Examples
    --------
    >>> html = card("BF16", [("bits", 16), ("max", "3.39e+38")])
    >>> html.startswith("<div"), html.count("<tr>")
    (True, 2)
    """
    raw = raw or {}
    parts = [f'<div style="{_BOX}">',
             f'<div style="font-weight:bold;margin-bottom:4px">{esc(title)}</div>', before]
    body = [f'<tr><th style="{_KEY}">{esc(k)}</th><td style="{_CELL}">'
            f"{raw[k] if k in raw else esc(v)}</td></tr>" for k, v in rows]
    if body:
        parts += ['<table style="border-collapse:collapse">', *body, "</table>"]
    parts += [after, "</div>"]
    return "".join(parts)


def bit_boxes(fields: Sequence[tuple[str, str, str]], suffix: str = "") -> str:
    """One box per bit, tinted by field, with each field's label below its bits.

    ``fields`` holds (field, bits, label) triples, field one of `FIELD_TINTS`'s keys;
    ``suffix`` (such as ``"= 0x3dcd"``) follows the boxes.

    Examples
    --------
    >>> html = bit_boxes([("sign", "0", "sign"), ("exponent", "01111011", "exponent")])
    >>> html.count('title="exponent bit"')
    8
    """
    fields = [f for f in fields if f[1]]
    boxes = "".join(f'<td title="{esc(name)} bit" style="{_BIT};background:'
                    f'{FIELD_TINTS[name]}">{esc(b)}</td>'
                    for name, bits, _ in fields for b in bits)
    labels = "".join(f'<td colspan="{len(bits)}" style="{_LABEL}">{esc(label)}</td>'
                     for _, bits, label in fields)
    return ('<table style="border-collapse:separate;border-spacing:2px">'
            f'<tr>{boxes}<td style="{_LABEL};padding-left:8px">{esc(suffix)}</td></tr>'
            f"<tr>{labels}<td></td></tr></table>")


def _shown(value: object) -> str:
    """A field's value as a card shows it: formats and models by their name."""
    if isinstance(value, tuple):
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
            return ", ".join(f"{_shown(k)}: {_shown(v)}" for k, v in value)   # pairs
        return ", ".join(_shown(v) for v in value) if value else "-"
    if value is None:
        return "-"
    name = getattr(value, "name", None)
    if isinstance(name, str) and name and not isinstance(value, str):
        return name                     # a format, a named model or policy: its name
    return str(value)


def dataclass_card(obj: Any, title: str | None = None, *, skip: Iterable[str] = ()) -> str:
    """A card of a dataclass' fields (those shown by its repr), one row each.

    Formats show by name, tuples joined with commas, ``None`` as ``-``.

    Examples
    --------
    >>> import lowprec as lp
    >>> html = dataclass_card(lp.MODELS["a100"])
    >>> "fraction_bits" in html and "a100" in html
    True
    """
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise TypeError(f"dataclass_card draws a dataclass instance, got {type(obj).__name__}")
    skip = set(skip)
    rows = [(f.name, _shown(getattr(obj, f.name))) for f in dataclasses.fields(obj)
            if f.repr and f.name not in skip and f.name != "name"]
    name = getattr(obj, "name", None)
    head = title or (f"{type(obj).__name__} {name!r}" if name else type(obj).__name__)
    return card(head, rows)


def block_scaled_card(q: Any, preview: int = 8) -> str:
    """A card of a `lowprec.mx.BlockScaled`: scheme, shape, blocks, scales, a preview.

    Every value shown is one the object gives (``scales``, ``dequantize()``).

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> html = block_scaled_card(lp.mx.quantize(np.arange(40.0), "mxfp8_e4m3"))
    >>> "MXFP8" in html.upper() and "blocks" in html
    True
    """
    scales = np.asarray(q.scales, dtype=np.float64).ravel()
    values = np.asarray(q.dequantize(), dtype=np.float64).ravel()
    finite = scales[np.isfinite(scales)]
    elem = q.elem if isinstance(q.elem, str) else _shown(q.elem)
    rows: list[tuple[str, object]] = [
        ("shape", tuple(q.shape)), ("elements", f"{elem} x {q.block} per block"),
        ("scale", f"{_shown(q.scale_fmt)}, one per block"), ("blocks", scales.size),
        ("scale range", f"{float(finite.min())!r} .. {float(finite.max())!r}"
                        if finite.size else "-"),
    ]
    if q.tensor_scale != 1.0:
        rows.append(("tensor scale", repr(float(q.tensor_scale))))
    shown = ", ".join(repr(float(v)) for v in values[:preview])
    rows.append(("values", shown + (", ..." if values.size > preview else "")))
    return card(f"BlockScaled {q.scheme}", rows)


def history_card(summary: Mapping[str, float], policy: str) -> str:
    """A card of a training run's `History.summary()`, one row per figure.

    Examples
    --------
    >>> html = history_card({"steps": 3, "final_loss": 0.5}, "bf16-mixed")
    >>> "bf16-mixed" in html and "0.5" in html
    True
    """
    def figure(v):
        if isinstance(v, float):
            return f"{v:.6g}"
        return str(v)
    return card(f"History of {policy}", [(k.replace("_", " "), figure(v))
                                         for k, v in summary.items()])
