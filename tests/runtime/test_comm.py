"""Communication accounting: bytes counted equal bytes sent (DESIGN: account and report)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gnntrain.config import RunConfig
from gnntrain.runtime.codec import Encoded
from gnntrain.runtime.comm import CATEGORIES, summarise
from gnntrain.runtime.coordinator import run_training
from gnntrain.runtime.driver import fit
from gnntrain.runtime.loopback import LoopbackGroup, LoopbackPeers
from partition import build_partition_set
from samplers import Neighbors
from tests.conftest import make_graph
from tests.runtime.helpers import tiny_cfg


class RecordingPeers(LoopbackPeers):
    """Loopback transport that adds up the array payloads it actually carries."""

    sent = {"sample": 0, "feature": 0}

    def sample(self, requests: dict[int, np.ndarray], fanout: int, replace: bool,
               key: int) -> dict[int, Neighbors]:
        replies = super().sample(requests, fanout, replace, key)
        for o, ids in requests.items():
            RecordingPeers.sent["sample"] += ids.nbytes + 3 * 8  # ids + fanout, replace, key
            RecordingPeers.sent["sample"] += replies[o].counts.nbytes + replies[o].nbrs.nbytes
        return replies

    def features(self, requests: dict[int, np.ndarray], dtype: str) -> dict[int, Encoded]:
        replies = super().features(requests, dtype)
        for o, ids in requests.items():
            rep = replies[o]
            RecordingPeers.sent["feature"] += ids.nbytes + 8 + rep.data.nbytes
            if rep.scale is not None:
                RecordingPeers.sent["feature"] += rep.scale.nbytes
        return replies


def _loopback(cfg: RunConfig, tmp_path: Path, seed: int = 3) -> LoopbackGroup:
    g = make_graph(400, seed=seed)
    pset = build_partition_set(g, cfg.partition, tmp_path / "parts")
    parts = [pset.load_part(p) for p in range(pset.num_parts)]
    group = LoopbackGroup(cfg, parts, pset.global_degrees(), int(pset.num_classes))
    for c in group.cores:
        c.peers = c.source.peers = c.reader.peers = RecordingPeers(group.cores, c.rank)
    return group


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8"])
def test_counted_bytes_equal_bytes_sent(tmp_path: Path, dtype: str) -> None:
    RecordingPeers.sent = {"sample": 0, "feature": 0}
    cfg = tiny_cfg(tmp_path, f"train.feature_dtype={dtype}", "train.epochs=1", workers=2)
    group = _loopback(cfg, tmp_path)
    res = fit(cfg, group, None, train_counts=group.train_counts, progress=False)
    counted = res.epochs[0]["comm"]["by_category"]
    assert counted["sample"] > 0 and counted["feature"] > 0
    assert counted["sample"] == RecordingPeers.sent["sample"]
    assert counted["feature"] == RecordingPeers.sent["feature"]
    # the k x k matrix adds up to the categories and nobody sends to itself
    mat = np.asarray(res.epochs[0]["comm"]["matrix"])
    assert mat.sum() == sum(counted.values())
    assert np.all(np.diag(mat) == 0)


def test_cache_of_all_remote_rows_moves_no_feature_bytes(tmp_path: Path) -> None:
    cfg = tiny_cfg(tmp_path, "sampler.cache.policy=degree", "sampler.cache.size=1.0",
                   "train.epochs=2", workers=2)
    group = _loopback(cfg, tmp_path)
    res = fit(cfg, group, None, train_counts=group.train_counts, progress=False)
    assert res.setup_comm["by_category"]["feature"] > 0  # warm-up filled the cache
    for rec in res.epochs:
        assert rec["comm"]["by_category"]["feature"] == 0
        assert rec["cache_hit_rate"] == 1.0
        assert rec["feature_bytes_saved_by_cache"] > 0


def test_reduced_precision_halves_feature_bytes(tmp_path: Path) -> None:
    out: dict[str, Any] = {}
    for dtype in ("float32", "float16"):
        cfg = tiny_cfg(tmp_path, f"train.feature_dtype={dtype}", "train.epochs=1", workers=2)
        group = _loopback(cfg, tmp_path)
        res = fit(cfg, group, None, train_counts=group.train_counts, progress=False)
        out[dtype] = res.epochs[0]["comm"]
    f32, f16 = out["float32"]["by_category"]["feature"], out["float16"]["by_category"]["feature"]
    assert f16 < 0.75 * f32
    assert out["float32"]["by_category"]["sample"] == out["float16"]["by_category"]["sample"]


def test_one_worker_sends_nothing_but_control(ray_local: None, tmp_path: Path) -> None:
    summary = run_training(tiny_cfg(tmp_path, "train.epochs=1"), graph=make_graph(200), progress=False)
    for cat in CATEGORIES:
        if cat != "control":
            assert summary["bytes_per_epoch_by_category"][cat] == 0


def test_two_workers_on_ray_report_traffic(ray_local: None, tmp_path: Path) -> None:
    summary = run_training(tiny_cfg(tmp_path, "train.epochs=1", workers=2), graph=make_graph(300),
                           progress=False)
    by = summary["bytes_per_epoch_by_category"]
    assert by["sample"] > 0 and by["feature"] > 0 and by["gradient"] > 0
    run = Path(summary["run_dir"])
    for name in ("comm.json", "metrics.jsonl", "summary.json", "partition.json", "config.yaml",
                 "bytes.png", "heatmap.png", "accuracy.png"):
        assert (run / name).is_file(), name


def test_summarise_matrix() -> None:
    snaps = [{"rank": 0, "bytes": [[0, 5], [0, 7], [0, 0], [0, 0]], "messages": [[0, 1], [0, 1], [0, 0], [0, 0]]},
             {"rank": 1, "bytes": [[3, 0], [0, 0], [0, 0], [1, 0]], "messages": [[1, 0], [0, 0], [0, 0], [1, 0]]}]
    s = summarise(snaps, 2)
    assert s["matrix"] == [[0, 12], [4, 0]]
    assert s["by_category"] == {"sample": 8, "feature": 7, "gradient": 0, "control": 1}
