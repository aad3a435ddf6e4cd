"""Parameter sweeps: `sweep` runs a function at every point of a grid, with a seed each.

It runs here or on a Dask cluster and returns one record per point, in grid order.
A point's seed is a function of the sweep's ``seed`` and the point's own values only.
It is a SHA-256 digest of a canonical text of them, used as the spawn key of a
`numpy.random.SeedSequence`. It never depends on the point's position in the grid,
the process, the worker or the time. So a point's record is the same wherever and
with whatever other points it runs. This module never rounds anything itself and
imports nothing from lowprec: it only calls the user's function.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import itertools
import numbers
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["sweep", "point_seed", "grid_points", "RECORDS"]

#: The values of `sweep`'s ``records`` option.
RECORDS = ("auto", "list", "frame")


#: The deepest nesting of containers a grid value may have (far below Python's recursion
#: limit, which a deeper value would otherwise reach).
_MAX_DEPTH = 100


def _canonical(value: object, name: str, _inside: frozenset[int] = frozenset()) -> str:
    """A text of ``value`` that is the same in every process and session (no ``hash()``,
    no memory address): Python's ``repr`` for scalars and strings (``1``, ``1.0`` and
    ``True`` stay distinct), NumPy scalars as the Python scalar of the same value,
    containers item by item (sets and dict keys sorted), arrays by dtype, shape and a
    digest of their bytes, functions and classes by module and qualified name.
    ``_inside``: the ids of the containers being written, whose reappearance inside
    themselves raises `ValueError` (a self-referencing value has no finite text)."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, numbers.Number, str, bytes)):
        return repr(value)
    if isinstance(value, (tuple, list, set, frozenset, Mapping, np.ndarray)):
        if id(value) in _inside:
            raise ValueError(f"grid value of {name!r} refers to itself (a container "
                             f"that holds itself): a point's seed is derived from its "
                             f"values' text, which must be finite")
        if len(_inside) >= _MAX_DEPTH:
            raise ValueError(f"grid value of {name!r} nests containers more than "
                             f"{_MAX_DEPTH} deep: flatten it, or pass a name for it")
        _inside = _inside | {id(value)}

    def canon(v):
        return _canonical(v, name, _inside)

    if isinstance(value, tuple):
        return "(" + ",".join(canon(v) for v in value) + ",)"
    if isinstance(value, list):
        return "[" + ",".join(canon(v) for v in value) + "]"
    if isinstance(value, (set, frozenset)):
        return "{" + ",".join(sorted(canon(v) for v in value)) + "}"
    if isinstance(value, Mapping):
        items = sorted((canon(k), canon(v)) for k, v in value.items())
        return "{" + ",".join(f"{k}:{v}" for k, v in items) + "}"
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        digest = hashlib.sha256(data.view(np.uint8).tobytes() if data.dtype != object
                                else canon(data.tolist()).encode()).hexdigest()
        return f"ndarray({data.dtype.str},{data.shape},{digest})"
    if inspect.isfunction(value) or inspect.isclass(value) or inspect.isbuiltin(value):
        return f"{value.__module__}.{value.__qualname__}"
    text = repr(value)
    if " at 0x" in text or " object at " in text:
        raise TypeError(f"grid value of {name!r} has no stable repr ({text}): a point's "
                        f"seed is derived from its values' repr, which must not hold a "
                        f"memory address; use a name or a number instead")
    return f"{type(value).__qualname__}:{text}"


def point_seed(point: Mapping[str, Any], seed: int = 0) -> int:
    """The seed `sweep` gives the grid point ``point``: an int in [0, 2**63), a function
    of ``seed`` and the point's names and values only.

    The point's items, sorted by name, are written as a canonical text:

    * Numbers, strings, bools and None by Python's ``repr``.
    * NumPy scalars as the Python scalar.
    * Tuples, lists, sets and dicts item by item.
    * Arrays by dtype, shape and a SHA-256 of their bytes.

    The text's SHA-256 digest, as eight little-endian 32-bit words, is the
    ``spawn_key`` of ``np.random.SeedSequence(seed)``. The seed is that sequence's
    first 64-bit state word shifted right by one bit. Adding a value to the grid,
    reordering it or running it elsewhere never changes another point's seed.
    Values whose ``repr`` holds a memory address raise `TypeError`.

    Examples
    --------
    >>> point_seed({"fmt": "fp16", "K": 64}) == point_seed({"K": 64, "fmt": "fp16"})
    True
    >>> point_seed({"K": 64}) != point_seed({"K": 64}, seed=1)
    True
    >>> point_seed({"K": 64}) != point_seed({"K": 64.0})    # 64 and 64.0 differ
    True
    """
    _check_seed(seed)
    _check_point(point, "point")
    text = "(" + ",".join(f"{name!r}:{_canonical(point[name], name)}"
                          for name in sorted(point)) + ")"
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    words = tuple(int(w) for w in np.frombuffer(digest, dtype="<u4"))
    state = np.random.SeedSequence(int(seed), spawn_key=words).generate_state(1, np.uint64)
    return int(state[0]) >> 1


