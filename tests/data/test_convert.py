"""PyG Data and DGL graphs in, PyG Data out."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from gnntrain.data import BuildOptions, Graph, from_dgl, from_pyg, to_pyg
from tests.conftest import make_graph


def _assert_same(a: Graph, b: Graph) -> None:
    for field in ("indptr", "indices", "x", "y", "train_idx", "val_idx", "test_idx"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    assert a.num_classes == b.num_classes


def test_pyg_round_trip_is_exact(tiny_graph: Graph) -> None:
    data = to_pyg(tiny_graph)
    assert data.num_nodes == tiny_graph.num_nodes
    back = from_pyg(data, name="tiny")
    _assert_same(back, tiny_graph)
    assert back.content_hash() == tiny_graph.content_hash()


def test_pyg_faithful_by_default_cleaned_on_request() -> None:
    from torch_geometric.data import Data

    ei = torch.tensor([[0, 0, 1, 2], [1, 1, 2, 2]])
    data = Data(edge_index=ei, x=torch.ones(3, 2), y=torch.tensor([0, 1, 0]))
    raw = from_pyg(data)
    s, d = raw.edge_index()
    assert sorted(zip(s.tolist(), d.tolist(), strict=True)) == [(0, 1), (0, 1), (1, 2), (2, 2)]
    clean = from_pyg(data, options=BuildOptions(undirected=True, self_loops="remove"))
    s, d = clean.edge_index()
    assert sorted(zip(s.tolist(), d.tolist(), strict=True)) == [(0, 1), (1, 0), (1, 2), (2, 1)]
    assert clean.train_idx.size == 2  # no masks: random 60/20/20 split of 3 nodes


def test_pyg_two_dimensional_masks_pick_split() -> None:
    from torch_geometric.data import Data

    n = 10
    train = torch.zeros(n, 3, dtype=torch.bool)
    train[:4, 0] = True
    train[4:8, 2] = True
    data = Data(edge_index=torch.tensor([[0], [1]]), x=torch.ones(n, 1),
                y=torch.zeros(n, dtype=torch.long), train_mask=train,
                val_mask=torch.zeros(n, 3, dtype=torch.bool),
                test_mask=torch.zeros(n, 3, dtype=torch.bool))
    g = from_pyg(data, options=BuildOptions(split=2))
    np.testing.assert_array_equal(g.train_idx, np.arange(4, 8))


class _FakeDGLGraph:
    """The three members of dgl.DGLGraph that from_dgl reads."""

    def __init__(self, g: Graph) -> None:
        src, dst = g.edge_index()
        self._edges = (torch.from_numpy(src), torch.from_numpy(dst))
        self._n = g.num_nodes
        self.ndata: dict[str, Any] = {
            "feat": torch.from_numpy(g.x), "label": torch.from_numpy(g.y),
            **{f"{s}_mask": torch.from_numpy(g.mask(s)) for s in ("train", "val", "test")}}

    def edges(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self._edges

    def num_nodes(self) -> int:
        return self._n


def test_dgl_interface_round_trip(tiny_graph: Graph) -> None:
    _assert_same(from_dgl(_FakeDGLGraph(tiny_graph)), tiny_graph)


def test_real_dgl_graph() -> None:
    dgl = pytest.importorskip("dgl")
    ref = make_graph(num_nodes=50)
    src, dst = ref.edge_index()
    g = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=ref.num_nodes)
    g.ndata["feat"] = torch.from_numpy(ref.x)
    g.ndata["label"] = torch.from_numpy(ref.y)
    for s in ("train", "val", "test"):
        g.ndata[f"{s}_mask"] = torch.from_numpy(ref.mask(s))
    _assert_same(from_dgl(g), ref)


def test_dgl_rejects_other_objects() -> None:
    from gnntrain.data import DataError

    with pytest.raises(DataError, match=r"argument of type list has no 'edges'"):
        from_dgl([1, 2])
