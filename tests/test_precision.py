"""``train.precision``: bf16 autocast for the model's compute, float32 for everything kept.

What must hold: a bf16 run trains (loss falls) and really computes in bfloat16 (it ends
elsewhere than fp32); parameters, gradients, the all-reduced buffer, the loss and the
optimizer state stay float32; the fp32 path is the plain step, bit for bit; one Ray
worker equals the single-process trainer bit for bit under bf16 too; bad values are
refused with the allowed list; the fused ReLU + dropout kernel on bfloat16 draws the same
mask as on float32.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any, get_args

import numpy as np
import pytest
import torch

from gnntrain.api import check_startable
from gnntrain.config import ConfigError, ModelConfig, TrainConfig
from gnntrain.engine import EpochStats, Prepared, layer_forward, train_step
from gnntrain.models import build_model
from gnntrain.ops import relu_dropout
from gnntrain.precision import FP32, PRECISIONS, cpu_bf16_native, resolve_precision
from gnntrain.runtime.coordinator import run_training
from gnntrain.tasks import NodeClassification
from samplers import CSRSource, NeighborSampler, prepare
from tests.conftest import make_graph
from tests.runtime.helpers import assert_same_state, final_params, final_state, tiny_cfg


def _losses(summary: dict[str, Any]) -> list[float]:
    p = Path(summary["run_dir"]) / "metrics.jsonl"
    return [json.loads(ln)["loss"] for ln in p.read_text().splitlines() if ln.strip()]


def _prepared(seed: int = 0) -> tuple[Prepared, int, int]:
    g = make_graph(300, seed=seed)
    sampler = NeighborSampler(CSRSource.from_graph(g), [5, 5])
    seeds = np.arange(0, 120, dtype=np.int64)
    sb = sampler.sample(seeds, key=3)
    pb = prepare(sb, g.x[sb.input_nodes], g.y[seeds])
    return Prepared(pb, 0.0, 0.0, int(sb.input_nodes.size), sb.num_sampled_edges), g.num_features, g.num_classes


def _model(in_dim: int, out_dim: int) -> torch.nn.Module:
    cfg = ModelConfig(arch="sage", hidden=32, layers=2, dropout=0.3)
    return build_model(cfg.arch, cfg, in_dim, out_dim, seed=0)


def _assert_float32_state(model: torch.nn.Module, opt: torch.optim.Optimizer) -> None:
    """Parameters, their gradients and Adam's moments all float32."""
    for p in model.parameters():
        assert p.dtype == torch.float32 and p.grad is not None and p.grad.dtype == torch.float32
    for st in opt.state.values():
        assert st["exp_avg"].dtype == st["exp_avg_sq"].dtype == torch.float32


# -- configuration and selection ------------------------------------------------------------
def test_precision_values_are_the_config_literal() -> None:
    assert get_args(TrainConfig.model_fields["precision"].annotation) == PRECISIONS
    assert TrainConfig().precision == "fp32"


