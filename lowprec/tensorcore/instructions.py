"""Instruction models of matrix units: one instruction's arithmetic, by its parameters.

An `Instruction` is one matrix-multiply-accumulate instruction of one architecture
for one family of input formats (``kind::f16`` of ``tcgen05``, CDNA3's FP8 MFMA, ...):
the algorithm its dot products follow (`ALGORITHMS`), the products one fused group
takes (``block``), the fraction bits it keeps, its block scales. A `MatrixUnit`
gathers the instructions of one unit under one name of `lp.MODELS`
(``"b200/tcgen05"``, ``"mi300/mfma"``) and picks the instruction for an input format.
A K longer than ``block`` chains groups in increasing K order, each result (rounded
to the output format) the addend of the next, as the hardware chains instructions.
The kernels are in `fused`; this module only says what each instruction does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from ..arith import add as _add
from ..engine.checks import check_bool, check_int
from ..formats import (
    FP8_E4M3,
    FP8_E4M3FNUZ,
    FP8_E5M2,
    FP8_E5M2FNUZ,
    FP16,
    FP32,
    FP64,
    TF32,
    Format,
    FormatLike,
)
from ..formats import format as _format
from ..rounding import round as _round
from ..status import quiet
from . import fastgroups, fused

__all__ = ["Instruction", "MatrixUnit", "ALGORITHMS"]

#: The algorithms, as the mma-data README (tests/data/mma/README.md) and the ISA
#: documents describe them.
ALGORITHMS = {
    "nv-fused": "NVIDIA fused dot-add (README §5.2): exact unnormalised products and c "
                "truncated to F bits below the largest exponent, one rounding",
    "nv-mx": "NVIDIA block-scaled dot-add of 32 with E8M0 scales (README §5.4): the "
             "scale exponents join the products', then as nv-fused",
    "nv-fp4": "NVIDIA block-scaled FP4 of 64 (README §5.5): exact sums of 16, each a term "
              "whose exponent is its scales', F = 35, truncated FP32 result",
    "fma-chain": "a chain of IEEE fused multiply-adds in the output format (README §6.1)",
    "pairwise": "products rounded to FP32, a balanced tree of FP32 additions per group, "
                "then acc + group (README §6.2)",
    "amd-fused": "CDNA3 fused dot-add: products truncated to 24 bits, then aligned with c "
                 "rounding toward minus infinity, RNE to FP32 (README §6.3)",
    "amd-fp8": "CDNA3 FP8 fused dot-add of 16: even and odd k apart, then as amd-fused, "
               "a far smaller c dropped (README §6.4)",
    "amx-bf16": "Intel AMX TDPBF16PS: each BF16 product added to the FP32 accumulator in "
                "order, RNE, denormal inputs as zero, denormal results flushed (Intel SDM)",
}


def _formats(name: str, value: object) -> tuple[Format, ...]:
    """A tuple of formats from a tuple or list of format names or Formats."""
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"{name} must be a tuple of formats, got {type(value).__name__} "
                        f"{value!r} (one format: ({value!r},))")
    return tuple(_format(f) for f in value)


@dataclass(frozen=True)
class Instruction:
    """One matrix-unit instruction's arithmetic (see `ALGORITHMS`).

    Parameters
    ----------
    algorithm : str
        A key of `ALGORITHMS`.
    block : int
        Products of one fused group; a longer K chains groups, each result rounded to
        the output format and added as the next group's c (Ampere's ``m16n8k16`` is two
        groups of 8).
    inputs : tuple of Format
        Input formats (A and B may mix them: E4M3 with E5M2).
    outputs : tuple of Format
        Output formats; c is a value of the output format.
    fraction_bits : int
        F, the bits kept below the reference exponent (nv-* algorithms).
    fp32_bits : int
        Fraction bits of an FP32 result (13: "e8m13", the FP8 paths of Ada ``mma`` and
        Hopper ``wgmma``).
    scales : tuple of Format
        Scale formats of a block-scaled instruction (E8M0, UE4M3).
    scale_block : int or None
        Elements per scale (32 or 16) for block-scaled instructions.
    ftz : bool
        CDNA2's flush of subnormal inputs, c and partial sums to zero.
    nan_bits : bool
        NaN results are NVIDIA's one pattern (0x7FFFFFFF, 0x7FFF); otherwise only
        NaN-ness is defined (AMD's patterns come from the host's arithmetic).
    shapes : tuple of str
        The ISA instructions it stands for (``"m16n8k16"``, ``"f32_32x32x8_f16"``).
    validated : str
        What validates it (docs/tensor-cores.md prints it).
    promote_every : int or None
        FP8 fast accumulation with promotion (DeepSeek-V3 §3.5.2, N = 128 on H800):
        every this many products the unit's running result is added to an FP32
        accumulator (round to nearest even) and the unit restarts from zero; c starts
        the FP32 accumulator. A multiple of ``block``. None: the unit chains all of K.
    """

    algorithm: str
    block: int
    inputs: tuple
    outputs: tuple = (FP32,)
    fraction_bits: int = 25
    fp32_bits: int = 23
    scales: tuple = ()
    scale_block: int | None = None
    ftz: bool = False
    nan_bits: bool = True
    shapes: tuple = ()
    validated: str = field(default="MMA-Sim vectors (tests/data/mma)", compare=False)
    promote_every: int | None = None
    doc: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {sorted(ALGORITHMS)}, got "
                             f"{self.algorithm!r}")
        for attr in ("block", "fraction_bits", "fp32_bits"):
            object.__setattr__(self, attr, check_int(attr, getattr(self, attr), minimum=1))
        for attr in ("ftz", "nan_bits"):
            object.__setattr__(self, attr, check_bool(attr, getattr(self, attr)))
        for attr in ("inputs", "outputs", "scales"):
            object.__setattr__(self, attr, _formats(attr, getattr(self, attr)))
        for attr in ("inputs", "outputs"):
            if not getattr(self, attr):
                raise ValueError(f"{attr} must name at least one format, got ()")
        scaled = self.algorithm in ("nv-mx", "nv-fp4")
        if scaled and (not self.scales or self.scale_block is None):
            raise ValueError(f"algorithm {self.algorithm!r} is block-scaled: give scales "
                             "(a tuple of scale formats) and scale_block (elements per "
                             f"scale), got scales={self.scales!r}, "
                             f"scale_block={self.scale_block!r}")
        if not scaled and (self.scales or self.scale_block is not None):
            raise ValueError(f"scales and scale_block belong to the block-scaled algorithms "
                             f"'nv-mx' and 'nv-fp4', not {self.algorithm!r}")
        if self.scale_block is not None:
            n = check_int("scale_block", self.scale_block, minimum=1)
            group = 16 if self.algorithm == "nv-fp4" else 1
            if n % group or self.block % n:
                raise ValueError(f"scale_block must divide block={self.block}"
                                 + (" and be a multiple of 16" if group > 1 else "")
                                 + f", got {n}")
            object.__setattr__(self, "scale_block", n)
        limit = self.max_fraction_bits()
        if limit is not None and self.fraction_bits > limit:
            raise ValueError(f"fraction_bits={self.fraction_bits} does not fit the exact "
                             f"53-bit sum of {self.algorithm!r} with block={self.block}: "
                             f"at most {limit}")
        if self.promote_every is not None:
            n = check_int("promote_every", self.promote_every, minimum=1)
            if n % self.block:
                raise ValueError(f"promote_every must be a multiple of the group of "
                                 f"{self.block} products, got {n}")
            object.__setattr__(self, "promote_every", n)

    def max_fraction_bits(self) -> int | None:
        """The largest ``fraction_bits`` the algorithm's kernel sums exactly (None:
        it keeps no F).

        nv-fused and nv-mx align ``block`` products and c, each below 2**(F + 2); nv-fp4
        aligns ``block / 16`` group sums, each below 2**(F + 12), and c. Those n terms
        must sum in float64 exactly (the kernel converts the int64 sum once), so
        F + ceil(log2(terms)) + 2 (or + 12) <= 53.

        Examples
        --------
        >>> Instruction("nv-fused", 4, ("fp16",)).max_fraction_bits()
        48
        """
        if self.algorithm in ("nv-fused", "nv-mx"):
            return 53 - 2 - math.ceil(math.log2(self.block + 1))
        if self.algorithm == "nv-fp4":
            return 53 - 12 - math.ceil(math.log2(self.block // 16 + 1))
        return None

    def out_mode(self, out: Format) -> str:
        """How an NVIDIA group rounds into ``out``: "f16", "f32" or "e8m13"."""
        if out == FP16:
            return "f16"
        return "e8m13" if self.fp32_bits == 13 else "f32"

    def dot(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, fa: Format, fb: Format,
            out: Format, sa: np.ndarray | None = None,
            sb: np.ndarray | None = None) -> np.ndarray:
        """The instruction's outputs for rows of (n, K) operand values, c of shape (n,)
        and, block-scaled, scale values of shape (n, K / scale_block); K a multiple of
        ``block``. float64 values of ``out`` (NaN for NaN results)."""
        if fa == TF32:
            a = fused.truncate_tf32(a)
        if fb == TF32:
            b = fused.truncate_tf32(b)
        k = self.block
        return self._chain(a.shape[1], np.asarray(c, dtype=np.float64), out, lambda j, d:
                           self._group(a[:, j:j + k], b[:, j:j + k], d, fa, fb, out, sa, sb, j))

    def _chain(self, K: int, c: np.ndarray, out: Format,
               group: Callable[[int, np.ndarray], np.ndarray]) -> np.ndarray:
        """The groups of K in order, each ``group(j, d)`` taking the previous result
        as its c; with ``promote_every``, the partial results added to an FP32
        accumulator every so many products (from c)."""
        k, d = self.block, c
        if self.promote_every is not None:
            total, d = d, np.zeros_like(d)
        for j in range(0, K, k):
            d = group(j, d)
            if self.promote_every is not None and (
                    (j + k) % self.promote_every == 0 or j + k >= K):
                total = np.asarray(quiet(_add, total, d, FP32), dtype=np.float64)
                d = np.zeros_like(d)
        if self.promote_every is not None:
            # The FP32 accumulator's sum, in the output format (FP16 output: one RNE).
            return total if out == FP32 else np.asarray(quiet(_round, total, out))
        return d

    def fast(self, fa: Format, fb: Format) -> bool:
        """Whether `dot_matrix` takes the fast paths of `fastgroups` for inputs ``fa``
        and ``fb`` (FP8 and FP4 groups of the nv-* and amd-fp8 algorithms)."""
        return fastgroups.covers(self.algorithm, self.block, fa, fb,
                                 scale_block=self.scale_block)

    def dot_matrix(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, fa: Format,
                   fb: Format, out: Format, sa: np.ndarray | None = None,
                   sb: np.ndarray | None = None, bound: int = 1 << 26) -> np.ndarray:
        """`dot` of every row of ``a`` (M, K) with every column of ``b`` (K, N), c of
        shape (M, N), block-scaled with ``sa`` (M, K / scale_block) and ``sb``
        (K / scale_block, N), through `fastgroups` a group at a time (only where
        `fast`): bit for bit `dot`'s outputs. ``bound``: bytes for the outputs that
        take the reference kernel, a batch at a time."""
        a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
        k, alg = self.block, self.algorithm
        if self.promote_every is None and self.out_mode(out) == "f32":
            # Whole chains where the data are finite (else a group at a time, below).
            whole = None
            if alg == "nv-fused" or (alg == "nv-mx" and sa is not None and sb is not None):
                whole = fastgroups.nv_chain(a, b, c, fa, fb, self.fraction_bits, k, sa, sb,
                                            bound=bound)
            elif alg == "nv-fp4" and sa is not None and sb is not None:
                reps = (self.scale_block or 16) // 16
                whole = fastgroups.fp4_chain(a, b, c, np.repeat(sa, reps, axis=1),
                                             np.repeat(sb, reps, axis=0), self.scales[0],
                                             self.fraction_bits, bound=bound)
            if whole is not None:
                return whole

        def group(j: int, d: np.ndarray) -> np.ndarray:
            A, B = a[:, j:j + k], b[j:j + k]
            if alg == "nv-fused":
                return fastgroups.nv_fused(A, B, d, fa, fb, out, self.fraction_bits,
                                           self.out_mode(out), bound=bound)
            if alg == "nv-mx":
                assert sa is not None and sb is not None and self.scale_block is not None
                s = j // self.scale_block          # one scale per group (`fastgroups.covers`)
                return fastgroups.nv_fused(A, B, d, fa, fb, out, self.fraction_bits,
                                           self.out_mode(out), sa[:, s], sb[s], bound=bound)
            if alg == "nv-fp4":
                assert sa is not None and sb is not None and self.scale_block is not None
                sb_ = self.scale_block
                reps = sb_ // 16
                qa = np.repeat(sa[:, j // sb_:(j + k) // sb_], reps, axis=1)
                qb = np.repeat(sb[j // sb_:(j + k) // sb_], reps, axis=0)
                return fastgroups.nv_block_fp4(A, B, d, qa, qb, self.scales[0],
                                               self.fraction_bits, bound=bound)
            return fastgroups.amd_fp8(A, B, d, fa, fb, bound=bound)

        return self._chain(a.shape[1], np.array(c, dtype=np.float64), out, group)

    def _group(self, a, b, c, fa, fb, out, sa, sb, j):
        alg = self.algorithm
        if alg == "nv-fused":
            return fused.nv_fused(a, b, c, fa, fb, out, self.fraction_bits, self.out_mode(out))
        if alg == "nv-mx":
            sb_, n = self.scale_block, a.shape[1]

            def per(s):
                return np.repeat(s[:, j // sb_:(j + n) // sb_], sb_, axis=1)

            return fused.nv_fused(a, b, c, fa, fb, out, self.fraction_bits,
                                  self.out_mode(out), per(sa), per(sb))
        if alg == "nv-fp4":
            sb_, n = self.scale_block, a.shape[1]
            reps = sb_ // 16

            def per(s):
                return np.repeat(s[:, j // sb_:(j + n) // sb_], reps, axis=1)

            return fused.nv_block_fp4(a, b, c, per(sa), per(sb), self.scales[0],
                                      self.fraction_bits)
        if alg == "fma-chain":
            return fused.fma_chain(a, b, c, out)
        if alg == "pairwise":
            return fused.pairwise(a, b, c, self.block, self.ftz, fa)
        if alg == "amd-fused":
            return fused.amd_fused(a, b, c, fa, fb)
        if alg == "amx-bf16":
            return fused.amx_bf16(a, b, c)
        return fused.amd_fp8(a, b, c, fa, fb)


@dataclass(frozen=True)
class MatrixUnit:
    """The instructions of one matrix unit, under one name of `lp.MODELS`.

    ``for_format(fmt)`` is the first instruction that takes ``fmt`` (what
    `lp.matmul` uses); `instruction` picks one by formats, shape and scales (what
    `lowprec.testing.replay` uses).
    """

    name: str
    instructions: tuple
    doc: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a str, got {type(self.name).__name__} "
                            f"{self.name!r}")
        ins = self.instructions
        if isinstance(ins, Instruction):
            raise TypeError(f"instructions must be a tuple of Instruction, got one "
                            f"Instruction (write ({ins!r},))")
        if not isinstance(ins, (tuple, list)):
            raise TypeError(f"instructions must be a tuple of Instruction, got "
                            f"{type(ins).__name__} {ins!r}")
        for i in ins:
            if not isinstance(i, Instruction):
                raise TypeError(f"instructions must be Instruction objects, got "
                                f"{type(i).__name__} {i!r}")
        if not ins:
            raise ValueError(f"model {self.name!r} needs at least one instruction")
        object.__setattr__(self, "instructions", tuple(ins))
        if self.doc:
            object.__setattr__(self, "__doc__", self.doc)

    def for_format(self, fmt: FormatLike) -> Instruction:
        fmt = _format(fmt)
        for ins in self.instructions:
            if fmt in ins.inputs and not ins.scales:
                return ins
        takes = sorted({f.name or repr(f) for i in self.instructions if not i.scales
                        for f in i.inputs})
        raise ValueError(f"model {self.name!r} does not take {fmt.name or fmt!r} inputs "
                         f"without block scales; it takes {', '.join(takes) or 'none'} "
                         "(block-scaled instructions: lowprec.mx)")

    def instruction(self, a: FormatLike, b: FormatLike | None = None, *,
                    out: FormatLike | None = None, shape: str | None = None,
                    scale: FormatLike | None = None,
                    scale_block: int | None = None) -> Instruction:
        """The instruction for input formats ``a`` and ``b``, output ``out``, ISA shape
        ``shape`` and block scales (``scale`` format, ``scale_block``); `ValueError`
        when none fits."""
        fa = _format(a)
        fb = fa if b is None else _format(b)
        fo = None if out is None else _format(out)
        fs = None if scale is None else _format(scale)
        fits = [i for i in self.instructions
                if fa in i.inputs and fb in i.inputs and (fo is None or fo in i.outputs)
                and bool(i.scales) == (fs is not None)
                and (fs is None or fs in i.scales)
                and (scale_block is None or i.scale_block == scale_block)]
        if shape is not None:
            known = sorted({sh for i in self.instructions for sh in i.shapes})
            if shape not in known:
                raise ValueError(f"model {self.name!r} has no instruction of shape {shape!r};"
                                 f" its shapes: {', '.join(known) or 'none named'}")
            named = [i for i in fits if shape in i.shapes]
            fits = named or fits
        if not fits:
            raise ValueError(f"model {self.name!r} has no instruction for {fa.name} x "
                             f"{fb.name}" + (f" -> {fo.name}" if fo else "")
                             + (f" with {fs.name} scales" if fs else ""))
        return fits[0]

    def mixed(self, a: FormatLike, b: FormatLike) -> Instruction | None:
        """The instruction without block scales that takes ``a`` and ``b`` of two
        different formats (FP8 E4M3 x E5M2, say), or None (equal formats, or no such
        instruction)."""
        fa, fb = _format(a), _format(b)
        if fa == fb:
            return None
        return next((i for i in self.instructions
                     if fa in i.inputs and fb in i.inputs and not i.scales), None)

    def with_promotion(self, every: int = 128) -> MatrixUnit:
        """This unit with FP8 fast accumulation promoted to FP32 every ``every``
        products (DeepSeek-V3 §3.5.2: 128 on H800), for its FP8 instructions.

        Examples
        --------
        >>> import lowprec as lp
        >>> m = lp.MODELS["h100/wgmma"].with_promotion(128)
        >>> m.for_format("e4m3").promote_every, m.for_format("bf16").promote_every
        (128, None)
        """
        every = check_int("every", every, minimum=1)
        fp8 = {FP8_E4M3, FP8_E5M2, FP8_E4M3FNUZ, FP8_E5M2FNUZ}
        ins = tuple(replace(i, promote_every=every) if set(i.inputs) & fp8 and not i.scales
                    else i for i in self.instructions)
        return replace(self, name=f"{self.name}+promote{every}", instructions=ins)

    def out_formats(self, fmt: FormatLike) -> tuple[Format, ...]:
        return self.for_format(fmt).outputs

    def default_out_format(self) -> Format:
        return FP32 if any(FP32 in i.outputs for i in self.instructions) else FP64


class InstructionKernel:
    """`matmul`'s kernel for an `Instruction`: each chunk's outputs as rows of K
    (zero-padded to a multiple of the group, as a tiled kernel pads its last tile),
    the groups chained in increasing K order by `Instruction.dot`."""

    entry_bytes = 8

    def __init__(self, ins: Instruction, fmt: Format, out: Format, memory_bound: int,
                 fmt_b: Format | None = None):
        if ins.scales:
            raise ValueError("block-scaled instructions take block-scaled operands: "
                             "use lowprec.mx")
        self.ins, self.fmt, self.out, self.memory_bound = ins, fmt, out, memory_bound
        self.fmt_b = fmt if fmt_b is None else fmt_b      # b's format, when it differs
        self.k_unit = ins.block
        self.fast = ins.fast(self.fmt, self.fmt_b)
        # The fast paths keep two int16 exponents per entry besides its float64 value.
        self.entry_bytes = 12 if self.fast else 8

    def target_outputs(self, K: int) -> int:
        return 1 << 16

    def bytes_per_output(self, K: int) -> int:
        if self.fast:
            # About forty float64 and int64 arrays of the outputs (`fastgroups`); the
            # outputs that take the reference kernel have a quarter of the bound.
            return 320
        # Two gathered rows of K (padded) and about eight int64 term arrays of a group.
        k = self.ins.block
        return 16 * (-(-K // k) * k) + 96 * (k + 1) + 64

    def empty(self, c: np.ndarray) -> np.ndarray:
        return np.array(c, dtype=np.float64)

    def __call__(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        nb, M, K = a.shape
        N, k = b.shape[-1], self.ins.block
        bt = np.swapaxes(b, 1, 2)
        pad = (-K) % k
        if pad:
            a = np.concatenate([a, np.zeros((nb, M, pad))], axis=-1)
            bt = np.concatenate([bt, np.zeros((nb, N, pad))], axis=-1)
        Kp = K + pad
        if self.fast:
            bt = np.swapaxes(bt, 1, 2)
            return np.stack([self.ins.dot_matrix(a[i], bt[i], c[i], self.fmt, self.fmt_b,
                                                 self.out, bound=self.memory_bound // 4)
                             for i in range(nb)])
        rows_a = np.broadcast_to(a[:, :, None, :], (nb, M, N, Kp)).reshape(-1, Kp)
        rows_b = np.broadcast_to(bt[:, None, :, :], (nb, M, N, Kp)).reshape(-1, Kp)
        d = np.array(c, dtype=np.float64).reshape(-1)
        return self.ins.dot(rows_a, rows_b, d, self.fmt, self.fmt_b, self.out).reshape(nb, M, N)
