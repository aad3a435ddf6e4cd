"""amp: GradScaler against PyTorch's documented rules, optimizers against NumPy float32
and ml_dtypes, and the classic mixed-precision effects measured on a fixed task.

Expected values are written out from the documented rules (torch.amp.GradScaler:
multiply the scale by backoff_factor and skip the step when the gradients hold
inf/NaN; multiply it by growth_factor after growth_interval consecutive clean steps),
from NumPy float32 arithmetic (IEEE single, round to nearest even) and from ml_dtypes
casts of float32 values to bfloat16 (one correct rounding).

The training task (shared by the effect tests, and quoted in docs/mixed-precision.md):
``lp.amp.blobs(128, 8, 4, seed=0)`` (4 Gaussian clusters in 8 dimensions), the MLP
``lp.nn.mlp([8, 16, 4], rng=0)`` (ReLU), full-batch SGD for 100 steps, learning rate
0.02. For the FP16 experiment the loss is weighted by 2**-17 and the learning rate
multiplied by 2**17: gradients 2**17 times smaller, as for a small term of a larger
loss; in FP32 the run is the same bit for bit (a power of two commutes with FP32
rounding away from underflow; checked below), in FP16 the gradients underflow.
"""

import copy
import dataclasses

import numpy as np
import pytest

import lowprec as lp
from lowprec import amp, nn
from peers import ml_dtypes, requires_ml_dtypes

F32 = np.float32


def fp32_grads(*arrays):
    return [lp.tensor(np.asarray(a, np.float64), "fp32") for a in arrays]


# -- GradScaler ---------------------------------------------------------------------------

def run_scaler(scaler, infs):
    """Drive the scaler through steps whose gradients hold an inf (True) or not; the
    (scale used, found_inf, scale after update, growth tracker after update) per step."""
    out = []
    for inf in infs:
        used = scaler.get_scale()
        _, found = scaler.unscale(fp32_grads([np.inf if inf else 1.0, 2.0]))
        scaler.update()
        out.append((used, found, scaler.get_scale(), scaler.state_dict()["_growth_tracker"]))
    return out


def test_scaler_defaults_are_pytorchs():
    s = amp.GradScaler()
    assert (s.get_scale(), s.get_growth_factor(), s.get_backoff_factor(),
            s.get_growth_interval(), s.is_enabled()) == (65536.0, 2.0, 0.5, 2000, True)


def test_scaler_state_machine_step_by_step():
    s = amp.GradScaler(init_scale=2.0**16, growth_interval=3)
    infs = [False, False, False, True, False, True, False, False, False, False]
    # Documented rules: grow x2 on the 3rd consecutive clean step, halve on inf (and
    # restart the count).
    expected = [(65536.0, False, 65536.0, 1), (65536.0, False, 65536.0, 2),
                (65536.0, False, 131072.0, 0), (131072.0, True, 65536.0, 0),
                (65536.0, False, 65536.0, 1), (65536.0, True, 32768.0, 0),
                (32768.0, False, 32768.0, 1), (32768.0, False, 32768.0, 2),
                (32768.0, False, 65536.0, 0), (65536.0, False, 65536.0, 1)]
    assert run_scaler(s, infs) == expected


def test_scaler_growth_after_exactly_growth_interval_clean_steps():
    s = amp.GradScaler()
    scales = [row[2] for row in run_scaler(s, [False] * 2000)]
    assert scales[1998] == 65536.0 and scales[1999] == 131072.0


def test_scaler_other_factors_and_nan():
    s = amp.GradScaler(init_scale=1000.0, growth_factor=4.0, backoff_factor=0.25,
                       growth_interval=2)
    _, found = s.unscale(fp32_grads([np.nan]))
    s.update()
    assert found and s.get_scale() == 250.0
    run_scaler(s, [False, False])
    assert s.get_scale() == 1000.0


def test_scale_is_an_fp32_value_that_never_grows_to_inf():
    assert amp.GradScaler(init_scale=0.1).get_scale() == float(F32(0.1))
    s = amp.GradScaler(init_scale=2.0**127, growth_interval=1)
    # 2**128 overflows FP32: the growth is not applied, the count restarts.
    assert run_scaler(s, [False]) == [(2.0**127, False, 2.0**127, 0)]


def test_scale_and_unscale_values():
    s = amp.GradScaler()
    scaled = s.scale(lp.tensor(1.5, "fp16"))
    assert scaled.fmt == lp.FP32 and float(scaled) == 1.5 * 65536
    assert s.scale(2.0) == 131072.0
    grads, found = s.unscale(fp32_grads([1.5 * 65536, -3.0], [[2.0**-30]]))
    assert not found
    assert np.asarray(grads[0]).tolist() == [1.5, -3.0 / 65536]
    assert np.asarray(grads[1]).tolist() == [[2.0**-46]]


@requires_ml_dtypes
@pytest.mark.oracle
def test_unscale_of_bf16_gradients_goes_through_fp32():
    s = amp.GradScaler(init_scale=3.0)
    (g,), _ = s.unscale([lp.tensor([1.0, 3.0], "bf16")])
    inv = F32(1.0) / F32(3.0)
    expected = np.array([inv, inv * F32(3.0)], np.float32).astype(ml_dtypes.bfloat16)
    assert g.fmt == lp.BF16
    assert np.asarray(g).tolist() == expected.astype(np.float64).tolist()


