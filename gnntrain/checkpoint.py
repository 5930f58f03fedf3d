"""Checkpoints: model, optimizer and position, written atomically, the last K kept.

Every random stream of training is re-derived from (seed, epoch, step, rank) at the
start of each epoch, so a checkpoint taken at an epoch boundary plus the same config
continues to exactly the parameters an uninterrupted run reaches.

A checkpoint holds only tensors and plain containers (the model and optimizer state
dicts, the config as a JSON-able dict, ``epochs_done``) and is read with
``torch.load(weights_only=True)``: a file that would build any other object -- a pickle
planted in a run directory copied from elsewhere, whose ``__reduce__`` runs code -- is
refused with :class:`CheckpointError` before anything in it executes.
"""

from __future__ import annotations

import io
import pickle
import re
from pathlib import Path
from typing import Any

import torch

from gnntrain.rundir import RunDir, atomic_write_bytes

_NAME = re.compile(r"^ckpt-(\d+)\.pt$")


class CheckpointError(ValueError):
    """A checkpoint holds objects a gnntrain checkpoint never contains; it is not loaded."""


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
            out: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
            return out
        except pickle.UnpicklingError as e:
            if "Weights only load failed" in str(e):
                raise _refusal(path, e) from None
            continue  # a torn/corrupt file: try the previous one
        except Exception:  # noqa: BLE001 - a torn/corrupt file: try the previous one
            continue
    return None


def _refusal(path: Path, e: pickle.UnpicklingError) -> CheckpointError:
    """The refusal of a checkpoint that would build objects beyond tensors and containers."""
    found = re.search(r"(GLOBAL \S+ was not an allowed global|Unsupported[^\n]*|"
                      r"[^\n]*is blocked[^\n]*)", str(e))
    return CheckpointError(
        f"checkpoint {path} was not loaded: it asks to build objects other than tensors and "
        f"plain containers ({found.group(0).strip() if found else 'rejected by weights_only'}), "
        "which a gnntrain checkpoint never holds; it was altered or written by something else. "
        "Delete it (and any other file of that run directory you did not write) to resume "
        "from an earlier checkpoint")
