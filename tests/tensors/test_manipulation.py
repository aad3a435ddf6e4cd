"""NumPy's exact functions and ufuncs on Tensors:
`lowprec/tensors/manipulation.py` against NumPy on the decoded values in every signed
named format, plain values entering a Tensor against one Fraction rounding, and the
ufuncs `nextafter`, `spacing`, `fmod`, `remainder`, `frexp`, `modf`, `ldexp`,
`copysign`, `heaviside` against oracles this code did not produce: the sorted list of
every value of the format (from `lp.decode` of every code), NumPy's float16 and
float32, `math`, and `Fraction` arithmetic."""

import math
from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp
from helpers import assert_bits
from lowprec import testing as lpt

SIGNED = [f for f in lp.NAMED_FORMATS.values() if f.signed]
SMALL = [f for f in SIGNED if f.bits <= 16]
FEW = [lp.FP16, lp.BF16, lp.FP8_E4M3, lp.FP8_E5M2FNUZ, lp.FP4_E2M1, lp.FP32]
ids = lambda f: f.name   # noqa: E731


def draw(fmt, shape, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, min(4.0, float(fmt.max) / 8), size=shape)
    x[rng.random(shape) < 0.2] = 1.0
    v = np.asarray(lp.round(x, fmt))
    return np.where(np.isfinite(v), v, 1.0)


def rr(x, fmt):
    return lpt.reference_round(Fraction(x), fmt)


# -- moved and selected values -----------------------------------------------------

MOVES = {
    "split": lambda v: np.split(v, 2, axis=1)[1],
    "array_split": lambda v: np.array_split(v, 4, axis=1)[3],
    "hsplit": lambda v: np.hsplit(v, 3)[0], "vsplit": lambda v: np.vsplit(v, 2)[1],
    "delete": lambda v: np.delete(v, [0, 3], axis=1),
    "partition": lambda v: np.partition(v, 2, axis=1),
    "compress": lambda v: np.compress([True, False, True, True], v, axis=0),
    "extract": lambda v: np.extract(np.arange(24).reshape(4, 6) % 3 == 0, v),
    "pad_edge": lambda v: np.pad(v, 2, mode="edge"),
    "pad_reflect": lambda v: np.pad(v, (1, 2), mode="reflect"),
    "pad_symmetric": lambda v: np.pad(v, 1, mode="symmetric"),
    "pad_wrap": lambda v: np.pad(v, 1, mode="wrap"),
    "pad_maximum": lambda v: np.pad(v, 1, mode="maximum"),
    "trim_zeros": lambda v: np.trim_zeros(np.concatenate([[0.0], v[0], [0.0, 0.0]])),
    "diagflat": lambda v: np.diagflat(v[0]), "rollaxis": lambda v: np.rollaxis(v, 1),
    "resize": lambda v: np.resize(v, (5, 7)), "atleast_3d": lambda v: np.atleast_3d(v),
    "fix": lambda v: np.fix(v * 1), "real": lambda v: np.real(v),
    "unique_values": lambda v: np.unique_values(v),
    "apply_along_axis": lambda v: np.apply_along_axis(np.sort, 1, v),
}


@pytest.mark.parametrize("fmt", SIGNED, ids=ids)
@pytest.mark.parametrize("name", sorted(MOVES))
def test_moves_equal_numpy_on_the_values(fmt, name):
    v = draw(fmt, (4, 6), seed=len(name))
    r = MOVES[name](lp.tensor(v, fmt))
    assert isinstance(r, lp.Tensor) and r.fmt == fmt
    expected = MOVES[name](v)
    # NumPy's fix gives -0 for (-1, 0); a format without -0 (fnuz) holds +0.
    assert_bits(r.values, expected if fmt.has_negative_zero else expected + 0.0)


