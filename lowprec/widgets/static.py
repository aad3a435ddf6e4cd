"""The widgets' views as HTML: what the browser draws, and the static fallback.

Each function draws one state dict of `lowprec.widgets.state` with `lowprec.display`.
The live widget puts the same HTML on the page and adds its controls, so nbconvert, the
docs site and Jupyter show the same numbers. Elements a test or a click reads carry a
``data-role`` (and each bit a ``data-bit``). This module computes nothing.
"""

from __future__ import annotations

import math
from typing import Any

from ..display import bit_boxes, card, esc, mark, table

__all__ = ["bits_html", "encodings_html", "rounding_html", "block_html", "tensor_core_html",
           "summation_html"]


def _role(role: str, text: object) -> str:
    return f'<span data-role="{esc(role)}">{esc(text)}</span>'


def bits_html(s: dict[str, Any]) -> str:
    """A bit pattern's boxes (each with ``data-bit``: its place value), then its fields.

    Examples
    --------
    >>> from lowprec.widgets.state import bits_state
    >>> 'data-role="value">0.10009765625<' in bits_html(bits_state("bf16", 0x3dcd))
    True
    """
    b, e = s["binary"], s["exponent_bits"]
    sign = b[0] if s["signed"] else ""
    fields = [("sign", sign, "sign"), ("exponent", b[len(sign):len(sign) + e],
                                       f"exponent (bias {s['bias']})"),
              ("mantissa", b[len(sign) + e:], "mantissa")]
    boxes = bit_boxes(fields, s["hex"])
    # Bit i from the left is place value bits - 1 - i: a click flips that bit.
    n = s["bits"]
    for i in range(n):
        boxes = boxes.replace('bit" style=', f'bit" data-bit="{n - 1 - i}" style=', 1)
    rows = [("value", _role("value", s["value"])), ("class", _role("kind", s["kind"])),
            ("fields", esc(f"sign {s['sign']}, exponent {s['exponent']}, "
                           f"mantissa {s['mantissa']}"))]
    if s.get("power") is not None:
        rows.append(("significand", esc(f"{s['significand']} * 2**{s['power']}")))
    rows.append(("neighbours", _role("below", s["below"] if s["below"] is not None else "none")
                 + " &lt; x &lt; "
                 + _role("above", s["above"] if s["above"] is not None else "none")))
    return card(f"{s['format']} pattern {s['hex']}", [(k, "") for k, _ in rows],
                raw=dict(rows), before=boxes)


_MARK_FILL = "var(--lowprec-mark,rgba(255,193,7,0.85))"


def _number_line(s: dict[str, Any]) -> str:
    """An SVG number line: the format's values around x (ticks), x (a diamond), the
    chosen value (a filled dot) and, for ``sr``, the draws per candidate (bars)."""
    points = [v for v in (s["below"], s["down"], s["up"], s["above"])
              if isinstance(v, float)]
    lo, hi = min(points + [s["x"]]), max(points + [s["x"]])
    width, left, right = 460, 40, 420

    def at(v: float) -> float:
        return left + (right - left) * (v - lo) / (hi - lo) if hi > lo else (left + right) / 2
    ink = "stroke:currentColor;stroke-width:1"
    parts = [f'<svg width="{width}" height="96" role="img" data-role="number-line" '
             f'style="display:block;margin:4px 0;{ink}">',
             f'<line x1="{left - 20}" y1="60" x2="{right + 20}" y2="60" style="{ink}"/>']
    for v in sorted(set(points)):
        parts.append(f'<line x1="{at(v):.1f}" y1="52" x2="{at(v):.1f}" y2="68" style="{ink}"/>'
                     f'<text x="{at(v):.1f}" y="86" text-anchor="middle" font-size="10" '
                     f'style="fill:currentColor;stroke:none">{esc(repr(v))}</text>')
    if isinstance(s["chosen"], float):
        parts.append(f'<circle cx="{at(s["chosen"]):.1f}" cy="60" r="5" '
                     f'style="fill:{_MARK_FILL};{ink}"/>')
    x = at(s["x"])
    parts.append(f'<path d="M{x:.1f},53 l5,7 l-5,7 l-5,-7 z" style="fill:none;{ink}"/>'
                 f'<text x="{x:.1f}" y="46" text-anchor="middle" font-size="10" '
                 f'style="fill:currentColor;stroke:none">x</text>')
    if s["p_up"] is not None and s["draws"]:
        for v, n in ((s["down"], s["draws"] - s["count_up"]), (s["up"], s["count_up"])):
            h = 36 * n / s["draws"]
            parts.append(f'<rect x="{at(v) - 8:.1f}" y="{50 - h:.1f}" width="16" '
                         f'height="{h:.1f}" style="fill:{_MARK_FILL};opacity:0.6;{ink}"/>'
                         f'<text x="{at(v) + 11:.1f}" y="{48 - h / 2:.1f}" font-size="10" '
                         f'style="fill:currentColor;stroke:none">{n}</text>')
    parts.append("</svg>")
    return "".join(parts)


