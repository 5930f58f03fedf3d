"""``load_dataset``: one :class:`DatasetConfig` in, one validated :class:`Graph` out.

Dispatch on ``cfg.source``; each reader lives in the module named for its format
(``planetoid``, ``npz``, ``ogb``, ``edgelist``, ``synthetic``) and returns a
:class:`~gnntrain.data.build.RawGraph`, which :func:`~gnntrain.data.build.build_graph`
cleans (``undirected``, ``dedup``, ``self_loops``), splits and validates. Relative
paths resolve against :func:`gnntrain.config.data_root` (``$GNNTRAIN_DATA``, else
``../shared/datasets`` beside the checkout); absolute paths are used as they are.
"""

from __future__ import annotations

from pathlib import Path

from gnntrain.config import DatasetConfig, data_root
from gnntrain.data.build import BuildOptions, RawGraph, build_graph
from gnntrain.data.errors import DataError
from gnntrain.data.graph import Graph, normalize_rows

__all__ = ["load_dataset", "resolve_path"]


def resolve_path(path: str | Path, root: Path | None = None) -> Path:
    """``path`` itself if absolute (``~`` expanded), else ``root`` (default: data root) / path."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else (root or data_root()) / p


def load_dataset(cfg: DatasetConfig) -> Graph:
    """Load the graph ``cfg`` describes; raise :class:`DataError` naming what is wrong."""
    if cfg.source == "synthetic":
        from gnntrain.data.synthetic import generate

        return generate(cfg.synthetic, name=cfg.name)
    try:
        raw = _read(cfg)
    except DataError as e:
        raise DataError(f"dataset {cfg.name!r} (source={cfg.source}): {e}") from None
    try:
        graph = build_graph(raw, BuildOptions.from_config(cfg))
    except DataError as e:
        raise DataError(f"dataset {cfg.name!r}: {e}") from None
    return normalize_rows(graph) if cfg.normalize_features == "row" else graph


def _read(cfg: DatasetConfig) -> RawGraph:
    if cfg.source == "csv":
        from gnntrain.data.edgelist import load_edgelist

        edges = cfg.edges or cfg.path
        assert edges is not None  # DatasetConfig guarantees path or edges
        return load_edgelist(
            edges=resolve_path(edges), graph_name=cfg.name,
            labels=resolve_path(cfg.labels) if cfg.labels else None,
            features=resolve_path(cfg.features) if cfg.features else None,
            delimiter=cfg.delimiter, id_column=cfg.id_column, label_column=cfg.label_column,
            num_nodes=cfg.num_nodes, relabel=cfg.relabel)
    assert cfg.path is not None  # DatasetConfig guarantees a path for these sources
    path = resolve_path(cfg.path)
    if cfg.source == "planetoid":
        from gnntrain.data.planetoid import load_planetoid

        return load_planetoid(path, cfg.planetoid_name, graph_name=cfg.name, split=cfg.split)
    if cfg.source in ("npz", "heterophilous"):
        from gnntrain.data.npz import load_npz

        return load_npz(path, graph_name=cfg.name, split=cfg.split,
                        heterophilous=cfg.source == "heterophilous")
    if cfg.source == "ogb":
        from gnntrain.data.ogb import load_ogb

        return load_ogb(path, graph_name=cfg.name, split=cfg.split)
    raise AssertionError(f"unhandled source {cfg.source!r}")  # the Literal type lists them all