JOINS = {
    "append": lambda a, b: np.append(a, b, axis=0),
    "column_stack": lambda a, b: np.column_stack([a, b]),
    "dstack": lambda a, b: np.dstack([a, b]), "block": lambda a, b: np.block([[a, b]]),
    "choose": lambda a, b: np.choose(np.arange(6).reshape(1, 6) % 2, [a[:1], b[:1]]),
    "intersect1d": lambda a, b: np.intersect1d(a, b), "union1d": lambda a, b: np.union1d(a, b),
    "setdiff1d": lambda a, b: np.setdiff1d(a, b), "setxor1d": lambda a, b: np.setxor1d(a, b),
    "insert": lambda a, b: np.insert(a, [1, 3], b[0, :2], axis=1),
}


@pytest.mark.parametrize("pair", [(lp.FP8_E4M3, lp.FP16), (lp.BF16, lp.BF16),
                                  (lp.FP4_E2M1, lp.FP32)], ids=lambda p: "-".join(map(ids, p)))
@pytest.mark.parametrize("name", sorted(JOINS))
def test_joins_promote_exactly(pair, name):
    fa, fb = pair
    a, b = draw(fa, (2, 6), seed=1), draw(fb, (2, 6), seed=2)
    r = JOINS[name](lp.tensor(a, fa), lp.tensor(b, fb))
    assert isinstance(r, lp.Tensor) and r.fmt == lp.result_format(fa, fb)
    assert_bits(r.values, JOINS[name](a, b))


@pytest.mark.parametrize("fmt", FEW, ids=ids)
def test_plain_values_enter_rounded_once(fmt):
    v = draw(fmt, (3, 4), seed=3)
    t = lp.tensor(v, fmt)
    once = rr(0.1, fmt)
    assert_bits(np.append(t, 0.1).values[-1], once)
    assert_bits(np.insert(t, 2, 0.1).values[2], once)
    assert_bits(np.pad(t, 1, constant_values=0.1).values[0], [once] * 6)
    assert_bits(np.select([t.values > 0], [t], 0.1).values, np.where(v > 0, v, once))
    assert_bits(np.nan_to_num(lp.tensor([np.nan, np.inf, -np.inf], fmt) if fmt.has_inf
                              else lp.tensor([np.nan], fmt), nan=0.1).values[0], once)
    if fmt.has_inf:
        r = np.nan_to_num(lp.tensor([np.inf, -np.inf, 2.0], fmt)).values
        assert_bits(r, [float(fmt.max), -float(fmt.max), 2.0])
    assert_bits(np.empty_like(t).values, np.zeros((3, 4)))
    assert_bits(np.imag(t).values, np.zeros((3, 4)))


@pytest.mark.parametrize("fmt", FEW, ids=ids)
def test_in_place_writes_round_into_the_tensor(fmt):
    once = rr(0.1, fmt)
    for write in (lambda t: np.put(t, [0, 2], 0.1), lambda t: np.place(t, [1, 0, 1, 0], [0.1]),
                  lambda t: np.putmask(t, [True, False, True, False], 0.1),
                  lambda t: np.copyto(t, 0.1, where=[True, False, True, False])):
        t = lp.tensor([1.0, 2.0, 3.0, 4.0], fmt)
        assert write(t) is None
        assert_bits(t.values, [once, 2.0, once, 4.0])
    m = lp.tensor(np.ones((2, 2)), fmt)
    np.fill_diagonal(m, 0.1)
    assert_bits(m.values, [[once, 1.0], [1.0, once]])
    plain = np.zeros(2)
    np.copyto(plain, lp.tensor([0.5, 1.5], fmt))   # a plain target takes the float64 values
    assert_bits(plain, [0.5, 1.5])


