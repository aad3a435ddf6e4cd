"""The lowprec command: tables come from the formats, errors are one line + status 2."""

import csv
import io
import subprocess
import sys
from decimal import Decimal

from peers import ml_dtypes
import numpy as np
import pytest

import lowprec as lp
from lowprec.cli import main


def run(*args):
    return subprocess.run([sys.executable, "-m", "lowprec.cli", *args],
                          capture_output=True, text=True)


def call(args, capsys):
    """(status, stdout, stderr) of the command run in this process."""
    try:
        status = main(args)
    except SystemExit as exc:          # argparse exits on --help and on bad arguments
        status = exc.code
    out, err = capsys.readouterr()
    return status, out, err


def test_formats_table_lists_every_named_format(capsys):
    assert main(["formats"]) == 0
    out = capsys.readouterr().out
    for fmt in lp.NAMED_FORMATS.values():
        line = next(ln for ln in out.splitlines() if ln.startswith(fmt.name + " "))
        cells = [c.strip() for c in line.split("|")]
        assert int(cells[2]) == fmt.bits and int(cells[3]) == fmt.exponent_bits
        assert int(cells[4]) == fmt.mantissa_bits and int(cells[5]) == fmt.bias
        assert float(cells[8]) == pytest.approx(fmt.max, rel=1e-5)


def test_formats_with_names_prints_each_parameter_table(capsys):
    # str(fmt) is the name now; its table is fmt.table(), printed by `formats NAME`.
    assert main(["formats", "bf16", "E4M3"]) == 0
    out = capsys.readouterr().out
    assert out == lp.BF16.table() + "\n\n" + lp.FP8_E4M3.table() + "\n"
    rows = dict(ln.split("  ", 1) for ln in out.split("\n\n")[0].splitlines())
    fi = ml_dtypes.finfo(ml_dtypes.bfloat16)
    assert float(rows["max"]) == float(fi.max)
    assert float(rows["smallest subnormal"]) == float(fi.smallest_subnormal)
    main(["formats", "fp16", "fp4", "--format", "csv"])
    assert [ln.split(",")[0] for ln in capsys.readouterr().out.splitlines()] == [
        "format", "FP16", "FP4_E2M1"]


def dtype_of(name):
    """The NumPy or ml_dtypes type of that name, or None (the oracle: the libraries)."""
    return getattr(ml_dtypes, name, None) or getattr(np, name, None)


def test_every_dtype_name_shown_exists(capsys):
    # TF32's row used to show float19_e8m10, which is no dtype and lp.format refused.
    from lowprec.cli import format_table
    fmts = list(lp.NAMED_FORMATS.values()) + [
        lp.format(n) for n in ("float8_e4m3", "float8_e3m4", "float8_e4m3b11fnuz")]
    rows = list(csv.reader(io.StringIO(format_table("csv", fmts))))
    assert rows[0][1] == "dtype"
    for fmt, row in zip(fmts, rows[1:]):
        shown = row[1]
        main(["formats", str(fmt) if fmt.name else shown])
        in_table = dict(ln.split("  ", 1) for ln in capsys.readouterr().out.splitlines())
        assert in_table["dtype"].strip() == shown
        if dtype_of(fmt.dtype_name) is None:
            assert shown == "-", fmt
            continue
        assert shown == fmt.dtype_name and lp.format(shown) == fmt
        assert lp.format(np.dtype(dtype_of(shown))) == fmt
    assert rows[1 + fmts.index(lp.TF32)][1] == "-"
    assert [row[0] for row in rows[1:]] == [str(f) for f in fmts]


@pytest.mark.parametrize("style, marker", [("markdown", "| FP16 "), ("csv", "FP16,float16,16")])
def test_formats_styles(capsys, style, marker):
    main(["formats", "--format", style])
    assert marker in capsys.readouterr().out


def test_round_command(capsys):
    main(["round", "0.1", "1e6", "--fmt", "fp16", "--mode", "rz"])
    out = capsys.readouterr().out.splitlines()
    assert out == [f"0.1 -> {float(lp.round(0.1, 'fp16', 'rz'))!r}", "1000000.0 -> 65504.0"]


