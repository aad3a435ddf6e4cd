"""`lp.sweep` (lowprec/sweeps.py): grid order, per-point seeds, records, errors, and the
same records locally and on a two-process Dask `LocalCluster` (started once for the
module, skipped without dask.distributed).

Oracles: `itertools.product` and the points as written for the order; the documented
seed construction (SHA-256 of the canonical text, `SeedSequence` spawn key) computed
here with hashlib and NumPy for the seeds; a fresh interpreter with another hash seed
for their stability; the local run for the cluster's records.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

from lowprec.sweeps import grid_points, point_seed, sweep

HAS_PANDAS = importlib.util.find_spec("pandas") is not None


def noisy(fmt, K, seed):
    """A result that depends on the seed: a different seed, a different record."""
    rng = np.random.default_rng(seed)
    return {"mean": float(rng.random(K).mean()), "label": f"{fmt}-{K}"}


def plain(a, b):
    return a * b


def keyword_seed(a, *, seed=None):
    return seed


def kwargs_only(a, **kwargs):
    return sorted(kwargs)


def fails_at_three(a):
    if a == 3:
        raise ZeroDivisionError(f"a={a}")
    return a


def fails_everywhere(a):
    raise KeyError(a)


GRID = {"fmt": ["fp16", "bf16", "e4m3"], "K": [8, 64]}


# ---- grid order ---------------------------------------------------------------------

def test_dict_grid_is_the_cartesian_product_last_name_fastest():
    rows = sweep(plain, {"a": [1, 2, 3], "b": [10, 20]}, records="list")
    assert [(r["a"], r["b"]) for r in rows] == list(itertools.product([1, 2, 3], [10, 20]))
    assert [r["result"] for r in rows] == [10, 20, 20, 40, 30, 60]
    assert [list(r) for r in rows] == [["a", "b", "seed", "result"]] * 6


def test_list_grid_keeps_the_points_as_given():
    points = [{"b": 2, "a": 5}, {"a": 1, "b": 1}, {"a": 5, "b": 2}]
    rows = sweep(plain, points, records="list")
    assert [(r["a"], r["b"], r["result"]) for r in rows] == [(5, 2, 10), (1, 1, 1), (5, 2, 10)]
    # the same point written in another key order has the same seed
    assert rows[0]["seed"] == rows[2]["seed"] != rows[1]["seed"]


def test_grid_values_may_be_tuples_ranges_and_arrays():
    rows = sweep(plain, {"a": range(2), "b": np.array([3, 4])}, records="list")
    assert [(r["a"], r["b"]) for r in rows] == [(0, 3), (0, 4), (1, 3), (1, 4)]
    assert grid_points({"a": (1, 2)}) == [{"a": 1}, {"a": 2}]


@pytest.mark.parametrize("grid", [{}, [], {"a": [1, 2], "b": []}])
def test_an_empty_grid_gives_no_records(grid):
    assert sweep(plain, grid, records="list") == []


def test_the_grid_is_not_modified():
    grid = {"fmt": ["fp16"], "K": [8, 64]}
    points = [{"fmt": "fp16", "K": 8}]
    sweep(noisy, grid, records="list")
    sweep(noisy, points, records="list")
    assert grid == {"fmt": ["fp16"], "K": [8, 64]}
    assert points == [{"fmt": "fp16", "K": 8}]


# ---- seeds --------------------------------------------------------------------------

def _documented_seed(text, seed):
    """point_seed's docstring, step by step: SHA-256 of the canonical text, its eight
    little-endian 32-bit words as the SeedSequence's spawn key, the first 64-bit state
    word shifted right by one."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    key = tuple(int.from_bytes(digest[i:i + 4], "little") for i in range(0, 32, 4))
    word = np.random.SeedSequence(seed, spawn_key=key).generate_state(1, np.uint64)[0]
    return int(word) // 2


def test_the_seed_is_the_documented_construction():
    # names sorted; values by repr; numpy scalars as Python scalars
    assert point_seed({"fmt": "fp16", "K": 64}, 7) == _documented_seed("('K':64,'fmt':'fp16')", 7)
    assert point_seed({"K": np.int64(64), "fmt": np.str_("fp16")}, 7) == \
        _documented_seed("('K':64,'fmt':'fp16')", 7)
    assert point_seed({"x": (1, 2.5)}) == _documented_seed("('x':(1,2.5,))", 0)
    assert 0 <= point_seed({"x": 1}) < 2**63


