"""Suite-wide rule: a missing optional peer skips the comparisons that need it, with a
reason, and never fails a test.

Test modules import their peers through ``tests/peers.py``, which gives a `Missing`
stand-in for an absent module. Here every collected test that reaches a stand-in (in
its own code, a function of its module it calls, a module-level table it reads, or
its parameters) is marked skipped, naming the peer; so is every doctest (docstrings,
docs/*.md, README.md) that imports a peer that is not installed. A test that still
fails because it used a stand-in (inside a Hypothesis strategy, say; the error then
names ``<missing peer ...>``) is reported as skipped with that reason.

The same walk marks every test that reaches an oracle peer (ml_dtypes, gmpy2), installed
or not, ``oracle``, and every notebook ``notebook``; ``slow`` is written on the tests.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import types

import numpy as np
import pytest

#: The notebooks' Jupytext sources are not test or doctest modules (importing one would run
#: the notebook): nbmake runs their paired notebooks/*.ipynb, and tests/test_notebooks.py
#: checks that each .ipynb is its .py's cells.
collect_ignore_glob = ["notebooks/*.py"]

#: Libraries the suite or the docs use as oracles or for pictures; none is required.
PEERS = ("ml_dtypes", "gmpy2", "matplotlib", "torch", "gfloat", "pychop")
_IMPORT = re.compile(r"^\s*(?:import|from)\s+(" + "|".join(PEERS) + r")\b", re.M)
#: The peers whose answers tests compare against: a test that uses one is marked `oracle`.
ORACLES = ("ml_dtypes", "gmpy2")


def _installed(name):
    return importlib.util.find_spec(name) is not None


def _walk(value, test, depth=0):
    """The first answer of ``test`` (not None) on ``value`` or its items: containers and
    pytest parameter sets, tables two levels deep."""
    found = test(value)
    if found is not None or depth >= 3:
        return found
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        items = value.items() if isinstance(value, dict) else value
    elif type(value).__name__ == "ParameterSet":
        items = tuple(value.values)
    else:
        return None
    for item in items:
        found = _walk(item, test, depth + 1)
        if found is not None:
            return found
    return None


def _stand_in(value):
    return value if type(value).__name__ == "Missing" and hasattr(value, "reason") else None


def _oracle_of(value):
    """The oracle peer ``value`` belongs to: the module itself, a stand-in for it, or a
    type, function or dtype of it."""
    if _stand_in(value) is not None:
        return value._peer if value._peer in ORACLES else None
    if isinstance(value, types.ModuleType):
        owner = value.__name__
    elif isinstance(value, type):
        owner = value.__module__
    elif isinstance(value, np.dtype):
        owner = value.type.__module__
    elif isinstance(value, types.FunctionType | types.BuiltinFunctionType):
        owner = value.__module__
    else:
        owner = None
    root = owner.partition(".")[0] if isinstance(owner, str) else None
    return root if root in ORACLES else None


def _missing(value):
    """The first `Missing` stand-in in ``value`` or its items."""
    return _walk(value, _stand_in)


def _oracle(value):
    """The name of the oracle peer ``value`` or one of its items belongs to."""
    return _walk(value, _oracle_of)


def _code_objects(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _reaches_missing(fn, seen, find=_missing):
    """A stand-in reached from function ``fn``'s code through its module's globals (or,
    with ``find=_oracle``, the oracle peer reached, installed or not)."""
    fn = inspect.unwrap(fn)
    inner = getattr(getattr(fn, "hypothesis", None), "inner_test", None)
    if inner is not None:
        fn = inspect.unwrap(inner)
    code = getattr(fn, "__code__", None)
    if code is None or code in seen:
        return None
    seen.add(code)
    module_globals = getattr(fn, "__globals__", {})
    for c in _code_objects(code):
        if find is _oracle:     # `import gmpy2`, `gmpy2 = pytest.importorskip("gmpy2")`
            names = c.co_names + c.co_varnames + c.co_cellvars + c.co_freevars
            found = next((n for n in names if n in ORACLES), None)
            if found is not None:
                return found
        for name in c.co_names:
            if name not in module_globals:
                continue
            value = module_globals[name]
            found = find(value)
            if found is not None:
                return found
            if (isinstance(value, types.FunctionType)
                    and value.__globals__ is module_globals):
                found = _reaches_missing(value, seen, find)
                if found is not None:
                    return found
    return None


# tryfirst: the markers are on the items before `-m` deselects by them.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        reason = None
        oracle = None
        dtest = getattr(item, "dtest", None)
        if dtest is not None:       # a doctest: skip it if it imports an absent peer
            source = "\n".join(example.source for example in dtest.examples)
            imported = set(_IMPORT.findall(source))
            absent = sorted(m for m in imported if not _installed(m))
            if absent:
                reason = f"{', '.join(absent)} not installed; doctest skipped"
            oracle = next((m for m in ORACLES if m in imported), None)
        elif isinstance(item, pytest.Function):
            found = None
            callspec = getattr(item, "callspec", None)
            params = tuple(callspec.params.values()) if callspec is not None else ()
            found = _missing(params)
            if found is None:
                found = _reaches_missing(item.function, set())
            if found is not None:
                reason = found.reason
            oracle = _oracle(params) or _reaches_missing(item.function, set(), _oracle)
        elif item.path.suffix == ".ipynb":      # nbmake's notebook items
            item.add_marker(pytest.mark.notebook)
        if oracle is not None:
            item.add_marker(pytest.mark.oracle)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


_STAND_IN = re.compile(r"<missing peer (\w+): ([\w.]+)>")


def _skip_if_a_peer_was_missing(report, path, line, used):
    """Turn a failed report whose error names a stand-in of an absent peer into a skip."""
    if report.failed:
        match = _STAND_IN.search(str(report.longrepr))
        if match is not None and not _installed(match.group(1)):
            report.outcome = "skipped"
            report.longrepr = (str(path), line, f"Skipped: {match.group(1)} is not "
                               f"installed ({match.group(2)} {used})")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.excinfo is not None:
        _skip_if_a_peer_was_missing(outcome.get_result(), item.path, item.location[1] or 0,
                                    "used; comparison skipped")


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    # Last resort: a module that cannot even be imported without a peer is skipped whole.
    outcome = yield
    _skip_if_a_peer_was_missing(outcome.get_result(), collector.path, 0,
                                "used at import; module skipped")
