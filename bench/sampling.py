"""Neighbour-sampling throughput: seeds/s and sampled edges/s, ours vs baselines.

    python -m bench.sampling                # 100k/2M and 1M/20M power-law graphs, a 1M-node typed graph
    python -m bench.sampling --only typed   # the typed graph alone
    python -m bench.sampling --smoke        # a 20k-node graph and a 10k-node typed one, a few batches

Fanouts [15, 10, 5] (PyG order), batch 1024, uniform without replacement, on the
synthetic power-law generator (``gnntrain.data.synthetic``). Rows: ours single-thread
(``NeighborSampler.sample``), ours on all cores (``iter_batches(num_threads=T)``), a
vectorised-numpy sampler (random keys + lexsort per hop, ``np.unique`` relabel: the
usual pure-numpy approach) as the always-available baseline, and DGL's
``NeighborSampler`` (fanouts [5, 10, 15], input layer first) in a subprocess when
``GNNTRAIN_DGL_PYTHON`` names a Python that has DGL. Ratios are against DGL at the same
thread count when it ran, else against the numpy baseline. JSON goes to bench/out/.

Typed section: the MAG-shaped generator (``gnntrain.data.hetero_synthetic``, 1.03M nodes of
4 types, 10.6M edges of 8 relations with the reverses) sampled from the training papers with
fanouts [10, 10] per relation: ours over the graph trained as one (a relation id per edge,
``sampler.fanouts`` as a per-relation mapping) against DGL's ``NeighborSampler`` on the same
edges as a DGL heterograph (an int fanout there is per edge type), in the same run.

Row ``torch-cpu`` (``torch-cuda`` on a GPU machine): the same sampler over
:class:`~samplers.device.TorchCSRSource` (``sampler.backend: torch``), one thread, after a
check that its first batches equal the numba kernels' block for block.

Before timing, the first batches are checked against the sampler's contract (exit status 1
when a check fails, ``bench.harness.verdict``): every sampled edge is an edge of the graph, each
node gets min(in-degree, fanout) distinct neighbours, ``input_nodes`` start with the
seeds and the blocks chain, and the thread pool yields the same batches as one thread.
Times are reported, never asserted.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bench.harness import peer
from bench.harness.cli import bench_parser
from bench.harness.paths import out_path
from bench.harness.peer import last_json, start_peer, write_hetero_npz
from bench.harness.verdict import Check, check, finish
from gnntrain.config import SyntheticConfig
from gnntrain.data.synthetic import generate
from samplers import CSRSource, NeighborSampler, SampledBatch
from samplers.device import TorchCSRSource

FANOUTS = [15, 10, 5]
BATCH = 1024
Clock = Callable[[], float]
DGL_HETERO = peer.script("_dgl_hetero.py")
CHECK_BATCHES = 3


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


def batch_problems(batch: SampledBatch, seeds: np.ndarray, indptr: np.ndarray,
                   edge_keys: np.ndarray) -> dict[str, str]:
    """What in one batch breaks the sampler's contract, by check name (empty: nothing).
    ``edge_keys``: the graph's edges as sorted ``dst * N + src``."""
    n = indptr.size - 1
    bad: dict[str, str] = {}
    b = seeds.size
    if not (np.array_equal(batch.seeds, seeds) and np.array_equal(batch.input_nodes[:b], seeds)
            and batch.blocks[-1].num_dst == b):
        bad["seeds first"] = "input_nodes[:B] != the batch's seeds, or the last block's dst count != B"
    if np.unique(batch.input_nodes).size != batch.input_nodes.size:
        bad["input nodes unique"] = "a node appears twice in input_nodes"
    for i, blk in enumerate(batch.blocks):
        fanout = FANOUTS[len(batch.blocks) - 1 - i]
        src_l, dst_l = blk.edge_index.numpy()
        if i + 1 < len(batch.blocks) and blk.num_dst != batch.blocks[i + 1].num_src:
            bad["blocks chain"] = f"block {i} has {blk.num_dst} dst, block {i + 1} {batch.blocks[i + 1].num_src} src"
        if src_l.size and (src_l.max() >= blk.num_src or dst_l.max() >= blk.num_dst):
            bad["local ids in range"] = f"block {i}: a local id past num_src/num_dst"
            continue
        src, dst = batch.input_nodes[src_l], batch.input_nodes[dst_l]
        keys = dst * n + src
        pos = np.minimum(np.searchsorted(edge_keys, keys), edge_keys.size - 1)
        missing = int(np.count_nonzero(edge_keys[pos] != keys))
        if missing:
            bad["sampled edges exist"] = f"block {i}: {missing} of {keys.size} edges not in the graph"
        deg = indptr[batch.input_nodes[:blk.num_dst] + 1] - indptr[batch.input_nodes[:blk.num_dst]]
        got = np.bincount(dst_l, minlength=blk.num_dst)
        if not np.array_equal(got, np.minimum(deg, fanout)) or np.unique(keys).size != keys.size:
            wrong = int(np.count_nonzero(got != np.minimum(deg, fanout)))
            bad["min(deg, fanout) distinct neighbours"] = (
                f"block {i} (fanout {fanout}): {wrong} nodes with another count, "
                f"{keys.size - np.unique(keys).size} repeated edges")
    return bad


