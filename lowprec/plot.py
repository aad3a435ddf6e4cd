"""Pictures of formats for students and notebooks (``import lowprec.plot``; matplotlib).

`values` draws every value of a small format on a number line, `spacing` the relative
spacing ``ulp(x) / x`` of formats over their whole range, `rounding` the staircase of
each rounding mode near a few values, `error_vs_k` the demo's experiment (a thin
wrapper over `lowprec.teaching.experiments.plot_error_vs_k`), and `compare` the table of
`lowprec.torch.compare` (each GPU's error per module). Matplotlib is the
``plot`` extra, imported only inside the functions. Every value drawn comes from the
library (`decode` of bit patterns, `round`); this module must never compute a value of
a format with float64 tricks of its own, and never round on its own.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .bits import decode, encode
from .formats import Format, FormatLike
from .formats import format as _format
from .rounding import round as _round
from .status import quiet
from .teaching.experiments import error_vs_k as _experiment
from .teaching.experiments import plot_error_vs_k
from .teaching.explanation import MODE_NAMES, format_name

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["values", "spacing", "rounding", "error_vs_k", "compare", "MAX_VALUES_BITS"]

#: `values` draws formats of at most this many bits (2**8 = 256 patterns).
MAX_VALUES_BITS = 8


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError('lowprec.plot needs matplotlib: pip install "lowprec[plot]" '
                          "(or pip install matplotlib)") from exc
    return plt


def _axes(ax, figsize):
    plt = _pyplot()
    if ax is not None:
        from matplotlib.axes import Axes
        if not isinstance(ax, Axes):
            raise TypeError(f"ax must be a matplotlib Axes (plt.subplots()[1]), got "
                            f"{type(ax).__name__} {ax!r}")
        return ax
    return plt.subplots(figsize=figsize)[1]


def _decoded(patterns, fmt):
    # decode of an inf or NaN pattern of FP64-like tables may warn; those are dropped.
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(decode(np.asarray(patterns, dtype=np.uint64), fmt), dtype=np.float64)


def _decoded_or_nan(patterns, fmt):
    """`_decoded`, NaN for patterns past the last one (the pattern after the last
    binade's first value, in a format without fraction bits such as E8M0)."""
    patterns = np.asarray(patterns, dtype=np.uint64)
    inside = patterns <= np.uint64(2 ** fmt.bits - 1)
    out = np.full(patterns.shape, np.nan)
    out[inside] = _decoded(patterns[inside], fmt)
    return out


def _all_values(fmt: Format) -> np.ndarray:
    """Every finite value of ``fmt``, sorted, -0 and +0 as one zero: decode of every
    bit pattern."""
    v = _decoded(np.arange(2 ** fmt.bits), fmt)
    # -0 + 0 is +0 (and x + 0 is x for every other x): one zero, drawn as 0.
    return np.unique(v[np.isfinite(v)]) + 0.0


def values(fmt: FormatLike, *, ax: Axes | None = None) -> Axes:
    """Every finite value of a format of at most 8 bits on a number line.

    The axis is symmetric-logarithmic in base 2: each binade ``[2**e, 2**(e+1))`` gets
    the same width (shaded in turn and labelled by ``e``), and the range below the
    smallest normal, where the subnormals are evenly spaced, is linear. Normal values
    and the zero and subnormals are drawn as two sets of ticks (``gid="values"``).

    Parameters
    ----------
    fmt : Format or str
        A format of at most `MAX_VALUES_BITS` bits (FP8, FP6, FP4, E8M0, ...); wider
        formats raise `ValueError` (use `spacing`).
    ax : matplotlib Axes, optional
        Where to draw; a new figure when omitted.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import lowprec.plot
    >>> ax = lowprec.plot.values("e2m1")
    >>> sorted(float(x) for line in ax.lines if line.get_gid() == "values"
    ...        for x in line.get_xdata())
    [-6.0, -4.0, -3.0, -2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    >>> lowprec.plot.values("fp16")
    Traceback (most recent call last):
    ...
    ValueError: plot.values draws formats of at most 8 bits (256 values); FP16 has 16: ...
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    fmt = _format(fmt)
    if fmt.bits > MAX_VALUES_BITS:
        raise ValueError(f"plot.values draws formats of at most {MAX_VALUES_BITS} bits "
                         f"({2 ** MAX_VALUES_BITS} values); {format_name(fmt)} has "
                         f"{fmt.bits}: draw its spacing with plot.spacing instead")
    v = _all_values(fmt)
    ax = _axes(ax, (12, 2.6))
    tiny = fmt.smallest_normal
    normal = np.abs(v) >= tiny
    # Binades of the normal range, e from emin to the top value's, on both sides.
    top = int(np.frexp(v.max())[1]) - 1 if v.max() > 0 else fmt.emin
    es = np.arange(fmt.emin, top + 1)
    for i, e in enumerate(es):
        lo, hi = 2.0 ** float(e), 2.0 ** float(e + 1)
        shade = "#e8eef7" if i % 2 else "#f6f6f6"
        for s in ((1, -1) if fmt.signed else (1,)):
            ax.axvspan(s * lo, s * hi, color=shade, zorder=0, lw=0)
    if fmt.zero and fmt.subnormals and fmt.mantissa_bits:
        ax.axvspan(-tiny if fmt.signed else 0.0, tiny, color="#fbeede", zorder=0, lw=0)
    ax.plot(v[normal], np.zeros(int(normal.sum())), linestyle="none", marker="|",
            markersize=22, markeredgewidth=1.4, color="#1f4e9b", gid="values",
            label=f"normal ({int(normal.sum())})")
    if (~normal).any():
        ax.plot(v[~normal], np.zeros(int((~normal).sum())), linestyle="none", marker="|",
                markersize=22, markeredgewidth=1.4, color="#c2410c", gid="values",
                label=f"zero and subnormal ({int((~normal).sum())})")
    # linscale 0.5 in base 2: each half of the linear range is one binade wide (matplotlib
    # scales it by 1 / (1 - 1/base)), so the subnormals get the width of one binade.
    ax.set_xscale("symlog", base=2, linthresh=tiny, linscale=0.5)
    edge = 2.0 ** float(top + 1)
    left = -edge if fmt.signed else (0.0 if fmt.zero else tiny)
    ax.set_xlim(left - (edge * 0.05 if fmt.signed else tiny * 0.3), edge * 1.05)
    ax.set_ylim(-1, 1)
    ax.set_yticks([])
    # Labels at every step-th binade (at most about 8 a side), and at the smallest
    # normal where there is room next to 0 (its two sides are two binades wide).
    step = max(1, -(-len(es) // 8))
    shown = [int(e) for e in es if (e == fmt.emin and step <= 2)
             or (e % step == 0 and e - fmt.emin >= step / 2)]
    ticks = {2.0 ** e for e in shown} | ({0.0} if fmt.zero else set())
    ticks |= {-t for t in ticks if fmt.signed}
    ordered = sorted(ticks)
    ax.set_xticks(ordered)
    ax.set_xticklabels([_power_label(t) for t in ordered], fontsize=8)
    ax.xaxis.set_minor_locator(_fixed([2.0 ** float(e) * s for e in es for s in (1, -1)]))
    ax.set_title(f"{format_name(fmt)}: its {v.size} finite values (max {fmt.max!r}); "
                 "one band per binade, linear below the smallest normal "
                 f"$2^{{{fmt.emin}}}$", fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), fontsize=8, ncol=2,
              frameon=False)
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    return ax


def _power_label(t):
    if t == 0:
        return "0"
    return f"${'-' if t < 0 else ''}2^{{{int(np.log2(abs(t)))}}}$"


def _fixed(locs):
    from matplotlib.ticker import FixedLocator
    return FixedLocator(locs)


def _binade_starts(fmt: Format) -> tuple[np.ndarray, np.ndarray, float]:
    """The first positive value of every binade of ``fmt`` (subnormal binades included),
    the gap between values in that binade, and the largest value; all decoded from
    bit patterns."""
    m = fmt.mantissa_bits
    codes = np.arange(0 if not fmt.zero else 1, 2 ** fmt.exponent_bits, dtype=np.uint64)
    start = codes << np.uint64(m)
    lo = _decoded(start, fmt)
    # The gap between two values of one binade: a difference of float64 values within a
    # factor 2 of each other, exact (Sterbenz). Where the next pattern is not a value
    # (the top binade when m <= 1), the gap is twice the one just below the binade's
    # first value (a power of two: doubling it is exact).
    ulp = _decoded_or_nan(start + np.uint64(1), fmt) - lo
    odd = np.isfinite(lo) & ~np.isfinite(ulp)
    if odd.any():
        ulp[odd] = 2 * (lo[odd] - _decoded(start[odd] - np.uint64(1), fmt))
    keep = np.isfinite(lo) & (lo > 0)
    # The largest value: the last pattern of the top binade (one before it in an 'fn'
    # format, whose last pattern is NaN).
    last = start[keep][-1] + np.uint64(2 ** m - 1)
    ends = _decoded(np.array([last, last - np.uint64(1)]), fmt)
    top = float(ends[np.isfinite(ends)][0])
    lo, ulp = lo[keep], ulp[keep]
    if fmt.zero and fmt.subnormals and m:
        # Subnormal binades start at the patterns 1, 2, 4, ..., 2**(m-1); one gap.
        sub = _decoded(np.array([0, *(2 ** j for j in range(m))]), fmt)
        lo = np.concatenate([sub[1:], lo])
        ulp = np.concatenate([np.full(m, sub[1] - sub[0]), ulp])
    return lo, ulp, top


def _power_ticks(lo_exp: float, hi_exp: float, count: int = 9) -> list[float]:
    """Powers of two from 2**lo_exp to 2**hi_exp, about ``count`` of them, at round
    exponents (multiples of 1, 2, 4, ... 256)."""
    span = max(hi_exp - lo_exp, 1.0)
    step = next(s for s in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if span / s <= count)
    first = int(np.ceil(lo_exp / step)) * step
    last = min(int(np.floor(hi_exp)), 1023)          # 2.0**1024 overflows
    return [2.0 ** e for e in range(first, last + 1, step)]


def spacing(fmts: FormatLike | Sequence[FormatLike] = ("fp32", "fp16", "bf16", "e4m3",
                                                       "e5m2"),
            *, ax: Axes | None = None) -> Axes:
    """The relative spacing ``ulp(x) / x`` of each format over its whole positive range.

    One step line per format on log-log axes, through ``ulp(x) / x`` at the first value
    of every binade (a power of two), held across the binade (``gid="spacing"``): flat at
    ``eps = 2**-m`` over the normal range, and stepping up by 2 per binade below the
    smallest normal (marked with a dot), where the subnormals keep one gap and lose a
    bit of precision per binade, up to 1 at the smallest subnormal. Inside each binade
    ``ulp(x) / x`` falls from the step line towards the dotted line, the unit roundoff
    ``u = 2**-p``, which it approaches just below the next power of two. The values are
    decoded from bit patterns (the first value of each binade, and the gap to the next
    pattern).

    Parameters
    ----------
    fmts : format or sequence of formats
        Any formats (FP64 included: one step per binade).
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import lowprec.plot
    >>> ax = lowprec.plot.spacing(["fp16", "bf16"])
    >>> [line.get_label() for line in ax.lines if line.get_gid() == "spacing"]
    ['FP16, eps = $2^{-10}$', 'BF16, eps = $2^{-7}$']
    >>> line = ax.lines[0]
    >>> line.get_xdata()[[0, 10, -1]].tolist()     # 2**-24, 2**-14 and the largest value
    [5.960464477539063e-08, 6.103515625e-05, 65504.0]
    >>> line.get_ydata()[[0, 10, -1]].tolist()     # 1, then eps = 2**-10
    [1.0, 0.0009765625, 0.0009765625]
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    if isinstance(fmts, (Format, str)) or not isinstance(fmts, Sequence):
        fmts = [fmts]
    formats = [_format(f) for f in fmts]
    if not formats:
        raise ValueError("spacing needs at least one format, got an empty sequence")
    ax = _axes(ax, (10, 5.5))
    data = []
    for fmt in formats:
        x, ulp, top = _binade_starts(fmt)
        y = ulp / x
        # The last step runs on to the largest value (the top binade keeps its gap).
        data.append((fmt, np.append(x, top), np.append(y, y[-1]), top))
    xmin = min(float(xs[0]) for _, xs, _, _ in data)
    xmax = max(top for *_, top in data)
    ymin = min(fmt.unit_roundoff for fmt, *_ in data)
    lo_e, hi_e = float(np.log2(xmin)), float(np.log2(xmax))
    pad = (hi_e - lo_e) * 0.02
    with np.errstate(over="ignore", under="ignore"):
        left, right = xmin / 2.0 ** pad, xmax * 2.0 ** pad
    # Limits first, inside float64's range, so that no autoscale runs: FP64 reaches
    # float64's ends, and matplotlib's margins past them overflow.
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlim(left if left > 0 else xmin, right if np.isfinite(right) else xmax)
    ax.set_ylim(ymin / 2, 2.0)
    for fmt, xs, ys, top in data:
        (line,) = ax.plot(xs, ys, drawstyle="steps-post", lw=1.6, gid="spacing",
                          label=f"{format_name(fmt)}, eps = $2^{{-{fmt.mantissa_bits}}}$")
        ax.plot([fmt.smallest_normal, top], [fmt.unit_roundoff] * 2, color=line.get_color(),
                lw=0.9, ls=":", gid="unit roundoff")
        if fmt.zero and fmt.subnormals and fmt.mantissa_bits:
            ax.plot([fmt.smallest_normal], [fmt.eps], marker="o", ms=4, color=line.get_color())
    ax.set_xticks(_power_ticks(lo_e, hi_e))
    ax.set_yticks(_power_ticks(np.log2(ymin), 0.0, 12))
    ax.xaxis.set_major_formatter(_power_formatter())
    ax.yaxis.set_major_formatter(_power_formatter())
    ax.set_xlabel("x (log scale)")
    ax.set_ylabel("ulp(x) / x (log scale)")
    ax.set_title("Relative spacing ulp(x) / x, at each power of two (step line); dotted: "
                 "unit roundoff $u = 2^{-p}$,\nwhich ulp(x) / x nears at the top of each binade; "
                 "dot: smallest normal (left of it, the subnormals)", fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return ax


def _power_formatter():
    from matplotlib.ticker import FuncFormatter
    return FuncFormatter(lambda t, _: _power_label(t))


def _near(fmt: Format, around: float, count: int) -> np.ndarray:
    """``count`` values of ``fmt`` either side of ``around`` rounded to it: adjacent
    patterns, across zero where the run reaches it."""
    centre = float(quiet(_round, around, fmt))
    if not np.isfinite(centre):
        raise ValueError(f"around={around!r} is not near a finite value of "
                         f"{format_name(fmt)} (it rounds to {centre!r})")
    sign = -1.0 if centre < 0 else 1.0
    mag = int(encode(abs(centre), fmt))
    steps = np.arange(mag - count, mag + count + 1)
    steps = steps[np.abs(steps) < 2 ** (fmt.bits - int(fmt.signed))]
    vals = _decoded(np.abs(steps), fmt) * np.where(steps < 0, -sign, sign)
    vals = np.unique(vals[np.isfinite(vals)])
    return vals if fmt.signed else vals[vals >= 0]


def rounding(fmt: FormatLike, modes: Sequence[str] = ("rne", "rz", "ru", "rd"), *,
             around: float | None = None, ax: Axes | None = None) -> Axes:
    """The staircase ``x -> lp.round(x, fmt, mode)`` of each mode near a few values.

    Inputs are 2001 evenly spaced float64 values spanning the 3 values of ``fmt``
    either side of ``around`` (default 1.0, where the spacing doubles); each mode's
    outputs are ``lp.round`` of them, drawn as a step line (``gid="rounding"``).
    The representable values are the dots on the dashed diagonal ``y = x``; a mode
    maps every input between two dots to one of them. Lines of later modes are drawn
    thinner on top, so where two modes agree both stay visible. ``"sr"`` is drawn as
    points (seed 0): each input goes up or down at random.

    Parameters
    ----------
    fmt : Format or str
    modes : sequence of str
        Rounding modes (`lowprec.MODES`).
    around : float, optional
        Where to look; 0.0 shows the modes' differences across zero.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import lowprec.plot
    >>> ax = lowprec.plot.rounding("e4m3", ("rne", "rz"))
    >>> [line.get_label() for line in ax.lines if line.get_gid() == "rounding"]
    ['rne (round to nearest, ties to even)', 'rz (round toward zero)']
    >>> sorted(set(ax.lines[0].get_ydata().tolist()))
    [0.8125, 0.875, 0.9375, 1.0, 1.125, 1.25, 1.375]
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    fmt = _format(fmt)
    if isinstance(modes, str):
        modes = (modes,)
    if not isinstance(modes, Sequence) or not all(isinstance(m, str) for m in modes):
        raise TypeError(f"modes must be a mode name or a sequence of them (lowprec.MODES), "
                        f"got {type(modes).__name__} {modes!r}")
    if not modes:
        raise ValueError("modes must name at least one rounding mode (lowprec.MODES)")
    if around is not None and (not isinstance(around, (numbers.Real, np.integer,
                                                       np.floating))
                               or isinstance(around, (bool, np.bool_))):
        raise TypeError(f"around must be a real number, got {type(around).__name__} "
                        f"{around!r}")
    ax = _axes(ax, (7, 6))
    vals = _near(fmt, 1.0 if around is None else float(around), 3)
    x = np.linspace(vals[0], vals[-1], 2001)
    widths = np.linspace(5.0, 1.2, max(len(modes), 1))
    for mode, lw in zip(modes, widths):
        y = np.asarray(quiet(_round, x, fmt, mode, rng=0), dtype=np.float64)
        label = f"{mode} ({MODE_NAMES.get(mode, mode)})"
        if mode == "sr":
            ax.plot(x, y, linestyle="none", marker=".", ms=2, gid="rounding", label=label)
        else:
            ax.plot(x, y, drawstyle="steps-mid", lw=lw, alpha=0.75, gid="rounding",
                    label=label)
    ax.plot(vals, vals, linestyle="--", color="0.5", lw=0.8, marker="o", ms=5,
            markerfacecolor="black", markeredgecolor="black", gid="representable",
            label=f"values of {format_name(fmt)}")
    ax.set_xticks(vals)
    ax.set_yticks(vals)
    ax.set_xticklabels([repr(float(v)) for v in vals], rotation=45, fontsize=8)
    ax.set_yticklabels([repr(float(v)) for v in vals], fontsize=8)
    ax.grid(True, alpha=0.3)
    ax.set_xlabel("x (input, float64)")
    ax.set_ylabel(f"lp.round(x, {format_name(fmt)!r}, mode)")
    ax.set_title(f"Rounding to {format_name(fmt)} near {float(vals[len(vals) // 2])!r}",
                 fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    return ax


def error_vs_k(result: dict[str, Any] | None = None, which: str = "dot",
               **experiment: Any) -> list[Axes]:
    """The demo's error-against-K figure: `lowprec.teaching.experiments.plot_error_vs_k`
    of ``result`` (or of ``error_vs_k(**experiment)`` when no result is given).

    That function makes its own figure, one panel per input format, so this returns
    the list of those Axes (``axes[0].figure`` is the figure).

    Parameters
    ----------
    result : dict, optional
        What `lowprec.teaching.error_vs_k` returned.
    which : {"dot", "matmul"}
    **experiment
        Arguments of `lowprec.teaching.error_vs_k` (``ks``, ``formats``, ``models``,
        ``trials``, ``size``, ``seed``), when ``result`` is None.

    Returns
    -------
    list of matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import lowprec.plot
    >>> axes = lowprec.plot.error_vs_k(ks=(16, 64), formats=("bf16",), models=("fp32",),
    ...                                trials=2, size=2)
    >>> [ax.get_title() for ax in axes]
    ['BF16 inputs']
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    _pyplot()
    if result is None:
        result = _experiment(**experiment)
    elif experiment:
        raise TypeError("give either result or the experiment's arguments, not both "
                        f"(got {sorted(experiment)})")
    elif not isinstance(result, dict):
        raise TypeError(f"result must be the dict lowprec.teaching.error_vs_k returns, got "
                        f"{type(result).__name__}")
    if which not in ("dot", "matmul"):
        raise ValueError(f"which must be 'dot' or 'matmul', got {which!r}")
    missing = [k for k in ("ks", "formats", "models", which) if k not in result]
    if missing:
        raise ValueError(f"result lacks {', '.join(map(repr, missing))}: give what "
                         "lowprec.teaching.error_vs_k returns (or its arguments instead)")
    return list(plot_error_vs_k(result, which).axes)


def compare(table: Any, *, ax: Axes | None = None, figsize: tuple = (8, 4)) -> Axes:
    """`lowprec.torch.compare`'s table as a figure: each GPU's error per module.

    One line per GPU (``gid="err_<gpu>"``) of its normwise relative error against the
    reference, on a logarithmic axis, the modules in the table's order along x. A
    dashed vertical line (``gid="first"``) marks the first module where the GPUs
    disagree. Above each module where they disagree, a label gives the bits that
    disagreement reaches (``gid="bits"``). Nothing is computed here: every value drawn
    is a cell of the table.

    Parameters
    ----------
    table : pandas.DataFrame or list of dict
        What `lowprec.torch.compare` returned.
    ax : matplotlib Axes, optional
        Where to draw; a new figure when omitted.
    figsize : tuple
        The new figure's size.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import lowprec.plot
    >>> rows = [{"module": "0", "err_a100": 3e-3, "err_h100": 3e-3, "bits": 0,
    ...          "first": False},
    ...         {"module": "1", "err_a100": 4e-3, "err_h100": 5e-3, "bits": 2,
    ...          "first": True}]
    >>> ax = lowprec.plot.compare(rows)
    >>> [line.get_gid() for line in ax.lines]
    ['err_a100', 'err_h100', 'first']
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    if hasattr(table, "to_dict") and not isinstance(table, (list, dict)):
        rows = table.to_dict("records")          # a pandas DataFrame
    elif isinstance(table, list) and all(isinstance(r, dict) for r in table):
        rows = list(table)
    else:
        raise TypeError(f"plot.compare draws the table lowprec.torch.compare returns (a "
                        f"DataFrame or a list of dicts), got {type(table).__name__}")
    if not rows:
        raise ValueError("plot.compare needs a table with at least one row")
    gpus = [c.removeprefix("err_") for c in rows[0] if c.startswith("err_")]
    missing = [c for c in ("module", "bits", "first") if c not in rows[0]]
    if not gpus or missing:
        raise ValueError(f"plot.compare needs the columns of lowprec.torch.compare's table "
                         f"(module, err_<gpu>, bits, first); missing "
                         f"{missing or ['err_<gpu>']}")
    ax = _axes(ax, figsize)
    x = np.arange(len(rows))
    for gpu in gpus:
        errors = np.array([float(r[f"err_{gpu}"]) for r in rows])
        ax.plot(x, errors, marker="o", markersize=4, label=gpu, gid=f"err_{gpu}")
    ax.set_yscale("log")
    for i, r in enumerate(rows):
        if r["first"]:
            ax.axvline(i, color="0.4", linestyle="--", linewidth=1, gid="first")
        if r["bits"]:
            top = max(float(r[f"err_{g}"]) for g in gpus)
            ax.annotate(f"{int(r['bits'])} b", (i, top), textcoords="offset points",
                        xytext=(0, 6), ha="center", fontsize=7, gid="bits")
    ax.set_xticks(x)
    ax.set_xticklabels([str(r["module"]) for r in rows], rotation=45, ha="right",
                       fontsize=8)
    ax.set_xlabel("module (in the order it finished)")
    ax.set_ylabel("normwise relative error")
    ax.set_title("Error against the reference, per module; GPUs' disagreement in bits",
                 fontsize=10)
    ax.legend(fontsize=8)
    return ax
