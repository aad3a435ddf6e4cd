"""The demo's experiment: the error of dot and matrix products against their length K.

`error_vs_k` measures it under the `matmul` models against an exact reference,
`error_table` prints it and `plot_error_vs_k` draws it (matplotlib is imported only
then). Every value comes from the library's kernels or from exact arithmetic on
their results.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..formats import FormatLike
from ..formats import format as _format
from ..rounding import round as _round
from ..status import quiet
from ..tensorcore import MODELS, matmul
from .explanation import format_name

__all__ = ["error_vs_k", "error_table", "plot_error_vs_k", "DEMO_FORMATS", "DEMO_MODELS"]


DEMO_FORMATS = ("fp32", "fp16", "bf16")
DEMO_MODELS = ("exact", "fp32", "fp16", "v100", "a100", "h100")


def _reference(a, b):
    """Dot products of ``a`` (..., M, K) and ``b`` (..., K, N), each correctly
    rounded to float64: products of values of at most 26 bits are exact in
    float64, and math.fsum returns the correctly rounded sum of its inputs."""
    prods = a[..., :, :, None] * b[..., None, :, :]          # (..., M, K, N)
    prods = np.moveaxis(prods, -2, -1)                        # (..., M, N, K)
    flat = prods.reshape(-1, prods.shape[-1])
    return np.array([math.fsum(row) for row in flat]).reshape(prods.shape[:-1])


def error_vs_k(ks: tuple[int, ...] | list[int] = (16, 64, 256, 1024, 4096),
               formats: tuple[FormatLike, ...] | list[FormatLike] = DEMO_FORMATS,
               models: tuple[str, ...] | list[str] = DEMO_MODELS, *, trials: int = 32,
               size: int = 16, seed: int = 0,
               progress: Callable[[str, float | None], Any] | None = None) -> dict[str, Any]:
    """Relative error of dot products and matrix products against the exact result.

    For each K, input format and model: ``trials`` dot products of K-long vectors
    with entries uniform in [0, 1) (all terms positive, so errors accumulate) and
    one product of ``size`` x K and K x ``size`` matrices with standard normal
    entries. Inputs are rounded to the format first (RNE), so the error measured
    is the model's accumulation error alone; the reference is the exact result
    of those inputs (exact products summed by `math.fsum`). Dot products report
    the mean relative error; matrix products the normwise error
    ``||D - D_exact||_F / ||D_exact||_F``. Every model's output is a value of
    `matmul`'s default output format, FP32 (FP16 for ``"fp16"``), so the model
    ``"exact"``, the exact result rounded once to FP32, has not error 0 but FP32's
    rounding error: at most ``2**-24`` relative, a few times 1e-8 on average, the
    floor of every model with an FP32 output.

    Parameters
    ----------
    ks, formats, models : sequences
        Lengths, input formats and `matmul` models. A model that does not take an
        input format (Tensor Cores take no FP32) gives NaN.
    trials, size : int
        Number of dot products, and the matrices' outer dimension.
    seed : int
        Seed of the data (same seed, same tables).
    progress : callable, optional
        Called as ``progress(label, None)`` before each (K, format) step and as
        ``progress(label, seconds)`` after it.

    Returns
    -------
    dict
        ``{"ks": [...], "formats": [...], "models": [...], "dot": {(fmt, model):
        [error per K]}, "matmul": {...}}``.

    Examples
    --------
    >>> from lowprec.teaching import error_vs_k
    >>> r = error_vs_k(ks=(64,), formats=("fp16",), models=("exact", "fp16"), trials=4)
    >>> r["dot"][("FP16", "exact")][0] < 2**-24 < r["dot"][("FP16", "fp16")][0]
    True
    """
    rng = np.random.default_rng(seed)
    result: dict[str, Any] = {"ks": list(ks), "formats": [format_name(_format(f)) for f in formats],
              "models": list(models), "dot": {}, "matmul": {}}
    for k in ks:
        x = rng.random((trials, 1, k))
        y = rng.random((trials, k, 1))
        a = rng.standard_normal((size, k))
        b = rng.standard_normal((k, size))
        for spec in formats:
            fmt = _format(spec)
            label = f"K = {k}, {format_name(fmt)} inputs"
            if progress is not None:
                progress(label, None)
            start = time.perf_counter()
            xf, yf, af, bf = (quiet(_round, v, fmt) for v in (x, y, a, b))
            dot_ref, mat_ref = _reference(xf, yf), _reference(af, bf)
            for model in models:
                key = (format_name(fmt), model)
                try:
                    MODELS[model].for_format(fmt)
                except ValueError:
                    result["dot"].setdefault(key, []).append(math.nan)
                    result["matmul"].setdefault(key, []).append(math.nan)
                    continue
                d = quiet(matmul, xf, yf, model=model, in_fmt=fmt)
                err = np.abs(d - dot_ref) / np.abs(dot_ref)
                result["dot"].setdefault(key, []).append(float(np.mean(err)))
                dm = quiet(matmul, af, bf, model=model, in_fmt=fmt)
                result["matmul"].setdefault(key, []).append(
                    float(np.linalg.norm(dm - mat_ref) / np.linalg.norm(mat_ref)))
            if progress is not None:
                progress(label, time.perf_counter() - start)
    return result


def error_table(result: dict[str, Any], which: str = "dot") -> str:
    """`error_vs_k` results as a text table: one row per input format and model.

    Examples
    --------
    >>> from lowprec.teaching import error_table
    >>> r = {"ks": [16, 64], "formats": ["FP16"], "models": ["fp16", "v100"],
    ...      "dot": {("FP16", "fp16"): [1e-4, 3e-4], ("FP16", "v100"): [float("nan")] * 2}}
    >>> print(error_table(r))
    inputs | model |     K=16 |     K=64
    -------+-------+----------+---------
    FP16   | fp16  | 1.00e-04 | 3.00e-04
    FP16   | v100  |        - |        -
    """
    data = result[which]
    header = ["inputs", "model", *(f"K={k}" for k in result["ks"])]
    rows = []
    for fmt in result["formats"]:
        for model in result["models"]:
            errs = data[(fmt, model)]
            rows.append([fmt, model, *("-" if math.isnan(e) else f"{e:.2e}" for e in errs)])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells):
        return " | ".join(c.ljust(w) if i < 2 else c.rjust(w)
                          for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(header), "-+-".join("-" * w for w in widths), *map(line, rows)])


def plot_error_vs_k(result: dict[str, Any], which: str = "dot") -> Any:
    """Plot `error_vs_k` results: one log-log panel per input format, a line per model.

    Imports matplotlib (the ``plot`` extra) when called. Returns the Figure.

    Examples
    --------
    >>> from lowprec.teaching import error_vs_k, plot_error_vs_k
    >>> r = error_vs_k(ks=(16, 64), formats=("fp16", "bf16"), models=("fp32", "a100"),
    ...                trials=2, size=2)
    >>> fig = plot_error_vs_k(r)
    >>> [ax.get_title() for ax in fig.axes], fig.axes[0].get_xlabel()
    (['FP16 inputs', 'BF16 inputs'], 'K (length of each dot product)')
    >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    formats = result["formats"]
    fig, axes = plt.subplots(1, len(formats), figsize=(4 * len(formats), 4),
                             sharey=True, squeeze=False)
    colours = dict(zip(result["models"], plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    markers = dict(zip(result["models"], "os^vDx*P"))
    # The "exact" model is one rounding of the exact result to its FP32 output.
    labels = {"exact": "exact, rounded once to FP32"}
    for ax, fmt in zip(axes[0], formats):
        for model in result["models"]:
            errs = np.array(result[which][(fmt, model)])
            if np.all(np.isnan(errs)):
                continue
            # An exact result has error 0, which a log axis cannot show: floor it.
            ax.loglog(result["ks"], np.maximum(errs, 1e-17), color=colours[model],
                      marker=markers[model], label=labels.get(model, model))
        ax.set_title(f"{fmt} inputs")
        ax.set_xlabel("K (length of each dot product)")
        ax.grid(True, which="major", alpha=0.3)
        # One labelled tick per K measured (the log axis' minor labels overlap).
        ax.set_xticks(result["ks"])
        ax.set_xticklabels([str(k) for k in result["ks"]])
        ax.xaxis.set_minor_formatter(NullFormatter())
    # One legend for every panel, right of the last one: a legend inside a panel
    # covers a curve whichever corner it takes.
    handles: dict[str, Any] = {}
    for ax in axes[0]:
        for line in ax.lines:
            handles.setdefault(line.get_label(), line)
    axes[0][-1].legend(list(handles.values()), list(handles), fontsize=8, loc="upper left",
                       bbox_to_anchor=(1.02, 1.0), title="model")
    axes[0][0].set_ylabel("mean relative error" if which == "dot"
                          else "normwise relative error")
    fig.suptitle(("Dot products of uniform [0, 1) vectors: error against K" if which == "dot"
                  else "Matrix products of standard normal matrices: error against K")
                 + "\n(reference: the exact result; \"exact\" is it rounded once to "
                 "FP32, the floor of an FP32 output)", fontsize=10)
    fig.tight_layout()
    return fig
