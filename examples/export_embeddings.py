"""Export node embeddings from a trained run, then fit a linear classifier on them.

Trains GraphSAGE on Cora with 2 workers (or takes an existing run directory), writes the
hidden rows after layer 1 of every node with :func:`gnntrain.predict.predict` (each worker
writes its own nodes' shard), reads them back in original node order with
:func:`gnntrain.predict.read_predictions`, and fits a scikit-learn logistic regression
on the training split's embeddings. Prints the test accuracy.

    python examples/export_embeddings.py --smoke                     # tiny run, ~1 minute
    python examples/export_embeddings.py                             # full Cora config
    python examples/export_embeddings.py --run runs/cora-20261130-081500 --layer 1

Same as the CLI: ``python -m gnntrain.predict RUN_DIR --what embeddings --layer 1``.
Trained here, it needs the Cora raw files under ``$GNNTRAIN_DATA/planetoid/Cora/raw`` and scikit-learn.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from gnntrain import reuse_workers
from gnntrain.config import load_config
from gnntrain.data import load_dataset
from gnntrain.predict import predict, read_predictions
from gnntrain.rundir import RunDir

CORA = Path(__file__).resolve().parent.parent / "datasets" / "cora.yaml"


def train(root: Path, workers: int, smoke: bool) -> Path:
    """Train on Cora with ``workers`` Ray workers; returns the run directory."""
    from gnntrain.runtime.coordinator import run_training

    overrides = [f"cluster.workers={workers}", f"partition.parts={workers}",
                 f"train.run_root={root / 'runs'}", f"partition.root={root / 'partitions'}"]
    if smoke:  # a few epochs of a narrower model: enough for a far-above-chance classifier
        overrides += ["train.epochs=4", "train.eval_every=4", "model.hidden=64", "train.lr=0.01"]
    summary = run_training(load_config(CORA, overrides), progress=False)
    return Path(summary["run_dir"])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, default=None, help="an existing run directory (skips training)")
    ap.add_argument("--layer", type=int, default=None, help="embeddings after this layer "
                    "(default: the input of the last layer)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--root", type=Path, default=Path("runs") / "example-embeddings",
                    help="where the run, its partition set and the embeddings go")
    ap.add_argument("--smoke", action="store_true", help="a tiny run (what the test runs)")
    args = ap.parse_args(argv)

    from sklearn.linear_model import LogisticRegression

    # joined to a Ray cluster (RAY_ADDRESS), the training run's workers serve the prediction
    with reuse_workers():
        run = args.run or train(args.root, args.workers, args.smoke)
        out = predict(run, what="embeddings", layer=args.layer, out=args.root / "embeddings", force=True)
    ids, emb = read_predictions(out)

    cfg = load_config(raw=RunDir(run).read_config_raw())
    graph = load_dataset(cfg.dataset)  # labels and splits, by original node id
    assert np.array_equal(ids, np.arange(graph.num_nodes)), "every node exactly once"
    clf = LogisticRegression(max_iter=2000)
    clf.fit(emb[graph.train_idx], graph.y[graph.train_idx])
    acc = float(clf.score(emb[graph.test_idx], graph.y[graph.test_idx]))
    print(f"embeddings: {emb.shape[0]} nodes x {emb.shape[1]} from {out}")
    print(f"test accuracy: {acc:.4f}")


if __name__ == "__main__":
    main()
