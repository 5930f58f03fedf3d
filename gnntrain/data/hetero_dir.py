"""Typed graphs from a directory of per-relation edge files (``source: hetero_dir``).

The layout of HeCo and HGCMA (and of any user directory of the same shape)::

    <path>/
    ├── pa.txt              one line per edge "src dst" (tab or space separated), type-local
    │                       0-based ids; the stem is the source type's letter, then the
    │                       destination's (pa = paper -> author)
    ├── <letter>_feat.npz   features of a type (optional): a scipy sparse matrix
    │                       (scipy.sparse.save_npz), or a dense array (np.save, even when the
    │                       file is named .npz), or an .npz holding one dense array
    ├── labels.npy          one label per target node (int, or whole-valued float)
    └── {train,val,test}_<split>.npy   target ids of each split

Which letter is which type, which stem is which relation, the target type and the
split suffix come from the dataset config (:class:`~gnntrain.config.HeteroDirDataset`);
``datasets/{acm,dblp,aminer,freebase}.yaml`` and ``datasets/hgcma-{acm,dblp,imdb}.yaml``
are the mappings of the published directories. A type's node count is ``counts[letter]``
if given, else the largest of its feature rows, its label count (target) and its
largest edge id + 1.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from gnntrain.config import HeteroDirDataset
from gnntrain.data.errors import DataError, require_dir, require_file
from gnntrain.data.textio import read_table
from partition.hetero_graph import EdgeType, HeteroGraph

__all__ = ["load_feature_file", "load_hetero_dir"]

LAYOUT = ("<path>/<xy>.txt edge files named by type letters, <letter>_feat.npz, labels.npy and "
          "{train,val,test}_<split>.npy (see gnntrain/data/hetero_dir.py)")


def load_feature_file(path: Path) -> np.ndarray:
    """A float32 dense ``[n, F]`` array from a scipy sparse ``.npz``, a dense ``.npy``
    (whatever its suffix) or an ``.npz`` holding one dense array."""
    if zipfile.is_zipfile(path):
        with np.load(path, allow_pickle=False) as z:
            keys = set(z.files)
            if {"indptr", "indices", "data", "shape"} <= keys or {"row", "col", "data", "shape"} <= keys:
                import scipy.sparse as sp

                return np.asarray(sp.load_npz(path).todense(), dtype=np.float32)
            if len(z.files) != 1:
                raise DataError(f"{path}: an .npz of features must be a scipy sparse matrix or hold "
                                f"one array, found keys {sorted(keys)}")
            arr = z[z.files[0]]
    else:
        try:
            arr = np.load(path, allow_pickle=False)
        except ValueError as e:
            raise DataError(f"{path}: not a readable .npy/.npz feature file ({e})") from None
    if arr.ndim != 2:
        raise DataError(f"{path}: features must be 2-d [nodes, features], got shape {arr.shape}")
    return np.ascontiguousarray(arr, dtype=np.float32)


def _read_ids(path: Path, what: str) -> np.ndarray:
    arr = np.load(require_file(path, what, LAYOUT), allow_pickle=False)
    if arr.dtype.kind not in "iu":
        raise DataError(f"{path}: {what} must hold integer node ids, found dtype {arr.dtype}")
    return arr.astype(np.int64).ravel()


def load_hetero_dir(path: Path, cfg: HeteroDirDataset) -> HeteroGraph:
    """Read the directory ``path`` with the mapping ``cfg`` (see module doc)."""
    require_dir(path, "hetero_dir dataset.path", LAYOUT)
    edges: dict[EdgeType, tuple[np.ndarray, np.ndarray]] = {}
    size: dict[str, int] = dict.fromkeys(cfg.types, 0)
    for stem, rel in cfg.relations.items():
        f = require_file(path / f"{stem}{cfg.edge_suffix}", f"relations[{stem!r}] edge file", LAYOUT)
        table = read_table(f, kind="int", header=False, ncols=2).values
        src, dst = table[:, 0], table[:, 1]
        edges[(cfg.types[stem[0]], rel, cfg.types[stem[1]])] = (src, dst)
        for letter, ids in ((stem[0], src), (stem[1], dst)):
            if ids.size:
                size[letter] = max(size[letter], int(ids.max()) + 1)
    x: dict[str, np.ndarray] = {}
    for letter, t in cfg.types.items():
        f = path / f"{letter}_feat.npz"
        if f.is_file():
            x[t] = load_feature_file(f)
            size[letter] = max(size[letter], x[t].shape[0])
    labels = np.load(require_file(path / cfg.labels, "labels file", LAYOUT), allow_pickle=False).ravel()
    tgt_letter = next(k for k, v in cfg.types.items() if v == cfg.target)
    size[tgt_letter] = max(size[tgt_letter], labels.shape[0])
    size.update(cfg.counts)
    splits = {name: _read_ids(path / f"{name}_{cfg.split}.npy", f"split {name!r} (split={cfg.split!r})")
              for name in ("train", "val", "test")}
    return HeteroGraph.from_edges(num_nodes={cfg.types[k]: n for k, n in size.items()}, edges=edges,
                                  x=x, target=cfg.target, y=labels, splits=splits, name=cfg.name,
                                  add_reverse=cfg.add_reverse)
