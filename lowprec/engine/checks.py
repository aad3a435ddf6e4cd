"""Argument checks shared by every layer: one rule, one message, for each kind of option.

A wrong-typed option must never change a result silently. (``subnormals="no"`` is
truthy, and ``mode=""`` is falsy.) Each check raises:

- `TypeError`, naming the argument, for a value of the wrong type.
- `ValueError` for a value of the right type that is not allowed.

`broadcast_shape` checks that operand shapes broadcast, for any number of dimensions.
This module imports only `lowprec.types` and holds no state.
"""

from __future__ import annotations

import numbers
from collections.abc import Collection
from typing import Any, Literal, TypeGuard, get_args, overload

import numpy as np

from ..types import Mode

__all__ = ["MODES", "is_int", "check_bool", "check_mode", "check_choice", "check_rng",
           "as_generator", "check_int", "broadcast_shape"]

#: The rounding modes, in the order the docs list them (the strings of `Mode`).
MODES: tuple[Mode, ...] = get_args(Mode)


def is_int(value: object) -> TypeGuard[int | np.integer[Any]]:
    """Whether ``value`` is a Python or NumPy integer (bools are not)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


@overload
def check_bool(name: str, value: object, *, optional: Literal[False] = False) -> bool: ...
@overload
def check_bool(name: str, value: object, *, optional: bool) -> bool | None: ...


def check_bool(name: str, value: object, *, optional: bool = False) -> bool | None:
    """``value`` as a bool, or None when ``optional``.

    Anything else raises `TypeError` naming ``name``.

    Examples
    --------
    >>> check_bool("saturate", True), check_bool("subnormals", None, optional=True)
    (True, None)
    >>> check_bool("subnormals", "no")
    Traceback (most recent call last):
    ...
    TypeError: subnormals must be a bool, got str 'no'
    """
    if value is None and optional:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    allowed = "a bool or None" if optional else "a bool"
    raise TypeError(f"{name} must be {allowed}, got {type(value).__name__} {value!r}")


def check_mode(mode: object, name: str = "mode") -> Mode:
    """``mode`` if it is one of `MODES`.

    A non-string raises `TypeError`, an unknown name `ValueError`.

    Examples
    --------
    >>> check_mode("rz")
    'rz'
    >>> check_mode(0)
    Traceback (most recent call last):
    ...
    TypeError: mode must be a str, one of rne, rna, rz, ru, rd, ro, sr; got int 0
    """
    if not isinstance(mode, str):
        raise TypeError(f"{name} must be a str, one of {', '.join(MODES)}; "
                        f"got {type(mode).__name__} {mode!r}")
    if mode not in MODES:
        raise ValueError(f"unknown rounding mode {mode!r}; valid modes: {', '.join(MODES)}")
    return mode


def check_choice(name: str, value: object, valid: Collection[str]) -> str:
    """``value`` if it is one of the names ``valid``: `TypeError` for a non-string,
    `ValueError` for another string.

    Examples
    --------
    >>> check_choice("kind", "z", ("x", "w"))
    Traceback (most recent call last):
    ...
    ValueError: unknown kind: kind must be one of x, w, got 'z'
    """
    names = ", ".join(valid)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, one of {names}; got "
                        f"{type(value).__name__} {value!r}")
    if value not in valid:
        raise ValueError(f"unknown {name}: {name} must be one of {names}, got {value!r}")
    return value


def check_rng(rng: object, name: str = "rng") -> None:
    """`TypeError` unless ``rng`` is None, an int seed or a `numpy.random.Generator`
    (checked whatever the mode: an rng that could never be used is still a mistake).

    Examples
    --------
    >>> check_rng(0); check_rng(None); check_rng(np.random.default_rng(1))
    >>> check_rng(True)
    Traceback (most recent call last):
    ...
    TypeError: rng must be a numpy.random.Generator, an int seed or None, got bool True
    """
    if rng is None or isinstance(rng, np.random.Generator):
        return
    if isinstance(rng, (numbers.Integral, np.integer)) and not isinstance(rng, (bool, np.bool_)):
        if rng < 0:
            raise ValueError(f"{name} seed must be non-negative, got {rng!r}")
        return
    raise TypeError(f"{name} must be a numpy.random.Generator, an int seed or None, "
                    f"got {type(rng).__name__} {rng!r}")


def as_generator(rng: object, name: str = "rng") -> np.random.Generator:
    """``rng`` checked by `check_rng`, as a Generator: itself, or ``default_rng(seed)``
    (None: fresh entropy). The one coercion every option ``rng`` goes through.

    Examples
    --------
    >>> g = np.random.default_rng(1)
    >>> as_generator(g) is g, as_generator(5).random() == np.random.default_rng(5).random()
    (True, True)
    """
    check_rng(rng, name)
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)  # type: ignore[arg-type]


def check_int(name: str, value: object, *, minimum: int | None = None) -> int:
    """``value`` as a Python int.

    Non-integers (bools included) raise `TypeError`, values below ``minimum``
    `ValueError`.

    Examples
    --------
    >>> check_int("steps", np.int64(3), minimum=0)
    3
    >>> check_int("steps", -1, minimum=0)
    Traceback (most recent call last):
    ...
    ValueError: steps must be at least 0, got -1
    """
    if (not isinstance(value, (numbers.Integral, np.integer))
            or isinstance(value, (bool, np.bool_))):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value!r}")
    return value


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The shape NumPy broadcasts ``shapes`` to, for any number of dimensions.

    `numpy.broadcast_shapes` (through `numpy.nditer`) stops at 32 dimensions, where
    arrays and ufuncs go to 64. `ValueError` naming the shapes when they do not broadcast.

    Examples
    --------
    >>> broadcast_shape((3, 1), (1, 4), ())
    (3, 4)
    """
    ndim = max(len(s) for s in shapes)
    out = [1] * ndim
    for s in shapes:
        for i, d in enumerate(s, ndim - len(s)):
            if d != 1:
                if out[i] not in (1, d):
                    raise ValueError("operands could not be broadcast together with shapes "
                                     + " ".join(str(tuple(t)) for t in shapes))
                out[i] = d
    return tuple(out)
