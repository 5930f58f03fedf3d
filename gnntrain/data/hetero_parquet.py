"""Typed graphs stored as Parquet tables (``source: hetero_parquet``), local or on object storage.

One table per node type that has something to give and one per relation, each one
``.parquet`` file or a directory of them (DGL's chunked graph format and GraphStorm keep
typed graphs the same way); the columns are named in the config as for ``source: parquet``
(:mod:`gnntrain.data.parquet`, whose readers this module uses)::

    dataset:
      source: hetero_parquet
      target: paper
      nodes:                              # node type -> its table (type-local ids)
        paper:  {path: s3://b/mag/paper/, id: id, features: feat, label: venue,
                 masks: [train_mask, val_mask, test_mask]}
        author: {path: s3://b/mag/author/, features: feat}
      edges:                              # "src_type:relation:dst_type" -> its table
        author:writes:paper: {path: s3://b/mag/writes/, src: author, dst: paper}
        paper:cites:paper:   {path: s3://b/mag/cites.parquet}
      counts: {institution: 8740}         # types without a table (else largest edge id + 1)

Ids are type-local (``0..N_t-1`` for each type, as in PyG's ``HeteroData``). A node table
with an ``id`` column may hold its rows in any order; without one row ``i`` is node ``i``.
Only the target type's table carries ``label`` (every target node needs one: a null label
fails naming the type) and ``masks``; without masks the target nodes are split at random
(``train_frac``, ``val_frac``, ``split_seed``). Types without a
node table are featureless (``feature_fallback`` builds features from the structure, or
give the model ``node_embedding``).

Every table is opened and every configured column checked before any data is read (a
missing path, column or wrong dtype fails naming the file, the column and the fix); each
relation's ids are checked against its two types' counts file by file. The result is a
validated :class:`~partition.hetero_graph.HeteroGraph`: the same typed graph stored as
Parquet and built in memory has the same content hash and, with its node types in the same
order, the same partition sets. Node types are ordered as ``nodes`` lists them, then
``counts``, then as ``edges`` first names them.
"""

from __future__ import annotations

import numpy as np

from gnntrain.config import HeteroParquetDataset
from gnntrain.data.build import masks_to_splits, random_split
from gnntrain.data.errors import DataError
from gnntrain.data.parquet import (
    NodeRows,
    ParquetTable,
    edge_columns,
    node_columns,
    open_table,
    read_edges,
    read_nodes,
)
from partition.hetero_graph import EdgeType, HeteroGraph

__all__ = ["load_hetero_parquet"]


def load_hetero_parquet(cfg: HeteroParquetDataset) -> HeteroGraph:
    """Read the tables ``cfg`` names (see the module doc) into a validated typed graph."""
    node_tables = {t: open_table(c.path, f"dataset.nodes.{t}", cfg.storage_options) for t, c in cfg.nodes.items()}
    edge_tables = {key: open_table(c.path, f"dataset.edges.{key}", cfg.storage_options)
                   for key, c in cfg.edges.items()}
    for t, table in node_tables.items():
        table.check(node_columns(cfg.nodes[t]))
    for key, table in edge_tables.items():
        table.check(edge_columns(cfg.edges[key]))
    rows = {t: read_nodes(table, cfg.nodes[t]) for t, table in node_tables.items()}
    counts: dict[str, int | None] = dict.fromkeys(cfg.node_types())
    counts |= {t: r.num_nodes for t, r in rows.items()} | dict(cfg.counts)
    edges: dict[EdgeType, tuple[np.ndarray, np.ndarray]] = {}
    for key, table in edge_tables.items():
        s, rel, d = key.split(":")
        edges[(s, rel, d)] = read_edges(table, cfg.edges[key], None, typed=((s, counts[s]), (d, counts[d])))
    sizes = {t: n if n is not None else _count_of_type(t, edges) for t, n in counts.items()}
    target = rows[cfg.target]
    assert target.y is not None  # the config requires the target's label column
    return HeteroGraph.from_edges(  # every target node needs its label: the graph checks it
        num_nodes=sizes, edges=edges, x={t: r.x for t, r in rows.items() if r.x is not None},
        target=cfg.target, y=target.y, splits=_splits(cfg, target, node_tables[cfg.target]),
        num_classes=cfg.num_classes, name=cfg.name, dedup=cfg.dedup, add_reverse=cfg.add_reverse)


def _count_of_type(node_type: str, edges: dict[EdgeType, tuple[np.ndarray, np.ndarray]]) -> int:
    """The node count of a type without a node table or ``counts``: its largest edge id + 1."""
    ends = [ids for (s, _, d), (src, dst) in edges.items() for t, ids in ((s, src), (d, dst))
            if t == node_type and ids.size]
    if not ends:
        raise DataError(f"node type {node_type!r} has no node table, no edges and no count; give "
                        f"dataset.counts.{node_type} or a node table")
    return max(int(ids.max()) for ids in ends) + 1


def _splits(cfg: HeteroParquetDataset, target: NodeRows, table: ParquetTable) -> dict[str, np.ndarray]:
    """The target type's splits: its mask columns, else a random split of its labelled
    nodes (``y >= 0``)."""
    assert target.y is not None
    where = f"{table.where} columns {cfg.nodes[cfg.target].masks!r}"
    splits = masks_to_splits(target.masks, 0, target.num_nodes, where)
    if splits is not None:
        return splits
    with np.errstate(invalid="ignore"):  # a NaN label fails the graph's checks right after
        labelled = target.y >= 0
    return random_split(labelled, cfg.train_frac, cfg.val_frac, cfg.split_seed,
                        origin=f"the {cfg.target!r} labels in {table.where}")
