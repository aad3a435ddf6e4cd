"""Sequential accumulation: exact products added left to right, every addition
rounded (RNE) to FP32 or FP16 (or the accumulator of a hand-built model), as a CPU's
loop over K does.

`Sequential` is the kernel of the ``"fp32"`` and ``"fp16"`` models, vectorised over
the outputs of a chunk (the one Python loop runs over K). Each addition is rounded
once, from its exact value; the accumulator's roundings go through the fast paths
whose rule `lowprec.round` states (`_cast`). A kernel: ndarrays and `Format`\\ s in,
float64 ndarrays out; it never imports `Tensor` or reads a context default.
"""

from __future__ import annotations

import numpy as np

from ..engine.eft import two_sum
from ..formats import FP16, FP32
from ..rounding import round as _round
from ..rounding import round_exact as _round_exact
from ..status import quiet
from .blockfma import k_spans, products_fit_float32, round_fp16

__all__ = ["Sequential"]


class Sequential:
    """Exact products added left to right, every addition rounded (RNE) to ``acc``."""

    def __init__(self, fmt, acc, out, memory_bound):
        self.fmt, self.acc, self.out, self.memory_bound = fmt, acc, out, memory_bound
        self.to_fp32, self.to_fp16 = acc == FP32, acc == FP16
        self.float32 = acc == FP32 and products_fit_float32(fmt)
        # When float64 then acc is one rounding of acc + p:
        # FP32: both have at most 24 bits (53 >= 2 * 24 + 2, Figueroa's theorem).
        # FP16, products of at most 22 bits: acc + p is exact in float64 unless
        # |p| < 2**-30 |acc| (both roundings give acc) or |p| >= 2**17 (both overflow).
        # Another accumulator (a hand-built model): TwoSum and the kernel, every step.
        self.innocuous = acc in (FP32, FP16) and 2 * fmt.p <= (24 if acc == FP32 else 22)

    #: Smallest span of K, and bytes per operand entry of a span (float32 copies).
    k_unit, entry_bytes = 1, 8

    def target_outputs(self, K):
        return 1 << 15

    def bytes_per_output(self, K):
        # The accumulator, a product, a sum and TwoSum's error with their
        # temporaries, the final rounding: at most 12 float64 arrays.
        return 96

    def empty(self, c):
        return self._finish(self._cast(np.array(c, dtype=np.float64)))   # no additions: c

    def _cast(self, s):
        if self.to_fp32:
            return s.astype(np.float32).astype(np.float64)   # one IEEE rounding
        if self.to_fp16:
            return round_fp16(s)                             # lp.round(s, FP16), every float64
        return quiet(_round, s, self.acc)                    # any other format: the kernel

    def _finish(self, d):
        return d if self.out == self.acc else quiet(_round, d, self.out)

    def __call__(self, a, b, c):
        K = a.shape[-1]
        spans = k_spans(K, 1, a.shape[0] * (a.shape[1] + b.shape[2]), self.entry_bytes,
                        self.memory_bound)
        if self.float32:
            # Products are exact float32s and float32 addition is correctly rounded.
            acc = c.astype(np.float32)
            p = np.empty_like(acc)
            for span in spans:
                a32, b32 = a[..., span].astype(np.float32), b[:, span].astype(np.float32)
                for k in range(a32.shape[-1]):
                    np.multiply(a32[..., :, k, None], b32[..., None, k, :], out=p)
                    acc += p
            return self._finish(acc.astype(np.float64))
        acc = self._cast(np.array(c, dtype=np.float64))
        p = np.empty_like(acc)
        for k in range(K):
            # Products of two significands of at most 26 bits are exact in float64.
            np.multiply(a[..., :, k, None], b[..., None, k, :], out=p)
            if self.innocuous:
                acc = self._cast(acc + p)
                continue
            s, t = two_sum(acc, p)
            acc = self._cast(s)
            fix = (t != 0) & np.isfinite(s)
            if fix.any():
                acc[fix] = quiet(_round_exact, s[fix], t[fix], self.acc)
        return self._finish(acc)
