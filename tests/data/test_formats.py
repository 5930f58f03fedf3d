"""Planetoid, .npz, heterophilous and OGB sources: each loads to the arrays it stores."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from gnntrain.data import GraphSummary, csr_from_edges, load_dataset
from tests.data.conftest import OgbFixture, dataset


def _same_structure(g_indptr: np.ndarray, g_indices: np.ndarray, src: np.ndarray,
                    dst: np.ndarray, n: int, **kw: object) -> None:
    indptr, indices = csr_from_edges(src, dst, n, **kw)  # type: ignore[arg-type]
    np.testing.assert_array_equal(g_indptr, indptr)
    np.testing.assert_array_equal(g_indices, indices)


# --- Planetoid -------------------------------------------------------------------------

def test_planetoid_matches_pyg_dataset_class(planetoid_copy: Path) -> None:
    from torch_geometric.datasets import Planetoid

    ref = Planetoid(root=str(planetoid_copy), name="Cora")[0]
    assert (planetoid_copy / "Cora" / "processed").is_dir()  # why tests use a copy
    g = load_dataset(dataset(source="planetoid", path=str(planetoid_copy),
                             planetoid_name="Cora"))
    ei = ref.edge_index.numpy()
    _same_structure(g.indptr, g.indices, ei[0], ei[1], ref.num_nodes, undirected=True)
    np.testing.assert_array_equal(g.x, ref.x.numpy())
    np.testing.assert_array_equal(g.y, ref.y.numpy())
    for s in ("train", "val", "test"):
        np.testing.assert_array_equal(g.mask(s), getattr(ref, f"{s}_mask").numpy())


@pytest.mark.parametrize("name,nodes,edges,feats,classes,train", [
    ("Cora", 2708, 10556, 1433, 7, 140), ("CiteSeer", 3327, 9104, 3703, 6, 120)])
def test_planetoid_from_read_only_store(data_root: Path, name: str, nodes: int, edges: int,
                                        feats: int, classes: int, train: int) -> None:
    folder = data_root / "planetoid" / name
    before = sorted(p.name for p in folder.iterdir())
    g = load_dataset(dataset(source="planetoid", path="planetoid", planetoid_name=name))
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (nodes, edges, feats, classes)
    assert (g.train_idx.size, g.val_idx.size, g.test_idx.size) == (train, 500, 1000)
    assert sorted(p.name for p in folder.iterdir()) == before  # nothing written to the store


def test_planetoid_path_may_be_the_dataset_folder(planetoid_copy: Path) -> None:
    a = load_dataset(dataset(source="planetoid", path=str(planetoid_copy / "CiteSeer")))
    b = load_dataset(dataset(source="planetoid", path=str(planetoid_copy),
                             planetoid_name="CiteSeer"))
    assert a.content_hash() == b.content_hash()


# --- npz ---------------------------------------------------------------------------------

def test_npz_documented_keys(npz_writer: Callable[..., Path]) -> None:
    rng = np.random.default_rng(0)
    n = 40
    ei = rng.integers(0, n, (2, 120))
    x = rng.normal(size=(n, 3)).astype(np.float32)
    y = rng.integers(0, 4, n)
    masks = np.zeros((3, n), bool)
    masks[:, :10] = True
    val = np.zeros((3, n), bool)
    val[:, 10:20] = True
    masks[2, :10], masks[2, 30:] = False, True  # split 2 differs
    path = npz_writer(edge_index=ei, x=x, y=y, train_mask=masks, val_mask=val,
                      test_mask=np.zeros((3, n), bool), num_classes=np.int64(6))
    g = load_dataset(dataset(source="npz", path=str(path), split=2, undirected=False))
    _same_structure(g.indptr, g.indices, ei[0], ei[1], n)
    np.testing.assert_array_equal(g.x, x)
    np.testing.assert_array_equal(g.y, y)
    assert g.num_classes == 6
    np.testing.assert_array_equal(g.train_idx, np.arange(30, n))
    np.testing.assert_array_equal(g.val_idx, np.arange(10, 20))


def test_npz_edges_rows_and_index_splits(npz_writer: Callable[..., Path]) -> None:
    e = np.array([[0, 1], [1, 2], [2, 3], [3, 0]])
    path = npz_writer(edges=e, node_labels=np.array([0, 1, 0, 1]), train_idx=np.array([2, 0]),
                      test_idx=np.array([3]))
    g = load_dataset(dataset(source="npz", path=str(path), undirected=True))
    _same_structure(g.indptr, g.indices, e[:, 0], e[:, 1], 4, undirected=True)
    np.testing.assert_array_equal(g.train_idx, [0, 2])
    assert g.val_idx.size == 0 and g.num_features == 5  # degree fallback features


# --- heterophilous -----------------------------------------------------------------------

def test_tolokers_adds_reverse_edges_and_picks_a_split(data_root: Path) -> None:
    path = data_root / "heterophilous" / "tolokers.npz"
    with np.load(path) as z:
        edges, train_masks, test_masks = z["edges"], z["train_masks"], z["test_masks"]
    g = load_dataset(dataset(source="heterophilous", path="heterophilous/tolokers.npz", split=7))
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (11758, 1_038_000, 10, 2)
    _same_structure(g.indptr, g.indices, edges[:, 0], edges[:, 1], g.num_nodes, undirected=True)
    assert GraphSummary.of(g).symmetric
    np.testing.assert_array_equal(g.mask("train"), train_masks[7])
    np.testing.assert_array_equal(g.mask("test"), test_masks[7])


def test_small_heterophilous_files_load(data_root: Path) -> None:
    for name, nodes, und_edges in (("cornell", 183, 277), ("texas", 183, 279),
                                   ("chameleon_filtered", 890, 8854)):
        g = load_dataset(dataset(source="heterophilous", path=f"heterophilous/{name}.npz",
                                 self_loops="remove"))
        assert g.num_nodes == nodes
        assert g.num_edges == 2 * und_edges, name


# --- OGB ---------------------------------------------------------------------------------

@pytest.mark.parametrize("gz", [True, False])
def test_ogb_layout(tmp_path: Path, gz: bool) -> None:
    fx = OgbFixture(tmp_path / "ogbn_fake")
    fx.write(gz=gz)
    g = load_dataset(dataset(source="ogb", path=str(fx.root), split="time"))
    _same_structure(g.indptr, g.indices, fx.edges[:, 0], fx.edges[:, 1], fx.n, undirected=True)
    np.testing.assert_array_equal(g.x, fx.x)
    labeled = ~np.isnan(fx.y)
    np.testing.assert_array_equal(g.y[labeled], fx.y[labeled].astype(np.int64))
    np.testing.assert_array_equal(g.train_idx, fx.splits["train"])
    np.testing.assert_array_equal(g.val_idx, fx.splits["valid"])
    np.testing.assert_array_equal(g.test_idx, fx.splits["test"])
    assert g.num_classes == int(np.nanmax(fx.y)) + 1


def test_ogb_default_split_is_the_only_folder(ogb_dir: OgbFixture) -> None:
    g = load_dataset(dataset(source="ogb", path=str(ogb_dir.root)))
    np.testing.assert_array_equal(g.train_idx, ogb_dir.splits["train"])


def test_ogb_random_split_skips_unlabeled(ogb_dir: OgbFixture) -> None:
    g = load_dataset(dataset(source="ogb", path=str(ogb_dir.root), split="random",
                             train_frac=0.5, val_frac=0.25))
    in_split = np.concatenate([g.train_idx, g.val_idx, g.test_idx])
    assert np.array_equal(np.sort(in_split), np.flatnonzero(~np.isnan(ogb_dir.y)))


def test_ogb_npz_form(tmp_path: Path) -> None:
    fx = OgbFixture(tmp_path / "papers")
    raw = fx.root / "raw"
    raw.mkdir(parents=True)
    np.savez(raw / "data.npz", edge_index=fx.edges.T, node_feat=fx.x,
             num_nodes_list=np.array([fx.n]))
    np.savez(raw / "node-label.npz", node_label=fx.y[:, None])
    g = load_dataset(dataset(source="ogb", path=str(fx.root)))  # no split folder: random
    _same_structure(g.indptr, g.indices, fx.edges[:, 0], fx.edges[:, 1], fx.n, undirected=True)
    np.testing.assert_array_equal(g.x, fx.x)
    assert not np.isin(np.flatnonzero(np.isnan(fx.y)), g.train_idx).any()