def test_unscale_refuses_fp16_gradients_as_pytorch_does():
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
        amp.GradScaler().unscale([lp.tensor([1.0], "fp16")])


def test_scaler_call_order_is_checked():
    s = amp.GradScaler()
    with pytest.raises(RuntimeError, match="No inf checks"):
        s.update()
    s.unscale(fp32_grads([1.0]))
    with pytest.raises(RuntimeError, match="already been called"):
        s.unscale(fp32_grads([1.0]))


def test_state_dict_round_trip():
    a = amp.GradScaler(init_scale=2.0**10, growth_interval=4)
    run_scaler(a, [False, True, False, False])
    state = a.state_dict()
    assert state == {"scale": 512.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                     "growth_interval": 4, "_growth_tracker": 2}
    b = amp.GradScaler()
    b.load_state_dict(state)
    assert b.state_dict() == state
    infs = [False, False, True, False]
    assert run_scaler(a, infs) == run_scaler(b, infs)


def test_disabled_scaler_does_nothing():
    s = amp.GradScaler(enabled=False)
    loss = lp.tensor(3.0, "fp16")
    assert s.scale(loss) is loss and s.get_scale() == 1.0 and s.state_dict() == {}
    grads = fp32_grads([np.inf])
    assert s.unscale(grads) == (grads, False)
    s.update()
    s.load_state_dict({"scale": 8.0})
    assert s.get_scale() == 1.0
    with pytest.raises(RuntimeError, match="empty"):
        amp.GradScaler().load_state_dict({})


def test_scaler_step_skips_on_inf_and_steps_otherwise():
    p = nn.Parameter(lp.tensor([1.0], "fp32"))
    opt = amp.SGD([p], lr=1.0)
    s = amp.GradScaler(init_scale=4.0)
    p.grad = lp.tensor([np.inf], "fp32")
    assert s.step(opt) is False
    s.update()
    assert np.asarray(p.value).tolist() == [1.0] and s.get_scale() == 2.0
    p.grad = lp.tensor([1.0], "fp32")     # a scaled gradient: 0.5 after unscaling
    assert s.step(opt) is True
    s.update()
    assert np.asarray(p.value).tolist() == [0.5]


def test_scale_backs_off_to_zero_without_error_and_steps_are_skipped():
    # PyTorch's _amp_update_scale_: float32 scale * double backoff, stored as float32,
    # never clamped. The oracle is NumPy's float64 -> float32 cast of that product.
    s = amp.GradScaler()
    expected, scales = F32(2.0**16), []
    for _ in range(170):
        _, found = s.unscale(fp32_grads([np.inf]))
        s.update()
        expected = F32(np.float64(expected) * 0.5)
        assert found and s.get_scale() == float(expected)
        scales.append(s.get_scale())
    assert scales[164] == 2.0**-149 and scales[165] == 0.0     # 2**-150 ties to 0
    # A zero scale: 1/0 is inf, every unscaled gradient inf or NaN, the step skipped.
    p = nn.Parameter(lp.tensor([1.0, 2.0], "fp32"))
    opt = amp.SGD([p], lr=1.0)
    p.grad = lp.tensor([3.0, 0.0], "fp32")
    grads, found = s.unscale(opt.gradients())
    assert found and np.isinf(grads[0].values[0]) and np.isnan(grads[0].values[1])
    s.update()
    assert s.get_scale() == 0.0
    assert s.step(opt) is False
    s.update()
    assert np.asarray(p.value).tolist() == [1.0, 2.0] and s.get_scale() == 0.0


def test_a_scale_whose_inverse_overflows_fp32_skips_the_step():
    # PyTorch checks only the scaled gradients, and would step with inf here.
    scale = F32(2.0**-140)
    with np.errstate(over="ignore"):
        assert np.isinf(F32(1.0 / np.float64(scale)))      # the FP32 inverse is inf
    s = amp.GradScaler(init_scale=float(scale))
    p = nn.Parameter(lp.tensor([1.0], "fp32"))
    opt = amp.SGD([p], lr=1.0)
    p.grad = lp.tensor([1.0], "fp32")
    assert s.step(opt) is False
    s.update()
    assert np.asarray(p.value).tolist() == [1.0]
    assert s.get_scale() == float(F32(np.float64(scale) * 0.5))


@pytest.mark.parametrize("name,value,error", [
    ("init_scale", 0.0, ValueError), ("init_scale", -1.0, ValueError),
    ("init_scale", np.nan, ValueError), ("init_scale", np.inf, ValueError),
    ("init_scale", 1e-50, ValueError), ("init_scale", 1e39, ValueError),   # 0, inf in FP32
    ("init_scale", "65536", TypeError), ("init_scale", None, TypeError),
    ("growth_factor", 1.0, ValueError), ("growth_factor", np.nan, ValueError),
    ("growth_factor", np.inf, ValueError), ("growth_factor", -2.0, ValueError),
    ("backoff_factor", 0.0, ValueError), ("backoff_factor", -0.5, ValueError),
    ("backoff_factor", 1.0, ValueError), ("backoff_factor", np.nan, ValueError),
    ("growth_interval", 0, ValueError), ("growth_interval", -5, ValueError),
    ("growth_interval", 1.5, TypeError), ("growth_interval", True, TypeError),
    ("enabled", 1, TypeError),
])
def test_scaler_rejects_bad_arguments(name, value, error):
    with pytest.raises(error, match=name):
        amp.GradScaler(**{name: value})


