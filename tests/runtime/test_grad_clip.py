"""``train.grad_clip_norm``: the all-reduced gradients are clipped before the step, so one
clipped SGD step moves the parameters by exactly ``lr * clip`` and k workers take the
single process's clipped step (clipping each worker's part before the sum would not)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gnntrain.config import load_config
from gnntrain.models import build_model
from gnntrain.precision import Precision
from gnntrain.runtime.coordinator import run_training
from tests.conftest import make_graph
from tests.runtime.helpers import ONE_STEP, assert_params_close, final_params, tiny_cfg

CLIP = 0.05


def step_norm(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor], names: list[str]) -> float:
    return float(torch.linalg.vector_norm(torch.cat([(after[k] - before[k]).reshape(-1) for k in names])))


def test_clipped_step_has_the_clip_norm_and_k_workers_take_it(ray_local: None, tmp_path: Path) -> None:
    g = make_graph(240, seed=2)
    cfg = tiny_cfg(tmp_path, *ONE_STEP, f"train.grad_clip_norm={CLIP}", fanouts="[-1,-1]")
    model = build_model(cfg.model.arch, cfg.model, g.num_features, g.num_classes, 0)
    names = [n for n, _ in model.named_parameters()]
    fresh = {k: v.detach().clone() for k, v in model.state_dict().items()}
    lr = cfg.train.lr

    unclipped = final_params(run_training(tiny_cfg(tmp_path, *ONE_STEP, fanouts="[-1,-1]"),
                                          single_process=True, graph=g, progress=False))
    assert step_norm(fresh, unclipped, names) > 10 * lr * CLIP, "the gradient is too small to be clipped"
    single = final_params(run_training(cfg, single_process=True, graph=g, progress=False))
    assert step_norm(fresh, single, names) == pytest.approx(lr * CLIP, rel=1e-4)

    dist = final_params(run_training(tiny_cfg(tmp_path, *ONE_STEP, f"train.grad_clip_norm={CLIP}",
                                              workers=2, fanouts="[-1,-1]"), graph=g, progress=False))
    assert_params_close(dist, single)


def test_precision_step_clips_after_unscaling() -> None:
    """With a gradient scaler the true (unscaled) gradients are clipped."""
    for scaler in (None, torch.amp.GradScaler("cpu", init_scale=1024.0)):
        w = torch.nn.Parameter(torch.zeros(4))
        opt = torch.optim.SGD([w], lr=1.0)
        loss = (w * torch.tensor([30.0, 40.0, 0.0, 0.0])).sum()
        (scaler.scale(loss) if scaler is not None else loss).backward()
        Precision("bf16" if scaler else "fp32", "cpu", None, scaler).step(opt, clip_norm=2.0)
        torch.testing.assert_close(w.detach(), torch.tensor([-1.2, -1.6, 0.0, 0.0]))


def test_grad_clip_norm_must_be_positive() -> None:
    with pytest.raises(ValueError, match="grad_clip_norm"):
        load_config(raw={"dataset": {"name": "tiny", "source": "synthetic"}, "train": {"grad_clip_norm": 0}})
