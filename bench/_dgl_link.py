"""DGL 2.1 link-prediction sampling: ``as_edge_prediction_sampler`` + a uniform negative sampler.

Self-contained: imports only numpy, torch, dgl and ``_peer_start`` beside it, so it runs in a separate DGL venv.
``bench.link`` writes the message-passing graph to an .npz and runs::

    $GNNTRAIN_DGL_PYTHON bench/_dgl_link.py GRAPH.npz '{"fanouts": [15, 10, 5], ...}'

The npz holds ``indptr``/``indices`` (CSR of in-neighbours = DGL's CSC; every edge's
reverse is present, as in an undirected graph). Settings: ``fanouts`` (PyG order, seed hop
first), ``batch_size`` (positive edges per batch), ``negatives`` (uniform negatives per
positive), ``batches`` (timed batches), ``warmup`` (untimed batches before them),
``seed``, ``threads``. Every training edge is a seed edge; the batch's edges and their
reverses are excluded from its blocks (``exclude='reverse_id'``), as ours excludes them.
The last stdout line is one JSON object: timed batches, positive edges, seconds, edges
per second, and the mean input nodes per batch.
"""

import json
import time

import dgl
import numpy as np
import torch
from _peer_start import peer_start


def reverse_ids(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Edge id of ``v -> u`` for every edge ``u -> v`` (edge ids in CSC order)."""
    n = indptr.size - 1
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    key = dst * n + indices  # edge ids are in key order: rows by dst, sorted sources
    order = np.argsort(key, kind="stable")
    rkey = indices * n + dst
    pos = order[np.searchsorted(key[order], rkey)]
    if not np.array_equal(key[pos], rkey):
        raise SystemExit("the graph is not symmetric: some edge has no reverse")
    return pos


def main() -> None:
    s, d = peer_start()
    indptr, indices = d["indptr"], d["indices"]
    n = indptr.size - 1
    g = dgl.graph(("csc", (torch.from_numpy(indptr), torch.from_numpy(indices),
                           torch.arange(indices.size, dtype=torch.int64))), num_nodes=n)
    g.create_formats_()
    rev = torch.from_numpy(reverse_ids(indptr, indices))
    sampler = dgl.dataloading.as_edge_prediction_sampler(
        dgl.dataloading.NeighborSampler(list(reversed(s["fanouts"]))),
        exclude="reverse_id", reverse_eids=rev,
        negative_sampler=dgl.dataloading.negative_sampler.Uniform(int(s["negatives"])))
    eids = torch.arange(g.num_edges(), dtype=torch.int64)
    loader = dgl.dataloading.DataLoader(g, eids, sampler, batch_size=int(s["batch_size"]),
                                        shuffle=True, drop_last=False, num_workers=0)
    warm, want = int(s["warmup"]), int(s["batches"])
    done = edges = inputs = 0
    t0 = 0.0
    while done < want:
        for i, (input_nodes, pair_graph, _neg, _blocks) in enumerate(loader):
            if warm and i < warm and t0 == 0.0:
                continue
            if t0 == 0.0:
                t0 = time.perf_counter()
            edges += int(pair_graph.num_edges())
            inputs += int(input_nodes.numel())
            done += 1
            if done == want:
                break
    sec = time.perf_counter() - t0
    print(json.dumps({"batches": done, "edges": edges, "seconds": sec, "edges_per_s": edges / sec,
                      "input_nodes_per_batch": inputs / done, "dgl": dgl.__version__,
                      "torch": torch.__version__, "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
