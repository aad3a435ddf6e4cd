"""What each widget shows, as plain data computed by lowprec.

Each function returns a dict of JSON-ready values (str, int, float, lists): the state a
widget sends to the browser and that its static view draws. The numbers come from
lowprec's kernels (`round`, `encode`, `decode`, `explain`, `matmul`, `sum`,
`mx.quantize`) and from exact `Fraction` arithmetic on their results. This module must
never round a value on its own, and never imports a widget library.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .. import mx
from ..arith import sum as _sum
from ..bits import decode, encode, fields
from ..formats import FormatLike
from ..formats import format as _format
from ..rounding import round as _round
from ..status import quiet
from ..teaching.explanation import MODE_NAMES, explain, format_name
from ..tensorcore import TensorCoreModel, resolve_model
from ..tensorcore import matmul as _matmul
from ..types import Mode

__all__ = ["bits_state", "encode_state", "rounding_state", "block_state", "tensor_core_state",
           "summation_state", "DETERMINISTIC_MODES"]

#: The modes whose choice the rounding widget shows (``sr`` gets probabilities).
DETERMINISTIC_MODES = ("rne", "rna", "rz", "ru", "rd", "ro")


def _f(v: Any) -> float | str:
    """A float for JSON: finite values as they are, inf and NaN spelled out."""
    v = float(v)
    return v if math.isfinite(v) else repr(v)


def bits_state(fmt: FormatLike, pattern: int) -> dict[str, Any]:
    """One bit pattern of ``fmt``: its fields, value, class and neighbours.

    Examples
    --------
    >>> s = bits_state("bf16", 0x3dcd ^ 0x8000)
    >>> s["value"], s["kind"], s["hex"]
    ('-0.10009765625', 'normal', '0xbdcd')
    """
    fmt = _format(fmt)
    if not 0 <= int(pattern) < 2 ** fmt.bits:
        raise ValueError(f"pattern must be in [0, 2**{fmt.bits}) for {format_name(fmt)}, "
                         f"got {pattern!r}")
    pattern = int(pattern)
    with np.errstate(over="ignore", invalid="ignore"):
        value = float(decode(pattern, fmt))
    sign, exponent, mantissa = (int(v) for v in fields(pattern, fmt))
    hex_digits = (fmt.bits + 3) // 4
    state: dict[str, Any] = {
        "format": format_name(fmt), "bits": fmt.bits, "pattern": pattern,
        "hex": f"0x{pattern:0{hex_digits}x}", "binary": format(pattern, f"0{fmt.bits}b"),
        "signed": fmt.signed, "exponent_bits": fmt.exponent_bits,
        "mantissa_bits": fmt.mantissa_bits, "bias": fmt.bias,
        "sign": sign, "exponent": exponent, "mantissa": mantissa,
    }
    if math.isnan(value):
        state.update(value="nan", kind="nan", below=None, above=None, exact="nan")
        return state
    e = explain(value, fmt)
    state.update(value=e.exact_decimal if e.kind != "inf" else repr(value), kind=e.kind,
                 exact=e.exact_decimal, below=None if e.below is None else _f(e.below),
                 above=None if e.above is None else _f(e.above),
                 power=e.power, significand=None if e.significand is None
                 else str(e.significand))
    return state


def encode_state(x: float, fmt: FormatLike) -> dict[str, Any]:
    """``x`` rounded to ``fmt`` in every deterministic mode: value and bit pattern.

    Examples
    --------
    >>> encode_state(0.1, "e4m3")["rz"]
    {'value': 0.09375, 'hex': '0x1c'}
    """
    fmt = _format(fmt)
    hex_digits = (fmt.bits + 3) // 4
    out: dict[str, Any] = {}
    for mode in DETERMINISTIC_MODES:
        r = float(quiet(_round, x, fmt, mode))
        code = None if math.isnan(r) and not fmt.has_nan else int(encode(r, fmt))
        out[mode] = {"value": _f(r),
                     "hex": None if code is None else f"0x{code:0{hex_digits}x}"}
    return out


def rounding_state(x: float, fmt: FormatLike, mode: Mode = "rne", *, draws: int = 1000,
                   seed: int = 0) -> dict[str, Any]:
    """``x`` between its two neighbours in ``fmt``: each mode's choice, the
    stochastic-rounding probabilities, and ``draws`` seeded ``sr`` draws.

    Examples
    --------
    >>> s = rounding_state(0.1, "e4m3", "rz", draws=100)
    >>> s["down"], s["up"], s["chosen"], s["choices"]["rz"]
    (0.09375, 0.1015625, 0.09375, 0.09375)
    """
    fmt = _format(fmt)
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"x must be finite, got {x!r}")
    e = explain(x, fmt, mode)
    choices = {m: _f(quiet(_round, x, fmt, m)) for m in DETERMINISTIC_MODES}
    sample = np.asarray(quiet(_round, np.full(int(draws), x), fmt, "sr", rng=seed),
                        dtype=np.float64)
    p_up = e.p_up
    return {"x": x, "format": format_name(fmt), "mode": mode, "mode_name": MODE_NAMES[mode],
            "down": _f(e.down), "up": _f(e.up), "chosen": _f(e.rounded),
            "below": None if e.below is None else _f(e.below),
            "above": None if e.above is None else _f(e.above),
            "choices": choices,
            "p_up": None if p_up is None else float(p_up),
            "p_up_exact": None if p_up is None else str(p_up),
            "draws": int(draws), "seed": int(seed),
            "count_up": int(np.count_nonzero(sample == e.up)) if e.up != e.down else 0,
            "mean": float(np.mean(sample)) if draws else float("nan")}


def block_state(values: ArrayLike, scheme: str = "mxfp8_e4m3") -> dict[str, Any]:
    """One block of ``values`` quantized by ``scheme`` under each scale rule.

    Examples
    --------
    >>> s = block_state([1.0, 2.0, 957.0], "mxfp8_e4m3")
    >>> s["rules"]["floor"]["values"][2], s["rules"]["floor"]["clamped"][2]
    (896.0, True)
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        raise ValueError("block needs at least one value")
    rules = {}
    for rule in mx.SCALE_RULES:
        try:
            q = quiet(mx.quantize, x, scheme, scale_rule=rule)
        except ValueError:
            continue                           # a rule the scheme does not take
        got = np.asarray(q.dequantize(), dtype=np.float64)
        exact = [Fraction(float(g)) - Fraction(float(v)) for g, v in zip(got, x)]
        rules[rule] = {"scales": [_f(s) for s in np.asarray(q.scales).ravel()],
                       "values": [_f(v) for v in got],
                       "errors": [float(err) for err in exact],
                       "clamped": [bool(c) for c in np.abs(x) > q.limits],
                       "tensor_scale": float(q.tensor_scale)}
    elem, scale_fmt, block = mx.SCHEMES[scheme]
    return {"scheme": scheme, "inputs": [float(v) for v in x], "rules": rules,
            "element": str(elem), "scale_format": str(scale_fmt), "block": int(block)}


