"""`replay`: check a model against recorded matrix-unit results, row by row.

A file holds one dot product per row in one of two layouts: the mma-data layout
(tests/data/mma/README.md: bit patterns ``a``, ``b``, ``c``, ``d``, optional
``scale_a``/``scale_b``, string metadata naming the architecture, the instruction
and the formats) or the published Tensor Core measurements
(tests/data/tensorcore/README.md: FP32 bit patterns ``a``, ``b``, ``c`` and
``d_fp32``/``d_fp16``, the GPU and input format in the file name). The model comes
from the metadata or the file name unless ``model=`` names one. It reads files and
compares bits; the arithmetic is the models' own.
"""

from __future__ import annotations

import os
import pickle
import zipfile
from dataclasses import dataclass, field

import numpy as np

from ..engine.checks import check_int
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
    Format,
)
from ..formats import format as _format
from .catalogue import MODELS, resolve_model
from .driver import matmul
from .instructions import MatrixUnit

__all__ = ["replay", "ReplayResult", "ARCH_UNITS"]

#: The mma-data format names.
_FORMATS = {"f64": FP64, "f32": FP32, "tf32": TF32, "f16": FP16, "bf16": BF16,
            "e4m3": FP8_E4M3, "e5m2": FP8_E5M2, "e4m3fnuz": FP8_E4M3FNUZ,
            "e5m2fnuz": FP8_E5M2FNUZ, "e2m1": FP4_E2M1, "ue8m0": E8M0, "ue4m3": UE4M3}

#: (architecture, instruction) of an mma-data file -> the name of its model.
ARCH_UNITS = {
    ("Volta", "mma"): "v100/mma", ("Turing", "mma"): "t4/mma", ("Ampere", "mma"): "a100/mma",
    ("Ada Lovelace", "mma"): "ada/mma", ("Hopper", "mma"): "h100/mma",
    ("Hopper", "wgmma"): "h100/wgmma", ("Blackwell", "tcgen05"): "b200/tcgen05",
    ("RTX Blackwell", "mma"): "rtx50/mma", ("CDNA1", "v_mfma"): "mi100/mfma",
    ("CDNA2", "v_mfma"): "mi200/mfma", ("CDNA3", "v_mfma"): "mi300/mfma",
}

_NV_NAN = {FP32: 0x7FFFFFFF, FP16: 0x7FFF}


@dataclass
class ReplayResult:
    """How many rows of a file a model reproduces, and the first that it does not.

    ``mismatches`` holds up to ``max_mismatches`` rows, each a dict with the row
    number, the decoded operands (``a``, ``b``, ``c`` and any scales), and the
    ``expected`` and ``got`` bit patterns and values.
    """

    path: str
    model: str
    matched: int
    total: int
    mismatches: list = field(default_factory=list)
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.matched == self.total

    def __str__(self) -> str:
        head = (f"{os.path.basename(self.path)}: {self.model}: {self.matched}/{self.total} "
                f"rows match" + (f" ({self.note})" if self.note else ""))
        lines = [head]
        for m in self.mismatches:
            lines.append(f"  row {m['row']}: expected {m['expected']:#x} ({m['expected_value']!r}),"
                         f" got {m['got']:#x} ({m['got_value']!r})")
        return "\n".join(lines)


def _meta(z, key):
    return str(z[key]) if key in z.files else ""


def _values(bits, fmt):
    """float64 values of bit patterns; FP32/TF32 and FP64 by NumPy's own view."""
    bits = np.asarray(bits)
    if fmt in (FP32, TF32):
        return bits.astype(np.uint32).view(np.float32).astype(np.float64)
    if fmt == FP64:
        return bits.astype(np.uint64).view(np.float64).copy()
    if fmt == FP16:
        return bits.astype(np.uint16).view(np.float16).astype(np.float64)
    from ..bits import decode
    return np.asarray(decode(bits, fmt), dtype=np.float64)


def _bits(values, fmt):
    """Bit patterns of float64 values of FP16, FP32 or FP64 (NaN: the host's)."""
    if fmt == FP16:
        return values.astype(np.float16).view(np.uint16).astype(np.uint64)
    if fmt == FP32:
        return values.astype(np.float32).view(np.uint32).astype(np.uint64)
    return values.view(np.uint64).copy()


