"""A learned (MLP) decoder in layer-wise evaluation: the pairs are scored with the model's
``decoder`` on the exact layer-wise rows, equal to sampled evaluation with all neighbours."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from gnntrain.rundir import RunDir
from gnntrain.runtime.coordinator import run_training
from gnntrain.tasks import LinkPrediction
from tests.conftest import make_graph
from tests.runtime.helpers import tiny_cfg

MLP = ["task.kind=link", "model.arch=gnntrain.tasks.link:with_mlp_decoder",
       'task.options={"decoder": "mlp", "exclude_targets": false, "hits_k": 5}',
       "train.epochs=2", "sampler.batch_size=256"]


def last_metrics(summary: dict) -> dict:  # type: ignore[type-arg]
    return RunDir(Path(summary["run_dir"])).metrics()[-1]


def test_mlp_decoder_layerwise_equals_sampled_with_all_neighbours(tmp_path: Path) -> None:
    g = make_graph(240, seed=6)
    full = last_metrics(run_training(tiny_cfg(tmp_path, *MLP, "train.eval=full", fanouts="[-1,-1]"),
                                     single_process=True, graph=g, progress=False))
    sampled = last_metrics(run_training(tiny_cfg(tmp_path, *MLP, "train.eval=sampled",
                                                 fanouts="[-1,-1]"),
                                        single_process=True, graph=g, progress=False))
    assert full["eval_mode"] == "full" and sampled["eval_mode"] != "full"
    # same training (same fanouts and seeds), so the same parameters; only the evaluation differs
    assert full["loss"] == sampled["loss"]
    for key in ("val_auc", "test_auc", "val_mrr", "test_mrr", "val_hits", "test_hits"):
        assert full[key] == pytest.approx(sampled[key], abs=1e-6), key
    assert 0.0 < full["test_auc"] < 1.0


def test_mlp_decoder_options_shape_the_decoder(tmp_path: Path) -> None:
    """``model.options.decoder_layers`` / ``decoder_dropout`` build OGB's ddi decoder (3 linear
    layers, dropout after each hidden one); bad values are refused naming the option."""
    from torch import nn

    from gnntrain.models import build_model
    from gnntrain.ops import ReluDropout

    cfg = tiny_cfg(tmp_path, *MLP, 'model.options={"decoder_layers": 3, "decoder_dropout": 0.5}')
    model = build_model(cfg.model.arch, cfg.model, 8, 4, 0)
    mods = list(model.decoder.net)
    assert [type(m) for m in mods] == [nn.Linear, ReluDropout] * 2 + [nn.Linear]
    assert all(m.p == 0.5 for m in mods if isinstance(m, ReluDropout))
    plain = build_model(cfg.model.arch, tiny_cfg(tmp_path, *MLP).model, 8, 4, 0)
    assert [type(m) for m in plain.decoder.net] == [nn.Linear, ReluDropout, nn.Linear]
    assert [m.p for m in plain.decoder.net if isinstance(m, ReluDropout)] == [0.0]
    for bad in ('{"decoder_layers": 0}', '{"decoder_dropout": 1.0}'):
        with pytest.raises(ValueError, match="model.options.decoder_"):
            build_model(cfg.model.arch, tiny_cfg(tmp_path, *MLP, f"model.options={bad}").model, 8, 4, 0)


def test_mlp_decoder_dropout_is_relu_then_dropout() -> None:
    """The decoder's fused ReLU + dropout: plain ReLU in evaluation; in training each hidden
    unit is zero or its ReLU value times 1 / (1 - p), kept with probability 1 - p, and the
    gradient flows through the kept units only."""
    import torch

    from gnntrain.tasks.decoders import HadamardMLP

    torch.manual_seed(0)
    dec = HadamardMLP(16, hidden=2048, layers=2, dropout=0.25)
    first, fused = dec.net[0], dec.net[1]
    h = torch.randn(64, 16)
    relu = torch.relu(first(h))
    dec.eval()
    assert torch.equal(fused(first(h)), relu)
    dec.train()
    x = first(h).detach().requires_grad_(True)
    out = fused(x)
    kept = out != 0
    assert torch.allclose(out[kept], relu[kept] / 0.75)
    alive = relu > 0
    assert abs(float(kept[alive].float().mean()) - 0.75) < 0.01   # 64 x 2048 draws
    out.sum().backward()
    assert x.grad is not None
    assert torch.equal(x.grad, kept.float() / 0.75)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 cores: with one torch thread "
                    "every gather's backward is serial and the order cannot vary")
def test_scoring_gradients_are_the_same_on_every_run_with_two_threads() -> None:
    """The endpoints' rows are gathered with ``index_select``: the backward of ``out[idx]``
    accumulates repeated rows in an order that varies between runs with 2 torch threads
    (one ogbl-ddi process differed by 2e-7 in its first epoch's loss), ``index_select``'s
    does not. Sizes where torch parallelises: 65,536 pairs over 4,267 rows."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        gen = torch.Generator().manual_seed(0)
        out = torch.randn(4267, 256, generator=gen)
        target = torch.randint(0, 4267, (65536, 2), generator=gen)
        weight = torch.randn(65536, generator=gen)
        task = LinkPrediction(decoder="dot")

        def grad() -> torch.Tensor:
            rows = out.clone().requires_grad_()
            (task.score(None, rows, target) * weight).sum().backward()
            assert rows.grad is not None
            return rows.grad

        first = grad()
        assert all(torch.equal(first, grad()) for _ in range(8))
    finally:
        torch.set_num_threads(threads)
