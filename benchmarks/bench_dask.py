"""`lowprec.daskarrays` on a two-worker LocalCluster against single-process lowprec.

A ``fp32``-model matmul (2048^3, 256^3 with ``--quick``) as a Dask graph of 2x2
output blocks with K in two chained chunks, on ``LocalCluster(n_workers=2,
processes=True, threads_per_worker=1)`` (loopback), against one ``lp.matmul`` call
in this process; the result is checked bit for bit. Then the overhead per task:
a graph of many one-element `round` blocks, its time per task less one
``lp.round`` call's; and a 100-point `lp.sweep` here and on the cluster. Skipped,
with a line saying so, without the ``dask`` extra.
"""

from __future__ import annotations

import time

import numpy as np

import lowprec as lp


def _once(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main(quick=False):
    try:
        import dask.array as da
        from dask.distributed import Client, LocalCluster
    except ImportError:
        print('  skipped: needs the dask extra (pip install -e ".[dask]")')
        return
    import lowprec.daskarrays as lpd

    n = 256 if quick else 2048
    g = np.random.default_rng(0)
    a = lp.round(g.standard_normal((n, n)), "bf16")
    b = lp.round(g.standard_normal((n, n)), "bf16")
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                      dashboard_address=None, host="127.0.0.1") as cluster, \
            Client(cluster) as client:
        t_one, want = _once(lambda: lp.matmul(a, b, model="fp32", in_fmt="bf16"))
        A = client.scatter(a, broadcast=True)
        B = client.scatter(b, broadcast=True)
        A = da.from_delayed(A, shape=a.shape, dtype=a.dtype).rechunk((n // 2, n // 2))
        B = da.from_delayed(B, shape=b.shape, dtype=b.dtype).rechunk((n // 2, n // 2))
        graph = lpd.matmul(A, B, model="fp32", in_fmt="bf16")
        client.compute(graph).result()                      # warm the workers
        t_two, got = _once(lambda: np.asarray(client.compute(graph).result()))
        same = np.array_equal(got.view(np.uint64), np.asarray(want).view(np.uint64))
        print(f"  {n}x{n}x{n} fp32 model, BF16 inputs: one process {t_one:.2f} s, "
              f"2-worker LocalCluster (4 output blocks x 2 K chunks) {t_two:.2f} s, "
              f"speed-up {t_one / t_two:.2f}x, bit-identical: {same}")

        tasks = 200 if quick else 1000
        x = da.from_array(g.standard_normal(tasks), chunks=1)
        y = lpd.round(x, "bf16")
        client.compute(y).result()
        t_graph, _ = _once(lambda: client.compute(y).result())
        t_call = min(_once(lambda: lp.round(np.ones(1), "bf16"))[0] for _ in range(50))
        print(f"  overhead per task: {(t_graph / tasks - t_call) * 1e3:.2f} ms "
              f"({tasks} one-element round blocks, {t_graph:.2f} s; one lp.round "
              f"{t_call * 1e6:.0f} us)")

        # A sweep of 100 points (5 formats x 4 models x 5 sizes), here and on the cluster.
        grid = {"fmt": ["fp16", "bf16", "e4m3", "e5m2", "tf32"],
                "model": ["exact", "fp32", "h100", "b200"], "k": [16, 32, 64, 128, 256]}
        t_local, here = _once(lambda: lp.sweep(_sweep_point, grid, records="list"))
        lp.sweep(_sweep_point, grid, client=client, records="list")      # warm
        t_cl, there = _once(lambda: lp.sweep(_sweep_point, grid, client=client,
                                             records="list"))
        print(f"  sweep of {len(here)} points: here {t_local:.2f} s, 2-worker LocalCluster "
              f"{t_cl:.2f} s, overhead per task {(t_cl - t_local / 2) / len(here) * 1e3:.1f} "
              f"ms, same records: {here == there}")


def _sweep_point(fmt, model, k, seed):
    """The error of one product against its exact value (a point of the sweep)."""
    g = np.random.default_rng(seed)
    a = lp.round(g.random((16, k)), fmt)
    b = lp.round(g.random((k, 16)), fmt)
    in_fmt = fmt if model != "b200" or fmt != "tf32" else "fp16"
    got = lp.matmul(a, b, model=model, in_fmt=in_fmt)
    ref = np.asarray(a) @ np.asarray(b)
    return {"err": float(np.max(np.abs(got - ref) / np.abs(ref)))}


if __name__ == "__main__":
    import sys
    main(quick="--quick" in sys.argv)