@pytest.mark.parametrize("fmt", FEW, ids=ids)
def test_plain_answers_equal_numpy_on_the_values(fmt):
    v = draw(fmt, 12, seed=5)
    t = lp.tensor(v, fmt)
    assert np.array_equal(np.isin(t, v[:3]), np.isin(v, v[:3]))
    assert np.array_equal(np.lexsort((t, -t)), np.lexsort((v, -v)))
    assert np.array_equal(np.digitize(t, [-1.0, 0.0, 1.0]), np.digitize(v, [-1.0, 0.0, 1.0]))
    assert np.array_equal(np.argpartition(t, 3), np.argpartition(v, 3))
    assert np.array_equal(np.isposinf(t), np.isposinf(v))
    assert np.array_equal(np.logical_xor(t, t > 0), np.logical_xor(v, v > 0))
    assert np.array_repr(t) == repr(t) and np.array_str(t) == str(t)
    assert np.array_equiv(t, v)


def test_refused_pad_modes_and_options():
    t = lp.tensor([1.0, 2.0], "fp16")
    for mode in ("mean", "median", "linear_ramp"):
        with pytest.raises(TypeError, match="computes new values"):
            np.pad(t, 1, mode=mode)
    with pytest.raises(TypeError, match="reflect_type"):
        np.pad(t, 1, mode="reflect", reflect_type="odd")


# -- the format's neighbours -------------------------------------------------------

def _all_finite(fmt):
    """Every finite value of ``fmt``, sorted, -0 and +0 as one zero (from lp.decode of
    every code)."""
    v = np.asarray(lp.decode(np.arange(2 ** fmt.bits), fmt), dtype=np.float64)
    return np.unique(v[np.isfinite(v)] + 0.0)


def _neighbours(fmt):
    vals = _all_finite(fmt)
    up = np.append(vals[1:], np.inf)
    down = np.insert(vals[:-1], 0, -np.inf)
    return vals, up, down


@pytest.mark.parametrize("fmt", [f for f in SMALL if f.has_inf], ids=ids)
def test_nextafter_is_the_next_value_of_the_format(fmt):
    vals, up, down = _neighbours(fmt)
    t = lp.tensor(vals, fmt)
    r_up = np.nextafter(t, np.inf).values
    r_down = np.nextafter(t, -np.inf).values
    # a zero result keeps x's sign, as IEEE's nextUp/nextDown do
    assert np.array_equal(r_up, up) and np.array_equal(r_down, down)
    assert_bits(np.nextafter(t, t).values, vals)
    assert np.isnan(np.nextafter(lp.tensor([np.nan], fmt), 1.0).values[0])


def test_nextafter_and_spacing_equal_numpy_float16_on_every_value():
    h = np.arange(2 ** 16, dtype=np.uint16).view(np.float16)
    h = h[np.isfinite(h)]
    t = lp.tensor(h.astype(np.float64), "fp16")
    for toward in (np.inf, -np.inf, 0.0):
        with np.errstate(over="ignore"):
            expected = np.nextafter(h, np.float16(toward)).astype(np.float64)
        # x == y gives y (C99, and NumPy's float32/64); NumPy's float16 gives x there.
        expected = np.where(h == toward, toward, expected)
        assert_bits(np.nextafter(t, toward).values, expected)
    # NumPy's float16 spacing is positive for negative x (unlike float32/64, whose sign
    # follows x): float32's rule is the oracle, on float16's neighbours.
    with np.errstate(over="ignore"):
        up = np.nextafter(h, np.where(h < 0, np.float16(-np.inf), np.float16(np.inf)))
    expected = up.astype(np.float64) - h.astype(np.float64)
    expected[h == 0] = float(np.nextafter(np.float16(0), np.float16(1)))  # +-0: up, as NumPy
    assert_bits(np.spacing(t).values, expected)


def test_spacing_equals_numpy_float32():
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.standard_normal(2000) * 10.0 ** rng.integers(-40, 38, 2000),
                        [0.0, -0.0, 1e-45, -1e-45, 3.4028235e38]]).astype(np.float32)
    with np.errstate(over="ignore"):
        expected = np.spacing(x).astype(np.float64)
    assert_bits(np.spacing(lp.tensor(x.astype(np.float64), "fp32")).values, expected)