def verify(sampler: NeighborSampler, indptr: np.ndarray, indices: np.ndarray, seeds: np.ndarray,
           threads: int, label: str, others: dict[str, NeighborSampler] | None = None) -> list[Check]:
    """The sampler's contract on the first batches of ``seeds``, one thread and ``threads``;
    each of ``others`` (by what it is) must draw the same batches."""
    n = indptr.size - 1
    edge_keys = np.sort(np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr)) * n + indices)
    use = seeds[:CHECK_BATCHES * BATCH]
    one = list(sampler.iter_batches(use, BATCH, key=7, shuffle=False))
    bad: dict[str, str] = {}
    for i, batch in enumerate(one):
        for name, what in batch_problems(batch, use[i * BATCH:(i + 1) * BATCH], indptr,
                                         edge_keys).items():
            bad.setdefault(name, f"batch {i}: {what}")
    names = ["seeds first", "input nodes unique", "blocks chain", "local ids in range",
             "sampled edges exist", "min(deg, fanout) distinct neighbours"]
    out = [check(f"{label}: {name}", name not in bad, bad.get(name, f"{len(one)} batches"))
           for name in names]
    if threads > 1:
        many = list(sampler.iter_batches(use, BATCH, key=7, shuffle=False, num_threads=threads))
        out.append(check(f"{label}: {threads} threads sample the same batches as 1", same_batches(one, many),
                         f"{len(one)} batches, key 7"))
    for what, other in (others or {}).items():
        same = same_batches(one, list(other.iter_batches(use, BATCH, key=7, shuffle=False)))
        out.append(check(f"{label}: {what} samples the numba kernels' batches", same, f"{len(one)} batches, key 7"))
    return out


def same_batches(a: list[SampledBatch], b: list[SampledBatch]) -> bool:
    """Whether two runs sampled the same batches: input nodes and every block's edges."""
    return len(a) == len(b) and all(
        np.array_equal(x.input_nodes, y.input_nodes)
        and all(torch.equal(u.edge_index.cpu(), v.edge_index.cpu()) for u, v in zip(x.blocks, y.blocks, strict=True))
        for x, y in zip(a, b, strict=True))


