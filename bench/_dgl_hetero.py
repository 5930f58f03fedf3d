"""DGL 2.1 on a typed graph: heterogeneous neighbour sampling and ``partition_graph``.

Self-contained on the DGL side: run as a script it imports only numpy, torch and dgl, so it
runs in a separate DGL venv. ``bench.sampling`` and ``bench.partition`` write the typed graph
with ``bench.harness.peer.write_hetero_npz`` and run it through the harness's peer runner::

    $GNNTRAIN_DGL_PYTHON bench/_dgl_hetero.py sample GRAPH.npz N_BATCHES THREADS
    $GNNTRAIN_DGL_PYTHON bench/_dgl_hetero.py partition GRAPH.npz K OUT_DIR

The npz holds ``src<i>``/``dst<i>`` (type-local ids) per relation ``i``, the target type's
``x`` and ``train`` ids (training seeds, in the order to sample them), and ``meta`` (JSON:
``relations`` as ``[src, rel, dst]``, ``num_nodes`` per type, ``target``, ``fanouts`` in
PyG order, one int per layer, per edge type in DGL). The last stdout line is one JSON object.
``partition`` also writes ``OUT_DIR/parts-<type>.npy``: the part of every original node.
"""

import json
import sys
import time
from typing import Any

import numpy as np


def _load(path: str) -> tuple[Any, Any, dict[str, Any]]:
    import dgl
    import torch

    d = np.load(path)
    meta = json.loads(str(d["meta"]))
    g = dgl.heterograph({tuple(et): (torch.from_numpy(d[f"src{i}"]), torch.from_numpy(d[f"dst{i}"]))
                         for i, et in enumerate(meta["relations"])}, num_nodes_dict=meta["num_nodes"])
    return g, d, meta


def sample(path: str, n_batches: int, threads: int) -> dict[str, Any]:
    """Seeds/s and sampled edges/s of ``NeighborSampler`` from the target's training ids."""
    import dgl
    import torch

    torch.set_num_threads(threads)
    g, d, meta = _load(path)
    g.create_formats_()
    sampler = dgl.dataloading.NeighborSampler(list(reversed(meta["fanouts"])))  # input layer first
    seeds, bs, target = torch.from_numpy(d["train"]), 1024, meta["target"]
    sampler.sample_blocks(g, {target: seeds[:bs]})
    t0 = time.perf_counter()
    edges = 0
    for i in range(n_batches):
        _, _, blocks = sampler.sample_blocks(g, {target: seeds[i * bs:(i + 1) * bs]})
        edges += sum(b.num_edges() for b in blocks)
    dt = time.perf_counter() - t0
    return {"seeds_per_s": n_batches * bs / dt, "edges_per_s": edges / dt, "seconds": dt,
            "dgl": dgl.__version__}


def partition(path: str, k: int, out: str) -> dict[str, Any]:
    """``partition_graph`` with METIS, balancing every node type, the target's training
    nodes (a ``balance_ntypes`` dict) and in-edges; writes each type's parts."""
    import dgl
    import torch
    from dgl.distributed import partition_graph

    g, d, meta = _load(path)
    t = meta["target"]
    g.nodes[t].data["feat"] = torch.from_numpy(d["x"])
    train = np.zeros(g.num_nodes(t), dtype=np.int64)
    train[d["train"]] = 1
    g.nodes[t].data["train_mask"] = torch.from_numpy(train.astype(bool))
    t0 = time.perf_counter()
    orig, _ = partition_graph(g, "g", k, out, part_method="metis", balance_ntypes={t: torch.from_numpy(train)},
                              balance_edges=True, return_mapping=True)
    sec = time.perf_counter() - t0
    with open(f"{out}/g.json") as f:
        node_map = json.load(f)["node_map"]
    for nt in g.ntypes:
        owner = np.concatenate([np.full(b - a, p, dtype=np.int64) for p, (a, b) in enumerate(node_map[nt])])
        parts = np.empty(g.num_nodes(nt), dtype=np.int64)
        parts[orig[nt].numpy()] = owner
        np.save(f"{out}/parts-{nt}.npy", parts)
    return {"seconds": sec, "dgl": dgl.__version__}


if __name__ == "__main__":
    mode, npz = sys.argv[1], sys.argv[2]
    res = sample(npz, int(sys.argv[3]), int(sys.argv[4])) if mode == "sample" else \
        partition(npz, int(sys.argv[3]), sys.argv[4])
    print(json.dumps(res))