def test_a_points_seed_depends_only_on_the_seed_and_its_values():
    small = sweep(noisy, GRID, records="list")
    bigger = {"K": [512, 64, 8], "fmt": ["e5m2", "e4m3", "bf16", "fp16"]}
    large = {(r["fmt"], r["K"]): r for r in sweep(noisy, bigger, records="list")}
    for r in small:
        assert large[r["fmt"], r["K"]] == r                 # same seed, same result
    seeds = [r["seed"] for r in large.values()]
    assert len(set(seeds)) == len(seeds)
    shifted = sweep(noisy, GRID, seed=1, records="list")
    assert all(a["seed"] != b["seed"] and a["mean"] != b["mean"]
               for a, b in zip(small, shifted))


def test_values_of_different_types_get_different_seeds():
    values = [1, 1.0, True, "1", (1,), [1], None, np.float32(0.1), 0.1]
    seeds = {point_seed({"x": v}) for v in values}
    assert len(seeds) == len(values)


def test_seeds_are_the_same_in_another_interpreter_with_another_hash_seed():
    point = {"names": frozenset({"alpha", "beta", "gamma", "delta"}), "fmt": "bf16",
             "shape": (3, 4), "options": {"b": 2.5, "a": None}}
    code = ("from lowprec.sweeps import point_seed; "
            "print(point_seed({'names': frozenset({'delta', 'gamma', 'beta', 'alpha'}), "
            "'fmt': 'bf16', 'shape': (3, 4), 'options': {'a': None, 'b': 2.5}}, 3))")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert int(out) == point_seed(point, 3)


def test_seed_is_passed_only_when_fn_has_a_seed_parameter():
    rows = sweep(keyword_seed, {"a": [1, 2]}, records="list")
    assert [r["result"] for r in rows] == [r["seed"] for r in rows]
    rows = sweep(kwargs_only, {"a": [1]}, records="list")   # **kwargs alone: no seed
    assert rows[0]["result"] == [] and "seed" in rows[0]
    rows = sweep(plain, {"a": [2], "b": [3]}, records="list")      # would raise if passed
    assert rows[0]["result"] == 6


# ---- records ------------------------------------------------------------------------

def test_a_dict_result_is_merged_and_a_clash_refused():
    rows = sweep(noisy, {"fmt": ["fp16"], "K": [8]}, records="list")
    assert list(rows[0]) == ["fmt", "K", "seed", "mean", "label"]
    with pytest.raises(ValueError, match="key 'a'.*also a parameter"):
        sweep(lambda a: {"a": 1}, {"a": [0]}, records="list")
    with pytest.raises(ValueError, match="key 'seed'"):
        sweep(lambda a: {"seed": 1}, {"a": [0]}, records="list")


def test_records_auto_is_a_frame_only_with_pandas():
    rows = sweep(plain, {"a": [1, 2], "b": [3]}, records="auto")
    if HAS_PANDAS:
        import pandas as pd
        assert isinstance(rows, pd.DataFrame)
        assert rows.to_dict("records") == sweep(plain, {"a": [1, 2], "b": [3]},
                                                records="list")
        assert isinstance(sweep(plain, {"a": [1], "b": [3]}, records="frame"), pd.DataFrame)
    else:
        assert isinstance(rows, list)
        with pytest.raises(ImportError, match="needs pandas"):
            sweep(plain, {"a": [1], "b": [3]}, records="frame")


# ---- errors -------------------------------------------------------------------------

@pytest.mark.parametrize("grid, error, match", [
    ({"a": 1}, TypeError, r"grid\['a'\] must be a list"),
    ({"a": "abc"}, TypeError, r"grid\['a'\] must be a list"),
    ({"a": {1, 2}}, TypeError, r"grid\['a'\] must be a list"),
    ({"a": (x for x in [1])}, TypeError, r"grid\['a'\] must be a list"),
    ({"a": np.zeros((2, 2))}, TypeError, r"grid\['a'\] must be a list"),
    ({1: [1]}, TypeError, "names must be str"),
    ({"seed": [1, 2]}, ValueError, "'seed' is the name"),
    ([{"a": 1}, 5], TypeError, r"grid\[1\] must be a dict"),
    ([{"seed": 1}], ValueError, "'seed' is the name"),
    ("a", TypeError, "grid must be a dict"),
    (5, TypeError, "grid must be a dict"),
    ({"a": [object()]}, TypeError, "no stable repr"),
])
def test_bad_grids_are_refused(grid, error, match):
    with pytest.raises(error, match=match):
        sweep(plain, grid)