def torch_device() -> str:
    """Where ``sampler.backend: torch`` draws in this run: the GPU when there is one."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def _time_ours(sampler: NeighborSampler, seeds: np.ndarray, n_batches: int,
               threads: int, repeats: int, clock: Clock = time.perf_counter) -> dict[str, float]:
    use = seeds[:n_batches * BATCH]
    best = float("inf")
    edges = 0
    for r in range(repeats):
        t0 = clock()
        if threads == 1:
            edges = 0
            for i in range(n_batches):
                edges += sampler.sample(use[i * BATCH:(i + 1) * BATCH], key=r * 100_003 + i)\
                    .num_sampled_edges
        else:
            edges = sum(b.num_sampled_edges for b in sampler.iter_batches(
                use, BATCH, key=r, shuffle=False, num_threads=threads))
        best = min(best, clock() - t0)
    return {"seeds_per_s": use.size / best, "edges_per_s": edges / best, "seconds": best}


def _time_numpy(indptr: np.ndarray, indices: np.ndarray, seeds: np.ndarray,
                n_batches: int, clock: Clock = time.perf_counter) -> dict[str, float]:
    rng = np.random.default_rng(0)
    numpy_baseline(indptr, indices, seeds[:BATCH], rng)
    t0 = clock()
    edges = sum(numpy_baseline(indptr, indices, seeds[i * BATCH:(i + 1) * BATCH], rng)
                for i in range(n_batches))
    dt = clock() - t0
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
    return _run_dgl(python, ["-c", DGL_SCRIPT],
                    lambda p: np.savez(p, indptr=indptr, indices=indices, seeds=seeds),
                    [str(n_batches), str(threads)], threads)


def run_graph(label: str, nodes: int, n_batches: int, np_batches: int, threads: int,
              repeats: int, dgl_python: str | None,
              clock: Clock = time.perf_counter) -> tuple[list[dict[str, Any]], list[Check]]:
    """Rows (ours per thread count, numpy, DGL) and the contract's checks on one power-law
    graph; times by ``clock`` (wall time; ``bench.regress`` passes CPU time)."""
    t0 = time.perf_counter()
    g = generate(SyntheticConfig(nodes=nodes, avg_degree=20.0, features=1, classes=2,
                                 power_law=2.5, seed=0), name=label)
    print(f"{label}: {g.num_nodes:,} nodes, {g.num_edges:,} edges, max in-degree "
          f"{int(g.in_degrees().max()):,} (generated in {time.perf_counter() - t0:.1f}s)")
    seeds = np.random.default_rng(1).permutation(g.num_nodes)
    n_batches = min(n_batches, seeds.size // BATCH)
    sampler = NeighborSampler(CSRSource(g.indptr, g.indices), FANOUTS)
    sampler.sample(seeds[:BATCH], key=0)  # compile / load the numba cache
    device = torch_device()
    on_device = NeighborSampler(TorchCSRSource(g.indptr, g.indices, device=device), FANOUTS)
    checks = verify(sampler, g.indptr, g.indices, seeds, threads, label, {f"torch on {device}": on_device})
    rows: list[dict[str, Any]] = []
    for t in sorted({1, threads}):
        rows.append({"graph": label, "impl": "ours", "threads": t,
                     **_time_ours(sampler, seeds, n_batches, t, repeats, clock)})
    rows.append({"graph": label, "impl": f"torch-{device}", "threads": 1,
                 **_time_ours(on_device, seeds, n_batches, 1, repeats, clock)})
    rows.append({"graph": label, "impl": "numpy", "threads": 1,
                 **_time_numpy(g.indptr, g.indices, seeds, min(np_batches, n_batches), clock)})
    if dgl_python:
        for t in sorted({1, threads}):
            res = _time_dgl(dgl_python, g.indptr, g.indices, seeds, n_batches, t)
            if res is not None:
                rows.append({"graph": label, "impl": "dgl", "threads": t, **res})
    return rows, checks


TYPED_FANOUTS = [10, 10]  # per relation, per node (DGL's int fanout on a heterograph)

def _run_dgl(python: str, script: list[str], write: Callable[[Path], None], args: list[str],
             threads: int) -> dict[str, Any] | None:
    """``python SCRIPT... NPZ ARGS...`` under DGL's Python, ``write`` having saved the npz."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "g.npz"
        write(path)
        try:
            out = start_peer(python, [*script, str(path), *args], timeout_s=1800,
                             env={"OMP_NUM_THREADS": str(threads)})
        except (subprocess.SubprocessError, OSError) as e:
            print(f"  DGL run failed: {e}")
            return None
    if out.returncode != 0:
        err = out.stderr.strip()
        print(f"  DGL run failed: {err.splitlines()[-1] if err else f'exit status {out.returncode}'}")
        return None
    return last_json(out.stdout)


