"""lowprec.plot against oracles it did not produce: ml_dtypes' own bit patterns (every
value of an FP8 / FP4 dtype), NumPy's ``np.spacing`` of float16, and rounding by
search in ml_dtypes' sorted values. The figures are read back from the Axes' artists."""

from __future__ import annotations

import pathlib
import runpy
import subprocess
import sys
import warnings

import numpy as np
import pytest

import lowprec as lp
from peers import ml_dtypes, requires_ml_dtypes

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

import lowprec.plot as lplot  # noqa: E402

#: format name -> (ml_dtypes type, bits of one pattern)
DTYPES = {"e4m3": (ml_dtypes.float8_e4m3fn, 8), "e5m2": (ml_dtypes.float8_e5m2, 8),
          "e2m1": (ml_dtypes.float4_e2m1fn, 4), "e4m3fnuz": (ml_dtypes.float8_e4m3fnuz, 8),
          "e3m2": (ml_dtypes.float6_e3m2fn, 6)}


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def every_value(spec):
    """The finite values of the ml_dtypes type, sorted, from all its bit patterns."""
    dtype, bits = DTYPES[spec]
    with np.errstate(invalid="ignore"):
        v = np.arange(2**bits, dtype=np.uint8).view(dtype).astype(np.float64)
    return np.unique(v[np.isfinite(v)])


def artists(ax, gid):
    return [line for line in ax.lines if line.get_gid() == gid]


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("spec", sorted(DTYPES))
def test_values_draws_exactly_the_finite_values_of_ml_dtypes(spec):
    ax = lplot.values(spec)
    assert isinstance(ax, Axes)
    drawn = np.sort(np.concatenate([line.get_xdata() for line in artists(ax, "values")]))
    np.testing.assert_array_equal(drawn, every_value(spec))
    # Normal values and the zero and subnormals apart, split at finfo's smallest normal.
    tiny = float(ml_dtypes.finfo(DTYPES[spec][0]).smallest_normal)
    normal, *rest = artists(ax, "values")
    assert np.all(np.abs(normal.get_xdata()) >= tiny)
    assert all(np.all(np.abs(line.get_xdata()) < tiny) for line in rest)


def test_values_refuses_formats_wider_than_8_bits():
    for spec in ("fp16", "bf16", "fp32"):
        with pytest.raises(ValueError, match="at most 8 bits"):
            lplot.values(spec)


def test_values_draws_into_a_given_axes_and_takes_unsigned_formats():
    _, (a, b) = plt.subplots(2)
    assert lplot.values("e8m0", ax=a) is a
    drawn = np.concatenate([line.get_xdata() for line in artists(a, "values")])
    assert drawn.size == 255 and drawn.min() == 2.0**-127 and drawn.max() == 2.0**127
    lplot.values(lp.Format(3, 2), ax=b)
    assert len(b.lines) >= 1


def _fp16_spacing(x):
    """ulp(x) / x by NumPy: the gap from float16 x to the next float16 up (at the
    largest value, whose next is inf, the gap to the one below)."""
    h = x.astype(np.float16)
    gap = np.spacing(h).astype(np.float64)
    top = h == np.finfo(np.float16).max
    gap[top] = (h[top] - np.nextafter(h[top], np.float16(0))).astype(np.float64)
    return gap / x


def test_spacing_curve_is_numpys_spacing_of_float16():
    ax = lplot.spacing(["fp16", "bf16"])
    fp16 = artists(ax, "spacing")[0]
    assert fp16.get_drawstyle() == "steps-post"
    x, y = np.asarray(fp16.get_xdata()), np.asarray(fp16.get_ydata())
    # The vertices: every power of two from the smallest subnormal to 2**15, then max.
    np.testing.assert_array_equal(x[:-1], 2.0 ** np.arange(-24, 16))
    assert x[-1] == float(np.finfo(np.float16).max)
    np.testing.assert_array_equal(y[:-1], _fp16_spacing(x[:-1]))
    assert y[-1] == y[-2]                   # the last step held on to the largest value
    # Between vertices the step holds ulp(x) / x at the binade's first value, its largest;
    # every float16 x of the binade has ulp(x) / x in (u, that], u = 2**-11.
    rng = np.random.default_rng(0)
    patterns = rng.integers(1, 0x7BFF, 2000, dtype=np.uint16)
    samples = np.unique(patterns.view(np.float16).astype(np.float64))
    step = y[np.searchsorted(x, samples, side="right") - 1]
    ratio = _fp16_spacing(samples)
    assert np.all(ratio <= step)
    normal = samples >= 2.0**-14
    assert np.all(ratio[normal] > 2.0**-11)
    u = artists(ax, "unit roundoff")
    assert [line.get_ydata()[0] for line in u] == [2.0**-11, 2.0**-8]


