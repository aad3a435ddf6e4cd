"""Mixed-precision training, emulated: precision policies, loss scaling, master weights.

A `Policy` says in which format a network computes, accumulates its matrix
products, keeps its weights, delivers its gradients, loss and updates, how the
weight update is rounded, and how the products' operands are scaled; `GradScaler`
is PyTorch's dynamic loss scaling, rule for rule; `SGD` and `Adam` keep the weights
in the policy's weight format (FP32 master weights for the mixed policies) and write
low-precision working copies back into the model; `DelayedScaling` and
`BlockScaling` (`MXFP8`, `NVFP4`) quantize the operands of the matrix products, as
Transformer Engine's FP8 and FP4 recipes do; `train` runs a `lowprec.nn` model under
a policy and measures what the precision did (gradient underflows, skipped steps,
the loss scale, weight updates lost to rounding, blocks clipped and values flushed
by the quantization). The files of this package (`scaling`, `policy`, `checks`,
`optim`, `scaler`, `training`; docs/design/DESIGN.md, "Layout") must never compute a
training quantity in float64 behind the policy's back: every value it produces is a
value of the format the policy names, and every rounding is one a real
mixed-precision run would make.
"""

from .optim import SGD, Adam
from .policy import POLICIES, Policy
from .scaler import GradScaler
from .scaling import MXFP8, NVFP4, BlockScaling, DelayedScaling
from .training import History, blobs, demo, evaluate, train

__all__ = ["Policy", "POLICIES", "GradScaler", "SGD", "Adam", "History", "train",
           "evaluate", "blobs", "demo", "DelayedScaling", "BlockScaling", "MXFP8", "NVFP4"]
