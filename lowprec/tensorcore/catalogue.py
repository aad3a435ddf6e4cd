"""The named models of `matmul` (`MODELS`), each with the sources of its parameters.

Every GPU model cites the measurements or documents its parameters come from;
`resolve_model` turns a name of this catalogue (or a model object) into the model,
the one model check every entry point uses. Nothing here computes.
"""

from __future__ import annotations

from dataclasses import replace

from ..formats import (
    BF16,
    E8M0,
    FP4_E2M1,
    FP8_E4M3,
    FP8_E4M3FNUZ,
    FP8_E5M2,
    FP8_E5M2FNUZ,
    FP16,
    FP32,
    FP64,
    TF32,
    UE4M3,
    FormatLike,
)
from ..formats import format as _format
from .instructions import Instruction, MatrixUnit
from .models import Accumulating, Model, ModelLike, MultiPass, TensorCoreModel

__all__ = ["MODELS", "resolve_model", "EXACT", "SEQ_FP32", "SEQ_FP16", "V100", "T4", "A100",
           "ADA", "H100", "H100_MMA", "B200", "B200_MMA", "UNITS"]


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


def resolve_model(model: ModelLike, name: str = "model") -> Model:
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
    if isinstance(model, (TensorCoreModel, Accumulating, MatrixUnit, MultiPass)):
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



# -- instruction models (MatrixUnit): MMA-Sim's algorithms, instruction by instruction --

_README = ("the algorithm as the mma-data README describes microsoft/MMA-Sim c785138 "
           "(arXiv 2511.10909); validated by its vectors, tests/data/mma")
_NV = (FP16, BF16)
_F8 = (FP8_E4M3, FP8_E5M2)
_OUT = (FP32, FP16)


def _unit(name, doc, *instructions):
    return MatrixUnit(name=name, instructions=instructions, doc=doc)


_NO_DATA = "MMA-Sim's parameters (mma-data README §5.3); no vectors"


def _nv(block, inputs, F, outputs=_OUT, shapes=(), fp32_bits=23,
        validated="MMA-Sim vectors (tests/data/mma)"):
    return Instruction("nv-fused", block, inputs, outputs, fraction_bits=F,
                       fp32_bits=fp32_bits, shapes=shapes, validated=validated)


def _block_scaled(shapes_mx, shapes_fp4):
    return (
        Instruction("nv-mx", 32, _F8, (FP32,), fraction_bits=25, scales=(E8M0,),
                    scale_block=32, shapes=shapes_mx,
                    doc="kind::mxf8f6f4: E8M0 scale exponents folded into the products"),
        Instruction("nv-fp4", 64, (FP4_E2M1,), (FP32,), fraction_bits=35, scales=(E8M0,),
                    scale_block=32, shapes=shapes_fp4,
                    doc="kind::mxf4 (MXFP4: one E8M0 scale per 32)"),
        Instruction("nv-fp4", 64, (FP4_E2M1,), (FP32,), fraction_bits=35, scales=(UE4M3,),
                    scale_block=16, shapes=shapes_fp4,
                    doc="kind::mxf4nvf4 with UE4M3 scales per 16 (NVFP4)"),
        Instruction("nv-fp4", 64, (FP4_E2M1,), (FP32,), fraction_bits=35, scales=(E8M0,),
                    scale_block=16, shapes=shapes_fp4,
                    doc="kind::mxf4nvf4 with E8M0 scales per 16"),
    )


V100_MMA = _unit("v100/mma", f"Volta mma.sync m8n8k4: one fused group of 4, F = 23, RZ to "
                 f"FP32, RNE to FP16; {_README}.", _nv(4, (FP16,), 23, shapes=("m8n8k4",)))
T4_MMA = _unit("t4/mma", f"Turing mma.sync m16n8k8 (FP16): one group of 8, F = 24; {_README}.",
               _nv(8, (FP16,), 24, shapes=("m16n8k8",)))
A100_MMA = _unit("a100/mma", f"Ampere mma.sync: m16n8k16 FP16/BF16 as two chained groups of 8 "
                 f"(split-K), m16n8k8 TF32 as two of 4, F = 24; {_README}.",
                 _nv(8, _NV, 24, shapes=("m16n8k16",)),
                 _nv(4, (TF32,), 24, (FP32,), shapes=("m16n8k8",), validated=_NO_DATA))
