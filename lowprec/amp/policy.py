"""Precision policies: in which format each quantity of a training step lives.

A `Policy` names the formats of the computation, the matmul accumulation, the weights
(master weights when they differ from the compute format), the gradients and the loss,
the rounding mode of the weight update, and the scaling recipe of the matrix products'
operands; `POLICIES` are the named ones. A policy
only describes a run: this module computes nothing and must never round a value.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..display import dataclass_card
from ..engine.checks import check_mode
from ..formats import BF16, FP16, FP32, Format
from ..formats import format as _format
from ..tensorcore import Model, resolve_model
from .scaling import MXFP8, NVFP4, BlockScaling, DelayedScaling

__all__ = ["Policy", "POLICIES"]


@dataclass(frozen=True)
class Policy:
    """Where each quantity of a training step lives, and how updates are rounded.

    Parameters
    ----------
    compute : Format or str
        Activations, their gradients and the working copies of the weights: every
        elementwise operation, and the rounding of every matrix product's result.
    matmul : str or TensorCoreModel
        The matmul model (``lp.matmul``): how products are accumulated before that
        rounding. ``"fp32"``, FP32 accumulation, in every named policy.
    weights : Format or str, optional
        The weights the optimizer updates, and the optimizer's state. When it differs
        from ``compute`` these are master weights, and the model computes with a copy
        rounded (to nearest) into ``compute``. Default: ``compute``.
    grads : Format or str, optional
        The format weight gradients are delivered in (rounded once from the matmul's
        accumulator). Default: ``compute``.
    update : str
        The rounding mode of the weight update ``w - step`` in ``weights``: ``"rne"``,
        or ``"sr"`` (stochastic rounding, seeded by the optimizer) or any `lp.round` mode.
    loss : Format or str, optional
        Softmax and cross-entropy, forward and backward. Default: ``compute``.
    operands : DelayedScaling or BlockScaling, optional
        How the operands of every linear layer's three matrix products are quantized
        before they are multiplied (`lowprec.amp.DelayedScaling`: FP8 with per-tensor
        scales; `lowprec.amp.BlockScaling`: MXFP8, NVFP4), the products' FP32 results
        then rounded into ``compute`` and ``grads`` as without it. Default: None, the
        operands in ``compute``.

    Notes
    -----
    The named policies (`Policy.named`, `POLICIES`):

    ==============  =======  =======  =======  =======  ======
    name            compute  weights  grads    loss     matmul
    ==============  =======  =======  =======  =======  ======
    ``fp32``        FP32     FP32     FP32     FP32     fp32
    ``fp16``        FP16     FP16     FP16     FP16     fp32
    ``bf16``        BF16     BF16     BF16     BF16     fp32
    ``fp16-mixed``  FP16     FP32     FP16     FP32     fp32
    ``bf16-mixed``  BF16     FP32     BF16     FP32     fp32
    ==============  =======  =======  =======  =======  ======

    and three with scaled operands, each ``bf16-mixed`` plus ``operands``:
    ``fp8-delayed`` (`DelayedScaling()`: E4M3 forward, E5M2 gradients, per-tensor
    scales from an amax history of 1024 steps), ``mxfp8`` (`MXFP8`: MXFP8 E4M3
    everywhere, RCEIL scales, products on ``b200/tcgen05``) and ``nvfp4`` (`NVFP4`:
    NVFP4 blocks and tensor scales, gradients stochastically rounded, products on
    ``b200/tcgen05``).

    The pure policies are ``model.half()`` / ``model.bfloat16()``: the matrix
    products still accumulate in FP32, as Tensor Cores and BLAS libraries do for
    half-precision inputs (``matmul="fp16"`` gives FP16 accumulation). The mixed
    policies are ``torch.autocast`` with FP32 parameters: low-precision matrix
    products and activations, softmax and loss in FP32, FP32 weights and optimizer.

    Examples
    --------
    >>> import dataclasses, lowprec as lp
    >>> p = lp.amp.Policy.named("bf16-mixed")
    >>> p.compute, p.weights, p.master_weights
    (lp.BF16, lp.FP32, True)
    >>> sr = dataclasses.replace(lp.amp.Policy.named("bf16"), update="sr")
    >>> sr.name, sr.update, sr.master_weights
    (None, 'sr', False)
    >>> lp.amp.Policy("fp16", weights="fp32", loss="fp32").name
    'fp16-mixed'
    """

    compute: Format
    matmul: str | Model = "fp32"
    weights: Format | None = None
    grads: Format | None = None
    update: str = "rne"
    loss: Format | None = None
    operands: DelayedScaling | BlockScaling | None = None

    def __post_init__(self) -> None:
        compute = _format(self.compute)
        object.__setattr__(self, "compute", compute)
        for name in ("weights", "grads", "loss"):
            value = getattr(self, name)
            object.__setattr__(self, name, compute if value is None else _format(value))
        check_mode(self.update, "update")
        resolve_model(self.matmul, "matmul")   # a name, a MODELS value (or copy), a TensorCoreModel
        if self.operands is not None and not isinstance(self.operands,
                                                        (DelayedScaling, BlockScaling)):
            raise TypeError(f"operands must be a DelayedScaling or BlockScaling recipe "
                            f"(lp.amp.DelayedScaling(), lp.amp.MXFP8, lp.amp.NVFP4) or None, "
                            f"got {type(self.operands).__name__}")
        if isinstance(self.operands, DelayedScaling):
            self.operands.check_model(self.matmul)

    @classmethod
    def named(cls, name: Policy | str) -> Policy:
        """The named policy ``name`` (see the table above)."""
        if isinstance(name, Policy):
            return name
        if not isinstance(name, str):
            raise TypeError(f"policy must be a Policy or a name, one of {', '.join(POLICIES)};"
                            f" got {type(name).__name__} {name!r}")
        try:
            return POLICIES[name.lower()]
        except (KeyError, AttributeError):
            raise ValueError(f"unknown policy {name!r}; valid policies: "
                             f"{', '.join(POLICIES)}") from None

    @property
    def name(self) -> str | None:
        """The name of the named policy equal to this one, or None."""
        return next((n for n, p in POLICIES.items() if p == self), None)

    @property
    def master_weights(self) -> bool:
        """Whether the optimizer keeps weights in a format other than ``compute``."""
        return self.weights != self.compute

    def _repr_html_(self) -> str:
        return dataclass_card(self)


#: The named policies.
POLICIES = {
    "fp32": Policy(FP32),
    "fp16": Policy(FP16),
    "bf16": Policy(BF16),
    "fp16-mixed": Policy(FP16, weights=FP32, loss=FP32),
    "bf16-mixed": Policy(BF16, weights=FP32, loss=FP32),
    "fp8-delayed": Policy(BF16, weights=FP32, loss=FP32, operands=DelayedScaling()),
    "mxfp8": Policy(BF16, weights=FP32, loss=FP32, operands=MXFP8),
    "nvfp4": Policy(BF16, weights=FP32, loss=FP32, operands=NVFP4),
}

