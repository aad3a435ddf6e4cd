"""Instruction models of matrix units against MMA-Sim's vectors (tests/data/mma) and
against step-by-step references of the fused dot-add (tests/oracles/instructions.py)."""

import math

import numpy as np
import pytest

import lowprec as lp
from helpers import DATA, ROOT
from lowprec.teaching.cli import main
from lowprec.tensorcore.catalogue import UNITS
from oracles.instructions import amx_reference, multipass_reference, nv_reference
from peers import ml_dtypes, requires_ml_dtypes

DATA = DATA / "mma"
FILES = sorted(DATA.glob("*.npz"))


def test_the_vectors_are_all_there():
    assert len(FILES) == 96
    assert (DATA / "LICENCE").exists() and (DATA / "README.md").exists()
    assert sum(np.load(p)["d"].size for p in FILES) == 96 * 4096


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_instruction_reproduces_every_row(path):
    r = lp.testing.replay(path)
    assert r.total == 4096
    assert r.ok, str(r)


def test_every_unit_is_a_model_and_every_file_has_its_unit():
    for name, unit in UNITS.items():
        assert lp.MODELS[name] is unit and unit.__doc__
    units = {lp.testing.replay(p).model for p in FILES}
    assert units == set(UNITS) - {"amx/tdpbf16ps"}           # AMX: no vectors


def test_a_wrong_model_is_caught_and_its_rows_decoded():
    # Volta keeps F = 23 bits in groups of 4, Ampere 24 in groups of 8 (its m16n8k16 is
    # Turing's k8 twice, so t4/mma would pass): the Ampere rows expose Volta's model.
    r = lp.testing.replay(DATA / "a100_mma_f16_f16.npz", model="v100/mma", max_mismatches=3)
    assert 0 < r.matched < r.total and len(r.mismatches) == 3
    row = r.mismatches[0]
    assert len(row["a"]) == 16 and row["expected"] != row["got"]
    assert "rows match" in str(r)


def test_replay_reads_the_tensor_core_measurements_too():
    r = lp.testing.replay(DATA.parent / "tensorcore" / "a100_bf16.npz")
    assert r.ok and r.total == 5000 and r.model == "a100"


def test_the_command_line_replays(capsys):
    assert main(["replay", str(DATA / "v100_mma_f16_f32.npz")]) == 0
    assert "4096/4096 rows match" in capsys.readouterr().out
    assert main(["replay", str(DATA / "a100_mma_f16_f16.npz"), "--model", "v100/mma"]) == 1
    assert main(["replay", str(DATA / "a100_mma_f16_f16.npz"), "--model", "h100"]) == 2


# -- matmul's chaining and padding against README §5.2 on Fractions -------------------

@pytest.mark.parametrize("model, block, F", [("a100/mma", 8, 24), ("v100/mma", 4, 23),
                                             ("b200/tcgen05", 16, 25)])
def test_matmul_chains_groups_as_the_reference(model, block, F):
    rng = np.random.default_rng(block)
    K = 37                                   # not a multiple of any block: padded
    a = lp.round(rng.standard_normal((4, K)) * 2.0 ** rng.integers(-12, 8, (4, K)), "fp16")
    b = lp.round(rng.standard_normal((K, 3)) * 2.0 ** rng.integers(-12, 8, (K, 3)), "fp16")
    a[0, :5] = 0.0
    c = lp.round(rng.standard_normal((4, 3)), "fp16")
    d = lp.matmul(a, b, model=model, c=c, in_fmt="fp16", out_fmt="fp16")
    for i in range(4):
        for j in range(3):
            want = nv_reference(a[i].tolist(), b[:, j].tolist(), float(c[i, j]), block, F, -14)
            assert d[i, j] == want, (i, j)


def test_block_scaled_instructions_need_block_scaled_operands():
    with pytest.raises(ValueError, match="block scales"):
        lp.matmul(np.ones((2, 64)), np.ones((64, 2)), model="b200/tcgen05", in_fmt="fp4")
    with pytest.raises(ValueError, match="does not take"):
        lp.matmul(np.ones((2, 4)), np.ones((4, 2)), model="v100/mma", in_fmt="bf16")


def test_instruction_picks_by_shape_and_scales():
    mi300 = lp.MODELS["mi300/mfma"]
    assert mi300.instruction("fp16", shape="f32_4x4x4_16b_f16").block == 4
    assert mi300.instruction("fp16", shape="f32_32x32x8_f16").block == 8
    b200 = lp.MODELS["b200/tcgen05"]
    nvfp4 = b200.instruction("fp4", scale="ue4m3", scale_block=16)
    assert nvfp4.algorithm == "nv-fp4" and nvfp4.fraction_bits == 35
    with pytest.raises(ValueError, match="no instruction"):
        b200.instruction("fp4", scale="ue4m3", scale_block=32)


