"""The widgets' data against oracles it did not come from: ml_dtypes' bit patterns
(every pattern of the FP8 formats), NumPy's float16, `Fraction` sums, and the
definitions of stochastic rounding and of block scaling written out."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp
from lowprec.widgets import state
from peers import ml_dtypes, requires_ml_dtypes

FP8 = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(FP8))
def test_bits_state_of_every_fp8_pattern_is_ml_dtypes_value(name):
    dtype = getattr(ml_dtypes, FP8[name])
    values = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float64)
    for pattern, want in enumerate(values):
        s = state.bits_state(name, pattern)
        if math.isnan(want):
            assert s["kind"] == "nan"
        elif math.isinf(want):
            assert s["kind"] == "inf" and float(s["value"]) == want
        else:
            assert Fraction(s["exact"]) == Fraction(float(want))
            kind = ("zero" if want == 0 else "subnormal"
                    if abs(want) < float(ml_dtypes.finfo(dtype).smallest_normal) else "normal")
            assert s["kind"] == kind
        assert s["binary"] == format(pattern, "08b")


def test_bits_state_neighbours_are_numpy_float16_nextafter():
    rng = np.random.default_rng(3)
    for pattern in rng.integers(0, 0x7bff, 200):
        h = np.array([pattern], dtype=np.uint16).view(np.float16)[0]
        s = state.bits_state("fp16", int(pattern))
        assert s["below"] == float(np.nextafter(h, np.float16(-np.inf)))
        assert s["above"] == float(np.nextafter(h, np.float16(np.inf)))


def test_the_sign_bit_of_bf16_0x3dcd():
    # BF16 0x3dcd: exponent 123 (2**-4), mantissa 77: (1 + 77/128) / 16 = 0.10009765625.
    assert Fraction(state.bits_state("bf16", 0x3dcd ^ 0x8000)["exact"]) == \
        -(1 + Fraction(77, 128)) / 16
    with pytest.raises(ValueError, match="pattern must be in"):
        state.bits_state("bf16", 1 << 16)


@requires_ml_dtypes
def test_encode_state_matches_ml_dtypes_round_to_nearest():
    for x in (0.1, -3.3, 448.0, 1e-3, 0.0):
        got = state.encode_state(x, "e4m3")["rne"]
        want = np.array([x]).astype(ml_dtypes.float8_e4m3fn)
        assert got["value"] == float(want[0])
        assert int(got["hex"], 16) == int(want.view(np.uint8)[0])


def test_rounding_state_probabilities_are_the_definition():
    s = state.rounding_state(0.1, "e4m3", "sr", draws=4000, seed=1)
    down, up = Fraction(s["down"]), Fraction(s["up"])
    p = (Fraction(0.1) - down) / (up - down)        # SR's definition, written out
    assert Fraction(s["p_up_exact"]) == p and s["p_up"] == float(p)
    # 4000 Bernoulli(p) draws: within 5 standard deviations of the mean.
    sd = math.sqrt(4000 * float(p) * (1 - float(p)))
    assert abs(s["count_up"] - 4000 * float(p)) < 5 * sd
    rz = state.rounding_state(0.1, "e4m3", "rz")
    assert (rz["chosen"], rz["down"], rz["up"]) == (0.09375, 0.09375, 0.1015625)
    assert rz["choices"]["ru"] == 0.1015625 and rz["p_up"] is not None
    with pytest.raises(ValueError, match="finite"):
        state.rounding_state(float("inf"), "e4m3")


def test_block_state_follows_the_ocp_floor_rule():
    # OCP MX v1.0 §6.3: scale 2**(floor(log2 amax) - emax_elem); E4M3's emax is 8, so
    # amax 957 gives 2**(9 - 8) = 2, and 957 / 2 = 478.5 clamps to 448: 896.
    s = state.block_state([1.0, 2.0, 957.0], "mxfp8_e4m3")
    floor = s["rules"]["floor"]
    assert floor["scales"] == [2.0] and floor["values"][2] == 896.0
    assert floor["clamped"] == [False, False, True] and floor["errors"][2] == 896.0 - 957.0
    assert not any(s["rules"]["ceil"]["clamped"])


def test_tensor_core_state_truncates_as_the_model_defines():
    # V100 (F = 23): with c absent, products 1 and 3 * 2**-24; the reference exponent
    # is 0, so each 2**-24 is below the last kept bit 2**-23 and is dropped.
    a, b = [1.0, 1.0, 1.0, 1.0], [1.0, 2.0**-24, 2.0**-24, 2.0**-24]
    s = state.tensor_core_state(a, b, "v100")
    assert s["reference_exponent"] == 0 and s["fraction_bits"] == 23
    assert s["aligned"] == [1.0, 0.0, 0.0, 0.0] and s["dropped"][1:] == [2.0**-24] * 3
    assert s["exact"] == float(1 + Fraction(3, 2**24)) and s["result"] == 1.0
    a100 = state.tensor_core_state(a, b, "a100")      # F = 24 keeps 2**-24
    assert a100["dropped"] == [0.0] * 4
    with pytest.raises(ValueError, match="1-D of one length"):
        state.tensor_core_state([1.0], [1.0, 2.0], "a100")


def test_summation_state_errors_against_fraction_sums():
    x = np.random.default_rng(0).random(300)
    s = state.summation_state(x, "fp16", 200)
    xs = [Fraction(float(v)) for v in x[:200].astype(np.float16)]
    exact = sum(xs, Fraction(0))
    assert s["exact"] == float(exact)
    for _order, r in s["orders"].items():
        assert r["rel_error"] == float(abs(Fraction(r["sum"]) - exact) / exact)
        assert r["rel_error"] <= s["bound_n"]
    with pytest.raises(ValueError, match="n must be in"):
        state.summation_state(x, "fp16", 301)


def test_summation_curve_holds_each_lengths_error_and_bounds():
    x = np.random.default_rng(1).random(500)
    s = state.summation_state(x, "bf16", points=6)
    c = s["curve"]
    assert c["n"][0] == 1 and c["n"][-1] == 500 and c["n"] == sorted(set(c["n"]))
    xs = [Fraction(float(v)) for v in x.astype(ml_dtypes.bfloat16)] if ml_dtypes else None
    if xs is None:
        pytest.skip("ml_dtypes gives the BF16 values of x")
    for i, n in enumerate(c["n"]):
        exact = sum(xs[:n], Fraction(0))
        got = lp.sum(x[:n].astype(ml_dtypes.bfloat16).astype(np.float64), "bf16",
                     order="sequential")
        assert c["sequential"][i] == float(abs(Fraction(float(got)) - exact) / exact)
        assert c["bound_n"][i] == (n - 1) * 2.0**-8      # positive data: sum|x| = |sum x|
