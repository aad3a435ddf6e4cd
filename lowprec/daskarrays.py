# One module (~930 lines): the Dask mirror of lowprec's API, one thin function per
# operation plus LazyTensor, all built on the same private graph helpers (_as_dask,
# _sample, _blocks); split, they would have to publish those helpers.
"""Dask arrays in, Dask arrays out (the ``dask`` extra): lowprec's operations on
chunked arrays, lazily, bit for bit the NumPy call on the gathered arrays.

Elementwise operations (`round`, `encode`, `decode`, `add` ... `fma`) map each block
through the NumPy call. Under ``"sr"`` the seed is resolved once, when the graph is
built. Each block then rounds with its elements' global C-order indices (``offset=``,
the counter-based contract). So any chunking gives the same words.

Reductions keep lowprec's documented orders:

* Sequential sums, dots and prefix sums chain across the chunks in order. The
  previous chunk's result is prepended as term 0 of the next call.
* Pairwise sums combine power-of-two chunks in the NumPy call's own tree.
* `matmul` chains the K chunks with the accumulator passed as ``c``.

Dask is imported inside the functions only, so this module imports without it.
The module never rounds on its own and never computes anything before
``.compute()``. Every value comes from a lowprec call on a block.
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from . import arith
from .bits import decode as _decode
from .bits import encode as _encode
from .engine.lazy import LAZY
from .formats import FP32, Format, FormatLike
from .formats import format as _format
from .rounding import round as _round
from .tensorcore import ModelLike, resolve_model
from .tensorcore.instructions import MatrixUnit
from .tensorcore.models import Accumulating, TensorCoreModel
from .tensors import Tensor, context, get_context
from .tensors import matmul as _matmul
from .types import Mode, RNGLike

if TYPE_CHECKING:
    import dask.array

__all__ = ["DaskLike", "round", "encode", "decode", "add", "sub", "mul", "div", "sqrt", "fma",
           "sum", "dot", "cumsum", "matmul", "tensor", "LazyTensor", "k_multiple",
           "resolve_seed"]

#: What the functions take: a Dask array, or anything NumPy reads (one chunk). Any:
#: Dask is optional, so its type cannot appear in the signatures at run time.
DaskLike = Any

_EXTRA = 'lowprec.daskarrays needs dask: pip install -e ".[dask]" (or pip install "dask[array]")'


def _da() -> Any:
    try:
        import dask.array as da
    except ImportError as exc:
        raise ImportError(_EXTRA) from exc
    return da


def _delayed() -> Any:
    import dask
    return dask.delayed


def _is_dask(x: object) -> bool:
    return type(x).__module__.startswith("dask.array") and hasattr(x, "chunks")


def _as_dask(x: DaskLike, name: str = "x") -> Any:
    da = _da()
    if _is_dask(x):
        return x
    if isinstance(x, (LazyTensor, Tensor)):
        raise TypeError(f"{name}: pass the values (t.values) or use the Tensor's operators")
    return da.from_array(np.asarray(x), chunks=-1)


def resolve_seed(rng: RNGLike) -> int:
    """The one seed of a call under ``"sr"``, resolved when the graph is built.

    * An int is the seed as it is.
    * A `numpy.random.Generator` gives one draw ``rng.integers(0, 2**63)``.
      The NumPy call draws the same, so a generator in the same state gives the
      same result.
    * None gives a fresh seed from the operating system's entropy
      (``numpy.random.SeedSequence()``). The result is then not reproducible, as
      with the NumPy call.

    Examples
    --------
    >>> import numpy as np
    >>> resolve_seed(7)
    7
    >>> g, h = np.random.default_rng(1), np.random.default_rng(1)
    >>> resolve_seed(g) == int(h.integers(0, 2**63))
    True
    """
    if isinstance(rng, np.random.Generator):
        return int(rng.integers(0, 2**63))
    if rng is None:
        return int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> np.uint64(1))
    if isinstance(rng, (bool, np.bool_)) or not isinstance(rng, (int, np.integer)):
        raise TypeError(f"rng must be None, an int seed or a numpy.random.Generator, "
                        f"got {type(rng).__name__} {rng!r}")
    return int(rng)


def _options(mode: Mode, rng: Any, **kw: Any) -> dict[str, Any]:
    """Keyword options of one lowprec call; "sr" gets its seed resolved now."""
    opts = {k: v for k, v in kw.items()}
    opts["rng"] = resolve_seed(rng) if mode == "sr" else rng
    return opts


def _runs(loc: list[tuple[int, int]], shape: tuple[int, ...]) -> tuple[int, np.ndarray]:
    """(run length, global flat offsets of the runs) of a block: its elements in C
    order split into runs contiguous in the whole array's C order.

    The axes after the last one the block does not cover entirely join the run."""
    n = len(shape)
    if n == 0:
        return 1, np.zeros(1, dtype=np.int64)
    j = n - 1
    while j > 0 and tuple(loc[j]) == (0, shape[j]):
        j -= 1
    strides = [math.prod(shape[i + 1:]) for i in range(n)]
    run = math.prod(b - a for a, b in loc[j:])
    base = builtins.sum(loc[i][0] * strides[i] for i in range(n))
    offsets = np.full(1, base, dtype=np.int64)
    for i in range(j):
        offsets = (offsets[:, None] + np.arange(loc[i][1] - loc[i][0], dtype=np.int64)
                   * strides[i]).reshape(-1)
    return run, offsets


def _map(fn: Callable[..., Any], operands: tuple[Any, ...], mode: Mode, dtype: Any,
         name: str) -> Any:
    """``fn(*operand_blocks, offset=...)`` over the broadcast Dask operands, block by
    block. Under "sr" each contiguous run of a block gets its global flat offset."""
    da = _da()
    if not any(_is_dask(op) for op in operands):
        raise TypeError(f"{name}: no operand is a Dask array; use lowprec.{name} on NumPy "
                        "arrays")
    arrays = [op if _is_dask(op) else da.from_array(np.asarray(op), chunks=-1)
              if np.ndim(op) else None for op in operands]
    consts = [None if a is not None else op for a, op in zip(arrays, operands)]
    shape = np.broadcast_shapes(*(a.shape for a in arrays if a is not None))
    # One shape and one chunking for every operand (broadcasting is a view).
    full = [da.broadcast_to(a, shape) if a is not None else None for a in arrays]
    lead = next((a for a in arrays if a is not None and a.shape == shape),
                next(a for a in full if a is not None))
    arrays = [a.rechunk(lead.chunks) if a is not None else None for a in full]
    dask_ops = [a for a in arrays if a is not None]
    sr = mode == "sr"

    def block(*blocks: np.ndarray, block_info: Any = None) -> np.ndarray:
        it = iter(blocks)
        ops: list[Any] = [next(it) if c is None and a is not None else c
                          for a, c in zip(arrays, consts)]
        if not sr:
            return np.asarray(fn(*ops))
        info = block_info[None]
        out_shape = tuple(info["chunk-shape"])
        run, offsets = _runs(info["array-location"], tuple(info["shape"]))
        flat = [np.broadcast_to(o, out_shape).reshape(-1, run) if np.ndim(o) else o
                for o in ops]
        out = np.empty((len(offsets), run), dtype=dtype)
        for r, off in enumerate(offsets):
            out[r] = fn(*(f[r] if np.ndim(f) else f for f in flat), offset=int(off))
        return out.reshape(out_shape)

    meta = np.empty((0,) * len(shape), dtype=dtype)
    return da.map_blocks(block, *dask_ops, dtype=dtype, meta=meta)


def _sample(x: Any) -> Any:
    """A stand-in of ``x`` for the NumPy call that checks the options and operands when
    the graph is built: zeros of a Dask array's dtype (nothing is computed), anything
    else itself (a scalar; a plain array's first element), so that None, "abc" or 1j
    get the NumPy call's own `TypeError` now, not at ``.compute()``."""
    if _is_dask(x):
        return np.zeros((1,) * x.ndim, dtype=x.dtype)
    if isinstance(x, (LazyTensor, Tensor)):
        raise TypeError("a Tensor operand: pass its values (t.values), or use the Tensor's "
                        "operators")
    if np.ndim(x) == 0:
        return x
    a = np.asarray(x)
    return a[(slice(0, 1),) * a.ndim]


def round(x: DaskLike, fmt: FormatLike, mode: Mode = "rne", *,  # noqa: A001
          rng: RNGLike = None, sr_bits: int | None = None,
          subnormals: bool | None = None, saturate: bool = False) -> dask.array.Array:
    """`lowprec.round` of a Dask array, block by block (lazy).

    Options as `lowprec.round`, checked now (the same errors). Under ``"sr"`` the
    seed is resolved once (`resolve_seed`). Every element draws the word of its
    global C-order index. So for every chunking the result equals
    ``lp.round(x.compute(), ...)`` with that seed.

    Examples
    --------
    >>> import dask.array as da, lowprec.daskarrays as lpd
    >>> x = da.from_array([0.1, 1.0 + 2**-9, 3.0], chunks=2)
    >>> lpd.round(x, "bf16").compute()
    array([0.10009766, 1.        , 3.        ])
    >>> lpd.round(x, "bf16", "ru").compute()
    array([0.10009766, 1.0078125 , 3.        ])
    """
    x = _as_dask(x)
    opts = _options(mode, rng, sr_bits=sr_bits, subnormals=subnormals, saturate=saturate)
    _round(_sample(x), fmt, mode, **opts)          # the options' errors, now

    def fn(v: np.ndarray, **off: Any) -> Any:
        return _round(v, fmt, mode, **opts, **off)
    return _map(fn, (x,), mode, np.float64, "round")


def encode(x: DaskLike, fmt: FormatLike, mode: Mode = "rne", *,
           rng: RNGLike = None, sr_bits: int | None = None,
           subnormals: bool | None = None, saturate: bool = False) -> dask.array.Array:
    """`lowprec.encode` of a Dask array, block by block (lazy).

    Under ``"sr"`` the seed and the words are those of `round`.

    Examples
    --------
    >>> import dask.array as da, lowprec.daskarrays as lpd
    >>> lpd.encode(da.from_array([1.0, -2.0, 65504.0], chunks=1), "fp16").compute()
    array([15360, 49152, 31743], dtype=uint16)
    """
    x = _as_dask(x)
    opts = _options(mode, rng, sr_bits=sr_bits, subnormals=subnormals, saturate=saturate)
    dtype = np.asarray(_encode(_sample(x), fmt, mode, **opts)).dtype

    def fn(v: np.ndarray, **off: Any) -> Any:
        return _encode(v, fmt, mode, **opts, **off)
    return _map(fn, (x,), mode, dtype, "encode")


def decode(bits: DaskLike, fmt: FormatLike) -> dask.array.Array:
    """`lowprec.decode` of a Dask array of bit patterns, block by block (lazy).

    Examples
    --------
    >>> import dask.array as da, numpy as np, lowprec.daskarrays as lpd
    >>> b = da.from_array(np.array([0x3C00, 0x7E00, 0x0001], np.uint16), chunks=2)
    >>> lpd.decode(b, "fp16").compute()
    array([1.00000000e+00,            nan, 5.96046448e-08])
    """
    bits = _as_dask(bits, "bits")
    _decode(np.zeros((1,) * bits.ndim, dtype=bits.dtype), fmt)

    def fn(v: np.ndarray) -> Any:
        return _decode(v, fmt)
    return _map(fn, (bits,), "rne", np.float64, "decode")


def _elementwise(op: Callable[..., Any], name: str, operands: tuple[Any, ...],
                 fmt: FormatLike, mode: Mode, rng: Any, subnormals: bool | None,
                 saturate: bool) -> Any:
    opts = _options(mode, rng, subnormals=subnormals, saturate=saturate)
    op(*(_sample(o) for o in operands), fmt, mode, **opts)    # the errors, now

    def fn(*v: Any, **off: Any) -> Any:
        return op(*v, fmt, mode, **opts, **off)
    return _map(fn, operands, mode, np.float64, name)


_DOC = """`lowprec.{0}` of Dask arrays (and NumPy arrays or scalars), broadcast as in
    NumPy, block by block (lazy). Under ``"sr"`` the seed is resolved once and each
    element draws the word of its C-order index in the broadcast result.

    Examples
    --------
    >>> import dask.array as da, lowprec.daskarrays as lpd
    >>> a = da.from_array([1.0, 2.0, 3.0], chunks=2)
    >>> lpd.{0}({1}).compute()
    {2}
    """


def add(a: DaskLike, b: DaskLike, fmt: FormatLike, mode: Mode = "rne", *,
        rng: RNGLike = None, subnormals: bool | None = None,
        saturate: bool = False) -> dask.array.Array:
    return _elementwise(arith.add, "add", (a, b), fmt, mode, rng, subnormals, saturate)


def sub(a: DaskLike, b: DaskLike, fmt: FormatLike, mode: Mode = "rne", *,
        rng: RNGLike = None, subnormals: bool | None = None,
        saturate: bool = False) -> dask.array.Array:
    return _elementwise(arith.sub, "sub", (a, b), fmt, mode, rng, subnormals, saturate)


def mul(a: DaskLike, b: DaskLike, fmt: FormatLike, mode: Mode = "rne", *,
        rng: RNGLike = None, subnormals: bool | None = None,
        saturate: bool = False) -> dask.array.Array:
    return _elementwise(arith.mul, "mul", (a, b), fmt, mode, rng, subnormals, saturate)


def div(a: DaskLike, b: DaskLike, fmt: FormatLike, mode: Mode = "rne", *,
        rng: RNGLike = None, subnormals: bool | None = None,
        saturate: bool = False) -> dask.array.Array:
    return _elementwise(arith.div, "div", (a, b), fmt, mode, rng, subnormals, saturate)


def sqrt(a: DaskLike, fmt: FormatLike, mode: Mode = "rne", *,
         rng: RNGLike = None, subnormals: bool | None = None,
         saturate: bool = False) -> dask.array.Array:
    return _elementwise(arith.sqrt, "sqrt", (a,), fmt, mode, rng, subnormals, saturate)


def fma(a: DaskLike, b: DaskLike, c: DaskLike, fmt: FormatLike, mode: Mode = "rne", *,
        rng: RNGLike = None, subnormals: bool | None = None,
        saturate: bool = False) -> dask.array.Array:
    return _elementwise(arith.fma, "fma", (a, b, c), fmt, mode, rng, subnormals, saturate)


add.__doc__ = _DOC.format("add", 'a, 2.0**-9, "bf16", "ru"',
                          "array([1.0078125, 2.015625 , 3.015625 ])")
sub.__doc__ = _DOC.format("sub", 'a, a, "fp16"', "array([0., 0., 0.])")
mul.__doc__ = _DOC.format("mul", 'a, 0.1, "bf16"',
                          "array([0.10009766, 0.20019531, 0.30078125])")
div.__doc__ = _DOC.format("div", '1.0, a, "bf16"', "array([1.        , 0.5       , 0.33398438])")
sqrt.__doc__ = _DOC.format("sqrt", 'a, "bf16", "rz"', "array([1.       , 1.4140625, 1.7265625])")
fma.__doc__ = _DOC.format("fma", 'a, a, 1.0, "fp16"', "array([ 2.,  5., 10.])")


# -- reductions -----------------------------------------------------------------------

_FLOAT64_EXACT = "fdiub"


def _exact_in_float64(dtype: np.dtype) -> bool:
    """Whether every value of ``dtype`` is a float64 (so a block may be joined to a
    float64 accumulator without a rounding)."""
    return (dtype.kind == "f" and dtype.itemsize <= 8) or (
        dtype.kind in "iub" and dtype.itemsize <= 4)


def _pow2_chunks(chunks: tuple[int, ...], n: int) -> tuple[int, ...] | None:
    """Chunks of one axis on which the pairwise tree splits at the chunk boundaries:
    every chunk but the last 2**k long (k >= 1, or one chunk), the last at most that.
    None when ``chunks`` already are such."""
    sizes = [c for c in chunks if c]
    if len(sizes) <= 1:
        return None
    size = sizes[0]
    if size >= 2 and size & (size - 1) == 0 and all(c == size for c in sizes[:-1]) \
            and sizes[-1] <= size:
        return None if len(sizes) == len(chunks) else _even(n, size)
    size = max(2, 1 << (max(sizes).bit_length() - 1))
    return _even(n, size)


def _even(n: int, size: int) -> tuple[int, ...]:
    return (size,) * (n // size) + ((n % size,) if n % size else ())


def _rows(x2: Any) -> tuple[Any, list[tuple[int, int]]]:
    """The delayed blocks of a 2-D Dask array and the (start, stop) of each chunk of
    its last axis, empty chunks left out."""
    blocks = x2.to_delayed(optimize_graph=False)
    spans, k0 = [], 0
    for s in x2.chunks[1]:
        spans.append((k0, k0 + s))
        k0 += s
    return blocks, spans


def _from_rows(parts: list[Any], row_chunks: tuple[int, ...]) -> Any:
    da = _da()
    pieces = [da.from_delayed(p, shape=(m,), dtype=np.float64,
                              meta=np.empty((0,), np.float64))
              for p, m in zip(parts, row_chunks)]
    return da.concatenate(pieces) if len(pieces) > 1 else pieces[0]


def _seq_step(acc: np.ndarray | None, blk: np.ndarray, fmt: FormatLike, mode: Mode,
              opts: dict[str, Any], offset: int) -> Any:
    """One chunk of a sequential sum along axis 1, ``acc`` prepended as term 0."""
    if acc is not None:
        blk = np.concatenate([acc[:, None], blk], axis=1)
    else:
        offset += 1       # the first chunk: its term 0 is the array's own
    off: dict[str, Any] = {"offset": offset} if mode == "sr" else {}
    return np.asarray(arith.sum(blk, fmt, mode, axis=1, order="sequential", **opts, **off),
                      dtype=np.float64).reshape(-1)


def _pairwise_part(blk: np.ndarray, fmt: FormatLike, mode: Mode, opts: dict[str, Any]) -> Any:
    # A one-term part moves up the tree unchanged (the NumPy call adds it raw).
    if blk.shape[1] == 1:
        return blk[:, 0]
    return np.asarray(arith.sum(blk, fmt, mode, axis=1, order="pairwise", **opts),
                      dtype=np.float64).reshape(-1)


def _pairwise_join(parts: tuple[np.ndarray, ...], fmt: FormatLike, mode: Mode,
                   opts: dict[str, Any]) -> Any:
    return np.asarray(arith.sum(np.stack(parts, axis=1), fmt, mode, axis=1,
                                order="pairwise", **opts), dtype=np.float64).reshape(-1)


def _whole(blk: np.ndarray, fmt: FormatLike, mode: Mode, order: str,
           opts: dict[str, Any]) -> Any:
    return np.asarray(arith.sum(blk, fmt, mode, axis=1, order=order, **opts),
                      dtype=np.float64).reshape(-1)


def _reduce_rows(x2: Any, fmt: FormatLike, mode: Mode, order: str,
                 opts: dict[str, Any]) -> Any:
    """Sums of the rows of the 2-D Dask array ``x2`` (m, n) in ``order``: a 1-D Dask
    array of m values of ``fmt``."""
    da, delayed = _da(), _delayed()
    m, n = x2.shape
    if n == 0:
        return da.zeros(m, chunks=x2.chunks[0])
    exact = _exact_in_float64(x2.dtype)
    if mode == "sr" and (order != "sequential" or m != 1):
        # The contract fixes the words of one sequential sum only: one call.
        x2 = x2.rechunk((-1, -1))
    elif order == "kahan" or not exact:
        x2 = x2.rechunk({1: -1})
    elif order == "pairwise":
        again = _pow2_chunks(x2.chunks[1], n)
        if again is not None:
            x2 = x2.rechunk({1: again})
    blocks, spans = _rows(x2)
    parts = []
    for i in range(len(x2.chunks[0])):
        live = [(j, sp) for j, sp in enumerate(spans) if sp[1] > sp[0]]
        if len(live) == 1:
            parts.append(delayed(_whole)(blocks[i, live[0][0]], fmt, mode, order, opts))
        elif order == "pairwise":
            ps = [delayed(_pairwise_part)(blocks[i, j], fmt, mode, opts) for j, _ in live]
            parts.append(delayed(_pairwise_join)(tuple(ps), fmt, mode, opts))
        else:
            acc = None
            for j, (k0, _) in live:
                acc = delayed(_seq_step)(acc, blocks[i, j], fmt, mode, opts, k0 - 1)
            parts.append(acc)
    return _from_rows(parts, x2.chunks[0])


def _axes(axis: int | tuple[int, ...] | None, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, tuple) else (axis,)
    return tuple(sorted(int(a) % ndim for a in axes))


def sum(x: DaskLike, fmt: FormatLike, mode: Mode = "rne", *,  # noqa: A001
        axis: int | tuple[int, ...] | None = None, order: str = "pairwise",
        rng: RNGLike = None, subnormals: bool | None = None,
        saturate: bool = False) -> dask.array.Array:
    """`lowprec.sum` of a Dask array (lazy), in the NumPy call's order, bit for bit.

    * ``"sequential"`` chains the chunks of the summed axis in order. Each call
      starts from the previous chunk's sum as its term 0. Under ``"sr"`` its
      ``offset`` is the global index of its first term less one.
    * ``"pairwise"`` sums chunks of 2**k terms and joins their sums pairwise.
      This is the NumPy call's own tree, because every chunk but the last covers
      a whole subtree. Other chunkings of the axis are first rechunked to 2**k
      terms, 2**k the largest power of two not above the largest chunk.
    * ``"kahan"`` takes the axis as one chunk: its compensation is not passed
      between calls.

    Several axes are joined in C order (Dask reshapes, rechunking as it needs).
    Under ``"sr"`` only a single sequential sum is chained. Other "sr" sums run as
    one call on the whole array, since the contract fixes no words for them across
    chunks. Input whose dtype float64 does not hold (64-bit integers, long
    doubles) is summed one call per row.

    Examples
    --------
    >>> import dask.array as da, numpy as np, lowprec.daskarrays as lpd
    >>> ones = da.ones(1000, chunks=300)
    >>> lpd.sum(ones, "bf16").compute(), lpd.sum(ones, "bf16", order="sequential").compute()
    (array(1000.), array(256.))
    >>> lpd.sum(da.ones((2, 5), chunks=2), "fp16", axis=1).compute()
    array([5., 5.])
    """
    x = _as_dask(x)
    opts = _options(mode, rng, subnormals=subnormals, saturate=saturate)
    arith.sum(_sample(x), fmt, mode, axis=axis, order=order, **opts)   # the errors, now
    axes = _axes(axis, x.ndim)
    keep = [i for i in range(x.ndim) if i not in axes]
    shape = tuple(x.shape[i] for i in keep)
    n = math.prod(x.shape[i] for i in axes)
    m = math.prod(shape)
    x2 = x.transpose(keep + list(axes)).reshape(m, n)
    out = _reduce_rows(x2, fmt, mode, order, opts)
    return out.reshape(shape)


def _dot_step(acc: np.ndarray | None, a: np.ndarray, b: np.ndarray, fmt: FormatLike,
              mode: Mode, fused: bool, opts: dict[str, Any]) -> Any:
    """One chunk of a sequential dot: ``acc * 1`` prepended (exact: acc is a value)."""
    if acc is not None:
        a = np.concatenate([acc[:, None], a], axis=1)
        b = np.concatenate([np.ones((b.shape[0], 1)), b], axis=1)
    return np.asarray(arith.dot(a, b, fmt, mode, fused=fused, **opts),
                      dtype=np.float64).reshape(-1)


def dot(a: DaskLike, b: DaskLike, fmt: FormatLike, mode: Mode = "rne", *,
        order: str = "sequential", fused: bool = False,
        rng: RNGLike = None, subnormals: bool | None = None,
        saturate: bool = False) -> dask.array.Array:
    """`lowprec.dot` of Dask arrays (lazy): the last axis contracted, bit for bit.

    Sequential dots (fused too) chain the chunks of the contracted axis. Each call
    starts from the previous partial dot as the term ``acc * 1`` (exact). Pairwise
    and Kahan dots are `mul` then `sum` in that order, as the NumPy call computes
    them. Under ``"sr"`` the dot is one call on the whole arrays, since the
    contract fixes no words for the products across chunks.

    Examples
    --------
    >>> import dask.array as da, lowprec.daskarrays as lpd
    >>> a = da.from_array([1.0, 2.0**-11, 2.0**-11, 2.0**-11], chunks=2)
    >>> lpd.dot(a, da.ones(4, chunks=3), "fp16").compute()
    array(1.)
    """
    da, delayed = _da(), _delayed()
    a, b = _as_dask(a, "a"), _as_dask(b, "b")
    opts = _options(mode, rng, subnormals=subnormals, saturate=saturate)
    arith.dot(_sample(a), _sample(b), fmt, mode, order=order, fused=fused, **opts)
    shape = np.broadcast_shapes(a.shape, b.shape)
    a, b = da.broadcast_to(a, shape), da.broadcast_to(b, shape)
    n = shape[-1]
    m = math.prod(shape[:-1])
    a2, b2 = a.reshape(m, n), b.reshape(m, n)
    if order != "sequential" and mode != "sr":
        prods = mul(a2, b2, fmt, mode, **opts)
        return _reduce_rows(prods, fmt, mode, order, opts).reshape(shape[:-1])
    if mode == "sr" or not (_exact_in_float64(a2.dtype) and _exact_in_float64(b2.dtype)):
        a2 = a2.rechunk((-1, -1) if mode == "sr" else {1: -1})
    b2 = b2.rechunk(a2.chunks)
    if n == 0:
        return da.zeros(shape[:-1])
    ab, spans = _rows(a2)
    bb = b2.to_delayed(optimize_graph=False)
    parts = []
    for i in range(len(a2.chunks[0])):
        acc = None
        for j, (k0, k1) in enumerate(spans):
            if k1 > k0:
                acc = delayed(_dot_step)(acc, ab[i, j], bb[i, j], fmt, mode, fused, opts)
        parts.append(acc)
    return _from_rows(parts, a2.chunks[0]).reshape(shape[:-1])


def _cumsum_step(prev: np.ndarray | None, blk: np.ndarray, ax: int, fmt: FormatLike,
                 mode: Mode, opts: dict[str, Any], offset: int) -> Any:
    if prev is None:   # the first chunk: its term 0 is the array's own, at offset + 1
        first: dict[str, Any] = {"offset": offset + 1} if mode == "sr" else {}
        return arith.cumsum(blk, fmt, mode, axis=ax, **opts, **first)
    off: dict[str, Any] = {"offset": offset} if mode == "sr" else {}
    last = np.take(prev, [-1], axis=ax)
    out = arith.cumsum(np.concatenate([last, blk], axis=ax), fmt, mode, axis=ax,
                       **opts, **off)
    return np.take(out, np.arange(1, out.shape[ax]), axis=ax)


def cumsum(x: DaskLike, fmt: FormatLike, mode: Mode = "rne", *, axis: int | None = -1,
           rng: RNGLike = None, subnormals: bool | None = None,
           saturate: bool = False) -> dask.array.Array:
    """`lowprec.cumsum` of a Dask array (lazy): sequential prefix sums, bit for bit.

    The chunks along ``axis`` are chained in order. Each call starts from the last
    prefix sum of the previous chunk, prepended as term 0 and dropped from the
    result. Under ``"sr"`` its ``offset`` is the global index of the chunk's first
    term less one. ``axis=None`` flattens first. Under ``"sr"`` only a 1-D prefix
    sum is chained. Several prefix sums at once are one call on the whole array.

    Examples
    --------
    >>> import dask.array as da, lowprec.daskarrays as lpd
    >>> lpd.cumsum(da.from_array([256.0, 1.0, 1.0, 2.0], chunks=1), "bf16").compute()
    array([256., 256., 256., 258.])
    """
    da, delayed = _da(), _delayed()
    x = _as_dask(x)
    opts = _options(mode, rng, subnormals=subnormals, saturate=saturate)
    arith.cumsum(_sample(x), fmt, mode, axis=axis, **opts)
    if axis is None:
        x, ax = x.reshape(-1), 0
    else:
        ax = int(axis) % x.ndim
    if (mode == "sr" and x.ndim > 1) or not _exact_in_float64(x.dtype):
        x = x.rechunk({ax: -1} if mode != "sr" else -1)
    blocks = x.to_delayed(optimize_graph=False)
    out = np.empty(blocks.shape, dtype=object)
    done = np.empty(blocks.shape, dtype=object)
    starts = np.cumsum((0,) + x.chunks[ax])
    for idx in np.ndindex(*blocks.shape):
        shape = tuple(x.chunks[d][idx[d]] for d in range(x.ndim))
        if idx[ax] == 0 or shape[ax] == 0:
            prev = None
        else:
            k = idx[ax] - 1
            while k >= 0 and x.chunks[ax][k] == 0:
                k -= 1
            prev = None if k < 0 else done[idx[:ax] + (k,) + idx[ax + 1:]]
        offset = int(starts[idx[ax]]) - 1
        d = delayed(_cumsum_step)(prev, blocks[idx], ax, fmt, mode, opts, offset) \
            if shape[ax] else delayed(np.zeros)(shape)
        done[idx] = d
        out[idx] = da.from_delayed(d, shape=shape, dtype=np.float64,
                                   meta=np.empty((0,) * x.ndim, np.float64))
    result: Any = da.block(out.tolist()) if x.ndim else out[()]
    return result


# -- matrix products ------------------------------------------------------------------

def k_multiple(model: ModelLike, in_fmt: FormatLike,
               b_fmt: FormatLike | None = None) -> int | None:
    """The multiple every chunk of K but the last needs for `matmul` to chain ``model``.

    With such chunks the chained result is bit for bit the NumPy call's. None means
    the model takes K in one chunk only.

    * Block-FMA models chain whole blocks (``block``). The ``mma_split`` models
      split their 32 products by k mod 4, so they chain 32, twice their block.
    * Instruction models chain whole groups, or promotion intervals.
    * The ``"fp32"`` and ``"fp16"`` accumulations chain any chunk (1).
    * ``"exact"`` (one rounding of the whole sum) and the multi-pass models (each
      pass over all of K) cannot be chained: None.

    Examples
    --------
    >>> k_multiple("h100", "bf16"), k_multiple("h100", "e4m3"), k_multiple("h100-mma", "e4m3")
    (16, 32, 32)
    >>> k_multiple("fp32", "fp16"), k_multiple("exact", "fp16")
    (1, None)
    """
    spec = resolve_model(model)
    fmt = _format(in_fmt)
    if isinstance(spec, Accumulating):
        return None if spec.accumulator is None else 1
    if isinstance(spec, TensorCoreModel):
        p = spec.for_format(fmt)
        return p.block * (2 if p.mma_split else 1)
    if isinstance(spec, MatrixUnit):
        fb = fmt if b_fmt is None else _format(b_fmt)
        ins = spec.mixed(fmt, fb) or spec.for_format(fmt)
        return ins.promote_every or ins.block
    return None


def _mm_step(acc: np.ndarray | None, a: np.ndarray, b: np.ndarray, model: Any,
             in_fmt: Any, out_fmt: Format) -> Any:
    return np.asarray(_matmul(a, b, model=model, c=acc, in_fmt=in_fmt, out_fmt=out_fmt),
                      dtype=np.float64)


def _round_c(c: np.ndarray, fmt: Format) -> Any:
    return np.asarray(_round(c, fmt), dtype=np.float64)


def _dtype_fmt(x: Any) -> Format | None:
    if x.dtype.kind == "f" and x.dtype.itemsize >= 8:
        return None
    try:
        return _format(x.dtype)
    except (TypeError, ValueError):
        return None


def matmul(a: DaskLike, b: DaskLike, *, model: ModelLike = "fp32",
           c: DaskLike | None = None, in_fmt: FormatLike | None = None,
           out_fmt: FormatLike | None = None) -> dask.array.Array:
    """`lowprec.matmul` of 2-D Dask arrays (lazy), bit for bit the NumPy call.

    Output blocks are independent. Along K, chunk j's product is ``lp.matmul(a_j,
    b_j, model=model, c=acc)``. Here ``acc`` is the previous chunk's result, or the
    user's ``c`` for the first. Every chaining model accumulates this way. The
    block FMAs of a Tensor Core model pass their result, rounded to the output
    format, as the next block's ``c``.

    So every chunk of K but the last must be a multiple of `k_multiple`, the
    model's block for its input format. Otherwise the call raises `ValueError`.
    The ``"exact"`` and multi-pass models need K in one chunk. ``"fp32"`` and
    ``"fp16"`` with another ``out_fmt`` chain in their accumulator. They round once
    into ``out_fmt`` at the end, as the NumPy call does. ``b``'s K chunks are made
    ``a``'s (rechunked), and ``c`` is broadcast to (M, N) in the result's chunks.

    Examples
    --------
    >>> import dask.array as da, numpy as np, lowprec.daskarrays as lpd
    >>> a = da.from_array(np.ones((2, 32), np.float16), chunks=(1, 16))
    >>> b = da.from_array(np.full((32, 2), 2.0**-11, np.float16), chunks=(16, 1))
    >>> lpd.matmul(a, b, model="h100", c=np.ones((2, 2))).compute()
    array([[1.015625, 1.015625],
           [1.015625, 1.015625]])
    >>> lpd.matmul(a.rechunk((1, 10)), b, model="h100")
    Traceback (most recent call last):
    ...
    ValueError: matmul: model 'h100' with FP16 inputs chains blocks of 16: every chunk of K ...
    """
    da, delayed = _da(), _delayed()
    a, b = _as_dask(a, "a"), _as_dask(b, "b")
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"matmul takes 2-D Dask arrays, got shapes {a.shape} and {b.shape}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: a's K ({a.shape[1]}) differs from b's ({b.shape[0]})")
    spec = resolve_model(model)
    # The options' and formats' errors, now, from the NumPy call on one element.
    _matmul(np.zeros((1, 1), a.dtype), np.zeros((1, 1), b.dtype), model=model,
            c=None if c is None else _sample(c), in_fmt=in_fmt, out_fmt=out_fmt)
    fa = _format(in_fmt) if in_fmt is not None else _dtype_fmt(a)
    fb = _format(in_fmt) if in_fmt is not None else _dtype_fmt(b)
    out = spec.default_out_format() if out_fmt is None else _format(out_fmt)
    M, N = a.shape[0], b.shape[1]
    ks = [s for s in a.chunks[1] if s]
    mult = k_multiple(spec, fa, fb) if fa is not None else None
    name = getattr(spec, "name", None) or type(spec).__name__
    if len(ks) > 1:
        if mult is None:
            raise ValueError(f"matmul: model {name!r} rounds once over all of K and cannot "
                             f"be chained across chunks of K; got chunks {a.chunks[1]}: "
                             "rechunk a's axis 1 into one chunk, a.rechunk({1: -1})")
        if any(s % mult for s in ks[:-1]):
            raise ValueError(f"matmul: model {name!r} with {fa.name if fa else fa} inputs "
                             f"chains blocks of {mult}: every chunk of K but the last must "
                             f"be a multiple of {mult}, got chunks {a.chunks[1]}; rechunk "
                             f"a's axis 1, e.g. a.rechunk({{1: {mult}}})")
    b = b.rechunk((a.chunks[1], b.chunks[1]))
    inter = out
    if isinstance(spec, Accumulating) and spec.accumulator is not None:
        inter = spec.accumulator
    cb = None
    if c is not None:
        cd = da.broadcast_to(_as_dask(c, "c"), (M, N)).rechunk((a.chunks[0], b.chunks[1]))
        if inter != out:      # the NumPy call rounds c into out_fmt first
            cd = da.map_blocks(_round_c, cd, out, dtype=np.float64)
        cb = cd.to_delayed(optimize_graph=False)
    ab = a.to_delayed(optimize_graph=False)
    bb = b.to_delayed(optimize_graph=False)
    rows = []
    for i, mi in enumerate(a.chunks[0]):
        row = []
        for j, nj in enumerate(b.chunks[1]):
            acc = None if cb is None else cb[i, j]
            live = [k for k, s in enumerate(a.chunks[1]) if s] or [0]
            for k in live:
                acc = delayed(_mm_step)(acc, ab[i, k], bb[k, j], model, in_fmt,
                                        out if k == live[-1] and inter == out else inter)
            if inter != out:
                acc = delayed(_round_c)(acc, out)
            row.append(da.from_delayed(acc, shape=(mi, nj), dtype=np.float64,
                                       meta=np.empty((0, 0), np.float64)))
        rows.append(row)
    return da.block(rows)


# -- lazy Tensors ---------------------------------------------------------------------

def _wrap(v: np.ndarray, fmt: Format) -> Tensor:
    # The block holds values of fmt already (a LazyTensor's): wrapped, not rounded again.
    return Tensor(np.asarray(v, dtype=np.float64), fmt)


def _tensor_op(op: Callable[..., Any], fmt: Format, fmts: tuple[Format | None, ...],
               ctx: dict[str, Any]) -> Callable[..., Any]:
    def fn(*blocks: Any) -> Any:
        ts = [_wrap(v, f) if f is not None else v for v, f in zip(blocks, fmts)]
        with context(**ctx):
            return np.asarray(op(*ts).values, dtype=np.float64)
    return fn


class LazyTensor:
    """A `lowprec.Tensor` not computed yet: a Dask array of float64 values of ``fmt``.

    Operators ``+ - * /``, unary ``-``, `abs` and `sqrt` run the Tensor operations
    block by block. They use the `lowprec.context` active when the operation is
    written, captured then. Under ``"sr"`` each operation draws one seed from the
    context's generator, as an eager Tensor operation does. The elements then draw
    words by their global indices. ``.sum()`` is `sum` (pairwise), and ``@`` is
    `matmul` with the context's model. ``.compute()`` gives the `lowprec.Tensor`.

    Examples
    --------
    >>> import dask.array as da, lowprec as lp, lowprec.daskarrays as lpd
    >>> t = lpd.tensor(da.from_array([1.0, 2.0, 3.0], chunks=2), "bf16")
    >>> u = (t + 2.0**-9) * t
    >>> u
    LazyTensor(shape=(3,), fmt=BF16)
    >>> u.compute()
    Tensor([1.0, 4.0, 9.0], fmt=BF16)
    """

    __array_priority__ = 100
    __lowprec_defer__ = True    # a Tensor's operators hand ``tensor + lazy`` to __radd__

    def __init__(self, values: Any, fmt: FormatLike):
        self.values = values
        self.fmt = _format(fmt)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.values.shape)

    @property
    def ndim(self) -> int:
        return int(self.values.ndim)

    def __repr__(self) -> str:
        return f"LazyTensor(shape={self.shape}, fmt={self.fmt})"

    def compute(self, **kwargs: Any) -> Tensor:
        """The `lowprec.Tensor` (``kwargs`` go to Dask's ``compute``)."""
        return _wrap(self.values.compute(**kwargs), self.fmt)

    def _apply(self, op: Callable[..., Any], name: str, *others: Any) -> LazyTensor:
        ctx = get_context()
        operands = (self,) + others
        # An eager Tensor keeps its format (promoted as eager Tensors promote), its
        # values one chunk: read as a plain array, they would be rounded into ours.
        fmts = tuple(o.fmt if isinstance(o, (LazyTensor, Tensor)) else None for o in operands)
        vals = tuple(o.values if isinstance(o, (LazyTensor, Tensor)) else o for o in operands)
        with context(mode="rne"):                     # the result format, now
            probe = op(*(_wrap(np.zeros(1), f) if f is not None else
                         (o if np.ndim(o) == 0 else np.zeros(1))
                         for f, o in zip(fmts, vals)))
        fmt = probe.fmt
        if ctx.mode == "sr" and name in _SR_OPS:
            # One seed per operation from the context's generator, as eager Tensors draw.
            seed = resolve_seed(ctx.rng)
            args = [v for v in vals]
            kw = dict(rng=seed, subnormals=ctx.subnormals, saturate=ctx.saturate)
            return LazyTensor(_SR_OPS[name](*args, fmt, "sr", **kw), fmt)
        kw2: dict[str, Any] = dict(mode=ctx.mode, matmul=ctx.matmul, saturate=ctx.saturate)
        if ctx.subnormals is not None:
            kw2["subnormals"] = ctx.subnormals
        fn = _tensor_op(op, fmt, fmts, kw2)
        return LazyTensor(_map(fn, vals, "rne", np.float64, name), fmt)

    def __add__(self, other: Any) -> LazyTensor:
        return self._apply(operator.add, "add", other)

    def __radd__(self, other: Any) -> LazyTensor:
        return self._apply(lambda x, y: y + x, "radd", other)

    def __sub__(self, other: Any) -> LazyTensor:
        return self._apply(operator.sub, "sub", other)

    def __rsub__(self, other: Any) -> LazyTensor:
        return self._apply(lambda x, y: y - x, "rsub", other)

    def __mul__(self, other: Any) -> LazyTensor:
        return self._apply(operator.mul, "mul", other)

    def __rmul__(self, other: Any) -> LazyTensor:
        return self._apply(lambda x, y: y * x, "rmul", other)

    def __truediv__(self, other: Any) -> LazyTensor:
        return self._apply(operator.truediv, "div", other)

    def __rtruediv__(self, other: Any) -> LazyTensor:
        return self._apply(lambda x, y: y / x, "rdiv", other)

    def __neg__(self) -> LazyTensor:
        return self._apply(operator.neg, "neg")

    def __abs__(self) -> LazyTensor:
        return self._apply(abs, "abs")

    def sqrt(self) -> LazyTensor:
        """The correctly rounded square root, as ``np.sqrt(t)``."""
        return self._apply(np.sqrt, "sqrt")

    def sum(self, axis: int | tuple[int, ...] | None = None) -> LazyTensor:
        """`sum` in the Tensor's format, pairwise, under the context's mode."""
        ctx = get_context()
        return LazyTensor(sum(self.values, self.fmt, ctx.mode, axis=axis, **ctx.kwargs()),
                          self.fmt)

    def __matmul__(self, other: LazyTensor | Tensor) -> LazyTensor:
        if isinstance(other, Tensor):     # an eager operand keeps its format, as eager
            other = LazyTensor(_da().from_array(other.values, chunks=-1), other.fmt)
        if not isinstance(other, LazyTensor):
            return NotImplemented
        spec = resolve_model(get_context().matmul)
        in_fmt = self.fmt if self.fmt == other.fmt else FP32
        out = spec.default_out_format()
        return LazyTensor(matmul(self.values, other.values, model=spec, in_fmt=in_fmt,
                                 out_fmt=out), out)


    def __rmatmul__(self, other: Tensor) -> LazyTensor:
        if not isinstance(other, Tensor):
            return NotImplemented
        return LazyTensor(_da().from_array(other.values, chunks=-1), other.fmt) @ self


