"""The lowprec command: tables come from the formats, errors are one line + status 2."""

import csv
import io
import math
import re
import shutil
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import lowprec as lp
from helpers import DATA
from lowprec.teaching.cli import main
from lowprec.testing import reference_round
from peers import ml_dtypes, requires_ml_dtypes


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


@requires_ml_dtypes
@pytest.mark.oracle
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


@requires_ml_dtypes
@pytest.mark.oracle
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


@requires_ml_dtypes
@pytest.mark.oracle
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


@requires_ml_dtypes
@pytest.mark.oracle
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


@requires_ml_dtypes
@pytest.mark.oracle
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


@requires_ml_dtypes
@pytest.mark.oracle
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


@requires_ml_dtypes
@pytest.mark.oracle
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


# -- decode, encode, values -------------------------------------------------------------

def table_rows(out):
    """[{column: cell}] of an aligned table (header, rule of dashes, rows), read by the
    header's column positions; checks every cell starts where its header does."""
    lines = out.rstrip("\n").splitlines()
    header = lines[0]
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    names = header.split()
    assert lines[1].split() == ["-" * len(n) if len(n) >= len(c) else c
                                for n, c in zip(names, lines[1].split())]
    rows = []
    for ln in lines[2:]:
        cells = {}
        for i, (name, a) in enumerate(zip(names, starts)):
            b = starts[i + 1] if i + 1 < len(starts) else None
            cell = ln[a:b]
            assert a == 0 or ln[a - 1:a] in ("", " "), (ln, name)
            assert not cell or cell[0] != " " or not cell.strip(), (ln, name)
            cells[name] = cell.strip()
        rows.append(cells)
    return rows


def exact_value(row):
    """The exact value a row shows: the 'exactly' cell (decimal, 2**k or n * 2**k) where
    there is one, else the value's repr, which is then exact."""
    text = row["exactly"] or row["value"]
    m = re.fullmatch(r"(-?)(?:(\d+) \* )?2\*\*(-?\d+)", text)
    if m:
        sign, n, k = m.groups()
        return (-1 if sign else 1) * int(n or 1) * Fraction(2) ** int(k)
    return Fraction(Decimal(text))


def oracle_class(v, smallest_normal):
    if np.isnan(v):
        return "NaN"
    if np.isinf(v):
        return "inf"
    if v == 0:
        return "zero"
    return "subnormal" if abs(v) < smallest_normal else "normal"


def check_pattern_rows(rows, codes, oracle_values, bits, nmant, smallest_normal):
    """Each row against the peer's value of its code and the fields cut from its bits."""
    assert len(rows) == len(codes)
    nexp = bits - 1 - nmant
    for row, code, v in zip(rows, codes, oracle_values):
        v = float(v)
        pattern = format(code, f"0{bits}b")
        assert int(row["hex"], 16) == code and len(row["hex"]) == 2 + (bits + 3) // 4
        assert row["binary"] == "0b" + "_".join(
            p for p in (pattern[0], pattern[1:1 + nexp], pattern[1 + nexp:]) if p)
        assert (row["sign"], row["exponent"], row["mantissa"]) == (
            pattern[0], str(int(pattern[1:1 + nexp], 2)),
            str(int(pattern[1 + nexp:] or "0", 2)))
        assert row["class"] == oracle_class(v, smallest_normal), (row, v)
        shown = float(row["value"])
        if np.isnan(v):
            assert np.isnan(shown) and row["exactly"] == ""
            continue
        assert shown == v and math.copysign(1, shown) == math.copysign(1, v), (row, v)
        if np.isfinite(v):
            assert exact_value(row) == Fraction(v)
            if row["exactly"]:                 # shown only where the repr is not exact
                assert Fraction(row["value"]) != Fraction(v)


FP8_PEERS = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2,
             "e4m3fnuz": ml_dtypes.float8_e4m3fnuz, "e5m2fnuz": ml_dtypes.float8_e5m2fnuz}
SMALL_PEERS = {**FP8_PEERS, "fp4": ml_dtypes.float4_e2m1fn,
               "fp6_e2m3": ml_dtypes.float6_e2m3fn, "fp6_e3m2": ml_dtypes.float6_e3m2fn}


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("name", list(FP8_PEERS))
def test_decode_every_fp8_pattern_against_ml_dtypes(name, capsys):
    dt = FP8_PEERS[name]
    codes = list(range(256))
    assert main(["decode", *map(hex, codes), "--fmt", name]) == 0
    rows = table_rows(capsys.readouterr().out)
    fi = ml_dtypes.finfo(dt)
    oracle = [np.uint8(c).view(dt) for c in codes]
    check_pattern_rows(rows, codes, oracle, 8, fi.nmant, float(fi.smallest_normal))


