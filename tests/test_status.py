"""Exception flags: counts equal the reference's classification of the same inputs."""

import math
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowprec as lp
from lowprec import testing as lpt

DET_MODES = ("rne", "rna", "rz", "ru", "rd", "ro")
FORMATS = [lp.FP16, lp.BF16, lp.FP8_E4M3, lp.FP8_E5M2, lp.FP8_E4M3FNUZ, lp.FP6_E3M2,
           lp.FP4_E2M1, lp.FP32]
OPTIONS = [dict(), dict(saturate=True), dict(subnormals=False)]


def expected_counts(xs, fmt, mode, saturate=False, subnormals=None):
    """Classify each input from the Fraction reference alone."""
    wide = lp.Format(10, fmt.mantissa_bits, 511)   # same precision, a far wider range
    saturating = saturate or fmt.kind == "finite"
    c = dict.fromkeys(lp.flags().as_dict(), 0)
    for x in map(float, xs):
        r = lpt.reference_round(x, fmt, mode, saturate=saturate, subnormals=subnormals)
        if math.isinf(x):
            if not fmt.has_inf:
                c["saturated" if saturating else "invalid"] += 1
            continue
        if math.isnan(x):
            continue
        inexact = math.isnan(r) or r != x
        unbounded = lpt.reference_round(x, wide, mode)
        c["inexact"] += inexact
        c["underflow"] += inexact and abs(unbounded) < fmt.smallest_normal
        over = abs(unbounded) > fmt.max
        c["overflow"] += over
        c["saturated"] += over and saturating
        if subnormals is False:
            with_sub = lpt.reference_round(x, fmt, mode, saturate=saturate)
            c["flushed"] += with_sub != 0 and abs(with_sub) < fmt.smallest_normal
    return c


def targeted(fmt):
    tiny, sub = fmt.smallest_normal, math.ldexp(1.0, fmt.emin - fmt.mantissa_bits)
    base = [0.0, -0.0, 1.0, 0.1, tiny, tiny * (1 - 2**-30), tiny - sub / 2, sub, sub / 2,
            sub / 3, sub * 1.5, fmt.max, fmt.max * (1 + 2**-30), fmt.max * 1.2, 1e300,
            5e-324, math.inf, -math.inf, math.nan]
    return np.array(base + [-v for v in base])


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("mode", DET_MODES)
@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: "-".join(o) or "default")
def test_counts_match_reference_on_targeted_values(fmt, mode, opts):
    xs = targeted(fmt)
    with lp.flags() as f:
        lp.round(xs, fmt, mode, **opts)
    assert f.as_dict() == expected_counts(xs, fmt, mode, **opts)


@settings(max_examples=60)
@given(st.sampled_from(FORMATS), st.sampled_from(DET_MODES), st.sampled_from(OPTIONS),
       st.data())
def test_counts_match_reference_on_hypothesis_values(fmt, mode, opts, data):
    xs = np.array(data.draw(st.lists(lpt.values(fmt), min_size=1, max_size=30)))
    with lp.flags() as f:
        lp.round(xs, fmt, mode, **opts)
    assert f.as_dict() == expected_counts(xs, fmt, mode, **opts)


def test_tininess_is_detected_after_rounding():
    # Just below the smallest normal: rounds up to it with an unbounded exponent
    # (not tiny), or stays below it (tiny) -- the x86 rule.
    tiny = lp.FP16.smallest_normal
    with lp.flags() as f:
        lp.round(tiny * (1 - 2**-13), "fp16")       # unbounded result: tiny -> no underflow
    assert (f.inexact, f.underflow) == (1, 0)
    with lp.flags() as f:
        lp.round(tiny * (1 - 2**-11 - 2**-13), "fp16")  # p-bit rounding stays below tiny
    assert (f.inexact, f.underflow) == (1, 1)


def test_nested_contexts_add_into_the_outer_one():
    with lp.flags() as outer:
        lp.round(0.1, "fp16")
        with lp.flags() as inner:
            lp.round([0.1, 1e9], "fp16")
            assert outer.inexact == 1   # the innermost context records
        assert (inner.inexact, inner.overflow) == (2, 1)
    assert (outer.inexact, outer.overflow) == (3, 1)


def test_no_context_no_recording_and_reuse_error():
    f = lp.flags()
    lp.round(0.1, "fp16")
    assert not f
    with f, pytest.raises(RuntimeError, match="already active"):
        f.__enter__()
    f.reset()
    assert f.inexact == 0


def test_threads_do_not_share_a_context():
    seen = {}

    def worker():
        with lp.flags() as g:
            lp.round([0.1, 0.2, 0.3], "fp16")
        seen["thread"] = g.inexact

    with lp.flags() as f:
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        lp.round(0.1, "fp16")
    assert seen["thread"] == 3 and f.inexact == 1


def test_threads_sharing_one_context_lose_no_counts():
    # contextvars.copy_context().run (and asyncio.to_thread) hand the same Flags to
    # several threads; each add is a read-modify-write of seven counters, which lost
    # counts when a thread switch fell inside it (once 311 of 24,000).
    import contextvars
    import sys

    from lowprec.status import record
    n_threads, n_adds = 8, 20_000
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with lp.flags() as f:
            ctx = [contextvars.copy_context() for _ in range(n_threads)]
            barrier = threading.Barrier(n_threads)

            def work(i):
                barrier.wait()
                for _ in range(n_adds):
                    record(inexact=1, underflow=2, invalid=1)

            workers = [threading.Thread(target=ctx[i].run, args=(work, i))
                       for i in range(n_threads)]
            for t in workers:
                t.start()
            for t in workers:
                t.join()
    finally:
        sys.setswitchinterval(interval)
    total = n_threads * n_adds
    assert (f.inexact, f.underflow, f.invalid, f.overflow) == (total, 2 * total, total, 0)


def test_rounding_in_threads_sharing_one_context_counts_every_element():
    import asyncio
    x = np.full(1000, 0.1)               # 0.1 is inexact in FP16: one count per element

    async def main():
        await asyncio.gather(*(asyncio.to_thread(lp.round, x, "fp16") for _ in range(16)))

    with lp.flags() as f:
        asyncio.run(main())
    assert f.inexact == 16 * x.size
