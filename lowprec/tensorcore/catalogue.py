"""The named models of `matmul` (`MODELS`), each with the sources of its parameters.

Every GPU model cites the measurements or documents its parameters come from;
`resolve_model` turns a name of this catalogue (or a model object) into the model,
the one model check every entry point uses. Nothing here computes.
"""

from __future__ import annotations

from dataclasses import replace

from ..formats import BF16, FP8_E4M3, FP8_E5M2, FP16, FP32, TF32
from .models import Accumulating, Model, TensorCoreModel

__all__ = ["MODELS", "resolve_model", "EXACT", "SEQ_FP32", "SEQ_FP16", "V100", "T4", "A100",
           "ADA", "H100", "H100_MMA", "B200", "B200_MMA"]


_FASI = ("Fasi, Higham, Mikaitis, Pranesh, 'Numerical behavior of NVIDIA tensor cores', "
         "PeerJ CS 7:e330 (2021)")
_KM = ("Khattak & Mikaitis, 'Accurate models of NVIDIA tensor cores', arXiv 2512.07004, "
       "and their measurements in north-numerical-computing/MATLAB-tensor-core")
_MMASIM = "microsoft/MMA-Sim, arXiv 2511.10909"
_DSV3 = "DeepSeek-V3 technical report §3.5.2 (FP8 GEMM accumulation keeps about 14 bits)"
_PTX = "PTX ISA, mma / wgmma / tcgen05 instruction shapes"


def _tc(name, doc, **params):
    return TensorCoreModel(name=name, doc=doc, **params)


V100 = _tc(
    "v100", f"""Volta (V100) Tensor Cores, FP16 inputs.

    block 4 (a 16x16x16 product is 4 chained blocks of 4: {_FASI});
    F = 23, FP32 result rounded toward zero, no exponent floor for FP32 output,
    FP16 output rounded to nearest even with Elim = -19 ({_KM}).
    Reproduces v100_fp16 of the published data, and V100's non-monotonic sum.
    """, block=4, fraction_bits=23, elim=None, elim_fp16=-19, inputs=(FP16,))

T4 = _tc(
    "t4", f"""Turing (T4) Tensor Cores, FP16 inputs (unverified: no published data).

    block 8, F = 24, RZ to FP32, RNE to FP16, Elim -132 / -20, the parameters of
    {_KM}; T4's tensor cores were first measured by {_FASI}.
    """, block=8, fraction_bits=24, elim=-132, elim_fp16=-20, inputs=(FP16,))

_AMPERE_TF32 = TensorCoreModel(block=4, fraction_bits=24, elim=-132, fp16_output=False,
                               inputs=(TF32,), name="a100/tf32")
A100 = _tc(
    "a100", f"""Ampere (A100, A30, A2) Tensor Cores.

    FP16 and BF16: block 8 (m16n8k16 = blocks [0:8] then [8:16], {_PTX}), F = 24,
    RZ to FP32, RNE to FP16, Elim -132 (FP32 out) / -20 (FP16 out) ({_KM};
    first measurements of A100's tensor cores: {_FASI}).
    TF32: block 4, F = 24, FP32 output only, Elim -132 ({_KM}).
    Reproduces a100_fp16, a100_bf16, a100_tf32 of the published data. The Elim floor
    follows K&M; {_MMASIM} instead always aligns against c (a zero c counting as
    exponent -126); the two differ only when every term is below about 2**-126.
    """, block=8, fraction_bits=24, elim=-132, elim_fp16=-20, inputs=(FP16, BF16),
    variants=((TF32, _AMPERE_TF32),))

_ADA_FP8 = TensorCoreModel(block=16, fraction_bits=13, out_bits=13, elim=-132,
                           elim_fp16=None, inputs=(FP8_E4M3, FP8_E5M2), name="ada/fp8")
ADA = _tc(
    "ada", f"""Ada Lovelace (L40S, RTX 40) Tensor Cores.

    FP16, BF16: as A100 (block 8, F = 24, RZ / RNE, Elim -132 / -20); TF32: block 4.
    FP8 (E4M3, E5M2): an mma k32 is 2 blocks of 16 with F = 13; FP32 results keep
    13 fraction bits, rounded toward zero ("e8m13", the ~14 bits of {_DSV3});
    FP16 output is rounded to nearest even after each block, with no floor.
    Parameters and data: {_KM}. Reproduces every ada_* file of the published data.
    """, block=8, fraction_bits=24, elim=-132, elim_fp16=-20, inputs=(FP16, BF16),
    variants=((TF32, replace(_AMPERE_TF32, name="ada/tf32")),
              (FP8_E4M3, _ADA_FP8), (FP8_E5M2, _ADA_FP8)))

_HOPPER_TF32 = TensorCoreModel(block=8, fraction_bits=25, elim=-133, fp16_output=False,
                               inputs=(TF32,), name="h100/tf32")
_HOPPER_FP8 = TensorCoreModel(block=32, fraction_bits=13, out_bits=13, elim=-133,
                              elim_fp16=-133, inputs=(FP8_E4M3, FP8_E5M2), name="h100/fp8")
H100 = _tc(
    "h100", f"""Hopper (H100, H200) Tensor Cores, as cuBLAS drives them (wgmma).

    FP16, BF16: block 16, F = 25, RZ to FP32, RNE to FP16, Elim -133 / -21.
    TF32: block 8, F = 25, FP32 output only, Elim -133.
    FP8 (E4M3, E5M2) through wgmma: block 32, F = 13, FP32 results keep 13 fraction
    bits rounded toward zero ("e8m13", {_DSV3}), Elim -133; FP16 output of this
    path is rounded to nearest even (unverified).
    Parameters and data: {_KM}. Reproduces h100_fp16, h100_bf16, h100_tf32 and the
    FP32 (c = 0) results of h100_e4m3 / h100_e5m2.
    """, block=16, fraction_bits=25, elim=-133, elim_fp16=-21, inputs=(FP16, BF16),
    variants=((TF32, _HOPPER_TF32), (FP8_E4M3, _HOPPER_FP8), (FP8_E5M2, _HOPPER_FP8)))

