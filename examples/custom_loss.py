"""A custom loss through the task contract: focal loss for node classification.

A task owns the loss (``gnntrain.Task``, contract in ``gnntrain.tasks.base``): subclass
the built-in ``NodeClassification`` and override ``loss`` (or the whole
``training_step``). The loss is **summed** over the batch's examples: gnntrain divides the
sum of every worker's sums by the global example count, so k workers compute the
gradient of the global batch exactly. The task object travels to the Ray workers as it
is. (Label smoothing needs no code: ``task.options: {label_smoothing: 0.1}``.)

    python examples/custom_loss.py            # 40 epochs on Cora, 2 workers
    python examples/custom_loss.py --smoke    # 2 epochs

Cora's raw files are read from $GNNTRAIN_DATA/planetoid/Cora/raw (datasets/cora.yaml).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import ClassVar

import torch.nn.functional as F
from torch import Tensor

import gnntrain

CORA = Path(__file__).resolve().parent.parent / "datasets" / "cora.yaml"


class FocalLoss(gnntrain.NodeClassification):
    """Node classification with the focal loss (Lin et al., 2017):
    ``-(1 - p_t)^gamma * log p_t``, which weights hard, misclassified nodes up."""

    name: ClassVar[str] = "focal_node_classification"

    def __init__(self, gamma: float = 2.0) -> None:
        super().__init__()
        if gamma < 0:
            raise ValueError(f"gamma={gamma}: must be >= 0 (0 is plain cross-entropy)")
        self.gamma = gamma

    def loss(self, out: Tensor, target: Tensor) -> Tensor:
        log_p = F.log_softmax(out, dim=1).gather(1, target.unsqueeze(1)).squeeze(1)
        return (-((1.0 - log_p.exp()) ** self.gamma) * log_p).sum()  # summed, not averaged


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="2 epochs (a quick check)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--gamma", type=float, default=2.0)
    args = ap.parse_args(argv)

    run = gnntrain.fit(CORA, task=FocalLoss(args.gamma), workers=args.workers,
                       progress=not args.smoke, train__epochs=2 if args.smoke else 40,
                       train__eval_every=10, sampler__batch_size=max(1, 35 // args.workers))
    final = run.summary["final"]
    print(f"GraphSAGE with focal loss (gamma={args.gamma}) on Cora, {run.summary['workers']} "
          f"workers: test accuracy {final['test_acc']:.3f} (train loss {final['loss']:.3f})")


if __name__ == "__main__":
    main()
