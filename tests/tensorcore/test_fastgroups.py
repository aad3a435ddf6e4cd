"""`lowprec.tensorcore.fastgroups`: the fast paths of the instruction kernels give the
reference kernels' outputs bit for bit: `Instruction.dot` row by row (the kernels of
`fused`, which replay every MMA-Sim vector set at 100%) is the oracle, on random data
of every input format, on data built to straddle each bound of the exactness
argument, on specials, and on the MMA-Sim vectors themselves."""

from __future__ import annotations

import glob
import os
import zlib

import numpy as np
import pytest

import lowprec as lp
from lowprec.bits import decode
from lowprec.formats import FP32, UE4M3
from lowprec.formats import format as fmt_of
from lowprec.tensorcore import driver, fastgroups
from lowprec.tensorcore.catalogue import resolve_model
from lowprec.tensorcore.instructions import Instruction

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "mma")


def reference(ins, a, b, c, fa, fb, out, sa=None, sb=None):
    """`Instruction.dot` on every (row of a, column of b): the reference kernels."""
    M, N = a.shape[0], b.shape[1]
    rows = (np.repeat(a, N, axis=0), np.tile(b.T, (M, 1)))
    s = () if sa is None else (np.repeat(sa, N, axis=0), np.tile(sb.T, (M, 1)))
    return ins.dot(*rows, np.asarray(c, dtype=np.float64).reshape(-1), fa, fb, out,
                   *s).reshape(M, N)


