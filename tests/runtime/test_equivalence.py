"""Distributed training equals the single-process reference (DESIGN: rules of thumb)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gnntrain.models import build_model
from gnntrain.runtime.coordinator import run_training
from tests.conftest import make_graph
from tests.runtime.helpers import (
    ONE_STEP,
    assert_moved,
    assert_params_close,
    assert_same_state,
    final_params,
    final_state,
    tiny_cfg,
)


# The largest group first: the kept group of its run then serves the smaller runs below
# (gnntrain.reuse_workers).
@pytest.mark.parametrize(("workers", "cache"), [(4, []),
                                               (4, ["sampler.cache.policy=degree", "sampler.cache.size=0.3"]),
                                               (2, [])])
def test_k_workers_one_step_equals_single_process(ray_local: None, tmp_path: Path, workers: int,
                                                  cache: list[str]) -> None:
    """All neighbours, no dropout, SGD, one step over the same global batch: same parameters
    (also with remote feature rows read from a cache)."""
    g = make_graph(240, seed=2)
    single = run_training(tiny_cfg(tmp_path, *ONE_STEP, fanouts="[-1,-1]"), single_process=True,
                          graph=g, progress=False)
    dist = run_training(tiny_cfg(tmp_path, *ONE_STEP, *cache, workers=workers, fanouts="[-1,-1]"),
                        graph=g, progress=False)
    a, b = final_params(single), final_params(dist)
    assert_params_close(b, a)
    assert (dist["cache_hit_rate"] or 0) > 0 if cache else dist["cache_hit_rate"] is None
    # every replica took the same step (not only rank 0, whose state the checkpoint holds)
    digests = final_state(dist)["rank_digests"]
    assert len(digests) == workers and len(set(digests)) == 1, digests
    # the step moved the parameters far beyond the tolerance (else the equality says nothing)
    model_cfg = tiny_cfg(tmp_path).model
    assert_moved(build_model(model_cfg.arch, model_cfg, g.num_features, g.num_classes, 0).state_dict(), a)
    assert single["epochs"] == dist["epochs"] == 1


def test_one_worker_on_ray_equals_single_process_exactly(ray_local: None, tmp_path: Path) -> None:
    """Dropout (0.3) and fanout sampling on: the Ray worker draws the same dropout masks
    and samples as the reference loop, so model and Adam state end bit-identical."""
    g = make_graph(300, seed=1)
    cfg = tiny_cfg(tmp_path, "train.epochs=2")
    assert cfg.model.dropout > 0 and all(f > 0 for f in cfg.sampler.fanouts)
    single = run_training(cfg, single_process=True, graph=g, progress=False)
    dist = run_training(cfg, graph=g, progress=False)
    assert_same_state(final_state(dist), final_state(single), world=1)
    assert single["final"]["test_acc"] == dist["final"]["test_acc"]
    # the dropout stream is really drawn: without dropout the same run ends elsewhere
    no_drop = run_training(tiny_cfg(tmp_path, "train.epochs=2", "model.dropout=0.0"), single_process=True,
                           graph=g, progress=False)
    a, b = final_params(single), final_params(no_drop)
    assert any(not torch.equal(a[k], b[k]) for k in a), "dropout changed nothing"