def test_update_new_scale_is_checked():
    s = amp.GradScaler()
    s.unscale(fp32_grads([1.0]))
    for bad, error in ((-1.0, ValueError), (0.0, ValueError), (np.nan, ValueError),
                       ("2", TypeError)):
        with pytest.raises(error, match="new_scale"):
            s.update(new_scale=bad)
    s.update(new_scale=0.1)
    assert s.get_scale() == float(F32(0.1))


@pytest.mark.parametrize("key,value,error", [
    ("scale", "512", TypeError), ("scale", np.nan, ValueError), ("scale", -1.0, ValueError),
    ("scale", np.inf, ValueError), ("growth_factor", 0.5, ValueError),
    ("growth_factor", None, TypeError), ("backoff_factor", np.nan, ValueError),
    ("backoff_factor", 2.0, ValueError), ("growth_interval", 0, ValueError),
    ("growth_interval", 4.0, TypeError), ("_growth_tracker", -1, ValueError),
    ("_growth_tracker", 4, ValueError), ("_growth_tracker", "2", TypeError),
])
def test_load_state_dict_rejects_malformed_entries_naming_the_key(key, value, error):
    good = {"scale": 512.0, "growth_factor": 2.0, "backoff_factor": 0.5,
            "growth_interval": 4, "_growth_tracker": 2}
    s = amp.GradScaler(init_scale=8.0)
    before = s.state_dict()
    with pytest.raises(error, match=key):
        s.load_state_dict({**good, key: value})
    assert s.state_dict() == before          # nothing half-loaded


def test_load_state_dict_rejects_missing_and_unknown_keys_and_non_dicts():
    good = {"scale": 512.0, "growth_factor": 2.0, "backoff_factor": 0.5,
            "growth_interval": 4, "_growth_tracker": 2}
    s = amp.GradScaler()
    with pytest.raises(ValueError, match="missing 'growth_interval'"):
        s.load_state_dict({k: v for k, v in good.items() if k != "growth_interval"})
    with pytest.raises(ValueError, match="unknown 'scael'"):
        s.load_state_dict({**good, "scael": 1.0})
    with pytest.raises(TypeError, match="state_dict"):
        s.load_state_dict([("scale", 1.0)])
    # A collapsed scaler's state (scale 0) round-trips.
    s.load_state_dict({**good, "scale": 0.0})
    assert s.state_dict() == {**good, "scale": 0.0}


def test_unscale_and_optimizers_take_plain_arrays_as_fp32_gradients():
    s = amp.GradScaler(init_scale=4.0)
    a64, a32, listed = np.array([0.1, 3.0]), np.array([0.7], np.float32), [[1, 2]]
    grads, found = s.unscale([a64, a32, listed])
    assert not found and all(g.fmt == lp.FP32 for g in grads)
    quarter = F32(0.25)
    for g, a in zip(grads, (a64, a32, listed)):
        assert np.asarray(g).tolist() == (np.asarray(a).astype(F32) * quarter).tolist()
    # SGD from an FP32 gradient given as a float64 array: NumPy float32 arithmetic.
    w0, g = np.array([1.0, -2.0, 0.5]), np.array([0.3, 1e-3, -7.1])
    p = nn.Parameter(lp.tensor(w0, "fp32"))
    amp.SGD([p], lr=0.1).step([g])
    expected = w0.astype(F32) - g.astype(F32) * F32(0.1)
    assert np.asarray(p.value).tolist() == expected.tolist()


@pytest.mark.parametrize("grads,match", [
    ([np.array(["1.5"])], "grads\\[0\\]"), ([np.array([True])], "grads\\[0\\]"),
    ([np.array([1 + 2j])], "grads\\[0\\]"), ([None], "grads\\[0\\]"),
    (np.array([1.0, 2.0]), "list, tuple or other iterable"),
    (lp.tensor([1.0], "fp32"), "list, tuple or other iterable"), (3.0, "iterable"),
])
def test_unscale_refuses_what_is_not_an_iterable_of_real_gradients(grads, match):
    s = amp.GradScaler()
    with pytest.raises(TypeError, match=match):
        s.unscale(grads)
    s.unscale(fp32_grads([1.0]))               # the failed call left no state behind


# -- policies -------------------------------------------------------------------------------

@pytest.mark.parametrize("name,compute,weights,grads,loss", [
    ("fp32", lp.FP32, lp.FP32, lp.FP32, lp.FP32),
    ("fp16", lp.FP16, lp.FP16, lp.FP16, lp.FP16),
    ("bf16", lp.BF16, lp.BF16, lp.BF16, lp.BF16),
    ("fp16-mixed", lp.FP16, lp.FP32, lp.FP16, lp.FP32),
    ("bf16-mixed", lp.BF16, lp.FP32, lp.BF16, lp.FP32),
])
def test_named_policies(name, compute, weights, grads, loss):
    p = amp.Policy.named(name)
    assert (p.compute, p.weights, p.grads, p.loss, p.matmul, p.update) == \
        (compute, weights, grads, loss, "fp32", "rne")
    assert p.name == name and p.master_weights == (weights != compute)


