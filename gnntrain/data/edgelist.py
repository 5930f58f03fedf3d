"""Edge-list text files plus optional feature and label files (``source: csv``).

Files (paths relative to the data root; ``.gz`` is gunzipped on the fly)::

    edges     one edge "src<sep>dst" per line; <sep> is ',', ';', tab or spaces;
              optional header (detected, or forced by dataset.header: a numeric
              "nodes edges" first line is one); '#' comment lines (SNAP) skipped; extra
              columns (weights, '{}') ignored whatever they hold
    labels    either one label per line (line i = node i), or a table with a node-id
              column and a label column: dataset.id_column (default: first) and
              dataset.label_column (default: last), by header name or 0-based index.
              Nodes without a row are unlabeled. Non-integer labels (True/False, names)
              become classes 0..C-1 in sorted order.
    features  .npy [N, F]; a dense text table (row i = node i); a sparse text table with
              header node_id,feature_id,value (karateclub FEATHER); or a MUSAE .json
              {"node": [feature ids]} bag, made multi-hot. Absent: fallback features
              (dataset.feature_fallback, see gnntrain/data/features.py).

Node ids are 0-based; the node count is ``dataset.num_nodes`` or one past the largest
id in any file. ``dataset.relabel: true`` accepts arbitrary integer ids (raw SNAP
dumps) and renumbers them densely in increasing order; a dense feature table cannot be
matched to renumbered ids and is refused. Without a label file the graph is
structure-only: every node has class 0 of 1 (for partition/sampling work, not accuracy).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gnntrain.data.build import RawGraph
from gnntrain.data.errors import DataError, require_file
from gnntrain.data.textio import column_index, read_rows, read_table
from partition.graph import unique_sorted

EDGES_LAYOUT = "a text file with one 'src,dst' (or tab/space separated) edge per line"


@dataclass(frozen=True)
class Labels:
    """Labels read from a file: ``ids`` (None = positional) and integer ``values``."""

    ids: np.ndarray | None
    values: np.ndarray
    classes: list[str] | None


@dataclass(frozen=True)
class Features:
    """Features read from a file: dense rows, or keyed by node id (``ids``)."""

    ids: np.ndarray | None
    values: np.ndarray


def load_edgelist(*, edges: Path, graph_name: str, labels: Path | None = None,
                  features: Path | None = None, delimiter: str | None = None,
                  id_column: str | int | None = None, label_column: str | int | None = None,
                  num_nodes: int | None = None, relabel: bool = False,
                  header: bool | None = None) -> RawGraph:
    """Read an edge list and its optional label/feature files (see module doc)."""
    require_file(edges, "csv edges file", EDGES_LAYOUT)
    if labels is not None:
        require_file(labels, "csv labels file", "one label per line, or id and label columns")
    if features is not None:
        require_file(features, "csv features file", ".npy, .json bag, or a text table")
    table = read_table(edges, kind="int", delimiter=delimiter, header=header, usecols=2)
    src, dst = table.values[:, 0], table.values[:, 1]
    lab = _read_labels(labels, delimiter, id_column, label_column) if labels else None
    feat = _read_features(features, delimiter) if features else None
    if relabel:
        if feat is not None and feat.ids is None:
            raise DataError(f"relabel=true: the dense features in {features} are matched to "
                            "nodes by row, which renumbering would scramble; use num_nodes "
                            "with 0-based ids, or a keyed format (.json bag, node_id,"
                            "feature_id,value table)")
        if lab is not None and lab.ids is None:
            raise DataError(f"relabel=true: the labels in {labels} are positional (one per "
                            "line); give a node-id column so they can follow the renumbering")
        parts = [src, dst] + [a.ids for a in (lab, feat) if a is not None and a.ids is not None]
        uniq = unique_sorted(np.concatenate(parts))
        src, dst = np.searchsorted(uniq, src), np.searchsorted(uniq, dst)
        if lab is not None and lab.ids is not None:
            lab = Labels(np.searchsorted(uniq, lab.ids), lab.values, lab.classes)
        if feat is not None and feat.ids is not None:
            feat = Features(np.searchsorted(uniq, feat.ids), feat.values)
        n = num_nodes or int(uniq.size)
    else:
        n = num_nodes or _infer_num_nodes(src, dst, lab, feat)
    for what, arr in (("labels", lab), ("features", feat)):
        ids = None if arr is None else arr.ids
        if ids is not None and ids.size and (ids.min() < 0 or ids.max() >= n):
            bad = int(ids.min()) if ids.min() < 0 else int(ids.max())
            path = labels if what == "labels" else features
            raise DataError(f"{what} in {path}: node id {bad} is outside [0, num_nodes={n})")
    y = None if lab is None else _scatter_labels(lab, n, labels)
    x = None
    if feat is not None:
        x = feat.values
        if feat.ids is not None:
            x = np.zeros((n, feat.values.shape[1]), np.float32)
            x[feat.ids] = feat.values
    return RawGraph(name=graph_name, num_nodes=n, src=src, dst=dst, x=x, y=y,
                    where={"source": str(edges), "edges": str(edges), "x": str(features),
                           "y": str(labels), "labels": str(labels or edges)})


def _infer_num_nodes(src: np.ndarray, dst: np.ndarray, lab: Labels | None,
                     feat: Features | None) -> int:
    n = int(max(src.max(), dst.max())) + 1 if src.size else 0
    for arr in (lab, feat):
        if arr is None:
            continue
        if arr.ids is not None:
            n = max(n, int(arr.ids.max()) + 1 if arr.ids.size else 0)
        else:
            n = max(n, arr.values.shape[0])
    return n


def _scatter_labels(lab: Labels, n: int, path: Path | None) -> np.ndarray:
    if lab.ids is None:
        if lab.values.shape[0] != n:
            raise DataError(f"labels in {path}: {lab.values.shape[0]} lines but num_nodes={n}; "
                            "a one-column label file needs one line per node")
        return lab.values
    y = np.full(n, -1, dtype=np.int64)
    y[lab.ids] = lab.values
    clash = y[lab.ids] != lab.values
    if clash.any():
        i = int(np.flatnonzero(clash)[0])
        raise DataError(f"labels in {path}: node {int(lab.ids[i])} is listed with two "
                        f"different labels ({int(lab.values[i])} and {int(y[lab.ids[i]])})")
    return y


def _as_int_labels(raw: np.ndarray, path: Path) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        bad = ~np.isnan(raw) & ~(raw % 1 == 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(f"labels in {path}: record {i + 1} has value {raw[i]}; node ids and "
                        "labels must be whole numbers (nan = unlabeled)")
    return np.where(np.isnan(raw), -1, raw).astype(np.int64)


def _read_labels(path: Path, delimiter: str | None, id_column: str | int | None,
                 label_column: str | int | None) -> Labels:
    try:
        t = read_table(path, kind="float", dtype=np.float64, delimiter=delimiter)
    except DataError:
        return _read_string_labels(path, delimiter, id_column, label_column)
    ncols = t.values.shape[1]
    if ncols == 1 and id_column is None:
        return Labels(None, _as_int_labels(t.values[:, 0], path), None)
    ic = column_index(path, t.header, ncols, 0 if id_column is None else id_column, "id_column")
    lc = column_index(path, t.header, ncols, -1 if label_column is None else label_column,
                      "label_column")
    ids = _as_int_labels(t.values[:, ic], path)
    return Labels(ids, _as_int_labels(t.values[:, lc], path), None)


def _read_string_labels(path: Path, delimiter: str | None, id_column: str | int | None,
                        label_column: str | int | None) -> Labels:
    header, rows = read_rows(path, delimiter=delimiter)
    if not rows:
        raise DataError(f"labels in {path}: no records")
    ncols = len(rows[0])
    ic = column_index(path, header, ncols, 0 if id_column is None else id_column, "id_column")
    lc = column_index(path, header, ncols, -1 if label_column is None else label_column,
                      "label_column")
    ids = np.empty(len(rows), dtype=np.int64)
    texts: list[str] = []
    for i, r in enumerate(rows):
        if len(r) != ncols:
            raise DataError(f"labels in {path}: record {i + 1} has {len(r)} fields, the first "
                            f"has {ncols}")
        try:
            ids[i] = int(r[ic])
        except ValueError:
            raise DataError(f"labels in {path}: record {i + 1} has node id {r[ic]!r} in column "
                            f"{ic}; node ids must be integers (set dataset.id_column)") from None
        texts.append(r[lc])
    try:
        return Labels(ids, np.array([int(s) for s in texts], dtype=np.int64), None)
    except ValueError:
        classes = sorted(set(texts))
        lookup = {c: k for k, c in enumerate(classes)}
        return Labels(ids, np.array([lookup[s] for s in texts], dtype=np.int64), classes)


def _read_features(path: Path, delimiter: str | None) -> Features:
    name = path.name.lower()
    if name.endswith(".npy"):
        try:
            return Features(None, np.load(path, allow_pickle=False))
        except ValueError as e:
            raise DataError(f"features in {path}: {e}") from None
    if name.endswith(".json") or name.endswith(".json.gz"):
        return _read_json_bags(path)
    t = read_table(path, kind="float", delimiter=delimiter)
    if t.header is not None and [h.lower() for h in t.header] == ["node_id", "feature_id", "value"]:
        ids = t.values[:, 0].astype(np.int64)
        fid = t.values[:, 1].astype(np.int64)
        uniq, inv = np.unique(ids, return_inverse=True)
        dense = np.zeros((uniq.size, int(fid.max()) + 1 if fid.size else 0), np.float32)
        dense[inv, fid] = t.values[:, 2]
        return Features(uniq, dense)
    return Features(None, t.values)


def _read_json_bags(path: Path) -> Features:
    from gnntrain.data.textio import read_bytes

    try:
        bags = json.loads(read_bytes(path))
    except json.JSONDecodeError as e:
        raise DataError(f"features in {path}: not valid JSON ({e})") from None
    if not isinstance(bags, dict):
        raise DataError(f"features in {path}: expected an object {{\"node\": [feature ids]}}, "
                        f"got {type(bags).__name__}")
    try:
        ids = np.fromiter((int(k) for k in bags), dtype=np.int64, count=len(bags))
        lens = np.fromiter((len(v) for v in bags.values()), dtype=np.int64, count=len(bags))
        flat = np.fromiter((int(f) for v in bags.values() for f in v), dtype=np.int64,
                           count=int(lens.sum()))
    except (TypeError, ValueError) as e:
        raise DataError(f"features in {path}: keys must be node ids and values lists of "
                        f"integer feature ids ({e})") from None
    if flat.size and flat.min() < 0:
        raise DataError(f"features in {path}: feature id {int(flat.min())} is negative")
    dense = np.zeros((ids.size, int(flat.max()) + 1 if flat.size else 1), np.float32)
    dense[np.repeat(np.arange(ids.size), lens), flat] = 1.0
    return Features(ids, dense)
