"""Checkpoints: model, optimizer and position, written atomically, the last K kept.

Every random stream of training is re-derived from (seed, epoch, step, rank) at the
start of each epoch, so a checkpoint taken at an epoch boundary plus the same config
continues to exactly the parameters an uninterrupted run reaches.

A checkpoint holds only tensors and plain containers (the model and optimizer state
dicts, the config as a JSON-able dict, ``epochs_done``) and is read with
``torch.load(weights_only=True)``: a file that would build any other object -- a pickle
planted in a run directory copied from elsewhere, whose ``__reduce__`` runs code -- is
refused with :class:`CheckpointError` before anything in it executes.

A checkpoint holds one worker's model and optimizer state (all replicas are equal
after every step) and, from a distributed run, ``rank_digests``: a digest of every
worker's own state at the same moment (:func:`state_digest`), so a replica that drifted
from the others is visible in the file.

State that differs per worker -- each part's rows of a learnable node embedding and
their optimizer state -- goes to one side file per part, ``ckpt-<epoch>.part-<p>.pt``,
written (atomically) before the main file, which is their manifest: it lists them in
``part_files``, with their state digests in ``part_digests`` and each file's size and
SHA-256 in ``part_records`` (``{"bytes", "sha256"}``, :mod:`partition.manifest`). The
coordinator fetches and writes one part at a time, so it never holds the whole table. A
checkpoint whose side files are missing or differ from their records is skipped like a
torn one (one written before ``part_records`` existed is checked for presence only).
"""

from __future__ import annotations

import hashlib
import io
import pickle
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from gnntrain.checkpoint_names import BEST, checkpoint_file, is_rotating, rotating_stem
from gnntrain.rundir import RunDir
from partition.manifest import FileMismatch, atomic_write_bytes, record_bytes, verify


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class CheckpointError(ValueError):
    """A checkpoint holds objects a gnntrain checkpoint never contains; it is not loaded."""


def _torch_bytes(value: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(value, buf)
    return buf.getvalue()


def save_checkpoint(run: RunDir, epoch: int, state: dict[str, Any], keep: int,
                    parts: Iterable[dict[str, Any]] = (), stem: str | None = None) -> Path:
    """Write ``checkpoints/ckpt-<epoch>.pt`` (state after ``epoch`` epochs) atomically,
    after the per-part side files of ``parts`` (one state per part, in part order), and
    keep the newest ``keep``. With ``stem`` (:data:`BEST`), write ``<stem>.pt`` instead,
    replacing the previous one, outside the rotation. A run on object storage then uploads
    it, its manifest last (:meth:`RunDir.publish_checkpoint`)."""
    d = run.path / "checkpoints"
    rotate = stem is None
    stem = stem or rotating_stem(epoch)
    files, digests, records = [], [], []
    for p, part_state in enumerate(parts):
        name = f"{stem}.part-{p}.pt"
        data = _torch_bytes(part_state)
        atomic_write_bytes(d / name, data)
        files.append(name)
        digests.append(tree_digest(part_state))
        records.append(asdict(record_bytes(data)))
    extra = {"part_files": files, "part_digests": digests, "part_records": records} if files else {}
    path = d / f"{stem}.pt"
    atomic_write_bytes(path, _torch_bytes({"epochs_done": epoch, **state, **extra}))
    if rotate:
        for old in list_checkpoints(run)[:-keep]:
            old.unlink(missing_ok=True)
            for side in d.glob(f"{old.stem}.part-*.pt"):
                side.unlink(missing_ok=True)
    run.publish_checkpoint(stem, [*files, path.name], keep if rotate else None)
    return path


def load_part_file(run: RunDir, name: str) -> dict[str, Any]:
    """One per-part side file named in a checkpoint's ``part_files`` (weights only)."""
    path = run.path / "checkpoints" / name
    if (named := checkpoint_file(name)) is None or named[1] is None:
        raise CheckpointError(f"checkpoint part file name {name!r} is not ckpt-<epoch>.part-<p>.pt "
                              f"or {BEST}.part-<p>.pt")
    try:
        out: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        raise _refusal(path, e) from None
    return out


def list_checkpoints(run: RunDir) -> list[Path]:
    """The run's checkpoint files, oldest first (temp files of unfinished writes excluded)."""
    d = run.path / "checkpoints"
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if (named := checkpoint_file(p.name)) is not None
                  and is_rotating(named[0]) and named[1] is None)


