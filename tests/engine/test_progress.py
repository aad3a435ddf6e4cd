"""Progress bars of long calls (lowprec/engine/progress.py): shown when asked, or when
the estimated rest is long; never changing a result, never on stdout."""

import sys

import numpy as np
import pytest

import lowprec as lp
from lowprec.engine import progress as prog


def product(**kw):
    rng = np.random.default_rng(0)
    a = lp.tensor(rng.standard_normal((300, 64)), "fp16")
    b = lp.tensor(rng.standard_normal((64, 300)), "fp16")
    return lp.matmul(a, b, model="h100", **kw).values


def test_a_bar_when_asked_and_the_same_result(capsys):
    pytest.importorskip("tqdm")
    plain = product(progress=False)
    assert capsys.readouterr() == ("", "")
    shown = product(progress=True)
    out, err = capsys.readouterr()
    assert out == "" and "lp.matmul (h100)" in err
    assert np.array_equal(plain, shown)


def test_the_default_shows_a_bar_only_for_long_work(capsys, monkeypatch):
    pytest.importorskip("tqdm")
    product()                                  # a fraction of a second: no bar
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(prog, "SECONDS", 0.0)  # now every call is "long"
    monkeypatch.setattr("lowprec.tensorcore.driver.MEMORY_BOUND", 2**20)   # many chunks
    product()
    assert "lp.matmul" in capsys.readouterr().err
    monkeypatch.setenv(prog.ENV, "0")
    product()
    assert capsys.readouterr().err == ""


def test_training_steps(capsys):
    pytest.importorskip("tqdm")
    data = lp.amp.blobs(16, 2, 2, seed=0)
    lp.amp.train(lp.nn.mlp([2, 4, 2], rng=0), data, "bf16", 3, progress=True)
    assert "lp.amp.train" in capsys.readouterr().err
    with pytest.raises(TypeError, match="progress must be True, False or None"):
        lp.amp.train(lp.nn.mlp([2, 4, 2], rng=0), data, "bf16", 3, progress="yes")


def test_without_tqdm(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    with pytest.raises(ImportError, match=r"lowprec\[progress\]"):
        product(progress=True)
    monkeypatch.setattr(prog, "SECONDS", 0.0)
    product()                                  # the default: silently no bar
    assert capsys.readouterr() == ("", "")


def test_bad_values_and_the_environment(monkeypatch, capsys):
    with pytest.raises(TypeError, match="progress must be"):
        product(progress=1)
    pytest.importorskip("tqdm")
    monkeypatch.setenv(prog.ENV, "1")          # on for every call, short ones too
    product()
    assert "lp.matmul" in capsys.readouterr().err
    assert product(progress=False) is not None and capsys.readouterr().err == ""
