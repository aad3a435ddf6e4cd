"""Write the teaching notebooks from the cells below (``python notebooks/make_notebooks.py``).

The notebooks are generated, never edited by hand, and committed without outputs:
the test suite runs them top to bottom with nbmake. Every number a notebook shows
comes from running it. This script must not import lowprec (it only writes JSON).
"""

from __future__ import annotations

import pathlib

HERE = pathlib.Path(__file__).parent

SETUP = """\
import numpy as np
import matplotlib.pyplot as plt
import lowprec as lp"""

NB01 = [
    ("md", """\
# 1. Formats and bits

A binary floating-point number is a sign, an exponent and a significand:
`(-1)**s * 2**e * 1.m`. A *format* fixes how many bits each part gets. This notebook
compares the formats lowprec emulates, takes one number apart bit by bit, and draws
where each format's values lie. Every number below is computed by lowprec as the
notebook runs."""),
    ("code", SETUP),
    ("md", """\
## The formats side by side

`eps` is the gap between 1 and the next value, `max` the largest finite value,
`digits` the decimal digits NumPy's `finfo.precision` would report. The same table
is `lowprec formats` at the shell."""),
    ("code", """\
from lowprec.teaching.cli import format_table
print(format_table(formats=["fp32", "tf32", "fp16", "bf16", "e4m3", "e5m2", "fp6", "e3m2", "fp4"]))"""),
    ("md", """\
BF16 keeps FP32's 8 exponent bits (so FP32's range) and gives up mantissa bits: it has
7 where FP16 has 10, so its `eps` is 8 times FP16's. FP16 has the finer grid but
overflows past 65504."""),
    ("code", """\
for f in (lp.FP32, lp.FP16, lp.BF16):
    print(f"{f.name:5}  max {f.max:<12.6g} eps {f.eps:<10.6g} smallest subnormal {f.smallest_subnormal:.6g}")
print("BF16 eps / FP16 eps =", lp.BF16.eps / lp.FP16.eps)"""),
    ("md", """\
## One number, bit by bit

`lp.explain` rounds a value and shows what a student draws on paper: the fields, the
exact value of the result, its neighbours and the rounding error
(`lowprec explain 0.1 --fmt bf16` at the shell)."""),
    ("code", """\
print(lp.explain(0.1, "bf16"))"""),
    ("code", """\
print(lp.explain(1e-6, "fp16"))   # below FP16's smallest normal: a subnormal"""),
    ("md", """\
The fields are plain integers, and `lp.encode` / `lp.decode` go between values and bit
patterns. Here is every pattern of FP4 (E2M1), the 4-bit format of OCP's MX
specification:"""),
    ("code", """\
patterns = np.arange(16)
values = lp.decode(patterns, "fp4")
sign, exponent, mantissa = lp.fields(patterns, "fp4")
for p, s, e, m, v in zip(patterns, sign, exponent, mantissa, values):
    print(f"{p:04b}  sign {s}  exponent {e:02b}  mantissa {m:b}  ->  {v:+}")"""),
    ("md", """\
## Where the values lie

Every positive finite value of the 8-, 6- and 4-bit formats, from decoding every bit
pattern. The values are evenly spaced within each power of two (a *binade*) and the
spacing doubles from one binade to the next; the subnormals fill the gap to zero
evenly."""),
    ("code", """\
small = ["e4m3", "e5m2", "e2m3", "e3m2", "e2m1"]
fig, ax = plt.subplots(figsize=(9, 3.5))
for row, name in enumerate(small):
    fmt = lp.format(name)
    v = lp.decode(np.arange(2 ** (fmt.bits - 1)), fmt)       # sign bit 0
    v = v[np.isfinite(v) & (v > 0)]
    ax.plot(v, np.full(v.size, row), "|", markersize=14)
ax.set_xscale("log")
ax.set_yticks(range(len(small)), [lp.format(n).name for n in small])
ax.set_xlabel("value (log scale)")
ax.set_ylabel("format")
ax.set_title("Every positive finite value of the FP8, FP6 and FP4 formats")
fig.tight_layout()"""),
    ("md", """\
The relative spacing (gap to the next value divided by the value) is what rounding
costs: at most half of it with round to nearest. It saw-tooths between `eps/2` and
`eps` across the normal range and grows in the subnormal range, where precision is
lost."""),
    ("code", """\
fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
for name in ["fp16", "bf16", "e4m3", "e5m2"]:
    fmt = lp.format(name)
    v = lp.decode(np.arange(2 ** (fmt.bits - 1)), fmt)
    v = np.unique(v[np.isfinite(v) & (v > 0)])
    for ax in axes:
        ax.loglog(v[:-1], np.diff(v) / v[:-1], label=fmt.name, lw=1)
axes[1].set_xlim(1e-8, 1e5)
for ax, title in zip(axes, ["the whole range", "zoom: 1e-8 to 1e5"]):
    ax.set_xlabel("value x")
    ax.set_title(title)
    ax.grid(alpha=0.3)
axes[0].set_ylabel("relative spacing (next value - x) / x")
axes[0].legend()
fig.suptitle("Relative spacing of FP16, BF16 and FP8 values")
fig.tight_layout()"""),
    ("md", """\
FP16's curve stops at 65504 while BF16's runs on to about 3.4e38; BF16's sits about
8 times higher (3 fewer mantissa bits); below each format's smallest normal the
spacing is constant, so the relative spacing rises to 1."""),
]