def encodings_html(x: float, e: dict[str, Any]) -> str:
    """A table of ``x`` encoded in every mode (`state.encode_state`).

    Examples
    --------
    >>> from lowprec.widgets.state import encode_state
    >>> 'data-role="encoded-rz">0x1c<' in encodings_html(0.1, encode_state(0.1, "e4m3"))
    True
    """
    rows = [(esc(m), esc(v["value"]), _role(f"encoded-{m}", v["hex"] or "none"))
            for m, v in e.items()]
    return (f'<div style="margin-top:4px">{esc(repr(x))} in every mode:</div>'
            + table(rows, header=("mode", "value", "pattern"), raw=True))


def rounding_html(s: dict[str, Any]) -> str:
    """``x`` between its neighbours on a number line, each mode's choice, and the
    ``sr`` draws.

    Examples
    --------
    >>> from lowprec.widgets.state import rounding_state
    >>> 'data-role="chosen">0.09375<' in rounding_html(rounding_state(0.1, "e4m3", "rz"))
    True
    """
    def choice(v):
        return mark(esc(v)) if v == s["chosen"] else esc(v)
    rows = [("x", esc(repr(s["x"]))),
            ("candidates", f"{choice(s['down'])} &lt;= x &lt;= {choice(s['up'])}"),
            ("mode", esc(f"{s['mode']} ({s['mode_name']})")),
            ("gives", _role("chosen", s["chosen"]))]
    if s["p_up"] is not None:
        rows.append(("P(up)", esc(f"{s['p_up']:.6g} = {s['p_up_exact']}")))
        rows.append((f"{s['draws']} sr draws", esc(
            f"{s['count_up']} up, {s['draws'] - s['count_up']} down; mean "
            f"{s['mean']!r} (seed {s['seed']})")))
    modes = table([(m, esc(v) if v != s["chosen"] else mark(esc(v)))
                   for m, v in s["choices"].items()], header=("mode", "gives"), raw=True)
    return card(f"Rounding to {s['format']}", [(k, "") for k, _ in rows], raw=dict(rows),
                before=_number_line(s), after=modes)


def block_html(s: dict[str, Any], rule: str = "rceil") -> str:
    """One block under one scale rule: scale, elements, errors, what clamps.

    Examples
    --------
    >>> from lowprec.widgets.state import block_state
    >>> 'data-role="scale">4.0<' in block_html(block_state([1.0, 957.0], "mxfp8_e4m3"))
    True
    """
    r = s["rules"][rule]
    body = table([(repr(x), esc(v), esc(f"{err:.4g}"), mark("clamped") if c else "")
                  for x, v, err, c in zip(s["inputs"], r["values"], r["errors"],
                                          r["clamped"])],
                 header=("input", "value", "error", ""), raw=True)
    rows = [("scheme", esc(f"{s['scheme']}: {s['element']} x {s['block']}, "
                           f"scale {s['scale_format']}")),
            ("rule", esc(rule)), ("scale", _role("scale", r["scales"][0])),
            ("clamped", _role("clamped", sum(r["clamped"])))]
    if r["tensor_scale"] != 1.0:
        rows.append(("tensor scale", esc(repr(r["tensor_scale"]))))
    return card("Block scaling", [(k, "") for k, _ in rows], raw=dict(rows), after=body)


def tensor_core_html(s: dict[str, Any]) -> str:
    """A dot product on a Tensor Core model: products, alignment, drops, result.

    Examples
    --------
    >>> from lowprec.widgets.state import tensor_core_state
    >>> s = tensor_core_state([1.0, 1.0], [1.0, 2.0**-30], "v100")
    >>> 'data-role="result">1.0<' in tensor_core_html(s)
    True
    """
    rows = [("model", esc(s["model"])), ("inputs", esc(s["format"]))]
    after = ""
    if "aligned" in s:
        rows.append(("alignment", esc(
            f"to {s['fraction_bits']} bits below 2**{s['reference_exponent']} "
            f"(block of {s['block']})")))
        after = table([(repr(a), repr(b), repr(p), repr(k), repr(d))
                       for a, b, p, k, d in zip(s["a"], s["b"], s["products"],
                                                s["aligned"], s["dropped"])],
                      header=("a", "b", "product (exact)", "kept", "dropped"))
    rows += [("result", _role("result", s["result"])), ("exact", _role("exact", s["exact"])),
             ("error", esc(repr(s["error"])))]
    return card("Tensor Core dot product", [(k, "") for k, _ in rows], raw=dict(rows),
                after=after)