def _check_seed(seed: object) -> None:
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (numbers.Integral,
                                                                   np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__} {seed!r}")
    if seed < 0:
        raise ValueError(f"seed must be non-negative, got {seed!r}")


def _check_point(point: object, where: str) -> None:
    if not isinstance(point, Mapping):
        raise TypeError(f"{where} must be a dict of parameter name -> value, got "
                        f"{type(point).__name__} {point!r}")
    for name in point:
        if not isinstance(name, str):
            raise TypeError(f"{where}: parameter names must be str (they are passed as "
                            f"keywords), got {type(name).__name__} {name!r}")
        if name == "seed":
            raise ValueError(f"{where}: 'seed' is the name of the seed sweep derives for "
                             f"each point; give the parameter another name (a replicate "
                             f"index, say, which changes the seed too)")


def grid_points(grid: Mapping[str, Sequence[Any]] | Iterable[Mapping[str, Any]]
                ) -> list[dict[str, Any]]:
    """The points of ``grid``, in `sweep`'s order.

    A dict of name -> values gives the Cartesian product in the dict's order. The
    last name varies fastest, as in `itertools.product` and C order. A list of dicts
    gives the dicts as given.

    A dict's values must each be a list, tuple, range or 1-D array. A str, a scalar,
    a set (whose order is not stable) or an iterator raises `TypeError`. An empty
    dict, an empty list or an empty value list gives no points.

    Examples
    --------
    >>> for point in grid_points({"fmt": ["fp16", "bf16"], "K": [64, 256]}):
    ...     print(point)
    {'fmt': 'fp16', 'K': 64}
    {'fmt': 'fp16', 'K': 256}
    {'fmt': 'bf16', 'K': 64}
    {'fmt': 'bf16', 'K': 256}
    >>> grid_points([{"K": 1}, {"K": 2, "fmt": "e4m3"}])
    [{'K': 1}, {'K': 2, 'fmt': 'e4m3'}]
    >>> grid_points({"K": 64})
    Traceback (most recent call last):
    ...
    TypeError: grid['K'] must be a list of values (a list, tuple, range or 1-D array), got int 64
    """
    if isinstance(grid, Mapping):
        _check_point(grid, "grid")
        values = []
        for name, vals in grid.items():
            if isinstance(vals, np.ndarray) and vals.ndim == 1:
                vals = list(vals)
            elif not isinstance(vals, (list, tuple, range)):
                raise TypeError(f"grid[{name!r}] must be a list of values (a list, tuple, "
                                f"range or 1-D array), got {type(vals).__name__} {vals!r}")
            values.append(list(vals))
        if not values:
            return []
        names = list(grid)
        return [dict(zip(names, combo)) for combo in itertools.product(*values)]
    if isinstance(grid, (str, bytes)) or not isinstance(grid, Iterable):
        raise TypeError(f"grid must be a dict of name -> list of values or a list of dicts, "
                        f"got {type(grid).__name__} {grid!r}")
    points = []
    for i, point in enumerate(grid):
        _check_point(point, f"grid[{i}]")
        points.append(dict(point))
    return points


