"""OGB node-property-prediction datasets from their on-disk layout (``source: ogb``).

``dataset.path`` is the dataset folder as OGB unpacks it (e.g. ``ogbn_arxiv/``); the
``ogb`` package is not needed. Every ``.csv.gz`` may also be a plain ``.csv``::

    <path>/
    ├── raw/
    │   ├── edge.csv.gz            E lines "src,dst" (0-based, no header)
    │   ├── node-feat.csv.gz       N lines of F floats (optional: fallback features)
    │   ├── node-label.csv.gz      N lines, one label each ("nan" = unlabeled)
    │   └── num-node-list.csv.gz   one line: N (optional)
    └── split/<name>/              e.g. time (arxiv), sales_ranking (products)
        ├── train.csv.gz           one node id per line
        ├── valid.csv.gz
        └── test.csv.gz

ogbn-papers100M ships its raw arrays as ``raw/data.npz`` (``edge_index`` [2, E],
``node_feat`` [N, F], ``num_nodes_list``) and ``raw/node-label.npz``
(``node_label`` [N, 1], NaN = unlabeled) instead of CSVs; both forms are read.
``dataset.split`` names the split folder; the default (0) takes the only one there.
OGB stores citation edges one way; ``undirected: true`` (the default) adds reverses.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gnntrain.data.build import RawGraph
from gnntrain.data.errors import DataError, require_dir
from gnntrain.data.textio import read_table

LAYOUT = ("<path>/raw/{edge,node-feat,node-label}.csv.gz and "
          "<path>/split/<name>/{train,valid,test}.csv.gz (OGB's node-property layout; see "
          "gnntrain/data/ogb.py)")


def _find(folder: Path, stem: str) -> Path | None:
    for suffix in (".csv.gz", ".csv"):
        p = folder / f"{stem}{suffix}"
        if p.is_file():
            return p
    return None


def _split_dir(path: Path, split: int | str) -> Path | None:
    base = path / "split"
    if split == "random":
        return None
    if not base.is_dir():
        if isinstance(split, str):
            raise DataError(f"split={split!r}: {path} has no split/ folder; expected {LAYOUT}")
        return None
    names = sorted(p.name for p in base.iterdir() if p.is_dir())
    if isinstance(split, str):
        if split not in names:
            raise DataError(f"split={split!r}: no folder {base / split}; splits here: {names}")
        return base / split
    if len(names) != 1:
        raise DataError(f"split={split!r}: {base} holds {len(names)} splits {names}; name one "
                        "with dataset.split")
    return base / names[0]


def load_ogb(path: Path, *, graph_name: str, split: int | str = 0) -> RawGraph:
    """Read the OGB folder ``path`` (see module doc) into a :class:`RawGraph`."""
    require_dir(path, "ogb dataset.path", LAYOUT)
    raw = require_dir(path / "raw", "ogb raw folder", LAYOUT)
    split_dir = _split_dir(path, split)
    split_files: dict[str, Path] = {}
    if split_dir is not None:
        for name, stem in (("train", "train"), ("val", "valid"), ("test", "test")):
            f = _find(split_dir, stem)
            if f is None:
                raise DataError(f"ogb: {split_dir} lacks {stem}.csv.gz; expected {LAYOUT}")
            split_files[name] = f
    if (raw / "data.npz").is_file():
        src, dst, x, n = _read_npz_arrays(raw / "data.npz")
        y = _read_npz_labels(raw / "node-label.npz")
        where = {"edges": str(raw / "data.npz"), "x": str(raw / "data.npz"),
                 "y": str(raw / "node-label.npz")}
    else:
        edge_file = _find(raw, "edge")
        label_file = _find(raw, "node-label")
        if edge_file is None or label_file is None:
            lacking = [s for s, f in (("edge", edge_file), ("node-label", label_file)) if f is None]
            raise DataError(f"ogb: {raw} lacks {', '.join(s + '.csv.gz' for s in lacking)}; "
                            f"expected {LAYOUT}")
        feat_file = _find(raw, "node-feat")
        edges = read_table(edge_file, kind="int", header=False, ncols=2).values
        src, dst = edges[:, 0], edges[:, 1]
        y = read_table(label_file, kind="float", dtype=np.float64, header=False).values[:, 0]
        x = None if feat_file is None else read_table(feat_file, kind="float", header=False).values
        nn = _find(raw, "num-node-list")
        n = int(read_table(nn, kind="int", header=False).values.sum()) if nn else y.shape[0]
        where = {"edges": str(edge_file), "x": str(feat_file), "y": str(label_file)}
    splits = {name: read_table(f, kind="int", header=False).values.ravel()
              for name, f in split_files.items()} or None
    return RawGraph(name=graph_name, num_nodes=n, src=src, dst=dst, x=x, y=y, splits=splits,
                    where={"source": str(path), "splits": str(split_dir), **where})


def _read_npz_arrays(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, int]:
    with np.load(path, allow_pickle=False) as z:
        if "edge_index" not in z.files:
            raise DataError(f"{path}: no edge_index key (found {z.files}); expected OGB's "
                            "data.npz with edge_index [2, E], node_feat, num_nodes_list")
        ei = z["edge_index"]
        x = z["node_feat"] if "node_feat" in z.files else None
        if "num_nodes_list" in z.files:
            n = int(z["num_nodes_list"].sum())
        else:
            n = int(x.shape[0]) if x is not None else int(ei.max()) + 1
    return ei[0], ei[1], x, n


def _read_npz_labels(path: Path) -> np.ndarray:
    if not path.is_file():
        raise DataError(f"ogb: {path} does not exist; data.npz comes with node-label.npz "
                        "(key node_label [N, 1])")
    with np.load(path, allow_pickle=False) as z:
        key = "node_label" if "node_label" in z.files else z.files[0]
        return z[key].ravel()