_SERIES = {"sequential": "var(--lowprec-sign-tint,rgba(229,57,53,0.9))",
           "pairwise": "var(--lowprec-exponent-tint,rgba(30,136,229,0.9))",
           "kahan": "var(--lowprec-mantissa-tint,rgba(67,160,71,0.9))"}


def _error_chart(s: dict[str, Any]) -> str:
    """An SVG log-log chart of each order's relative error against n, the two bounds
    dashed, and a vertical line at the chosen n."""
    c = s["curve"]
    values = [v for k in (*_SERIES, "bound_n", "bound_sqrt") for v in c[k]
              if v is not None and v > 0 and math.isfinite(v)]
    if not values or len(c["n"]) < 2:
        return ""
    lo, hi = math.log10(min(values)), math.log10(max(values))
    hi = hi if hi > lo else lo + 1
    n_hi = math.log10(c["n"][-1]) or 1.0
    left, right, top, bottom = 50, 330, 10, 130

    def xy(n: float, v: float) -> str:
        x = left + (right - left) * math.log10(n) / n_hi
        y = bottom - (bottom - top) * (math.log10(v) - lo) / (hi - lo)
        return f"{x:.1f},{y:.1f}"
    ink = "stroke:currentColor;stroke-width:1"
    text = 'font-size="10" style="fill:currentColor;stroke:none"'
    parts = ['<svg width="440" height="150" role="img" data-role="error-chart" '
             'style="display:block;margin:4px 0">',
             f'<path d="M{left},{top} V{bottom} H{right}" style="fill:none;{ink}"/>',
             f'<text x="{left - 4}" y="{top + 8}" text-anchor="end" {text}>{10 ** hi:.1g}</text>',
             f'<text x="{left - 4}" y="{bottom}" text-anchor="end" {text}>{10 ** lo:.1g}</text>',
             f'<text x="{left}" y="{bottom + 14}" {text}>n = 1</text>',
             f'<text x="{right}" y="{bottom + 14}" text-anchor="end" {text}>'
             f'{c["n"][-1]}</text>']
    series = [(k, colour, "") for k, colour in _SERIES.items()] + \
        [("bound_n", "currentColor", "4 3"), ("bound_sqrt", "currentColor", "1 3")]
    for i, (k, colour, dash) in enumerate(series):
        pts = " ".join(xy(n, v) for n, v in zip(c["n"], c[k])
                       if v is not None and v > 0 and math.isfinite(v))
        if pts.count(",") >= 2:
            parts.append(f'<polyline points="{pts}" style="fill:none;stroke:{colour};'
                         f'stroke-width:1.6;stroke-dasharray:{dash or "none"}"/>')
        label = {"bound_n": "(n-1)u", "bound_sqrt": "sqrt(n)u"}.get(k, k)
        parts.append(f'<line x1="345" y1="{16 + 16 * i}" x2="365" y2="{16 + 16 * i}" '
                     f'style="stroke:{colour};stroke-width:1.6;stroke-dasharray:'
                     f'{dash or "none"}"/><text x="370" y="{20 + 16 * i}" {text}>'
                     f"{esc(label)}</text>")
    x = left + (right - left) * math.log10(s["n"]) / n_hi
    parts.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" '
                 f'style="{ink};stroke-dasharray:2 2;opacity:0.6"/></svg>')
    return "".join(parts)


def summation_html(s: dict[str, Any]) -> str:
    """Three summation orders of the first n values, against the error bounds.

    Examples
    --------
    >>> from lowprec.widgets.state import summation_state
    >>> "pairwise" in summation_html(summation_state([0.1] * 10, "fp16"))
    True
    """
    def rel(v):
        return "-" if v is None else f"{v:.3g}"
    body = table([(o, _role(f"sum-{o}", r["sum"]), rel(r["rel_error"]))
                  for o, r in s["orders"].items()], header=("order", "sum", "rel. error"),
                 raw=True)
    rows = [("n", _role("n", s["n"])), ("exact sum", esc(repr(s["exact"]))),
            ("bounds", esc(f"(n - 1) u = {s['bound_n']:.3g}, sqrt(n) u = "
                           f"{s['bound_sqrt']:.3g} (relative, u = {s['u']!r})"))]
    return card(f"Summation in {s['format']}", [(k, "") for k, _ in rows], raw=dict(rows),
                before=_error_chart(s) if "curve" in s else "", after=body)
