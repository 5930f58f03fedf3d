"""Configs for in-memory test graphs, and reading back what a run ended with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from gnntrain.checkpoint import load_latest, state_digest
from gnntrain.config import RunConfig, load_config
from gnntrain.rundir import RunDir


def tiny_cfg(tmp_path: Path, *overrides: str, workers: int = 1, fanouts: str = "[5,5]") -> RunConfig:
    """2-layer GraphSAGE with dropout and sampling on, so the dropout and sampling streams
    are part of every equality a test asserts. No plots (``train.plots``: matplotlib's 1-2 s
    of CPU a run); the tests of the plots turn them on."""
    raw: dict[str, Any] = {
        "dataset": {"name": "tiny", "source": "synthetic"},
        "partition": {"parts": workers, "method": "metis", "root": str(tmp_path / "parts")},
        "sampler": {"fanouts": [5, 5], "batch_size": 32, "prefetch": 1},
        "model": {"arch": "sage", "hidden": 16, "layers": 2, "dropout": 0.3},
        "train": {"epochs": 2, "lr": 0.01, "seed": 0, "run_root": str(tmp_path / "runs"), "plots": False},
        "cluster": {"workers": workers, "call_timeout_s": 60, "collective_timeout_s": 60,
                    "epoch_timeout_s": 120},
    }
    return load_config(raw=raw, overrides=[f"sampler.fanouts={fanouts}", *overrides])


ONE_STEP = ("sampler.batch_size=1000", "train.epochs=1", "train.optimizer=sgd", "train.lr=0.5",
            "model.dropout=0.0")
"""One SGD step over the whole training set without dropout: with all neighbours, k workers
take exactly the single process's step (up to float summation order)."""


def assert_params_close(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    """Every parameter of ``got`` equals ``want``'s to float tolerance (one-step equivalence)."""
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=1e-4, atol=1e-5)


def assert_moved(fresh: dict[str, torch.Tensor], stepped: dict[str, torch.Tensor],
                 by: float = 1e-2) -> None:
    """The step moved the parameters far beyond the tolerance (else an equality says nothing)."""
    moved = max(float((fresh[k] - stepped[k]).abs().max()) for k in stepped)
    assert moved > by, f"one SGD step moved the parameters by only {moved:g}"


def final_state(summary: dict[str, Any]) -> dict[str, Any]:
    """The run's newest checkpoint: model, optimizer and (distributed) every rank's digest."""
    ckpt = load_latest(RunDir(Path(summary["run_dir"])))
    assert ckpt is not None, "the run wrote no checkpoint"
    return ckpt


def final_params(summary: dict[str, Any]) -> dict[str, torch.Tensor]:
    return dict(final_state(summary)["model"])


def assert_replicas_agree(state: dict[str, Any], world: int) -> None:
    """A distributed run's checkpoint carries a digest from each of its ``world`` workers,
    and every one is the digest of the checkpoint's own (rank 0's) model and optimizer."""
    digests = state.get("rank_digests")
    assert digests is not None and len(digests) == world, f"expected {world} rank digests: {digests}"
    bad = [r for r, d in enumerate(digests) if d != state_digest(state)]
    assert not bad, f"workers {bad} ended with another model or optimizer state than rank 0"


def assert_same_state(got: dict[str, Any], want: dict[str, Any], world: int | None = None) -> None:
    """Bit-identical model parameters and optimizer state; with ``world``, ``got`` must carry
    a digest from each of the ``world`` workers and every one must equal ``want``'s state
    (so no replica, not only rank 0, ended anywhere else)."""
    assert got["model"].keys() == want["model"].keys()
    for k in want["model"]:
        assert torch.equal(got["model"][k], want["model"][k]), f"parameter {k} differs"
    assert got["opt"]["param_groups"] == want["opt"]["param_groups"]
    assert got["opt"]["state"].keys() == want["opt"]["state"].keys()
    for i, st in want["opt"]["state"].items():
        for name, t in st.items():
            other = got["opt"]["state"][i][name]
            assert torch.equal(torch.as_tensor(other), torch.as_tensor(t)), f"optimizer {name} of {i} differs"
    want_digest = state_digest(want)
    assert state_digest(got) == want_digest
    if world is not None:
        digests = got.get("rank_digests")
        assert digests is not None and len(digests) == world, f"expected {world} rank digests: {digests}"
        bad = [r for r, d in enumerate(digests) if d != want_digest]
        assert not bad, f"workers {bad} ended with a different model or optimizer state"


def worker_actors_started() -> int:
    """The worker actors the connected Ray has started so far, dead or alive."""
    from ray._private import state

    return sum(1 for a in state.actors().values() if a["ActorClassName"] == "GnnWorker")
