"""The data layer: every dataset source becomes one canonical :class:`Graph`.

``load_dataset(cfg)`` reads what a ``DatasetConfig`` names (Planetoid, ``.npz``,
heterophilous-graphs, OGB folders, edge-list CSV, Parquet tables, the synthetic generator);
``from_pyg`` / ``from_dgl`` convert in-memory graphs; ``generate`` makes a synthetic
graph directly; ``GraphSummary.of(graph)`` gives the figures a user checks first.
Loader errors are :class:`DataError`; contract violations of a built graph are
:class:`GraphError`. Both are ``ValueError``s. ``Graph``, ``GraphError`` and
``csr_from_edges`` live in :mod:`partition.graph` (the bottom layer) and are re-exported here.

Only numpy is imported eagerly; the loaders (and torch, for Planetoid) load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gnntrain.data.errors import DataError
from partition.graph import Graph, GraphError, csr_from_edges

if TYPE_CHECKING:
    from gnntrain.data.build import BuildOptions
    from gnntrain.data.convert import from_dgl, from_pyg, to_pyg
    from gnntrain.data.load import load_dataset
    from gnntrain.data.summary import GraphSummary
    from gnntrain.data.synthetic import generate

__all__ = ["BuildOptions", "DataError", "Graph", "GraphError", "GraphSummary",
           "csr_from_edges", "from_dgl", "from_pyg", "generate", "load_dataset", "to_pyg"]

_LAZY = {
    "BuildOptions": "gnntrain.data.build",
    "from_dgl": "gnntrain.data.convert",
    "from_pyg": "gnntrain.data.convert",
    "to_pyg": "gnntrain.data.convert",
    "load_dataset": "gnntrain.data.load",
    "GraphSummary": "gnntrain.data.summary",
    "generate": "gnntrain.data.synthetic",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'gnntrain.data' has no attribute {name!r}")
