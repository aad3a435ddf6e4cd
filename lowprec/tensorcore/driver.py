r"""`matmul`: the entry point of the matrix products, from operands to the result.

In order, it:

- reads the operands (Tensors duck-typed, plain arrays, dtypes that name a format);
- settles the input and output formats, and the model's parameters for them;
- settles the shapes (NumPy's matmul rules, broadcast batches);
- rounds the operands and c;
- runs the model's kernel (`BlockFMA`, `Sequential` or `Exact`) on chunks of outputs,
  so that the work buffers stay under `MEMORY_BOUND`;
- records the flags once.

It takes ndarrays and `Format`\ s, and returns float64 ndarrays. It must never import
`Tensor`, read a context default, or keep state between calls.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..engine.checks import broadcast_shape
from ..engine.progress import Progress, check_progress
from ..formats import BF16, FP32, FP64, Format, FormatLike
from ..formats import format as _format
from ..rounding import round as _round
from ..status import quiet, record, recording
from .blockfma import BlockFMA
from .catalogue import resolve_model, way_out
from .exact import Exact
from .instructions import Instruction, InstructionKernel, MatrixUnit
from .models import ModelLike, MultiPass, TensorCoreModel
from .sequential import Sequential

__all__ = ["matmul", "MEMORY_BOUND", "Known", "bf16_values"]

#: Bytes of work buffers one `matmul` call allocates at most, whatever the shapes
#: and dtypes. On top come only 8 bytes per entry of a, b and c (their float64
#: values in the input and output formats) and of the result, 2 bytes per row of a
#: and column of b, and `lowprec.round`'s own few buffers (docs/rounding.md).
MEMORY_BOUND = 256 * 2**20

# -- operands and shapes -----------------------------------------------------------

def _operand(x, name):
    """(values, format or None) of a duck-typed Tensor or of a plain array."""
    if hasattr(x, "fmt") and hasattr(x, "values"):
        return np.asarray(x.values, dtype=np.float64), _format(x.fmt)
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiub" and not (arr.dtype.kind == "V" and getattr(
            arr.dtype.type, "__module__", "").startswith("ml_dtypes")):
        raise TypeError(f"matmul: {name} must be real numbers, got dtype {arr.dtype}")
    return arr, None



def _dtype_format(arr):
    """The format an array's dtype names (float16, float32, ml_dtypes' float types),
    or None: float64, integers, bools and lists say nothing about their format."""
    if arr.dtype.kind == "f" and arr.dtype.itemsize >= 8:
        return None
    if arr.dtype.kind not in "fV":
        return None
    try:
        return _format(arr.dtype)
    except (TypeError, ValueError):     # ml_dtypes' integer types (int4, ...)
        return None


def _input_format(av, af, bv, bf):
    """The input format without in_fmt: the operands' one format, from Tensors'
    ``fmt`` or from dtypes that name a format."""
    def told(fmt, arr):
        if fmt is not None:
            return fmt, f"a Tensor of {fmt.name or fmt!r}"
        return _dtype_format(arr), f"dtype {arr.dtype}"
    (fa, how_a), (fb, how_b) = told(af, av), told(bf, bv)
    if fa is not None and fa == fb:
        return fa
    if fa is not None and fb is not None:
        raise ValueError(f"matmul: operands have different formats ({how_a}, {how_b}); "
                         "convert one, or give in_fmt")
    raise ValueError(f"matmul needs in_fmt unless both operands say their format (Tensors "
                     f"of one format, or arrays of a float16, float32 or ml_dtypes dtype); "
                     f"got {how_a} and {how_b}: say which format the operands are in, "
                     "e.g. in_fmt='fp16'")


class Known(NamedTuple):
    """Values known to be of ``fmt``: `matmul` takes them as they are, as a Tensor's."""

    values: np.ndarray
    fmt: Format


def bf16_values(*arrays: np.ndarray) -> bool:
    """Whether every entry of the float32 arrays is a BF16 value (its low 16 bits 0)."""
    return all(x.dtype == np.float32 and not np.bitwise_and(x.view(np.uint32), 0xFFFF).any()
               for x in arrays)


