"""Mixed-precision training, emulated: precision policies, loss scaling, master weights.

A `Policy` says in which format a network computes, accumulates its matrix
products, keeps its weights, delivers its gradients, loss and updates, and how the
weight update is rounded; `GradScaler` is PyTorch's dynamic loss scaling, rule for
rule; `SGD` and `Adam` keep the weights in the policy's weight format (FP32 master
weights for the mixed policies) and write low-precision working copies back into
the model; `train` runs a `lowprec.nn` model under a policy and measures what the
precision did (gradient underflows, skipped steps, the loss scale, weight updates
lost to rounding). The files of this package (`policy`, `checks`, `optim`,
`scaler`, `training`; docs/design/DESIGN.md, "Layout") must never compute a training
quantity in float64 behind the policy's back: every value it produces is a value of the format the
policy names, and every rounding is one a real mixed-precision run would make.
"""

from .optim import SGD, Adam
from .policy import POLICIES, Policy
from .scaler import GradScaler
from .training import History, blobs, demo, evaluate, train

__all__ = ["Policy", "POLICIES", "GradScaler", "SGD", "Adam", "History", "train",
           "evaluate", "blobs", "demo"]
