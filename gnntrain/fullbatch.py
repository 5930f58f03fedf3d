"""Plain full-batch PyG training: the textbook loop the mini-batch path is checked against.

No sampling and no blocks: every epoch runs the model on the whole graph's
``edge_index`` and takes one optimizer step on the training nodes' mean loss. It uses
the same layers (built by :func:`gnntrain.models.build_model`, so the same seed gives
the same initial weights) and the same hyper-parameters as a run config.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from gnntrain.config import RunConfig
from gnntrain.engine import make_optimizer
from gnntrain.models import build_model
from partition.graph import Graph
from samplers import Block


@dataclass(frozen=True)
class FullBatchResult:
    train_acc: float
    val_acc: float
    test_acc: float
    epoch_s: float
    final_loss: float
    losses: list[float] = field(default_factory=list)
    """The training loss of every epoch, before its step."""
    state: dict[str, torch.Tensor] = field(default_factory=dict)
    """The trained model's parameters and buffers (``state_dict``)."""


def full_batch_train(cfg: RunConfig, graph: Graph) -> FullBatchResult:
    """Train ``cfg.train.epochs`` full-batch epochs; accuracy of the final model."""
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg.model.arch, cfg.model, graph.num_features, graph.num_classes, cfg.train.seed)
    opt = make_optimizer(model, cfg.train.optimizer, cfg.train.lr, cfg.train.weight_decay)
    x = torch.from_numpy(graph.x)
    y = torch.from_numpy(graph.y)
    n = graph.num_nodes
    ei = torch.from_numpy(graph.edge_index())
    deg = torch.from_numpy(graph.in_degrees().astype("float32"))
    train = torch.from_numpy(graph.train_idx)

    # the whole graph as one block per layer, every node source and destination; no indptr:
    # PyG's per-edge path, since this module is the PyG full-batch reference
    blocks = [Block(ei, n, n, None, deg)] * cfg.model.layers
    times, losses = [], []
    loss = torch.zeros(())
    for _ in range(cfg.train.epochs):
        t0 = time.perf_counter()
        model.train()
        opt.zero_grad()
        out = model(blocks, x)
        loss = F.cross_entropy(out[train], y[train])
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(float(loss.detach()))
    model.eval()
    with torch.no_grad():
        pred = model(blocks, x).argmax(1)

    def acc(idx: torch.Tensor) -> float:
        return float((pred[idx] == y[idx]).float().mean()) if idx.numel() else float("nan")

    return FullBatchResult(acc(train), acc(torch.from_numpy(graph.val_idx)),
                           acc(torch.from_numpy(graph.test_idx)),
                           sum(times[1:]) / max(1, len(times) - 1), float(loss.detach()), losses,
                           {k: v.detach().clone() for k, v in model.state_dict().items()})
