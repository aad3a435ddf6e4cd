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
# # 7. Linear algebra in low precision
#
# `lowprec.linalg` factors matrices with every operation rounded in the Tensor's
# format: `lu` (partial pivoting; blocked, its trailing update through a matmul model),
# `cholesky`, `qr` (Householder), `solve`, `inv`, `det`, `slogdet`, `lstsq`, `norm`,
# and `refine`, mixed-precision iterative refinement (LU-IR and GMRES-IR). This
# notebook measures three classical results of numerical linear algebra on them:
#
# 1. the backward error of LU in FP16, BF16 and FP32 against the bound
#    `gamma_n = n u / (1 - n u)` (Higham, *Accuracy and Stability of Numerical
#    Algorithms*, 2nd ed., Theorem 9.3: `P^T A = L U + dA` with
#    `|dA| <= gamma_n |L| |U|`);
# 2. iterative refinement with an FP16 LU (Carson and Higham, SISC 2018), which
#    should reach FP64 accuracy when `kappa(A) u_16` is below 1 and stall or diverge
#    beyond it;
# 3. GMRES-IR against Carson and Higham's experiment: FP16 factors, FP32 working
#    precision, FP64 residuals, LU-IR against GMRES-IR for condition numbers 1e1 to 1e8.
#
# Every number is computed as the notebook runs.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np

import lowprec as lp
import lowprec.linalg as la

# %% [markdown]
# ## 1. The backward error of LU
#
# For each format and size `n`, three random matrices (standard normal entries, fixed
# seeds) are factored by `la.lu` (unblocked, every multiplier, product and difference
# rounded). The componentwise backward error is
# `max_ij |P^T A - L U|_ij / (|L| |U|)_ij`, measured in float64 on the exact values of
# the factors (float64's own error, about `n 2**-53`, is far below every `u` here).
# The bound `gamma_n` holds only while `n u < 1`.

# %%
FORMATS = ["fp16", "bf16", "fp32"]
SIZES = [4, 8, 16, 32, 64, 128]
SEEDS = range(3)


def lu_backward_error(n, fmt, seed):
    rng = np.random.default_rng(seed)
    a = lp.tensor(rng.standard_normal((n, n)), fmt)
    P, L, U = (t.values for t in la.lu(a))
    A = a.values
    err = np.abs(P.T @ A - L @ U)
    den = np.abs(L) @ np.abs(U)
    return float(np.max(err[den > 0] / den[den > 0]))


def gamma(n, fmt):
    nu = n * lp.finfo(fmt).unit_roundoff
    return nu / (1 - nu) if nu < 1 else math.nan


backward = {f: [max(lu_backward_error(n, f, s) for s in SEEDS) for n in SIZES] for f in FORMATS}
print(f"{'n':>5} " + " ".join(f"{f + ' error':>12} {f + ' gamma_n':>12}" for f in FORMATS))
for i, n in enumerate(SIZES):
    print(f"{n:5d} " + " ".join(f"{backward[f][i]:12.2e} {gamma(n, f):12.2e}" for f in FORMATS))

# %%
fig, ax = plt.subplots(figsize=(8, 4.8))
for f, colour in zip(FORMATS, ["C0", "C1", "C2"]):
    name = lp.format(f).name
    ax.loglog(SIZES, backward[f], "o-", color=colour, label=f"{name}: measured (max of 3)")
    ax.loglog(SIZES, [gamma(n, f) for n in SIZES], "--", color=colour,
              label=f"{name}: $\\gamma_n = nu/(1-nu)$")
    ax.axhline(lp.finfo(f).unit_roundoff, color=colour, lw=0.6, ls=":")
ax.set_xlabel("n"); ax.set_ylabel("max |PᵀA - LU| / (|L||U|)")
ax.set_title("Componentwise backward error of LU with partial pivoting")
ax.legend(fontsize=8, ncol=2)
plt.show()

# %%
holds = all(backward[f][i] <= gamma(n, f) for f in FORMATS for i, n in enumerate(SIZES)
            if not math.isnan(gamma(n, f)))
ratio = {f: max(backward[f][i] / gamma(n, f) for i, n in enumerate(SIZES)
                if not math.isnan(gamma(n, f))) for f in FORMATS}
print("the bound gamma_n holds for every format and size:", holds)
for f in FORMATS:
    print(f"{lp.format(f).name}: largest measured / gamma_n = {ratio[f]:.3f}; "
          f"at n = {SIZES[-1]} the error is {backward[f][-1] / lp.finfo(f).unit_roundoff:.1f} u")