def _values_in(arr, fmt_of_arr, fmt):
    """float64 values of ``arr`` in ``fmt``: rounded (RNE) unless they already are.

    One float64 array of ``arr``'s shape; rounded a block at a time, so that
    rounding's own buffers stay within a sixteenth of `MEMORY_BOUND`."""
    if fmt_of_arr is None and _dtype_format(arr) == fmt:
        fmt_of_arr = fmt
    if fmt_of_arr == fmt:
        # Every value of a format narrower than float64 is a float64: exact.
        return arr if arr.dtype == np.float64 else arr.astype(np.float64)
    if fmt == BF16 and recording() is None and bf16_values(arr):
        # A float32 whose low 16 bits are clear is the BF16 value of its top half: no
        # rounding (which would change nothing, and with nobody listening count nothing).
        return arr.astype(np.float64)
    out = np.empty(arr.shape, dtype=np.float64)
    for idx in _blocks(arr.shape, max(1, MEMORY_BOUND // 16 // 24)):
        out[idx] = _round(arr[idx], fmt)
    return out


def _blocks(shape, limit):
    """Index tuples that cover an array of ``shape`` in C order, each selecting at most
    ``limit`` elements (at least one)."""
    if len(shape) == 0:
        yield ()
        return
    inner = math.prod(shape[1:])
    if inner <= limit:
        step = max(1, limit // max(1, inner))
        for i in range(0, shape[0], step):
            yield (slice(i, i + step),)
        return
    for i in range(shape[0]):
        for rest in _blocks(shape[1:], limit):
            yield (i,) + rest


def _format_arg(name, value):
    """`lowprec.format` of an argument, its errors naming the argument."""
    try:
        return _format(value)
    except (TypeError, ValueError) as e:
        raise type(e)(f"matmul: {name}: {e}") from None


def _numpy_shape_error(a_shape, b_shape):
    """Raise NumPy's own error for operands np.matmul would refuse."""
    dummy = np.zeros((), dtype=bool)
    np.matmul(np.broadcast_to(dummy, a_shape), np.broadcast_to(dummy, b_shape))


def _broadcast_batch(x, y):
    """`broadcast_shape` of two shapes, or None when they do not broadcast."""
    try:
        return broadcast_shape(tuple(x), tuple(y))
    except ValueError:
        return None


def _result_shape(a_shape, b_shape):
    if len(a_shape) == 0 or len(b_shape) == 0:
        _numpy_shape_error(a_shape, b_shape)
    a2 = a_shape if len(a_shape) > 1 else (1,) + a_shape
    b2 = b_shape if len(b_shape) > 1 else b_shape + (1,)
    if a2[-1] != b2[-2]:
        _numpy_shape_error(a_shape, b_shape)
    batch = _broadcast_batch(a2[:-2], b2[:-2])
    if batch is None:
        _numpy_shape_error(a_shape, b_shape)
    shape = batch + (a2[-2], b2[-1])
    squeeze = [i for i, keep in ((-2, len(a_shape) > 1), (-1, len(b_shape) > 1)) if not keep]
    return a2, b2, batch, shape, squeeze


# -- the driver ------------------------------------------------------------------

def matmul(a: ArrayLike, b: ArrayLike, *, model: ModelLike = "fp32",
           c: ArrayLike | None = None, in_fmt: FormatLike | None = None,
           out_fmt: FormatLike | None = None,
           progress: bool | None = None) -> NDArray[np.float64] | np.float64:
    """Matrix product ``a @ b (+ c)`` as the model computes it, bit for bit.

    Parameters
    ----------
    a, b : array_like or Tensor-like
        Operands with NumPy ``matmul`` shapes: 2-D matrices, stacks of them
        (broadcast batch dimensions) or 1-D vectors. Objects with ``.fmt`` and
        ``.values`` (a `Tensor`) supply their format.
    model : str or TensorCoreModel
        ``"exact"``, ``"fp32"``, ``"fp16"``, a Tensor Core model (``"v100"``,
        ``"t4"``, ``"a100"``, ``"ada"``, ``"h100"``, ``"h100-mma"``, ``"b200"``,
        ``"b200-mma"``; see `MODELS`) or a custom `TensorCoreModel`.
    c : array_like, optional
        Addend, broadcast to the result's shape and rounded (RNE) to ``out_fmt``;
        +0 when absent. ``"exact"``, ``"fp32"`` and ``"fp16"`` sign zero results as
        IEEE 754 additions do (see their docs); in Tensor Core models a zero block
        sum is +0 (TENSORCORE.md §2).
    in_fmt : Format or str, optional
        The operands' format; plain arrays are rounded into it (RNE, recorded in
        `lp.flags()`). Without it, the operands must say their format, and say the
        same one: Tensors' ``fmt``, or the dtype of arrays of NumPy ``float16`` or
        ``float32`` or of an ml_dtypes float type (``bfloat16``, ``float8_e4m3fn``,
        ...). float64 arrays, integers and lists of Python floats say nothing (a
        float64 array is not taken as FP64 input): `ValueError`, as for operands of
        two formats (``float16 @ bfloat16``; `lowprec.tensors.matmul` on Tensors
        promotes instead).
    out_fmt : Format or str, optional
        Result format. Default FP32 (FP16 for the ``"fp16"`` model). Tensor Core
        models give FP32 or, where the hardware has it, FP16; ``"exact"``,
        ``"fp32"`` and ``"fp16"`` round their result to any format of at most 51
        bits of precision (a final RNE conversion after FP32/FP16 accumulation).
        ``"exact"`` also gives FP64: ``model="exact", out_fmt="fp64"`` is the exact
        reference of any product of its inputs (formats of up to 26 bits of
        precision), the exact sum rounded once to float64.
    progress : bool, optional
        A progress bar over the chunks of outputs (tqdm, the ``progress`` extra):
        True shows one, False never; by default one appears once the chunks done
        say the rest will take over two seconds (never without tqdm; the
        environment variable ``LOWPREC_PROGRESS=0`` turns it off, ``1`` on).

    Returns
    -------
    numpy.ndarray
        float64 values of ``out_fmt`` with NumPy's ``matmul`` result shape.

    Notes
    -----
    Every model is vectorised over the outputs and works on chunks of outputs and
    spans of K, so that the work buffers of one call stay below ``MEMORY_BOUND``
    (256 MiB) whatever the shapes (large K included) and the operands' dtypes. Peak
    memory is at most that plus 8 bytes per entry of ``a``, ``b``, ``c`` and the
    result (the operands' float64 values rounded into ``in_fmt``, or widened when
    their dtype is the format; ``c`` rounded to ``out_fmt``; the result), 2 bytes
    per row of ``a`` and column of ``b``, and the few buffers of `lowprec.round`
    (docs/rounding.md). Inf and NaN operands, and outputs that need the exact sum,
    are handled within the same bound.

    Exception flags: ``overflow`` counts outputs that are infinite from
    finite inputs, ``invalid`` outputs that are NaN from NaN-free inputs (inf * 0,
    inf - inf). The Tensor Core models floor the reference exponent at Elim as
    Khattak & Mikaitis do (MMA-Sim aligns against c instead; they differ only when
    every term is below about 2**-126, or 2**-19 for FP16 output).

    Examples
    --------
    >>> import lowprec as lp
    >>> a = [[1.0, 1.0, 1.0, 1.0]]
    >>> b = [[2.0**-24]] * 4
    >>> for model in ("exact", "fp32", "v100", "a100"):
    ...     print(model, lp.matmul(a, b, model=model, c=[[1.0]], in_fmt="fp16")[0, 0] - 1)
    exact 2.384185791015625e-07
    fp32 0.0
    v100 0.0
    a100 2.384185791015625e-07
    >>> lp.matmul([[1.0, 2.0]], [[3.0], [4.0]], model="h100", in_fmt="bf16", out_fmt="fp16")
    array([[11.]])
    >>> import numpy as np        # a float16 array says its format
    >>> lp.matmul(np.array([[1.0, 2.0**-11]], np.float16), np.ones((2, 1), np.float16))
    array([[1.00048828]])
    >>> lp.matmul([[1.0, 2.0]], [[3.0, 4.0]], in_fmt="fp16")
    Traceback (most recent call last):
    ...
    ValueError: matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc
    signature (n?,k),(k,m?)->(n?,m?) (size 1 is different from 2)
    """
    spec = resolve_model(model)
    progress = check_progress(progress)
    if isinstance(spec, MultiPass):
        return _multipass(spec, a, b, c, in_fmt, out_fmt, progress)
    (av, af), (bv, bf) = _operand(a, "operand 0 (a)"), _operand(b, "operand 1 (b)")
    a2, b2, batch, shape, squeeze = _result_shape(av.shape, bv.shape)
    mixed = None
    if in_fmt is not None:
        fmt = fmt_b = _format_arg("in_fmt", in_fmt)
    elif isinstance(spec, MatrixUnit) and af is not None and bf is not None and \
            (mixed := spec.mixed(af, bf)) is not None:
        fmt, fmt_b = af, bf          # an instruction of two input formats (FP8 mixes)
    else:
        fmt = fmt_b = _input_format(av, af, bv, bf)
    try:
        params = spec.for_format(fmt) if mixed is None else mixed
    except ValueError as e:
        raise ValueError(f"{e}; {way_out(fmt, spec)}") from None
    if out_fmt is None:
        out = spec.default_out_format()
    else:
        out = _format_arg("out_fmt", out_fmt)
    allowed = spec.out_formats(fmt) if mixed is None else mixed.outputs
    if allowed is not None and out not in allowed:
        raise ValueError(f"model {spec.name or 'TensorCoreModel'!r} with "
                         f"{fmt.name or fmt!r} inputs gives "
                         f"{' or '.join(str(f.name) for f in allowed)} output, not "
                         f"{out.name or out!r}; the accumulation models ('exact', "
                         "'fp32', 'fp16') round to any format of at most 51 bits of "
                         "precision, and 'exact' to FP64")
    exact = not isinstance(params, (TensorCoreModel, Instruction)) and \
        params.accumulator is None
    if allowed is None and out.p > 51 and not (out == FP64 and exact):
        raise ValueError(f"model {spec.name!r} rounds to formats of at most 51 bits of "
                         f"precision, not {out.name or out!r}; for an FP64 result use "
                         "model='exact' (the exact sum rounded once to float64)")

    av, bv = _values_in(av, af, fmt), _values_in(bv, bf, fmt_b)
    av, bv = av.reshape(a2), bv.reshape(b2)
    if c is None:
        cv = np.zeros((), dtype=np.float64)
    else:
        c_values, c_fmt = _operand(c, "c")
        cv = _values_in(c_values, c_fmt, out)
        target = tuple(s for i, s in enumerate(shape) if i - len(shape) not in squeeze)
        if _broadcast_batch(cv.shape, target) != target:
            raise ValueError(f"matmul: c of shape {cv.shape} does not broadcast to the "
                             f"result shape {_squeezed(shape, squeeze)}")
        if squeeze:
            cv = np.expand_dims(cv, tuple(squeeze)) if cv.ndim else cv
    cv = np.broadcast_to(cv, shape)

    kernel: BlockFMA | Exact | Sequential | InstructionKernel
    if isinstance(params, TensorCoreModel):
        kernel = BlockFMA(params, fmt, out, MEMORY_BOUND)
    elif isinstance(params, Instruction):
        kernel = InstructionKernel(params, fmt, out, MEMORY_BOUND, fmt_b)
    elif exact:
        kernel = Exact(fmt, out, MEMORY_BOUND)
    else:
        kernel = Sequential(fmt, params.accumulator, out, MEMORY_BOUND)
    result = _run_chunks(kernel, av, bv, cv, batch, shape, progress,
                         f"lp.matmul ({spec.name or 'model'})")
    if recording() is not None:
        if getattr(kernel, "einsum", False):
            # Its operands and c were finite (`Sequential.prepare`): an infinite output
            # is an overflow, a NaN output an invalid operation.
            record(overflow=int(np.count_nonzero(np.isinf(result))),
                   invalid=int(np.count_nonzero(np.isnan(result))))
        else:
            _record_flags(result, av, bv, cv)
    result = result.reshape(_squeezed(shape, squeeze))
    return result[()] if result.ndim == 0 else result


def _multipass(spec, a, b, c, in_fmt, out_fmt, progress):
    """`MultiPass`: the operands split into pieces of ``spec.split``, the partial
    products through ``spec.base`` in the listed order, c added last in FP32."""
    fmt = FP32 if in_fmt is None else _format_arg("in_fmt", in_fmt)
    spec.for_format(fmt)
    if out_fmt is not None and _format_arg("out_fmt", out_fmt) != FP32:
        raise ValueError(f"model {spec.name!r} gives FP32 output")

    def pieces(x):
        x = _values_in(*_operand(x, "operand"), FP32)
        out, rest = [], x
        for _ in range(spec.pieces):
            p = quiet(_round, rest, spec.split)
            out.append(p)
            # Exact: p is rest rounded to fewer bits, so rest - p is an FP32 value
            # (inf - inf is NaN: an infinite operand's later pieces, as XLA's).
            with np.errstate(invalid="ignore"):
                rest = rest - p
        return out

    pa, pb = pieces(a), pieces(b)
    acc = None
    for n, (i, j) in enumerate(spec.terms):
        if n == len(spec.terms) - 1 and acc is not None:
            acc = np.where(np.isnan(acc), 0.0, acc)
        acc = matmul(pa[i], pb[j], model=spec.base, c=acc, in_fmt=spec.split, out_fmt=FP32,
                     progress=progress)
    if c is not None:
        cv = _values_in(*_operand(c, "c"), FP32)
        with np.errstate(all="ignore"):
            acc = quiet(_round, np.asarray(acc) + cv, FP32)   # exact float64 sum of two FP32s
    return acc


def _squeezed(shape, squeeze):
    return tuple(s for i, s in enumerate(shape) if i - len(shape) not in squeeze)


def _run_chunks(kernel, a, b, c, batch, shape, progress=None, desc="lp.matmul"):
    """Apply ``kernel`` to chunks of outputs; each chunk's work stays under the bound.

    The bound is shared out: half to the chunk's per-output arrays
    (``kernel.bytes_per_output``), a quarter to copies of the operands' entries in
    one span of K (``kernel.entry_bytes`` each, spans of at least ``kernel.k_unit``),
    and a quarter to gathered copies of several small matrices of a stack (or, in
    the exact model, of the rows and columns of outputs summed exactly).
    """
    M, K = a.shape[-2:]
    N = b.shape[-1]
    out = np.empty(shape, dtype=np.float64)
    nb = math.prod(batch)
    if out.size == 0:
        return out
    if K == 0:
        with np.errstate(all="ignore"):
            out[...] = kernel.empty(c)
        return out
    a_full = np.broadcast_to(a, batch + (M, K))
    b_full = np.broadcast_to(b, batch + (K, N))
    c_full = np.broadcast_to(c, batch + (M, N))
    if isinstance(kernel, Sequential):
        with np.errstate(all="ignore"):
            kernel.prepare(a_full, b_full, c_full)     # a look at the whole operands
            if kernel.einsum:                          # its own blocks: `Sequential.whole`
                with Progress(1, desc, progress) as bar:
                    kernel.whole(a_full, b_full, c_full, out.reshape((nb, M, N)))
                    bar.update()
                return out
    per_output = kernel.bytes_per_output(K) + 8          # + a gathered c
    outputs = max(1, min(kernel.target_outputs(K), MEMORY_BOUND // 2 // per_output))
    # Rows plus columns of one chunk whose entries of a span of k_unit fit a quarter.
    width = max(2, MEMORY_BOUND // 4 // (kernel.k_unit * kernel.entry_bytes))
    if M * N > outputs or M + N > width:
        nc = max(1, min(N, outputs, width - 1))
        mc = max(1, min(M, outputs // nc, width - nc))
        bc = 1
    else:
        mc, nc = M, N
        # Gathered operand copies of several matrices: a quarter of the bound.
        bc = max(1, min(nb, outputs // (M * N), width // (M + N),
                        MEMORY_BOUND // 4 // (8 * (M + N) * K)))
    out_flat = out.reshape((nb, M, N))
    chunks = -(-nb // bc) * -(-M // mc) * -(-N // nc)
    with np.errstate(all="ignore"), Progress(chunks, desc, progress) as bar:
        for b0 in range(0, nb, bc):
            b1 = min(nb, b0 + bc)
            if bc == 1:
                idx = np.unravel_index(b0, batch) if batch else ()
                ab, bb, cb = a_full[idx][None], b_full[idx][None], c_full[idx][None]
            else:   # gathered copies of at most bc matrices
                idx = np.unravel_index(np.arange(b0, b1), batch)
                ab, bb, cb = a_full[idx], b_full[idx], c_full[idx]
            for m0 in range(0, M, mc):
                for n0 in range(0, N, nc):
                    rows, cols = slice(m0, m0 + mc), slice(n0, n0 + nc)
                    if isinstance(kernel, BlockFMA):
                        # The same columns of b come back for every chunk of rows: the
                        # kernel keeps its copies of them (in the gathering quarter).
                        kernel.b_key = (b0, n0) if bc == 1 else None
                    out_flat[b0:b1, rows, cols] = kernel(
                        ab[:, rows, :], bb[:, :, cols], cb[:, rows, cols])
                    bar.update()
            del ab, bb, cb
    return out


def _record_flags(result, a, b, c):
    """overflow: infinite outputs of finite inputs; invalid: NaN outputs of NaN-free ones.

    Masks of one byte per row of ``a`` and column of ``b``; the per-output tests run a
    block of outputs at a time."""
    row_fin, row_nan = _finite_and_nan(a, -1)
    col_fin, col_nan = _finite_and_nan(b, -2)
    shape = result.shape
    row_fin, row_nan = (np.broadcast_to(x[..., :, None], shape) for x in (row_fin, row_nan))
    col_fin, col_nan = (np.broadcast_to(x[..., None, :], shape) for x in (col_fin, col_nan))
    c = np.broadcast_to(c, shape)
    overflow = invalid = 0
    for idx in _blocks(shape, max(1, MEMORY_BOUND // 64)):
        finite_in = row_fin[idx] & col_fin[idx] & np.isfinite(c[idx])
        overflow += int(np.count_nonzero(np.isinf(result[idx]) & finite_in))
        del finite_in
        nan_in = row_nan[idx] | col_nan[idx] | np.isnan(c[idx])
        invalid += int(np.count_nonzero(np.isnan(result[idx]) & ~nan_in))
    record(overflow=overflow, invalid=invalid)


def _finite_and_nan(x, axis):
    """Whether every entry along ``axis`` is finite, and whether one is NaN, a span of
    ``axis`` at a time."""
    x = np.moveaxis(x, axis, -1)
    K = x.shape[-1]
    fin = np.ones(x.shape[:-1], dtype=bool)
    nan = np.zeros(x.shape[:-1], dtype=bool)
    step = max(1, MEMORY_BOUND // 64 // max(1, fin.size))
    for j in range(0, K, step):
        span = x[..., j:j + step]
        fin &= np.isfinite(span).all(axis=-1)
        nan |= np.isnan(span).any(axis=-1)
    return fin, nan