@requires_ml_dtypes
@pytest.mark.oracle
def test_decode_float16_patterns_against_numpy(capsys):
    codes = sorted({*range(0, 2**16, 97), 0x0000, 0x0001, 0x03FF, 0x0400, 0x3C00, 0x3C01,
                    0x7BFF, 0x7C00, 0x7C01, 0x7E00, 0x8000, 0x8001, 0xFBFF, 0xFC00, 0xFFFF})
    assert main(["decode", *map(hex, codes), "--fmt", "fp16"]) == 0
    rows = table_rows(capsys.readouterr().out)
    fi = np.finfo(np.float16)
    with np.errstate(invalid="ignore"):
        oracle = [np.uint16(c).view(np.float16) for c in codes]
    check_pattern_rows(rows, codes, oracle, 16, fi.nmant, float(fi.smallest_normal))
    # 2**-24's repr, 5.960464477539063e-08, is not exact: the exact decimal is shown.
    tiny = rows[codes.index(1)]
    assert tiny["exactly"] == format(Decimal(float(fi.smallest_subnormal)), "f")


@requires_ml_dtypes
@pytest.mark.oracle
def test_decode_bf16_one_tenth_in_every_notation(capsys):
    notations = ["0x3dcd", "0X3DCD", "15821", "0b0011110111001101", "0b0_01111011_1001101"]
    assert main(["decode", *notations, "--fmt", "bf16"]) == 0
    rows = table_rows(capsys.readouterr().out)
    v = np.uint16(0x3DCD).view(ml_dtypes.bfloat16)
    fi = ml_dtypes.finfo(ml_dtypes.bfloat16)
    check_pattern_rows(rows, [0x3DCD] * len(notations), [v] * len(notations), 16, fi.nmant,
                       float(fi.smallest_normal))
    assert rows[0]["value"] == "0.10009765625" and rows[0]["exactly"] == ""
    assert (rows[0]["sign"], rows[0]["exponent"], rows[0]["mantissa"]) == ("0", "123", "77")


def test_decode_fp32_and_fp64_show_exact_values(capsys):
    assert main(["decode", "0x3dcccccd", "1", "--fmt", "fp32"]) == 0
    rows = table_rows(capsys.readouterr().out)
    one_tenth = float(np.uint32(0x3DCCCCCD).view(np.float32))
    assert rows[0]["value"] == repr(one_tenth)
    assert rows[0]["exactly"] == format(Decimal(one_tenth), "f")
    assert rows[1]["exactly"] == "2**-149" and rows[1]["class"] == "subnormal"
    assert main(["decode", "0x7fefffffffffffff", "0xfff0000000000000", "--fmt", "fp64"]) == 0
    rows = table_rows(capsys.readouterr().out)
    big = float(np.uint64(0x7FEFFFFFFFFFFFFF).view(np.float64))
    assert float(rows[0]["value"]) == big and exact_value(rows[0]) == Fraction(big)
    assert rows[1]["value"] == "-inf" and rows[1]["class"] == "inf"


def encode_rows(args, capsys):
    assert main(["encode", *args]) == 0
    return table_rows(capsys.readouterr().out)


def check_rounding_cell(cell, x, r):
    """The rounding column against exact comparisons of the input and the peer's result."""
    if math.isnan(x):
        assert cell == "NaN"
    elif math.isnan(r):
        assert cell.startswith("NaN: ")
    elif r == x:
        assert cell == "exact"
    else:
        up, toward = r > x, abs(r) < abs(x)      # float64 comparisons are exact
        assert cell == (f"rounded {'up' if up else 'down'} "
                        f"({'toward zero' if toward else 'away from zero'})"), (cell, x, r)


# float32 values (so that a peer's cast through float32 rounds once), ties of each format
# included, across the whole range, with the specials.
ENCODE_INPUTS = sorted({float(v) for v in np.random.default_rng(5).standard_normal(60).astype(
    np.float32) * np.float32(2.0) ** np.arange(-12, 18, 0.5).astype(np.float32)}
    | {0.0, -0.0, 1.0, 1.0625, 1.1875, 0.1, -0.1, 3.0, 240.0, 464.0, 1e-8, -1e-8,
       57344.0, 61440.0, 70000.0, 1e6, -1e6, math.inf, -math.inf})
