"""The notebooks are built from their Jupytext sources and committed without outputs.

Each ``notebooks/NAME.py`` (percent format) is the source of ``notebooks/NAME.ipynb``,
which the suite runs with nbmake. These tests fail when an ``.ipynb`` is out of date
with its ``.py`` (cell types and sources, metadata ignored), when one of the pair is
missing, or when a notebook was committed with outputs. The fix: edit the ``.py``, run
``jupytext --sync notebooks/*.py`` and commit both (notebooks/README.md). Without
jupytext the comparison is skipped, naming it.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from peers import optional

jupytext = optional("jupytext")

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[1] / "notebooks"
SOURCES = sorted(NOTEBOOKS.glob("*.py"))
BUILT = sorted(NOTEBOOKS.glob("*.ipynb"))
FIX = "edit the .py, then run `jupytext --sync notebooks/*.py` and commit both"


def _cells(path):
    """(cell type, source) of every cell of the notebook or Jupytext source at ``path``."""
    return [(cell.cell_type, cell.source) for cell in jupytext.read(path).cells]


def test_every_source_has_its_notebook_and_every_notebook_its_source():
    assert SOURCES, f"no Jupytext sources in {NOTEBOOKS}"
    sources = {p.stem for p in SOURCES}
    built = {p.stem for p in BUILT}
    assert not sources - built, f"no .ipynb for {sorted(sources - built)}: {FIX}"
    assert not built - sources, f"no .py source for {sorted(built - sources)}"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_notebook_is_its_source(source):
    built = source.with_suffix(".ipynb")
    if not built.exists():
        pytest.fail(f"{built.name} is missing: {FIX}")
    want, got = _cells(source), _cells(built)
    for i, (w, g) in enumerate(zip(want, got)):
        assert g == w, f"{built.name}, cell {i}, is not the source's: {FIX}"
    assert len(got) == len(want), (
        f"{built.name} has {len(got)} cells, {source.name} {len(want)}: {FIX}")


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_source_is_paired_with_its_notebook(source):
    # The header `jupytext: formats: ipynb,py:percent` pairs the two, in Jupyter too.
    formats = jupytext.read(source).metadata.get("jupytext", {}).get("formats")
    assert formats == "ipynb,py:percent", f"{source.name}: Jupytext header formats {formats!r}"


@pytest.mark.parametrize("built", BUILT, ids=lambda p: p.stem)
def test_notebook_is_committed_without_outputs(built):
    cells = json.loads(built.read_text(encoding="utf-8"))["cells"]
    ran = [i for i, cell in enumerate(cells) if cell["cell_type"] == "code"
           and (cell.get("outputs") or cell.get("execution_count") is not None)]
    assert not ran, (f"{built.name}: cells {ran} have outputs; build it afresh, without "
                     f"them: `jupytext --to ipynb notebooks/{built.stem}.py` (or `git "
                     f"checkout notebooks/{built.name}`); to explore a notebook, run a copy "
                     f"in scratch/ (notebooks/README.md)")