ADA_MMA = _unit("ada/mma", f"Ada mma.sync: FP16/BF16 and TF32 as Ampere; FP8 (E4M3, E5M2) in "
                f"groups of 16 (m16n8k32 is two, split-K) with F = 13 and FP32 results of 13 "
                f"fraction bits, RZ ('e8m13', {_DSV3}), RNE to FP16; {_README}.",
                _nv(16, _F8, 13, shapes=("m16n8k32", "m16n8k16"), fp32_bits=13),
                _nv(8, _NV, 24, shapes=("m16n8k16",), validated=_NO_DATA),
                _nv(4, (TF32,), 24, (FP32,), shapes=("m16n8k8",), validated=_NO_DATA))
H100_MMA_SYNC = _unit("h100/mma", f"Hopper mma.sync FP16/BF16 (m16n8k16) and TF32 (m16n8k8): one "
                      f"group of k, F = 25; {_README}. (FP8 mma.sync: the measured 'h100-mma'.)",
                      _nv(16, _NV, 25, shapes=("m16n8k16",)),
                      _nv(8, (TF32,), 25, (FP32,), shapes=("m16n8k8",), validated=_NO_DATA))
H100_WGMMA = _unit("h100/wgmma", f"Hopper wgmma: FP16/BF16 k16 and TF32 k8 with F = 25; FP8 k32 "
                   f"with F = 13 and 'e8m13' FP32 results (RZ to 13 fraction bits, {_DSV3}), "
                   f"RNE to FP16; {_README}.",
                   _nv(16, _NV, 25, shapes=("m64n8k16",)),
                   _nv(8, (TF32,), 25, (FP32,), shapes=("m64n8k8",)),
                   _nv(32, _F8, 13, shapes=("m64n8k32",), fp32_bits=13))
B200_TCGEN05 = _unit("b200/tcgen05", f"Blackwell tcgen05.mma kind::f16 (k16), kind::tf32 (k8), "
                     f"kind::f8f6f4 with E4M3/E5M2 (k32), and the block-scaled kinds: "
                     f"kind::mxf8f6f4 (k32, E8M0 per 32, F = 25), kind::mxf4 (k64, E8M0 per "
                     f"32) and kind::mxf4nvf4 (k64, UE4M3 or E8M0 per 16): sums of 16 FP4 "
                     f"products exact, F = 35, RZ to FP32; {_README}.",
                     _nv(16, _NV, 25, shapes=("m64n8k16",)),
                     _nv(8, (TF32,), 25, (FP32,), shapes=("m64n8k8",)),
                     _nv(32, _F8, 25, shapes=("m64n8k32",)),
                     *_block_scaled(("m128n8k32",), ("m128n8k64",)))
RTX50_MMA = _unit("rtx50/mma", f"RTX Blackwell (sm_120) mma.sync: FP16/BF16 k16, TF32 k8, FP8 "
                  f"kind::f8f6f4 k16/k32, F = 25 (one group of k), and mma.sync.block_scale "
                  f"(the block-scaled kinds, as b200/tcgen05); {_README}.",
                  _nv(16, _NV, 25, shapes=("m16n8k16",)),
                  _nv(8, (TF32,), 25, (FP32,), shapes=("m16n8k8",), validated=_NO_DATA),
                  _nv(32, _F8, 25, shapes=("m16n8k32",)),
                  _nv(16, _F8, 25, shapes=("m16n8k16",)),
                  *_block_scaled(("m16n8k32",), ("m16n8k64",)))

_FMA32 = Instruction("fma-chain", 1, (FP32,), (FP32,), nan_bits=False,
                     shapes=("f32_16x16x4f32", "f32_32x32x2f32", "f32_16x16x4_f32",
                             "f32_32x32x1_2b_f32"))
_FMA64 = Instruction("fma-chain", 1, (FP64,), (FP64,), nan_bits=False,
                     shapes=("f64_16x16x4f64", "f64_16x16x4_f64"))


def _pairwise(group, inputs, ftz, shapes):
    return Instruction("pairwise", group, inputs, (FP32,), ftz=ftz, nan_bits=False,
                       shapes=shapes)


MI100_MFMA = _unit("mi100/mfma", f"CDNA1 (MI100) MFMA: FP32 as a chain of FMAs; FP16 in groups "
                   f"of 4 and BF16 in groups of 2, each product rounded to FP32 and summed as a "
                   f"balanced FP32 tree; {_README} (its CDNA1/2 FP16 and BF16 sets were made "
                   "with a one-line adapter, see its §7). MATLAB-tensor-core's MI100 model "
                   "rounds each group once instead; no hardware data settles it.",
                   _FMA32,
                   _pairwise(4, (FP16,), False, ("f32_32x32x8f16", "f32_16x16x16f16",
                                                 "f32_4x4x4f16")),
                   _pairwise(2, (BF16,), False, ("f32_32x32x4bf16", "f32_16x16x8bf16",
                                                 "f32_4x4x2bf16")))
