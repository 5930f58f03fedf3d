"""Configs for in-memory test graphs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from gnntrain.checkpoint import load_latest
from gnntrain.config import RunConfig, load_config
from gnntrain.rundir import RunDir


def tiny_cfg(tmp_path: Path, *overrides: str, workers: int = 1, fanouts: str = "[5,5]") -> RunConfig:
    raw: dict[str, Any] = {
        "dataset": {"name": "tiny", "source": "synthetic"},
        "partition": {"parts": workers, "method": "metis", "root": str(tmp_path / "parts")},
        "sampler": {"fanouts": [5, 5], "batch_size": 32, "prefetch": 1},
        "model": {"arch": "sage", "hidden": 16, "layers": 2, "dropout": 0.0},
        "train": {"epochs": 2, "lr": 0.01, "seed": 0, "run_root": str(tmp_path / "runs")},
        "cluster": {"workers": workers, "call_timeout_s": 60, "collective_timeout_s": 60,
                    "epoch_timeout_s": 120},
    }
    return load_config(raw=raw, overrides=[f"sampler.fanouts={fanouts}", *overrides])


def final_params(summary: dict[str, Any]) -> dict[str, torch.Tensor]:
    ckpt = load_latest(RunDir(Path(summary["run_dir"])))
    assert ckpt is not None, "the run wrote no checkpoint"
    return dict(ckpt["model"])
