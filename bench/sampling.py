"""Neighbour-sampling throughput: seeds/s and sampled edges/s, ours vs baselines.

    python -m bench.sampling            # 100k/2M and 1M/20M power-law graphs
    python -m bench.sampling --smoke    # a 20k-node graph, a few batches (seconds)

Fanouts [15, 10, 5] (PyG order), batch 1024, uniform without replacement, on the
synthetic power-law generator (``gnntrain.data.synthetic``). Rows: ours single-thread
(``NeighborSampler.sample``), ours on all cores (``iter_batches(num_threads=T)``), a
vectorised-numpy sampler (random keys + lexsort per hop, ``np.unique`` relabel: the
usual pure-numpy approach) as the always-available baseline, and DGL's
``NeighborSampler`` (fanouts [5, 10, 15], input layer first) in a subprocess when
``GNNTRAIN_DGL_PYTHON`` names a Python that has DGL. Ratios are against DGL at the same
thread count when it ran, else against the numpy baseline. JSON goes to bench/out/.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from gnntrain.config import SyntheticConfig
from gnntrain.data.synthetic import generate
from samplers import CSRSource, NeighborSampler

FANOUTS = [15, 10, 5]
BATCH = 1024
OUT = Path(__file__).resolve().parent / "out"
RECORDED_DGL = {"100k/2M": 60_000, "1M/20M": 23_000}  # seeds/s, 1 thread, measured before


def numpy_baseline(indptr: np.ndarray, indices: np.ndarray, seeds: np.ndarray,
                   rng: np.random.Generator) -> int:
    """Vectorised numpy sampler with DGL's MFG semantics; returns the sampled edge count."""
    nodes = seeds
    total = 0
    for f in FANOUTS:
        deg = indptr[nodes + 1] - indptr[nodes]
        first = np.cumsum(deg) - deg
        row = np.repeat(np.arange(nodes.size), deg)
        rank = np.arange(row.size) - first[row]
        eidx = indptr[nodes][row] + rank
        order = np.lexsort((rng.random(row.size), row))  # random order inside each row
        keep = order[rank < f]  # rank of the sorted position = position within the row
        nbr, dst = indices[eidx[keep]], row[keep]
        allv = np.concatenate([nodes, nbr])
        uniq, first_at, inv = np.unique(allv, return_index=True, return_inverse=True)
        new_order = np.argsort(first_at, kind="stable")  # nodes first, then first-seen order
        local = np.empty(uniq.size, dtype=np.int64)
        local[new_order] = np.arange(uniq.size)
        _src_local = local[inv[nodes.size:]]
        nodes = uniq[new_order]
        total += int(dst.size)
    return total


def _time_ours(sampler: NeighborSampler, seeds: np.ndarray, n_batches: int,
               threads: int, repeats: int) -> dict[str, float]:
    use = seeds[:n_batches * BATCH]
    best = float("inf")
    edges = 0
    for r in range(repeats):
        t0 = time.perf_counter()
        if threads == 1:
            edges = 0
            for i in range(n_batches):
                edges += sampler.sample(use[i * BATCH:(i + 1) * BATCH], key=r * 100_003 + i)\
                    .num_sampled_edges
        else:
            edges = sum(b.num_sampled_edges for b in sampler.iter_batches(
                use, BATCH, key=r, shuffle=False, num_threads=threads))
        best = min(best, time.perf_counter() - t0)
    return {"seeds_per_s": use.size / best, "edges_per_s": edges / best, "seconds": best}