MI200_MFMA = _unit("mi200/mfma", f"CDNA2 (MI200) MFMA: FP64/FP32 as chains of FMAs; FP16 and "
                   f"BF16 (bf16_1k) in groups of 4, BF16 (non-1k) in groups of 2, as CDNA1 but "
                   f"flushing subnormal inputs, c, tree nodes and accumulators to zero; {_README}.",
                   _FMA32, _FMA64,
                   _pairwise(4, (FP16,), True, ("f32_32x32x8f16", "f32_16x16x16f16",
                                                "f32_4x4x4f16")),
                   _pairwise(4, (BF16,), True, ("f32_32x32x8bf16_1k", "f32_16x16x16bf16_1k",
                                                "f32_4x4x4bf16_1k")),
                   _pairwise(2, (BF16,), True, ("f32_32x32x4bf16", "f32_16x16x8bf16",
                                                "f32_4x4x2bf16")))
MI300_MFMA = _unit("mi300/mfma", f"CDNA3 (MI300) MFMA: FP64/FP32 as chains of FMAs; XF32 "
                   f"(TF32-truncated inputs) in groups of 4 and FP16/BF16 in groups of min(8, k): "
                   f"products truncated to 24 bits below their largest exponent, aligned with c "
                   f"rounding toward minus infinity (31 and 24 bits), RNE to FP32; FP8/BF8 "
                   f"(FNUZ) in groups of 16, even and odd k apart, a c more than 25 binades "
                   f"below dropped; {_README}.",
                   _FMA32, _FMA64,
                   Instruction("amd-fused", 8, _NV, (FP32,), nan_bits=False,
                               shapes=("f32_32x32x8_f16", "f32_16x16x16_f16",
                                       "f32_32x32x8_bf16", "f32_16x16x16_bf16")),
                   Instruction("amd-fused", 4, (TF32,), (FP32,), nan_bits=False,
                               shapes=("f32_16x16x8_xf32", "f32_32x32x4_xf32")),
                   Instruction("amd-fp8", 16, (FP8_E4M3FNUZ, FP8_E5M2FNUZ), (FP32,),
                               nan_bits=False,
                               shapes=("f32_16x16x32_fp8_fp8", "f32_32x32x16_fp8_fp8")),
                   Instruction("amd-fused", 4, _NV, (FP32,), nan_bits=False,
                               shapes=("f32_4x4x4_16b_f16", "f32_32x32x4_2b_f16",
                                       "f32_4x4x4_16b_bf16", "f32_32x32x4_2b_bf16")))

AMX_BF16 = _unit("amx/tdpbf16ps", "Intel AMX TDPBF16PS (Sapphire Rapids and later): pairs of "
                 "BF16 products added to FP32 one product at a time, round to nearest even, "
                 "denormal inputs read as zero, denormal results flushed, from the "
                 "instruction's pseudo-code in the Intel SDM (no hardware data; tested "
                 "against a Fraction reference of that description).",
                 Instruction("amx-bf16", 2, (BF16,), (FP32,), nan_bits=False,
                             shapes=("TDPBF16PS",),
                             validated="Intel SDM pseudo-code; a Fraction reference (tests)"))

_XLA = ("XLA's PrecisionConfig dot algorithms (the products each uses); the order of the "
        "passes, small terms first and hi x hi last, as Triton's BF16DotTC / F32DotTC "
        "passes emit them (triton-lang/triton, test/TritonGPU/bf16x3-matmul.mlir)")
XLA_BF16_X3 = MultiPass("xla/bf16_bf16_f32_x3", BF16, 2, ((1, 0), (0, 1), (0, 0)),
                        doc=f"BF16_BF16_F32_X3: FP32 operands split into BF16 hi + lo; "
                        f"lo*hi, hi*lo, then hi*hi, each pass accumulated in FP32 by the "
                        f"'fp32' model (a parameter: base); {_XLA}.")
XLA_BF16_X6 = MultiPass("xla/bf16_bf16_f32_x6", BF16, 3,
                        ((1, 1), (2, 0), (0, 2), (1, 0), (0, 1), (0, 0)),
                        doc=f"BF16_BF16_F32_X6: split into BF16 hi + mid + lo; mid*mid, "
                        f"lo*hi, hi*lo, mid*hi, hi*mid, then hi*hi; {_XLA}.")