def test_bad_precision_is_refused_with_the_allowed_values(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        tiny_cfg(tmp_path, "train.precision=fp16")
    msg = str(e.value)
    assert "train.precision" in msg and "'fp32'" in msg and "'bf16'" in msg and "fp16" in msg
    with pytest.raises(ValueError, match=r"train.precision='half': expected one of fp32, bf16"):
        resolve_precision("half", torch.device("cpu"))


def test_precision_selection_per_device() -> None:
    cpu = torch.device("cpu")
    assert resolve_precision("fp32", cpu).dtype is None
    p = resolve_precision("bf16", cpu)
    assert (p.dtype, p.device_type, p.scaler) == (torch.bfloat16, "cpu", None)
    cuda = torch.device("cuda")
    assert resolve_precision("bf16", cuda, bf16_supported=True).dtype == torch.bfloat16
    with warnings.catch_warnings():  # without CUDA the scaler warns and disables itself
        warnings.simplefilter("ignore", UserWarning)
        fp16 = resolve_precision("bf16", cuda, bf16_supported=False)
    assert fp16.dtype == torch.float16 and isinstance(fp16.scaler, torch.amp.GradScaler)
    assert resolve_precision("fp32", cuda, bf16_supported=False).scaler is None
    with pytest.raises(ValueError, match="'cpu' and 'cuda'"):
        resolve_precision("bf16", torch.device("meta"))


def test_cpu_bf16_support_is_read_from_the_cpu_flags(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 fma\n")
    assert cpu_bf16_native(info) is False
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16\n")
    assert cpu_bf16_native(info) is True
    info.write_text("processor\t: 0\nFeatures\t: fp asimd bf16 i8mm\n")  # Arm
    assert cpu_bf16_native(info) is True
    assert cpu_bf16_native(tmp_path / "absent") is None


@pytest.mark.parametrize("native", [False, True, None])
def test_bf16_on_a_cpu_without_bfloat16_warns_at_start_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          native: bool | None) -> None:
    monkeypatch.setattr("gnntrain.precision.cpu_bf16_native", lambda: native)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        check_startable(tiny_cfg(tmp_path, "train.precision=bf16"), single_process=True)
        check_startable(tiny_cfg(tmp_path, "train.precision=fp32"), single_process=True)
    msgs = [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]
    assert len(msgs) == (1 if native is False else 0), msgs
    assert all("train.precision='bf16'" in m and "fp32" in m for m in msgs)


# -- the fused kernel ----------------------------------------------------------------------
@pytest.mark.parametrize("p", [0.5, 0.3])
def test_relu_dropout_bf16_draws_the_float32_mask(p: float) -> None:
    """Same seed, same mask; survivors are x / (1 - p) rounded once to bfloat16; the
    gradient goes through the same mask."""
    x = torch.randn(301, 67).bfloat16()
    x[0, :4] = torch.tensor([float("nan"), float("inf"), -0.0, float("-inf")])
    torch.manual_seed(4)
    ref = relu_dropout(x.float(), p, training=True)
    xb = x.clone().requires_grad_()
    torch.manual_seed(4)
    out = relu_dropout(xb, p, training=True)
    assert out.dtype == torch.bfloat16
    assert torch.equal(out != 0, ref != 0)
    zero = torch.zeros((), dtype=torch.bfloat16)
    scale = np.float32(1 / (1 - p))
    assert torch.equal(out, torch.where(ref != 0, (x.float() * scale).bfloat16(), zero))
    g = torch.randn_like(out)
    out.backward(g)
    assert xb.grad is not None and xb.grad.dtype == torch.bfloat16
    assert torch.equal(xb.grad, torch.where(ref != 0, (g.float() * scale).bfloat16(), zero))


# -- one step -------------------------------------------------------------------------------
def test_bf16_step_keeps_float32_state_and_buffer() -> None:
    item, f, c = _prepared()
    model = _model(f, c)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    seen: dict[str, Any] = {}

    def allreduce(t: torch.Tensor) -> torch.Tensor:
        seen["buf"] = t.dtype
        return t

    linear_out: list[torch.dtype] = []
    hook = model.convs[0].lin_l.register_forward_hook(lambda m, i, o: linear_out.append(o.dtype))
    losses = []
    task = NodeClassification()
    orig = task.loss

    def loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        val = orig(out, target)
        losses.append(val.dtype)
        return val

    task.loss = loss  # type: ignore[method-assign]
    train_step(model, opt, task, item, allreduce, EpochStats(0), precision=resolve_precision("bf16", torch.device("cpu")))
    hook.remove()
    assert linear_out == [torch.bfloat16], "the forward did not run in bfloat16"
    assert losses == [torch.float32]
    assert seen["buf"] == torch.float32
    _assert_float32_state(model, opt)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("native", [True, False], ids=["bf16", "fp16-with-scaler"])
def test_cuda_mixed_precision_steps_keep_float32_state_and_train(native: bool) -> None:
    """On a GPU: bf16 autocast, or float16 with the gradient scaler where the GPU has no
    bfloat16 (forced here); the forward runs in the low dtype, everything kept is float32
    on the GPU, the scaler's scale is not left in the gradients, and the loss falls."""
    item, f, c = _prepared(2)
    cuda = torch.device("cuda")
    model = _model(f, c).to(cuda)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    precision = resolve_precision("bf16", cuda, bf16_supported=native)
    assert (precision.scaler is None) == native
    low = torch.bfloat16 if native else torch.float16
    linear_out: list[torch.dtype] = []
    hook = model.convs[0].lin_l.register_forward_hook(lambda m, i, o: linear_out.append(o.dtype))
    grads: list[float] = []

    def allreduce(t: torch.Tensor) -> torch.Tensor:
        assert t.dtype == torch.float32 and t.is_cuda
        grads.append(float(t[:-3].abs().max()))
        return t

    losses = []
    for _ in range(30):
        stats = EpochStats(0)
        train_step(model, opt, NodeClassification(), item, allreduce, stats, device=cuda, precision=precision)
        losses.append(stats.loss_sum / max(stats.examples, 1))
    hook.remove()
    assert set(linear_out) == {low}, f"the forward ran in {set(linear_out)}, not {low}"
    _assert_float32_state(model, opt)
    for p in model.parameters():
        assert p.is_cuda and bool(torch.isfinite(p).all())
    if not native:
        assert precision.scaler is not None and precision.scaler.get_scale() > 1.0
        # the buffer holds scaled gradients (the first steps overflow at the initial scale
        # and are skipped while the scaler halves it); after unscaling Adam saw true ones
        finite = [g for g in grads if math.isfinite(g)]
        assert finite and max(finite) > 10.0, grads
    assert losses[-1] < 0.7 * losses[0], f"did not train on the GPU: {losses[0]:.3f} -> {losses[-1]:.3f}"


def test_fp32_step_is_the_plain_step_bit_for_bit() -> None:
    """train_step with fp32 == forward, summed loss, backward, grad / count, Adam; no
    autocast and no casts on the way (else the bits move)."""
    item, f, c = _prepared(1)
    assert item.batch is not None
    task = NodeClassification()
    a, b = _model(f, c), _model(f, c)
    opt_a, opt_b = torch.optim.Adam(a.parameters(), lr=0.01), torch.optim.Adam(b.parameters(), lr=0.01)
    for step in range(3):
        torch.manual_seed(step)
        train_step(a, opt_a, task, item, lambda t: t, EpochStats(0), precision=FP32)
        torch.manual_seed(step)
        b.train()
        opt_b.zero_grad(set_to_none=False)
        loss = task.loss(b(item.batch.blocks, item.batch.x), item.batch.y)
        loss.backward()
        for p in b.parameters():
            assert p.grad is not None
            p.grad = p.grad / item.batch.y.shape[0]
        opt_b.step()
    for (name, pa), pb in zip(a.named_parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb), f"{name} differs"


def test_bf16_layer_forward_returns_float32_rows_close_to_fp32() -> None:
    g = make_graph(200, seed=3)
    model = _model(g.num_features, g.num_classes)
    h = torch.from_numpy(g.x)
    full = layer_forward(model, 0, h, g.indptr, g.indices, None, chunk=64)
    half = layer_forward(model, 0, h, g.indptr, g.indices, None, chunk=64,
                         precision=resolve_precision("bf16", torch.device("cpu")))
    assert half.dtype == torch.float32
    assert not torch.equal(half, full)
    torch.testing.assert_close(half, full, rtol=0.05, atol=0.05)


# -- whole runs -----------------------------------------------------------------------------
def test_bf16_run_trains_and_fp32_is_unchanged(tmp_path: Path) -> None:
    g = make_graph(400, seed=5)
    common = ["train.epochs=4", "model.hidden=32"]
    unset = run_training(tiny_cfg(tmp_path, *common), single_process=True, graph=g, progress=False)
    fp32 = run_training(tiny_cfg(tmp_path, *common, "train.precision=fp32"), single_process=True,
                        graph=g, progress=False)
    bf16 = run_training(tiny_cfg(tmp_path, *common, "train.precision=bf16"), single_process=True,
                        graph=g, progress=False)
    assert_same_state(final_state(fp32), final_state(unset))
    losses = _losses(bf16)
    assert losses[-1] < losses[0] * 0.9, f"bf16 did not train: {losses}"
    assert abs(losses[-1] - _losses(fp32)[-1]) < 0.1 * _losses(fp32)[-1]
    state = final_state(bf16)
    for k, v in state["model"].items():
        assert v.dtype == torch.float32 or not v.is_floating_point(), f"{k} is {v.dtype}"
    for st in state["opt"]["state"].values():
        for name, t in st.items():
            if torch.is_tensor(t) and t.is_floating_point() and t.numel() > 1:
                assert t.dtype == torch.float32, f"optimizer {name} is {t.dtype}"
    a, b = final_params(bf16), final_params(fp32)
    assert any(not torch.equal(a[k], b[k]) for k in a), "bf16 computed exactly what fp32 did"


def test_bf16_one_worker_on_ray_equals_single_process_exactly(ray_local: None, tmp_path: Path) -> None:
    g = make_graph(300, seed=1)
    cfg = tiny_cfg(tmp_path, "train.epochs=2", "train.precision=bf16")
    single = run_training(cfg, single_process=True, graph=g, progress=False)
    dist = run_training(cfg, graph=g, progress=False)
    assert_same_state(final_state(dist), final_state(single), world=1)
    assert single["final"]["test_acc"] == dist["final"]["test_acc"]
