"""The layout of docs/design/DESIGN.md ("Layout"), held against the source.

The import graph is built from the source with ``ast`` (nothing is imported to build
it): every module of ``lowprec/`` must be listed in the design doc's layout table, and
a module may import only from files listed above its own, except a package's
``__init__.py``, which re-exports the files of its own package. No module imports an
underscored name from another module, and no public module is shadowed by a function
of the same name in its package (``lp.matmul`` is a function, so the matrix products
cannot live in ``lowprec/matmul.py``).
"""

from __future__ import annotations

import ast
import importlib
import pathlib
import re
import types

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "lowprec"
DESIGN = ROOT / "docs" / "design" / "DESIGN.md"


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _rows() -> dict[str, str]:
    """The layout table's rows, file -> what DESIGN.md says it is for, in table order
    (the layer order)."""
    text = DESIGN.read_text(encoding="utf-8").split("## Layout", 1)[1].split("\n## ", 1)[0]
    return {m.group(1): m.group(2) for m in
            re.finditer(r"^\| [\w ]+ \| `(lowprec/[\w/]+\.py)` \| (.*) \|$", text, flags=re.M)}


ROWS = _rows()
SOURCES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
FILES = {_module_name(ROOT / f): i for i, f in enumerate(ROWS)}


def _is_package(name: str) -> bool:
    return SOURCES[name].name == "__init__.py"


def _imports(name: str, source: str | None = None) -> list[tuple[str, list[str], int]]:
    """(imported module, names taken from it, line) for each import in ``name``'s source
    (or in ``source``, read as if it were ``name``'s) that stays inside lowprec;
    ``from pkg import sub`` counts as importing ``pkg.sub``."""
    if source is None:
        source = SOURCES[name].read_text(encoding="utf-8")
    tree = ast.parse(source)
    package = name if _is_package(name) else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target != "lowprec" and not target.startswith("lowprec."):
                continue
            names = [a.name for a in node.names]
            subs = [n for n in names if f"{target}.{n}" in SOURCES]
            for n in subs:
                found.append((f"{target}.{n}", [], node.lineno))
            rest = [n for n in names if n not in subs]
            if rest or not subs:
                found.append((target, rest, node.lineno))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "lowprec" or a.name.startswith("lowprec."):
                    found.append((a.name, [], node.lineno))
    return found


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _rank(target: str) -> int:
    """A module's place in the layer order; a package counts as its last file (importing
    it runs every file its ``__init__`` imports)."""
    inside = [r for m, r in FILES.items() if m == target or m.startswith(target + ".")]
    return max(inside)


def test_every_module_is_listed_in_the_design_doc():
    missing = sorted(set(SOURCES) - set(FILES))
    stale = sorted(set(FILES) - set(SOURCES))
    assert not missing, f"modules missing from DESIGN.md's layout table: {missing}"
    assert not stale, f"DESIGN.md lists files that do not exist: {stale}"


def _upward(name: str, source: str | None = None) -> list[str]:
    """The imports of ``name`` that run against the layer order."""
    wrong = []
    for target, names, line in _imports(name, source):
        if target == name or (names and all(_dunder(n) for n in names)):
            continue           # package metadata (the command's --version): no layer
        if _is_package(name) and target.startswith(name + "."):
            continue           # a package's __init__ re-exports its own files
        if name == "lowprec" or name == "lowprec.__main__":
            continue           # the top re-exports everything
        if _rank(target) >= FILES[name]:
            wrong.append(f"line {line}: {target}")
    return wrong


def _private(name: str, source: str | None = None) -> list[str]:
    """The underscored names ``name`` imports from other modules."""
    return [f"line {line}: {n} from {target}" for target, names, line in _imports(name, source)
            for n in names if n.startswith("_") and not _dunder(n) and target != name]


def _shadowed(parent: types.ModuleType, attr: str, module: types.ModuleType) -> bool:
    """Whether ``parent.attr`` is something other than its submodule ``module``."""
    return getattr(parent, attr, module) is not module


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_imports_run_down_the_layers(name):
    wrong = _upward(name)
    assert not wrong, (f"{name} imports modules listed at or below it in DESIGN.md: "
                       f"{wrong}")


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_no_underscored_name_crosses_a_module(name):
    wrong = _private(name)
    assert not wrong, f"{name} imports private names of other modules: {wrong}"