def test_spacing_covers_fp64_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ax = lplot.spacing(["fp64", "e4m3"])
        ax.figure.canvas.draw()
    fp64 = artists(ax, "spacing")[0]
    x = fp64.get_xdata()
    assert x[0] == 5e-324 and x[-1] == np.finfo(np.float64).max
    assert fp64.get_ydata()[0] == 1.0 and fp64.get_ydata()[-1] == 2.0**-52
    e4m3 = artists(ax, "spacing")[1]
    assert e4m3.get_xdata()[-1] == 448.0     # the 'fn' top binade ends before its NaN


def _by_search(x, values, mode):
    """Rounding by search in the sorted values (x within their range)."""
    below = values[np.searchsorted(values, x, side="right") - 1]
    above = values[np.searchsorted(values, x, side="left")]
    if mode == "rd":
        return below
    if mode == "ru":
        return above
    return np.where(x >= 0, below, above)           # rz


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("around", [None, 0.0, -3.0, 200.0])
def test_rounding_staircases_match_ml_dtypes(around):
    modes = ("rne", "rz", "ru", "rd")
    ax = lplot.rounding("e4m3", modes, around=around)
    lines = artists(ax, "rounding")
    assert [line.get_label().split()[0] for line in lines] == list(modes)
    values = every_value("e4m3")
    for mode, line in zip(modes, lines):
        x, y = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
        if mode == "rne":       # ml_dtypes' cast of float64 rounds to nearest even
            expected = x.astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
        else:
            expected = _by_search(x, values, mode)
        np.testing.assert_array_equal(y, expected)
    # The dots: 7 adjacent values of the format around the one ``around`` rounds to.
    (dots,) = artists(ax, "representable")
    shown = np.asarray(dots.get_xdata())
    centre = 1.0 if around is None else around
    i = int(np.searchsorted(values, float(np.array(centre).astype(ml_dtypes.float8_e4m3fn))))
    np.testing.assert_array_equal(shown, values[max(i - 3, 0):i + 4])


def test_rounding_draws_stochastic_rounding_as_points():
    ax = lplot.rounding("fp16", ("sr",))
    (line,) = artists(ax, "rounding")
    assert line.get_linestyle() == "None"
    x, y = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
    down = np.where(x.astype(np.float16).astype(np.float64) <= x,
                    x.astype(np.float16), np.nextafter(x.astype(np.float16), np.float16(0)))
    down = down.astype(np.float64)
    up = np.nextafter(down.astype(np.float16), np.float16(np.inf)).astype(np.float64)
    assert np.all((y == down) | (y == up) | (y == x))


def test_error_vs_k_wraps_the_experiments_plot():
    from lowprec.teaching import experiments
    assert lplot.plot_error_vs_k is experiments.plot_error_vs_k
    result = {"ks": [16, 64], "formats": ["FP16"], "models": ["fp16"],
              "dot": {("FP16", "fp16"): [1e-4, 3e-4]}}
    axes = lplot.error_vs_k(result)
    assert [ax.get_title() for ax in axes] == ["FP16 inputs"]
    assert all(isinstance(ax, Axes) for ax in axes)
    (line,) = axes[0].lines
    assert list(line.get_xdata()) == [16, 64] and list(line.get_ydata()) == [1e-4, 3e-4]
    with pytest.raises(TypeError, match="not both"):
        lplot.error_vs_k(result, ks=(16,))