def test_policies_field_by_field():
    p = amp.Policy("bf16", matmul="a100", weights="fp32", grads="fp32", update="sr")
    assert (p.compute, p.matmul, p.weights, p.grads, p.update, p.loss) == \
        (lp.BF16, "a100", lp.FP32, lp.FP32, "sr", lp.BF16)
    assert p.name is None
    q = dataclasses.replace(amp.Policy.named("fp16-mixed"), update="sr")
    assert q.weights == lp.FP32 and q.update == "sr" and q.name is None
    for bad in (dict(update="nearest"), dict(matmul="tpu")):
        with pytest.raises(ValueError):
            amp.Policy("fp16", **bad)
    with pytest.raises(ValueError, match="valid policies"):
        amp.Policy.named("fp8-mixed")


# -- optimizers -----------------------------------------------------------------------------

def test_sgd_in_fp32_is_numpy_float32():
    rng = np.random.default_rng(0)
    w0, grads = rng.standard_normal(6), rng.standard_normal((3, 6))
    p = nn.Parameter(lp.tensor(w0, "fp32"))
    opt = amp.SGD([p], lr=0.1, momentum=0.9)
    w, buf = w0.astype(F32), None
    for g in grads:
        g32 = g.astype(F32)
        p.grad = lp.tensor(g32.astype(np.float64), "fp32")
        opt.step()
        buf = g32 if buf is None else buf * F32(0.9) + g32
        w = w - buf * F32(0.1)
    assert np.asarray(p.value).tolist() == w.astype(np.float64).tolist()


def test_adam_in_fp32_is_numpy_float32():
    rng = np.random.default_rng(1)
    w0, grads = rng.standard_normal(6), rng.standard_normal((5, 6)) * 1e-3
    p = nn.Parameter(lp.tensor(w0, "fp32"))
    lr, (b1, b2), eps = 0.01, (0.9, 0.999), 1e-8
    opt = amp.Adam([p], lr=lr, betas=(b1, b2), eps=eps)
    w, m, v = w0.astype(F32), np.zeros(6, F32), np.zeros(6, F32)
    for t, g in enumerate(grads, 1):
        g32 = g.astype(F32)
        p.grad = lp.tensor(g32.astype(np.float64), "fp32")
        opt.step()
        m = m * F32(b1) + g32 * F32(1 - b1)
        v = v * F32(b2) + (g32 * g32) * F32(1 - b2)
        denom = np.sqrt(v) / F32(np.sqrt(1 - b2**t)) + F32(eps)
        w = w - (m / denom) * F32(lr / (1 - b1**t))
    assert np.asarray(p.value).tolist() == w.astype(np.float64).tolist()


@requires_ml_dtypes
@pytest.mark.oracle
def test_bf16_sgd_loses_updates_below_half_an_ulp():
    rng = np.random.default_rng(2)
    w0 = rng.uniform(0.5, 4.0, 2000) * rng.choice([-1, 1], 2000)
    g = rng.standard_normal(2000)
    p = nn.Parameter(lp.tensor(w0, "fp32"))
    opt = amp.SGD([p], lr=2.0**-8, policy="bf16")
    w = np.asarray(p.value)
    p.grad = lp.tensor(g, "bf16")
    opt.step()
    # Products of two BF16 values have at most 16 bits: exact in float32, so
    # ml_dtypes' float32 -> bfloat16 cast rounds them once; w - u is exact in
    # float32 too (|u| < |w| * 2**-5, and both have 8 bits).
    bf = ml_dtypes.bfloat16
    u = (np.asarray(p.grad).astype(F32) * F32(2.0**-8)).astype(bf).astype(F32)
    new = (w.astype(F32) - u).astype(bf).astype(np.float64)
    assert np.asarray(p.value).tolist() == new.tolist()
    lost = (new == w) & (g != 0)
    moved, unchanged = opt.last_step
    assert (moved, unchanged) == (int(np.count_nonzero(g)), int(np.count_nonzero(lost)))
    assert 0.3 < opt.unchanged_fraction < 0.9


def test_stochastic_rounding_of_updates_is_unbiased():
    n = 20000
    p = nn.Parameter(lp.tensor(np.ones(n), "fp32"))
    sr = dataclasses.replace(amp.Policy.named("bf16"), update="sr")
    opt = amp.SGD([p], lr=2.0**-10, policy=sr, seed=0)
    p.grad = lp.tensor(np.ones(n), "bf16")
    opt.step()
    # 1 - 2**-10 lies between 1 - 2**-8 and 1: down with probability 2**-10 / 2**-8.
    values = np.asarray(p.value)
    assert set(values.tolist()) == {1.0, 1 - 2.0**-8}
    down = np.mean(values < 1)
    assert abs(down - 0.25) < 4 * np.sqrt(0.25 * 0.75 / n)
    again = nn.Parameter(lp.tensor(np.ones(n), "fp32"))
    opt2 = amp.SGD([again], lr=2.0**-10, policy=sr, seed=0)
    again.grad = lp.tensor(np.ones(n), "bf16")
    opt2.step()
    assert np.array_equal(np.asarray(again.value), values)   # same seed, same draws


