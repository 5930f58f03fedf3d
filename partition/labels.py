"""Class ids: dense ``0..C-1``, whatever ids a dataset stores.

A classifier's head has one output per class id, so ids stored 1-based (``1..3``) or with
gaps (``0, 2, 5``) would train a head with outputs no node ever takes. When the number of
classes is not given, :func:`dense_class_ids` maps the ids present to ``0..C-1`` in sorted
order and warns, naming the ids it found; a given ``num_classes`` keeps the ids as stored.
:func:`classes_without` names the classes a split holds no node of (an empty class the
model is trained for but never sees).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

__all__ = ["ClassIds", "classes_without", "dense_class_ids"]


@dataclass(frozen=True)
class ClassIds:
    """Labels as the model sees them: ``y`` with ids in ``[0, num_classes)``, and the stored
    id of each class when they were remapped (``stored[c]`` is class ``c``'s stored id)."""

    y: np.ndarray
    num_classes: int
    stored: np.ndarray | None = None


def dense_class_ids(y: np.ndarray, labeled: np.ndarray, num_classes: int | None, where: str) -> ClassIds:
    """``y`` (int64, one per node; only ``labeled`` entries count) with dense class ids.

    With ``num_classes`` given the ids stay as stored (the caller checks the range); else the
    ids present become ``0..C-1`` in sorted order, with a warning when that changes any."""
    present = np.unique(y[labeled])
    if num_classes is not None or present.size == 0 or present[-1] == present.size - 1:
        c = num_classes if num_classes is not None else int(present.size) or 1
        return ClassIds(y, c)
    dense = np.where(labeled, np.searchsorted(present, y), y).astype(np.int64)  # unlabeled kept
    shown = ", ".join(map(str, present[:8].tolist())) + (", ..." if present.size > 8 else "")
    warnings.warn(f"labels in {where}: the {present.size} class ids present are [{shown}], not "
                  f"0..{present.size - 1}; they are remapped to 0..{present.size - 1} in sorted order "
                  "(give the dataset's num_classes to keep the ids as stored)", UserWarning, stacklevel=2)
    return ClassIds(dense, int(present.size), present)


def classes_without(y: np.ndarray, idx: np.ndarray, num_classes: int) -> list[int]:
    """The class ids in ``[0, num_classes)`` that no node of ``idx`` has."""
    counts = np.bincount(y[idx], minlength=num_classes)
    return np.flatnonzero(counts[:num_classes] == 0).astype(int).tolist()