# %% [markdown]
# The measured errors stay below the bound, and far below it for large `n`: the bound
# is a worst case, where the rounding errors of each entry's `n` operations all add
# with one sign. The printed ratios say how much room there is.

# %% [markdown]
# ## 2. Iterative refinement with an FP16 LU
#
# `la.refine(a, b)` factors `A` once in FP16, then repeats: residual `r = b - A x` in
# FP64, correction `d` from the FP16 factors, `x = x + d` in FP64. Theory (Carson and
# Higham 2018) says the error contracts by about `kappa(A) u_16` per step while that is
# below 1 (`u_16 = 2**-11`), so `x` reaches FP64 accuracy; beyond, the FP16 factors
# carry no correct digit of the correction.
#
# Test matrices: `A = U diag(sigma) V^T` with `U`, `V` random orthogonal (QR of a
# Gaussian matrix) and `sigma` geometric from 1 to `1/kappa`, so `kappa_2(A) = kappa`,
# for `kappa = 1e1, ..., 1e8`; `x` standard normal and `b = A x` (fixed seeds). Two
# factorizations: plain FP16 LU, and an FP16 LU whose trailing updates run on the H100
# Tensor Core model (`block=16, model="h100"`: products accumulated in FP32, rounded
# once into FP16).

# %%
N = 50
KAPPAS = [10.0**k for k in range(1, 9)]
U16 = lp.finfo("fp16").unit_roundoff
VARIANTS = {"FP16 LU": {}, "FP16 LU, h100 updates": {"block": 16, "model": "h100"}}


def conditioned(n, kappa, seed):
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.standard_normal((n, n)))
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    a = (u * np.logspace(0, -np.log10(kappa), n)) @ v.T
    x = rng.standard_normal(n)
    return a, a @ x, x


runs = {}
for k, kappa in enumerate(KAPPAS):
    a, b, x = conditioned(N, kappa, seed=k)
    for name, options in VARIANTS.items():
        result = la.refine(a, b, x_true=x, max_iter=20, **options)
        runs[name, kappa] = (np.linalg.cond(a, np.inf), result)

# %%
fig, axes = plt.subplots(2, 2, figsize=(13, 8), sharex=True)
colours = plt.cm.viridis(np.linspace(0, 0.9, len(KAPPAS)))
for col, name in enumerate(VARIANTS):
    for kappa, colour in zip(KAPPAS, colours):
        h = runs[name, kappa][1].history
        it = [s["iteration"] for s in h]
        axes[0, col].semilogy(it, [s["forward_error"] for s in h], "o-", ms=3, color=colour,
                              label=f"κ = {kappa:.0e}, κu = {kappa * U16:.1e}")
        axes[1, col].semilogy(it, [s["backward_error"] for s in h], "o-", ms=3, color=colour)
    axes[0, col].set_title(name)
    axes[0, col].set_ylabel("forward error ‖x - x*‖∞ / ‖x*‖∞")
    axes[1, col].set_ylabel("backward error ‖r‖∞ / (‖A‖∞‖x‖∞ + ‖b‖∞)")
    axes[1, col].set_xlabel("iteration")
    axes[1, col].axhline(2.0**-53, color="k", lw=0.6, ls=":")
axes[0, 0].legend(fontsize=7)
plt.tight_layout()
plt.show()

# %% [markdown]
# Each run carries `refine`'s verdict (`result.status`, and `result.reason` with the
# rule that fired and its numbers):
#
# - **converged** when a correction no longer changes `x` beyond `u`
#   (`||d|| / ||x|| <= u`). Here the residuals are no more precise than `x` (both
#   FP64), so this is fixed-precision refinement, which aims at backward stability.
#   Corrections that stop shrinking at a backward error below `3 n u` also count.
# - **stalled** when a correction is more than half the one before.
# - **diverged** when `x` stops being finite or the corrections grow twice running.
# The contraction is the geometric mean of the first three ratios
# of successive forward errors (theory: about `kappa u_16` or less).

# %%
def contraction(h):
    fe = [s["forward_error"] for s in h[:4]]
    r = [b / a for a, b in zip(fe, fe[1:]) if a > 0 and np.isfinite(b)]
    return math.exp(np.mean(np.log(r))) if r else math.nan


table = {}
print(f"{'kappa_2':>8} {'kappa_inf':>10} {'kappa u16':>10} | "
      + " | ".join(f"{name:>42}" for name in VARIANTS))
