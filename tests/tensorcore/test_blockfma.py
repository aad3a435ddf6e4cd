"""`BlockFMA`'s copies of b kept across chunks of rows (`BlockFMA.b_key`) against the
kernel that copies b afresh for every chunk: the same bits, on data whose spans of K
do and do not allow float32 products, with inf and NaN in some columns, for stacks
and for chunks of fewer rows at the end; and the copies are reused."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import lowprec as lp
from helpers import assert_bits
from lowprec.tensorcore import matmul


def _module(name):
    return sys.modules[f"lowprec.tensorcore.{name}"]


def _data(rng, shape, fmt):
    x = rng.standard_normal(shape)
    x[..., 10:20, :] *= 2.0**90 if fmt != "fp16" else 2.0**9   # a span float32 cannot take
    return lp.round(x, fmt)


@pytest.mark.parametrize("model, fmt", [("h100", "bf16"), ("a100", "tf32"), ("b200", "fp16"),
                                        ("h100", "e4m3")])
@pytest.mark.parametrize("bound", [40000, 400000])
def test_kept_copies_of_b_give_the_fresh_copies_bits(monkeypatch, model, fmt, bound):
    bf, mm = _module("blockfma"), _module("driver")
    monkeypatch.setattr(mm, "MEMORY_BOUND", bound)
    monkeypatch.setattr(bf.BlockFMA, "target_outputs", lambda self, K: 64)
    rng = np.random.default_rng(7)
    a = lp.round(rng.standard_normal((3, 45, 70)), fmt)
    b = _data(rng, (3, 70, 40), fmt)
    b[1, 30, 5], b[2, 60, 7] = np.inf, np.nan
    c = lp.round(rng.standard_normal((3, 45, 40)), "fp32")
    calls = []
    real = bf._side
    monkeypatch.setattr(bf, "_side", lambda *args: calls.append(1) or real(*args))
    with np.errstate(all="ignore"):
        got = matmul(a, b, model=model, c=c, in_fmt=fmt)
        kept = len(calls)
        monkeypatch.setattr(bf.BlockFMA, "b_key", property(lambda self: None,
                                                           lambda self, v: None))
        want = matmul(a, b, model=model, c=c, in_fmt=fmt)
    assert_bits(got, want)
    assert kept < len(calls) - kept, "no chunk of rows reused the copies of b"
