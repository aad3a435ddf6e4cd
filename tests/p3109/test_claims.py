"""lowprec.p3109.conformance and the four YAML declarations of §4.6."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp
from helpers import assert_bits
from lowprec import p3109
from oracles import p3109 as oracle
from peers import optional, requires

yaml = optional("yaml")


@requires("yaml")
def test_the_four_files_parse_and_declare_what_project_accepts():
    texts = p3109.declarations()
    assert sorted(texts) == ["Configurations.yaml", "Constraints.yaml", "Kappas.yaml",
                             "Profiles.yaml"]
    docs = {name: yaml.safe_load(text) for name, text in texts.items()}
    for doc in docs.values():
        meta = doc["Metadata"]
        assert meta["conformance"] == "IEEE SA P3109" and meta["version"] == "4.0.0"
        assert meta["implementation"]["version"] == lp.__version__
    # No approximations and no constrained functions: the README's "Empty: true" form.
    assert set(docs["Kappas.yaml"]) == set(docs["Constraints.yaml"]) == {"Metadata", "Empty"}
    config = docs["Configurations.yaml"]["Reference"]
    names = [r if isinstance(r, str) else next(iter(r)) for r in
             config["Projections"]["Rounding"]]
    assert names == list(p3109.ROUNDINGS)
    assert config["Projections"]["Saturation"] == list(p3109.SATURATIONS)
    for rounding in p3109.ROUNDINGS:            # every declared rounding runs, N = 1 and 52
        for n in ((1, 52) if rounding in p3109.STOCHASTIC else (None,)):
            bits = None if n is None else 0
            for sat in p3109.SATURATIONS:
                p3109.project(1.3, "binary8p3se", rounding, sat, random_bits=bits, n_bits=n)
    for ext in config["IEEE754"]:
        lp.format(ext)
    listed = [f for f in docs["Profiles.yaml"]["Reference"]["formats"] if "(" not in f]
    assert {lp.format(f).name for f in listed} >= set(p3109.F8 + p3109.F4 + p3109.FS)


def test_conformance_rows():
    rows = p3109.conformance()
    assert all(isinstance(r, p3109.Requirement) for r in rows)
    assert {r.operation for r in rows if r.provided} >= {"formats F8, F4", "formats FX"}
    assert all(r.by for r in rows)


@pytest.mark.parametrize("sat", oracle.SATURATIONS)
def test_convert_between_f4_and_f8_as_the_report_defines(sat):
    # Convert<f, fr, rho>(x) = ωProject_fr(ωDecode_f(x)) (§4.9.1), every code of f.
    for f in p3109.F4 + p3109.F8:
        pf = p3109.parameters(f)
        x = lp.decode(np.arange(2 ** pf[0]), f)
        for fr in p3109.F4 + p3109.F8:
            pr = p3109.parameters(fr)
            args = (pr[0], pr[1], pr[2], pr[3] == "extended")
            want = [oracle.project(*args, v, "NearestTiesToEven", sat) for v in
                    oracle.value_table(pf[0], pf[1], pf[2], pf[3] == "extended")]
            assert_bits(p3109.project(x, fr, "NearestTiesToEven", sat), want, f, fr)


def test_convert_from_binary32_reads_minus_zero_and_every_nan_as_the_report_does():
    codes = np.array([0x80000000, 0x7FC00001, 0xFFFFFFFF, 0x3F800000], np.uint32)
    x = lp.decode(codes, lp.FP32)
    assert_bits(p3109.project(x, "binary8p3se"), [0, 0x80, 0x80, 0x40])
    assert oracle.project(8, 3, True, True, Fraction(1)) == 0x40
    assert math.isnan(float(lp.decode(0x80, "binary8p3se")))


def test_provided_rows_name_functions_that_exist():
    import re
    for row in p3109.conformance():
        if row.provided:
            for name in re.findall(r"lowprec\.p3109\.(\w+)", row.by):
                assert hasattr(p3109, name), (row.operation, name)
    scaled = [r for r in p3109.conformance() if r.operation.startswith("ScaledAdd")]
    assert scaled and all(r.provided for r in scaled)
