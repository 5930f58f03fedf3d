"""Options users set, run through the distributed worker code on k in-process workers
(``LoopbackGroup``: the Ray workers' ``Worker`` with peers called directly).

Dropout is 0 here: in-process workers share torch's global generator across threads,
so only the Ray tests (one process per worker) exercise the dropout stream.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gnntrain.checkpoint import state_digest
from gnntrain.config import RunConfig
from gnntrain.engine import locality_order
from gnntrain.runtime.driver import FitResult, evaluate, fit
from gnntrain.runtime.loopback import LoopbackGroup
from gnntrain.tasks import NodeClassification
from gnntrain.tasks.node import epoch_seed_batches
from partition import build_partition_set
from tests.conftest import Graph, csr_from_edges, make_graph  # wherever the graph type lives
from tests.runtime.helpers import tiny_cfg

GRAPH = make_graph(600, avg_degree=8, seed=11)


def homophilous_graph(n: int = 600, classes: int = 4, seed: int = 12) -> Graph:
    """Edges mostly inside a class (90%), so aggregating neighbours helps: GCN and GAT,
    which mix a node with its neighbours, learn here (on GRAPH's random edges they barely do)."""
    g = make_graph(n, num_classes=classes, seed=seed)
    rng = np.random.default_rng(seed)
    by_class = [np.flatnonzero(g.y == c) for c in range(classes)]
    src = rng.integers(0, n, n * 4)
    same = rng.random(src.size) < 0.9
    dst = np.where(same, [rng.choice(by_class[g.y[s]]) for s in src], rng.integers(0, n, src.size))
    indptr, indices = csr_from_edges(src, dst, n, undirected=True, self_loops="remove")
    return Graph(indptr=indptr, indices=indices, x=g.x, y=g.y, train_idx=g.train_idx, val_idx=g.val_idx,
                 test_idx=g.test_idx, num_classes=classes, name="homophilous").validate()


def fit_loopback(tmp_path: Path, *overrides: str, workers: int = 2, graph: Graph = GRAPH,
                 keep_open: bool = False) -> tuple[FitResult, list[str], LoopbackGroup]:
    """Train on ``workers`` in-process workers; the result, every worker's state digest and
    the group (shut down unless ``keep_open``)."""
    cfg: RunConfig = tiny_cfg(tmp_path, "model.dropout=0.0", "train.epochs=3", *overrides, workers=workers)
    pset = build_partition_set(graph, cfg.partition, tmp_path / "parts")
    parts = [pset.load_part(p) for p in range(workers)]
    group = LoopbackGroup(cfg, parts, np.asarray(pset.global_degrees()), int(pset.num_classes),
                          cfg.model.arch, NodeClassification())
    try:
        res = fit(cfg, group, None, NodeClassification(), progress=False)
    finally:
        if not keep_open:
            group.shutdown()
    return res, [state_digest(w.trainer.state()) for w in group.workers], group


def assert_learns(res: FitResult, num_classes: int) -> None:
    losses = [e["loss"] for e in res.epochs]
    assert losses[-1] < losses[0], f"loss did not fall: {losses}"
    assert res.final["val_acc"] > 1.5 / num_classes, res.final


@pytest.mark.parametrize("policy", ["degree", "presample", "lru", "fifo"])
def test_every_cache_policy_ends_bit_identical_to_no_cache(tmp_path: Path, policy: str) -> None:
    """A cache only changes where a feature row is read from, never its value: every
    worker's model and optimizer state equals the no-cache run's, and the cache hit."""
    _, plain, _ = fit_loopback(tmp_path / "none")
    res, cached, _ = fit_loopback(tmp_path / policy, f"sampler.cache.policy={policy}", "sampler.cache.size=0.3")
    assert len(set(plain)) == 1 and len(set(cached)) == 1, "replicas differ"
    assert cached == plain, f"{policy} cache changed the trained state"
    hits = [e["cache_hit_rate"] for e in res.epochs]
    assert all(h is not None and h > 0 for h in hits), f"the {policy} cache never hit: {hits}"


def test_gat_trains_and_replicas_agree(tmp_path: Path) -> None:
    res, digests, _ = fit_loopback(tmp_path, "model.arch=gat", "model.heads=2", "train.epochs=4",
                                   "train.lr=0.03", graph=homophilous_graph())
    assert len(set(digests)) == 1, "GAT replicas ended with different states"
    assert_learns(res, GRAPH.num_classes)


def test_batch_norm_trains_and_replicas_agree(tmp_path: Path) -> None:
    """``model.norm: batch``: the BatchNorm running statistics are part of the state a
    checkpoint keeps from rank 0 and evaluation uses on every rank, so they must agree
    (the training step averages them across workers with the gradients)."""
    res, digests, group = fit_loopback(tmp_path, "model.norm=batch", "train.epochs=4")
    assert any("running_mean" in k for k in group.workers[0].trainer.state()["model"]), "no BatchNorm in the model"
    assert_learns(res, GRAPH.num_classes)
    assert len(set(digests)) == 1, "BatchNorm running statistics differ between workers"


def test_sampled_evaluation_counts_every_node_once(tmp_path: Path) -> None:
    """``train.eval: sampled`` scores every val/test node exactly once, and lands near the
    exact full-neighbour evaluation of the same model."""
    sampled, _, _ = fit_loopback(tmp_path / "s", "train.eval=sampled", "train.epochs=4")
    full, _, _ = fit_loopback(tmp_path / "f", "train.eval=full", "train.epochs=4")
    assert sampled.final["loss"] == full.final["loss"], "the evaluation mode changed training"
    for split in ("val", "test"):
        assert abs(sampled.final[f"{split}_acc"] - full.final[f"{split}_acc"]) < 0.1
    assert_learns(sampled, GRAPH.num_classes)


def _counts(group: LoopbackGroup) -> dict[str, Any]:
    return {s: sum(int(np.asarray(getattr(w.access.part, f"{s}_idx")).size) for w in group.workers)
            for s in ("val", "test")}


def test_sampled_evaluation_totals(tmp_path: Path) -> None:
    _, _, group = fit_loopback(tmp_path, "train.eval=sampled", "train.epochs=1", keep_open=True)
    try:
        got = evaluate(group, NodeClassification(), 0, "sampled")
    finally:
        group.shutdown()
    for split, n in _counts(group).items():
        assert sum(int(np.sum(r[split]["total"])) for r in got) == n == {"val": GRAPH.val_idx.size, "test": GRAPH.test_idx.size}[split]


def test_locality_seed_order_covers_each_training_node_once(tmp_path: Path) -> None:
    """``sampler.seed_order: locality``: each epoch's batches are runs of the locality
    order that together hold every training node exactly once, in an order that changes
    with the epoch; a run with it trains."""
    part = build_partition_set(GRAPH, tiny_cfg(tmp_path, workers=2).partition, tmp_path / "p").load_part(0)
    train = np.asarray(part.train_idx, dtype=np.int64)
    start = part.start
    order = locality_order(np.asarray(part.indptr), np.asarray(part.indices), start, train)
    assert np.array_equal(np.sort(order), np.sort(train))
    pos = {int(v): i for i, v in enumerate(order)}
    seen = []
    for epoch in (0, 1):
        batches = epoch_seed_batches(train, 5, seed=0, epoch=epoch, rank=0, order=order)
        flat = np.concatenate(batches)
        assert np.array_equal(np.sort(flat), np.sort(train)), "a node is missing or repeated"
        for b in batches:  # a batch is a run of consecutive positions (cyclically)
            steps = np.diff([pos[int(v)] for v in b]) % order.size
            assert np.all(steps == 1), "a batch is not a contiguous run of the locality order"
        seen.append(flat)
    assert not np.array_equal(seen[0], seen[1]), "the same order every epoch"
    res, digests, _ = fit_loopback(tmp_path / "run", "sampler.seed_order=locality", "train.epochs=4")
    assert len(set(digests)) == 1
    assert_learns(res, GRAPH.num_classes)
