"""Where a torch model loses precision on each emulated GPU (`compare`), module by module.

`compare` runs a model under `lowprec.torch.emulate` once per GPU and once in float64
(the reference), records every named submodule's output with forward hooks, and
tabulates each module's error against the reference and how far the GPUs' outputs lie
apart, in units in the last place of the output's dtype. Reached as
``lowprec.torch.compare`` (``lowprec.torch`` loads this module on first use of the
name, as it sits below that module in the layers). This module must never change the
caller's model or inputs: each run is on a deep copy, under the same fixed seed.
"""

from __future__ import annotations

import copy
import html
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .torch import GPUS, emulate

__all__ = ["compare", "CompareTable", "ulp_distance", "REFERENCES"]

#: The references `compare` knows: ``"fp64"``, the model and inputs cast to float64
#: and run by torch's own kernels (no emulation).
REFERENCES = ("fp64",)

#: The columns of `compare`'s table, before and after the per-GPU error columns.
_HEAD = ("module", "type", "dtype", "shape")
_TAIL = ("ulps", "bits", "groups", "first")


class CompareTable(list):
    """`compare`'s rows (one dict per module call) where pandas is not installed.

    It is a list of dicts, in the order the modules finished. ``table["module"]``
    gives a column, as on the DataFrame. ``str()`` gives an
    aligned text table and Jupyter shows ``_repr_html_``. `to_frame` gives the pandas
    DataFrame `compare` returns when pandas is installed.
    """

    def columns(self) -> list[str]:
        return list(self[0]) if self else list(_HEAD + _TAIL)

    def __getitem__(self, key: Any) -> Any:
        # A column by name, as a DataFrame gives it. Rows by position, as a list.
        if isinstance(key, str):
            if key not in self.columns():
                raise KeyError(f"no column {key!r}; the columns are {self.columns()}")
            return [row[key] for row in self]
        return super().__getitem__(key)

    def to_frame(self) -> Any:
        """The rows as a pandas DataFrame (needs pandas)."""
        import pandas as pd
        return pd.DataFrame(list(self), columns=self.columns())

    def _cells(self) -> list[list[str]]:
        return [[_show(row[c]) for c in self.columns()] for row in self]

    def __str__(self) -> str:
        head = self.columns()
        cells = self._cells()
        widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(head)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in cells]
        return "\n".join(line.rstrip() for line in lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self.columns())
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                       for r in self._cells())
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, tuple):
        return "x".join(map(str, value))
    return str(value)


def _ordinals(t: Any) -> np.ndarray:
    """Each element's place on the dtype's line of values, as an int64: bit patterns of
    a sign and magnitude turned into a two's complement count (``+0`` and ``-0`` are 0,
    one ulp apart is 1 apart)."""
    import torch
    ints = {torch.float16: torch.int16, torch.bfloat16: torch.int16,
            torch.float32: torch.int32, torch.float64: torch.int64}
    if t.dtype not in ints:
        raise TypeError(f"ulp_distance counts ulps of float16, bfloat16, float32 and "
                        f"float64 tensors, not {t.dtype}")
    i = t.detach().contiguous().view(ints[t.dtype]).numpy().astype(np.int64)
    # Sign-extended, a pattern with the sign bit set keeps its magnitude in its low bits.
    magnitude = i & np.int64(2 ** (8 * t.element_size() - 1) - 1)
    return np.where(i < 0, -magnitude, magnitude)


def ulp_distance(a: Any, b: Any) -> np.ndarray:
    """How many values of their dtype lie between each pair of elements of two tensors
    of the same dtype and shape: 0 where equal (``+0`` and ``-0`` equal), 1 for
    neighbours.

    Two NaNs are 0 apart. A NaN and a number are as far apart as their bit patterns
    (beyond infinity). float64 distances that overflow int64 are clipped to its
    largest value.

    Examples
    --------
    >>> import torch
    >>> from lowprec.torchcompare import ulp_distance
    >>> a = torch.tensor([1.0, 0.0, -1.0], dtype=torch.bfloat16)
    >>> b = torch.tensor([1.0078125, -0.0, 1.0], dtype=torch.bfloat16)
    >>> ulp_distance(a, b).tolist()
    [1, 0, 32512]
    """
    if a.dtype != b.dtype or a.shape != b.shape:
        raise ValueError(f"ulp_distance needs tensors of one dtype and shape, got "
                         f"{a.dtype} {tuple(a.shape)} and {b.dtype} {tuple(b.shape)}")
    oa, ob = _ordinals(a), _ordinals(b)
    with np.errstate(over="ignore"):
        d = np.abs(oa - ob)
    d = np.where(d < 0, np.iinfo(np.int64).max, d)      # int64 wrapped: clipped
    both_nan = (a.isnan() & b.isnan()).numpy()
    return np.where(both_nan, 0, d)