def test_plot_is_not_imported_with_lowprec_and_needs_matplotlib():
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "import lowprec\n"
            "assert 'lowprec.plot' not in sys.modules\n"
            "import lowprec.plot\n"
            "try:\n"
            "    lowprec.plot.values('e4m3')\n"
            "except ImportError as exc:\n"
            "    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert 'pip install "lowprec[plot]"' in out


# -- bad input is refused up front --------------------------------------------------------

def test_spacing_draws_e8m0_every_power_of_two():
    # E8M0's values are 2**-127 ... 2**127: each binade holds one value, so the gap to the
    # next value is the value itself and ulp(x) / x is 1 everywhere.
    (line,) = artists(lplot.spacing(["e8m0"]), "spacing")
    powers = [2.0**e for e in range(-127, 128)]
    assert list(line.get_xdata()) == powers + [2.0**127]
    assert set(line.get_ydata().tolist()) == {1.0}


def test_plot_functions_refuse_bad_arguments_clearly():
    with pytest.raises(ValueError, match="at least one format"):
        lplot.spacing([])
    with pytest.raises(ValueError, match="result lacks 'ks', 'formats', 'models', 'dot'"):
        lplot.error_vs_k({})
    with pytest.raises(TypeError, match="result must be the dict"):
        lplot.error_vs_k([1, 2])
    with pytest.raises(ValueError, match="which must be 'dot' or 'matmul'"):
        lplot.error_vs_k({"ks": [16]}, which="dots")
    for call in (lambda: lplot.values("e4m3", ax=5), lambda: lplot.spacing(ax="a"),
                 lambda: lplot.rounding("fp16", ax=object())):
        with pytest.raises(TypeError, match="ax must be a matplotlib Axes"):
            call()
    with pytest.raises(TypeError, match="around must be a real number, got list"):
        lplot.rounding("fp16", around=[1, 2])
    with pytest.raises(TypeError, match="modes must be a mode name or a sequence"):
        lplot.rounding("fp16", [1])
    with pytest.raises(ValueError, match="at least one rounding mode"):
        lplot.rounding("fp16", ())


def test_rounding_takes_one_mode_name():
    (line,) = artists(lplot.rounding("fp16", "rne"), "rounding")
    assert line.get_label().startswith("rne (")
    x = np.asarray(line.get_xdata())
    assert np.array_equal(line.get_ydata(), x.astype(np.float16).astype(np.float64))


# -- compare ---------------------------------------------------------------------------

#: A table as lowprec.torch.compare returns it (its columns), written out here.
COMPARE_ROWS = [
    {"module": "0", "type": "Linear", "err_v100": 2e-3, "err_h100": 2e-3, "ulps": 0,
     "bits": 0, "groups": "v100=h100", "first": False},
    {"module": "1", "type": "ReLU", "err_v100": 3e-3, "err_h100": 4e-3, "ulps": 5,
     "bits": 3, "groups": "v100 | h100", "first": True},
    {"module": "(model)", "type": "Sequential", "err_v100": 0.0, "err_h100": 1e-2,
     "ulps": 1, "bits": 1, "groups": "v100 | h100", "first": False},
]


def test_compare_draws_each_gpus_errors_and_the_first_disagreement():
    ax = lplot.compare(COMPARE_ROWS)
    lines = {line.get_gid(): line for line in ax.lines}
    for gpu in ("v100", "h100"):
        np.testing.assert_array_equal(lines[f"err_{gpu}"].get_xdata(), [0, 1, 2])
        np.testing.assert_array_equal(lines[f"err_{gpu}"].get_ydata(),
                                      [r[f"err_{gpu}"] for r in COMPARE_ROWS])
    assert list(lines["first"].get_xdata()) == [1, 1]
    labels = [(t.get_text(), t.xy) for t in ax.texts if t.get_gid() == "bits"]
    assert labels == [("3 b", (1, 4e-3)), ("1 b", (2, 1e-2))]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "(model)"]
    assert ax.get_yscale() == "log"


def test_compare_refuses_what_is_not_its_table():
    with pytest.raises(TypeError, match="lowprec.torch.compare returns"):
        lplot.compare({"module": "0"})
    with pytest.raises(ValueError, match="at least one row"):
        lplot.compare([])
    with pytest.raises(ValueError, match="err_<gpu>"):
        lplot.compare([{"module": "0", "bits": 0, "first": False}])


