"""The suite's optional peers (other libraries used as oracles), imported once, and the
markers that declare them on a test.

``from peers import ml_dtypes, gmpy2`` gives the module, or, when it is not installed, a
`Missing` stand-in whose attributes are stand-ins too, so that a test module still
imports (parameter lists may name ``ml_dtypes.bfloat16``). A test that needs a peer
says so with a marker, pint's way: ``@requires_ml_dtypes``, or for a whole module
``pytestmark = [requires_ml_dtypes, pytest.mark.oracle]``; the marker skips it with a
reason naming the peer when the peer is absent. Every comparison with ml_dtypes or gmpy2
is also marked ``oracle`` (CI runs ``-m oracle`` with the oldest ml_dtypes declared).
"""

from __future__ import annotations

import importlib
import importlib.util

import pytest

__all__ = ["ml_dtypes", "gmpy2", "Missing", "optional", "version_at_least", "np_dtype",
           "requires", "requires_ml_dtypes", "requires_gmpy2", "requires_gfloat",
           "requires_torchao"]


class Missing:
    """Stands in for an optional module (or one of its attributes) that is not installed."""

    def __init__(self, peer: str, path: str | None = None):
        self._peer = peer
        self._path = path or peer

    def __getattr__(self, attr: str) -> Missing:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Missing(self._peer, f"{self._path}.{attr}")

    def __call__(self, *args, **kwargs) -> Missing:
        # A stand-in too, so that a parameter list may call the peer at import; the
        # test's `requires_*` marker skips it.
        return Missing(self._peer, f"{self._path}()")

    def __hash__(self):
        return hash(self._path)

    def __eq__(self, other):
        return isinstance(other, Missing) and other._path == self._path

    def __repr__(self):
        return f"<missing peer {self._peer}: {self._path}>"

    @property
    def reason(self) -> str:
        return f"{self._peer} is not installed (pip install {self._peer}); comparison skipped"


def optional(name: str):
    """The module ``name``, or a `Missing` stand-in when it cannot be imported."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return Missing(name)


def np_dtype(dtype_like):
    """``numpy.dtype(dtype_like)``, or the stand-in itself when its peer is missing."""
    import numpy as np
    return dtype_like if isinstance(dtype_like, Missing) else np.dtype(dtype_like)


def version_at_least(module, version: str) -> bool:
    """Whether ``module.__version__`` is at least ``version`` (numeric components)."""
    def parts(v):
        out = []
        for piece in v.split("."):
            digits = "".join(c for c in piece if c.isdigit()) or "0"
            out.append(int(digits))
            if not piece.isdigit():
                break
        return tuple(out)
    return parts(module.__version__) >= parts(version)


ml_dtypes = optional("ml_dtypes")
gmpy2 = optional("gmpy2")


def requires(*names: str) -> pytest.MarkDecorator:
    """A marker that skips a test, naming the peer, unless every module of ``names``
    is installed."""
    missing = next((n for n in names if importlib.util.find_spec(n) is None), None)
    return pytest.mark.skipif(missing is not None, reason=f"{missing} is not installed "
                              f"(pip install {missing}); comparison skipped")


requires_ml_dtypes = requires("ml_dtypes")
requires_gmpy2 = requires("gmpy2")
requires_gfloat = requires("gfloat")
requires_torchao = requires("torch", "torchao")