def _swap(op: Callable[..., Any]) -> Callable[..., Any]:
    return lambda a, b, fmt, mode, **kw: op(b, a, fmt, mode, **kw)


_SR_OPS: dict[str, Callable[..., Any]] = {
    "add": add, "sub": sub, "mul": mul, "div": div, "sqrt": sqrt,
    "radd": _swap(add), "rsub": _swap(sub), "rmul": _swap(mul), "rdiv": _swap(div)}


def tensor(x: DaskLike, fmt: FormatLike, mode: Mode | None = None, *,
           rng: RNGLike = None) -> LazyTensor:
    """``lp.tensor`` of a Dask array: a `LazyTensor` whose values are ``x`` rounded
    into ``fmt`` by `round` (``mode`` and ``rng`` default to the active context).

    Examples
    --------
    >>> import dask.array as da, lowprec.daskarrays as lpd
    >>> lpd.tensor(da.from_array([0.1, 70000.0], chunks=1), "fp16").compute()
    Tensor([0.0999755859375, inf], fmt=FP16)
    """
    ctx = get_context()
    mode = ctx.mode if mode is None else mode
    if rng is None:
        rng = ctx.rng
    return LazyTensor(round(x, fmt, mode, rng=rng, subnormals=ctx.subnormals,
                            saturate=ctx.saturate), fmt)


# The public entry points hand Dask arrays here (`engine.lazy`): lp.round(dask_array)
# is this module's round, and so on.
LAZY.update(round=round, encode=encode, decode=decode, add=add, sub=sub, mul=mul, div=div,
            sqrt=sqrt, fma=fma, sum=sum, dot=dot, cumsum=cumsum, matmul=matmul,
            tensor=tensor)
