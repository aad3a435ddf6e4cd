"""Training under a policy, and what the precision did: `train`, `evaluate`, `History`.

`train` runs a `lowprec.nn` model under a `Policy` with an optimizer and, optionally,
a `GradScaler`, and records per step what a real mixed-precision run would see
(gradient underflows, zero gradients, skipped steps, the loss scale, updates lost to
rounding); `evaluate` measures the trained weights in FP32; `blobs` is the synthetic
task and `demo` the comparison ``lowprec demo`` prints. This module must never compute
a training quantity in float64 behind the policy's back.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .. import nn
from ..display import history_card
from ..engine.checks import check_int, check_rng
from ..engine.progress import Progress, check_progress
from ..formats import FP16, FP32
from ..status import flags
from ..tensors import Tensor, context, tensor
from .checks import as_grads, check_real
from .optim import SGD, Adam
from .policy import POLICIES, Policy
from .scaler import GradScaler
from .scaling import KINDS, fractions

__all__ = ["History", "train", "evaluate", "blobs", "demo"]


@dataclass
class History:
    """What `train` measured, one entry per step.

    Attributes
    ----------
    policy : Policy
    loss : list of float
        The cross-entropy of the batch, as the policy computed it (unscaled,
        unweighted).
    scale : list of float
        The loss scale used in the step (1.0 without a scaler).
    skipped : list of bool
        Steps skipped because the gradients held inf or NaN.
    grad_underflow : list of int
        Underflow exceptions (``lp.flags()``) raised by the backward pass.
    grad_zero : list of float
        Fraction of the weight-gradient elements that are zero.
    unchanged : list of float
        Of the weights with a nonzero gradient, the fraction the step left
        unchanged (NaN for skipped steps).
    quant : list of dict
        Under a policy with scaled operands (`Policy.operands`), per step and per
        operand kind (``"x"``, ``"w"``, ``"dy"``), what the quantization of every
        linear layer's products did: ``blocks_clipped``, ``clipped`` and
        ``flushed`` (`lowprec.amp.scaling.fractions`). Empty otherwise.
    final_loss, final_accuracy : float
        The trained weights (masters, where kept) evaluated in FP32 on all data.
    """

    policy: Policy
    loss: list = field(default_factory=list)
    scale: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    grad_underflow: list = field(default_factory=list)
    grad_zero: list = field(default_factory=list)
    unchanged: list = field(default_factory=list)
    quant: list = field(default_factory=list)
    final_loss: float = float("nan")
    final_accuracy: float = float("nan")

    def summary(self) -> dict[str, float]:
        """The number of steps, the means over the run and the final figures, as a
        dict of floats (``steps`` and ``skipped`` are ints). A mean over no steps
        (a run of 0 steps; ``unchanged`` when every step was skipped) is NaN, and so
        is the final scale of a run of 0 steps. With scaled operands it also holds,
        per operand kind ``k``, the means ``k_blocks_clipped``, ``k_clipped`` and
        ``k_flushed`` of `quant`.

        Examples
        --------
        >>> import lowprec as lp
        >>> s = lp.amp.History(lp.amp.Policy.named("fp32")).summary()
        >>> s["steps"], s["skipped"], s["grad_zero"], s["final_scale"]
        (0, 0, nan, nan)
        """
        def mean(xs):
            xs = [x for x in xs if not np.isnan(x)]
            return float(np.mean(xs)) if xs else float("nan")
        out = {"steps": len(self.loss), "final_loss": self.final_loss,
               "final_accuracy": self.final_accuracy, "grad_zero": mean(self.grad_zero),
               "grad_underflow": mean(self.grad_underflow),
               "unchanged": mean(self.unchanged), "skipped": int(np.sum(self.skipped)),
               "final_scale": self.scale[-1] if self.scale else float("nan")}
        for kind in (self.quant[0] if self.quant else {}):
            for what in self.quant[0][kind]:
                out[f"{kind}_{what}"] = mean([q[kind][what] for q in self.quant])
        return out

    def records(self) -> list[dict[str, float]]:
        """One dict per step: ``step``, ``loss``, ``scale``, ``skipped``,
        ``grad_underflow``, ``grad_zero``, ``unchanged``, and ``k_what`` per
        operand kind ``k`` of `quant`.

        Examples
        --------
        >>> import lowprec as lp
        >>> h = lp.amp.History(lp.amp.Policy.named("fp32"), loss=[2.0, 1.5],
        ...                    scale=[1.0, 1.0], skipped=[False, False],
        ...                    grad_underflow=[0, 0], grad_zero=[0.0, 0.0],
        ...                    unchanged=[0.0, 0.0])
        >>> h.records()[1]["loss"], len(h.records())
        (1.5, 2)
        """
        rows = []
        for i in range(len(self.loss)):
            row = {"step": i, "loss": self.loss[i], "scale": self.scale[i],
                   "skipped": bool(self.skipped[i]),
                   "grad_underflow": self.grad_underflow[i],
                   "grad_zero": self.grad_zero[i], "unchanged": self.unchanged[i]}
            for kind, what in (self.quant[i].items() if i < len(self.quant) else ()):
                row.update({f"{kind}_{k}": v for k, v in what.items()})
            rows.append(row)
        return rows

    def to_pandas(self) -> Any:
        """`records` as a pandas DataFrame indexed by step (pandas must be installed).

        Examples
        --------
        >>> import lowprec as lp
        >>> pd = __import__("pytest").importorskip("pandas")
        >>> h = lp.amp.History(lp.amp.Policy.named("fp32"), loss=[2.0], scale=[1.0],
        ...                    skipped=[False], grad_underflow=[0], grad_zero=[0.0],
        ...                    unchanged=[0.0])
        >>> list(h.to_pandas().columns)[:2]
        ['loss', 'scale']
        """
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError("History.to_pandas needs pandas: pip install pandas "
                              "(History.records() gives the same rows as dicts)") from exc
        return pd.DataFrame(self.records(),
                            columns=None if self.loss else ["step"]).set_index("step")

    def plot(self, *, ax: Any = None) -> Any:
        """The loss per step, skipped steps marked, as a matplotlib Axes.

        Examples
        --------
        >>> import matplotlib; matplotlib.use("Agg")
        >>> import lowprec as lp
        >>> h = lp.amp.History(lp.amp.Policy.named("fp32"), loss=[2.0, 1.5],
        ...                    scale=[1.0, 1.0], skipped=[False, True])
        >>> ax = h.plot()
        >>> [line.get_gid() for line in ax.lines]
        ['loss', 'skipped']
        >>> import matplotlib.pyplot as plt; plt.close("all")
        """
        try:
            import matplotlib.pyplot as plt
        except ImportError as exc:
            raise ImportError('History.plot needs matplotlib: pip install "lowprec[plot]"'
                              ) from exc
        if ax is None:
            ax = plt.subplots(figsize=(6, 3.5))[1]
        steps = np.arange(len(self.loss))
        ax.plot(steps, self.loss, gid="loss", label="loss")
        skipped = np.flatnonzero(np.asarray(self.skipped, dtype=bool))
        ax.plot(skipped, np.asarray(self.loss, dtype=float)[skipped], linestyle="none",
                marker="x", color="C3", gid="skipped", label="skipped step")
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        ax.set_title(f"Training under {self.policy.name or 'a policy'}", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        return ax

    def _repr_html_(self) -> str:
        """The summary as a themed HTML card, for Jupyter.

        Examples
        --------
        >>> import lowprec as lp
        >>> html = lp.amp.History(lp.amp.Policy.named("fp32"))._repr_html_()
        >>> "History of fp32" in html, "steps" in html
        (True, True)
        """
        return history_card(self.summary(), self.policy.name or repr(self.policy))


def train(model: nn.Sequential, data: tuple[ArrayLike, ArrayLike], policy: Policy | str,
          steps: int, *, optimizer: str = "sgd", lr: float = 0.1, momentum: float = 0.0,
          scaler: GradScaler | None = None, loss_weight: float = 1.0,
          batch_size: int | None = None, seed: int = 0,
          progress: bool | None = None) -> History:
    """Train ``model`` (a `lowprec.nn` model) on ``data`` under ``policy``.

    Each step: the forward pass in ``policy.compute`` under ``policy.matmul``; the
    loss (softmax cross-entropy in ``policy.loss``) times ``loss_weight``; the
    backward pass from the seed ``d(scaled loss)/d(loss) = scale * loss_weight``,
    rounded into the loss format, under ``lp.flags()`` (with no gradient of the
    data: a `lowprec.nn` model's first layer skips it, as PyTorch does for inputs
    that require none); the gradients in the weight format, unscaled by
    ``scaler``; the optimizer step, skipped when the scaler found inf or NaN;
    ``scaler.update()``. Under a policy with scaled operands (`Policy.operands`)
    every `lowprec.nn.Linear` of the model gets a quantizer of the recipe for the
    run (its stochastic rounding seeded from ``seed``), removed again at the end.

    Parameters
    ----------
    model : lowprec.nn.Sequential
        Its parameters are taken over by the optimizer (rounded to the policy's
        weight format, working copies in the compute format).
    data : (x, labels)
        Float features of shape (N, d) and integer labels of shape (N,).
    policy : Policy or str
    steps : int
    optimizer : {"sgd", "adam"}
    lr, momentum : float
        Learning rate; SGD momentum.
    scaler : GradScaler, optional
        Dynamic loss scaling; None for none.
    loss_weight : float
        A constant factor on the loss (a weighted term of a larger loss, or a mean
        over many more elements), which makes the gradients that much smaller.
    batch_size : int, optional
        Minibatches drawn with replacement (seeded by ``seed``); None: full batch.
    seed : int
        Seeds the minibatches and stochastic rounding of updates.
    progress : bool, optional
        A progress bar over the steps (tqdm, the ``progress`` extra): True shows
        one, False never; by default one appears once the steps done say the rest
        will take over two seconds (``LOWPREC_PROGRESS=0`` turns it off).

    Returns
    -------
    History

    Raises
    ------
    TypeError, ValueError
        For a bad argument, naming it: a model that is not a `lowprec.nn` model,
        features that are not real numbers (NumPy would parse strings) or not of
        shape (N, d), labels that are not integers in [0, classes) of shape (N,),
        ``steps < 0``, ``lr`` negative or not finite, ``loss_weight`` not positive and
        finite, ``momentum``
        outside [0, 1), an unknown policy or optimizer. All are checked before the
        optimizer takes the model's parameters over, so a refused call leaves the
        model as it was (for a model other than a `Sequential` of `lowprec.nn`
        layers, labels past the output width are found on the first step).

    Examples
    --------
    >>> import lowprec as lp
    >>> data = lp.amp.blobs(64, 4, 3, seed=0)
    >>> h = lp.amp.train(lp.nn.mlp([4, 8, 3], rng=0), data, "bf16-mixed", 5, lr=0.5)
    >>> len(h.loss), h.loss[-1] < h.loss[0], h.skipped
    (5, True, [False, False, False, False, False])
    """
    # Everything is checked before the optimizer takes the model's parameters over.
    _check_model(model)
    x, labels = _check_data(data)
    policy = Policy.named(policy)
    steps = check_int("steps", steps, minimum=0)
    if optimizer not in ("sgd", "adam"):
        raise ValueError(f"unknown optimizer {optimizer!r}; valid: sgd, adam")
    if scaler is not None and not isinstance(scaler, GradScaler):
        raise TypeError(f"scaler must be a GradScaler or None, got {type(scaler).__name__}")
    if scaler is not None and policy.weights == FP16:
        raise ValueError(f"a GradScaler needs FP32 master weights (PyTorch refuses to unscale "
                         f"FP16 gradients), but policy {policy.name or policy!r} keeps the "
                         f"weights in FP16: use the policy 'fp16-mixed' (FP16 compute, FP32 "
                         f"weights), or weights='fp32'")
    loss_weight = check_real("loss_weight", loss_weight, low=0.0, low_open=True,
                             high=math.inf, high_open=True)
    if batch_size is not None:
        batch_size = check_int("batch_size", batch_size, minimum=1)
    check_rng(seed, "seed")
    progress = check_progress(progress)
    first = model.layers[0] if isinstance(model, nn.Sequential) and model.layers else model
    if isinstance(first, nn.Linear) and x.shape[1] != first.weight.value.shape[0]:
        raise ValueError(f"data's features x must have shape (N, {first.weight.value.shape[0]})"
                         f" for the model's input, got shape {x.shape}")
    classes = _classes(model)
    if classes is not None:
        nn.check_labels(labels, len(labels), classes, what="one per row of x")
    linears = _linears(model) if policy.operands is not None else []
    if policy.operands is not None and not linears:
        raise ValueError("a policy with scaled operands needs a model with lowprec.nn.Linear "
                         "layers: the recipe quantizes their products")
    params = model.parameters()
    opt: SGD | Adam
    if optimizer == "sgd":
        opt = SGD(params, lr, policy, momentum=momentum, seed=seed)
    else:
        opt = Adam(params, lr, policy, seed=seed)
    batches = np.random.default_rng(seed)
    x_all = tensor(x, policy.compute, "rne")
    history = History(policy)
    for layer, rng in zip(linears, np.random.default_rng(seed).spawn(len(linears))):
        layer.quantizer = policy.operands.quantizer(rng)  # type: ignore[union-attr]
    try:
        with Progress(steps, "lp.amp.train", progress) as bar:
            _steps(model, opt, policy, scaler, loss_weight, batch_size, steps, x_all, labels,
                   batches, classes, params, linears, history, bar)
    finally:
        for layer in linears:
            layer.quantizer = None
    history.final_loss, history.final_accuracy = evaluate(model, data, opt.weights)
    return history


def _linears(model):
    """The `lowprec.nn.Linear` layers of ``model``, through nested Sequentials;
    `ValueError` for a layer of another kind than lowprec.nn's (its products, if it
    has any, could not be quantized)."""
    if isinstance(model, nn.Linear):
        return [model]
    if isinstance(model, nn.Sequential):
        return [layer for sub in model.layers for layer in _linears(sub)]
    if isinstance(model, (nn.ReLU, nn.GELU)):
        return []
    raise ValueError(f"a policy with scaled operands quantizes the products of "
                     f"lowprec.nn.Linear layers, inside lowprec.nn.Sequential models; "
                     f"{type(model).__name__} is neither, so its products would not be "
                     f"quantized")


def _steps(model, opt, policy, scaler, loss_weight, batch_size, steps, x_all, labels,
           batches, classes, params, linears, history, bar):
    """The training loop of `train`, recording into ``history``."""
    with context(mode="rne", matmul=policy.matmul):
        for _ in range(steps):
            if batch_size is None:
                xb, yb = x_all, labels
            else:
                idx = batches.integers(0, len(labels), batch_size)
                xb, yb = x_all[idx], labels[idx]
            # policy.loss is a Format once Policy.__post_init__ has run.
            logits = model.forward(xb).astype(policy.loss)
            if classes is None:        # every label, not only a minibatch's
                classes = logits.shape[1]
                nn.check_labels(labels, len(labels), classes, what="one per row of x")
            loss = nn.softmax_cross_entropy(logits, yb)
            scale = scaler.get_scale() if scaler is not None else 1.0
            with flags() as f:
                seed_grad = tensor(scale, policy.loss) * loss_weight
                dz = nn.softmax_cross_entropy_backward(logits, yb, seed_grad)
                dz = dz.astype(policy.compute)
                if isinstance(model, (nn.Sequential, nn.Linear)):
                    model.backward(dz, input_grad=False)   # the data needs no gradient
                else:
                    model.backward(dz)
            grads = opt.gradients()
            found_inf = False
            if scaler is not None:
                grads, found_inf = scaler.unscale(grads)
            if not found_inf:
                opt.step(grads)
            if scaler is not None:
                scaler.update()
            # Every p.grad is a Tensor here (opt.gradients() refused a missing one).
            grads_now = [cast(Tensor, p.grad) for p in params]
            zeros = sum(int(np.count_nonzero(g.values == 0)) for g in grads_now)
            history.loss.append(float(loss))
            history.scale.append(scale)
            history.skipped.append(bool(found_inf))
            history.grad_underflow.append(f.underflow)
            history.grad_zero.append(zeros / sum(g.size for g in grads_now))
            history.unchanged.append(float("nan") if found_inf else opt.unchanged_fraction)
            if linears:
                total = {k: np.zeros(6, dtype=np.int64) for k in KINDS}
                for layer in linears:
                    for k, c in layer.quantizer.counts.take().items():
                        total[k] += c
                history.quant.append(fractions(total))
            bar.update()


def _check_model(model):
    """`TypeError` naming ``model`` unless it is a `lowprec.nn` model."""
    if not all(callable(getattr(model, m, None)) for m in ("forward", "backward", "parameters")):
        raise TypeError(f"model must be a lowprec.nn model (with forward, backward and "
                        f"parameters), e.g. lp.nn.mlp([8, 16, 4]); got {type(model).__name__}")


def _classes(model):
    """The model's output width where its layers say it (a `lowprec.nn.Linear`, or a
    `Sequential` ending in one, then activations), else None."""
    layers = model.layers if isinstance(model, nn.Sequential) else [model]
    for layer in reversed(layers):
        if isinstance(layer, nn.Linear):
            return layer.weight.value.shape[1]
        if not isinstance(layer, (nn.ReLU, nn.GELU)):
            return None
    return None


def _check_data(data):
    """``data`` as ``(x, labels)``: float64 features of shape (N, d) (from real
    numbers only: NumPy would parse strings) and int labels of shape (N,), >= 0."""
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise TypeError(f"data must be a pair (x, labels), got {type(data).__name__}")
    x, labels = data
    x = np.asarray(x)
    if x.dtype.kind not in "biuf":
        raise TypeError(f"data's features x must be real numbers, got dtype {x.dtype}")
    if x.ndim != 2:
        raise ValueError(f"data's features x must have shape (N, d), got shape {x.shape}")
    labels = nn.check_labels(labels, x.shape[0], what="one per row of x")
    return x.astype(np.float64), labels


def evaluate(model: nn.Sequential, data: tuple[ArrayLike, ArrayLike],
             weights: list[Tensor] | None = None) -> tuple[float, float]:
    """Loss and accuracy of ``model`` on ``data`` in FP32 (FP32 accumulation), with
    ``weights`` (a list of Tensors, one per parameter) in place of the parameters'
    values when given. Returns ``(loss, accuracy)`` as floats.

    Examples
    --------
    >>> import lowprec as lp
    >>> data = lp.amp.blobs(32, 2, 2, seed=1)
    >>> loss, acc = lp.amp.evaluate(lp.nn.mlp([2, 4, 2], rng=0), data)
    >>> 0.0 <= acc <= 1.0, loss > 0
    (True, True)
    """
    _check_model(model)
    x, labels = _check_data(data)
    params = model.parameters()
    saved = [p.value for p in params]
    if weights is None:
        weights = saved
    else:
        weights = as_grads(weights, "weights")
        if len(weights) != len(params):
            raise ValueError(f"weights must hold one Tensor per parameter ({len(params)}), "
                             f"got {len(weights)}")
        for i, (w, p) in enumerate(zip(weights, params)):
            if w.shape != p.value.shape:
                raise ValueError(f"weights[{i}] must have its parameter's shape "
                                 f"{p.value.shape}, got shape {w.shape}")
    try:
        for p, w in zip(params, weights):
            p.value = w.astype(FP32, "rne")
        with context(mode="rne", matmul="fp32"):
            logits = model.forward(tensor(x, FP32, "rne"))
            loss = nn.softmax_cross_entropy(logits, labels)
    finally:
        for p, v in zip(params, saved):
            p.value = v
    accuracy = float(np.mean(np.argmax(np.asarray(logits), axis=1) == np.asarray(labels)))
    return float(loss), accuracy


def blobs(n: int, dim: int, classes: int, *, spread: float = 1.0,
          seed: int = 0) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """A synthetic classification task: ``classes`` Gaussian clusters in ``dim``
    dimensions, centres drawn from N(0, 1), points from N(centre, spread**2).
    Returns ``(x, labels)``: float64 (n, dim) and int (n,), from a seeded NumPy
    generator (nothing is downloaded).

    Examples
    --------
    >>> import lowprec as lp
    >>> x, y = lp.amp.blobs(6, 2, 3, seed=0)
    >>> x.shape, y.tolist()
    ((6, 2), [0, 1, 2, 0, 1, 2])
    """
    n = check_int("n", n, minimum=1)
    dim = check_int("dim", dim, minimum=1)
    classes = check_int("classes", classes, minimum=1)
    spread = check_real("spread", spread, low=0.0, high=math.inf, high_open=True)
    check_rng(seed, "seed")
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((classes, dim))
    labels = np.arange(n) % classes
    x = centres[labels] + spread * rng.standard_normal((n, dim))
    return x, labels


@functools.cache
def demo(n: int = 64, steps: int = 40, lr: float = 0.02, loss_weight: float = 2.0**-18) -> str:
    """The mixed-precision comparison ``lowprec demo`` prints: one small task trained
    under each policy, as a text table (computed on the call, a few seconds; cached).

    The task: `blobs` ``(n, 8, 4, seed=0)``, ``lp.nn.mlp([8, 16, 4], rng=0)``,
    ``steps`` full-batch SGD steps at ``lr``. The FP16 rows weight the loss by
    ``loss_weight`` and multiply the learning rate by its inverse: the gradients
    are that much smaller, and FP32 would take the same steps bit for bit.

    Examples
    --------
    >>> import lowprec as lp
    >>> text = lp.amp.demo(n=16, steps=2)
    >>> print(text.splitlines()[0])
    Task: 4 Gaussian blobs in 8-D (16 points), MLP 8-16-4 (ReLU), 2 full-batch SGD steps, lr 0.02.
    >>> for line in text.splitlines()[7:13]:
    ...     print(line.split(" | ")[0])
    fp32
    fp16-mixed, no loss scaling
    fp16-mixed + GradScaler
    bf16 (BF16 weights)
    bf16-mixed (FP32 masters)
    bf16 + stochastic rounding
    """
    n = check_int("n", n, minimum=1)
    steps = check_int("steps", steps, minimum=0)
    lr = check_real("lr", lr, low=0.0, high=math.inf, high_open=True)
    loss_weight = check_real("loss_weight", loss_weight, low=0.0, low_open=True,
                             high=math.inf, high_open=True)
    data = blobs(n, 8, 4, seed=0)
    bf16_sr = replace(POLICIES["bf16"], update="sr")
    runs: list[tuple[str, Policy | str, float, GradScaler | None]] = [
        ("fp32", "fp32", 1.0, None),
        ("fp16-mixed, no loss scaling", "fp16-mixed", loss_weight, None),
        ("fp16-mixed + GradScaler", "fp16-mixed", loss_weight, GradScaler()),
        ("bf16 (BF16 weights)", "bf16", 1.0, None),
        ("bf16-mixed (FP32 masters)", "bf16-mixed", 1.0, None),
        ("bf16 + stochastic rounding", bf16_sr, 1.0, None)]
    header = ("run", "final loss", "grads zero", "updates lost", "skipped")
    rows = []
    for label, policy, weight, scaler in runs:
        h = train(nn.mlp([8, 16, 4], rng=0), data, policy, steps, lr=lr / weight,
                  loss_weight=weight, scaler=scaler)
        s = h.summary()
        rows.append((label, f"{s['final_loss']:.4f}", f"{s['grad_zero']:.1%}",
                     f"{s['unchanged']:.1%}", str(s["skipped"])))
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    line = lambda r: " | ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    if math.frexp(loss_weight)[0] == 0.5:          # a power of two
        exponent = math.frexp(loss_weight)[1] - 1
        weighting = f"by 2**{exponent} (learning rate times 2**{-exponent})"
    else:
        weighting = f"by {loss_weight:g} (learning rate divided by it)"
    return "\n".join([
        f"Task: 4 Gaussian blobs in 8-D ({n} points), MLP 8-16-4 (ReLU), {steps} "
        f"full-batch SGD steps, lr {lr}.",
        f"The fp16 rows weight the loss {weighting}: tiny gradients.",
        "grads zero: weight-gradient elements that are 0; updates lost: weights with a "
        "nonzero gradient\nthat the step left unchanged (final loss: the trained "
        "weights evaluated in FP32).", "",
        line(header), "-+-".join("-" * w for w in widths), *map(line, rows), "",
        "Read: without loss scaling FP16 gradients underflow to zero; the GradScaler "
        "brings them back.\nBF16 weights round small updates away; FP32 master weights "
        "keep them, and stochastic\nrounding keeps them on average (it still leaves "
        "many weights unchanged in any one step)."])