print(f"{'':>31}| " + " | ".join(f"{'status':>10} {'steps':>5} {'rate':>9} {'last error':>11}   "
                                 for _ in VARIANTS))
for kappa in KAPPAS:
    cells = []
    for name in VARIANTS:
        kinf, result = runs[name, kappa]
        h = result.history
        table[name, kappa] = result.status
        cells.append(f"{table[name, kappa]:>10} {len(h) - 1:5d} {contraction(h):9.1e} "
                     f"{h[-1]['forward_error']:11.1e}   ")
    print(f"{kappa:8.0e} {kinf:10.1e} {kappa * U16:10.2e} | " + " | ".join(cells))

# %%
below = [k for k in KAPPAS if k * U16 < 1]
above = [k for k in KAPPAS if k * U16 >= 1]
for name in VARIANTS:
    print(f"{name}:")
    print(f"  kappa u16 < 1 ({', '.join(f'{k:.0e}' for k in below)}): all converged?",
          all(table[name, k] == "converged" for k in below))
    print(f"  kappa u16 > 1 ({', '.join(f'{k:.0e}' for k in above)}): none converged?",
          not any(table[name, k] == "converged" for k in above),
          "| statuses:", ", ".join(table[name, k] for k in above))
    rates = [(k * U16, contraction(runs[name, k][1].history)) for k in below]
    print("  contraction per step vs kappa u16:",
          ", ".join(f"{r:.1e} (κu {ku:.1e})" for ku, r in rates))

# %% [markdown]
# The printed lines above are the check of the theory on these matrices: with
# `kappa u_16 < 1` refinement reaches FP64 accuracy in a few steps, each step
# contracting the error by about `kappa u_16` or better; with `kappa u_16 > 1` the FP16
# factors do not carry the correction and the iteration stalls or diverges (if a
# printed line says otherwise, the line is right and this sentence is not). The
# Tensor Core variant's trailing updates accumulate in FP32 and round once into FP16;
# compare its "last error" with the plain FP16 LU's where `kappa u_16` is near 1.
# (The condition number the theory uses is `kappa_inf`, printed beside `kappa_2`; it
# is larger by a factor of up to `n`, which makes the theory's condition sufficient,
# not necessary, for convergence.)

# %%
for name in VARIANTS:
    kinf, result = runs[name, KAPPAS[-1]]
    print(f"{name}, kappa = {KAPPAS[-1]:.0e}: {result.status} ({result.reason})")

# %% [markdown]
# ## 3. GMRES-IR: Carson and Higham's experiment
#
# Carson and Higham ("Accelerating the solution of linear systems by iterative
# refinement in three precisions", SIAM J. Sci. Comput. 40(2), 2018) take FP16 LU
# factors (`u_f`), single precision as the working precision (`u`) and double for the
# residuals (`u_r`). Their claims, from the paper's abstract: LU-IR gives full single
# precision accuracy for `kappa_2(A) <= 1e4`; solving the correction equation by
# GMRES preconditioned with the same LU factors (GMRES-IR) weakens the restriction
# to `kappa_2(A) <= 1e8`, "although in general there is no guarantee that GMRES will
# converge quickly".
#
# `la.refine(..., solver="gmres")` runs GMRES-IR: GMRES in FP32 on
# `U^-1 L^-1 A d = U^-1 L^-1 r`, each product with `U^-1 L^-1 A` formed in FP64.
# GMRES stops at a relative residual of `1e-4` (`gmres_tol`) or after `n` steps.
#
# Test matrices: `la.randsvd(100, kappa, mode=3, rng=1)`, `U diag(sigma) V^T` with
# Haar-random orthogonal `U`, `V` and geometrically distributed singular values (MATLAB's
# `gallery("randsvd", n, kappa, 3)`), rounded into FP32; `b` is FP32 of `A` times a
# standard normal vector (the same generator). The reference solution `x*` solves the
# FP32 data to float64 accuracy: a float64 solve, then two corrections from
# residuals rounded once from their exact values (Dekker's TwoProduct and
# `math.fsum`; the tests use `Fraction` arithmetic for the same job).

# %%
N3 = 100
KAPPAS3 = [10.0**k for k in range(1, 9)]
U32 = lp.finfo("fp32").unit_roundoff
PRECISIONS = dict(factor="fp16", working="fp32", residual="fp64")


def split(v):
    """Veltkamp's split: v = hi + lo exactly, each half of at most 26 bits."""
    c = (2.0**27 + 1) * v
    hi = c - (c - v)
    return hi, v - hi