# -- remainders and parts ------------------------------------------------------------

def _pairs(fmt, seed, n=300):
    a, b = draw(fmt, n, seed), draw(fmt, n, seed + 1)
    b = np.where(b == 0, 1.0, b)
    return a, b


@pytest.mark.parametrize("fmt", FEW, ids=ids)
def test_fmod_and_remainder_against_fractions(fmt):
    a, b = _pairs(fmt, 11)
    ta, tb = lp.tensor(a, fmt), lp.tensor(b, fmt)
    fmod, rem = np.fmod(ta, tb).values, np.remainder(ta, tb).values
    for x, y, f, r in zip(a, b, fmod, rem):
        q = Fraction(x) / Fraction(y)
        trunc = math.trunc(q)
        exact_f = Fraction(x) - trunc * Fraction(y)
        exact_r = Fraction(x) - math.floor(q) * Fraction(y)
        assert f == rr(exact_f, fmt) and r == rr(exact_r, fmt), (x, y)
        if exact_r == 0:    # NumPy: a zero remainder takes the divisor's sign
            assert np.signbit(r) == (np.signbit(y) and fmt.has_negative_zero)
    assert np.isnan(np.fmod(ta, 0.0).values).all()
    q, m = np.divmod(ta, tb)
    assert_bits(m.values, rem)
    assert_bits(q.values, lp.round(np.floor_divide(a, b), fmt))


@pytest.mark.parametrize("fmt", FEW, ids=ids)
def test_frexp_modf_copysign_ldexp(fmt):
    a, b = _pairs(fmt, 21, n=100)
    ta = lp.tensor(a, fmt)
    m, e = np.frexp(ta)
    assert m.fmt == fmt
    assert [(float(x), int(y)) for x, y in zip(m.values, e)] == [math.frexp(x) for x in a]
    frac, whole = np.modf(ta)
    assert [(float(x), float(y)) for x, y in zip(frac.values, whole.values)] == \
        [math.modf(x) for x in a]
    assert_bits(np.copysign(ta, b).values,
                [math.copysign(x, y) if fmt.has_negative_zero or x != 0 else 0.0
                 for x, y in zip(a, b)])
    for n in (-3, 0, 5):
        # a Fraction has no signed zero: an underflow keeps x's sign (IEEE)
        expected = [math.copysign(rr(Fraction(x) * Fraction(2) ** n, fmt), x)
                    if fmt.has_negative_zero else rr(Fraction(x) * Fraction(2) ** n, fmt)
                    for x in a]
        assert_bits(np.ldexp(ta, n).values, expected)
    h = np.heaviside(ta, 0.1).values
    assert_bits(h, [0.0 if x < 0 else 1.0 if x > 0 else rr(0.1, fmt) for x in a])


@pytest.mark.parametrize("fmt", FEW, ids=ids)
def test_methods_mirror_ndarray(fmt):
    """The ndarray methods of handled functions: NumPy's method on the decoded values
    gives the same values (the format kept where NumPy keeps the dtype)."""
    v = draw(fmt, (3, 4), seed=9)
    t = lp.tensor(v, fmt)
    for name, args in (("clip", (-1.0, 1.0)), ("take", ([0, 5],)), ("repeat", (2,)),
                       ("swapaxes", (0, 1)), ("compress", ([True, False, True],)),
                       ("squeeze", ()), ("conj", ())):
        r = getattr(t, name)(*args)
        assert r.fmt == fmt, name
        assert_bits(r.values, getattr(v, name)(*args), name)
    for name, args in (("all", ()), ("any", (0,)), ("argsort", (-1, "stable")),
                       ("nonzero", ()), ("searchsorted", (0.5,))):
        w = np.sort(v.ravel()) if name == "searchsorted" else v
        u = lp.tensor(w, fmt)
        assert np.array_equal(getattr(u, name)(*args), getattr(w, name)(*args)), name
    assert_bits(t.mT.values, v.T)
    assert_bits(t.real.values, v)
    assert_bits(t.imag.values, np.zeros_like(v))
    u = lp.tensor(v, fmt)
    u.partition(1, axis=1)
    w = v.copy()
    w.partition(1, axis=1)
    assert_bits(u.values, w)
    u.fill(0.1)
    assert_bits(u.values, np.full((3, 4), rr(0.1, fmt)))
    u.put([0, 5], 0.3)
    assert_bits(u.values.ravel()[[0, 5]], [rr(0.3, fmt)] * 2)


