"""In-memory graphs from other libraries: PyG ``Data`` and DGL graphs, both ways for PyG.

Neither library is imported at module level: :func:`from_pyg` and :func:`from_dgl`
read their argument through its public attributes (``edge_index``, ``x``, ``y``,
``*_mask`` for PyG; ``edges()``, ``num_nodes()``, ``ndata`` for DGL), so importing
``gnntrain.data`` never pulls in torch or dgl. The default options convert
faithfully (no symmetrising, no dedup, self-loops kept); pass
``options=BuildOptions(undirected=True, ...)`` to clean the graph on the way in, as
``load_dataset`` does from a ``DatasetConfig``. Splits come from ``*_mask``
attributes (``[N]``, or ``[N, S]`` with ``options.split`` picking one); without them a
random split by ``options.train_frac`` / ``val_frac`` / ``split_seed``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gnntrain.data.build import BuildOptions, RawGraph, build_graph, masks_to_splits
from gnntrain.data.errors import DataError
from partition.graph import Graph

__all__ = ["from_dgl", "from_pyg", "raw_from_pyg", "to_pyg"]

_MASK_NAMES = {"train": ("train_mask",), "val": ("val_mask", "valid_mask"),
               "test": ("test_mask",)}


def _numpy(value: Any) -> np.ndarray:
    """A torch tensor or array-like as a numpy array (no copy for CPU tensors)."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def raw_from_pyg(data: Any, *, name: str, split: int | str = 0, where: str = "pyg Data") -> RawGraph:
    """Read a PyG ``Data`` into a :class:`RawGraph` (splits from ``*_mask`` when present)."""
    edge_index = getattr(data, "edge_index", None)
    if edge_index is None:
        raise DataError(f"{where}: has no edge_index; expected a torch_geometric.data.Data "
                        "with edge_index [2, E]")
    ei = _numpy(edge_index)
    if ei.ndim != 2 or ei.shape[0] != 2:
        raise DataError(f"{where}: edge_index has shape {ei.shape}, expected [2, E]")
    n = getattr(data, "num_nodes", None)
    if n is None:
        raise DataError(f"{where}: num_nodes is unknown (no x, y or num_nodes attribute)")
    x = getattr(data, "x", None)
    y = getattr(data, "y", None)
    masks = {}
    for split_name, keys in _MASK_NAMES.items():
        for key in keys:
            if getattr(data, key, None) is not None:
                masks[split_name] = _numpy(getattr(data, key))
                break
    splits = masks_to_splits(masks, split, int(n), where)
    return RawGraph(name=name, num_nodes=int(n), src=ei[0], dst=ei[1],
                    x=None if x is None else _numpy(x),
                    y=None if y is None else _numpy(y), splits=splits,
                    where={"source": where})


def from_pyg(data: Any, *, name: str = "pyg", options: BuildOptions | None = None) -> Graph:
    """A validated :class:`Graph` from a PyG ``Data`` (edges ``edge_index[0] -> edge_index[1]``)."""
    opts = options or BuildOptions(dedup=False)
    return build_graph(raw_from_pyg(data, name=name, split=opts.split), opts)


def from_dgl(g: Any, *, name: str = "dgl", options: BuildOptions | None = None,
             feature_key: str = "feat", label_key: str = "label") -> Graph:
    """A validated :class:`Graph` from a homogeneous DGL graph.

    Features and labels come from ``g.ndata[feature_key]`` / ``g.ndata[label_key]``
    and splits from ``g.ndata['train_mask' | 'val_mask' | 'test_mask']`` (DGL's
    built-in dataset names); a missing feature key falls back to structural features.
    """
    for attr in ("edges", "num_nodes", "ndata"):
        if not hasattr(g, attr):
            raise DataError(f"from_dgl: argument of type {type(g).__name__} has no {attr!r}; "
                            "expected a homogeneous dgl.DGLGraph")
    opts = options or BuildOptions(dedup=False)
    src, dst = g.edges()
    n = int(g.num_nodes())
    ndata = g.ndata
    masks = {s: _numpy(ndata[k]) for s, keys in _MASK_NAMES.items() for k in keys if k in ndata}
    raw = RawGraph(name=name, num_nodes=n, src=_numpy(src), dst=_numpy(dst),
                   x=_numpy(ndata[feature_key]) if feature_key in ndata else None,
                   y=_numpy(ndata[label_key]) if label_key in ndata else None,
                   splits=masks_to_splits(masks, opts.split, n, "dgl graph"),
                   where={"source": "dgl graph", "x": f"ndata[{feature_key!r}]",
                          "y": f"ndata[{label_key!r}]"})
    return build_graph(raw, opts)


def to_pyg(graph: Graph) -> Any:
    """The whole graph as a PyG ``Data`` (``edge_index``, ``x``, ``y``, boolean masks)."""
    import torch
    from torch_geometric.data import Data

    return Data(edge_index=torch.from_numpy(graph.edge_index()),
                x=torch.from_numpy(graph.x), y=torch.from_numpy(graph.y),
                train_mask=torch.from_numpy(graph.mask("train")),
                val_mask=torch.from_numpy(graph.mask("val")),
                test_mask=torch.from_numpy(graph.mask("test")),
                num_nodes=graph.num_nodes)