ENC_PEERS = {"fp16": (np.float16, np.uint16), "bf16": (ml_dtypes.bfloat16, np.uint16),
             "e4m3": (ml_dtypes.float8_e4m3fn, np.uint8), "e5m2": (ml_dtypes.float8_e5m2, np.uint8)}


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("name", list(ENC_PEERS))
def test_encode_round_to_nearest_even_against_the_peers(name, capsys):
    dt, ut = ENC_PEERS[name]
    rows = encode_rows([repr(x) for x in ENCODE_INPUTS] + ["--fmt", name], capsys)
    assert len(rows) == len(ENCODE_INPUTS)
    bits = np.dtype(ut).itemsize * 8
    for row, x in zip(rows, ENCODE_INPUTS):
        with np.errstate(over="ignore", invalid="ignore"):
            peer = np.array([x], dtype=np.float32).astype(dt)
        r = float(peer[0])
        assert float(row["input"]) == x
        check_rounding_cell(row["rounding"], x, r)
        if np.isnan(r):                 # the peer's NaN payload is its own choice
            assert np.isnan(float(row["value"]))
            continue
        code = int(peer.view(ut)[0])
        assert row["hex"] == f"0x{code:0{bits // 4}x}", (x, row)
        assert row["binary"].replace("_", "") == "0b" + format(code, f"0{bits}b")
        assert float(row["value"]) == r and math.copysign(1, float(row["value"])) == \
            math.copysign(1, r)


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("mode", ["rz", "ru", "rd", "rna", "ro"])
@pytest.mark.parametrize("name", ["e4m3", "bf16", "fp4"])
def test_encode_directed_modes_against_the_fraction_reference(mode, name, capsys):
    fmt = lp.format(name)
    dt = {"e4m3": ml_dtypes.float8_e4m3fn, "bf16": ml_dtypes.bfloat16,
          "fp4": ml_dtypes.float4_e2m1fn}[name]
    inputs = [x for x in ENCODE_INPUTS if not math.isinf(x)]
    rows = encode_rows([repr(x) for x in inputs] + ["--fmt", name, "--mode", mode.upper()],
                       capsys)
    for row, x in zip(rows, inputs):
        r = reference_round(x, fmt, mode)
        check_rounding_cell(row["rounding"], x, r)
        if math.isnan(r):
            assert row["value"] == "nan"
            continue
        assert float(row["value"]) == r
        # r is a value of the format: the peer's cast of it is exact.
        code = int(np.array([r]).astype(dt).view(np.uint8 if fmt.bits <= 8 else np.uint16)[0])
        assert int(row["hex"], 16) == code
        # Within range (past max a format without inf clamps to max whatever the mode).
        if mode in ("rz", "ru", "rd") and row["rounding"] != "exact" and abs(x) <= fmt.max:
            assert {"rz": "toward zero", "ru": "rounded up", "rd": "rounded down"}[mode] \
                in row["rounding"]


@requires_ml_dtypes
@pytest.mark.oracle
def test_encode_saturate_and_formats_without_inf(capsys):
    fmt = lp.FP8_E4M3
    rows = encode_rows(["1000", "inf", "-inf", "--fmt", "e4m3", "--saturate"], capsys)
    for row, x in zip(rows, (1000.0, math.inf, -math.inf)):
        r = reference_round(x, fmt, saturate=True)
        code = int(np.array([r]).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)[0])
        assert float(row["value"]) == r and int(row["hex"], 16) == code
        check_rounding_cell(row["rounding"], x, r)
    rows = encode_rows(["1000", "inf", "--fmt", "e4m3"], capsys)
    assert [r["value"] for r in rows] == ["nan", "nan"]
    assert [r["rounding"] for r in rows] == ["NaN: FP8_E4M3 has no inf"] * 2
    rows = encode_rows(["-1", "--fmt", "e8m0"], capsys)
    assert rows[0]["rounding"] == "NaN: E8M0 holds no negative value"