def exact_residual(a, x, b):
    """b - a x rounded once: Dekker's TwoProduct makes each a_ij x_j = p + e exactly,
    and math.fsum rounds the exact sum of b_i and every -p, -e once."""
    p = a * x
    (ah, al), (xh, xl) = split(a), split(x)
    e = ((ah * xh - p) + ah * xl + al * xh) + al * xl
    return np.array([math.fsum([bi, *(-p[i]), *(-e[i])]) for i, bi in enumerate(b)])


def exact_solution(a, b, steps=2):
    """x* of a x = b for float64 data: a float64 solve, then corrections from
    residuals rounded once from their exact values."""
    x = np.linalg.solve(a, b)
    for _ in range(steps):
        x = x + np.linalg.solve(a, exact_residual(a, x, b))
    return x


def paper_problem(n, kappa, mode=3, seed=1):
    gen = np.random.default_rng(seed)
    a = la.randsvd(n, kappa, mode=mode, rng=gen).astype(np.float32).astype(np.float64)
    b = (a @ gen.standard_normal(n)).astype(np.float32).astype(np.float64)
    return a, b, exact_solution(a, b)


paper = {}
for kappa in KAPPAS3:
    a, b, x = paper_problem(N3, kappa)
    paper[kappa] = (np.linalg.cond(a, np.inf),
                    la.refine(a, b, x_true=x, **PRECISIONS),
                    la.refine(a, b, x_true=x, solver="gmres", **PRECISIONS))

# %%
print(f"{'kappa_2':>8} {'kappa_inf':>9} | {'LU-IR':>10} {'steps':>5} {'error':>8} | "
      f"{'GMRES-IR':>10} {'steps':>5} {'error':>8}  GMRES steps per correction")
for kappa, (kinf, lu, gm) in paper.items():
    inner = [s["gmres_iterations"] for s in gm.history[1:]]
    print(f"{kappa:8.0e} {kinf:9.1e} | {lu.status:>10} {lu.iterations:5d} "
          f"{lu.history[-1]['forward_error']:8.1e} | {gm.status:>10} {gm.iterations:5d} "
          f"{gm.history[-1]['forward_error']:8.1e}  {inner}")

# %%
lu_ok = [k for k, (_, lu, _) in paper.items() if lu.status == "converged"]
gm_ok = [k for k, (_, _, gm) in paper.items()
         if gm.status == "converged" and gm.history[-1]["forward_error"] <= 4 * U32]
print("LU-IR converges for kappa_2 up to", f"{max(lu_ok):.0e}" if lu_ok else "none",
      "(the paper: 1e4)")
print("GMRES-IR reaches a forward error <= 4u for kappa_2 up to",
      f"{max(gm_ok):.0e}" if gm_ok else "none", "(the paper: 1e8)")

# %% [markdown]
# How many GMRES steps a correction takes depends on the spectrum, not only on
# `kappa`. The FP16 factors are exact for a perturbed matrix `A + dA` with
# `||dA|| ~ u_f ||A||`. Every singular value of `A` below about `u_f` is then
# carried wrongly, and each such direction costs GMRES about one step. With
# geometric singular values (mode 3) that is a fixed fraction of the `n` directions
# once `kappa > 1 / u_f`, so the counts above grow towards `n`. With one small singular
# value (mode 2, `la.randsvd(..., mode=2)`), one direction is wrong whatever `kappa`,
# and GMRES-IR needs a handful of steps while LU-IR still fails:

# %%
for kappa in (1e4, 1e6, 1e8):
    a, b, x = paper_problem(N3, kappa, mode=2)
    lu = la.refine(a, b, x_true=x, **PRECISIONS)
    gm = la.refine(a, b, x_true=x, solver="gmres", **PRECISIONS)
    print(f"mode 2, kappa {kappa:.0e}: LU-IR {lu.status} (error "
          f"{lu.history[-1]['forward_error']:.1e}), GMRES-IR {gm.status} (error "
          f"{gm.history[-1]['forward_error']:.1e}), GMRES steps "
          f"{[s['gmres_iterations'] for s in gm.history[1:]]}")

# %% [markdown]
# The printed lines are the check against the paper (if one says otherwise, it is
# right and this text is not): LU-IR with FP16 factors stops converging near
# `kappa_2 = 1e4`, stalling or diverging beyond it; GMRES-IR converges to single
# precision accuracy (forward error a small multiple of `u = 2**-24`) through
# `kappa_2 = 1e8` in a few refinement steps. For geometric singular values the
# GMRES steps per correction grow with `kappa`, as the paper's caveat warns; for one
# small singular value they stay few.