def test_fp32_master_weights_keep_what_bf16_weights_lose():
    pure, mixed = nn.Parameter(lp.tensor([1.0], "fp32")), nn.Parameter(lp.tensor([1.0], "fp32"))
    opt_pure = amp.SGD([pure], lr=2.0**-10, policy="bf16")
    opt_mixed = amp.SGD([mixed], lr=2.0**-10, policy="bf16-mixed")
    assert mixed.value.fmt == lp.BF16 and opt_mixed.weights[0].fmt == lp.FP32
    for _ in range(8):
        pure.grad = lp.tensor([1.0], "bf16")
        mixed.grad = lp.tensor([1.0], "bf16")
        opt_pure.step()
        opt_mixed.step()
    # Below 1 the BF16 spacing is 2**-8: 1 - 2**-10 rounds back to 1 every time,
    # while the FP32 master reaches 1 - 8 * 2**-10 = 1 - 2**-7, a BF16 value.
    assert np.asarray(pure.value).tolist() == [1.0]
    assert np.asarray(opt_mixed.weights[0]).tolist() == [1 - 2.0**-7]
    assert np.asarray(mixed.value).tolist() == [1 - 2.0**-7]


@requires_ml_dtypes
@pytest.mark.oracle
def test_working_copies_are_the_masters_rounded_to_nearest():
    rng = np.random.default_rng(3)
    params = [nn.Parameter(lp.tensor(rng.standard_normal(50), "fp32"))]
    opt = amp.Adam(params, lr=1e-3, policy="bf16-mixed")
    params[0].grad = lp.tensor(rng.standard_normal(50), "bf16")
    opt.step()
    master = np.asarray(opt.weights[0]).astype(F32)
    expected = master.astype(ml_dtypes.bfloat16).astype(np.float64)
    assert np.asarray(params[0].value).tolist() == expected.tolist()


def test_a_gradient_of_another_shape_never_reshapes_the_weights():
    a = nn.Parameter(lp.tensor([1.0, 2.0], "fp32"))
    b = nn.Parameter(lp.tensor([[1.0], [2.0]], "fp32"))
    opt = amp.SGD([a, b], lr=0.5)
    with pytest.raises(ValueError, match=r"grads\[1\] must have its weight's shape \(2, 1\)"):
        opt.step([[1.0, 1.0], np.ones((2, 2))])           # would broadcast b to (2, 2)
    with pytest.raises(ValueError, match=r"grads\[0\] must have its weight's shape \(2,\)"):
        opt.step([[1.0], [[1.0], [1.0]]])                 # would broadcast a's step
    with pytest.raises(ValueError, match="one gradient per parameter"):
        opt.step([[1.0, 1.0]])                            # zip would drop b silently
    # Nothing was updated by the refused steps.
    assert np.asarray(a.value).tolist() == [1.0, 2.0]
    assert np.asarray(b.value).tolist() == [[1.0], [2.0]]
    assert [w.shape for w in opt.weights] == [(2,), (2, 1)]


def test_optimizers_refuse_what_is_not_a_list_of_parameters():
    p = nn.Parameter(lp.tensor([1.0], "fp32"))
    with pytest.raises(TypeError, match="pass \\[p\\]"):
        amp.SGD(p, lr=0.1)
    with pytest.raises(TypeError, match=r"params\[0\]"):
        amp.Adam([lp.tensor([1.0], "fp32")])
    with pytest.raises(ValueError, match="params is empty"):
        amp.SGD([], lr=0.1)


# -- the effects, measured -------------------------------------------------------------------

DATA = amp.blobs(128, 8, 4, seed=0)
STEPS, LR, WEIGHT = 100, 0.02, 2.0**-17


def run(policy, *, weight=1.0, steps=STEPS, **kwargs):
    return amp.train(nn.mlp([8, 16, 4], rng=0), DATA, policy, steps, lr=LR / weight,
                     loss_weight=weight, **kwargs)


@pytest.fixture(scope="module")
def fp32():
    return run("fp32")


def test_a_power_of_two_loss_weight_leaves_fp32_training_unchanged():
    assert run("fp32", weight=WEIGHT, steps=3).loss == run("fp32", steps=3).loss


@pytest.mark.slow
def test_fp16_gradients_underflow_without_loss_scaling(fp32):
    plain = run("fp16-mixed", weight=WEIGHT)
    scaled = run("fp16-mixed", weight=WEIGHT, scaler=amp.GradScaler())
    zero_plain, zero_scaled = np.mean(plain.grad_zero), np.mean(scaled.grad_zero)
    # Measured: 0.213 of the weight-gradient elements are zero without scaling,
    # 0.000 with it (and in FP32).
    assert np.mean(fp32.grad_zero) == 0.0
    assert zero_plain > 0.15 and zero_scaled < 0.01
    assert sum(plain.grad_underflow) > 0
    # Measured final losses: FP32 0.690, FP16 unscaled 0.762, FP16 scaled 0.690.
    assert plain.final_loss > fp32.final_loss + 0.05
    assert abs(scaled.final_loss - fp32.final_loss) < 0.01
    assert not any(scaled.skipped) and scaled.scale[-1] == 65536.0


