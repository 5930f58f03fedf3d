"""Sampled evaluation of a huge split scores a seeded sample (``train.eval_max_nodes``):
the same nodes on one process and on k workers, and the metrics say how many."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gnntrain.rundir import RunDir
from gnntrain.runtime.coordinator import run_training
from gnntrain.tasks.base import hash_uniform
from tests.conftest import make_graph
from tests.runtime.helpers import ONE_STEP, tiny_cfg

CAP = 40  # of make_graph(400)'s 100 validation and 100 test nodes


def expected_nodes(ids: np.ndarray, seed: int) -> int:
    """The sample, from the dataset ids alone: kept iff hash(seed, id) < cap / size."""
    return int((hash_uniform(seed, ids) < CAP / ids.size).sum())


def test_large_splits_are_sampled_alike_on_one_process_and_two_workers(ray_local: None,
                                                                       tmp_path: Path) -> None:
    g = make_graph(400, seed=4)
    common = [*ONE_STEP, "train.eval=sampled", f"train.eval_max_nodes={CAP}"]
    single = run_training(tiny_cfg(tmp_path, *common, fanouts="[-1,-1]"), single_process=True,
                          graph=g, progress=False)
    dist = run_training(tiny_cfg(tmp_path, *common, workers=2, fanouts="[-1,-1]"), graph=g,
                        progress=False)
    rs, rd = (RunDir(Path(s["run_dir"])).metrics()[-1] for s in (single, dist))
    for split in ("val", "test"):
        want = expected_nodes(g.split_idx(split), seed=0)
        assert 0 < want < g.split_idx(split).size
        assert rs[f"{split}_nodes"] == rd[f"{split}_nodes"] == want
        assert abs(rs[f"{split}_acc"] - rd[f"{split}_acc"]) <= 1 / want  # one step apart: ~equal


def test_small_splits_and_a_null_cap_evaluate_every_node(tmp_path: Path) -> None:
    g = make_graph(400, seed=4)
    for cap in ("1000", "null"):
        res = run_training(tiny_cfg(tmp_path, *ONE_STEP, "train.eval=sampled",
                                    f"train.eval_max_nodes={cap}"),
                           single_process=True, graph=g, progress=False)
        rec = RunDir(Path(res["run_dir"])).metrics()[-1]
        assert "val_nodes" not in rec and "test_nodes" not in rec
