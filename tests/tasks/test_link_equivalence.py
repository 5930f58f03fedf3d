"""Link prediction on k workers equals the single-process reference (one global step)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gnntrain.models import build_model
from gnntrain.rundir import RunDir
from gnntrain.runtime.coordinator import run_training
from tests.conftest import make_graph
from tests.runtime.helpers import (
    ONE_STEP,
    assert_moved,
    assert_params_close,
    final_params,
    final_state,
    tiny_cfg,
)

LINK = ["task.kind=link", 'task.options={"exclude_targets": false, "hits_k": 5, "num_negatives": 2}',
        "train.eval=sampled", *ONE_STEP, "sampler.batch_size=100000"]


@pytest.mark.parametrize(("workers", "examples", "reject"),
                         [(2, "directed", False), (4, "directed", False), (2, "undirected", True)])
def test_k_workers_one_step_equals_single_process(ray_local: None, tmp_path: Path, workers: int,
                                                  examples: str, reject: bool) -> None:
    """All neighbours, SGD, one step over all training edges: the union of the workers'
    batches (positives owned by their destination's owner, negatives hashed from the edge)
    is the single process's batch, so the parameters after the step agree; with
    ``examples: undirected`` each edge's one example is owned by one worker, and with
    ``reject_edges`` every worker redraws the same negatives."""
    g = make_graph(240, seed=2)
    common = [*LINK, f"task.options.examples={examples}",
              f"task.options.reject_edges={str(reject).lower()}"]
    single = run_training(tiny_cfg(tmp_path, *common, fanouts="[-1,-1]"), single_process=True,
                          graph=g, progress=False)
    dist = run_training(tiny_cfg(tmp_path, *common, workers=workers, fanouts="[-1,-1]"),
                        graph=g, progress=False)
    a, b = final_params(single), final_params(dist)
    assert_params_close(b, a)
    digests = final_state(dist)["rank_digests"]
    assert len(digests) == workers and len(set(digests)) == 1, digests
    cfg = tiny_cfg(tmp_path)
    assert_moved(build_model(cfg.model.arch, cfg.model, g.num_features, cfg.model.hidden, 0).state_dict(), a)
    # sampled evaluation with all neighbours scores the same pairs the same way
    fs, fd = single["final"], dist["final"]
    assert fd["val_hits"] == pytest.approx(fs["val_hits"], abs=1e-9)
    assert fd["test_hits"] == pytest.approx(fs["test_hits"], abs=1e-9)
    if reject:  # negatives were really redrawn: without rejection the step ends elsewhere
        plain = run_training(tiny_cfg(tmp_path, *LINK, f"task.options.examples={examples}",
                                      fanouts="[-1,-1]"), single_process=True, graph=g, progress=False)
        p = final_params(plain)
        assert any(not torch.equal(p[k], a[k]) for k in a)


def test_layerwise_evaluation_on_two_workers_equals_single_process(ray_local: None,
                                                                   tmp_path: Path) -> None:
    """train.eval=full: each worker scores the pairs whose destination it owns from the
    final rows; remote sources' rows come from their owners after the last layer."""
    g = make_graph(240, seed=3)
    common = [*LINK, "train.eval=full"]
    single = run_training(tiny_cfg(tmp_path, *common, fanouts="[-1,-1]"), single_process=True,
                          graph=g, progress=False)
    dist = run_training(tiny_cfg(tmp_path, *common, workers=2, fanouts="[-1,-1]"), graph=g,
                        progress=False)
    rs, rd = (RunDir(Path(s["run_dir"])).metrics()[-1] for s in (single, dist))
    assert rd["eval_mode"] == "full"
    for key in ("val_auc", "test_auc", "val_mrr", "test_mrr"):
        assert rd[key] == pytest.approx(rs[key], abs=1e-6), key
    assert abs(rd["test_hits"] - rs["test_hits"]) < 0.02
    assert rd["eval_comm"]["by_category"]["eval"] > 0  # rows really crossed workers
