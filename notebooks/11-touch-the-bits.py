# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 11. Touch the bits
#
# Five widgets, one idea each: a format's bits, a rounding, stochastic rounding, a
# block-scaled block and a Tensor Core dot product. Click a bit, pick a mode, move a
# slider: Python recomputes every number with lowprec, and the browser only draws it.
# Where no widget frontend runs (this page on the docs site, nbconvert), each widget
# shows the same view as HTML, without its controls. The widgets need the `widgets`
# extra: `pip install "lowprec[widgets]"`.

# %%
import lowprec as lp
import lowprec.widgets as w

# %% [markdown]
# ## A format's bits
#
# BF16 `0x3dcd` is 0.1 rounded to nearest: sign 0, exponent 123 (so `2**-4`) and
# mantissa 77, that is `(1 + 77/128) / 16`. Click a bit to flip it: the sign bit gives
# -0.10009765625. Type a value in the box to see its pattern.

# %%
bits = w.bits("bf16", 0x3dcd)
bits

# %% [markdown]
# Every number above is `lp.decode`, `lp.fields` and `lp.explain` of the pattern:

# %%
lp.decode(0x3dcd ^ 0x8000, "bf16"), lp.fields(0x3dcd, "bf16")

# %% [markdown]
# ## One rounding, every mode
#
# 0.1 lies between two E4M3 values, 0.09375 and 0.1015625. Round to nearest takes the
# upper one; toward zero (`rz`) takes the lower one. Pick a mode and watch the choice.

# %%
w.rounding(0.1, "e4m3", "rz")

# %% [markdown]
# ## Stochastic rounding
#
# With `sr`, 0.3 rounds in FP4 (E2M1) to 0.5 with probability 0.6 and to 0 with
# probability 0.4, so the mean of many draws is 0.3. The widget counts 1000 seeded draws.

# %%
w.rounding(0.3, "e2m1", "sr")

# %% [markdown]
# ## A block of MXFP8
#
# One shared power-of-two scale per 32 values. The widget opens on lowprec's default
# rule, `rceil`: the scale rounded up, 4, so that 957 / 4 fits E4M3's 448 and nothing
# clamps, at the cost of a bit of the small values' precision. Pick `floor`, the OCP
# rule: the scale 2, and 957 / 2 is past 448: it clamps to 896.

# %%
w.block([0.1, 1.0, 2.0, 957.0], "mxfp8_e4m3")

# %% [markdown]
# ## A Tensor Core dot product
#
# Four FP16 products: 1 and three times `2**-24`. A Tensor Core aligns them to the
# largest exponent and keeps F bits below it. V100 keeps 23 and drops the three small
# products; A100 keeps 24 and keeps them. Pick a unit to see what it drops.

# %%
w.tensor_core([1.0, 1.0, 1.0, 1.0], [1.0, 2.0**-24, 2.0**-24, 2.0**-24], "v100")

# %% [markdown]
# ## Summation order
#
# The sum of n copies of 0.1 in FP16, three ways. Recursive summation stalls once the
# running sum's spacing outgrows 0.1; pairwise and Kahan sums stay close to the exact
# sum. Move the slider to change n.

# %%
w.summation([0.1] * 2000, "fp16", 2000)