NB02 = [
    ("md", """\
# 2. Rounding and stochastic rounding

`lp.round(x, fmt, mode)` rounds each exact input value once to a value of `fmt`. The
representable set is fixed; the mode only chooses which neighbour an input goes to.
This notebook draws the seven modes, shows why round-to-nearest loses small updates
to a large sum, and how stochastic rounding keeps them on average."""),
    ("code", SETUP),
    ("md", """\
## The modes on FP4

FP4 (E2M1) has only 15 distinct values, so the staircases are easy to see."""),
    ("code", """\
x = np.linspace(-3.2, 3.2, 1281)
modes = ["rne", "rna", "rz", "ru", "rd", "ro"]
fig, axes = plt.subplots(2, 3, figsize=(11, 6), sharex=True, sharey=True)
for ax, mode in zip(axes.flat, modes):
    ax.plot(x, x, color="0.8", lw=1)
    ax.plot(x, lp.round(x, "fp4", mode), lw=1.5)
    ax.set_title(f"mode = {mode!r}")
    ax.grid(alpha=0.3)
for ax in axes[1]:
    ax.set_xlabel("input x")
for ax in axes[:, 0]:
    ax.set_ylabel("lp.round(x, 'fp4', mode)")
fig.suptitle("The deterministic rounding modes on FP4 (E2M1)")
fig.tight_layout()"""),
    ("md", """\
Ties are where the nearest modes differ: `rne` sends a tie to the neighbour with an even
last bit, `rna` away from zero. Round to odd (`ro`) sends every inexact input to the
neighbour whose last bit is 1."""),
    ("code", """\
ties = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
for mode in ("rne", "rna", "ro"):
    print(f"{mode:4}", lp.round(ties, "fp4", mode))"""),
    ("md", """\
## Stochastic rounding is unbiased

With `mode="sr"` an input between neighbours `down < x < up` rounds up with
probability `(x - down) / (up - down)`, so the expected result is `x` itself."""),
    ("code", """\
x = 0.3                                    # between FP4's 0 and 0.5
draws = lp.round(np.full(100_000, x), "fp4", "sr", rng=0)
print("values drawn:", np.unique(draws), " mean:", draws.mean(), " P(up) =", (draws == 0.5).mean())
print(lp.explain(x, "fp4", "sr", rng=0))"""),
    ("md", """\
## Adding small numbers to a large sum

Add 0.01 (rounded to BF16) a thousand times, rounding every addition to BF16
(`lp.add` is correctly rounded). With round to nearest the sum stops at 4: there BF16's
spacing is 2**-5 = 0.03125, and adding 0.01, less than half of it, changes nothing.
Stochastic rounding keeps the sum right on average."""),
    ("code", """\
steps, trials = 1000, 16
step = lp.round(0.01, "bf16")
rng = np.random.default_rng(1)
runs = {mode: np.zeros((steps + 1, trials)) for mode in ("rne", "rz", "sr")}
for mode, acc in runs.items():
    for i in range(steps):
        acc[i + 1] = lp.add(acc[i], step, "bf16", mode=mode, rng=rng)
exact = step * np.arange(steps + 1)
fig, ax = plt.subplots(figsize=(8, 4.5))
ax.plot(exact, color="k", lw=2, label="exact")
ax.plot(runs["rne"][:, 0], label="rne")
ax.plot(runs["rz"][:, 0], label="rz")
ax.plot(runs["sr"], color="tab:green", alpha=0.3, lw=1)
ax.plot(runs["sr"].mean(axis=1), color="tab:green", label=f"sr (mean of {trials} runs, and each run)")
ax.set_xlabel("number of additions")
ax.set_ylabel("running sum in BF16")
ax.set_title("Summing 0.01 in BF16: round to nearest stagnates, stochastic rounding does not")
ax.legend()
ax.grid(alpha=0.3)
fig.tight_layout()
print("final sums: exact", exact[-1], " rne", runs["rne"][-1, 0], " rz", runs["rz"][-1, 0],
      " sr mean", runs["sr"][-1].mean())"""),
    ("md", """\
## Stochastic rounding with few random bits

Hardware draws only a few random bits. With `sr_bits=r` an input rounds up with
probability `floor(f * 2**r) / 2**r`, where `f` is its fraction of the gap, so a
remainder below `2**-r` of the gap never rounds up. Past 4 the gap is 2**-5 and the
step 0.01001 is 0.32 of it: one random bit gives P(up) = floor(0.64) / 2 = 0, and
the sum stops at 4 as with round to nearest. With two bits it rounds up with
probability 1/4 instead of 0.32, so it climbs more slowly, and past 8, where the step is
0.16 of the gap, floor(0.64) / 4 = 0: it can never pass 8."""),
    ("code", """\
def final_sum(sr_bits, trials=16, seed=2):
    rng = np.random.default_rng(seed)
    acc = np.zeros(trials)
    for _ in range(steps):
        acc = lp.add(acc, step, "bf16", mode="sr", rng=rng) if sr_bits is None else \\
            lp.round(acc + step, "bf16", "sr", rng=rng, sr_bits=sr_bits)
    return acc.mean()

bits = [1, 2, 3, 4, 6, 8, 12]
sums = [final_sum(r) for r in bits]
print({r: round(float(v), 3) for r, v in zip(bits, sums)})
fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(bits, sums, "o-", label="sr with r random bits")
ax.axhline(final_sum(None), color="tab:green", ls="--", label="sr with 53 bits")
ax.axhline(exact[-1], color="k", label="exact")
ax.set_xlabel("random bits r (sr_bits)")
ax.set_ylabel(f"sum after {steps} additions (mean)")
ax.set_title("Few random bits bias stochastic rounding down")
ax.legend()
ax.grid(alpha=0.3)
fig.tight_layout()"""),
    ("md", """\
(`acc + step` is exact in float64, as both are BF16 values of nearby magnitude, so
`lp.round` of it is one correctly rounded addition, like `lp.add`.)

## Counting what went wrong: flags

`lp.flags()` counts, per element, IEEE 754's exceptions. How many small gradients
underflow in FP16?"""),
    ("code", """\
grads = np.random.default_rng(3).standard_normal(100_000) * 1e-4
with lp.flags() as f:
    g16 = lp.round(grads, "fp16")
print(f)
below = np.abs(grads) < 2.0**-14                 # FP16's smallest normal
# Tininess after rounding: rounded to 11 bits with no lower exponent limit, inputs from
# 2**-14 - 2**-26 (the midpoint below 2**-14 at that precision) up reach 2**-14.
not_tiny = below & (np.abs(grads) >= 2.0**-14 - 2.0**-26)
print("inputs below 2**-14:", np.count_nonzero(below), "of", grads.size)
print("  rounded to 0 in FP16:", np.count_nonzero(below & (g16 == 0)))
print("  rounded up to 2**-14 in FP16:", np.count_nonzero(below & (np.abs(g16) == 2.0**-14)))
print("  not tiny after rounding:", np.count_nonzero(not_tiny))
print("underflow = below 2**-14 and tiny after rounding (all inexact here):",
      np.count_nonzero(below) - np.count_nonzero(not_tiny))"""),
    ("md", """\
Underflow means *tiny and inexact*, with tininess detected after rounding (as on x86):
an input is tiny when, rounded to the format's precision with an unbounded exponent
range, it is still below the smallest normal. So an input within 2**-26 below 2**-14
does not underflow, while one a little further below, which FP16's coarser subnormal
grid also rounds up to 2**-14, does. An exact subnormal result never underflows. `subnormals=False` flushes results below the smallest
normal (and counts them as `flushed`); `saturate=True` clamps overflow to ±max."""),
    ("code", """\
print(lp.round([3e-5, 1e-7], "fp16"), lp.round([3e-5, 1e-7], "fp16", subnormals=False))
print(lp.round([7e4, -1e6], "fp16"), lp.round([7e4, -1e6], "fp16", saturate=True))
print(lp.round(500.0, "e4m3"), lp.round(500.0, "e4m3", saturate=True), lp.round(500.0, "fp4"))"""),
]

