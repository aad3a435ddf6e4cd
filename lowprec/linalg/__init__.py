"""Dense linear algebra on Tensors, every operation rounded in the Tensor's format.

`lu` (partial pivoting, unblocked or blocked through `lowprec.matmul`), `cholesky`,
`qr` (Householder), `solve_triangular`, `solve`, `inv`, `det`, `lstsq`, `norm`, and
`refine`, mixed-precision iterative refinement with a verdict (LU-IR and GMRES-IR, by
`gmres`), and `randsvd`, test matrices of a chosen condition number. Each algorithm is
the textbook one with its order of operations written in its docstring, so that a result can be
checked bit for bit against a reference that follows the same order. This module
never computes a value of a result in float64 and rounds it afterwards: every
multiplication, subtraction, division and square root is a rounded Tensor
operation (the context's mode and options), every sum is `Tensor.sum` (pairwise,
in the format unless said otherwise) and every blocked update is one `lowprec.matmul`.
Only pivot choices (comparisons, exact) and `refine`'s error measurements (a
diagnostic, in float64, never fed back) read the values directly; the quantities
that need an SVD or an eigendecomposition (`norm`'s matrix ``ord=2``, ``-2``,
``"nuc"``, `numpy.linalg.lstsq`'s singular values and rank, and np.linalg's `eigh`,
`eigvalsh`, `eig`, `eigvals`, `svd`, `svdvals`, `pinv`, `cond` with p None/2/-2) and
`slogdet`'s logarithm are the one exception, evaluated in float64 and rounded once
into the format, and said so where they are documented; `matrix_rank` counts with the
format's eps in NumPy's tolerance, and `eig` refuses complex eigenvalues.
Stacks (``ndim > 2``) of `solve`, `inv`, `det`, `slogdet`, `cholesky` and `qr` are
looped over, each matrix factored on its own in C order of the leading indices.
"""

from . import numpy_linalg  # noqa: F401 - registers the np.linalg handlers
from .core import LinAlgError
from .factor import cholesky, lu, qr
from .gallery import randsvd
from .krylov import gmres
from .norms import norm
from .refinement import Refinement, Step, refine
from .solvers import det, inv, lstsq, matrix_power, multi_dot, slogdet, solve, solve_triangular

__all__ = ["lu", "cholesky", "qr", "solve_triangular", "solve", "inv", "det", "slogdet",
           "lstsq", "norm", "matrix_power", "multi_dot", "refine", "Refinement", "Step",
           "gmres", "randsvd", "LinAlgError"]