def replay(path: str | os.PathLike, model: str | MatrixUnit | None = None, *,
           max_mismatches: int = 5) -> ReplayResult:
    """Replay every row of a file of recorded results through a model.

    Parameters
    ----------
    path : str or path
        An ``.npz`` file in the mma-data layout or the Tensor Core data layout.
    model : str or model, optional
        The model to check; by default the one the file's metadata names
        (`ARCH_UNITS`) or, for the Tensor Core data, its GPU's measured model.
    max_mismatches : int
        How many mismatching rows to decode in the result.

    Returns
    -------
    ReplayResult
        ``matched``, ``total`` and the first mismatches, decoded. NaN results compare
        by their bits where the model defines them (NVIDIA: 0x7FFFFFFF, 0x7FFF) and as
        NaN-ness otherwise (AMD's patterns are the host's).

    Examples
    --------
    >>> import lowprec as lp, pathlib
    >>> data = pathlib.Path(lp.__file__).parent.parent / "tests" / "data" / "mma"
    >>> r = lp.testing.replay(data / "v100_mma_f16_f32.npz")    # doctest: +SKIP
    >>> r.matched == r.total                                     # doctest: +SKIP
    True
    """
    path = os.fspath(path)
    max_mismatches = check_int("max_mismatches", max_mismatches, minimum=0)
    try:
        z = np.load(path, allow_pickle=False)
    except (ValueError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError) as exc:
        raise ValueError(f"{path}: not an .npz archive of recorded results ({exc})") from None
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise ValueError(f"{path}: holds one array, not an .npz archive of recorded results")
    with z:
        if "arch" in z.files:
            _require(path, z, "the mma-data layout", _MMA_KEYS)
            return _replay_mma(path, z, model, max_mismatches)
        if "d_fp32" in z.files or "d_fp16" in z.files:
            _require(path, z, "the Tensor Core layout", ("a", "b", "c"))
            return _replay_tensorcore(path, z, model, max_mismatches)
        raise ValueError(f"{path}: neither the mma-data layout (an 'arch' entry, "
                         "tests/data/mma/README.md) nor the Tensor Core layout ('d_fp32' or "
                         "'d_fp16', tests/data/tensorcore/README.md)")


#: The entries every mma-data file holds (tests/data/mma/README.md).
_MMA_KEYS = ("a", "b", "c", "d", "a_format", "b_format", "c_format", "d_format")


def _require(path, z, layout, keys):
    missing = [k for k in keys if k not in z.files]
    if missing:
        raise ValueError(f"{path}: {layout} needs the entries {', '.join(map(repr, missing))}"
                         f", missing from the file")


def _format_of(path, z, key):
    name = _meta(z, key)
    if name not in _FORMATS:
        raise ValueError(f"{path}: unknown {key} {name!r}; the mma-data names are "
                         f"{', '.join(_FORMATS)}")
    return _FORMATS[name]


def _replay_mma(path, z, model, max_mismatches):
    arch, instr = _meta(z, "arch"), _meta(z, "instruction").split(".")[0]
    if model is None:
        name = ARCH_UNITS.get((arch, instr))
        if name is None:
            raise ValueError(f"{path}: no model for architecture {arch!r}, instruction "
                             f"{instr!r}; give model=")
        model = name
    unit = resolve_model(model, "model")
    if not isinstance(unit, MatrixUnit):
        raise ValueError(f"model {getattr(unit, 'name', unit)!r} is not an instruction model "
                         "(lp.MODELS entries such as 'b200/tcgen05')")
    fa, fb, fc, fd = (_format_of(path, z, k)
                      for k in ("a_format", "b_format", "c_format", "d_format"))
    fs = _format_of(path, z, "scale_format") if _meta(z, "scale_format") else None
    if fs is not None:
        _require(path, z, "a block-scaled mma-data file", ("scale_a", "scale_b"))
    block = None
    if _meta(z, "block_size"):
        text = _meta(z, "block_size")
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"{path}: block_size must be a positive integer, got {text!r}")
        block = int(text)
    _check_mma_shapes(path, z, block)
    shape = _meta(z, "qualifier").split(".")[0]
    # A shape the unit does not have (another unit's, with model=): any of its shapes.
    known = any(shape in i.shapes for i in unit.instructions)
    ins = unit.instruction(fa, fb, out=fd, shape=shape if known else None, scale=fs,
                           scale_block=block)
    a, b = _values(z["a"], fa), _values(z["b"], fb)
    c = _values(z["c"], fc)          # an FP16 c of an FP32 output converts exactly
    sa = sb = None
    if fs is not None:
        mask = 0x7F if fs == UE4M3 else 0xFF      # UE4M3: |scale| (README §8.9)
        sa, sb = (_values(np.asarray(z[k]) & mask, fs) for k in ("scale_a", "scale_b"))
    d = ins.dot(a, b, c, fa, fb, fd, sa, sb)
    expected = np.asarray(z["d"]).astype(np.uint64)
    got = _bits(d, fd)
    nan = np.isnan(d)
    if ins.nan_bits:
        got[nan] = _NV_NAN[fd]
        same = got == expected
    else:
        exp_nan = np.isnan(_values(z["d"], fd))
        same = np.where(nan | exp_nan, nan & exp_nan, got == expected)
    return _result(path, unit.name, same, expected, got, d, fd, a, b, c, sa, sb,
                   max_mismatches, note=_meta(z, "qualifier"))