def test_a_too_large_scale_is_backed_off_skipping_steps():
    h = run("fp16-mixed", weight=WEIGHT, steps=12, scaler=amp.GradScaler(init_scale=2.0**40))
    k = h.skipped.index(False)
    assert k > 0 and not any(h.skipped[k:])
    assert h.scale == [2.0**(40 - i) for i in range(k)] + [2.0**(40 - k)] * (12 - k)
    # Skipped steps leave the weights, hence the loss, as they were.
    assert h.loss[:k + 1] == [h.loss[0]] * (k + 1)
    assert h.loss[-1] < h.loss[0]


def test_pure_fp16_with_a_scaler_is_refused():
    with pytest.raises(ValueError, match="FP16 gradients"):
        run("fp16", steps=1, scaler=amp.GradScaler())


@pytest.mark.slow
def test_bf16_weights_lose_updates_and_master_weights_or_sr_recover(fp32):
    pure = run("bf16")
    mixed = run("bf16-mixed")
    sr = run(dataclasses.replace(amp.Policy.named("bf16"), update="sr"), seed=0)
    # Measured: pure BF16 leaves 0.55 of the updates with a nonzero gradient unchanged,
    # bf16-mixed none; final losses FP32 0.690, BF16 0.751, bf16-mixed 0.690, BF16 +
    # stochastic rounding 0.688.
    assert pure.summary()["unchanged"] > 0.3
    assert mixed.summary()["unchanged"] < 0.01
    gap = pure.final_loss - fp32.final_loss
    assert gap > 0.03
    assert abs(mixed.final_loss - fp32.final_loss) < 0.01
    assert abs(sr.final_loss - fp32.final_loss) < 0.25 * gap


def test_train_history_and_adam_minibatches():
    h = amp.train(nn.mlp([8, 16, 4], rng=1), DATA, "bf16-mixed", 6, optimizer="adam",
                  lr=0.01, batch_size=32, seed=1)
    assert [len(x) for x in (h.loss, h.scale, h.skipped, h.grad_underflow, h.grad_zero,
                             h.unchanged)] == [6] * 6
    assert h.final_loss < amp.evaluate(nn.mlp([8, 16, 4], rng=1), DATA)[0]
    with pytest.raises(ValueError, match="optimizer"):
        amp.train(nn.mlp([8, 4], rng=0), DATA, "fp32", 1, optimizer="lbfgs")


# -- bad input: training ----------------------------------------------------------------------

SMALL = amp.blobs(16, 8, 4, seed=0)


def small_model():
    return nn.mlp([8, 16, 4], rng=0)


def test_summary_of_a_run_of_zero_steps():
    h = amp.train(small_model(), SMALL, "fp32", 0)
    s = h.summary()
    assert (s["steps"], s["skipped"]) == (0, 0)
    assert all(np.isnan(s[k]) for k in ("grad_zero", "grad_underflow", "unchanged",
                                        "final_scale"))
    # The untrained model, evaluated: evaluate's own figures.
    assert (s["final_loss"], s["final_accuracy"]) == amp.evaluate(small_model(), SMALL)
    assert amp.History(amp.Policy.named("bf16")).summary()["steps"] == 0


def test_summary_counts_steps_and_skips():
    h = amp.train(small_model(), SMALL, "fp16-mixed", 3,
                  scaler=amp.GradScaler(init_scale=2.0**40))
    s = h.summary()
    assert s["steps"] == 3 and s["skipped"] == sum(h.skipped) and s["final_scale"] == h.scale[-1]
    # PyTorch's rule, not the history's word: at a scale of 2**40 every FP16 gradient
    # overflows (FP16's max is 65504), so each step is skipped and backs the scale off by 0.5.
    assert h.skipped == [True, True, True]
    assert h.scale == [2.0**40, 2.0**39, 2.0**38]


