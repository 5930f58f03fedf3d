"""Graphs stored as one numpy ``.npz`` archive (``source: npz`` and ``source: heterophilous``).

Keys read by ``source: npz`` (other keys are ignored; pickled object arrays refused):

============================  =====================================================
``edge_index`` int [2, E]     edges ``edge_index[0] -> edge_index[1]`` (PyG layout)
or ``edges`` int [E, 2]       edges ``edges[:, 0] -> edges[:, 1]``
``x`` / ``node_features``     float [N, F] features (optional: fallback features)
``y`` / ``node_labels``       int [N] labels, ``-1`` = unlabeled (optional)
``num_nodes``                 scalar (optional; else rows of x, y or max id + 1)
``num_classes``               scalar (optional; else max label + 1)
``{train,val,test}_mask``     bool [N], or [S, N] with S splits (``dataset.split``
                              picks one); ``_masks`` and ``valid_`` spellings too
``{train,val,test}_idx``      int node ids, instead of masks
============================  =====================================================

``source: heterophilous`` reads the files of Platonov et al. (ICLR 2023,
``yandex-research/heterophilous-graphs``): ``node_features``, ``node_labels``,
``edges`` [E, 2] with each undirected edge stored **once** (so ``undirected`` must
stay true: the loader adds the reverses), and ``train_masks`` / ``val_masks`` /
``test_masks`` [10, N], of which ``dataset.split`` picks one (0..9).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from gnntrain.data.build import RawGraph, masks_to_splits
from gnntrain.data.errors import DataError, require_file

_HETERO_KEYS = ("node_features", "node_labels", "edges", "train_masks", "val_masks",
                "test_masks")
_ALIASES = {
    "x": ("x", "node_features", "features"),
    "y": ("y", "node_labels", "labels"),
    "train": ("train_mask", "train_masks"),
    "val": ("val_mask", "val_masks", "valid_mask", "valid_masks"),
    "test": ("test_mask", "test_masks"),
    "train_idx": ("train_idx",),
    "val_idx": ("val_idx", "valid_idx"),
    "test_idx": ("test_idx",),
}


def _open(path: Path) -> dict[str, np.ndarray]:
    require_file(path, "npz dataset.path", "a numpy .npz archive (keys documented in "
                 "gnntrain/data/npz.py)")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise DataError(f"{path}: not a readable .npz archive ({e})") from None
    except ValueError as e:
        raise DataError(f"{path}: {e} (object arrays are refused; store plain numeric "
                        "arrays)") from None


def _first(arrays: dict[str, np.ndarray], key: str) -> tuple[str, np.ndarray] | None:
    for k in _ALIASES[key]:
        if k in arrays:
            return k, arrays[k]
    return None


def load_npz(path: Path, *, graph_name: str, split: int | str = 0,
             heterophilous: bool = False) -> RawGraph:
    """Read an ``.npz`` archive (see module doc for the keys) into a :class:`RawGraph`."""
    arrays = _open(path)
    if heterophilous:
        missing = [k for k in _HETERO_KEYS if k not in arrays]
        if missing:
            raise DataError(f"{path}: missing keys {missing}; a heterophilous-graphs file has "
                            f"{list(_HETERO_KEYS)} (found {sorted(arrays)})")
    if "edge_index" in arrays:
        ei, ekey = arrays["edge_index"], "edge_index"
        if ei.ndim != 2 or ei.shape[0] != 2:
            raise DataError(f"{path}: edge_index has shape {ei.shape}, expected [2, E]")
        src, dst = ei[0], ei[1]
    elif "edges" in arrays:
        e, ekey = arrays["edges"], "edges"
        if e.ndim != 2 or e.shape[1] != 2:
            raise DataError(f"{path}: edges has shape {e.shape}, expected [E, 2]")
        src, dst = e[:, 0], e[:, 1]
    else:
        raise DataError(f"{path}: no edge_index [2, E] or edges [E, 2] key (found "
                        f"{sorted(arrays)}); see gnntrain/data/npz.py for the keys")
    xs, ys = _first(arrays, "x"), _first(arrays, "y")
    n = _num_nodes(path, arrays, xs, ys, src, dst)
    masks = {s: hit[1] for s in ("train", "val", "test") if (hit := _first(arrays, s))}
    splits = masks_to_splits(masks, split, n, str(path))
    if splits is None and "train_idx" in arrays and split != "random":
        splits = {s: hit[1] for s in ("train", "val", "test") if (hit := _first(arrays, f"{s}_idx"))}
    num_classes = int(arrays["num_classes"]) if "num_classes" in arrays else None
    return RawGraph(name=graph_name, num_nodes=n, src=src, dst=dst,
                    x=None if xs is None else xs[1], y=None if ys is None else ys[1],
                    num_classes=num_classes, splits=splits,
                    where={"source": str(path), "edges": f"{path} key {ekey!r}",
                           "x": f"{path} key {xs[0] if xs else 'x'!r}",
                           "y": f"{path} key {ys[0] if ys else 'y'!r}", "splits": str(path)})


def _num_nodes(path: Path, arrays: dict[str, np.ndarray], xs: tuple[str, np.ndarray] | None,
               ys: tuple[str, np.ndarray] | None, src: np.ndarray, dst: np.ndarray) -> int:
    if "num_nodes" in arrays:
        return int(arrays["num_nodes"])
    if xs is not None and xs[1].ndim >= 1:
        return int(xs[1].shape[0])
    if ys is not None and ys[1].ndim >= 1:
        return int(ys[1].shape[0])
    if src.size == 0:
        raise DataError(f"{path}: no edges, features or labels to tell the node count; "
                        "add a num_nodes key")
    return int(max(src.max(), dst.max())) + 1
