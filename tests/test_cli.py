"""The lowprec command: tables come from the formats, errors are one line + status 2."""

import csv
import io
import re
import shutil
import subprocess
import sys
from decimal import Decimal

import numpy as np
import pytest

import lowprec as lp
from lowprec.teaching.cli import main
from lowprec.testing import reference_round
from peers import ml_dtypes


def run(*args):
    return subprocess.run([sys.executable, "-m", "lowprec.teaching.cli", *args],
                          capture_output=True, text=True)


def call(args, capsys):
    """(status, stdout, stderr) of the command run in this process."""
    try:
        status = main(args)
    except SystemExit as exc:          # argparse exits on --help and on bad arguments
        status = exc.code
    out, err = capsys.readouterr()
    return status, out, err


ORACLES = {"FP64": np.float64, "FP32": np.float32, "FP16": np.float16,
           "BF16": ml_dtypes.bfloat16, "FP8_E4M3": ml_dtypes.float8_e4m3fn,
           "FP8_E5M2": ml_dtypes.float8_e5m2, "FP8_E4M3FNUZ": ml_dtypes.float8_e4m3fnuz,
           "FP8_E5M2FNUZ": ml_dtypes.float8_e5m2fnuz, "FP6_E2M3": ml_dtypes.float6_e2m3fn,
           "FP6_E3M2": ml_dtypes.float6_e3m2fn, "FP4_E2M1": ml_dtypes.float4_e2m1fn}


def finfo(name):
    dt = ORACLES[name]
    return np.finfo(dt) if dt in (np.float16, np.float32, np.float64) else ml_dtypes.finfo(dt)


def cells_by_format(out):
    """{format: {column: cell}} of a table whose columns are two or more spaces apart."""
    lines = out.splitlines()
    header = re.split(r"\s{2,}", lines[0].strip())
    assert set(lines[1]) <= {"-", " "}
    rows = [re.split(r"\s{2,}", ln.strip()) for ln in lines[2:]]
    assert all(len(r) == len(header) for r in rows)
    return {r[0]: dict(zip(header, r)) for r in rows}


def test_formats_table_lists_every_named_format(capsys):
    assert main(["formats"]) == 0
    table = cells_by_format(capsys.readouterr().out)
    assert list(table) == list(lp.NAMED_FORMATS)
    for name in ORACLES:
        fi, cells = finfo(name), table[name]
        assert int(cells["bits"]) == fi.bits and int(cells["exp"]) == fi.nexp
        assert int(cells["mant"]) == fi.nmant
        # Four digits past 10**6, cut toward zero: never more than the largest value.
        assert float(fi.max) * (1 - 1e-3) < float(cells["max"]) <= float(fi.max)
        # Exact powers of two: 2**k.
        assert 2.0 ** int(cells["min normal"][3:]) == float(fi.smallest_normal)
        assert 2.0 ** int(cells["min subnormal"][3:]) == float(fi.smallest_subnormal)


def test_formats_table_fits_100_columns_and_wide_shows_every_column(capsys):
    # It was 174 columns wide.
    main(["formats"])
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= 100
    main(["formats", "--wide"])
    wide = capsys.readouterr().out
    table = cells_by_format(wide)
    assert list(table) == list(lp.NAMED_FORMATS)
    for name in ORACLES:
        fi, cells = finfo(name), table[name]
        assert float(cells["eps"]) == pytest.approx(float(fi.eps), rel=1e-5)
        assert float(cells["unit roundoff"]) == pytest.approx(float(fi.eps) / 2, rel=1e-5)
        assert float(cells["smallest subnormal"]) == pytest.approx(
            float(fi.smallest_subnormal), rel=1e-5)
        with np.errstate(over="ignore"):
            has_inf = bool(np.isinf(fi.max * np.array(2, fi.dtype)))
        assert cells["inf"] == ("yes" if has_inf else "no")
    main(["formats", "--format", "csv"])
    csv_header = capsys.readouterr().out.splitlines()[0].split(",")
    assert csv_header == re.split(r"\s{2,}", wide.splitlines()[0].strip())


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
    from lowprec.teaching.cli import format_table
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
    assert max(map(len, out.splitlines())) <= 100
    assert "K = 64" not in out.replace("K=64", "")


