"""DGL 2.1 single-process GraphSAGE loop (DGL's examples/pytorch/graphsage/node_classification.py).

Self-contained: imports only numpy, torch, dgl and ``_peer_start`` beside it, so it runs in a separate DGL venv.
``bench.epoch`` writes the graph to an .npz and runs::

    $GNNTRAIN_DGL_PYTHON bench/_dgl_epoch.py GRAPH.npz '{"epochs": 2, ...}'

The npz holds ``indptr``/``indices`` (CSR of in-neighbours = DGL's CSC), ``x``, ``y``,
``train_idx``, ``val_idx``, ``test_idx``, and optionally ``init__<param>`` arrays: initial
parameters under this model's names (all of them), loaded before training. The settings JSON: ``epochs``, ``fanouts``
(PyG order, seed hop first), ``batch_size``, ``hidden``, ``layers``, ``dropout``, ``lr``,
``seed``, ``threads``. The last stdout line is one JSON object: per-epoch wall time,
sampling+fetch time and compute time, loss, and test/val accuracy from full-neighbour
inference over the whole graph after the last epoch.
"""

import json
import time

import dgl
import torch
import torch.nn.functional as F
from _peer_start import peer_start
from dgl.nn import SAGEConv
from torch import nn


class SAGE(nn.Module):
    def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int, dropout: float) -> None:
        super().__init__()
        dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
        self.layers = nn.ModuleList(SAGEConv(dims[i], dims[i + 1], "mean") for i in range(layers))
        self.dropout = nn.Dropout(dropout)

    def forward(self, blocks, x):  # type: ignore[no-untyped-def]
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks, strict=True)):
            h = layer(block, h)
            if i != len(self.layers) - 1:
                h = self.dropout(F.relu(h))
        return h

    @torch.no_grad()
    def inference(self, g, x):  # type: ignore[no-untyped-def]
        """Layer-wise full-neighbour inference over the whole graph."""
        h = x
        for i, layer in enumerate(self.layers):
            h = layer(g, h)
            if i != len(self.layers) - 1:
                h = F.relu(h)
        return h


def main() -> None:
    s, d = peer_start()
    indptr = torch.from_numpy(d["indptr"])
    indices = torch.from_numpy(d["indices"])
    x = torch.from_numpy(d["x"])
    y = torch.from_numpy(d["y"])
    train_idx, val_idx, test_idx = (torch.from_numpy(d[k]) for k in ("train_idx", "val_idx", "test_idx"))
    n = indptr.numel() - 1
    g = dgl.graph(("csc", (indptr, indices, torch.tensor([], dtype=torch.int64))), num_nodes=n)
    g.create_formats_()
    num_classes = int(y.max()) + 1
    model = SAGE(x.shape[1], int(s["hidden"]), num_classes, int(s["layers"]), float(s["dropout"]))
    init = {k[len("init__"):]: torch.from_numpy(d[k]) for k in d.files if k.startswith("init__")}
    if init:  # start from the caller's parameters (the same model as theirs)
        model.load_state_dict(init, strict=True)
    opt = torch.optim.Adam(model.parameters(), lr=float(s["lr"]))
    # DGL lists fanouts input layer first; ours (PyG order) start at the seeds
    sampler = dgl.dataloading.NeighborSampler(list(reversed(s["fanouts"])))
    loader = dgl.dataloading.DataLoader(g, train_idx, sampler, batch_size=int(s["batch_size"]),
                                        shuffle=True, drop_last=False, num_workers=0)
    epochs = []
    for epoch in range(int(s["epochs"])):
        model.train()
        t0 = time.perf_counter()
        data_s = compute_s = loss_sum = 0.0
        examples = 0
        t_data = time.perf_counter()
        for input_nodes, output_nodes, blocks in loader:
            xb = x[input_nodes]
            yb = y[output_nodes]
            t_c = time.perf_counter()
            data_s += t_c - t_data
            logits = model(blocks, xb)
            loss = F.cross_entropy(logits, yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum += float(loss) * int(yb.shape[0])
            examples += int(yb.shape[0])
            t_data = time.perf_counter()
            compute_s += t_data - t_c
        epochs.append({"epoch": epoch, "epoch_s": time.perf_counter() - t0, "data_s": data_s,
                       "compute_s": compute_s, "loss": loss_sum / max(1, examples)})
    t_eval = time.perf_counter()
    model.eval()
    pred = model.inference(g, x).argmax(1)
    acc = {f"{name}_acc": float((pred[idx] == y[idx]).float().mean())
           for name, idx in (("val", val_idx), ("test", test_idx))}
    print(json.dumps({"epochs": epochs, **acc, "eval_s": time.perf_counter() - t_eval,
                      "dgl": dgl.__version__, "torch": torch.__version__,
                      "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
