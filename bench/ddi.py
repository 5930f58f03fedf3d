"""ogbl-ddi: our loader and metric against OGB's figures, and our training against OGB's
GraphSAGE recipe written with PyG layers, epoch by epoch in the same run.

    python -m bench.ddi --epochs 2            # needs $GNNTRAIN_DATA/link/ogbl_ddi

* ``heuristics`` -- common neighbours and Adamic-Adar of the training graph, scored
  through :func:`gnntrain.data.link.load_ogbl` and :mod:`gnntrain.tasks.ranking`: their
  test Hits@20 must be OGB's leaderboard figures (17.73% and 18.61%), a correctness check
  of the split files' loading and of Hits@K.
* ``reference`` -- OGB's ``examples/linkproppred/ddi`` GraphSAGE recipe, full batch: a
  learnable 256-wide embedding (xavier uniform), two PyG ``SAGEConv`` layers over the whole
  training graph, a 2-layer MLP on the Hadamard product with dropout 0.5, 65,536
  interactions per step against as many random pairs that are not training edges (PyG's
  ``negative_sampling``, as OGB's script draws them), Adam 0.005, each of the three
  groups' gradients clipped at 1.
* ``ours`` -- ``datasets/ogbl-ddi.yaml`` (the same recipe through gnntrain, one process).
Printed: loss, test AUC and validation/test Hits@20 after every epoch of each. JSON:
bench/out/ddi.json. Not part of ``bench.smoke`` (real data, minutes per epoch).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from torch import nn

from bench.harness.cli import bench_parser
from bench.harness.paths import bench_config, out_path
from bench.harness.runs import quiet, read_metrics
from bench.harness.system import machine
from bench.harness.verdict import check, finish
from gnntrain.config import data_root
from gnntrain.data.link import EdgeSplit, load_ogbl
from gnntrain.tasks import ranking

OGB_HEURISTICS = {"common_neighbours": 0.1773, "adamic_adar": 0.1861}  # OGB leaderboard, test


def heuristics(split: EdgeSplit) -> dict[str, dict[str, float]]:
    n, t = split.num_nodes, split.train
    a = sp.coo_matrix((np.ones(len(t)), (t[:, 0], t[:, 1])), shape=(n, n)).tocsr()
    a = ((a + a.T) > 0).astype(np.float64)
    inv_log = sp.diags(1.0 / np.log(np.maximum(np.asarray(a.sum(1)).ravel(), 2)))
    score = {"common_neighbours": lambda e: a[e[:, 0]].multiply(a[e[:, 1]]).sum(1),
             "adamic_adar": lambda e: (a[e[:, 0]] @ inv_log).multiply(a[e[:, 1]]).sum(1)}
    out = {}
    for name, f in score.items():
        pos, neg = (np.asarray(f(e)).ravel() for e in (split.test, split.test_neg))
        out[name] = {"test_hits": ranking.hits_at_k(pos, neg, 20), "test_auc": ranking.auc(pos, neg)}
    return out


RUNS = ("reference", "ours")
"""The training runs :func:`main` can make (``--only``)."""


def reference(split: EdgeSplit, epochs: int, seed: int = 0) -> list[dict[str, float]]:
    from torch_geometric.nn import SAGEConv
    from torch_geometric.utils import negative_sampling

    torch.manual_seed(seed)
    n, t = split.num_nodes, torch.from_numpy(split.train)
    ei = torch.cat([t.T, t.flip(1).T], 1)
    emb = nn.Embedding(n, 256)
    nn.init.xavier_uniform_(emb.weight)
    convs = nn.ModuleList([SAGEConv(256, 256), SAGEConv(256, 256)])
    mlp = nn.ModuleList([nn.Linear(256, 256), nn.Linear(256, 1)])
    groups = [emb, convs, mlp]
    opt = torch.optim.Adam([p for g in groups for p in g.parameters()], lr=0.005)

    def encode(train: bool) -> torch.Tensor:
        h = F.dropout(F.relu(convs[0](emb.weight, ei)), 0.5, train)
        return convs[1](h, ei)

    def decode(a: torch.Tensor, b: torch.Tensor, train: bool) -> torch.Tensor:
        x = a * b
        for lin in mlp[:-1]:
            x = F.dropout(F.relu(lin(x)), 0.5, train)
        return mlp[-1](x).squeeze(-1)

    rows = []
    for epoch in range(epochs):
        t0, total = time.perf_counter(), 0.0
        for perm in torch.randperm(t.shape[0]).split(65536):
            opt.zero_grad()
            h, e = encode(True), t[perm]
            pos = torch.sigmoid(decode(h[e[:, 0]], h[e[:, 1]], True))
            ne = negative_sampling(ei, num_nodes=n, num_neg_samples=perm.numel(), method="dense")
            neg = torch.sigmoid(decode(h[ne[0]], h[ne[1]], True))
            loss = -torch.log(pos + 1e-15).mean() - torch.log(1 - neg + 1e-15).mean()
            loss.backward()
            for g in groups:
                nn.utils.clip_grad_norm_(g.parameters(), 1.0)
            opt.step()
            total += float(loss.detach()) * perm.numel()
        with torch.no_grad():
            h = encode(False)

            def sc(e: np.ndarray, h: torch.Tensor = h) -> np.ndarray:
                return decode(h[torch.from_numpy(e[:, 0])], h[torch.from_numpy(e[:, 1])], False).numpy()

            rows.append({"epoch": epoch, "loss_per_pair": total / t.shape[0] / 2,
                         "val_hits": ranking.hits_at_k(sc(split.val), sc(split.val_neg), 20),
                         "test_hits": ranking.hits_at_k(sc(split.test), sc(split.test_neg), 20),
                         "test_auc": ranking.auc(sc(split.test), sc(split.test_neg)),
                         "epoch_s": time.perf_counter() - t0})
    return rows


def ours(epochs: int, overrides: list[str] | None = None) -> list[dict[str, Any]]:
    from gnntrain.runtime.coordinator import run_training

    cfg = bench_config("ogbl-ddi.yaml", [f"train.epochs={epochs}", "train.eval_every=1", *(overrides or [])],
                       "ddi")
    eps = read_metrics(run_training(cfg, single_process=True, progress=False, console=quiet()))
    return [{"epoch": e["epoch"], "loss_per_pair": e["loss"], "val_hits": e["val_hits"],
             "test_hits": e["test_hits"], "test_auc": e["test_auc"], "epoch_s": e["epoch_s"]}
            for e in eps]


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--only", choices=RUNS, nargs="+", default=list(RUNS),
                    help="the training runs to make (default both)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a config override for ours, as gnntrain.run's --set (repeatable)")
    args = ap.parse_args(argv)
    path = data_root() / "link" / "ogbl_ddi"
    if not path.is_dir():
        print(f"bench.ddi: skipped, {path} is absent (set GNNTRAIN_DATA)")
        return 0
    split = load_ogbl(Path(path), "target")
    out: dict[str, Any] = {"machine": machine(), "argv": sys.argv[1:]}
    out["heuristics"] = h = heuristics(split)
    checks = [check(f"{k}: test Hits@20 equals OGB's {OGB_HEURISTICS[k]:.2%}",
                    abs(v["test_hits"] - OGB_HEURISTICS[k]) < 5e-5, f"{v['test_hits']:.4%}")
              for k, v in h.items()]
    if "reference" in args.only:
        out["reference"] = reference(split, args.epochs)
    if "ours" in args.only:
        out["ours"] = ours(args.epochs, args.set)
    print(f"{'run':<22}{'epoch':>6}{'loss/pair':>11}{'test AUC':>10}{'val Hits@20':>13}"
          f"{'test Hits@20':>14}{'s':>8}")
    for name in args.only:
        for r in out[name]:
            print(f"{name:<22}{r['epoch'] + 1:>6}{r['loss_per_pair']:>11.3f}{r['test_auc']:>10.4f}"
                  f"{r['val_hits']:>13.2%}{r['test_hits']:>14.2%}{r['epoch_s']:>8.0f}")
    for k, v in h.items():
        print(f"{k:<22} test Hits@20 {v['test_hits']:.2%} (OGB {OGB_HEURISTICS[k]:.2%}), AUC {v['test_auc']:.4f}")
    return finish("ddi", checks, out, out_path("ddi"))


if __name__ == "__main__":
    sys.exit(main())