def typed_problems(batch: SampledBatch, indptr: np.ndarray, edge_rel: np.ndarray,
                   num_rel: int, edge_keys: np.ndarray) -> dict[str, str]:
    """What in one typed batch breaks the contract: every sampled edge is an edge of the
    graph with the relation id it carries, and each dst node gets min(its in-degree in
    that relation, fanout) distinct neighbours per relation."""
    n = indptr.size - 1
    bad: dict[str, str] = {}
    for i, blk in enumerate(batch.blocks):
        fanout = TYPED_FANOUTS[len(batch.blocks) - 1 - i]
        src_l, dst_l = blk.edge_index.numpy()
        rel = np.asarray(blk.edge_rel)
        dst = batch.input_nodes[dst_l]
        keys = (dst * n + batch.input_nodes[src_l]) * num_rel + rel
        pos = np.minimum(np.searchsorted(edge_keys, keys), edge_keys.size - 1)
        if np.count_nonzero(edge_keys[pos] != keys) or np.unique(keys).size != keys.size:
            bad["sampled edges exist with their relation"] = f"block {i}"
        rows = batch.input_nodes[:blk.num_dst]
        want = np.zeros((rows.size, num_rel), dtype=np.int64)
        for j, v in enumerate(rows):
            want[j] = np.minimum(np.bincount(edge_rel[indptr[v]:indptr[v + 1]], minlength=num_rel), fanout)
        got = np.zeros_like(want)
        np.add.at(got, (dst_l, rel), 1)
        if not np.array_equal(got, want):
            bad["min(deg_r, fanout) per relation"] = f"block {i}: {int((got != want).any(1).sum())} nodes differ"
    return bad


def run_typed(label: str, papers: int, n_batches: int, threads: int, repeats: int,
              dgl_python: str | None) -> tuple[list[dict[str, Any]], list[Check]]:
    """Typed sampling on the MAG-shaped generator (papers : authors : institutions : fields
    = 1 : 1.5 : 1/80 : 1/13, reverse relations added): ours over the graph trained as one
    (relation id per edge, a fanout per relation) against DGL's ``NeighborSampler`` on the
    same heterograph, seeds the target type's training papers."""
    from gnntrain.config import SyntheticHeteroConfig
    from gnntrain.data.hetero_synthetic import generate_hetero

    t0 = time.perf_counter()
    hg = generate_hetero(SyntheticHeteroConfig.scaled(papers, features=1), name=label, add_reverse=True)
    hom = hg.homogenise()
    num_rel = len(hom.edge_types)
    print(f"{label}: {hom.num_nodes:,} nodes of {len(hom.node_types)} types, {hom.indices.size:,} edges "
          f"of {num_rel} relations (generated in {time.perf_counter() - t0:.1f}s)")
    base = int(hom.type_offsets[hom.node_types.index(hg.target)])
    local = np.random.default_rng(1).permutation(hg.train_idx)
    n_batches = min(n_batches, local.size // BATCH)
    seeds = local + base
    fan = [tuple([f] * num_rel) for f in TYPED_FANOUTS]
    sampler = NeighborSampler(CSRSource(hom.indptr, hom.indices, edge_rel=hom.edge_rel,
                                        num_relations=num_rel), fan)
    first = sampler.sample(seeds[:BATCH], key=0)
    n = hom.num_nodes
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(hom.indptr))
    edge_keys = np.sort((dst * n + hom.indices) * num_rel + hom.edge_rel)
    bad = typed_problems(first, hom.indptr, hom.edge_rel, num_rel, edge_keys)
    del dst, edge_keys
    checks = [check(f"{label}: {name}", name not in bad, bad.get(name, "first batch"))
              for name in ("sampled edges exist with their relation", "min(deg_r, fanout) per relation")]
    rows = [{"graph": label, "impl": "ours", "threads": t, **_time_ours(sampler, seeds, n_batches, t, repeats)}
            for t in sorted({1, threads})]
    if dgl_python:
        for t in sorted({1, threads}):
            res = _run_dgl(dgl_python, [str(DGL_HETERO), "sample"],
                           lambda p: write_hetero_npz(p, hg, TYPED_FANOUTS, seeds=local),
                           [str(n_batches), str(t)], t)
            if res is not None:
                rows.append({"graph": label, "impl": "dgl", "threads": t, **res})
    return rows, checks


