"""Suite-wide rules that a test cannot carry on itself.

- A doctest (docstrings, docs/*.md, README.md) that imports an optional peer is skipped,
  naming it, when that peer is not installed, and marked ``oracle`` when the peer is
  ml_dtypes or gmpy2. Tests declare their peers themselves (``tests/peers.py``:
  ``@requires_ml_dtypes``, ``pytest.mark.oracle``).
- The notebooks run under nbmake when it is installed, each marked ``notebook``.
"""

from __future__ import annotations

import importlib.util
import re

import pytest

#: The notebooks' Jupytext sources are not test or doctest modules (importing one would run
#: the notebook): nbmake runs their paired notebooks/*.ipynb, and tests/test_notebooks.py
#: checks that each .ipynb is its .py's cells.
collect_ignore_glob = ["notebooks/*.py"]

#: Libraries the suite or the docs use as oracles or for pictures; none is required.
PEERS = ("ml_dtypes", "gmpy2", "matplotlib", "torch", "gfloat", "pychop")
_IMPORT = re.compile(r"^\s*(?:import|from)\s+(" + "|".join(PEERS) + r")\b", re.M)
#: The peers whose answers doctests compare against: such a doctest is marked `oracle`.
ORACLES = ("ml_dtypes", "gmpy2")


def pytest_configure(config):
    # `python -m pytest` runs the notebooks where nbmake is installed (the test extra has
    # it), and `--collect-only` or `-p no:nbmake` work without it.
    if config.pluginmanager.hasplugin("nbmake"):
        config.option.nbmake = True


# tryfirst: the markers are on the items before `-m` deselects by them.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        dtest = getattr(item, "dtest", None)
        if dtest is not None:
            source = "\n".join(example.source for example in dtest.examples)
            imported = set(_IMPORT.findall(source))
            absent = sorted(m for m in imported if importlib.util.find_spec(m) is None)
            if absent:
                item.add_marker(pytest.mark.skip(
                    reason=f"{', '.join(absent)} not installed; doctest skipped"))
            if imported & set(ORACLES):
                item.add_marker(pytest.mark.oracle)
        elif item.path.suffix == ".ipynb":      # nbmake's notebook items
            item.add_marker(pytest.mark.notebook)
