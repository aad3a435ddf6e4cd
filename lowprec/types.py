"""Names for the option types that many signatures share.

- `Mode`: a rounding mode, one of the strings of `lowprec.MODES`.
- `RNGLike`: what an ``rng=`` option takes, a generator, an int seed, or None.

The other shared names live beside the class they name: `lowprec.formats.FormatLike`
and `lowprec.tensorcore.ModelLike`. These are hints for readers and type checkers only.
Each option is still checked at run time (`lowprec.engine.checks`), so a caller without a
type checker gets the same errors. This module imports nothing from lowprec.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

import numpy as np

__all__ = ["Mode", "RNGLike"]

#: A rounding mode, in the order the docs list them (`lowprec.MODES` is this list).
Mode: TypeAlias = Literal["rne", "rna", "rz", "ru", "rd", "ro", "sr"]

#: An ``rng=`` option: a `numpy.random.Generator`, a non-negative int seed, or None.
RNGLike: TypeAlias = np.random.Generator | int | None
