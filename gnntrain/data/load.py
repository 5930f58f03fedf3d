"""``load_dataset``: one dataset config in, one validated :class:`Graph` out.

Dispatch on ``cfg.source``; each reader lives in the module named for its format
(``planetoid``, ``npz``, ``ogb``, ``edgelist``, ``parquet``, ``synthetic``) and returns a
:class:`~gnntrain.data.build.RawGraph`, which :func:`~gnntrain.data.build.build_graph`
cleans (``undirected``, ``dedup``, ``self_loops``), splits and validates. Relative
paths resolve against :func:`gnntrain.config.data_root` (``$GNNTRAIN_DATA``, else
``~/.cache/gnntrain/datasets``) and must exist there; absolute paths are used as they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gnntrain.config import (
    ChunksDataset,
    CsvDataset,
    DatasetConfig,
    HeteroDatasetBase,
    HeterophilousDataset,
    LightGcnDataset,
    LoadedDataset,
    NpzDataset,
    OgbDataset,
    OgblDataset,
    ParquetDataset,
    PlanetoidDataset,
)
from gnntrain.data.build import BuildOptions, RawGraph, build_graph
from gnntrain.data.errors import DataError
from gnntrain.data.features import normalize_rows
from gnntrain.data.paths import resolve_path
from partition.graph import Graph
from partition.storage import is_remote, local_path

if TYPE_CHECKING:
    from partition.chunked import ChunkedGraph

__all__ = ["load_dataset", "open_chunk_dataset", "resolve_path"]


def open_chunk_dataset(cfg: ChunksDataset) -> ChunkedGraph:
    """The chunked graph of ``source: chunks``: Parquet tables (``edges`` and ``nodes``:
    :func:`gnntrain.data.parquet_chunks.open_parquet_chunks`), or a chunk directory, a URI opened
    with ``dataset.storage_options`` or a local path resolved against the data root."""
    from partition.chunked import open_chunks

    if cfg.path is None:
        from gnntrain.data.parquet_chunks import open_parquet_chunks

        return open_parquet_chunks(cfg)
    if is_remote(cfg.path):
        return open_chunks(cfg.path, cfg.storage_options)
    return open_chunks(resolve_path(local_path(cfg.path)))


def load_dataset(cfg: DatasetConfig) -> Graph:
    """Load the graph ``cfg`` describes; raise :class:`DataError` naming what is wrong."""
    if isinstance(cfg, HeteroDatasetBase):
        from gnntrain.data.hetero import load_hetero, to_training_graph

        return to_training_graph(load_hetero(cfg))
    if cfg.source == "synthetic":
        from gnntrain.data.synthetic import generate

        return generate(cfg.synthetic, name=cfg.name)
    if isinstance(cfg, OgblDataset | LightGcnDataset):  # link sources: the training edges
        from gnntrain.data.link import load_split, message_passing_graph

        return message_passing_graph(load_split(cfg), cfg.name, feature_fallback=cfg.feature_fallback,
                                     fallback_dim=cfg.fallback_dim)
    if isinstance(cfg, ChunksDataset):  # the whole graph in this process: for graphs that fit
        return open_chunk_dataset(cfg).to_graph()
    try:
        raw = _read(cfg)
    except DataError as e:
        raise DataError(f"dataset {cfg.name!r} (source={cfg.source}): {e}") from None
    try:
        graph = build_graph(raw, BuildOptions.from_config(cfg))
    except DataError as e:
        raise DataError(f"dataset {cfg.name!r}: {e}") from None
    return normalize_rows(graph) if cfg.normalize_features == "row" else graph


def _read(cfg: LoadedDataset) -> RawGraph:
    if isinstance(cfg, CsvDataset):
        from gnntrain.data.edgelist import load_edgelist

        edges = cfg.edges or cfg.path
        assert edges is not None  # CsvDataset guarantees path or edges
        return load_edgelist(
            edges=resolve_path(edges, field="dataset.edges" if cfg.edges else "dataset.path"),
            graph_name=cfg.name,
            labels=resolve_path(cfg.labels, field="dataset.labels") if cfg.labels else None,
            features=resolve_path(cfg.features, field="dataset.features") if cfg.features else None,
            delimiter=cfg.delimiter, id_column=cfg.id_column, label_column=cfg.label_column,
            num_nodes=cfg.num_nodes, relabel=cfg.relabel, header=cfg.header)
    if isinstance(cfg, ParquetDataset):  # local paths or URIs: the reader resolves them
        from gnntrain.data.parquet import load_parquet

        return load_parquet(cfg)
    assert isinstance(cfg, PlanetoidDataset | NpzDataset | HeterophilousDataset | OgbDataset)
    path = resolve_path(cfg.path)
    if isinstance(cfg, PlanetoidDataset):
        from gnntrain.data.planetoid import load_planetoid

        return load_planetoid(path, cfg.planetoid_name, graph_name=cfg.name, split=cfg.split)
    if isinstance(cfg, NpzDataset | HeterophilousDataset):
        from gnntrain.data.npz import load_npz

        return load_npz(path, graph_name=cfg.name, split=cfg.split,
                        heterophilous=isinstance(cfg, HeterophilousDataset))
    if isinstance(cfg, OgbDataset):
        from gnntrain.data.ogb import load_ogb

        return load_ogb(path, graph_name=cfg.name, split=cfg.split)
    raise AssertionError(f"unhandled source {cfg.source!r}")  # DatasetConfig lists them all