def _first_tensor(out: Any) -> Any:
    import torch
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)):
        for x in out:
            if isinstance(x, torch.Tensor):
                return x
    return None


def _run(model: Any, inputs: tuple, seed: int, context: Any) -> list[tuple[str, str, Any]]:
    """(name, type, output) of every floating output of a named submodule of a copy of
    ``model``, in the order the modules finished, for one forward pass of ``inputs``."""
    import torch
    model = copy.deepcopy(model)
    seen: list[tuple[str, str, Any]] = []
    calls: dict[str, int] = {}

    def hook(name: str) -> Callable[..., None]:
        def record(module: Any, args: Any, out: Any) -> None:
            t = _first_tensor(out)
            if t is None or not t.is_floating_point():
                return
            calls[name] = calls.get(name, 0) + 1
            shown = name or "(model)"
            if calls[name] > 1:
                shown = f"{shown} (call {calls[name]})"
            seen.append((shown, type(module).__name__, t.detach().clone()))
        return record

    # Copies of the inputs too: an in-place module (ReLU(inplace=True)) would change
    # the caller's, and the next GPU's run would start from them.
    inputs = tuple(x.clone() if isinstance(x, torch.Tensor) else copy.deepcopy(x)
                   for x in inputs)
    handles = [m.register_forward_hook(hook(n)) for n, m in model.named_modules()]
    # Under no_grad, attention's inference fast path fuses its products, which no
    # mode sees: off for the run (the reference's too, so that all take one path).
    fastpath = torch.backends.mha.get_fastpath_enabled()
    try:
        torch.backends.mha.set_fastpath_enabled(False)
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(seed)
            with context(model):
                model(*inputs)
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)
        for h in handles:
            h.remove()
    return seen


def _error(y: Any, r: Any) -> float:
    """Normwise relative error ``||y - r||_2 / ||r||_2`` in float64 (``||y||_2`` where
    ``r`` is all zero: the absolute error)."""
    yv = y.double().numpy().ravel()
    rv = r.double().numpy().ravel()
    with np.errstate(invalid="ignore", over="ignore"):
        num = float(np.linalg.norm(yv - rv))
        den = float(np.linalg.norm(rv))
    return num / den if den != 0 else num


def _groups(gpus: Sequence[str], outs: list[Any]) -> str:
    """The GPUs that agree bit for bit, ``=``-joined, groups ``|``-separated."""
    groups: list[list[int]] = []
    for i, o in enumerate(outs):
        for g in groups:
            if ulp_distance(outs[g[0]], o).max(initial=0) == 0:
                g.append(i)
                break
        else:
            groups.append([i])
    return " | ".join("=".join(gpus[i] for i in g) for g in groups)