def assert_same(x, y):
    """Equal bit patterns, NaN matching NaN."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    assert np.array_equal(np.isnan(x), np.isnan(y))
    x, y = np.where(np.isnan(x), 0.0, x), np.where(np.isnan(y), 0.0, y)
    bad = x.view(np.int64) != y.view(np.int64)
    assert not bad.any(), f"{bad.sum()} outputs differ, first at {np.argwhere(bad)[0]}: " \
        f"{x[bad][0]!r} != {y[bad][0]!r}"


@pytest.fixture
def counted(monkeypatch):
    """How many outputs took the reference kernel, and how many the truncated sums."""
    seen = {"reference": 0, "truncated": 0}
    original, truncated = fastgroups._reference, fastgroups._truncated_sums

    def counting(kernel, need, *args, **kwargs):
        seen["reference"] += int(need.sum())
        return original(kernel, need, *args, **kwargs)

    def counting_truncated(v, which, *args, **kwargs):
        seen["truncated"] += int(which.sum())
        return truncated(v, which, *args, **kwargs)

    monkeypatch.setattr(fastgroups, "_reference", counting)
    monkeypatch.setattr(fastgroups, "_truncated_sums", counting_truncated)
    return seen


def _fast_instructions():
    """(unit name, instruction, fa, fb) for every unit's instructions the fast paths
    take, each pair of its input formats."""
    from lowprec.tensorcore.catalogue import UNITS
    seen = []
    for unit in UNITS.values():
        for ins in unit.instructions:
            for fa in ins.inputs:
                for fb in ins.inputs:
                    if ins.fast(fa, fb) and not ins.scales:
                        seen.append((unit.name, ins, fa, fb))
    return seen


FAST = _fast_instructions()


def test_the_fast_paths_cover_the_fp8_instructions():
    names = {(u, fa.name) for u, _, fa, _ in FAST}
    for unit in ("b200/tcgen05", "h100/wgmma", "rtx50/mma", "ada/mma", "mi300/mfma"):
        assert any(u == unit for u, _ in names), unit
    assert not fastgroups.covers("nv-fused", 16, lp.formats.BF16, lp.formats.BF16)


def _spread(rng, shape, fmt, lo, hi):
    """Values of ``fmt`` with random signs, significands and exponents in [lo, hi]."""
    e = rng.integers(lo, hi + 1, size=shape)
    x = rng.uniform(1, 2, size=shape) * np.ldexp(1.0, e) * rng.choice([-1, 1], size=shape)
    return np.asarray(lp.round(x, fmt, saturate=True), dtype=np.float64)


@pytest.mark.parametrize("case", FAST, ids=lambda c: f"{c[0]}-{c[1].algorithm}-{c[1].block}-"
                         f"{c[2].name}x{c[3].name}")
def test_random_data_of_every_format(case, counted):
    name, ins, fa, fb = case
    rng = np.random.default_rng(zlib.crc32(f"{name} {fa.name} {fb.name}".encode()))
    K = 3 * ins.block
    for out in ins.outputs:
        a = np.asarray(lp.round(rng.standard_normal((9, K)), fa, saturate=True))
        b = np.asarray(lp.round(rng.standard_normal((K, 7)), fb, saturate=True))
        c = np.asarray(lp.round(rng.standard_normal((9, 7)), out))
        assert_same(ins.dot_matrix(a, b, c, fa, fb, out), reference(ins, a, b, c, fa, fb, out))
        # Exponents spread from the format's least to its largest: many groups truncate.
        a = _spread(rng, (9, K), fa, fa.emin - fa.mantissa_bits, fa.emax)
        b = _spread(rng, (K, 7), fb, fb.emin - fb.mantissa_bits, fb.emax)
        c = np.asarray(lp.round(_spread(rng, (9, 7), FP32, -140, 20), out))
        assert_same(ins.dot_matrix(a, b, c, fa, fb, out), reference(ins, a, b, c, fa, fb, out))


@pytest.mark.parametrize("unit,fmt", [("b200/tcgen05", "e4m3"), ("b200/tcgen05", "e5m2"),
                                      ("h100/wgmma", "e4m3"), ("rtx50/mma", "e5m2"),
                                      ("mi300/mfma", "e4m3fnuz"), ("mi300/mfma", "e5m2fnuz")])
def test_spans_just_under_and_over_the_bound(unit, fmt, counted):
    """Each group of each row holds one large product 2**(h) and one whose last bit is
    h - F + s for s in -2..2 against a c of exponent around h: the product sits on the
    alignment grid, or one or two bits below it, in every group."""
    ins = resolve_model(unit).for_format(fmt)
    f = fmt_of(fmt)
    F = ins.fraction_bits if ins.algorithm.startswith("nv") else 24
    k = ins.block
    rng = np.random.default_rng(5)
    M, N, groups = 20, 12, 4
    a = np.zeros((M, groups * k))
    b = np.zeros((groups * k, N))
    for g in range(groups):
        for i in range(M):
            t0, t1 = g * k + rng.integers(0, k // 2), g * k + k // 2 + rng.integers(0, k // 2)
            top = int(rng.integers(f.emin + 2, f.emax + 1))
            a[i, t0] = 2.0**top * rng.choice([1.0, 1.5, -1.75])
            # Last bit of the second product: its exponent minus f's fraction bits.
            shift = F + int(rng.integers(-2, 3)) - 2 * f.mantissa_bits
            low = max(top - shift, f.emin)
            a[i, t1] = 2.0**low * (1 + rng.integers(0, 2**f.mantissa_bits) / 2**f.mantissa_bits)
        b[g * k:(g + 1) * k] = np.asarray(lp.round(rng.choice([1.0, -1.0, 1.5, 0.0], (k, N)), f))
    a = np.asarray(lp.round(a, f, saturate=True))
    for out in ins.outputs:
        c = np.asarray(lp.round(rng.choice([0.0, 1.0, -3.0, 2.0**-20 * 3], (M, N)), out))
        assert_same(ins.dot_matrix(a, b, c, f, f, out), reference(ins, a, b, c, f, f, out))
    # The bound was crossed in some groups and held in others.
    assert 0 < counted["truncated"] + counted["reference"] < 4 * M * N * len(ins.outputs)


@pytest.mark.parametrize("case", [c for c in FAST if c[2] == c[3]],
                         ids=lambda c: f"{c[0]}-{c[2].name}")
def test_subnormals_zeros_and_specials(case, counted):
    _, ins, f, _ = case
    rng = np.random.default_rng(7)
    K = 2 * ins.block
    sub = f.smallest_subnormal
    a = np.asarray(lp.round(rng.standard_normal((10, K)), f, saturate=True))
    b = np.asarray(lp.round(rng.standard_normal((K, 8)), f, saturate=True))
    a[0] = sub * rng.integers(-3, 4, K)                       # subnormal rows
    b[:, 0] = sub * rng.integers(-3, 4, K)
    a[1] = 0.0                                                # a zero row, -0 entries
    a[2, ::2] = -0.0
    b[:ins.block, 1] = 0.0                                    # a zero group
    special = [np.nan] + ([np.inf, -np.inf] if np.isinf(np.asarray(
        lp.round(1e300, f))) else [])
    a[3, 5] = special[-1]
    b[3, 2] = special[0]
    for out in ins.outputs:
        c = np.asarray(lp.round(rng.standard_normal((10, 8)), out))
        c[4, 4], c[5, 5], c[6, 6] = np.nan, np.inf, -np.inf
        c[1, :] = np.asarray(lp.round(2.0**-130 if out == FP32 else 2.0**-24, out))  # tiny c
        c[7, 1] = 0.0
        assert_same(ins.dot_matrix(a, b, c, f, f, out), reference(ins, a, b, c, f, f, out))


def test_a_zero_group_with_large_zeros_truncates_c():
    """A group of zero products whose zeros carry large exponents (ZERO_EXP plus the
    other factor's) sets the alignment above a tiny c: the reference kernel truncates
    c, and so must the fast path."""
    ins = resolve_model("b200/tcgen05").for_format("e5m2")
    f = fmt_of("e5m2")
    a = np.zeros((2, 32))
    b = np.zeros((32, 2))
    a[0, :16] = 2.0**15
    b[16:, 0] = 2.0**15
    c = np.array([[2.0**-120 * 1.375, 2.0**-100], [3.0, 2.0**-126]])
    assert_same(ins.dot_matrix(a, b, c, f, f, FP32), reference(ins, a, b, c, f, f, FP32))


def _blocked(rng, shape, scheme, exps):
    """``quantize`` of random data whose blocks' scales take the exponents ``exps``."""
    x = rng.standard_normal(shape)
    e = rng.choice(exps, size=(shape[0], shape[1] // 32 + 1))
    x = x * np.ldexp(1.0, np.repeat(e, 32, axis=1)[:, :shape[1]])
    return x


@pytest.mark.parametrize("scheme", ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp4", "nvfp4"])
@pytest.mark.parametrize("model", ["b200/tcgen05", "rtx50/mma"])
def test_mx_matmul_equals_the_reference(scheme, model, monkeypatch, counted):
    rng = np.random.default_rng(11)
    K = 200
    ends = [-120, -60, 0, 60, 120] if scheme.startswith("mx") else [0]
    xa = _blocked(rng, (13, K), scheme, ends)
    xb = _blocked(rng, (9, K), scheme, ends).T
    xa[2] = 0.0                                           # a zero row: zero blocks
    xb[:32, 3] = 0.0
    xa[4, :64] *= 2.0**-40                                # blocks far below the others
    if scheme.startswith("mxfp8"):
        xa[5, 7] = np.nan                                 # a NaN block (a NaN scale)
    qa = lp.mx.quantize(xa, scheme, axis=1)
    qb = lp.mx.quantize(xb, scheme, axis=0)
    if scheme.startswith("mx"):   # E8M0 scales at both ends of their range
        sc = qa.scale_codes.copy()
        sc[6, :] = 0                                      # 2**-127
        sc[7, :] = 254                                    # 2**127
        qa = lp.mx.BlockScaled(qa.scheme, qa.codes, sc, qa.elem, qa.scale_fmt, qa.block,
                               qa.axis, qa.shape, qa.tensor_scale)
    c = rng.standard_normal((13, 9))
    fast = lp.mx.matmul(qa, qb, model=model, c=c)
    monkeypatch.setattr(Instruction, "fast", lambda self, fa, fb: False)
    assert_same(fast, lp.mx.matmul(qa, qb, model=model, c=c))


@pytest.mark.parametrize("ts", [2.0**-126, 2.0**-100, 1e-30, 3.0e38])
def test_nvfp4_tensor_scales_that_underflow_blocks(ts, monkeypatch):
    rng = np.random.default_rng(13)
    x = rng.standard_normal((11, 96)) * 1e-20
    y = rng.standard_normal((96, 6))
    qa = lp.mx.quantize(x, "nvfp4", axis=1, tensor_scale=ts)
    qb = lp.mx.quantize(y, "nvfp4", axis=0)
    fast = lp.mx.matmul(qa, qb, c=np.ones((11, 6)))
    monkeypatch.setattr(Instruction, "fast", lambda self, fa, fb: False)
    assert_same(fast, lp.mx.matmul(qa, qb, c=np.ones((11, 6))))


def test_nvfp4_zero_and_subnormal_ue4m3_scales():
    """UE4M3 scales of zero (a zero term whose exponent still joins the alignment) and
    subnormal, against the reference."""
    ins = resolve_model("b200/tcgen05").instruction("e2m1", scale="ue4m3", scale_block=16)
    rng = np.random.default_rng(17)
    fp4 = fmt_of("e2m1")
    a = np.asarray(lp.round(rng.standard_normal((8, 128)) * 3, fp4, saturate=True))
    b = np.asarray(lp.round(rng.standard_normal((128, 5)) * 3, fp4, saturate=True))
    codes = rng.integers(0, 127, size=(8, 8))
    codes[0] = 0
    codes[1] = rng.integers(1, 8, size=8)                  # subnormal scales
    codes[2, 1::2] = 0
    sa = np.asarray(decode(codes.astype(np.uint8), UE4M3))
    sb = np.asarray(decode(rng.integers(0, 127, size=(8, 5)).astype(np.uint8), UE4M3))
    sb[3, 2] = np.nan
    c = np.asarray(lp.round(rng.standard_normal((8, 5)) * 2.0**-60, FP32))
    c[0, 0] = np.inf
    assert_same(ins.dot_matrix(a, b, c, fp4, fp4, FP32, sa, sb),
                reference(ins, a, b, c, fp4, fp4, FP32, sa, sb))


def test_e8m0_scales_at_both_ends_with_one_scale_per_group():
    ins = resolve_model("b200/tcgen05").instruction("e4m3", scale="e8m0", scale_block=32)
    f = fmt_of("e4m3")
    rng = np.random.default_rng(19)
    a = np.asarray(lp.round(rng.standard_normal((6, 96)) * 100, f, saturate=True))
    b = np.asarray(lp.round(rng.standard_normal((96, 4)), f, saturate=True))
    sa = np.ldexp(1.0, rng.choice([-127, 127, 0, -5], size=(6, 3)))
    sb = np.ldexp(1.0, rng.choice([-127, 127, 3], size=(3, 4)))
    a[1, :32] = 0.0
    c = np.asarray(lp.round(rng.standard_normal((6, 4)), FP32))
    assert_same(ins.dot_matrix(a, b, c, f, f, FP32, sa, sb),
                reference(ins, a, b, c, f, f, FP32, sa, sb))


@pytest.mark.parametrize("model,fmt", [("b200/tcgen05", "e4m3"), ("h100/wgmma", "e4m3"),
                                       ("mi300/mfma", "e4m3fnuz")])
def test_lp_matmul_takes_the_fast_path_within_a_small_memory_bound(model, fmt, monkeypatch):
    """Chunks of a few outputs and batches of a few truncated sums change no bit."""
    rng = np.random.default_rng(23)
    a = _spread(rng, (30, 100), fmt_of(fmt), -9, 7)
    b = np.asarray(lp.round(rng.standard_normal((100, 20)), fmt))
    c = rng.standard_normal((30, 20))
    whole = lp.matmul(a, b, model=model, in_fmt=fmt, c=c)
    monkeypatch.setattr(driver, "MEMORY_BOUND", 1 << 16)
    small = lp.matmul(a, b, model=model, in_fmt=fmt, c=c)
    monkeypatch.setattr(Instruction, "fast", lambda self, fa, fb: False)
    assert_same(whole, small)
    assert_same(whole, lp.matmul(a, b, model=model, in_fmt=fmt, c=c))


def test_stacks_odd_k_and_fp8_promotion_through_lp_matmul(monkeypatch):
    """A batch of products, K not a multiple of the group (zero-padded) and Hopper's
    promotion to FP32 every 128 products: the fast paths change no bit."""
    rng = np.random.default_rng(29)
    a = np.asarray(lp.round(rng.standard_normal((3, 7, 300)), "e4m3"))
    b = np.asarray(lp.round(rng.standard_normal((300, 5)), "e5m2"))
    c = rng.standard_normal((7, 5))
    a8, b8 = lp.tensor(a, "e4m3"), lp.tensor(b, "e5m2")
    models = ["b200/tcgen05", lp.MODELS["h100/wgmma"].with_promotion(128)]
    fast = [lp.matmul(a8, b8, model=m, c=c) for m in models]
    monkeypatch.setattr(Instruction, "fast", lambda self, fa, fb: False)
    for m, got in zip(models, fast):
        assert_same(got, lp.matmul(a8, b8, model=m, c=c))


def _mma_files():
    out = []
    for path in sorted(glob.glob(os.path.join(DATA, "*.npz"))):
        out.append(path)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("path", _mma_files(), ids=os.path.basename)
def test_the_mma_vectors_through_the_fast_paths(path):
    """The rows of each MMA-Sim vector set as the diagonal of products of 64 rows by 64
    columns: the fast paths give the reference's outputs there (and everywhere)."""
    from lowprec.tensorcore import replay as rp
    z = np.load(path, allow_pickle=False)
    meta = lambda key: str(z[key]) if key in z else ""  # noqa: E731
    name = rp.ARCH_UNITS.get((meta("arch"), meta("instruction").split(".")[0]))
    fa, fb, fc, fd = (rp._FORMATS.get(meta(k)) for k in
                      ("a_format", "b_format", "c_format", "d_format"))
    if name is None or None in (fa, fb, fc, fd):
        pytest.skip("not an instruction file")
    unit = resolve_model(name)
    fs = rp._FORMATS.get(meta("scale_format")) if meta("scale_format") else None
    block = int(meta("block_size")) if meta("block_size") else None
    shape = meta("qualifier").split(".")[0]
    known = any(shape in i.shapes for i in unit.instructions)
    ins = unit.instruction(fa, fb, out=fd, shape=shape if known else None, scale=fs,
                           scale_block=block)
    if not ins.fast(fa, fb):
        pytest.skip(f"{ins.algorithm} with {fa.name} x {fb.name}: no fast path")
    a, b = rp._values(z["a"], fa), rp._values(z["b"], fb)
    c = rp._values(z["c"], fc)
    sa = sb = None
    if fs is not None:
        mask = 0x7F if fs == UE4M3 else 0xFF
        sa, sb = (rp._values(np.asarray(z[k]) & mask, fs) for k in ("scale_a", "scale_b"))
    want = ins.dot(a, b, c, fa, fb, fd, sa, sb)
    R = 64
    for r0 in range(0, a.shape[0], R):
        rows = slice(r0, r0 + R)
        n = a[rows].shape[0]
        cm = np.tile(c[rows][None, :], (n, 1))            # column j's c on the diagonal
        got = ins.dot_matrix(a[rows], b[rows].T, cm, fa, fb, fd,
                             None if sa is None else sa[rows],
                             None if sb is None else sb[rows].T)
        assert_same(np.diagonal(got), want[rows])


@pytest.mark.parametrize("settled", [fastgroups.SETTLED, 0])
def test_the_chain_takes_each_of_its_paths(settled, monkeypatch):
    """A chain of MXFP8 groups where the accumulator falls far below a group's
    products (c truncated), a group with tiny elements beside large ones (products
    truncated) and a group whose scale puts last bits below 2**-149 (a group at a
    time): each path is taken, and the result is the reference's. With nothing settled
    one by one, the group kernel takes every group that is not cleared."""
    monkeypatch.setattr(fastgroups, "SETTLED", settled)
    ins = resolve_model("b200/tcgen05").instruction("e4m3", scale="e8m0", scale_block=32)
    f = fmt_of("e4m3")
    rng = np.random.default_rng(31)
    M, N = 12, 10
    a = np.asarray(lp.round(rng.standard_normal((M, 128)) * 8, f, saturate=True))
    b = np.asarray(lp.round(rng.standard_normal((128, N)), f, saturate=True))
    a[:, 64:72] = np.asarray(lp.round(rng.standard_normal((M, 8)) * 2.0**-8, f))
    b[64:72] = np.asarray(lp.round(rng.standard_normal((8, N)) * 2.0**-8, f))
    sa = np.ldexp(1.0, np.tile([0, 24, 0, -120], (M, 1)))
    sb = np.ldexp(1.0, np.tile([[0], [0], [0], [-20]], (1, N)))
    c = np.asarray(lp.round(rng.standard_normal((M, N)), FP32))
    seen = {"settle": 0, "short": 0, "group": 0}
    settle, group = fastgroups._settle, fastgroups.nv_fused

    def counting_settle(top, d, v, q, F, terms):
        seen["settle"] += top.size

        def counted_terms(s):
            seen["short"] += s.size
            return terms(s)
        return settle(top, d, v, q, F, counted_terms)

    def counting_group(*args, **kwargs):
        seen["group"] += 1
        return group(*args, **kwargs)

    monkeypatch.setattr(fastgroups, "_settle", counting_settle)
    monkeypatch.setattr(fastgroups, "nv_fused", counting_group)
    assert_same(ins.dot_matrix(a, b, c, f, f, FP32, sa, sb),
                reference(ins, a, b, c, f, f, FP32, sa, sb))
    if settled:
        assert seen["settle"] > 0 and seen["short"] > 0 and seen["group"] > 0, seen
    else:
        assert seen["settle"] == 0 and seen["group"] > 1, seen


@pytest.mark.parametrize("name", ["e4m3", "e5m2", "e4m3fnuz", "e2m1", "e3m2", "e2m3", "ue4m3",
                                  "fp16", "bf16"])
def test_exponents_by_table_on_every_value(name):
    """Every finite value of each format: the exponent is max(floor(log2|x|), emin)
    (numpy's frexp) and |x| / 2**lsb is an odd integer; zeros are flagged."""
    f = fmt_of(name)
    x = np.asarray(decode(np.arange(2**f.bits, dtype=np.uint16 if f.bits > 8 else np.uint8),
                          f), dtype=np.float64)
    x = x[np.isfinite(x)]
    nz, e, lsb = fastgroups._exponents_of(x, f)
    assert np.array_equal(nz, x != 0)
    v = x[nz]
    assert np.array_equal(e[nz], np.maximum(np.frexp(v)[1] - 1, f.emin))
    odd = np.ldexp(np.abs(v), -lsb[nz].astype(np.int32))
    assert np.array_equal(odd, np.trunc(odd)) and np.all(np.fmod(odd, 2) == 1)


@pytest.mark.parametrize("name", ["e4m3", "e5m2"])
def test_a_small_accumulator_on_the_earlier_grid(name, monkeypatch):
    """Accumulators far below a group's products, some whose last bit lies on the
    alignment grid (cleared by `_uncleared`: nothing is truncated) and some with bits
    below it (settled): the chain equals the reference, and the last-bit test clears
    outputs that the bounds on |d| alone leave to be settled."""
    ins = resolve_model("b200/tcgen05").instruction(name)
    f = fmt_of(name)
    rng = np.random.default_rng(37)
    M, N, K = 16, 12, 96
    a = np.asarray(lp.round(rng.standard_normal((M, K)) * 64, f, saturate=True))
    b = np.asarray(lp.round(rng.standard_normal((K, N)) * 64, f, saturate=True))
    b[32:64] = -b[:32]                   # group 1 cancels group 0 where a's halves agree
    a[::2, 32:64] = a[::2, :32]
    # c: powers of two (last bit high) and values with 20 significant bits, tiny or not.
    c = np.where(rng.random((M, N)) < 0.5, np.ldexp(1.0, rng.integers(-12, 4, (M, N))),
                 np.ldexp(rng.integers(1 << 19, 1 << 20, (M, N)), rng.integers(-40, -19, (M, N))))
    c = np.asarray(lp.round(c * rng.choice([-1, 1], (M, N)), FP32))
    seen = {"in": 0, "out": 0}
    uncleared = fastgroups._uncleared

    def counting(redo, *args):
        left = uncleared(redo, *args)
        seen["in"] += redo.size
        seen["out"] += 0 if left is None else left.size
        return left

    monkeypatch.setattr(fastgroups, "_uncleared", counting)
    assert_same(ins.dot_matrix(a, b, c, f, f, FP32), reference(ins, a, b, c, f, f, FP32))
    assert seen["in"] > seen["out"] > 0, seen