def _check_mma_shapes(path, z, block):
    """`ValueError` naming ``path`` unless a and b are (rows, K) (K as the file's 'K'
    says, when it says), c and d (rows,), and the scales (rows, K / block)."""
    a = z["a"]
    if a.ndim != 2:
        raise ValueError(f"{path}: 'a' must be (rows, K), got shape {a.shape}")
    rows, k = a.shape
    text = _meta(z, "K")
    if text and (not text.isdigit() or int(text) != k):
        raise ValueError(f"{path}: K is {text!r} but 'a' has {k} columns")
    want = {"b": (rows, k), "c": (rows,), "d": (rows,)}
    if block and "scale_a" in z.files:
        want |= {"scale_a": (rows, -(-k // block)), "scale_b": (rows, -(-k // block))}
    for key, shape in want.items():
        if z[key].shape != shape:
            raise ValueError(f"{path}: {key!r} must have shape {shape} (rows, K = "
                             f"{rows}, {k}), got {z[key].shape}")


def _replay_tensorcore(path, z, model, max_mismatches):
    parts = os.path.splitext(os.path.basename(path))[0].split("_")
    if len(parts) < 2:
        raise ValueError(f"{path}: a Tensor Core measurement file is named GPU_FORMAT.npz "
                         "(a100_bf16.npz), which names its GPU and input format")
    gpu, fmt = parts[:2]
    try:
        _format(fmt)
    except (ValueError, TypeError):
        raise ValueError(f"{path}: unknown input format {fmt!r} in the file name "
                         "(GPU_FORMAT.npz)") from None
    a, b, c = (np.asarray(z[k]).view(np.float32).astype(np.float64) for k in ("a", "b", "c"))
    same_all, exp_all, got_all, d_all = [], [], [], []
    name = None
    for key, out in (("d_fp32", FP32), ("d_fp16", FP16)):
        if key not in z.files:
            continue
        chosen, use_c = (model, True) if model is not None else _measured_model(gpu, fmt, key)
        name = getattr(resolve_model(chosen), "name", str(chosen))
        d = matmul(a[:, None, :], b[:, :, None], model=chosen,
                   c=(c if use_c else np.zeros_like(c))[:, None, None],
                   in_fmt=fmt, out_fmt=out)[:, 0, 0]
        expected = np.asarray(z[key]).astype(np.uint64)    # FP16 results widened to FP32
        got = d.astype(np.float32).view(np.uint32).astype(np.uint64)
        same_all.append(got == expected)
        exp_all.append(expected)
        got_all.append(got)
        d_all.append(d)
    return _result(path, str(name), np.concatenate(same_all), np.concatenate(exp_all),
                   np.concatenate(got_all), np.concatenate(d_all), FP32,
                   np.concatenate([a] * len(same_all)), np.concatenate([b] * len(same_all)),
                   np.concatenate([c] * len(same_all)), None, None, max_mismatches)


def _measured_model(gpu, fmt, key):
    """TENSORCORE.md §6: the model and whether c applies, for a file of measurements."""
    fp8 = fmt in ("e4m3", "e5m2")
    if fp8 and gpu == "b200":
        return "b200-mma", True
    if fp8 and gpu == "h100":
        return ("h100-mma", True) if key == "d_fp16" else ("h100", False)
    if gpu not in MODELS:
        raise ValueError(f"no measured model named {gpu!r}; give model=")
    return gpu, True


def _result(path: str, name: str, same: np.ndarray, expected: np.ndarray, got: np.ndarray,
            d: np.ndarray, fd: Format, a: np.ndarray, b: np.ndarray, c: np.ndarray,
            sa: np.ndarray | None, sb: np.ndarray | None, max_mismatches: int,
            note: str = "") -> ReplayResult:
    bad = np.flatnonzero(~same)
    rows = []
    for i in bad[:max_mismatches]:
        row = {"row": int(i), "a": a[i].tolist(), "b": b[i].tolist(), "c": float(c[i]),
               "expected": int(expected[i]), "got": int(got[i]),
               "expected_value": float(_values(expected[i:i + 1], fd)[0]),
               "got_value": float(d[i])}
        if sa is not None and sb is not None:
            row["scale_a"], row["scale_b"] = sa[i].tolist(), sb[i].tolist()
        rows.append(row)
    return ReplayResult(path, name, int(same.size - bad.size), int(same.size), rows, note)