# -- edge cases: formats without inf or -0, plain operands, out= and copy= -------------

@pytest.mark.parametrize("fmt", SMALL, ids=ids)
def test_spacing_of_every_value_against_the_enumerated_values(fmt):
    vals, up, down = _neighbours(fmt)
    t = lp.tensor(vals, fmt)
    expected = []
    for x, u, d in zip(vals, up, down):
        nxt = d if x < 0 else u
        if math.isinf(nxt):     # past the largest finite value: inf, rounded into fmt
            expected.append(lpt.reference_round(nxt, fmt))
        else:
            expected.append(lpt.reference_round(Fraction(nxt) - Fraction(x), fmt))
    assert_bits(np.spacing(t).values, expected)


@pytest.mark.parametrize("fmt", SIGNED, ids=ids)
def test_fix_keeps_the_formats_zeros(fmt):
    v = np.array([-0.5, -0.25, 0.5, -1.5, 2.0])
    t = lp.tensor(v, fmt)
    expected = [math.copysign(math.trunc(x), x) for x in t.values]   # -0 for (-1, 0]
    if not fmt.has_negative_zero:
        expected = [e + 0.0 for e in expected]
    assert_bits(np.fix(t).values, expected)


def test_isposinf_refuses_a_tensor_out_and_leaves_it_alone():
    t = lp.tensor([np.inf, 1.0, -np.inf], "fp16")
    target = lp.tensor([2.0, 2.0, 2.0], "fp16")
    with pytest.raises(TypeError, match="out="):
        np.isposinf(t, target)
    with pytest.raises(TypeError, match="out="):
        np.isneginf(t, out=target)
    assert_bits(target.values, [2.0, 2.0, 2.0])
    plain = np.zeros(3, dtype=bool)
    assert np.isneginf(t, plain) is plain and plain.tolist() == [False, False, True]


def test_a_tensor_condition_with_a_plain_array_gives_numpys_plain_answer():
    cond = lp.tensor([1.0, 0.0, 1.0], "bf16")
    a = np.array([0.1, 0.2, 0.3])
    r = np.compress(cond, a)
    assert type(r) is np.ndarray and np.array_equal(r, np.compress([1.0, 0.0, 1.0], a))
    r = np.extract(cond, a)
    assert type(r) is np.ndarray and np.array_equal(r, np.extract([1.0, 0.0, 1.0], a))


def test_nan_to_num_copy_false_writes_in_place_as_numpy():
    t = lp.tensor([np.nan, 1.5, np.inf], "fp16")
    r = np.nan_to_num(t, copy=False, nan=0.1)
    assert r is t
    assert_bits(t.values, [rr(0.1, "fp16"), 1.5, float(lp.FP16.max)])
    u = lp.tensor([np.nan, 1.5], "fp16")
    assert_bits(np.nan_to_num(u).values, [0.0, 1.5])
    assert np.isnan(u.values[0])