# -- legends off the data ------------------------------------------------------------------

def drawn_points(line) -> np.ndarray:
    """A line's drawn points in display coordinates: its vertices, and, where segments
    join them, points every pixel along each segment (a step line's steps included)."""
    from matplotlib.cbook import STEP_LOOKUP_MAP
    x, y = (np.asarray(v, dtype=float) for v in (line.get_xdata(), line.get_ydata()))
    if line.get_drawstyle() != "default":
        x, y = STEP_LOOKUP_MAP[line.get_drawstyle()](x, y)
    xy = line.get_transform().transform(np.column_stack([x, y]))
    if line.get_linestyle() in ("None", "", " ", "none") or len(xy) < 2:
        return xy[np.all(np.isfinite(xy), axis=1)]
    return densified(xy)


def densified(xy: np.ndarray) -> np.ndarray:
    """The points of a polyline in display coordinates, one a pixel along each segment."""
    pieces = [xy[:1]]
    for a, b in zip(xy[:-1], xy[1:]):
        if np.all(np.isfinite(a)) and np.all(np.isfinite(b)):
            n = int(min(np.hypot(*(b - a)), 4000)) + 1
            pieces.append(a + np.linspace(0, 1, n + 1)[1:, None] * (b - a))
        else:
            pieces.append(b[None])
    xy = np.concatenate(pieces)
    return xy[np.all(np.isfinite(xy), axis=1)]


def legend_overlaps(fig) -> list[str]:
    """Each (axes title, line label) whose drawn points fall inside a legend's box.

    The figure is drawn (Agg); a legend's box and a line's drawn points are compared in
    display coordinates, as matplotlib places them. Points outside their axes are
    clipped, so they are not counted.
    """
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [leg.get_window_extent(renderer) for leg in
             [*fig.legends, *(ax.get_legend() for ax in fig.axes)] if leg is not None]
    hits = []
    for ax in fig.axes:
        frame = ax.get_window_extent(renderer)
        for line in ax.lines:
            xy = drawn_points(line)
            inside = ((xy[:, 0] >= frame.x0) & (xy[:, 0] <= frame.x1)
                      & (xy[:, 1] >= frame.y0) & (xy[:, 1] <= frame.y1))
            xy = xy[inside]
            for box in boxes:
                if np.any((xy[:, 0] >= box.x0) & (xy[:, 0] <= box.x1)
                          & (xy[:, 1] >= box.y0) & (xy[:, 1] <= box.y1)):
                    hits.append((ax.get_title(), line.get_label()))
        owner = {id(p): c.get_label() for c in ax.containers for p in c}
        for patch in ax.patches:
            # A bar covers its whole rectangle; a histogram's step outline its edges.
            if isinstance(patch, Rectangle) and patch.get_fill():
                area = patch.get_window_extent(renderer)
                if area.width < 1 or area.height < 1:
                    continue
                if any(area.overlaps(box) for box in boxes):
                    hits.append((ax.get_title(), owner.get(id(patch), patch.get_label())))
            elif not isinstance(patch, Rectangle):
                xy = densified(patch.get_transform().transform(patch.get_path().vertices))
                if any(np.any((xy[:, 0] > box.x0) & (xy[:, 0] < box.x1)
                              & (xy[:, 1] > box.y0) & (xy[:, 1] < box.y1)) for box in boxes):
                    hits.append((ax.get_title(), patch.get_label()))
    return hits


def test_legend_overlap_check_sees_a_legend_on_the_data():
    ax = plt.subplots()[1]
    ax.plot(np.linspace(0, 1, 50), np.full(50, 0.95), label="top")
    ax.plot(np.linspace(0, 1, 50), np.full(50, 0.05), label="bottom")
    ax.legend(loc="upper right")
    assert legend_overlaps(ax.figure) == [("", "top")]
    # Two vertices far apart: the segment between them crosses the legend.
    ax = plt.subplots()[1]
    ax.plot([0, 1], [0.95, 0.95], label="segment")
    ax.plot([0, 1], [0.0, 0.0], label="low")
    ax.set_xlim(-0.5, 1.5)
    ax.legend(loc="upper center")
    assert legend_overlaps(ax.figure) == [("", "segment")]
    # A bar under the legend, and a histogram's outline through it.
    ax = plt.subplots()[1]
    ax.bar([0, 1], [1.0, 0.1], label="bars")
    ax.legend(loc="upper left")
    assert legend_overlaps(ax.figure) == [("", "bars")]
    ax = plt.subplots()[1]
    ax.hist(np.repeat([0.5, 1.5], [9, 1]), bins=[0, 1, 2], histtype="step", label="hist")
    ax.legend(loc="upper left")
    assert legend_overlaps(ax.figure) == [("", "hist")]