NB03 = [
    ("md", """\
# 3. Tensor Core matrix products

A Tensor Core computes `D = A B + C` in *block FMAs*: for each output, `k` exact
products are aligned to the largest exponent among them and `c`, truncated to `F`
fraction bits, summed exactly, and rounded once (toward zero, for FP32 output). The
parameters differ from GPU to GPU (Fasi, Higham, Mikaitis and Pranesh 2021; Khattak and
Mikaitis 2025). `lp.matmul(a, b, model=..., in_fmt=...)` computes this bit for bit."""),
    ("code", SETUP),
    ("code", """\
for name in ("v100", "a100", "h100", "b200"):
    p = lp.MODELS[name].for_format("fp16")
    print(f"{name:5} FP16 inputs: block k = {p.block:2}, F = {p.fraction_bits}, "
          f"FP32 output rounded {p.out_rounding!r}, Elim = {p.elim}")"""),
    ("md", """\
## The test vectors

Inputs are FP16, the output FP32; each row is one 16-long dot product plus `c`
(entries not listed are 0), shown as FP32 bit patterns. `2**-24` is FP16's smallest
subnormal."""),
    ("code", """\
def hexbits(d):
    return f"{int(np.float32(d).view(np.uint32)):08x}"

def vector(values):
    v = np.zeros(16)
    v[:len(values)] = values
    return v

t = 2.0**-24
cases = {
    "D1": ([1], [1], -(1 - t)),
    "D3": ([1, 1], [1, -t], -1 + t),
    "D2": ([1] * 4, [t] * 4, 1 - t),
    "D5": ([1] * 4, [t] * 4, 1.0),
    "C1": ([1, 1], [2, 3 * t], 0.0),
    "C2": ([1, 1], [-2, -3 * t], 0.0),
    "D4c": ([1] * 4, [1] * 4, 1 + 2**-22 + 2**-23),
}
models = ["v100", "a100", "h100", "exact"]
print("id   " + "".join(f"{m:>10}" for m in models))
for name, (a, b, c) in cases.items():
    row = [lp.matmul(vector(a)[None, :], vector(b)[:, None], model=m, c=[[c]], in_fmt="fp16")[0, 0]
           for m in models]
    print(f"{name:4} " + "".join(f"{hexbits(d):>10}" for d in row))"""),
    ("md", """\
## V100's non-monotonic sum

D2 and D5 differ only in `c`: with `c = 1 - 2**-24` V100 returns `1 + 2**-23`, with the
*larger* `c = 1` it returns 1. With `c` below 1 the reference exponent is -1 and the
four products `2**-24` survive the alignment to 23 fractional bits; with `c = 1` it is 0,
and each product, now below the last kept bit, is truncated to 0. A100 keeps one more
bit (F = 24) and is monotonic here. Sweep `c` over consecutive FP32 values around 1:"""),
    ("code", """\
ones, tiny = np.ones((1, 4)), np.full((4, 1), 2.0**-24)
below = np.float32(1.0) - np.float32(2**-24) * np.arange(8, 0, -1)
above = np.float32(1.0) + np.float32(2**-23) * np.arange(0, 5)
cs = np.concatenate([below, above]).astype(np.float64)
fig, ax = plt.subplots(figsize=(8, 4.5))
for model, marker in (("exact", "o"), ("a100", "s"), ("v100", "x")):
    d = [lp.matmul(ones, tiny, model=model, c=[[c]], in_fmt="fp16")[0, 0] for c in cs]
    ax.plot((cs - 1) * 2**24, (np.array(d) - 1) * 2**24, marker=marker, label=model)
ax.set_xlabel("c - 1, in units of 2**-24")
ax.set_ylabel("d - 1, in units of 2**-24")
ax.set_title("d = c + 4 * 2**-24 on V100: a larger c can give a smaller d")
ax.legend()
ax.grid(alpha=0.3)
fig.tight_layout()"""),
    ("md", """\
## The models reproduce the published measurements

Khattak and Mikaitis measured 5,000 random block FMAs on each GPU; the data ship with
lowprec's tests. A model reproduces a row when its FP32 result has the GPU's bit
pattern. The sequential FP32 model and one rounding of the exact result do not
behave like the hardware."""),
    ("code", """\
import pathlib

data_dir = pathlib.Path("..") / "tests" / "data" / "tensorcore"
datasets = [("v100", "fp16"), ("a100", "fp16"), ("a100", "bf16"), ("h100", "fp16"), ("h100", "bf16")]
models = ["exact", "fp32", "v100", "a100", "h100"]
match = np.full((len(datasets), len(models)), np.nan)
for i, (gpu, fmt) in enumerate(datasets):
    data = np.load(data_dir / f"{gpu}_{fmt}.npz")
    as64 = lambda key: data[key].view(np.float32).astype(np.float64)
    a, b, c, d = as64("a"), as64("b"), as64("c"), data["d_fp32"]
    for j, model in enumerate(models):
        try:
            lp.MODELS[model].for_format(fmt)
        except ValueError:                      # V100 has no BF16
            continue
        out = lp.matmul(a[:, None, :], b[:, :, None], model=model, c=c[:, None, None], in_fmt=fmt)
        match[i, j] = np.mean(out[:, 0, 0].astype(np.float32).view(np.uint32) == d)
for (gpu, fmt), row in zip(datasets, match):
    print(f"{gpu} {fmt}: " + ", ".join(f"{m} {r:.1%}" for m, r in zip(models, row) if not np.isnan(r)))

fig, ax = plt.subplots(figsize=(9, 4))
width = 0.16
for j, model in enumerate(models):
    ax.bar(np.arange(len(datasets)) + (j - 2) * width, np.nan_to_num(match[:, j]), width, label=model)
ax.set_xticks(range(len(datasets)), [f"{g} {f}" for g, f in datasets])
ax.set_xlabel("measured data (GPU, input format), 5,000 rows each")
ax.set_ylabel("fraction of rows reproduced bit for bit")
ax.set_title("Which model reproduces which GPU")
ax.legend(fontsize=8, ncol=5, loc="lower center")
fig.tight_layout()"""),
    ("md", """\
## Error against K

Longer dot products accumulate more error. `lowprec.teaching.error_vs_k` measures the
mean relative error of dot products of uniform [0, 1) vectors (inputs rounded to the
format first, so only the accumulation is measured) against the exact result (also what
`lowprec demo` prints). With terms of one sign, the Tensor Cores' truncations all
point the same way and add up; the sequential FP32 loop rounds to nearest and its
errors partly cancel; FP16 accumulation stagnates."""),
    ("code", """\
from lowprec.teaching import error_vs_k, error_table, plot_error_vs_k

result = error_vs_k(ks=(16, 64, 256, 1024), formats=("fp16", "bf16"),
                    models=("exact", "fp32", "fp16", "v100", "a100", "h100"), trials=16, size=8)
print(error_table(result, "dot"))
fig = plot_error_vs_k(result, "dot")"""),
    ("md", """\
## The models against each other

The same FP16 product on different GPUs, with entries uniform in [0, 1): how often do
two models agree bit for bit, and how far is each from the correctly rounded result,
in units of the FP32 spacing (ulp) at that result? With terms of one sign, alignment
truncation and round toward zero only ever lose magnitude, so every Tensor Core error
has the same sign; wider blocks and more alignment bits (V100, A100, H100) shrink it."""),
    ("code", """\
rng = np.random.default_rng(0)
A = lp.round(rng.random((48, 256)), "fp16")
B = lp.round(rng.random((256, 48)), "fp16")
names = ["exact", "fp32", "v100", "a100", "h100"]
D = {m: lp.matmul(A, B, model=m, in_fmt="fp16") for m in names}
print("fraction of outputs equal, bit for bit:")
print("       " + "".join(f"{m:>7}" for m in names))
for m in names:
    print(f"{m:6} " + "".join(f"{np.mean(D[m] == D[n]):7.2f}" for n in names))

ulp = np.spacing(np.abs(D["exact"]).astype(np.float32)).astype(np.float64)
errors = {m: ((D[m] - D["exact"]) / ulp).ravel() for m in names[1:]}
print("mean error in ulps:", {m: round(float(e.mean()), 1) for m, e in errors.items()})
fig, ax = plt.subplots(figsize=(8, 4.5))
bins = np.arange(min(e.min() for e in errors.values()) - 0.5, max(e.max() for e in errors.values()) + 1.5)
for m, e in errors.items():
    ax.hist(e, bins=bins, histtype="step", lw=1.5, label=m)
ax.set_xlabel("error of the FP32 result, in ulps of the correctly rounded result")
ax.set_ylabel("number of outputs (of 48 x 48)")
ax.set_title("FP16 inputs uniform in [0, 1), K = 256: error against the exact product")
ax.legend()
fig.tight_layout()"""),
]


