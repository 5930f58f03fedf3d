"""The names of a run's checkpoint files: one place for every writer and reader of them.

``checkpoints/ckpt-<epoch>.pt`` (the epoch in five digits) rotate (``train.keep_checkpoints``);
``checkpoints/best.pt`` (:data:`BEST`) is replaced; each may have per-part side files
``<stem>.part-<p>.pt``. A run on object storage adds one manifest per checkpoint,
``<stem>.manifest.json`` (:data:`MANIFEST`), uploaded after its files.
"""

from __future__ import annotations

import re

__all__ = ["BEST", "MANIFEST", "checkpoint_file", "is_rotating", "rotating_stem"]

BEST = "best"
"""The stem of the best-validation checkpoint, ``checkpoints/best.pt`` (``train.keep_best``)."""
MANIFEST = ".manifest.json"
"""The suffix of a checkpoint's manifest in a store: ``checkpoints/<stem>.manifest.json``."""
_ROTATING = re.compile(r"ckpt-\d+")
_FILE = re.compile(rf"({_ROTATING.pattern}|{BEST})(?:\.part-(\d+))?\.pt")


def rotating_stem(epoch: int) -> str:
    """The stem of the rotating checkpoint taken after ``epoch`` epochs."""
    return f"ckpt-{epoch:05d}"


def is_rotating(stem: str) -> bool:
    """Whether ``stem`` names a rotating checkpoint (``ckpt-<epoch>``)."""
    return _ROTATING.fullmatch(stem) is not None


def checkpoint_file(name: str) -> tuple[str, int | None] | None:
    """``(stem, part)`` of a checkpoint file name (``part`` None for the main file), None for
    any other name."""
    m = _FILE.fullmatch(name)
    if m is None:
        return None
    return m.group(1), None if m.group(2) is None else int(m.group(2))