@pytest.mark.parametrize("name", sorted(n for n in SOURCES
                                          if "." in n and n != "lowprec.__main__"))
def test_no_module_is_shadowed_by_a_function(name):
    module = importlib.import_module(name)
    parent_name, _, attr = name.rpartition(".")
    parent = importlib.import_module(parent_name)
    assert not _shadowed(parent, attr, module), (
        f"{parent_name}.{attr} is {getattr(parent, attr)!r}, not the module {name}")


def test_the_checks_catch_what_they_are_for():
    # Known answers, on sources written here: the checks above are not vacuous.
    assert _upward("lowprec.rounding", "from .tensors import Tensor\n")          # up a layer
    assert _upward("lowprec.engine.plan", "from .kernel import run\n")           # up a file
    assert not _upward("lowprec.rounding", "from .engine.kernel import run\n")
    assert not _upward("lowprec.teaching.cli", "from .. import __version__\n")   # metadata
    assert _private("lowprec.bits", "from .engine.kernel import _round_chunk\n")
    assert not _private("lowprec.bits", "from .formats import format as _format\n")
    package, module = types.ModuleType("fake"), types.ModuleType("fake.matmul")
    package.matmul = lambda: None       # what `from .tensors import matmul` did to lowprec
    assert _shadowed(package, "matmul", module)
    package.matmul = module
    assert not _shadowed(package, "matmul", module)


def test_the_design_doc_names_the_file_of_every_public_function_and_class():
    # A newcomer finds the file of lp.NAME by searching the table for NAME.
    import inspect

    import lowprec as lp
    wrong = []
    for name in lp.__all__:
        obj = inspect.unwrap(getattr(lp, name))
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        path = pathlib.Path(inspect.getsourcefile(obj)).resolve().relative_to(ROOT).as_posix()
        if not re.search(rf"(?<!\w){re.escape(name)}\b", ROWS.get(path, "")):
            wrong.append(f"lp.{name} is in {path}, whose row does not name it")
    assert not wrong, wrong


# -- the tests mirror the package -------------------------------------------------------

TESTS = ROOT / "tests"

#: Test files that test no one module: each with its reason.
CROSS_CUTTING = {
    "test_layering.py": "holds DESIGN.md's layout and this mirror rule against the tree",
    "test_typing.py": "every public signature of every module carries type hints",
    "test_notebooks.py": "notebooks/ (each .ipynb is its Jupytext .py's cells)",
}


def _tested_module(test: pathlib.Path) -> list[pathlib.Path]:
    """Where ``tests/X/test_Y.py`` may point: ``lowprec/X/Y.py`` or the package
    ``lowprec/X/Y/``; ``test_Y_aspect.py`` holds one aspect of a large ``Y``."""
    rel = test.relative_to(TESTS)
    stem = rel.name.removeprefix("test_").removesuffix(".py")
    where = PACKAGE.joinpath(*rel.parts[:-1])
    parts = stem.split("_")
    stems = ["_".join(parts[:i]) for i in range(len(parts), 0, -1)]
    return [p for s in stems for p in (where / f"{s}.py", where / s / "__init__.py")]


def test_each_test_file_is_named_for_a_module_of_lowprec():
    """A test of ``lowprec/X/Y.py`` lives in ``tests/X/test_Y.py`` (of a package as a
    whole, in ``tests/X/test_Y.py`` for ``lowprec/X/Y/``); comparisons with other
    libraries live in ``tests/peers/``, reference implementations in ``tests/oracles/``."""
    strays = []
    for test in sorted(TESTS.rglob("test_*.py")):
        rel = test.relative_to(TESTS)
        if rel.parts[0] in ("peers", "oracles", "data") or str(rel) in CROSS_CUTTING:
            continue
        if not any(p.is_file() for p in _tested_module(test)):
            strays.append(str(rel))
    assert not strays, (f"{strays}: a test of lowprec/X/Y.py goes in tests/X/test_Y.py, a "
                        "comparison with another library in tests/peers/")


def test_the_cross_cutting_test_files_exist():
    assert all((TESTS / name).is_file() for name in CROSS_CUTTING)