X, Y = SMALL


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(model=None), TypeError, "model"),
    (dict(model="mlp"), TypeError, "model"),
    (dict(data=X), TypeError, "data"),
    (dict(data=(X.astype(str), Y)), TypeError, "features x must be real numbers"),
    (dict(data=(X.astype(complex), Y)), TypeError, "features x must be real numbers"),
    (dict(data=(X[0], Y)), ValueError, r"features x must have shape \(N, d\)"),
    (dict(data=(X, Y[:3])), ValueError, r"labels must have shape \(16,\)"),
    (dict(data=(X[:, :5], Y)), ValueError, r"features x must have shape \(N, 8\)"),
    (dict(data=(X, Y.astype(float))), TypeError, "labels must be integers"),
    (dict(data=(X, Y - 1)), ValueError, "labels must be in"),           # a -1 label
    (dict(data=(X, Y + 1)), ValueError, r"labels must be in \[0, 4\)"),  # a label 4
    (dict(data=(X, Y + 1), batch_size=2), ValueError, r"labels must be in \[0, 4\)"),
    (dict(policy="fp8-mixed"), ValueError, "valid policies: fp32, fp16, bf16"),
    (dict(policy=16), TypeError, "policy"),
    (dict(steps=-1), ValueError, "steps"),
    (dict(steps=2.0), TypeError, "steps"),
    (dict(optimizer="lbfgs"), ValueError, "optimizer"),
    (dict(lr=np.inf), ValueError, "lr"),         # lr = 0 is allowed, as in PyTorch
    (dict(lr=-0.1), ValueError, "lr"),
    (dict(lr=True), TypeError, "lr"),
    (dict(lr=np.nan), ValueError, "lr"),
    (dict(lr="0.1"), TypeError, "lr"),
    (dict(momentum=1.0), ValueError, "momentum"),
    (dict(momentum=-0.5), ValueError, "momentum"),
    (dict(loss_weight=0.0), ValueError, "loss_weight"),
    (dict(loss_weight=np.inf), ValueError, "loss_weight"),
    (dict(batch_size=0), ValueError, "batch_size"),
    (dict(batch_size=2.5), TypeError, "batch_size"),
    (dict(scaler="dynamic"), TypeError, "scaler"),
    (dict(seed="x"), TypeError, "seed"),
    (dict(seed=1.5), TypeError, "seed"),
])
def test_train_refuses_bad_arguments_and_leaves_the_model_alone(kwargs, error, match):
    args = dict(model=small_model(), data=SMALL, policy="bf16", steps=2)
    args.update(kwargs)
    model = args.pop("model")
    before = None if model is None or isinstance(model, str) else \
        [(p.value.fmt, np.asarray(p.value).tolist()) for p in model.parameters()]
    with pytest.raises(error, match=match):
        amp.train(model, args.pop("data"), args.pop("policy"), args.pop("steps"), **args)
    if before is not None:
        # Refused before the optimizer took the parameters over (FP32, not BF16).
        assert [(p.value.fmt, np.asarray(p.value).tolist())
                for p in model.parameters()] == before


@pytest.mark.parametrize("call,error,match", [
    (lambda p: amp.Adam([p], betas=(1, 1)), ValueError, r"betas\[0\] must be in \[0, 1\)"),
    (lambda p: amp.Adam([p], betas=(0.9, 1.0)), ValueError, r"betas\[1\]"),
    (lambda p: amp.Adam([p], betas=(-0.1, 0.9)), ValueError, r"betas\[0\]"),
    (lambda p: amp.Adam([p], betas=(0.9, np.nan)), ValueError, r"betas\[1\]"),
    (lambda p: amp.Adam([p], betas=0.9), TypeError, "betas"),
    (lambda p: amp.Adam([p], eps=0.0), ValueError, "eps"),
    (lambda p: amp.Adam([p], eps=-1e-8), ValueError, "eps"),
    (lambda p: amp.Adam([p], lr=-1.0), ValueError, "lr"),
    (lambda p: amp.SGD([p], lr=np.nan), ValueError, "lr"),
    (lambda p: amp.SGD([p], lr=10**400), ValueError, "lr"),       # past float64: inf
    (lambda p: amp.Adam([p], lr=-(10**400)), ValueError, "lr"),
    (lambda p: amp.SGD([p], lr=0.1, momentum=1.5), ValueError, "momentum"),
    (lambda p: amp.SGD([p], lr=0.1, seed="0"), TypeError, "seed"),
    (lambda p: amp.SGD([p], lr=0.1, policy=None), TypeError, "policy"),
    (lambda p: amp.SGD([p], lr=0.1, policy="half"), ValueError, "valid policies"),
])
def test_optimizer_hyperparameters_are_checked(call, error, match):
    p = nn.Parameter(lp.tensor([1.0], "fp32"))
    with pytest.raises(error, match=match):
        call(p)
    assert p.value.fmt == lp.FP32          # not taken over


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(classes=0), ValueError, "classes"), (dict(n=0), ValueError, "n must"),
    (dict(dim=0), ValueError, "dim"), (dict(dim=2.0), TypeError, "dim"),
    (dict(spread=-1.0), ValueError, "spread"), (dict(spread=np.nan), ValueError, "spread"),
    (dict(seed="0"), TypeError, "seed"),
])
def test_blobs_arguments_are_checked(kwargs, error, match):
    args = {**dict(n=10, dim=2, classes=3), **kwargs}
    with pytest.raises(error, match=match):
        amp.blobs(args.pop("n"), args.pop("dim"), args.pop("classes"), **args)


@pytest.mark.parametrize("kwargs,match", [
    (dict(loss_weight=0.0), "loss_weight"), (dict(loss_weight=-2.0**-18), "loss_weight"),
    (dict(lr=-1.0), "lr"), (dict(steps=-1), "steps"), (dict(n=0), "n must"),
])
def test_demo_arguments_are_checked(kwargs, match):
    with pytest.raises(ValueError, match=match):
        amp.demo(**kwargs)


def test_policy_update_mode_must_be_a_string():
    with pytest.raises(TypeError, match="update"):
        amp.Policy("bf16", update=None)