def test_the_docs_table_is_the_catalogue():
    page = (ROOT / "docs" / "tensor-cores.md").read_text()
    from lowprec.tensorcore.catalogue import unit_table
    assert unit_table() in page


# -- AMX TDPBF16PS against a Fraction reference of the SDM's description ------------

def test_amx_tdpbf16ps_against_the_reference():
    rng = np.random.default_rng(32)
    n, K = 300, 32
    a = lp.round(rng.standard_normal((n, K)) * 2.0 ** rng.integers(-140, 60, (n, K)), "bf16")
    b = lp.round(rng.standard_normal((n, K)) * 2.0 ** rng.integers(-20, 20, (n, K)), "bf16")
    a[:20] = lp.round(rng.standard_normal((20, K)) * 2.0**-130, "bf16")   # denormals
    c = lp.round(rng.standard_normal(n) * 2.0 ** rng.integers(-130, 10, n), "fp32")
    d = lp.matmul(a[:, None, :], b[:, :, None], model="amx/tdpbf16ps", c=c[:, None, None],
                  in_fmt="bf16")[:, 0, 0]
    want = np.array([amx_reference(a[i].tolist(), b[i].tolist(), float(c[i])) for i in range(n)])
    assert np.array_equal(d, want) and np.array_equal(np.signbit(d), np.signbit(want))


def test_fp8_promotion_adds_the_partial_sums_in_fp32():
    rng = np.random.default_rng(128)
    K = 512
    a = lp.round(rng.standard_normal((6, K)), "e4m3")
    b = lp.round(rng.standard_normal((K, 5)), "e4m3")
    c = lp.round(rng.standard_normal((6, 5)), "fp32")
    m = lp.MODELS["h100/wgmma"].with_promotion(128)
    d = lp.matmul(a, b, model=m, c=c, in_fmt="e4m3")
    # By hand: each 128 products through the unit from 0, added one by one to c in FP32.
    total = c
    for j in range(0, K, 128):
        part = lp.matmul(a[:, j:j + 128], b[j:j + 128], model="h100/wgmma", in_fmt="e4m3")
        total = lp.add(total, part, "fp32")
    assert np.array_equal(d, total)
    assert not np.array_equal(d, lp.matmul(a, b, model="h100/wgmma", c=c, in_fmt="e4m3"))
    with pytest.raises(ValueError, match="multiple"):
        lp.MODELS["h100/wgmma"].with_promotion(100)


# -- XLA multi-pass algorithms against plain float32 arithmetic ---------------------

def _to_bf16(x):
    return x.astype(ml_dtypes.bfloat16).astype(np.float32)


def _to_tf32(x):          # RNE to 10 fraction bits, on the float32 bits
    u = x.view(np.uint32).astype(np.uint64)
    u = (u + 0xFFF + ((u >> 13) & 1)) & ~np.uint64(0x1FFF)
    return u.astype(np.uint32).view(np.float32)


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("name", ["xla/bf16_bf16_f32_x3", "xla/bf16_bf16_f32_x6",
                                  "xla/tf32_tf32_f32_x3"])
def test_xla_multipass_against_float32_arithmetic(name):
    m = lp.MODELS[name]
    rng = np.random.default_rng(6)
    a = (rng.standard_normal((5, 33)) * 2.0 ** rng.integers(-10, 10, (5, 33))).astype(np.float32)
    b = rng.standard_normal((33, 4)).astype(np.float32)
    c = rng.standard_normal((5, 4)).astype(np.float32)
    split = _to_bf16 if m.split == lp.BF16 else _to_tf32
    want = multipass_reference(a, b, c, split, m.pieces, m.terms)
    got = lp.matmul(a.astype(float), b.astype(float), model=name, c=c.astype(float),
                    in_fmt="fp32")
    assert np.array_equal(got, want)
    exact = lp.matmul(a.astype(float), b.astype(float), model="exact", c=c.astype(float),
                      in_fmt="fp32")
    assert np.abs(got - exact).max() < np.abs(exact).max() * 2.0**-12


MIXED = [p for p in FILES if str(np.load(p)["a_format"]) != str(np.load(p)["b_format"])
         and str(np.load(p)["scale_format"]) in ("", "-")]