def _load_one(path: Path) -> dict[str, Any]:
    """One checkpoint file and the check that its per-part files exist; raises
    :class:`CheckpointError` for a file that would build objects, other errors for a torn one."""
    try:
        out: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        if "Weights only load failed" in str(e) and re.search(r"GLOBAL|allowed global|is blocked", str(e)):
            raise _refusal(path, e) from None  # nothing in it ran
        raise
    missing = [n for n in out.get("part_files", []) if not (path.parent / n).is_file()]
    if missing:
        raise FileNotFoundError(f"its per-part files {missing} are missing")
    for name, rec in zip(out.get("part_files", []), out.get("part_records", []), strict=False):
        try:
            verify(path.parent / name, int(rec["bytes"]), str(rec["sha256"]))
        except FileMismatch as e:
            raise ValueError(f"its per-part file {name} differs from the size and SHA-256 it "
                             f"lists ({e.problem}: {e.got} instead of {e.expected})") from None
    return out


def load_latest(run: RunDir, say: Callable[[str], None] = _stderr) -> dict[str, Any] | None:
    """The newest readable checkpoint; a corrupt newest one falls back to the one before.

    Every checkpoint skipped is reported through ``say`` (one line each, stderr by
    default), naming the file, the error and the checkpoint used instead.
    """
    paths = list_checkpoints(run)
    for i in range(len(paths) - 1, -1, -1):
        try:
            return _load_one(paths[i])
        except CheckpointError:
            raise
        except Exception as e:  # noqa: BLE001 - a torn/corrupt file: try the previous one
            _skipped(say, paths[i], e, "falling back to " + paths[i - 1].name if i else "no older checkpoint left")
    return None


CHECKPOINT_CHOICES = ("best", "last")
"""What :func:`load_trained` reads: the best-validation checkpoint, or the newest."""


def load_trained(run: RunDir, which: str = "best", say: Callable[[str], None] = _stderr) -> dict[str, Any] | None:
    """The checkpoint to predict with: ``best`` -- ``checkpoints/best.pt`` (the epoch with
    the best validation metric, ``train.keep_best``), or the newest checkpoint where the
    run has none or it is unreadable (said through ``say``); ``last`` -- the newest."""
    if which not in CHECKPOINT_CHOICES:
        raise ValueError(f"checkpoint={which!r}: expected one of {', '.join(CHECKPOINT_CHOICES)}")
    path = run.path / "checkpoints" / f"{BEST}.pt"
    if which == "best" and path.is_file():
        try:
            return _load_one(path)
        except CheckpointError:
            raise
        except Exception as e:  # noqa: BLE001 - torn: the newest checkpoint instead
            _skipped(say, path, e, "using the newest checkpoint")
    return load_latest(run, say)


def _skipped(say: Callable[[str], None], path: Path, e: BaseException, instead: str) -> None:
    say(f"warning: checkpoint {path} is unreadable ({type(e).__name__}: "
        f"{str(e).splitlines()[0][:200] if str(e) else ''}); {instead}")


def _tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().cpu().contiguous()
    return f"{t.dtype}{tuple(t.shape)}".encode() + t.reshape(-1).view(torch.uint8).numpy().tobytes()


def _feed(h: Any, key: str, value: Any) -> None:
    h.update(key.encode())
    if torch.is_tensor(value):
        h.update(_tensor_bytes(value))
    elif isinstance(value, dict):
        for k in sorted(value, key=str):
            _feed(h, f"{key}.{k}", value[k])
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _feed(h, f"{key}[{i}]", v)
    else:
        h.update(repr(value).encode())


def tree_digest(value: dict[str, Any]) -> str:
    """SHA-256 over every tensor (bytes, dtype, shape) and value of a nested state dict:
    equal digests mean bit-identical state."""
    h = hashlib.sha256()
    for k in sorted(value):
        _feed(h, k, value[k])
    return h.hexdigest()


def state_digest(state: dict[str, Any]) -> str:
    """:func:`tree_digest` of a ``{"model", "opt"}`` state (the replicated model and optimizer)."""
    return tree_digest({"model": state["model"], "opt": state["opt"]})


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
