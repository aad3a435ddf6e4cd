"""Counter-based stochastic rounding: the random word of element i is a
function of (seed, i) alone, so "sr" gives the same results for any chunk size,
thread count, span and split of the array, and a prefix rounds as the same prefix of
a longer array. The construction is checked against NumPy's Philox and SeedSequence
directly, and each decision against a Fraction computation of the probability."""

from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp
from helpers import assert_bits
from lowprec.engine import parallel

N = 400_000


def _data(seed=0, n=N):
    """Normal values over many binades, with subnormal-range values, zeros and ties."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * 2.0 ** rng.integers(-30, 10, n)
    x[::97] = 0.0
    x[::89] = 1.0 + 2.0 ** -8          # a BF16 tie
    return x


@pytest.fixture
def restore_chunk_and_threads():
    chunk, threads = parallel.CHUNK, lp.threads()
    yield
    parallel.CHUNK = chunk
    lp.threads(threads)


@pytest.mark.parametrize("fmt", ["bf16", "fp16", "e4m3", "fp4_e2m1", "fp32", "fp64"])
def test_same_for_any_chunk_size_and_thread_count(fmt, restore_chunk_and_threads):
    x = _data()
    x = x if fmt != "fp64" else x * 2.0 ** -1040       # FP64: its subnormals move
    whole = lp.round(x, fmt, "sr", rng=7)
    for chunk in (2 ** 10, 2 ** 15, 2 ** 19):
        parallel.CHUNK = chunk
        for threads in (1, 2, 3, 8):
            lp.threads(threads)
            r = lp.round(x, fmt, "sr", rng=7)
            assert np.array_equal(r.view(np.uint64), whole.view(np.uint64)), (chunk, threads)


@pytest.mark.parametrize("fmt", ["bf16", "e4m3"])
def test_prefixes_and_offsets(fmt):
    x = _data(1)
    whole = lp.round(x, fmt, "sr", rng=3, sr_bits=9)
    assert_bits(lp.round(x[:200_000], fmt, "sr", rng=3, sr_bits=9), whole[:200_000])
    for a, b in ((1, 5), (4097, 70_001), (399_990, N)):
        part = lp.round(x[a:b], fmt, "sr", rng=3, sr_bits=9, offset=a)
        assert_bits(part, whole[a:b], f"{a}:{b}")
    # 2-D: C order, as the flattened array
    y = x[:1000].reshape(20, 50)
    assert_bits(lp.round(y, fmt, "sr", rng=3, sr_bits=9).ravel(),
                lp.round(x[:1000], fmt, "sr", rng=3, sr_bits=9))


def _word(seed, p):
    """The documented construction, from NumPy's own generators."""
    k = np.random.SeedSequence(seed).generate_state(2, np.uint64)
    key = int(k[0]) | (int(k[1]) << 64)
    return int(np.random.Philox(key=key, counter=p // 4).random_raw(4)[p % 4])


def test_each_decision_follows_the_documented_construction():
    """BF16 normals (the encoding path): element p rounds away from zero exactly when
    the top 45 bits of word p, added to the 45 bits rounding drops, carry: with
    probability the dropped fraction f (exact: Fractions)."""
    rng = np.random.default_rng(5)
    x = 1.0 + rng.random(300) * 3.0
    r = lp.round(x, "bf16", "sr", rng=11)
    ups = 0
    for p, (v, got) in enumerate(zip(x, r)):
        e = Fraction(2) ** (int(np.floor(np.log2(v))) - 7)       # BF16's quantum there
        down = (Fraction(v) // e) * e
        dropped = (Fraction(v) - down) / e * 2 ** 45              # an integer: v has 53 bits
        assert dropped.denominator == 1
        up = (_word(11, p) >> 19) + dropped >= 2 ** 45
        ups += up
        assert Fraction(got) == (down + e if up else down), p
    assert 0 < ups < 300


def test_a_generator_gives_one_draw_per_call():
    g = np.random.default_rng(2)
    seed = int(np.random.default_rng(2).integers(0, 2 ** 63))
    x = _data(2, 1000)
    assert np.array_equal(lp.round(x, "fp16", "sr", rng=g), lp.round(x, "fp16", "sr", rng=seed))
    twin = np.random.default_rng(2)
    twin.integers(0, 2 ** 63)
    assert g.integers(0, 2 ** 63) == twin.integers(0, 2 ** 63)   # advanced by one draw


@pytest.mark.parametrize("op", ["add", "mul", "div", "sqrt", "fma"])
def test_arithmetic_by_position(op, restore_chunk_and_threads):
    rng = np.random.default_rng(3)
    a, b, c = (rng.standard_normal(100_000) for _ in range(3))
    fn = getattr(lp, op)
    args = {"add": (a, b), "mul": (a, b), "div": (a, b), "sqrt": (np.abs(a),),
            "fma": (a, b, c)}[op]
    whole = fn(*args, "bf16", "sr", rng=9)
    parallel.CHUNK = 2 ** 11
    lp.threads(3)
    assert np.array_equal(fn(*args, "bf16", "sr", rng=9), whole)
    part = fn(*(v[500:7000] for v in args), "bf16", "sr", rng=9, offset=500)
    assert np.array_equal(part, whole[500:7000])


def test_fp64_target_arithmetic_by_position(restore_chunk_and_threads):
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal(50_000), rng.standard_normal(50_000)
    whole = lp.mul(a, b, "fp64", "sr", rng=1)
    parallel.CHUNK = 2 ** 10
    assert np.array_equal(lp.mul(a, b, "fp64", "sr", rng=1), whole)


@pytest.mark.parametrize("fmt", ["bf16", "fp16"])
def test_sequential_sums_chain_across_pieces(fmt):
    """A sequential sum (and cumsum) continued from a piece's result, that result as
    term 0 and offset = the next term's index - 1, is the whole sum."""
    x = np.random.default_rng(6).random(3000)
    whole = lp.sum(x, fmt, "sr", order="sequential", rng=5)
    prefix = lp.cumsum(x, fmt, "sr", rng=5)
    assert prefix[-1] == whole
    for k in (1, 1000, 2999):
        head = lp.sum(x[:k], fmt, "sr", order="sequential", rng=5)
        tail = lp.sum(np.concatenate([[head], x[k:]]), fmt, "sr", order="sequential",
                      rng=5, offset=k - 1)
        assert tail == whole, k
        c = lp.cumsum(np.concatenate([[head], x[k:]]), fmt, "sr", rng=5, offset=k - 1)
        assert np.array_equal(c[1:], prefix[k:]), k
    a, b = x[:1500], x[1500:]
    fused = lp.dot(a, b, fmt, "sr", fused=True, rng=5)
    head = lp.dot(a[:700], b[:700], fmt, "sr", fused=True, rng=5)
    tail = lp.dot(np.concatenate([[head], a[700:]]), np.concatenate([[1.0], b[700:]]),
                  fmt, "sr", fused=True, rng=5, offset=699)
    assert tail == fused


def test_fast_sequential_path_equals_the_stepwise_reference():
    from lowprec.arith.sequential import sequential, stepwise
    from lowprec.engine.plan import plan
    x = np.random.default_rng(8).standard_normal((5000, 1)) * 2.0 ** 40
    x[::50] = 2.0 ** -140        # subnormal-range terms: the reference steps
    p = plan("bf16", "sr", rng=12)
    assert np.array_equal(sequential(p, x), stepwise(p, x))
    assert np.array_equal(sequential(p, x, prefix=True), stepwise(p, x, prefix=True))


def test_fp64_target_extended_paths_by_position(restore_chunk_and_threads):
    """FP64 results that need more than float64's own rounding (operands float64 cannot
    hold, products and quotients outside float64's comfortable range, overflow, the
    flush without subnormals) draw each element's own word too."""
    n = 5000
    rng = np.random.default_rng(13)
    x = np.full(n, 2**53 + 1, np.int64)
    x[::3] = rng.integers(-2**62, 2**62, x[::3].size)
    y = np.full(n, 0.5)
    a = np.where(np.arange(n) % 2 == 0, 1.5, 1.3 * 2.0 ** -500) * rng.random(n)
    b = np.where(np.arange(n) % 2 == 0, 1.25, 1.7 * 2.0 ** -480) * rng.random(n)
    big = np.full(n, np.finfo(np.float64).max) * (1 - 2.0 ** -53 * rng.random(n))
    tiny = rng.random(n) * 2.0 ** -1022
    cases = [(lp.add, (x, y), {}), (lp.mul, (a, b), {}), (lp.div, (a, b), {}),
             (lp.fma, (a, b, a), {}), (lp.add, (big, big * 2.0 ** -60), {}),
             (lp.mul, (tiny, 0.75 + rng.random(n)), {"subnormals": False})]
    for fn, args, kw in cases:
        whole = fn(*args, "fp64", "sr", rng=3, **kw)
        for chunk in (2 ** 10, 2 ** 12):
            parallel.CHUNK = chunk
            assert_bits(fn(*args, "fp64", "sr", rng=3, **kw), whole, f"{fn.__name__} {chunk}")
        parallel.CHUNK = 2 ** 16
        for lo, hi in ((1, 7), (1001, 4999)):
            part = fn(*(v[lo:hi] for v in args), "fp64", "sr", rng=3, offset=lo, **kw)
            assert_bits(part, whole[lo:hi], f"{fn.__name__} {lo}")
    # no word repeats every 4096 elements of the exact path
    r = lp.add(np.full(9000, 2**53 + 1, np.int64), np.full(9000, 0.5), "fp64", "sr", rng=1)
    assert not np.array_equal(r[:900], r[4096:4996])