def test_encode_sr_is_reproducible_and_picks_a_neighbour(capsys):
    args = ["0.3"] * 32 + ["--fmt", "fp4", "--mode", "sr", "--seed", "4"]
    first = encode_rows(args, capsys)
    assert encode_rows(args, capsys) == first
    down, up = (reference_round(0.3, lp.FP4_E2M1, m) for m in ("rd", "ru"))
    assert {float(r["value"]) for r in first} == {down, up}
    for r in first:
        check_rounding_cell(r["rounding"], 0.3, float(r["value"]))
    assert [float(r["value"]) for r in first] == lp.round(np.full(32, 0.3), "fp4", "sr",
                                                          rng=4).tolist()


def test_encode_fp32_shows_the_exact_value(capsys):
    rows = encode_rows(["0.1", "-1", "--fmt", "fp32"], capsys)
    f = np.float32(0.1)
    assert rows[0]["hex"] == f"0x{int(np.array(f).view(np.uint32)):08x}"
    assert rows[0]["exactly"] == format(Decimal(float(f)), "f")
    assert rows[1]["rounding"] == "exact" and rows[1]["hex"] == "0xbf800000"


@requires_ml_dtypes
@pytest.mark.oracle
@pytest.mark.parametrize("name", ["e4m3", "e5m2", "fp4", "e4m3fnuz", "fp6_e3m2"])
def test_values_lists_every_pattern_as_ml_dtypes_does(name, capsys):
    dt = SMALL_PEERS[name]
    fi = ml_dtypes.finfo(dt)
    assert main(["values", name]) == 0
    out = capsys.readouterr().out
    rows = table_rows(out)
    assert len(rows) == 2 ** fi.bits
    codes = list(range(2 ** fi.bits))
    oracle = np.array(codes, dtype=np.uint8).view(dt)
    check_pattern_rows(rows, codes, oracle, fi.bits, fi.nmant, float(fi.smallest_normal))
    shown = np.array([float(r["value"]) for r in rows])
    np.testing.assert_array_equal(shown, oracle.astype(np.float64))   # NaN where they are
    if name == "e5m2":
        assert [r["hex"] for r in rows if r["class"] == "inf"] == ["0x7c", "0xfc"]


