"""Small calls made cheap, held to the same answers as before.

A call reuses what it can: its `Plan` (cached per options, read-only; "sr" attaches
its generator to a copy of its own), and, below `scratch.SMALL` elements, this
thread's work buffers. These tests hold that nothing leaks between calls or threads
through what is reused (results never alias a reused buffer, a cached plan never
carries a generator).
"""

from __future__ import annotations

import sys
import threading
from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp
import lowprec.engine.parallel as parallel
from helpers import assert_same
from lowprec import testing as lpt
from lowprec.engine import scratch
from lowprec.engine.plan import cached_plan, plan

DETERMINISTIC = ["rne", "rna", "rz", "ru", "rd", "ro"]


def reference(xs, fmt, mode, **opts):
    return np.array([lpt.reference_round(float(v), fmt, mode, **opts) for v in xs])


# -- cached plans -----------------------------------------------------------------------

def test_a_plan_is_cached_per_options_and_read_only(monkeypatch):
    # Fresh caches: earlier tests may have pushed BF16's plan out of one of the two
    # (each keeps the latest 128), and the identities below are about one process.
    import lowprec.engine.plan as plan_module
    monkeypatch.setattr(plan_module, "_PLANS", type(plan_module._PLANS)(128))
    monkeypatch.setattr(plan_module, "_CHECKED", type(plan_module._CHECKED)(128))
    a = plan("bf16", "rne")
    assert plan(lp.BF16, "rne") is cached_plan(lp.BF16, "rne", None, False, None)
    assert a is plan("bf16", "rne")
    assert plan("bf16", "rne", saturate=True) is not a
    with pytest.raises(AttributeError, match="read-only"):
        a.max = 1.0
    assert a.max == lp.BF16.max


def test_the_fast_plan_lookup_still_checks_every_option():
    plan("bf16", "rne")                             # cached under these options
    with pytest.raises(TypeError, match="subnormals"):
        plan("bf16", "rne", subnormals=1)            # 1 == True, but not a bool
    with pytest.raises(TypeError, match="saturate"):
        plan("bf16", "rne", saturate=np.float64(0))
    with pytest.raises(ValueError, match="unknown rounding mode"):
        plan("bf16", "RNE")
    with pytest.raises(TypeError, match="rng"):
        lp.round(1.0, "bf16", rng=True)


def test_a_named_copy_of_a_format_keeps_its_own_name():
    mine = lp.Format(8, 7, name="MyBF16")            # equal to BF16, another name
    assert plan(mine, "rne").fmt.name == "MyBF16"
    assert plan(lp.BF16, "rne").fmt.name == "BF16"


def test_sr_plans_never_share_a_generator_with_the_cache():
    cached = cached_plan(lp.FP16, "sr", None, False, None)
    g1, g2 = np.random.default_rng(1), np.random.default_rng(2)
    p1 = plan("fp16", "sr", rng=g1)
    p2 = plan("fp16", "sr", rng=g2)
    assert p1.stream.seed == np.random.default_rng(1).integers(0, 2**63)
    assert p2.stream.seed == np.random.default_rng(2).integers(0, 2**63)
    assert cached.stream is None
    assert p1 is not cached and p2 is not cached


@pytest.mark.parametrize("fmt", ["bf16", "fp16", "e4m3", "fp4", "e2m3", "fp64"])
@pytest.mark.parametrize("n", [1, 10, 1000, 5000])
def test_sr_same_seed_same_result_whatever_ran_in_between(fmt, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n) * 2.0 ** rng.integers(-8, 4, n)
    first = lp.round(x, fmt, "sr", rng=11)
    lp.round(x, fmt, "sr", rng=np.random.default_rng(12))     # another generator
    lp.add(x, x, fmt, "sr", rng=13)
    lp.round(x, fmt, "rne")
    again = lp.round(x, fmt, "sr", rng=11)
    assert np.array_equal(first.view(np.uint64), again.view(np.uint64))
    with lp.flags():                                  # listening takes other paths
        listened = lp.round(x, fmt, "sr", rng=11)
    assert np.array_equal(first.view(np.uint64), listened.view(np.uint64))


# -- reused buffers ----------------------------------------------------------------------