def _time_numpy(indptr: np.ndarray, indices: np.ndarray, seeds: np.ndarray,
                n_batches: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    numpy_baseline(indptr, indices, seeds[:BATCH], rng)
    t0 = time.perf_counter()
    edges = sum(numpy_baseline(indptr, indices, seeds[i * BATCH:(i + 1) * BATCH], rng)
                for i in range(n_batches))
    dt = time.perf_counter() - t0
    return {"seeds_per_s": n_batches * BATCH / dt, "edges_per_s": edges / dt, "seconds": dt}


DGL_SCRIPT = r"""
import json, os, sys, time
import numpy as np, torch, dgl
path, n_batches, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
d = np.load(path)
indptr, indices, seeds = (torch.from_numpy(d[k]) for k in ("indptr", "indices", "seeds"))
n = indptr.numel() - 1
g = dgl.graph(("csc", (indptr, indices, torch.tensor([], dtype=torch.int64))), num_nodes=n)
g.create_formats_()
sampler = dgl.dataloading.NeighborSampler([5, 10, 15])  # DGL: input layer first
bs = 1024
sampler.sample_blocks(g, seeds[:bs])
t0 = time.perf_counter(); edges = 0
for i in range(n_batches):
    _, _, blocks = sampler.sample_blocks(g, seeds[i * bs:(i + 1) * bs])
    edges += sum(b.num_edges() for b in blocks)
dt = time.perf_counter() - t0
print(json.dumps({"seeds_per_s": n_batches * bs / dt, "edges_per_s": edges / dt,
                  "seconds": dt, "dgl": dgl.__version__}))
"""


def _time_dgl(python: str, indptr: np.ndarray, indices: np.ndarray, seeds: np.ndarray,
              n_batches: int, threads: int) -> dict[str, Any] | None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "g.npz"
        np.savez(path, indptr=indptr, indices=indices, seeds=seeds)
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        try:
            out = subprocess.run([python, "-c", DGL_SCRIPT, str(path), str(n_batches), str(threads)],
                                 capture_output=True, text=True, env=env, timeout=1800, check=True)
        except (subprocess.SubprocessError, OSError) as e:
            err = getattr(e, "stderr", "") or str(e)
            print(f"  DGL run failed: {err.strip().splitlines()[-1] if err.strip() else e}")
            return None
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def run_graph(label: str, nodes: int, n_batches: int, np_batches: int, threads: int,
              repeats: int, dgl_python: str | None) -> list[dict[str, Any]]:
    t0 = time.perf_counter()
    g = generate(SyntheticConfig(nodes=nodes, avg_degree=20.0, features=1, classes=2,
                                 power_law=2.5, seed=0), name=label)
    print(f"{label}: {g.num_nodes:,} nodes, {g.num_edges:,} edges, max in-degree "
          f"{int(g.in_degrees().max()):,} (generated in {time.perf_counter() - t0:.1f}s)")
    seeds = np.random.default_rng(1).permutation(g.num_nodes)
    n_batches = min(n_batches, seeds.size // BATCH)
    sampler = NeighborSampler(CSRSource(g.indptr, g.indices), FANOUTS)
    sampler.sample(seeds[:BATCH], key=0)  # compile / load the numba cache
    rows: list[dict[str, Any]] = []
    for t in sorted({1, threads}):
        rows.append({"graph": label, "impl": "ours", "threads": t,
                     **_time_ours(sampler, seeds, n_batches, t, repeats)})
    rows.append({"graph": label, "impl": "numpy", "threads": 1,
                 **_time_numpy(g.indptr, g.indices, seeds, min(np_batches, n_batches))})
    if dgl_python:
        for t in sorted({1, threads}):
            res = _time_dgl(dgl_python, g.indptr, g.indices, seeds, n_batches, t)
            if res is not None:
                rows.append({"graph": label, "impl": "dgl", "threads": t, **res})
    return rows


def _ratios(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        dgl = [d for d in rows if d["graph"] == r["graph"] and d["impl"] == "dgl"
               and d["threads"] == r["threads"]]
        base = dgl[0] if dgl else next(d for d in rows if d["graph"] == r["graph"]
                                       and d["impl"] == "numpy")
        r["baseline"] = f"{base['impl']}/{base['threads']}t"
        r["ratio"] = r["seeds_per_s"] / base["seeds_per_s"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny graph, a few batches")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                    help="'all cores' thread count (default: every CPU)")
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats; the best counts")
    args = ap.parse_args(argv)
    dgl_python = os.environ.get("GNNTRAIN_DGL_PYTHON")
    if args.smoke:
        plan = [("20k/400k", 20_000, 8, 2)]
    else:
        plan = [("100k/2M", 100_000, 60, 6), ("1M/20M", 1_000_000, 40, 3)]
    rows: list[dict[str, Any]] = []
    for label, nodes, nb, npb in plan:
        rows += run_graph(label, nodes, nb, npb, args.threads, 1 if args.smoke else args.repeats,
                          dgl_python)
    _ratios(rows)
    print(f"\nfanouts {FANOUTS}, batch {BATCH}, uniform without replacement; "
          f"DGL: {'ran' if dgl_python else 'not run (set GNNTRAIN_DGL_PYTHON)'}")
    print(f"{'graph':<9} {'impl':<6} {'thr':>3} {'seeds/s':>10} {'edges/s':>12} {'ratio':>7}  baseline")
    for r in rows:
        print(f"{r['graph']:<9} {r['impl']:<6} {r['threads']:>3} {r['seeds_per_s']:>10,.0f} "
              f"{r['edges_per_s']:>12,.0f} {r['ratio']:>6.2f}x  {r['baseline']}")
    if not args.smoke:
        for label, seeds_s in RECORDED_DGL.items():
            ours = [r for r in rows if r["graph"] == label and r["impl"] == "ours"
                    and r["threads"] == 1]
            if ours:
                print(f"{label}: ours 1 thread = {ours[0]['seeds_per_s'] / seeds_s:.2f}x the DGL "
                      f"figure recorded earlier on this machine ({seeds_s:,} seeds/s; not this run)")
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / ("sampling-smoke.json" if args.smoke else "sampling.json")
    path.write_text(json.dumps({"fanouts": FANOUTS, "batch_size": BATCH, "rows": rows,
                                "python": sys.version.split()[0]}, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