def test_apply_along_axis_with_plain_answers_gives_numpys_plain_array():
    v = np.array([[1.0, 5.0, 3.0], [7.0, 2.0, 0.5]])
    t = lp.tensor(v, "fp8_e4m3")
    for axis in (0, 1, -1):
        r = np.apply_along_axis(np.argmax, axis, t)
        assert type(r) is np.ndarray and np.array_equal(r, np.apply_along_axis(np.argmax, axis, v))
        r = np.apply_along_axis(lambda s: s > 2, axis, t)
        assert np.array_equal(r, np.apply_along_axis(lambda s: s > 2, axis, v))


# a Tensor as sections or reps is taken as its integer values, as NumPy takes an
# integer array (it used to dispatch back to the handler until RecursionError).
@pytest.mark.parametrize("func, shape, arg", [
    (np.split, (4,), [2.0]), (np.split, (4,), 2.0), (np.array_split, (5,), 2.0),
    (np.array_split, (5,), [1.0, 3.0]), (np.hsplit, (2, 4), 2.0), (np.vsplit, (4, 2), [1.0]),
    (np.dsplit, (2, 2, 4), 2.0)])
def test_a_tensor_as_sections_gives_its_integer_values(func, shape, arg):
    x = np.arange(float(np.prod(shape))).reshape(shape)
    sections = lp.tensor(arg, "fp16")
    want = func(x, np.asarray(arg).astype(int))
    got = func(lp.tensor(x, "fp16"), sections)
    assert type(got) is type(want) and len(got) == len(want)
    for g, w in zip(got, want):
        assert isinstance(g, lp.Tensor) and g.fmt == lp.FP16
        assert np.array_equal(g.values, w)
    plain = func(x, sections)                 # a plain array split by a Tensor: plain pieces
    assert all(type(p) is np.ndarray and np.array_equal(p, w) for p, w in zip(plain, want))


@pytest.mark.parametrize("reps", [2.0, [2.0, 1.0]])
def test_a_tensor_as_reps_gives_its_integer_values(reps):
    x = np.array([1.0, 2.0, 3.0])
    got = np.tile(lp.tensor(x, "bf16"), lp.tensor(reps, "fp16"))
    assert got.fmt == lp.BF16
    assert np.array_equal(got.values, np.tile(x, np.asarray(reps).astype(int)))
    assert np.array_equal(np.tile(x, lp.tensor(reps, "fp16")),
                          np.tile(x, np.asarray(reps).astype(int)))


@pytest.mark.parametrize("call", [
    lambda t, s: np.split(t, s), lambda t, s: np.array_split(t, s),
    lambda t, s: np.tile(t, s)])
@pytest.mark.parametrize("bad", [1.5, np.nan, np.inf])
def test_a_tensor_of_non_integers_as_sections_or_reps_is_refused(call, bad):
    with pytest.raises(TypeError, match="takes integer .*not integers"):
        call(lp.tensor([1.0, 2.0, 3.0, 4.0], "fp16"), lp.tensor(bad, "fp16"))


def test_diff_of_a_0d_tensor_raises_as_numpy():
    # NumPy's ValueError, not a ZeroDivisionError from ``axis % 0``.
    with pytest.raises(ValueError, match="at least one dimensional"):
        np.diff(np.float64(1.0))
    with pytest.raises(ValueError, match="diff requires input that is at least one dim"):
        np.diff(lp.tensor(1.0, "fp16"))


@pytest.mark.parametrize("kw", [dict(n=-1), dict(n=1.5), dict(axis=3)])
def test_diff_refuses_what_numpy_refuses(kw):
    x = np.array([1.0, 2.0, 4.0, 8.0])
    with pytest.raises(Exception) as theirs:
        np.diff(x, **kw)
    with pytest.raises(type(theirs.value)):
        np.diff(lp.tensor(x, "fp16"), **kw)


def test_diff_of_order_zero_is_the_input_as_numpy():
    x = np.array([1.0, 2.0, 4.0, 8.0])
    got = np.diff(lp.tensor(x, "fp16"), n=0, prepend=[0.0])
    assert np.array_equal(np.asarray(got), np.diff(x, n=0, prepend=[0.0]))