@pytest.mark.parametrize("path", MIXED, ids=lambda p: p.stem)
def test_lp_matmul_takes_two_fp8_formats_through_their_instruction(path):
    """Tensors of two FP8 formats go through the unit's mixed instruction, not through
    a promoted format: every row of the simulator's vectors, by lp.matmul."""
    d = np.load(path)
    names = {"f32": "fp32", "f16": "fp16"}
    fa, fb, fo, fc = (lp.format(names.get(str(d[k]), str(d[k])))
                      for k in ("a_format", "b_format", "d_format", "c_format"))
    a = lp.tensor(lp.decode(d["a"], fa)[:, None, :], fa)
    b = lp.tensor(lp.decode(d["b"], fb)[:, :, None], fb)
    c = lp.decode(d["c"], fc)[:, None, None]
    model = lp.testing.replay(path).model
    got = lp.matmul(a, b, c=c, model=model, out_fmt=fo).values.reshape(-1)
    want = lp.decode(d["d"], fo)
    same = ((got == want) & (np.signbit(got) == np.signbit(want))) | (
        np.isnan(got) & np.isnan(want))
    assert same.all(), f"{np.count_nonzero(~same)} rows differ"
    promoted = lp.matmul(a.astype("fp16"), b.astype("fp16"), c=c, model=model, out_fmt=fo)
    assert not np.array_equal(promoted.values.reshape(-1), want, equal_nan=True)


# -- construction checks -----------------------------------------------------------------

def test_fraction_bits_are_bounded_by_the_exact_sum():
    # block + 1 terms below 2**(F + 2) sum exactly in float64 while
    # F + 2 + ceil(log2(block + 1)) <= 53: F <= 48 for a group of 4.
    from lowprec.tensorcore.instructions import Instruction, MatrixUnit
    limit = 53 - 2 - math.ceil(math.log2(4 + 1))
    u = MatrixUnit("x", (Instruction("nv-fused", 4, ("fp16",), fraction_bits=limit),))
    got = lp.matmul(np.ones((1, 8)), np.ones((8, 1)), model=u, in_fmt="fp16")
    assert np.asarray(got).tolist() == [[8.0]]
    for F in (limit + 1, 61):
        with pytest.raises(ValueError, match=f"fraction_bits={F} does not fit the exact "
                           f"53-bit sum .* at most {limit}"):
            Instruction("nv-fused", 4, ("fp16",), fraction_bits=F)
    with pytest.raises(ValueError, match="at most 38"):    # 4 groups of 16 and c
        Instruction("nv-fp4", 64, ("fp4",), fraction_bits=39, scales=("e8m0",),
                    scale_block=32)


def test_units_and_instructions_refuse_malformed_parts():
    from lowprec.tensorcore.instructions import Instruction, MatrixUnit
    ins = Instruction("nv-fused", 4, ("fp16",))
    with pytest.raises(TypeError, match="instructions must be Instruction objects, got str"):
        MatrixUnit("x", ("abc",))
    with pytest.raises(TypeError, match="instructions must be a tuple of Instruction, got str"):
        MatrixUnit("x", "abc")
    with pytest.raises(TypeError, match="write"):
        MatrixUnit("x", ins)
    with pytest.raises(ValueError, match="at least one instruction"):
        MatrixUnit("x", ())
    assert MatrixUnit("x", [ins]).instructions == (ins,)
    with pytest.raises(TypeError, match="every must be an int, got NoneType"):
        lp.MODELS["h100/wgmma"].with_promotion(None)
    with pytest.raises(ValueError, match="outputs must name at least one format"):
        Instruction("nv-fused", 4, ("fp16",), outputs=())
    with pytest.raises(TypeError, match="inputs must be a tuple of formats, got str"):
        Instruction("nv-fused", 4, "fp16")
    with pytest.raises(ValueError, match="give scales .* and scale_block"):
        Instruction("nv-mx", 32, ("e4m3",), scales=("e8m0",))
    with pytest.raises(ValueError, match="give scales"):
        Instruction("nv-mx", 32, ("e4m3",), scale_block=32)
    with pytest.raises(ValueError, match="not 'nv-fused'"):
        Instruction("nv-fused", 4, ("fp16",), scales=("e8m0",), scale_block=4)
    with pytest.raises(ValueError, match="scale_block must divide block=32, got 5"):
        Instruction("nv-mx", 32, ("e4m3",), scales=("e8m0",), scale_block=5)
    with pytest.raises(ValueError, match="multiple of 16, got 8"):
        Instruction("nv-fp4", 64, ("fp4",), scales=("e8m0",), scale_block=8)


def test_an_unknown_shape_is_refused_with_the_shapes():
    # no fallback to the first instruction
    mi300 = lp.MODELS["mi300/mfma"]
    with pytest.raises(ValueError, match="no instruction of shape 'zzz'.*f32_32x32x8_f16"):
        mi300.instruction("fp16", shape="zzz")
