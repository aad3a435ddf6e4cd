"""Discrete Fourier transforms of Tensors (`lowprec.fft`), every real operation
rounded in the Tensor's format.

``np.fft.fft`` and its kin on a Tensor dispatch here. `fft`, `ifft`, `rfft` and
`irfft` compute ``X_k = sum_j x_j w^(jk)`` with ``w = exp(-2 pi i / n)``, or
``exp(+2 pi i / n)`` for the inverses. They follow a documented algorithm. Every
real multiplication, addition, subtraction and division is a rounded
`lowprec.arith` operation in the Tensor's format. It takes the context's mode and
options (`lp.context`) and is vectorised across each stage. This module never
computes a result in float64 and rounds it afterwards.

* Twiddles ``w_k = exp(-2 pi i k / n)``. ``k / n`` is split exactly into a quarter
  turn ``q`` and a rest: ``4 k = q n + r``, in integers. ``cos`` and ``sin`` of
  ``phi = 0.5 * pi * r / n`` (float64, left to right) are NumPy's float64 values.
  Each is rounded once into the format by round-to-nearest-even, whatever the
  context's mode. They form a precomputed table, rounded once but not correctly
  rounded. Each is then turned by ``(-i)^q``, exactly. The twiddles
  ``1, -i, -1, i`` (``r == 0``) are therefore exact. A product by one of them is
  done exactly, as FFT libraries do: a swap and a negation, with no rounding and
  no ``0 * inf``.
* ``n`` a power of two: iterative radix-2 decimation in time. First comes the
  bit-reversal permutation (exact), then ``log2(n)`` stages. A butterfly of a
  stage of span ``m`` takes ``a = x[i]``, ``b = x[i + m/2]`` and
  ``w = w_(j n / m)``. It forms ``t = w * b`` with ``re = wr*br - wi*bi`` and
  ``im = wr*bi + wi*br``. These are four rounded products, one rounded subtraction
  and one rounded addition, not fused. Then come ``a + t`` and ``a - t``, each real
  part rounded.
* Any other ``n``: the direct sum, ``O(n^2)`` work. Each product
  ``w_((j k) mod n) * x_j`` is formed as above. The real parts and the imaginary
  parts of the ``n`` products of each output are then summed pairwise in the
  format. This is `lp.sum`'s ``"pairwise"`` order, as in ``Tensor.sum``.
  The products are formed in blocks of at most ``max(_PRODUCTS, n)``, with
  ``_PRODUCTS`` = 65536. Each takes under 300 bytes in the working arrays (280 measured by
  ``python benchmarks/run.py memory``). So the blocks take under 20 MiB beyond
  the input and the result. A block holds whole rows of the batch where they fit,
  else outputs of one row. Each output's products and sum do not depend on the
  others, so the values are those of one block. Under ``"sr"`` a call of more
  than one block draws one stream per block and operation.
* Scaling, last. Where ``norm`` asks for it as NumPy defines it, each real part
  is divided once, correctly rounded. The divisor is ``n`` (the exact integer) or
  ``sqrt(n)`` (float64's square root). ``"backward"`` scales the inverses.
  ``"forward"`` scales the forward transforms. ``"ortho"`` scales both, by
  ``sqrt(n)``.

lowprec has no complex formats. A transform returns a plain NumPy complex128 array
whose real and imaginary parts are each values of the input's format. `irfft`,
whose result is real, returns a Tensor. Complex input is given as a pair
``(re, im)`` of Tensors of one format, such as the parts of a previous result. A
real Tensor is the pair with ``im = +0``. Plain arrays are refused: their format
would be a guess.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np
from numpy.typing import NDArray

from . import arith, rounding
from .formats import Format
from .tensors import Tensor, get_context

__all__ = ["fft", "ifft", "rfft", "irfft"]

_NORMS = (None, "backward", "ortho", "forward")
#: The direct sum's block: at most ``max(_PRODUCTS, n)`` complex products at a time
#: (under 300 bytes each in its working arrays: under 20 MiB beyond input and result).
_PRODUCTS = 1 << 16
_Pair = tuple[NDArray[np.float64], NDArray[np.float64]]


# -- input -----------------------------------------------------------------------------

def _parts(x: Any, name: str = "x") -> tuple[NDArray[np.float64], NDArray[np.float64], Format]:
    """The real and imaginary values of ``x`` (a Tensor, or a pair of Tensors of one
    format and shape) and its format; `TypeError` for anything else."""
    if isinstance(x, Tensor):
        return x.values, np.zeros(x.shape), x.fmt
    if isinstance(x, (tuple, list)) and len(x) == 2 and all(isinstance(p, Tensor) for p in x):
        re, im = x
        if re.fmt != im.fmt:
            raise TypeError(f"the parts of {name} must have one format, got {re.fmt.name} "
                            f"and {im.fmt.name}: convert one with .astype()")
        if re.shape != im.shape:
            raise ValueError(f"the parts of {name} must have one shape, got {re.shape} "
                             f"and {im.shape}")
        return re.values, im.values, re.fmt
    if np.iscomplexobj(x):
        raise TypeError(f"{name} must be a lowprec.Tensor or a pair of them, got complex "
                        f"{type(x).__name__}: pass its parts, (lp.tensor({name}.real, fmt), "
                        f"lp.tensor({name}.imag, fmt))")
    raise TypeError(f"{name} must be a lowprec.Tensor (its format says where every "
                    f"operation rounds) or a pair (re, im) of them, got "
                    f"{type(x).__name__}: wrap it with lp.tensor({name}, fmt)")


def _check_norm(norm: str | None) -> None:
    if norm not in _NORMS:
        raise ValueError(f'Invalid norm value {norm!r}; should be "backward", "ortho" '
                         f'or "forward".')


def _points(n: Any, default: int, what: str = "FFT data points") -> int:
    n = default if n is None else operator.index(n)
    if n < 1:
        raise ValueError(f"Invalid number of {what} ({n}) specified.")
    return n


def _fit(v: NDArray[np.float64], n: int) -> NDArray[np.float64]:
    """``v`` truncated, or padded with +0, to ``n`` along its last axis (exact)."""
    m = v.shape[-1]
    if n <= m:
        return v[..., :n]
    return np.concatenate([v, np.zeros(v.shape[:-1] + (n - m,))], axis=-1)


def _complex(re: NDArray[np.float64], im: NDArray[np.float64]) -> NDArray[np.complex128]:
    """The parts as one complex128 array, each part copied (``re + 1j * im`` would
    make ``0 * inf`` NaNs)."""
    out = np.empty(re.shape, dtype=np.complex128)
    out.real, out.imag = re, im
    return out


# -- rounded arithmetic ----------------------------------------------------------------

class _Ops:
    """The four rounded operations in one format, with the context's mode and options
    read once per transform."""

    def __init__(self, fmt: Format) -> None:
        ctx = get_context()
        self.fmt, self.mode, self.kwargs = fmt, ctx.mode, ctx.kwargs()

    def add(self, a: Any, b: Any) -> NDArray[np.float64]:
        return np.asarray(arith.add(a, b, self.fmt, self.mode, **self.kwargs))

    def sub(self, a: Any, b: Any) -> NDArray[np.float64]:
        return np.asarray(arith.sub(a, b, self.fmt, self.mode, **self.kwargs))

    def mul(self, a: Any, b: Any) -> NDArray[np.float64]:
        return np.asarray(arith.mul(a, b, self.fmt, self.mode, **self.kwargs))

    def div(self, a: Any, b: float) -> NDArray[np.float64]:
        return np.asarray(arith.div(a, b, self.fmt, self.mode, **self.kwargs))

    def sum(self, a: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(arith.sum(a, self.fmt, self.mode, axis=-1, order="pairwise",
                                    **self.kwargs))


def _twiddles(n: int, fmt: Format, inverse: bool) -> tuple[
        NDArray[np.float64], NDArray[np.float64], NDArray[np.intp], NDArray[np.bool_]]:
    """``w_k`` for ``k < n`` as (re, im) values of ``fmt``, the quarter turns ``e``
    with ``w_k = (-i)^e * w_rest``, and where ``w_k`` is one of ``1, -i, -1, i``."""
    k = np.arange(n)
    q, r = np.divmod(4 * k, n)            # integers: k / n == (q + r / n) / 4 exactly
    phi = 0.5 * np.pi * r / n
    ctx = get_context()
    c = np.asarray(rounding.round(np.cos(phi), fmt, "rne", subnormals=ctx.subnormals))
    s = np.asarray(rounding.round(np.sin(phi), fmt, "rne", subnormals=ctx.subnormals))
    # (c - i s) turned by (-i)^q: negations and swaps, exact.
    wr = np.select([q == 0, q == 1, q == 2], [c, -s, -c], s)
    wi = np.select([q == 0, q == 1, q == 2], [-s, -c, s], c)
    if inverse:
        wi, q = -wi, (-q) % 4             # conjugates: exp(+2 pi i k / n)
    return wr, wi, q, r == 0


def _turn(re: NDArray[np.float64], im: NDArray[np.float64], e: NDArray[np.intp]) -> _Pair:
    """``(-i)^e * (re + i im)``, exact: swaps and negations."""
    return (np.select([e == 0, e == 1, e == 2], [re, im, -re], -im),
            np.select([e == 0, e == 1, e == 2], [im, -re, -im], re))


def _times(w: tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.intp],
                    NDArray[np.bool_]],
           re: NDArray[np.float64], im: NDArray[np.float64], ops: _Ops) -> _Pair:
    """``w * (re + i im)``, ``w``'s arrays of the trailing shape of ``re`` and ``im``:
    quarter turns exact, every other product as four rounded products, a rounded
    subtraction (real part) and a rounded addition (imaginary part)."""
    wr, wi, e, quarter = w
    out_re, out_im = np.empty_like(re), np.empty_like(im)
    out_re[..., quarter], out_im[..., quarter] = _turn(re[..., quarter], im[..., quarter],
                                                       e[quarter])
    g = ~quarter
    xr, xi, cr, ci = re[..., g], im[..., g], wr[g], wi[g]
    out_re[..., g] = ops.sub(ops.mul(cr, xr), ops.mul(ci, xi))
    out_im[..., g] = ops.add(ops.mul(cr, xi), ops.mul(ci, xr))
    return out_re, out_im


def _radix2(re: NDArray[np.float64], im: NDArray[np.float64], w: Any, ops: _Ops) -> _Pair:
    """Iterative radix-2 decimation in time along the last axis (length a power of 2)."""
    n = re.shape[-1]
    levels = n.bit_length() - 1
    k = np.arange(n)
    rev = np.zeros(n, dtype=np.intp)
    for bit in range(levels):
        rev |= ((k >> bit) & 1) << (levels - 1 - bit)
    re, im = re[..., rev], im[..., rev]
    batch = re.shape[:-1]
    m = 2
    while m <= n:
        half = m // 2
        stage = tuple(a[np.arange(half) * (n // m)] for a in w)
        r4, i4 = (v.reshape(batch + (n // m, 2, half)) for v in (re, im))
        ar, ai, br, bi = r4[..., 0, :], i4[..., 0, :], r4[..., 1, :], i4[..., 1, :]
        tr, ti = _times(stage, br, bi, ops)
        re = np.stack([ops.add(ar, tr), ops.sub(ar, tr)], axis=-2).reshape(batch + (n,))
        im = np.stack([ops.add(ai, ti), ops.sub(ai, ti)], axis=-2).reshape(batch + (n,))
        m *= 2
    return re, im


def _direct(re: NDArray[np.float64], im: NDArray[np.float64], w: Any, ops: _Ops) -> _Pair:
    """``X_k = sum_j w_((j k) mod n) x_j`` along the last axis: rounded products, the
    real and imaginary parts summed pairwise in the format.

    In blocks of at most ``max(_PRODUCTS, n)`` products: whole transforms of several
    rows where one row's ``n * n`` fit, else one row and as many outputs as fit. The
    products and the pairwise sum of an output do not depend on the other outputs, so
    the blocks give the unblocked values bit for bit (one block where all fit)."""
    n = re.shape[-1]
    batch = re.shape[:-1]
    re, im = re.reshape(-1, n), im.reshape(-1, n)
    rows = re.shape[0]
    out_re, out_im = np.empty((rows, n)), np.empty((rows, n))
    if n * n <= _PRODUCTS:
        row_step, k_step = max(1, _PRODUCTS // (n * n)), n
    else:
        row_step, k_step = 1, max(1, _PRODUCTS // n)
    j = np.arange(n)
    for k0 in range(0, n, k_step):
        k1 = min(n, k0 + k_step)
        idx = np.outer(np.arange(k0, k1), j) % n            # [k, j]
        table = tuple(a[idx] for a in w)
        for r0 in range(0, rows, row_step):
            r1 = min(rows, r0 + row_step)
            shape = (r1 - r0, k1 - k0, n)
            pr, pi = _times(table, np.broadcast_to(re[r0:r1, None, :], shape),
                            np.broadcast_to(im[r0:r1, None, :], shape), ops)
            out_re[r0:r1, k0:k1], out_im[r0:r1, k0:k1] = ops.sum(pr), ops.sum(pi)
    return out_re.reshape(batch + (n,)), out_im.reshape(batch + (n,))


def _transform(re: NDArray[np.float64], im: NDArray[np.float64], fmt: Format,
               inverse: bool, norm: str | None, keep: int | None = None) -> _Pair:
    """The (inverse) DFT along the last axis, the first ``keep`` outputs scaled."""
    n = re.shape[-1]
    ops = _Ops(fmt)
    w = _twiddles(n, fmt, inverse)
    # A power of two (n & (n - 1) == 0) takes the radix-2 path; n == 1 has no stage.
    re, im = (_radix2 if n & (n - 1) == 0 else _direct)(re, im, w, ops)
    if keep is not None:
        re, im = re[..., :keep], im[..., :keep]
    scaled = {"backward": inverse, None: inverse, "forward": not inverse, "ortho": True}
    if scaled[norm]:
        d = math.sqrt(n) if norm == "ortho" else float(n)   # n < 2**53: exact in float64
        re, im = ops.div(re, d), ops.div(im, d)
    return np.ascontiguousarray(re), np.ascontiguousarray(im)


def _run(x: Any, n: Any, axis: int, norm: str | None, inverse: bool,
         half: bool) -> NDArray[np.complex128]:
    re, im, fmt = _parts(x)
    _check_norm(norm)
    axis = np.lib.array_utils.normalize_axis_index(operator.index(axis), re.ndim)
    n = _points(n, re.shape[axis])
    re, im = (_fit(np.moveaxis(v, axis, -1), n) for v in (re, im))
    re, im = _transform(re, im, fmt, inverse, norm, n // 2 + 1 if half else None)
    return np.moveaxis(_complex(re, im), -1, axis)


# -- public functions ------------------------------------------------------------------

def fft(x: Tensor | tuple[Tensor, Tensor], n: int | None = None, axis: int = -1,
        norm: str | None = None) -> NDArray[np.complex128]:
    """The discrete Fourier transform of ``x`` along ``axis``, every real operation
    rounded in ``x``'s format (as `numpy.fft.fft`).

    Radix-2 decimation in time when ``n`` is a power of two, the direct sum with
    pairwise sums otherwise. Twiddles are rounded once (RNE) from float64, and
    quarter turns are exact. The module docstring gives the order of every operation.

    Parameters
    ----------
    x : Tensor or (Tensor, Tensor)
        Real input, or complex input as its real and imaginary parts (one format,
        one shape). Plain arrays raise `TypeError`: wrap them with `lowprec.tensor`.
    n : int, optional
        Length of the transform: the input is truncated, or padded with zeros, as
        NumPy does. By default the length along ``axis``.
    axis : int
        The axis transformed (moved, exactly).
    norm : {None, "backward", "ortho", "forward"}
        NumPy's: ``"forward"`` divides by ``n``, ``"ortho"`` by ``sqrt(n)``, each
        part by one rounded division, after the transform.

    Returns
    -------
    numpy.ndarray of complex128
        Its real and imaginary parts are each values of ``x``'s format (lowprec has
        no complex formats).

    Examples
    --------
    >>> import numpy as np, lowprec as lp
    >>> x = lp.tensor([1.0, 2.0, 3.0, 4.0], "fp16")
    >>> lp.fft.fft(x)
    array([10.+0.j, -2.+2.j, -2.+0.j, -2.-2.j])
    >>> X = np.fft.fft(lp.tensor([0.1, 0.2, 0.3], "bf16"))
    >>> X.real
    array([ 0.6015625 , -0.15039062, -0.15039062])
    >>> X.imag
    array([ 0.        ,  0.08789062, -0.08789062])
    >>> np.allclose(lp.fft.fft(lp.tensor([0.1, 0.2, 0.3], "fp64")), np.fft.fft([0.1, 0.2, 0.3]))
    True
    """
    return _run(x, n, axis, norm, inverse=False, half=False)


def ifft(x: Tensor | tuple[Tensor, Tensor], n: int | None = None, axis: int = -1,
         norm: str | None = None) -> NDArray[np.complex128]:
    """The inverse discrete Fourier transform of ``x`` along ``axis``, every real
    operation rounded in ``x``'s format (as `numpy.fft.ifft`).

    `fft`'s algorithm with conjugate twiddles. Then, for ``norm=None`` or
    ``"backward"``, each part is divided by the integer ``n``, one rounding each.
    ``"ortho"`` divides by ``sqrt(n)``, ``"forward"`` not at all.

    Parameters
    ----------
    x : Tensor or (Tensor, Tensor)
        Real input, or complex input as its parts: ``(lp.tensor(X.real, fmt),
        lp.tensor(X.imag, fmt))`` for a result ``X`` of `fft` (exact).
    n, axis, norm
        As in `fft`.

    Returns
    -------
    numpy.ndarray of complex128
        Real and imaginary parts each values of ``x``'s format.

    Examples
    --------
    >>> import lowprec as lp
    >>> X = lp.fft.fft(lp.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "bf16"))
    >>> back = lp.fft.ifft((lp.tensor(X.real, "bf16"), lp.tensor(X.imag, "bf16")))
    >>> back.real
    array([1., 2., 3., 4., 5., 6.])
    """
    return _run(x, n, axis, norm, inverse=True, half=False)


def rfft(x: Tensor, n: int | None = None, axis: int = -1,
         norm: str | None = None) -> NDArray[np.complex128]:
    """The first ``n // 2 + 1`` outputs of `fft` of the real ``x`` (as
    `numpy.fft.rfft`).

    The operations are `fft`'s, then the scaling of ``norm``. The full transform
    is computed. The outputs left out are conjugates of these up to rounding.

    Parameters
    ----------
    x : Tensor
        Real input.
    n, axis, norm
        As in `fft`.

    Returns
    -------
    numpy.ndarray of complex128
        Real and imaginary parts each values of ``x``'s format.

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.fft.rfft(lp.tensor([1.0, 0.0, -1.0, 0.0, 0.5], "fp8_e4m3"))
    array([0.5    +0.j   , 1.875  +1.j   , 0.28125-0.625j])
    """
    if not isinstance(x, Tensor):
        _parts(x)    # raises for what is not a Tensor or a pair of them
        raise TypeError("rfft takes a real lowprec.Tensor, got a pair (re, im): use fft "
                        "for complex input")
    return _run(x, n, axis, norm, inverse=False, half=True)


def irfft(x: Tensor | tuple[Tensor, Tensor], n: int | None = None, axis: int = -1,
          norm: str | None = None) -> Tensor:
    """The inverse of `rfft` (as `numpy.fft.irfft`): a real Tensor of length ``n``.

    The input is truncated or padded with zeros to ``n // 2 + 1`` points. It is
    extended to ``n`` by conjugate symmetry, ``X_(n-k) = conj(X_k)`` (exact). As
    NumPy does, the imaginary parts of ``X_0`` (and of ``X_(n/2)`` for even ``n``)
    are taken as zero. Then come `ifft`'s operations, whose real parts are the
    result.

    Parameters
    ----------
    x : Tensor or (Tensor, Tensor)
        The half spectrum, real or as its parts.
    n : int, optional
        Length of the output. By default ``2 * (m - 1)`` for ``m`` input points.
    axis, norm
        As in `fft`.

    Returns
    -------
    Tensor
        Of ``x``'s format.

    Examples
    --------
    >>> import lowprec as lp
    >>> X = lp.fft.rfft(lp.tensor([1.0, 2.0, 3.0, 4.0], "fp16"))
    >>> lp.fft.irfft((lp.tensor(X.real, "fp16"), lp.tensor(X.imag, "fp16")))
    Tensor([1.0, 2.0, 3.0, 4.0], fmt=FP16)
    """
    re, im, fmt = _parts(x)
    _check_norm(norm)
    axis = np.lib.array_utils.normalize_axis_index(operator.index(axis), re.ndim)
    n = _points(n, 2 * (re.shape[axis] - 1), "data points")
    h = n // 2 + 1
    re, im = (_fit(np.moveaxis(v, axis, -1), h) for v in (re, im))
    im = im.copy()
    im[..., 0] = 0.0
    if n % 2 == 0:
        im[..., -1] = 0.0
    back = np.arange(n - h, 0, -1)      # X_(n-k) = conj(X_k), k = n - h, ..., 1
    re = np.concatenate([re, re[..., back]], axis=-1)
    im = np.concatenate([im, -im[..., back]], axis=-1)
    out, _ = _transform(re, im, fmt, True, norm)
    return Tensor(np.ascontiguousarray(np.moveaxis(out, -1, axis)), fmt)


# -- NumPy dispatch --------------------------------------------------------------------

def _no_out(name: str, out: Any) -> None:
    if out is not None:
        raise TypeError(f"lowprec.Tensor does not support out= in numpy.fft.{name}: "
                        f"results are new arrays")


def _np_fft(a, n=None, axis=-1, norm=None, out=None):
    _no_out("fft", out)
    return fft(a, n, axis, norm)


def _np_ifft(a, n=None, axis=-1, norm=None, out=None):
    _no_out("ifft", out)
    return ifft(a, n, axis, norm)


def _np_rfft(a, n=None, axis=-1, norm=None, out=None):
    _no_out("rfft", out)
    return rfft(a, n, axis, norm)


def _np_irfft(a, n=None, axis=-1, norm=None, out=None):
    _no_out("irfft", out)
    return irfft(a, n, axis, norm)


def _shift(fn):
    def handler(x, axes=None):
        return Tensor(np.asarray(fn(x.values, axes)), x.fmt)
    return handler


_ORDER = ("twiddles: float64 cos/sin of the first-quadrant angle rounded once (RNE), "
          "quarter turns exact; n a power of 2: radix-2 decimation in time, bit reversal "
          "then log2(n) stages of butterflies t = w*b (4 rounded products, a rounded "
          "subtraction and addition), a + t, a - t each part rounded; else the direct sum, "
          "rounded products summed pairwise in the format")
_OUT = "; a complex128 array whose real and imaginary parts are values of the format"

#: (numpy.fft name, handler, class, order): what this module registers.
_NUMPY = (
    ("fft", _np_fft, "composed",
     "lowprec.fft.fft: " + _ORDER + "; norm's division (n or sqrt(n)) last, rounded" + _OUT),
    ("ifft", _np_ifft, "composed",
     "lowprec.fft.ifft: conjugate twiddles, as fft; then each part divided by n (norm "
     "'backward') or sqrt(n) ('ortho'), rounded" + _OUT),
    ("rfft", _np_rfft, "composed",
     "lowprec.fft.rfft: the first n//2 + 1 outputs of fft (the full transform computed)"
     + _OUT),
    ("irfft", _np_irfft, "composed",
     "lowprec.fft.irfft: the half spectrum extended by conjugate symmetry (exact), as "
     "ifft; the real parts, a Tensor of the format"),
    ("fftshift", _shift(np.fft.fftshift), "exact", "values moved, not changed; the format kept"),
    ("ifftshift", _shift(np.fft.ifftshift), "exact",
     "values moved, not changed; the format kept"),
)


def _register() -> None:
    from .tensors.core import implements
    for name, fn, kind, order in _NUMPY:
        implements(getattr(np.fft, name), kind, order)(fn)


_register()