def tensor_core_state(a: Sequence[float], b: Sequence[float], model: str = "a100", *,
                      fmt: FormatLike = "fp16") -> dict[str, Any]:
    """One dot product ``a . b`` on a Tensor Core model, step by step.

    The inputs are rounded to ``fmt``. The products are exact. Each is cut to
    ``fraction_bits`` bits below the largest product's exponent (TENSORCORE.md §2),
    written out with `Fraction`. The result is ``lp.matmul``'s, against the exact sum.

    Examples
    --------
    >>> s = tensor_core_state([1.0, 1.0, 1.0, 1.0], [1.0, 2.0**-24, 2.0**-24, 2.0**-24],
    ...                       "v100")
    >>> s["result"], s["exact"]
    (1.0, 1.0000001788139343)
    """
    fmt = _format(fmt)
    av = np.asarray(quiet(_round, np.asarray(a, dtype=np.float64), fmt), dtype=np.float64)
    bv = np.asarray(quiet(_round, np.asarray(b, dtype=np.float64), fmt), dtype=np.float64)
    if av.shape != bv.shape or av.ndim != 1 or av.size == 0:
        raise ValueError(f"a and b must be 1-D of one length, got shapes {av.shape} and "
                         f"{bv.shape}")
    m = resolve_model(model)
    unit = m.for_format(fmt) if hasattr(m, "for_format") else None
    out = np.asarray(quiet(_matmul, av[None, :], bv[:, None], model=m, in_fmt=fmt))
    result = float(out[0, 0])
    products = [Fraction(float(x)) * Fraction(float(y)) for x, y in zip(av, bv)]
    exact = sum(products, Fraction(0))
    state: dict[str, Any] = {
        "format": format_name(fmt), "model": getattr(m, "name", None) or str(model),
        "a": [float(v) for v in av], "b": [float(v) for v in bv],
        "products": [float(p) for p in products], "exact": float(exact),
        "result": result, "error": float(Fraction(result) - exact)}
    if not isinstance(unit, TensorCoreModel):
        return state                      # a model without a block FMA to show
    F, block = unit.fraction_bits, unit.block
    first = products[:block]
    nonzero = [p for p in first if p]
    E = max(math.floor(math.log2(abs(p))) for p in nonzero) if nonzero else 0
    step = Fraction(2) ** (E - F)
    # Truncation toward zero to a multiple of 2**(E - F), written out exactly.
    kept = [(abs(p) // step) * step * (1 if p >= 0 else -1) for p in first]
    state.update(block=block, fraction_bits=F, reference_exponent=E,
                 aligned=[float(k) for k in kept],
                 dropped=[float(p - k) for p, k in zip(first, kept)],
                 block_sum=float(sum(kept, Fraction(0))))
    return state


def summation_state(x: ArrayLike, fmt: FormatLike, n: int | None = None, *,
                    points: int = 24) -> dict[str, Any]:
    """Recursive, pairwise and Kahan sums of the first ``n`` values in ``fmt``,
    their errors against the exact sum, and the bounds ``n u`` and ``sqrt(n) u``.

    ``curve`` holds the same errors and bounds at ``points`` lengths up to ``len(x)``.

    Examples
    --------
    >>> s = summation_state([0.1] * 100, "fp16", 100)
    >>> s["orders"]["sequential"]["sum"] != s["orders"]["kahan"]["sum"]
    True
    """
    fmt = _format(fmt)
    xv = np.asarray(quiet(_round, np.asarray(x, dtype=np.float64).ravel(), fmt),
                    dtype=np.float64)
    n = xv.size if n is None else int(n)
    if not 1 <= n <= xv.size:
        raise ValueError(f"n must be in [1, {xv.size}], got {n}")
    part = xv[:n]
    exact = sum((Fraction(float(v)) for v in part), Fraction(0))
    absolute = sum((abs(Fraction(float(v))) for v in part), Fraction(0))
    orders = {}
    for order in ("sequential", "pairwise", "kahan"):
        s = float(quiet(_sum, part, fmt, order=order))
        rel = None if exact == 0 or not math.isfinite(s) else \
            float(abs(Fraction(s) - exact) / abs(exact))
        orders[order] = {"sum": _f(s), "rel_error": rel}
    u = fmt.unit_roundoff
    # The bounds are on |error| / sum |x_i|; dividing by |sum x_i| scales them.
    scale = float(absolute / abs(exact)) if exact else float("inf")
    return {"format": format_name(fmt), "n": n, "size": int(xv.size), "exact": float(exact),
            "u": u, "bound_n": (n - 1) * u * scale, "bound_sqrt": math.sqrt(n) * u * scale,
            "orders": orders, "curve": _curve(xv, fmt, points)}


def _curve(xv: np.ndarray, fmt: Any, points: int) -> dict[str, list]:
    """Relative errors of the three orders for ``points`` lengths n up to ``xv.size``
    (log-spaced), with both bounds at each n, against exact `Fraction` prefix sums."""
    ns = sorted({round(v) for v in np.geomspace(1, xv.size, points)})
    prefix, total, absolute = {}, Fraction(0), Fraction(0)
    wanted = set(ns)
    for i, v in enumerate(xv, start=1):
        total += Fraction(float(v))
        absolute += abs(Fraction(float(v)))
        if i in wanted:
            prefix[i] = (total, absolute)
    u = fmt.unit_roundoff
    out: dict[str, list] = {"n": ns, "bound_n": [], "bound_sqrt": []}
    for order in ("sequential", "pairwise", "kahan"):
        out[order] = []
    for n in ns:
        exact, absolute = prefix[n]
        scale = float(absolute / abs(exact)) if exact else float("inf")
        out["bound_n"].append(max(n - 1, 0) * u * scale)
        out["bound_sqrt"].append(math.sqrt(n) * u * scale)
        for order in ("sequential", "pairwise", "kahan"):
            got = float(quiet(_sum, xv[:n], fmt, order=order))
            ok = exact != 0 and math.isfinite(got)
            out[order].append(float(abs(Fraction(got) - exact) / abs(exact)) if ok else None)
    return out
