"""Extra memory of `lp.round` and `lp.encode`: a few chunk buffers, whatever the input.

The documented bound (lowprec.rounding.WORK_BYTES, docs/rounding.md "Speed"): beyond
its result, a call holds at most ``WORK_BUFFERS`` buffers of ``CHUNK`` float64 values
per thread, for every input dtype. Issue 12: float32 input made a full float64 copy,
int64 five, `encode` nine. Measured with tracemalloc (NumPy reports its buffers to
it) on one thread with small chunks, so that a full-size copy is 64 chunk buffers.
"""

import tracemalloc

import numpy as np
import pytest

import lowprec as lp
import lowprec.engine.parallel as kernel
from peers import ml_dtypes

DTYPES = ["float16", "float32", "float64", "int32", "int64", "uint64", "bool", "longdouble",
          "bfloat16"]
CALLS = {
    "round-bf16": lambda x: lp.round(x, "bf16"),
    "round-e4m3-rz": lambda x: lp.round(x, "e4m3", "rz"),        # the table lookup
    "round-fp64-ru": lambda x: lp.round(x, "fp64", "ru"),        # FP64's (hi, lo) step
    "round-fp16-sr": lambda x: lp.round(x, "fp16", "sr", rng=0),
    "encode-bf16": lambda x: lp.encode(x, "bf16"),
    "encode-e4m3-rd": lambda x: lp.encode(x, "e4m3", "rd"),
    "encode-fp64": lambda x: lp.encode(x, "fp64"),
}
CHUNK = 1 << 14
N = 64 * CHUNK


def values(dtype, n):
    rng = np.random.default_rng(0)
    if dtype == "bool":
        return rng.random(n) < 0.5
    if dtype in ("int32", "int64", "uint64"):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    x = rng.standard_normal(n) * 1000
    return x.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)


def extra_bytes(call, x, listening):
    call(x)                  # warm up: lookup tables, the pool
    tracemalloc.start()
    try:
        if listening:
            with lp.flags():
                result = call(x)
        else:
            result = call(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - result.nbytes


@pytest.mark.parametrize("listening", [False, True], ids=["plain", "flags"])
@pytest.mark.parametrize("call", list(CALLS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_extra_memory_stays_a_few_chunk_buffers(monkeypatch, dtype, call, listening):
    monkeypatch.setattr(kernel, "CHUNK", CHUNK)
    before = lp.threads(1)
    try:
        extra = extra_bytes(CALLS[call], values(dtype, N), listening)
    finally:
        lp.threads(before)
    bound = kernel.WORK_BUFFERS * 8 * CHUNK
    assert extra <= bound, (f"{extra / (8 * CHUNK):.1f} chunk buffers of extra memory, "
                            f"bound {kernel.WORK_BUFFERS}")


def test_the_bound_holds_per_thread(monkeypatch):
    # Three spans, each with its own buffers: at most three times one thread's bound.
    monkeypatch.setattr(kernel, "CHUNK", CHUNK)
    monkeypatch.setattr(kernel, "PARALLEL_MIN", N // 3)
    before = lp.threads(3)
    try:
        extra = extra_bytes(CALLS["encode-bf16"], values("int64", N), True)
    finally:
        lp.threads(before)
    assert extra <= 3 * kernel.WORK_BUFFERS * 8 * CHUNK


def test_default_bound_is_what_the_docs_say():
    # docs/rounding.md: chunks of 2**17 elements, "about 1 MiB of float64 per buffer".
    assert kernel.CHUNK == 1 << 17 and kernel.WORK_BYTES == 16 * 2**20