#: An experiment's result shaped as the demo's (six models, FP16 accumulation's error
#: rising to the top right), made up here: the figure's layout is under test.
KS = [16, 64, 256, 1024, 4096]
SLOPES = {"exact": (2e-8, 0.0), "fp32": (4e-8, 0.5), "fp16": (5e-4, 0.9),
          "v100": (1.5e-7, 1.0), "a100": (8e-8, 1.0), "h100": (5e-8, 1.0)}
ERROR_VS_K = {"ks": KS, "formats": ["FP32", "FP16", "BF16"], "models": list(SLOPES),
              "dot": {(f, m): [e * (k / 16) ** s for k in KS]
                      for f in ("FP32", "FP16", "BF16") for m, (e, s) in SLOPES.items()}}


@pytest.mark.parametrize("draw", [
    lambda: lplot.values("e4m3"), lambda: lplot.values("e2m1"),
    lambda: lplot.spacing(), lambda: lplot.spacing(["fp16", "e8m0"]),
    lambda: lplot.rounding("e4m3"), lambda: lplot.rounding("fp16", ("rne", "sr"), around=3),
    lambda: lplot.rounding("e2m1", ("rne", "rz", "ru", "rd", "ro"), around=5),
    lambda: lplot.error_vs_k(ERROR_VS_K),
    lambda: lplot.error_vs_k(ks=(8, 32, 128), formats=("fp16",),
                             models=("fp32", "fp16", "v100"), trials=2, size=2),
    lambda: lplot.compare(COMPARE_ROWS),
    lambda: lplot.plot_error_vs_k(ERROR_VS_K).axes,      # `lowprec demo --plot` draws it
], ids=["values-e4m3", "values-e2m1", "spacing", "spacing-e8m0", "rounding-e4m3",
        "rounding-sr", "rounding-e2m1", "error_vs_k", "error_vs_k-run", "compare",
        "demo-plot"])
def test_no_legend_box_covers_a_plotted_point(draw):
    drawn = draw()
    fig = (drawn[0] if isinstance(drawn, list) else drawn).figure
    assert legend_overlaps(fig) == []


def test_error_vs_k_labels_a_tick_at_each_k_and_keeps_every_model_in_one_legend():
    axes = lplot.error_vs_k(ERROR_VS_K)
    fig = axes[0].figure
    fig.canvas.draw()
    for ax in axes:
        assert list(ax.get_xticks()) == KS
        assert [t.get_text() for t in ax.get_xticklabels()] == [str(k) for k in KS]
    legends = [ax.get_legend() for ax in axes if ax.get_legend() is not None]
    assert len(legends) == 1
    labels = [t.get_text() for t in legends[0].get_texts()]
    assert labels == ["exact, rounded once to FP32", *list(SLOPES)[1:]]


NOTEBOOKS = pathlib.Path(__file__).resolve().parents[1] / "notebooks"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["03-tensor-core-matmul", "05-block-scaled-training"])
def test_no_legend_box_covers_a_plotted_point_in_the_notebooks(name, monkeypatch, capsys):
    # The notebook's Jupytext source runs as a script (Agg: plt.show draws nothing and
    # leaves the figures open), from notebooks/ as Jupyter runs it.
    monkeypatch.chdir(NOTEBOOKS)
    runpy.run_path(str(NOTEBOOKS / f"{name}.py"), run_name="__main__")
    figures = [plt.figure(n) for n in plt.get_fignums()]
    assert figures
    assert [(f.number, legend_overlaps(f)) for f in figures if legend_overlaps(f)] == []