def test_round_takes_negative_numbers_in_any_notation(capsys):
    assert main(["round", "-1e-8", "-inf", "-.5", "--fmt", "fp16"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["-1e-08 -> -0.0", "-inf -> -inf", "-0.5 -> -0.5"]


def test_explain_acceptance_bf16_one_tenth():
    r = run("explain", "0.1", "--fmt", "bf16")
    assert r.returncode == 0 and r.stderr == ""
    # The oracle: ml_dtypes' bit pattern of bfloat16(0.1), split by hand.
    pattern = format(int(np.array(0.1).astype(ml_dtypes.bfloat16).view(np.uint16)), "016b")
    sign, exponent, mantissa = pattern[0], pattern[1:9], pattern[9:]
    assert (sign, exponent, mantissa) == ("0", "01111011", "1001101")
    assert f"{sign} | {exponent} | {mantissa}" in r.stdout
    assert "0.10009765625" in r.stdout
    assert "sign        0 (+)" in r.stdout
    assert "neighbours  0.099609375 < 0.10009765625 < 0.1005859375" in r.stdout
    assert "flags       inexact" in r.stdout


def test_explain_formats_and_modes(capsys):
    assert main(["explain", "0.1", "--fmt", "fp16", "--fmt", "e4m3", "e5m2"]) == 0
    out = capsys.readouterr().out
    assert [ln.split(" in ")[1].split(",")[0] for ln in out.splitlines()
            if ln.startswith("0.1 in ")] == ["FP16", "FP8_E4M3", "FP8_E5M2"]
    main(["explain", "0.1"])
    out = capsys.readouterr().out
    assert out.count("0.1 in ") == 6 and "0.1 in TF32" in out
    main(["explain", "1e-8", "--fmt", "fp16", "--mode", "ru"])
    out = capsys.readouterr().out
    # 1e-8 rounded up is FP16's smallest subnormal (NumPy's finfo), in exact decimal.
    tiny = format(Decimal(float(np.finfo(np.float16).smallest_subnormal)), "f")
    assert f"value       +0.0009765625 * 2**-14 = {tiny} (exact)" in out
    assert "exponent    00000 = 0: subnormal" in out and "flags       inexact, underflow" in out
    main(["explain", "-inf", "--fmt", "fp16"])
    assert "bits           1 | 11111 | 0000000000   = 0xfc00" in capsys.readouterr().out


def test_explain_sr_is_reproducible(capsys):
    outs = []
    for _ in range(2):
        main(["explain", "0.3", "--fmt", "fp4", "--mode", "sr", "--seed", "3"])
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and "P(up) = 0.6" in outs[0]


def test_demo_tables_and_progress(capsys):
    assert main(["demo", "--max-k", "64"]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "FP8_E4M3" in out and "float8_e4m3fn" in out        # the formats table
    assert out.count("inputs | model |     K=16 |     K=64") == 2
    for fmt in ("FP32", "FP16", "BF16"):
        for model in ("exact", "fp32", "fp16", "v100", "a100", "h100"):
            assert any(ln.split("|")[:2] == [f"{fmt}".ljust(6) + " ", f" {model}".ljust(7)]
                       for ln in out.splitlines()), (fmt, model)
    assert "K = 64, FP16 inputs ... " in captured.err  # progress goes to stderr
    assert "K = 64" not in out.replace("K=64", "")


def test_demo_plot_writes_pngs(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    assert main(["demo", "--max-k", "16", "--plot", str(tmp_path / "figs")]) == 0
    for name in ("dot_error_vs_k.png", "matmul_error_vs_k.png"):
        data = (tmp_path / "figs" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_without_matplotlib():
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from lowprec.cli import main\n"
            "status = main(['demo', '--max-k', '16'])\n"
            "assert status == 0 and 'matplotlib' not in sys.modules or "
            "sys.modules['matplotlib'] is None\n"
            "sys.exit(main(['demo', '--max-k', '16', '--plot', 'figs']))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "inputs | model" in r.stdout
    # The hint used to be pip install 'lowprec[plot]', and lowprec is on no index:
    # the extra as pyproject.toml declares it, installed from the checkout.
    assert r.stderr.strip().splitlines()[-1] == (
        'lowprec: error: --plot needs matplotlib: pip install -e ".[plot]" in the lowprec '
        'checkout (or pip install matplotlib)')
    tomllib = pytest.importorskip("tomllib")      # Python 3.11+
    from pathlib import Path
    pyproject = Path(lp.__file__).resolve().parent.parent / "pyproject.toml"
    if pyproject.exists():                         # a checkout, as the hint says
        extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
        assert any(dep.startswith("matplotlib") for dep in extras["plot"])


def test_plain_import_and_demo_do_not_load_matplotlib():
    code = ("import sys\nfrom lowprec.cli import main\nmain(['demo', '--max-k', '16'])\n"
            "assert 'matplotlib' not in sys.modules")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("args, needle", [
    (["round", "abc", "--fmt", "fp16"], "not a number"),
    (["round", "1", "--fmt", "fp7"], "unknown format"),
    (["round", "1", "--fmt", "fp16", "--mode", "up"], "invalid choice"),
    (["frobnicate"], "invalid choice"),
    (["explain", "abc"], "not a number"),
    (["explain", "0.1", "--fmt", "bf17"], "unknown format"),
    (["explain", "0.1", "--mode", "nearest"], "invalid choice"),
    (["explain"], "required"),
    (["explain", "nan", "--fmt", "fp4", "--mode", "sr", "--seed", "x"], "invalid int"),
    (["demo", "--max-k", "3"], "--max-k must be in"),
    (["demo", "--max-k", "many"], "not an integer"),
    (["formats", "--format", "html"], "invalid choice"),
    (["formats", "fp7"], "unknown format 'fp7'"),
])
def test_bad_input_is_one_line_and_status_2(args, needle, capsys):
    status, out, err = call(args, capsys)
    assert status == 2 and out == ""
    assert needle in err and err.startswith("lowprec: error: ")
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("args", [["explain", "0.1x"], ["round", "1", "--fmt", "e9m9"]])
def test_bad_input_from_the_shell_has_no_traceback(args):
    r = run(*args)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_help_on_every_subcommand(capsys):
    for sub in ("formats", "explain", "round", "demo"):
        status, out, _ = call([sub, "--help"], capsys)
        assert status == 0 and f"usage: lowprec {sub}" in out
    r = run("--help")
    assert r.returncode == 0
    assert all(sub in r.stdout for sub in ("formats", "explain", "round", "demo"))


def test_demo_plot_into_a_file_is_one_line(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    blocker = tmp_path / "file"
    blocker.write_text("")
    status, _, err = call(["demo", "--max-k", "16", "--plot", str(blocker)], capsys)
    assert status == 2 and err.strip().splitlines() == [
        f"lowprec: error: [Errno 17] File exists: '{blocker}'"]


def test_a_closed_pipe_is_not_an_error_message():
    p = subprocess.Popen([sys.executable, "-m", "lowprec.cli", "formats"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()                      # the reader leaves before anything is written
    err = p.stderr.read().decode()
    assert p.wait() == 1 and err == ""


def test_demo_prints_the_amp_comparison_when_amp_offers_one(capsys, monkeypatch):
    import importlib
    import types
    fake = types.ModuleType("lowprec.amp")
    fake.demo = lambda: "policy | final loss\nfp16-mixed | 0.1"
    real_find_spec = importlib.util.find_spec
    monkeypatch.setitem(sys.modules, "lowprec.amp", fake)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: (
        object() if name == "lowprec.amp" else real_find_spec(name, *a)))
    assert main(["demo", "--max-k", "16"]) == 0
    out = capsys.readouterr().out
    assert "== Mixed-precision training ==\n\npolicy | final loss\nfp16-mixed | 0.1" in out