def test_evaluate_checks_data_and_weights():
    model = small_model()
    with pytest.raises(TypeError, match="features x"):
        amp.evaluate(model, (X.astype(str), Y))
    with pytest.raises(ValueError, match="one Tensor per parameter"):
        amp.evaluate(model, SMALL, [p.value for p in model.parameters()][:2])
    with pytest.raises(ValueError, match=r"weights\[0\] must have its parameter's shape"):
        amp.evaluate(model, SMALL, [p.value.T for p in model.parameters()])


def test_labels_past_the_output_width_of_any_model_are_found_on_the_first_step():
    class Wrapped:                  # a model lowprec cannot see into
        def __init__(self):
            self.inner = small_model()

        def __getattr__(self, name):
            return getattr(self.inner, name)

    labels = Y.copy()
    labels[-1] = 4                  # past the 4 classes; a minibatch of 2 might not draw it
    with pytest.raises(ValueError, match=r"labels must be in \[0, 4\).*index 15"):
        amp.train(Wrapped(), (X, labels), "fp32", 3, batch_size=2)


def test_unscale_takes_any_iterable_of_gradients():
    # A generator of gradients is an iterable, as a list is (it worked before the checks).
    grads = [np.array([3.0, -0.5]), np.array([2.0**-20])]
    s = amp.GradScaler(init_scale=4.0)
    got, found_inf = s.unscale(g for g in grads)
    assert not found_inf
    for g, x in zip(got, grads):     # unscaled in FP32: x * (1/4) is exact in float32
        assert g.fmt == lp.FP32
        assert np.array_equal(g.values, (x.astype(np.float32) * np.float32(0.25)).astype(float))


@pytest.mark.parametrize("clone", [lambda m: m, copy.deepcopy], ids=["itself", "copy"])
def test_policy_takes_every_matmul_model_the_context_takes(clone):
    # A MODELS value (or a copy) is a model, as lp.context(matmul=...) accepts it.
    for name in ("fp16", "exact", "h100"):
        model = clone(lp.MODELS[name])
        policy = amp.Policy("fp16", matmul=model)
        assert policy.matmul == lp.MODELS[name]
        with lp.context(matmul=model):
            pass
    with pytest.raises(TypeError, match="matmul must be"):
        amp.Policy("fp16", matmul=5)


def test_train_points_a_pure_fp16_scaler_run_to_fp16_mixed():
    data = lp.amp.blobs(16, 2, 2, seed=0)
    model = lp.nn.mlp([2, 4, 2], rng=0)
    before = [p.value.values.copy() for p in model.parameters()]
    with pytest.raises(ValueError, match="use the policy 'fp16-mixed'"):
        lp.amp.train(model, data, "fp16", 3, scaler=lp.amp.GradScaler())
    assert all(np.array_equal(b, p.value.values) for b, p in zip(before, model.parameters()))


def test_sgd_momentum_keeps_its_own_copy_of_the_first_gradient():
    # The optimizer hands a gradient already in the weight format to the step as it
    # is; the momentum buffer must not be that Tensor: writing into the gradient
    # afterwards leaves the buffer (0.5 * 1 + 0 = 0.5, so w = 0.5 - 0.5 * 0.5).
    p = lp.nn.Parameter(lp.tensor([1.0], "fp32"))
    p.grad = lp.tensor([1.0], "fp32")
    opt = lp.amp.SGD([p], lr=0.5, momentum=0.5)
    opt.step()
    assert p.value.values[0] == 0.5
    p.grad[0] = 0.0
    opt.step()
    assert p.value.values[0] == 0.25


def test_lr_zero_is_accepted_and_leaves_the_weights_bit_for_bit():
    # PyTorch takes lr=0: w - 0 * g is w for every finite w and g (the signs of zeros
    # follow IEEE 754, so no weight here is -0).
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal(12).astype(np.float32)
    w0[0] = 0.0
    g = rng.standard_normal(12).astype(np.float32) * 2.0**20
    for make in (lambda p: amp.SGD([p], lr=0), lambda p: amp.SGD([p], lr=0.0, momentum=0.9),
                 lambda p: amp.Adam([p], lr=0.0), lambda p: amp.SGD([p], 0, "bf16-mixed")):
        p = nn.Parameter(lp.tensor(w0, "fp32"))
        opt = make(p)
        before = np.asarray(p.value).astype(np.float32).view(np.uint32).copy()
        for _ in range(2):
            opt.step([g])
        after = np.asarray(p.value).astype(np.float32).view(np.uint32)
        assert np.array_equal(after, before)
    for bad in (-1, -1e-30, np.nan, np.inf, -np.inf):
        with pytest.raises(ValueError, match=r"lr must be in \[0, inf\)"):
            amp.SGD([nn.Parameter(lp.tensor(w0, "fp32"))], lr=bad)
    for bad in (True, "0.1", None):
        with pytest.raises(TypeError, match="lr must be a real number"):
            amp.Adam([nn.Parameter(lp.tensor(w0, "fp32"))], lr=bad)


def test_train_with_lr_zero_keeps_the_model():
    model = small_model()
    before = [np.asarray(p.value).tolist() for p in model.parameters()]
    h = amp.train(model, SMALL, "fp32", 2, lr=0)
    assert [np.asarray(p.value).tolist() for p in model.parameters()] == before
    assert h.loss[0] == h.loss[1]