def compare(model: Any, inputs: Any, gpus: Sequence[str] = ("v100", "a100", "h100", "b200"),
            *, dtype: Any = "bfloat16", reference: str = "fp64", seed: int = 0) -> Any:
    """Run a torch model on each emulated GPU and in float64, and report per module
    how far each GPU's output is from the reference and from the other GPUs.

    Each GPU's run is one forward pass under ``torch.autocast("cpu", dtype=dtype)``
    (none when ``dtype`` is None) and ``lowprec.torch.emulate(gpu=...)``, so every
    product takes the model that GPU's cuBLAS reaches (`lowprec.torch.model_for`).
    The reference is the model and the floating inputs cast to float64, run by torch
    without emulation: its rounding errors (``2**-53`` relative per operation) lie far
    below any GPU format's. A forward hook on every named submodule records its
    output (a tuple's first tensor). Every run is on a deep copy of the model, under
    ``torch.no_grad()`` and the same seed (dropout draws the same masks), so the
    caller's model and RNG are left as they were. Put the model in ``eval()`` mode
    first for an inference comparison.

    Parameters
    ----------
    model : torch.nn.Module
    inputs : torch.Tensor or tuple
        The model's positional arguments (one tensor, or a tuple of them).
    gpus : sequence of str
        Names of `lowprec.torch.GPUS`, at least one.
    dtype : "bfloat16", "float16", torch dtype or None
        The autocast dtype; None runs the model in its own dtypes (float32 products
        are TF32 where torch's flags allow it, as `emulate` says).
    reference : {"fp64"}
        The reference run (`REFERENCES`).
    seed : int
        ``torch.manual_seed`` before each run.

    Returns
    -------
    pandas.DataFrame or CompareTable
        One row per module call, in the order the modules finished (the model
        itself, named ``"(model)"``, last). A DataFrame where pandas is installed,
        else a `CompareTable` (a list of dicts). Columns:

        - ``module``, ``type``, ``dtype``, ``shape``: the submodule's name and class,
          and its output's dtype and shape on the GPUs;
        - ``err_<gpu>``: that GPU's normwise relative error ``||y - r||_2 /
          ||r||_2`` against the reference ``r`` (the absolute error where ``r`` is 0);
        - ``ulps``: the largest `ulp_distance` between any two GPUs' outputs;
        - ``bits``: ``ulps.bit_length()``, the low significand bits that disagreement
          reaches (0 where all GPUs agree bit for bit);
        - ``groups``: the GPUs that agree bit for bit (``"a100=h100 | v100"``);
        - ``first``: True on the first row where the GPUs disagree.

    Examples
    --------
    >>> import torch, lowprec.torch as lpt
    >>> torch.manual_seed(0) and None
    >>> net = torch.nn.Sequential(torch.nn.Linear(64, 8), torch.nn.ReLU())
    >>> table = lpt.compare(net, torch.randn(4, 64), gpus=("a100", "h100"))
    >>> list(table["module"])
    ['0', '1', '(model)']
    >>> table["dtype"][0], bool(table["err_h100"][0] < 2**-7)
    ('bfloat16', True)
    """
    import torch
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"compare takes a torch.nn.Module, got {type(model).__name__}")
    inputs = (inputs,) if isinstance(inputs, torch.Tensor) else inputs
    if not isinstance(inputs, (tuple, list)):
        raise TypeError(f"inputs must be a tensor or a tuple of the model's positional "
                        f"arguments, got {type(inputs).__name__}")
    inputs = tuple(inputs)
    if isinstance(gpus, str):
        gpus = (gpus,)
    gpus = tuple(str(g).lower() for g in gpus)
    unknown = [g for g in gpus if g not in GPUS]
    if not gpus or unknown:
        raise ValueError(f"gpus must name at least one of {', '.join(GPUS)}; got "
                         f"{unknown or 'none'}")
    if len(set(gpus)) != len(gpus):
        raise ValueError(f"gpus names a GPU twice: {gpus}")
    if reference not in REFERENCES:
        raise ValueError(f"reference must be one of {REFERENCES}, got {reference!r} "
                         f"(the model and inputs in float64)")
    cast = _autocast_dtype(dtype)

    def on(gpu: str) -> Callable[[Any], Any]:
        def context(_model: Any) -> Any:
            import contextlib
            stack = contextlib.ExitStack()
            if cast is not None:
                stack.enter_context(torch.autocast("cpu", dtype=cast))
            stack.enter_context(emulate(gpu=gpu))
            return stack
        return context

    def in_fp64(m: Any) -> Any:
        import contextlib
        m.double()
        return contextlib.nullcontext()

    ref_inputs = tuple(x.double() if isinstance(x, torch.Tensor) and x.is_floating_point()
                       else x for x in inputs)
    ref = _run(model, ref_inputs, seed, in_fp64)
    runs = [_run(model, inputs, seed, on(g)) for g in gpus]
    names = [n for n, _, _ in ref]
    for g, run in zip(gpus, runs):
        if [n for n, _, _ in run] != names:
            raise RuntimeError(f"the model ran different modules on {g} and in float64 "
                               f"(a data-dependent path?): {[n for n, _, _ in run]} "
                               f"against {names}")
    rows = CompareTable()
    first_seen = False
    for i, (name, kind, r) in enumerate(ref):
        outs = [run[i][2] for run in runs]
        row: dict[str, Any] = {"module": name, "type": kind,
                               "dtype": str(outs[0].dtype).removeprefix("torch."),
                               "shape": tuple(outs[0].shape)}
        for g, y in zip(gpus, outs):
            row[f"err_{g}"] = _error(y, r)
        if any(o.dtype != outs[0].dtype for o in outs):
            raise RuntimeError(f"module {name} gave outputs of different dtypes on the "
                               f"GPUs: {[str(o.dtype) for o in outs]}")
        ulps = max((int(ulp_distance(outs[a], outs[b]).max(initial=0))
                    for a in range(len(outs)) for b in range(a + 1, len(outs))), default=0)
        row["ulps"] = ulps
        row["bits"] = ulps.bit_length()
        row["groups"] = _groups(gpus, outs)
        row["first"] = bool(ulps and not first_seen)
        first_seen = first_seen or bool(ulps)
        rows.append(row)
    return _frame(rows)


def _autocast_dtype(dtype: Any) -> Any:
    import torch
    if dtype is None:
        return None
    names = {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
             "float16": torch.float16, "fp16": torch.float16, "half": torch.float16}
    key = str(dtype).removeprefix("torch.").lower()
    if key not in names:
        raise ValueError(f"dtype is the autocast dtype, bfloat16 or float16 (or None for "
                         f"the model's own dtypes), got {dtype!r}")
    return names[key]


def _frame(rows: CompareTable) -> Any:
    """A DataFrame of the rows where pandas is installed, else the rows."""
    try:
        import pandas  # noqa: F401
    except ImportError:
        return rows
    return rows.to_frame()

