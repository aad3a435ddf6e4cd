"""Section "amp": the cost of an emulated training step, per policy.

Each ratio is time(10 steps of lp.amp.train under a policy) / time(10 steps of the
same MLP in plain float64 NumPy: forward, hand-written backward, SGD), measured side
by side in one run (timing.ratio). No limits: this says what a notebook experiment
costs, and which part of a step dominates (the FP32-accumulated matrix products).
"""

from __future__ import annotations

import dataclasses

import numpy as np

import lowprec as lp
from timing import ratio, row


def numpy_steps(x, labels, sizes, steps, lr=0.02):
    """The same MLP (Linear, ReLU, Linear), float64, no emulation."""
    model = lp.nn.mlp(sizes, rng=0)
    W1, b1, W2, b2 = (np.asarray(p.value) for p in model.parameters())
    onehot = np.eye(sizes[-1])[labels]
    for _ in range(steps):
        h = x @ W1 + b1
        a = np.maximum(h, 0)
        z = a @ W2 + b2
        e = np.exp(z - z.max(axis=1, keepdims=True))
        dz = (e / e.sum(axis=1, keepdims=True) - onehot) / len(labels)
        dh = (dz @ W2.T) * (h > 0)
        W2, b2 = W2 - lr * (a.T @ dz), b2 - lr * dz.sum(axis=0)
        W1, b1 = W1 - lr * (x.T @ dh), b1 - lr * dh.sum(axis=0)


def main(quick=False):
    n, sizes, steps = (64, [8, 16, 4], 5) if quick else (128, [8, 32, 4], 10)
    x, labels = lp.amp.blobs(n, sizes[0], sizes[-1], seed=0)
    print(f"  {steps} full-batch SGD steps, {n} points, MLP {'-'.join(map(str, sizes))}; "
          "ratio to float64 NumPy")
    policies = {name: name for name in lp.amp.POLICIES}
    policies["bf16 + sr"] = dataclasses.replace(lp.amp.POLICIES["bf16"], update="sr")
    for label, policy in policies.items():
        def emulated(policy=policy):
            lp.amp.train(lp.nn.mlp(sizes, rng=0), (x, labels), policy, steps, lr=0.02)
        r, tc, _ = ratio(emulated, lambda: numpy_steps(x, labels, sizes, steps),
                         rounds=3, inner=1)
        print(row(f"{label} ({tc / steps * 1e3:.0f} ms per step)", r))
