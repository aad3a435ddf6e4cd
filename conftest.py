"""Suite-wide rule: a missing optional peer skips the comparisons that need it, with a
reason, and never fails a test.

Test modules import their peers through ``tests/peers.py``, which gives a `Missing`
stand-in for an absent module. Here every collected test that reaches a stand-in (in
its own code, a function of its module it calls, a module-level table it reads, or
its parameters) is marked skipped, naming the peer; so is every doctest (docstrings,
docs/*.md, README.md) that imports a peer that is not installed. A test that still
fails because it used a stand-in (inside a Hypothesis strategy, say; the error then
names ``<missing peer ...>``) is reported as skipped with that reason.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import types

import pytest

#: Libraries the suite or the docs use as oracles or for pictures; none is required.
PEERS = ("ml_dtypes", "gmpy2", "matplotlib", "torch", "gfloat", "pychop")
_IMPORT = re.compile(r"^\s*(?:import|from)\s+(" + "|".join(PEERS) + r")\b", re.M)


def _installed(name):
    return importlib.util.find_spec(name) is not None


def _missing(value, depth=0):
    """The first `Missing` stand-in in ``value`` or its items (tables two levels deep)."""
    if type(value).__name__ == "Missing" and hasattr(value, "reason"):
        return value
    if depth < 3 and isinstance(value, (dict, list, tuple, set, frozenset)):
        items = value.items() if isinstance(value, dict) else value
        for item in items:
            found = _missing(item, depth + 1)
            if found is not None:
                return found
    if depth < 3 and type(value).__name__ == "ParameterSet":
        return _missing(tuple(value.values), depth + 1)
    return None


def _code_objects(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _reaches_missing(fn, seen):
    """A stand-in reached from function ``fn``'s code through its module's globals."""
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
        for name in c.co_names:
            if name not in module_globals:
                continue
            value = module_globals[name]
            found = _missing(value)
            if found is not None:
                return found
            if (isinstance(value, types.FunctionType)
                    and value.__globals__ is module_globals):
                found = _reaches_missing(value, seen)
                if found is not None:
                    return found
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        reason = None
        dtest = getattr(item, "dtest", None)
        if dtest is not None:       # a doctest: skip it if it imports an absent peer
            source = "\n".join(example.source for example in dtest.examples)
            absent = sorted({m for m in _IMPORT.findall(source) if not _installed(m)})
            if absent:
                reason = f"{', '.join(absent)} not installed; doctest skipped"
        elif isinstance(item, pytest.Function):
            found = None
            callspec = getattr(item, "callspec", None)
            if callspec is not None:
                found = _missing(tuple(callspec.params.values()))
            if found is None:
                found = _reaches_missing(item.function, set())
            if found is not None:
                reason = found.reason
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


_STAND_IN = re.compile(r"<missing peer (\w+): ([\w.]+)>")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.excinfo is not None:
        match = _STAND_IN.search(str(report.longrepr))
        if match is not None and not _installed(match.group(1)):
            report.outcome = "skipped"
            report.longrepr = (str(item.path), item.location[1] or 0,
                               f"Skipped: {match.group(1)} is not installed "
                               f"({match.group(2)} used); comparison skipped")


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    # Last resort: a module that cannot even be imported without a peer is skipped whole.
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        match = _STAND_IN.search(str(report.longrepr))
        if match is not None and not _installed(match.group(1)):
            report.outcome = "skipped"
            report.longrepr = (str(collector.path), 0,
                               f"Skipped: {match.group(1)} is not installed "
                               f"({match.group(2)} used at import); module skipped")