XLA_TF32_X3 = MultiPass("xla/tf32_tf32_f32_x3", TF32, 2, ((1, 0), (0, 1), (0, 0)),
                        doc=f"TF32_TF32_F32_X3: split into TF32 hi + lo (rounded to nearest "
                        f"even); lo*hi, hi*lo, then hi*hi; {_XLA}.")
MULTIPASS = {m.name: m for m in (XLA_BF16_X3, XLA_BF16_X6, XLA_TF32_X3)}
MODELS.update(MULTIPASS)

#: The instruction models, by name (each also in `MODELS`).
UNITS: dict[str, MatrixUnit] = {u.name: u for u in (
    V100_MMA, T4_MMA, A100_MMA, ADA_MMA, H100_MMA_SYNC, H100_WGMMA, B200_TCGEN05, RTX50_MMA,
    MI100_MFMA, MI200_MFMA, MI300_MFMA, AMX_BF16)}
MODELS.update(UNITS)


def unit_table() -> str:
    """The Markdown table of every instruction model (docs/tensor-cores.md prints it;
    a test holds the page equal to it): unit, ISA shapes, formats, group, fraction
    bits, output rounding, scales, and what validates it.

    Examples
    --------
    >>> unit_table().splitlines()[2].split(" | ")[:6]
    ['| `v100/mma`', 'nv-fused', 'm8n8k4', 'FP16', '4', '23']
    """
    head = ("| model | algorithm | instructions | inputs | group | F | FP32 out | FP16 out | "
            "scales | validated by |")
    rows = [head, "|" + " --- |" * 10]
    for name, unit in UNITS.items():
        for ins in unit.instructions:
            nv = ins.algorithm.startswith("nv")
            fp32 = ("RZ, 13 bits (e8m13)" if ins.fp32_bits == 13 else "RZ") if nv else (
                "IEEE FMA, RNE" if ins.algorithm == "fma-chain" else "RNE")
            fp16 = "RNE" if FP16 in ins.outputs else "-"
            scales = (f"{', '.join(f.name or '' for f in ins.scales)} / {ins.scale_block}"
                      if ins.scales else "-")
            F = str(ins.fraction_bits) if nv else ("24, then 31 / 24 (floor)"
                                                   if ins.algorithm.startswith("amd") else "-")
            if ins.ftz:
                fp32 += ", FTZ"
            rows.append(f"| `{name}` | {ins.algorithm} | {', '.join(ins.shapes) or '-'} | "
                        f"{', '.join(f.name or '' for f in ins.inputs)} | {ins.block} | {F} | "
                        f"{fp32} | {fp16} | {scales} | {ins.validated} |")
    return "\n".join(rows)


def way_out(fmt: FormatLike, spec: Model | None = None) -> str:
    """What multiplies ``fmt`` inputs where ``spec`` does not: a clause for a refusal.

    Examples
    --------
    >>> way_out("fp32", MODELS["h100"])
    "on this unit FP32 data goes through TF32: in_fmt='tf32'; or model='fp32' (...)"
    >>> way_out("e2m1")
    "FP4_E2M1 is multiplied with block scales: lp.mx.quantize, then lp.mx.matmul..."
    """
    f = _format(fmt)

    def takes(m, g):
        try:
            m.for_format(g)
        except ValueError:
            return False
        return True
    if f == FP32 and spec is not None and takes(spec, TF32):
        return ("on this unit FP32 data goes through TF32: in_fmt='tf32'; or "
                "model='fp32' (exact products added in FP32, as a CPU loop does)")
    hardware = [n for n, m in MODELS.items()
                if not isinstance(m, (Accumulating, MultiPass)) and takes(m, f)]
    other = ("in_fmt='fp32' (the operands rounded to FP32)" if isinstance(spec, Accumulating)
             else "an accumulation model ('exact', 'fp32', 'fp16')")
    if hardware:
        return f"models that take {f.name or repr(f)}: {', '.join(hardware)}; or {other}"
    scaled = [n for n, u in UNITS.items()
              if any(f in i.inputs and i.scales for i in u.instructions)]
    if scaled:
        return (f"{f.name or repr(f)} is multiplied with block scales: lp.mx.quantize, then "
                f"lp.mx.matmul (model {' or '.join(map(repr, scaled))}); or {other}")
    return "the accumulation models ('exact', 'fp32', 'fp16') take it"


def block_scaled_units() -> list[str]:
    """The names of the models with block-scaled instructions (`lowprec.mx.matmul`)."""
    return [n for n, u in UNITS.items() if any(i.scales for i in u.instructions)]
