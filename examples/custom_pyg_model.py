"""A user's own model: GraphConv with jumping knowledge, trained on Cora by 2 Ray workers from Python.

The model follows gnntrain's model protocol (``gnntrain.models.protocol``):
``forward(blocks, x)`` returns the rows of the last block's destination nodes (the
seeds), and ``layer(i, block, h)`` + ``num_layers`` make evaluation exact layer-wise
full-graph inference. Jumping knowledge concatenates every layer's output before the
classifier, so ``layer`` carries the earlier layers' rows along (``[h_1 | ... | h_i]``):
a block's destination nodes are the first ``num_dst`` of its source nodes, so the rows
of earlier layers are just a prefix of ``h``.

For a plain stack of PyG layers no class is needed: ``gnntrain.PygLayers([GraphConv(...),
...])`` is the adapter.

    python examples/custom_pyg_model.py            # 40 epochs, prints the test accuracy
    python examples/custom_pyg_model.py --smoke    # 2 epochs

Cora's raw files are read from $GNNTRAIN_DATA/planetoid/Cora/raw (datasets/cora.yaml).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import GraphConv

import gnntrain
from gnntrain.config import ModelConfig
from samplers import Block

CORA = Path(__file__).resolve().parent.parent / "datasets" / "cora.yaml"


class GraphConvJK(nn.Module):
    """GraphConv layers (Morris et al.: own row + aggregated neighbours, each with its own
    weights), every layer's output concatenated (jumping knowledge, 'cat') and classified
    by one linear layer."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int, dropout: float,
                 aggr: str = "mean") -> None:
        super().__init__()
        dims = [in_dim] + [hidden] * layers
        self.convs = nn.ModuleList(GraphConv(a, b, aggr=aggr) for a, b in zip(dims, dims[1:], strict=False))
        self.classify = nn.Linear(hidden * layers, out_dim)
        self.hidden = hidden
        self.dropout = dropout
        self.num_layers = layers  # with layer(): exact layer-wise inference

    def layer(self, i: int, block: Block, h: Tensor) -> Tensor:
        """Layer ``i`` on one block. ``h`` holds the block's source rows: ``x`` for
        ``i == 0``, else ``[h_1 | ... | h_i]``; returns the destination rows, with this
        layer's output appended (the classifier's output after the last layer)."""
        last_out = h if i == 0 else h[:, -self.hidden:]
        new = self.convs[i](last_out, block.edge_index)[:block.num_dst]
        new = F.dropout(F.relu(new), self.dropout, self.training)
        out = new if i == 0 else torch.cat([h[:block.num_dst], new], dim=1)
        return self.classify(out) if i == self.num_layers - 1 else out

    def forward(self, blocks: Sequence[Block], x: Tensor) -> Tensor:
        h = x
        for i, block in enumerate(blocks):
            h = self.layer(i, block, h)
        return h


def graphconv_jk(in_dim: int, out_dim: int, cfg: ModelConfig) -> GraphConvJK:
    """The factory gnntrain calls (``model.arch: mymodule:graphconv_jk`` names it from YAML);
    ``model.options.aggr`` picks the neighbour aggregation."""
    aggr = cfg.options.get("aggr", "mean")
    if aggr not in ("mean", "add", "max"):
        raise ValueError(f"model.options.aggr={aggr!r}: expected 'mean', 'add' or 'max'")
    return GraphConvJK(in_dim, cfg.hidden, out_dim, cfg.layers, cfg.dropout, aggr)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="2 epochs (a quick check)")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)

    run = gnntrain.fit(
        CORA, model=graphconv_jk, workers=args.workers, progress=not args.smoke,
        model__hidden=64, model__dropout=0.5, model__options={"aggr": "mean"},
        train__epochs=2 if args.smoke else 40, train__lr=0.005, train__eval_every=10,
        sampler__batch_size=max(1, 35 // args.workers))  # the same global batch for any K
    final = run.summary["final"]
    print(f"GraphConv + jumping knowledge on Cora, {run.summary['workers']} workers: "
          f"test accuracy {final['test_acc']:.3f} (val {final['val_acc']:.3f})")
    print(f"run directory: {run.run_dir}; trained model: {type(run.model).__name__} with "
          f"{sum(p.numel() for p in run.model.parameters()):,} parameters")


if __name__ == "__main__":
    main()
