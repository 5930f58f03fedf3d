"""Accuracy on Cora (Planetoid split), single process and distributed.

Targets (issues): GraphSAGE >= 79% and GCN >= 80% test accuracy (mean of 3 seeds);
mini-batch training with every neighbour within 1 point of full-batch PyG training;
2 and 4 workers within 1.5 points of the single-process trainer.

How each claim is checked without long runs:

- all-neighbour mini-batches against full-batch PyG: one batch of every training node
  with fanout -1 is full-batch training, so without dropout both take the same steps;
  the per-epoch losses and the final parameters are compared, then the accuracies.
- k workers against one process: three seeds on k Ray workers against the same seeds in
  one process (accuracy, since sampling and dropout streams differ with the partition),
  both with 20 epochs at twice the learning rate (:data:`SHORT`): the comparison is of the
  runtime, not of the config. Over seeds 0-2 the short schedule gave 79.6% in one process
  and 79.3 / 79.2% on 2 / 4 workers; the 40-epoch one 79.8% and 79.0% (one process, 2 workers).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from rich.console import Console

from gnntrain.config import RunConfig, load_config
from gnntrain.fullbatch import full_batch_train
from gnntrain.runtime.coordinator import run_training
from partition.graph import Graph
from tests.runtime.helpers import final_params

SEEDS = (0, 1, 2)
SHORT = ("train.epochs=20", "train.lr=0.01")
"""The schedule of the k-workers comparison (module docstring)."""
QUIET = Console(file=open("/dev/null", "w"))  # noqa: SIM115 - lives for the session


def cora_cfg(tmp: Path, *overrides: str) -> RunConfig:
    raw = {
        "dataset": {"name": "cora", "source": "planetoid", "path": "planetoid", "planetoid_name": "Cora",
                    "normalize_features": "row"},
        "partition": {"root": str(tmp / "parts")},
        "sampler": {"fanouts": [10, 10], "batch_size": 35},
        "model": {"arch": "sage", "hidden": 256, "layers": 2, "dropout": 0.5},
        "train": {"epochs": 40, "lr": 0.005, "weight_decay": 5e-4, "eval_every": 1000,
                  "run_root": str(tmp / "runs"), "plots": False},
    }
    return load_config(raw=raw, overrides=list(overrides))


@pytest.fixture(scope="module")
def cora(data_root: Path) -> Iterator[tuple[Graph, Path]]:
    from gnntrain.data import load_dataset

    tmp = Path(tempfile.mkdtemp(prefix="cora-"))
    cfg = cora_cfg(tmp, f"dataset.path={data_root / 'planetoid'}")
    yield load_dataset(cfg.dataset), tmp
    shutil.rmtree(tmp, ignore_errors=True)


def single_test_acc(cfg: RunConfig, graph: Graph) -> float:
    """Mean test accuracy of the single-process trainer over :data:`SEEDS`."""
    accs = []
    for seed in SEEDS:
        c = cfg.with_overrides([f"train.seed={seed}"])
        accs.append(run_training(c, graph=graph, single_process=True, progress=False, console=QUIET)
                    ["final"]["test_acc"])
    return float(np.mean(accs))


@pytest.fixture(scope="module")
def sage_single(cora: tuple[Graph, Path]) -> float:
    g, tmp = cora
    return single_test_acc(cora_cfg(tmp), g)


def test_graphsage_reaches_79(sage_single: float) -> None:
    assert sage_single >= 0.79, f"GraphSAGE mean test accuracy {sage_single:.3f} < 0.79"


def test_gcn_reaches_80(cora: tuple[Graph, Path]) -> None:
    """GCN as Kipf & Welling train it on this split (16 hidden units, dropout 0.5, learning
    rate 0.01, weight decay 5e-4, 200 epochs, every neighbour: their 81.5%)."""
    g, tmp = cora
    acc = single_test_acc(cora_cfg(tmp, "model.arch=gcn", "model.hidden=16", "sampler.fanouts=[-1,-1]",
                                   "sampler.batch_size=140", "train.epochs=200", "train.lr=0.01"), g)
    assert acc >= 0.80, f"GCN mean test accuracy {acc:.3f} < 0.80"


@pytest.mark.parametrize("arch", ["sage", "gcn"])
def test_all_neighbour_minibatches_match_full_batch_pyg(cora: tuple[Graph, Path], arch: str) -> None:
    """Fanout -1 with one batch of all training nodes is full-batch training, step for step:
    the same loss every epoch, the same parameters at the end (up to float summation order)
    and so the same accuracy."""
    g, tmp = cora
    cfg = cora_cfg(tmp, f"model.arch={arch}", "sampler.fanouts=[-1,-1]", "sampler.batch_size=140",
                   "train.epochs=30", "train.lr=0.01", "model.dropout=0.0", "train.checkpoint_every=30")
    mini = run_training(cfg, graph=g, single_process=True, progress=False, console=QUIET)
    full = full_batch_train(cfg, g)
    mini_losses = [json.loads(ln)["loss"] for ln in (Path(mini["run_dir"]) / "metrics.jsonl").open()]
    np.testing.assert_allclose(mini_losses, full.losses, rtol=1e-4)
    assert full.losses[-1] < 0.5 * full.losses[0], "the comparison needs training that moved"
    params = final_params(mini)
    assert params.keys() == full.state.keys()
    for k, v in full.state.items():
        torch.testing.assert_close(params[k], v, rtol=1e-3, atol=1e-4, msg=lambda m, k=k: f"{k}: {m}")
    assert abs(mini["final"]["test_acc"] - full.test_acc) <= 0.01, (mini["final"], full.test_acc)


@pytest.fixture(scope="module")
def sage_single_short(cora: tuple[Graph, Path]) -> float:
    g, tmp = cora
    return single_test_acc(cora_cfg(tmp, *SHORT), g)


@pytest.mark.parametrize("workers", [4, 2])  # the 4-worker group then serves the 2-worker runs
def test_distributed_matches_single_process(ray_local: None, cora: tuple[Graph, Path], sage_single_short: float,
                                            workers: int) -> None:
    """k METIS workers, the same global batch (35 seeds a step): within 1.5 points."""
    g, tmp = cora
    cfg = cora_cfg(tmp, *SHORT, f"cluster.workers={workers}", f"partition.parts={workers}",
                   f"sampler.batch_size={35 // workers}")
    accs = [run_training(cfg.with_overrides([f"train.seed={seed}"]), graph=g, progress=False, console=QUIET)
            ["final"]["test_acc"] for seed in SEEDS]
    acc, single = float(np.mean(accs)), sage_single_short
    assert single >= 0.78, f"the short schedule did not learn Cora: {single:.3f}"
    assert abs(acc - single) <= 0.015, f"{workers} workers: {acc:.3f} vs single process {single:.3f}"