def test_values_e8m0_and_ue4m3(capsys):
    assert main(["values", "e8m0"]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert len(rows) == 256 and rows[0]["exactly"] == "2**-127" and rows[0]["sign"] == "-"
    assert rows[255]["class"] == "NaN"
    assert [exact_value(r) for r in rows[:255]] == [Fraction(2) ** (k - 127) for k in range(255)]
    assert main(["values", "ue4m3"]) == 0
    assert len(table_rows(capsys.readouterr().out)) == 128


@pytest.mark.parametrize("args, needle", [
    (["decode", "0x100", "--fmt", "e4m3"], "bit pattern 0x100 is wider than FP8_E4M3's 8 bits"),
    (["decode", "0x10000", "--fmt", "fp16"], "wider than FP16's 16 bits"),
    (["decode", "0b11111", "--fmt", "fp4"], "bit pattern 0b11111 is wider"),
    (["decode", "-1", "--fmt", "e4m3"], "bit pattern -1 is negative"),
    (["decode", "0xzz", "--fmt", "e4m3"], "not a bit pattern: '0xzz'"),
    (["decode", "1.5", "--fmt", "e4m3"], "not a bit pattern: '1.5'"),
    (["decode", "1", "--fmt", "fp7"], "unknown format 'fp7'"),
    (["decode", "1"], "required: --fmt"),
    (["encode", "abc", "--fmt", "fp16"], "not a number: 'abc'"),
    (["encode", "1", "--fmt", "bf17"], "unknown format"),
    (["encode", "1", "--fmt", "fp16", "--mode", "up"], "invalid choice"),
    (["encode", "nan", "--fmt", "fp4"], "FP4_E2M1 has no NaN to encode"),
    (["encode", "0.3", "--fmt", "fp4", "--mode", "sr", "--seed", "-1"],
     "--seed must be a non-negative integer, got '-1'"),
    (["values", "fp16"], "at most 8 bits"),
    (["values", "fp32"], "FP32 has 32 bits"),
    (["values", "e9m9"], "unknown format 'e9m9'"),
    (["values"], "required"),
])
def test_decode_encode_values_bad_input_is_one_line_and_status_2(args, needle, capsys):
    status, out, err = call(args, capsys)
    assert status == 2 and out == ""
    assert needle in err and err.startswith("lowprec: error: ")
    assert len(err.strip().splitlines()) == 1


def test_help_lists_decode_encode_values(capsys):
    for sub in ("decode", "encode", "values"):
        status, out, _ = call([sub, "--help"], capsys)
        assert status == 0 and f"usage: lowprec {sub}" in out
    r = run("--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())            # argparse wraps to the terminal's width
    for sub, help_text in {"decode": "the value, fields and class of bit patterns",
                           "encode": "a value's bit pattern, and which way it rounded",
                           "values": "every pattern and value of a format of <= 8 bits"
                           }.items():
        assert f" {sub} {help_text} " in text, sub


# -- replay on malformed files ----------------------------------------------------------

MMA = DATA / "mma" / "a100_mma_f16_f16.npz"
TC = DATA / "tensorcore" / "a100_bf16.npz"


def _rewrite(src, dst, drop=(), **changes):
    """dst: the .npz ``src`` without the entries ``drop``, with ``changes`` made."""
    with np.load(src) as z:
        entries = {k: z[k] for k in z.files if k not in drop}
    entries.update(changes)
    np.savez(dst, **entries)
    return dst


def _bad_replay_files(tmp):
    (tmp / "not_a_zip.npz").write_bytes(b"this is not a zip archive")
    np.save(tmp / "one_array.npy", np.zeros(3))
    np.savez(tmp / "a100_none.npz", x=np.zeros(3))
    return {
        "missing_d": (_rewrite(MMA, tmp / "missing_d.npz", drop=("d",)), "'d'"),
        "bad_format": (_rewrite(MMA, tmp / "bad_format.npz", a_format=np.array("f99")),
                       "a_format 'f99'"),
        "bad_scale": (_rewrite(MMA, tmp / "bad_scale.npz", scale_format=np.array("e9")),
                      "scale_format 'e9'"),
        "no_scales": (_rewrite(MMA, tmp / "no_scales.npz", scale_format=np.array("ue8m0")),
                      "'scale_a', 'scale_b'"),
        "block": (_rewrite(MMA, tmp / "block.npz", block_size=np.array("abc")),
                  "block_size must be a positive integer, got 'abc'"),
        "not_a_zip": (tmp / "not_a_zip.npz", "not an .npz archive"),
        "npy": (tmp / "one_array.npy", "not an .npz archive"),
        "tc_without_a": (_rewrite(TC, tmp / "a100_bf16.npz", drop=("a",)), "'a'"),
        "neither": (tmp / "a100_none.npz", "neither the mma-data layout"),
        "no_underscore": (_rewrite(TC, tmp / "a100.npz"), "GPU_FORMAT.npz"),
        "bad_tc_format": (_rewrite(TC, tmp / "a100_zz9.npz"), "input format 'zz9'"),
        "cut_a": (_rewrite(MMA, tmp / "cut_a.npz", a=np.zeros((4096, 8), np.uint16)),
                  "K is '16' but 'a' has 8 columns"),
        "bad_k": (_rewrite(MMA, tmp / "bad_k.npz", K=np.array("zz")), "K is 'zz'"),
        "short_d": (_rewrite(MMA, tmp / "short_d.npz", d=np.zeros(10, np.uint16)),
                    "'d' must have shape (4096,)"),
    }


def test_replay_refuses_malformed_files_naming_file_and_problem(tmp_path):
    for name, (path, needle) in _bad_replay_files(tmp_path).items():
        with pytest.raises(ValueError, match=re.escape(needle)) as info:
            lp.testing.replay(path)
        assert str(path) in str(info.value), name


def test_the_command_line_replays_malformed_files_in_one_line(tmp_path, capsys):
    for name, (path, needle) in _bad_replay_files(tmp_path).items():
        status, out, err = call(["replay", str(path)], capsys)
        assert status == 2 and out == "", name
        assert err.startswith("lowprec: error: ") and needle in err, name
        assert len(err.strip().splitlines()) == 1, name


@pytest.mark.parametrize("show", ["-1", "x", "1.5"])
def test_replay_show_must_be_a_non_negative_integer(show, capsys):
    status, out, err = call(["replay", str(MMA), "--model", "v100/mma", "--show", show],
                            capsys)
    assert status == 2 and out == ""
    assert "--show must be a non-negative integer" in err


def test_replay_max_mismatches_is_checked():
    with pytest.raises(ValueError, match="max_mismatches must be at least 0"):
        lp.testing.replay(MMA, max_mismatches=-1)