def _ratios(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        dgl = [d for d in rows if d["graph"] == r["graph"] and d["impl"] == "dgl"
               and d["threads"] == r["threads"]]
        base = dgl[0] if dgl else next((d for d in rows if d["graph"] == r["graph"]
                                        and d["impl"] == "numpy"), None)
        r["baseline"] = f"{base['impl']}/{base['threads']}t" if base else "none (DGL not run)"
        r["ratio"] = r["seeds_per_s"] / base["seeds_per_s"] if base else None


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__, smoke="tiny graph, a few batches")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                    help="'all cores' thread count (default: every CPU)")
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats; the best counts")
    ap.add_argument("--only", choices=["homogeneous", "typed"], help="one section only")
    args = ap.parse_args(argv)
    dgl_python = peer.dgl_python()
    repeats = 1 if args.smoke else args.repeats
    if args.smoke:
        plan, typed_plan = [("20k/400k", 20_000, 8, 2)], [("MAG 10k", 4_000, 3)]
    else:
        plan = [("100k/2M", 100_000, 60, 6), ("1M/20M", 1_000_000, 40, 3)]
        typed_plan = [("MAG 1M", 400_000, 30)]
    rows: list[dict[str, Any]] = []
    checks: list[Check] = []
    for label, nodes, nb, npb in plan if args.only != "typed" else []:
        graph_rows, graph_checks = run_graph(label, nodes, nb, npb, args.threads, repeats, dgl_python)
        rows, checks = rows + graph_rows, checks + graph_checks
    for label, papers, nb in typed_plan if args.only != "homogeneous" else []:
        graph_rows, graph_checks = run_typed(label, papers, nb, args.threads, repeats, dgl_python)
        rows, checks = rows + graph_rows, checks + graph_checks
    _ratios(rows)
    print(f"\nfanouts {FANOUTS} (typed: {TYPED_FANOUTS} per relation), batch {BATCH}, uniform "
          f"without replacement; DGL: {'ran' if dgl_python else 'not run (set GNNTRAIN_DGL_PYTHON)'}")
    print(f"{'graph':<9} {'impl':<9} {'thr':>3} {'seeds/s':>10} {'edges/s':>12} {'ratio':>7}  baseline")
    for r in rows:
        ratio = f"{r['ratio']:>6.2f}x" if r["ratio"] is not None else f"{'-':>7}"
        print(f"{r['graph']:<9} {r['impl']:<9} {r['threads']:>3} {r['seeds_per_s']:>10,.0f} "
              f"{r['edges_per_s']:>12,.0f} {ratio}  {r['baseline']}")
    result: dict[str, Any] = {"fanouts": FANOUTS, "batch_size": BATCH, "rows": rows,
                              "python": sys.version.split()[0]}
    return finish("sampling", checks, result, out_path("sampling", smoke=args.smoke))


if __name__ == "__main__":
    raise SystemExit(main())
