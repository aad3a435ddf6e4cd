"""Run the array API standard's conformance suite against `lowprec.array_api` and print
passed / failed / skipped per test module: ``python benchmarks/array_api_conformance.py``.

The suite is data-apis/array-api-tests (MIT), read from ``../shared/array-api-tests``
next to the repository (``--suite`` to point elsewhere). It is copied to a temporary
directory, deleted at the end, and two lines of the copy are patched because lowprec
has no complex dtypes, on which the suite's import-time code relies
(`PATCHES` says which and why); the original is never written to. pytest runs in that
copy with the suite's own ``pytest.ini`` (``-c``), so the repository's pyproject
``addopts`` (``--nbmake``, ``--doctest-modules``) do not apply, and pytest-json-report
collects the outcomes that the tables are made of. This is a report, not a test: it
exits 0 when tests fail, and nonzero only when the run itself breaks (no report, an
internal or usage error, nothing collected).

``--module`` takes whatever the suite's ``ARRAY_API_TESTS_MODULE`` takes: a dotted
name (``lowprec.array_api``), or ``exec('...')``, a script that must bind the
namespace to ``xp``, e.g. for a BF16 policy namespace::

    python benchmarks/array_api_conformance.py \\
        --module "exec('import lowprec; xp = lowprec.array_namespace(\\"bf16\\")')"

(array_api_tests/__init__.py: the value must start with ``exec('`` and end with ``')``;
the script between is run with `exec` and ``xp`` read from its globals, so the script
itself must use double quotes.)
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import json
import os
import pathlib
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

REPO = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_SUITE = REPO.parent / "shared" / "array-api-tests"
OUTCOMES = ("passed", "failed", "skipped", "xfailed", "xpassed", "errors")


@dataclasses.dataclass(frozen=True)
class Patch:
    """A plain string replacement in one file of the copied suite."""

    path: str
    old: str
    new: str
    why: str


PATCHES = (
    Patch(
        "array_api_tests/dtype_helpers.py",
        "widest_complex_dtype = max(\n"
        "    [(dt, dtype_nbits[dt]) for dt in complex_dtypes], key=lambda x: x[1]\n"
        ")[0]",
        "widest_complex_dtype = max(\n"
        "    [(dt, dtype_nbits[dt]) for dt in complex_dtypes], key=lambda x: x[1],\n"
        "    default=(None,),\n"
        ")[0]",
        "max() over the complex dtypes raises on an empty sequence when the namespace "
        "has none (lowprec has no complex dtypes); widest_complex_dtype becomes None",
    ),
    Patch(
        "array_api_tests/test_signatures.py",
        "cmplx_name = dh.dtype_to_name[dh.widest_complex_dtype]",
        'cmplx_name = ("complex128" if dh.widest_complex_dtype is None\n'
        "                      else dh.dtype_to_name[dh.widest_complex_dtype])",
        "dtype_to_name[None] raises KeyError at collection; the name 'complex128' is "
        "then looked up with getattr(xp, ...) and skipped as absent",
    ),
)


def copy_suite(suite: pathlib.Path, dest: pathlib.Path) -> None:
    """Copy the suite without its caches, writable (the shared copy is read-only, and
    copytree would carry the read-only bits to the copy, which then cannot be patched,
    hold pytest's caches, or be deleted)."""
    shutil.copytree(suite, dest, copy_function=shutil.copyfile,
                    ignore=shutil.ignore_patterns(".git", "__pycache__", ".hypothesis"))
    for root, dirs, files in os.walk(dest):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
    os.chmod(dest, 0o755)


def apply_patches(copy: pathlib.Path) -> None:
    """Apply `PATCHES` to the copy; a target text not found exactly once is an error."""
    for patch in PATCHES:
        path = copy / patch.path
        text = path.read_text()
        found = text.count(patch.old)
        if found != 1:
            raise SystemExit(f"patch target in {patch.path} found {found} times, expected "
                             f"once (has the suite changed?):\n{patch.old}")
        path.write_text(text.replace(patch.old, patch.new))
        print(f"patched {patch.path}: {patch.why}")


def suite_id(suite: pathlib.Path) -> str:
    """The suite's git commit where it has one, else a digest of its Python sources
    (the shared copy has no .git, and versioneer then reports 0+unknown)."""
    try:
        commit = subprocess.run(["git", "-C", str(suite), "rev-parse", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
        if commit:
            return f"commit {commit}"
    except (OSError, subprocess.CalledProcessError):
        pass
    digest = hashlib.sha256()
    for path in sorted(suite.rglob("*.py")):
        if "array-api" not in path.relative_to(suite).parts[:1]:
            digest.update(path.relative_to(suite).as_posix().encode())
            digest.update(path.read_bytes())
    return f"no git metadata; sha256 of its .py files {digest.hexdigest()[:12]}"


def first_line(test: dict[str, Any]) -> str:
    """The first line of a failing or erroring test's message, from the stage that
    failed."""
    for stage in ("setup", "call", "teardown"):
        info = test.get(stage) or {}
        if info.get("outcome") != "failed":
            continue
        message = (info.get("crash") or {}).get("message") or info.get("longrepr") or ""
        lines = [line.strip() for line in str(message).splitlines() if line.strip()]
        return lines[0] if lines else f"({stage} failed, no message)"
    return "(no message)"


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")


def summarize(report: dict[str, Any]) -> tuple[dict[str, collections.Counter[str]],
                                               list[tuple[str, str]]]:
    """Per-module outcome counts, and (id, first line) of every failure and error,
    modules that failed to collect included (counted as errors)."""
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    failures: list[tuple[str, str]] = []
    for test in report.get("tests", []):
        outcome = test["outcome"]
        outcome = "errors" if outcome == "error" else outcome
        counts[module_of(test["nodeid"])][outcome] += 1
        if outcome in ("failed", "errors"):
            failures.append((test["nodeid"], first_line(test)))
    for collector in report.get("collectors", []):
        if collector.get("outcome") == "failed" and collector["nodeid"].endswith(".py"):
            counts[module_of(collector["nodeid"])]["errors"] += 1
            lines = [ln for ln in collector.get("longrepr", "").splitlines() if ln.strip()]
            failures.append((collector["nodeid"] + " (collection)",
                             lines[-1].strip() if lines else "(no message)"))
    return dict(sorted(counts.items())), failures


def table(counts: dict[str, collections.Counter[str]]) -> tuple[str, dict[str, int]]:
    """A markdown table, one row a module and a totals row; xpassed only if any."""
    totals = {o: sum(c[o] for c in counts.values()) for o in OUTCOMES}
    columns = [o for o in OUTCOMES if o != "xpassed" or totals[o]]
    width = max([len(m) for m in counts] + [len("**total**")])
    rows = [f"| {'module':<{width}} | " + " | ".join(f"{c:>7}" for c in columns) + " |",
            f"|{'-' * (width + 2)}|" + "|".join("-" * 8 + ":" for _ in columns) + "|"]
    for name, c in counts.items():
        rows.append(f"| {name:<{width}} | " + " | ".join(f"{c[o]:>7}" for o in columns) + " |")
    rows.append(f"| {'**total**':<{width}} | "
                + " | ".join(f"{totals[o]:>7}" for o in columns) + " |")
    return "\n".join(rows), totals


def versions() -> dict[str, str]:
    import hypothesis
    import numpy

    return {"python": platform.python_version(), "numpy": numpy.__version__,
            "hypothesis": hypothesis.__version__}


def run_suite(args: argparse.Namespace, copy: pathlib.Path,
              json_file: pathlib.Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["ARRAY_API_TESTS_MODULE"] = args.module
    env["ARRAY_API_TESTS_VERSION"] = args.api_version
    env["ARRAY_API_TESTS_SKIP_DTYPES"] = "complex64,complex128"
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO), str(copy)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    command = [sys.executable, "-m", "pytest", "array_api_tests/",
               "-c", str(copy / "pytest.ini"), "--rootdir", str(copy), "-o", "addopts=",
               "-p", "no:cacheprovider", "--continue-on-collection-errors",
               "--max-examples", str(args.max_examples), "--disable-extension", "fft",
               "--json-report", f"--json-report-file={json_file}"]
    if args.k:
        command += ["-k", args.k]
    if args.hypothesis_seed is not None:
        command += ["--hypothesis-seed", str(args.hypothesis_seed)]
    print("running:", shlex.join(command), f"(in {copy})", flush=True)
    return subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--module", default="lowprec.array_api",
                        help="ARRAY_API_TESTS_MODULE: a dotted name, or exec('...') binding "
                             "xp (see above); default %(default)s")
    parser.add_argument("--max-examples", type=int, default=100, metavar="N",
                        help="Hypothesis examples per test (default %(default)s)")
    parser.add_argument("-k", metavar="EXPR", help="pytest -k expression, passed through")
    parser.add_argument("--hypothesis-seed", type=int, metavar="SEED",
                        help="Hypothesis seed, for a repeatable run")
    parser.add_argument("--api-version", default="2024.12",
                        help="ARRAY_API_TESTS_VERSION (default %(default)s)")
    parser.add_argument("--suite", type=pathlib.Path, default=DEFAULT_SUITE,
                        help="the array-api-tests checkout (default %(default)s)")
    parser.add_argument("--json", type=pathlib.Path, metavar="PATH",
                        help="also write the summary to PATH as JSON")
    parser.add_argument("--failures", action="store_true",
                        help="list every failing test id with the first line of its error")
    args = parser.parse_args(argv)
    if not (args.suite / "array_api_tests").is_dir():
        parser.error(f"no array-api-tests suite at {args.suite}")

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="array-api-tests-") as tmp:
        copy = pathlib.Path(tmp) / "array-api-tests"
        copy_suite(args.suite, copy)
        apply_patches(copy)
        json_file = pathlib.Path(tmp) / "report.json"
        proc = run_suite(args, copy, json_file)
        report = json.loads(json_file.read_text()) if json_file.exists() else None
    wall = time.perf_counter() - start

    # pytest: 0 all passed, 1 some failed, 2 interrupted, 3 internal, 4 usage, 5 none run.
    if report is None or proc.returncode not in (0, 1) or not report.get("tests"):
        print(proc.stdout[-6000:], proc.stderr[-6000:], sep="\n", file=sys.stderr)
        print(f"the suite did not run (pytest exit code {proc.returncode})", file=sys.stderr)
        return 2

    counts, failures = summarize(report)
    text, totals = table(counts)
    env = versions()
    # The suite's own header names the namespace it imported; pytest's, the ini it read.
    header = [line for line in proc.stdout.splitlines()
              if line.startswith(("Array API Tests Module:", "rootdir:", "configfile:"))]
    print(f"\narray API conformance, ARRAY_API_TESTS_MODULE={args.module}, "
          f"--max-examples {args.max_examples}" + (f", -k {args.k!r}" if args.k else ""))
    print("\n".join(header))
    print(f"suite: {args.suite} ({suite_id(args.suite)})")
    print(", ".join(f"{k} {v}" for k, v in env.items()))
    print()
    print(text)
    print("\ntotal: " + ", ".join(f"{totals[o]} {o}" for o in OUTCOMES if o != "xpassed"
                                  or totals[o]))
    print(f"wall time {wall:.1f} s (pytest {report.get('duration', 0.0):.1f} s)")
    collect_errors = [nodeid for nodeid, _ in failures if nodeid.endswith("(collection)")]
    if collect_errors:
        print(f"warning: {len(collect_errors)} module(s) failed to collect: "
              + ", ".join(collect_errors))
    if args.failures:
        print(f"\n## Failures and errors ({len(failures)})\n")
        for nodeid, message in failures:
            print(f"- `{nodeid}`: {message}")
    if args.json:
        summary = {"module": args.module, "header": header, "api_version": args.api_version,
                   "max_examples": args.max_examples, "k": args.k,
                   "hypothesis_seed": args.hypothesis_seed, "suite": str(args.suite),
                   "suite_id": suite_id(args.suite), "versions": env,
                   "patches": [dataclasses.asdict(p) for p in PATCHES],
                   "pytest_exitcode": proc.returncode, "wall_s": round(wall, 2),
                   "modules": {m: {o: c[o] for o in OUTCOMES} for m, c in counts.items()},
                   "totals": totals,
                   "failures": [{"nodeid": n, "message": m} for n, m in failures]}
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
        print(f"summary written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
