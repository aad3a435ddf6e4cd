"""Discrete Fourier transforms of Tensors (`lowprec.fft`), every real operation
rounded in the Tensor's format; ``np.fft.fft`` and its kin on a Tensor dispatch here.
"""

from __future__ import annotations

__all__: list[str] = []