NB04 = [
    ("md", """\
# 4. Mixed-precision training

A small network trained with every forward and backward operation emulated in FP16 or
BF16 (`lowprec.amp`, `lowprec.nn`): where FP16 gradients underflow, how dynamic loss
scaling rescues them, why BF16 weights lose small updates, and what FP32 master weights
and stochastic rounding of the updates buy. Every number below is computed as the
notebook runs (see also [the documentation page](../docs/mixed-precision.md))."""),
    ("code", SETUP + """
import dataclasses
from lowprec import amp, nn

data = amp.blobs(64, 8, 4, seed=0)          # 4 Gaussian clusters in 8-D, 64 points
STEPS, LR = 60, 0.02

def run(policy, weight=1.0, **kwargs):
    \"\"\"Train a fresh 8-16-4 MLP; the loss is weighted by `weight`, the learning rate
    divided by it (in FP32, a power-of-two weight changes nothing, bit for bit).\"\"\"
    return amp.train(nn.mlp([8, 16, 4], rng=0), data, policy, STEPS, lr=LR / weight,
                     loss_weight=weight, **kwargs)"""),
    ("md", """\
## How small are the gradients?

FP16 has 5 exponent bits: its smallest normal value is 2**-14 and its smallest
subnormal 2**-24; at or below 2**-25 a value rounds to zero. Here are the gradients of the
untrained network in FP32, with the loss weighted by 2**-18 (a small term of a larger
loss, or a mean over many more elements), against those thresholds: the gradient of
the logits, where the backward pass starts, and the weight gradients it leads to;
then the same after a loss scale of 2**16. In an FP16 backward pass a logit gradient
that rounds to zero takes its share of every weight gradient with it."""),
    ("code", """\
W = 2.0**-18
model = nn.mlp([8, 16, 4], rng=0)
x, labels = data
with lp.context(matmul="fp32"):
    logits = model(lp.tensor(x, "fp32"))
    dz = nn.softmax_cross_entropy_backward(logits, labels, W)
    model.backward(dz)
grads = {"logit gradients": np.abs(np.asarray(dz)).ravel(),
         "weight gradients": np.concatenate([np.abs(np.asarray(p.grad)).ravel()
                                             for p in model.parameters()])}
for name, g in grads.items():
    print(f"{name:16}: {np.mean(g <= 2.0**-25):6.1%} at most 2**-25 (zero in FP16), "
          f"{np.mean(g < 2.0**-14):6.1%} below 2**-14 (subnormal); "
          f"after scaling by 2**16: {np.mean(g * 2.0**16 <= 2.0**-25):.1%}")

fig, ax = plt.subplots(figsize=(8, 4))
bins = np.arange(-36, 2)
for name, g in grads.items():
    ax.hist(np.log2(g[g > 0]), bins=bins, histtype="step", lw=1.5, label=name)
    ax.hist(np.log2(g[g > 0] * 2.0**16), bins=bins, histtype="step", lw=1.5, ls="-.",
            label=name + " x 2**16")
ax.axvline(-24, color="k", ls="--", label="FP16 smallest subnormal, 2**-24")
ax.axvline(-14, color="k", ls=":", label="FP16 smallest normal, 2**-14")
ax.set_xlabel("log2 |gradient|")
ax.set_ylabel("number of elements")
ax.set_title("Gradients (loss weight 2**-18) against FP16's range")
ax.legend(fontsize=8)
fig.tight_layout()"""),
    ("md", """\
## FP16 with and without loss scaling

`fp16-mixed` computes in FP16 and keeps FP32 master weights; without loss scaling the
small gradients underflow on their way back through the network. `GradScaler` (PyTorch's
rules: start at 2**16, halve and skip the step on inf/NaN, double after
`growth_interval` clean steps) multiplies the loss before the backward pass and divides
the gradients after it."""),
    ("code", """\
fp32 = run("fp32")
plain = run("fp16-mixed", W)
scaled = run("fp16-mixed", W, scaler=amp.GradScaler())
for name, h in [("fp32", fp32), ("fp16-mixed, no scaling", plain), ("fp16-mixed + GradScaler", scaled)]:
    print(f"{name:24} final loss {h.final_loss:.4f}   weight-gradient zeros {np.mean(h.grad_zero):.1%}")

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
for name, h in [("fp32", fp32), ("fp16-mixed, no scaling", plain), ("fp16-mixed + GradScaler", scaled)]:
    ax1.plot(h.loss, label=name)
    ax2.plot(h.grad_zero, label=name)
ax1.set_xlabel("step"); ax1.set_ylabel("training loss (cross-entropy)")
ax1.set_title("Loss, gradients 2**18 times smaller")
ax2.set_xlabel("step"); ax2.set_ylabel("fraction of weight-gradient elements = 0")
ax2.set_title("Gradients lost to underflow")
ax1.legend(); ax2.legend()
fig.tight_layout()"""),
    ("md", """\
## The scale finds its level

Started far too high (2**40), the scaled gradients overflow FP16: each such step is
skipped and the scale halved, until the gradients fit; then it grows again after every
`growth_interval` clean steps (10 here, 2000 by default) and backs off whenever it
overflows."""),
    ("code", """\
h = run("fp16-mixed", W, scaler=amp.GradScaler(init_scale=2.0**40, growth_interval=10))
skipped = np.flatnonzero(h.skipped)
print("skipped steps:", skipped.tolist())
fig, ax = plt.subplots(figsize=(8, 3.5))
ax.plot(np.log2(h.scale), drawstyle="steps-post", label="loss scale")
ax.plot(skipped, np.log2(np.array(h.scale))[skipped], "rx", label="skipped step (inf/NaN)")
ax.set_xlabel("step"); ax.set_ylabel("log2(loss scale)")
ax.set_title("Dynamic loss scaling from init_scale = 2**40")
ax.legend()
fig.tight_layout()"""),
    ("md", """\
## BF16: no underflow, but lost updates

BF16 has FP32's exponent range, so gradients do not underflow and no loss scaling is
needed; but it has 8 bits of precision, so a weight near 1 moves in steps of 2**-8 or
2**-7, and an update below half of that rounds back to the weight. With BF16 weights
(`"bf16"`), many updates are lost at every step; FP32 master weights (`"bf16-mixed"`)
keep them; stochastic rounding of the update (`update="sr"`) keeps them on average."""),
    ("code", """\
pure = run("bf16")
mixed = run("bf16-mixed")
sr = run(dataclasses.replace(amp.Policy.named("bf16"), update="sr"))
runs = [("fp32", fp32), ("bf16", pure), ("bf16-mixed", mixed), ("bf16 + SR", sr)]
for name, h in runs:
    print(f"{name:11} final loss {h.final_loss:.4f}   updates left unchanged {np.nanmean(h.unchanged):.1%}")

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
for name, h in runs:
    ax1.plot(np.array(h.loss) - np.array(fp32.loss), label=name)
    ax2.plot(h.unchanged, label=name)
ax1.set_xlabel("step"); ax1.set_ylabel("training loss minus FP32's")
ax1.set_title(f"Loss against FP32, SGD with lr = {LR}")
ax2.set_xlabel("step"); ax2.set_ylabel("fraction of weights with g != 0 left unchanged")
ax2.set_title("Updates rounded away")
ax1.legend(); ax2.legend()
fig.tight_layout()"""),
    ("md", """\
The gap is small after 60 steps and grows with training: the lost updates are the
ones that are small relative to their weight, and they are lost every step. The test
suite (`tests/test_amp.py`) measures the same effects on a longer run."""),
]


def build(cells):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for kind, source in cells:
        make = nbformat.v4.new_markdown_cell if kind == "md" else nbformat.v4.new_code_cell
        nb.cells.append(make(source))
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:02d}"          # stable ids: regenerating changes nothing
    return nb


NOTEBOOKS = {
    "01-formats-and-bits.ipynb": NB01,
    "02-rounding-and-stochastic-rounding.ipynb": NB02,
    "03-tensor-core-matmul.ipynb": NB03,
    "04-mixed-precision-training.ipynb": NB04,
}


def stale():
    """The notebooks whose cells differ from the cells above: regenerate them.

    Examples
    --------
    >>> stale()
    []
    """
    import nbformat

    out = []
    for name, cells in NOTEBOOKS.items():
        committed = nbformat.read(HERE / name, as_version=4)
        pairs = [(c.cell_type, c.source) for c in committed.cells]
        if pairs != [(c.cell_type, c.source) for c in build(cells).cells]:
            out.append(name)
    return out


def main():
    import nbformat

    for name, cells in NOTEBOOKS.items():
        nbformat.write(build(cells), HERE / name)
        print("wrote", HERE / name)


if __name__ == "__main__":
    main()