def test_self_referencing_values_are_refused():
    # A container holding itself has no finite text to derive a seed from
    looped = []
    looped.append(looped)
    mapping = {}
    mapping["me"] = mapping
    objects = np.empty(1, dtype=object)
    objects[0] = objects
    for value in (looped, mapping, objects, (1, [looped])):
        with pytest.raises(ValueError, match="grid value of 'x' refers to itself"):
            point_seed({"x": value})
        with pytest.raises(ValueError, match="refers to itself"):
            sweep(plain_x, [{"x": value}], records="list")
    with pytest.raises(ValueError, match="refers to itself"):
        sweep(plain_x, {"x": [1, looped]}, records="list")
    deep = [1.0]
    for _ in range(5000):    # no loop, but deeper than Python's recursion limit
        deep = [deep]
    with pytest.raises(ValueError, match="more than 100 deep"):
        point_seed({"x": deep})
    shared = [1.5]           # the same list twice is no loop: the text of [[1.5],[1.5]]
    assert point_seed({"x": [shared, shared]}) == point_seed({"x": [[1.5], [1.5]]})


def plain_x(x):
    return 0


def test_bad_options_are_refused():
    with pytest.raises(TypeError, match="fn must be callable"):
        sweep(5, {"a": [1]})
    with pytest.raises(TypeError, match="seed must be an int"):
        sweep(plain, {"a": [1]}, seed=1.5)
    with pytest.raises(TypeError, match="seed must be an int"):
        sweep(plain, {"a": [1]}, seed=True)
    with pytest.raises(ValueError, match="seed must be non-negative"):
        sweep(plain, {"a": [1]}, seed=-1)
    with pytest.raises(ValueError, match="records must be one of"):
        sweep(plain, {"a": [1]}, records="dict")
    with pytest.raises(TypeError, match="client must be a dask"):
        sweep(plain, {"a": [1]}, client="tcp://127.0.0.1:8786")


def test_the_first_failing_point_is_reraised_naming_it():
    with pytest.raises(ZeroDivisionError, match="a=3") as info:
        sweep(fails_at_three, {"a": [1, 2, 3, 4, 3]})
    note = "".join(getattr(info.value, "__notes__", []))
    assert "grid point 2 of 5: {'a': 3}" in note
    assert f"seed={point_seed({'a': 3})}" in note


# ---- on a Dask cluster --------------------------------------------------------------

@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("dask.distributed")
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def test_the_cluster_gives_the_local_records(client):
    grid = {"fmt": ["fp16", "bf16", "e4m3"], "K": [8, 64, 512]}
    assert sweep(noisy, grid, client=client, seed=5, records="list") == \
        sweep(noisy, grid, seed=5, records="list")
    points = [{"a": 2, "b": 3}, {"a": 2, "b": 3}, {"b": 1, "a": 7}]   # equal points both run
    assert sweep(plain, points, client=client, records="list") == \
        sweep(plain, points, records="list")
    assert sweep(plain, {}, client=client, records="list") == []


def test_the_cluster_runs_points_in_other_processes(client):
    # a closure (pickled by value) and the seed keyword reach the workers
    offset = 100
    rows = sweep(lambda a, seed: (os.getpid(), seed + offset), {"a": list(range(8))},
                 client=client, records="list")
    assert [r["result"][1] for r in rows] == [r["seed"] + offset for r in rows]
    assert os.getpid() not in {r["result"][0] for r in rows}


def test_the_cluster_reraises_the_first_failing_point(client):
    with pytest.raises(ZeroDivisionError, match="a=3") as info:
        sweep(fails_at_three, {"a": [1, 2, 3, 4, 3]}, client=client)
    assert "grid point 2 of 5: {'a': 3}" in "".join(getattr(info.value, "__notes__", []))
    with pytest.raises(KeyError) as info:
        sweep(fails_everywhere, {"a": [5, 6]}, client=client)
    assert "grid point 0 of 2: {'a': 5}" in "".join(getattr(info.value, "__notes__", []))
