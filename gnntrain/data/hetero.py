"""Typed graphs in and out: :func:`load_hetero` from a dataset config, PyG ``HeteroData``
both ways, DGL heterographs both ways (optional: dgl is imported only when called).

``load_hetero(cfg)`` reads what a typed ``DatasetConfig`` names (``hetero_dir``: the
HeCo/HGCMA directory layout, :mod:`gnntrain.data.hetero_dir`; ``hetero_parquet``: a Parquet
table per node type and relation, :mod:`gnntrain.data.hetero_parquet`; ``ogb_mag``: OGB-MAG's
layout, :mod:`gnntrain.data.hetero_ogb`; ``synthetic_hetero``: the MAG-shaped generator,
:mod:`gnntrain.data.hetero_synthetic`) into a validated
:class:`~partition.hetero_graph.HeteroGraph`; :func:`to_training_graph` turns it into
the one graph the runtime trains on.

Conversions read their argument through public attributes only (``node_types``,
``edge_types``, ``num_nodes``, ``x``, ``y``, ``*_mask`` and ``edge_index`` for PyG;
``ntypes``, ``canonical_etypes``, ``num_nodes(t)``, ``edges(etype=...)`` and
``nodes[t].data`` for DGL), so importing this module loads neither torch nor dgl.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gnntrain.config import (
    HETERO_SOURCES,
    DatasetConfig,
    HeteroDatasetBase,
    HeteroDirDataset,
    HeteroParquetDataset,
    OgbMagDataset,
    SyntheticHeteroDataset,
)
from gnntrain.data.convert import _MASK_NAMES, _numpy
from gnntrain.data.errors import DataError
from partition.graph import Graph, GraphError
from partition.hetero_graph import EdgeType, HeteroGraph, relation_name

__all__ = ["from_dgl_hetero", "from_pyg_hetero", "load_hetero", "relation_names", "to_dgl_hetero",
           "to_pyg_hetero", "to_training_graph"]


def to_training_graph(graph: HeteroGraph) -> Graph:
    """The typed graph as the one graph the runtime trains on (DistDGL's way: one id
    space, types kept as id ranges). Node ``(t, i)`` becomes ``offset_t + i``
    (:meth:`HeteroGraph.homogenise`), every relation's edges go into one in-neighbour CSR,
    and ``node_type_names`` / ``node_type_offsets`` record the ranges, so a typed model
    (``model.arch: rgcn``) reads each node's type. Each edge keeps its relation id
    (``edge_rel``, an index into ``edge_type_names``, named ``"src:relation:dst"``), so two
    relations between the same types (``paper-cites-paper`` and its generated reverse) stay
    distinct in the partition, the sampled blocks and the model. Features are zero-padded to the widest type (a type without
    features gets zero rows: give it ``model.node_embedding``); labels and splits are the
    target type's, other nodes carry label 0 and are in no split.
    :func:`~partition.hetero_graph.from_training_graph` gives the typed graph back
    (same content hash)."""
    hom = graph.homogenise()
    n = hom.num_nodes
    width = max((graph.num_features(t) for t in hom.node_types), default=0)
    x = np.zeros((n, width), dtype=np.float32)
    for i, t in enumerate(hom.node_types):
        if t in graph.x:
            x[hom.type_offsets[i]:hom.type_offsets[i + 1], :graph.x[t].shape[1]] = graph.x[t]
    base = int(hom.type_offsets[hom.node_types.index(graph.target)])
    y = np.zeros(n, dtype=np.int64)
    y[base:base + graph.y.shape[0]] = graph.y
    return Graph(indptr=hom.indptr, indices=hom.indices, x=x, y=y,
                 train_idx=graph.split_idx("train") + base, val_idx=graph.split_idx("val") + base,
                 test_idx=graph.split_idx("test") + base, num_classes=graph.num_classes,
                 name=graph.name, node_type_names=tuple(hom.node_types),
                 node_type_offsets=tuple(int(o) for o in hom.type_offsets),
                 edge_rel=hom.edge_rel, edge_type_names=tuple(relation_names(hom.edge_types)),
                 node_type_features=tuple(graph.num_features(t) for t in hom.node_types)).validate()


def relation_names(edge_types: list[EdgeType]) -> list[str]:
    """The names relations go by in configs and reports: ``"src:relation:dst"``."""
    return [relation_name(et) for et in edge_types]


def load_hetero(cfg: DatasetConfig) -> HeteroGraph:
    """Load the typed graph ``cfg`` describes, with ``feature_fallback`` features on its
    featureless types; raise :class:`DataError` naming what is wrong."""
    graph = _load_source(cfg)
    assert isinstance(cfg, HeteroDatasetBase)  # else refused
    if cfg.feature_fallback == "none":
        return graph
    from gnntrain.data.features import typed_fallback_features

    return typed_fallback_features(graph, cfg.feature_fallback, cfg.fallback_dim)


def _load_source(cfg: DatasetConfig) -> HeteroGraph:
    try:
        if isinstance(cfg, HeteroDirDataset):
            from gnntrain.data.hetero_dir import load_hetero_dir
            from gnntrain.data.paths import resolve_path

            return load_hetero_dir(resolve_path(cfg.path), cfg)
        if isinstance(cfg, HeteroParquetDataset):
            from gnntrain.data.hetero_parquet import load_hetero_parquet

            return load_hetero_parquet(cfg)
        if isinstance(cfg, OgbMagDataset):
            from gnntrain.data.hetero_ogb import load_ogb_mag
            from gnntrain.data.paths import resolve_path

            return load_ogb_mag(resolve_path(cfg.path), graph_name=cfg.name, target=cfg.target,
                                split=cfg.split, add_reverse=cfg.add_reverse)
        if isinstance(cfg, SyntheticHeteroDataset):
            from gnntrain.data.hetero_synthetic import generate_hetero

            return generate_hetero(cfg.synthetic_hetero, name=cfg.name, add_reverse=cfg.add_reverse)
    except (DataError, GraphError) as e:
        raise DataError(f"dataset {cfg.name!r} (source={cfg.source}): {e}") from None
    raise DataError(f"dataset {cfg.name!r}: source={cfg.source!r} is a homogeneous source; "
                    "load it with gnntrain.data.load_dataset (typed sources: "
                    f"{', '.join(HETERO_SOURCES)})")


# ---- PyG ---------------------------------------------------------------------------------
def to_pyg_hetero(graph: HeteroGraph) -> Any:
    """The whole typed graph as a PyG ``HeteroData``: ``num_nodes`` and ``x`` per type,
    ``y`` and boolean ``train_mask``/``val_mask``/``test_mask`` on the target type, and
    ``edge_index`` (``[2, E]``: type-local source, destination) per edge type."""
    import torch
    from torch_geometric.data import HeteroData

    data = HeteroData()
    for t, n in graph.num_nodes.items():
        data[t].num_nodes = n
        if t in graph.x:
            data[t].x = torch.from_numpy(graph.x[t])
    tgt = data[graph.target]
    tgt.y = torch.from_numpy(graph.y)
    for split in ("train", "val", "test"):
        tgt[f"{split}_mask"] = torch.from_numpy(graph.mask(split))
    for et, csr in graph.relations.items():
        src, dst = csr.edges()
        data[et].edge_index = torch.from_numpy(np.stack([src, dst]))
    return data


def from_pyg_hetero(data: Any, *, target: str, name: str = "pyg", num_classes: int | None = None,
                    dedup: bool = False) -> HeteroGraph:
    """A validated :class:`HeteroGraph` from a PyG ``HeteroData``; labels and
    ``*_mask`` splits are read on ``target``. ``dedup=False`` (default) keeps repeated edges."""
    for attr in ("node_types", "edge_types"):
        if not hasattr(data, attr):
            raise DataError(f"from_pyg_hetero: argument of type {type(data).__name__} has no "
                            f"{attr!r}; expected a torch_geometric.data.HeteroData")
    if target not in data.node_types:
        raise DataError(f"target={target!r}: not a node type of the HeteroData; node types: "
                        f"{sorted(data.node_types)}")
    counts = {t: int(data[t].num_nodes) for t in data.node_types}
    x = {t: _numpy(data[t].x) for t in data.node_types if getattr(data[t], "x", None) is not None}
    edges: dict[EdgeType, tuple[np.ndarray, np.ndarray]] = {}
    for et in data.edge_types:
        ei = _numpy(data[et].edge_index)
        if ei.ndim != 2 or ei.shape[0] != 2:
            raise DataError(f"HeteroData[{et}].edge_index has shape {ei.shape}, expected [2, E]")
        edges[tuple(et)] = (ei[0], ei[1])  # type: ignore[index]
    store = data[target]
    y = getattr(store, "y", None)
    if y is None:
        raise DataError(f"HeteroData[{target!r}] has no y: the target type needs labels")
    splits = _pyg_splits(store, target)
    return HeteroGraph.from_edges(num_nodes=counts, edges=edges, x=x, target=target, y=_numpy(y),
                                  splits=splits, num_classes=num_classes, name=name, dedup=dedup)


def _pyg_splits(store: Any, target: str) -> dict[str, np.ndarray]:
    splits = {}
    for split, keys in _MASK_NAMES.items():
        mask = next((getattr(store, k) for k in keys if getattr(store, k, None) is not None), None)
        if mask is None:
            raise DataError(f"HeteroData[{target!r}] has no {keys[0]}: the target type needs "
                            "train_mask, val_mask and test_mask")
        splits[split] = np.flatnonzero(_numpy(mask)).astype(np.int64)
    return splits


# ---- DGL (optional) ------------------------------------------------------------------------
def to_dgl_hetero(graph: HeteroGraph) -> Any:
    """The typed graph as a DGL heterograph (``feat`` per featured type; ``label`` and
    ``train_mask``/``val_mask``/``test_mask`` on the target). Needs dgl."""
    try:
        import dgl
        import torch
    except ImportError as e:
        raise DataError(f"to_dgl_hetero needs dgl, which is not installed ({e}); install the "
                        "optional dgl extra") from None
    spec = {}
    for et, csr in graph.relations.items():
        src, dst = csr.edges()
        spec[et] = (torch.from_numpy(src), torch.from_numpy(dst))
    g = dgl.heterograph(spec, num_nodes_dict=dict(graph.num_nodes))
    for t, a in graph.x.items():
        g.nodes[t].data["feat"] = torch.from_numpy(a)
    g.nodes[graph.target].data["label"] = torch.from_numpy(graph.y)
    for split in ("train", "val", "test"):
        g.nodes[graph.target].data[f"{split}_mask"] = torch.from_numpy(graph.mask(split))
    return g


def from_dgl_hetero(g: Any, *, target: str, name: str = "dgl", feature_key: str = "feat",
                    label_key: str = "label", dedup: bool = False) -> HeteroGraph:
    """A validated :class:`HeteroGraph` from a DGL heterograph (features under
    ``feature_key``, labels and ``*_mask`` splits on ``target``)."""
    for attr in ("ntypes", "canonical_etypes", "nodes", "edges"):
        if not hasattr(g, attr):
            raise DataError(f"from_dgl_hetero: argument of type {type(g).__name__} has no {attr!r}; "
                            "expected a dgl heterograph")
    if target not in g.ntypes:
        raise DataError(f"target={target!r}: not a node type of the DGL graph; node types: {sorted(g.ntypes)}")
    counts = {t: int(g.num_nodes(t)) for t in g.ntypes}
    x = {t: _numpy(g.nodes[t].data[feature_key]) for t in g.ntypes if feature_key in g.nodes[t].data}
    edges = {}
    for et in g.canonical_etypes:
        s, d = g.edges(etype=et)
        edges[tuple(et)] = (_numpy(s), _numpy(d))
    data = g.nodes[target].data
    if label_key not in data:
        raise DataError(f"DGL graph: nodes[{target!r}].data has no {label_key!r} labels")
    splits = {}
    for split, keys in _MASK_NAMES.items():
        key = next((k for k in keys if k in data), None)
        if key is None:
            raise DataError(f"DGL graph: nodes[{target!r}].data has no {keys[0]}")
        splits[split] = np.flatnonzero(_numpy(data[key])).astype(np.int64)
    return HeteroGraph.from_edges(num_nodes=counts, edges=edges, x=x, target=target,
                                  y=_numpy(data[label_key]), splits=splits, name=name, dedup=dedup)
