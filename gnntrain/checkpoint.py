"""Checkpoints: model, optimizer and position, written atomically, the last K kept.

Every random stream of training is re-derived from (seed, epoch, step, rank) at the
start of each epoch, so a checkpoint taken at an epoch boundary plus the same config
continues to exactly the parameters an uninterrupted run reaches.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import torch

from gnntrain.rundir import RunDir, atomic_write_bytes

_NAME = re.compile(r"^ckpt-(\d+)\.pt$")


def save_checkpoint(run: RunDir, epoch: int, state: dict[str, Any], keep: int) -> Path:
    """Write ``checkpoints/ckpt-<epoch>.pt`` (state after ``epoch`` epochs) atomically."""
    buf = io.BytesIO()
    torch.save({"epochs_done": epoch, **state}, buf)
    path = run.path / "checkpoints" / f"ckpt-{epoch:05d}.pt"
    atomic_write_bytes(path, buf.getvalue())
    for old in list_checkpoints(run)[:-keep]:
        old.unlink(missing_ok=True)
    return path


def list_checkpoints(run: RunDir) -> list[Path]:
    d = run.path / "checkpoints"
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if _NAME.match(p.name))


def load_latest(run: RunDir) -> dict[str, Any] | None:
    """The newest readable checkpoint; a corrupt newest one falls back to the one before."""
    for path in reversed(list_checkpoints(run)):
        try:
            out: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=False)
            return out
        except Exception:  # noqa: BLE001 - a torn/corrupt file: try the previous one
            continue
    return None
