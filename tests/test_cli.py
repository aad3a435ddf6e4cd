"""The lowprec command: tables come from the formats, errors are one line + status 2."""

import subprocess
import sys

import pytest

import lowprec as lp
from lowprec.cli import main


def run(*args):
    return subprocess.run([sys.executable, "-m", "lowprec.cli", *args],
                          capture_output=True, text=True)


def test_formats_table_lists_every_named_format(capsys):
    assert main(["formats"]) == 0
    out = capsys.readouterr().out
    for fmt in lp.NAMED_FORMATS.values():
        line = next(ln for ln in out.splitlines() if ln.startswith(fmt.name + " "))
        cells = [c.strip() for c in line.split("|")]
        assert int(cells[2]) == fmt.bits and int(cells[3]) == fmt.exponent_bits
        assert int(cells[4]) == fmt.mantissa_bits and int(cells[5]) == fmt.bias
        assert float(cells[8]) == pytest.approx(fmt.max, rel=1e-5)


@pytest.mark.parametrize("style, marker", [("markdown", "| FP16 "), ("csv", "FP16,float16,16")])
def test_formats_styles(capsys, style, marker):
    main(["formats", "--format", style])
    assert marker in capsys.readouterr().out


def test_round_command(capsys):
    main(["round", "0.1", "1e6", "--fmt", "fp16", "--mode", "rz"])
    out = capsys.readouterr().out.splitlines()
    assert out == [f"0.1 -> {float(lp.round(0.1, 'fp16', 'rz'))!r}", "1000000.0 -> 65504.0"]


@pytest.mark.parametrize("args, needle", [
    (["round", "abc", "--fmt", "fp16"], "not a number"),
    (["round", "1", "--fmt", "fp7"], "unknown format"),
    (["round", "1", "--fmt", "fp16", "--mode", "up"], "invalid choice"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_input_is_one_line_and_status_2(args, needle):
    r = run(*args)
    assert r.returncode == 2
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_help_on_every_subcommand():
    for sub in ("formats", "round"):
        r = run(sub, "--help")
        assert r.returncode == 0 and "usage: lowprec" in r.stdout