def test_demo_plot_writes_pngs(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    assert main(["demo", "--max-k", "16", "--plot", str(tmp_path / "figs")]) == 0
    for name in ("dot_error_vs_k.png", "matmul_error_vs_k.png"):
        data = (tmp_path / "figs" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_demo_without_matplotlib():
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from lowprec.teaching.cli import main\n"
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


@pytest.mark.slow
def test_plain_import_and_demo_do_not_load_matplotlib():
    code = ("import sys\nfrom lowprec.teaching.cli import main\nmain(['demo', '--max-k', '16'])\n"
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
    (["explain", "nan", "--fmt", "fp4", "--mode", "sr", "--seed", "x"],
     "--seed must be a non-negative integer, got 'x'"),
    (["explain", "0.3", "--fmt", "fp4", "--mode", "sr", "--seed", "-1"],
     "--seed must be a non-negative integer, got '-1'"),
    (["round", "0.3", "--fmt", "fp4", "--mode", "sr", "--seed", "-1"],
     "--seed must be a non-negative integer, got '-1'"),
    (["round", "0.3", "--fmt", "fp4", "--seed", "1.5"],
     "--seed must be a non-negative integer, got '1.5'"),
    (["round", "-1e", "--fmt", "fp16"], "not a number: '-1e'"),
    (["round", "--fmt", "fp16", "-1e"], "not a number: '-1e'"),
    (["explain", "-1e", "--fmt", "fp16"], "not a number: '-1e'"),
    (["explain", "--fmt", "fp16", "-1e"], "not a number: '-1e'"),
    (["explain", "--fmt", "bf16", "1e+"], "not a number: '1e+'"),
    (["explain", "--fmt", "fp16", "-1x", "0.1"], "unknown format '-1x'"),
    (["explain", "--fmt", "fp16", "0.1", "0.2"], "explain takes one VALUE, got 0.1, 0.2"),
    (["explain", "--fmt", "fp16"], "required: VALUE"),
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
    p = subprocess.Popen([sys.executable, "-m", "lowprec.teaching.cli", "formats"],
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


def test_version(capsys):
    status, out, _ = call(["--version"], capsys)
    assert status == 0 and out == f"lowprec {lp.__version__}\n"
    r = run("--version")
    assert r.returncode == 0 and r.stdout == f"lowprec {lp.__version__}\n"


def test_version_through_the_console_script():
    # The entry point pyproject.toml declares (lowprec = lowprec.teaching.cli:main), if installed.
    from pathlib import Path
    script = shutil.which("lowprec", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("the lowprec console script is not installed next to this Python")
    r = subprocess.run([script, "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == f"lowprec {lp.__version__}\n"


@pytest.mark.parametrize("args", [
    ["explain", "--fmt", "bf16", "0.1"], ["explain", "0.1", "--fmt", "bf16"],
    ["explain", "--fmt", "bf16", "--mode", "rne", "0.1"],
])
def test_explain_value_before_or_after_fmt(args, capsys):
    # `explain --fmt bf16 0.1` used to read 0.1 as a format.
    assert main(args) == 0
    out = capsys.readouterr().out
    pattern = format(int(np.array(0.1).astype(ml_dtypes.bfloat16).view(np.uint16)), "016b")
    assert out.startswith("0.1 in BF16, rne") and out.count(" in ") == 1
    assert f"{pattern[0]} | {pattern[1:9]} | {pattern[9:]}" in out


def test_explain_several_formats_then_a_negative_value(capsys):
    assert main(["explain", "--fmt", "fp16", "e4m3", "-0.1"]) == 0
    heads = [ln for ln in capsys.readouterr().out.splitlines() if " in " in ln]
    assert heads == ["-0.1 in FP16, rne (round to nearest, ties to even)",
                     "-0.1 in FP8_E4M3, rne (round to nearest, ties to even)"]


@pytest.mark.parametrize("text", ["-1e-3", "-inf", "-0.5", "-.5", "-1E2", "-NaN", "-1"])
@pytest.mark.parametrize("before", [True, False])
def test_negative_numbers_are_values_anywhere(text, before, capsys):
    args = ["round", text, "--fmt", "fp16"] if before else ["round", "--fmt", "fp16", text]
    assert main(args) == 0
    x = float(text)
    with np.errstate(over="ignore"):
        expected = float(np.float16(x))         # NumPy's cast: one RNE rounding
    assert capsys.readouterr().out == f"{x!r} -> {expected!r}\n"
    assert main(["explain", "--fmt", "fp16", text] if before else ["explain", text]) == 0
    assert capsys.readouterr().out.startswith(f"{x!r} in ")


@pytest.mark.parametrize("mode", ["RZ", "Rz", "RU", " rd", "RNE", "RO", "RNA"])
def test_mode_names_are_case_insensitive(mode, capsys):
    # Format and model names were; mode names were not ("invalid choice: 'RZ'").
    assert main(["round", "0.1", "1e-6", "--fmt", "fp16", "--mode", mode]) == 0
    m = mode.strip().lower()
    assert capsys.readouterr().out.splitlines() == [
        f"{x!r} -> {reference_round(x, lp.FP16, m)!r}" for x in (0.1, 1e-6)]
    assert main(["explain", "0.1", "--fmt", "bf16", "--mode", mode]) == 0
    assert f"0.1 in BF16, {m} " in capsys.readouterr().out


def test_round_seed_for_stochastic_rounding(capsys):
    # `round` had no --seed (always rng=0).
    values = ["0.3"] * 64
    outs = {}
    for seed in ("7", "8"):
        assert main(["round", *values, "--fmt", "fp4", "--mode", "SR", "--seed", seed]) == 0
        outs[seed] = [float(ln.split(" -> ")[1]) for ln in capsys.readouterr().out.splitlines()]
        again = main(["round", *values, "--fmt", "fp4", "--mode", "sr", "--seed", seed])
        assert again == 0 and [float(ln.split(" -> ")[1]) for ln in
                               capsys.readouterr().out.splitlines()] == outs[seed]
        # Same seed, same draws as the library's lp.round(..., rng=seed).
        assert outs[seed] == lp.round(np.full(64, 0.3), "fp4", "sr", rng=int(seed)).tolist()
        down, up = reference_round(0.3, lp.FP4_E2M1, "rd"), reference_round(0.3, lp.FP4_E2M1, "ru")
        assert set(outs[seed]) == {down, up}
    assert outs["7"] != outs["8"]


def test_python_dash_m_lowprec_is_the_command():
    # `python -m lowprec` runs the same main as the console script (lowprec/__main__.py).
    r = subprocess.run([sys.executable, "-m", "lowprec", "--version"], capture_output=True,
                       text=True)
    assert r.returncode == 0 and r.stdout == f"lowprec {lp.__version__}\n"
    r = subprocess.run([sys.executable, "-m", "lowprec", "explain", "--fmt", "bf16", "0.1"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "0.10009765625" in r.stdout