CALLS = {
    "round": lambda x, y: lp.round(x, "bf16"),
    "round-e4m3-rz": lambda x, y: lp.round(x, "e4m3", "rz"),
    "round-fp16-float32": lambda x, y: lp.round(x.astype(np.float32), "fp16", "ru"),
    "add": lambda x, y: lp.add(x, y, "bf16"),
    "mul-ro": lambda x, y: lp.mul(x, y, "fp16", "ro"),
    "div": lambda x, y: lp.div(x, y, "e5m2"),
    "fma": lambda x, y: lp.fma(x, y, x, "tf32", "rd"),
    "sum": lambda x, y: lp.sum(x.reshape(-1, 2), "bf16", axis=0),
    "tensor-add": lambda x, y: (lp.tensor(x, "bf16") + lp.tensor(y, "bf16"))._v,
    "encode": lambda x, y: lp.encode(x, "fp16"),
}


@pytest.mark.parametrize("n", [2, 10, 1000])
@pytest.mark.parametrize("call", list(CALLS))
def test_results_never_alias_reused_buffers(call, n):
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    f = CALLS[call]
    want = f(x.copy(), y.copy())
    first = f(x, y)
    kept = first.copy()
    second = f(x, y)
    assert not np.shares_memory(first, second)
    first[...] = 7            # a caller writing into its result
    third = f(x, y)
    assert np.array_equal(second, kept) and np.array_equal(third, kept)
    assert np.array_equal(want, kept)
    assert np.all(first == 7)


def test_scratch_is_per_thread_and_a_nested_taker_gets_its_own():
    a = scratch.take("test", 8, np.empty)
    assert scratch.take("test", 8, np.empty) is not a         # a is still taken
    scratch.give("test", 8, a)
    seen = []
    t = threading.Thread(target=lambda: seen.append(scratch.take("test", 8, np.empty)))
    t.start()
    t.join()
    assert seen[0] is not a                                   # another thread: its own
    assert scratch.take("test", 8, np.empty) is a
    big = scratch.SMALL + 1
    b = scratch.take("test", big, np.empty)
    scratch.give("test", big, b)
    assert scratch.take("test", big, np.empty) is not b       # large: never kept


def test_scratch_keeps_a_bounded_number_of_sizes():
    for n in range(1, 3 * scratch.KEPT):
        scratch.give("bounded", n, np.empty(n))
    kept = [n for n in range(1, 3 * scratch.KEPT)
            if scratch.take("bounded", n, lambda k: None) is not None]
    assert len(kept) == scratch.KEPT and kept == list(range(2 * scratch.KEPT, 3 * scratch.KEPT))


@pytest.mark.parametrize("mode", ["rne", "ro", "sr"])
def test_two_threads_rounding_different_formats_at_once(mode):
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal(n) * 2.0 ** rng.integers(-20, 20, n) for n in (10, 300, 2000)]
    jobs = [("bf16", "add"), ("e4m3", "round"), ("fp16", "fma"), ("fp4", "round")]
    kw = {"rng": 9} if mode == "sr" else {}

    def compute(fmt, op):
        if op == "round":
            return [lp.round(x, fmt, mode, **kw) for x in xs]
        if op == "add":
            return [lp.add(x, x[::-1], fmt, mode, **kw) for x in xs]
        return [lp.fma(x, x[::-1], x, fmt, mode, **kw) for x in xs]

    single = {job: compute(*job) for job in jobs}
    if mode != "sr":
        for x, got in zip(xs, single[("e4m3", "round")]):
            sample = x[:50]
            assert_same(got[:50], reference(sample, "e4m3", mode), sample)
    got = {job: [] for job in jobs}
    errors = []
    barrier = threading.Barrier(len(jobs))

    def work(job):
        barrier.wait()
        try:
            for _ in range(20):
                got[job].append(compute(*job))
        except Exception as exc:     # noqa: BLE001 - collected, asserted below
            errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(job,)) for job in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors[0]
    for job in jobs:
        for results in got[job]:
            for r, s in zip(results, single[job]):
                assert np.array_equal(r.view(np.uint64), s.view(np.uint64)), job


def test_threads_of_the_pool_share_a_plan_without_changing_results(monkeypatch):
    monkeypatch.setattr(parallel, "CHUNK", 64)
    monkeypatch.setattr(parallel, "PARALLEL_MIN", 128)
    x = np.random.default_rng(8).standard_normal(2000) * 1e-3
    before = lp.threads(3)
    try:
        with lp.flags() as threaded:
            got = lp.add(x, x[::-1], "fp16", "ru")
    finally:
        lp.threads(before)
    with lp.flags() as single:
        want = lp.add(x, x[::-1], "fp16", "ru")
    assert np.array_equal(got, want) and threaded.as_dict() == single.as_dict()
    exact = [Fraction(a) + Fraction(b) for a, b in zip(x[:40], x[::-1][:40])]
    assert_same(got[:40], [lpt.reference_round(v, "fp16", "ru") for v in exact])
