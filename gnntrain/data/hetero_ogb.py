"""OGB-MAG's typed on-disk layout (``source: ogb_mag``); the ``ogb`` package is not needed.

``dataset.path`` is the folder OGB unpacks (``mag/``). Every ``.csv.gz`` may also be a
plain ``.csv``::

    <path>/
    ├── raw/
    │   ├── num-node-dict.csv.gz                 header line of node types, one line of counts
    │   ├── relations/<src>___<rel>___<dst>/
    │   │   └── edge.csv.gz                      E lines "src,dst" (type-local 0-based ids)
    │   ├── node-feat/<type>/node-feat.csv.gz    N_type lines of F floats (optional per type)
    │   └── node-label/<target>/node-label.csv.gz  one label per target node
    └── split/<name>/<target>/                   e.g. split/time/paper/
        ├── train.csv.gz                         one target id per line
        ├── valid.csv.gz
        └── test.csv.gz

Other files OGB ships beside these (``num-edge-list``, ``edge_reltype``, ``node_year``)
are not read. ``dataset.split`` names the split folder; without it the only one is taken.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gnntrain.data.errors import DataError, require_dir
from gnntrain.data.ogb import _find
from gnntrain.data.textio import read_table
from partition.hetero_graph import EdgeType, HeteroGraph

__all__ = ["load_ogb_mag"]

LAYOUT = ("<path>/raw/num-node-dict.csv.gz, raw/relations/<src>___<rel>___<dst>/edge.csv.gz, "
          "raw/node-feat/<type>/node-feat.csv.gz, raw/node-label/<target>/node-label.csv.gz and "
          "split/<name>/<target>/{train,valid,test}.csv.gz (OGB-MAG's layout; see "
          "gnntrain/data/hetero_ogb.py)")


def _need(folder: Path, stem: str) -> Path:
    f = _find(folder, stem)
    if f is None:
        raise DataError(f"ogb_mag: {folder} lacks {stem}.csv.gz; expected {LAYOUT}")
    return f


def _counts(raw: Path) -> dict[str, int]:
    table = read_table(_need(raw, "num-node-dict"), kind="int", header=True)
    if table.header is None or table.values.shape[0] != 1:
        raise DataError(f"ogb_mag: {table.path} must hold a header of node types and one line of "
                        f"counts, found {table.values.shape[0]} value lines")
    return {t: int(n) for t, n in zip(table.header, table.values[0], strict=True)}


def _split_dir(path: Path, split: str | None, target: str) -> Path:
    base = require_dir(path / "split", "ogb_mag split folder", LAYOUT)
    names = sorted(p.name for p in base.iterdir() if p.is_dir())
    if split is None:
        if len(names) != 1:
            raise DataError(f"split=None: {base} holds {len(names)} splits {names}; name one with dataset.split")
        split = names[0]
    if split not in names:
        raise DataError(f"split={split!r}: no folder {base / split}; splits here: {names}")
    types = sorted(p.name for p in (base / split).iterdir() if p.is_dir())
    if target not in types:
        raise DataError(f"target={target!r}: {base / split} has splits for {types} only; set "
                        "dataset.target to the type the split labels")
    return base / split / target


def load_ogb_mag(path: Path, *, graph_name: str, target: str = "paper", split: str | None = None,
                 add_reverse: bool = False) -> HeteroGraph:
    """Read the OGB-MAG folder ``path`` (see module doc) into a validated typed graph."""
    require_dir(path, "ogb_mag dataset.path", LAYOUT)
    raw = require_dir(path / "raw", "ogb_mag raw folder", LAYOUT)
    counts = _counts(raw)
    sdir = _split_dir(path, split, target)
    rel_root = require_dir(raw / "relations", "ogb_mag relations folder", LAYOUT)
    edges: dict[EdgeType, tuple[np.ndarray, np.ndarray]] = {}
    for d in sorted(p for p in rel_root.iterdir() if p.is_dir()):
        parts = d.name.split("___")
        if len(parts) != 3:
            raise DataError(f"ogb_mag: relation folder {d.name!r} is not named <src>___<rel>___<dst>")
        table = read_table(_need(d, "edge"), kind="int", header=False, ncols=2).values
        edges[(parts[0], parts[1], parts[2])] = (table[:, 0], table[:, 1])
    if not edges:
        raise DataError(f"ogb_mag: {rel_root} holds no <src>___<rel>___<dst> folders; expected {LAYOUT}")
    x = {}
    feat_root = raw / "node-feat"
    if feat_root.is_dir():
        for d in sorted(p for p in feat_root.iterdir() if p.is_dir()):
            f = _find(d, "node-feat")
            if f is not None:
                x[d.name] = read_table(f, kind="float", header=False).values
    label_dir = raw / "node-label" / target
    y = read_table(_need(label_dir, "node-label"), kind="float", dtype=np.float64, header=False).values[:, 0]
    splits = {name: read_table(_need(sdir, stem), kind="int", header=False).values.ravel()
              for name, stem in (("train", "train"), ("val", "valid"), ("test", "test"))}
    return HeteroGraph.from_edges(num_nodes=counts, edges=edges, x=x, target=target, y=y,
                                  splits=splits, name=graph_name, add_reverse=add_reverse)