_MMA_SPLIT = dict(block=16, fraction_bits=25, elim=-133, elim_fp16=-21, mma_split=True,
                  inputs=(FP8_E4M3, FP8_E5M2))
H100_MMA = _tc(
    "h100-mma", f"""Hopper FP8 (E4M3, E5M2) through mma.sync.

    Every 32 products are split by k mod 4 into {{0, 1}} and {{2, 3}}; the first
    half is a block FMA with c = 0, the second a block FMA with the first's result
    as c (each 16 products, F = 25, rounded to the output format: RZ for FP32, RNE
    for FP16, Elim -133 / -21), and the addend is added last with one correctly
    rounded addition. Grouping: {_MMASIM}; F and Elim: {_KM}. Reproduces the FP16
    results of h100_e4m3 / h100_e5m2 (sequential halves match only about 70%).
    """, **_MMA_SPLIT)

B200 = _tc(
    "b200", f"""Blackwell (B200) Tensor Cores, as cuBLAS drives them (tcgen05).

    FP16, BF16: block 16, F = 25, RZ to FP32, RNE to FP16, Elim -133 / -21.
    TF32: block 8, F = 25, FP32 output only. FP8 (E4M3, E5M2): block 32, F = 25,
    RZ / RNE, Elim -133 / -21 (unverified: no published data).
    Parameters and data: {_KM}. Reproduces b200_fp16, b200_bf16, b200_tf32.
    """, block=16, fraction_bits=25, elim=-133, elim_fp16=-21, inputs=(FP16, BF16),
    variants=((TF32, replace(_HOPPER_TF32, name="b200/tf32")),
              (FP8_E4M3, TensorCoreModel(block=32, fraction_bits=25, elim=-133,
                                         elim_fp16=-21, inputs=(FP8_E4M3, FP8_E5M2),
                                         name="b200/fp8")),
              (FP8_E5M2, TensorCoreModel(block=32, fraction_bits=25, elim=-133,
                                         elim_fp16=-21, inputs=(FP8_E4M3, FP8_E5M2),
                                         name="b200/fp8"))))

B200_MMA = _tc(
    "b200-mma", f"""Blackwell FP8 (E4M3, E5M2) through mma.sync.

    The same k mod 4 split as ``h100-mma`` ({_MMASIM}), F = 25, Elim -133 / -21
    ({_KM}). Reproduces every row of b200_e4m3 and b200_e5m2 (FP32 and FP16 output).
    """, **_MMA_SPLIT)

EXACT = Accumulating(None, "exact", """Each output is the exact dot product plus c,
    rounded once (to nearest even) to out_fmt.

    Zeros are signed as IEEE 754 §6.3 signs the sum c + p_1 + ... + p_K taken one
    addition at a time in exact arithmetic (whatever the order): a nonzero sum that
    rounds to zero gives the zero of its own sign; a sum that is exactly zero is -0
    when every term is -0 (c, and each product, a zero product taking the exclusive
    or of its factors' signs: -0 + -0 = -0), and +0 otherwise (x + (-x) = +0 to
    nearest). Without c, c is +0, as in NumPy's matmul and BLAS: only an explicit
    c = -0 lets a sum of -0 products be -0. With K = 0 the result is c (+0 without
    it, NumPy's empty sum). An output format without -0 (fnuz) gives +0.
    """)
SEQ_FP32 = Accumulating(FP32, "fp32", "Exact products added left to right to c, every "
                        "addition rounded to nearest even in FP32 (a CPU's float32 loop). "
                        "Zeros are signed by IEEE 754's rule for each addition; without c "
                        "the loop starts from +0 (0.0f); with K = 0 the result is c.")
SEQ_FP16 = Accumulating(FP16, "fp16", "Exact products added left to right to c, every "
                        "addition rounded to nearest even in FP16. Zeros are signed by "
                        "IEEE 754's rule for each addition; without c the loop starts "
                        "from +0; with K = 0 the result is c.")

#: Every named model, by the name `matmul` accepts.
MODELS: dict[str, Model] = {m.name: m for m in (
    EXACT, SEQ_FP32, SEQ_FP16, V100, T4, A100, ADA, H100, H100_MMA, B200, B200_MMA)}


def resolve_model(model: str | Model, name: str = "model") -> Model:
    """The model object for ``model`` (a name in `MODELS`, in any case, or a model
    object): the one model check, whose `TypeError` names the argument ``name``.

    Examples
    --------
    >>> resolve_model("H100") is MODELS["h100"]
    True
    >>> resolve_model(3, "matmul")
    Traceback (most recent call last):
    ...
    TypeError: matmul must be a model name (...) or a lp.TensorCoreModel, got int 3
    """
    if isinstance(model, (TensorCoreModel, Accumulating)):
        return model
    names = ", ".join(MODELS)
    if not isinstance(model, str):
        raise TypeError(f"{name} must be a model name ({names}) or a lp.TensorCoreModel, "
                        f"got {type(model).__name__} {model!r}")
    spec = MODELS.get(model.lower())
    if spec is None:
        raise ValueError(f"unknown matmul model {model!r}; valid models: {names} "
                         "or a lp.TensorCoreModel")
    return spec