def _takes_seed(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` has a parameter named ``seed`` that can be passed by keyword
    (a ``**kwargs`` alone does not count)."""
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):     # builtins without a signature
        return False
    p = parameters.get("seed")
    return p is not None and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)


def _call(fn: Callable[..., Any], point: dict[str, Any], seed: int, *, pass_seed: bool) -> Any:
    """One point's result: what runs on a worker (module-level, so it pickles by name)."""
    return fn(**point, seed=seed) if pass_seed else fn(**point)


def _record(point: dict[str, Any], seed: int, result: Any, index: int) -> dict[str, Any]:
    record = dict(point)
    record["seed"] = seed
    items = result.items() if isinstance(result, Mapping) else [("result", result)]
    for key, value in items:
        if key in record:
            raise ValueError(f"the result at grid point {index} {point!r} has a key "
                             f"{key!r}, which is also a parameter or 'seed'; rename it")
        record[key] = value
    return record


def _name_point(exc: BaseException, index: int, count: int, point: dict[str, Any],
                seed: int) -> BaseException:
    """``exc`` with a note naming the grid point where it was raised (PEP 678; on
    Python 3.10 the note is set on ``__notes__``, which tracebacks there do not show)."""
    note = f"lowprec.sweep: raised at grid point {index} of {count}: {point!r} (seed={seed})"
    add_note = getattr(exc, "add_note", None)
    if add_note is not None:
        add_note(note)
    else:                                           # pragma: no cover (Python 3.10)
        exc.__notes__ = [*getattr(exc, "__notes__", []), note]  # type: ignore[attr-defined]
    return exc


def _run_local(fn, points, seeds, pass_seed):
    results = []
    for i, (point, seed) in enumerate(zip(points, seeds)):
        try:
            results.append(_call(fn, point, seed, pass_seed=pass_seed))
        except Exception as exc:    # noqa: BLE001 (re-raised at once, naming the point)
            raise _name_point(exc, i, len(points), point, seed) from None
    return results


def _run_on(client, fn, points, seeds, pass_seed):
    from distributed import wait

    if not points:
        return []
    # One task per point, under its own key (equal points are not merged into one).
    name = getattr(fn, "__name__", type(fn).__name__)
    token = uuid.uuid4().hex
    keys = [f"lowprec-sweep-{name}-{token}-{i}" for i in range(len(points))]
    futures = client.map(functools.partial(_call, fn, pass_seed=pass_seed), points, seeds,
                         key=keys)
    try:
        wait(futures)
        for i, future in enumerate(futures):
            if future.status == "error":
                exc = future.exception()
                raise _name_point(exc, i, len(points), points[i], seeds[i]).with_traceback(
                    future.traceback())
        return client.gather(futures)
    finally:
        client.cancel(futures)


def sweep(fn: Callable[..., Any],
          grid: Mapping[str, Sequence[Any]] | Iterable[Mapping[str, Any]], *,
          client: Any = None, seed: int = 0, records: str = "auto") -> Any:
    """Run ``fn(**point)`` at every point of ``grid``, here or on a Dask cluster, and
    return one record per point, in grid order.

    Parameters
    ----------
    fn : callable
        Called with each point's parameters as keywords, and with ``seed=`` (the point's
        seed) when it has a parameter named ``seed`` (not through ``**kwargs`` alone).
        On a cluster it is pickled (cloudpickle) and run in the workers' processes.
    grid : dict of name -> list of values, or list of dicts
        A dict gives the Cartesian product of its value lists, in the dict's order.
        The last name varies fastest (`itertools.product`'s order). A list of dicts
        gives those points, in its order. Values are lists, tuples, ranges or 1-D
        arrays, and anything else raises `TypeError`. An empty grid gives no records.
        No parameter may be named ``seed``.
    client : dask.distributed.Client, optional
        Run the points as tasks of this client's cluster (one task each, not merged
        even when two points are equal), gathered in grid order. None: one after the
        other, in this process.
    seed : int
        The sweep's seed (non-negative). Each point's seed is
        `point_seed(point, seed)`, a function of ``seed`` and the point's values
        only. So a point gets the same seed in any grid, in any order, locally or on
        any cluster.
    records : {"auto", "list", "frame"}
        * "list": a list of dicts.
        * "frame": a `pandas.DataFrame` (pandas required).
        * "auto": a DataFrame when pandas is installed, else a list.

    Returns
    -------
    list of dict or pandas.DataFrame
        One record per point: its parameters, ``seed``, then the result. A dict
        result gives its items, and a key equal to a parameter's name or ``seed``
        raises `ValueError`. Any other result goes under ``"result"``.

    Raises
    ------
    Exception
        The first exception in grid order that ``fn`` raised, as it was raised (on a
        worker too), with a note naming the point, its index and its seed.

    Examples
    --------
    >>> import numpy as np
    >>> def noise(scale, n, seed):
    ...     return {"mean": float(np.random.default_rng(seed).normal(0, scale, n).mean())}
    >>> rows = sweep(noise, {"scale": [1.0, 2.0], "n": [10, 1000]}, records="list")
    >>> [(r["scale"], r["n"]) for r in rows]
    [(1.0, 10), (1.0, 1000), (2.0, 10), (2.0, 1000)]
    >>> again = sweep(noise, [{"n": 1000, "scale": 2.0}], records="list")
    >>> again[0] == rows[3]             # the same point: the same seed and result
    True
    >>> sweep(lambda x: x * x, {"x": [1, 2, 3]}, records="list")[2]["result"]
    9
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__} {fn!r}")
    _check_seed(seed)
    if records not in RECORDS:
        raise ValueError(f"records must be one of {RECORDS}, got {records!r}")
    frame = None
    if records != "list":
        try:
            frame = importlib.import_module("pandas")
        except ImportError:
            if records == "frame":
                raise ImportError("records='frame' needs pandas, which is not installed; "
                                  "use records='list'") from None
    if client is not None and not (callable(getattr(client, "map", None))
                                   and callable(getattr(client, "gather", None))):
        raise TypeError(f"client must be a dask.distributed.Client or None, got "
                        f"{type(client).__name__} {client!r}")
    points = grid_points(grid)
    seeds = [point_seed(point, seed) for point in points]
    pass_seed = _takes_seed(fn)
    if client is None:
        results = _run_local(fn, points, seeds, pass_seed)
    else:
        results = _run_on(client, fn, points, seeds, pass_seed)
    rows = [_record(point, s, result, i)
            for i, (point, s, result) in enumerate(zip(points, seeds, results))]
    if frame is None:
        return rows
    return frame.DataFrame.from_records(rows) if rows else frame.DataFrame()
