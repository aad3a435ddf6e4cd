"""Every public function and method carries complete type hints (PEP 561: lowprec ships
``py.typed``). mypy checks that the hints are right (``python -m mypy``); this checks
that none is missing, which mypy does not do for the modules it checks loosely."""

import dataclasses
import importlib
import inspect
import typing
from pathlib import Path

import pytest

import lowprec as lp
from lowprec import amp, types
from lowprec.teaching import cli

#: The public modules (docs/design/DESIGN.md, "Layout").
PUBLIC = ("formats", "status", "rounding", "bits", "arith", "tensorcore", "tensors", "nn",
          "amp", "linalg", "testing", "teaching", "array_api")
MODULES = {"lowprec": lp, **{f"lowprec.{m}": importlib.import_module(f"lowprec.{m}")
                            for m in PUBLIC}}


def _public_callables():
    seen = set()
    for modname, mod in MODULES.items():
        names = getattr(mod, "__all__", None) or [n for n in vars(mod) if not n.startswith("_")]
        for name in names:
            obj = getattr(mod, name)
            if inspect.ismodule(obj) or id(obj) in seen:
                continue
            if inspect.isclass(obj) and obj.__module__.startswith("lowprec"):
                seen.add(id(obj))
                # the class's own members and those of its lowprec bases (the chapters of
                # an array-API Namespace)
                members = {a: m for k in reversed(obj.__mro__)
                           if k.__module__.startswith("lowprec") for a, m in vars(k).items()}
                for attr, member in members.items():
                    if attr.startswith("_") and attr not in ("__init__", "__post_init__"):
                        continue
                    if isinstance(member, property):
                        member = member.fget
                    elif isinstance(member, (classmethod, staticmethod)):
                        member = member.__func__
                    elif hasattr(member, "func"):            # functools.cached_property
                        member = member.func
                    if inspect.isfunction(member):
                        yield f"{modname}.{name}.{attr}", member
            elif inspect.isfunction(obj) and obj.__module__.startswith("lowprec"):
                seen.add(id(obj))
                yield f"{modname}.{name}", inspect.unwrap(obj)
    yield "lowprec.teaching.cli.main", cli.main


CALLABLES = dict(_public_callables())


@pytest.mark.parametrize("qualname", sorted(CALLABLES))
def test_public_callable_is_annotated(qualname):
    fn = CALLABLES[qualname]
    # The function's own parameters, read from its code (sum's __signature__ shows the
    # documented call, not its deprecated *args).
    annotations = fn.__annotations__
    code = fn.__code__
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    names = code.co_varnames[:n]
    missing = [n for n in names if n not in ("self", "cls") and n not in annotations]
    assert not missing, f"{qualname}: parameters without a type hint: {missing}"
    assert "return" in annotations, f"{qualname}: no return type"


def test_public_dataclass_fields_are_annotated():
    for cls in (lp.Format, lp.TensorCoreModel, lp.Explanation, amp.Policy, amp.History):
        assert all(f.type for f in dataclasses.fields(cls))


def test_py_typed_ships_with_the_package():
    root = Path(lp.__file__).parent
    assert (root / "py.typed").is_file()
    assert "py.typed" in (root.parent / "pyproject.toml").read_text()


def test_the_mode_alias_lists_the_modes_the_checks_accept():
    # One list: `lp.MODES` (what the run-time check accepts) is read from the alias.
    assert typing.get_args(types.Mode) == lp.MODES == ("rne", "rna", "rz", "ru", "rd", "ro", "sr")
    assert inspect.signature(lp.round).parameters["mode"].annotation in ("Mode", types.Mode)
